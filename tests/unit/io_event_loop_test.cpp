// The io_uring event loop: fd watches (both poll modes), file I/O, timers, stopping, and
// what happens to outstanding operations when watches are removed or the loop destroyed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/event_fd.h"
#include "vmm/io/event_loop.h"

namespace dsec::io {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int count_open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

// Turns the loop until `done()` holds; false if it does not within `limit`.
template <typename Done>
bool run_until(EventLoop& loop, Done done, Clock::duration limit = 5s) {
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= deadline) {
      return false;
    }
    auto turned = loop.run_once(10ms);
    if (!turned) {
      ADD_FAILURE() << turned.error().message();
      return false;
    }
  }
  return true;
}

// Turns the loop for `span`, whatever happens: for checking that something does not.
void run_for(EventLoop& loop, Clock::duration span) {
  const auto deadline = Clock::now() + span;
  while (Clock::now() < deadline) {
    ASSERT_OK(loop.run_once(5ms));
  }
}

// A scratch file, removed at the end of the test.
class TempFile {
 public:
  TempFile() {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr ? dir : "/tmp") + "/dsec-io-test-XXXXXX";
    fd_.reset(::mkostemp(path_.data(), O_CLOEXEC));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { ::unlink(path_.c_str()); }

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

  std::string read_all() const {
    struct stat st {};
    EXPECT_EQ(::fstat(fd_.get(), &st), 0);
    std::string out(static_cast<size_t>(st.st_size), '\0');
    EXPECT_EQ(::pread(fd_.get(), out.data(), out.size(), 0), st.st_size);
    return out;
  }

 private:
  std::string path_;
  UniqueFd fd_;
};

iovec iov(void* base, size_t len) {
  return iovec{base, len};
}
iovec iov(std::string& s) {
  return iovec{s.data(), s.size()};
}

// ---- Watches, in both poll modes ----

class EventLoopWatch : public ::testing::TestWithParam<PollMode> {};

INSTANTIATE_TEST_SUITE_P(PollModes, EventLoopWatch,
                         ::testing::Values(PollMode::kMultishotIfSupported, PollMode::kRearm),
                         [](const auto& test) {
                           return test.param == PollMode::kRearm ? std::string("Rearm")
                                                                 : std::string("Multishot");
                         });

// A watch handler that drains an eventfd and counts what it saw.
struct DrainCounter {
  const EventFd& efd;
  uint64_t consumed = 0;
  int calls = 0;
  int calls_with_data = 0;

  void operator()() {
    ++calls;
    auto n = efd.consume();
    ASSERT_OK(n);
    consumed += *n;
    if (*n > 0) {
      ++calls_with_data;
    }
  }
};

TEST_P(EventLoopWatch, HandlesEverySignalFromAnotherThreadAndKeepsWatching) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(64, GetParam()));
  if (GetParam() == PollMode::kRearm) {
    EXPECT_FALSE(loop.uses_multishot_poll());
  }
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  DrainCounter counter{efd};
  ASSERT_OK(loop.add_fd_watch(efd.fd(), [&] { counter(); }));

  std::thread signaller([&] {
    for (int i = 0; i < 100; ++i) {
      ASSERT_OK(efd.signal());
      if (i % 7 == 0) {
        std::this_thread::yield();  // spread the signals over several loop turns
      }
    }
  });
  const bool all_seen = run_until(loop, [&] { return counter.consumed >= 100; });
  signaller.join();
  ASSERT_TRUE(all_seen) << "consumed " << counter.consumed << " of 100";
  EXPECT_EQ(counter.consumed, 100u);
  EXPECT_GE(counter.calls_with_data, 1);
  EXPECT_LE(counter.calls_with_data, 100);

  // Still armed after the burst.
  ASSERT_OK(efd.signal(5));
  ASSERT_TRUE(run_until(loop, [&] { return counter.consumed == 105; }));
}

TEST_P(EventLoopWatch, OneHandlerCallCoversTheSignalsOfABatch) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(64, GetParam()));
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  DrainCounter counter{efd};
  ASSERT_OK(loop.add_fd_watch(efd.fd(), [&] { counter(); }));
  ASSERT_OK(loop.run_once(0ms));  // armed
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(efd.signal());
  }
  ASSERT_TRUE(run_until(loop, [&] { return counter.consumed == 10; }));
  EXPECT_EQ(counter.calls_with_data, 1);
  EXPECT_EQ(counter.calls, 1);
}

TEST_P(EventLoopWatch, ASignalBeforeTheWatchIsSeen) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(64, GetParam()));
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  ASSERT_OK(efd.signal(3));
  DrainCounter counter{efd};
  ASSERT_OK(loop.add_fd_watch(efd.fd(), [&] { counter(); }));
  ASSERT_TRUE(run_until(loop, [&] { return counter.consumed == 3; }));
}

TEST_P(EventLoopWatch, RemovedWatchIsNotCalledAndIsReleased) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(64, GetParam()));
  const size_t baseline = loop.pending_operations();
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  DrainCounter counter{efd};
  ASSERT_OK_AND_ASSIGN(WatchId id, loop.add_fd_watch(efd.fd(), [&] { counter(); }));
  ASSERT_OK(efd.signal());
  ASSERT_TRUE(run_until(loop, [&] { return counter.consumed == 1; }));

  ASSERT_OK(loop.remove_watch(id));
  ASSERT_OK(efd.signal());
  run_for(loop, 50ms);
  EXPECT_EQ(counter.calls, 1);
  EXPECT_TRUE(run_until(loop, [&] { return loop.pending_operations() == baseline; }));
}

TEST_P(EventLoopWatch, ReadinessReportedBeforeRemovalIsDropped) {
  // Two watches on one eventfd; whichever handler runs first removes the other. Both
  // polls completed in the same turn, so the removed one's completion is already in
  // hand when it is removed, and must not reach its handler.
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(64, GetParam()));
  const size_t baseline = loop.pending_operations();
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  WatchId ids[2];
  int calls[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(ids[i], loop.add_fd_watch(efd.fd(), [&, i] {
      ++calls[i];
      ASSERT_OK(efd.consume());
      if (calls[i] == 1) {
        ASSERT_OK(loop.remove_watch(ids[1 - i]));
      }
    }));
  }
  ASSERT_OK(loop.run_once(0ms));  // both armed
  ASSERT_OK(efd.signal());
  ASSERT_TRUE(run_until(loop, [&] { return calls[0] + calls[1] >= 1; }));
  run_for(loop, 30ms);
  EXPECT_EQ(calls[0] + calls[1], 1) << "the removed watch's handler ran";
  EXPECT_TRUE(run_until(loop, [&] { return loop.pending_operations() == baseline + 1; }));
}

TEST_P(EventLoopWatch, WatchRemovedBeforeItWasSubmittedIsNeverCalled) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(64, GetParam()));
  const size_t baseline = loop.pending_operations();
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  ASSERT_OK(efd.signal());
  bool called = false;
  ASSERT_OK_AND_ASSIGN(WatchId id, loop.add_fd_watch(efd.fd(), [&] { called = true; }));
  ASSERT_OK(loop.remove_watch(id));
  EXPECT_TRUE(run_until(loop, [&] { return loop.pending_operations() == baseline; }));
  run_for(loop, 20ms);
  EXPECT_FALSE(called);
}

TEST_P(EventLoopWatch, HandlerMayRemoveItsOwnWatch) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(64, GetParam()));
  const size_t baseline = loop.pending_operations();
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  int calls = 0;
  WatchId self;
  ASSERT_OK_AND_ASSIGN(self, loop.add_fd_watch(efd.fd(), [&] {
    ++calls;
    ASSERT_OK(efd.consume());
    ASSERT_OK(loop.remove_watch(self));
  }));
  ASSERT_OK(efd.signal());
  ASSERT_TRUE(run_until(loop, [&] { return calls == 1; }));
  ASSERT_OK(efd.signal());
  run_for(loop, 30ms);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(run_until(loop, [&] { return loop.pending_operations() == baseline; }));
}

TEST(EventLoop, RemovingAnUnknownOrRemovedWatchFails) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  EXPECT_FALSE(loop.remove_watch(WatchId{12345}).has_value());
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  ASSERT_OK_AND_ASSIGN(WatchId id, loop.add_fd_watch(efd.fd(), [] {}));
  ASSERT_OK(loop.remove_watch(id));
  auto again = loop.remove_watch(id);
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message().find("no such watch"), std::string::npos);
}

TEST(EventLoop, RejectsInvalidWatches) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  EXPECT_FALSE(loop.add_fd_watch(-1, [] {}).has_value());
  EXPECT_FALSE(loop.add_fd_watch(0, EventLoop::Handler{}).has_value());
}

// ---- File I/O ----

TEST(EventLoop, WritesAndReadsScatteredBuffersAtOffsets) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(16));
  TempFile file;
  ASSERT_GE(file.fd(), 0) << file.path();

  std::string a = "hello ", b = "io_uring ", c = "world";
  const iovec out[] = {iov(a), iov(b), iov(c)};
  int32_t written = INT32_MIN;
  ASSERT_OK(loop.submit_write(file.fd(), out, 4096, [&](int32_t r) { written = r; }));
  ASSERT_TRUE(run_until(loop, [&] { return written != INT32_MIN; }));
  EXPECT_EQ(written, 20);

  int32_t synced = INT32_MIN, datasynced = INT32_MIN;
  ASSERT_OK(loop.submit_fsync(file.fd(), false, [&](int32_t r) { synced = r; }));
  ASSERT_OK(loop.submit_fsync(file.fd(), true, [&](int32_t r) { datasynced = r; }));
  ASSERT_TRUE(run_until(loop, [&] { return synced != INT32_MIN && datasynced != INT32_MIN; }));
  EXPECT_EQ(synced, 0);
  EXPECT_EQ(datasynced, 0);

  const std::string contents = file.read_all();
  ASSERT_EQ(contents.size(), 4096u + 20u);
  EXPECT_EQ(contents.substr(0, 4096), std::string(4096, '\0'));
  EXPECT_EQ(contents.substr(4096), "hello io_uring world");

  // Two buffers, 5 + 100 bytes, from 6 bytes into the data: the file ends first.
  std::string head(5, '.'), tail(100, '.');
  const iovec in[] = {iov(head), iov(tail)};
  int32_t got = INT32_MIN;
  ASSERT_OK(loop.submit_read(file.fd(), in, 4096 + 6, [&](int32_t r) { got = r; }));
  ASSERT_TRUE(run_until(loop, [&] { return got != INT32_MIN; }));
  EXPECT_EQ(got, 14) << "a read past the end of the file is short";
  EXPECT_EQ(head, "io_ur");
  EXPECT_EQ(tail.substr(0, 9), "ing world");
  EXPECT_EQ(tail.substr(9), std::string(91, '.')) << "nothing written past what was read";

  int32_t beyond = INT32_MIN;
  ASSERT_OK(loop.submit_read(file.fd(), in, 1 << 20, [&](int32_t r) { beyond = r; }));
  ASSERT_TRUE(run_until(loop, [&] { return beyond != INT32_MIN; }));
  EXPECT_EQ(beyond, 0);
}

TEST(EventLoop, ThousandConcurrentWritesMoreThanTheRingHolds) {
  // 1000 writes on a 32-entry ring: most wait in the backlog, none is lost or reordered
  // into the wrong place.
  constexpr int kWrites = 1000;
  constexpr size_t kBlock = 512;
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(32));
  const size_t baseline = loop.pending_operations();
  TempFile file;
  ASSERT_GE(file.fd(), 0);
  std::vector<std::string> blocks(kWrites);
  std::vector<int32_t> results(kWrites, INT32_MIN);
  int completed = 0;
  // Submitted in a scrambled order, to distinct offsets.
  for (int n = 0; n < kWrites; ++n) {
    const int i = (n * 617) % kWrites;
    blocks[i] = std::string(kBlock, static_cast<char>('A' + i % 26));
    std::memcpy(blocks[i].data(), &i, sizeof(i));
    const iovec one[] = {iov(blocks[i])};
    ASSERT_OK(
        loop.submit_write(file.fd(), one, static_cast<uint64_t>(i) * kBlock, [&, i](int32_t r) {
          results[i] = r;
          ++completed;
        }));
  }
  EXPECT_EQ(loop.pending_operations(), baseline + kWrites);
  ASSERT_TRUE(run_until(
      loop, [&] { return completed == kWrites; }, 20s))
      << completed << " of " << kWrites;
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(results[i], static_cast<int32_t>(kBlock)) << "write " << i;
  }
  const std::string contents = file.read_all();
  ASSERT_EQ(contents.size(), kWrites * kBlock);
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(contents.compare(i * kBlock, kBlock, blocks[i]), 0) << "block " << i;
  }
  EXPECT_EQ(loop.pending_operations(), baseline);
}

TEST(EventLoop, IdleWatchesBeyondTheRingsSizeHoldUpNeitherIoNorStop) {
  // A 4-entry ring (8 completions) with 20 watches that never fire.
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(4, PollMode::kRearm));
  std::vector<EventFd> idle;
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
    ASSERT_OK(loop.add_fd_watch(efd.fd(), [] {}));
    idle.push_back(std::move(efd));
  }
  ASSERT_OK(loop.run_once(0ms));
  TempFile file;
  std::string data = "still flows";
  const iovec one[] = {iov(data)};
  int32_t written = INT32_MIN;
  ASSERT_OK(loop.submit_write(file.fd(), one, 0, [&](int32_t r) { written = r; }));
  ASSERT_TRUE(run_until(loop, [&] { return written != INT32_MIN; }));
  EXPECT_EQ(written, 11);

  std::promise<void> running;
  ASSERT_OK(loop.add_timer(0ms, [&] { running.set_value(); }));
  auto result = std::async(std::launch::async, [&] { return loop.run(); });
  ASSERT_EQ(running.get_future().wait_for(5s), std::future_status::ready);
  loop.stop();
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready) << "run() missed the stop";
  ASSERT_OK(result.get());
}

TEST(EventLoop, ErrorsArriveAsNegativeErrno) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(16));
  TempFile file;
  UniqueFd read_only(::open(file.path().c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(read_only.valid());
  UniqueFd directory(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(directory.valid());

  char buffer[16] = {};
  const iovec one[] = {iov(buffer, sizeof(buffer))};
  int32_t write_ro = 0, read_dir = 0, fsync_bad = 0, read_bad = 0;
  int done = 0;
  auto record = [&](int32_t& into) {
    return [&into, &done](int32_t r) {
      into = r;
      ++done;
    };
  };
  ASSERT_OK(loop.submit_write(read_only.get(), one, 0, record(write_ro)));
  ASSERT_OK(loop.submit_read(directory.get(), one, 0, record(read_dir)));
  ASSERT_OK(loop.submit_fsync(-1, false, record(fsync_bad)));
  ASSERT_OK(loop.submit_read(-1, one, 0, record(read_bad)));
  ASSERT_TRUE(run_until(loop, [&] { return done == 4; }));
  EXPECT_EQ(write_ro, -EBADF);
  EXPECT_EQ(read_dir, -EISDIR);
  EXPECT_EQ(fsync_bad, -EBADF);
  EXPECT_EQ(read_bad, -EBADF);
}

TEST(EventLoop, ACompletionMaySubmitTheNextOperation) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(4));
  TempFile file;
  std::string out = "chained", in(7, '.');
  const iovec write_iov[] = {iov(out)};
  const iovec read_iov[] = {iov(in)};
  int32_t read_result = INT32_MIN;
  auto read_back = [&](int32_t written) {
    EXPECT_EQ(written, 7);
    ASSERT_OK(loop.submit_read(file.fd(), read_iov, 100, [&](int32_t r) { read_result = r; }));
  };
  ASSERT_OK(loop.submit_write(file.fd(), write_iov, 100, read_back));
  ASSERT_TRUE(run_until(loop, [&] { return read_result != INT32_MIN; }));
  EXPECT_EQ(read_result, 7);
  EXPECT_EQ(in, "chained");
}

TEST(EventLoop, RejectsTooManyIovecsAndEmptyCompletions) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(4));
  std::vector<iovec> many(1025, iovec{nullptr, 0});
  auto too_many = loop.submit_read(0, many, 0, [](int32_t) {});
  ASSERT_FALSE(too_many.has_value());
  EXPECT_NE(too_many.error().message().find("IOV_MAX"), std::string::npos);
  EXPECT_FALSE(loop.submit_fsync(0, false, EventLoop::Completion{}).has_value());
  EXPECT_EQ(loop.pending_operations(), 1u) << "only the loop's own wake-up watch";
}

// ---- Timers ----

TEST(EventLoop, TimersFireInDeadlineOrder) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  std::vector<int> fired;
  const auto start = Clock::now();
  for (int ms : {30, 10, 20}) {
    ASSERT_OK(loop.add_timer(std::chrono::milliseconds(ms), [&fired, ms] { fired.push_back(ms); }));
  }
  ASSERT_TRUE(run_until(loop, [&] { return fired.size() == 3; }));
  EXPECT_GE(Clock::now() - start, 30ms);
  EXPECT_EQ(fired, (std::vector<int>{10, 20, 30}));
}

TEST(EventLoop, CancelledTimerNeverFires) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  const size_t baseline = loop.pending_operations();
  bool cancelled_fired = false, marker_fired = false;
  ASSERT_OK_AND_ASSIGN(TimerId doomed, loop.add_timer(10ms, [&] { cancelled_fired = true; }));
  ASSERT_OK_AND_ASSIGN(TimerId marker, loop.add_timer(40ms, [&] { marker_fired = true; }));
  ASSERT_OK(loop.run_once(0ms));  // both in the kernel
  ASSERT_OK(loop.cancel_timer(doomed));
  ASSERT_TRUE(run_until(loop, [&] { return marker_fired; }));
  EXPECT_FALSE(cancelled_fired);
  EXPECT_FALSE(loop.cancel_timer(doomed).has_value()) << "cancelled twice";
  EXPECT_FALSE(loop.cancel_timer(marker).has_value()) << "cancelled after it fired";
  EXPECT_TRUE(run_until(loop, [&] { return loop.pending_operations() == baseline; }));
}

TEST(EventLoop, TimerHandlerMayAddTheNextTimer) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  int ticks = 0;
  std::function<void()> tick = [&] {
    if (++ticks < 5) {
      ASSERT_OK(loop.add_timer(1ms, [&] { tick(); }));
    }
  };
  ASSERT_OK(loop.add_timer(0ms, [&] { tick(); }));
  ASSERT_TRUE(run_until(loop, [&] { return ticks == 5; }));
}

// ---- Running and stopping ----

TEST(EventLoop, RunOnceWaitsForItsTimeoutWhenIdle) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  ASSERT_OK(loop.run_once(0ms));  // the wake-up watch is armed
  const auto start = Clock::now();
  ASSERT_OK_AND_ASSIGN(size_t dispatched, loop.run_once(20ms));
  EXPECT_EQ(dispatched, 0u);
  EXPECT_GE(Clock::now() - start, 15ms);
}

TEST(EventLoop, StopFromAnotherThreadEndsRun) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  std::promise<void> running;
  ASSERT_OK(loop.add_timer(0ms, [&] { running.set_value(); }));
  auto result = std::async(std::launch::async, [&] { return loop.run(); });
  ASSERT_EQ(running.get_future().wait_for(5s), std::future_status::ready);
  std::thread stopper([&] { loop.stop(); });
  stopper.join();
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready) << "run() did not return";
  ASSERT_OK(result.get());
}

TEST(EventLoop, StopBeforeRunMakesRunReturn) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  loop.stop();
  auto result = std::async(std::launch::async, [&] { return loop.run(); });
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready) << "run() missed the stop";
  ASSERT_OK(result.get());
}

TEST(EventLoop, RunningTheLoopFromItsOwnCallbackFails) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  std::optional<Result<size_t>> nested;
  ASSERT_OK(loop.add_timer(0ms, [&] { nested = loop.run_once(0ms); }));
  ASSERT_TRUE(run_until(loop, [&] { return nested.has_value(); }));
  ASSERT_FALSE(nested->has_value());
  EXPECT_NE(nested->error().message().find("its own callbacks"), std::string::npos);
}

// ---- Destruction ----

TEST(EventLoop, DestroyingWithOutstandingOperationsCancelsThemAndLeaksNothing) {
  const int fds_before = count_open_fds();
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd pipe_read(pipe_fds[0]), pipe_write(pipe_fds[1]);
  char buffer[8] = "-------";
  bool anything_called = false;
  {
    ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
    ASSERT_OK_AND_ASSIGN(EventLoop created, EventLoop::create(8));
    std::optional<EventLoop> loop(std::move(created));
    ASSERT_OK(loop->add_fd_watch(efd.fd(), [&] { anything_called = true; }));
    ASSERT_OK(loop->add_timer(1h, [&] { anything_called = true; }));
    const iovec into[] = {iov(buffer, 7)};
    ASSERT_OK(
        loop->submit_read(pipe_read.get(), into, 0, [&](int32_t) { anything_called = true; }));
    ASSERT_OK(loop->run_once(0ms));  // all three now wait in the kernel
    // Queued behind them, never submitted:
    ASSERT_OK(loop->add_timer(1h, [&] { anything_called = true; }));
    EXPECT_EQ(loop->pending_operations(), 5u);
    const auto start = Clock::now();
    loop.reset();
    EXPECT_LT(Clock::now() - start, 2s) << "destruction waited for what it should cancel";
  }
  EXPECT_FALSE(anything_called);
  // The read was cancelled, not merely abandoned: data written now stays in the pipe.
  ASSERT_EQ(::write(pipe_write.get(), "abc", 3), 3);
  char readback[4] = {};
  EXPECT_EQ(::read(pipe_read.get(), readback, 3), 3);
  EXPECT_STREQ(readback, "abc");
  EXPECT_STREQ(buffer, "-------");
  pipe_read.reset();
  pipe_write.reset();
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST(EventLoop, ManyCreateDestroyCyclesLeakNoFds) {
  const int fds_before = count_open_fds();
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
    ASSERT_OK(loop.add_timer(1h, [] {}));
    ASSERT_OK(loop.run_once(0ms));
  }
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST(EventLoop, CreateRejectsAnEmptyRing) {
  auto loop = EventLoop::create(0);
  ASSERT_FALSE(loop.has_value());
  EXPECT_NE(loop.error().message().find("at least one entry"), std::string::npos);
}

}  // namespace
}  // namespace dsec::io
