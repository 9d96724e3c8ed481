// A sampling profiler of the guest: every interval a thread kicks each vCPU out of KVM_RUN,
// and the vCPU's own thread records where the guest was (its RIP) before going back in.
// Each sample costs the guest one exit per vCPU, so a profiled boot is slower than a plain
// one: read the proportions, not the times. tools/guest-profile turns the samples into a
// per-function report with the guest kernel's symbols (docs/guest-profiling.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::machine {

class GuestProfiler {
 public:
  struct Sample {
    uint32_t vcpu = 0;
    std::chrono::nanoseconds since_start{0};  // since start()
    uint64_t rip = 0;
  };

  static constexpr std::chrono::microseconds kMinInterval{100};
  static constexpr std::chrono::microseconds kMaxInterval{1'000'000};

  // `kick` makes every vCPU leave KVM_RUN soon (VcpuThread::kick on each). The sampling
  // thread, "dsec-profiler", calls `on_thread_start` first (its seccomp filter goes in
  // there); if that returns false, it takes no samples.
  GuestProfiler(std::chrono::microseconds interval, std::function<void()> kick,
                std::function<bool()> on_thread_start = {});
  GuestProfiler(const GuestProfiler&) = delete;
  GuestProfiler& operator=(const GuestProfiler&) = delete;
  ~GuestProfiler();  // stops

  // Starts the sampling thread; the clock of the samples starts here. Call it before the
  // threads that record() start.
  void start();
  // Stops and joins the sampling thread (idempotent). record() still works after.
  void stop();

  // Called by a vCPU thread after a kick brought it out of KVM_RUN. Thread-safe.
  void record(uint32_t vcpu, uint64_t rip);
  std::vector<Sample> samples() const;

  // Writes the samples as text: a header line starting with '#', then one line per sample,
  // "<vcpu> <microseconds since start> <rip in hex>".
  static Status write(const std::string& path, const std::vector<Sample>& samples,
                      std::chrono::microseconds interval);

 private:
  void loop();

  const std::chrono::microseconds interval_;
  const std::function<void()> kick_;
  const std::function<bool()> on_thread_start_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;  // guards samples_ and stopping_
  std::condition_variable wake_;
  std::vector<Sample> samples_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dsec::machine
