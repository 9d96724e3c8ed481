// For end-to-end tests: a sandbox — the default image booted by `dsec-vmm run` in the
// background with a vsock device and the guest agent serving — and a client for its agent.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/wakeup_probe.h"
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

  // `dsec-vmm ARGS... --vsock VSOCK --console ...`: a VMM whose vsock socket must be
  // somewhere of the caller's choosing (a jail's directory).
  static std::unique_ptr<Sandbox> with_vsock_at(std::string vsock, std::vector<std::string> args) {
    std::unique_ptr<Sandbox> sandbox(new Sandbox(Restored{}));
    sandbox->vsock_ = std::move(vsock);
    args.insert(args.begin(), kVmmBinary);
    args.insert(args.end(), {"--vsock", sandbox->vsock_, "--console", sandbox->console_});
    sandbox->launch(std::move(args));
    return sandbox;
  }

  // The constructor's boot, or restore()'s clone, serving the VM's API on api_socket().
  static std::unique_ptr<Sandbox> with_api() {
    std::unique_ptr<Sandbox> sandbox(new Sandbox(Restored{}));
    sandbox->launch({kVmmBinary, "run", "--vcpus", "2", "--memory", "256", "--vsock",
                     sandbox->vsock_, "--append", "dsec.agent", "--console", sandbox->console_,
                     "--api-sock", sandbox->api_socket_});
    return sandbox;
  }
  static std::unique_ptr<Sandbox> restore_with_api(const std::filesystem::path& snapshot_dir) {
    std::unique_ptr<Sandbox> sandbox(new Sandbox(Restored{}));
    sandbox->launch({kVmmBinary, "restore", snapshot_dir.string(), "--vsock", sandbox->vsock_,
                     "--console", sandbox->console_, "--api-sock", sandbox->api_socket_});
    return sandbox;
  }
  // A fresh `dsec-vmm serve` on api_socket(): no VM until PUT /snapshot/load, whose
  // vsock_override should be vsock_path().
  static std::unique_ptr<Sandbox> serve() {
    std::unique_ptr<Sandbox> sandbox(new Sandbox(Restored{}));
    sandbox->launch(
        {kVmmBinary, "serve", "--api-sock", sandbox->api_socket_, "--console", sandbox->console_});
    return sandbox;
  }

  // `dsec-vmm serve --config-file FILE` (and --no-api unless `with_api`): FILE holds the
  // text `config` writes for this sandbox (its vsock_path(), say), in dir().
  static std::unique_ptr<Sandbox> serve_config_file(
      const std::function<std::string(const Sandbox&)>& config, bool with_api) {
    std::unique_ptr<Sandbox> sandbox(new Sandbox(Restored{}));
    const std::string file = (sandbox->dir_ / "vm_config.json").string();
    std::ofstream(file) << config(*sandbox);
    std::vector<std::string> args{kVmmBinary, "serve",     "--config-file",
                                  file,       "--console", sandbox->console_};
    if (with_api) {
      args.insert(args.end(), {"--api-sock", sandbox->api_socket_});
    } else {
      args.emplace_back("--no-api");
    }
    sandbox->launch(std::move(args));
    return sandbox;
  }

  // The binary started as `firecracker` (a symlink in dir()) with Firecracker's command
  // line: --api-sock api_socket(), --config-file FILE (the text `config` writes for this
  // sandbox, in dir()), then `extra_args`; the console, on its stdout, goes to the console
  // file.
  static std::unique_ptr<Sandbox> firecracker(
      const std::function<std::string(const Sandbox&)>& config,
      const std::vector<std::string>& extra_args) {
    std::unique_ptr<Sandbox> sandbox(new Sandbox(Restored{}));
    const std::string file = (sandbox->dir_ / "vm_config.json").string();
    std::ofstream(file) << config(*sandbox);
    const std::string binary = (sandbox->dir_ / "firecracker").string();
    std::filesystem::create_symlink(kVmmBinary, binary);
    std::vector<std::string> args{binary, "--api-sock", sandbox->api_socket_, "--config-file",
                                  file};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    sandbox->console_on_stdout_ = true;
    sandbox->launch(std::move(args));
    return sandbox;
  }

  // Waits until the API socket exists; false (and why) if the VMM exited or the deadline
  // passed.
  bool wait_for_api(std::chrono::seconds deadline, std::string& why) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < end) {
      if (!running()) {
        why = "dsec-vmm exited before its API socket was there\n" + describe();
        return false;
      }
      if (std::filesystem::exists(api_socket_)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    why = "no API socket at " + api_socket_ + " within the deadline\n" + describe();
    return false;
  }

  // Waits until the VMM exits by itself; its wait status, or nullopt if it still runs at
  // the deadline.
  std::optional<int> wait_for_exit(std::chrono::seconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (running()) {
      if (std::chrono::steady_clock::now() >= end) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return exit_status_;
  }

  // Whether the VMM process still runs.
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return false;
    }
    return true;
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

  // A client of this sandbox's agent; `answer_timeout` is how long a request may go without
  // a word from the guest (an exec: before the client asks for a health check).
  agent::AgentClient client(
      std::chrono::milliseconds answer_timeout = agent::kDefaultAnswerTimeout) const {
    return agent::AgentClient(
        [path = vsock_] { return agent::connect_vsock_uds(path, agent::kAgentPort); },
        answer_timeout);
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
    // The VMM's state dump too (SIGUSR1: each vCPU's halt and timer, each queue), so that a
    // boot that stalled says where.
    why = "the agent did not answer within the deadline (last: " + last + ")\n" + describe_stuck();
    return false;
  }

  // Sends `sig` to the VMM and waits for it; returns its wait status (the one it had, if
  // it had exited already).
  int stop(int sig) {
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  const std::string& vsock_path() const { return vsock_; }
  // The VMM's process id (-1 once it ended).
  pid_t pid() const { return pid_; }
  const std::string& api_socket() const { return api_socket_; }
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
  // Then the wake-up probe (wakeup_probe.h): its line says whether the test bed had lost
  // a wake-up of the guest's.
  std::string describe_stuck() {
    log_state("virtio slot", std::chrono::seconds(5));
    return describe() + probe();
  }

  // probe_lost_wakeup() on this VMM, the guest's answer being its agent's to a health check.
  std::string probe() {
    return probe_lost_wakeup(
        pid_,
        [this] {
          return file_text(dir_ / "vmm.log").find("wake-up IPIs: vectors") != std::string::npos;
        },
        [this] { return client(std::chrono::seconds(5)).health().has_value(); });
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
    api_socket_ = (socket_dir / ("dsec-sandbox-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(counter()) + ".api"))
                      .string();
  }

  void launch(std::vector<std::string> args) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const std::string log = (dir_ / "vmm.log").string();
      std::freopen(log.c_str(), "w", stderr);
      std::freopen("/dev/null", "r", stdin);
      if (console_on_stdout_) {
        std::freopen(console_.c_str(), "w", stdout);
      }
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
  std::string api_socket_;
  bool console_on_stdout_ = false;  // the VMM writes the console to stdout
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

// What `/bin/sh -c COMMAND` printed in a sandbox (stdout and stderr together), and how it
// ended.
struct ShellOutput {
  std::string out;
  Result<agent::ExitStatus> status = agent::ExitStatus{};
  // It ran to exit status 0.
  bool ok() const { return status.has_value() && status->code == 0; }
};

// `answer_timeout`: how long the exec may go without a word from the guest before its
// client asks for a health check (Sandbox::client).
inline ShellOutput sh(Sandbox& vm, const std::string& command,
                      std::chrono::milliseconds answer_timeout = agent::kDefaultAnswerTimeout) {
  ShellOutput o;
  auto client = vm.client(answer_timeout);
  agent::ExecRequest req;
  req.argv = {"/bin/sh", "-c", command};
  req.timeout_ms = 60000;
  auto append = [&](std::span<const uint8_t> b) {
    o.out.append(b.begin(), b.end());
    return ok();
  };
  o.status = client.exec(req, append, append);
  return o;
}

// run() (a request to the guest) with a deadline. A guest that stalls (the test bed's,
// docs/kvm-test-bed.md) then fails the step after `deadline` with the devices' state in
// `stuck`, instead of holding the test until ctest's timeout: the VMM is killed, which
// closes the agent's stream and ends run().
template <typename F>
auto within(Sandbox& vm, std::chrono::seconds deadline, std::string& stuck, F run) {
  auto done = std::async(std::launch::async, std::move(run));
  if (done.wait_for(deadline) == std::future_status::timeout) {
    stuck = "no answer after " + std::to_string(deadline.count()) + " s\n" + vm.describe_stuck();
    // The step fails either way (the VMM is killed below); one that the wake-up probe of
    // describe_stuck() revived returns as if it had passed: it is failed here, its marker
    // line earning the test a named retry.
    if (stuck.find(kLostWakeupMarker) != std::string::npos) ADD_FAILURE() << stuck;
    vm.stop(SIGKILL);
  }
  return done.get();
}

// `s` without its trailing newlines and blanks.
inline std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace dsec::test
