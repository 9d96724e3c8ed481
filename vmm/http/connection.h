// One client connection of an HTTP server, as bytes: what the client sent goes in, requests come
// out (parsed by nodejs' http_parser), and each request's response goes back out as bytes.
// It owns no socket (server.h does), so tests and the fuzzer drive it directly.
//
// Requests are taken one at a time: after next_request() returns one, nothing more is
// parsed until respond() answered it, so that pipelined requests are answered in order
// and a client that never reads its answers cannot make the VMM queue unbounded output.
// Every byte is the client's and may be hostile: header and body sizes are limited, and so
// are the bytes waiting in either direction (wants_input() tells the server when to stop
// reading). A request that breaks the protocol or a limit is answered with 400 and its
// fault_message, and the connection closes after that answer.
#pragma once

#include <http_parser.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/http/message.h"

namespace dsec::http {

struct HttpLimits {
  // The URL plus every header name and value of one request.
  size_t max_header_bytes = size_t{8} * 1024;
  size_t max_headers = 64;
  size_t max_body_bytes = size_t{64} * 1024;
  // Whether a URL may carry a query string (HttpRequest::query): Firecracker's API and the
  // pool's refuse one; the pool's E2B front reads its parameters from it.
  bool allow_query = false;
  // Received and not parsed yet, or answered and not sent yet: beyond this, wants_input()
  // is false until the other side catches up.
  size_t max_pending_bytes = size_t{128} * 1024;
  // Deadlines, kept by the server (server.h); zero: none. A client is disconnected when
  // it sends nothing for idle_timeout between requests (longer than the 90 s after which
  // Go's HTTP client drops an idle connection itself), takes longer than header_timeout
  // from a request's first byte to the end of its headers, or than body_timeout plus the
  // time the body takes at min_body_bytes_per_second for the rest, or reads nothing of
  // its answers for send_timeout.
  std::chrono::milliseconds idle_timeout{120'000};
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{10'000};
  uint64_t min_body_bytes_per_second = uint64_t{64} * 1024;
  std::chrono::milliseconds send_timeout{30'000};
};

class HttpConnection {
 public:
  explicit HttpConnection(HttpLimits limits = {});
  // The parser points back at this object.
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Bytes the client sent.
  void receive(std::string_view bytes);
  // The client shut its sending side (read returned 0): requests already received are
  // still answered, then the connection closes.
  void receive_eof();

  // The next complete request; nullopt when more bytes are needed, the last request is not
  // answered yet, answers wait to be sent beyond the limit, or the connection is closing.
  // A malformed request is answered here.
  std::optional<HttpRequest> next_request();
  // Answers the request next_request() returned last. A streamed response (one with a
  // stream; not to a HEAD) sends its head now and its body through send_chunk() and
  // end_stream(); no other request is taken meanwhile.
  void respond(const HttpResponse& response);
  // A streamed response's body is being sent.
  bool streaming() const { return streaming_; }
  // Its next piece, as one chunk (nothing for empty bytes).
  void send_chunk(std::string_view bytes);
  // Its end; the connection then closes if the request asked so.
  void end_stream();
  // How many more bytes of output fit before the limit (a stream's pieces wait meanwhile).
  size_t output_room() const {
    return output().size() >= limits_.max_pending_bytes
               ? 0
               : limits_.max_pending_bytes - output().size();
  }

  // Bytes to send to the client, and how many of them were sent.
  std::string_view output() const { return std::string_view(output_).substr(output_sent_); }
  void consume_output(size_t bytes);

  // Whether the server should read from the client now.
  bool wants_input() const;
  // A request was handed out by next_request() and not answered yet.
  bool awaiting_response() const { return awaiting_response_; }
  // Nothing more to send and nothing more to take: close the socket.
  bool finished() const { return closing_ && output().empty(); }

  // Where the connection stands, for the server's deadlines.
  enum class Phase {
    kIdle,       // between requests: nothing of the next one here, nothing to send
    kHeaders,    // a request begun, its URL and headers not all here
    kBody,       // its headers here, its body not all
    kAnswering,  // a request handed out and not answered yet (or a streamed answer's
                 // next piece awaited): the handler's time
    kSending,    // answers wait for the client to read them
  };
  Phase phase() const;
  // How long the request being received may take from now on, by its phase (kHeaders:
  // header_timeout; kBody: body_timeout and the announced rest at the minimum rate, the
  // largest body allowed when none is announced); the other phases' timeouts as they are.
  std::chrono::milliseconds phase_timeout() const;

 private:
  static int on_message_begin(http_parser* parser);
  static int on_url(http_parser* parser, const char* at, size_t length);
  static int on_header_field(http_parser* parser, const char* at, size_t length);
  static int on_header_value(http_parser* parser, const char* at, size_t length);
  static int on_headers_complete(http_parser* parser);
  static int on_body(http_parser* parser, const char* at, size_t length);
  static int on_message_complete(http_parser* parser);
  static const http_parser_settings& settings();

  // Counts `length` more header bytes; false (with the error set) past the limit.
  bool add_header_bytes(size_t length);
  int refuse(std::string message);
  // Answers 400 with `message` and closes after it.
  void fail(const std::string& message);
  size_t pending_input() const { return input_.size() - input_parsed_; }

  HttpLimits limits_;
  http_parser parser_{};
  std::string input_;
  size_t input_parsed_ = 0;
  std::string output_;
  size_t output_sent_ = 0;
  bool eof_ = false;
  bool closing_ = false;
  bool awaiting_response_ = false;
  bool streaming_ = false;
  // The request being answered: a HEAD gets no body, and without keep-alive the
  // connection closes after the answer.
  bool answering_head_ = false;
  bool answering_keep_alive_ = true;
  // The request being parsed, and how far its headers got.
  HttpRequest request_;
  std::string url_;
  size_t header_bytes_ = 0;
  bool in_header_value_ = false;
  bool in_message_ = false;    // between a request's first byte and its end
  bool headers_done_ = false;  // its headers complete
  std::optional<HttpRequest> complete_;
  std::string error_;  // why a callback stopped the parser
};

}  // namespace dsec::http
