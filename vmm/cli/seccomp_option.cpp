#include "vmm/cli/seccomp_option.h"

#include <map>
#include <string>

#include "vmm/cli/cli11.h"
#include "vmm/seccomp/violation_report.h"

namespace dsec::cli {

void add_seccomp_option(CLI::App& command, seccomp::Mode& mode, const std::string& filtered) {
  const std::map<std::string, seccomp::Mode> modes = {
      {"on", seccomp::Mode::kOn}, {"log", seccomp::Mode::kLog}, {"off", seccomp::Mode::kOff}};
  command
      .add_option("--seccomp", mode,
                  "Seccomp filters on " + filtered +
                      " (docs/seccomp.md): on (a system call its role's filter forbids ends the "
                      "process with exit status " +
                      std::to_string(seccomp::kViolationExitStatus) +
                      " and a line on stderr naming the thread and the call), log (forbidden "
                      "calls run, and the kernel logs each: its audit log, or dmesg), off (for "
                      "debugging)")
      ->transform(CLI::CheckedTransformer(modes))
      ->default_str("on");
}

}  // namespace dsec::cli
