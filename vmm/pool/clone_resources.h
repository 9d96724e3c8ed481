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
#include "vmm/pool/pool_images.h"
#include "vmm/pool/pool_networks.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/state_records.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::pool {

class CloneResources {
 public:
  // `jail_ids`: none when clones run unjailed (--no-jail); `networks`: none when the pool
  // makes no clone networks.
  CloneResources(io::EventLoop& loop, const StateDir& state, std::unique_ptr<VmmLauncher> launcher,
                 const std::optional<JailIdRange>& jail_ids,
                 std::unique_ptr<PoolNetworks> networks = nullptr);
  CloneResources(const CloneResources&) = delete;
  CloneResources& operator=(const CloneResources&) = delete;
  ~CloneResources();

  // A uid and gid for a new clone (kFull when every one is taken); none when unjailed.
  PoolResult<std::optional<uint32_t>> take_jail_id();
  // A network made for a new clone of `image` with `egress` (pool_networks.h), its slot;
  // none when the image has no network device.
  PoolResult<std::optional<uint32_t>> take_network(const PoolImage& image,
                                                   const network::EgressPolicy& egress);
  // Gives back what a clone that was never launched took.
  void give_back(std::optional<uint32_t> jail_id, std::optional<uint32_t> network_slot);
  // Makes clone `id`'s directory and has the launcher start its VMM from `files`, as
  // `jail_id`, in `network_slot`'s network (the TAP `image` names). What it took, `jail_id`
  // and the network too, is given back when that fails.
  Result<LaunchedVmm> launch(const std::string& id, const ImageFiles& files, const PoolImage& image,
                             std::optional<uint32_t> jail_id, std::optional<uint32_t> network_slot);
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
  // Takes over the network of adopted `record`'s clone of `image`, with the record's egress
  // and its forwarded ports (each where it was; one that cannot be is logged).
  Status adopt_network(const SandboxRecord& record, const PoolImage& image);
  // Removes what a daemon that ended left of network `slot`, whose clone is not kept.
  void remove_network_left(uint32_t slot);
  // After recovery: removes the networks of this pool's range that no record named.
  void remove_unknown_networks();
  // Replaces the egress policy of `sandbox`'s network and records it; kInvalid when it has
  // none, kUnavailable when it could not be set (the old one holds then).
  PoolResult<void> set_egress(Sandbox& sandbox, const network::EgressPolicy& policy);
  // A host port forwarded to `guest_port` of `sandbox`'s guest; kInvalid when it has no
  // network, kUnavailable when it could not be made.
  // Recorded in the sandbox's record (persisted), so that a daemon started again forwards
  // it again where it was (adopt_network).
  PoolResult<uint16_t> forward_port(Sandbox& sandbox, uint16_t guest_port);
  // What crossed `sandbox`'s network; none when it has none or they cannot be read.
  std::optional<network::CloneNetworkCounters> network_counters(const Sandbox& sandbox);
  // The namespace's veth address of a sandbox with a network; empty otherwise.
  std::string network_address(const SandboxRecord& record) const;
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
  std::unique_ptr<PoolNetworks> networks_;
  std::optional<io::TimerId> cleanup_timer_;
};

}  // namespace dsec::pool
