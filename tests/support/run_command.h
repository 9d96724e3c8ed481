// Runs a shell command and captures its output, for tests of the dsec-vmm binary.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dsec::test {

struct CommandOutput {
  int exit_status = -1;  // -1 if it did not exit normally
  std::string output;
};

// `command` runs under /bin/sh; what it writes to stdout is captured (redirect 2>&1 inside
// the command to capture stderr too).
inline CommandOutput run_command(const std::string& command) {
  CommandOutput result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  if (status != -1 && WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  }
  return result;
}

}  // namespace dsec::test
