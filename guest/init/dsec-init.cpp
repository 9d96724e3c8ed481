// dsec-init: PID 1 of the default guest image (built into it by images/build-initramfs).
//
// 1. Mounts /dev (devtmpfs), /dev/pts, /dev/shm, /proc, /sys and /tmp.
// 2. Tells the VMM that userspace is up through the boot-timer port (boot_timer.h).
// 3. With dsec.root=DEV on the command line, switches root to a sandbox image mounted under
//    a private overlay (image_root.h); what follows then runs there.
// 4. Prints one banner line to the console:
//      dsec-init: cpus=<online CPUs> memtotal_kib=<MemTotal> cmdline=<kernel command line>
// 5. Runs what the kernel command line asks for:
//      dsec.run=<command>  `/bin/sh -c <command>`; quote a command with spaces:
//                          dsec.run="ls -l /" (no double quotes inside it)
//      dsec.shell          an interactive /bin/sh on the console
//      dsec.agent          serve the agent protocol on vsock port 1024
//                          (docs/agent-protocol.md) until the VM is stopped
//    and prints `dsec-init: exit status=<n>` when it ends (128+signal if killed).
// 6. Kills what is left, syncs and reboots. Without ACPI a reboot is the only way out
//    of the guest (reboot=k: through the i8042); the VMM treats it as the VM's exit, a
//    clean one (status 0) only when announced: an image that cannot be booted or an agent
//    that cannot listen reboots unannounced, so the VMM exits 2.
// A ctrl-alt-del (the VMM's SendCtrlAltDel, docs/api.md) comes to it as SIGINT, for which
// it does step 6 at once, from wherever it is.
//
// The options come from /proc/cmdline because the kernel hands init neither
// parameters with a dot nor quoted values intact.
#include <fcntl.h>
#include <sys/io.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boot_timer.h"
#include "guest/agent/server.h"
#include "guest/init/image_root.h"
#include "vmm/agent/protocol.h"

namespace {

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Everything goes to the console (fd 1), unbuffered, one line per call, so that
// lines reach the VMM even if what follows hangs.
void say(const char* fmt, ...) {
  char line[4096];
  int prefix = snprintf(line, sizeof line, "dsec-init: ");
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(line + prefix, sizeof line - prefix - 1, fmt, args);
  va_end(args);
  size_t len = prefix + (n < 0 ? 0 : std::min<size_t>(n, sizeof line - prefix - 2));
  line[len++] = '\n';
  for (size_t off = 0; off < len;) {
    ssize_t w = write(STDOUT_FILENO, line + off, len - off);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      return;
    }
    off += static_cast<size_t>(w);
  }
}

void mount_fs(const char* type, const char* target, unsigned long flags, const char* data) {
  if (mkdir(target, 0755) != 0 && errno != EEXIST) {
    say("warning: mkdir %s: %s", target, strerror(errno));
  }
  if (mount(type, target, type, flags, data) != 0 && errno != EBUSY) {
    say("warning: mount %s on %s: %s", type, target, strerror(errno));
  }
}

// The kernel gives init /dev/console from the initramfs, before /dev is mounted.
// Reopen it from devtmpfs: ttyname() then finds it under /dev (busybox's `tty`,
// job control), and a console missing from the archive is no longer fatal.
void reopen_console() {
  int fd = open("/dev/console", O_RDWR | O_NOCTTY);
  if (fd < 0) {
    say("warning: open /dev/console: %s", strerror(errno));
    return;
  }
  for (int target = 0; target <= 2; ++target) {
    if (fd != target) {
      dup2(fd, target);
    }
  }
  if (fd > 2) {
    close(fd);
  }
}

void signal_boot_timer(unsigned char value) {
  if (ioperm(DSEC_BOOT_TIMER_PORT, 1, 1) != 0) {
    say("warning: ioperm(0x%x): %s; boot timer not signalled", DSEC_BOOT_TIMER_PORT,
        strerror(errno));
    return;
  }
  outb(value, DSEC_BOOT_TIMER_PORT);
  ioperm(DSEC_BOOT_TIMER_PORT, 1, 0);
}

std::string read_file(const char* path) {
  std::string text;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return text;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return text;
}

unsigned long mem_total_kib() {
  std::string meminfo = read_file("/proc/meminfo");
  constexpr std::string_view kKey = "MemTotal:";
  size_t at = meminfo.find(kKey);
  if (at == std::string::npos) {
    return 0;
  }
  return strtoul(meminfo.c_str() + at + kKey.size(), nullptr, 10);
}

// Splits the command line the way the kernel does (next_arg in lib/cmdline.c):
// on spaces outside double quotes, with the quotes removed. Stops at "--", after
// which the arguments belong to init's argv rather than to anyone's options.
std::vector<std::string> split_cmdline(std::string_view cmdline) {
  std::vector<std::string> args;
  std::string arg;
  bool quoted = false;
  bool in_arg = false;
  for (char c : cmdline) {
    if (c == '"') {
      quoted = !quoted;
      in_arg = true;
    } else if (!quoted && (c == ' ' || c == '\t' || c == '\n')) {
      if (in_arg) {
        if (arg == "--") {
          return args;
        }
        args.push_back(std::move(arg));
        arg.clear();
      }
      in_arg = false;
    } else {
      arg += c;
      in_arg = true;
    }
  }
  if (in_arg && arg != "--") {
    args.push_back(std::move(arg));
  }
  return args;
}

struct Request {
  std::optional<std::string> run;  // dsec.run=<command>
  bool shell = false;              // dsec.shell
  bool agent = false;              // dsec.agent
};

Request parse_request(std::string_view cmdline) {
  Request request;
  constexpr std::string_view kRun = "dsec.run=";
  for (const std::string& arg : split_cmdline(cmdline)) {
    if (arg.starts_with(kRun)) {
      request.run = arg.substr(kRun.size());
    } else if (arg == "dsec.shell") {
      request.shell = true;
    } else if (arg == "dsec.agent") {
      request.agent = true;
    }
  }
  return request;
}

// Runs /bin/sh with `args` in its own session and waits for it, reaping every
// orphan that is re-parented to us meanwhile. Returns a shell-style exit status.
int run_shell(const std::vector<const char*>& args, bool interactive) {
  std::vector<const char*> argv{"/bin/sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(nullptr);
  static const char* const kEnv[] = {"HOME=/", "TERM=linux", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                     nullptr};

  pid_t child = fork();
  if (child < 0) {
    say("error: fork: %s", strerror(errno));
    return 127;
  }
  if (child == 0) {
    setsid();
    // The console becomes the shell's controlling terminal, for job control and ^C.
    if (interactive && ioctl(STDIN_FILENO, TIOCSCTTY, 1) != 0) {
      say("warning: TIOCSCTTY on the console: %s", strerror(errno));
    }
    execve(argv[0], const_cast<char* const*>(argv.data()), const_cast<char* const*>(kEnv));
    say("error: exec %s: %s", argv[0], strerror(errno));
    _exit(127);
  }
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        continue;
      }
      say("error: waitpid: %s", strerror(errno));
      return 127;
    }
    if (pid != child) {
      continue;
    }
    if (WIFEXITED(status)) {
      return WEXITSTATUS(status);
    }
    return 128 + WTERMSIG(status);
  }
}

// SIGINT: ctrl-alt-del, which the kernel hands to init after RB_DISABLE_CAD. The clean
// shutdown of shut_down() with async-signal-safe calls only: nothing is reaped, the
// message is written whole by write().
extern "C" void on_ctrl_alt_del(int signo) {
  if (getpid() != 1) {
    // A child forked without exec (an agent session) inherited the handler: SIGINT is
    // just SIGINT there.
    (void)signal(signo, SIG_DFL);
    (void)raise(signo);
    return;
  }
  static constexpr char kLine[] = "dsec-init: ctrl-alt-del: rebooting\n";
  (void)!write(STDOUT_FILENO, kLine, sizeof kLine - 1);
  kill(-1, SIGKILL);
  sync();
  if (ioperm(DSEC_BOOT_TIMER_PORT, 1, 1) == 0) {
    outb(DSEC_BOOT_TIMER_SHUTDOWN_VALUE, DSEC_BOOT_TIMER_PORT);  // a clean exit, not a crash
  }
  reboot(RB_AUTOBOOT);
}

// Ctrl-alt-del goes to init as SIGINT, rather than rebooting the kernel on the spot (no
// sync, no announcement: the VMM would count it a crash).
void take_ctrl_alt_del() {
  struct sigaction action {};
  action.sa_handler = on_ctrl_alt_del;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGINT, &action, nullptr) != 0 || reboot(RB_DISABLE_CAD) != 0) {
    say("warning: ctrl-alt-del stays the kernel's: %s", strerror(errno));
  }
}

// How the guest ends: kClean announces a clean shutdown to the VMM (exit status 0);
// kFailed does not, so that the VMM reports a guest that could not do what it was booted
// for (exit status 2, the console saying why) rather than a success.
enum class Ending { kClean, kFailed };

[[noreturn]] void shut_down(Ending ending = Ending::kClean) {
  kill(-1, SIGKILL);  // Everything but PID 1.
  while (waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
  }
  sync();
  say(ending == Ending::kClean ? "rebooting" : "rebooting after the error above");
  if (ending == Ending::kClean) {
    signal_boot_timer(DSEC_BOOT_TIMER_SHUTDOWN_VALUE);  // a clean exit, not a crash
  }
  reboot(RB_AUTOBOOT);
  // Still here: the kernel refused. Exiting would panic the kernel, which with
  // panic=-1 also ends the VM, but say why first.
  say("error: reboot: %s", strerror(errno));
  for (;;) {
    pause();
  }
}

}  // namespace

int main() {
  mount_fs("devtmpfs", "/dev", MS_NOSUID, "mode=0755");
  reopen_console();
  mount_fs("devpts", "/dev/pts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666");
  mount_fs("tmpfs", "/dev/shm", MS_NOSUID | MS_NODEV, "mode=1777");
  mount_fs("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount_fs("sysfs", "/sys", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount_fs("tmpfs", "/tmp", MS_NOSUID | MS_NODEV, "mode=1777");

  signal_boot_timer(DSEC_BOOT_TIMER_VALUE);
  take_ctrl_alt_del();

  std::string cmdline = read_file("/proc/cmdline");
  while (!cmdline.empty() && (cmdline.back() == '\n' || cmdline.back() == ' ')) {
    cmdline.pop_back();
  }
  Request request = parse_request(cmdline);
  if (const auto root = dsec::init::parse_image_root(split_cmdline(cmdline));
      !root.device.empty()) {
    if (auto switched = dsec::init::switch_to_image_root(root); !switched) {
      say("error: cannot boot the image on %s: %s", root.device.c_str(),
          switched.error().message().c_str());
      shut_down(Ending::kFailed);
    }
    say("root is %s (%s, read-only) under an overlay on %s", root.device.c_str(),
        root.fstype.c_str(), root.upper_device.empty() ? "tmpfs" : root.upper_device.c_str());
  }
  // The agent listens before the banner: each byte on the serial console is a VM exit, and
  // the host's connections queue on the socket from the moment it listens.
  std::optional<dsec::Result<dsec::UniqueFd>> listener;
  if (request.agent && !request.run && !request.shell) {
    listener = dsec::agent::listen_vsock(dsec::agent::kAgentPort);
  }
  say("cpus=%ld memtotal_kib=%lu cmdline=%s", sysconf(_SC_NPROCESSORS_ONLN), mem_total_kib(),
      cmdline.c_str());

  if (request.run) {
    say("exit status=%d", run_shell({"-c", request.run->c_str()}, false));
  } else if (request.shell) {
    say("exit status=%d", run_shell({}, true));
  } else if (listener && !*listener) {
    say("error: the agent cannot listen: %s", listener->error().message().c_str());
    shut_down(Ending::kFailed);
  } else if (listener) {
    say("agent listening on vsock port %u", dsec::agent::kAgentPort);
    const std::string why = dsec::agent::serve(std::move(**listener));
    say("error: the agent stopped: %s", why.c_str());
  }
  shut_down();
}
