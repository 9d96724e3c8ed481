// Seccomp filters per thread role (docs/seccomp.md), in real VMMs: for each role, a VMM
// whose thread of that role makes a forbidden system call (the test hook
// DSEC_SECCOMP_SELFTEST) ends with exit status 4 and a line on stderr that names the thread
// and the call, while a sandbox running beside it goes on answering. --seccomp=log and off
// let the same call through. The rest of the e2e tier runs with the filters on (the
// default), so every other test shows that the allow lists hold what a VMM needs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/sandbox.h"
#include "tests/support/temp_dir.h"
#include "tests/support/warm_image.h"
#include "vmm/api/vm_control.h"
#include "vmm/http/client.h"
#include "vmm/seccomp/violation_report.h"

namespace dsec::test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr auto kReadyDeadline = 300s;
// A VMM whose thread breaks its filter ends before its guest gets far.
constexpr auto kViolationDeadline = 120s;

// On a local file system: Unix sockets cannot live on the test bed's /tmp (9p).
std::string local_path(const std::string& name) {
  const std::filesystem::path base =
      ::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path();
  return (base / (name + "-" + std::to_string(::getpid()))).string();
}

// `dsec-vmm ARGS...` with DSEC_SECCOMP_SELFTEST=role in its environment.
ProcessOutput vmm_with_selftest(const std::string& role, const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout = kViolationDeadline) {
  std::vector<std::string> argv{"env", "DSEC_SECCOMP_SELFTEST=" + role, kVmmBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, timeout);
}

// What a VMM prints when its thread named like `thread` (a regex) of `role` makes the
// self-test's call, socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), as a whole line of its
// log. Not necessarily the last: another thread may finish a line of its own in the moment
// between the report and the process's end.
std::string violation_of(const std::string& thread, const std::string& role) {
  return "dsec-vmm: seccomp: thread \"" + thread + "\" \\(role " + role +
         "\\) made forbidden syscall 41 \\(socket\\) with arguments 0x2, 0x80002, 0x0; "
         "killing the process\n";
}

// A sandbox (a clone of the shared warm image) that runs beside the VMMs the tests end.
class SeccompTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (default_image().kernel.empty()) return;  // the failure says how to build it
    const WarmImage& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
    if (!image.failure.empty()) {
      ADD_FAILURE() << image.failure;
      return;
    }
    neighbor_ = Sandbox::restore(image.dir);
    std::string why;
    if (!neighbor_->wait_ready(kReadyDeadline, why)) {
      ADD_FAILURE() << why;
      neighbor_.reset();
    }
  }
  static void TearDownTestSuite() { neighbor_.reset(); }

  void SetUp() override { ASSERT_NE(neighbor_, nullptr) << "no sandbox to run beside"; }

  // The VMM ended as a violation does, saying `thread` (a regex) of `role` made the call, and
  // the sandbox beside it still answers.
  static void expect_violation_alone(const ProcessOutput& vmm, const std::string& thread,
                                     const std::string& role) {
    EXPECT_EQ(vmm.exit_status, seccomp::kViolationExitStatus) << vmm.describe();
    EXPECT_THAT(vmm.err, ContainsRegex(violation_of(thread, role))) << vmm.describe();
    const ShellOutput alive = sh(*neighbor_, "echo still-here");
    EXPECT_TRUE(alive.ok()) << alive.out << neighbor_->describe();
    EXPECT_EQ(trimmed(alive.out), "still-here");
  }

  static std::unique_ptr<Sandbox> neighbor_;
};

std::unique_ptr<Sandbox> SeccompTest::neighbor_;

TEST_F(SeccompTest, AVcpuThreadThatMakesAForbiddenCallEndsItsVmmAlone) {
  expect_violation_alone(vmm_with_selftest("vcpu", {"run", "--vcpus", "1"}), "dsec-vcpu0", "vcpu");
}

TEST_F(SeccompTest, TheEventLoopThreadThatMakesAForbiddenCallEndsItsVmmAlone) {
  // --rng: a virtio device, so the VM has its event loop.
  expect_violation_alone(vmm_with_selftest("io", {"run", "--rng"}), "dsec-io", "io");
}

TEST_F(SeccompTest, TheConsoleInputThreadThatMakesAForbiddenCallEndsItsVmmAlone) {
  // No --console: the guest's console is stdin and stdout, so the VMM reads stdin.
  expect_violation_alone(vmm_with_selftest("console", {"run"}), "dsec-console", "console");
}

TEST_F(SeccompTest, TheSignalThreadThatMakesAForbiddenCallEndsItsVmmAlone) {
  expect_violation_alone(vmm_with_selftest("signals", {"run"}), "dsec-signals", "signals");
}

TEST_F(SeccompTest, TheApiThreadThatMakesAForbiddenCallEndsItsVmmAlone) {
  const std::string socket = local_path("dsec-seccomp-api");
  expect_violation_alone(vmm_with_selftest("api", {"run", "--api-sock", socket}), "dsec-api",
                         "api");
  // Left behind, as by any VMM that was killed; the next one there replaces it.
  std::filesystem::remove(socket);
}

TEST_F(SeccompTest, TheMainThreadThatMakesAForbiddenCallEndsItsVmmAlone) {
  expect_violation_alone(vmm_with_selftest("main", {"run"}), "dsec-vmm", "main");
}

TEST_F(SeccompTest, TheProfilerThreadThatMakesAForbiddenCallEndsItsVmmAlone) {
  TempDir dir;
  expect_violation_alone(
      vmm_with_selftest("profiler", {"run", "--profile-guest", dir.file("boot.prof").string()}),
      "dsec-profiler", "profiler");
}

TEST_F(SeccompTest, RestoreWarmAndServeInstallTheFiltersToo) {
  const WarmImage& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  const std::string vsock = local_path("dsec-seccomp-clone.vsock");
  expect_violation_alone(
      vmm_with_selftest("vcpu", {"restore", image.dir.string(), "--vsock", vsock}), "dsec-vcpu[01]",
      "vcpu");
  TempDir dir;
  expect_violation_alone(vmm_with_selftest("io", {"warm", "--out", dir.file("warm").string()}),
                         "dsec-io", "io");
  // serve's main thread takes its filter once it has built and started the VM its API asked
  // for (here a load of the warm image): the load's answer never comes, the VMM ends.
  const std::string socket = local_path("dsec-seccomp-serve.api");
  auto serving = std::async(std::launch::async, [&] {
    return vmm_with_selftest("main", {"serve", "--api-sock", socket});
  });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!std::filesystem::exists(socket) && std::chrono::steady_clock::now() < deadline &&
         serving.wait_for(100ms) == std::future_status::timeout) {
  }
  ASSERT_TRUE(std::filesystem::exists(socket)) << serving.get().describe();
  const http::HttpClient client = api::vmm_api_client(socket, 120s);
  static_cast<void>(
      client.send("PUT", "/snapshot/load",
                  {{"snapshot_path", (image.dir / "state").string()},
                   {"mem_backend",
                    {{"backend_type", "File"}, {"backend_path", (image.dir / "memory").string()}}},
                   {"vsock_override", {{"uds_path", local_path("dsec-seccomp-load.vsock")}}},
                   {"resume_vm", true}}));
  expect_violation_alone(serving.get(), "dsec-vmm", "main");
}

// stdio asks a character device whether it is a terminal (ioctl TCGETS) at stdout's first
// write, which `warm` makes once its filters are in: on /dev/null, as on a terminal, that
// call killed the VMM after the snapshot was written.
TEST_F(SeccompTest, AWarmWhoseStdoutIsDevNullEndsWell) {
  TempDir dir;
  const std::string out = dir.file("warm").string();
  const ProcessOutput warm = run_process(
      {"sh", "-c", std::string("exec \"$0\" warm --out \"$1\" >/dev/null"), kVmmBinary, out},
      kReadyDeadline);
  EXPECT_EQ(warm.exit_status, 0) << warm.describe();
  EXPECT_THAT(warm.err, Not(HasSubstr("seccomp"))) << warm.describe();
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(out) / "state")) << warm.describe();
}

// `serve`'s API thread parses every request of its caller, so its filter goes in at its
// start, before the first request, on a VMM that has no VM yet: the main thread builds the
// VM a boot or a load asks for (the API tests boot and load through such a thread).
TEST_F(SeccompTest, ServesApiThreadIsFilteredBeforeItsFirstRequest) {
  const std::string socket = local_path("dsec-seccomp-serve.api");
  expect_violation_alone(vmm_with_selftest("api", {"serve", "--api-sock", socket}), "dsec-api",
                         "api");
}

// PUT /logger on a VMM with no VM yet is served by the filtered API thread: a directory
// that does not exist is the caller's mistake (an error), not a forbidden mkdir that ends
// the VMM, and a file in one that does is opened for appending and written.
TEST_F(SeccompTest, ServesFilteredApiThreadConfiguresTheLogBeforeABoot) {
  TempDir dir("/run");
  const std::string socket = dir.file("api").string();
  const std::string pid_file = dir.file("pid").string();
  auto serving = std::async(std::launch::async, [&] {
    return run_process({"sh", "-c", "echo $$ > \"$0\"; exec \"$1\" serve --api-sock \"$2\"",
                        pid_file, kVmmBinary, socket},
                       120s);
  });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!std::filesystem::exists(socket) && std::chrono::steady_clock::now() < deadline &&
         serving.wait_for(100ms) == std::future_status::timeout) {
  }
  ASSERT_TRUE(std::filesystem::exists(socket)) << serving.get().describe();
  const http::HttpClient client = api::vmm_api_client(socket, 30s);
  const Status missing =
      client.send("PUT", "/logger", {{"log_path", dir.file("no-such-dir/vmm.log").string()}});
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message(), HasSubstr("is not a directory"));
  const std::string log = dir.file("vmm.log").string();
  const Status configured = client.send("PUT", "/logger", {{"log_path", log}, {"level", "Info"}});
  EXPECT_TRUE(configured.has_value()) << configured.error().message();
  const auto info = client.get("/");
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_EQ(info->value("state", ""), "Not started");

  std::ifstream pid_in(pid_file);
  pid_t pid = 0;
  ASSERT_TRUE(pid_in >> pid) << "no pid in " << pid_file;
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  const ProcessOutput vmm = serving.get();
  EXPECT_EQ(vmm.exit_status, 0) << vmm.describe();
  EXPECT_THAT(vmm.err, Not(HasSubstr("seccomp"))) << vmm.describe();
  std::ifstream log_in(log);
  std::stringstream written;
  written << log_in.rdbuf();
  EXPECT_THAT(written.str(), HasSubstr("log: to stderr and " + log));
}

TEST_F(SeccompTest, LogAndOffLetTheForbiddenCallThroughAndTheGuestRunsToItsEnd) {
  for (const char* mode : {"log", "off"}) {
    const ProcessOutput vmm =
        vmm_with_selftest("vcpu",
                          {"run", std::string("--seccomp=") + mode, "--append",
                           "dsec.run=\"echo guest-ran-to-its-end\""},
                          300s);
    EXPECT_EQ(vmm.exit_status, 0) << mode << ": " << vmm.describe();
    EXPECT_THAT(vmm.out, HasSubstr("guest-ran-to-its-end")) << mode << ": " << vmm.describe();
    EXPECT_THAT(vmm.err, HasSubstr("DSEC_SECCOMP_SELFTEST: the vcpu thread opened a network "
                                   "socket (it was let through)"))
        << mode << ": " << vmm.describe();
  }
}

}  // namespace
}  // namespace dsec::test
