// libnftables (nftables' own library, nft(8)'s language): rule sets given as nft text, each
// command buffer one transaction, all or nothing. An Nftables works in the network namespace
// of the thread that made it: make and use it inside in_namespace().
#pragma once

#include <memory>
#include <string>

#include "vmm/common/error.h"

struct nft_ctx;

namespace dsec::network {

class Nftables {
 public:
  static Result<Nftables> open();

  // Runs `commands` (nft text) as one transaction; returns what nft printed (a `list`).
  Result<std::string> run(const std::string& commands);
  // The same, for commands that print nothing worth keeping.
  Status apply(const std::string& commands);

 private:
  struct ContextFree {
    void operator()(nft_ctx* context) const;
  };
  explicit Nftables(nft_ctx* context) : context_(context) {}

  std::unique_ptr<nft_ctx, ContextFree> context_;
};

}  // namespace dsec::network
