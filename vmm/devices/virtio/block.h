// virtio-blk (virtio 1.2, 5.2) on a host file or block device, with its I/O on the VM's
// io_uring event loop: one request queue, reads and writes straight between the file and
// guest memory (readv/writev), FLUSH as fdatasync, GET_ID from a configured or derived
// serial.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/device_metrics.h"
#include "vmm/devices/rate_limiter_config.h"
#include "vmm/devices/virtio/block_request.h"
#include "vmm/devices/virtio/virtio_device.h"
#include "vmm/io/event_loop.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// Feature bits (5.2.3).
inline constexpr unsigned kBlkFeatureSegMax = 2;
inline constexpr unsigned kBlkFeatureRo = 5;
inline constexpr unsigned kBlkFeatureBlkSize = 6;
inline constexpr unsigned kBlkFeatureFlush = 9;

inline constexpr uint16_t kBlockQueueSize = 256;
// seg_max: the queue size less the header's and the status's descriptors, as QEMU offers;
// far below IOV_MAX.
inline constexpr uint32_t kBlockSegMax = kBlockQueueSize - 2;

// struct virtio_blk_config (5.2.4) up to blk_size; the fields past it (topology,
// writeback, discard, ...) belong to features not offered and read as zero.
namespace blk_config {
inline constexpr uint64_t kCapacity = 0;   // le64, in 512-byte sectors
inline constexpr uint64_t kSizeMax = 8;    // le32
inline constexpr uint64_t kSegMax = 12;    // le32
inline constexpr uint64_t kGeometry = 16;  // le16 cylinders, u8 heads, u8 sectors
inline constexpr uint64_t kBlkSize = 20;   // le32
inline constexpr uint64_t kSize = 24;
}  // namespace blk_config

struct BlockOptions {
  bool read_only = false;
  // GET_ID's answer: its first 20 bytes (the serial holds no more, 5.2.6); empty: one
  // derived from the file's device and inode.
  std::string id;
  // Firecracker's rate_limiter: each request is one op, and a read's or write's data its
  // bytes (a flush or GET_ID none).
  devices::RateLimiterConfig rate_limiter{};
};

// What the guest sees of the disk beyond the transport's state (TransportState): plain
// data, so that a snapshot can save it and a restore can check the disk still fits it.
struct BlockDeviceState {
  uint64_t capacity_sectors = 0;
  bool read_only = false;
  std::array<uint8_t, kBlkIdBytes> id{};  // NUL-padded

  bool operator==(const BlockDeviceState&) const = default;
};

// Threading: notify() and the I/O completions run on the event loop's thread (the driver's
// QueueNotify reaches the device through an ioeventfd served by that loop); activate() and
// reset() may come from a vCPU thread at the same time and are serialised with them by the
// device's lock. After reset() no completion touches the queue or the interrupt; a read
// already in the kernel may still land in guest memory. Requests in flight keep the
// device's shared core alive, so the device may be destroyed before they complete; the
// guest memory and the loop must outlive every request the loop still holds. A device out
// of its rate limiter's tokens leaves the next chain in the ring and takes it when a timer
// on the loop says the tokens are there.
class VirtioBlock final : public VirtioDevice {
 public:
  // Opens `path` (read-only when options.read_only). Fails, naming the file, if it does not
  // exist or cannot be opened, is neither a regular file nor a block device, is empty or
  // its size is not a multiple of 512.
  static Result<std::unique_ptr<VirtioBlock>> create(const std::string& path,
                                                     const BlockOptions& options,
                                                     GuestMemory& memory, io::EventLoop& loop);
  ~VirtioBlock() override;
  VirtioBlock(const VirtioBlock&) = delete;
  VirtioBlock& operator=(const VirtioBlock&) = delete;

  uint32_t device_type() const override { return kDeviceIdBlock; }
  uint64_t features() const override;
  std::vector<uint16_t> queue_max_sizes() const override { return {kBlockQueueSize}; }
  void read_config(uint64_t offset, std::span<uint8_t> data) const override;
  // Every field this device offers is read-only (no VIRTIO_BLK_F_CONFIG_WCE): ignored.
  void write_config(uint64_t offset, std::span<const uint8_t> data) override;
  Status activate(std::span<VirtQueue> queues, uint64_t features,
                  std::shared_ptr<VirtioInterrupt> interrupt) override;
  void reset() override;
  void notify(uint16_t queue) override;
  // Snapshots: stops taking chains and waits for the requests in flight; the state is
  // BlockDeviceState, checked at restore against the drive given then.
  bool quiesce() override;
  void resume_after_quiesce() override;
  std::vector<uint8_t> save_state() const override;
  Status restore_state(std::span<const uint8_t> bytes) override;

  // A new rate limiter (Firecracker's PATCH /drives/{id}), in force from the next request;
  // requests the old one held back are taken now if the new one lets them. On the loop's
  // thread.
  void set_rate_limiter(const devices::RateLimiterConfig& config);

  // Firecracker's PATCH /drives/{id} with path_on_host: the disk is the file at `path` from
  // the next request on, opened as create() opens one (read-only if the drive is), with its
  // capacity in the configuration space and, once a driver is active, a configuration
  // change notification. Requests in flight end on the old file, which is closed after
  // them. The serial stays. A file that cannot be a disk changes nothing. Any thread.
  Status replace_disk(const std::string& path);

  std::string path() const;
  const BlockDeviceState& state() const;
  // What the device counted (any thread may read it).
  std::shared_ptr<devices::BlockMetrics> metrics() const;
  // Requests submitted to the loop and not yet completed; a snapshot waits for 0.
  std::size_t requests_in_flight() const;

 private:
  struct Core;  // shared with the completions of requests in flight

  explicit VirtioBlock(std::shared_ptr<Core> core);

  std::shared_ptr<Core> core_;
};

}  // namespace dsec::virtio
