// `dsec-vmm smoke`: the smallest end-to-end check that this host can run a VM. Opens KVM,
// checks its capabilities, runs a real-mode guest that writes a greeting to port 0x3f8
// byte by byte and halts, and prints what the guest wrote and how long it all took.
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <variant>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/memory/mmap_region.h"

namespace dsec::cli {
namespace {

constexpr uint16_t kSerialPort = 0x3f8;
constexpr uint64_t kGuestMemorySize = 0x10000;  // 64 KiB at guest-physical 0
constexpr uint64_t kLoadAddress = 0x1000;       // cs = 0, ip = 0x1000
constexpr size_t kMaxExits = 4096;              // the guest makes 24; more means it is lost

// 16-bit real-mode code at kLoadAddress, the message right after it:
//   mov si, msg; mov dx, 0x3f8; cld
//   next: lodsb; test al, al; jz done; out dx, al; jmp next
//   done: hlt
//   msg:  "Hello from a KVM guest\n", 0
constexpr std::array<uint8_t, 16> kCode = {
    0xbe, 0x10, 0x10,  // mov si, 0x1010
    0xba, 0xf8, 0x03,  // mov dx, 0x3f8
    0xfc,              // cld
    0xac,              // next: lodsb
    0x84, 0xc0,        // test al, al
    0x74, 0x03,        // jz done
    0xee,              // out dx, al
    0xeb, 0xf8,        // jmp next
    0xf4,              // done: hlt
};
constexpr char kMessage[] = "Hello from a KVM guest\n";
static_assert(kLoadAddress + kCode.size() == 0x1010, "mov si above must point at kMessage");

struct SmokeOptions {
  std::string device = kvm::KvmSystem::kDefaultDevice;
};

struct SmokeResult {
  std::string guest_output;
  std::chrono::steady_clock::duration open_to_hlt;
};

Result<SmokeResult> run_smoke(const SmokeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const kvm::KvmSystem kvm = DSEC_TRY(kvm::KvmSystem::open(options.device));

  const MmapRegion memory = DSEC_TRY(MmapRegion::anonymous(kGuestMemorySize));
  uint8_t* ram = memory.data();
  std::memcpy(ram + kLoadAddress, kCode.data(), kCode.size());
  std::memcpy(ram + kLoadAddress + kCode.size(), kMessage, sizeof(kMessage));

  // The memory is declared before the VM so that it outlives the slot.
  kvm::Vm vm = DSEC_TRY(kvm.create_vm());
  DSEC_TRY(vm.set_user_memory_region({.slot = 0,
                                      .flags = 0,
                                      .guest_phys_addr = 0,
                                      .memory_size = memory.size(),
                                      .userspace_addr = reinterpret_cast<uint64_t>(ram)}));
  kvm::Vcpu vcpu = DSEC_TRY(vm.create_vcpu(0));

  // A vCPU starts at the reset vector (cs base 0xffff0000); move it to 0:0x1000.
  kvm_sregs sregs = DSEC_TRY(vcpu.get_sregs());
  sregs.cs.selector = 0;
  sregs.cs.base = 0;
  DSEC_TRY(vcpu.set_sregs(sregs));
  kvm_regs regs{};
  regs.rip = kLoadAddress;
  regs.rflags = 0x2;  // bit 1 is reserved and must be set
  DSEC_TRY(vcpu.set_regs(regs));

  SmokeResult result;
  for (size_t exits = 0; exits < kMaxExits; ++exits) {
    const kvm::VcpuExit exit = DSEC_TRY(vcpu.run());
    if (std::holds_alternative<kvm::HltExit>(exit)) {
      result.open_to_hlt = std::chrono::steady_clock::now() - start;
      return result;
    }
    const auto* io = std::get_if<kvm::IoExit>(&exit);
    if (io == nullptr || io->port != kSerialPort || io->direction != kvm::IoDirection::kOut) {
      return fail("the smoke-test guest made an unexpected exit: " + kvm::describe(exit),
                  "this host's KVM does not run a simple real-mode guest correctly");
    }
    result.guest_output.append(io->data.begin(), io->data.end());
  }
  return fail(fmt::format("the smoke-test guest did not halt within {} exits", kMaxExits));
}

int smoke_main(const SmokeOptions& options) {
  const auto result = run_smoke(options);
  if (!result) {
    fmt::print(stderr, "dsec-vmm smoke: {}\n", result.error().message());
    return 1;
  }
  const double ms = std::chrono::duration<double, std::milli>(result->open_to_hlt).count();
  fmt::print("guest wrote to port {:#x}: {}", kSerialPort, result->guest_output);
  fmt::print("guest halted {:.3f} ms after opening {}\n", ms, options.device);
  return 0;
}

}  // namespace

void add_smoke_command(CLI::App& app, CommandAction& action) {
  auto options = std::make_shared<SmokeOptions>();
  CLI::App* smoke = app.add_subcommand(
      "smoke", "Check that this host can run a VM: boot a tiny guest that prints a line and halts");
  smoke->footer(
      "Opens the KVM device, checks the API version and every capability dsec-vmm needs, then "
      "runs a real-mode guest (1 vCPU, 64 KiB of memory) that writes \"Hello from a KVM "
      "guest\" to serial port 0x3f8 byte by byte and halts. Prints what the guest wrote and "
      "the time from opening the device to the guest's HLT, and exits 0. On any failure it "
      "prints the error, with what to do about it, on stderr and exits 1.");
  smoke->add_option("--device", options->device, "KVM device to open")->capture_default_str();
  smoke->callback([&action, options] { action = [options] { return smoke_main(*options); }; });
}

}  // namespace dsec::cli
