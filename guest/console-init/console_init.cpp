// console-init: /sbin/init of the ext4 Debian root file system (images/build-rootfs-ext4),
// the kind of image Firecracker's getting-started guide boots: the kernel mounts the root
// drive (root=/dev/vda) and runs this, with no initramfs and nothing of ours on the
// command line.
//
// 1. Mounts /proc, /sys, /dev (devtmpfs; the kernel may have mounted it already),
//    /dev/pts, /dev/shm, /run and /tmp.
// 2. Sets the host name from /etc/hostname, and tells the VMM that userspace is up (the
//    boot timer, guest/init/boot_timer.h).
// 3. Starts a login shell (bash) as root on the console (/dev/console's device, ttyS0 with
//    console=ttyS0), its controlling terminal, so the console shows a prompt such as
//    `root@sandbox:~# `. When that shell exits, it starts another (and reboots if bash
//    cannot run at all).
// 4. Reboots cleanly (kills what is left, syncs) on ctrl-alt-del, which the kernel hands
//    it as SIGINT once RB_DISABLE_CAD is set (the VMM's SendCtrlAltDel), and on SIGTERM
//    (`reboot`, which is this program under that name: it sends SIGTERM to PID 1 if PID 1
//    is console-init).
//    Without ACPI a reboot is the guest's way out (reboot=k: through the i8042); the VMM
//    takes it as the VM's end.
#include <fcntl.h>
#include <signal.h>
#include <sys/io.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "guest/init/boot_timer.h"

namespace {

void say(const std::string& line) {
  const std::string text = "console-init: " + line + "\n";
  (void)!write(STDERR_FILENO, text.data(), text.size());
}

std::string read_first_line(const char* path) {
  std::string text;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return text;
  }
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n > 0) {
    text.assign(buf, static_cast<size_t>(n));
  }
  return text.substr(0, text.find('\n'));
}

void mount_fs(const char* type, const char* target, unsigned long flags, const char* data) {
  if (mkdir(target, 0755) != 0 && errno != EEXIST) {
    say(std::string("warning: mkdir ") + target + ": " + strerror(errno));
  }
  if (mount(type, target, type, flags, data) != 0 && errno != EBUSY) {
    say(std::string("warning: mount ") + type + " on " + target + ": " + strerror(errno));
  }
}

// The console's device: the last name in /sys/class/tty/console/active is /dev/console's.
// /dev/console itself cannot be a controlling terminal with job control.
std::string console_device() {
  const std::string active = read_first_line("/sys/class/tty/console/active");
  const size_t last = active.find_last_of(' ');
  const std::string name = last == std::string::npos ? active : active.substr(last + 1);
  return name.empty() ? "/dev/console" : "/dev/" + name;
}

// A login shell as root on `tty`, in a session of its own with `tty` as its controlling
// terminal. Returns its pid, or -1.
pid_t start_login_shell(const std::string& tty) {
  const pid_t child = fork();
  if (child != 0) {
    if (child < 0) {
      say(std::string("error: fork: ") + strerror(errno));
    }
    return child;
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setsid();
  const int fd = open(tty.c_str(), O_RDWR);
  if (fd < 0 || ioctl(fd, TIOCSCTTY, 1) != 0) {
    say("warning: " + tty + " is not the shell's terminal: " + strerror(errno));
  }
  for (int target = 0; fd >= 0 && target <= 2; ++target) {
    dup2(fd, target);
  }
  if (fd > 2) {
    close(fd);
  }
  (void)!chdir("/root");
  static const char* const kEnv[] = {
      "HOME=/root",
      "TERM=linux",
      "SHELL=/bin/bash",
      "USER=root",
      "LOGNAME=root",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      nullptr};
  // argv[0] "-bash": a login shell, which reads /etc/profile (Debian's prompt).
  execle("/bin/bash", "-bash", nullptr, kEnv);
  say(std::string("error: exec /bin/bash: ") + strerror(errno));
  _exit(127);
}

// The boot timer's port (guest/init/boot_timer.h): `value` tells the VMM that userspace is
// up, or that the reboot that follows is the guest's clean exit.
void signal_boot_timer(unsigned char value) {
  if (ioperm(DSEC_BOOT_TIMER_PORT, 1, 1) != 0) {
    say("warning: ioperm: " + std::string(strerror(errno)) + "; boot timer not signalled");
    return;
  }
  outb(value, DSEC_BOOT_TIMER_PORT);
  ioperm(DSEC_BOOT_TIMER_PORT, 1, 0);
}

[[noreturn]] void reboot_cleanly(const char* why) {
  say(std::string(why) + ": rebooting");
  // The line waits in the tty's buffer, and the kernel's own reboot messages go to the
  // console straight away: without the wait they cut into it, or it is never sent.
  (void)tcdrain(STDERR_FILENO);
  kill(-1, SIGKILL);  // everything but PID 1
  while (waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
  }
  sync();
  signal_boot_timer(DSEC_BOOT_TIMER_SHUTDOWN_VALUE);
  reboot(RB_AUTOBOOT);
  // Still here: the kernel refused. Exiting would panic the kernel (which with panic=1
  // also ends the VM), but say why first.
  say(std::string("error: reboot: ") + strerror(errno));
  for (;;) {
    pause();
  }
}

extern "C" void ignore_signal(int /*signo*/) {}

// `reboot` (this program under that name): asks PID 1 to reboot, if PID 1 is console-init
// (the same file as this program): any other init may take SIGTERM otherwise.
int ask_init_to_reboot() {
  struct stat init {};
  struct stat self {};
  if (stat("/proc/1/exe", &init) != 0 || stat("/proc/self/exe", &self) != 0 ||
      init.st_dev != self.st_dev || init.st_ino != self.st_ino) {
    (void)std::fprintf(stderr, "reboot: PID 1 is not console-init; not signalling it\n");
    return 1;
  }
  if (kill(1, SIGTERM) != 0) {
    (void)std::fprintf(stderr, "reboot: cannot signal init: %s\n", strerror(errno));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int /*argc*/, char** argv) {
  const std::string_view name = argv[0] == nullptr ? "" : argv[0];
  if (getpid() != 1) {
    if (name.ends_with("reboot")) {
      return ask_init_to_reboot();
    }
    (void)std::fprintf(stderr, "console-init: runs as PID 1 (or as `reboot`)\n");
    return 1;
  }
  mount_fs("devtmpfs", "/dev", MS_NOSUID, "mode=0755");
  mount_fs("devpts", "/dev/pts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666");
  mount_fs("tmpfs", "/dev/shm", MS_NOSUID | MS_NODEV, "mode=1777");
  mount_fs("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount_fs("sysfs", "/sys", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount_fs("tmpfs", "/run", MS_NOSUID | MS_NODEV, "mode=0755");
  mount_fs("tmpfs", "/tmp", MS_NOSUID | MS_NODEV, "mode=1777");
  const std::string hostname = read_first_line("/etc/hostname");
  if (!hostname.empty() && sethostname(hostname.data(), hostname.size()) != 0) {
    say("warning: sethostname: " + std::string(strerror(errno)));
  }

  // The signals are taken one at a time by sigwaitinfo below. PID 1 gets no signal it has
  // no handler for, hence the handler, which never runs while they are blocked.
  struct sigaction action {};
  action.sa_handler = ignore_signal;
  sigemptyset(&action.sa_mask);
  sigset_t taken;
  sigemptyset(&taken);
  for (const int signo : {SIGINT, SIGTERM, SIGCHLD}) {
    sigaction(signo, &action, nullptr);
    sigaddset(&taken, signo);
  }
  sigprocmask(SIG_BLOCK, &taken, nullptr);
  if (reboot(RB_DISABLE_CAD) != 0) {
    say("warning: ctrl-alt-del stays the kernel's: " + std::string(strerror(errno)));
  }

  signal_boot_timer(DSEC_BOOT_TIMER_VALUE);
  const std::string tty = console_device();
  pid_t shell = start_login_shell(tty);
  for (;;) {
    siginfo_t info{};
    if (sigwaitinfo(&taken, &info) < 0) {
      continue;  // EINTR
    }
    if (info.si_signo == SIGINT) {
      reboot_cleanly("ctrl-alt-del");
    }
    if (info.si_signo == SIGTERM) {
      reboot_cleanly("reboot requested");
    }
    // SIGCHLD: reap the shell and orphans; a shell that exited gets a successor.
    int status = 0;
    pid_t pid = 0;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid != shell) {
        continue;
      }
      if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        reboot_cleanly("the login shell could not start");  // rather than respawn it forever
      }
      shell = start_login_shell(tty);
    }
  }
}
