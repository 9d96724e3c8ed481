// The VM's API socket end to end (docs/api.md): pause and resume of a running guest through
// it, snapshots of a sandbox and of a clone taken through it and restored with `dsec-vmm
// restore`, a load into a fresh `dsec-vmm serve`, refusals that leave the VM running, and a
// fresh `dsec-vmm serve` booting the default image as Firecracker's API or --config-file
// describes it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/api_sandbox.h"
#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/sandbox.h"
#include "vmm/http/client.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr auto kReadyDeadline = std::chrono::seconds(300);

std::string state_of(const Sandbox& vm) {
  const auto info = api_of(vm).get("/");
  return info ? info->value("state", std::string("?")) : info.error().message();
}

// A sandbox whose agent answers and, `with_api`, whose API socket is there; nullptr (the
// test failed) if not.
std::unique_ptr<Sandbox> ready(std::unique_ptr<Sandbox> vm, bool with_api = true) {
  std::string why;
  if (!vm->wait_ready(kReadyDeadline, why) || (with_api && !vm->wait_for_api(30s, why))) {
    ADD_FAILURE() << why;
    return nullptr;
  }
  return vm;
}

// A snapshot directory written through the API socket of a running sandbox, made once for
// the test binary by the first test that asks. The sandbox had /tmp/origin written before,
// and went on running after it (--resume).
struct ApiSnapshot {
  std::filesystem::path dir;
  std::string failure;  // empty when it was made
  ~ApiSnapshot() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

const ApiSnapshot& api_snapshot() {
  static ApiSnapshot snapshot;
  static std::once_flag once;
  std::call_once(once, [] {
    snapshot.dir = local_dir("dsec-api-snapshot");
    auto vm = ready(Sandbox::with_api());
    if (!vm) {
      snapshot.failure = "the sandbox to snapshot did not start";
      return;
    }
    const auto wrote = sh(*vm, "echo from-the-original > /tmp/origin");
    if (!wrote.status) {
      snapshot.failure = "exec before the snapshot: " + wrote.status.error().message();
      return;
    }
    const auto out = run_vmm({"snapshot", "create", "--api-sock", vm->api_socket(), "--out",
                              snapshot.dir.string(), "--resume"},
                             180s);
    if (out.exit_status != 0) {
      snapshot.failure = "dsec-vmm snapshot create failed: " + out.describe() + vm->describe();
      return;
    }
    // --resume: the original runs on and answers.
    const auto after = sh(*vm, "cat /tmp/origin");
    if (!after.status || trimmed(after.out) != "from-the-original" || state_of(*vm) != "Running") {
      snapshot.failure =
          "the original did not run on after the snapshot: " + after.out + vm->describe_stuck();
    }
  });
  return snapshot;
}

TEST(ApiPauseResume, AHundredPausesAndResumesLoseNoStepOfTheGuestsCounter) {
  auto vm = ready(Sandbox::with_api());
  ASSERT_TRUE(vm);
  // Writes 1, 2, 3, ... one line each, as fast as the guest goes, until /tmp/stop exists.
  const auto started = sh(*vm,
                          "rm -f /tmp/seq /tmp/stop /tmp/done; setsid sh -c 'i=0; while [ ! -e "
                          "/tmp/stop ]; do i=$((i+1)); echo $i >> /tmp/seq; done; touch "
                          "/tmp/done' >/dev/null 2>&1 </dev/null &");
  ASSERT_TRUE(started.status) << started.status.error().message() << vm->describe();
  const auto client = api_of(*vm);
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(client.send("PATCH", "/vm", {{"state", "Paused"}})) << "pause " << i;
    ASSERT_EQ(state_of(*vm), "Paused") << "pause " << i;
    std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(client.send("PATCH", "/vm", {{"state", "Resumed"}})) << "resume " << i;
  }
  ASSERT_EQ(state_of(*vm), "Running");
  const auto stopped =
      sh(*vm, "touch /tmp/stop; while [ ! -e /tmp/done ]; do sleep 0.1; done; echo stopped");
  ASSERT_TRUE(stopped.status) << vm->describe_stuck();
  ASSERT_EQ(trimmed(stopped.out), "stopped");
  // Line n holds n: no step lost (a gap), none repeated (a duplicate).
  const auto check = sh(*vm,
                        "awk 'NR != $1 { print \"line \" NR \" holds \" $1; bad = 1; exit } "
                        "END { if (!bad) print \"whole \" NR }' /tmp/seq");
  ASSERT_TRUE(check.status) << vm->describe();
  EXPECT_THAT(check.out, HasSubstr("whole ")) << check.out;
  const long lines = std::stol(trimmed(check.out).substr(check.out.find(' ') + 1));
  EXPECT_GT(lines, 100) << "the counter ran across the pauses";
}

TEST(ApiSnapshot, ASnapshotThroughTheApiRestoresAndSoDoesASnapshotOfThatClone) {
  const auto& snapshot = api_snapshot();
  ASSERT_TRUE(snapshot.failure.empty()) << snapshot.failure;
  EXPECT_TRUE(std::filesystem::exists(snapshot.dir / "state"));
  EXPECT_TRUE(std::filesystem::exists(snapshot.dir / "memory"));

  auto clone = ready(Sandbox::restore_with_api(snapshot.dir));
  ASSERT_TRUE(clone);
  EXPECT_EQ(trimmed(sh(*clone, "cat /tmp/origin").out), "from-the-original") << clone->describe();
  ASSERT_TRUE(sh(*clone, "echo from-the-clone > /tmp/clone").status) << clone->describe();
  // The snapshot of a clone: `snapshot create` pauses it and leaves it paused.
  const auto second_dir = local_dir("dsec-api-snapshot-of-clone");
  const auto out = run_vmm(
      {"snapshot", "create", "--api-sock", clone->api_socket(), "--out", second_dir.string()},
      180s);
  ASSERT_EQ(out.exit_status, 0) << out.describe() << clone->describe();
  EXPECT_EQ(state_of(*clone), "Paused");
  clone.reset();

  auto grandchild = ready(Sandbox::restore(second_dir), /*with_api=*/false);
  ASSERT_TRUE(grandchild);
  const auto both = sh(*grandchild, "cat /tmp/origin /tmp/clone");
  ASSERT_TRUE(both.status) << grandchild->describe();
  EXPECT_EQ(trimmed(both.out), "from-the-original\nfrom-the-clone");
  grandchild.reset();
  std::filesystem::remove_all(second_dir);
}

// A vsock stream open when the snapshot is taken ends with the transport reset (docs/
// snapshots.md): the host side of it hears so at once instead of hanging, and a new
// connection works, on the original and on a clone of that snapshot.
TEST(ApiSnapshot, AVsockStreamOpenAtTheSnapshotIsResetAndANewConnectionWorks) {
  auto vm = ready(Sandbox::with_api());
  ASSERT_TRUE(vm);
  auto open_stream = std::async(std::launch::async, [&vm] {
    return sh(*vm, "rm -f /tmp/open; echo started; touch /tmp/open; sleep 120; echo never");
  });
  // The exec's stream is open once /tmp/open is there.
  bool running = false;
  for (int i = 0; i < 100 && !running; ++i) {
    running = trimmed(sh(*vm, "test -e /tmp/open && echo yes").out) == "yes";
    if (!running) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(running) << vm->describe();
  const auto dir = local_dir("dsec-api-snapshot-open-stream");
  const auto out = run_vmm(
      {"snapshot", "create", "--api-sock", vm->api_socket(), "--out", dir.string(), "--resume"},
      180s);
  ASSERT_EQ(out.exit_status, 0) << out.describe() << vm->describe();
  ASSERT_EQ(open_stream.wait_for(60s), std::future_status::ready)
      << "the stream open at the snapshot was not reset\n"
      << vm->describe_stuck();
  const auto ended = open_stream.get();
  EXPECT_FALSE(ended.status.has_value())
      << "the exec ran to its end across the snapshot: " << ended.out;
  EXPECT_EQ(ended.out.find("never"), std::string::npos) << ended.out;
  EXPECT_EQ(trimmed(sh(*vm, "echo new-on-the-original").out), "new-on-the-original")
      << vm->describe();

  auto clone = ready(Sandbox::restore(dir), /*with_api=*/false);
  ASSERT_TRUE(clone);
  EXPECT_EQ(trimmed(sh(*clone, "echo new-on-the-clone").out), "new-on-the-clone")
      << clone->describe();
  clone.reset();
  vm.reset();
  std::filesystem::remove_all(dir);
}

TEST(ApiServe, ALoadIntoAFreshVmmRestoresTheSnapshotAndItsAgentAnswers) {
  const auto& snapshot = api_snapshot();
  ASSERT_TRUE(snapshot.failure.empty()) << snapshot.failure;
  auto vmm = Sandbox::serve();
  std::string why;
  ASSERT_TRUE(vmm->wait_for_api(30s, why)) << why;
  const auto client = api_of(*vmm);
  EXPECT_EQ(state_of(*vmm), "Not started");
  // Nothing but a load works yet.
  const auto early = client.send("PATCH", "/vm", {{"state", "Paused"}});
  ASSERT_FALSE(early);
  EXPECT_THAT(early.error().message(), HasSubstr("there is no VM yet"));

  ASSERT_TRUE(client.send(
      "PUT", "/snapshot/load",
      {{"snapshot_path", (snapshot.dir / "state").string()},
       {"mem_backend",
        {{"backend_type", "File"}, {"backend_path", (snapshot.dir / "memory").string()}}},
       {"vsock_override", {{"uds_path", vmm->vsock_path()}}},
       {"resume_vm", true}}))
      << vmm->describe();
  EXPECT_EQ(state_of(*vmm), "Running");
  ASSERT_TRUE(vmm->wait_ready(kReadyDeadline, why)) << why;
  EXPECT_EQ(trimmed(sh(*vmm, "cat /tmp/origin").out), "from-the-original") << vmm->describe();
  const auto config = client.get("/vm/config");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->at("machine-config").at("vcpu_count"), 2);
  EXPECT_EQ(config->at("machine-config").at("mem_size_mib"), 256);
  EXPECT_EQ(config->at("vsock").at("uds_path"), vmm->vsock_path());

  const auto again = client.send("PUT", "/snapshot/load",
                                 {{"snapshot_path", (snapshot.dir / "state").string()},
                                  {"mem_file_path", (snapshot.dir / "memory").string()}});
  ASSERT_FALSE(again);
  EXPECT_THAT(again.error().message(), HasSubstr("(400): cannot load a snapshot"));
  EXPECT_TRUE(sh(*vmm, "true").status) << "the VM runs on";
}

TEST(ApiOrder, LoadAfterABootAndCreateWhileRunningAreRefusedAndTheVmRunsOn) {
  auto vm = ready(Sandbox::with_api());
  ASSERT_TRUE(vm);
  const auto client = api_of(*vm);
  const auto load =
      client.request("PUT", "/snapshot/load",
                     R"({"snapshot_path": "/run/x/state", "mem_file_path": "/run/x/memory"})");
  ASSERT_TRUE(load) << load.error().message();
  EXPECT_EQ(load->status, 400);
  EXPECT_THAT(load->body, HasSubstr("\"fault_message\":\"cannot load a snapshot: this VMM already "
                                    "has a VM"));
  const auto create = client.request(
      "PUT", "/snapshot/create",
      R"({"snapshot_type": "Full", "snapshot_path": "/run/x/state", "mem_file_path": "/run/x/memory"})");
  ASSERT_TRUE(create) << create.error().message();
  EXPECT_EQ(create->status, 400);
  EXPECT_THAT(create->body,
              HasSubstr("\"fault_message\":\"cannot create a snapshot while running"));
  EXPECT_FALSE(std::filesystem::exists("/run/x/state"));
  EXPECT_EQ(state_of(*vm), "Running");
  const auto echo = sh(*vm, "echo still-here");
  ASSERT_TRUE(echo.status) << vm->describe();
  EXPECT_EQ(trimmed(echo.out), "still-here");
  // The socket goes with the VMM.
  const std::string socket = vm->api_socket();
  vm.reset();
  EXPECT_FALSE(std::filesystem::exists(socket));
}

// The default image as Firecracker's boot-source, machine-config and vsock describe it; the
// agent on the console's command line.
TEST(ApiBoot, AFreshVmmConfiguredThroughItsApiBootsTheDefaultImageAndItsAgentAnswers) {
  auto vmm = Sandbox::serve();
  std::string why;
  ASSERT_TRUE(vmm->wait_for_api(30s, why)) << why;
  const auto client = api_of(*vmm);
  // Requests as curl sends them: raw bodies, Firecracker's fields.
  auto put = [&client](const std::string& path, const std::string& body) {
    const auto reply = client.request("PUT", path, body);
    return reply ? *reply : http::HttpReply{0, reply.error().message()};
  };
  EXPECT_EQ(put("/boot-source", default_image_boot_source().dump()).status, 204);
  EXPECT_EQ(put("/machine-config", R"({"vcpu_count": 2, "mem_size_mib": 256})").status, 204);
  EXPECT_EQ(put("/vsock", nlohmann::json{{"guest_cid", 3}, {"uds_path", vmm->vsock_path()}}.dump())
                .status,
            204);
  // A bad request is refused with what to fix, and changes nothing.
  const auto unknown =
      put("/machine-config", R"({"vcpu_count": 4, "mem_size_mib": 256, "cpus": 4})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_THAT(unknown.body, HasSubstr("unknown field 'cpus' in the body"));
  const auto early = client.request("PATCH", "/vm", R"({"state": "Paused"})");
  ASSERT_TRUE(early) << early.error().message();
  EXPECT_EQ(early->status, 400);
  EXPECT_THAT(early->body, HasSubstr("there is no VM yet"));
  EXPECT_EQ(state_of(*vmm), "Not started");

  ASSERT_EQ(put("/actions", R"({"action_type": "InstanceStart"})").status, 204) << vmm->describe();
  EXPECT_EQ(state_of(*vmm), "Running");
  ASSERT_TRUE(vmm->wait_ready(kReadyDeadline, why)) << why;
  const auto guest = sh(*vmm, "nproc; cat /proc/cmdline");
  ASSERT_TRUE(guest.ok()) << guest.out << vmm->describe();
  EXPECT_THAT(guest.out, HasSubstr("2\n"));
  EXPECT_THAT(guest.out, HasSubstr("console=ttyS0 reboot=k panic=-1 dsec.agent"));
  const auto config = client.get("/vm/config");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->at("machine-config").at("mem_size_mib"), 256);
  EXPECT_EQ(config->at("vsock").at("uds_path"), vmm->vsock_path());

  // Configuration is over once the VM runs; the VM runs on.
  const auto late = put("/machine-config", R"({"vcpu_count": 1, "mem_size_mib": 128})");
  EXPECT_EQ(late.status, 400);
  EXPECT_THAT(late.body, HasSubstr("is not supported after the VM started"));
  EXPECT_TRUE(sh(*vmm, "true").ok()) << vmm->describe();
}

TEST(ApiBoot, AConfigFileBootsTheDefaultImageWithoutAnApi) {
  auto vmm = Sandbox::serve_config_file(
      [](const Sandbox& s) {
        return nlohmann::json{
            {"boot-source", default_image_boot_source()},
            {"machine-config", {{"vcpu_count", 2}, {"mem_size_mib", 256}}},
            {"vsock", {{"guest_cid", 3}, {"uds_path", s.vsock_path()}}},
            {"entropy", nlohmann::json::object()},
            {"logger", {{"log_path", (s.dir() / "fc.log").string()}, {"level", "Info"}}},
            {"drives", nlohmann::json::array()},
            {"network-interfaces", nlohmann::json::array()},
            {"metrics", nullptr}}
            .dump();
      },
      /*with_api=*/false);
  std::string why;
  ASSERT_TRUE(vmm->wait_ready(kReadyDeadline, why)) << why;
  const auto guest = sh(*vmm, "nproc; test -e /dev/hwrng && echo rng");
  ASSERT_TRUE(guest.ok()) << guest.out << vmm->describe();
  EXPECT_EQ(trimmed(guest.out), "2\nrng");
  EXPECT_FALSE(std::filesystem::exists(vmm->api_socket())) << "--no-api serves no socket";
  EXPECT_THAT(file_text(vmm->dir() / "fc.log"), HasSubstr("guest reached userspace"))
      << "the file's logger gets the VMM's log";
  // SIGTERM ends it as it ends `run` (status 0).
  const int status = vmm->stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe_wait_status(status);
}

// Firecracker's SendCtrlAltDel: the keys reach the guest's keyboard, its init reboots
// cleanly (it announces it: a crash would be exit status 2), and the reboot ends the VM.
TEST(ApiActions, SendCtrlAltDelEndsTheVmThroughTheGuestsCleanReboot) {
  auto vm = ready(Sandbox::with_api());
  ASSERT_TRUE(vm);
  ASSERT_TRUE(api_of(*vm).send("PUT", "/actions", {{"action_type", "SendCtrlAltDel"}}))
      << vm->describe();
  const auto status = vm->wait_for_exit(120s);
  ASSERT_TRUE(status) << "the VM still runs after ctrl-alt-del\n" << vm->describe_stuck();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << describe_wait_status(*status) << vm->describe();
  EXPECT_THAT(vm->describe(), HasSubstr("dsec-init: ctrl-alt-del: rebooting"));
  EXPECT_THAT(vm->describe(), HasSubstr("ctrl-alt-del typed on the guest's keyboard"));
}

// A root drive as Firecracker's guide configures one: an ext4 image of the default
// initramfs's files, booted with no initramfs. The guest mounts it as / from the
// root=/dev/vda rw that is_root_device put on its command line, and its init (dsec-init,
// from the image) serves the agent.
TEST(ApiBoot, ARootDriveIsTheGuestsRootFileSystem) {
  const DefaultImage image = default_image();
  ASSERT_FALSE(image.initrd.empty());
  // On a local file system: the initramfs holds device nodes, which 9p cannot.
  const auto work = local_dir("dsec-rootfs");
  std::filesystem::create_directories(work);
  const auto tree = work / "tree";
  const auto rootfs = work / "rootfs.ext4";
  const auto made = run_command("mkdir " + tree.string() + " && cd " + tree.string() +
                                    " && cpio -idm --quiet < " + image.initrd.string() +
                                    " && mkfs.ext4 -q -F -d . " + rootfs.string() + " 64M 2>&1",
                                180s);
  ASSERT_EQ(made.exit_status, 0) << made.output;

  auto vmm = Sandbox::serve();
  std::string why;
  ASSERT_TRUE(vmm->wait_for_api(30s, why)) << why;
  const auto client = api_of(*vmm);
  ASSERT_TRUE(
      client.send("PUT", "/boot-source",
                  {{"kernel_image_path", image.vmlinux.string()},
                   {"boot_args", "console=ttyS0 reboot=k panic=-1 init=/init dsec.agent"}}));
  ASSERT_TRUE(client.send("PUT", "/drives/rootfs",
                          {{"drive_id", "rootfs"},
                           {"path_on_host", rootfs.string()},
                           {"is_root_device", true},
                           {"is_read_only", false}}));
  ASSERT_TRUE(client.send("PUT", "/vsock", {{"guest_cid", 3}, {"uds_path", vmm->vsock_path()}}));
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "InstanceStart"}}))
      << vmm->describe();
  ASSERT_TRUE(vmm->wait_ready(kReadyDeadline, why)) << why;
  const auto root = sh(*vmm, "cat /proc/cmdline; awk '$2 == \"/\" { print $3, $4 }' /proc/mounts");
  ASSERT_TRUE(root.ok()) << root.out << vmm->describe();
  EXPECT_THAT(root.out, HasSubstr("root=/dev/vda rw console=ttyS0"));
  EXPECT_THAT(root.out, HasSubstr("ext4 rw"));
  // What the guest writes lands in the image.
  ASSERT_TRUE(sh(*vmm, "echo written-in-the-guest > /from-guest && sync").ok()) << vmm->describe();
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "SendCtrlAltDel"}}));
  const auto status = vmm->wait_for_exit(120s);
  ASSERT_TRUE(status) << vmm->describe_stuck();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << describe_wait_status(*status);
  const auto back = run_command("debugfs -R 'cat /from-guest' " + rootfs.string() + " 2>/dev/null");
  EXPECT_EQ(trimmed(back.output), "written-in-the-guest");
  std::filesystem::remove_all(work);
}

// Firecracker's metrics through the API: PUT /metrics before the start, then the guest's
// work on a drive, over vsock (the agent's exec) and on /dev/hwrng shows in the line a
// FlushMetrics writes, as what moved since the previous flush.
TEST(ApiMetrics, FlushMetricsWritesALineWhoseCountersMatchTheGuestsWork) {
  constexpr uint64_t kDiskBytes = 4 << 20;
  const auto work = local_dir("dsec-metrics");
  std::filesystem::create_directories(work);
  std::ofstream(work / "data.img").close();
  std::filesystem::resize_file(work / "data.img", kDiskBytes);
  const auto metrics_path = work / "metrics.json";
  auto vmm = Sandbox::serve();
  std::string why;
  ASSERT_TRUE(vmm->wait_for_api(30s, why)) << why;
  const auto client = api_of(*vmm);
  ASSERT_TRUE(client.send("PUT", "/metrics", {{"metrics_path", metrics_path.string()}}));
  ASSERT_TRUE(client.send("PUT", "/boot-source", default_image_boot_source()));
  ASSERT_TRUE(client.send("PUT", "/vsock", {{"guest_cid", 3}, {"uds_path", vmm->vsock_path()}}));
  ASSERT_TRUE(client.send("PUT", "/drives/data",
                          {{"drive_id", "data"},
                           {"path_on_host", (work / "data.img").string()},
                           {"is_root_device", false}}));
  ASSERT_TRUE(client.send("PUT", "/entropy", nlohmann::json::object()));
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "InstanceStart"}}))
      << vmm->describe();
  ASSERT_TRUE(vmm->wait_ready(kReadyDeadline, why)) << why;
  // The boot's own work goes into this line; the next counts from here.
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "FlushMetrics"}}));

  // 1 MiB read and 32 KiB written, past the guest's page cache.
  const auto ran = sh(*vmm,
                      "dd if=/dev/vda of=/dev/null bs=64k count=16 iflag=direct 2>&1 && "
                      "dd if=/dev/zero of=/dev/vda bs=4k count=8 oflag=direct 2>&1 && "
                      "head -c 256 /dev/hwrng | wc -c");
  ASSERT_TRUE(ran.ok()) << ran.out << vmm->describe();
  EXPECT_THAT(ran.out, HasSubstr("256\n"));
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "FlushMetrics"}}));

  std::ifstream in(metrics_path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(nlohmann::json::parse(line));
  }
  ASSERT_GE(lines.size(), 2u);
  const nlohmann::json& m = lines.back();
  ASSERT_TRUE(m.contains("utc_timestamp_ms")) << m.dump();
  // The guest may read or write a little more (its own metadata), never less.
  const auto& drive = m.at("block_data");
  EXPECT_GE(drive.at("read_bytes").get<uint64_t>(), 1u << 20) << m.dump();
  EXPECT_LT(drive.at("read_bytes").get<uint64_t>(), 3u << 20) << m.dump();
  EXPECT_GE(drive.at("read_count").get<uint64_t>(), 16u) << m.dump();
  EXPECT_GE(drive.at("write_bytes").get<uint64_t>(), 32u << 10) << m.dump();
  EXPECT_GE(drive.at("write_count").get<uint64_t>(), 1u) << m.dump();
  EXPECT_EQ(m.at("block").at("read_bytes"), drive.at("read_bytes")) << "one drive: the sum is it";
  // The exec went over vsock both ways.
  for (const char* counter :
       {"rx_packets_count", "rx_bytes_count", "tx_packets_count", "tx_bytes_count"}) {
    EXPECT_GT(m.at("vsock").at(counter).get<uint64_t>(), 0u) << counter << ": " << m.dump();
  }
  EXPECT_GE(m.at("entropy").at("entropy_bytes").get<uint64_t>(), 256u) << m.dump();
  // The boot's reads were in the first line, not in this one.
  EXPECT_GT(lines.front().at("vsock").at("tx_packets_count").get<uint64_t>(), 0u);
  std::filesystem::remove_all(work);
}

}  // namespace
}  // namespace dsec::test
