// The host's KVM: /dev/kvm, its API version, capabilities and system-wide queries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/kvm/linux_kvm.h"
#include "vmm/kvm/vm.h"

namespace dsec::kvm {

class KvmSystem {
 public:
  static constexpr const char* kDefaultDevice = "/dev/kvm";
  static constexpr int kApiVersion = 12;  // the only stable KVM API version

  // Opens `device`, checks the API version and every capability in required_capabilities().
  // Each failure says what to do (load kvm_intel/kvm_amd, fix permissions, use the test bed).
  static Result<KvmSystem> open(const std::string& device = kDefaultDevice);

  KvmSystem(KvmSystem&&) noexcept = default;
  KvmSystem& operator=(KvmSystem&&) noexcept = default;
  KvmSystem(const KvmSystem&) = delete;
  KvmSystem& operator=(const KvmSystem&) = delete;
  ~KvmSystem() = default;

  int fd() const { return fd_.get(); }
  const std::string& device() const { return device_; }

  // KVM_CHECK_EXTENSION: 0 when unsupported, otherwise a capability-specific positive value.
  Result<int> check_extension(int capability) const;
  // One Error listing every missing capability, or ok.
  Status check_required_capabilities() const;
  // Size of each vCPU's kvm_run mapping (KVM_GET_VCPU_MMAP_SIZE, read once at open).
  size_t vcpu_mmap_size() const { return vcpu_mmap_size_; }
  // KVM_GET_SUPPORTED_CPUID: every CPUID leaf KVM can expose to a guest.
  Result<std::vector<kvm_cpuid_entry2>> supported_cpuid() const;
  // KVM_GET_MSR_INDEX_LIST: the MSRs a vCPU's state consists of (what snapshots save).
  Result<std::vector<uint32_t>> msr_index_list() const;
  // The most vCPUs one VM may have (KVM_CAP_MAX_VCPUS, else KVM_CAP_NR_VCPUS, else 4).
  Result<int> max_vcpus() const;

  // Whether this host's KVM is PVM (the out-of-tree kvm_pvm module: KVM without VMX/SVM,
  // by shadow paging), which boots only PVM-enlightened guest kernels.
  static bool served_by_pvm();

  // KVM_CREATE_VM (default x86 machine type).
  Result<Vm> create_vm() const;

 private:
  KvmSystem(UniqueFd fd, std::string device) : fd_(std::move(fd)), device_(std::move(device)) {}

  UniqueFd fd_;
  std::string device_;
  size_t vcpu_mmap_size_ = 0;
};

}  // namespace dsec::kvm
