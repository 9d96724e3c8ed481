#include "vmm/pool/jail_ids.h"

#include <charconv>
#include <limits>

namespace dsec::pool {
namespace {

bool parse_id(std::string_view text, uint32_t& value) {
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && ptr == end;
}

}  // namespace

Result<JailIdRange> parse_jail_id_range(const std::string& text) {
  const auto dash = text.find('-');
  JailIdRange range;
  if (dash == std::string::npos || !parse_id(std::string_view(text).substr(0, dash), range.first) ||
      !parse_id(std::string_view(text).substr(dash + 1), range.last)) {
    return fail("--jail-ids " + text + " is not FIRST-LAST", "give two ids, e.g. 200000-265535");
  }
  if (range.first == 0 || range.first > range.last ||
      range.last == std::numeric_limits<uint32_t>::max()) {
    return fail("--jail-ids " + text + " is no range of unprivileged ids",
                "give 0 < FIRST <= LAST < 4294967295, ids that no user or service of the host "
                "owns");
  }
  return range;
}

Result<uint32_t> JailIds::allocate() {
  const uint64_t size = uint64_t{range_.last} - range_.first + 1;
  if (used_.size() >= size) {
    return fail("every id of --jail-ids " + std::to_string(range_.first) + "-" +
                    std::to_string(range_.last) + " is a live clone's",
                "release sandboxes, or give the daemon a wider --jail-ids range");
  }
  uint32_t id = next_;
  while (used_.contains(id)) {
    id = id == range_.last ? range_.first : id + 1;
  }
  used_.insert(id);
  next_ = id == range_.last ? range_.first : id + 1;
  return id;
}

bool JailIds::adopt(uint32_t id) {
  if (id < range_.first || id > range_.last) {
    return false;
  }
  return used_.insert(id).second;
}

void JailIds::release(uint32_t id) {
  used_.erase(id);
}

}  // namespace dsec::pool
