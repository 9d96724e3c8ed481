// virtio-rng, the entropy device (virtio 1.2, 5.4): one request queue, no configuration
// space, no device-specific features. Each chain the driver offers is filled with bytes
// from the host kernel's CSPRNG (getrandom(2)).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/log_rate_limiter.h"
#include "vmm/devices/virtio/virtio_device.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

class VirtioRng final : public VirtioDevice {
 public:
  static constexpr uint16_t kQueueSize = 256;
  // At most this many bytes per chain: the driver asks for what it wants and gets the
  // used length back, so a huge chain cannot keep the device busy for long.
  static constexpr uint32_t kMaxBytesPerRequest = 64 * 1024;

  // `memory` must outlive the device.
  explicit VirtioRng(GuestMemory& memory) : memory_(memory) {}

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

 private:
  // Fills the chain's writable buffers; returns the bytes written.
  uint32_t fill(const DescriptorChain& chain);

  GuestMemory& memory_;
  std::span<VirtQueue> queues_;
  std::shared_ptr<VirtioInterrupt> interrupt_;
  LogRateLimiter log_limiter_;
};

}  // namespace dsec::virtio
