// The pool's requests that run on a thread of their own (background_task.h), each against
// one acquired sandbox: exec and files through its agent, pause, resume and snapshot
// through its VMM's API socket.
#include <spdlog/spdlog.h>

#include "vmm/pool/pool.h"
#include "vmm/pool/sandbox_control.h"

namespace dsec::pool {
namespace {

// How long a failed agent request's answer waits for its VMM's end, in case that is why.
constexpr std::chrono::milliseconds kVmmEndGrace{500};

}  // namespace

void Pool::run_agent_request(const Tenant& caller, const std::string& id, AgentWork work,
                             AgentDone done, Needs needs) {
  auto sandbox = sandboxes_.in_use(caller, id);
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
  if (auto room = check_request_room(caller); !room) {
    done(std::unexpected(room.error()));
    return;
  }
  // Shared: the task's completion calls it, or this does when the task cannot start.
  auto finish = std::make_shared<AgentDone>(std::move(done));
  auto succeeded = std::make_shared<bool>(false);
  const uint64_t key = next_request_++;
  auto task = BackgroundTask::start(
      loop_,
      [work = std::move(work), sockets = s.record.files, succeeded]() mutable {
        *succeeded = work(sockets);
      },
      [this, key, caller, id, finish, succeeded] {
        // This runs inside the task's own completion: it goes when this returns.
        const auto finished = std::move(agent_requests_.at(key));
        agent_requests_.erase(key);
        if (auto count = requests_by_tenant_.find(caller.name);
            count != requests_by_tenant_.end() && --count->second == 0) {
          requests_by_tenant_.erase(count);
        }
        const Sandbox* ran_in = sandboxes_.find(id);
        if (*succeeded || ran_in == nullptr || pidfd_exited(ran_in->pidfd.get())) {
          (*finish)(end_agent_request(caller, id));
          return;
        }
        // It may have broken off because its VMM is dying: its end, which follows closely,
        // tells the client more (a guest crash, say) than a closed connection.
        auto later = loop_.add_timer(
            kVmmEndGrace, [this, caller, id, finish] { (*finish)(end_agent_request(caller, id)); });
        if (!later) {
          (*finish)(end_agent_request(caller, id));
        }
      });
  if (!task) {
    (*finish)(std::unexpected(
        error(Failure::kUnavailable, "cannot run the request: " + task.error().message())));
    return;
  }
  agent_requests_.emplace(key, std::move(*task));
  ++requests_by_tenant_[caller.name];
  ++s.agent_requests;
  s.last_request = Clock::now();
  arm_lease(s);  // no idle end while it runs
}

PoolResult<void> Pool::check_request_room(const Tenant& caller) const {
  if (agent_requests_.size() >= options_.max_requests) {
    return std::unexpected(error(
        Failure::kFull, fmt::format("the pool runs {} requests (exec, copies, pause, resume, "
                                    "snapshot) at once, its most (--max-requests): try again later",
                                    agent_requests_.size())));
  }
  const auto count = requests_by_tenant_.find(caller.name);
  if (count != requests_by_tenant_.end() && count->second >= options_.max_requests_per_tenant) {
    return std::unexpected(
        error(Failure::kQuota, fmt::format("you run {} requests (exec, copies, pause, resume, "
                                           "snapshot) at once, your most "
                                           "(--max-requests-per-tenant): wait for one to end",
                                           count->second)));
  }
  return {};
}

PoolResult<void> Pool::end_agent_request(const Tenant& caller, const std::string& id) {
  if (const Sandbox* ended = sandboxes_.find(id);
      ended != nullptr && pidfd_exited(ended->pidfd.get())) {
    on_exit(id);  // before its pidfd's watch: the answer says how it ended
  }
  Sandbox* s = sandboxes_.find(id);
  if (s != nullptr) {
    --s->agent_requests;
    // After the request: one longer than the idle timeout is no sign of a client gone.
    s->last_request = Clock::now();
  }
  if (s == nullptr || s->record.state != SandboxState::kInUse) {
    return std::unexpected(sandboxes_.gone(caller, id));
  }
  arm_lease(*s);
  return {};
}

// An agent request that failed in a sandbox still in use is the guest's or the VMM's (502);
// one whose sandbox was released, expired or lost meanwhile says that instead.
PoolError Pool::agent_failure(const std::string& id, const std::string& what, const Error& e,
                              const PoolResult<void>& still_in_use) const {
  return still_in_use
             ? error(Failure::kAgentFailed, what + " sandbox " + id + " failed: " + e.message())
             : still_in_use.error();
}

void Pool::exec(const Tenant& caller, const std::string& id, ExecCall call, Answer answer) {
  auto outcome = std::make_shared<Result<ExecOutcome>>(fail("the exec did not run"));
  run_agent_request(
      caller, id,
      [outcome, call = std::move(call)](const SandboxFiles& sockets) {
        *outcome = exec_in_sandbox(sockets.vsock, call);
        return outcome->has_value();
      },
      [this, id, outcome, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*outcome) {
          answer(std::unexpected(agent_failure(id, "exec in", outcome->error(), still_in_use)));
          return;
        }
        answer(exec_outcome_json(**outcome));
      });
}

void Pool::write_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                      GuestFile file, std::move_only_function<void(PoolResult<void>)> answer) {
  auto written = std::make_shared<Status>(fail("the copy did not run"));
  run_agent_request(
      caller, id,
      [written, guest_path, file = std::move(file)](const SandboxFiles& sockets) {
        *written = write_guest_file(sockets.vsock, guest_path, file);
        return written->has_value();
      },
      [this, id, written, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*written) {
          answer(std::unexpected(agent_failure(id, "copy into", written->error(), still_in_use)));
          return;
        }
        answer({});
      });
}

void Pool::read_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                     std::move_only_function<void(PoolResult<GuestFile>)> answer) {
  auto read = std::make_shared<Result<GuestFile>>(fail("the copy did not run"));
  run_agent_request(
      caller, id,
      [read, guest_path](const SandboxFiles& sockets) {
        *read = read_guest_file(sockets.vsock, guest_path);
        return read->has_value();
      },
      [this, id, read, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*read) {
          answer(std::unexpected(agent_failure(id, "copy out of", read->error(), still_in_use)));
          return;
        }
        answer(std::move(**read));
      });
}

PoolResult<Sandbox*> Pool::with_api(const Tenant& caller, const std::string& id) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  if (s->record.files.api.empty()) {
    return std::unexpected(
        error(Failure::kConflict,
              "sandbox " + id +
                  " was started by a daemon whose clones had no API socket: it cannot be "
                  "paused or snapshotted; release it and acquire another"));
  }
  return s;
}

void Pool::pause(const Tenant& caller, const std::string& id, Answer answer) {
  set_paused(caller, id, true, std::move(answer));
}

void Pool::resume(const Tenant& caller, const std::string& id, Answer answer) {
  set_paused(caller, id, false, std::move(answer));
}

void Pool::set_paused(const Tenant& caller, const std::string& id, bool paused, Answer answer) {
  if (auto s = with_api(caller, id); !s) {
    answer(std::unexpected(s.error()));
    return;
  }
  auto done = std::make_shared<Status>(fail("the request did not run"));
  run_agent_request(
      caller, id,
      [done, paused](const SandboxFiles& sockets) {
        *done = set_sandbox_paused(sockets.api, paused);
        return done->has_value();
      },
      [this, id, paused, done, answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (!*done) {
          answer(std::unexpected(
              agent_failure(id, paused ? "pausing" : "resuming", done->error(), still_in_use)));
          return;
        }
        if (!still_in_use) {
          answer(std::unexpected(still_in_use.error()));
          return;
        }
        Sandbox& s = *sandboxes_.find(id);
        s.record.paused = paused;
        s.failed_checks = 0;  // a check that failed while it paused says nothing
        persist(s);
        spdlog::info("pool: {} {}", id, paused ? "paused" : "resumed");
        answer(SandboxTable::view(s));
      },
      Needs::kVmmOnly);
}

void Pool::snapshot(const Tenant& caller, const std::string& id, const std::string& name,
                    Answer answer) {
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
  const PoolImage* image = images_.find((*sandbox)->record.image);
  // The memory file is the guest's RAM, the same as its image's.
  auto staged = store_.stage(name, image == nullptr ? 0 : image->guest_bytes);
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
  const std::string sandbox_dir = state_.sandbox_dir(id);
  ++(*sandbox)->snapshots;  // a long one must not read as a hung sandbox
  auto done = std::make_shared<Status>(fail("the snapshot did not run"));
  run_agent_request(
      caller, id,
      [done, sandbox_dir, jailed, paused, target](const SandboxFiles& sockets) {
        *done = snapshot_sandbox(sockets.api, sandbox_dir, jailed, paused, target);
        return done->has_value();
      },
      [this, id, name, done, staging,
       answer = std::move(answer)](PoolResult<void> still_in_use) mutable {
        if (Sandbox* s = sandboxes_.find(id)) {
          --s->snapshots;
          s->failed_checks = 0;
        }
        if (!*done) {
          answer(std::unexpected(agent_failure(id, "a snapshot of", done->error(), still_in_use)));
          return;
        }
        if (auto committed = staging->commit(); !committed) {
          answer(std::unexpected(committed.error()));
          return;
        }
        spdlog::info("pool: {} snapshotted as image {} in {}", id, name, store_.path());
        answer(nlohmann::json{{"id", id}, {"name", name}});
      },
      Needs::kVmmOnly);
}

}  // namespace dsec::pool
