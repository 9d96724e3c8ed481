// `dsec-vmm smoke` on a host with KVM: the guest's greeting reaches stdout, exit status 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;

TEST(CliSmoke, PrintsWhatTheGuestWroteAndExitsZero) {
  const CommandOutput result =
      run_command(dsec::test::binary_path("/vmm/dsec-vmm") + " smoke 2>&1");
  EXPECT_EQ(result.exit_status, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("Hello from a KVM guest\n"));
  EXPECT_THAT(result.output, HasSubstr("guest halted"));
}

}  // namespace
}  // namespace dsec::test
