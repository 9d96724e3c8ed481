#include "vmm/mmds/net_stack.h"
#include "vmm/machine/virtio_devices.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <thread>

#include "vmm/arch/x86_64/layout.h"
#include "vmm/devices/virtio/block.h"
#include "vmm/devices/virtio/mmio_cmdline.h"
#include "vmm/devices/virtio/net/net.h"
#include "vmm/devices/virtio/rng.h"
#include "vmm/devices/virtio/transport_state_codec.h"
#include "vmm/devices/virtio/vsock/vsock.h"
#include "vmm/machine/config_parts.h"

namespace dsec::machine {
namespace {

// What the MMIO bus holds for a transport: a weak reference, so that the devices die with
// VirtioDevices, before the event loop their destructors unregister from, whatever else
// still holds the bus. Accesses after that read as nothing there (all ones).
class TransportOnBus final : public devices::BusDevice {
 public:
  explicit TransportOnBus(std::weak_ptr<virtio::MmioTransport> transport)
      : transport_(std::move(transport)) {}
  void read(uint64_t offset, std::span<uint8_t> data) override {
    if (auto t = transport_.lock()) {
      t->read(offset, data);
    } else {
      std::fill(data.begin(), data.end(), uint8_t{0xff});
    }
  }
  void write(uint64_t offset, std::span<const uint8_t> data) override {
    if (auto t = transport_.lock()) {
      t->write(offset, data);
    }
  }

 private:
  std::weak_ptr<virtio::MmioTransport> transport_;
};

}  // namespace

std::vector<VirtioDeviceSpec> virtio_devices(const MachineConfig& config) {
  std::vector<VirtioDeviceSpec> specs;
  for (const auto& drive : config.drives) {
    VirtioDeviceSpec spec;
    spec.kind = VirtioDeviceKind::kBlock;
    spec.drive = drive;
    specs.push_back(spec);
  }
  if (config.vsock) {
    VirtioDeviceSpec spec;
    spec.kind = VirtioDeviceKind::kVsock;
    spec.vsock = *config.vsock;
    specs.push_back(spec);
  }
  for (size_t i = 0; i < config.nets.size(); ++i) {
    VirtioDeviceSpec spec;
    spec.kind = VirtioDeviceKind::kNet;
    spec.net = config.nets[i];
    spec.net.mac = config.nets[i].guest_mac(i);  // the default MAC is its place's
    if (config.mmds && std::ranges::count(config.mmds->network_interfaces,
                                          config.nets[i].iface_id()) > 0) {
      spec.mmds = config.mmds;
    }
    specs.push_back(spec);
  }
  if (config.rng) {
    VirtioDeviceSpec spec;
    spec.kind = VirtioDeviceKind::kRng;
    spec.rng_rate_limiter = config.rng_rate_limiter;
    specs.push_back(spec);
  }
  return specs;
}

std::string virtio_cmdline(const MachineConfig& config) {
  std::string cmdline;
  const size_t count = virtio_devices(config).size();
  for (uint32_t i = 0; i < count && i < x86_64::kMaxVirtioMmioDevices; ++i) {
    const auto slot = x86_64::virtio_mmio_slot(i);
    if (!cmdline.empty()) {
      cmdline += ' ';
    }
    cmdline += virtio::virtio_mmio_cmdline_arg(slot.address, slot.irq, x86_64::kVirtioMmioSlotSize);
  }
  return cmdline;
}

Result<std::unique_ptr<VirtioDevices>> VirtioDevices::create(
    kvm::Vm& vm, GuestMemory& memory, devices::Bus& mmio,
    const std::vector<VirtioDeviceSpec>& specs) {
  if (specs.size() > x86_64::kMaxVirtioMmioDevices) {
    return fail(std::to_string(specs.size()) + " virtio devices, more than the " +
                std::to_string(x86_64::kMaxVirtioMmioDevices) + " slots there are");
  }
  // Notifications, block I/O and vsock sockets all go through this ring.
  auto loop = DSEC_TRY(io::EventLoop::create(256));
  std::unique_ptr<VirtioDevices> devices(new VirtioDevices(vm, std::move(loop)));
  io::EventLoop& device_loop = devices->loop_thread_.loop();
  for (size_t i = 0; i < specs.size(); ++i) {
    std::unique_ptr<virtio::VirtioDevice> device;
    switch (specs[i].kind) {
      case VirtioDeviceKind::kBlock: {
        const auto& d = specs[i].drive;
        auto drive = DSEC_TRY(virtio::VirtioBlock::create(
            d.path, {.read_only = d.read_only, .id = d.id, .rate_limiter = d.rate_limiter}, memory,
            device_loop));
        devices->metrics_.drives.emplace_back(
            d.id.empty() ? guest_drive_name(devices->drives_.size()) : d.id, drive->metrics());
        devices->drives_.push_back(drive.get());
        device = std::move(drive);
        break;
      }
      case VirtioDeviceKind::kVsock: {
        auto vsock = DSEC_TRY(virtio::VirtioVsock::create(
            specs[i].vsock.guest_cid, specs[i].vsock.uds_path, memory, device_loop));
        devices->metrics_.vsock = vsock->metrics();
        devices->vsock_ = vsock.get();
        device = std::move(vsock);
        break;
      }
      case VirtioDeviceKind::kNet: {
        const auto& n = specs[i].net;
        virtio::TapConfig tap;
        tap.name = n.tap;
        tap.handed_in_fd = n.tap_fd;
        if (!n.host_cidr.empty()) {
          tap.host_ip = DSEC_TRY(virtio::parse_ipv4_cidr(n.host_cidr));
        }
        const auto mac = DSEC_TRY(virtio::parse_mac(n.mac));
        auto net = DSEC_TRY(virtio::VirtioNet::create(
            tap, mac, memory, device_loop, {.rx = n.rx_rate_limiter, .tx = n.tx_rate_limiter}));
        if (const auto& mmds = specs[i].mmds; mmds && mmds->service) {
          net->set_mmds(std::make_unique<mmds::NetStack>(mmds->service, mmds->ipv4_address));
        }
        devices->metrics_.nets.emplace_back(n.iface_id(), net->metrics());
        devices->nets_.push_back(net.get());
        device = std::move(net);
        break;
      }
      case VirtioDeviceKind::kRng: {
        auto rng =
            std::make_unique<virtio::VirtioRng>(memory, device_loop, specs[i].rng_rate_limiter);
        devices->metrics_.entropy = rng->metrics();
        device = std::move(rng);
        break;
      }
    }
    DSEC_TRY(devices->add(memory, mmio, i, std::move(device)));
  }
  devices->posted_event_ = std::make_unique<io::EventFd>(DSEC_TRY(io::EventFd::create()));
  DSEC_TRY(device_loop.add_fd_watch(devices->posted_event_->fd(),
                                    [d = devices.get()] { d->run_posted_work(); }));
  return devices;
}

void VirtioDevices::request_state_log() {
  // Not run_on_loop(): a signal watcher must not wait for the loop.
  {
    const std::lock_guard lock(posted_mutex_);
    posted_.emplace_back([this] { log_state(); });
  }
  // Fails only if the counter would overflow: a wake-up is pending anyway.
  static_cast<void>(posted_event_->signal());
}

void VirtioDevices::run_posted_work() {
  static_cast<void>(posted_event_->consume());
  std::vector<std::function<void()>> work;
  {
    const std::lock_guard lock(posted_mutex_);
    work.swap(posted_);
    work.insert(work.end(), std::make_move_iterator(waited_.begin()),
                std::make_move_iterator(waited_.end()));
    waited_.clear();
  }
  for (auto& w : work) {
    w();
  }
}

void VirtioDevices::run_on_loop(std::function<void()> work) {
  std::promise<void> done;
  auto finished = done.get_future();
  bool posted = false;
  {
    const std::lock_guard lock(posted_mutex_);
    if (loop_running_) {
      waited_.emplace_back([&work, &done] {
        work();
        done.set_value();
      });
      posted = true;
    }
  }
  if (!posted) {
    work();  // no loop thread: nothing else serves the devices
    return;
  }
  static_cast<void>(posted_event_->signal());
  finished.wait();
}

Status VirtioDevices::set_drive_rate_limiter(size_t index,
                                             const devices::RateLimiterConfig& limiter) {
  if (index >= drives_.size()) {
    return fail(fmt::format("the VM has {} drives, none at index {}", drives_.size(), index));
  }
  run_on_loop([&] { drives_[index]->set_rate_limiter(limiter); });
  return ok();
}

Status VirtioDevices::replace_drive_file(size_t index, const std::string& path) {
  if (index >= drives_.size()) {
    return fail(fmt::format("the VM has {} drives, none at index {}", drives_.size(), index));
  }
  return drives_[index]->replace_disk(path);
}

Status VirtioDevices::set_net_rate_limiters(size_t index,
                                            const virtio::NetRateLimiters& limiters) {
  if (index >= nets_.size()) {
    return fail(fmt::format("the VM has {} network interfaces, none at index {}", nets_.size(),
                            index));
  }
  run_on_loop([&] { nets_[index]->set_rate_limiters(limiters); });
  return ok();
}

void VirtioDevices::admit_every_vsock_connection() {
  if (vsock_ != nullptr) {
    run_on_loop([this] { vsock_->admit_every_connection(); });
  }
}

void VirtioDevices::run_with_loop_parked(const std::function<void()>& work) {
  std::promise<void> parked;
  auto loop_parked = parked.get_future();
  std::promise<void> done;
  // Shared: the parked loop thread still holds it as it wakes, after this call returned.
  std::shared_future<void> work_done = done.get_future().share();
  bool posted = false;
  {
    const std::lock_guard lock(posted_mutex_);
    if (loop_running_) {
      waited_.emplace_back([&parked, work_done] {
        parked.set_value();
        work_done.wait();
      });
      posted = true;
    }
  }
  if (!posted) {
    work();  // no loop thread: nothing else serves the devices
    return;
  }
  static_cast<void>(posted_event_->signal());
  loop_parked.wait();
  work();
  done.set_value();
}

void VirtioDevices::log_state() {
  for (size_t i = 0; i < transports_.size(); ++i) {
    spdlog::info("virtio slot {}: {}", i, transports_[i]->describe());
  }
}

Status VirtioDevices::quiesce(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<size_t> busy;
    run_on_loop([&] {
      for (size_t i = 0; i < transports_.size(); ++i) {
        if (!transports_[i]->device().quiesce()) {
          busy.push_back(i);
        }
      }
    });
    if (busy.empty()) {
      return ok();
    }
    bool running = false;
    {
      const std::lock_guard lock(posted_mutex_);
      running = loop_running_;
    }
    if (!running || std::chrono::steady_clock::now() >= deadline) {
      return fail(fmt::format("virtio device in slot {} did not come to rest within {} ms (I/O "
                              "still in flight)",
                              busy.front(), timeout.count()),
                  "its backing file or socket may be hung; try again, or stop the VM");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<VirtioDevices::SlotState> VirtioDevices::save() const {
  std::vector<SlotState> slots;
  slots.reserve(transports_.size());
  for (const auto& transport : transports_) {
    slots.push_back(
        {virtio::encode_transport_state(transport->state()), transport->device().save_state()});
  }
  return slots;
}

Status VirtioDevices::restore(std::span<const SlotState> slots) {
  if (slots.size() != transports_.size()) {
    return fail(fmt::format("the snapshot has {} virtio devices, this VM {}", slots.size(),
                            transports_.size()),
                "the state file is corrupt or does not match its configuration");
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const std::string where = fmt::format("virtio device {}", i);
    auto& transport = *transports_[i];
    if (auto taken = transport.device().restore_state(slots[i].device); !taken) {
      return std::unexpected(taken.error().with_context(where));
    }
    auto state = virtio::decode_transport_state(slots[i].transport);
    if (!state) {
      return std::unexpected(state.error().with_context(where));
    }
    if (auto restored = transport.restore(*state); !restored) {
      return std::unexpected(restored.error().with_context(where));
    }
  }
  return ok();
}

void VirtioDevices::resume() {
  run_on_loop([this] {
    for (size_t i = 0; i < transports_.size(); ++i) {
      auto& transport = *transports_[i];
      transport.device().resume_after_quiesce();
      const auto state = transport.state();
      for (size_t q = 0; q < state.queues.size(); ++q) {
        if (state.queues[q].ready) {
          transport.notify(static_cast<uint32_t>(q));
        }
      }
      if (state.interrupt_status != 0) {
        static_cast<void>(irq_events_[i]->signal());
      }
    }
  });
}

Status VirtioDevices::add(GuestMemory& memory, devices::Bus& mmio, size_t index,
                          std::unique_ptr<virtio::VirtioDevice> device) {
  const auto slot = x86_64::virtio_mmio_slot(static_cast<uint32_t>(index));
  const std::string where = fmt::format("virtio device {} at {:#x}", index, slot.address);

  // Device to guest: the interrupt line writes an eventfd that KVM turns into an edge on
  // the slot's IOAPIC pin (irqfd). The line's "lowered" calls have nothing to do: with an
  // edge-triggered pin the driver reads InterruptStatus to learn why it was called.
  auto irq_event = std::make_shared<const io::EventFd>(DSEC_TRY(io::EventFd::create()));
  if (auto registered = vm_.register_irqfd(irq_event->fd(), slot.irq); !registered) {
    return std::unexpected(registered.error().with_context(where));
  }
  unregister_.push_back([this, fd = irq_event->fd(), irq = slot.irq] {
    static_cast<void>(vm_.unregister_irqfd(fd, irq));
  });
  irq_events_.push_back(irq_event);
  auto line = [irq_event](bool raised) {
    if (raised) {
      // Fails only if the counter would overflow: the interrupt is pending anyway.
      static_cast<void>(irq_event->signal());
    }
  };

  const size_t queue_count = device->queue_max_sizes().size();
  auto created = virtio::MmioTransport::create(memory, std::move(device), std::move(line));
  if (!created) {
    return std::unexpected(created.error().with_context(where));
  }
  std::shared_ptr<virtio::MmioTransport> transport = std::move(*created);

  // Guest to device: a 4-byte write of queue index q to QueueNotify signals the q-th
  // eventfd inside KVM (no exit), and the event loop passes it on. Other writes to the
  // register still exit and reach the transport through the bus.
  for (size_t q = 0; q < queue_count; ++q) {
    auto event = std::make_unique<io::EventFd>(DSEC_TRY(io::EventFd::create()));
    const kvm::IoEventFd ioeventfd{.eventfd = event->fd(),
                                   .space = kvm::IoSpace::kMmio,
                                   .address = slot.address + virtio::mmio::kQueueNotify,
                                   .length = 4,
                                   .datamatch = q};
    if (auto registered = vm_.register_ioeventfd(ioeventfd); !registered) {
      return std::unexpected(registered.error().with_context(where));
    }
    unregister_.push_back(
        [this, ioeventfd] { static_cast<void>(vm_.unregister_ioeventfd(ioeventfd)); });
    DSEC_TRY(loop_thread_.loop().add_fd_watch(
        event->fd(),
        [event = event.get(), transport = transport.get(), queue = static_cast<uint32_t>(q)] {
          static_cast<void>(event->consume());
          // The transport passes it on only while the device is active (virtio_device.h).
          transport->notify(queue);
        }));
    queue_events_.push_back(std::move(event));
  }

  DSEC_TRY(mmio.insert({slot.address, x86_64::kVirtioMmioSlotSize},
                       std::make_shared<TransportOnBus>(transport)));
  transports_.push_back(std::move(transport));
  return ok();
}

VirtioDevices::~VirtioDevices() {
  if (auto stopped = stop(); !stopped) {
    spdlog::warn("virtio devices: the event loop ended with an error: {}",
                 stopped.error().message());
  }
  for (auto undo = unregister_.rbegin(); undo != unregister_.rend(); ++undo) {
    (*undo)();
  }
  // The devices go before the loop (a member declared first, so destroyed last): their
  // destructors remove their watches from it.
  transports_.clear();
}

Status VirtioDevices::start(io::EventLoopThread::ExitHandler on_exit,
                            io::EventLoopThread::ThreadStart setup) {
  {
    const std::lock_guard lock(posted_mutex_);
    loop_running_ = true;
  }
  auto started = loop_thread_.start(std::move(on_exit), std::move(setup));
  if (!started) {
    static_cast<void>(stop());
  }
  return started;
}

Status VirtioDevices::stop() {
  auto stopped = loop_thread_.stop();
  std::vector<std::function<void()>> waited;
  {
    const std::lock_guard lock(posted_mutex_);
    loop_running_ = false;
    waited.swap(waited_);
  }
  // The loop is gone: this thread is the only one left to run what callers wait for.
  for (auto& w : waited) {
    w();
  }
  return stopped;
}

}  // namespace dsec::machine
