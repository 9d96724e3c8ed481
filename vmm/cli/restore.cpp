// `dsec-vmm restore`: starts a VM from a snapshot, a copy-on-write clone of its memory.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/jail_options.h"
#include "vmm/cli/netns_option.h"
#include "vmm/cli/seccomp_option.h"
#include "vmm/cli/serve_vm.h"
#include "vmm/cli/vm_options.h"
#include "vmm/common/file.h"
#include "vmm/jail/supervisor.h"
#include "vmm/machine/clone_sync.h"
#include "vmm/machine/machine.h"
#include "vmm/network/clone_rate_limits.h"
#include "vmm/snapshot/snapshot_dir.h"

namespace dsec::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct RestoreOptions {
  std::string snapshot_dir;
  // Instead of snapshot_dir: the state and memory files handed in open (dsec-vmm pool's,
  // checked by the daemon), read through /proc/self/fd: no path is looked up.
  int state_fd = -1;
  int memory_fd = -1;
  std::string vsock;  // empty: the snapshot's socket path
  std::optional<uint64_t> vsock_cid;
  std::string net;
  std::string net_rate_limiters;  // JSON (network/clone_rate_limits.h); empty: the snapshot's
  std::vector<std::string> drives;
  bool no_host_paths_from_snapshot = false;
  ConsoleOptions console;
  std::string metrics_file;
  double agent_timeout_s = 30;
  int ready_fd = -1;  // written "ready\n" and closed once the agent took its clone sync
  ApiOptions api;
  seccomp::Mode seccomp = seccomp::Mode::kOn;
  JailOptions jail;
  std::string netns;  // empty: the namespace it was started in (or the jail's own)
};

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

Result<machine::RestoreOverrides> overrides_of(const RestoreOptions& o) {
  machine::RestoreOverrides overrides;
  if (!o.vsock.empty()) {
    overrides.vsock_uds_path = o.vsock;
  }
  overrides.vsock_guest_cid = o.vsock_cid;
  if (!o.net.empty()) {
    // The snapshot's first interface (its eth0).
    const auto net = DSEC_TRY(parse_net(o.net));
    machine::NetOverride given;
    if (net.tap_fd >= 0) {
      given.tap_fd = net.tap_fd;
    } else {
      given.tap = net.tap;
    }
    if (!net.host_cidr.empty()) {
      given.host_cidr = net.host_cidr;
    }
    if (!net.mac.empty()) {
      given.mac = net.mac;
    }
    if (!o.net_rate_limiters.empty()) {
      const auto limits = network::parse_clone_rate_limits(o.net_rate_limiters);
      if (!limits) {
        return std::unexpected(limits.error().with_context("--net-rate-limiters"));
      }
      given.rx_rate_limiter = limits->rx;
      given.tx_rate_limiter = limits->tx;
    }
    overrides.nets.push_back(std::move(given));
  }
  for (const auto& d : o.drives) {
    overrides.drive_paths.emplace_back(d);
  }
  overrides.refuse_snapshot_host_paths = o.no_host_paths_from_snapshot;
  return overrides;
}

// Tells whoever holds the other end of --ready-fd (dsec-vmm pool) that the clone serves.
// A reader that is gone is no reason to stop the clone: it only logs.
void tell_ready(int fd) {
  if (fd < 0) {
    return;
  }
  static constexpr char kReady[] = "ready\n";
  if (::write(fd, kReady, sizeof(kReady) - 1) != static_cast<ssize_t>(sizeof(kReady) - 1)) {
    spdlog::warn("restore: --ready-fd {}: nobody took the ready line", fd);
  }
  ::close(fd);
}

// Restores the snapshot and runs the clone to its end; in a jail, `jailed` is locked down
// before the guest runs.
int restore_vm(const RestoreOptions& options, jail::JailedProcess* jailed,
               Clock::time_point process_start) {
  auto overrides = overrides_of(options);
  if (!overrides) {
    (void)std::fprintf(stderr, "dsec-vmm restore: %s\n", overrides.error().message().c_str());
    return 1;
  }
  machine::MachineConfig host;
  host.process_start = process_start;
  auto console = open_console(options.console, host, true);
  if (!console) {
    (void)std::fprintf(stderr, "dsec-vmm restore: %s\n", console.error().message().c_str());
    return 1;
  }
  auto seccomp = seccomp::policy_for(options.seccomp);
  if (!seccomp) {
    (void)std::fprintf(stderr, "dsec-vmm restore: %s\n", seccomp.error().message().c_str());
    return 1;
  }
  host.seccomp = *seccomp;
  const auto files = options.state_fd >= 0
                         ? snapshot::SnapshotFiles{.state = fd_path(options.state_fd),
                                                   .memory = fd_path(options.memory_fd)}
                         : snapshot::snapshot_files(options.snapshot_dir);
  auto built = Clock::now();
  auto build = [&] {
    auto vm = machine::Machine::restore(files.state, files.memory, *overrides, host,
                                        /*paused=*/false);
    built = Clock::now();
    // Read and mapped: the VMM, soon jailed, keeps no descriptor of the image.
    for (const int fd : {options.state_fd, options.memory_fd}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    return vm;
  };
  ServeOptions serve{.command = "restore",
                     .metrics_file = options.metrics_file,
                     .before_start = jailed ? lock_down_before_start(*jailed) : nullptr,
                     .after_start = {},
                     .api = options.api,
                     .api_metrics_path = {}};
  serve.after_start = [&](machine::Machine& vm) -> Status {
    spdlog::info("restore: state restored {:.1f} ms after start, vCPUs running at {:.1f} ms",
                 std::chrono::duration<double, std::milli>(built - process_start).count(),
                 ms_since(process_start));
    const auto timeout =
        std::chrono::milliseconds(static_cast<int64_t>(options.agent_timeout_s * 1000));
    DSEC_TRY(machine::sync_restored_clone(vm, timeout));
    spdlog::info("restore: agent answering, RNG reseeded and clock set {:.1f} ms after start",
                 ms_since(process_start));
    tell_ready(options.ready_fd);
    return ok();
  };
  return serve_vm(build, serve, process_start);
}

// `options` with every path as a jailed VMM reaches it: what it opens before its pivot
// absolute, what it uses after inside the jail and relative to it.
Status jail_paths(const jail::JailPaths& paths, RestoreOptions& options) {
  options.snapshot_dir = jail::JailPaths::outside(options.snapshot_dir);
  for (auto& drive : options.drives) {
    drive = jail::JailPaths::outside(drive);
  }
  if (!options.vsock.empty()) {
    options.vsock = DSEC_TRY(paths.inside(options.vsock, "--vsock"));
  }
  return jail_serve_paths(paths, options.console.path, options.metrics_file, options.api);
}

int restore_main(const RestoreOptions& options, Clock::time_point process_start) {
  if (auto joined = join_netns(options.netns); !joined) {
    (void)std::fprintf(stderr, "dsec-vmm restore: %s\n", joined.error().message().c_str());
    return 1;
  }
  if (!options.jail.enabled()) {
    return restore_vm(options, nullptr, process_start);
  }
  RestoreOptions jailed_options = options;
  const auto jail = [&]() -> Result<Jail> {
    auto made = DSEC_TRY(jail_of(options.jail));
    made.config.own_network_namespace = options.netns.empty();
    DSEC_TRY(jail_paths(made.paths, jailed_options));
    if (!options.net.empty()) {
      if (const auto net = DSEC_TRY(parse_net(options.net)); net.tap_fd >= 0) {
        made.config.kept_fds.push_back(net.tap_fd);
      }
    }
    for (const int fd : {options.ready_fd, options.state_fd, options.memory_fd}) {
      if (fd >= 0) {
        made.config.kept_fds.push_back(fd);
      }
    }
    return made;
  }();
  if (!jail) {
    (void)std::fprintf(stderr, "dsec-vmm restore: %s\n", jail.error().message().c_str());
    return 1;
  }
  return run_in_jail(*jail, "restore", [&](jail::JailedProcess& jailed) {
    return restore_vm(jailed_options, &jailed, process_start);
  });
}

}  // namespace

void add_restore_command(CLI::App& app, CommandAction& action, Clock::time_point process_start) {
  auto options = std::make_shared<RestoreOptions>();
  CLI::App* restore =
      app.add_subcommand("restore",
                         "Start a VM from a snapshot (dsec-vmm warm, or snapshot create): a "
                         "copy-on-write clone that shares the snapshot's memory pages");
  restore->footer(
      "SNAPSHOT_DIR holds the state file 'state' and the memory file 'memory'. The memory "
      "file is mapped copy-on-write: every clone of one snapshot shares its pages in the page "
      "cache and pays only for the pages it writes; the files must not change while a clone "
      "runs. A clone gets what must not be shared anew: --vsock (its socket; default: the "
      "snapshot's path, which must not exist), --net, --drive; with --netns, its TAP (the "
      "snapshot's name) is the one in that network namespace. Before anything runs in it, "
      "its agent gets fresh entropy for the guest kernel's RNG and the host's wall clock. "
      "Exit statuses as for run (3 also when the agent did not answer in time). A jailed clone "
      "(--jail) needs a --vsock inside its jail when the snapshot has a vsock device.");
  auto* dir = restore->add_option("SNAPSHOT_DIR", options->snapshot_dir, "The snapshot's directory")
                  ->check(CLI::ExistingDirectory);
  auto* state_fd =
      restore
          ->add_option("--state-fd", options->state_fd,
                       "Instead of SNAPSHOT_DIR: the state file, handed in open as this "
                       "descriptor (with --memory-fd; dsec-vmm pool gives its clones the files "
                       "it checked, so no path is looked up again)")
          ->check(CLI::Range(3, 1 << 20))
          ->excludes(dir);
  restore
      ->add_option("--memory-fd", options->memory_fd,
                   "Instead of SNAPSHOT_DIR: the memory file, handed in open (with --state-fd)")
      ->check(CLI::Range(3, 1 << 20))
      ->excludes(dir)
      ->needs(state_fd);
  state_fd->needs(restore->get_option("--memory-fd"));
  restore->add_option("--vsock", options->vsock,
                      "The clone's vsock Unix socket (created here, must not exist)");
  restore->add_option("--vsock-cid", options->vsock_cid,
                      "The clone's vsock CID (the guest re-reads it after the snapshot's "
                      "transport reset)");
  restore->add_option("--net", options->net,
                      "The clone's TAP: tap=NAME[,host=A.B.C.D/N], or fd=N for a TAP handed in "
                      "open as descriptor N, for the snapshot's first network device (it must have one)");
  restore
      ->add_option("--net-rate-limiters", options->net_rate_limiters,
                   "That network device's rate limiters instead of the snapshot's, as JSON: "
                   "{\"rx_rate_limiter\": {\"bandwidth\": {\"size\": BYTES, \"refill_time\": "
                   "MS}, \"ops\": {...}}, \"tx_rate_limiter\": {...}} (Firecracker's form; rx is "
                   "what the guest receives, a direction left out is not limited; dsec-vmm "
                   "pool gives its clones their image's)")
      ->needs(restore->get_option("--net"));
  restore
      ->add_option("--drive", options->drives,
                   "The file behind the snapshot's drive N, for the N-th --drive (same size "
                   "and read-only setting as when snapshotted)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  restore->add_flag("--no-host-paths-from-snapshot", options->no_host_paths_from_snapshot,
                    "Open no host file, socket or TAP that the snapshot's state names: each "
                    "drive needs its --drive, a vsock device --vsock, a network device --net "
                    "(the state's host address for its TAP is dropped). dsec-vmm pool restores "
                    "so, since whoever wrote the state file chose those paths");
  add_console_options(*restore, options->console);
  restore->add_option("--metrics-file", options->metrics_file,
                      "Write figures (JSON) here when the VM ends");
  restore
      ->add_option("--agent-timeout", options->agent_timeout_s,
                   "Seconds to wait for the clone's agent to take its entropy and clock")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  restore
      ->add_option("--ready-fd", options->ready_fd,
                   "An open descriptor (a pipe's writing end) that gets the line \"ready\" and "
                   "is closed once the clone's agent took its entropy and clock (dsec-vmm "
                   "pool waits on it)")
      ->check(CLI::Range(3, 1 << 20));
  add_seccomp_option(*restore, options->seccomp);
  add_api_options(*restore, options->api,
                  "served once the clone's agent took its entropy and clock: PATCH /vm pauses "
                  "and resumes it, PUT /snapshot/create snapshots it while paused (a snapshot "
                  "of a clone restores like any other), PUT /actions SendCtrlAltDel asks it to "
                  "reboot");
  add_netns_option(*restore, options->netns);
  add_jail_options(*restore, options->jail);
  restore->callback([&action, options, process_start] {
    if (options->snapshot_dir.empty() && options->state_fd < 0) {
      throw CLI::RequiredError("SNAPSHOT_DIR (or --state-fd and --memory-fd)");
    }
    action = [options, process_start] { return restore_main(*options, process_start); };
  });
}

}  // namespace dsec::cli
