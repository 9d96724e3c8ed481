// A clone's devices after restore: a warm image made with a disk and a network device,
// restored with a disk file and a TAP of the clone's own. The clone reads what is on its
// disk (not what the snapshot's disk held), its writes reach its own file and nothing
// else, and it pings the host over its new TAP. Needs root and /dev/net/tun (the test bed
// has both).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/run_command.h"
#include "tests/support/sandbox.h"
#include "tests/support/warm_image.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kReadyDeadline = std::chrono::seconds(300);
constexpr size_t kDiskBytes = 8 << 20;

// A disk file of kDiskBytes that starts with `head`.
void write_disk(const std::filesystem::path& path, const std::string& head) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << head;
  f.seekp(kDiskBytes - 1);
  f.put('\0');
}

std::string read_at(const std::filesystem::path& path, size_t offset, size_t size) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(size, '\0');
  f.read(bytes.data(), static_cast<std::streamsize>(size));
  return bytes;
}

TEST(SnapshotDevices, ACloneUsesItsOwnDiskAndTapAfterRestore) {
  if (default_image().kernel.empty()) return;  // the failure says how to build it
  ASSERT_TRUE(::access("/dev/net/tun", R_OK | W_OK) == 0 && ::geteuid() == 0)
      << "needs root and /dev/net/tun with the tun module (the test bed has both: "
         "tools/kvm-harness)";
  const int pid = static_cast<int>(::getpid());
  const auto tmp = std::filesystem::temp_directory_path();
  const auto warm_disk = tmp / ("dsec-warm-disk-" + std::to_string(pid) + ".img");
  const auto clone_disk = tmp / ("dsec-clone-disk-" + std::to_string(pid) + ".img");
  write_disk(warm_disk, "WARM-DISK");
  write_disk(clone_disk, "CLONE-DISK");
  const std::string warm_net = "10.97." + std::to_string(20 + pid % 200) + ".";
  const std::string clone_net = "10.96." + std::to_string(20 + pid % 200) + ".";
  const WarmImage& image =
      shared_warm_image({"--vcpus", "2", "--memory", "256", "--drive", warm_disk.string(), "--net",
                         "tap=dsecw" + std::to_string(pid % 10000) + ",host=" + warm_net + "1/24"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;

  auto vm = Sandbox::restore(
      image.dir, {"--drive", clone_disk.string(), "--net",
                  "tap=dsecc" + std::to_string(pid % 10000) + ",host=" + clone_net + "1/24"});
  std::string why;
  ASSERT_TRUE(vm->wait_ready(kReadyDeadline, why)) << why;

  // A read from the device itself (the guest's page cache dropped first): the clone's file.
  const ShellOutput read = sh(*vm, "echo 3 > /proc/sys/vm/drop_caches; head -c 10 /dev/vda");
  ASSERT_TRUE(read.ok()) << read.out << vm->describe();
  EXPECT_EQ(read.out, "CLONE-DISK") << vm->describe();

  // A write, synced: in the clone's file, not in the snapshot's.
  const ShellOutput write =
      sh(*vm, "printf CLONE-WROTE | dd of=/dev/vda bs=4096 seek=1 conv=fsync");
  ASSERT_TRUE(write.ok()) << write.out << vm->describe();
  EXPECT_EQ(read_at(clone_disk, 4096, 11), "CLONE-WROTE");
  EXPECT_EQ(read_at(warm_disk, 4096, 11), std::string(11, '\0'));
  EXPECT_EQ(read_at(warm_disk, 0, 9), "WARM-DISK");

  // The network: the guest's eth0 on the clone's TAP, both ways.
  const ShellOutput ping =
      sh(*vm, "ip addr add " + clone_net + "2/24 dev eth0 && ip link set eth0 up " +
                  "&& ping -c 3 -W 5 " + clone_net + "1");
  ASSERT_TRUE(ping.ok()) << ping.out << vm->describe();
  EXPECT_NE(ping.out.find("3 packets received"), std::string::npos) << ping.out;
  const ProcessOutput host_ping =
      run_process({"/bin/busybox", "ping", "-c", "3", "-W", "5", clone_net + "2"}, 60s);
  EXPECT_EQ(host_ping.exit_status, 0) << host_ping.describe() << vm->describe();

  // And the CLI's exec and cp on the clone.
  const ProcessOutput uname = run_vmm({"exec", vm->vsock_path(), "--", "uname", "-s"}, 120s);
  EXPECT_EQ(uname.exit_status, 0) << uname.describe();
  EXPECT_EQ(uname.out, "Linux\n");
  ASSERT_TRUE(sh(*vm, "echo made-in-the-clone > /tmp/clone.txt").ok());
  const auto from_guest = tmp / ("dsec-clone-cp-" + std::to_string(pid));
  const ProcessOutput cp =
      run_vmm({"cp", vm->vsock_path(), "vm:/tmp/clone.txt", from_guest.string()}, 120s);
  EXPECT_EQ(cp.exit_status, 0) << cp.describe();
  EXPECT_EQ(file_text(from_guest), "made-in-the-clone\n");

  vm.reset();
  std::filesystem::remove(warm_disk);
  std::filesystem::remove(clone_disk);
  std::filesystem::remove(from_guest);
}

}  // namespace
}  // namespace dsec::test
