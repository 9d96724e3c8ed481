// Checked ioctl on a KVM file descriptor: a failure becomes an Error that names the ioctl.
#pragma once

#include <sys/ioctl.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "vmm/common/error.h"

namespace dsec::kvm {

// What an ioctl acted on, for error messages: {"vcpu", 2} reads "vcpu 2"; {"", 2} reads "2".
// Formatted only when the ioctl fails, so the success path (KVM_RUN included) never allocates.
struct IoctlSubject {
  const char* label = nullptr;  // nullptr: no subject at all
  uint64_t value = 0;
};

// "KVM_GET_REGS(vcpu 2)", "KVM_CREATE_VCPU(2)", "KVM_CREATE_VM".
std::string ioctl_description(const char* name, IoctlSubject subject);

// ioctl(fd, request, arg); on failure, an Error naming the ioctl and its subject with errno.
template <typename Arg>
Result<int> kvm_ioctl(int fd, unsigned long request, Arg arg, const char* name,
                      IoctlSubject subject = {}) {
  const int rc = ::ioctl(fd, request, arg);
  if (rc < 0) {
    return fail_errno(ioctl_description(name, subject), errno);
  }
  return rc;
}

}  // namespace dsec::kvm
