// For tests: a whole file as a string, for comparisons and failure messages.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace dsec::test {

// The file's bytes; empty if it is empty or cannot be read. (Not `out << in.rdbuf()`:
// an empty file sets failbit on `out`, which then drops everything written after it.)
inline std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  return text;
}

// The last `lines` lines of `text` (all of it if it has no more), saying how many came
// before them.
inline std::string text_tail(const std::string& text, size_t lines) {
  // Back from the end over `lines` line breaks; a final newline ends the last line.
  size_t start = text.size();
  if (start > 0 && text[start - 1] == '\n') --start;
  for (size_t n = 0; n < lines; ++n) {
    const size_t nl = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
    if (nl == std::string::npos) return text;
    start = nl;
  }
  const auto before =
      std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(start) + 1, '\n');
  return "[... " + std::to_string(before) + " earlier lines left out]\n" + text.substr(start + 1);
}

// The file's text under a heading, saying so when it is empty or missing: its last 40
// lines, where a stalled guest's console and the VMM's state dump end (CI's excerpt of a
// failure keeps only so many lines), or the whole of it with DSEC_TEST_WHOLE_LOGS=1.
inline std::string file_section(const std::string& heading, const std::filesystem::path& path) {
  std::string text = "--- " + heading + " (" + path.string() + ")\n";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return text + "(no such file)\n";
  }
  std::string body = file_text(path);
  if (body.empty()) {
    return text + "(empty)\n";
  }
  const char* whole = std::getenv("DSEC_TEST_WHOLE_LOGS");
  if (whole == nullptr || std::string(whole) != "1") {
    body = text_tail(body, 40);
  }
  return text + body + (body.back() == '\n' ? "" : "\n");
}

}  // namespace dsec::test
