#include "vmm/pool/guest_resolver.h"

#include "vmm/network/egress_policy.h"
#include "vmm/pool/sandbox_files.h"

namespace dsec::pool {

std::string resolv_conf(uint32_t resolver) {
  return "nameserver " + network::address_string(resolver) + "\n";
}

Result<std::unique_ptr<BackgroundTask>> write_guest_resolver(
    io::EventLoop& loop, const std::string& vsock, uint32_t resolver,
    std::move_only_function<void(Status)> done) {
  auto written = std::make_shared<Status>(fail("the resolver was not written"));
  return BackgroundTask::start(
      loop,
      [written, vsock, resolver] {
        *written =
            write_guest_file(vsock, kResolvConf, {.bytes = resolv_conf(resolver), .mode = 0644});
      },
      [written, done = std::move(done)]() mutable { done(*written); });
}

}  // namespace dsec::pool
