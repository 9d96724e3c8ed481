// Machine::snapshot() and Machine::restore(): a VM's state file and memory file, written
// from a paused VM and built back into a VM that shares the memory file's pages.
//
// The state file's sections (vmm/snapshot/state_file.h; docs/snapshot-format.md):
//   config             the MachineConfig the VM was built from (snapshot_config.h), JSON
//   vm                 PIT, kvmclock and the three irqchips (kvm/vm_state.h)
//   vcpu.N             vCPU N's whole state (kvm/vcpu_state.h)
//   serial             the UART's registers
//   virtio.N.transport virtio-mmio slot N's transport and queues
//   virtio.N.device    slot N's device's own state
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "vmm/arch/x86_64/layout.h"
#include "vmm/kvm/snapshot_msrs.h"
#include "vmm/kvm/vcpu_state.h"
#include "vmm/kvm/vm_state.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/snapshot/memory_file.h"
#include "vmm/snapshot/state_file.h"

namespace dsec::machine {

// Everything a state file holds, decoded: read whole before the first KVM call, so that a
// corrupt file fails before a VM exists.
struct SnapshotState {
  MachineConfig config;
  kvm::VmState vm;
  std::vector<kvm::VcpuState> vcpus;
  std::vector<uint8_t> serial;
  std::vector<VirtioDevices::SlotState> virtio;
};

namespace {

using Clock = std::chrono::steady_clock;

std::string vcpu_section(size_t i) {
  return fmt::format("vcpu.{}", i);
}
std::string transport_section(size_t i) {
  return fmt::format("virtio.{}.transport", i);
}
std::string device_section(size_t i) {
  return fmt::format("virtio.{}.device", i);
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

template <typename T>
Result<T> with_section(Result<T> result, const std::string& section) {
  if (!result) {
    return std::unexpected(result.error().with_context("section " + section));
  }
  return result;
}

Result<SnapshotState> read_state(const std::string& state_path) {
  const auto file = DSEC_TRY(snapshot::StateFile::load(state_path));
  SnapshotState state;
  const auto config = DSEC_TRY(file.section("config"));
  state.config = DSEC_TRY(with_section(
      snapshot_config_from_json({reinterpret_cast<const char*>(config.data()), config.size()}),
      "config"));
  state.vm = DSEC_TRY(with_section(kvm::decode_vm_state(DSEC_TRY(file.section("vm"))), "vm"));
  if (state.config.vcpus == 0 || state.config.vcpus > x86_64::kMaxVcpus) {
    return fail(fmt::format("snapshot state file {}: {} vCPUs", state_path, state.config.vcpus),
                "the state file is corrupt");
  }
  for (size_t i = 0; i < state.config.vcpus; ++i) {
    const auto name = vcpu_section(i);
    state.vcpus.push_back(
        DSEC_TRY(with_section(kvm::decode_vcpu_state(DSEC_TRY(file.section(name))), name)));
  }
  const auto serial = DSEC_TRY(file.section("serial"));
  state.serial.assign(serial.begin(), serial.end());
  for (size_t i = 0; file.has_section(transport_section(i)); ++i) {
    const auto transport = DSEC_TRY(file.section(transport_section(i)));
    const auto device = DSEC_TRY(file.section(device_section(i)));
    state.virtio.push_back({{transport.begin(), transport.end()}, {device.begin(), device.end()}});
  }
  return state;
}

}  // namespace

Result<SnapshotFigures> Machine::snapshot(const std::string& state_path,
                                          const std::string& memory_path) {
  if (control_.state() != RunState::kPaused) {
    return fail("the VM is not paused", "pause it first (PATCH /vm {\"state\":\"Paused\"})");
  }
  SnapshotFigures figures;
  const auto t0 = Clock::now();
  if (virtio_) {
    devices_quiesced_ = true;  // resume() serves them again, even after a failure
    DSEC_TRY(virtio_->quiesce(std::chrono::seconds(10)));
  }
  const auto t1 = Clock::now();
  figures.devices_quiesced = t1 - t0;

  // Everything else on this thread with the event loop parked, so that no device moves a
  // queue or writes guest memory while the state and the memory are read. Not on the loop
  // thread itself: its seccomp role (the devices') has no KVM state reads and no files.
  Status result = ok();
  auto save = [&]() -> Status {
    snapshot::StateFileWriter writer;
    DSEC_TRY(writer.add("config", bytes_of(snapshot_config_to_json(config_))));
    DSEC_TRY(writer.add("vm", kvm::encode(DSEC_TRY(kvm::capture(vm_)))));
    const auto msrs = DSEC_TRY(kvm::snapshot_msr_indices(kvm_));
    for (size_t i = 0; i < vcpus_.size(); ++i) {
      const auto state = DSEC_TRY(kvm::capture(vcpus_[i]->vcpu(), msrs));
      DSEC_TRY(writer.add(vcpu_section(i), kvm::encode(state)));
    }
    DSEC_TRY(writer.add("serial", serial_->save_state()));
    if (virtio_) {
      const auto slots = virtio_->save();
      for (size_t i = 0; i < slots.size(); ++i) {
        DSEC_TRY(writer.add(transport_section(i), slots[i].transport));
        DSEC_TRY(writer.add(device_section(i), slots[i].device));
      }
    }
    const auto t_state = Clock::now();
    figures.state_saved = t_state - t1;
    const auto memory = DSEC_TRY(snapshot::write_memory_file(memory_path, memory_));
    figures.ram_bytes = memory.ram_bytes;
    figures.memory_written_bytes = memory.written_bytes;
    figures.memory_written = Clock::now() - t_state;
    // The state file last: a state file names a memory file that is whole.
    DSEC_TRY(writer.write(state_path));
    std::error_code ec;
    figures.state_bytes = std::filesystem::file_size(state_path, ec);
    return ok();
  };
  if (virtio_) {
    virtio_->run_with_loop_parked([&] { result = save(); });
  } else {
    result = save();
  }
  DSEC_TRY(result);
  spdlog::info(
      "snapshot: {} MiB of RAM ({} MiB written, the rest holes) in {}, state {} bytes in {}",
      figures.ram_bytes >> 20, figures.memory_written_bytes >> 20, memory_path, figures.state_bytes,
      state_path);
  return figures;
}

Result<std::unique_ptr<Machine>> Machine::restore(const std::string& state_path,
                                                  const std::string& memory_path,
                                                  const RestoreOverrides& overrides,
                                                  const MachineConfig& host, bool paused) {
  if (host.seccomp.mode != seccomp::Mode::kOff) {
    seccomp::prepare_process();  // before the VM's first thread
  }
  auto state = DSEC_TRY(read_state(state_path));
  MachineConfig config = DSEC_TRY(apply_overrides(state.config, overrides));
  take_host_settings(config, host);
  DSEC_TRY(validate(config, BuildMode::kRestore));
  if (state.virtio.size() != virtio_devices(config).size()) {
    return fail(fmt::format("snapshot state file {}: {} virtio devices saved, its configuration "
                            "has {}",
                            state_path, state.virtio.size(), virtio_devices(config).size()),
                "the state file is corrupt");
  }
  spdlog::debug("snapshot state read and checked");

  const auto ranges = DSEC_TRY(x86_64::ram_regions(config.memory_mib * x86_64::kMiB));
  uint64_t total = 0;
  for (const auto& r : ranges) {
    total += r.size;
  }
  const auto memory_fd = DSEC_TRY(snapshot::open_memory_file(memory_path, total));
  auto memory = DSEC_TRY(GuestMemory::private_file(ranges, memory_fd.get()));
  spdlog::debug("memory file mapped copy-on-write");

  auto [kvm, vm] = DSEC_TRY(create_vm(config, memory));
  auto machine = DSEC_TRY(assemble(config, std::move(memory), std::move(kvm), std::move(vm)));
  DSEC_TRY(machine->restore_state(state));
  machine->restored_ = true;
  if (paused) {
    machine->control_.set_paused_before_start();
  }
  spdlog::debug("state restored");
  return machine;
}

// In the order KVM needs (docs/snapshot-format.md): the vCPUs, then the VM's PIT, clock and
// irqchips (after the vCPUs, whose LAPICs the IOAPIC routes to), then the devices, whose
// interrupts must not be overwritten by an older irqchip state.
Status Machine::restore_state(const SnapshotState& state) {
  for (size_t i = 0; i < vcpus_.size(); ++i) {
    kvm::Vcpu& vcpu = vcpus_[i]->vcpu();
    const uint32_t host_khz = vcpu.get_tsc_khz().value_or(0);
    if (auto restored = kvm::restore(vcpu, state.vcpus[i], host_khz); !restored) {
      return std::unexpected(restored.error().with_context("restoring vCPU " + std::to_string(i)));
    }
  }
  if (auto restored = kvm::restore(vm_, state.vm); !restored) {
    return std::unexpected(restored.error().with_context("restoring the VM's clock and irqchips"));
  }
  DSEC_TRY(serial_->restore_state(state.serial));
  if (virtio_) {
    DSEC_TRY(virtio_->restore(state.virtio));
  }
  return ok();
}

}  // namespace dsec::machine
