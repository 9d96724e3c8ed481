#include "vmm/seccomp/violation_report.h"

#include <linux/audit.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>

namespace dsec::seccomp {
namespace {

// System call numbers whose names the report knows: every x86-64 call so far.
constexpr int kNamedSyscalls = 512;
constexpr size_t kNameSize = 32;
using SyscallNames = std::array<std::array<char, kNameSize>, kNamedSyscalls>;

// Resolved once, before the first filter loads, and never changed after.
const SyscallNames& syscall_names() {
  static const SyscallNames names = [] {
    SyscallNames table{};
    for (int n = 0; n < kNamedSyscalls; ++n) {
      char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, n);
      if (name != nullptr) {
        std::strncpy(table[n].data(), name, kNameSize - 1);
        std::free(name);  // NOLINT(cppcoreguidelines-no-malloc): libseccomp's malloc
      }
    }
    return table;
  }();
  return names;
}

// A fixed-size line, appended to without allocating: safe in a signal handler.
class Line {
 public:
  void add(std::string_view text) {
    const size_t n = std::min(text.size(), bytes_.size() - size_);
    std::memcpy(bytes_.data() + size_, text.data(), n);
    size_ += n;
  }
  void add_decimal(long value) {
    std::array<char, 24> digits{};
    size_t i = digits.size();
    const bool negative = value < 0;
    unsigned long v =
        negative ? 0UL - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
    do {
      digits[--i] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0 && i > 1);
    if (negative) {
      digits[--i] = '-';
    }
    add({digits.data() + i, digits.size() - i});
  }
  void add_hex(unsigned long value) {
    std::array<char, 16> digits{};
    size_t i = digits.size();
    do {
      digits[--i] = "0123456789abcdef"[value % 16];
      value /= 16;
    } while (value != 0);
    add("0x");
    add({digits.data() + i, digits.size() - i});
  }
  std::string_view text() const { return {bytes_.data(), size_}; }

 private:
  std::array<char, 256> bytes_{};
  size_t size_ = 0;
};

// The calling thread's report up to the system call: prepared before its filter loads.
struct ThreadReport {
  Line prefix;
  const SyscallNames* names = nullptr;
};
thread_local ThreadReport t_report;  // NOLINT: per thread, read by its SIGSYS handler
// A process whose one filter went into every thread at once (the pool daemon): the report
// of a thread that prepared none of its own.
ThreadReport g_process_report;  // NOLINT: written once, before the filter loads

Line prefix_for(std::string_view thread_name, std::string_view role) {
  Line line;
  line.add("dsec-vmm: seccomp: thread \"");
  line.add(thread_name);
  line.add("\" (role ");
  line.add(role);
  line.add(") made forbidden syscall ");
  return line;
}

void finish(Line& line, int syscall, bool native, const SyscallNames* names,
            std::span<const unsigned long> arguments) {
  line.add_decimal(syscall);
  line.add(" (");
  if (!native) {
    line.add("of a foreign architecture");
  } else if (names != nullptr && syscall >= 0 && syscall < kNamedSyscalls &&
             (*names)[syscall][0] != '\0') {
    line.add((*names)[syscall].data());
  } else {
    line.add("unknown");
  }
  line.add(")");
  // The first three: enough for an ioctl's request, a socket's domain, mmap's protection.
  const char* separator = " with arguments ";
  for (const unsigned long argument : arguments) {
    line.add(separator);
    line.add_hex(argument);
    separator = ", ";
  }
  line.add("; killing the process\n");
}

void on_sigsys(int /*signo*/, siginfo_t* info, void* context) {
  // A thread without a report has no filter either (unless the process's filter is in
  // every thread): the SIGSYS came from elsewhere.
  const ThreadReport& report = t_report.names != nullptr ? t_report : g_process_report;
  Line line = report.names != nullptr ? report.prefix : prefix_for("?", "none");
  const auto& registers = static_cast<const ucontext_t*>(context)->uc_mcontext.gregs;
  const std::array<unsigned long, 3> arguments = {static_cast<unsigned long>(registers[REG_RDI]),
                                                  static_cast<unsigned long>(registers[REG_RSI]),
                                                  static_cast<unsigned long>(registers[REG_RDX])};
  finish(line, info->si_syscall, info->si_arch == AUDIT_ARCH_X86_64, report.names, arguments);
  const auto text = line.text();
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
  ::_exit(kViolationExitStatus);
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigsys;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &action, nullptr);
  });
}

}  // namespace

void prepare_violation_report(Role role) {
  std::array<char, 17> name{};  // the kernel's 16 bytes and a terminator
  if (::prctl(PR_GET_NAME, name.data()) != 0) {
    name = {'?'};
  }
  t_report.prefix = prefix_for(name.data(), role_name(role));
  t_report.names = &syscall_names();
  install_handler();
}

void prepare_process_violation_report(Role role) {
  g_process_report.prefix = prefix_for("*", role_name(role));
  g_process_report.names = &syscall_names();
  install_handler();
}

std::string violation_line(std::string_view thread_name, Role role, int syscall,
                           std::span<const unsigned long> arguments) {
  Line line = prefix_for(thread_name, role_name(role));
  finish(line, syscall, true, &syscall_names(), arguments);
  return std::string(line.text());
}

}  // namespace dsec::seccomp
