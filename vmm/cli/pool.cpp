// `dsec-vmm pool`: executes the pool daemon, the dsec-vmm-pool program beside this one
// (vmm/pool_daemon), with every argument after `pool`, --help included. The daemon is a
// program of its own so that what only it needs (OpenSSL, for TLS) never weighs on the
// VMM, which every sandbox maps.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/common/sibling_binary.h"
#include "vmm/pool_daemon/pool_command.h"

namespace dsec::cli {
namespace {

int failed(const Error& e) {
  (void)std::fprintf(stderr, "dsec-vmm pool: %s\n", e.message().c_str());
  return 1;
}

int exec_pool_daemon(const std::vector<std::string>& args) {
  auto daemon = sibling_binary("dsec-vmm-pool");
  if (!daemon) {
    return failed(daemon.error().with_context("the daemon's program"));
  }
  std::vector<char*> argv{daemon->data()};
  std::vector<std::string> copies = args;
  for (std::string& arg : copies) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  ::execv(daemon->c_str(), argv.data());
  return failed(Error::from_errno("exec " + *daemon, errno));
}

}  // namespace

void add_pool_command(CLI::App& app, CommandAction& action) {
  CLI::App* pool = app.add_subcommand(
      "pool", std::string(kPoolSummary) + ". `dsec-vmm pool --help` lists its options");
  pool->prefix_command();  // every argument after `pool` is the daemon's
  pool->set_help_flag();   // --help too: the daemon answers it
  pool->callback([&action, pool] {
    action = [args = pool->remaining()] { return exec_pool_daemon(args); };
  });
}

}  // namespace dsec::cli
