// virtio-rng, the entropy device (virtio 1.2, 5.4): one request queue, no configuration
// space, no device-specific features. Each chain the driver offers is filled with bytes
// from the host kernel's CSPRNG (getrandom(2)). Firecracker's entropy rate_limiter counts
// each chain as one op and the bytes it asks for (at most kMaxBytesPerRequest) as its
// bandwidth; a chain out of tokens stays in the ring until the limiter's timer on the
// device's event loop says they are there.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/log_rate_limiter.h"
#include "vmm/devices/device_metrics.h"
#include "vmm/devices/rate_limiter.h"
#include "vmm/devices/virtio/virtio_device.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

class VirtioRng final : public VirtioDevice {
 public:
  static constexpr uint16_t kQueueSize = 256;
  // At most this many bytes per chain: the driver asks for what it wants and gets the
  // used length back, so a huge chain cannot keep the device busy for long.
  static constexpr uint32_t kMaxBytesPerRequest = 64 * 1024;

  // `memory` and `loop` must outlive the device; the device is served on `loop`'s thread.
  VirtioRng(GuestMemory& memory, io::EventLoop& loop,
            const devices::RateLimiterConfig& rate_limiter = {});

  uint32_t device_type() const override { return kDeviceIdEntropy; }
  uint64_t features() const override;
  std::vector<uint16_t> queue_max_sizes() const override { return {kQueueSize}; }
  void read_config(uint64_t, std::span<uint8_t>) const override {}  // none: reads as zero
  void write_config(uint64_t, std::span<const uint8_t>) override {}
  Status activate(std::span<VirtQueue> queues, uint64_t features,
                  std::shared_ptr<VirtioInterrupt> interrupt) override;
  void reset() override;
  // Serves every available chain: each device-writable buffer gets random bytes, up to
  // kMaxBytesPerRequest per chain; device-readable buffers are left alone. A broken queue
  // (malformed chain, bad ring index) makes the device signal DEVICE_NEEDS_RESET.
  void notify(uint16_t queue) override;

  // What the device counted (any thread may read it).
  const std::shared_ptr<devices::EntropyMetrics>& metrics() const { return metrics_; }

 private:
  // Whether the chain may be served now, by the rate limiter.
  bool admit(const DescriptorChain& chain);

  // Fills the chain's writable buffers; returns the bytes written.
  uint32_t fill(const DescriptorChain& chain);

  GuestMemory& memory_;
  std::span<VirtQueue> queues_;
  std::shared_ptr<VirtioInterrupt> interrupt_;
  LogRateLimiter log_limiter_;
  std::optional<devices::LoopRateLimiter> rate_limiter_;  // with a limit configured
  const std::shared_ptr<devices::EntropyMetrics> metrics_ =
      std::make_shared<devices::EntropyMetrics>();
};

}  // namespace dsec::virtio
