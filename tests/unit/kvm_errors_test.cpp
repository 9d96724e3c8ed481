// KVM errors a user sees without any KVM: a missing or wrong device, missing capabilities,
// and how a failed ioctl is named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "vmm/kvm/capabilities.h"
#include "vmm/kvm/ioctl.h"
#include "vmm/kvm/kvm_system.h"

namespace dsec::kvm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(KvmErrors, MissingDeviceNamesThePathAndWhatToDo) {
  const auto kvm = KvmSystem::open("/nonexistent/kvm");
  ASSERT_FALSE(kvm.has_value());
  EXPECT_EQ(kvm.error().os_errno(), ENOENT);
  EXPECT_THAT(kvm.error().message(),
              AllOf(HasSubstr("/nonexistent/kvm"), HasSubstr("No such file or directory"),
                    HasSubstr("kvm_intel"), HasSubstr("kvm_amd"), HasSubstr("tools/kvm-harness")));
}

TEST(KvmErrors, DeviceThatIsNotKvmIsRejectedByApiVersionCheck) {
  const std::string path = ::testing::TempDir() + "kvm_errors_not_a_device";
  std::ofstream(path) << "not a device";
  const auto kvm = KvmSystem::open(path);
  ASSERT_FALSE(kvm.has_value());
  EXPECT_EQ(kvm.error().os_errno(), ENOTTY);
  EXPECT_THAT(kvm.error().message(), AllOf(HasSubstr("KVM_GET_API_VERSION"), HasSubstr(path),
                                           HasSubstr("not a KVM device")));
  std::remove(path.c_str());
}

TEST(KvmErrors, AllCapabilitiesPresentIsOk) {
  EXPECT_TRUE(check_capabilities(required_capabilities(), [](int) { return true; }).has_value());
}

TEST(KvmErrors, EveryMissingCapabilityIsListedInOneError) {
  const std::vector<Capability> required = {
      {1, "KVM_CAP_ONE"}, {2, "KVM_CAP_TWO"}, {3, "KVM_CAP_THREE"}, {4, "KVM_CAP_FOUR"}};
  std::vector<int> asked;
  const auto status = check_capabilities(required, [&asked](int id) {
    asked.push_back(id);
    return id == 2;  // only TWO is present
  });
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(asked, (std::vector<int>{1, 2, 3, 4}));  // no early exit at the first missing one
  const std::string message = status.error().message();
  EXPECT_THAT(message, HasSubstr("lacks 3 capabilities"));
  EXPECT_THAT(message, HasSubstr("KVM_CAP_ONE, KVM_CAP_THREE, KVM_CAP_FOUR"));
  EXPECT_THAT(message, Not(HasSubstr("KVM_CAP_TWO")));
  EXPECT_THAT(message, HasSubstr("tools/kvm-harness"));
}

TEST(KvmErrors, OneMissingCapabilityReadsInTheSingular) {
  const std::vector<Capability> required = {{7, "KVM_CAP_SEVEN"}};
  const auto status = check_capabilities(required, [](int) { return false; });
  ASSERT_FALSE(status.has_value());
  EXPECT_THAT(status.error().message(),
              HasSubstr("lacks 1 capability dsec-vmm needs: KVM_CAP_SEVEN"));
}

TEST(KvmErrors, RequiredCapabilitiesCoverWhatTheVmmUses) {
  std::vector<std::string> names;
  for (const Capability& cap : required_capabilities()) {
    names.emplace_back(cap.name);
  }
  for (const char* expected :
       {"KVM_CAP_IRQCHIP", "KVM_CAP_HLT", "KVM_CAP_USER_MEMORY", "KVM_CAP_SET_TSS_ADDR",
        "KVM_CAP_EXT_CPUID", "KVM_CAP_IOEVENTFD", "KVM_CAP_IRQFD", "KVM_CAP_PIT2",
        "KVM_CAP_IMMEDIATE_EXIT", "KVM_CAP_ADJUST_CLOCK", "KVM_CAP_MP_STATE", "KVM_CAP_XSAVE",
        "KVM_CAP_XCRS", "KVM_CAP_TSC_DEADLINE_TIMER", "KVM_CAP_VCPU_EVENTS", "KVM_CAP_DEBUGREGS",
        "KVM_CAP_SYNC_MMU"}) {
    EXPECT_THAT(names, ::testing::Contains(expected));
  }
}

TEST(KvmErrors, FailedIoctlIsNamedWithItsSubjectAndErrno) {
  EXPECT_EQ(ioctl_description("KVM_CREATE_VCPU", {"", 2}), "KVM_CREATE_VCPU(2)");
  EXPECT_EQ(ioctl_description("KVM_GET_REGS", {"vcpu", 3}), "KVM_GET_REGS(vcpu 3)");
  EXPECT_EQ(ioctl_description("KVM_CREATE_VM", {}), "KVM_CREATE_VM");

  // An ioctl on a descriptor that is not open fails with EBADF, named.
  const auto result = kvm_ioctl(-1, KVM_CREATE_VCPU, 2UL, "KVM_CREATE_VCPU", {"", 2});
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().os_errno(), EBADF);
  EXPECT_THAT(result.error().message(), HasSubstr("KVM_CREATE_VCPU(2): Bad file descriptor"));
}

}  // namespace
}  // namespace dsec::kvm
