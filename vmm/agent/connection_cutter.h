// The agent connections of a request that runs for a client (an exec, a process's streamed
// output), shut at once when that client leaves: a request blocked on a quiet guest then
// fails rather than wait for the guest's next byte. Each is a copy of the connection's
// descriptor (shutdown acts on the socket), closed with this object.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vmm/agent/client.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

class ConnectionCutter {
 public:
  // Keeps a copy of `fd`; shut at once when stop() came first.
  void add(int fd);
  // Shuts every connection added, and every one added later.
  void stop();
  // stop() of `cutter` while it lives, for a client's on-gone list.
  static std::function<void()> stopper(const std::shared_ptr<ConnectionCutter>& cutter);

 private:
  std::mutex mutex_;
  bool stopped_ = false;
  std::vector<UniqueFd> copies_;
};

// A Connector to the agent behind `uds_path` (a vsock Unix socket) whose connections
// `cutter` shuts.
Connector cuttable_vsock_uds(const std::string& uds_path, std::shared_ptr<ConnectionCutter> cutter);

}  // namespace dsec::agent
