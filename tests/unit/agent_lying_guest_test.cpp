// The host side of exec and cp against a guest that lies or stops answering: a fake agent
// serves each request on its end of a socketpair and breaks the protocol in one way. What a
// user sees is checked: the error's words, that it comes within a generous multiple of the
// answer timeout (not a timed test), and that no host file is left half-written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/file_text.h"
#include "tests/support/temp_dir.h"
#include "vmm/agent/client.h"
#include "vmm/agent/file_copy.h"
#include "vmm/agent/frame_io.h"

namespace dsec::agent {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The answer timeout of these tests, and the bound within which the errors must come: a
// generous multiple of it, so that a loaded machine does not fail the test.
constexpr auto kAnswerTimeout = 300ms;
constexpr auto kGenerousDeadline = 20s;

// Serves one request on `fd`, the guest's end of the connection.
using Behaviour = std::function<void(int fd)>;

// Waits until the host closed its end (or `limit` passed): a guest that stops answering
// holds its connection open and says nothing.
void hold_until_closed(int fd, std::chrono::milliseconds limit = 30s) {
  const auto end = Clock::now() + limit;
  uint8_t sink[4096];
  while (Clock::now() < end) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 100) > 0 && ::read(fd, sink, sizeof sink) <= 0) {
      return;
    }
  }
}

// The request the host sent first.
Frame read_request(int fd) {
  FrameReader reader(fd);
  auto f = reader.next();
  EXPECT_TRUE(f.has_value() && f->has_value()) << "no request frame from the host";
  return f && *f ? **f : Frame{};
}

// True while `fd` takes data; false once the host has gone.
bool guest_send(int fd, MessageType type, uint32_t id, std::span<const uint8_t> payload = {}) {
  return send_frame(fd, type, id, payload).has_value();
}

class LyingGuest : public ::testing::Test {
 protected:
  ~LyingGuest() override {
    const std::lock_guard lock(mutex_);
    for (auto& t : guests_) t.join();
  }

  // A client whose every connection is served by the next of `behaviours` (the last one
  // again once they run out).
  AgentClient client(std::vector<Behaviour> behaviours,
                     std::chrono::milliseconds answer_timeout = kAnswerTimeout) {
    behaviours_ = std::move(behaviours);
    return AgentClient(
        [this]() -> Result<UniqueFd> {
          int sv[2];
          if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            return fail_errno("socketpair", errno);
          }
          const std::lock_guard lock(mutex_);
          const Behaviour& behaviour = behaviours_[std::min(next_, behaviours_.size() - 1)];
          ++next_;
          guests_.emplace_back(
              [fd = UniqueFd(sv[1]), behaviour]() mutable { behaviour(fd.get()); });
          return UniqueFd(sv[0]);
        },
        answer_timeout);
  }

  size_t connections() {
    const std::lock_guard lock(mutex_);
    return next_;
  }

  test::TempDir dir_;

 private:
  std::mutex mutex_;
  std::vector<Behaviour> behaviours_;
  size_t next_ = 0;
  std::vector<std::thread> guests_;
};

// A read-file answer: file-info announcing `announced` bytes of `mode`, then frames of
// `chunk` bytes until `sent` bytes went (or the host hung up), then file-end if `end`.
Behaviour file_reply(uint64_t announced, uint32_t mode, uint64_t sent, size_t chunk, bool end) {
  return [=](int fd) {
    const Frame req = read_request(fd);
    if (!guest_send(fd, MessageType::kFileInfo, req.request_id,
                    encode(FileInfo{announced, mode}))) {
      return;
    }
    const std::vector<uint8_t> data(chunk, 'g');
    for (uint64_t done = 0; done < sent; done += chunk) {
      if (!guest_send(fd, MessageType::kFileData, req.request_id,
                      std::span(data).first(std::min<uint64_t>(chunk, sent - done)))) {
        return;
      }
    }
    if (end) {
      guest_send(fd, MessageType::kFileEnd, req.request_id);
    }
    hold_until_closed(fd);
  };
}

TEST(HostFileMode, NeverSetuidSetgidOrStickyAndNeverMoreThanTheUmaskAllows) {
  EXPECT_EQ(host_file_mode(06777, 022), 0755U);
  EXPECT_EQ(host_file_mode(07777, 0), 0777U);
  EXPECT_EQ(host_file_mode(04755, 077), 0700U);
  EXPECT_EQ(host_file_mode(0xFFFFFFFF, 0), 0777U);
  EXPECT_EQ(host_file_mode(0640, 022), 0640U);
}

TEST_F(LyingGuest, ASetuidSetgidFileComesOutWithoutThoseBits) {
  auto c = client({file_reply(1024, 06777, 1024, 512, true)});
  const std::string target = dir_.file("tool");
  auto copied = copy_out_of_guest(c, "/tool", target, 022);
  ASSERT_TRUE(copied.has_value()) << copied.error().message();
  EXPECT_EQ(copied->mode, 06777U);  // what the guest said
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755U);
  EXPECT_EQ(st.st_size, 1024);
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"tool"});
}

TEST_F(LyingGuest, AGuestThatAnnouncesOneKibAndStreamsAGibFailsAtTheFirstByteTooMany) {
  // An older file at the target stays as it was.
  const std::string target = dir_.file("out");
  std::ofstream(target) << "the host's own";
  auto c = client({file_reply(1024, 0644, uint64_t{1} << 30, 512, true)});
  const auto start = Clock::now();
  auto copied = copy_out_of_guest(c, "/big", target, 022);
  const auto took = Clock::now() - start;
  ASSERT_FALSE(copied.has_value());
  EXPECT_NE(copied.error().message().find("the guest sent more than the 1024 bytes it announced"),
            std::string::npos)
      << copied.error().message();
  EXPECT_LT(took, kGenerousDeadline);
  EXPECT_EQ(test::file_text(target), "the host's own");
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"out"});
}

TEST_F(LyingGuest, AGuestThatStopsAnsweringMidStreamFailsWithinTheAnswerTimeout) {
  auto c = client({file_reply(1024, 0644, 512, 512, false)});
  const std::string target = dir_.file("out");
  const auto start = Clock::now();
  auto copied = copy_out_of_guest(c, "/slow", target, 022);
  const auto took = Clock::now() - start;
  ASSERT_FALSE(copied.has_value());
  EXPECT_NE(copied.error().message().find(
                "the guest stopped answering: nothing moved on its agent connection for 0.3 s "
                "during the file copy"),
            std::string::npos)
      << copied.error().message();
  EXPECT_NE(copied.error().message().find("--answer-timeout"), std::string::npos);
  EXPECT_GE(took, kAnswerTimeout);
  EXPECT_LT(took, kGenerousDeadline);
  EXPECT_TRUE(dir_.entries().empty());
}

// A guest that sends a byte just inside each step's timeout would hold a copy (and the
// pool's thread that runs it) for as long as it liked: the whole copy has a deadline too.
TEST_F(LyingGuest, AGuestThatDribblesAFileFailsAtTheCopysWholeDeadline) {
  constexpr uint64_t kAnnounced = kMinCopyBytesPerSecond;  // 1 s at that rate
  auto c = client({[](int fd) {
    const Frame req = read_request(fd);
    if (!guest_send(fd, MessageType::kFileInfo, req.request_id, encode(FileInfo{kAnnounced, 0644}))) {
      return;
    }
    const uint8_t one = 'g';
    for (uint64_t sent = 0; sent < kAnnounced; ++sent) {
      std::this_thread::sleep_for(kAnswerTimeout / 3);
      if (!guest_send(fd, MessageType::kFileData, req.request_id, std::span(&one, 1))) {
        return;
      }
    }
  }});
  const auto start = Clock::now();
  auto copied = copy_out_of_guest(c, "/dribble", dir_.file("out"), 022);
  const auto took = Clock::now() - start;
  ASSERT_FALSE(copied.has_value());
  EXPECT_NE(copied.error().message().find("bytes moved by the copy's deadline (it must move 64 "
                                          "KiB a second on the whole"),
            std::string::npos)
      << copied.error().message();
  EXPECT_GE(took, kAnswerTimeout + 1s);
  EXPECT_LT(took, kGenerousDeadline);
  EXPECT_TRUE(dir_.entries().empty());
}

TEST_F(LyingGuest, AGuestThatSendsLessThanItAnnouncedLeavesNoFile) {
  auto c = client({file_reply(1024, 0644, 512, 512, true)});
  auto copied = copy_out_of_guest(c, "/short", dir_.file("out"), 022);
  ASSERT_FALSE(copied.has_value());
  EXPECT_NE(copied.error().message().find("512 bytes arrived, the guest announced 1024"),
            std::string::npos)
      << copied.error().message();
  EXPECT_TRUE(dir_.entries().empty());
}

TEST_F(LyingGuest, ASizeBeyondTheHostsFreeSpaceFailsBeforeAnyData) {
  auto c = client({file_reply(uint64_t{1} << 62, 0644, 0, 512, false)});
  auto copied = copy_out_of_guest(c, "/huge", dir_.file("out"), 022);
  ASSERT_FALSE(copied.has_value());
  EXPECT_NE(copied.error().message().find("4611686018427387904 bytes, and the file system"),
            std::string::npos)
      << copied.error().message();
  EXPECT_TRUE(dir_.entries().empty());
}

TEST_F(LyingGuest, AGuestThatNeverAnswersAHealthCheckFailsWithinTheAnswerTimeout) {
  auto c = client({[](int fd) { hold_until_closed(fd); }});
  const auto start = Clock::now();
  auto health = c.health();
  ASSERT_FALSE(health.has_value());
  EXPECT_NE(health.error().message().find("the guest stopped answering"), std::string::npos)
      << health.error().message();
  EXPECT_LT(Clock::now() - start, kGenerousDeadline);
}

TEST_F(LyingGuest, AGuestThatTakesNoFileDataFailsTheCopyInWithinTheAnswerTimeout) {
  // 16 MiB is far more than the socket buffers hold: the sends stall.
  const std::string source = dir_.file("in");
  std::ofstream(source, std::ios::binary) << std::string(size_t{16} << 20, 'h');
  const UniqueFd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  auto c = client({[](int fd) {
    read_request(fd);
    hold_until_closed(fd);
  }});
  const auto start = Clock::now();
  auto written = c.write_file(in.get(), size_t{16} << 20, "/in", 0644);
  ASSERT_FALSE(written.has_value());
  EXPECT_NE(written.error().message().find("the guest stopped answering"), std::string::npos)
      << written.error().message();
  EXPECT_LT(Clock::now() - start, kGenerousDeadline);
}

// An exec's guest: quiet on the command's connection for `quiet`, then an exit status.
Behaviour exec_reply_after(std::chrono::milliseconds quiet) {
  return [quiet](int fd) {
    const Frame req = read_request(fd);
    std::this_thread::sleep_for(quiet);
    guest_send(fd, MessageType::kExit, req.request_id,
               encode(ExitStatus{ExitStatus::Kind::kExited, 7}));
    hold_until_closed(fd);
  };
}

Behaviour answer_health() {
  return [](int fd) {
    const Frame req = read_request(fd);
    guest_send(fd, MessageType::kHealthOk, req.request_id, encode(HealthReply{"fake", 1}));
    hold_until_closed(fd);
  };
}

TEST_F(LyingGuest, AnExecQuietLongerThanTheAnswerTimeoutGoesOnWhileTheAgentAnswersHealthChecks) {
  // The command is silent for over two answer timeouts; each time the client asks the agent
  // on a fresh connection, which answers (within a timeout long enough for a loaded machine
  // to schedule the fake agent).
  constexpr auto kTimeout = 1s;
  auto c = client({exec_reply_after(2500ms), answer_health()}, kTimeout);
  auto status = c.exec(
      {{"sleep", "1"}, {}, "", 0, false}, [](auto) { return ok(); }, [](auto) { return ok(); });
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(status->code, 7);
  EXPECT_GE(connections(), 2U);  // the exec, and at least one health check
}

TEST_F(LyingGuest, AnExecWhoseGuestStopsAnsweringFailsSayingSo) {
  auto c = client({[](int fd) {
    read_request(fd);
    hold_until_closed(fd);
  }});
  const auto start = Clock::now();
  auto status = c.exec(
      {{"true"}, {}, "", 0, false}, [](auto) { return ok(); }, [](auto) { return ok(); });
  ASSERT_FALSE(status.has_value());
  EXPECT_NE(status.error().message().find(
                "the guest stopped answering: the exec's connection was quiet for 0.3 s, and a "
                "health check on a fresh connection failed"),
            std::string::npos)
      << status.error().message();
  EXPECT_LT(Clock::now() - start, kGenerousDeadline);
}

// The pool's hang: an agent that answers every health check but never reports the end of a
// command with a time limit. The exec fails once the limit and an answer timeout passed,
// instead of holding its caller for ever; a command without a limit is not cut short.
TEST_F(LyingGuest, AnExecWhoseExitNeverComesFailsPastItsTimeLimit) {
  auto c = client({[](int fd) {
                     read_request(fd);
                     hold_until_closed(fd);
                   },
                   answer_health()});
  const auto start = Clock::now();
  auto status = c.exec(
      {{"sleep", "5"}, {}, "", 500, false}, [](auto) { return ok(); }, [](auto) { return ok(); });
  ASSERT_FALSE(status.has_value());
  EXPECT_NE(status.error().message().find("did not report the end of the command within its "
                                          "time limit (500 ms) and 0.3 s more"),
            std::string::npos)
      << status.error().message();
  EXPECT_GE(Clock::now() - start, 800ms);
  EXPECT_LT(Clock::now() - start, kGenerousDeadline);
}

}  // namespace
}  // namespace dsec::agent
