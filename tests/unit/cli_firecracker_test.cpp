// `dsec-vmm firecracker` and the binary started as `firecracker`: Firecracker's command
// line as the tools that exec Firecracker give it (docs/api.md), on a fresh VMM that needs
// no KVM.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "vmm/api/vm_control.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using namespace std::chrono_literals;

const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

// A directory with `firecracker`, a symlink to dsec-vmm, as an installation puts it.
class CliFirecracker : public ::testing::Test {
 protected:
  CliFirecracker() : dir_(::access("/run", W_OK) == 0 ? "/run" : ::testing::TempDir()) {
    std::filesystem::create_symlink(kVmm, firecracker_);
  }

  // What `firecracker ARGS` (through the symlink) writes, stderr included, and its status.
  CommandOutput firecracker(const std::string& args) {
    return run_command(firecracker_.string() + " " + args + " 2>&1", 60s);
  }

  TempDir dir_;
  const std::filesystem::path firecracker_ = dir_.file("firecracker");
};

// Kata takes the first line's second word ("v1.16.1") as a semantic version; others look
// for a line that starts with "Firecracker v".
TEST_F(CliFirecracker, VersionAnswersAsFirecrackerOnItsFirstLineThenDsecVmms) {
  for (const std::string& command : {firecracker_.string(), kVmm + " firecracker"}) {
    const CommandOutput out = run_command(command + " --version");
    EXPECT_EQ(out.exit_status, 0) << command;
    const std::string first = out.output.substr(0, out.output.find('\n'));
    EXPECT_EQ(first, "Firecracker v1.16.1") << command;
    EXPECT_THAT(out.output.substr(first.size()),
                AllOf(HasSubstr("dsec-vmm "), Not(HasSubstr("Firecracker v"))));
  }
}

TEST_F(CliFirecracker, HelpListsFirecrackersOptionsAndWhichAreRefused) {
  const CommandOutput help = firecracker("--help");
  EXPECT_EQ(help.exit_status, 0);
  for (const char* option :
       {"--api-sock", "--id", "--config-file", "--no-api", "--no-seccomp", "--seccomp-filter",
        "--log-path", "--level", "--metrics-path", "--boot-timer", "--describe-snapshot",
        "--http-api-max-payload-size", "--start-time-us", "--metadata", "--enable-pci"}) {
    EXPECT_THAT(help.output, HasSubstr(option)) << option;
  }
  EXPECT_THAT(help.output, AllOf(HasSubstr("/run/firecracker.socket"),
                                 HasSubstr("metadata service (MMDS)")));
  EXPECT_THAT(run_command(kVmm + " --help").output, HasSubstr("firecracker"));
}

TEST_F(CliFirecracker, OptionsDsecVmmCannotHonourAreRefusedByNameBeforeAnythingStarts) {
  const std::string socket = dir_.file("fc.socket").string();
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--seccomp-filter /etc/hostname", "--seccomp-filter is not supported"},
      {"--metadata /etc/hostname", "--metadata /etc/hostname: the MMDS document is not valid JSON"},
      {"--metadata /nonexistent/meta.json", "--metadata"},
      {"--mmds-size-limit 0", "--mmds-size-limit"},
      {"--module api_server", "--module is not supported"},
      {"--enable-pci", "--enable-pci is not supported"},
      {"--id a_b", "--id \"a_b\" is not an instance id"},
      {"--level Chatty", "--level: 'level' must be one of"},
      {"--no-api", "--no-api requires --config-file"},
      {"--no-seccomp --seccomp-filter /etc/hostname", "excludes"},
      {"--bogus", "--bogus"}};
  for (const auto& [args, why] : refused) {
    const CommandOutput out = firecracker("--api-sock " + socket + " " + args);
    EXPECT_NE(out.exit_status, 0) << args;
    EXPECT_THAT(out.output, HasSubstr(why)) << args;
    EXPECT_FALSE(std::filesystem::exists(socket)) << args << ": nothing started";
  }
}

TEST_F(CliFirecracker, DescribeSnapshotRefusesAFileThatIsNoSnapshot) {
  const CommandOutput version = firecracker("--snapshot-version");
  EXPECT_EQ(version.exit_status, 0);
  EXPECT_EQ(version.output, "v1.0.0\n");
  const CommandOutput describe = firecracker("--describe-snapshot /etc/hostname");
  EXPECT_EQ(describe.exit_status, 1);
  EXPECT_THAT(describe.output, HasSubstr("/etc/hostname"));
}

TEST_F(CliFirecracker, AConfigFileAndMetricsPathThatBothNameTheMetricsAreRefused) {
  const std::string config = dir_.file("vm.json").string();
  std::ofstream(config) << R"({"boot-source": {"kernel_image_path": "/etc/hostname"},
                               "metrics": {"metrics_path": "/dev/null"}})";
  const CommandOutput out =
      firecracker("--no-api --config-file " + config + " --metrics-path /dev/null");
  EXPECT_EQ(out.exit_status, 1);
  EXPECT_THAT(out.output, HasSubstr("\"metrics\" and --metrics-path both name the metrics"));
}

// A fresh VMM as Kata starts one: its log and metrics on FIFOs nobody reads yet (opened
// without blocking), an instance id, the jailer's start time.
TEST_F(CliFirecracker, AFreshVmmServesItsApiWithTheLogAndMetricsOnFifos) {
  const auto log = dir_.file("log.fifo");
  const auto metrics = dir_.file("metrics.fifo");
  ASSERT_EQ(::mkfifo(log.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(metrics.c_str(), 0600), 0);
  const std::string socket = dir_.file("fc.socket").string();
  const auto pid_file = dir_.file("pid");
  auto vmm = std::async(std::launch::async, [&] {
    return run_process({"/bin/sh", "-c",
                        "echo $$ > " + pid_file.string() + "; exec " + firecracker_.string() +
                            " --api-sock " + socket + " --id kata-1 --log-path " + log.string() +
                            " --level Info --show-level --metrics-path " + metrics.string() +
                            " --start-time-us 1 --start-time-cpu-us 2 --boot-timer"
                            " --http-api-max-payload-size 200"},
                       60s);
  });
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(socket); }, 30s))
      << "no API socket: " << vmm.get().describe();
  const auto client = api::vmm_api_client(socket, 10s);
  const auto info = client.get("/");
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_EQ(info->value("id", ""), "kata-1");
  EXPECT_EQ(info->value("state", ""), "Not started");
  EXPECT_TRUE(client.send("PUT", "/actions", {{"action_type", "FlushMetrics"}}));
  const auto big = client.request("PUT", "/boot-source", std::string(201, ' '));
  ASSERT_TRUE(big) << big.error().message();
  EXPECT_EQ(big->status, 400);
  EXPECT_THAT(big->body, HasSubstr("larger than 200 bytes"));

  // What the FIFOs hold: the VMM keeps them open, so a reader that comes now gets it.
  auto drain = [](const std::filesystem::path& fifo) {
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, n);
    ::close(fd);
    return text;
  };
  EXPECT_THAT(drain(metrics), AllOf(StartsWith("{"), HasSubstr("\"utc_timestamp_ms\"")));
  EXPECT_THAT(drain(log), HasSubstr("[info] log: to stderr and " + log.string()));

  ASSERT_EQ(::kill(std::stoi(file_text(pid_file)), SIGTERM), 0);
  const ProcessOutput ended = vmm.get();
  EXPECT_EQ(ended.exit_status, 0) << ended.describe();
  EXPECT_FALSE(std::filesystem::exists(socket));
}

// --metadata is the MMDS document GET /mmds answers; --mmds-size-limit bounds what a PUT
// may make of it.
TEST_F(CliFirecracker, MetadataIsTheMmdsDocumentWithinTheSizeLimit) {
  const auto metadata = dir_.file("meta.json");
  std::ofstream(metadata) << R"({ "latest": { "meta-data": { "id": "vm-42" } } })";
  const std::string socket = dir_.file("fc.socket").string();
  const auto pid_file = dir_.file("pid");
  auto vmm = std::async(std::launch::async, [&] {
    return run_process({"/bin/sh", "-c",
                        "echo $$ > " + pid_file.string() + "; exec " + firecracker_.string() +
                            " --api-sock " + socket + " --metadata " + metadata.string() +
                            " --mmds-size-limit 64"},
                       60s);
  });
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(socket); }, 30s))
      << "no API socket: " << vmm.get().describe();
  const auto client = api::vmm_api_client(socket, 10s);
  const auto document = client.get("/mmds");
  ASSERT_TRUE(document) << document.error().message();
  EXPECT_EQ(document->dump(), R"({"latest":{"meta-data":{"id":"vm-42"}}})");
  const auto big = client.request("PUT", "/mmds", R"({"k":")" + std::string(64, 'x') + R"("})");
  ASSERT_TRUE(big) << big.error().message();
  EXPECT_EQ(big->status, 413);
  EXPECT_THAT(big->body, HasSubstr("The MMDS patch request doesn't fit."));
  ASSERT_EQ(::kill(std::stoi(file_text(pid_file)), SIGTERM), 0);
  EXPECT_EQ(vmm.get().exit_status, 0);
}

}  // namespace
}  // namespace dsec::test
