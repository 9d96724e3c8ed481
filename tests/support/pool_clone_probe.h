// For a pool test that failed: the wake-up probe (wakeup_probe.h) for each clone of a pool
// daemon whose agent does not answer a health check within 5 s. Its clones' VMMs are the
// `dsec-vmm restore` processes whose --vsock lies in the daemon's state directory (a
// jailed clone's may not: it is left out).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/wakeup_probe.h"
#include "vmm/agent/client.h"
#include "vmm/agent/protocol.h"

namespace dsec::test {

// The --vsock of the `dsec-vmm restore` whose command line is in `cmdline`, where it lies
// in `state_dir`; else empty.
inline std::string pool_clone_vsock(const std::filesystem::path& cmdline,
                                    const std::string& state_dir) {
  std::ifstream in(cmdline, std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) {
    args.push_back(arg);
  }
  if (args.size() < 2 || !args[0].ends_with("/dsec-vmm") || args[1] != "restore") return {};
  for (size_t i = 2; i + 1 < args.size(); ++i) {
    if (args[i] == "--vsock" && args[i + 1].starts_with(state_dir + "/")) return args[i + 1];
  }
  return {};
}

// The probe's lines, one a clone that did not answer.
inline std::string probe_pool_clones(const std::filesystem::path& state_dir) {
  std::string lines;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string vsock = pool_clone_vsock(entry.path() / "cmdline", state_dir.string());
    if (vsock.empty()) continue;
    const auto answers = [&vsock] {
      agent::AgentClient client(
          [&vsock] {
            return agent::connect_vsock_uds(vsock, agent::kAgentPort, std::chrono::seconds(5));
          },
          std::chrono::seconds(5));
      return client.health().has_value();
    };
    if (answers()) continue;
    // The clone's log is the launcher's to name: a second for the signal to be taken.
    const auto after_a_second = [] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      return true;
    };
    lines += "clone " + vsock + ":\n" + probe_lost_wakeup(std::stoi(name), after_a_second, answers);
  }
  return lines;
}

}  // namespace dsec::test
