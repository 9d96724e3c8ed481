#include "vmm/e2b/connect_codec.h"

#include <fmt/format.h>

#include <array>

namespace dsec::e2b {
namespace {

struct CodeEntry {
  ConnectCode code;
  std::string_view name;
  int status;
};

// connectrpc.com/docs/protocol#error-codes
constexpr std::array<CodeEntry, 16> kCodes{{
    {ConnectCode::kCanceled, "canceled", 499},
    {ConnectCode::kUnknown, "unknown", 500},
    {ConnectCode::kInvalidArgument, "invalid_argument", 400},
    {ConnectCode::kDeadlineExceeded, "deadline_exceeded", 504},
    {ConnectCode::kNotFound, "not_found", 404},
    {ConnectCode::kAlreadyExists, "already_exists", 409},
    {ConnectCode::kPermissionDenied, "permission_denied", 403},
    {ConnectCode::kResourceExhausted, "resource_exhausted", 429},
    {ConnectCode::kFailedPrecondition, "failed_precondition", 400},
    {ConnectCode::kAborted, "aborted", 409},
    {ConnectCode::kOutOfRange, "out_of_range", 400},
    {ConnectCode::kUnimplemented, "unimplemented", 501},
    {ConnectCode::kInternal, "internal", 500},
    {ConnectCode::kUnavailable, "unavailable", 503},
    {ConnectCode::kDataLoss, "data_loss", 500},
    {ConnectCode::kUnauthenticated, "unauthenticated", 401},
}};

const CodeEntry& entry(ConnectCode code) {
  for (const CodeEntry& e : kCodes) {
    if (e.code == code) {
      return e;
    }
  }
  return kCodes[1];  // unknown
}

ConnectResult<nlohmann::json> parse_object(std::string_view text, std::string_view what) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return connect_error(
        ConnectCode::kInvalidArgument,
        fmt::format("{} is not JSON; send the request message as a JSON object", what));
  }
  if (!parsed.is_object()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         fmt::format("{} is JSON but not an object; send the request message as "
                                     "a JSON object",
                                     what));
  }
  return parsed;
}

}  // namespace

std::string_view code_name(ConnectCode code) {
  return entry(code).name;
}

int http_status(ConnectCode code) {
  return entry(code).status;
}

nlohmann::json error_json(const ConnectError& error) {
  return {{"code", code_name(error.code)}, {"message", error.message}};
}

http::HttpResponse unary_error(const ConnectError& error) {
  return http::HttpResponse::json(error_json(error), http_status(error.code));
}

http::HttpResponse unary_reply(const nlohmann::json& message) {
  return http::HttpResponse::json(message);
}

std::string encode_envelope(uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(kEnvelopeHeaderBytes + payload.size());
  const auto length = static_cast<uint32_t>(payload.size());
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>((length >> 24) & 0xff));
  out.push_back(static_cast<char>((length >> 16) & 0xff));
  out.push_back(static_cast<char>((length >> 8) & 0xff));
  out.push_back(static_cast<char>(length & 0xff));
  out.append(payload);
  return out;
}

std::string message_envelope(const nlohmann::json& message) {
  // Replacing invalid UTF-8 rather than throwing: a file name or output from the guest
  // is not ours to vouch for.
  return encode_envelope(0, message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string end_stream_envelope(const std::optional<ConnectError>& error) {
  nlohmann::json end = nlohmann::json::object();
  if (error) {
    end["error"] = error_json(*error);
  }
  return encode_envelope(kFlagEndStream,
                         end.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

ConnectResult<std::vector<Envelope>> decode_envelopes(std::string_view body, size_t max_message) {
  std::vector<Envelope> envelopes;
  size_t offset = 0;
  while (offset < body.size()) {
    if (body.size() - offset < kEnvelopeHeaderBytes) {
      return connect_error(
          ConnectCode::kInvalidArgument,
          fmt::format("the stream ends inside an envelope's 5-byte header at offset {} ({} bytes "
                      "left); send whole envelopes: a flags byte and a big-endian u32 length",
                      offset, body.size() - offset));
    }
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(body[offset + i]); };
    const uint8_t flags = byte(0);
    const uint32_t length = (uint32_t{byte(1)} << 24) | (uint32_t{byte(2)} << 16) |
                            (uint32_t{byte(3)} << 8) | uint32_t{byte(4)};
    if ((flags & kFlagCompressed) != 0) {
      return connect_error(ConnectCode::kUnimplemented,
                           fmt::format("the envelope at offset {} is compressed; this server "
                                       "negotiates no compression: send it uncompressed",
                                       offset));
    }
    if ((flags & ~(kFlagCompressed | kFlagEndStream)) != 0) {
      return connect_error(ConnectCode::kInvalidArgument,
                           fmt::format("the envelope at offset {} has flags {:#04x}; only 0x01 "
                                       "(compressed) and 0x02 (end of stream) are defined",
                                       offset, flags));
    }
    if (length > max_message) {
      return connect_error(ConnectCode::kResourceExhausted,
                           fmt::format("the envelope at offset {} holds {} bytes, more than the "
                                       "{} a message may have; send a smaller message",
                                       offset, length, max_message));
    }
    offset += kEnvelopeHeaderBytes;
    if (body.size() - offset < length) {
      return connect_error(
          ConnectCode::kInvalidArgument,
          fmt::format("the envelope at offset {} says {} bytes, but only {} "
                      "follow; send the whole payload",
                      offset - kEnvelopeHeaderBytes, length, body.size() - offset));
    }
    envelopes.push_back(
        Envelope{.flags = flags, .payload = std::string(body.substr(offset, length))});
    offset += length;
  }
  return envelopes;
}

ConnectResult<nlohmann::json> stream_request(std::string_view body) {
  auto envelopes = decode_envelopes(body);
  if (!envelopes) {
    return std::unexpected(envelopes.error());
  }
  if (envelopes->empty() || (envelopes->front().flags & kFlagEndStream) != 0) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "the request stream holds no message; a server-stream call takes "
                         "exactly one request message in an envelope");
  }
  const bool only_end_follows =
      envelopes->size() == 1 ||
      (envelopes->size() == 2 && ((*envelopes)[1].flags & kFlagEndStream) != 0);
  if (!only_end_follows) {
    return connect_error(ConnectCode::kInvalidArgument,
                         fmt::format("the request stream holds {} envelopes; a server-stream "
                                     "call takes exactly one request message",
                                     envelopes->size()));
  }
  return parse_object(envelopes->front().payload, "the request envelope's payload");
}

ConnectResult<nlohmann::json> unary_request(std::string_view body) {
  if (body.empty()) {
    return nlohmann::json::object();
  }
  return parse_object(body, "the request body");
}

http::HttpResponse stream_reply(const std::vector<nlohmann::json>& messages,
                                const std::optional<ConnectError>& error) {
  std::string body;
  for (const nlohmann::json& message : messages) {
    body += message_envelope(message);
  }
  body += end_stream_envelope(error);
  return http::HttpResponse{.status = 200,
                            .body = std::move(body),
                            .content_type = std::string(kStreamContentType),
                            .headers = {},
                            .stream = {}};
}

}  // namespace dsec::e2b
