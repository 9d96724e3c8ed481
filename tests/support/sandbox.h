// For end-to-end tests: a sandbox — the default image booted by `dsec-vmm run` in the
// background with a vsock device and the guest agent serving — and a client for its agent.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "vmm/agent/client.h"

namespace dsec::test {

class Sandbox {
 public:
  // Boots the default image with `extra_args` for `dsec-vmm run` (drives, say).
  explicit Sandbox(std::vector<std::string> extra_args = {}) {
    prepare_paths();
    std::vector<std::string> args{kVmmBinary, "run",        "--vcpus",   "2",
                                  "--memory", "256",        "--vsock",   vsock_,
                                  "--append", "dsec.agent", "--console", console_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    launch(std::move(args));
  }

  // A clone: `dsec-vmm restore` of the snapshot in `snapshot_dir`, with a vsock socket of
  // its own.
  static std::unique_ptr<Sandbox> restore(const std::filesystem::path& snapshot_dir,
                                          std::vector<std::string> extra_args = {}) {
    std::unique_ptr<Sandbox> sandbox(new Sandbox(Restored{}));
    std::vector<std::string> args{kVmmBinary,      "restore",   snapshot_dir.string(), "--vsock",
                                  sandbox->vsock_, "--console", sandbox->console_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    sandbox->launch(std::move(args));
    return sandbox;
  }

  ~Sandbox() {
    if (pid_ > 0) {
      stop(SIGTERM);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  agent::AgentClient client() const {
    return agent::AgentClient(
        [path = vsock_] { return agent::connect_vsock_uds(path, agent::kAgentPort); });
  }

  // Waits until the agent answers a health check; false (and the reason in `why`) if the
  // VMM exited or the deadline passed.
  bool wait_ready(std::chrono::seconds deadline, std::string& why) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    std::string last;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        why = "dsec-vmm " + describe_wait_status(status) + " before the agent was ready\n" +
              describe();
        return false;
      }
      if (std::filesystem::exists(vsock_)) {
        auto h = client().health();
        if (h) return true;
        last = h.error().message();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    why = "the agent did not answer within the deadline (last: " + last + ")\n" + describe();
    return false;
  }

  // Sends `sig` to the VMM and waits for it; returns its wait status.
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  const std::string& vsock_path() const { return vsock_; }
  const std::filesystem::path& dir() const { return dir_; }

  // Asks the VMM to log its interrupts' and devices' state (SIGUSR1), again every half
  // second, until its log contains `want` or `deadline` passes; returns the log.
  std::string log_state(const std::string& want, std::chrono::seconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    std::string log;
    do {
      if (pid_ > 0) ::kill(pid_, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      log = file_text(dir_ / "vmm.log");
    } while (log.find(want) == std::string::npos && std::chrono::steady_clock::now() < end);
    return log;
  }

  // describe(), after the VMM logged its interrupts' and devices' state: for a step that
  // timed out.
  std::string describe_stuck() {
    log_state("virtio slot", std::chrono::seconds(5));
    return describe();
  }

  // The guest's console and the VMM's log, for failure messages.
  std::string describe() const {
    return file_section("console", console_) + file_section("dsec-vmm log", dir_ / "vmm.log");
  }

 private:
  struct Restored {};
  explicit Sandbox(Restored) { prepare_paths(); }

  void prepare_paths() {
    dir_ = std::filesystem::temp_directory_path() /
           ("dsec-sandbox-" + std::to_string(::getpid()) + "-" + std::to_string(++counter()));
    std::filesystem::create_directories(dir_);
    // Unix sockets cannot live on 9p (the test bed's /tmp): /run is a local tmpfs there.
    const std::filesystem::path socket_dir = ::access("/run", W_OK) == 0 ? "/run" : dir_;
    vsock_ = (socket_dir / ("dsec-sandbox-" + std::to_string(::getpid()) + "-" +
                            std::to_string(counter()) + ".vsock"))
                 .string();
    console_ = (dir_ / "console.log").string();
  }

  void launch(std::vector<std::string> args) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const std::string log = (dir_ / "vmm.log").string();
      std::freopen(log.c_str(), "w", stderr);
      std::freopen("/dev/null", "r", stdin);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  static int& counter() {
    static int n = 0;
    return n;
  }

  std::filesystem::path dir_;
  std::string vsock_;
  std::string console_;
  pid_t pid_ = -1;
};

}  // namespace dsec::test
