#include "vmm/mmds/mmds.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace dsec::mmds {
namespace {

constexpr std::string_view kTokenPath = "/latest/api/token";
// Firecracker's names, then EC2 IMDS's.
constexpr std::string_view kTokenHeaders[] = {"x-metadata-token", "x-aws-ec2-metadata-token"};
constexpr std::string_view kTtlHeaders[] = {"x-metadata-token-ttl-seconds",
                                            "x-aws-ec2-metadata-token-ttl-seconds"};

template <size_t N>
std::string_view first_header(const GuestRequest& request, const std::string_view (&names)[N],
                              bool& present) {
  for (const auto name : names) {
    for (const auto& [key, value] : request.headers) {
      if (key == name) {
        present = true;
        return value;
      }
    }
  }
  present = false;
  return {};
}

GuestResponse reply(int status, std::string body) {
  return GuestResponse{.status = status, .body = std::move(body)};
}

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 501:
      return "Not Implemented";
    default:
      return "Error";
  }
}

}  // namespace

std::string_view GuestRequest::header(std::string_view lower_name) const {
  for (const auto& [key, value] : headers) {
    if (key == lower_name) {
      return value;
    }
  }
  return {};
}

std::string GuestResponse::serialize() const {
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\nServer: Firecracker API\r\n", status, reason(status));
  if (!allow.empty()) {
    out += fmt::format("Allow: {}\r\n", allow);
  }
  out += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n\r\n", content_type, body.size());
  out += body;
  return out;
}

std::string target_path(std::string_view target) {
  for (const std::string_view scheme : {"http://", "https://"}) {
    if (target.starts_with(scheme)) {
      target.remove_prefix(scheme.size());
      const size_t slash = target.find('/');
      target = slash == std::string_view::npos ? std::string_view() : target.substr(slash);
      break;
    }
  }
  return std::string(target.substr(0, target.find_first_of("?#")));
}

void Mmds::configure(MmdsVersion version, bool imds_compat) {
  const std::lock_guard lock(mutex_);
  version_ = version;
  imds_compat_ = imds_compat;
}

std::expected<void, UpdateRefusal> Mmds::put(std::string_view body) {
  const std::lock_guard lock(mutex_);
  return store_.put(body);
}

std::expected<void, UpdateRefusal> Mmds::patch(std::string_view body) {
  const std::lock_guard lock(mutex_);
  return store_.patch(body);
}

nlohmann::json Mmds::value() const {
  const std::lock_guard lock(mutex_);
  return store_.value();
}

GuestResponse Mmds::answer(const GuestRequest& request, Clock::time_point now) {
  const std::string path = target_path(request.target);
  if (path.empty() || path.front() != '/') {
    return reply(400, "Invalid URI.");
  }
  const std::lock_guard lock(mutex_);
  if (request.method == "GET") {
    return answer_get(request, path, now);
  }
  if (request.method == "PUT") {
    return answer_put(request, path, now);
  }
  GuestResponse response = reply(405, "Not allowed HTTP method.");
  response.allow = "GET, PUT";
  return response;
}

GuestResponse Mmds::answer_get(const GuestRequest& request, const std::string& path,
                               Clock::time_point now) const {
  bool has_token = false;
  const std::string_view token = first_header(request, kTokenHeaders, has_token);
  if (!has_token && version_ == MmdsVersion::kV2) {
    return reply(401,
                 "No MMDS token provided. Use `X-metadata-token` header to specify the session "
                 "token.");
  }
  if (has_token && !tokens_.is_valid(token, now)) {
    return reply(401, "MMDS token not valid.");
  }
  const bool json =
      !imds_compat_ && request.header("accept").find("application/json") != std::string::npos;
  auto value = store_.get(path, json ? OutputFormat::kJson : OutputFormat::kImds);
  if (!value) {
    if (value.error() == GetError::kNotFound) {
      return reply(404, fmt::format("Resource not found: {}.", path));
    }
    return reply(501, "Cannot retrieve value. The value has an unsupported type.");
  }
  GuestResponse response = reply(200, std::move(*value));
  if (json) {
    response.content_type = "application/json";
  }
  return response;
}

GuestResponse Mmds::answer_put(const GuestRequest& request, const std::string& path,
                               Clock::time_point now) {
  // As EC2 and Firecracker: a token is never handed through a proxy.
  if (std::any_of(request.headers.begin(), request.headers.end(),
                  [](const auto& h) { return h.first == "x-forwarded-for"; })) {
    return reply(400, "Invalid header. Reason: Unsupported header name. Key: X-Forwarded-For");
  }
  if (collapse_slashes(path) != kTokenPath) {
    return reply(404, fmt::format("Resource not found: {}.", path));
  }
  bool has_ttl = false;
  const std::string_view ttl_text = first_header(request, kTtlHeaders, has_ttl);
  if (!has_ttl) {
    return reply(400,
                 "Token time to live value not found. Use `X-metadata-token-ttl-seconds` header "
                 "to specify the token's lifetime.");
  }
  uint32_t ttl = 0;
  const auto [end, ec] = std::from_chars(ttl_text.data(), ttl_text.data() + ttl_text.size(), ttl);
  if (ttl_text.empty() || ec != std::errc() || end != ttl_text.data() + ttl_text.size()) {
    return reply(400, fmt::format("Invalid header. Reason: Invalid value. "
                                  "Key:X-metadata-token-ttl-seconds; Value:{}",
                                  ttl_text));
  }
  auto token = tokens_.generate(ttl, now);
  if (!token) {
    return reply(400, token.error().message());
  }
  return reply(200, std::move(*token));
}

}  // namespace dsec::mmds
