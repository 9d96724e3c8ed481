// What each clone holds on the host, taken when it is launched and given back when it is
// removed: its jail id (its uid and gid), its directory and files in the state directory,
// its record there (state_records.h), and what the launcher keeps for it (a jailed clone's
// cgroup, which may stay busy a moment after its VMM ended: removed again every half
// second until it goes).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "vmm/io/event_loop.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/jail_ids.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/state_records.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::pool {

class CloneResources {
 public:
  // `jail_ids`: none when clones run unjailed (--no-jail).
  CloneResources(io::EventLoop& loop, const StateDir& state, std::unique_ptr<VmmLauncher> launcher,
                 const std::optional<JailIdRange>& jail_ids);
  CloneResources(const CloneResources&) = delete;
  CloneResources& operator=(const CloneResources&) = delete;
  ~CloneResources();

  // A uid and gid for a new clone (kFull when every one is taken); none when unjailed.
  PoolResult<std::optional<uint32_t>> take_jail_id();
  // Makes clone `id`'s directory and has the launcher start its VMM from `image`, as
  // `jail_id`. What it took, `jail_id` too, is given back when that fails.
  Result<LaunchedVmm> launch(const std::string& id, const ImageFiles& image,
                             std::optional<uint32_t> jail_id);
  // Reaps the VMM of `sandbox` if it has ended (never waits), and says how it ended.
  ProcessEnd reap(const Sandbox& sandbox);
  // Whether the OOM killer of the ended, jailed `sandbox`'s cgroup killed it; before release.
  bool oom_killed(const Sandbox& sandbox);
  // Writes the sandbox's record, for a daemon started again.
  void persist(const Sandbox& sandbox);
  // Gives back everything `sandbox` held; its VMM has ended.
  void release(const Sandbox& sandbox);
  // The same for a sandbox whose VMM ended while the daemon was away.
  void release_dead(const SandboxRecord& record);
  // The uid of adopted sandbox `id` (its directory's owner), taken again; none when it is
  // not jailed, or another adopted clone has it.
  std::optional<uint32_t> adopt_jail_id(const std::string& id);
  // Blocking, at shutdown: removes what the launcher left, trying for two seconds.
  void remove_left_now();
  void stop_cleanup();

 private:
  // Asks the launcher to remove what it left every half second until it did.
  void schedule_cleanup();

  io::EventLoop& loop_;
  const StateDir& state_;
  std::unique_ptr<VmmLauncher> launcher_;
  std::optional<JailIds> jail_ids_;  // none: --no-jail
  std::optional<io::TimerId> cleanup_timer_;
};

}  // namespace dsec::pool
