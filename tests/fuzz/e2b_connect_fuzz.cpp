// libFuzzer target: a hostile client's request body into the Connect codec E2B's envd plane
// reads (vmm/e2b/connect_codec.h): the envelope decoder, at the default limit and a small
// one, and the request readers of unary and server-stream calls. Nothing may crash; the
// envelopes decoded must re-encode to exactly the bytes they came from, and a request
// message read must survive a trip through an answer's envelope. The same bytes go through
// the front's other readers of client input: a multipart upload (with a boundary from the
// input's first line), base64 (which must round-trip what it decodes), and a query string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "vmm/e2b/base64.h"
#include "vmm/e2b/connect_codec.h"
#include "vmm/e2b/multipart.h"
#include "vmm/http/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsec::e2b;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const size_t limit : {kMaxMessageBytes, size_t{16}}) {
    auto envelopes = decode_envelopes(body, limit);
    if (!envelopes) {
      if (envelopes.error().message.empty()) std::abort();
      continue;
    }
    std::string again;
    for (const Envelope& e : *envelopes) {
      if (e.payload.size() > limit) std::abort();
      again += encode_envelope(e.flags, e.payload);
    }
    if (again != body) std::abort();
  }
  if (auto message = stream_request(body)) {
    if (!message->is_object()) std::abort();
    auto back = stream_request(message_envelope(*message));
    if (!back || *back != *message) std::abort();
  }
  if (auto message = unary_request(body); message && !message->is_object()) std::abort();

  const size_t line_end = body.find('\n');
  if (line_end != std::string_view::npos) {
    if (auto boundary = multipart_boundary(body.substr(0, line_end))) {
      (void)parse_multipart(body.substr(line_end + 1), *boundary);
    }
  }
  (void)parse_multipart(body, "b");
  if (auto bytes = base64_decode(body)) {
    if (base64_decode(base64_encode(*bytes)) != bytes) std::abort();
  }
  dsec::http::HttpRequest request;
  request.query = std::string(body);
  (void)request.query_params();
  return 0;
}
