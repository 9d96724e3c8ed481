// One KVM vCPU: its fd, its kvm_run mapping, KVM_RUN, and every piece of its state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/kvm/linux_kvm.h"
#include "vmm/kvm/vcpu_exit.h"

namespace dsec::kvm {

class Vcpu {
 public:
  // KVM_CREATE_VCPU on `vm_fd`, then mmap of its kvm_run (`mmap_size` bytes, from
  // KVM_GET_VCPU_MMAP_SIZE); also asks the VM its XSAVE size and whether it can scale the
  // TSC (both fixed once the vCPU exists). Vm::create_vcpu() is the usual way in.
  static Result<Vcpu> create(int vm_fd, uint32_t id, size_t mmap_size);

  Vcpu(Vcpu&& other) noexcept;
  Vcpu& operator=(Vcpu&& other) noexcept;
  Vcpu(const Vcpu&) = delete;
  Vcpu& operator=(const Vcpu&) = delete;
  ~Vcpu();  // unmaps kvm_run, then closes the fd

  uint32_t id() const { return id_; }
  int fd() const { return fd_.get(); }

  // KVM_RUN until the next exit to userspace. The spans in an IoExit or MmioExit point into
  // kvm_run and stay valid until the next run(); fill them for an IN or an MMIO read.
  Result<VcpuExit> run();
  // Makes the next KVM_RUN return InterruptedExit at once (after completing a pending I/O
  // instruction). Safe from another thread or a signal handler, to kick the vCPU out.
  void set_immediate_exit(bool value);

  Result<kvm_regs> get_regs() const;
  Status set_regs(const kvm_regs& regs);
  Result<kvm_sregs> get_sregs() const;
  Status set_sregs(const kvm_sregs& sregs);
  // x86 KVM ignores kvm_fpu.mxcsr in both directions (seen on Linux 6.1). MXCSR goes
  // through XSAVE instead: region[6], taken by KVM_SET_XSAVE only when XSTATE_BV
  // (region[128]) has the x87 or SSE bit set.
  Result<kvm_fpu> get_fpu() const;
  Status set_fpu(const kvm_fpu& fpu);
  Result<std::vector<kvm_cpuid_entry2>> get_cpuid2() const;
  Status set_cpuid2(std::span<const kvm_cpuid_entry2> entries);
  // KVM_GET_MSRS and KVM_SET_MSRS take fewer than 256 MSRs a call (MAX_IO_MSRS); these
  // split longer lists into chunks, in order.
  // Reads the MSRs named by `indices`; fails, naming the first, if KVM cannot read one.
  Result<std::vector<kvm_msr_entry>> get_msrs(std::span<const uint32_t> indices) const;
  // Reads the MSRs named by `indices` in order up to the first KVM cannot read: returns
  // those before it (all of them when every one reads). Fails only if the ioctl does.
  Result<std::vector<kvm_msr_entry>> read_msrs(std::span<const uint32_t> indices) const;
  // Writes all of `entries`; fails, naming the first, if KVM refuses one.
  Status set_msrs(std::span<const kvm_msr_entry> entries);
  Result<kvm_lapic_state> get_lapic() const;
  Status set_lapic(const kvm_lapic_state& lapic);
  Result<kvm_mp_state> get_mp_state() const;
  Status set_mp_state(const kvm_mp_state& mp_state);
  // The legacy 4 KiB KVM_GET_XSAVE layout: enough unless the VMM enables AMX for guests.
  Result<kvm_xsave> get_xsave() const;
  Status set_xsave(const kvm_xsave& xsave);
  // The whole XSAVE area, xsave_size() bytes: KVM_GET_XSAVE2 (KVM_GET_XSAVE where the
  // kernel predates KVM_CAP_XSAVE2). What snapshots save.
  Result<std::vector<uint8_t>> get_xsave_area() const;
  // KVM_SET_XSAVE of `area`, zero-padded to xsave_size() if shorter (KVM reads exactly
  // that many bytes); a longer area's extra components make KVM refuse it unless unused.
  Status set_xsave_area(std::span<const uint8_t> area);
  // Bytes in this vCPU's XSAVE area: KVM_CHECK_EXTENSION(KVM_CAP_XSAVE2) on its VM when it
  // was created (at least 4096), or 4096 where the capability is missing.
  size_t xsave_size() const { return xsave_size_; }
  Result<kvm_xcrs> get_xcrs() const;
  Status set_xcrs(const kvm_xcrs& xcrs);
  Result<kvm_vcpu_events> get_vcpu_events() const;
  Status set_vcpu_events(const kvm_vcpu_events& events);
  Result<kvm_debugregs> get_debugregs() const;
  Status set_debugregs(const kvm_debugregs& debugregs);

  // The guest's TSC frequency in kHz (KVM_GET_TSC_KHZ); 0 if KVM does not know it. On a
  // vCPU not yet set otherwise, the host's rate.
  Result<uint32_t> get_tsc_khz() const;
  // KVM_SET_TSC_KHZ. Only with can_scale_tsc() does KVM really run the TSC at that rate.
  Status set_tsc_khz(uint32_t khz);
  // Whether this host's KVM can scale a guest's TSC to another rate (KVM_CAP_TSC_CONTROL,
  // read on the VM when the vCPU was created).
  bool can_scale_tsc() const { return can_scale_tsc_; }
  // KVM_KVMCLOCK_CTRL: tells the guest, through its kvmclock page, that it was paused, so
  // that its soft-lockup watchdog does not fire after a long pause. A guest that has not
  // set up kvmclock has nothing to tell (KVM answers EINVAL): that is ok too.
  Status kvmclock_ctrl();

 private:
  Vcpu(UniqueFd fd, uint32_t id, kvm_run* run, size_t mmap_size)
      : fd_(std::move(fd)), id_(id), run_(run), mmap_size_(mmap_size) {}

  // One KVM_GET_MSRS or KVM_SET_MSRS of at most kMaxMsrsPerCall entries; returns how many
  // KVM processed (it stops at the first it refuses).
  Result<size_t> msrs_call(unsigned long request, const char* name,
                           std::span<kvm_msr_entry> entries) const;

  // Get/set of one fixed-size state struct; `name` is the ioctl's name for errors.
  template <typename T>
  Result<T> get(unsigned long request, const char* name) const;
  template <typename T>
  Status set(unsigned long request, const T& value, const char* name);
  void unmap();

  UniqueFd fd_;
  uint32_t id_ = 0;
  kvm_run* run_ = nullptr;
  size_t mmap_size_ = 0;
  size_t xsave_size_ = sizeof(kvm_xsave);
  bool xsave2_ = false;  // KVM_GET_XSAVE2 exists (KVM_CAP_XSAVE2 > 0)
  bool can_scale_tsc_ = false;
};

}  // namespace dsec::kvm
