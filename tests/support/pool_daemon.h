// For tests: a `dsec-vmm pool` process on a state directory and socket of its own (under
// one directory, which must be on a local file system: Unix sockets cannot be bound on the
// test bed's 9p /tmp), stopped with SIGTERM and reaped when the object goes.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/pool_clone_probe.h"
#include "vmm/http/client.h"

extern char** environ;

namespace dsec::test {

class PoolDaemon {
 public:
  // Starts `dsec-vmm pool --state-dir DIR/state --socket DIR/pool.sock EXTRA...`, its
  // stderr in DIR/daemon.log.
  explicit PoolDaemon(const std::filesystem::path& dir, std::vector<std::string> extra = {})
      : socket_((dir / "pool.sock").string()),
        state_dir_((dir / "state").string()),
        log_(dir / "daemon.log"),
        image_dir_(dir / "state" / "images") {
    std::vector<std::string> args = {kVmmBinary, "pool", "--state-dir", (dir / "state").string(),
                                     "--socket", socket_};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0600);
    if (::posix_spawn(&pid_, kVmmBinary.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  PoolDaemon(const PoolDaemon&) = delete;
  PoolDaemon& operator=(const PoolDaemon&) = delete;
  ~PoolDaemon() { stop(SIGTERM); }

  // Whether it answers GET /images within `within` (its socket is there before it serves).
  bool serving(std::chrono::seconds within = std::chrono::seconds(30)) const {
    const http::HttpClient client(socket_, std::chrono::seconds(10));
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      if (const auto reply = client.request("GET", "/images", ""); reply && reply->status == 200) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // Sends `signo` and reaps it; its wait status (0 if it was not running). In a test that
  // failed so far, its clones first get the wake-up probe (pool_clone_probe.h).
  int stop(int signo) {
    int status = 0;
    if (pid_ > 0) {
      if (::testing::Test::HasFailure()) {
        std::cout << probe_pool_clones(state_dir_);
      }
      ::kill(pid_, signo);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    return status;
  }

  // One request to its API, with a new connection; status 0 and why when none came back.
  http::HttpReply request(std::string_view method, std::string_view path,
                          const std::string& body = {},
                          std::chrono::seconds within = std::chrono::seconds(300)) const {
    auto reply = http::HttpClient(socket_, within).request(method, path, body);
    return reply ? *reply : http::HttpReply{.status = 0, .body = reply.error().message()};
  }

  const std::string& socket() const { return socket_; }
  const std::string& state_dir() const { return state_dir_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return file_text(log_); }
  // Its image store: the default, STATE_DIR/images.
  const std::filesystem::path& image_dir() const { return image_dir_; }

 private:
  std::string socket_;
  std::string state_dir_;
  std::filesystem::path log_;
  std::filesystem::path image_dir_;
  pid_t pid_ = -1;
};

}  // namespace dsec::test
