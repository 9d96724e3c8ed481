// `dsec-vmm run`: boots a Linux guest and runs it until it ends.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/default_image.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/signal_watcher.h"
#include "vmm/machine/machine.h"

namespace dsec::cli {
namespace {

// The command line the default image boots with: the console on COM1, reboot through
// the i8042 (there is no ACPI), and a panic ends the VM instead of hanging it.
constexpr const char* kDefaultCmdline = "console=ttyS0 reboot=k panic=-1 quiet";

struct RunOptions {
  std::string kernel;
  std::string initrd;
  std::string cmdline = kDefaultCmdline;
  std::vector<std::string> append;
  uint32_t vcpus = 1;
  uint64_t memory_mib = 128;
  std::string console;  // file for the serial output; empty: stdout
  std::string metrics_file;
  bool rng = false;
  bool share_kernel_pages = false;
  std::string profile_guest;  // empty: no profile
  uint32_t profile_interval_us = 1000;
  std::vector<std::string> drives;  // PATH[,ro][,id=ID]
  std::string vsock;                // the vsock device's Unix socket; empty: no vsock
  uint64_t vsock_cid = 3;
  std::string net;  // tap=NAME[,host=A.B.C.D/N][,mac=MAC]; empty: no network
};

// "tap=NAME[,host=A.B.C.D/N][,mac=MAC]" of --net.
Result<machine::NetConfig> parse_net(const std::string& spec) {
  machine::NetConfig net;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string part = spec.substr(start, comma - start);
    start = comma + 1;
    if (part.rfind("tap=", 0) == 0) {
      net.tap = part.substr(4);
    } else if (part.rfind("host=", 0) == 0) {
      net.host_cidr = part.substr(5);
    } else if (part.rfind("mac=", 0) == 0) {
      net.mac = part.substr(4);
    } else {
      return fail(fmt::format("--net {}: unknown option '{}'", spec, part),
                  "give tap=NAME[,host=A.B.C.D/N][,mac=MAC]");
    }
  }
  if (net.tap.empty()) {
    return fail("--net '" + spec + "' names no TAP", "give tap=NAME[,host=A.B.C.D/N][,mac=MAC]");
  }
  return net;
}

// "PATH[,ro][,id=ID]" of --drive.
Result<machine::DriveConfig> parse_drive(const std::string& spec) {
  machine::DriveConfig drive;
  size_t start = 0;
  bool first = true;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string part =
        spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (first) {
      drive.path = part;
      first = false;
    } else if (part == "ro") {
      drive.read_only = true;
    } else if (part.starts_with("id=")) {
      drive.id = part.substr(3);
    } else {
      return fail(fmt::format("--drive {}: unknown option '{}'", spec, part),
                  "give PATH[,ro][,id=ID]");
    }
    if (comma == std::string::npos) {
      break;
    }
    start = comma + 1;
  }
  if (drive.path.empty()) {
    return fail("--drive '" + spec + "' names no file", "give PATH[,ro][,id=ID]");
  }
  return drive;
}

// "start" is main()'s first line; main_monotonic_ns is that moment on CLOCK_MONOTONIC
// (steady_clock), so that a caller who noted the clock before exec can add the exec itself.
void write_metrics(const std::string& path, const machine::MachineMetrics& m,
                   const machine::VmExit& exit,
                   std::chrono::steady_clock::time_point process_start) {
  auto us = [](const std::optional<std::chrono::nanoseconds>& d) -> nlohmann::json {
    if (!d) {
      return nullptr;
    }
    return std::chrono::duration_cast<std::chrono::microseconds>(*d).count();
  };
  const auto main_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(process_start.time_since_epoch());
  nlohmann::json j = {{"main_monotonic_ns", main_ns.count()},
                      {"start_to_first_kvm_run_us", us(m.start_to_first_kvm_run)},
                      {"start_to_userspace_us", us(m.start_to_userspace)},
                      {"vmm_rss_excluding_guest_kib", m.vmm_rss_kib},
                      {"exit", exit.describe()},
                      {"exit_code", exit.exit_code()}};
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) {
    spdlog::error("could not write the metrics file {}", path);
  }
}

int run_main(const RunOptions& options, std::chrono::steady_clock::time_point process_start) {
  machine::MachineConfig config;
  config.process_start = process_start;
  config.vcpus = options.vcpus;
  config.memory_mib = options.memory_mib;
  config.cmdline = options.cmdline;
  for (const auto& extra : options.append) {
    config.cmdline += " " + extra;
  }
  config.kernel_path = options.kernel;
  config.initrd_path = options.initrd;
  config.rng = options.rng;
  config.share_kernel_pages = options.share_kernel_pages;
  config.guest_profile_path = options.profile_guest;
  config.guest_profile_interval = std::chrono::microseconds(options.profile_interval_us);
  for (const auto& spec : options.drives) {
    auto drive = parse_drive(spec);
    if (!drive) {
      spdlog::error("{}", drive.error().message());
      return 1;
    }
    config.drives.push_back(*drive);
  }
  if (!options.vsock.empty()) {
    config.vsock = machine::VsockConfig{options.vsock_cid, options.vsock};
  }
  if (!options.net.empty()) {
    auto net = parse_net(options.net);
    if (!net) {
      spdlog::error("{}", net.error().message());
      return 1;
    }
    config.net = *net;
  }
  if (config.kernel_path.empty() || config.initrd_path.empty()) {
    auto image = find_default_image();
    if (!image) {
      (void)std::fprintf(stderr, "dsec-vmm run: %s\n", image.error().message().c_str());
      return 1;
    }
    if (config.kernel_path.empty()) {
      config.kernel_path = image->kernel;
    }
    if (config.initrd_path.empty()) {
      config.initrd_path = image->initrd;
      // Our init announces clean reboots; anything else is a crash.
      config.expect_clean_shutdown_announcement = true;
    }
  }
  UniqueFd console;
  if (!options.console.empty()) {
    console =
        UniqueFd(::open(options.console.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!console) {
      (void)std::fprintf(stderr, "dsec-vmm run: cannot open --console %s: %s\n",
                         options.console.c_str(), std::strerror(errno));
      return 1;
    }
    config.console_output_fd = console.get();
  }
  config.console_input_fd = ::isatty(STDIN_FILENO) || options.console.empty() ? STDIN_FILENO : -1;

  // SIGINT and SIGTERM stop the VM, SIGUSR1 logs its interrupts' and devices' state. Blocked
  // before the Machine starts any thread, so that only the watcher sees them.
  io::BlockedSignals signals{SIGINT, SIGTERM, SIGUSR1};
  auto vm = machine::Machine::create(config);
  if (!vm) {
    (void)std::fprintf(stderr, "dsec-vmm run: %s\n", vm.error().message().c_str());
    return 1;
  }
  // Declared after the Machine: it is joined before the Machine goes.
  auto watcher = io::SignalWatcher::start(signals, [&vm = **vm](int signo) {
    if (signo == SIGUSR1) {
      vm.log_state();
    } else {
      vm.stop(signo == SIGINT ? "received SIGINT" : "received SIGTERM");
    }
  });
  if (!watcher) {
    (void)std::fprintf(stderr, "dsec-vmm run: %s\n", watcher.error().message().c_str());
    return 3;
  }
  if (auto started = (*vm)->start(); !started) {
    (void)std::fprintf(stderr, "dsec-vmm run: %s\n", started.error().message().c_str());
    return 1;
  }
  machine::VmExit exit = (*vm)->wait();
  // metrics() reads /proc/self/smaps: only when asked for, it is on the way to the exit.
  if (!options.metrics_file.empty()) {
    write_metrics(options.metrics_file, (*vm)->metrics(), exit, process_start);
  }
  if (exit.exit_code() == 0) {
    spdlog::info("VM ended: {}", exit.describe());
  } else {
    spdlog::error("VM ended: {} (exit status {})", exit.describe(), exit.exit_code());
  }
  return exit.exit_code();
}

}  // namespace

void add_run_command(CLI::App& app, CommandAction& action,
                     std::chrono::steady_clock::time_point process_start) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand("run", "Boot a Linux guest and run it until it ends");
  run->footer(
      "Without --kernel or --initrd, the default image (images/build-image) supplies them; "
      "its init reboots when done, which ends the VM. The guest's serial console (COM1) goes "
      "to stdout or --console, and reads stdin. Exit status: 0 when the guest rebooted or "
      "powered off, 1 for a bad configuration (nothing started), 2 when the guest crashed "
      "(kernel panic, triple fault), 3 when KVM or the VMM failed. SIGINT/SIGTERM stop the VM "
      "(status 0); SIGUSR1 logs where the interrupts stand (each vCPU: halted or not, its "
      "local APIC's pending and in-service vectors; the IOAPIC's pins) and the state of every "
      "virtio device (its queues' indices, vsock's streams and credit), for a look at a VM "
      "that seems stuck.");
  run->add_option("--kernel", options->kernel,
                  "Kernel: an ELF vmlinux (PVH or 64-bit entry) or a bzImage")
      ->check(CLI::ExistingFile);
  run->add_option("--initrd", options->initrd, "Initramfs to load with the kernel")
      ->check(CLI::ExistingFile);
  run->add_option("--cmdline", options->cmdline, "Kernel command line")->capture_default_str();
  run->add_option("--append", options->append, "Words to add to the command line (repeatable)");
  run->add_option("--vcpus", options->vcpus, "Number of vCPUs")->capture_default_str();
  run->add_option("--memory", options->memory_mib, "Guest memory in MiB")->capture_default_str();
  run->add_option("--console", options->console, "Write the guest's console to this file");
  run->add_option("--metrics-file", options->metrics_file,
                  "Write boot figures (JSON) here when the VM ends");
  run->add_flag("--share-kernel-pages", options->share_kernel_pages,
                "Map a vmlinux's pages copy-on-write from the page cache instead of copying "
                "them: VMs booting the same file share them (less memory per VM), but the boot "
                "is slower (each page the guest writes is a copy-on-write fault). No effect on "
                "a bzImage");
  run->add_option("--profile-guest", options->profile_guest,
                  "Sample where each vCPU is (its instruction pointer) every "
                  "--profile-interval-us and write the samples to this file when the VM ends; "
                  "tools/guest-profile turns them into a per-function report. Each sample is an "
                  "exit: the guest runs slower while profiled");
  run->add_option("--profile-interval-us", options->profile_interval_us,
                  "Microseconds between two samples of --profile-guest (100 to 1000000)")
      ->capture_default_str();
  run->add_flag("--rng", options->rng,
                "Give the guest a virtio-rng device (/dev/hwrng) fed by the host's getrandom(); "
                "off by default");
  run->add_option("--drive", options->drives,
                  "A virtio-blk disk: PATH[,ro][,id=ID] (repeatable; the first is /dev/vda)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  run->add_option("--vsock", options->vsock,
                  "Give the guest a virtio-vsock device; host processes reach guest port P by "
                  "connecting to this Unix socket (created here, must not exist) and sending "
                  "'CONNECT P\\n' (dsec-vmm exec does); guest connections to host port P go to "
                  "PATH_P");
  run->add_option("--vsock-cid", options->vsock_cid, "The guest's vsock CID")
      ->capture_default_str();
  run->add_option("--net", options->net,
                  "Give the guest a virtio-net device (eth0) on a host TAP: "
                  "tap=NAME[,host=A.B.C.D/N][,mac=MAC]. The TAP is created if it does not exist "
                  "(needs CAP_NET_ADMIN and the tun module); host= gives it that IPv4 address "
                  "and brings it up; the guest configures its side itself. MAC defaults to "
                  "52:54:00:12:34:56");
  run->callback([&action, options, process_start] {
    action = [options, process_start] { return run_main(*options, process_start); };
  });
}

}  // namespace dsec::cli
