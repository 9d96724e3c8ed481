// Why KVM_RUN returned, decoded from kvm_run so that callers never read its unions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/kvm/linux_kvm.h"

namespace dsec::kvm {

enum class IoDirection : uint8_t { kIn, kOut };

// Port I/O (KVM_EXIT_IO). `data` is size * count bytes inside kvm_run: for kOut what the
// guest wrote; for kIn the caller fills it before the next run(), which completes the IN.
struct IoExit {
  uint16_t port;
  IoDirection direction;
  uint8_t size;    // bytes per access: 1, 2 or 4
  uint32_t count;  // > 1 for string instructions (REP INS/OUTS)
  std::span<uint8_t> data;
};

// MMIO to an address no memory slot backs (KVM_EXIT_MMIO). `data` is len bytes inside
// kvm_run: for a write what the guest wrote; for a read the caller fills it before run().
struct MmioExit {
  uint64_t address;
  bool is_write;
  std::span<uint8_t> data;
};

// The guest executed HLT. Only without an in-kernel irqchip: with one, KVM keeps a halted
// vCPU inside KVM_RUN until an interrupt wakes it.
struct HltExit {};
// The guest triple-faulted (or otherwise asked for a shutdown); the vCPU cannot go on.
struct ShutdownExit {};
// VM entry failed; the reason is the hardware's (VMX exit qualification / SVM exit code).
struct FailEntryExit {
  uint64_t hardware_entry_failure_reason;
  uint32_t cpu;
};
// KVM could not handle an exit itself (e.g. emulation failure). `data` lies inside kvm_run.
struct InternalErrorExit {
  uint32_t suberror;  // KVM_INTERNAL_ERROR_*
  std::span<const __u64> data;
};
// A guest request that concerns the whole VM: KVM_SYSTEM_EVENT_SHUTDOWN, _RESET, _CRASH...
struct SystemEventExit {
  uint32_t type;
  std::span<const __u64> data;  // data[0] is the legacy "flags" field
};
// KVM_RUN was interrupted by a signal, or immediate_exit was set (KVM_EXIT_INTR or EINTR).
struct InterruptedExit {};
// A debug exception with guest debugging enabled (KVM_EXIT_DEBUG).
struct DebugExit {
  uint32_t exception;
  uint64_t pc;
  uint64_t dr6;
  uint64_t dr7;
};
// KVM_EXIT_UNKNOWN: the hardware exited for a reason KVM does not know.
struct UnknownExit {
  uint64_t hardware_exit_reason;
};
// Any other KVM_EXIT_* value, which the VMM does not handle.
struct OtherExit {
  uint32_t reason;
};

using VcpuExit =
    std::variant<IoExit, MmioExit, HltExit, ShutdownExit, FailEntryExit, InternalErrorExit,
                 SystemEventExit, InterruptedExit, DebugExit, UnknownExit, OtherExit>;

// Decodes run.exit_reason and its payload. `run` is the vCPU's mapping of `mapping_size` bytes;
// the I/O data KVM points at is checked to lie inside it. Fails only on a malformed kvm_run.
Result<VcpuExit> decode_exit(kvm_run& run, size_t mapping_size);

// The bytes at the guest's RIP that KVM's instruction emulator gave up on, where an
// emulation failure (suberror KVM_INTERNAL_ERROR_EMULATION) carries them; else nullopt.
std::optional<std::vector<uint8_t>> emulation_failure_bytes(const InternalErrorExit& exit);

// "IO", "MMIO", "HLT", "SHUTDOWN", ... : the KVM_EXIT_* name without its prefix.
std::string_view exit_name(const VcpuExit& exit);
// One line for logs and test failures, e.g. "IO out port 0x3f8 size 1 count 1 data 48".
std::string describe(const VcpuExit& exit);

}  // namespace dsec::kvm
