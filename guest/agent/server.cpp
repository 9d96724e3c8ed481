#include "guest/agent/server.h"

#include <linux/vm_sockets.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <utility>

#include "guest/agent/agent_loop.h"

namespace dsec::agent {

Result<UniqueFd> listen_vsock(uint32_t port) {
  UniqueFd listener(::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) {
    return fail_errno("socket(AF_VSOCK)", errno, "is there a virtio-vsock device?");
  }
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = VMADDR_CID_ANY;
  addr.svm_port = port;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return fail_errno("bind to vsock port " + std::to_string(port), errno);
  }
  if (::listen(listener.get(), 128) != 0) {
    return fail_errno("listen on vsock", errno);
  }
  return listener;
}

std::string serve(UniqueFd listener, const ServeOptions& options) {
  AgentLoop loop(listener.get(), options);
  return loop.run();
}

}  // namespace dsec::agent
