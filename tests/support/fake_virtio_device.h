// A VirtioDevice for tests of the transport (and its fuzz target): it records what the
// transport does to it, and can serve its queues by returning every chain at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vmm/devices/virtio/virtio_device.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio::testing {

class FakeVirtioDevice final : public VirtioDevice {
 public:
  static constexpr uint32_t kDeviceType = 0x2a;

  FakeVirtioDevice(uint64_t features, std::vector<uint16_t> queue_max_sizes,
                   std::vector<uint8_t> config)
      : features_(features),
        queue_max_sizes_(std::move(queue_max_sizes)),
        config_(std::move(config)) {}

  // With memory set, notify() pops the queue until it is empty or broken and returns each
  // chain as used with its writable length, then signals the driver if it wants it. A
  // broken queue makes it signal DEVICE_NEEDS_RESET, as a real device would.
  GuestMemory* serve_queues_in = nullptr;
  bool fail_activation = false;
  // What describe_state() returns.
  std::string state_text;

  // What the transport did.
  int activations = 0;
  int resets = 0;
  std::vector<uint16_t> notified;
  uint64_t activated_features = 0;
  std::span<VirtQueue> queues;
  std::shared_ptr<VirtioInterrupt> interrupt;
  std::vector<uint8_t>& config() { return config_; }

  uint32_t device_type() const override { return kDeviceType; }
  uint64_t features() const override { return features_; }
  std::vector<uint16_t> queue_max_sizes() const override { return queue_max_sizes_; }

  void read_config(uint64_t offset, std::span<uint8_t> data) const override {
    copy_config(config_, offset, data);
  }
  void write_config(uint64_t offset, std::span<const uint8_t> data) override {
    for (size_t i = 0; i < data.size() && offset < config_.size() && i < config_.size() - offset;
         ++i) {
      config_[offset + i] = data[i];
    }
  }

  Status activate(std::span<VirtQueue> q, uint64_t features,
                  std::shared_ptr<VirtioInterrupt> irq) override {
    if (fail_activation) {
      return fail("the fake device was told to fail activation");
    }
    ++activations;
    queues = q;
    activated_features = features;
    interrupt = std::move(irq);
    return ok();
  }

  std::string describe_state() const override { return state_text; }
  void reset() override {
    ++resets;
    queues = {};
    interrupt.reset();
  }

  void notify(uint16_t queue) override {
    notified.push_back(queue);
    if (serve_queues_in != nullptr && queue < queues.size()) {
      serve(queues[queue]);
    }
  }

 private:
  void serve(VirtQueue& queue) {
    GuestMemory& memory = *serve_queues_in;
    bool returned = false;
    for (;;) {
      auto chain = queue.pop(memory);
      if (!chain) {
        interrupt->signal_needs_reset();
        break;
      }
      if (!chain->has_value()) {
        break;
      }
      const auto& c = **chain;
      if (!queue.add_used(memory, c.head, static_cast<uint32_t>(c.writable_bytes()))) {
        break;
      }
      returned = true;
    }
    if (returned) {
      auto wanted = queue.needs_notification(memory);
      if (!wanted || *wanted) {
        interrupt->signal_used_buffer();
      }
    }
  }

  uint64_t features_;
  std::vector<uint16_t> queue_max_sizes_;
  std::vector<uint8_t> config_;
};

}  // namespace dsec::virtio::testing
