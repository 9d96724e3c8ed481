// The hybrid-vsock handshake on its own: a HostListener on a real event loop thread, host
// processes as plain Unix sockets, and a Connected callback that records what it was handed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/devices/virtio/vsock/host_listener.h"
#include "vmm/devices/virtio/vsock/unix_socket.h"
#include "vmm/io/event_fd.h"
#include "vmm/io/event_loop_thread.h"

namespace dsec::virtio::vsock {
namespace {

using namespace std::chrono_literals;

// A blocking host socket connected to `path`; reads time out after 10 s.
UniqueFd connect_host(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  const timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

void send_all(const UniqueFd& fd, const std::string& data) {
  ASSERT_EQ(::send(fd.get(), data.data(), data.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(data.size()));
}

// Whether the peer closed `fd` (a read sees EOF or a reset) within the receive timeout.
bool closed_by_peer(const UniqueFd& fd) {
  char byte = 0;
  for (;;) {
    const ssize_t n = ::recv(fd.get(), &byte, 1, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
}

// What a non-blocking socket handed to Connected holds, waiting up to 10 s for `n` bytes.
std::string read_handed(const UniqueFd& fd, size_t n) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{.fd = fd.get(), .events = POLLIN, .revents = 0};
    ::poll(&pfd, 1, 100);
    char buf[64];
    const ssize_t got = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (got > 0) {
      out.append(buf, static_cast<size_t>(got));
    }
  }
  return out;
}

class HostListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dsec-host-listener-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "v.sock").string();
    ASSERT_OK_AND_ASSIGN(io::EventLoop loop, io::EventLoop::create());
    thread_ = std::make_unique<io::EventLoopThread>(std::move(loop));
  }
  void TearDown() override {
    if (thread_) {
      EXPECT_TRUE(thread_->stop().has_value());
    }
    listener_.reset();
    thread_.reset();
    std::filesystem::remove_all(dir_);
  }
  void start(bool open = true,
             std::chrono::milliseconds handshake_timeout = HostListener::kHandshakeTimeout) {
    ASSERT_OK_AND_ASSIGN(listener_, HostListener::create(
                                        thread_->loop(), path_,
                                        [this](const std::function<void()>& work) {
                                          const std::lock_guard lock(mutex_);
                                          work();
                                        },
                                        [this](UniqueFd socket, uint32_t port) {
                                          handed_.emplace_back(std::move(socket), port);
                                        },
                                        handshake_timeout));
    listener_->set_open(open);
    ASSERT_OK(thread_->start());
  }
  // Waits until `n` handshakes are in progress; false if they never were.
  bool wait_pending(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (pending_count() != n) {
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  // Waits until Connected was called `n` times; the handed sockets and ports so far.
  std::vector<std::pair<UniqueFd, uint32_t>> wait_handed(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {
      {
        const std::lock_guard lock(mutex_);
        if (handed_.size() >= n || std::chrono::steady_clock::now() > deadline) {
          return std::move(handed_);
        }
      }
      std::this_thread::sleep_for(1ms);
    }
  }
  size_t pending_count() {
    const std::lock_guard lock(mutex_);
    return listener_->pending_count();
  }

  std::filesystem::path dir_;
  std::string path_;
  std::mutex mutex_;
  std::vector<std::pair<UniqueFd, uint32_t>> handed_;
  std::unique_ptr<io::EventLoopThread> thread_;
  std::unique_ptr<HostListener> listener_;
};

TEST_F(HostListenerTest, HandsOnTheSocketAndPortWithWhatFollowsTheLineStillInIt) {
  start();
  const UniqueFd host = connect_host(path_);
  send_all(host, "CONNECT 52\nfirst data");
  auto handed = wait_handed(1);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].second, 52u);
  EXPECT_EQ(read_handed(handed[0].first, 10), "first data");
  EXPECT_EQ(pending_count(), 0u);
}

TEST_F(HostListenerTest, WaitsForALineThatComesInPieces) {
  start();
  const UniqueFd host = connect_host(path_);
  send_all(host, "CONN");
  ASSERT_TRUE(wait_pending(1));
  std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(wait_handed(0).empty());
  send_all(host, "ECT 4294967295\n");
  auto handed = wait_handed(1);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].second, 4294967295u);
}

TEST_F(HostListenerTest, ClosesSocketsThatSendNoWellFormedLine) {
  start();
  const UniqueFd bad_port = connect_host(path_);
  send_all(bad_port, "CONNECT 4294967296\n");
  const UniqueFd not_connect = connect_host(path_);
  send_all(not_connect, "HELLO 52\n");
  const UniqueFd too_long = connect_host(path_);
  send_all(too_long, std::string(kMaxConnectLine, '1'));

  EXPECT_TRUE(closed_by_peer(bad_port));
  EXPECT_TRUE(closed_by_peer(not_connect));
  EXPECT_TRUE(closed_by_peer(too_long));
  EXPECT_TRUE(wait_handed(0).empty());
  EXPECT_EQ(pending_count(), 0u);
}

TEST_F(HostListenerTest, ClosesASocketThatShutsItsWritingSideWithHalfALineSent) {
  start();
  const UniqueFd host = connect_host(path_);
  send_all(host, "CONNECT 5");
  ASSERT_TRUE(wait_pending(1));
  const auto shut = std::chrono::steady_clock::now();
  ::shutdown(host.get(), SHUT_WR);
  EXPECT_TRUE(closed_by_peer(host));
  // At once, not at the handshake timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - shut, HostListener::kHandshakeTimeout / 2);
  EXPECT_EQ(pending_count(), 0u);
}

TEST_F(HostListenerTest, ClosesASocketThatSendsNoWholeLineInTime) {
  start(/*open=*/true, /*handshake_timeout=*/200ms);
  const auto begin = std::chrono::steady_clock::now();
  const UniqueFd silent = connect_host(path_);
  const UniqueFd slow = connect_host(path_);
  send_all(slow, "CONNECT");
  EXPECT_TRUE(closed_by_peer(silent));
  EXPECT_TRUE(closed_by_peer(slow));
  EXPECT_GE(std::chrono::steady_clock::now() - begin, 200ms);
  EXPECT_EQ(pending_count(), 0u);
  // A prompt one is unaffected.
  const UniqueFd prompt = connect_host(path_);
  send_all(prompt, "CONNECT 9\n");
  auto handed = wait_handed(1);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].second, 9u);
}

TEST_F(HostListenerTest, WhileClosedEveryConnectionIsClosedAtOnce) {
  start(/*open=*/false);
  const UniqueFd host = connect_host(path_);
  send_all(host, "CONNECT 52\n");
  EXPECT_TRUE(closed_by_peer(host));
  EXPECT_TRUE(wait_handed(0).empty());
}

TEST_F(HostListenerTest, HoldsAtMostkMaxPendingHandshakes) {
  start();
  std::vector<UniqueFd> silent;
  for (size_t i = 0; i < HostListener::kMaxPending; ++i) {
    silent.push_back(connect_host(path_));
  }
  ASSERT_TRUE(wait_pending(HostListener::kMaxPending));
  const UniqueFd one_more = connect_host(path_);
  EXPECT_TRUE(closed_by_peer(one_more));
  // The ones already waiting still get through.
  send_all(silent[0], "CONNECT 7\n");
  auto handed = wait_handed(1);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].second, 7u);
}

TEST_F(HostListenerTest, ClosePendingEndsHandshakesAndTheDestructorRemovesTheSocketFile) {
  // A device reset: close_pending() under the lock, then purge() on the loop thread.
  ASSERT_OK_AND_ASSIGN(io::EventFd reset, io::EventFd::create());
  ASSERT_OK(thread_->loop().add_fd_watch(reset.fd(), [&] {
    static_cast<void>(reset.consume());
    const std::lock_guard lock(mutex_);
    listener_->close_pending();
    listener_->purge();
  }));
  start();
  const UniqueFd host = connect_host(path_);
  ASSERT_TRUE(wait_pending(1));
  ASSERT_OK(reset.signal());
  EXPECT_TRUE(closed_by_peer(host));
  EXPECT_EQ(pending_count(), 0u);
  // Still listening.
  const UniqueFd next = connect_host(path_);
  send_all(next, "CONNECT 3\n");
  EXPECT_EQ(wait_handed(1).size(), 1u);

  ASSERT_OK(thread_->stop());
  EXPECT_TRUE(std::filesystem::exists(path_));
  listener_.reset();
  EXPECT_FALSE(std::filesystem::exists(path_));
}

// A host socket of another process: a child connects to `path`, sends `line` and keeps the
// socket open until the write end of the `keep_open` pipe is closed.
pid_t connect_from_child(const std::string& path, const std::string& line,
                         const int (&keep_open)[2]) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(keep_open[1]);  // or the child would hold its own read open
    const UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
        ::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(line.size())) {
      ::_exit(1);
    }
    char byte = 0;
    static_cast<void>(::read(keep_open[0], &byte, 1));
    ::_exit(0);
  }
  return child;
}

// A restored clone's socket before its clone sync: another process's connection waits,
// unread, while this process's goes through; then the held one goes through too.
TEST_F(HostListenerTest, WhileAdmittingOnlyItsOwnProcessOthersWaitUntilLetThrough) {
  ASSERT_OK_AND_ASSIGN(io::EventFd let_through, io::EventFd::create());
  ASSERT_OK(thread_->loop().add_fd_watch(let_through.fd(), [&] {
    static_cast<void>(let_through.consume());
    const std::lock_guard lock(mutex_);
    listener_->admit_only_own(false);
  }));
  start(/*open=*/false);
  {
    const std::lock_guard lock(mutex_);
    listener_->admit_only_own(true);
    listener_->set_open(true);
  }
  int keep_open[2];
  ASSERT_EQ(::pipe2(keep_open, O_CLOEXEC), 0);
  const pid_t child = connect_from_child(path_, "CONNECT 41\n", keep_open);
  ASSERT_GT(child, 0);
  ::close(keep_open[0]);
  std::this_thread::sleep_for(200ms);  // the child's connection is in by now
  const UniqueFd own = connect_host(path_);
  send_all(own, "CONNECT 42\n");
  auto handed = wait_handed(1);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].second, 42u) << "only this process's connection goes through";
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(wait_handed(0).empty()) << "the other process's connection was let through";
  EXPECT_EQ(pending_count(), 0u);

  ASSERT_OK(let_through.signal());
  auto later = wait_handed(1);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].second, 41u);
  ::close(keep_open[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(HostListenerCreate, RefusesAnExistingPath) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("dsec-host-listener-exists-" + std::to_string(::getpid()));
  { const UniqueFd file(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); }
  ASSERT_OK_AND_ASSIGN(io::EventLoop loop, io::EventLoop::create());
  auto listener = HostListener::create(
      loop, path, [](const std::function<void()>& work) { work(); }, [](UniqueFd, uint32_t) {});
  EXPECT_FALSE(listener.has_value());
  // Not ours: left where it was.
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dsec::virtio::vsock
