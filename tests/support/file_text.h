// For tests: a whole file as a string, for comparisons and failure messages.
#pragma once

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

// The file's text under a heading, saying so when it is empty or missing.
inline std::string file_section(const std::string& heading, const std::filesystem::path& path) {
  std::string text = "--- " + heading + " (" + path.string() + ")\n";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return text + "(no such file)\n";
  }
  const std::string body = file_text(path);
  if (body.empty()) {
    return text + "(empty)\n";
  }
  return text + body + (body.back() == '\n' ? "" : "\n");
}

}  // namespace dsec::test
