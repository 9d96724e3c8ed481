// Runs a command and captures its output, for tests of the dsec-vmm binary. Every run has a
// deadline: a command that outlives it is killed (its whole process group), so a hung guest
// fails the test instead of hanging it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace dsec::test {

using namespace std::chrono_literals;

struct ProcessOutput {
  int exit_status = -1;  // -1 if it did not exit normally (a signal, the deadline)
  int term_signal = 0;   // the signal that killed it, if one did
  bool timed_out = false;
  std::string out;  // what it wrote to stdout
  std::string err;  // what it wrote to stderr
  std::chrono::milliseconds elapsed{0};

  // For failure messages: how it ended, then both streams.
  std::string describe() const {
    std::string how = timed_out     ? "killed at the deadline"
                      : term_signal ? "killed by signal " + std::to_string(term_signal)
                                    : "exit status " + std::to_string(exit_status);
    return how + " after " + std::to_string(elapsed.count()) + " ms\n--- stdout ---\n" + out +
           "\n--- stderr ---\n" + err;
  }
};

// A wait status in words, for failure messages: "exited with status 1", "was killed by
// signal 11 (Segmentation fault)".
inline std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// Runs argv[0] (searched in PATH) with argv, standard input from /dev/null, in a process
// group of its own. If it has not exited `timeout` after the start, the group is killed
// with SIGKILL and the result says timed_out. With `last_words`, the process gets that
// signal at the deadline first and two seconds more to write what it says to it (dsec-vmm
// run logs its interrupts' and devices' state on SIGUSR1: why a guest hung).
inline ProcessOutput run_process(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout, int last_words = 0) {
  ProcessOutput result;
  const auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout;
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    result.err = std::string("pipe2: ") + std::strerror(errno);
    return result;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.err = std::string("pipe2: ") + std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return result;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0 ||
        ::dup2(out_pipe[1], STDOUT_FILENO) < 0 || ::dup2(err_pipe[1], STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    ::execvp(args[0], args.data());
    const std::string msg = std::string("exec ") + args[0] + ": " + std::strerror(errno) + "\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    result.err = std::string("fork: ") + std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return result;
  }
  // Both orders of setpgid (here and in the child) so that the kill below finds the group
  // even if the child has not run yet.
  ::setpgid(pid, pid);

  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_streams = 2;
  std::array<char, 4096> buffer{};
  while (open_streams > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      result.timed_out = true;
      if (last_words != 0) {
        ::kill(pid, last_words);
        last_words = 0;
        deadline = std::chrono::steady_clock::now() + 2s;
        continue;
      }
      ::kill(-pid, SIGKILL);
      break;
    }
    const int ready = ::poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) {
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        continue;
      }
      const ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n > 0) {
        sinks[i]->append(buffer.data(), static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores negative fds
        --open_streams;
      }
    }
  }
  for (auto& fd : fds) {
    if (fd.fd >= 0) {
      ::close(fd.fd);
    }
  }
  // The streams closed (or the group was killed); the process itself may still linger, for
  // example after closing its stdout: give it until the deadline, then kill it too.
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::usleep(10'000);
  }
  // Whatever the command left behind in its group goes with it.
  ::kill(-pid, SIGKILL);
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  if (result.timed_out) {
    result.exit_status = -1;
  }
  return result;
}

struct CommandOutput {
  int exit_status = -1;  // -1 if it did not exit normally (a signal, the deadline)
  std::string output;
};

// `command` runs under /bin/sh; what it writes to stdout is captured (redirect 2>&1 inside
// the command to capture stderr too; what it writes to stderr otherwise is passed on to
// the test's stderr). It is killed if it runs longer than `timeout`.
inline CommandOutput run_command(const std::string& command,
                                 std::chrono::milliseconds timeout = 300s) {
  const ProcessOutput p = run_process({"/bin/sh", "-c", command}, timeout);
  if (!p.err.empty()) {
    std::cerr << p.err;
  }
  if (p.timed_out) {
    std::cerr << "run_command: killed after " << timeout.count() << " ms: " << command << "\n";
  }
  return {p.exit_status, p.out};
}

}  // namespace dsec::test
