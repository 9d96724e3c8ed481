#include "vmm/network/nftables.h"

#include <nftables/libnftables.h>

namespace dsec::network {

void Nftables::ContextFree::operator()(nft_ctx* context) const {
  nft_ctx_free(context);
}

Result<Nftables> Nftables::open() {
  nft_ctx* context = nft_ctx_new(NFT_CTX_DEFAULT);
  if (context == nullptr) {
    return fail("nftables: nft_ctx_new failed");
  }
  Nftables nftables(context);
  // Output and errors into buffers, never onto the VMM's or the daemon's stdout.
  if (nft_ctx_buffer_output(context) != 0 || nft_ctx_buffer_error(context) != 0) {
    return fail("nftables: buffering its output failed");
  }
  return nftables;
}

Result<std::string> Nftables::run(const std::string& commands) {
  if (nft_run_cmd_from_buffer(context_.get(), commands.c_str()) != 0) {
    std::string why = nft_ctx_get_error_buffer(context_.get());
    while (!why.empty() && why.back() == '\n') {
      why.pop_back();
    }
    return fail("nftables: " + why, "needs CAP_NET_ADMIN and nf_tables (modprobe nf_tables)");
  }
  return std::string(nft_ctx_get_output_buffer(context_.get()));
}

Status Nftables::apply(const std::string& commands) {
  DSEC_TRY(run(commands));
  return ok();
}

}  // namespace dsec::network
