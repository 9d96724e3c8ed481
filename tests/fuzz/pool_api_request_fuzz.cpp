// libFuzzer target: a hostile client's bytes through the pool daemon's whole request path:
// the HTTP connection (http_parser, limits, pipelining), the check of its caller (a Unix
// caller of the operator's uid, of an allowed uid or of another, or a TCP one whose Host
// and Authorization headers come from the input), the pool's router, its request bodies'
// parsers, and a real Pool on a real event loop and state directory, with one image
// registered. Its launcher starts nothing (an acquire is answered 503, as when a
// clone cannot start), so no input makes a process. Nothing may crash, every answer must
// be well formed with a status the API documents (docs/pool.md), and the output may not
// grow past its limit by more than one answer.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string_view>

#include "tests/support/stand_in_image.h"
#include "vmm/http/connection.h"
#include "vmm/io/event_loop.h"
#include "vmm/pool/pool.h"
#include "vmm/pool/pool_api.h"
#include "vmm/pool/tenant_access.h"

namespace {

class RefusingLauncher final : public dsec::pool::VmmLauncher {
 public:
  dsec::Result<dsec::pool::LaunchedVmm> launch(const dsec::pool::CloneLaunch& /*clone*/) override {
    return dsec::fail("the fuzz target starts no VMM");
  }
};

// A directory for one input, removed with everything in it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dsec-pool-fuzz-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::abort();
    }
    path = pattern;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsec;
  if (size == 0) {
    return 0;
  }
  ScratchDir dir;
  if (test::write_store_image(dir.path / "images", "base", 6).empty()) {
    std::abort();
  }
  auto loop = io::EventLoop::create(64);
  auto state = pool::StateDir::open((dir.path / "state").string());
  auto store = pool::ImageStore::open((dir.path / "images").string(), {});
  if (!loop || !state || !store) {
    std::abort();
  }
  {
    pool::Pool pool(*loop, std::move(*state), std::move(*store),
                    std::make_unique<RefusingLauncher>(), {});
    if (!pool.register_image({.name = "base", .ready = 0, .max = 2, .ttl_s = 0})) {
      std::abort();
    }
    const pool::TenantAccess access(pool::AccessPolicy{
        .daemon_uid = 0,
        .allow_uids = {1000},
        .allow_gids = {},
        .tokens = {{.tenant = {.name = "worker",
                               .is_operator = false,
                               .quota = {.max_sandboxes = 1, .max_memory_bytes = {}}},
                    .token = "fuzz-token-0123456789"}},
        .hosts = pool::default_hosts("127.0.0.1", {"pool"})});
    const http::Router router = pool::pool_router(pool, access);
    // Who connected: the first byte picks one of four callers for the input.
    http::Caller caller;
    switch (data[0] % 4) {
      case 0:
        caller = {.transport = http::Caller::Transport::kUnix, .uid = 0, .gid = 0, .pid = 1};
        break;
      case 1:
        caller = {.transport = http::Caller::Transport::kUnix, .uid = 1000, .gid = 1000, .pid = 2};
        break;
      case 2:
        caller = {.transport = http::Caller::Transport::kUnix, .uid = 1001, .gid = 1001, .pid = 3};
        break;
      default:
        caller = {.transport = http::Caller::Transport::kTcp, .peer = "192.0.2.7:40000"};
        break;
    }
    static const std::set<int> kDocumented{200, 201, 204, 400, 401, 403, 404,
                                           405, 409, 410, 429, 502, 503};
    http::HttpLimits limits;
    limits.max_pending_bytes = 4096;
    http::HttpConnection connection(limits);
    const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    const size_t step = 1 + data[0] % 97;
    for (size_t at = 0; at < bytes.size() || connection.wants_input(); at += step) {
      if (at < bytes.size()) {
        connection.receive(bytes.substr(at, step));
      } else {
        connection.receive_eof();
      }
      while (auto request = connection.next_request()) {
        request->caller = caller;
        const auto response = router.route(*request);
        if (!kDocumented.contains(response.status)) {
          std::abort();
        }
        connection.respond(response);
      }
      if (connection.output().size() > limits.max_pending_bytes + 4096) {
        std::abort();
      }
      const auto out = connection.output();
      if (!out.empty() && out.substr(0, 9) != "HTTP/1.1 ") {
        std::abort();
      }
      connection.consume_output(out.size());
      if (connection.finished()) {
        break;
      }
    }
  }
  return 0;
}
