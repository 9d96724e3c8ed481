// What a daemon that ended left in the state directory: Pool::recover, and
// SandboxLifecycle::adopt for each VMM of it that still runs.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>

#include "vmm/pool/log_tail.h"
#include "vmm/pool/pool.h"
#include "vmm/pool/process_identity.h"
#include "vmm/pool/sandbox_dir.h"

namespace dsec::pool {

void Pool::recover() {
  auto images = state_.read_images();
  if (!images) {
    spdlog::error("pool: {}; starting with no images", images.error().message());
  } else {
    for (auto& spec : *images) {
      if (auto registered = images_.add(spec); !registered) {
        spdlog::error("pool: image {} from images.json: {}", spec.name, registered.error().message);
      }
    }
  }
  std::vector<std::string> unreadable;
  std::set<std::string> known_files;
  for (auto& record : state_.read_records(unreadable)) {
    known_files.insert(record.files.vsock);
    known_files.insert(record.files.log);
    known_files.insert(state_.sandbox_dir(record.id));
    auto pidfd = open_pidfd(record.process);
    if (!pidfd) {
      if (record.state == SandboxState::kReady || record.state == SandboxState::kInUse) {
        ++counters_.lost;
        const std::string tail = log_tail(record.files.log);
        sandboxes_.remember_end(
            record, "the sandbox was lost while the daemon was away; its log ended:\n" + tail);
        spdlog::warn("pool: {} was lost while the daemon was away; its log ended:\n{}", record.id,
                     tail);
      }
      resources_.release_dead(record);
      continue;
    }
    Sandbox* adopted = lifecycle_.adopt(std::move(record), std::move(*pidfd));
    if (adopted != nullptr && adopted->record.state == SandboxState::kInUse) {
      // The time to live goes on; the idle timeout starts again: the client could not reach
      // the daemon while it was down.
      adopted->last_request = Sandbox::Clock::now();
      leases_.arm(*adopted);
    }
  }
  for (const auto& why : unreadable) {
    spdlog::error("pool: a sandbox record that does not parse is left alone: {}", why);
  }
  // A VMM's files without a record: the daemon ended between a launch and its record.
  std::error_code ec;
  std::vector<std::filesystem::path> unknown;
  for (const auto& entry : std::filesystem::directory_iterator(state_.path() + "/sandboxes", ec)) {
    const auto ext = entry.path().extension();
    const bool own =
        ext == ".vsock" || ext == ".log" || (entry.is_directory(ec) && !entry.is_symlink(ec));
    if (own && !known_files.contains(entry.path().string())) {
      unknown.push_back(entry.path());
    }
  }
  for (const auto& path : unknown) {
    spdlog::warn("pool: removing {}, which no record names", path.string());
    remove_sandbox_dir(path.string());
  }
  resources_.remove_unknown_networks();
  lifecycle_.refill();
}

Sandbox* SandboxLifecycle::adopt(SandboxRecord record, UniqueFd pidfd) {
  const std::string id = record.id;
  auto sandbox = std::make_unique<Sandbox>();
  sandbox->record = std::move(record);
  sandbox->pidfd = std::move(pidfd);
  sandbox->launched = Sandbox::Clock::now();
  // A jailed clone's id is its directory's owner: used again only once it ended.
  sandbox->jail_id = resources_.adopt_jail_id(id);
  Sandbox& s = sandboxes_.add(std::move(sandbox));
  auto watch = loop_.add_fd_watch(s.pidfd.get(), [this, id] { on_exit(id); });
  if (watch) {
    s.exit_watch = *watch;
  }
  const PoolImage* image = images_.find(s.record.image);
  bool keep = watch && image != nullptr &&
              (s.record.state == SandboxState::kReady || s.record.state == SandboxState::kInUse);
  if (keep) {
    // Its network namespace, veth pair and rules, as the daemon that ended made them.
    if (auto network = resources_.adopt_network(s.record, *image); !network) {
      spdlog::warn("pool: {}: {}", id, network.error().message());
      keep = false;
    }
  }
  if (!keep && s.record.network_slot) {
    // Not this daemon's to keep: removed now, so that its slot is free for a new clone.
    resources_.remove_network_left(*s.record.network_slot);
    s.record.network_slot.reset();
  }
  if (!keep) {
    // Starting (its ready pipe was the old daemon's), stopping, or of an image no longer
    // registered: stopped. A sandbox nobody can reach must not run on.
    spdlog::info("pool: {} ({}) found running; stopping it", id, state_name(s.record.state));
    stop(s, "the daemon restarted while it was " + std::string(state_name(s.record.state)));
    if (!watch) {
      ::killpg(s.record.process.pid, SIGKILL);
    }
    return nullptr;
  }
  s.network_address = resources_.network_address(s.record);
  spdlog::info("pool: {} adopted ({}, pid {})", id, state_name(s.record.state),
               s.record.process.pid);
  return &s;
}

}  // namespace dsec::pool
