#include "vmm/kvm/kvm_system.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "vmm/kvm/capabilities.h"
#include "vmm/kvm/flex_buffer.h"
#include "vmm/kvm/ioctl.h"

namespace dsec::kvm {
namespace {

constexpr const char* kTestBedHint =
    "on a machine without hardware virtualization, run the command inside the KVM test bed: "
    "tools/kvm-harness -- <command>";

// What to do when open(device) fails, by errno.
std::string open_hint(const std::string& device, int err) {
  const std::string load =
      "load KVM for your CPU (modprobe kvm_intel or modprobe kvm_amd) and enable VT-x/AMD-V in "
      "the firmware";
  std::string permissions = "make " + device +
                            " readable and writable for this user (e.g. add the user to "
                            "the 'kvm' group and log in again)";
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ENXIO:
      return device + " does not exist: " + load + "; " + kTestBedHint;
    case EACCES:
    case EPERM:
      return permissions;
    default:
      return load + "; " + permissions + "; " + kTestBedHint;
  }
}

// KVM_GET_SUPPORTED_CPUID and KVM_GET_MSR_INDEX_LIST report E2BIG while the buffer is too
// small; grow until it fits, within a bound that no real host reaches.
constexpr size_t kMaxEntries = 1 << 16;

}  // namespace

Result<KvmSystem> KvmSystem::open(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    return fail_errno("cannot open KVM device " + device, err, open_hint(device, err));
  }
  KvmSystem kvm(std::move(fd), device);

  const auto version = kvm_ioctl(kvm.fd(), KVM_GET_API_VERSION, 0, "KVM_GET_API_VERSION");
  if (!version) {
    return std::unexpected(Error(version.error().what() + " on " + device,
                                 version.error().os_errno(),
                                 device + " is not a KVM device; use /dev/kvm"));
  }
  if (*version != kApiVersion) {
    return fail("KVM API version " + std::to_string(*version) + " at " + device +
                    ", dsec-vmm needs version " + std::to_string(kApiVersion),
                "run on a host with a current Linux kernel");
  }
  DSEC_TRY(kvm.check_required_capabilities());

  const int mmap_size =
      DSEC_TRY(kvm_ioctl(kvm.fd(), KVM_GET_VCPU_MMAP_SIZE, 0, "KVM_GET_VCPU_MMAP_SIZE"));
  if (static_cast<size_t>(mmap_size) < sizeof(kvm_run)) {
    return fail("KVM_GET_VCPU_MMAP_SIZE returned " + std::to_string(mmap_size) +
                ", smaller than struct kvm_run");
  }
  kvm.vcpu_mmap_size_ = static_cast<size_t>(mmap_size);
  return kvm;
}

bool KvmSystem::served_by_pvm() {
  struct stat st {};
  return ::stat("/sys/module/kvm_pvm", &st) == 0 && S_ISDIR(st.st_mode);
}

Result<int> KvmSystem::check_extension(int capability) const {
  return kvm_ioctl(fd(), KVM_CHECK_EXTENSION, capability, "KVM_CHECK_EXTENSION",
                   {"", static_cast<uint64_t>(capability)});
}

Status KvmSystem::check_required_capabilities() const {
  // An ioctl failure counts as "missing": the listed names say more than the errno would.
  return check_capabilities(required_capabilities(), [this](int capability) {
    const auto value = check_extension(capability);
    return value.has_value() && *value > 0;
  });
}

Result<std::vector<kvm_cpuid_entry2>> KvmSystem::supported_cpuid() const {
  for (size_t capacity = 128; capacity <= kMaxEntries; capacity *= 2) {
    FlexBuffer<kvm_cpuid2, kvm_cpuid_entry2> buffer(capacity);
    buffer->nent = static_cast<uint32_t>(capacity);
    const int rc = ::ioctl(fd(), KVM_GET_SUPPORTED_CPUID, buffer.get());
    if (rc < 0 && errno == E2BIG) {
      continue;
    }
    if (rc < 0) {
      return fail_errno("KVM_GET_SUPPORTED_CPUID", errno);
    }
    return std::vector<kvm_cpuid_entry2>(buffer->entries, buffer->entries + buffer->nent);
  }
  return fail_errno("KVM_GET_SUPPORTED_CPUID", E2BIG);
}

Result<std::vector<uint32_t>> KvmSystem::msr_index_list() const {
  // A first call with nmsrs = 0 fails with E2BIG and reports how many there are.
  uint32_t count = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    FlexBuffer<kvm_msr_list, uint32_t> buffer(count);
    buffer->nmsrs = count;
    const int rc = ::ioctl(fd(), KVM_GET_MSR_INDEX_LIST, buffer.get());
    if (rc < 0 && errno == E2BIG && buffer->nmsrs > count && buffer->nmsrs <= kMaxEntries) {
      count = buffer->nmsrs;
      continue;
    }
    if (rc < 0) {
      return fail_errno("KVM_GET_MSR_INDEX_LIST", errno);
    }
    return std::vector<uint32_t>(buffer->indices, buffer->indices + buffer->nmsrs);
  }
  return fail_errno("KVM_GET_MSR_INDEX_LIST", E2BIG);
}

Result<int> KvmSystem::max_vcpus() const {
  // Per the KVM API documentation: KVM_CAP_MAX_VCPUS, else KVM_CAP_NR_VCPUS, else 4.
  const int max = DSEC_TRY(check_extension(KVM_CAP_MAX_VCPUS));
  if (max > 0) {
    return max;
  }
  const int recommended = DSEC_TRY(check_extension(KVM_CAP_NR_VCPUS));
  return recommended > 0 ? recommended : 4;
}

Result<Vm> KvmSystem::create_vm() const {
  const int vm_fd = DSEC_TRY(kvm_ioctl(fd(), KVM_CREATE_VM, 0, "KVM_CREATE_VM"));
  return Vm(UniqueFd(vm_fd), vcpu_mmap_size_);
}

}  // namespace dsec::kvm
