#include "vmm/agent/connection_cutter.h"

#include <fcntl.h>
#include <sys/socket.h>

#include "vmm/agent/protocol.h"

namespace dsec::agent {

void ConnectionCutter::add(int fd) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  const std::lock_guard lock(mutex_);
  if (stopped_ && copy) {
    ::shutdown(copy.get(), SHUT_RDWR);
  }
  copies_.push_back(std::move(copy));
}

void ConnectionCutter::stop() {
  const std::lock_guard lock(mutex_);
  stopped_ = true;
  for (const UniqueFd& copy : copies_) {
    ::shutdown(copy.get(), SHUT_RDWR);
  }
}

std::function<void()> ConnectionCutter::stopper(const std::shared_ptr<ConnectionCutter>& cutter) {
  return [weak = std::weak_ptr(cutter)] {
    if (const auto alive = weak.lock()) {
      alive->stop();
    }
  };
}

Connector cuttable_vsock_uds(const std::string& uds_path,
                             std::shared_ptr<ConnectionCutter> cutter) {
  return [uds_path, cutter = std::move(cutter)]() -> Result<UniqueFd> {
    auto fd = DSEC_TRY(connect_vsock_uds(uds_path, kAgentPort));
    cutter->add(fd.get());
    return fd;
  };
}

}  // namespace dsec::agent
