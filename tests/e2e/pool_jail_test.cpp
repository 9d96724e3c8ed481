// The pool's clones jailed by default (docs/jail.md#the-pools-clones), seen from the host as an
// attacker who broke out of a guest would find them: each clone's VMM under a uid of its
// own, in mount, pid and network namespaces that are not the daemon's, with a seccomp filter
// on every thread, in a cgroup whose memory.max is the guest's RAM plus the VMM's overhead;
// its console file capped; and a clone whose VMM passes its memory.max is the only one
// killed, reported lost, while its neighbour answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/temp_dir.h"
#include "tests/support/warm_image.h"
#include "vmm/http/client.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using json = nlohmann::json;
namespace fs = std::filesystem;

// Restores and execs in the emulated test bed take seconds each.
constexpr auto kDeadline = 300s;
constexpr const char* kCgroupParent = "/sys/fs/cgroup/dsec-vmm-pool";
constexpr uint32_t kFirstId = 200000;  // the default --jail-ids
constexpr uint32_t kLastId = 265535;

fs::path local_base() {
  return ::access("/run", W_OK) == 0 ? "/run" : fs::temp_directory_path();
}

bool eventually(const std::function<bool()>& done, std::chrono::seconds within = kDeadline) {
  return test::eventually(done, within);
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

// The daemon's API, as an orchestrator drives it.
class Api {
 public:
  explicit Api(const PoolDaemon& daemon) : client_(daemon.socket(), kDeadline) {}
  http::HttpReply request(std::string_view method, std::string_view path,
                          const std::string& body = {}) const {
    auto reply = client_.request(method, path, body);
    return reply ? *reply : http::HttpReply{.status = 0, .body = reply.error().message()};
  }
  json acquire() const {
    const auto reply = request("POST", "/sandboxes", R"({"image": "base"})");
    EXPECT_EQ(reply.status, 201) << reply.body;
    return reply.status == 201 ? json::parse(reply.body) : json::object();
  }
  // Runs `script` with sh -c in sandbox `id`: the exec's answer.
  http::HttpReply sh(const std::string& id, const std::string& script) const {
    const json body = {{"argv", {"sh", "-c", script}}, {"timeout_ms", 240000}};
    return request("POST", "/sandboxes/" + id + "/exec", body.dump());
  }

 private:
  http::HttpClient client_;
};

const WarmImage& warm_image() {
  return shared_warm_image({"--vcpus", "2", "--memory", "256"});
}

fs::path cgroup_of(const std::string& id) {
  return fs::path(kCgroupParent) / id;
}

// The clone's VMM: the one process of its cgroup.
pid_t vmm_of(const std::string& id) {
  std::istringstream procs(file_text(cgroup_of(id) / "cgroup.procs"));
  std::vector<pid_t> pids;
  for (pid_t pid = 0; procs >> pid;) {
    pids.push_back(pid);
  }
  EXPECT_EQ(pids.size(), 1U) << "cgroup.procs of " << cgroup_of(id);
  return pids.empty() ? -1 : pids[0];
}

// The first value of a "Key:\tA\tB..." line of /proc/PID/status.
std::string status_field(const fs::path& status, const std::string& key) {
  std::istringstream in(file_text(status));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(key + ":")) {
      std::istringstream values(line.substr(key.size() + 1));
      std::string first;
      values >> first;
      return first;
    }
  }
  return "";
}

// The field `key` of a cgroup's memory.stat, in bytes.
uint64_t memory_stat(const std::string& id, const std::string& key) {
  std::istringstream in(file_text(cgroup_of(id) / "memory.stat"));
  std::string name;
  for (uint64_t value = 0; in >> name >> value;) {
    if (name == key) {
      return value;
    }
  }
  return 0;
}

// The VMM's resident memory outside its guest's RAM: every mapping's Rss but the guest
// memory's (the one mapping of `guest_bytes`), in KiB.
uint64_t vmm_rss_outside_guest_kib(pid_t pid, uint64_t guest_bytes) {
  std::istringstream in(file_text(fs::path("/proc") / std::to_string(pid) / "smaps"));
  uint64_t total = 0;
  bool guest = false;
  for (std::string line; std::getline(in, line);) {
    uint64_t start = 0;
    uint64_t end = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (fields >> std::hex >> start >> dash >> end && dash == '-') {
      guest = end - start == guest_bytes;
    } else if (line.starts_with("Rss:") && !guest) {
      total += std::stoull(line.substr(4));
    }
  }
  return total;
}

// What the pool's jail must show of one clone, from the host's /proc; its uid.
uint32_t expect_jailed(const std::string& id, pid_t reported_pid, const fs::path& state_dir) {
  const pid_t vmm = vmm_of(id);
  if (vmm <= 0) {
    ADD_FAILURE() << "no VMM in the cgroup of " << id << ": is the clone jailed?";
    return 0;
  }
  const fs::path proc = fs::path("/proc") / std::to_string(vmm);
  // No supervisor process per clone: the pid the pool reports is the VMM's, pid 1 of its
  // own pid namespace ("NSpid: HOST_PID 1").
  EXPECT_EQ(vmm, reported_pid) << "the pool reports the VMM itself";
  std::istringstream status(file_text(proc / "status"));
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("NSpid:")) {
      std::cout << id << ": " << line << "\n";
      EXPECT_TRUE(line.ends_with("\t1")) << line;
    }
  }
  const std::string uid = status_field(proc / "status", "Uid");
  const std::string gid = status_field(proc / "status", "Gid");
  std::cout << id << ": VMM pid " << vmm << ", uid " << uid << ", gid " << gid << "\n";
  const uint32_t id_number = static_cast<uint32_t>(std::stoul(uid.empty() ? "0" : uid));
  EXPECT_GE(id_number, kFirstId) << "the clone's VMM runs as uid " << uid;
  EXPECT_LE(id_number, kLastId);
  EXPECT_EQ(gid, uid);
  struct stat dir {};
  EXPECT_EQ(::stat((state_dir / "sandboxes" / id).c_str(), &dir), 0);
  EXPECT_EQ(dir.st_uid, id_number) << "its directory is its own";
  for (const char* ns : {"mnt", "pid", "net"}) {
    const auto own = fs::read_symlink(proc / "ns" / ns);
    const auto daemons = fs::read_symlink(fs::path("/proc/self/ns") / ns);
    std::cout << id << ": ns/" << ns << " " << own.string() << " (the daemon's " << daemons.string()
              << ")\n";
    EXPECT_NE(own, daemons) << ns;
  }
  size_t threads = 0;
  for (const auto& task : fs::directory_iterator(proc / "task")) {
    const std::string seccomp = status_field(task.path() / "status", "Seccomp");
    std::cout << id << ": task " << task.path().filename().string() << " ("
              << status_field(task.path() / "status", "Name") << ") Seccomp: " << seccomp
              << ", Uid: " << status_field(task.path() / "status", "Uid") << "\n";
    EXPECT_EQ(seccomp, "2") << task.path();
    EXPECT_EQ(status_field(task.path() / "status", "Uid"), uid) << task.path();
    ++threads;
  }
  EXPECT_GE(threads, 3U) << "a restored VMM runs vCPU, device and API threads";
  return id_number;
}

TEST(PoolJail, EachCloneRunsJailedUnderAUidOfItsOwnWithItsConsoleCapped) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  // The console cap small, so that a slow emulated serial port goes well past it.
  PoolDaemon daemon(dir.path(), {"--ready-timeout", "280", "--clone-console-limit", "16KiB"});
  ASSERT_TRUE(daemon.serving(60s)) << daemon.log();
  const Api api(daemon);
  ASSERT_FALSE(link_into_store(image, daemon.image_dir(), "base").empty());
  const json limits = {{"ready", 2}, {"max", 3}};
  ASSERT_EQ(api.request("PUT", "/images/base", limits.dump()).status, 200) << daemon.log();
  EXPECT_THAT(api.request("GET", "/metrics").body, HasSubstr("dsec_pool_jail_enabled 1"));

  const json first = api.acquire();
  const json second = api.acquire();
  ASSERT_TRUE(first.contains("id") && second.contains("id")) << daemon.log();
  const std::string a = first["id"];
  const std::string b = second["id"];
  const fs::path state_dir = dir.path() / "state";
  EXPECT_EQ(first["vsock"], (state_dir / "sandboxes" / a / "vsock").string());
  // An exec first: every thread of the VMM has run by its answer.
  for (const auto& id : {a, b}) {
    const auto hello = api.sh(id, "echo hello");
    ASSERT_EQ(hello.status, 200) << hello.body << daemon.log();
    EXPECT_EQ(json::parse(hello.body)["stdout"], "hello\n");
  }
  const uint32_t uid_a = expect_jailed(a, first["pid"].get<pid_t>(), state_dir);
  const uint32_t uid_b = expect_jailed(b, second["pid"].get<pid_t>(), state_dir);
  EXPECT_NE(uid_a, uid_b) << "two clones, two uids";

  // memory.max: the guest's RAM plus the VMM's overhead (64 MiB by default); and what a
  // restored clone that ran one exec uses, for docs/pool.md's margin.
  const uint64_t guest_bytes =
      api.request("GET", "/images").status == 200
          ? json::parse(api.request("GET", "/images").body)["images"][0]["guest_memory_bytes"]
                .get<uint64_t>()
          : 0;
  EXPECT_EQ(trimmed(file_text(cgroup_of(a) / "memory.max")),
            std::to_string(guest_bytes + (uint64_t{64} << 20)));
  EXPECT_EQ(trimmed(file_text(cgroup_of(a) / "pids.max")), "512");
  for (const auto& id : {a, b}) {
    const std::string peak = trimmed(file_text(cgroup_of(id) / "memory.peak"));
    std::cout << id << ": memory.current " << trimmed(file_text(cgroup_of(id) / "memory.current"))
              << ", memory.peak " << (peak.empty() ? "n/a" : peak) << ", anon "
              << memory_stat(id, "anon") << ", file " << memory_stat(id, "file") << ", kernel "
              << memory_stat(id, "kernel") << ", VMM RSS outside guest RAM "
              << vmm_rss_outside_guest_kib(vmm_of(id), guest_bytes) << " KiB\n";
    RecordProperty(id + "_memory_current", trimmed(file_text(cgroup_of(id) / "memory.current")));
  }

  // The console: a guest writing four times the cap leaves the cap on disk.
  const auto flood = api.sh(a, "yes floodfloodflood | head -c 65536 > /dev/ttyS0; echo over");
  ASSERT_EQ(flood.status, 200) << flood.body << daemon.log();
  EXPECT_EQ(json::parse(flood.body)["stdout"], "over\n");
  const fs::path console = state_dir / "sandboxes" / a / "console";
  // The console thread may still drain the last of it.
  eventually([&] { return fs::file_size(console) >= 16384; }, 60s);
  std::cout << a << ": console file " << fs::file_size(console) << " bytes\n";
  EXPECT_EQ(fs::file_size(console), 16384U) << "the cap, no more";
  EXPECT_THAT(file_text(console), HasSubstr("floodfloodflood"));

  // Released: its directory and cgroup go, and its uid is free again.
  ASSERT_EQ(api.request("DELETE", "/sandboxes/" + a).status, 204);
  EXPECT_TRUE(eventually([&] { return !fs::exists(state_dir / "sandboxes" / a); }, 60s));
  EXPECT_TRUE(eventually([&] { return !fs::exists(cgroup_of(a)); }, 60s));
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM))) << daemon.log();
}

// The OOM killer of one clone's cgroup kills that clone's VMM alone. memory.max is lowered
// for the test (a later --cgroup memory.max wins over the pool's): a guest cannot dirty more
// than its RAM, so with the pool's own limit its VMM stays under it.
TEST(PoolJail, ACloneOverItsMemoryMaxIsTheOnlyOneKilledAndIsReportedLost) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path(), {"--ready-timeout", "280", "--health-interval", "0",
                                 "--restore-arg=--cgroup=memory.max=64M"});
  ASSERT_TRUE(daemon.serving(60s)) << daemon.log();
  const Api api(daemon);
  ASSERT_FALSE(link_into_store(image, daemon.image_dir(), "base").empty());
  const json limits = {{"ready", 2}, {"max", 2}};
  ASSERT_EQ(api.request("PUT", "/images/base", limits.dump()).status, 200) << daemon.log();
  const json greedy = api.acquire();
  const json neighbour = api.acquire();
  ASSERT_TRUE(greedy.contains("id") && neighbour.contains("id")) << daemon.log();
  const std::string g = greedy["id"];
  const std::string n = neighbour["id"];
  EXPECT_EQ(trimmed(file_text(cgroup_of(g) / "memory.max")), std::to_string(64 << 20));

  // 200 MB into the guest's RAM-backed /tmp: far more than 64 MiB of guest memory touched.
  const auto fill = api.sh(g, "head -c 200000000 /dev/zero > /tmp/fill; echo filled");
  EXPECT_NE(fill.status, 200) << "the guest filled its memory and the VMM lived: " << fill.body;
  EXPECT_TRUE(eventually([&] { return api.request("GET", "/sandboxes/" + g).status == 410; }))
      << daemon.log();
  const auto lost = api.request("GET", "/sandboxes/" + g);
  EXPECT_THAT(lost.body, HasSubstr("killed by its cgroup's OOM killer")) << daemon.log();
  const std::string metrics = api.request("GET", "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("dsec_pool_oom_killed_total 1"));
  EXPECT_THAT(metrics, HasSubstr("dsec_pool_lost_total 1"));

  const auto alive = api.sh(n, "echo still-here");
  ASSERT_EQ(alive.status, 200) << alive.body << daemon.log();
  EXPECT_EQ(json::parse(alive.body)["stdout"], "still-here\n");
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM))) << daemon.log();
}

}  // namespace
}  // namespace dsec::test
