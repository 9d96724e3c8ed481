// The uids and gids the pool gives its jailed clones (docs/jail.md, "The pool's clones"): each live
// clone has one id of its own from the operator's range, as both its uid and its gid, so that no
// two clones can signal, ptrace or open each other's files. An id is free again once its
// clone ended and its directory was removed; the next clone gets the next free id after the
// last one handed out, so an id just freed is the last to be used again.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "vmm/common/error.h"

namespace dsec::pool {

struct JailIdRange {
  uint32_t first = 200000;  // above the ids a distribution gives users and services,
  uint32_t last = 265535;   // and 65,536 of them: one per clone a node could hold
  bool operator==(const JailIdRange&) const = default;
};

// Parses "FIRST-LAST" of --jail-ids: 0 < FIRST <= LAST < 4294967295 ((uid_t)-1 means "no
// change" to setresuid).
Result<JailIdRange> parse_jail_id_range(const std::string& text);

class JailIds {
 public:
  explicit JailIds(JailIdRange range) : range_(range), next_(range.first) {}

  const JailIdRange& range() const { return range_; }
  // A free id, now used; fails when every id of the range is used.
  Result<uint32_t> allocate();
  // Marks `id` used (a clone adopted after a restart). False when it is outside the range
  // (nothing to mark: the range does not hand it out) or used already.
  bool adopt(uint32_t id);
  // Frees `id`; an id not used is ignored.
  void release(uint32_t id);
  bool used(uint32_t id) const { return used_.contains(id); }
  size_t used_count() const { return used_.size(); }

 private:
  JailIdRange range_;
  uint32_t next_;  // where the search for a free id starts
  std::set<uint32_t> used_;
};

}  // namespace dsec::pool
