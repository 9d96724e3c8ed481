// libFuzzer target: hostile bytes as what a client sends the pool's Host-routed proxy before
// it picks a guest (vmm/http/request_head.h, vmm/pool/host_route.h), in pieces of the sizes
// the input chooses, as reads from a socket return them. The head parser must finish, refuse
// or ask for more without crashing, within its limits; a route it accepts must name a port
// 1..65535 and an id of the pool's characters.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tests/fuzz/fuzz_input.h"
#include "vmm/http/request_head.h"
#include "vmm/pool/host_route.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsec::fuzz::FuzzInput input({data, size});
  dsec::http::RequestHead head({.max_bytes = 4096, .max_headers = 16});
  size_t fed = 0;
  bool complete = false;
  while (!input.empty()) {
    const size_t piece = 1 + input.take<uint8_t>() % 64;
    const auto bytes = input.take_bytes(piece);
    fed += bytes.size();
    const auto done =
        head.feed(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (!done) return 0;
    if (*done) {
      complete = true;
      break;
    }
    // A head over its limit is refused, never buffered on.
    if (fed > 4096 + 64) std::abort();
  }
  if (!complete) return 0;
  const auto route = dsec::pool::parse_host_route(head.header("host"), "sbx.test");
  if (route) {
    if (route->guest_port == 0 || route->sandbox_id.empty() || route->sandbox_id.size() > 64) {
      std::abort();
    }
    for (const char c : route->sandbox_id) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) std::abort();
    }
  }
  return 0;
}
