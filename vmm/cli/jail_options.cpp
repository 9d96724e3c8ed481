#include "vmm/cli/jail_options.h"

#include <filesystem>

#include "vmm/cli/cli11.h"
#include "vmm/jail/supervisor.h"
#include "vmm/machine/machine.h"

namespace dsec::cli {

void add_jail_options(CLI::App& command, JailOptions& options) {
  constexpr const char* kGroup = "Jail (docs/jail.md)";
  CLI::Option* jail =
      command
          .add_option("--jail", options.dir,
                      "Run the VMM jailed in this directory (it must exist; its name also names "
                      "the cgroup): new pid, mount, IPC, UTS and network namespaces (with --netns, "
                      "that network namespace instead of a new one), a cgroup of "
                      "its own, and once the VM's files are open, pivot_root into the directory, "
                      "the --uid/--gid ids and no_new_privs. Sockets and files the VMM uses "
                      "after that (--vsock, --api-sock, --metrics-file) must be inside it. Needs "
                      "root and cgroup v2 at /sys/fs/cgroup. This process stays outside and "
                      "waits: exit status 5 when the cgroup's OOM killer killed the VMM, 6 for "
                      "another signal")
          ->group(kGroup);
  CLI::Option* uid =
      command.add_option("--uid", options.uid, "The unprivileged uid the jailed VMM runs as")
          ->group(kGroup)
          ->needs(jail);
  CLI::Option* gid =
      command.add_option("--gid", options.gid, "The unprivileged gid the jailed VMM runs as")
          ->group(kGroup)
          ->needs(jail);
  jail->needs(uid)->needs(gid);
  command
      .add_option("--cgroup", options.cgroup,
                  "Write VALUE to the jail's cgroup file FILE: FILE=VALUE, e.g. memory.max=256M, "
                  "cpu.max='50000 100000', pids.max=64 (repeatable; the controllers are enabled "
                  "on the way down)")
      ->group(kGroup)
      ->needs(jail)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command
      .add_option("--cgroup-parent", options.cgroup_parent,
                  "The cgroup (below /sys/fs/cgroup) that holds the jails' cgroups; made if "
                  "missing")
      ->group(kGroup)
      ->needs(jail)
      ->capture_default_str();
  command
      .add_flag("--jail-no-supervisor", options.no_supervisor,
                "No supervisor process stays outside the jail: for a VMM that its caller "
                "started as pid 1 of a new pid namespace with SIGINT, SIGTERM, SIGUSR1 and "
                "SIGUSR2 blocked, and that the caller reaps, signals directly, and whose "
                "cgroup it removes once the VMM ended (dsec-vmm pool's clones; it saves a "
                "process per jail)")
      ->group(kGroup)
      ->needs(jail);
  command
      .add_option("--rlimit-nofile", options.max_open_files,
                  "The jailed VMM's RLIMIT_NOFILE (its RLIMIT_CORE is 0)")
      ->group(kGroup)
      ->needs(jail)
      ->capture_default_str();
}

Result<Jail> jail_of(const JailOptions& options) {
  const auto paths = DSEC_TRY(jail::JailPaths::of(options.dir));
  jail::JailConfig config;
  config.dir = paths.dir();
  config.uid = options.uid;
  config.gid = options.gid;
  config.cgroup_parent = options.cgroup_parent;
  config.max_open_files = options.max_open_files;
  for (const auto& spec : options.cgroup) {
    config.cgroup_settings.push_back(DSEC_TRY(jail::parse_cgroup_setting(spec)));
  }
  DSEC_TRY(jail::validate(config));
  return Jail{.config = std::move(config), .paths = paths, .supervised = !options.no_supervisor};
}

int run_in_jail(const Jail& jail, const char* command,
                const std::function<int(jail::JailedProcess&)>& jailed) {
  return jail.supervised ? jail::run_jailed(jail.config, command, jailed)
                         : jail::run_jailed_as_pid1(jail.config, command, jailed);
}

Status jail_serve_paths(const jail::JailPaths& paths, std::string& console,
                        std::string& metrics_file, ApiOptions& api) {
  console = jail::JailPaths::outside(console);
  if (!metrics_file.empty()) {
    metrics_file = DSEC_TRY(paths.inside(metrics_file, "--metrics-file"));
  }
  if (!api.socket.empty()) {
    api.socket = DSEC_TRY(paths.inside(api.socket, "--api-sock"));
  }
  return ok();
}

std::function<Status(machine::Machine&)> lock_down_before_start(jail::JailedProcess& process) {
  return [&process](machine::Machine& vm) -> Status {
    std::vector<std::string> owned;
    if (const auto& vsock = vm.config().vsock) {
      // Ours are relative to the jail; a snapshot's own path is the host's.
      if (std::filesystem::path(vsock->uds_path).is_absolute()) {
        return fail("the vsock socket " + vsock->uds_path + " is outside the jail",
                    "give the jailed VMM a --vsock inside its jail directory");
      }
      owned.push_back(vsock->uds_path);
    }
    return process.lock_down(owned);
  };
}

}  // namespace dsec::cli
