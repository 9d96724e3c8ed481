// Jailed VMMs end to end (docs/jail.md): `dsec-vmm run|restore --jail` boots or restores and
// answers exec, and from the host the VMM is seen running as the unprivileged ids with no
// capabilities and no_new_privs, in namespaces of its own, seeing only its jail's files;
// one that exceeds its cgroup's memory.max is killed by the OOM killer while a neighbour
// runs on.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/jail_dir.h"
#include "tests/support/sandbox.h"
#include "tests/support/warm_image.h"
#include "vmm/api/vm_control.h"
#include "vmm/devices/virtio/net/tap.h"
#include "vmm/http/client.h"

namespace dsec::test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kReadyDeadline = std::chrono::seconds(300);
// `head` followed by `tail`.
std::vector<std::string> concat(std::vector<std::string> head,
                                const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// The value of `key` in /proc/PID/status (or a task's status), without the blanks around
// it (those between its fields stay).
std::string status_field(const fs::path& status_file, const std::string& key) {
  std::istringstream in(file_text(status_file));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(key + ":")) {
      std::string value = line.substr(key.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t") + 1);
      return value;
    }
  }
  return "(no " + key + " in " + status_file.string() + ")";
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Waits for the VMM to exit on its own; false at the deadline.
bool wait_exit(Sandbox& vm, std::chrono::seconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (vm.running()) {
    if (std::chrono::steady_clock::now() > end) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return true;
}

uint64_t oom_kills_under(const fs::path& cgroup) {
  std::istringstream in(file_text(cgroup / "memory.events"));
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return 0;
}

// The soft limit of `name` in /proc/PID/limits.
std::string soft_limit(const fs::path& proc, const std::string& name) {
  std::istringstream in(file_text(proc / "limits"));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(name + " ")) {
      std::istringstream fields(line.substr(name.size()));
      std::string soft;
      fields >> soft;
      return soft;
    }
  }
  return "(no " + name + " in " + (proc / "limits").string() + ")";
}

// The checks a jailed VMM must pass, seen from the host through /proc.
void expect_confined(pid_t pid, const std::vector<std::string>& jail_files) {
  const fs::path proc = fs::path("/proc") / std::to_string(pid);
  const std::string uid = std::to_string(kJailUid);
  const std::string gid = std::to_string(kJailGid);
  // Every thread (the vCPUs, the device loop): the ids, no capabilities, no_new_privs.
  const std::vector<std::string> tasks = names_in(proc / "task");
  EXPECT_GE(tasks.size(), 3U) << "main, vCPU and device threads";
  for (const auto& task : tasks) {
    const fs::path status = proc / "task" / task / "status";
    EXPECT_EQ(status_field(status, "Uid"), uid + "\t" + uid + "\t" + uid + "\t" + uid) << task;
    EXPECT_EQ(status_field(status, "Gid"), gid + "\t" + gid + "\t" + gid + "\t" + gid) << task;
    EXPECT_EQ(status_field(status, "Groups"), "") << task;
    EXPECT_EQ(status_field(status, "CapEff"), "0000000000000000") << task;
    EXPECT_EQ(status_field(status, "CapPrm"), "0000000000000000") << task;
    EXPECT_EQ(status_field(status, "NoNewPrivs"), "1") << task;
  }
  // pid 1 of its own pid namespace.
  EXPECT_EQ(status_field(proc / "status", "NSpid"), std::to_string(pid) + "\t1");
  for (const char* ns : {"pid", "mnt", "net", "ipc", "uts"}) {
    const fs::path mine = fs::read_symlink(fs::path("/proc/self/ns") / ns);
    const fs::path its = fs::read_symlink(proc / "ns" / ns);
    EXPECT_NE(its, mine) << ns << " namespace";
  }
  // Its root is the jail: what the test put there and its sockets, nothing of the host's.
  EXPECT_EQ(names_in(proc / "root"), jail_files);
  EXPECT_EQ(soft_limit(proc, "Max core file size"), "0");
  EXPECT_EQ(soft_limit(proc, "Max open files"), "2048");
}

class Jail : public ::testing::Test {
 protected:
  void SetUp() override { ensure_cgroup2_mounted(); }
};

TEST_F(Jail, AJailedRunBootsAnswersExecAndIsConfinedToItsJail) {
  JailDir jail;
  std::ofstream(jail.file("placed-by-the-host")) << "x";
  const std::string api = jail.file("api.sock").string();
  // A TAP made inside the VMM's network namespace: the guest has its NIC, the host sees no
  // such interface.
  const std::string tap = "dsecjail" + std::to_string(::getpid() % 10000);
  auto vm = Sandbox::with_vsock_at(
      jail.file("vsock").string(),
      concat({"run", "--vcpus", "2", "--memory", "256", "--append", "dsec.agent", "--api-sock", api,
              "--net", "tap=" + tap + ",host=10.98.0.1/24"},
             jail.options({"--cgroup", "pids.max=64", "--cgroup", "memory.max=512M"})));
  std::string why;
  ASSERT_TRUE(vm->wait_ready(kReadyDeadline, why)) << why;
  const ShellOutput out = sh(*vm, "echo jailed; cat /sys/class/net/eth0/address");
  ASSERT_TRUE(out.ok()) << out.out << vm->describe();
  EXPECT_EQ(trimmed(out.out), "jailed\n52:54:00:12:34:56");
  EXPECT_FALSE(fs::exists(fs::path("/sys/class/net") / tap)) << "the TAP is the jail's";

  const pid_t pid = jailed_pid(jail);
  ASSERT_GT(pid, 0) << vm->describe();
  expect_confined(pid, {"api.sock", "placed-by-the-host", "vsock"});
  EXPECT_EQ(trimmed(file_text(jail.cgroup() / "pids.max")), "64");
  EXPECT_EQ(trimmed(file_text(jail.cgroup() / "memory.max")), std::to_string(512 << 20));
  EXPECT_THAT(file_text(vm->dir() / "vmm.log"),
              HasSubstr("jail: VMM pid " + std::to_string(pid) + " in " + jail.path().string()));
  // The host reaches the API socket in the jail; the VMM writes a snapshot where the API
  // says, in its jail (its /).
  const http::HttpClient client = api::vmm_api_client(api, std::chrono::seconds(120));
  const auto info = client.get("/");
  ASSERT_TRUE(info) << info.error().message() << vm->describe();
  EXPECT_EQ(info->value("state", ""), "Running");
  ASSERT_TRUE(client.send("PATCH", "/vm", {{"state", "Paused"}})) << vm->describe();
  const auto created = client.send("PUT", "/snapshot/create",
                                   {{"snapshot_path", "/state"}, {"mem_file_path", "/memory"}});
  ASSERT_TRUE(created) << created.error().message() << vm->describe();
  ASSERT_TRUE(client.send("PATCH", "/vm", {{"state", "Resumed"}})) << vm->describe();
  EXPECT_GT(fs::file_size(jail.file("memory")), 0U);
  struct stat st {};
  ASSERT_EQ(::stat(jail.file("state").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kJailUid) << "written by the jailed VMM";
  EXPECT_TRUE(sh(*vm, "true").ok()) << vm->describe();

  // SIGTERM, passed on by the supervisor, stops the VM: exit 0; the cgroup is gone and the
  // VMM removed its sockets.
  const int status = vm->stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << vm->describe();
  EXPECT_FALSE(fs::exists(jail.cgroup()));
  EXPECT_THAT(names_in(jail.path()), ElementsAre("memory", "placed-by-the-host", "state"));
}

TEST_F(Jail, AJailedVmmReachesTheHostsNetworkThroughATapHandedIn) {
  ASSERT_TRUE(::access("/dev/net/tun", R_OK | W_OK) == 0)
      << "needs /dev/net/tun with the tun module (the test bed has it: tools/kvm-harness)";
  JailDir jail;
  const int pid = static_cast<int>(::getpid());
  const std::string net = "10.97." + std::to_string(20 + pid % 200) + ".";
  // Made and addressed here, in the host's network namespace, as a pool would.
  const auto host_ip = virtio::parse_ipv4_cidr(net + "1/24");
  ASSERT_TRUE(host_ip) << host_ip.error().message();
  const auto tap =
      virtio::Tap::open({.name = "dsecjailfd" + std::to_string(pid % 10000), .host_ip = *host_ip});
  ASSERT_TRUE(tap) << tap.error().message();
  // Inherited by the VMM: a descriptor without close-on-exec.
  const int handed_in = ::fcntl(tap->fd(), F_DUPFD, 10);
  ASSERT_GE(handed_in, 10) << std::strerror(errno);
  auto vm =
      Sandbox::with_vsock_at(jail.file("vsock").string(),
                             concat({"run", "--vcpus", "2", "--memory", "256", "--append",
                                     "dsec.agent", "--net", "fd=" + std::to_string(handed_in)},
                                    jail.options()));
  ::close(handed_in);
  std::string why;
  ASSERT_TRUE(vm->wait_ready(kReadyDeadline, why)) << why;
  const std::string script = "ip addr add " + net + "2/24 dev eth0 && ip link set eth0 up && " +
                             "ping -c 3 -W 5 " + net + "1 2>&1";
  const ShellOutput out = sh(*vm, script);
  ASSERT_TRUE(out.ok()) << script << "\n" << out.out << vm->describe();
  EXPECT_THAT(out.out, HasSubstr("3 packets received"));
  const pid_t jailed = jailed_pid(jail);
  ASSERT_GT(jailed, 0);
  EXPECT_NE(fs::read_symlink(fs::path("/proc") / std::to_string(jailed) / "ns/net"),
            fs::read_symlink("/proc/self/ns/net"));
}

const WarmImage& warm_image() {
  return shared_warm_image({"--vcpus", "2", "--memory", "256"});
}

// A jailed clone of the warm image, ready; null (and the test failed) if it did not get
// there.
std::unique_ptr<Sandbox> jailed_clone(const JailDir& jail, std::vector<std::string> cgroup = {}) {
  const WarmImage& image = warm_image();
  if (!image.failure.empty()) {
    ADD_FAILURE() << image.failure;
    return nullptr;
  }
  auto vm = Sandbox::with_vsock_at(jail.file("vsock").string(),
                                   concat({"restore", image.dir.string()}, jail.options(cgroup)));
  std::string why;
  if (!vm->wait_ready(kReadyDeadline, why)) {
    ADD_FAILURE() << "the jailed clone did not become ready: " << why;
    return nullptr;
  }
  return vm;
}

TEST_F(Jail, AJailedRestoreOfAWarmImageAnswersExecAndIsConfined) {
  JailDir jail;
  auto vm = jailed_clone(jail);
  ASSERT_TRUE(vm);
  const ShellOutput out = sh(*vm, "echo restored-in-a-jail");
  ASSERT_TRUE(out.ok()) << out.out << vm->describe();
  EXPECT_EQ(trimmed(out.out), "restored-in-a-jail");
  const pid_t pid = jailed_pid(jail);
  ASSERT_GT(pid, 0) << vm->describe();
  expect_confined(pid, {"vsock"});
}

TEST_F(Jail, AJailedRestoreWithoutAVsockInItsJailIsRefusedBeforeTheGuestRuns) {
  JailDir jail;
  const WarmImage& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  // The snapshot's own vsock path is the host's, outside the jail.
  const ProcessOutput out =
      run_vmm(concat({"restore", image.dir.string()}, jail.options()), std::chrono::seconds(300));
  EXPECT_EQ(out.exit_status, 1) << out.describe();
  EXPECT_THAT(out.err, HasSubstr("is outside the jail")) << out.describe();
  EXPECT_THAT(out.err, HasSubstr("--vsock inside its jail directory")) << out.describe();
  EXPECT_FALSE(fs::exists(jail.cgroup()));
}

TEST_F(Jail, TheJailedVmmDiesWithItsSupervisor) {
  JailDir jail;
  auto vm = jailed_clone(jail);
  ASSERT_TRUE(vm);
  const pid_t pid = jailed_pid(jail);
  ASSERT_GT(pid, 0) << vm->describe();
  const int status = vm->stop(SIGKILL);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  // Its parent-death signal: the VMM goes too, leaving its cgroup empty.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!trimmed(file_text(jail.cgroup() / "cgroup.procs")).empty() &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(trimmed(file_text(jail.cgroup() / "cgroup.procs")), "")
      << "the jailed VMM (pid " << pid << ") outlived its supervisor";
  // Nobody removed the cgroup: the caller does, as docs/jail.md says. An exited task can
  // keep the cgroup busy (EBUSY) for a moment after cgroup.procs shows it gone.
  int removed = -1;
  while ((removed = ::rmdir(jail.cgroup().c_str())) != 0 && errno == EBUSY &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(removed, 0) << std::strerror(errno);
}

TEST_F(Jail, AVmmOverItsMemoryMaxIsKilledByItsCgroupAndItsNeighbourRunsOn) {
  JailDir greedy_jail;
  JailDir neighbour_jail;
  auto greedy = jailed_clone(greedy_jail, {"--cgroup", "memory.max=64M"});
  auto neighbour = jailed_clone(neighbour_jail);
  ASSERT_TRUE(greedy && neighbour);
  const fs::path parent = fs::path(kCgroupRoot) / kCgroupParent;
  const uint64_t oom_kills_before = oom_kills_under(parent);

  // The guest has 256 MiB: writing 200 MB into its RAM-backed /tmp makes the VMM touch far
  // more than 64 MiB of guest memory. The exec ends with its VMM.
  const ShellOutput fill = sh(*greedy, "head -c 200000000 /dev/zero > /tmp/fill; echo filled");
  EXPECT_FALSE(fill.ok()) << "the guest filled its memory and the VMM lived: " << fill.out;
  ASSERT_TRUE(wait_exit(*greedy, std::chrono::seconds(120))) << greedy->describe();
  const int status = greedy->stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 5) << status << greedy->describe();
  EXPECT_THAT(file_text(greedy->dir() / "vmm.log"),
              HasSubstr("the jailed VMM was killed by its cgroup's OOM killer"));
  EXPECT_GT(oom_kills_under(parent), oom_kills_before) << "memory.events of " << parent;
  EXPECT_FALSE(fs::exists(greedy_jail.cgroup()));

  const ShellOutput alive = sh(*neighbour, "echo still-here");
  ASSERT_TRUE(alive.ok()) << alive.out << neighbour->describe();
  EXPECT_EQ(trimmed(alive.out), "still-here");
}

}  // namespace
}  // namespace dsec::test
