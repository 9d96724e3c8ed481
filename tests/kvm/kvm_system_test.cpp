// The host's KVM as the VMM sees it: capabilities, system queries, errors that name their
// ioctl, and no file descriptor or mapping left behind by VM create/destroy cycles.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/kvm/test_vm.h"
#include "vmm/kvm/capabilities.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;

TEST(KvmSystem, TestBedKernelHasEveryRequiredCapability) {
  ASSERT_OK_AND_ASSIGN(const kvm::KvmSystem kvm, kvm::KvmSystem::open());
  ASSERT_OK(kvm.check_required_capabilities());
  for (const kvm::Capability& cap : kvm::required_capabilities()) {
    ASSERT_OK_AND_ASSIGN(const int value, kvm.check_extension(cap.id));
    EXPECT_GT(value, 0) << cap.name;
  }
}

TEST(KvmSystem, ReportsSystemWideFacts) {
  ASSERT_OK_AND_ASSIGN(const kvm::KvmSystem kvm, kvm::KvmSystem::open());
  EXPECT_GE(kvm.vcpu_mmap_size(), sizeof(kvm_run));

  ASSERT_OK_AND_ASSIGN(const auto cpuid, kvm.supported_cpuid());
  const bool has_leaf0 =
      std::any_of(cpuid.begin(), cpuid.end(), [](const auto& e) { return e.function == 0; });
  EXPECT_TRUE(has_leaf0) << cpuid.size() << " entries, none for leaf 0";

  ASSERT_OK_AND_ASSIGN(const auto msrs, kvm.msr_index_list());
  constexpr uint32_t kMsrIa32Tsc = 0x10;
  EXPECT_THAT(msrs, ::testing::Contains(kMsrIa32Tsc));

  ASSERT_OK_AND_ASSIGN(const int max_vcpus, kvm.max_vcpus());
  EXPECT_GE(max_vcpus, 1);
}

TEST(KvmSystem, FailedIoctlNamesItselfAndItsSubject) {
  ASSERT_OK_AND_ASSIGN(const kvm::KvmSystem kvm, kvm::KvmSystem::open());
  ASSERT_OK_AND_ASSIGN(const kvm::Vm vm, kvm.create_vm());
  ASSERT_OK_AND_ASSIGN(const kvm::Vcpu first, vm.create_vcpu(2));
  const auto second = vm.create_vcpu(2);  // the same id again
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().os_errno(), EEXIST);
  EXPECT_THAT(second.error().message(), HasSubstr("KVM_CREATE_VCPU(2)"));
}

size_t count_open_fds() {
  const auto entries = std::filesystem::directory_iterator("/proc/self/fd");
  return static_cast<size_t>(
      std::distance(std::filesystem::begin(entries), std::filesystem::end(entries)));
}

// Lines of /proc/self/maps that are a vCPU's kvm_run ("anon_inode:kvm-vcpu:N").
size_t count_vcpu_mappings() {
  std::ifstream maps("/proc/self/maps");
  size_t count = 0;
  for (std::string line; std::getline(maps, line);) {
    count += line.find("kvm-vcpu") != std::string::npos ? 1 : 0;
  }
  return count;
}

TEST(KvmSystem, CreateAndDestroyLeavesNoFdOrMapping) {
  const size_t fds_before = count_open_fds();
  for (int round = 0; round < 5; ++round) {
    ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
    std::vector<kvm::Vcpu> more;
    for (uint32_t id = 1; id < 4; ++id) {
      ASSERT_OK_AND_ASSIGN(kvm::Vcpu vcpu, t.vm.create_vcpu(id));
      more.push_back(std::move(vcpu));
    }
    // With the in-kernel irqchip HLT never exits to the VMM, so the guest ends with an OUT.
    const std::vector<uint8_t> code = {0xba, 0xf8, 0x03, 0xee};  // mov dx, 0x3f8; out dx, al
    ASSERT_OK(start_real_mode(t, code));
    ASSERT_NO_FATAL_FAILURE(expect_out(t.vcpu, 0x3f8, {0x00}));
    EXPECT_EQ(count_vcpu_mappings(), 4U);
    EXPECT_EQ(count_open_fds(), fds_before + 2 + 4);  // /dev/kvm, the VM, 4 vCPUs
  }
  EXPECT_EQ(count_open_fds(), fds_before);
  EXPECT_EQ(count_vcpu_mappings(), 0U);
}

}  // namespace
}  // namespace dsec::test
