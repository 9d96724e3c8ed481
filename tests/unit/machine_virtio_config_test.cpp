// How the machine's configuration turns into virtio devices and the kernel command-line
// parameters that announce them, and what validate() says when they make the command line
// too long. No KVM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/result_matchers.h"
#include "vmm/arch/x86_64/layout.h"
#include "vmm/machine/config_parts.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/virtio_devices.h"

namespace dsec::machine {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

MachineConfig config_with(bool rng, std::string cmdline) {
  MachineConfig config;
  config.kernel_path = dsec::test::source_path("/CMakeLists.txt");  // any regular file
  config.cmdline = std::move(cmdline);
  config.rng = rng;
  return config;
}

TEST(MachineVirtioConfig, NoDevicesLeaveTheCommandLineAsItIs) {
  const MachineConfig config = config_with(false, "console=ttyS0 -- init-arg");
  EXPECT_THAT(virtio_devices(config), IsEmpty());
  EXPECT_EQ(virtio_cmdline(config), "");
  EXPECT_EQ(guest_cmdline(config), "console=ttyS0 -- init-arg");
}

TEST(MachineVirtioConfig, AnRngTakesSlotZeroAndIsAnnouncedBeforeTheUsersWords) {
  const MachineConfig config = config_with(true, "console=ttyS0 -- init-arg");
  EXPECT_THAT(virtio_devices(config),
              ElementsAre(Field(&VirtioDeviceSpec::kind, VirtioDeviceKind::kRng)));
  // Slot 0: 4 KiB at 3 GiB, IOAPIC pin 5; before any " -- ", which hands the rest to init.
  EXPECT_EQ(guest_cmdline(config), "virtio_mmio.device=4K@0xc0000000:5 console=ttyS0 -- init-arg");
  EXPECT_EQ(guest_cmdline(config_with(true, "")), "virtio_mmio.device=4K@0xc0000000:5");
}

TEST(MachineVirtioConfig, ValidateCountsTheDeviceParametersInTheCommandLineLength) {
  const std::string devices = virtio_cmdline(config_with(true, ""));
  // Fits alone, but not with the devices' parameters and their separating space.
  const std::string longest(x86_64::kCmdlineMaxSize - 1, 'x');
  ASSERT_OK(validate(config_with(false, longest)));
  const std::string cmdline(x86_64::kCmdlineMaxSize - 1 - devices.size(), 'x');
  ASSERT_OK(validate(config_with(true, cmdline.substr(1))));
  const auto too_long = validate(config_with(true, cmdline));
  ASSERT_FALSE(too_long.has_value());
  EXPECT_THAT(too_long.error().message(), HasSubstr("announce the virtio devices"));
  EXPECT_THAT(too_long.error().message(), HasSubstr("shorten --cmdline"));
}

TEST(MachineVirtioConfig, NetComesAfterVsockAndBeforeRngAndIsValidated) {
  MachineConfig config = config_with(true, "");
  config.vsock = VsockConfig{3, "/nonexistent/dsec-test.vsock"};
  config.nets = {NetConfig{.tap = "dsectap0", .host_cidr = "10.99.0.1/24", .mac = ""}};
  EXPECT_THAT(virtio_devices(config),
              ElementsAre(Field(&VirtioDeviceSpec::kind, VirtioDeviceKind::kVsock),
                          Field(&VirtioDeviceSpec::kind, VirtioDeviceKind::kNet),
                          Field(&VirtioDeviceSpec::kind, VirtioDeviceKind::kRng)));
  ASSERT_OK(validate(config));
  config.nets[0].host_cidr = "10.99.0.1";
  ASSERT_FALSE(validate(config).has_value());
  config.nets[0].host_cidr = "";
  config.nets[0].mac = "01:02:03:04:05:06";  // multicast
  ASSERT_FALSE(validate(config).has_value());
  config.nets[0].mac = "52:54:00:00:00:01";
  config.nets[0].tap = "";
  ASSERT_FALSE(validate(config).has_value());
  config.nets[0].tap = "a-name-much-too-long";
  ASSERT_FALSE(validate(config).has_value());
}

TEST(MachineVirtioConfig, EachInterfaceIsADeviceOfItsOwnWithItsOwnMac) {
  MachineConfig config = config_with(false, "");
  config.nets = {NetConfig{.tap = "tap0", .host_cidr = "", .mac = ""},
                 NetConfig{.tap = "tap1", .host_cidr = "", .mac = "", .id = "lan"},
                 NetConfig{.tap = "tap2", .host_cidr = "", .mac = "06:00:00:00:00:09", .id = "x"}};
  ASSERT_OK(validate(config));
  const auto specs = virtio_devices(config);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].net.mac, "52:54:00:12:34:56");
  EXPECT_EQ(specs[1].net.mac, "52:54:00:12:34:57");
  EXPECT_EQ(specs[2].net.mac, "06:00:00:00:00:09");
  EXPECT_EQ(specs[1].net.tap, "tap1");
  config.nets[2].tap = "tap1";
  EXPECT_THAT(validate(config).error().message(), HasSubstr("have the same TAP tap1"));
  config.nets[2].tap = "tap2";
  config.nets[2].mac = "52:54:00:12:34:57";
  EXPECT_THAT(validate(config).error().message(), HasSubstr("have the same guest MAC"));
}

TEST(MachineVirtioConfig, TheRootDriveIsOnTheCommandLineAfterTheDevicesAndBeforeTheUsersWords) {
  const std::string file = dsec::test::source_path("/CMakeLists.txt");
  MachineConfig config = config_with(false, "console=ttyS0 -- init-arg");
  config.drives = {{.path = file, .read_only = false, .id = "data"},
                   {.path = file, .read_only = true, .id = "rootfs", .is_root = true}};
  EXPECT_EQ(guest_cmdline(config),
            "virtio_mmio.device=4K@0xc0000000:5 virtio_mmio.device=4K@0xc0001000:6 "
            "root=/dev/vdb ro console=ttyS0 -- init-arg");
  config.drives[1].read_only = false;
  config.drives[1].partuuid = "0eaa91a0-01";
  EXPECT_THAT(guest_cmdline(config), HasSubstr(" root=PARTUUID=0eaa91a0-01 rw console=ttyS0"));
  ASSERT_OK(validate(config));
  config.drives[0].is_root = true;
  const auto two = validate(config);
  ASSERT_FALSE(two);
  EXPECT_THAT(two.error().message(), HasSubstr("two root drives"));
  config.drives[0].is_root = false;
  config.drives[1].partuuid = "x root=/dev/vda";
  const auto injected = validate(config);
  ASSERT_FALSE(injected);
  EXPECT_THAT(injected.error().message(), HasSubstr("is not a partition UUID"));
}

TEST(MachineVirtioConfig, DrivesAreNamedAsLinuxNamesVirtioDisks) {
  EXPECT_EQ(guest_drive_name(0), "vda");
  EXPECT_EQ(guest_drive_name(25), "vdz");
  EXPECT_EQ(guest_drive_name(26), "vdaa");
  EXPECT_EQ(guest_drive_name(27), "vdab");
}

}  // namespace
}  // namespace dsec::machine
