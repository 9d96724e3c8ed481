#include "vmm/devices/virtio/rng.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "vmm/devices/virtio/device_signals.h"

namespace dsec::virtio {

VirtioRng::VirtioRng(GuestMemory& memory, io::EventLoop& loop,
                     const devices::RateLimiterConfig& rate_limiter)
    : memory_(memory) {
  if (rate_limiter.limits()) {
    // Its timer never calls after the limiter, a member, is gone.
    rate_limiter_.emplace(rate_limiter, loop, [this] { notify(0); });
  }
}

uint64_t VirtioRng::features() const {
  // VirtQueue::pop() handles both; the device has no features of its own.
  return feature_bit(kFeatureIndirectDesc) | feature_bit(kFeatureEventIdx);
}

Status VirtioRng::activate(std::span<VirtQueue> queues, uint64_t /*features*/,
                           std::shared_ptr<VirtioInterrupt> interrupt) {
  if (queues.size() != 1) {
    return fail("virtio-rng: activated with " + std::to_string(queues.size()) +
                " queues instead of 1");
  }
  queues_ = queues;
  interrupt_ = std::move(interrupt);
  return ok();
}

void VirtioRng::reset() {
  queues_ = {};
  interrupt_.reset();
}

void VirtioRng::notify(uint16_t queue) {
  if (queue >= queues_.size() || !interrupt_) {
    return;  // not active, or a queue that does not exist: nothing to serve
  }
  metrics_->entropy_event_count.inc();
  serve_available_chains(
      queues_[queue], memory_, *interrupt_, {"virtio-rng", log_limiter_},
      [this](const DescriptorChain& chain) -> Result<uint32_t> {
        const uint32_t written = fill(chain);
        metrics_->entropy_bytes.add(written);
        return written;
      },
      [this](const DescriptorChain& chain) { return admit(chain); });
}

bool VirtioRng::admit(const DescriptorChain& chain) {
  if (!rate_limiter_ ||
      rate_limiter_->admit(std::min<uint64_t>(chain.writable_bytes(), kMaxBytesPerRequest))) {
    return true;
  }
  metrics_->entropy_rate_limiter_throttled.inc();
  return false;
}

uint32_t VirtioRng::fill(const DescriptorChain& chain) {
  uint32_t written = 0;
  for (const GuestRange& buffer : chain.writable) {
    const uint64_t want = std::min<uint64_t>(buffer.size, kMaxBytesPerRequest - written);
    if (want == 0) {
      break;
    }
    // The chain was checked against guest memory when it was read; span() checks again.
    auto bytes = memory_.span(buffer.base, want);
    if (!bytes) {
      break;
    }
    size_t done = 0;
    while (done < bytes->size()) {
      // Large reads may come back short or be interrupted by a signal (getrandom(2)).
      const ssize_t n = ::getrandom(bytes->data() + done, bytes->size() - done, 0);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        metrics_->host_rng_fails.inc();
        if (log_limiter_.allow()) {
          spdlog::warn("virtio-rng: getrandom: {}; the request gets {} bytes", std::strerror(errno),
                       written + done);
        }
        return written + static_cast<uint32_t>(done);
      }
      done += static_cast<size_t>(n);
    }
    written += static_cast<uint32_t>(done);
  }
  return written;
}

}  // namespace dsec::virtio
