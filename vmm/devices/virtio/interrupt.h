// How a virtio device notifies its driver: the interrupt status bits the transport shows
// the driver, the configuration generation, DEVICE_NEEDS_RESET, and the interrupt line.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>

namespace dsec::virtio {

// InterruptStatus bits (4.2.2, virtio-mmio; PCI's ISR has the same two).
inline constexpr uint32_t kInterruptUsedBuffer = 0x1;
inline constexpr uint32_t kInterruptConfigChange = 0x2;

// Shared by a transport (which reads and acknowledges it from vCPU threads) and its active
// device (which signals from the event loop). Thread-safe.
class VirtioInterrupt {
 public:
  // Called with true at every signal, even while the line is already up, and with false
  // when the driver's acknowledgement clears the last status bit or a reset does. An irqfd
  // (edge) consumer writes its eventfd on true and ignores false; a level consumer
  // (KVM_IRQ_LINE) sets the level it is given. It runs under this object's lock, so that
  // levels arrive in order: it must not call back into this object.
  using Line = std::function<void(bool raised)>;

  explicit VirtioInterrupt(Line line) : line_(std::move(line)) {}

  // The device returned buffers to a queue (a "used buffer notification").
  void signal_used_buffer();
  // The device changed its configuration space: bumps the configuration generation too.
  void signal_config_change();
  // The device hit an error it cannot recover from without a reset (a broken queue, say):
  // sets DEVICE_NEEDS_RESET and, as 2.1.2 requires once DRIVER_OK is set, sends a
  // configuration change notification.
  void signal_needs_reset();

  uint32_t status() const;
  uint32_t config_generation() const;
  bool needs_reset() const;

  // The driver's InterruptACK: clears `bits`.
  void acknowledge(uint32_t bits);
  // A device reset: no status bits, no DEVICE_NEEDS_RESET; the generation is kept, so that
  // a driver never sees an old generation again.
  void reset();
  // A snapshot's values, without touching the line (the restored interrupt controller
  // already holds its state).
  void restore(uint32_t status, uint32_t config_generation, bool needs_reset);

 private:
  void raise(uint32_t bits);  // with mutex_ held

  mutable std::mutex mutex_;
  const Line line_;
  uint32_t status_ = 0;
  uint32_t config_generation_ = 0;
  bool needs_reset_ = false;
};

}  // namespace dsec::virtio
