#include "vmm/pool/log_tail.h"

#include <deque>
#include <fstream>
#include <string_view>

namespace dsec::pool {

std::string log_tail(const std::string& path, size_t max_lines) {
  constexpr std::streamoff kMaxTailBytes = 8192;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    return {};
  }
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > kMaxTailBytes ? size - kMaxTailBytes : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  // A tail that starts mid-file starts mid-line: that partial line goes.
  size_t first = 0;
  if (start > 0) {
    const size_t newline = text.find('\n');
    first = newline == std::string::npos ? text.size() : newline + 1;
  }
  std::deque<std::string_view> lines;
  std::string_view rest = std::string_view(text).substr(first);
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    lines.push_back(rest.substr(0, newline));
    rest = newline == std::string_view::npos ? std::string_view{} : rest.substr(newline + 1);
    if (lines.size() > max_lines) {
      lines.pop_front();
    }
  }
  std::string tail;
  for (const auto line : lines) {
    tail.append(line).push_back('\n');
  }
  return tail;
}

}  // namespace dsec::pool
