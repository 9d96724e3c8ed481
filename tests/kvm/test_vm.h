// Shared by the kvm tests: a VM with RAM and one vCPU, real-mode and long-mode entry for
// hand-assembled payloads, and checks on the exits those payloads make.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/memory/mmap_region.h"

namespace dsec::test {

// Guest-physical layout used by every payload.
constexpr uint64_t kGdtAddress = 0x500;
constexpr uint64_t kCodeAddress = 0x1000;
constexpr uint64_t kStackTop = 0x8000;
constexpr uint64_t kPml4Address = 0x9000;
constexpr uint64_t kPdptAddress = 0xa000;
constexpr uint64_t kPdAddress = 0xb000;       // one page directory: the first 1 GiB, 2 MiB pages
constexpr uint64_t kTssAddress = 0xfffbd000;  // three pages KVM needs on Intel; no RAM there

// Anonymous memory backing guest-physical [0, size), with checked writes for payloads.
class GuestRam {
 public:
  static Result<GuestRam> create(size_t size) {
    return GuestRam(DSEC_TRY(MmapRegion::anonymous(size)));
  }

  uint8_t* data() const { return region_.data(); }
  size_t size() const { return region_.size(); }

  void write(uint64_t address, std::span<const uint8_t> bytes) {
    if (address > size() || bytes.size() > size() - address) {
      throw std::out_of_range("guest write outside RAM");
    }
    std::memcpy(data() + address, bytes.data(), bytes.size());
  }
  template <typename T>
  void write_value(uint64_t address, const T& value) {
    write(address, std::span(reinterpret_cast<const uint8_t*>(&value), sizeof(T)));
  }
  uint8_t read_byte(uint64_t address) const {
    if (address >= size()) {
      throw std::out_of_range("guest read outside RAM");
    }
    return data()[address];
  }

 private:
  explicit GuestRam(MmapRegion region) : region_(std::move(region)) {}
  MmapRegion region_;
};

// A VM with `ram` as slot 0 and one vCPU. Members are destroyed in reverse order, so the
// RAM outlives the VM that maps it.
struct TestVm {
  GuestRam ram;
  kvm::KvmSystem kvm;
  kvm::Vm vm;
  kvm::Vcpu vcpu;
};

struct TestVmOptions {
  size_t ram_size = 2 << 20;
  uint32_t memory_flags = 0;  // e.g. KVM_MEM_LOG_DIRTY_PAGES
  // KVM_CREATE_IRQCHIP and KVM_CREATE_PIT2 before the vCPU. HLT then stays inside KVM
  // (waiting for an interrupt) instead of exiting: payloads must end some other way.
  bool irqchip = false;
};

inline Result<TestVm> create_test_vm(const TestVmOptions& options = {}) {
  GuestRam ram = DSEC_TRY(GuestRam::create(options.ram_size));
  kvm::KvmSystem kvm = DSEC_TRY(kvm::KvmSystem::open());
  kvm::Vm vm = DSEC_TRY(kvm.create_vm());
  DSEC_TRY(vm.set_tss_addr(kTssAddress));
  if (options.irqchip) {
    DSEC_TRY(vm.create_irqchip());
    DSEC_TRY(vm.create_pit2());
  }
  DSEC_TRY(vm.set_user_memory_region({.slot = 0,
                                      .flags = options.memory_flags,
                                      .guest_phys_addr = 0,
                                      .memory_size = ram.size(),
                                      .userspace_addr = reinterpret_cast<uint64_t>(ram.data())}));
  kvm::Vcpu vcpu = DSEC_TRY(vm.create_vcpu(0));
  return TestVm{std::move(ram), std::move(kvm), std::move(vm), std::move(vcpu)};
}

// Loads `code` at kCodeAddress and starts the vCPU there in real mode, cs = ds = 0.
inline Status start_real_mode(TestVm& t, std::span<const uint8_t> code) {
  t.ram.write(kCodeAddress, code);
  kvm_sregs sregs = DSEC_TRY(t.vcpu.get_sregs());
  for (kvm_segment* segment : {&sregs.cs, &sregs.ds, &sregs.es, &sregs.ss}) {
    segment->selector = 0;
    segment->base = 0;
  }
  DSEC_TRY(t.vcpu.set_sregs(sregs));
  kvm_regs regs{};
  regs.rip = kCodeAddress;
  regs.rsp = kStackTop;
  regs.rflags = 0x2;  // bit 1 is reserved, always 1
  return t.vcpu.set_regs(regs);
}

// Writes a flat GDT and page tables identity-mapping the first 1 GiB with 2 MiB pages,
// puts the vCPU in 64-bit long mode through KVM_SET_SREGS (no guest mode-switch code) and
// starts it at `code`, loaded at kCodeAddress.
inline Status start_long_mode(TestVm& t, std::span<const uint8_t> code) {
  constexpr uint64_t kPresentWritable = 0x3;
  constexpr uint64_t kPageSize2M = 0x80;
  t.ram.write(kCodeAddress, code);
  t.ram.write_value(kPml4Address, kPdptAddress | kPresentWritable);
  t.ram.write_value(kPdptAddress, kPdAddress | kPresentWritable);
  for (uint64_t i = 0; i < 512; ++i) {
    t.ram.write_value(kPdAddress + i * 8, (i << 21) | kPageSize2M | kPresentWritable);
  }
  // Null, 64-bit code (selector 0x8), data (selector 0x10). KVM takes the hidden parts of
  // the segment registers from KVM_SET_SREGS; the GDT is there for the guest's sake.
  const uint64_t gdt[] = {0, 0x00af9b000000ffff, 0x00cf93000000ffff};
  t.ram.write(kGdtAddress, std::span(reinterpret_cast<const uint8_t*>(gdt), sizeof(gdt)));

  // KVM checks EFER.LME/LMA against the guest's CPUID (6.x refuses them with EINVAL when
  // the guest has no long-mode bit), so the vCPU gets what the host supports first.
  DSEC_TRY(t.vcpu.set_cpuid2(DSEC_TRY(t.kvm.supported_cpuid())));
  kvm_sregs sregs = DSEC_TRY(t.vcpu.get_sregs());
  sregs.gdt.base = kGdtAddress;
  sregs.gdt.limit = sizeof(gdt) - 1;
  kvm_segment code_segment{};
  code_segment.limit = 0xffffffff;
  code_segment.selector = 0x8;
  code_segment.type = 0xb;  // execute/read, accessed
  code_segment.present = 1;
  code_segment.s = 1;
  code_segment.l = 1;
  code_segment.g = 1;
  kvm_segment data_segment = code_segment;
  data_segment.selector = 0x10;
  data_segment.type = 0x3;  // read/write, accessed
  data_segment.l = 0;
  data_segment.db = 1;
  sregs.cs = code_segment;
  sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = data_segment;
  // VM entry in long mode needs a busy 64-bit TSS in TR (Intel checks; AMD does not care).
  sregs.tr.type = 0xb;
  sregs.tr.present = 1;
  sregs.tr.s = 0;
  sregs.tr.limit = 0x67;
  sregs.cr3 = kPml4Address;
  sregs.cr4 = 1U << 5;                                       // PAE
  sregs.cr0 = (1U << 0) | (1U << 1) | (1U << 4) | (1U << 5)  // PE, MP, ET, NE
              | (1U << 16) | (1U << 31);                     // WP, PG
  sregs.efer = (1U << 8) | (1U << 10);                       // LME, LMA
  DSEC_TRY(t.vcpu.set_sregs(sregs));

  kvm_regs regs{};
  regs.rip = kCodeAddress;
  regs.rsp = kStackTop;
  regs.rflags = 0x2;
  return t.vcpu.set_regs(regs);
}

// Runs the vCPU once; the exit must be a T, copied to `out`. Call inside
// ASSERT_NO_FATAL_FAILURE. Spans in `out` point into kvm_run until the next run().
template <typename T>
void run_expecting(kvm::Vcpu& vcpu, T& out) {
  auto exit = vcpu.run();
  ASSERT_TRUE(exit.has_value()) << exit.error().message();
  const T* typed = std::get_if<T>(&*exit);
  ASSERT_NE(typed, nullptr) << "unexpected exit: " << kvm::describe(*exit);
  out = *typed;
}

inline std::vector<uint8_t> to_vector(std::span<const uint8_t> bytes) {
  return {bytes.begin(), bytes.end()};
}

// The next exit is an OUT of `data` (its size is the access size) to `port`.
inline void expect_out(kvm::Vcpu& vcpu, uint16_t port, const std::vector<uint8_t>& data) {
  kvm::IoExit io{};
  ASSERT_NO_FATAL_FAILURE(run_expecting(vcpu, io));
  EXPECT_EQ(io.direction, kvm::IoDirection::kOut);
  EXPECT_EQ(io.port, port);
  EXPECT_EQ(io.size, data.size());
  EXPECT_EQ(io.count, 1U);
  EXPECT_EQ(to_vector(io.data), data);
}

// The next exit is an IN of supply.size() bytes from `port`; answers it with `supply`.
inline void expect_in(kvm::Vcpu& vcpu, uint16_t port, const std::vector<uint8_t>& supply) {
  kvm::IoExit io{};
  ASSERT_NO_FATAL_FAILURE(run_expecting(vcpu, io));
  EXPECT_EQ(io.direction, kvm::IoDirection::kIn);
  EXPECT_EQ(io.port, port);
  EXPECT_EQ(io.size, supply.size());
  ASSERT_EQ(io.data.size(), supply.size());
  std::copy(supply.begin(), supply.end(), io.data.begin());
}

// The next exit is an MMIO read of supply.size() bytes at `address`; answers with `supply`.
inline void expect_mmio_read(kvm::Vcpu& vcpu, uint64_t address,
                             const std::vector<uint8_t>& supply) {
  kvm::MmioExit mmio{};
  ASSERT_NO_FATAL_FAILURE(run_expecting(vcpu, mmio));
  EXPECT_FALSE(mmio.is_write);
  EXPECT_EQ(mmio.address, address);
  ASSERT_EQ(mmio.data.size(), supply.size());
  std::copy(supply.begin(), supply.end(), mmio.data.begin());
}

// The next exit is an MMIO write of `data` at `address`.
inline void expect_mmio_write(kvm::Vcpu& vcpu, uint64_t address, const std::vector<uint8_t>& data) {
  kvm::MmioExit mmio{};
  ASSERT_NO_FATAL_FAILURE(run_expecting(vcpu, mmio));
  EXPECT_TRUE(mmio.is_write);
  EXPECT_EQ(mmio.address, address);
  EXPECT_EQ(to_vector(mmio.data), data);
}

// The next exit is HLT, with rip just past the HLT instruction at `hlt_address`.
inline void expect_hlt(kvm::Vcpu& vcpu, uint64_t hlt_address) {
  kvm::HltExit hlt{};
  ASSERT_NO_FATAL_FAILURE(run_expecting(vcpu, hlt));
  ASSERT_OK_AND_ASSIGN(const kvm_regs regs, vcpu.get_regs());
  EXPECT_EQ(regs.rip, hlt_address + 1);
}

}  // namespace dsec::test
