#include "vmm/pool/clone_resources.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "vmm/network/clone_rate_limits.h"
#include "vmm/pool/sandbox_dir.h"

namespace dsec::pool {

CloneResources::CloneResources(io::EventLoop& loop, const StateDir& state,
                               std::unique_ptr<VmmLauncher> launcher,
                               const std::optional<JailIdRange>& jail_ids,
                               std::unique_ptr<PoolNetworks> networks)
    : loop_(loop), state_(state), launcher_(std::move(launcher)), networks_(std::move(networks)) {
  if (jail_ids) {
    jail_ids_.emplace(*jail_ids);
  }
}

CloneResources::~CloneResources() {
  stop_cleanup();
}

PoolResult<std::optional<uint32_t>> CloneResources::take_jail_id() {
  if (!jail_ids_) {
    return std::nullopt;
  }
  auto jail_id = jail_ids_->allocate();
  if (!jail_id) {
    return std::unexpected(error(Failure::kFull, jail_id.error().message()));
  }
  return *jail_id;
}

PoolResult<std::optional<uint32_t>> CloneResources::take_network(
    const PoolImage& image, const network::EgressPolicy& egress) {
  if (!image.network) {
    return std::nullopt;
  }
  if (!networks_) {
    return std::unexpected(error(Failure::kUnavailable, "image " + image.spec.name +
                                                            " has a network device, and this "
                                                            "daemon makes no clone networks"));
  }
  return DSEC_TRY(networks_->make(*image.network, egress));
}

void CloneResources::give_back(std::optional<uint32_t> jail_id,
                               std::optional<uint32_t> network_slot) {
  if (jail_id && jail_ids_) {
    jail_ids_->release(*jail_id);
  }
  if (network_slot && networks_) {
    networks_->release(*network_slot);
  }
}

Result<LaunchedVmm> CloneResources::launch(const std::string& id, const ImageFiles& files,
                                           const PoolImage& image, std::optional<uint32_t> jail_id,
                                           std::optional<uint32_t> network_slot) {
  // The clone inherits these descriptors and opens nothing of the store by name.
  CloneLaunch clone{.state_fd = files.state.get(),
                    .memory_fd = files.memory.get(),
                    .guest_bytes = files.memory_bytes,
                    .dir = state_.sandbox_dir(id),
                    .files = state_.files_for(id),
                    .jail_id = jail_id};
  if (network_slot && networks_ && image.network) {
    clone.netns = networks_->path(*network_slot);
    clone.tap = image.network->tap;
    if (image.spec.net_rate_limits.limits()) {
      clone.net_rate_limiters = network::clone_rate_limits_text(image.spec.net_rate_limits);
    }
  }
  auto launched = [&]() -> Result<LaunchedVmm> {
    DSEC_TRY(make_sandbox_dir(clone.dir));
    return launcher_->launch(clone);
  }();
  if (!launched) {
    ::unlink(clone.files.log.c_str());
    remove_sandbox_dir(clone.dir);
    give_back(jail_id, network_slot);
  }
  return launched;
}

ProcessEnd CloneResources::reap(const Sandbox& sandbox) {
  return launcher_->reap(sandbox.pidfd.get(), sandbox.record.process.pid);
}

bool CloneResources::oom_killed(const Sandbox& sandbox) {
  return sandbox.jail_id && launcher_->oom_killed(state_.sandbox_dir(sandbox.record.id));
}

void CloneResources::persist(const Sandbox& sandbox) {
  if (auto written = state_.write_record(sandbox.record); !written) {
    spdlog::error("pool: {}: {}; a restarted daemon will not find it", sandbox.record.id,
                  written.error().message());
  }
}

void CloneResources::release(const Sandbox& sandbox) {
  const std::string& id = sandbox.record.id;
  const SandboxFiles& files = sandbox.record.files;
  ::unlink(files.vsock.c_str());
  ::unlink(files.log.c_str());
  if (!files.api.empty()) {
    ::unlink(files.api.c_str());
  }
  remove_sandbox_dir(state_.sandbox_dir(id));
  if (sandbox.record.network_slot && networks_) {
    networks_->release(*sandbox.record.network_slot);
  }
  if (sandbox.jail_id) {
    if (!launcher_->forget(state_.sandbox_dir(id))) {
      schedule_cleanup();
    }
    if (jail_ids_) {
      jail_ids_->release(*sandbox.jail_id);
    }
  }
  state_.remove_record(id);
}

void CloneResources::release_dead(const SandboxRecord& record) {
  ::unlink(record.files.vsock.c_str());
  ::unlink(record.files.log.c_str());
  if (sandbox_dir_owner(state_.sandbox_dir(record.id)) &&
      !launcher_->forget(state_.sandbox_dir(record.id))) {
    schedule_cleanup();  // a jailed clone's cgroup, if its supervisor was killed
  }
  remove_sandbox_dir(state_.sandbox_dir(record.id));
  if (record.network_slot) {
    remove_network_left(*record.network_slot);
  }
  state_.remove_record(record.id);
}

Status CloneResources::adopt_network(const SandboxRecord& record, const PoolImage& image) {
  if (!record.network_slot) {
    return ok();
  }
  if (!networks_ || !image.network) {
    return fail(
        "its network cannot be taken over: this daemon makes no clone networks, or its "
        "image has no network device now");
  }
  DSEC_TRY(networks_->adopt(*record.network_slot, *image.network, record.egress));
  // The forwards the daemon that ended had made for it, at the same host ports: they went
  // with its table, and the sandbox's users still use them.
  for (const ForwardedPort& port : record.ports) {
    if (auto again = networks_->forward_port(*record.network_slot, port.guest_port, port.host_port);
        !again) {
      spdlog::warn("pool: {}: host port {} to guest port {} not forwarded again: {}", record.id,
                   port.host_port, port.guest_port, again.error().message());
    }
  }
  return ok();
}

PoolResult<void> CloneResources::set_egress(Sandbox& sandbox, const network::EgressPolicy& policy) {
  if (!sandbox.record.network_slot || !networks_) {
    return std::unexpected(error(Failure::kInvalid, "sandbox " + sandbox.record.id +
                                                        " has no network: its image's snapshot "
                                                        "has no network device"));
  }
  if (auto set = networks_->set_egress(*sandbox.record.network_slot, policy); !set) {
    return std::unexpected(error(
        Failure::kUnavailable,
        "sandbox " + sandbox.record.id + ": its egress was not changed: " + set.error().message()));
  }
  sandbox.record.egress = policy;
  persist(sandbox);
  return {};
}

PoolResult<uint16_t> CloneResources::forward_port(Sandbox& sandbox, uint16_t guest_port) {
  if (!sandbox.record.network_slot || !networks_) {
    return std::unexpected(error(Failure::kInvalid, "sandbox " + sandbox.record.id +
                                                        " has no network: its image's snapshot "
                                                        "has no network device"));
  }
  auto port = networks_->forward_port(*sandbox.record.network_slot, guest_port);
  if (!port) {
    return std::unexpected(
        error(Failure::kUnavailable,
              "sandbox " + sandbox.record.id + ": no port forwarded: " + port.error().message()));
  }
  const ForwardedPort forward{.guest_port = guest_port, .host_port = *port};
  if (std::ranges::find(sandbox.record.ports, forward) == sandbox.record.ports.end() &&
      sandbox.record.ports.size() < kMaxForwardedPorts) {
    sandbox.record.ports.push_back(forward);
    persist(sandbox);
  }
  return *port;
}

std::optional<network::CloneNetworkCounters> CloneResources::network_counters(
    const Sandbox& sandbox) {
  if (!sandbox.record.network_slot || !networks_) {
    return std::nullopt;
  }
  auto counters = networks_->counters(*sandbox.record.network_slot);
  if (!counters) {
    spdlog::warn("pool: {}: {}", sandbox.record.id, counters.error().message());
    return std::nullopt;
  }
  return *counters;
}

std::string CloneResources::network_address(const SandboxRecord& record) const {
  return record.network_slot && networks_ ? networks_->guest_side_address(*record.network_slot)
                                          : std::string();
}

void CloneResources::remove_network_left(uint32_t slot) {
  if (networks_) {
    networks_->remove_left(slot);
  }
}

void CloneResources::remove_unknown_networks() {
  if (networks_) {
    networks_->remove_unknown();
  }
}

std::optional<uint32_t> CloneResources::adopt_jail_id(const std::string& id) {
  const auto owner = sandbox_dir_owner(state_.sandbox_dir(id));
  if (!owner || !jail_ids_) {
    return std::nullopt;
  }
  if (jail_ids_->adopt(*owner) || !jail_ids_->used(*owner)) {
    return owner;  // an id outside the range is never handed out anyway
  }
  spdlog::warn("pool: {} runs as uid {}, which another adopted clone has too", id, *owner);
  return std::nullopt;
}

void CloneResources::remove_left_now() {
  // The cgroups of VMMs just killed may stay busy a moment: a blocking wait is fine here.
  for (int tries = 0; tries < 40 && !launcher_->remove_left(); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop_cleanup();
}

void CloneResources::stop_cleanup() {
  if (cleanup_timer_) {
    (void)loop_.cancel_timer(*cleanup_timer_);
    cleanup_timer_.reset();
  }
}

void CloneResources::schedule_cleanup() {
  if (cleanup_timer_) {
    return;
  }
  auto timer = loop_.add_timer(std::chrono::milliseconds(500), [this] {
    cleanup_timer_.reset();
    if (!launcher_->remove_left()) {
      schedule_cleanup();
    }
  });
  if (timer) {
    cleanup_timer_ = *timer;
  }
}

}  // namespace dsec::pool
