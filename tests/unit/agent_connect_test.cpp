// connect_vsock_uds, the host's way into a VM's agent through the vsock device's Unix
// socket: the CONNECT handshake, a refusal, and a VMM that never answers.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/agent/client.h"
#include "vmm/io/unix_socket.h"

namespace dsec::agent {
namespace {

using namespace std::chrono_literals;

// A listening Unix socket standing in for a VMM's vsock socket (non-blocking, as the
// vsock device's own).
UniqueFd listen_at(const std::string& path) {
  auto fd = io::listen_unix(path);
  EXPECT_TRUE(fd.has_value()) << fd.error().message();
  return fd ? std::move(*fd) : UniqueFd();
}

// Accepts one connection, reads its CONNECT line and answers `reply` (nothing if empty),
// then holds the connection until the test ends.
std::thread answer_one(int listener, std::string reply, std::string& got) {
  return std::thread([listener, reply = std::move(reply), &got] {
    pollfd ready{.fd = listener, .events = POLLIN, .revents = 0};
    ::poll(&ready, 1, 5000);
    UniqueFd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    char c = 0;
    while (::read(conn.get(), &c, 1) == 1 && c != '\n') got += c;
    if (!reply.empty()) (void)!::write(conn.get(), reply.data(), reply.size());
    std::this_thread::sleep_for(500ms);
  });
}

TEST(AgentConnect, AnOkAnswerGivesTheStreamWithNoTimeoutLeftOnIt) {
  test::TempDir dir;
  const std::string path = (dir.path() / "v.sock").string();
  UniqueFd listener = listen_at(path);
  std::string got;
  std::thread vmm = answer_one(listener.get(), "OK 1073741824\n", got);
  auto fd = connect_vsock_uds(path, 1024, 200ms);
  vmm.join();
  ASSERT_OK(fd);
  EXPECT_EQ(got, "CONNECT 1024");
  timeval tv{1, 1};
  socklen_t len = sizeof tv;
  ASSERT_EQ(::getsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &tv, &len), 0);
  EXPECT_EQ(tv.tv_sec, 0);
  EXPECT_EQ(tv.tv_usec, 0);
  ASSERT_EQ(::getsockopt(fd->get(), SOL_SOCKET, SO_SNDTIMEO, &tv, &len), 0);
  EXPECT_EQ(tv.tv_sec, 0);
  EXPECT_EQ(tv.tv_usec, 0);
}

TEST(AgentConnect, ARefusalSaysWhatTheSocketAnswered) {
  test::TempDir dir;
  const std::string path = (dir.path() / "v.sock").string();
  UniqueFd listener = listen_at(path);
  std::string got;
  std::thread vmm = answer_one(listener.get(), "NO\n", got);
  auto fd = connect_vsock_uds(path, 1024, 5s);
  vmm.join();
  ASSERT_FALSE(fd.has_value());
  EXPECT_NE(fd.error().message().find("refused a connection to guest port 1024"), std::string::npos)
      << fd.error().message();
}

TEST(AgentConnect, AVmmThatNeverAnswersFailsAtTheHandshakeTimeout) {
  test::TempDir dir;
  const std::string path = (dir.path() / "v.sock").string();
  UniqueFd listener = listen_at(path);
  std::string got;
  std::thread vmm = answer_one(listener.get(), "", got);
  const auto start = std::chrono::steady_clock::now();
  auto fd = connect_vsock_uds(path, 1024, 200ms);
  const auto took = std::chrono::steady_clock::now() - start;
  vmm.join();
  ASSERT_FALSE(fd.has_value());
  EXPECT_NE(fd.error().message().find("did not answer"), std::string::npos) << fd.error().message();
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 5s);
}

TEST(AgentConnect, AVmmThatAcceptsNothingFailsAtTheTimeout) {
  // A listener whose backlog is full, as a VMM's that stopped accepting: a further connect
  // waits for room.
  test::TempDir dir;
  const std::string path = (dir.path() / "v.sock").string();
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener.get(), 0), 0);
  std::vector<UniqueFd> queued;
  while (queued.size() < 16) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
      break;
    }
    queued.push_back(std::move(fd));
  }
  ASSERT_LT(queued.size(), 16U) << "the backlog never filled";
  const auto start = std::chrono::steady_clock::now();
  auto fd = connect_vsock_uds(path, 1024, 200ms);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(fd.has_value());
  EXPECT_NE(fd.error().message().find("did not accept a connection within 0.2 s"),
            std::string::npos)
      << fd.error().message();
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 5s);
}

}  // namespace
}  // namespace dsec::agent
