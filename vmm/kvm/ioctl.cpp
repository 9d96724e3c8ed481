#include "vmm/kvm/ioctl.h"

#include <fmt/format.h>

namespace dsec::kvm {

std::string ioctl_description(const char* name, IoctlSubject subject) {
  if (subject.label == nullptr) {
    return name;
  }
  if (*subject.label == '\0') {
    return fmt::format("{}({})", name, subject.value);
  }
  return fmt::format("{}({} {})", name, subject.label, subject.value);
}

}  // namespace dsec::kvm
