// Where the pool's Host-routed proxy sends a connection (docs/network.md, "The Host-routed
// proxy"): a request's Host header `<port>-<sandbox id>.<domain>`, E2B's convention, names
// a sandbox and a port of its guest. The header is the client's, and hostile: anything but
// that exact shape under the proxy's own domain is refused with a reason.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec::pool {

struct HostRoute {
  uint16_t guest_port = 0;
  std::string sandbox_id;
  bool operator==(const HostRoute&) const = default;
};

// `host` as a Host header gives it (a ":port" suffix is ignored, names compare in any case)
// under `domain` (e.g. "sandbox.example.com"). The port is 1..65535 without leading zeros;
// the id is what the pool names sandboxes with: letters, digits and '-', 1 to 64 of them.
Result<HostRoute> parse_host_route(std::string_view host, std::string_view domain);

}  // namespace dsec::pool
