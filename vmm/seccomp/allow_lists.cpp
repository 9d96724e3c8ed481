// The allow lists of the VMM's thread roles: the one place they are written down, to be
// reviewed as data. Groups of rules that several roles share come first, then each role's
// list. docs/seccomp.md says what each role does and why it needs what it has.
//
// Rules are libseccomp's names for x86-64 system calls; ioctl rules name the request.
// Nothing here may make executable memory, start a process, or open a network socket:
// mmap and mprotect never with PROT_EXEC, no fork, clone or execve, socket only AF_UNIX.
#include "vmm/seccomp/allow_lists.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

// The kernel's ioctl numbers (this header corrects <linux/kvm.h>'s for C++).
#include "vmm/kvm/linux_kvm.h"
#include "vmm/seccomp/rule_forms.h"

namespace dsec::seccomp {
namespace {

using rules::allow;
using rules::allow_if;
using rules::equals;

// The kernel reads an ioctl's request as 32 bits: only those are compared.
SyscallRule ioctl(uint64_t request) {
  return {"ioctl", {{1, 0xffff'ffff, request}}};
}

uint64_t own_pid() {
  return static_cast<uint64_t>(::getpid());
}

void append(std::vector<SyscallRule>& to, const std::vector<SyscallRule>& group) {
  to.insert(to.end(), group.begin(), group.end());
}

// What every thread does: allocate and free memory (glibc's malloc, and its thread stacks
// as a thread ends), take locks, read clocks, log to stderr, and end.
std::vector<SyscallRule> every_thread() {
  // malloc and free; never executable memory
  return rules::joined(
      rules::memory(),
      {
          // std::mutex, std::condition_variable, joins
          allow("futex"),
          // clocks the vDSO cannot answer
          allow("clock_gettime"),
          allow("gettimeofday"),
          // the log (spdlog, on stderr), and the report of a violation
          allow("write"),
          // signal handlers return (the vCPU kick), an interrupted call restarts, and
          // pthread_kill blocks signals around its tgkill
          allow("rt_sigreturn"),
          allow("restart_syscall"),
          allow("rt_sigprocmask"),
          // abort() stays an abort: SIGABRT, to this process only
          allow("getpid"),
          allow("gettid"),
          allow_if("tgkill", {equals(0, own_pid()), equals(2, SIGABRT)}),
          // the thread's end, or the VMM's
          allow("exit"),
          allow("exit_group"),
      });
}

// The vCPU kick (VcpuThread::kick: SIGRTMIN to a vCPU thread of this process), sent by
// whoever ends, pauses or samples the VM.
std::vector<SyscallRule> kick_vcpus() {
  return {
      allow_if("tgkill", {equals(0, own_pid()), equals(2, static_cast<uint64_t>(SIGRTMIN))}),
  };
}

// Serving an io_uring event loop (io/event_loop.h) whose fds are open already: its ring,
// its eventfds, its watches' fds.
std::vector<SyscallRule> event_loop() {
  return {
      allow("io_uring_enter"),
      allow("read"),
      allow("close"),
  };
}

// A vCPU's registers, local APIC and TSC deadline (KVM_GET_MSRS), and the IOAPIC, read for
// a look at where the interrupts stand (SIGUSR1) or at a crash (a triple fault's registers).
std::vector<SyscallRule> interrupt_state_reads() {
  return {
      ioctl(KVM_GET_REGS),        ioctl(KVM_GET_SREGS), ioctl(KVM_GET_MP_STATE),
      ioctl(KVM_GET_VCPU_EVENTS), ioctl(KVM_GET_LAPIC), ioctl(KVM_GET_IRQCHIP),
      ioctl(KVM_GET_MSRS),
  };
}

// Pausing the vCPUs (Machine::pause): the kick, then each vCPU's kvmclock told.
std::vector<SyscallRule> pause_vcpus() {
  std::vector<SyscallRule> rules = kick_vcpus();
  rules.push_back(ioctl(KVM_KVMCLOCK_CTRL));
  return rules;
}

// Writing a snapshot of a paused VM (Machine::snapshot): the devices brought to rest on
// their loop, every vCPU's and the VM's state read from KVM, the memory file and the state
// file written through a temporary file each, fsynced and renamed.
std::vector<SyscallRule> snapshot_writes() {
  return {
      // the VM's and each vCPU's whole state (kvm/vm_state.h, kvm/vcpu_state.h)
      ioctl(KVM_CHECK_EXTENSION),
      ioctl(KVM_GET_MSR_INDEX_LIST),
      ioctl(KVM_GET_PIT2),
      ioctl(KVM_GET_CLOCK),
      ioctl(KVM_GET_IRQCHIP),
      ioctl(KVM_GET_REGS),
      ioctl(KVM_GET_SREGS),
      ioctl(KVM_GET_FPU),
      ioctl(KVM_GET_XSAVE),
      ioctl(KVM_GET_XSAVE2),
      ioctl(KVM_GET_XCRS),
      ioctl(KVM_GET_MSRS),
      ioctl(KVM_GET_LAPIC),
      ioctl(KVM_GET_VCPU_EVENTS),
      ioctl(KVM_GET_MP_STATE),
      ioctl(KVM_GET_DEBUGREGS),
      ioctl(KVM_GET_TSC_KHZ),
      ioctl(KVM_GET_CPUID2),
      // the files: a temporary name (mkostemp), written, fsynced, renamed; its directory
      // fsynced; the size of what was written
      allow("getrandom"),
      allow("openat"),
      allow("ftruncate"),
      allow("pwrite64"),
      allow("fsync"),
      allow("rename"),
      allow("unlink"),
      allow("newfstatat"),
      allow("close"),
      // waiting for the devices to come to rest
      allow("clock_nanosleep"),
      allow("nanosleep"),
  };
}

// A host-side client of the guest agent (agent/client.h) over the vsock device's Unix
// socket: a clone's entropy and clock (restore, serve), warm's set-up commands.
std::vector<SyscallRule> agent_client() {
  return {
      allow_if("socket", {equals(0, AF_UNIX)}),
      allow("connect"),
      // a receive timeout on each connection, and a wait for the agent's answer bounded by
      // --answer-timeout
      allow("setsockopt"),
      allow("poll"),
      allow("read"),
      allow("recvfrom"),
      allow("sendto"),
      allow("close"),
      // the clone's fresh entropy, and the waits between tries of a connection
      allow("getrandom"),
      allow("clock_nanosleep"),
      allow("nanosleep"),
  };
}

std::vector<SyscallRule> vcpu() {
  std::vector<SyscallRule> rules = every_thread();
  // A guest reset or a KVM error ends the VM: the other vCPUs are kicked.
  append(rules, kick_vcpus());
  append(rules, {
                    ioctl(KVM_RUN),
                    // the UART's interrupt line (its output goes to the console's buffer; an
                    // eventfd write wakes the console thread), and the i8042 keyboard's as
                    // the guest reads its bytes
                    ioctl(KVM_IRQ_LINE),
                    // a sample of --profile-guest; a triple fault's registers
                    ioctl(KVM_GET_REGS),
                    ioctl(KVM_GET_SREGS),
                });
  return rules;
}

std::vector<SyscallRule> io() {
  std::vector<SyscallRule> rules = every_thread();
  append(rules, event_loop());
  // A dead loop ends the VM: the vCPUs are kicked.
  append(rules, kick_vcpus());
  append(rules, {
                    // virtio-net: frames from and to the TAP, and the offloads the guest
                    // took, set on the TAP after each activation
                    allow("readv"),
                    allow("writev"),
                    ioctl(TUNSETOFFLOAD),
                    // virtio-vsock: host processes connect to its Unix socket, and the
                    // guest connects to host ports (Unix sockets beside it)
                    allow("accept4"),
                    // which process a host connection comes from (a restored clone's
                    // socket admits only its own until the clone sync is done)
                    allow_if("getsockopt", {equals(1, SOL_SOCKET), equals(2, SO_PEERCRED)}),
                    allow_if("socket", {equals(0, AF_UNIX)}),
                    allow("connect"),
                    allow("recvfrom"),
                    allow("sendto"),
                    allow("sendmsg"),
                    allow("shutdown"),
                    // a host socket that hung up before its CONNECT line
                    allow("poll"),
                    // virtio-rng; MMDS session tokens
                    allow("getrandom"),
                });
  return rules;
}

std::vector<SyscallRule> console() {
  std::vector<SyscallRule> rules = every_thread();
  append(rules, {
                    // the output fd, the input fd and the wake eventfd (write: the output
                    // fd in pieces, every role has it)
                    allow("poll"),
                    allow("read"),
                    // the UART's interrupt line, raised when input arrives
                    ioctl(KVM_IRQ_LINE),
                });
  return rules;
}

std::vector<SyscallRule> signals() {
  std::vector<SyscallRule> rules = every_thread();
  append(rules, {allow("poll"), allow("read")});
  // SIGTERM stops the VM; SIGUSR1 parks the vCPUs for a moment to read their state;
  // SIGUSR2 sends them the wake-up IPIs.
  append(rules, kick_vcpus());
  append(rules, interrupt_state_reads());
  append(rules, {ioctl(KVM_SIGNAL_MSI)});
  return rules;
}

std::vector<SyscallRule> api() {
  std::vector<SyscallRule> rules = every_thread();
  append(rules, event_loop());
  append(rules, {allow("accept4"), allow("recvfrom"), allow("sendto"),
                 // who connected: the server reads each client's credentials at accept
                 allow_if("getsockopt", {equals(1, SOL_SOCKET), equals(2, SO_PEERCRED)})});
  // PATCH /vm, PUT /snapshot/create
  append(rules, pause_vcpus());
  append(rules, snapshot_writes());
  // PUT /snapshot/load's clone takes its entropy and clock from the API thread
  append(rules, agent_client());
  // PUT /actions SendCtrlAltDel: the i8042 keyboard's interrupt line
  append(rules, {ioctl(KVM_IRQ_LINE)});
  // PUT /logger: the log file is opened for appending (openat above), which seeks to its end
  append(rules, {allow("lseek")});
  // PATCH /drives/{id} with path_on_host: the new file opened (openat, newfstatat above) and
  // checked as a disk (VirtioBlock::replace_disk): a block device's size, then its
  // O_NONBLOCK cleared
  append(rules, {ioctl(BLKGETSIZE64), allow_if("fcntl", {equals(1, F_GETFL)}),
                 allow_if("fcntl", {equals(1, F_SETFL)})});
  return rules;
}

std::vector<SyscallRule> main_thread() {
  std::vector<SyscallRule> rules = every_thread();
  // restore's and serve's clone sync, warm's set-up commands, then warm's snapshot
  append(rules, agent_client());
  append(rules, pause_vcpus());
  append(rules, snapshot_writes());
  append(rules, {
                    // warm --out is created
                    allow("mkdir"),
                    // the VM's end: --metrics-file (and /proc/self/smaps for the VMM's
                    // memory), --profile-guest's samples, then everything closed and
                    // unmapped: the event loops drained, ioeventfds and irqfds taken back
                    // from KVM, the vsock and API sockets' files removed
                    allow("io_uring_enter"),
                    ioctl(KVM_IOEVENTFD),
                    ioctl(KVM_IRQFD),
                });
  return rules;
}

std::vector<SyscallRule> profiler() {
  std::vector<SyscallRule> rules = every_thread();
  append(rules, kick_vcpus());
  return rules;
}

}  // namespace

std::vector<SyscallRule> sanitizer_runtime_allow_list() {
#if defined(__SANITIZE_ADDRESS__)
  return {
      // LeakSanitizer at exit: the tracer thread (clone with CLONE_VM), made the process's
      // ptracer (prctl), which attaches to each thread listed in /proc/self/task, reads its
      // registers and waits on it; the exiting thread waits for the tracer
      allow("clone"),
      allow("prctl"),
      allow("ptrace"),
      allow("wait4"),
      allow("sched_yield"),
      allow("sigaltstack"),
      allow("rt_sigaction"),
      allow("getppid"),
      // /proc/self/task and /proc/self/maps; GCC 12's runtime opens with open(2) and lists
      // and rewinds the directory with getdents(2) and lseek(2) on x86-64 (a tracer killed
      // for them left the exiting VMM spinning, waiting for it, never exiting)
      allow("openat"),
      allow("open"),
      allow("getdents64"),
      allow("getdents"),
      allow("lseek"),
      allow("read"),
      allow("close"),
      allow("newfstatat"),
      allow("readlink"),
      // the runtime's test that memory is readable before it reads it (unwinding a
      // stack): it writes the range into a pipe of its own
      allow("pipe2"),
      allow("write"),
  };
#else
  return {};
#endif
}

std::vector<SyscallRule> allow_list(Role role) {
  switch (role) {
    case Role::kMain:
      return main_thread();
    case Role::kVcpu:
      return vcpu();
    case Role::kEventLoop:
      return io();
    case Role::kConsoleInput:
      return console();
    case Role::kSignals:
      return signals();
    case Role::kApi:
      return api();
    case Role::kProfiler:
      return profiler();
    case Role::kPoolDaemon:
      return pool_daemon_allow_list();
  }
  return {};
}

}  // namespace dsec::seccomp
