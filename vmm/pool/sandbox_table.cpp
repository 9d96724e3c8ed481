#include "vmm/pool/sandbox_table.h"

#include <algorithm>

#include "vmm/network/network_json.h"

namespace dsec::pool {
namespace {

// How many ended sandboxes the pool remembers, to tell a client why its id is gone.
constexpr size_t kMaxEnded = 1024;

}  // namespace

int64_t wall_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Sandbox* SandboxTable::find(const std::string& id) const {
  const auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second.get();
}

Sandbox& SandboxTable::add(std::unique_ptr<Sandbox> sandbox) {
  Sandbox& s = *sandbox;
  sandboxes_.emplace(s.record.id, std::move(sandbox));
  return s;
}

void SandboxTable::erase(const std::string& id) {
  sandboxes_.erase(id);
}

uint32_t SandboxTable::count(const std::string& image, SandboxState state) const {
  return static_cast<uint32_t>(std::count_if(sandboxes_.begin(), sandboxes_.end(), [&](auto& s) {
    return s.second->record.image == image && s.second->record.state == state;
  }));
}

uint32_t SandboxTable::clones_of(const std::string& image) const {
  return count(image, SandboxState::kStarting) + count(image, SandboxState::kReady) +
         count(image, SandboxState::kInUse);
}

bool SandboxTable::sees(const Tenant& caller, const std::string& owner) {
  return owner == caller.name || (owner.empty() && caller.is_operator);
}

PoolResult<Sandbox*> SandboxTable::in_use(const Tenant& caller, const std::string& id) const {
  Sandbox* s = find(id);
  if (s == nullptr || !sees(caller, s->record.owner)) {
    return std::unexpected(gone(caller, id));
  }
  if (s->record.state == SandboxState::kStopping) {
    return std::unexpected(gone(caller, id));  // released, expired, or not serving: it says which
  }
  if (s->record.state != SandboxState::kInUse) {
    return std::unexpected(error(
        Failure::kConflict, "sandbox " + id + " is " + std::string(state_name(s->record.state)) +
                                ", not acquired: POST /sandboxes to acquire one"));
  }
  return s;
}

PoolError SandboxTable::gone(const Tenant& caller, const std::string& id) const {
  for (const auto& ended : ended_) {
    if (ended.id == id && sees(caller, ended.owner)) {
      return error(Failure::kGone, "sandbox " + id + " is gone: " + ended.why);
    }
  }
  return error(Failure::kNotFound, "no sandbox " + id + ": GET /sandboxes lists them");
}

void SandboxTable::remember_end(const SandboxRecord& record, std::string why) {
  ended_.push_back(Ended{.id = record.id, .owner = record.owner, .why = std::move(why)});
  if (ended_.size() > kMaxEnded) {
    ended_.pop_front();
  }
}

void SandboxTable::add_to_end(const std::string& id, const std::string& more) {
  for (auto& ended : ended_) {
    if (ended.id == id) {
      ended.why += more;
    }
  }
}

nlohmann::json SandboxTable::view(const Sandbox& s) {
  nlohmann::json view = {{"id", s.record.id},
                         {"image", s.record.image},
                         {"state", state_name(s.record.state)},
                         {"pid", s.record.process.pid},
                         {"vsock", s.record.files.vsock}};
  if (s.record.expires_at_ms > 0) {
    view["expires_in_ms"] = std::max<int64_t>(0, s.record.expires_at_ms - wall_ms_now());
  }
  if (s.record.state == SandboxState::kInUse && s.record.idle_timeout_ms > 0) {
    view["idle_timeout_ms"] = s.record.idle_timeout_ms;
  }
  if (s.record.state == SandboxState::kInUse) {
    view["paused"] = s.record.paused;
  }
  if (s.record.network_slot) {
    view["network"] = {{"address", s.network_address},
                       {"egress", network::egress_json(s.record.egress)}};
  }
  return view;
}

nlohmann::json SandboxTable::list_json(const Tenant& caller) const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [id, s] : sandboxes_) {
    if (sees(caller, s->record.owner)) {
      list.push_back(view(*s));
    }
  }
  return {{"sandboxes", list}};
}

}  // namespace dsec::pool
