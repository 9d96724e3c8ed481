// dsec-vmm-pool: the pool daemon, a program of its own beside dsec-vmm, which `dsec-vmm
// pool` executes with the same arguments. It is the one program that links OpenSSL (TLS on
// its TCP port): dsec-vmm, mapped by every sandbox, stays without it.
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>

#include "vmm/cli/cli11.h"
#include "vmm/cli/log_output.h"
#include "vmm/pool_daemon/pool_command.h"

int main(int argc, char** argv) try {
  spdlog::set_default_logger(dsec::cli::make_vmm_logger());
  spdlog::cfg::load_env_levels();
  // A client gone before its answer is an error the write reports, never a signal.
  (void)std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"", "dsec-vmm pool"};
  std::function<int()> action;
  dsec::cli::configure_pool_command(&app, action);
  CLI11_PARSE(app, argc, argv);
  return action();
} catch (const std::exception& e) {
  (void)std::fprintf(stderr, "dsec-vmm pool: internal error: %s\n", e.what());
  return 1;
}
