// The pool's requests that run on a thread of their own (background_task.h), each against
// one acquired sandbox: exec and files through its agent, pause, resume and snapshot
// through its VMM's API socket. The loop serves other requests meanwhile; the sandbox's
// idle timeout waits while one runs. How many run at once is capped per tenant and in all
// (PoolOptions::max_requests_per_tenant, max_requests).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "vmm/io/event_loop.h"
#include "vmm/pool/background_task.h"
#include "vmm/pool/clone_resources.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/leases.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/pool_images.h"
#include "vmm/pool/pool_options.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/sandbox_exec.h"
#include "vmm/pool/sandbox_files.h"
#include "vmm/pool/sandbox_lifecycle.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/tenant.h"

namespace dsec::pool {

// What a sandbox's requests reach: the pool's pieces they read and change.
struct SandboxRequestsDeps {
  io::EventLoop& loop;
  const PoolOptions& options;
  const StateDir& state;
  ImageStore& store;
  SandboxTable& sandboxes;
  const PoolImages& images;
  SandboxLifecycle& lifecycle;
  CloneResources& resources;
  Leases& leases;
};

class SandboxRequests {
 public:
  explicit SandboxRequests(SandboxRequestsDeps deps) : deps_(deps) {}

  // Runs `call` in sandbox `id`; `answer` runs with the outcome (at once when the pool
  // refuses the request).
  void exec(const Tenant& caller, const std::string& id, ExecCall call, PoolAnswer answer);
  // Writes `file` to `guest_path` in sandbox `id`, or reads it, the same way.
  void write_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                  GuestFile file, std::move_only_function<void(PoolResult<void>)> answer);
  void read_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                 std::move_only_function<void(PoolResult<GuestFile>)> answer);
  // Runs `work` against sandbox `id`'s agent (given its vsock socket) on a thread of its own,
  // for a front that speaks another API (vmm/e2b); `done` runs after it with whether the
  // sandbox is still in use, or at once with why the pool refuses the request.
  using AgentWork = std::move_only_function<bool(const std::string& vsock)>;
  void agent(const Tenant& caller, const std::string& id, AgentWork work,
             std::move_only_function<void(PoolResult<void>)> done);
  // Stops or restarts the sandbox's vCPUs; the answer is the sandbox as GET shows it.
  void set_paused(const Tenant& caller, const std::string& id, bool paused, PoolAnswer answer);
  // Writes the sandbox's snapshot into the image store as image `name` (Pool::snapshot).
  void snapshot(const Tenant& caller, const std::string& id, const std::string& name,
                PoolAnswer answer);
  // At shutdown, once every VMM ended: their connections broke, and the threads end.
  void clear() { running_.clear(); }

 private:
  // A blocking request to sandbox `id`'s agent or VMM (given its sockets), run on a thread
  // of its own; `done` runs on the loop's thread after it, with whether the sandbox is
  // still in use (else why it is gone), or at once with why the pool refuses the request:
  // also when the sandbox is paused and the request `needs` its guest running.
  // `work` says whether the request succeeded.
  enum class Needs { kRunningGuest, kVmmOnly };
  using Work = std::move_only_function<bool(const SandboxFiles& sockets)>;
  using Done = std::move_only_function<void(PoolResult<void> still_in_use)>;
  void run(const Tenant& caller, const std::string& id, Work work, Done done,
           Needs needs = Needs::kRunningGuest);
  // Whether `caller` may start one more request on a thread of its own (kQuota, kFull).
  PoolResult<void> check_room(const Tenant& caller) const;
  PoolResult<void> end_request(const Tenant& caller, const std::string& id);
  PoolError failure(const std::string& id, const std::string& what, const Error& e,
                    const PoolResult<void>& still_in_use) const;
  // The sandbox `id` when `caller` holds it and its VMM has an API socket.
  PoolResult<Sandbox*> with_api(const Tenant& caller, const std::string& id);

  SandboxRequestsDeps deps_;
  // Running requests, by a key of their own, and how many each tenant runs.
  std::map<uint64_t, std::unique_ptr<BackgroundTask>> running_;
  std::map<std::string, uint32_t> by_tenant_;
  uint64_t next_key_ = 1;
};

}  // namespace dsec::pool
