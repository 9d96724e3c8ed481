#include "vmm/kvm/vcpu_exit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace dsec::kvm {
namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

std::string hex_bytes(std::span<const uint8_t> bytes) {
  constexpr size_t kShown = 16;
  std::string out;
  for (size_t i = 0; i < std::min(bytes.size(), kShown); ++i) {
    out += fmt::format("{}{:02x}", i == 0 ? "" : " ", bytes[i]);
  }
  if (bytes.size() > kShown) {
    out += fmt::format(" ... ({} bytes)", bytes.size());
  }
  return out;
}

Result<VcpuExit> decode_io(kvm_run& run, size_t mapping_size) {
  const auto& io = run.io;
  const uint64_t length = static_cast<uint64_t>(io.size) * io.count;
  if ((io.size != 1 && io.size != 2 && io.size != 4) || io.count == 0 ||
      io.data_offset > mapping_size || length > mapping_size - io.data_offset) {
    return fail(
        fmt::format("malformed KVM_EXIT_IO: size {} count {} data_offset {:#x} with a "
                    "kvm_run mapping of {:#x} bytes",
                    io.size, io.count, io.data_offset, mapping_size));
  }
  auto* base = reinterpret_cast<uint8_t*>(&run);
  return IoExit{
      .port = io.port,
      .direction = io.direction == KVM_EXIT_IO_OUT ? IoDirection::kOut : IoDirection::kIn,
      .size = io.size,
      .count = io.count,
      .data = std::span<uint8_t>(base + io.data_offset, static_cast<size_t>(length)),
  };
}

Result<VcpuExit> decode_mmio(kvm_run& run) {
  auto& mmio = run.mmio;
  if (mmio.len == 0 || mmio.len > sizeof(mmio.data)) {
    return fail(fmt::format("malformed KVM_EXIT_MMIO: len {} at {:#x}", mmio.len, mmio.phys_addr));
  }
  return MmioExit{
      .address = mmio.phys_addr,
      .is_write = mmio.is_write != 0,
      .data = std::span<uint8_t>(mmio.data, mmio.len),
  };
}

// ndata as reported, bounded by the array that holds the data.
template <size_t N>
std::span<const __u64> bounded(const __u64 (&data)[N], uint32_t ndata) {
  return std::span<const __u64>(data, std::min<size_t>(ndata, N));
}

}  // namespace

Result<VcpuExit> decode_exit(kvm_run& run, size_t mapping_size) {
  if (mapping_size < sizeof(kvm_run)) {
    return fail(
        fmt::format("kvm_run mapping of {} bytes is smaller than struct kvm_run", mapping_size));
  }
  switch (run.exit_reason) {
    case KVM_EXIT_IO:
      return decode_io(run, mapping_size);
    case KVM_EXIT_MMIO:
      return decode_mmio(run);
    case KVM_EXIT_HLT:
      return HltExit{};
    case KVM_EXIT_SHUTDOWN:
      return ShutdownExit{};
    case KVM_EXIT_FAIL_ENTRY:
      return FailEntryExit{run.fail_entry.hardware_entry_failure_reason, run.fail_entry.cpu};
    case KVM_EXIT_INTERNAL_ERROR:
      return InternalErrorExit{run.internal.suberror,
                               bounded(run.internal.data, run.internal.ndata)};
    case KVM_EXIT_SYSTEM_EVENT:
      // Before Linux 5.18 ndata was padding and only "flags" (data[0]) existed.
      return SystemEventExit{run.system_event.type,
                             bounded(run.system_event.data, std::max(run.system_event.ndata, 1U))};
    case KVM_EXIT_INTR:
      return InterruptedExit{};
    case KVM_EXIT_DEBUG:
      return DebugExit{run.debug.arch.exception, run.debug.arch.pc, run.debug.arch.dr6,
                       run.debug.arch.dr7};
    case KVM_EXIT_UNKNOWN:
      return UnknownExit{run.hw.hardware_exit_reason};
    default:
      return OtherExit{run.exit_reason};
  }
}

std::optional<std::vector<uint8_t>> emulation_failure_bytes(const InternalErrorExit& exit) {
  // struct kvm_run's emulation_failure: data[0] is flags, then insn_size (1 byte) and up
  // to 15 instruction bytes fill data[1] and data[2].
  constexpr size_t kInsnWords = 3;
  constexpr size_t kMaxInsnBytes = 15;
  if (exit.suberror != KVM_INTERNAL_ERROR_EMULATION || exit.data.size() < kInsnWords ||
      (exit.data[0] & KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES) == 0) {
    return std::nullopt;
  }
  std::array<uint8_t, 16> raw{};
  std::memcpy(raw.data(), &exit.data[1], raw.size());
  const size_t size = std::min<size_t>(raw[0], kMaxInsnBytes);
  if (size == 0) {
    return std::nullopt;
  }
  return std::vector<uint8_t>(raw.begin() + 1, raw.begin() + 1 + static_cast<ptrdiff_t>(size));
}

std::string_view exit_name(const VcpuExit& exit) {
  return std::visit(Overloaded{
                        [](const IoExit&) { return "IO"; },
                        [](const MmioExit&) { return "MMIO"; },
                        [](const HltExit&) { return "HLT"; },
                        [](const ShutdownExit&) { return "SHUTDOWN"; },
                        [](const FailEntryExit&) { return "FAIL_ENTRY"; },
                        [](const InternalErrorExit&) { return "INTERNAL_ERROR"; },
                        [](const SystemEventExit&) { return "SYSTEM_EVENT"; },
                        [](const InterruptedExit&) { return "INTR"; },
                        [](const DebugExit&) { return "DEBUG"; },
                        [](const UnknownExit&) { return "UNKNOWN"; },
                        [](const OtherExit&) { return "OTHER"; },
                    },
                    exit);
}

std::string describe(const VcpuExit& exit) {
  return std::visit(
      Overloaded{
          [](const IoExit& e) {
            return fmt::format("IO {} port {:#x} size {} count {} data {}",
                               e.direction == IoDirection::kOut ? "out" : "in", e.port, e.size,
                               e.count, hex_bytes(e.data));
          },
          [](const MmioExit& e) {
            return fmt::format("MMIO {} {:#x} len {} data {}", e.is_write ? "write" : "read",
                               e.address, e.data.size(), hex_bytes(e.data));
          },
          [](const FailEntryExit& e) {
            return fmt::format("FAIL_ENTRY reason {:#x} cpu {}", e.hardware_entry_failure_reason,
                               e.cpu);
          },
          [](const InternalErrorExit& e) {
            if (auto bytes = emulation_failure_bytes(e)) {
              return fmt::format(
                  "INTERNAL_ERROR: KVM could not emulate the guest's instruction (bytes at RIP: "
                  "{})",
                  hex_bytes(*bytes));
            }
            return fmt::format("INTERNAL_ERROR suberror {} data [{:#x}]", e.suberror,
                               fmt::join(e.data, ", "));
          },
          [](const SystemEventExit& e) {
            return fmt::format("SYSTEM_EVENT type {} data [{:#x}]", e.type,
                               fmt::join(e.data, ", "));
          },
          [](const DebugExit& e) {
            return fmt::format("DEBUG exception {} pc {:#x} dr6 {:#x} dr7 {:#x}", e.exception, e.pc,
                               e.dr6, e.dr7);
          },
          [](const UnknownExit& e) {
            return fmt::format("UNKNOWN hardware exit reason {:#x}", e.hardware_exit_reason);
          },
          [](const OtherExit& e) { return fmt::format("exit reason {}", e.reason); },
          [&exit](const auto&) { return std::string(exit_name(exit)); },
      },
      exit);
}

}  // namespace dsec::kvm
