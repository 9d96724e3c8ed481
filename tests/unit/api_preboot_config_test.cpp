// Firecracker's pre-boot state: what each request makes of the VM to boot (defaults, the
// root drive first, a drive or interface replaced under its id), and the checks each makes
// when it comes (files that are not there, a second root drive, a second interface, a
// vCPU count out of range), after which nothing has changed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/api/preboot_config.h"
#include "vmm/machine/machine_config.h"

namespace dsec::api {
namespace {

using test::error_of;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

class ApiPrebootConfig : public ::testing::Test {
 protected:
  std::string file(const std::string& name) {
    const std::string path = dir_.file(name);
    std::ofstream(path) << "contents";
    return path;
  }
  DriveRequest drive(const std::string& id, bool root, bool read_only = false) {
    return {id, file(id + ".img"), root, read_only, ""};
  }

  test::TempDir dir_;
  PrebootConfig preboot_;
};

TEST_F(ApiPrebootConfig, StartsWithFirecrackersDefaultsAndNoBootSource) {
  EXPECT_EQ(preboot_.config().vcpus, 1u);
  EXPECT_EQ(preboot_.config().memory_mib, 128u);
  EXPECT_FALSE(preboot_.configures_a_boot());
  EXPECT_THAT(error_of(preboot_.boot_config()),
              HasSubstr("cannot start the VM without a kernel: PUT /boot-source"));
}

TEST_F(ApiPrebootConfig, BootSourceChecksItsFilesAndDefaultsTheCommandLine) {
  const std::string kernel = file("vmlinux");
  EXPECT_THAT(error_of(preboot_.set_boot_source({dir_.file("missing"), "", std::nullopt})),
              HasSubstr("kernel_image_path " + dir_.file("missing").string()));
  EXPECT_THAT(error_of(preboot_.set_boot_source({kernel, dir_.path().string(), std::nullopt})),
              HasSubstr("initrd_path " + dir_.path().string() + " is not a regular file"));
  EXPECT_FALSE(preboot_.configures_a_boot()) << "a refused request changes nothing";
  ASSERT_OK(preboot_.set_boot_source({kernel, "", std::nullopt}));
  ASSERT_OK_AND_ASSIGN(auto config, preboot_.boot_config());
  EXPECT_EQ(config.kernel_path, kernel);
  EXPECT_EQ(config.initrd_path, "");
  EXPECT_EQ(config.cmdline, machine::kDefaultCmdline);
  ASSERT_OK(preboot_.set_boot_source({kernel, "", "console=ttyS0"}));
  EXPECT_EQ(preboot_.config().cmdline, "console=ttyS0");
  EXPECT_TRUE(preboot_.configures_a_boot());
}

TEST_F(ApiPrebootConfig, MachineConfigIsCheckedWholeBeforeAnythingChanges) {
  ASSERT_OK(preboot_.update_machine_config({2, 256, false}));
  EXPECT_THAT(error_of(preboot_.update_machine_config({0, 512, false})),
              HasSubstr("'vcpu_count' 0 is out of range: give 1 to"));
  EXPECT_THAT(error_of(preboot_.update_machine_config({std::nullopt, 0, std::nullopt})),
              HasSubstr("'mem_size_mib' 0 is out of range"));
  EXPECT_EQ(preboot_.config().vcpus, 2u);
  EXPECT_EQ(preboot_.config().memory_mib, 256u);
  ASSERT_OK(
      preboot_.update_machine_config({std::nullopt, 512, std::nullopt}));  // PATCH: the rest stays
  EXPECT_EQ(preboot_.config().vcpus, 2u);
  EXPECT_EQ(preboot_.config().memory_mib, 512u);
}

// Firecracker's smt: two threads per core, so 1 or an even number of vCPUs.
TEST_F(ApiPrebootConfig, SmtNeedsOneOrAnEvenNumberOfVcpusAndAPatchKeepsIt) {
  ASSERT_OK(preboot_.update_machine_config({4, 256, true}));
  EXPECT_TRUE(preboot_.config().smt);
  EXPECT_THAT(error_of(preboot_.update_machine_config({3, std::nullopt, std::nullopt})),
              HasSubstr("'vcpu_count' 3 with 'smt': true: each core has two threads"));
  EXPECT_EQ(preboot_.config().vcpus, 4u);
  ASSERT_OK(preboot_.update_machine_config({1, std::nullopt, std::nullopt}));
  EXPECT_TRUE(preboot_.config().smt);
  ASSERT_OK(preboot_.update_machine_config({3, 256, false}));  // a PUT without smt
  EXPECT_FALSE(preboot_.config().smt);
  ASSERT_OK(preboot_.update_machine_config({2, std::nullopt, true}));
  ASSERT_OK(preboot_.set_boot_source({file("vmlinux"), "", std::nullopt}));
  ASSERT_OK_AND_ASSIGN(auto boot, preboot_.boot_config());
  EXPECT_TRUE(boot.smt) << "InstanceStart boots it with SMT";
}

TEST_F(ApiPrebootConfig, TheRootDriveGoesFirstAndADriveIsReplacedUnderItsId) {
  ASSERT_OK(preboot_.put_drive(drive("scratch", false)));
  ASSERT_OK(preboot_.put_drive(drive("rootfs", true, true)));
  ASSERT_OK(preboot_.put_drive(drive("data", false)));
  using machine::DriveConfig;
  EXPECT_THAT(preboot_.config().drives,
              ElementsAre(Field(&DriveConfig::id, "rootfs"), Field(&DriveConfig::id, "scratch"),
                          Field(&DriveConfig::id, "data")));
  EXPECT_TRUE(preboot_.config().drives[0].is_root);
  EXPECT_TRUE(preboot_.config().drives[0].read_only);
  // Again under its id: replaced in place, not added.
  ASSERT_OK(preboot_.put_drive(drive("scratch", false, true)));
  ASSERT_EQ(preboot_.config().drives.size(), 3u);
  EXPECT_TRUE(preboot_.config().drives[1].read_only);
  // The root moves to another drive: that one goes first.
  ASSERT_OK(preboot_.put_drive(drive("rootfs", false)));
  ASSERT_OK(preboot_.put_drive(drive("data", true)));
  EXPECT_EQ(preboot_.config().drives[0].id, "data");
}

// firecracker-containerd's stub drives have base32 ids of 21 characters and more.
TEST_F(ApiPrebootConfig, ADriveIdLongerThanItsSerialIsTaken) {
  const std::string id = "stubMFRGGZDFMZTWQ2LKNNWG23TP";
  ASSERT_OK(preboot_.put_drive(drive(id, false)));
  ASSERT_EQ(preboot_.config().drives.size(), 1u);
  EXPECT_EQ(preboot_.config().drives[0].id, id);
}

TEST_F(ApiPrebootConfig, ADriveIsRefusedForASecondRootAMissingFileOrABadPartuuid) {
  ASSERT_OK(preboot_.put_drive(drive("rootfs", true)));
  EXPECT_THAT(error_of(preboot_.put_drive(drive("other", true))),
              HasSubstr("drive 'other': two root drives"));
  EXPECT_THAT(error_of(preboot_.put_drive({"gone", dir_.file("gone.img"), false, false, ""})),
              HasSubstr("drive 'gone': drive " + dir_.file("gone.img").string()));
  DriveRequest injected = drive("rootfs", true);
  injected.partuuid = "1234 init=/bin/sh";
  EXPECT_THAT(error_of(preboot_.put_drive(injected)), HasSubstr("is not a partition UUID"));
  ASSERT_EQ(preboot_.config().drives.size(), 1u);
  EXPECT_EQ(preboot_.config().drives[0].partuuid, "");
}

TEST_F(ApiPrebootConfig, ANetworkInterfaceIsCheckedForItsTapAndMac) {
  ASSERT_OK(preboot_.put_network_interface({"net1", "tap0", "06:00:ac:10:00:02"}));
  ASSERT_EQ(preboot_.config().nets.size(), 1u);
  EXPECT_EQ(preboot_.config().nets[0].iface_id(), "net1");
  EXPECT_EQ(preboot_.config().nets[0].tap, "tap0");
  EXPECT_THAT(error_of(preboot_.put_network_interface({"net1", "a-tap-name-too-long", ""})),
              HasSubstr("network interface 'net1': TAP name"));
  EXPECT_THAT(error_of(preboot_.put_network_interface({"net1", "tap0", "01:00:00:00:00:01"})),
              HasSubstr("network interface 'net1': guest MAC"));
  ASSERT_OK(preboot_.put_network_interface({"net1", "tap5", ""}));
  EXPECT_EQ(preboot_.config().nets[0].tap, "tap5");
}

// Firecracker's several interfaces: the guest's eth0, eth1, ... in the order their ids first
// came; a PUT under an id already there replaces that one in its place.
TEST_F(ApiPrebootConfig, SeveralNetworkInterfacesEachWithItsOwnTapAndMac) {
  ASSERT_OK(preboot_.put_network_interface({"wan", "tap0", "06:00:ac:10:00:02"}));
  ASSERT_OK(preboot_.put_network_interface({"lan", "tap1", ""}));
  ASSERT_OK(preboot_.put_network_interface({"dmz", "tap2", ""}));
  ASSERT_OK(preboot_.put_network_interface({"wan", "tap3", ""}));
  const auto& nets = preboot_.config().nets;
  ASSERT_EQ(nets.size(), 3u);
  EXPECT_EQ(nets[0].iface_id(), "wan");
  EXPECT_EQ(nets[0].tap, "tap3");
  EXPECT_EQ(nets[1].iface_id(), "lan");
  EXPECT_EQ(nets[2].iface_id(), "dmz");
  // Without a guest_mac each gets its own default.
  EXPECT_EQ(nets[0].guest_mac(0), "52:54:00:12:34:56");
  EXPECT_EQ(nets[1].guest_mac(1), "52:54:00:12:34:57");
  EXPECT_EQ(nets[2].guest_mac(2), "52:54:00:12:34:58");

  EXPECT_THAT(error_of(preboot_.put_network_interface({"x", "tap1", ""})),
              HasSubstr("network interfaces 'lan' and 'x' have the same TAP tap1; give each "
                        "interface its own TAP"));
  EXPECT_THAT(error_of(preboot_.put_network_interface({"x", "tap9", "52:54:00:12:34:57"})),
              HasSubstr("network interfaces 'lan' and 'x' have the same guest MAC"));
  EXPECT_THAT(error_of(preboot_.put_network_interface({"lan", "tap2", ""})),
              HasSubstr("have the same TAP tap2"));
  EXPECT_EQ(preboot_.config().nets.size(), 3u) << "a refused interface changes nothing";
  EXPECT_EQ(preboot_.config().nets[1].tap, "tap1");
}

TEST_F(ApiPrebootConfig, VsockNeedsAFreePathAndAnUnreservedCid) {
  EXPECT_THAT(error_of(preboot_.set_vsock({2, dir_.file("v.sock")})),
              HasSubstr("vsock guest CID 2 is reserved"));
  EXPECT_THAT(error_of(preboot_.set_vsock({3, file("taken")})), HasSubstr("already exists"));
  EXPECT_FALSE(preboot_.config().vsock);
  ASSERT_OK(preboot_.set_vsock({9, dir_.file("v.sock")}));
  EXPECT_EQ(preboot_.config().vsock, (machine::VsockConfig{9, dir_.file("v.sock")}));
  preboot_.set_entropy({});
  EXPECT_TRUE(preboot_.config().rng);
}

}  // namespace
}  // namespace dsec::api
