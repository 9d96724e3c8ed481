#include "sdk/host_files.h"

#include <charconv>
#include <fstream>
#include <string_view>

namespace dsec::sdk::detail {
namespace {

constexpr std::streamoff kMaxTailBytes = std::streamoff{64} * 1024;

}  // namespace

std::string last_lines(const std::string& path, size_t max_lines) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || max_lines == 0) {
    return {};
  }
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - kMaxTailBytes);
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (!text.empty() && text.back() == '\n') {
    text.pop_back();
  }
  if (text.empty()) {
    return {};
  }
  size_t begin = text.size();
  for (size_t lines = 0; lines < max_lines && begin != std::string::npos && begin > 0; ++lines) {
    begin = text.rfind('\n', begin - 1);
  }
  return begin == std::string::npos ? text : text.substr(begin + 1);
}

dsec::Result<mode_t> process_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    constexpr std::string_view kKey = "Umask:";
    if (line.starts_with(kKey)) {
      const auto digits = line.find_first_not_of(" \t", kKey.size());
      unsigned mask = 0;
      if (digits == std::string::npos ||
          std::from_chars(line.data() + digits, line.data() + line.size(), mask, 8).ec !=
              std::errc()) {
        return fail("cannot read the umask in /proc/self/status: '" + line + "'");
      }
      return static_cast<mode_t>(mask);
    }
  }
  return fail("no Umask line in /proc/self/status", "is /proc mounted? Linux 4.7 or newer");
}

}  // namespace dsec::sdk::detail
