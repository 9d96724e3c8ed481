// The io_uring event loop against what it replaces, in one run:
//   - eventfd signal -> handler -> reply round trip: EventLoop on its thread vs an
//     epoll_wait thread (the classic VMM loop);
//   - 4 KiB random reads from a tmpfs file: EventLoop at queue depth 1 and 32 vs plain
//     pread(2) on the calling thread.
// Prints Google Benchmark's table, then each pair side by side with their ratio.
// --benchmark_out=FILE --benchmark_out_format=json saves the raw figures.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "vmm/common/unique_fd.h"
#include "vmm/io/event_fd.h"
#include "vmm/io/event_loop.h"
#include "vmm/io/event_loop_thread.h"

namespace {

using dsec::UniqueFd;
using dsec::io::EventFd;
using dsec::io::EventLoop;
using dsec::io::EventLoopThread;

constexpr size_t kBlock = 4096;
constexpr size_t kFileSize = 64 << 20;

// A blocking eventfd for the benchmark thread to sleep on, as a vCPU would not but a
// client measuring latency may.
EventFd blocking_eventfd() {
  return std::move(*EventFd::create(0, EFD_CLOEXEC));
}

void BM_EventfdRoundTrip_EventLoop(benchmark::State& state) {
  auto loop = EventLoop::create(64);
  if (!loop) {
    state.SkipWithError(loop.error().message().c_str());
    return;
  }
  auto request = *EventFd::create();
  EventFd reply = blocking_eventfd();
  static_cast<void>(loop->add_fd_watch(request.fd(), [&] {
    static_cast<void>(request.consume());
    static_cast<void>(reply.signal());
  }));
  EventLoopThread thread(std::move(*loop));
  static_cast<void>(thread.start());
  for ([[maybe_unused]] auto _ : state) {
    static_cast<void>(request.signal());
    static_cast<void>(reply.consume());
  }
  static_cast<void>(thread.stop());
}
BENCHMARK(BM_EventfdRoundTrip_EventLoop)->UseRealTime();

void BM_EventfdRoundTrip_Epoll(benchmark::State& state) {
  auto request = *EventFd::create();
  auto quit = *EventFd::create();
  EventFd reply = blocking_eventfd();
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = request.fd();
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, request.fd(), &ev);
  ev.data.fd = quit.fd();
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, quit.fd(), &ev);
  std::thread server([&] {
    for (;;) {
      epoll_event ready[4];
      const int n = ::epoll_wait(epoll.get(), ready, 4, -1);
      for (int i = 0; i < n; ++i) {
        if (ready[i].data.fd == quit.fd()) {
          return;
        }
        static_cast<void>(request.consume());
        static_cast<void>(reply.signal());
      }
    }
  });
  for ([[maybe_unused]] auto _ : state) {
    static_cast<void>(request.signal());
    static_cast<void>(reply.consume());
  }
  static_cast<void>(quit.signal());
  server.join();
}
BENCHMARK(BM_EventfdRoundTrip_Epoll)->UseRealTime();

// A 64 MiB file on tmpfs, so that the figures measure the I/O path, not a disk.
struct ShmFile {
  ShmFile() {
    std::string path = "/dev/shm/dsec-io-bench-XXXXXX";
    fd.reset(::mkostemp(path.data(), O_CLOEXEC));
    ::unlink(path.c_str());
    std::vector<char> chunk(1 << 20, 'x');
    for (size_t off = 0; off < kFileSize; off += chunk.size()) {
      benchmark::DoNotOptimize(::pwrite(fd.get(), chunk.data(), chunk.size(), off));
    }
  }
  UniqueFd fd;
};

uint64_t random_block(std::mt19937_64& rng) {
  return (rng() % (kFileSize / kBlock)) * kBlock;
}

void BM_RandomRead4K_EventLoop(benchmark::State& state) {
  const auto depth = static_cast<size_t>(state.range(0));
  ShmFile file;
  auto loop = EventLoop::create(64);
  if (!file.fd || !loop) {
    state.SkipWithError("setup failed");
    return;
  }
  std::mt19937_64 rng(42);
  std::vector<char> buffers(depth * kBlock);
  size_t ready = 0;  // completions not yet counted as iterations
  bool failed = false;
  // Each buffer has one read in flight; its completion starts the next one.
  std::function<void(size_t)> issue = [&](size_t slot) {
    const iovec one{buffers.data() + slot * kBlock, kBlock};
    static_cast<void>(
        loop->submit_read(file.fd.get(), {&one, 1}, random_block(rng), [&, slot](int32_t r) {
          failed |= r != static_cast<int32_t>(kBlock);
          ++ready;
          issue(slot);
        }));
  };
  for (size_t slot = 0; slot < depth; ++slot) {
    issue(slot);
  }
  for ([[maybe_unused]] auto _ : state) {
    while (ready == 0) {
      static_cast<void>(loop->run_once(std::chrono::seconds(1)));
    }
    --ready;
  }
  if (failed) {
    state.SkipWithError("a read came back short or failed");
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBlock));
}
BENCHMARK(BM_RandomRead4K_EventLoop)->Arg(1)->Arg(32)->UseRealTime();

void BM_RandomRead4K_Pread(benchmark::State& state) {
  ShmFile file;
  std::mt19937_64 rng(42);
  std::vector<char> buffer(kBlock);
  for ([[maybe_unused]] auto _ : state) {
    if (::pread(file.fd.get(), buffer.data(), kBlock, static_cast<off_t>(random_block(rng))) !=
        static_cast<ssize_t>(kBlock)) {
      state.SkipWithError("pread failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBlock));
}
BENCHMARK(BM_RandomRead4K_Pread)->UseRealTime();

// Keeps each run's time per iteration, for the side-by-side summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && !run.error_occurred) {
        ns_per_op_[run.benchmark_name()] = run.GetAdjustedRealTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void print_summary() const {
    std::printf("\nSide by side (lower time is better; ratio = dsec EventLoop / peer)\n");
    compare("eventfd round trip", "BM_EventfdRoundTrip_EventLoop/real_time",
            "BM_EventfdRoundTrip_Epoll/real_time", "epoll thread");
    compare("4 KiB random read, QD1", "BM_RandomRead4K_EventLoop/1/real_time",
            "BM_RandomRead4K_Pread/real_time", "pread");
    compare("4 KiB random read, QD32", "BM_RandomRead4K_EventLoop/32/real_time",
            "BM_RandomRead4K_Pread/real_time", "pread");
  }

 private:
  void compare(const char* what, const std::string& ours, const std::string& peer,
               const char* peer_name) const {
    const auto a = ns_per_op_.find(ours);
    const auto b = ns_per_op_.find(peer);
    if (a == ns_per_op_.end() || b == ns_per_op_.end()) {
      return;  // filtered out or failed
    }
    std::printf(
        "  %-24s EventLoop %9.0f ns/op (%8.0f k/s) | %-12s %9.0f ns/op (%8.0f k/s) | "
        "ratio %.2f\n",
        what, a->second, 1e6 / a->second, peer_name, b->second, 1e6 / b->second,
        a->second / b->second);
  }

  std::map<std::string, double> ns_per_op_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
