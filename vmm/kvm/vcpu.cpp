#include "vmm/kvm/vcpu.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <utility>

#include "vmm/kvm/flex_buffer.h"
#include "vmm/kvm/ioctl.h"

namespace dsec::kvm {
namespace {

// KVM_GET_MSRS and KVM_SET_MSRS refuse nmsrs >= MAX_IO_MSRS (256) with E2BIG.
constexpr size_t kMaxMsrsPerCall = 255;

Result<int> check_vm_extension(int vm_fd, int capability, const char* name) {
  return kvm_ioctl(vm_fd, KVM_CHECK_EXTENSION, capability, name);
}

}  // namespace

Result<Vcpu> Vcpu::create(int vm_fd, uint32_t id, size_t mmap_size) {
  // KVM sizes a vCPU's XSAVE area when it creates the vCPU, from the same permissions that
  // KVM_CAP_XSAVE2 reports (arch_prctl ARCH_REQ_XCOMP_GUEST_PERM), so ask first.
  const int xsave2 =
      DSEC_TRY(check_vm_extension(vm_fd, KVM_CAP_XSAVE2, "KVM_CHECK_EXTENSION(KVM_CAP_XSAVE2)"));
  const int tsc_control = DSEC_TRY(
      check_vm_extension(vm_fd, KVM_CAP_TSC_CONTROL, "KVM_CHECK_EXTENSION(KVM_CAP_TSC_CONTROL)"));
  const int fd = DSEC_TRY(kvm_ioctl(vm_fd, KVM_CREATE_VCPU, static_cast<unsigned long>(id),
                                    "KVM_CREATE_VCPU", {"", id}));
  UniqueFd vcpu_fd(fd);
  void* run = ::mmap(nullptr, mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu_fd.get(), 0);
  if (run == MAP_FAILED) {
    return fail_errno(fmt::format("mmap of kvm_run for vcpu {} ({} bytes)", id, mmap_size), errno);
  }
  Vcpu vcpu(std::move(vcpu_fd), id, static_cast<kvm_run*>(run), mmap_size);
  vcpu.xsave2_ = xsave2 > 0;
  vcpu.xsave_size_ = std::max(sizeof(kvm_xsave), static_cast<size_t>(std::max(xsave2, 0)));
  vcpu.can_scale_tsc_ = tsc_control > 0;
  return vcpu;
}

Vcpu::Vcpu(Vcpu&& other) noexcept
    : fd_(std::move(other.fd_)),
      id_(other.id_),
      run_(std::exchange(other.run_, nullptr)),
      mmap_size_(std::exchange(other.mmap_size_, 0)),
      xsave_size_(other.xsave_size_),
      xsave2_(other.xsave2_),
      can_scale_tsc_(other.can_scale_tsc_) {}

Vcpu& Vcpu::operator=(Vcpu&& other) noexcept {
  if (this != &other) {
    unmap();
    fd_ = std::move(other.fd_);
    id_ = other.id_;
    run_ = std::exchange(other.run_, nullptr);
    mmap_size_ = std::exchange(other.mmap_size_, 0);
    xsave_size_ = other.xsave_size_;
    xsave2_ = other.xsave2_;
    can_scale_tsc_ = other.can_scale_tsc_;
  }
  return *this;
}

Vcpu::~Vcpu() {
  unmap();
}

void Vcpu::unmap() {
  if (run_ != nullptr) {
    ::munmap(run_, mmap_size_);
    run_ = nullptr;
  }
}

Result<VcpuExit> Vcpu::run() {
  // Called directly rather than through kvm_ioctl: EINTR is an expected outcome here.
  if (::ioctl(fd(), KVM_RUN, 0) < 0) {
    const int err = errno;
    if (err == EINTR) {
      return InterruptedExit{};
    }
    return fail_errno(ioctl_description("KVM_RUN", {"vcpu", id_}), err);
  }
  return decode_exit(*run_, mmap_size_);
}

void Vcpu::set_immediate_exit(bool value) {
  std::atomic_ref<uint8_t>(run_->immediate_exit).store(value ? 1 : 0, std::memory_order_release);
}

template <typename T>
Result<T> Vcpu::get(unsigned long request, const char* name) const {
  T value{};
  DSEC_TRY(kvm_ioctl(fd(), request, &value, name, {"vcpu", id_}));
  return value;
}

template <typename T>
Status Vcpu::set(unsigned long request, const T& value, const char* name) {
  DSEC_TRY(kvm_ioctl(fd(), request, &value, name, {"vcpu", id_}));
  return ok();
}

Result<kvm_regs> Vcpu::get_regs() const {
  return get<kvm_regs>(KVM_GET_REGS, "KVM_GET_REGS");
}
Status Vcpu::set_regs(const kvm_regs& regs) {
  return set(KVM_SET_REGS, regs, "KVM_SET_REGS");
}

Result<kvm_sregs> Vcpu::get_sregs() const {
  return get<kvm_sregs>(KVM_GET_SREGS, "KVM_GET_SREGS");
}
Status Vcpu::set_sregs(const kvm_sregs& sregs) {
  return set(KVM_SET_SREGS, sregs, "KVM_SET_SREGS");
}

Result<kvm_fpu> Vcpu::get_fpu() const {
  return get<kvm_fpu>(KVM_GET_FPU, "KVM_GET_FPU");
}
Status Vcpu::set_fpu(const kvm_fpu& fpu) {
  return set(KVM_SET_FPU, fpu, "KVM_SET_FPU");
}

namespace {

using CpuidEntries = std::vector<kvm_cpuid_entry2>;

// One KVM_GET_CPUID2 with room for `capacity` entries: true with `entries` filled if the
// vCPU's entries fit, false if it has more (E2BIG).
Result<bool> get_cpuid2_with(int fd, uint32_t id, uint32_t capacity, CpuidEntries& entries) {
  FlexBuffer<kvm_cpuid2, kvm_cpuid_entry2> buffer(capacity);
  buffer->nent = capacity;
  if (::ioctl(fd, KVM_GET_CPUID2, buffer.get()) == 0) {
    entries.assign(buffer->entries, buffer->entries + capacity);
    return true;
  }
  if (errno == E2BIG) {
    return false;
  }
  return fail_errno(ioctl_description("KVM_GET_CPUID2", {"vcpu", id}), errno);
}

}  // namespace

Result<std::vector<kvm_cpuid_entry2>> Vcpu::get_cpuid2() const {
  // KVM_GET_CPUID2 fails with E2BIG while nent is below the vCPU's entry count, but Linux
  // 6.1 tells the count neither on failure nor on success. The smallest nent that succeeds
  // is the count: find a capacity that fits by doubling, then the smallest by bisection.
  constexpr uint32_t kMaxEntries = 1U << 16;
  CpuidEntries entries;
  if (DSEC_TRY(get_cpuid2_with(fd(), id_, 0, entries))) {
    return entries;
  }
  uint32_t too_small = 0;
  uint32_t fitting = 64;
  while (!DSEC_TRY(get_cpuid2_with(fd(), id_, fitting, entries))) {
    too_small = fitting;
    fitting *= 2;
    if (fitting > kMaxEntries) {
      return fail_errno(ioctl_description("KVM_GET_CPUID2", {"vcpu", id_}), E2BIG);
    }
  }
  CpuidEntries fewer;
  while (fitting - too_small > 1) {
    const uint32_t middle = too_small + (fitting - too_small) / 2;
    if (DSEC_TRY(get_cpuid2_with(fd(), id_, middle, fewer))) {
      fitting = middle;
      entries.swap(fewer);
    } else {
      too_small = middle;
    }
  }
  return entries;
}

Status Vcpu::set_cpuid2(std::span<const kvm_cpuid_entry2> entries) {
  FlexBuffer<kvm_cpuid2, kvm_cpuid_entry2> buffer(entries.size());
  buffer->nent = static_cast<uint32_t>(entries.size());
  std::copy(entries.begin(), entries.end(), buffer->entries);
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_CPUID2, buffer.get(), "KVM_SET_CPUID2", {"vcpu", id_}));
  return ok();
}

Result<size_t> Vcpu::msrs_call(unsigned long request, const char* name,
                               std::span<kvm_msr_entry> entries) const {
  FlexBuffer<kvm_msrs, kvm_msr_entry> buffer(entries.size());
  buffer->nmsrs = static_cast<uint32_t>(entries.size());
  std::copy(entries.begin(), entries.end(), buffer->entries);
  // Returns how many MSRs it processed, stopping at the first it cannot.
  const int done = DSEC_TRY(kvm_ioctl(fd(), request, buffer.get(), name, {"vcpu", id_}));
  std::copy(buffer->entries, buffer->entries + entries.size(), entries.begin());
  return static_cast<size_t>(done);
}

Result<std::vector<kvm_msr_entry>> Vcpu::read_msrs(std::span<const uint32_t> indices) const {
  std::vector<kvm_msr_entry> entries(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    entries[i].index = indices[i];
  }
  size_t read = 0;
  while (read < entries.size()) {
    const size_t chunk = std::min(kMaxMsrsPerCall, entries.size() - read);
    const size_t done =
        DSEC_TRY(msrs_call(KVM_GET_MSRS, "KVM_GET_MSRS", std::span(entries).subspan(read, chunk)));
    read += done;
    if (done < chunk) {
      break;
    }
  }
  entries.resize(read);
  return entries;
}

Result<std::vector<kvm_msr_entry>> Vcpu::get_msrs(std::span<const uint32_t> indices) const {
  auto entries = DSEC_TRY(read_msrs(indices));
  if (entries.size() < indices.size()) {
    return fail(fmt::format("{}: read {} of {} MSRs; MSR {:#x} cannot be read",
                            ioctl_description("KVM_GET_MSRS", {"vcpu", id_}), entries.size(),
                            indices.size(), indices[entries.size()]));
  }
  return entries;
}

Status Vcpu::set_msrs(std::span<const kvm_msr_entry> entries) {
  std::vector<kvm_msr_entry> buffer(entries.begin(), entries.end());
  size_t written = 0;
  while (written < buffer.size()) {
    const size_t chunk = std::min(kMaxMsrsPerCall, buffer.size() - written);
    const size_t done = DSEC_TRY(
        msrs_call(KVM_SET_MSRS, "KVM_SET_MSRS", std::span(buffer).subspan(written, chunk)));
    written += done;
    if (done < chunk) {
      const kvm_msr_entry& refused = entries[written];
      return fail(fmt::format("{}: wrote {} of {} MSRs; MSR {:#x} refused value {:#x}",
                              ioctl_description("KVM_SET_MSRS", {"vcpu", id_}), written,
                              entries.size(), refused.index, refused.data));
    }
  }
  return ok();
}

Result<kvm_lapic_state> Vcpu::get_lapic() const {
  return get<kvm_lapic_state>(KVM_GET_LAPIC, "KVM_GET_LAPIC");
}
Status Vcpu::set_lapic(const kvm_lapic_state& lapic) {
  return set(KVM_SET_LAPIC, lapic, "KVM_SET_LAPIC");
}

Result<kvm_mp_state> Vcpu::get_mp_state() const {
  return get<kvm_mp_state>(KVM_GET_MP_STATE, "KVM_GET_MP_STATE");
}
Status Vcpu::set_mp_state(const kvm_mp_state& mp_state) {
  return set(KVM_SET_MP_STATE, mp_state, "KVM_SET_MP_STATE");
}

Result<kvm_xsave> Vcpu::get_xsave() const {
  return get<kvm_xsave>(KVM_GET_XSAVE, "KVM_GET_XSAVE");
}
Status Vcpu::set_xsave(const kvm_xsave& xsave) {
  return set(KVM_SET_XSAVE, xsave, "KVM_SET_XSAVE");
}

Result<std::vector<uint8_t>> Vcpu::get_xsave_area() const {
  // KVM_GET_XSAVE2 writes xsave_size() bytes whatever size its ioctl number encodes.
  std::vector<uint8_t> area(xsave_size_);
  if (xsave2_) {
    DSEC_TRY(kvm_ioctl(fd(), KVM_GET_XSAVE2, area.data(), "KVM_GET_XSAVE2", {"vcpu", id_}));
  } else {
    DSEC_TRY(kvm_ioctl(fd(), KVM_GET_XSAVE, area.data(), "KVM_GET_XSAVE", {"vcpu", id_}));
  }
  return area;
}

Status Vcpu::set_xsave_area(std::span<const uint8_t> area) {
  std::vector<uint8_t> buffer(std::max(area.size(), xsave_size_));
  std::copy(area.begin(), area.end(), buffer.begin());
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_XSAVE, buffer.data(), "KVM_SET_XSAVE", {"vcpu", id_}));
  return ok();
}

Result<kvm_xcrs> Vcpu::get_xcrs() const {
  return get<kvm_xcrs>(KVM_GET_XCRS, "KVM_GET_XCRS");
}
Status Vcpu::set_xcrs(const kvm_xcrs& xcrs) {
  return set(KVM_SET_XCRS, xcrs, "KVM_SET_XCRS");
}

Result<kvm_vcpu_events> Vcpu::get_vcpu_events() const {
  return get<kvm_vcpu_events>(KVM_GET_VCPU_EVENTS, "KVM_GET_VCPU_EVENTS");
}
Status Vcpu::set_vcpu_events(const kvm_vcpu_events& events) {
  return set(KVM_SET_VCPU_EVENTS, events, "KVM_SET_VCPU_EVENTS");
}

Result<kvm_debugregs> Vcpu::get_debugregs() const {
  return get<kvm_debugregs>(KVM_GET_DEBUGREGS, "KVM_GET_DEBUGREGS");
}
Status Vcpu::set_debugregs(const kvm_debugregs& debugregs) {
  return set(KVM_SET_DEBUGREGS, debugregs, "KVM_SET_DEBUGREGS");
}

Result<uint32_t> Vcpu::get_tsc_khz() const {
  // The rate is the ioctl's return value.
  const int khz = DSEC_TRY(kvm_ioctl(fd(), KVM_GET_TSC_KHZ, 0, "KVM_GET_TSC_KHZ", {"vcpu", id_}));
  return static_cast<uint32_t>(khz);
}

Status Vcpu::set_tsc_khz(uint32_t khz) {
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_TSC_KHZ, static_cast<unsigned long>(khz), "KVM_SET_TSC_KHZ",
                     {"vcpu", id_}));
  return ok();
}

Status Vcpu::kvmclock_ctrl() {
  if (::ioctl(fd(), KVM_KVMCLOCK_CTRL, 0) == 0 || errno == EINVAL) {
    return ok();
  }
  return fail_errno(ioctl_description("KVM_KVMCLOCK_CTRL", {"vcpu", id_}), errno);
}

}  // namespace dsec::kvm
