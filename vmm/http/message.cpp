#include "vmm/http/message.h"

#include <fmt/format.h>

namespace dsec::http {
namespace {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "Payload Too Large";  // PUT /mmds over --mmds-size-limit
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

}  // namespace

std::string_view method_name(Method method) {
  switch (method) {
    case Method::kGet:
      return "GET";
    case Method::kPut:
      return "PUT";
    case Method::kPatch:
      return "PATCH";
    case Method::kPost:
      return "POST";
    case Method::kDelete:
      return "DELETE";
    case Method::kOther:
      break;
  }
  return "?";
}

void ClientPresence::on_gone(std::function<void()> stop) {
  {
    const std::lock_guard lock(mutex_);
    if (!gone_) {
      stops_.push_back(std::move(stop));
      return;
    }
  }
  stop();
}

void ClientPresence::mark_gone() {
  std::vector<std::function<void()>> stops;
  {
    const std::lock_guard lock(mutex_);
    if (gone_) {
      return;
    }
    gone_ = true;
    stops.swap(stops_);
  }
  for (auto& stop : stops) {
    stop();
  }
}

bool ClientPresence::gone() const {
  const std::lock_guard lock(mutex_);
  return gone_;
}

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) {
      return value;
    }
  }
  return {};
}

namespace {

// application/x-www-form-urlencoded's decoding: %XX escapes and '+' for a space.
std::optional<std::string> url_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    return -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out.push_back(' ');
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) {
        return std::nullopt;
      }
      const int high = hex(text[i + 1]);
      const int low = hex(text[i + 2]);
      if (high < 0 || low < 0) {
        return std::nullopt;
      }
      out.push_back(static_cast<char>((high << 4) | low));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::pair<std::string, std::string>>> HttpRequest::query_params() const {
  std::vector<std::pair<std::string, std::string>> params;
  std::string_view rest = query;
  while (!rest.empty()) {
    const size_t end = rest.find('&');
    const std::string_view pair = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (pair.empty()) {
      continue;
    }
    const size_t equals = pair.find('=');
    auto name = url_decode(pair.substr(0, equals));
    auto value =
        url_decode(equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1));
    if (!name || !value) {
      return std::nullopt;
    }
    params.emplace_back(std::move(*name), std::move(*value));
  }
  return params;
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
  auto params = query_params();
  if (!params) {
    return std::nullopt;
  }
  for (auto& [key, value] : *params) {
    if (key == name) {
      return std::move(value);
    }
  }
  return std::nullopt;
}

HttpResponse HttpResponse::json(const nlohmann::json& body, int status) {
  // Replace, not throw, on invalid UTF-8: a path the client sent may be echoed back.
  return {.status = status,
          .body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          .content_type = "application/json",
          .headers = {}};
}

HttpResponse HttpResponse::text(std::string body, std::string content_type) {
  return {.status = 200,
          .body = std::move(body),
          .content_type = std::move(content_type),
          .headers = {}};
}

HttpResponse HttpResponse::no_content() {
  return {.status = 204, .body = {}, .content_type = {}, .headers = {}};
}

HttpResponse HttpResponse::fault(const std::string& message, int status) {
  return json({{"fault_message", message}}, status);
}

std::string HttpResponse::serialize(bool close) const {
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\nServer: dsec-vmm\r\n", status, reason_phrase(status));
  for (const auto& [name, value] : headers) {
    out += fmt::format("{}: {}\r\n", name, value);
  }
  if (!body.empty() || stream) {
    out += fmt::format("Content-Type: {}\r\n", content_type);
  }
  if (stream) {
    out += "Transfer-Encoding: chunked\r\n";
    if (close) {
      out += "Connection: close\r\n";
    }
    return out + "\r\n" + chunk(body);
  }
  // A 204 carries no Content-Length (RFC 9110 8.6); everything else says how long it is.
  if (status != 204) {
    out += fmt::format("Content-Length: {}\r\n", body.size());
  }
  if (close) {
    out += "Connection: close\r\n";
  }
  out += "\r\n";
  out += body;
  return out;
}

std::string HttpResponse::chunk(std::string_view bytes) {
  if (bytes.empty()) {
    return {};
  }
  return fmt::format("{:x}\r\n", bytes.size()) + std::string(bytes) + "\r\n";
}

std::string Caller::key() const {
  switch (transport) {
    case Transport::kUnix:
      return "uid:" + std::to_string(uid);
    case Transport::kTcp:
      return peer.substr(0, peer.rfind(':'));
    case Transport::kNone:
      break;
  }
  return {};
}

}  // namespace dsec::http
