#include "vmm/pool/sandbox_requests.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "vmm/pool/process_identity.h"
#include "vmm/pool/sandbox_control.h"

namespace dsec::pool {
namespace {

// How long a failed agent request's answer waits for its VMM's end, in case that is why.
constexpr std::chrono::milliseconds kVmmEndGrace{500};

}  // namespace

void SandboxRequests::run(const Tenant& caller, const std::string& id, Work work, Done done,
                          Needs needs) {
  auto sandbox = deps_.sandboxes.in_use(caller, id);
  if (!sandbox) {
    done(std::unexpected(sandbox.error()));
    return;
  }
  Sandbox& s = **sandbox;
  if (needs == Needs::kRunningGuest && s.record.paused) {
    done(
        std::unexpected(error(Failure::kConflict, "sandbox " + id + " is paused: POST /sandboxes/" +
                                                      id + "/resume first")));
    return;
  }
  if (auto room = check_room(caller); !room) {
    done(std::unexpected(room.error()));
    return;
  }
  // Shared: the task's completion calls it, or this does when the task cannot start.
  auto finish = std::make_shared<Done>(std::move(done));
  auto succeeded = std::make_shared<bool>(false);
  const uint64_t key = next_key_++;
  auto task = BackgroundTask::start(
      deps_.loop,
      [work = std::move(work), sockets = s.record.files, succeeded]() mutable {
        *succeeded = work(sockets);
      },
      [this, key, caller, id, finish, succeeded] {
        // This runs inside the task's own completion: it goes when this returns.
        const auto finished = std::move(running_.at(key));
        running_.erase(key);
        if (auto count = by_tenant_.find(caller.name);
            count != by_tenant_.end() && --count->second == 0) {
          by_tenant_.erase(count);
        }
        const Sandbox* ran_in = deps_.sandboxes.find(id);
        if (*succeeded || ran_in == nullptr || pidfd_exited(ran_in->pidfd.get())) {
          (*finish)(end_request(caller, id));
          return;
        }
        // It may have broken off because its VMM is dying: its end, which follows closely,
        // tells the client more (a guest crash, say) than a closed connection.
        auto later = deps_.loop.add_timer(
            kVmmEndGrace, [this, caller, id, finish] { (*finish)(end_request(caller, id)); });
        if (!later) {
          (*finish)(end_request(caller, id));
        }
      });
  if (!task) {
    (*finish)(std::unexpected(
        error(Failure::kUnavailable, "cannot run the request: " + task.error().message())));
    return;
  }
  running_.emplace(key, std::move(*task));
  ++by_tenant_[caller.name];
  ++s.agent_requests;
  s.last_request = Sandbox::Clock::now();
  deps_.leases.arm(s);  // no idle end while it runs
}

PoolResult<void> SandboxRequests::check_room(const Tenant& caller) const {
  if (running_.size() >= deps_.options.max_requests) {
    return std::unexpected(error(
        Failure::kFull, fmt::format("the pool runs {} requests (exec, copies, pause, resume, "
                                    "snapshot) at once, its most (--max-requests): try again later",
                                    running_.size())));
  }
  const auto count = by_tenant_.find(caller.name);
  if (count != by_tenant_.end() && count->second >= deps_.options.max_requests_per_tenant) {
    return std::unexpected(
        error(Failure::kQuota, fmt::format("you run {} requests (exec, copies, pause, resume, "
                                           "snapshot) at once, your most "
                                           "(--max-requests-per-tenant): wait for one to end",
                                           count->second)));
  }
  return {};
}

PoolResult<void> SandboxRequests::end_request(const Tenant& caller, const std::string& id) {
  if (const Sandbox* ended = deps_.sandboxes.find(id);
      ended != nullptr && pidfd_exited(ended->pidfd.get())) {
    deps_.lifecycle.on_exit(id);  // before its pidfd's watch: the answer says how it ended
  }
  Sandbox* s = deps_.sandboxes.find(id);
  if (s != nullptr) {
    --s->agent_requests;
    // After the request: one longer than the idle timeout is no sign of a client gone.
    s->last_request = Sandbox::Clock::now();
  }
  if (s == nullptr || s->record.state != SandboxState::kInUse) {
    return std::unexpected(deps_.sandboxes.gone(caller, id));
  }
  deps_.leases.arm(*s);
  return {};
}

// An agent request that failed in a sandbox still in use is the guest's or the VMM's (502);
// one whose sandbox was released, expired or lost meanwhile says that instead.
PoolError SandboxRequests::failure(const std::string& id, const std::string& what, const Error& e,
                                   const PoolResult<void>& still_in_use) const {
  return still_in_use
             ? error(Failure::kAgentFailed, what + " sandbox " + id + " failed: " + e.message())
             : still_in_use.error();
}

void SandboxRequests::exec(const Tenant& caller, const std::string& id, ExecCall call,
                           PoolAnswer answer) {
  auto outcome = std::make_shared<Result<ExecOutcome>>(fail("the exec did not run"));
  run(
      caller, id,
      [outcome, call = std::move(call)](const SandboxFiles& sockets) {
        *outcome = exec_in_sandbox(sockets.vsock, call);
        return outcome->has_value();
      },
      [this, id, outcome, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*outcome) {
          answer(std::unexpected(failure(id, "exec in", outcome->error(), still_in_use)));
          return;
        }
        answer(exec_outcome_json(**outcome));
      });
}

void SandboxRequests::write_file(const Tenant& caller, const std::string& id,
                                 const std::string& guest_path, GuestFile file,
                                 std::move_only_function<void(PoolResult<void>)> answer) {
  auto written = std::make_shared<Status>(fail("the copy did not run"));
  run(
      caller, id,
      [written, guest_path, file = std::move(file)](const SandboxFiles& sockets) {
        *written = write_guest_file(sockets.vsock, guest_path, file);
        return written->has_value();
      },
      [this, id, written, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*written) {
          answer(std::unexpected(failure(id, "copy into", written->error(), still_in_use)));
          return;
        }
        answer({});
      });
}

void SandboxRequests::read_file(const Tenant& caller, const std::string& id,
                                const std::string& guest_path,
                                std::move_only_function<void(PoolResult<GuestFile>)> answer) {
  auto read = std::make_shared<Result<GuestFile>>(fail("the copy did not run"));
  run(
      caller, id,
      [read, guest_path](const SandboxFiles& sockets) {
        *read = read_guest_file(sockets.vsock, guest_path);
        return read->has_value();
      },
      [this, id, read, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*read) {
          answer(std::unexpected(failure(id, "copy out of", read->error(), still_in_use)));
          return;
        }
        answer(std::move(**read));
      });
}

void SandboxRequests::agent(const Tenant& caller, const std::string& id, AgentWork work,
                            std::move_only_function<void(PoolResult<void>)> done) {
  run(
      caller, id,
      [work = std::move(work)](const SandboxFiles& sockets) mutable { return work(sockets.vsock); },
      std::move(done));
}

PoolResult<Sandbox*> SandboxRequests::with_api(const Tenant& caller, const std::string& id) {
  Sandbox* s = DSEC_TRY(deps_.sandboxes.in_use(caller, id));
  if (s->record.files.api.empty()) {
    return std::unexpected(
        error(Failure::kConflict,
              "sandbox " + id +
                  " was started by a daemon whose clones had no API socket: it cannot be "
                  "paused or snapshotted; release it and acquire another"));
  }
  return s;
}

void SandboxRequests::set_paused(const Tenant& caller, const std::string& id, bool paused,
                                 PoolAnswer answer) {
  if (auto s = with_api(caller, id); !s) {
    answer(std::unexpected(s.error()));
    return;
  }
  auto done = std::make_shared<Status>(fail("the request did not run"));
  run(
      caller, id,
      [done, paused](const SandboxFiles& sockets) {
        *done = set_sandbox_paused(sockets.api, paused);
        return done->has_value();
      },
      [this, id, paused, done, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*done) {
          answer(std::unexpected(
              failure(id, paused ? "pausing" : "resuming", done->error(), still_in_use)));
          return;
        }
        if (!still_in_use) {
          answer(std::unexpected(still_in_use.error()));
          return;
        }
        Sandbox& s = *deps_.sandboxes.find(id);
        s.record.paused = paused;
        s.failed_checks = 0;  // a check that failed while it paused says nothing
        deps_.resources.persist(s);
        spdlog::info("pool: {} {}", id, paused ? "paused" : "resumed");
        answer(SandboxTable::view(s));
      },
      Needs::kVmmOnly);
}

void SandboxRequests::snapshot(const Tenant& caller, const std::string& id, const std::string& name,
                               PoolAnswer answer) {
  auto sandbox = with_api(caller, id);
  if (!sandbox) {
    answer(std::unexpected(sandbox.error()));
    return;
  }
  if (!caller.is_operator) {
    // After the owner's check: another tenant learns nothing of the sandbox from it.
    answer(std::unexpected(error(Failure::kForbidden,
                                 "a snapshot is the operator's: it adds an image to the daemon's "
                                 "image store, which every tenant's sandboxes may come from")));
    return;
  }
  const PoolImage* image = deps_.images.find((*sandbox)->record.image);
  // The memory file is the guest's RAM, the same as its image's.
  auto staged = deps_.store.stage(name, image == nullptr ? 0 : image->guest_bytes);
  if (!staged) {
    answer(std::unexpected(staged.error()));
    return;
  }
  const int target = staged->dir_fd();
  // Held by the answer, which runs on the loop's thread: the staging directory is removed, or
  // renamed to `name`, there.
  auto staging = std::make_shared<StagedImage>(std::move(*staged));
  const bool paused = (*sandbox)->record.paused;
  const bool jailed = (*sandbox)->jail_id.has_value();
  const std::string sandbox_dir = deps_.state.sandbox_dir(id);
  ++(*sandbox)->snapshots;  // a long one must not read as a hung sandbox
  auto done = std::make_shared<Status>(fail("the snapshot did not run"));
  run(
      caller, id,
      [done, sandbox_dir, jailed, paused, target](const SandboxFiles& sockets) {
        *done = snapshot_sandbox(sockets.api, sandbox_dir, jailed, paused, target);
        return done->has_value();
      },
      [this, id, name, done, staging,
       answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (Sandbox* s = deps_.sandboxes.find(id)) {
          --s->snapshots;
          s->failed_checks = 0;
        }
        if (!*done) {
          answer(std::unexpected(failure(id, "a snapshot of", done->error(), still_in_use)));
          return;
        }
        if (auto committed = staging->commit(); !committed) {
          answer(std::unexpected(committed.error()));
          return;
        }
        spdlog::info("pool: {} snapshotted as image {} in {}", id, name, deps_.store.path());
        answer(nlohmann::json{{"id", id}, {"name", name}});
      },
      Needs::kVmmOnly);
}

}  // namespace dsec::pool
