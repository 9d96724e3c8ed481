#include "vmm/http/connection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace dsec::http {
namespace {

HttpConnection& connection_of(http_parser* parser) {
  return *static_cast<HttpConnection*>(parser->data);
}

Method method_of(unsigned method) {
  switch (method) {
    case HTTP_GET:
      return Method::kGet;
    case HTTP_PUT:
      return Method::kPut;
    case HTTP_PATCH:
      return Method::kPatch;
    case HTTP_POST:
      return Method::kPost;
    case HTTP_DELETE:
      return Method::kDelete;
    default:
      return Method::kOther;
  }
}

std::string trimmed(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && blank(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && blank(s.back())) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

HttpConnection::HttpConnection(HttpLimits limits) : limits_(limits) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
}

const http_parser_settings& HttpConnection::settings() {
  static const http_parser_settings kSettings = [] {
    http_parser_settings s{};
    http_parser_settings_init(&s);
    s.on_message_begin = &HttpConnection::on_message_begin;
    s.on_url = &HttpConnection::on_url;
    s.on_header_field = &HttpConnection::on_header_field;
    s.on_header_value = &HttpConnection::on_header_value;
    s.on_headers_complete = &HttpConnection::on_headers_complete;
    s.on_body = &HttpConnection::on_body;
    s.on_message_complete = &HttpConnection::on_message_complete;
    return s;
  }();
  return kSettings;
}

void HttpConnection::receive(std::string_view bytes) {
  if (closing_ || eof_) {
    return;  // after a refused request nothing more is read
  }
  input_.append(bytes);
}

void HttpConnection::receive_eof() {
  eof_ = true;
}

bool HttpConnection::wants_input() const {
  return !closing_ && !eof_ && pending_input() < limits_.max_pending_bytes &&
         output().size() < limits_.max_pending_bytes;
}

void HttpConnection::consume_output(size_t bytes) {
  output_sent_ += std::min(bytes, output().size());
  if (output_sent_ == output_.size()) {
    output_.clear();
    output_sent_ = 0;
  }
}

std::optional<HttpRequest> HttpConnection::next_request() {
  if (closing_ || awaiting_response_ || streaming_ ||
      output().size() >= limits_.max_pending_bytes) {
    return std::nullopt;
  }
  while (pending_input() > 0 && !complete_) {
    const size_t parsed =
        http_parser_execute(&parser_, &settings(), input_.data() + input_parsed_, pending_input());
    input_parsed_ += parsed;
    const auto err = HTTP_PARSER_ERRNO(&parser_);
    if (err == HPE_PAUSED) {
      // on_message_complete paused it, so that one request is answered before the next.
      http_parser_pause(&parser_, 0);
    } else if (err != HPE_OK) {
      fail(error_.empty() ? fmt::format("malformed HTTP request: {}", http_errno_description(err))
                          : error_);
      return std::nullopt;
    } else if (parsed == 0) {
      break;
    }
  }
  input_.erase(0, input_parsed_);
  input_parsed_ = 0;
  if (complete_) {
    awaiting_response_ = true;
    answering_head_ = complete_->method_text == "HEAD";
    answering_keep_alive_ = complete_->keep_alive;
    auto request = std::move(*complete_);
    complete_.reset();
    return request;
  }
  if (eof_) {
    // Every whole request was answered; a part of one is dropped with the connection.
    closing_ = true;
  }
  return std::nullopt;
}

void HttpConnection::respond(const HttpResponse& response) {
  if (!awaiting_response_) {
    return;
  }
  awaiting_response_ = false;
  const bool close = !answering_keep_alive_;
  if (answering_head_) {
    HttpResponse head = response;
    head.body.clear();
    output_ += head.serialize(close);
  } else {
    output_ += response.serialize(close);
    if (response.stream) {
      streaming_ = true;
      return;  // closing_, if asked, once the body ended
    }
  }
  if (close) {
    closing_ = true;
  }
}

void HttpConnection::send_chunk(std::string_view bytes) {
  if (!streaming_ || bytes.empty()) {
    return;
  }
  // What was sent goes first: a stream the client keeps reading would otherwise grow the
  // output by its whole body, never sent to its end at once.
  output_.erase(0, output_sent_);
  output_sent_ = 0;
  output_ += HttpResponse::chunk(bytes);
}

void HttpConnection::end_stream() {
  if (!streaming_) {
    return;
  }
  streaming_ = false;
  output_ += HttpResponse::kLastChunk;
  if (!answering_keep_alive_) {
    closing_ = true;
  }
}

HttpConnection::Phase HttpConnection::phase() const {
  if (awaiting_response_ || (streaming_ && output().empty())) {
    return Phase::kAnswering;
  }
  if (!output().empty()) {
    return Phase::kSending;
  }
  if (in_message_) {
    return headers_done_ ? Phase::kBody : Phase::kHeaders;
  }
  // Bytes not parsed yet start a request (next_request() parses all it can).
  return pending_input() > 0 ? Phase::kHeaders : Phase::kIdle;
}

std::chrono::milliseconds HttpConnection::phase_timeout() const {
  switch (phase()) {
    case Phase::kIdle:
      return limits_.idle_timeout;
    case Phase::kHeaders:
      return limits_.header_timeout;
    case Phase::kBody: {
      if (limits_.body_timeout.count() == 0 || limits_.min_body_bytes_per_second == 0) {
        return limits_.body_timeout;
      }
      const uint64_t announced = (parser_.flags & F_CONTENTLENGTH) != 0
                                     ? parser_.content_length
                                     : uint64_t{limits_.max_body_bytes};
      return limits_.body_timeout +
             std::chrono::milliseconds(announced * 1000 / limits_.min_body_bytes_per_second);
    }
    case Phase::kSending:
      return limits_.send_timeout;
    case Phase::kAnswering:
      break;
  }
  return std::chrono::milliseconds{0};
}

void HttpConnection::fail(const std::string& message) {
  output_ += HttpResponse::fault(message).serialize(/*close=*/true);
  closing_ = true;
  input_.clear();
  input_parsed_ = 0;
}

int HttpConnection::refuse(std::string message) {
  error_ = std::move(message);
  // Not 1 or 2: from on_headers_complete those mean "no body" and "upgrade", not an error.
  return -1;
}

bool HttpConnection::add_header_bytes(size_t length) {
  header_bytes_ += length;
  if (header_bytes_ > limits_.max_header_bytes) {
    refuse(fmt::format("the request's URL and headers are larger than {} bytes",
                       limits_.max_header_bytes));
    return false;
  }
  return true;
}

int HttpConnection::on_message_begin(http_parser* parser) {
  auto& c = connection_of(parser);
  c.request_ = HttpRequest{};
  c.url_.clear();
  c.header_bytes_ = 0;
  c.in_header_value_ = false;
  c.in_message_ = true;
  c.headers_done_ = false;
  return 0;
}

int HttpConnection::on_url(http_parser* parser, const char* at, size_t length) {
  auto& c = connection_of(parser);
  if (!c.add_header_bytes(length)) {
    return -1;
  }
  c.url_.append(at, length);
  return 0;
}

int HttpConnection::on_header_field(http_parser* parser, const char* at, size_t length) {
  auto& c = connection_of(parser);
  if (!c.add_header_bytes(length)) {
    return -1;
  }
  auto& headers = c.request_.headers;
  if (headers.empty() || c.in_header_value_) {
    if (headers.size() == c.limits_.max_headers) {
      return c.refuse(fmt::format("the request has more than {} headers", c.limits_.max_headers));
    }
    headers.emplace_back();
    c.in_header_value_ = false;
  }
  headers.back().first.append(at, length);
  return 0;
}

int HttpConnection::on_header_value(http_parser* parser, const char* at, size_t length) {
  auto& c = connection_of(parser);
  if (!c.add_header_bytes(length)) {
    return -1;
  }
  c.in_header_value_ = true;
  c.request_.headers.back().second.append(at, length);
  return 0;
}

int HttpConnection::on_headers_complete(http_parser* parser) {
  auto& c = connection_of(parser);
  for (auto& [name, value] : c.request_.headers) {
    name = lower(std::move(name));
    value = trimmed(value);
  }
  // Set before this callback for CONNECT, or Upgrade with Connection: upgrade.
  if (parser->upgrade != 0) {
    return c.refuse("protocol upgrades (and CONNECT) are not supported");
  }
  if (parser->http_major != 1) {
    return c.refuse(fmt::format("HTTP/{}.{} is not supported: speak HTTP/1.1", parser->http_major,
                                parser->http_minor));
  }
  http_parser_url url{};
  http_parser_url_init(&url);
  if (http_parser_parse_url(c.url_.data(), c.url_.size(), 0, &url) != 0 ||
      (url.field_set & (1U << UF_PATH)) == 0) {
    return c.refuse("the request's URL has no path");
  }
  const bool has_query = (url.field_set & (1U << UF_QUERY)) != 0;
  if ((url.field_set & (1U << UF_FRAGMENT)) != 0 || (has_query && !c.limits_.allow_query)) {
    return c.refuse("query strings and fragments are not supported: the path is the whole URL");
  }
  c.request_.query = has_query
                         ? c.url_.substr(url.field_data[UF_QUERY].off, url.field_data[UF_QUERY].len)
                         : std::string();
  c.request_.path = c.url_.substr(url.field_data[UF_PATH].off, url.field_data[UF_PATH].len);
  c.request_.method = method_of(parser->method);
  c.request_.method_text = http_method_str(static_cast<http_method>(parser->method));
  if ((parser->flags & F_CONTENTLENGTH) != 0 && parser->content_length > c.limits_.max_body_bytes) {
    return c.refuse(fmt::format("the request's body ({} bytes) is larger than {} bytes",
                                parser->content_length, c.limits_.max_body_bytes));
  }
  if (lower(std::string(c.request_.header("expect"))) == "100-continue") {
    c.output_ += "HTTP/1.1 100 Continue\r\n\r\n";
  }
  c.headers_done_ = true;
  return 0;
}

int HttpConnection::on_body(http_parser* parser, const char* at, size_t length) {
  auto& c = connection_of(parser);
  if (c.request_.body.size() + length > c.limits_.max_body_bytes) {
    return c.refuse(
        fmt::format("the request's body is larger than {} bytes", c.limits_.max_body_bytes));
  }
  c.request_.body.append(at, length);
  return 0;
}

int HttpConnection::on_message_complete(http_parser* parser) {
  auto& c = connection_of(parser);
  c.request_.keep_alive = http_should_keep_alive(parser) != 0;
  c.complete_ = std::move(c.request_);
  c.in_message_ = false;
  // One request at a time: the rest of the input waits until this one is answered.
  http_parser_pause(parser, 1);
  return 0;
}

}  // namespace dsec::http
