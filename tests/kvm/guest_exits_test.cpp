// Hand-assembled guests on a real VM: port I/O, MMIO and HLT exits in real mode and in
// 64-bit long mode, and a triple fault that ends in KVM_EXIT_SHUTDOWN.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/kvm/test_vm.h"

namespace dsec::test {
namespace {

constexpr uint16_t kPort = 0x3f8;

// The script both modes follow, checked exit by exit:
//   OUT 0x42; IN (the test answers 0x5a); OUT of what IN read;
//   MMIO read of 4 bytes (the test answers 0x11223344); OUT of the 4 bytes read;
//   MMIO write of a known value; HLT.
void run_io_mmio_hlt_script(kvm::Vcpu& vcpu, uint64_t mmio_read_address,
                            uint64_t mmio_write_address,
                            const std::vector<uint8_t>& mmio_write_data, uint64_t hlt_address) {
  ASSERT_NO_FATAL_FAILURE(expect_out(vcpu, kPort, {0x42}));
  ASSERT_NO_FATAL_FAILURE(expect_in(vcpu, kPort, {0x5a}));
  ASSERT_NO_FATAL_FAILURE(expect_out(vcpu, kPort, {0x5a}));  // IN's value reached AL
  ASSERT_NO_FATAL_FAILURE(expect_mmio_read(vcpu, mmio_read_address, {0x44, 0x33, 0x22, 0x11}));
  ASSERT_NO_FATAL_FAILURE(expect_out(vcpu, kPort, {0x44, 0x33, 0x22, 0x11}));  // and EAX
  ASSERT_NO_FATAL_FAILURE(expect_mmio_write(vcpu, mmio_write_address, mmio_write_data));
  ASSERT_NO_FATAL_FAILURE(expect_hlt(vcpu, hlt_address));
}

TEST(GuestExits, RealModePortIoMmioAndHlt) {
  // 64 KiB of RAM: DS = 0x1000 puts the MMIO accesses at 0x10000 + offset, just above it.
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.ram_size = 0x10000}));
  const std::vector<uint8_t> code = {
      0xba, 0xf8, 0x03,                    // mov dx, 0x3f8
      0xb0, 0x42,                          // mov al, 0x42
      0xee,                                // out dx, al
      0xec,                                // in al, dx
      0xee,                                // out dx, al
      0xb8, 0x00, 0x10,                    // mov ax, 0x1000
      0x8e, 0xd8,                          // mov ds, ax
      0x66, 0xa1, 0x10, 0x00,              // mov eax, [0x0010]      (MMIO read 0x10010)
      0x66, 0xef,                          // out dx, eax
      0x66, 0xb8, 0xef, 0xbe, 0xad, 0xde,  // mov eax, 0xdeadbeef
      0x66, 0xa3, 0x20, 0x00,              // mov [0x0020], eax      (MMIO write 0x10020)
      0xf4,                                // hlt
  };
  ASSERT_OK(start_real_mode(t, code));
  run_io_mmio_hlt_script(t.vcpu, 0x10010, 0x10020, {0xef, 0xbe, 0xad, 0xde},
                         kCodeAddress + code.size() - 1);
}

TEST(GuestExits, LongModePortIoMmioAndHlt) {
  // 0x10000000 (256 MiB) is identity-mapped by the page tables but backed by no RAM.
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
  const std::vector<uint8_t> code = {
      0x66, 0xba, 0xf8, 0x03,                                      // mov dx, 0x3f8
      0xb0, 0x42,                                                  // mov al, 0x42
      0xee,                                                        // out dx, al
      0xec,                                                        // in al, dx
      0xee,                                                        // out dx, al
      0x8b, 0x04, 0x25, 0x00, 0x00, 0x00, 0x10,                    // mov eax, [0x10000000]
      0xef,                                                        // out dx, eax
      0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // mov rax, 0x1122...88
      0x48, 0x89, 0x04, 0x25, 0x08, 0x00, 0x00, 0x10,              // mov [0x10000008], rax
      0xf4,                                                        // hlt
  };
  ASSERT_OK(start_long_mode(t, code));
  run_io_mmio_hlt_script(t.vcpu, 0x10000000, 0x10000008,
                         {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11},
                         kCodeAddress + code.size() - 1);
  // The vCPU really ran in 64-bit mode: the 8-byte write above needed REX.W.
  ASSERT_OK_AND_ASSIGN(const kvm_sregs sregs, t.vcpu.get_sregs());
  EXPECT_EQ(sregs.efer & (1U << 10), 1U << 10);  // LMA
}

// After a guest triple-faults, the VMM process is unharmed and can run another VM.
void expect_process_still_runs_vms() {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
  const std::vector<uint8_t> code = {0xba, 0xf8, 0x03, 0xb0, 'k', 0xee, 0xf4};
  ASSERT_OK(start_real_mode(t, code));
  ASSERT_NO_FATAL_FAILURE(expect_out(t.vcpu, kPort, {'k'}));
  ASSERT_NO_FATAL_FAILURE(expect_hlt(t.vcpu, kCodeAddress + code.size() - 1));
}

// With an IDT limit of 0 no exception can be delivered: #UD -> #GP -> #DF -> triple fault.
TEST(GuestExits, LongModeTripleFaultIsShutdown) {
  {
    ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
    ASSERT_OK(start_long_mode(t, std::vector<uint8_t>{0x0f, 0x0b}));  // ud2
    ASSERT_OK_AND_ASSIGN(kvm_sregs sregs, t.vcpu.get_sregs());
    sregs.idt.base = 0;
    sregs.idt.limit = 0;
    ASSERT_OK(t.vcpu.set_sregs(sregs));
    kvm::ShutdownExit shutdown{};
    ASSERT_NO_FATAL_FAILURE(run_expecting(t.vcpu, shutdown));
  }
  expect_process_still_runs_vms();
}

// The same in real mode: INT 3 through an IVT whose limit is 0.
TEST(GuestExits, RealModeTripleFaultIsShutdown) {
  {
    ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
    ASSERT_OK(start_real_mode(t, std::vector<uint8_t>{0xcc}));  // int3
    ASSERT_OK_AND_ASSIGN(kvm_sregs sregs, t.vcpu.get_sregs());
    sregs.idt.base = 0;
    sregs.idt.limit = 0;
    ASSERT_OK(t.vcpu.set_sregs(sregs));
    kvm::ShutdownExit shutdown{};
    ASSERT_NO_FATAL_FAILURE(run_expecting(t.vcpu, shutdown));
  }
  expect_process_still_runs_vms();
}

}  // namespace
}  // namespace dsec::test
