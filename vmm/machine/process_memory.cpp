#include "vmm/machine/process_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace dsec::machine {
namespace {

bool parse_hex(std::string_view text, uint64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// "7f00-7f10 rw-p ..." -> the address range, if the line is a mapping header.
bool parse_header(std::string_view line, uint64_t& start, uint64_t& end) {
  auto dash = line.find('-');
  auto space = line.find(' ');
  if (dash == std::string_view::npos || space == std::string_view::npos || dash > space) {
    return false;
  }
  return parse_hex(line.substr(0, dash), start) &&
         parse_hex(line.substr(dash + 1, space - dash - 1), end);
}

}  // namespace

uint64_t rss_kib_excluding(std::string_view smaps,
                           const std::vector<std::pair<uint64_t, uint64_t>>& excluded) {
  uint64_t total = 0;
  bool skip = false;
  while (!smaps.empty()) {
    auto eol = smaps.find('\n');
    std::string_view line = smaps.substr(0, eol);
    smaps = eol == std::string_view::npos ? std::string_view{} : smaps.substr(eol + 1);
    uint64_t start = 0;
    uint64_t end = 0;
    if (parse_header(line, start, end)) {
      skip = false;
      for (const auto& [lo, hi] : excluded) {
        if (start < hi && lo < end) {
          skip = true;
        }
      }
      continue;
    }
    if (!skip && line.starts_with("Rss:")) {
      std::string_view value = line.substr(4);
      while (!value.empty() && value.front() == ' ') {
        value.remove_prefix(1);
      }
      uint64_t kib = 0;
      std::from_chars(value.data(), value.data() + value.size(), kib);
      total += kib;
    }
  }
  return total;
}

Result<uint64_t> rss_kib_excluding(const std::vector<std::pair<uint64_t, uint64_t>>& excluded) {
  std::ifstream in("/proc/self/smaps");
  if (!in) {
    return fail_errno("reading /proc/self/smaps", errno);
  }
  std::stringstream text;
  text << in.rdbuf();
  return rss_kib_excluding(text.str(), excluded);
}

}  // namespace dsec::machine
