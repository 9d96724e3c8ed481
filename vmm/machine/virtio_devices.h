// The VM's virtio-mmio devices, wired to KVM: each sits on the MMIO bus in its slot of
// x86_64/layout.h, raises its interrupt through an irqfd on the slot's IRQ, and gets its
// queue notifications through one ioeventfd per queue, served by the VM's event-loop
// thread. The guest finds them through `virtio_mmio.device=` parameters on its command
// line (virtio_cmdline()).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/bus.h"
#include "vmm/devices/device_metrics.h"
#include "vmm/devices/virtio/block.h"
#include "vmm/devices/virtio/mmio_transport.h"
#include "vmm/devices/virtio/net/net.h"
#include "vmm/devices/virtio/vsock/vsock.h"
#include "vmm/io/event_fd.h"
#include "vmm/io/event_loop_thread.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/machine_config.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::machine {

enum class VirtioDeviceKind { kBlock, kVsock, kNet, kRng };

// One device to create: its kind and, for the kinds that have one, its configuration.
struct VirtioDeviceSpec {
  VirtioDeviceKind kind{};
  DriveConfig drive;                              // kBlock
  VsockConfig vsock;                              // kVsock
  NetConfig net;                                  // kNet
  std::optional<mmds::MmdsConfig> mmds{};         // kNet: the MMDS answers on it
  devices::RateLimiterConfig rng_rate_limiter{};  // kRng

  bool operator==(const VirtioDeviceSpec&) const = default;
};

// The virtio devices `config` asks for, in slot order: device i goes in slot i.
std::vector<VirtioDeviceSpec> virtio_devices(const MachineConfig& config);

// The kernel command-line parameters that announce those devices, space-separated; empty
// when there are none.
std::string virtio_cmdline(const MachineConfig& config);

class VirtioDevices {
 public:
  // Creates `specs` (slot order) over `memory`, maps each transport on `mmio` and
  // registers its irqfd and ioeventfds with `vm`. `vm`, `memory` and `mmio` must outlive
  // this object. Nothing runs until start().
  static Result<std::unique_ptr<VirtioDevices>> create(kvm::Vm& vm, GuestMemory& memory,
                                                       devices::Bus& mmio,
                                                       const std::vector<VirtioDeviceSpec>& specs);

  VirtioDevices(const VirtioDevices&) = delete;
  VirtioDevices& operator=(const VirtioDevices&) = delete;
  // Stops the event-loop thread, then unregisters the ioeventfds and irqfds.
  ~VirtioDevices();

  // Starts the event-loop thread; `on_exit` and `setup` as for io::EventLoopThread::start().
  Status start(io::EventLoopThread::ExitHandler on_exit = {},
               io::EventLoopThread::ThreadStart setup = {});
  // Stops and joins the event-loop thread: no notification reaches a device after this.
  Status stop();

  // Logs every device's describe() (MmioTransport::describe), from the event-loop thread
  // and in its turn, so that the queues are read between two pieces of device work. Safe
  // from any thread, also a signal watcher's; while the loop is stopped the request waits
  // for its next start.
  void request_state_log();

  // Runs `work` on the event-loop thread, between two pieces of device work, and waits
  // for it; runs it at once while the loop thread is not running, and on the stopping
  // thread if the loop stops first. Any thread but the loop's.
  void run_on_loop(std::function<void()> work);
  // Runs `work` on the calling thread while the event-loop thread waits, parked between two
  // pieces of device work, for it to finish: no device moves meanwhile, yet the work is
  // not the loop thread's (a snapshot's KVM state and files stay out of its seccomp
  // role). As run_on_loop() when the loop is not running or stops first. Any thread but
  // the loop's.
  void run_with_loop_parked(const std::function<void()>& work);

  // Snapshots, with the vCPUs parked. quiesce() brings every device to rest
  // (VirtioDevice::quiesce), letting the loop turn until they are, for at most `timeout`.
  Status quiesce(std::chrono::milliseconds timeout);
  // One slot's state: its transport's (encoded TransportState) and its device's own.
  struct SlotState {
    std::vector<uint8_t> transport;
    std::vector<uint8_t> device;
  };
  // Every slot's state, in slot order; on the loop thread (inside run_on_loop), with it
  // parked (run_with_loop_parked) or while it is not running.
  std::vector<SlotState> save() const;
  // Before start(), on devices created from the snapshot's configuration: each device
  // takes its state (and checks it still fits), then its transport, which reactivates it.
  Status restore(std::span<const SlotState> slots);
  // After a snapshot, or before the vCPUs of a restored VM run: the devices take work
  // again, every ready queue is served (the driver may have queued work the device never
  // saw) and an interrupt the driver had not taken is raised again.
  void resume();

  // A running VM's new rate limiters (Firecracker's PATCH): the `index`th drive's (in
  // MachineConfig::drives order), or the `index`th network interface's (MachineConfig::nets
  // order). In force for the device's next
  // request, set on the loop's thread (run_on_loop). Any thread but the loop's.
  Status set_drive_rate_limiter(size_t index, const devices::RateLimiterConfig& limiter);
  Status set_net_rate_limiters(size_t index, const virtio::NetRateLimiters& limiters);
  // The `index`th drive's disk is the file at `path` from now on (VirtioBlock::replace_disk:
  // the guest is told of the new size). Any thread.
  Status replace_drive_file(size_t index, const std::string& path);
  // A restored VM's vsock lets every host process's connection through (its clone sync is
  // done: VirtioVsock::admit_every_connection); nothing without a vsock device. Any
  // thread but the loop's.
  void admit_every_vsock_connection();

  // The devices' counters (their metrics report); any thread.
  const devices::DeviceMetrics& metrics() const { return metrics_; }

  size_t size() const { return transports_.size(); }
  virtio::MmioTransport& transport(size_t index) { return *transports_.at(index); }

 private:
  VirtioDevices(kvm::Vm& vm, io::EventLoop loop) : vm_(vm), loop_thread_(std::move(loop)) {}

  Status add(GuestMemory& memory, devices::Bus& mmio, size_t slot,
             std::unique_ptr<virtio::VirtioDevice> device);
  void log_state();        // on the loop thread
  void run_posted_work();  // on the loop thread

  kvm::Vm& vm_;
  // First, so that it is destroyed last: the devices use it until they are gone. Its
  // thread is stopped in the destructor, before anything else goes.
  io::EventLoopThread loop_thread_;
  // The only owners of the transports and their devices (the bus holds weak references).
  std::vector<std::shared_ptr<virtio::MmioTransport>> transports_;
  // The transports' interrupt lines hold these too (a transport lives on in the bus).
  std::vector<std::shared_ptr<const io::EventFd>> irq_events_;
  std::vector<std::unique_ptr<io::EventFd>> queue_events_;
  // Work for the loop thread (run_on_loop, request_state_log): signalled, its watch runs
  // what was posted.
  std::unique_ptr<io::EventFd> posted_event_;
  std::mutex posted_mutex_;
  std::vector<std::function<void()>> posted_;
  // run_on_loop()'s work, whose callers wait for it: run by stop() if the loop ended
  // before it, so that a caller on another thread (the API's, with a snapshot) is not
  // left waiting for a loop that is gone.
  std::vector<std::function<void()>> waited_;
  bool loop_running_ = false;  // between start() and stop(), under posted_mutex_
  // The devices the rate limiters' changes reach (owned by their transports).
  std::vector<virtio::VirtioBlock*> drives_;
  std::vector<virtio::VirtioNet*> nets_;
  virtio::VirtioVsock* vsock_ = nullptr;
  devices::DeviceMetrics metrics_;
  // KVM registrations to undo, in reverse order.
  std::vector<std::function<void()>> unregister_;
};

}  // namespace dsec::machine
