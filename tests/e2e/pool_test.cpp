// `dsec-vmm pool` end to end: the daemon restoring real clones of a warm image in the test
// bed, driven over its API socket as an orchestrator would (acquire, exec, release), and
// what an operator counts on: a VMM killed with SIGKILL reported lost and replaced, time to
// live, 429 when full, a daemon killed with SIGKILL and started again adopting the sandbox
// a client holds, bad input answered with a 4xx, and a SIGTERM that leaves nothing behind.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/pool_clone_probe.h"
#include "tests/support/warm_image.h"
#include "vmm/common/unique_fd.h"
#include "vmm/http/client.h"
#include "vmm/io/unix_socket.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Restores in the emulated test bed take seconds each; a daemon's requests wait on them.
constexpr auto kDeadline = 300s;

bool process_exists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

bool eventually(const std::function<bool()>& done, std::chrono::seconds within = kDeadline) {
  return test::eventually(done, within);
}

// A `dsec-vmm pool` process on a state directory, image store and socket in /run (a local
// tmpfs in the test bed: Unix sockets do not work on its 9p /tmp).
class PoolDaemon {
 public:
  explicit PoolDaemon(const std::filesystem::path& dir)
      : state_dir_(dir / "state"),
        image_dir_(dir / "images"),
        socket_(dir / "pool.sock"),
        log_(dir / "daemon.log") {}
  PoolDaemon(const PoolDaemon&) = delete;
  PoolDaemon& operator=(const PoolDaemon&) = delete;
  ~PoolDaemon() {
    if (pid_ > 0) {
      stop(SIGKILL);
    }
  }

  // Starts the daemon with `extra` options and waits until it answers.
  bool start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        kVmmBinary,          "pool",     "--state-dir",    state_dir_.string(), "--image-dir",
        image_dir_.string(), "--socket", socket_.string(), "--ready-timeout",   "280"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& arg : args) {
      argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen(log_.c_str(), "a", stderr);
      std::freopen("/dev/null", "r", stdin);
      ::execv(kVmmBinary.c_str(), argv.data());
      ::_exit(127);
    }
    return eventually([&] { return request("GET", "/images").status == 200; }, 60s);
  }
  // Sends `signo` and reaps the daemon; its exit status. In a test that failed so far, its
  // clones first get the wake-up probe (pool_clone_probe.h).
  int stop(int signo) {
    if (::testing::Test::HasFailure()) {
      std::cout << probe_pool_clones(state_dir_);
    }
    ::kill(pid_, signo);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  http::HttpReply request(std::string_view method, std::string_view path,
                          const std::string& body = {}) const {
    auto reply = http::HttpClient(socket_.string(), kDeadline).request(method, path, body);
    return reply ? *reply : http::HttpReply{.status = 0, .body = reply.error().message()};
  }
  json get(std::string_view path) const { return json::parse(request("GET", path).body); }

  std::string log() const { return file_text(log_); }
  const std::filesystem::path& state_dir() const { return state_dir_; }
  const std::filesystem::path& image_dir() const { return image_dir_; }
  const std::filesystem::path& socket() const { return socket_; }

  // Puts the shared warm image into the image store as "base", and registers it.
  bool register_image(const WarmImage& image, const json& limits) {
    EXPECT_FALSE(link_into_store(image, image_dir_, "base").empty());
    const auto reply = request("PUT", "/images/base", limits.dump());
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.status == 200;
  }
  uint32_t count(const char* state) const {
    const auto images = get("/images")["images"];
    return images.empty() ? 0 : images[0]["sandboxes"][state].get<uint32_t>();
  }

 private:
  std::filesystem::path state_dir_;
  std::filesystem::path image_dir_;
  std::filesystem::path socket_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
};

const WarmImage& warm_image() {
  return shared_warm_image({"--vcpus", "2", "--memory", "256"});
}

std::filesystem::path local_base() {
  return ::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path();
}

// What a clean stop must leave: no VMM, no socket, no file in the state directory.
void expect_nothing_left(const PoolDaemon& daemon, const std::vector<pid_t>& vmms) {
  for (const pid_t pid : vmms) {
    EXPECT_TRUE(eventually([&] { return !process_exists(pid); }, 30s)) << "VMM " << pid;
  }
  EXPECT_FALSE(std::filesystem::exists(daemon.socket()));
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::is_empty(daemon.state_dir(), ec)) << daemon.log();
}

// `request` (a whole HTTP/1.1 request that asks to close) on a fresh connection to the
// daemon; everything it answered.
std::string raw_exchange(const PoolDaemon& daemon, const std::string& request) {
  auto fd = io::connect_unix(daemon.socket().string());
  if (!fd) {
    return fd.error().message();
  }
  // Blocking reads, within the daemon's deadline (the socket comes non-blocking).
  ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) & ~O_NONBLOCK);
  const timeval limit{.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(kDeadline).count(),
                      .tv_usec = 0};
  ::setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  if (::send(fd->get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return "send failed";
  }
  std::string answer;
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = ::recv(fd->get(), buffer.data(), buffer.size(), 0)) > 0;) {
    answer.append(buffer.data(), static_cast<size_t>(n));
  }
  return answer;
}

TEST(Pool, AcquireExecReleaseAndBadInputThenACleanStop) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 1}, {"max", 2}}));
  ASSERT_TRUE(eventually([&] { return daemon.count("ready") == 1; })) << daemon.log();

  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const json sandbox = json::parse(acquired.body);
  const std::string id = sandbox["id"];
  EXPECT_EQ(sandbox["state"], "in_use");
  EXPECT_TRUE(std::filesystem::exists(sandbox["vsock"].get<std::string>()));

  const auto exec = daemon.request(
      "POST", "/sandboxes/" + id + "/exec",
      R"({"argv": ["sh", "-c", "cat; echo out; echo err >&2; exit 3"], "stdin": "in-"})");
  ASSERT_EQ(exec.status, 200) << exec.body;
  const json ran = json::parse(exec.body);
  EXPECT_EQ(ran["stdout"], "in-out\n");
  EXPECT_EQ(ran["stderr"], "err\n");
  EXPECT_EQ(ran["exit"]["kind"], "exited");
  EXPECT_EQ(ran["exit"]["code"], 3);

  // Bad input: a 4xx that says what to fix, and the sandbox unharmed.
  auto bad = daemon.request("POST", "/sandboxes", "{not json");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("not valid JSON"));
  bad = daemon.request("POST", "/sandboxes", R"({"image": "base", "gpus": 1})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("unknown field 'gpus'"));
  bad = daemon.request("POST", "/sandboxes/sb-nobody/exec", R"({"argv": ["true"]})");
  EXPECT_EQ(bad.status, 404);
  // Bodies carry files: up to 8 MiB, refused from the Content-Length on.
  const auto oversized = raw_exchange(daemon,
                                      "POST /sandboxes HTTP/1.1\r\nHost: pool\r\nContent-Length: "
                                      "9437184\r\n\r\n{\"image\": \"base\"}");
  EXPECT_THAT(oversized, ::testing::StartsWith("HTTP/1.1 400")) << oversized;
  EXPECT_THAT(oversized, HasSubstr("larger than"));
  bad = daemon.request("PUT", "/images/base", R"({"snapshot_dir": "/nowhere"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("put the image in the store as base"));
  bad = daemon.request("PUT", "/images/none", "{}");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("the image store has no image none"));
  const auto again = daemon.request("POST", "/sandboxes/" + id + "/exec", R"({"argv": ["true"]})");
  EXPECT_EQ(again.status, 200) << again.body;

  const pid_t vmm = sandbox["pid"];
  EXPECT_EQ(daemon.request("DELETE", "/sandboxes/" + id).status, 204);
  EXPECT_EQ(daemon.request("DELETE", "/sandboxes/" + id).status, 410) << "release twice";
  const auto released_exec =
      daemon.request("POST", "/sandboxes/" + id + "/exec", R"({"argv": ["true"]})");
  EXPECT_EQ(released_exec.status, 410);
  EXPECT_THAT(released_exec.body, HasSubstr("released"));
  EXPECT_TRUE(eventually([&] { return !process_exists(vmm); }, 60s));

  const std::string metrics = daemon.request("GET", "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("dsec_pool_acquired_total 1"));
  EXPECT_THAT(metrics, HasSubstr("dsec_pool_released_total 1"));
  EXPECT_THAT(metrics, HasSubstr("dsec_pool_restore_seconds_count"));

  std::vector<pid_t> vmms;
  const auto listed = daemon.get("/sandboxes");  // the loop must not outlive it
  for (const auto& s : listed["sandboxes"]) {
    vmms.push_back(s["pid"]);
  }
  const int status = daemon.stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon.log();
  expect_nothing_left(daemon, vmms);
}

TEST(Pool, AVmmKilledWithSigkillIsReportedLostAndReplaced) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 1}, {"max", 2}}));
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const json sandbox = json::parse(acquired.body);
  const std::string id = sandbox["id"];
  // Mid-exec: the exec's client learns how the VMM ended.
  auto exec = std::async(std::launch::async, [&] {
    return daemon.request("POST", "/sandboxes/" + id + "/exec",
                          R"({"argv": ["sleep", "60"], "timeout_ms": 90000})");
  });
  std::this_thread::sleep_for(2s);  // the exec is under way in the guest
  ASSERT_EQ(::kill(sandbox["pid"].get<pid_t>(), SIGKILL), 0);
  const auto cut = exec.get();
  EXPECT_EQ(cut.status, 410) << cut.body;
  EXPECT_THAT(cut.body, HasSubstr("lost: its VMM killed by signal 9"));

  ASSERT_TRUE(eventually([&] { return daemon.request("GET", "/sandboxes/" + id).status == 410; }))
      << daemon.log();
  const auto lost = daemon.request("GET", "/sandboxes/" + id);
  EXPECT_THAT(lost.body, HasSubstr("lost: its VMM killed by signal 9"));
  EXPECT_THAT(daemon.request("GET", "/metrics").body, HasSubstr("dsec_pool_lost_total 1"));
  // A jailed VMM has no supervisor to remove its cgroup: the pool did.
  EXPECT_TRUE(eventually(
      [&] { return !std::filesystem::exists("/sys/fs/cgroup/dsec-vmm-pool/" + id); }, 30s));
  EXPECT_TRUE(eventually([&] { return daemon.count("ready") == 1; })) << "refilled\n"
                                                                      << daemon.log();
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

// A VMM that lives on but no longer serves (stopped with SIGSTOP, as a stuck one would be)
// fails its health checks: it is reported lost, killed and replaced.
TEST(Pool, AHungVmmIsReportedLostKilledAndReplaced) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start({"--health-interval", "1", "--health-timeout", "5"})) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 1}, {"max", 2}}));
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const json sandbox = json::parse(acquired.body);
  const std::string id = sandbox["id"];
  const auto pid = sandbox["pid"].get<pid_t>();
  std::this_thread::sleep_for(3s);
  EXPECT_THAT(daemon.request("GET", "/metrics").body, HasSubstr("dsec_pool_hung_total 0"))
      << "a serving clone passes its checks\n"
      << daemon.log();
  // The whole process group (the pid the pool reports is the VMM's).
  ASSERT_EQ(::kill(-pid, SIGSTOP), 0);

  ASSERT_TRUE(eventually([&] { return daemon.request("GET", "/sandboxes/" + id).status == 410; }))
      << daemon.log();
  EXPECT_THAT(daemon.request("GET", "/sandboxes/" + id).body,
              HasSubstr("lost: its VMM stopped answering"));
  EXPECT_THAT(daemon.request("GET", "/metrics").body, HasSubstr("dsec_pool_hung_total 1"));
  EXPECT_FALSE(process_exists(pid)) << "killed and reaped";
  EXPECT_TRUE(eventually([&] { return daemon.count("ready") == 1; })) << "refilled\n"
                                                                      << daemon.log();
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

// An exec runs on a thread of the daemon's own: a long one holds neither the daemon's other
// clients nor its other sandboxes.
TEST(Pool, ALongExecHoldsNoOtherRequestAndEndsWhenItsClientLeaves) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 1}, {"max", 2}}));
  const auto first = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(first.status, 201) << first.body;
  const std::string slow_id = json::parse(first.body)["id"];
  auto slow = std::async(std::launch::async, [&] {
    return daemon.request("POST", "/sandboxes/" + slow_id + "/exec",
                          R"({"argv": ["sleep", "10"]})");
  });
  std::this_thread::sleep_for(1s);

  EXPECT_EQ(daemon.request("GET", "/images").status, 200);
  ASSERT_TRUE(eventually([&] { return daemon.count("ready") == 1; })) << daemon.log();
  const auto second = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(second.status, 201) << second.body;
  const std::string id = json::parse(second.body)["id"];
  const auto echo =
      daemon.request("POST", "/sandboxes/" + id + "/exec", R"({"argv": ["echo", "meanwhile"]})");
  EXPECT_EQ(echo.status, 200) << echo.body;
  EXPECT_EQ(json::parse(echo.body).value("stdout", ""), "meanwhile\n");
  EXPECT_EQ(slow.wait_for(0s), std::future_status::timeout)
      << "the other client was served while the long exec ran";

  const auto slept = slow.get();
  ASSERT_EQ(slept.status, 200) << slept.body;
  EXPECT_EQ(json::parse(slept.body)["exit"], json({{"kind", "exited"}, {"code", 0}}));

  // An exec whose client leaves before its answer ends: its command is killed in the guest.
  {
    auto fd = io::connect_unix(daemon.socket().string());
    ASSERT_TRUE(fd) << fd.error().message();
    const std::string body = R"({"argv": ["sh", "-c", "echo $$ >/tmp/left; exec sleep 600"]})";
    const std::string request = "POST /sandboxes/" + id + "/exec HTTP/1.1\r\nHost: pool\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                                body;
    ASSERT_EQ(::send(fd->get(), request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    ASSERT_TRUE(eventually([&] {
      const auto started =
          daemon.request("POST", "/sandboxes/" + id + "/exec", R"({"argv": ["cat", "/tmp/left"]})");
      return started.status == 200 && !json::parse(started.body).value("stdout", "").empty();
    })) << daemon.log();
  }  // the client leaves
  EXPECT_TRUE(eventually([&] {
    const auto alive = daemon.request(
        "POST", "/sandboxes/" + id + "/exec",
        R"({"argv": ["sh", "-c", "kill -0 $(cat /tmp/left) 2>/dev/null && echo alive || echo ended"]})");
    return alive.status == 200 && json::parse(alive.body).value("stdout", "") == "ended\n";
  })) << "the command of an exec whose client left still runs";
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

// A file PUT into a sandbox through the pool is there for its commands, and comes back out
// byte for byte with its mode.
TEST(Pool, FilesGoInAndOutThroughThePool) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 1}, {"max", 1}}));
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const std::string id = json::parse(acquired.body)["id"];
  const std::string bytes("line one\n\0binary\xff\n", 18);
  const auto put = raw_exchange(
      daemon, "PUT /sandboxes/" + id + "/files HTTP/1.1\r\nHost: pool\r\nConnection: close\r\n" +
                  "X-Dsec-Path: /tmp/from-host\r\nX-Dsec-Mode: 0750\r\nContent-Length: " +
                  std::to_string(bytes.size()) + "\r\n\r\n" + bytes);
  EXPECT_THAT(put, ::testing::StartsWith("HTTP/1.1 204")) << put;

  const auto stat = daemon.request("POST", "/sandboxes/" + id + "/exec",
                                   R"({"argv": ["stat", "-c", "%a %s", "/tmp/from-host"]})");
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(json::parse(stat.body)["stdout"], "750 18\n");

  const auto got = raw_exchange(daemon, "GET /sandboxes/" + id +
                                            "/files HTTP/1.1\r\nHost: pool\r\nConnection: "
                                            "close\r\nX-Dsec-Path: /tmp/from-host\r\n\r\n");
  EXPECT_THAT(got, ::testing::StartsWith("HTTP/1.1 200")) << got;
  EXPECT_THAT(got, HasSubstr("X-Dsec-Mode: 0750"));
  EXPECT_TRUE(got.ends_with("\r\n\r\n" + bytes)) << "the bytes come back whole";

  const auto missing = raw_exchange(daemon, "GET /sandboxes/" + id +
                                                "/files HTTP/1.1\r\nHost: pool\r\nConnection: "
                                                "close\r\nX-Dsec-Path: /no/such/file\r\n\r\n");
  EXPECT_THAT(missing, ::testing::StartsWith("HTTP/1.1 502")) << missing;
  EXPECT_THAT(missing, HasSubstr("/no/such/file"));
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

// A sandbox paused, resumed, and snapshotted into a new warm image that the pool then
// serves: the fork has the file its parent wrote before the snapshot.
TEST(Pool, PauseResumeAndASnapshotThatThePoolServesAsAnImage) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 0}, {"max", 1}}));
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const std::string id = json::parse(acquired.body)["id"];
  const std::string sandbox = "/sandboxes/" + id;

  const auto paused = daemon.request("POST", sandbox + "/pause");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(json::parse(paused.body)["paused"], true);
  const auto refused = daemon.request("POST", sandbox + "/exec", R"({"argv": ["true"]})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  const auto resumed = daemon.request("POST", sandbox + "/resume");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(json::parse(resumed.body)["paused"], false);

  const auto wrote = daemon.request("POST", sandbox + "/exec",
                                    R"({"argv": ["sh", "-c", "echo parent > /tmp/mark; sync"]})");
  ASSERT_EQ(wrote.status, 200) << wrote.body;
  const auto made = daemon.request("POST", sandbox + "/snapshot", R"({"name": "fork"})");
  ASSERT_EQ(made.status, 201) << made.body << daemon.log();
  EXPECT_EQ(json::parse(made.body)["name"], "fork");
  EXPECT_TRUE(std::filesystem::is_regular_file(daemon.image_dir() / "fork" / "memory"));
  const auto after = daemon.request("POST", sandbox + "/exec", R"({"argv": ["cat", "/tmp/mark"]})");
  ASSERT_EQ(after.status, 200) << "the sandbox runs on after its snapshot: " << after.body;
  EXPECT_EQ(json::parse(after.body)["stdout"], "parent\n");
  ASSERT_EQ(daemon.request("DELETE", sandbox).status, 204);

  const auto registered =
      daemon.request("PUT", "/images/fork", json{{"ready", 0}, {"max", 1}}.dump());
  ASSERT_EQ(registered.status, 200) << registered.body;
  const auto child = daemon.request("POST", "/sandboxes", R"({"image": "fork"})");
  ASSERT_EQ(child.status, 201) << child.body << daemon.log();
  const std::string child_id = json::parse(child.body)["id"];
  const auto read = daemon.request("POST", "/sandboxes/" + child_id + "/exec",
                                   R"({"argv": ["cat", "/tmp/mark"]})");
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(json::parse(read.body)["stdout"], "parent\n");
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

TEST(Pool, TimeToLiveFreesASandboxAndAFullPoolRefusesWith429) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 0}, {"max", 1}}));
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base", "ttl_s": 5})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const json sandbox = json::parse(acquired.body);

  const auto full = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  EXPECT_EQ(full.status, 429);
  EXPECT_THAT(full.body, HasSubstr("maximum of 1 clones"));

  const std::string id = sandbox["id"];
  ASSERT_TRUE(eventually([&] { return daemon.request("GET", "/sandboxes/" + id).status == 410; }))
      << daemon.log();
  EXPECT_THAT(daemon.request("GET", "/sandboxes/" + id).body,
              HasSubstr("reached its time to live"));
  EXPECT_TRUE(eventually([&] { return !process_exists(sandbox["pid"].get<pid_t>()); }, 60s));
  EXPECT_FALSE(std::filesystem::exists(sandbox["vsock"].get<std::string>()));
  EXPECT_THAT(daemon.request("GET", "/metrics").body, HasSubstr("dsec_pool_expired_total 1"));
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

TEST(Pool, ADaemonKilledAndStartedAgainAdoptsTheSandboxAClientHolds) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 0}, {"max", 2}}));
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const json sandbox = json::parse(acquired.body);
  const std::string id = sandbox["id"];
  const pid_t vmm = sandbox["pid"];

  daemon.stop(SIGKILL);
  EXPECT_TRUE(process_exists(vmm)) << "a daemon's death does not end its sandboxes";
  ASSERT_TRUE(daemon.start()) << daemon.log();
  const auto adopted = daemon.request("GET", "/sandboxes/" + id);
  ASSERT_EQ(adopted.status, 200) << adopted.body << daemon.log();
  EXPECT_EQ(json::parse(adopted.body)["state"], "in_use");
  EXPECT_EQ(json::parse(adopted.body)["pid"], vmm);
  const auto exec =
      daemon.request("POST", "/sandboxes/" + id + "/exec", R"({"argv": ["echo", "still here"]})");
  ASSERT_EQ(exec.status, 200) << exec.body;
  EXPECT_EQ(json::parse(exec.body)["stdout"], "still here\n");

  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
  expect_nothing_left(daemon, {vmm});
}

// The state file names the host files its VM opens: a warm image made with a drive on a host
// disk (here a scratch file standing for one) read-write. The pool refuses it at
// registration, and a state swapped in after registration makes every clone refuse to
// start: the disk is never opened.
TEST(Pool, AStateFileNamingAHostDiskIsRefusedAndTheDiskIsNeverOpened) {
  namespace fs = std::filesystem;
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  const fs::path disk = dir.path() / "host-disk.img";
  std::ofstream(disk) << std::string(size_t{1} << 20, 'h');
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  const fs::path evil = daemon.image_dir() / "evil";
  const auto warmed = run_vmm(
      {"warm", "--out", evil.string(), "--vcpus", "2", "--memory", "256", "--drive", disk.string()},
      300s);
  ASSERT_EQ(warmed.exit_status, 0) << warmed.describe();
  const UniqueFd watch(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  ASSERT_TRUE(watch);
  ASSERT_GE(::inotify_add_watch(watch.get(), disk.c_str(), IN_OPEN | IN_MODIFY), 0);

  const auto refused = daemon.request("PUT", "/images/evil", json{{"ready", 1}}.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("1 drive(s), which pool clones cannot have yet"));

  // Registered clean, then swapped: the clone's VMM takes no host path from the state.
  const fs::path swapped = daemon.image_dir() / "base";
  fs::create_directory(swapped);
  fs::copy_file(image.dir / "state", swapped / "state");
  fs::create_hard_link(image.dir / "memory", swapped / "memory");
  const auto registered =
      daemon.request("PUT", "/images/base", json{{"ready", 0}, {"max", 1}}.dump());
  ASSERT_EQ(registered.status, 200) << registered.body;
  fs::rename(evil / "state", swapped / "state");
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  EXPECT_EQ(acquired.status, 503) << acquired.body;
  EXPECT_THAT(acquired.body + daemon.log(), HasSubstr("names the host file " + disk.string()));

  std::array<char, 4096> events{};
  EXPECT_LT(::read(watch.get(), events.data(), events.size()), 0)
      << "the host disk was opened by a pool clone";
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

// A clone maps its image's memory file: one that its group or others may write could be
// changed under every clone. Such an image is refused at registration, and a clone of it is
// refused at launch once its mode changed after registration.
TEST(PoolImageStore, AnImageWhoseMemoryOthersMayWriteIsRefused) {
  namespace fs = std::filesystem;
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  // A copy of the memory file of its own: its mode is changed below.
  const fs::path base = daemon.image_dir() / "base";
  ASSERT_TRUE(fs::create_directories(base));
  fs::create_hard_link(image.dir / "state", base / "state");
  fs::copy_file(image.dir / "memory", base / "memory");
  fs::permissions(base / "memory", fs::perms::owner_read | fs::perms::owner_write |
                                       fs::perms::group_read | fs::perms::group_write);
  const auto refused = daemon.request("PUT", "/images/base", json{{"max", 1}}.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr((base / "memory").string() + " is writable by its group"));
  EXPECT_EQ(daemon.get("/images")["images"].size(), 0U);

  fs::permissions(base / "memory", fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_EQ(daemon.request("PUT", "/images/base", json{{"max", 1}}.dump()).status, 200);
  fs::permissions(base / "memory", fs::perms::others_write, fs::perm_options::add);
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  EXPECT_EQ(acquired.status, 503) << acquired.body;
  EXPECT_THAT(acquired.body + daemon.log(),
              HasSubstr((base / "memory").string() + " is writable by others"));
  EXPECT_EQ(daemon.get("/sandboxes")["sandboxes"].size(), 0U) << "no clone was started";
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

// A snapshot names no path: a body with one is refused, and a link planted where the
// snapshot's name lands is neither followed nor replaced; nothing is written outside the
// store, and a jailed clone's snapshot still becomes an image the pool serves.
TEST(PoolImageStore, ASnapshotNamesNoPathAndFollowsNoLinkPlantedInTheStore) {
  namespace fs = std::filesystem;
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(local_base());
  PoolDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ASSERT_TRUE(daemon.register_image(image, {{"ready", 0}, {"max", 2}}));
  const auto acquired = daemon.request("POST", "/sandboxes", R"({"image": "base"})");
  ASSERT_EQ(acquired.status, 201) << acquired.body;
  const std::string sandbox = "/sandboxes/" + json::parse(acquired.body)["id"].get<std::string>();

  const fs::path outside = dir.path() / "outside";
  fs::create_directory(outside);
  auto refused = daemon.request("POST", sandbox + "/snapshot",
                                json{{"snapshot_dir", (outside / "fork").string()}}.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("'snapshot_dir' is gone"));
  refused = daemon.request("POST", sandbox + "/snapshot", R"({"name": "../outside/fork"})");
  EXPECT_EQ(refused.status, 400) << refused.body;

  fs::create_directory_symlink(outside, daemon.image_dir() / "planted");
  refused = daemon.request("POST", sandbox + "/snapshot", R"({"name": "planted"})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_TRUE(fs::is_empty(outside)) << "nothing written through the link";
  EXPECT_TRUE(fs::is_symlink(daemon.image_dir() / "planted")) << "nor the link replaced";

  const auto made = daemon.request("POST", sandbox + "/snapshot", R"({"name": "fork"})");
  ASSERT_EQ(made.status, 201) << made.body << daemon.log();
  EXPECT_TRUE(fs::is_empty(outside));
  for (const auto& entry : fs::directory_iterator(daemon.image_dir())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".staging-")) << entry.path();
  }
  for (const char* file : {"state", "memory"}) {
    const auto status = fs::symlink_status(daemon.image_dir() / "fork" / file);
    EXPECT_TRUE(fs::is_regular_file(status)) << file;
    EXPECT_EQ(status.permissions(), fs::perms::owner_read | fs::perms::owner_write) << file;
  }
  const auto again = daemon.request("POST", sandbox + "/snapshot", R"({"name": "fork"})");
  EXPECT_EQ(again.status, 409) << again.body;
  ASSERT_EQ(daemon.request("PUT", "/images/fork", R"({"max": 1})").status, 200);
  const auto child = daemon.request("POST", "/sandboxes", R"({"image": "fork"})");
  EXPECT_EQ(child.status, 201) << child.body << daemon.log();
  EXPECT_TRUE(WIFEXITED(daemon.stop(SIGTERM)));
}

}  // namespace
}  // namespace dsec::test
