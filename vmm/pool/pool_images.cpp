#include "vmm/pool/pool_images.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "vmm/common/file.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/pool/host_memory.h"

namespace dsec::pool {
namespace {

// What a pool clone can be restored from: the pool gives each clone its vsock socket and,
// with clone networks, its own namespace holding the snapshot's TAP; never a host file
// that the state file chooses (RestoreLauncher). The network device's TAP name and address
// are read here, once, from the file the operator registers; a clone's TAP is then made
// by the pool in the clone's own namespace and named on its command line, so a state file
// swapped in later reaches no host TAP (docs/network.md, "The pool's clones").
Result<std::optional<ImageNetwork>> check_image_shape(const std::string& state_path,
                                                      bool clone_networks) {
  const auto config = DSEC_TRY(machine::read_snapshot_config(state_path));
  if (!config.vsock) {
    return fail("its snapshot has no vsock device, so no agent to reach",
                "make the warm image with dsec-vmm warm, which gives the VM one");
  }
  if (!config.drives.empty()) {
    return fail("its snapshot has " + std::to_string(config.drives.size()) +
                    " drive(s), which pool clones cannot have yet (their host files would come "
                    "from the snapshot)",
                "make the warm image without --drive");
  }
  if (config.nets.empty()) {
    return std::nullopt;
  }
  if (config.nets.size() > 1) {
    return fail("its snapshot has " + std::to_string(config.nets.size()) +
                    " network devices, and a pool clone's network gives one",
                "make the warm image with one --net");
  }
  const machine::NetConfig& net = config.nets.front();
  if (!clone_networks) {
    return fail("its snapshot has a network device, and this daemon makes no clone networks",
                "start the daemon without --no-clone-networks, or make the warm image "
                "without --net");
  }
  if (net.tap_fd >= 0 || net.tap.empty()) {
    return fail("its snapshot's network device has no TAP name",
                "make the warm image with --net tap=NAME,host=A.B.C.D/N");
  }
  return DSEC_TRY(image_network(net.tap, net.host_cidr));
}

}  // namespace

PoolImages::PoolImages(const ImageStore& store, const StateDir& state,
                       const SandboxTable& sandboxes, const PoolOptions& options)
    : store_(store), state_(state), sandboxes_(sandboxes), options_(options) {}

PoolResult<nlohmann::json> PoolImages::add(const ImageSpec& spec) {
  auto files = store_.open_image(spec.name);
  if (!files) {
    return std::unexpected(error(Failure::kInvalid, files.error().message()));
  }
  // Read through the descriptor just checked, never by the name again.
  auto shape = check_image_shape(fd_path(files->state.get()), options_.networks.has_value());
  if (!shape) {
    return std::unexpected(
        error(Failure::kInvalid, "image " + spec.name + ": " + shape.error().message()));
  }
  if (!shape->has_value() && spec.net_rate_limits.limits()) {
    return std::unexpected(error(Failure::kInvalid,
                                 "image " + spec.name +
                                     ": its snapshot has no network device to rate-limit; leave "
                                     "out 'rx_rate_limiter' and 'tx_rate_limiter'"));
  }
  images_[spec.name] =
      PoolImage{.spec = spec, .guest_bytes = files->memory_bytes, .network = *shape};
  return image_spec_json(spec);
}

void PoolImages::save() const {
  std::vector<ImageSpec> specs;
  specs.reserve(images_.size());
  for (const auto& [name, image] : images_) {
    specs.push_back(image.spec);
  }
  if (auto saved = state_.write_images(specs); !saved) {
    spdlog::error("pool: {}; a restarted daemon will not know this image", saved.error().message());
  }
}

const PoolImage* PoolImages::find(const std::string& name) const {
  const auto it = images_.find(name);
  return it == images_.end() ? nullptr : &it->second;
}

nlohmann::json PoolImages::images_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, image] : images_) {
    auto item = image_spec_json(image.spec);
    item["guest_memory_bytes"] = image.guest_bytes;
    item["sandboxes"] = {{"starting", sandboxes_.count(name, SandboxState::kStarting)},
                         {"ready", sandboxes_.count(name, SandboxState::kReady)},
                         {"in_use", sandboxes_.count(name, SandboxState::kInUse)},
                         {"stopping", sandboxes_.count(name, SandboxState::kStopping)}};
    list.push_back(std::move(item));
  }
  return {{"images", list}};
}

std::vector<ImageGauges> PoolImages::gauges() const {
  std::vector<ImageGauges> gauges;
  gauges.reserve(images_.size());
  for (const auto& [name, image] : images_) {
    gauges.push_back({.image = name,
                      .ready = sandboxes_.count(name, SandboxState::kReady),
                      .in_use = sandboxes_.count(name, SandboxState::kInUse),
                      .starting = sandboxes_.count(name, SandboxState::kStarting)});
  }
  return gauges;
}

PoolResult<void> PoolImages::admit(const PoolImage& image) const {
  const std::string& name = image.spec.name;
  if (sandboxes_.clones_of(name) >= image.spec.max) {
    return std::unexpected(
        error(Failure::kFull,
              fmt::format("image {} has its maximum of {} clones ({} in use, {} "
                          "ready, {} starting): release a sandbox, or raise the "
                          "image's 'max'",
                          name, image.spec.max, sandboxes_.count(name, SandboxState::kInUse),
                          sandboxes_.count(name, SandboxState::kReady),
                          sandboxes_.count(name, SandboxState::kStarting))));
  }
  const auto memory = read_host_memory();
  if (!memory) {
    return std::unexpected(error(Failure::kUnavailable, memory.error().message()));
  }
  // What its clones may yet write, not only what they wrote: a clone shares its image's
  // pages until it writes them, so MemAvailable alone would admit clones that later push the
  // host into the OOM killer.
  const uint64_t committed = committed_guest_bytes();
  const double commit_limit = options_.max_memory_ratio * options_.memory_overcommit *
                              static_cast<double>(memory->total_bytes);
  if (static_cast<double>(committed + image.guest_bytes) > commit_limit) {
    return std::unexpected(
        error(Failure::kFull,
              fmt::format("guest memory: the pool's clones may use {} MiB, and a clone of {} "
                          "{} MiB more, past {:.0f} MiB (--max-memory-ratio {} of the host's {} "
                          "MiB, times --memory-overcommit {}): release sandboxes or wait",
                          committed >> 20, name, image.guest_bytes >> 20, commit_limit / (1 << 20),
                          options_.max_memory_ratio, memory->total_bytes >> 20,
                          options_.memory_overcommit)));
  }
  const double used = static_cast<double>(memory->total_bytes - memory->available_bytes) +
                      static_cast<double>(image.guest_bytes);
  const double limit = options_.max_memory_ratio * static_cast<double>(memory->total_bytes);
  if (used > limit) {
    return std::unexpected(
        error(Failure::kFull,
              fmt::format("host memory: {} MiB used of {} MiB, and a clone of {} may take {} MiB "
                          "more, past the pool's limit of {:.0f}% (--max-memory-ratio): release "
                          "sandboxes or wait",
                          (memory->total_bytes - memory->available_bytes) >> 20,
                          memory->total_bytes >> 20, name, image.guest_bytes >> 20,
                          options_.max_memory_ratio * 100)));
  }
  return {};
}

uint64_t PoolImages::committed_guest_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [id, sandbox] : sandboxes_.all()) {
    if (const auto* image = find(sandbox->record.image)) {
      bytes += image->guest_bytes;
    }
  }
  return bytes;
}

PoolResult<void> PoolImages::check_quota(const Tenant& caller, const PoolImage& image,
                                         const std::vector<std::string>& waiting_for) const {
  const auto& quota = caller.quota;
  if (!quota.max_sandboxes && !quota.max_memory_bytes) {
    return {};
  }
  // What the caller holds, and what its waiting acquires will hold.
  uint32_t held = 0;
  uint64_t memory = image.guest_bytes;
  const auto add = [&](const std::string& image_name) {
    ++held;
    if (const auto* held_image = find(image_name)) {
      memory += held_image->guest_bytes;
    }
  };
  for (const auto& [id, s] : sandboxes_.all()) {
    if (s->record.owner == caller.name && s->record.state == SandboxState::kInUse) {
      add(s->record.image);
    }
  }
  for (const auto& image_name : waiting_for) {
    add(image_name);
  }
  if (quota.max_sandboxes && held >= *quota.max_sandboxes) {
    return std::unexpected(
        error(Failure::kQuota, fmt::format("tenant {} holds {} sandboxes, its quota of sandboxes "
                                           "(max_sandboxes): release one first",
                                           caller.name, held)));
  }
  if (quota.max_memory_bytes && memory > *quota.max_memory_bytes) {
    return std::unexpected(error(
        Failure::kQuota,
        fmt::format("tenant {}: a sandbox of {} ({} MiB of guest memory) would take its sandboxes "
                    "to {} MiB, past its quota of guest memory (max_memory) of {} MiB: release "
                    "one first",
                    caller.name, image.spec.name, image.guest_bytes >> 20, memory >> 20,
                    *quota.max_memory_bytes >> 20)));
  }
  return {};
}

}  // namespace dsec::pool
