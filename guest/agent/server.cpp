#include "guest/agent/server.h"

#include <linux/vm_sockets.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "guest/agent/session.h"

namespace dsec::agent {
namespace {

void reap_children() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// SIGCHLD only needs to interrupt accept(), so that children are reaped promptly.
void on_sigchld(int) {}

}  // namespace

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

std::string serve(UniqueFd listening) {
  struct sigaction sa {};
  sa.sa_handler = on_sigchld;  // no SA_RESTART: accept() returns EINTR
  ::sigaction(SIGCHLD, &sa, nullptr);
  (void)::signal(SIGPIPE, SIG_IGN);

  const int listener = listening.get();
  while (true) {
    reap_children();
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      return std::string("accept: ") + std::strerror(errno);
    }
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(listener);
      (void)::signal(SIGCHLD, SIG_DFL);
      const int rc = serve_connection(conn);
      ::close(conn);
      ::_exit(rc);
    }
    ::close(conn);
    if (child < 0) {
      // Out of processes: drop this connection, keep serving.
      continue;
    }
  }
}

}  // namespace dsec::agent
