// The jail's options: --cgroup settings, the checks of a jail's configuration, and which
// paths a jailed VMM can reach (vmm/jail/jail_config.h, jail_paths.h). Jailing itself needs
// root and runs in the e2e tier (tests/e2e/jail_test.cpp).
#include "vmm/jail/jail_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/jail/jail_paths.h"

namespace dsec::jail {
namespace {

using ::testing::HasSubstr;

TEST(JailCgroupSetting, ParsesFileAndValueAndNamesTheController) {
  const auto memory = parse_cgroup_setting("memory.max=256M");
  ASSERT_TRUE(memory) << memory.error().message();
  EXPECT_EQ(memory->file, "memory.max");
  EXPECT_EQ(memory->value, "256M");
  EXPECT_EQ(memory->controller(), "memory");
  const auto cpu = parse_cgroup_setting("cpu.max=50000 100000");
  ASSERT_TRUE(cpu) << cpu.error().message();
  EXPECT_EQ(cpu->value, "50000 100000");
  EXPECT_EQ(cpu->controller(), "cpu");
  const auto pressure = parse_cgroup_setting("memory.oom.group=1");
  ASSERT_TRUE(pressure) << pressure.error().message();
  EXPECT_EQ(pressure->controller(), "memory");
}

TEST(JailCgroupSetting, RefusesWhatIsNotAControllersFileWithAValue) {
  for (const char* bad : {"memory.max", "=1", "memory=1", ".max=1", "memory.=1", "../memory.max=1",
                          "memory.max/../../x=1", "memory..max=1"}) {
    const auto parsed = parse_cgroup_setting(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_THAT(parsed.error().message(), HasSubstr("memory.max, cpu.max or pids.max")) << bad;
  }
  const auto core = parse_cgroup_setting("cgroup.procs=1");
  ASSERT_FALSE(core);
  EXPECT_THAT(core.error().message(), HasSubstr("the jail's own"));
  for (const char* bad : {"memory.max=", "memory.max=1\n2"}) {
    const auto parsed = parse_cgroup_setting(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_THAT(parsed.error().message(), HasSubstr("empty or multi-line value"));
  }
}

class JailConfigTest : public ::testing::Test {
 protected:
  JailConfig valid() const {
    JailConfig config;
    config.dir = dir_.path().string();
    config.uid = 1000;
    config.gid = 1000;
    return config;
  }
  test::TempDir dir_;
};

TEST_F(JailConfigTest, AValidConfigPassesAndNamesItsCgroup) {
  const JailConfig config = valid();
  EXPECT_TRUE(validate(config)) << validate(config).error().message();
  EXPECT_EQ(cgroup_path(config), "/sys/fs/cgroup/dsec-vmm/" + dir_.path().filename().string());
}

TEST_F(JailConfigTest, RootIdsAreRefused) {
  for (const auto& [uid, gid] : {std::pair{0U, 1000U}, std::pair{1000U, 0U}}) {
    JailConfig config = valid();
    config.uid = uid;
    config.gid = gid;
    const auto checked = validate(config);
    ASSERT_FALSE(checked);
    EXPECT_THAT(checked.error().message(), HasSubstr("unprivileged --uid and --gid"));
  }
}

TEST_F(JailConfigTest, TheDirectoryMustBeAnExistingAbsoluteDirectoryOtherThanRoot) {
  const std::string file = dir_.file("a-file");
  std::ofstream(file) << "x";
  for (const auto& [dir, why] : std::vector<std::pair<std::string, std::string>>{
           {"relative/dir", "not an absolute directory other than /"},
           {"/", "not an absolute directory other than /"},
           {dir_.file("missing"), "create the directory first"},
           {file, "is not a directory"}}) {
    JailConfig config = valid();
    config.dir = dir;
    const auto checked = validate(config);
    ASSERT_FALSE(checked) << dir;
    EXPECT_THAT(checked.error().message(), HasSubstr(why)) << dir;
  }
}

TEST_F(JailConfigTest, TheCgroupParentStaysBelowTheCgroupRoot) {
  for (const char* parent : {"", "/sys/fs/cgroup/x", "../x", "a/../../x"}) {
    JailConfig config = valid();
    config.cgroup_parent = parent;
    const auto checked = validate(config);
    ASSERT_FALSE(checked) << parent;
    EXPECT_THAT(checked.error().message(), HasSubstr("not a relative path below the cgroup root"));
  }
  JailConfig nested = valid();
  nested.cgroup_parent = "pool/sandboxes";
  EXPECT_TRUE(validate(nested));
}

TEST_F(JailConfigTest, TooFewOpenFilesAreRefused) {
  JailConfig config = valid();
  config.max_open_files = 10;
  const auto checked = validate(config);
  ASSERT_FALSE(checked);
  EXPECT_THAT(checked.error().message(), HasSubstr("give at least 64"));
}

TEST(JailPaths, APathInTheJailBecomesRelativeToIt) {
  test::TempDir dir;
  std::filesystem::create_directory(dir.path() / "sub");
  const auto paths = JailPaths::of(dir.path().string());
  ASSERT_TRUE(paths) << paths.error().message();
  EXPECT_EQ(paths->dir(), std::filesystem::canonical(dir.path()).string());
  const auto socket = paths->inside(dir.file("vsock"), "--vsock");
  ASSERT_TRUE(socket) << socket.error().message();
  EXPECT_EQ(*socket, "vsock");
  const auto nested = paths->inside(dir.file("sub/api.sock"), "--api-sock");
  ASSERT_TRUE(nested) << nested.error().message();
  EXPECT_EQ(*nested, "sub/api.sock");
  // Spelled through the directory's own "..": still inside.
  const auto roundabout = paths->inside(dir.file("sub/../m.json"), "--metrics-file");
  ASSERT_TRUE(roundabout) << roundabout.error().message();
  EXPECT_EQ(*roundabout, "m.json");
}

TEST(JailPaths, APathOutsideTheJailIsRefusedWithWhereToPutIt) {
  test::TempDir dir;
  test::TempDir elsewhere;
  std::filesystem::create_directory_symlink(elsewhere.path(), dir.path() / "link");
  const auto paths = JailPaths::of(dir.path().string());
  ASSERT_TRUE(paths) << paths.error().message();
  for (const std::string& outside :
       {elsewhere.file("vsock").string(), dir.file("../escape.sock").string(),
        dir.file("link/vsock").string(), dir.path().string()}) {
    const auto refused = paths->inside(outside, "--vsock");
    ASSERT_FALSE(refused) << outside;
    EXPECT_THAT(refused.error().message(),
                HasSubstr("--vsock " + outside + " is outside the jail " + paths->dir()));
    EXPECT_THAT(refused.error().message(), HasSubstr("put it there, e.g. " + paths->dir() + "/"));
  }
}

TEST(JailPaths, AMissingJailDirectoryIsRefused) {
  const auto paths = JailPaths::of("/nonexistent/jail");
  ASSERT_FALSE(paths);
  EXPECT_THAT(paths.error().message(), HasSubstr("--jail /nonexistent/jail"));
}

TEST(JailPaths, OutsidePathsBecomeAbsolute) {
  EXPECT_EQ(JailPaths::outside(""), "");
  EXPECT_EQ(JailPaths::outside("/abs/kernel"), "/abs/kernel");
  EXPECT_EQ(JailPaths::outside("rel/kernel"),
            (std::filesystem::current_path() / "rel/kernel").string());
}

}  // namespace
}  // namespace dsec::jail
