// The head of an HTTP/1.x request (its request line and headers), parsed as its bytes
// arrive by nodejs' http_parser and nothing past it: for a proxy that reads only as far as
// it needs to choose where the connection goes, then passes every byte on unchanged (the
// body, a WebSocket's frames). The bytes are the client's and may be hostile: the head is
// limited in size and in headers, and anything http_parser refuses is an error that says
// what was wrong.
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::http {

struct RequestHeadLimits {
  size_t max_bytes = size_t{16} * 1024;  // the request line and every header
  size_t max_headers = 100;
};

class RequestHead {
 public:
  explicit RequestHead(RequestHeadLimits limits = {});
  // The parser points back at this object.
  RequestHead(const RequestHead&) = delete;
  RequestHead& operator=(const RequestHead&) = delete;

  // Parses `bytes`, the next the client sent. True once the head is complete: bytes past it
  // are left unparsed (the caller has them). An error when the head is malformed or over a
  // limit; after true or an error, feed() must not be called again.
  Result<bool> feed(std::string_view bytes);

  // The first header called `name` (any case), its value with surrounding blanks removed;
  // empty when absent.
  std::string_view header(std::string_view name) const;
  const std::string& method() const { return method_; }
  const std::string& url() const { return url_; }
  // Every header, names lower-cased, values with surrounding blanks removed, in order.
  const std::vector<std::pair<std::string, std::string>>& headers() const { return headers_; }

 private:
  static const http_parser_settings& settings();
  static int on_url(http_parser* parser, const char* at, size_t length);
  static int on_header_field(http_parser* parser, const char* at, size_t length);
  static int on_header_value(http_parser* parser, const char* at, size_t length);
  static int on_headers_complete(http_parser* parser);

  RequestHeadLimits limits_;
  http_parser parser_{};
  size_t bytes_ = 0;
  bool complete_ = false;
  bool value_last_ = false;  // whether the last callback was a header's value
  std::string limit_error_;
  std::string method_;
  std::string url_;
  std::vector<std::pair<std::string, std::string>> headers_;  // names lower-cased
};

}  // namespace dsec::http
