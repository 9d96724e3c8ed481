// The Connect protocol (connectrpc.com/docs/protocol) with JSON messages, as E2B's envd
// speaks it and its SDKs call it: a unary call is one JSON body each way; a server stream
// answers with 5-byte envelopes (a flags byte, then the payload's length as a big-endian
// u32) and ends with an end-stream envelope (flag 0x02) whose JSON carries the call's
// error, if any. Errors have a code from a closed list, each answered with one HTTP status.
//
// Every byte a client sends is hostile: a header cut short, a length past the limit, a
// payload cut short, a compressed frame (we negotiate no compression) or a flag we do not
// know are refused with an error that says which, before any payload is copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/http/message.h"

namespace dsec::e2b {

// Connect's error codes (the same as gRPC's, without OK).
enum class ConnectCode {
  kCanceled,
  kUnknown,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kAborted,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  kUnauthenticated,
};

// "not_found", "invalid_argument", ... as the protocol spells them.
std::string_view code_name(ConnectCode code);
// The HTTP status a unary call's error is answered with (the protocol's table).
int http_status(ConnectCode code);

struct ConnectError {
  ConnectCode code = ConnectCode::kUnknown;
  std::string message;
  bool operator==(const ConnectError&) const = default;
};
template <typename T>
using ConnectResult = std::expected<T, ConnectError>;
inline std::unexpected<ConnectError> connect_error(ConnectCode code, std::string message) {
  return std::unexpected(ConnectError{.code = code, .message = std::move(message)});
}

// {"code": "...", "message": "..."}.
nlohmann::json error_json(const ConnectError& error);
// A unary call's failure: the code's status, the error's JSON.
http::HttpResponse unary_error(const ConnectError& error);
// A unary call's answer: 200, the message's JSON.
http::HttpResponse unary_reply(const nlohmann::json& message);

inline constexpr uint8_t kFlagCompressed = 0x01;
inline constexpr uint8_t kFlagEndStream = 0x02;
inline constexpr size_t kEnvelopeHeaderBytes = 5;
// The largest message we read or write in one envelope (a chunk of output, a request).
inline constexpr size_t kMaxMessageBytes = size_t{4} * 1024 * 1024;
inline constexpr std::string_view kStreamContentType = "application/connect+json";

struct Envelope {
  uint8_t flags = 0;
  std::string payload;
  bool operator==(const Envelope&) const = default;
};

// One envelope's bytes: header, then payload (at most kMaxMessageBytes).
std::string encode_envelope(uint8_t flags, std::string_view payload);
// A stream's message: `message` as JSON in an envelope without flags.
std::string message_envelope(const nlohmann::json& message);
// A stream's last envelope: {} when it succeeded, {"error": {...}} when it failed.
std::string end_stream_envelope(const std::optional<ConnectError>& error);

// The envelopes of a whole stream body, in order; an error (invalid_argument, or
// resource_exhausted for a frame past `max_message`) names the offset it stopped at.
ConnectResult<std::vector<Envelope>> decode_envelopes(std::string_view body,
                                                      size_t max_message = kMaxMessageBytes);

// The one request message of a server-stream call: its body must hold exactly one message
// envelope (and nothing after it but an optional empty end-stream one), a JSON object.
ConnectResult<nlohmann::json> stream_request(std::string_view body);
// A unary call's request: its body, a JSON object (an empty body is {}).
ConnectResult<nlohmann::json> unary_request(std::string_view body);

// A whole server-stream answer, for a stream whose messages are all known when it is sent:
// 200, application/connect+json, the messages, then the end-stream envelope.
http::HttpResponse stream_reply(const std::vector<nlohmann::json>& messages,
                                const std::optional<ConnectError>& error);

}  // namespace dsec::e2b
