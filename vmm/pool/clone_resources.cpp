#include "vmm/pool/clone_resources.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <thread>

#include "vmm/pool/sandbox_dir.h"

namespace dsec::pool {

CloneResources::CloneResources(io::EventLoop& loop, const StateDir& state,
                               std::unique_ptr<VmmLauncher> launcher,
                               const std::optional<JailIdRange>& jail_ids)
    : loop_(loop), state_(state), launcher_(std::move(launcher)) {
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

Result<LaunchedVmm> CloneResources::launch(const std::string& id, const ImageFiles& image,
                                           std::optional<uint32_t> jail_id) {
  // The clone inherits these descriptors and opens nothing of the store by name.
  const CloneLaunch clone{.state_fd = image.state.get(),
                          .memory_fd = image.memory.get(),
                          .guest_bytes = image.memory_bytes,
                          .dir = state_.sandbox_dir(id),
                          .files = state_.files_for(id),
                          .jail_id = jail_id};
  auto launched = [&]() -> Result<LaunchedVmm> {
    DSEC_TRY(make_sandbox_dir(clone.dir));
    return launcher_->launch(clone);
  }();
  if (!launched) {
    ::unlink(clone.files.log.c_str());
    remove_sandbox_dir(clone.dir);
    if (jail_id && jail_ids_) {
      jail_ids_->release(*jail_id);
    }
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
  state_.remove_record(record.id);
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
