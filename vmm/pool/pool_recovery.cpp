// Pool::recover: what a daemon that ended left in the state directory.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "vmm/pool/log_tail.h"
#include "vmm/pool/pool.h"
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
      ::unlink(record.files.vsock.c_str());
      ::unlink(record.files.log.c_str());
      if (sandbox_dir_owner(state_.sandbox_dir(record.id)) &&
          !launcher_->forget(state_.sandbox_dir(record.id))) {
        schedule_cleanup();  // a jailed clone's cgroup, if its supervisor was killed
      }
      remove_sandbox_dir(state_.sandbox_dir(record.id));
      state_.remove_record(record.id);
      continue;
    }
    adopt(std::move(record), std::move(*pidfd));
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
  refill();
}

void Pool::adopt(SandboxRecord record, UniqueFd pidfd) {
  const std::string id = record.id;
  auto sandbox = std::make_unique<Sandbox>();
  sandbox->record = std::move(record);
  sandbox->pidfd = std::move(pidfd);
  sandbox->launched = Clock::now();
  // A jailed clone's id is its directory's owner: used again only once it ended.
  if (const auto owner = sandbox_dir_owner(state_.sandbox_dir(id)); owner && jail_ids_) {
    if (jail_ids_->adopt(*owner) || !jail_ids_->used(*owner)) {
      sandbox->jail_id = owner;  // an id outside the range is never handed out anyway
    } else {
      spdlog::warn("pool: {} runs as uid {}, which another adopted clone has too", id, *owner);
    }
  }
  Sandbox& s = *sandbox;
  sandboxes_.add(std::move(sandbox));
  auto watch = loop_.add_fd_watch(s.pidfd.get(), [this, id] { on_exit(id); });
  if (watch) {
    s.exit_watch = *watch;
  }
  const bool keep =
      watch && images_.find(s.record.image) != nullptr &&
      (s.record.state == SandboxState::kReady || s.record.state == SandboxState::kInUse);
  if (!keep) {
    // Starting (its ready pipe was the old daemon's), stopping, or of an image no longer
    // registered: stopped. A sandbox nobody can reach must not run on.
    spdlog::info("pool: {} ({}) found running; stopping it", id, state_name(s.record.state));
    stop(s, "the daemon restarted while it was " + std::string(state_name(s.record.state)));
    if (!watch) {
      ::killpg(s.record.process.pid, SIGKILL);
    }
    return;
  }
  spdlog::info("pool: {} adopted ({}, pid {})", id, state_name(s.record.state),
               s.record.process.pid);
  if (s.record.state == SandboxState::kInUse) {
    // The time to live goes on; the idle timeout starts again: the client could not reach
    // the daemon while it was down.
    s.last_request = Clock::now();
    arm_lease(s);
  }
}

}  // namespace dsec::pool
