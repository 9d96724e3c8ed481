// What a virtio device (block, net, vsock, ...) gives its transport. The transport does
// the common part of the spec (status, feature negotiation, queue setup, interrupts); the
// device does its own configuration space and its queues' requests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/virtio/interrupt.h"
#include "vmm/devices/virtio/queue.h"

namespace dsec::virtio {

class VirtioDevice {
 public:
  virtual ~VirtioDevice() = default;

  // The virtio device ID (5, "Device Types"); never 0, which Linux takes for "no device".
  virtual uint32_t device_type() const = 0;
  // Feature bits the device offers. VIRTIO_F_VERSION_1 is mandatory: the transport offers
  // it whatever this returns. VIRTIO_F_INDIRECT_DESC and VIRTIO_F_EVENT_IDX are handled by
  // VirtQueue; a device offers them if it pops its queues with VirtQueue::pop().
  virtual uint64_t features() const = 0;
  // One entry per queue: its maximum size, a power of two in [1, kMaxQueueSize].
  virtual std::vector<uint16_t> queue_max_sizes() const = 0;

  // Configuration space. `offset` is relative to its start and data.size() is the guest's
  // access width; both come from the guest, so offset + data.size() may pass the end of
  // the space. read_config() gets `data` zero-filled; see copy_config() below.
  virtual void read_config(uint64_t offset, std::span<uint8_t> data) const = 0;
  virtual void write_config(uint64_t offset, std::span<const uint8_t> data) = 0;

  // The driver set DRIVER_OK. `queues` holds every queue of the device, configured and
  // validated where ready; a queue that is not ready is one the driver does not use.
  // `features` is what the driver accepted. The spans and the interrupt stay valid until
  // reset() returns; until then the transport touches no queue. An Error makes the
  // transport set DEVICE_NEEDS_RESET.
  virtual Status activate(std::span<VirtQueue> queues, uint64_t features,
                          std::shared_ptr<VirtioInterrupt> interrupt) = 0;
  // The driver reset the device (status 0). After this returns the device no longer
  // touches the queues or the interrupt it was activated with, and is as before activate.
  // Called on an inactive device too.
  virtual void reset() = 0;
  // The driver notified `queue` (index < queue_max_sizes().size()) that it has new
  // buffers. Called only while the device is active; from a vCPU thread through the
  // QueueNotify register, or from the event loop through an ioeventfd.
  virtual void notify(uint16_t queue) = 0;

  // What the device adds to its transport's describe() for a person looking at a stuck
  // device (vsock: its streams and their credit), one item per line; empty by default.
  // Called on the event-loop thread.
  virtual std::string describe_state() const { return {}; }

  // Snapshots. All of these run on the event-loop thread, with the vCPUs parked.
  //
  // Brings the device to rest: it takes no new chain from its queues, and finishes or
  // gives back what it holds, so that guest memory, the transport's state and
  // save_state() are the whole device. Returns false while it must wait (block: requests
  // in flight); the caller lets the loop turn and asks again. Called on an inactive device
  // too.
  virtual bool quiesce() { return true; }
  // Takes work again after a snapshot (or a failed one) and serves what the driver queued
  // meanwhile; the caller then notifies every ready queue.
  virtual void resume_after_quiesce() {}
  // The device's own state beyond the transport's (what the guest read of its
  // configuration, counters it must keep), as bytes for the state file.
  virtual std::vector<uint8_t> save_state() const { return {}; }
  // On a freshly created device, before its transport is restored: checks that the
  // device still fits what the guest saw (a disk's size) and takes the counters. The bytes
  // come from a state file: hostile.
  virtual Status restore_state(std::span<const uint8_t> /*state*/) { return ok(); }

 protected:
  VirtioDevice() = default;
  VirtioDevice(const VirtioDevice&) = default;
  VirtioDevice& operator=(const VirtioDevice&) = default;
};

// Copies what `config` holds of [offset, offset + data.size()) into data, leaving bytes past
// its end as they are. For read_config() of a device whose configuration is a byte array.
inline void copy_config(std::span<const uint8_t> config, uint64_t offset, std::span<uint8_t> data) {
  if (offset >= config.size()) {
    return;
  }
  const auto available = config.subspan(offset);
  std::copy_n(available.begin(), std::min(available.size(), data.size()), data.begin());
}

}  // namespace dsec::virtio
