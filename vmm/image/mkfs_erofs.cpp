#include "vmm/image/mkfs_erofs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "vmm/common/unique_fd.h"

extern char** environ;  // NOLINT: POSIX's, for the child's environment

namespace dsec::image {
namespace {

constexpr size_t kKeptOutput = 4096;  // the end of mkfs.erofs's output, for an error

// A spawned process, killed and reaped if it is still running when this goes.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
  }
  pid_t pid() const { return pid_; }
  // Its wait status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  ~SpawnSetup() {
    posix_spawnattr_destroy(&attr_);
    posix_spawn_file_actions_destroy(&actions_);
  }
  // Input from /dev/null, output and errors into `output`; signals unblocked and at their
  // defaults (the importer blocks SIGINT and SIGTERM to clean up after itself).
  bool prepare(int output) {
    sigset_t none;
    sigset_t defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (const int signo : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
      sigaddset(&defaults, signo);
    }
    return posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0) == 0 &&
           posix_spawn_file_actions_adddup2(&actions_, output, 1) == 0 &&
           posix_spawn_file_actions_adddup2(&actions_, output, 2) == 0 &&
           posix_spawnattr_setsigmask(&attr_, &none) == 0 &&
           posix_spawnattr_setsigdefault(&attr_, &defaults) == 0 &&
           posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) == 0;
  }
  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attr() const { return &attr_; }

 private:
  posix_spawn_file_actions_t actions_{};
  posix_spawnattr_t attr_{};
};

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) {
    pointers.push_back(s.data());
  }
  pointers.push_back(nullptr);
  return pointers;
}

// This process's environment, with SOURCE_DATE_EPOCH set to `build_time`: mkfs.erofs 1.5
// takes the superblock's time from it (its -T would also set every file's time).
std::vector<std::string> child_environment(int64_t build_time) {
  std::vector<std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with("SOURCE_DATE_EPOCH=")) {
      environment.emplace_back(*entry);
    }
  }
  environment.push_back(fmt::format("SOURCE_DATE_EPOCH={}", build_time));
  return environment;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    return fmt::format("exit status {}", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return fmt::format("killed by signal {}", WTERMSIG(status));
  }
  return fmt::format("wait status {}", status);
}

}  // namespace

std::string uuid_from_hex(std::string_view hex) {
  const std::string digits(hex.substr(0, 32));
  return fmt::format("{}-{}-{}-{}-{}", digits.substr(0, 8), digits.substr(8, 4),
                     digits.substr(12, 4), digits.substr(16, 4), digits.substr(20, 12));
}

Status make_erofs_image(const std::filesystem::path& tree, const std::filesystem::path& image,
                        const ErofsOptions& options, const std::stop_token& stop) {
  std::array<int, 2> pipe_fds{};
  if (::pipe2(pipe_fds.data(), O_CLOEXEC) != 0) {
    return fail_errno("pipe2 for mkfs.erofs's output", errno);
  }
  const UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  SpawnSetup setup;
  if (!setup.prepare(write_end.get())) {
    return fail("cannot set up mkfs.erofs's standard streams");
  }
  // lz4hc, as images/build-rootfs: about half the tree's size, cheap to decompress.
  std::vector<std::string> args{"mkfs.erofs", "-zlz4hc", "-U" + options.uuid};
  if (options.all_root) {
    args.emplace_back("--all-root");
  }
  args.push_back(image.string());
  args.push_back(tree.string());
  std::vector<std::string> environment = child_environment(options.build_time);
  auto argv = c_strings(args);
  auto envp = c_strings(environment);
  pid_t pid = -1;
  const int rc =
      ::posix_spawnp(&pid, "mkfs.erofs", setup.actions(), setup.attr(), argv.data(), envp.data());
  if (rc != 0) {
    return fail_errno("cannot run mkfs.erofs", rc,
                      rc == ENOENT ? "install Debian's erofs-utils (tools/install-deps)" : "");
  }
  Child child(pid);
  write_end.reset();

  std::string output;
  {
    // From the signal watcher's thread; the child is not reaped before this callback is
    // gone, so its pid cannot have been reused.
    const std::stop_callback kill_on_stop(stop, [pid] { ::kill(pid, SIGTERM); });
    std::array<char, 4096> buffer{};
    while (true) {
      const ssize_t n = ::read(read_end.get(), buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;
      }
      output.append(buffer.data(), static_cast<size_t>(n));
      if (output.size() > 2 * kKeptOutput) {
        output.erase(0, output.size() - kKeptOutput);
      }
    }
  }
  const int status = child.wait();
  if (stop.stop_requested()) {
    return fail("interrupted");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (output.size() > kKeptOutput) {
      output.erase(0, output.size() - kKeptOutput);
    }
    return fail(fmt::format("mkfs.erofs failed ({}) writing {} from {}:\n{}",
                            describe_status(status), image.string(), tree.string(), output));
  }
  return ok();
}

}  // namespace dsec::image
