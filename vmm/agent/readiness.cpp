#include "vmm/agent/readiness.h"

#include <sys/random.h>
#include <time.h>

#include <thread>
#include <vector>

#include "vmm/agent/client.h"

namespace dsec::agent {
namespace {

// Calls `attempt` until it succeeds, the VM ends or `timeout` passes; returns the last
// error with `what` in front.
template <typename F>
Status retry(const char* what, std::chrono::milliseconds timeout,
             const std::function<bool()>& vm_running, F&& attempt) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto done = attempt();
    if (done) {
      return ok();
    }
    if (vm_running && !vm_running()) {
      return fail(std::string(what) + ": the VM ended before its agent answered (" +
                  done.error().message() + ")");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(std::string(what) + ": the guest agent did not answer within " +
                      std::to_string(timeout.count()) + " ms (" + done.error().message() + ")",
                  "is the guest's init starting the agent (dsec.agent on the default image's "
                  "command line)? Its console says more");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A health check and a clone sync are answered at once: a connection whose reply takes
// longer is dropped, and the next attempt opens a fresh one.
constexpr std::chrono::milliseconds kReplyTimeout{10000};

AgentClient client_for(const std::string& uds_path) {
  return AgentClient([uds_path] { return connect_vsock_uds(uds_path, kAgentPort); }, kReplyTimeout);
}

}  // namespace

Status wait_for_agent(const std::string& uds_path, std::chrono::milliseconds timeout,
                      const std::function<bool()>& vm_running) {
  auto client = client_for(uds_path);
  return retry("waiting for the agent", timeout, vm_running, [&]() -> Status {
    DSEC_TRY(client.health());
    return ok();
  });
}

Status sync_clone(const std::string& uds_path, std::chrono::milliseconds timeout,
                  const std::function<bool()>& vm_running) {
  CloneSyncRequest req;
  req.entropy.resize(64);
  if (::getrandom(req.entropy.data(), req.entropy.size(), 0) !=
      static_cast<ssize_t>(req.entropy.size())) {
    return fail_errno("getrandom for a clone's entropy", errno);
  }
  auto client = client_for(uds_path);
  return retry("syncing the clone's RNG and clock", timeout, vm_running, [&]() -> Status {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    req.realtime_ns =
        static_cast<uint64_t>(now.tv_sec) * 1000000000 + static_cast<uint64_t>(now.tv_nsec);
    return client.clone_sync(req);
  });
}

}  // namespace dsec::agent
