// The guest agent's whole loop (guest/agent/server.h) run on the host, in a child process,
// behind a Unix socket in a temporary directory: both real sides of the protocol, no VM.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "guest/agent/server.h"
#include "vmm/agent/client.h"

namespace dsec::test {

class AgentOnHost {
 public:
  explicit AgentOnHost(const std::string& name) {
    dir_ = std::filesystem::temp_directory_path() /
           ("agent-on-host-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::create_directories(dir_);
    socket_ = (dir_ / "agent.sock").string();
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const sockaddr_un addr = address();
    EXPECT_EQ(::bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener.get(), 64), 0);
    int stop[2];
    EXPECT_EQ(::pipe2(stop, O_CLOEXEC), 0);
    agent_ = ::fork();
    if (agent_ == 0) {
      ::close(stop[1]);
      const std::string why =
          agent::serve(std::move(listener), agent::ServeOptions{agent::kAgentVersion, stop[0]});
      ::_exit(why == "stopped" ? 0 : 1);
    }
    ::close(stop[0]);
    stop_.reset(stop[1]);
  }
  AgentOnHost(const AgentOnHost&) = delete;
  AgentOnHost& operator=(const AgentOnHost&) = delete;
  ~AgentOnHost() {
    stop_.reset();  // the agent returns, killing what it still keeps
    int status = 0;
    ::waitpid(agent_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::filesystem::remove_all(dir_);
  }

  // A client of the agent, each request on a fresh connection.
  agent::AgentClient client(std::chrono::milliseconds answer_timeout = std::chrono::seconds(5)) {
    return agent::AgentClient(
        [addr = address(), path = socket_]() -> Result<UniqueFd> {
          UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
          if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
            return fail_errno("connect " + path, errno);
          }
          return fd;
        },
        answer_timeout);
  }

  // A scratch directory of the test's, removed with it.
  const std::filesystem::path& dir() const { return dir_; }

 private:
  sockaddr_un address() const {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof addr.sun_path - 1);
    return addr;
  }

  std::filesystem::path dir_;
  std::string socket_;
  pid_t agent_ = -1;
  UniqueFd stop_;
};

}  // namespace dsec::test
