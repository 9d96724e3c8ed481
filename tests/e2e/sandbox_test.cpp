// A sandbox end to end: a clone of a warm image of the default image (vsock device,
// `dsec.agent`), with commands and files moved through the guest agent
// (docs/agent-protocol.md), by the C++ client and by `dsec-vmm exec`/`cp`. And a cold-booted
// sandbox's virtio-blk disk whose synced data survives the VMM being killed.
#include "tests/support/sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/warm_image.h"

namespace dsec::test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr auto kReadyDeadline = std::chrono::seconds(300);

struct Captured {
  std::string out, err;
  Result<agent::ExitStatus> status = agent::ExitStatus{};
};

Captured exec(agent::AgentClient& client, agent::ExecRequest req) {
  Captured c;
  c.status = client.exec(
      req,
      [&](std::span<const uint8_t> b) {
        c.out.append(b.begin(), b.end());
        return ok();
      },
      [&](std::span<const uint8_t> b) {
        c.err.append(b.begin(), b.end());
        return ok();
      });
  return c;
}

// exec() with a deadline (within()).
Captured exec_within(Sandbox& vm, agent::AgentClient& client, agent::ExecRequest req,
                     std::chrono::seconds deadline, std::string& stuck) {
  return within(vm, deadline, stuck, [&client, req = std::move(req)] { return exec(client, req); });
}

TEST(Sandbox, RunsCommandsStreamsOutputMovesFilesTimesOutAndServes32StreamsAtOnce) {
  if (default_image().kernel.empty()) return;  // the failure says how to build it
  // A ready sandbox as the pool hands one out: a clone of a warm image (made once per
  // test-bed session). The cold boot to the agent has its own tests (boot_test.cpp and the
  // disk test below).
  const WarmImage& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  const auto clone = Sandbox::restore(image.dir);
  Sandbox& vm = *clone;
  std::string why;
  ASSERT_TRUE(vm.wait_ready(kReadyDeadline, why)) << why;
  auto client = vm.client();

  // exec through the CLI.
  const ProcessOutput uname = run_vmm({"exec", vm.vsock_path(), "--", "uname", "-a"}, 120s);
  ASSERT_EQ(uname.exit_status, 0) << uname.describe() << vm.describe_stuck();
  EXPECT_THAT(uname.out, HasSubstr("Linux"));

  // 10 MiB through stdout, byte for byte.
  std::string stuck;
  auto big = exec_within(vm, client, {{"seq", "1", "1500000"}, {}, "", 0, false}, 120s, stuck);
  ASSERT_TRUE(big.status.has_value())
      << big.status.error().message() << " after " << big.out.size() << " bytes\n"
      << (stuck.empty() ? vm.describe_stuck() : stuck);
  std::string want;
  for (int i = 1; i <= 1500000; ++i) want += std::to_string(i) + "\n";
  EXPECT_EQ(big.out.size(), want.size());
  EXPECT_TRUE(big.out == want) << "stdout differs from seq's output";

  // A 10 MiB file in and back out, through the CLI.
  std::vector<uint8_t> data(10 << 20);
  std::mt19937_64 rng(7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const std::string host_in = vm.dir() / "in.bin", host_out = vm.dir() / "out.bin";
  std::ofstream(host_in, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  const ProcessOutput cp_in = run_vmm({"cp", vm.vsock_path(), host_in, "vm:/tmp/big.bin"}, 120s);
  ASSERT_EQ(cp_in.exit_status, 0) << cp_in.describe() << vm.describe_stuck();
  const ProcessOutput cp_out = run_vmm({"cp", vm.vsock_path(), "vm:/tmp/big.bin", host_out}, 120s);
  ASSERT_EQ(cp_out.exit_status, 0) << cp_out.describe() << vm.describe_stuck();
  std::ifstream back_in(host_out, std::ios::binary);
  const std::vector<uint8_t> back((std::istreambuf_iterator<char>(back_in)), {});
  EXPECT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data) << "the file came back different";

  // A timeout that fires.
  auto slow = exec(client, {{"sleep", "60"}, {}, "", 1000, false});
  ASSERT_TRUE(slow.status.has_value()) << slow.status.error().message() << vm.describe();
  EXPECT_EQ(slow.status->kind, agent::ExitStatus::Kind::kTimedOut);
  const ProcessOutput slow_cli =
      run_vmm({"exec", "--timeout", "1", vm.vsock_path(), "--", "sleep", "60"}, 120s);
  EXPECT_EQ(slow_cli.exit_status, 124) << slow_cli.describe();

  // SIGUSR1 makes the VMM log its interrupts' and devices' state: here both vCPUs, the
  // IOAPIC with the vsock device's pin routed, and the vsock device with one stream open to
  // the agent, a command still running on it.
  std::thread sleeper([&] {
    auto c = vm.client();
    exec(c, {{"sleep", "8"}, {}, "", 0, false});
  });
  const std::string state = vm.log_state("<-> guest port 1024, established", 60s);
  sleeper.join();
  EXPECT_THAT(state, HasSubstr("virtio-vsock (type 19): status 0xf (active)")) << state;
  EXPECT_THAT(state, HasSubstr("<-> guest port 1024, established: from the guest")) << state;
  EXPECT_THAT(state, HasSubstr("interrupt state (the vCPUs parked to read it):")) << state;
  EXPECT_THAT(state, ContainsRegex("vcpu 0: rip 0x[0-9a-f]+ IF=[01] ")) << state;
  EXPECT_THAT(state, ContainsRegex("vcpu 1: rip 0x[0-9a-f]+ IF=[01] ")) << state;
  // Our guest kernel's timer runs in tsc-deadline mode: its deadline against the TSC.
  EXPECT_THAT(state, ContainsRegex("timer tsc-deadline 0x[0-9a-f]+( masked)?(; [a-z].*)?; deadline "
                                   "(disarmed|0x[0-9a-f]+ (passed [0-9]+ TSC cycles ago|in "
                                   "[0-9]+ TSC cycles))"))
      << state;
  // The vsock device sits on virtio-mmio slot 0, IOAPIC pin 5, which the guest routed.
  EXPECT_THAT(state, ContainsRegex("ioapic: irr 0x[0-9a-f]+;.* pin 5 vector 0x[0-9a-f]+ edge"))
      << state;

  // SIGUSR2, the wake-up probe of a stalled guest (tests/support/wakeup_probe.h), reaches
  // every vCPU as the call-function IPI it stands for, and harms nothing: each CPU's count
  // of them ("CAL" in /proc/interrupts) grows, and the agent answers on.
  const auto calls = [&] {
    const ShellOutput out = sh(vm, "grep CAL: /proc/interrupts");
    std::istringstream row(out.out);
    std::string label;
    std::vector<uint64_t> counts(2);
    row >> label >> counts[0] >> counts[1];
    return counts;
  };
  const std::vector<uint64_t> calls_before = calls();
  ASSERT_EQ(::kill(vm.pid(), SIGUSR2), 0);
  std::string probed;
  for (int i = 0; i < 100 && probed.find("wake-up IPIs: vectors") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
    probed = file_text(vm.dir() / "vmm.log");
  }
  EXPECT_THAT(probed, HasSubstr("wake-up IPIs: vectors 0xfb and 0xfd sent to each of 2 vCPUs "
                                "(4 of 4 taken)"))
      << probed;
  const std::vector<uint64_t> calls_after = calls();
  EXPECT_GT(calls_after[0], calls_before[0]);
  EXPECT_GT(calls_after[1], calls_before[1]);

  // 32 commands at once, each on its own vsock stream, each with its own output.
  std::array<Captured, 32> results;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      auto c = vm.client();
      results[i] = exec(
          c, {{"/bin/sh", "-c", "sleep 1; echo stream-" + std::to_string(i)}, {}, "", 0, false});
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].status.has_value())
        << i << ": " << results[i].status.error().message() << vm.describe();
    EXPECT_EQ(results[i].out, "stream-" + std::to_string(i) + "\n");
    EXPECT_EQ(results[i].status->code, 0);
  }

  // SIGTERM stops the VM: exit status 0, and the log says why.
  const int status = vm.stop(SIGTERM);
  const std::string log = vm.describe();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status << "\n"
                                                             << log;
  EXPECT_THAT(log, HasSubstr("VM ended: stopped by the host: received SIGTERM")) << log;
}

TEST(Sandbox, DataTheGuestSyncedToADiskIsOnTheHostAfterSigkill) {
  if (default_image().kernel.empty()) return;
  const std::string disk = "/tmp/dsec-e2e-disk-" + std::to_string(::getpid()) + ".img";
  {
    std::ofstream f(disk, std::ios::binary);
    f.seekp((64 << 20) - 1);
    f.put('\0');
  }
  Sandbox vm({"--drive", disk});
  std::string why;
  ASSERT_TRUE(vm.wait_ready(kReadyDeadline, why)) << why;
  auto client = vm.client();
  // 1 MiB of a known pattern at 1 MiB into the disk, synced by dd.
  auto w = exec(client, {{"/bin/sh", "-c",
                          "yes DSEC-BLOCK-PATTERN | head -c 1048576 | "
                          "dd of=/dev/vda bs=65536 seek=16 conv=fsync 2>&1"},
                         {},
                         "",
                         0,
                         false});
  ASSERT_TRUE(w.status.has_value()) << w.status.error().message() << vm.describe();
  ASSERT_EQ(w.status->code, 0) << w.out << w.err;

  const int status = vm.stop(SIGKILL);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  std::string want;
  while (want.size() < (1 << 20)) want += "DSEC-BLOCK-PATTERN\n";
  want.resize(1 << 20);
  std::ifstream f(disk, std::ios::binary);
  f.seekg(1 << 20);
  std::string got(1 << 20, '\0');
  f.read(got.data(), static_cast<std::streamsize>(got.size()));
  EXPECT_TRUE(got == want) << "the host file does not hold the pattern the guest synced";
  ::unlink(disk.c_str());
}

}  // namespace
}  // namespace dsec::test
