// virtio-mmio, version 2 ("modern"; virtio 1.2, 4.2): the register file a guest driver
// uses to find, negotiate with, set up and reset one VirtioDevice, mapped as one BusDevice.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/bus_device.h"
#include "vmm/devices/virtio/interrupt.h"
#include "vmm/devices/virtio/queue.h"
#include "vmm/devices/virtio/virtio_device.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// Register offsets (4.2.2, table "MMIO Device Register Layout").
namespace mmio {
inline constexpr uint64_t kMagicValue = 0x000;
inline constexpr uint64_t kVersion = 0x004;
inline constexpr uint64_t kDeviceId = 0x008;
inline constexpr uint64_t kVendorId = 0x00c;
inline constexpr uint64_t kDeviceFeatures = 0x010;
inline constexpr uint64_t kDeviceFeaturesSel = 0x014;
inline constexpr uint64_t kDriverFeatures = 0x020;
inline constexpr uint64_t kDriverFeaturesSel = 0x024;
inline constexpr uint64_t kQueueSel = 0x030;
inline constexpr uint64_t kQueueNumMax = 0x034;
inline constexpr uint64_t kQueueNum = 0x038;
inline constexpr uint64_t kQueueReady = 0x044;
inline constexpr uint64_t kQueueNotify = 0x050;
inline constexpr uint64_t kInterruptStatus = 0x060;
inline constexpr uint64_t kInterruptAck = 0x064;
inline constexpr uint64_t kStatus = 0x070;
inline constexpr uint64_t kQueueDescLow = 0x080;
inline constexpr uint64_t kQueueDescHigh = 0x084;
inline constexpr uint64_t kQueueDriverLow = 0x090;
inline constexpr uint64_t kQueueDriverHigh = 0x094;
inline constexpr uint64_t kQueueDeviceLow = 0x0a0;
inline constexpr uint64_t kQueueDeviceHigh = 0x0a4;
inline constexpr uint64_t kShmLenLow = 0x0b0;
inline constexpr uint64_t kShmLenHigh = 0x0b4;
inline constexpr uint64_t kShmBaseLow = 0x0b8;
inline constexpr uint64_t kShmBaseHigh = 0x0bc;
inline constexpr uint64_t kConfigGeneration = 0x0fc;
inline constexpr uint64_t kConfig = 0x100;

inline constexpr uint32_t kMagic = 0x74726976;  // "virt"
inline constexpr uint32_t kVersion2 = 2;
inline constexpr uint32_t kDsecVendorId = 0x43455344;  // "DSEC"
// One device's register window, the slot size of x86_64/layout.h.
inline constexpr uint64_t kWindowSize = 0x1000;
}  // namespace mmio

// Everything the transport is, for a snapshot: what the driver wrote and negotiated, the
// interrupt state, and each queue's state (QueueState). A snapshot reads it while the
// device is paused, since the active device moves the queues' indices.
struct TransportState {
  uint32_t status = 0;  // DEVICE_NEEDS_RESET included
  uint32_t device_features_sel = 0;
  uint32_t driver_features_sel = 0;
  uint64_t driver_features = 0;  // as the driver wrote them; accepted once FEATURES_OK is set
  uint32_t queue_sel = 0;
  uint32_t interrupt_status = 0;
  uint32_t config_generation = 0;
  std::vector<QueueState> queues;

  bool operator==(const TransportState&) const = default;
};

// What the guest sees:
// - Registers are 32 bits wide and must be accessed so (4.2.2.2). Any other width or an
//   unaligned offset reads as zero and writes are dropped. The configuration space from
//   0x100 takes accesses of any width; what lies past the device's space reads as zero.
// - Feature negotiation: DriverFeatures is taken only between DRIVER and FEATURES_OK.
//   Setting FEATURES_OK fails (the bit does not stick, 3.1.1 step 6) if the driver accepted
//   a feature the device did not offer, or did not accept VIRTIO_F_VERSION_1.
// - Status: the driver may only add bits, in the order ACKNOWLEDGE, DRIVER, FEATURES_OK,
//   DRIVER_OK, or set FAILED; a write that clears a bit or skips a step is ignored, and
//   after FAILED only a reset is taken. Writing 0 resets the device, its queues and the
//   interrupt status. DEVICE_NEEDS_RESET belongs to the device; the driver cannot set it.
// - Queues are configured (QueueNum, addresses, QueueReady) only after FEATURES_OK and
//   before DRIVER_OK; other writes are ignored. A queue that does not exist reads
//   QueueNumMax 0.
// - DRIVER_OK validates each ready queue against guest memory and activates the device.
//   If that fails the device stays inactive and shows DEVICE_NEEDS_RESET.
// - QueueNotify reaches the device only while it is active and the queue is ready.
//
// Thread-safe: vCPU threads may access the registers concurrently.
class MmioTransport final : public devices::BusDevice {
 public:
  // Fails if the device's queue sizes are invalid or it offers no queue.
  static Result<std::unique_ptr<MmioTransport>> create(GuestMemory& memory,
                                                       std::unique_ptr<VirtioDevice> device,
                                                       VirtioInterrupt::Line interrupt_line);

  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

  // A queue notification that bypassed the register file (a KVM ioeventfd on
  // QueueNotify): reaches the device exactly as a QueueNotify write would, only while it
  // is active and the queue ready. Any thread.
  void notify(uint32_t queue);

  TransportState state() const;
  // For a person looking at a stuck device: the device type and status, the interrupt
  // status, each queue (VirtQueue::describe) and the device's own lines
  // (VirtioDevice::describe_state), one per line. Call it on the devices' event-loop
  // thread: an active device moves its queues there or under this transport's lock.
  std::string describe() const;
  // Puts a freshly created transport in `state`, activating the device if it was live.
  // Fails, and leaves the transport reset, if the state does not fit this device (queue
  // count, a queue size above its maximum); a queue configuration that fails validation
  // restores as a device showing DEVICE_NEEDS_RESET, as it would have run.
  Status restore(const TransportState& state);

  // Features offered to the driver: the device's and VIRTIO_F_VERSION_1.
  uint64_t device_features() const { return device_features_; }
  bool active() const;
  // The device's interrupt; a device signals configuration changes through it even while
  // inactive.
  const std::shared_ptr<VirtioInterrupt>& interrupt() const { return interrupt_; }
  VirtioDevice& device() { return *device_; }

 private:
  MmioTransport(GuestMemory& memory, std::unique_ptr<VirtioDevice> device,
                std::vector<VirtQueue> queues, VirtioInterrupt::Line interrupt_line);

  // All below run with mutex_ held.
  uint32_t read_register(uint64_t offset) const;
  void write_register(uint64_t offset, uint32_t value);
  void write_status(uint32_t value);
  bool features_acceptable() const;
  void activate();
  void reset();
  void notify_locked(uint32_t queue);
  uint32_t status() const;
  bool queue_setup_allowed() const;
  // The queue QueueSel selects, or nullptr.
  VirtQueue* selected_queue();
  const VirtQueue* selected_queue() const;

  mutable std::mutex mutex_;
  GuestMemory& memory_;
  const std::unique_ptr<VirtioDevice> device_;
  const uint64_t device_features_;
  const std::shared_ptr<VirtioInterrupt> interrupt_;
  // Fixed in number at creation: the active device holds a span over it.
  std::vector<VirtQueue> queues_;

  uint32_t status_ = 0;  // DEVICE_NEEDS_RESET lives in interrupt_
  uint32_t device_features_sel_ = 0;
  uint32_t driver_features_sel_ = 0;
  uint64_t driver_features_ = 0;
  uint32_t queue_sel_ = 0;
  bool active_ = false;
};

}  // namespace dsec::virtio
