// `dsec-vmm pool`: the node-local sandbox pool daemon (docs/pool.md). One thread serves
// the API socket and supervises every VMM on the same event loop; the main thread waits
// for SIGTERM or SIGINT, then stops the API, every VMM, and removes what the daemon made.
#include "vmm/pool/pool.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/api/api_server.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/pool/pool_api.h"
#include "vmm/pool/sandbox_files.h"

namespace dsec::cli {
namespace {

struct PoolOptions {
  std::string state_dir;
  std::string socket;
  std::string vmm;
  std::optional<uint16_t> tcp_port;
  double max_memory_ratio = 0.9;
  double memory_overcommit = 1.0;
  double ready_timeout_s = 60;
  double health_interval_s = 10;
  double health_timeout_s = 15;
  uint32_t health_failures = 2;
  std::vector<std::string> restore_args;
};

// Clients connected at once, and so execs running at once.
constexpr size_t kMaxClients = 256;

Result<std::string> own_binary() {
  std::array<char, PATH_MAX> path{};
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) {
    return fail_errno("readlink /proc/self/exe", errno, "give --vmm");
  }
  return std::string(path.data(), static_cast<size_t>(n));
}

// One daemon per state directory: a lock held for the daemon's life.
Result<UniqueFd> lock_state_dir(const std::string& dir) {
  const std::string path = dir + "/lock";
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) {
    return fail_errno("cannot open " + path, errno);
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    return fail(path + ": another pool daemon uses this state directory",
                "stop it, or give another --state-dir");
  }
  return fd;
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int run_pool(const PoolOptions& options) {
  // Before any thread: SIGTERM and SIGINT are read by sigwait below, never delivered.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const auto fail_with = [](const Error& e) {
    (void)std::fprintf(stderr, "dsec-vmm pool: %s\n", e.message().c_str());
    return 1;
  };
  auto state = pool::StateDir::open(options.state_dir);
  if (!state) {
    return fail_with(state.error());
  }
  auto lock = lock_state_dir(state->path());
  if (!lock) {
    return fail_with(lock.error());
  }
  auto vmm = options.vmm.empty() ? own_binary() : Result<std::string>(options.vmm);
  if (!vmm) {
    return fail_with(vmm.error());
  }
  // Bodies carry the files PUT into sandboxes.
  auto server = api::ApiServer::bind(options.socket,
                                     api::HttpLimits{.max_body_bytes = pool::kMaxPoolFileBytes});
  if (!server) {
    return fail_with(server.error());
  }
  if (options.tcp_port) {
    auto port = (*server)->listen_on_loopback(*options.tcp_port);
    if (!port) {
      return fail_with(port.error());
    }
    // On stderr, so that a caller that asked for port 0 learns which one it got.
    spdlog::info("pool: serving on 127.0.0.1:{} too", *port);
  }
  const std::string lock_path = state->path() + "/lock";
  pool::Pool pool((*server)->loop(), std::move(*state),
                  std::make_unique<pool::RestoreLauncher>(*vmm, options.restore_args),
                  pool::PoolOptions{.max_memory_ratio = options.max_memory_ratio,
                                    .memory_overcommit = options.memory_overcommit,
                                    .ready_timeout = milliseconds(options.ready_timeout_s),
                                    .health_interval = milliseconds(options.health_interval_s),
                                    .health_timeout = milliseconds(options.health_timeout_s),
                                    .health_failures = options.health_failures});
  // Before serve(): the loop does not run yet, so its watches and timers may be set here.
  pool.recover();
  const auto router = std::make_shared<api::Router>(pool::pool_router(pool));
  // Each client holds at most one request; an exec runs on a thread of its own meanwhile.
  (*server)->set_max_connections(kMaxClients);
  if (auto serving = (*server)->serve_deferred(
          [router](const api::HttpRequest& request, api::Responder respond) {
            router->route(request, std::move(respond));
          });
      !serving) {
    return fail_with(serving.error());
  }
  spdlog::info("pool: serving on {}", options.socket);
  int signo = 0;
  sigwait(&signals, &signo);
  spdlog::info("pool: {}: stopping", strsignal(signo));
  // The API thread first: nothing touches the pool after this but this thread.
  (*server)->stop();
  pool.shutdown();
  ::unlink(lock_path.c_str());
  return 0;
}

}  // namespace

void add_pool_command(CLI::App& app, CommandAction& action) {
  auto options = std::make_shared<PoolOptions>();
  CLI::App* pool = app.add_subcommand(
      "pool",
      "Run the node's sandbox pool daemon: warm images registered over an HTTP/JSON "
      "API on a Unix socket, clones restored ahead and handed out (docs/pool.md)");
  pool->footer(
      "Each sandbox is one `dsec-vmm restore` process in a process group of its own, "
      "supervised through its pidfd on the daemon's one event loop. The daemon keeps its "
      "images and a record per sandbox in --state-dir, and a daemon started again after a "
      "crash adopts the VMMs that still run. SIGTERM or SIGINT stops every VMM and removes "
      "the socket and every file the daemon made (the state directory is left empty). "
      "No request holds the others: an exec runs on a thread of its own, and an acquire "
      "from an empty pool waits on the event loop for a clone restored for it (up to 256 "
      "clients at once). The daemon runs without a seccomp filter; "
      "its VMMs have theirs (--seccomp, on by default).");
  pool->add_option("--state-dir", options->state_dir,
                   "The daemon's directory: images.json, and each sandbox's record, vsock "
                   "socket and log under sandboxes/ (made if missing; one daemon per directory)")
      ->required();
  pool->add_option("--socket", options->socket, "The API's Unix socket (owner only)")->required();
  pool->add_option("--tcp-port", options->tcp_port,
                   "Also serve the API on 127.0.0.1:PORT (0: a free port, logged at start). "
                   "Any process of the host can connect there: use it only where every local "
                   "user may run sandboxes");
  pool->add_option("--vmm", options->vmm,
                   "The dsec-vmm binary that restores clones (default: this one)");
  pool->add_option("--max-memory-ratio", options->max_memory_ratio,
                   "Refuse (429) a clone that would take the host's used memory past this share "
                   "of its memory")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  pool->add_option("--memory-overcommit", options->memory_overcommit,
                   "Refuse (429) a clone when the guest memory of every clone the pool holds, "
                   "its own included, would pass --max-memory-ratio times this times the "
                   "host's memory (1: no more guest memory than the host has; more counts on "
                   "clones not writing all of theirs)")
      ->check(CLI::Range(0.1, 100.0))
      ->capture_default_str();
  pool->add_option("--ready-timeout", options->ready_timeout_s,
                   "Seconds a clone has from its launch until its agent serves")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  pool->add_option("--health-interval", options->health_interval_s,
                   "Seconds between two checks that each ready and acquired sandbox still serves "
                   "(its VMM answers a CONNECT to the agent's port once the guest accepted it); "
                   "0: no checks")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  pool->add_option("--health-timeout", options->health_timeout_s,
                   "Seconds a sandbox has to answer a health check")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  pool->add_option("--health-failures", options->health_failures,
                   "Health checks in a row a sandbox may fail before it is reported lost (hung), "
                   "its VMM killed and replaced")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  pool->add_option("--restore-arg", options->restore_args,
                   "An argument added to every clone's `dsec-vmm restore` (repeat it: "
                   "--restore-arg=--seccomp=log)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  pool->callback([&action, options] { action = [options] { return run_pool(*options); }; });
}

}  // namespace dsec::cli
