#include "vmm/http/request_head.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace dsec::http {
namespace {

RequestHead& head_of(http_parser* parser) {
  return *static_cast<RequestHead*>(parser->data);
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

RequestHead::RequestHead(RequestHeadLimits limits) : limits_(limits) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
}

const http_parser_settings& RequestHead::settings() {
  static const http_parser_settings kSettings = [] {
    http_parser_settings s{};
    http_parser_settings_init(&s);
    s.on_url = &RequestHead::on_url;
    s.on_header_field = &RequestHead::on_header_field;
    s.on_header_value = &RequestHead::on_header_value;
    s.on_headers_complete = &RequestHead::on_headers_complete;
    return s;
  }();
  return kSettings;
}

Result<bool> RequestHead::feed(std::string_view bytes) {
  if (complete_) {
    return true;
  }
  const size_t parsed = http_parser_execute(&parser_, &settings(), bytes.data(), bytes.size());
  const auto err = HTTP_PARSER_ERRNO(&parser_);
  if (complete_) {
    return true;  // paused at the end of the head
  }
  if (!limit_error_.empty()) {
    return fail(limit_error_);
  }
  if (err != HPE_OK) {
    return fail(fmt::format("a malformed HTTP request: {} ({})", http_errno_description(err),
                            http_errno_name(err)),
                "send an HTTP/1.1 request with a Host header");
  }
  bytes_ += parsed;
  if (bytes_ > limits_.max_bytes) {
    return fail(fmt::format("the request's head is over {} bytes", limits_.max_bytes));
  }
  return false;
}

std::string_view RequestHead::header(std::string_view name) const {
  const std::string wanted = lower(name);
  for (const auto& [field, value] : headers_) {
    if (field == wanted) {
      return value;
    }
  }
  return {};
}

int RequestHead::on_url(http_parser* parser, const char* at, size_t length) {
  auto& head = head_of(parser);
  head.url_.append(at, length);
  if (head.url_.size() > head.limits_.max_bytes) {
    head.limit_error_ = fmt::format("the request's URL is over {} bytes", head.limits_.max_bytes);
    return 1;
  }
  return 0;
}

int RequestHead::on_header_field(http_parser* parser, const char* at, size_t length) {
  auto& head = head_of(parser);
  if (head.value_last_ || head.headers_.empty()) {
    if (head.headers_.size() >= head.limits_.max_headers) {
      head.limit_error_ =
          fmt::format("the request has more than {} headers", head.limits_.max_headers);
      return 1;
    }
    head.headers_.emplace_back();
  }
  head.value_last_ = false;
  auto& field = head.headers_.back().first;
  field += lower(std::string_view(at, length));
  if (field.size() > head.limits_.max_bytes) {
    head.limit_error_ = "a header name is over the head's limit";
    return 1;
  }
  return 0;
}

int RequestHead::on_header_value(http_parser* parser, const char* at, size_t length) {
  auto& head = head_of(parser);
  head.value_last_ = true;
  auto& value = head.headers_.back().second;
  value.append(at, length);
  if (value.size() > head.limits_.max_bytes) {
    head.limit_error_ = "a header value is over the head's limit";
    return 1;
  }
  return 0;
}

int RequestHead::on_headers_complete(http_parser* parser) {
  auto& head = head_of(parser);
  for (auto& [field, value] : head.headers_) {
    value = std::string(trimmed(value));
  }
  head.method_ = http_method_str(static_cast<http_method>(parser->method));
  head.complete_ = true;
  http_parser_pause(parser, 1);
  return 0;
}

}  // namespace dsec::http
