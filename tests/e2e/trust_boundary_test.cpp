// The host's side of the trust boundary with a real guest: a file copied out of the guest
// never brings setuid or setgid bits to the host, a guest flooding its console neither
// grows the VMM's memory nor stops its other vCPU, and a console nobody reads does not
// hang the VM. (A guest agent that lies is faked in tests/unit/agent_lying_guest_test.cpp.)
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/sandbox.h"
#include "tests/support/warm_image.h"
#include "vmm/machine/process_memory.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr auto kReadyDeadline = 300s;

// The resident memory of process `pid` outside its guest's RAM, in KiB: every mapping but
// those of at least `guest_mib` (a VMM's own mappings are far smaller).
uint64_t vmm_rss_kib(pid_t pid, uint64_t guest_mib) {
  const std::string smaps = file_text("/proc/" + std::to_string(pid) + "/smaps");
  std::vector<std::pair<uint64_t, uint64_t>> guest;
  std::istringstream lines(smaps);
  for (std::string line; std::getline(lines, line);) {
    uint64_t start = 0;
    uint64_t end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2 && end - start >= guest_mib
                                                                                       << 20) {
      guest.emplace_back(start, end);
    }
  }
  EXPECT_FALSE(guest.empty()) << "no guest RAM mapping in /proc/" << pid << "/smaps";
  return machine::rss_kib_excluding(smaps, guest);
}

// sh() with a deadline (within()); a stall fails the test.
ShellOutput sh_within(Sandbox& vm, const std::string& command, std::chrono::seconds deadline,
                      std::chrono::milliseconds answer_timeout = agent::kDefaultAnswerTimeout) {
  std::string stuck;
  ShellOutput o = within(vm, deadline, stuck, [&vm, command, answer_timeout] {
    return sh(vm, command, answer_timeout);
  });
  EXPECT_TRUE(stuck.empty()) << "'" << command << "': " << stuck;
  return o;
}

TEST(TrustBoundary, ASetuidSetgidGuestFileCopiedOutHasNeitherBitOnTheHost) {
  if (default_image().kernel.empty()) return;  // the failure says how to build it
  const WarmImage& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  const auto clone = Sandbox::restore(image.dir);
  Sandbox& vm = *clone;
  std::string why;
  ASSERT_TRUE(vm.wait_ready(kReadyDeadline, why)) << why;

  const ShellOutput made = sh_within(
      vm, "echo set-id > /tmp/tool && chmod 6777 /tmp/tool && stat -c %a /tmp/tool", 120s);
  ASSERT_TRUE(made.ok()) << made.out << vm.describe();
  EXPECT_EQ(trimmed(made.out), "6777");

  // An older file at the target is replaced whole.
  const std::string host = (vm.dir() / "tool").string();
  std::ofstream(host) << "the host's older file\n";
  const mode_t umask = ::umask(022);
  const ProcessOutput cp = run_vmm({"cp", vm.vsock_path(), "vm:/tmp/tool", host}, 120s);
  ::umask(umask);
  ASSERT_EQ(cp.exit_status, 0) << cp.describe() << vm.describe_stuck();
  struct stat st {};
  ASSERT_EQ(::stat(host.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & (S_ISUID | S_ISGID | S_ISVTX), 0U) << std::oct << st.st_mode;
  EXPECT_EQ(st.st_mode & 07777, 0755U) << std::oct << st.st_mode;
  EXPECT_EQ(file_text(host), "set-id\n");
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(vm.dir())) {
    if (entry.path().filename().string().starts_with("tool")) {
      left.push_back(entry.path().filename());
    }
  }
  EXPECT_EQ(left, std::vector<std::string>{"tool"}) << "a temporary file was left behind";
}

// A fault this test found (docs/guest-limits.md, "Watched"): a new agent connection closed
// during the flood before the guest answered it. If it fails so again, vmm.log says whether
// the guest refused it or did not answer within Muxer::kConnectTimeout.
TEST(TrustBoundary, AGuestFloodingItsConsoleFor60sKeepsTheVmmsMemoryAndItsOtherVcpuAnswers) {
  if (default_image().kernel.empty()) return;
  const WarmImage& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  // The console file stops at 16 KiB: the flood goes past it. (In a loaded test bed each
  // byte the guest writes to the UART costs an emulated exit: 60 s of flood wrote as little
  // as 160 KB there, less with a neighbour test.)
  constexpr uint64_t kConsoleLimit = 16U << 10;
  const auto clone = Sandbox::restore(image.dir, {"--console-limit", "16KiB"});
  Sandbox& vm = *clone;
  std::string why;
  ASSERT_TRUE(vm.wait_ready(kReadyDeadline, why)) << why;
  ASSERT_TRUE(sh_within(vm, "echo warm-up", 120s).ok()) << vm.describe();
  const uint64_t rss_before = vmm_rss_kib(vm.pid(), 128);

  // The flood: one command writing to the serial port as fast as it can for 60 s, on vCPU 1
  // with the UART's interrupt (IRQ 4): here transmission is instantaneous, so the vCPU that
  // takes that interrupt spends its time in the 8250 driver's interrupt handler. vCPU 0
  // must go on serving the agent. A guest this busy, in an emulated test bed, can take more
  // than the default 30 s to answer a quiet exec's health check: the flood (which prints
  // nothing for its 60 s) and the commands beside it wait longer for the guest's word.
  auto flood = std::async(std::launch::async, [&vm] {
    ShellOutput o;
    auto client = vm.client(180s);
    agent::ExecRequest req;
    req.argv = {
        "/bin/sh", "-c",
        "echo 2 > /proc/irq/4/smp_affinity && "
        "taskset 2 timeout 60 yes 'flood flood flood flood flood flood flood' > /dev/ttyS0; "
        "echo flood-over"};
    auto append = [&](std::span<const uint8_t> b) {
      o.out.append(b.begin(), b.end());
      return ok();
    };
    o.status = client.exec(req, append, append);
    return o;
  });
  const auto console = vm.dir() / "console.log";
  const auto flood_seen = std::chrono::steady_clock::now() + 120s;
  while (std::filesystem::file_size(console) < 4096 &&
         std::chrono::steady_clock::now() < flood_seen) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(std::filesystem::file_size(console), 4096U) << "no flood on the console\n"
                                                        << vm.describe_stuck();
  // Meanwhile the other vCPU serves commands.
  for (int i = 0; i < 3; ++i) {
    const ShellOutput alive = sh_within(vm, "echo alive-" + std::to_string(i), 240s, 180s);
    ASSERT_TRUE(alive.ok()) << (alive.status ? "" : alive.status.error().message()) << "\n"
                            << vm.describe_stuck();
    EXPECT_EQ(alive.out, "alive-" + std::to_string(i) + "\n");
  }
  ASSERT_EQ(flood.wait_for(300s), std::future_status::ready) << vm.describe_stuck();
  const ShellOutput flooded = flood.get();
  ASSERT_TRUE(flooded.ok()) << (flooded.status ? "" : flooded.status.error().message()) << "\n"
                            << flooded.out << vm.describe();
  EXPECT_THAT(flooded.out, HasSubstr("flood-over"));
  // The console thread may still be draining the last of the flood (it gets little CPU
  // while a vCPU floods, in the test bed above all): the file reaches its cap soon after.
  const auto drained = std::chrono::steady_clock::now() + 60s;
  while (std::filesystem::file_size(console) < kConsoleLimit &&
         std::chrono::steady_clock::now() < drained) {
    std::this_thread::sleep_for(100ms);
  }

  const uint64_t rss_after = vmm_rss_kib(vm.pid(), 128);
  RecordProperty("vmm_rss_before_kib", std::to_string(rss_before));
  RecordProperty("vmm_rss_after_kib", std::to_string(rss_after));
  RecordProperty("console_file_bytes", std::to_string(std::filesystem::file_size(console)));
  EXPECT_LE(rss_after, rss_before + 1024)
      << "before " << rss_before << " KiB, after " << rss_after << " KiB";
  EXPECT_EQ(std::filesystem::file_size(console), kConsoleLimit);
  EXPECT_THAT(file_text(vm.dir() / "vmm.log"),
              HasSubstr("console: the guest's console output reached its limit of 16384 bytes"));
}

TEST(TrustBoundary, AConsoleNobodyReadsDoesNotHangTheVm) {
  if (default_image().kernel.empty()) return;
  // stdout is a pipe the test holds open and never reads, shrunk to one page: the guest
  // writes 120 KB to its console, far more than the pipe and the console's 64 KiB buffer
  // hold, then its init reboots, which ends the VM. (Each byte is an emulated I/O exit in
  // the test bed, where a long flood is the likeliest trigger of its faults: the small pipe
  // keeps the flood short.)
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(::fcntl(out[1], F_SETPIPE_SZ, 4096), 4096);
  const TempDir dir;
  const std::string log = dir.file("vmm.log").string();
  std::vector<std::string> args{kVmmBinary, "run", "--append",
                                "dsec.run=\"yes 0123456789abcdef | head -c 120000\""};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (null_fd < 0 || log_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0 ||
        ::dup2(out[1], STDOUT_FILENO) < 0 || ::dup2(log_fd, STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGUSR1);
      std::this_thread::sleep_for(2s);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "the VM hung with its console unread\n" << file_section("dsec-vmm log", log);
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  ::close(out[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status << "\n"
                                                             << file_section("dsec-vmm log", log);
  EXPECT_THAT(file_text(log), HasSubstr("dropped because the host read them slower than the "
                                        "guest wrote"))
      << file_section("dsec-vmm log", log);
}

}  // namespace
}  // namespace dsec::test
