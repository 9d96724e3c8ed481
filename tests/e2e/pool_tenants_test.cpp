// `dsec-vmm pool` with tenants, end to end in the test bed: a sandbox acquired by one
// tenant (a bearer token over TCP) is invisible to another token's tenant and to another
// uid on the Unix socket (a child process after setresuid): list, get, exec, files,
// snapshot, pause and delete all answer 404, as for an id never known, and the sandbox
// still serves its owner. A wrong token gets 401 and a uid not allowed 403.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/temp_dir.h"
#include "tests/support/warm_image.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/unix_socket.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr auto kDeadline = 300s;
constexpr const char* kAliceToken = "alice-token-0123456789abcdef";
constexpr const char* kBobToken = "bob-token-0123456789abcdef";
constexpr uid_t kTenantUid = 4000;    // --allow-uid
constexpr uid_t kStrangerUid = 4001;  // not allowed

// Sends `request` (which asks to close) on `fd` and reads everything it answered.
std::string exchange_on(int fd, const std::string& request) {
  // Blocking reads, within the deadline (connect_unix's socket comes non-blocking).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const timeval limit{.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(kDeadline).count(),
                      .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return "send failed";
  }
  std::string answer;
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = ::recv(fd, buffer.data(), buffer.size(), 0)) > 0;) {
    answer.append(buffer.data(), static_cast<size_t>(n));
  }
  return answer;
}

std::string http(const std::string& method, const std::string& path, const std::string& body = "",
                 const std::string& headers = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct Reply {
  int status = 0;
  std::string body;
  std::string raw;
};
Reply reply_of(const std::string& raw) {
  Reply reply{.status = 0, .body = {}, .raw = raw};
  if (raw.starts_with("HTTP/1.1 ") && raw.size() >= 12) {
    reply.status = std::atoi(raw.substr(9, 3).c_str());
  }
  if (const size_t end = raw.find("\r\n\r\n"); end != std::string::npos) {
    reply.body = raw.substr(end + 4);
  }
  return reply;
}

// One request on the Unix socket from a child process that runs as `uid` (and gid `uid`,
// no supplementary groups), as another local user's client would.
Reply unix_request_as(uid_t uid, const std::string& socket, const std::string& request) {
  std::array<int, 2> pipe_fds{};
  if (::pipe2(pipe_fds.data(), O_CLOEXEC) != 0) {
    return {};
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::string answer = "setresuid failed";
    if (::setgroups(0, nullptr) == 0 && ::setresgid(uid, uid, uid) == 0 &&
        ::setresuid(uid, uid, uid) == 0) {
      auto fd = io::connect_unix(socket);
      answer = fd ? exchange_on(fd->get(), request) : "connect: " + fd.error().message();
    }
    (void)!::write(pipe_fds[1], answer.data(), answer.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  const UniqueFd from_child(pipe_fds[0]);
  std::string raw;
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = ::read(from_child.get(), buffer.data(), buffer.size())) > 0;) {
    raw.append(buffer.data(), static_cast<size_t>(n));
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return reply_of(raw);
}

Reply tcp_request(uint16_t port, const std::string& request) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd ||
      ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return {.status = 0, .body = "connect failed", .raw = {}};
  }
  return reply_of(exchange_on(fd.get(), request));
}

std::string bearer(const std::string& token) {
  return "Authorization: Bearer " + token + "\r\n";
}

TEST(PoolTenants, ATenantsSandboxIsInvisibleToAnotherTokenAndAnotherUid) {
  const auto& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path());
  // Other users reach the socket through its directory; SO_PEERCRED is the check.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string socket = dir.file("pool.sock");
  const std::string tokens = dir.file("tokens");
  std::ofstream(tokens) << "alice " << kAliceToken << "\nbob " << kBobToken << "\n";
  ASSERT_EQ(::chmod(tokens.c_str(), 0600), 0);
  const std::string log = dir.file("daemon.log");

  const std::vector<std::string> args = {
      kVmmBinary,        "pool", "--state-dir", dir.file("state"),          "--socket",   socket,
      "--ready-timeout", "280",  "--allow-uid", std::to_string(kTenantUid), "--tcp-port", "0",
      "--tokens",        tokens};
  const pid_t daemon = ::fork();
  if (daemon == 0) {
    std::vector<char*> argv;
    for (const auto& arg : args) {
      argv.push_back(const_cast<char*>(arg.c_str()));
    }
    argv.push_back(nullptr);
    (void)std::freopen(log.c_str(), "a", stderr);
    (void)std::freopen("/dev/null", "r", stdin);
    ::execv(kVmmBinary.c_str(), argv.data());
    ::_exit(127);
  }
  // Whatever fails below, the daemon and its VMMs go with the test.
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        ::kill(pid, SIGTERM);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reaper{daemon};
  const auto stop = [&] {
    ::kill(daemon, SIGTERM);
    int status = 0;
    ::waitpid(daemon, &status, 0);
    reaper.pid = -1;
    return status;
  };
  uint16_t port = 0;
  const std::regex serving(R"(serving on 127\.0\.0\.1:(\d+) too)");
  ASSERT_TRUE(eventually(
      [&] {
        std::smatch found;
        const std::string text = file_text(log);
        if (std::regex_search(text, found, serving)) {
          port = static_cast<uint16_t>(std::stoi(found[1]));
        }
        return port != 0 && std::filesystem::exists(socket);
      },
      60s))
      << file_text(log);
  const auto as_operator = [&](const std::string& request) {
    auto fd = io::connect_unix(socket);
    return fd ? reply_of(exchange_on(fd->get(), request)) : Reply{};
  };
  ASSERT_TRUE(eventually([&] { return as_operator(http("GET", "/images")).status == 200; }, 60s));

  ASSERT_FALSE(link_into_store(image, dir.file("state/images"), "base").empty());
  const json spec = {{"ready", 1}, {"max", 3}};
  const auto registered = as_operator(http("PUT", "/images/base", spec.dump()));
  ASSERT_EQ(registered.status, 200) << registered.raw;
  const auto acquired =
      tcp_request(port, http("POST", "/sandboxes", R"({"image": "base"})", bearer(kAliceToken)));
  ASSERT_EQ(acquired.status, 201) << acquired.raw << file_text(log);
  const std::string id = json::parse(acquired.body)["id"];

  // Every route that names the sandbox, as another tenant would send it.
  const std::string stolen = dir.file("state/images/stolen");
  const std::vector<std::string> probes = {
      http("GET", "/sandboxes/" + id),
      http("POST", "/sandboxes/" + id + "/exec", R"({"argv": ["cat", "/etc/hostname"]})"),
      http("GET", "/sandboxes/" + id + "/files", "", "X-Dsec-Path: /etc/hostname\r\n"),
      http("POST", "/sandboxes/" + id + "/snapshot", R"({"name": "stolen"})"),
      http("POST", "/sandboxes/" + id + "/pause"),
      http("POST", "/sandboxes/" + id + "/keepalive"),
      http("DELETE", "/sandboxes/" + id)};
  const auto with_header = [](std::string request, const std::string& header) {
    return request.insert(request.find("\r\n") + 2, header);
  };
  for (const auto& probe : probes) {
    const auto bob = tcp_request(port, with_header(probe, bearer(kBobToken)));
    EXPECT_EQ(bob.status, 404) << probe << "\n" << bob.raw;
    EXPECT_THAT(bob.body, HasSubstr("no sandbox " + id));
    const auto other_uid = unix_request_as(kTenantUid, socket, probe);
    EXPECT_EQ(other_uid.status, 404) << probe << "\n" << other_uid.raw;
    EXPECT_THAT(other_uid.body, HasSubstr("no sandbox " + id));
  }
  const auto bob_list = tcp_request(port, http("GET", "/sandboxes", "", bearer(kBobToken)));
  EXPECT_EQ(bob_list.status, 200) << bob_list.raw;
  EXPECT_EQ(json::parse(bob_list.body)["sandboxes"], json::array());
  const auto uid_list = unix_request_as(kTenantUid, socket, http("GET", "/sandboxes"));
  EXPECT_EQ(uid_list.status, 200) << uid_list.raw;
  EXPECT_EQ(json::parse(uid_list.body, nullptr, false)["sandboxes"], json::array());
  EXPECT_FALSE(std::filesystem::exists(stolen)) << "no snapshot was written";

  // Callers the daemon does not know: nothing done.
  const auto wrong = tcp_request(
      port, http("POST", "/sandboxes", R"({"image": "base"})", bearer("not-a-token-0123456789")));
  EXPECT_EQ(wrong.status, 401) << wrong.raw;
  const auto none = tcp_request(port, http("GET", "/sandboxes/" + id));
  EXPECT_EQ(none.status, 401) << none.raw;
  const auto stranger = unix_request_as(kStrangerUid, socket, http("DELETE", "/sandboxes/" + id));
  EXPECT_EQ(stranger.status, 403) << stranger.raw;
  EXPECT_THAT(stranger.body, HasSubstr("may not use this pool"));
  const auto tenant_image =
      unix_request_as(kTenantUid, socket, http("PUT", "/images/mine", spec.dump()));
  EXPECT_EQ(tenant_image.status, 403) << "images are the operator's: " << tenant_image.raw;

  // The sandbox still serves its owner, who alone sees it listed, and releases it.
  const auto exec =
      tcp_request(port, http("POST", "/sandboxes/" + id + "/exec",
                             R"({"argv": ["echo", "still mine"]})", bearer(kAliceToken)));
  ASSERT_EQ(exec.status, 200) << exec.raw;
  EXPECT_EQ(json::parse(exec.body)["stdout"], "still mine\n");
  const auto alice_list = tcp_request(port, http("GET", "/sandboxes", "", bearer(kAliceToken)));
  EXPECT_THAT(alice_list.body, HasSubstr(id));
  EXPECT_EQ(tcp_request(port, http("DELETE", "/sandboxes/" + id, "", bearer(kAliceToken))).status,
            204);
  const int status = stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << file_text(log);
}

}  // namespace
}  // namespace dsec::test
