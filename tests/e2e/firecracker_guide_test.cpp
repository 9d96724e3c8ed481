// Firecracker's getting-started guide run against dsec-vmm (docs/api-boot.md): its curl
// calls (tests/e2e/firecracker_getting_started.sh), and the same machine as a
// --config-file, boot the default kernel with images/build-rootfs-ext4's Debian root file
// system, from the drive (no initramfs), to a root shell on the console; a command typed
// there runs, and ctrl-alt-del (or `reboot`) ends the VMM with exit status 0. The console
// is the VMM's stdin and stdout, as in the guide's first terminal.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/debian_image.h"
#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/run_command.h"

namespace dsec::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// Debian's login shell's prompt on the image (its host name is `sandbox`).
constexpr std::string_view kPrompt = "root@sandbox:~# ";
constexpr auto kBootDeadline = 300s;
constexpr auto kExitDeadline = 120s;

// dsec-vmm ARGS... in `cwd`, its console on pipes to this test (what it writes to stdout is
// collected, what type() writes is its stdin) and its log (stderr) in `log`. Killed, if it
// still runs, when this goes.
class ConsoleVmm {
 public:
  ConsoleVmm(std::vector<std::string> args, const fs::path& cwd, const fs::path& log) : log_(log) {
    args.insert(args.begin(), kVmmBinary);
    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return;
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (::chdir(cwd.c_str()) != 0 || err < 0 || ::dup2(in[0], STDIN_FILENO) < 0 ||
          ::dup2(out[1], STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) {
        ::_exit(126);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    reader_ = std::thread([this, fd = out[0]] { collect(fd); });
  }
  ConsoleVmm(const ConsoleVmm&) = delete;
  ConsoleVmm& operator=(const ConsoleVmm&) = delete;
  ~ConsoleVmm() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdin_ >= 0) ::close(stdin_);
    if (reader_.joinable()) reader_.join();
  }

  // Waits until the console has shown `want` at or after offset `from`; the offset just
  // past it, or nullopt at the deadline or once the console closed without it.
  std::optional<size_t> wait_for(std::string_view want, size_t from,
                                 std::chrono::seconds deadline) {
    std::unique_lock lock(mutex_);
    size_t at = std::string::npos;
    changed_.wait_for(lock, deadline, [&] {
      at = console_.find(want, std::min(from, console_.size()));
      return at != std::string::npos || closed_;
    });
    if (at == std::string::npos) return std::nullopt;
    return at + want.size();
  }

  // Writes `text` to the console, as typed; false once the VMM is gone (EPIPE: the test
  // ignores SIGPIPE, which would otherwise end it there).
  bool type(std::string_view text) {
    ::signal(SIGPIPE, SIG_IGN);
    while (!text.empty()) {
      const ssize_t n = ::write(stdin_, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      text.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // The VMM's wait status once it exits by itself, or nullopt if it still runs at the
  // deadline.
  std::optional<int> wait_for_exit(std::chrono::seconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      if (std::chrono::steady_clock::now() >= end) return std::nullopt;
      std::this_thread::sleep_for(100ms);
    }
    return std::nullopt;
  }

  // Asks the VMM to log where its vCPUs and devices stand (SIGUSR1) and gives it a moment:
  // a stalled guest's RIP is then in its log, where tools/kvm-harness finds a nested guest
  // handed the test-bed kernel's RIP (docs/kvm-test-bed-faults.md).
  void log_state() {
    if (pid_ > 0 && ::kill(pid_, SIGUSR1) == 0) {
      std::this_thread::sleep_for(2s);
    }
  }

  size_t console_size() const {
    std::lock_guard lock(mutex_);
    return console_.size();
  }

  // The console and the VMM's log, for failure messages.
  std::string describe() const {
    std::lock_guard lock(mutex_);
    return "--- console ---\n" + console_ + "\n" + file_section("dsec-vmm log", log_);
  }

 private:
  void collect(int fd) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard lock(mutex_);
      if (n <= 0) {
        closed_ = true;
        changed_.notify_all();
        break;
      }
      console_.append(buffer, static_cast<size_t>(n));
      changed_.notify_all();
    }
    ::close(fd);
  }

  fs::path log_;
  pid_t pid_ = -1;
  int stdin_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string console_;
  bool closed_ = false;
  std::thread reader_;
};

// What the guide's reader has in their directory: ./vmlinux (the default kernel) and
// ./rootfs.ext4, a copy of images/build-rootfs-ext4's file system (the guest writes it), on
// a local file system (/run in the test bed: its /tmp is the host's, over 9p). A TAP of the
// test's own name; both go at the end.
class GuideDirectory {
 public:
  GuideDirectory()
      : dir_(fs::path(::access("/run", W_OK) == 0 ? "/run" : fs::temp_directory_path()) /
             ("dsec-fc-guide-" + std::to_string(::getpid()))),
        tap_("fcguide" + std::to_string(::getpid() % 10000)) {
    const DefaultImage image = default_image();
    const fs::path rootfs = debian_ext4_rootfs();
    if (image.vmlinux.empty() || rootfs.empty()) {
      return;  // the test failed, saying what to build
    }
    fs::create_directories(dir_);
    fs::create_symlink(image.vmlinux, dir_ / "vmlinux");
    const auto copied = run_command("cp --sparse=always " + rootfs.string() + " " +
                                        (dir_ / "rootfs.ext4").string() + " && chmod 0644 " +
                                        (dir_ / "rootfs.ext4").string() + " 2>&1",
                                    300s);
    ready_ = copied.exit_status == 0;
    EXPECT_TRUE(ready_) << "copying " << rootfs << ": " << copied.output;
  }
  GuideDirectory(const GuideDirectory&) = delete;
  GuideDirectory& operator=(const GuideDirectory&) = delete;
  ~GuideDirectory() {
    (void)run_command("ip link del " + tap_ + " 2>/dev/null");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  bool ready() const { return ready_; }
  const fs::path& dir() const { return dir_; }
  const std::string& tap() const { return tap_; }

 private:
  fs::path dir_;
  std::string tap_;
  bool ready_ = false;
};

// A TAP needs root and /dev/net/tun with the tun module (the test bed has both).
bool can_make_taps() {
  return ::geteuid() == 0 && ::access("/dev/net/tun", R_OK | W_OK) == 0;
}

// Waits for the prompt, types a command at it and sees what it printed: the guest booted
// from its root drive to a working shell. Returns where the console stood after it.
size_t expect_a_working_shell(ConsoleVmm& vmm) {
  const auto prompt = vmm.wait_for(kPrompt, 0, kBootDeadline);
  if (!prompt) {
    vmm.log_state();
    ADD_FAILURE() << "no shell prompt on the console\n" << vmm.describe();
    return 0;
  }
  EXPECT_TRUE(vmm.type("echo $((6*7)); awk '$2 == \"/\" { print $1, $3, $4 }' /proc/mounts\n"));
  const auto answer = vmm.wait_for("42\r\n", *prompt, 120s);
  EXPECT_TRUE(answer) << "the command typed at the prompt did not answer\n" << vmm.describe();
  const auto root = vmm.wait_for("/dev/root ext4 rw", *prompt, 60s);
  EXPECT_TRUE(root) << "/ is not the root drive, mounted read-write\n" << vmm.describe();
  const auto next = vmm.wait_for(kPrompt, root.value_or(*prompt), 60s);
  EXPECT_TRUE(next) << vmm.describe();
  return next.value_or(0);
}

TEST(FirecrackerGuide, TheGuidesCurlCallsBootTheExt4RootFileSystemToAShell) {
  GuideDirectory guide;
  ASSERT_TRUE(guide.ready());
  ASSERT_TRUE(can_make_taps()) << "needs root and /dev/net/tun (the test bed has both)";
  const std::string socket = (guide.dir() / "firecracker.socket").string();
  // The guide's first terminal: `./firecracker --api-sock "${API_SOCKET}"`.
  ConsoleVmm vmm({"serve", "--api-sock", socket}, guide.dir(), guide.dir() / "vmm.log");
  const auto socket_deadline = std::chrono::steady_clock::now() + 30s;
  while (!fs::exists(socket) && std::chrono::steady_clock::now() < socket_deadline) {
    const auto exited = vmm.wait_for_exit(0s);
    ASSERT_FALSE(exited) << "dsec-vmm " << describe_wait_status(*exited) << "\n" << vmm.describe();
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(fs::exists(socket)) << "no API socket\n" << vmm.describe();

  // Its second terminal: the calls, each answered without a fault.
  const auto calls = run_command(
      "cd " + guide.dir().string() + " && API_SOCKET=" + socket + " TAP_DEV=" + guide.tap() +
          " bash " + dsec::test::source_path("/tests/e2e/firecracker_getting_started.sh") + " 2>&1",
      300s);
  ASSERT_EQ(calls.exit_status, 0) << calls.output << vmm.describe();
  EXPECT_THAT(calls.output, Not(HasSubstr("fault_message"))) << vmm.describe();
  EXPECT_THAT(calls.output, HasSubstr("HTTP/1.1 204"));  // the -i call shows its status

  const size_t after = expect_a_working_shell(vmm);
  // The guide's logger: the VMM's log in ./firecracker.log, with levels.
  EXPECT_THAT(file_text(guide.dir() / "firecracker.log"),
              HasSubstr("[info] guest reached userspace"));

  const auto cad = run_command("curl -sS -X PUT --unix-socket " + socket +
                                   " --data '{\"action_type\": \"SendCtrlAltDel\"}'"
                                   " http://localhost/actions 2>&1",
                               60s);
  EXPECT_EQ(cad.exit_status, 0) << cad.output;
  EXPECT_EQ(cad.output, "") << "Firecracker answers 204 with no body";
  const auto status = vmm.wait_for_exit(kExitDeadline);
  ASSERT_TRUE(status) << "the VM still runs after ctrl-alt-del\n" << vmm.describe();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << describe_wait_status(*status) << "\n"
      << vmm.describe();
  EXPECT_TRUE(vmm.wait_for("console-init: ctrl-alt-del: rebooting", after, 5s)) << vmm.describe();
}

// The same machine as a Firecracker configuration file, booted with --no-api; the guest's
// own `reboot` ends it.
TEST(FirecrackerGuide, TheSameMachineAsAConfigFileBootsTheSameWay) {
  GuideDirectory guide;
  ASSERT_TRUE(guide.ready());
  ASSERT_TRUE(can_make_taps()) << "needs root and /dev/net/tun (the test bed has both)";
  const auto tap = run_command("ip tuntap add dev " + guide.tap() + " mode tap && ip addr add " +
                               "172.16.0.1/30 dev " + guide.tap() + " && ip link set dev " +
                               guide.tap() + " up 2>&1");
  ASSERT_EQ(tap.exit_status, 0) << tap.output;
  const nlohmann::json config = {{"boot-source",
                                  {{"kernel_image_path", "./vmlinux"},
                                   {"boot_args", "console=ttyS0 reboot=k panic=1 pci=off"}}},
                                 {"drives",
                                  {{{"drive_id", "rootfs"},
                                    {"path_on_host", "./rootfs.ext4"},
                                    {"is_root_device", true},
                                    {"is_read_only", false}}}},
                                 {"machine-config", {{"vcpu_count", 2}, {"mem_size_mib", 1024}}},
                                 {"network-interfaces",
                                  {{{"iface_id", "net1"},
                                    {"guest_mac", "06:00:AC:10:00:02"},
                                    {"host_dev_name", guide.tap()}}}},
                                 {"logger",
                                  {{"log_path", "./firecracker.log"},
                                   {"level", "Debug"},
                                   {"show_level", true},
                                   {"show_log_origin", true}}}};
  std::ofstream(guide.dir() / "vm_config.json") << config.dump(2);
  ConsoleVmm vmm({"serve", "--config-file", "vm_config.json", "--no-api"}, guide.dir(),
                 guide.dir() / "vmm.log");

  const size_t after = expect_a_working_shell(vmm);
  EXPECT_THAT(file_text(guide.dir() / "firecracker.log"),
              HasSubstr("[info] guest reached userspace"));
  // The guide's way out: `reboot` in the guest.
  ASSERT_TRUE(vmm.type("ip -br link show eth0; reboot\n"));
  const auto status = vmm.wait_for_exit(kExitDeadline);
  ASSERT_TRUE(status) << "the VM still runs after `reboot`\n" << vmm.describe();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << describe_wait_status(*status) << "\n"
      << vmm.describe();
  EXPECT_TRUE(vmm.wait_for("06:00:ac:10:00:02", after, 5s)) << "the guide's MAC on eth0\n"
                                                            << vmm.describe();
  EXPECT_TRUE(vmm.wait_for("console-init: reboot requested: rebooting", after, 5s))
      << vmm.describe();
}

}  // namespace
}  // namespace dsec::test
