#include "vmm/machine/guest_profiler.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <utility>

namespace dsec::machine {

GuestProfiler::GuestProfiler(std::chrono::microseconds interval, std::function<void()> kick,
                             std::function<bool()> on_thread_start)
    : interval_(std::clamp(interval, kMinInterval, kMaxInterval)),
      kick_(std::move(kick)),
      on_thread_start_(std::move(on_thread_start)) {}

GuestProfiler::~GuestProfiler() {
  stop();
}

void GuestProfiler::start() {
  start_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { loop(); });
}

void GuestProfiler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void GuestProfiler::loop() {
  pthread_setname_np(pthread_self(), "dsec-profiler");
  if (on_thread_start_ && !on_thread_start_()) {
    return;
  }
  std::unique_lock lock(mutex_);
  auto next = std::chrono::steady_clock::now() + interval_;
  while (!wake_.wait_until(lock, next, [this] { return stopping_; })) {
    lock.unlock();
    kick_();
    lock.lock();
    // A fixed rate, not a fixed gap: a slow kick does not stretch the interval.
    next = std::max(next + interval_, std::chrono::steady_clock::now());
  }
}

void GuestProfiler::record(uint32_t vcpu, uint64_t rip) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  samples_.push_back({vcpu, now - start_, rip});
}

std::vector<GuestProfiler::Sample> GuestProfiler::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

Status GuestProfiler::write(const std::string& path, const std::vector<Sample>& samples,
                            std::chrono::microseconds interval) {
  const std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!file) {
    return fail_errno(fmt::format("cannot write the guest profile to {}", path), errno,
                      "give --profile-guest a path in a writable directory");
  }
  fmt::print(file.get(),
             "# dsec-vmm guest profile: {} samples, one every {} us per vCPU\n"
             "# vcpu microseconds_since_start rip\n",
             samples.size(), interval.count());
  for (const Sample& s : samples) {
    fmt::print(file.get(), "{} {} {:x}\n", s.vcpu,
               std::chrono::duration_cast<std::chrono::microseconds>(s.since_start).count(), s.rip);
  }
  if (std::fflush(file.get()) != 0 || std::ferror(file.get()) != 0) {
    return fail_errno(fmt::format("cannot write the guest profile to {}", path), errno);
  }
  return ok();
}

}  // namespace dsec::machine
