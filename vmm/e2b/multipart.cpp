#include "vmm/e2b/multipart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace dsec::e2b {
namespace {

// RFC 2046: a boundary is 1 to 70 characters.
constexpr size_t kMaxBoundary = 70;
constexpr size_t kMaxParts = 256;

std::string lower(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The value of parameter `key` in a header's value ("form-data; name=\"file\"").
std::string parameter(std::string_view header, std::string_view key) {
  const std::string lowered = lower(header);
  const std::string wanted = std::string(key) + "=";
  size_t at = 0;
  while ((at = lowered.find(wanted, at)) != std::string::npos) {
    if (at == 0 || lowered[at - 1] == ';' || lowered[at - 1] == ' ') {
      break;
    }
    at += wanted.size();
  }
  if (at == std::string::npos) {
    return {};
  }
  std::string_view value = header.substr(at + wanted.size());
  if (!value.empty() && value.front() == '"') {
    value.remove_prefix(1);
    return std::string(value.substr(0, value.find('"')));
  }
  return std::string(value.substr(0, value.find(';')));
}

}  // namespace

Result<std::string> multipart_boundary(std::string_view content_type) {
  if (!lower(content_type).starts_with("multipart/form-data")) {
    return fail("the body is not multipart/form-data");
  }
  std::string boundary = parameter(content_type, "boundary");
  if (boundary.empty() || boundary.size() > kMaxBoundary) {
    return fail(
        fmt::format("a multipart/form-data Content-Type needs a boundary of 1 to {} "
                    "characters",
                    kMaxBoundary));
  }
  return boundary;
}

Result<std::vector<FormPart>> parse_multipart(std::string_view body, std::string_view boundary) {
  const std::string delimiter = "--" + std::string(boundary);
  size_t at = body.find(delimiter);
  if (at == std::string_view::npos) {
    return fail("the multipart body holds no boundary line");
  }
  std::vector<FormPart> parts;
  while (true) {
    at += delimiter.size();
    if (body.substr(at, 2) == "--") {
      return parts;  // the closing delimiter
    }
    if (body.substr(at, 2) != "\r\n") {
      return fail(
          fmt::format("the multipart body's boundary at byte {} is not followed by a "
                      "line end",
                      at));
    }
    at += 2;
    const size_t headers_end = body.find("\r\n\r\n", at);
    if (headers_end == std::string_view::npos) {
      return fail(fmt::format("the multipart part at byte {} has no end to its headers", at));
    }
    FormPart part;
    std::string_view headers = body.substr(at, headers_end - at);
    while (!headers.empty()) {
      const size_t end = headers.find("\r\n");
      const std::string_view line = headers.substr(0, end);
      headers = end == std::string_view::npos ? std::string_view() : headers.substr(end + 2);
      if (lower(line.substr(0, line.find(':'))) == "content-disposition") {
        part.name = parameter(line, "name");
        part.filename = parameter(line, "filename");
      }
    }
    const size_t data_start = headers_end + 4;
    const size_t next = body.find("\r\n" + delimiter, data_start);
    if (next == std::string_view::npos) {
      return fail("the multipart body ends without its closing boundary");
    }
    part.data = std::string(body.substr(data_start, next - data_start));
    if (parts.size() == kMaxParts) {
      return fail(fmt::format("the multipart body holds more than {} parts", kMaxParts));
    }
    parts.push_back(std::move(part));
    at = next + 2;
  }
}

}  // namespace dsec::e2b
