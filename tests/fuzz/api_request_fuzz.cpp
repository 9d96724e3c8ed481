// libFuzzer target: a hostile API client's bytes through the whole request path — the HTTP
// connection (http_parser, limits, pipelining), the router, the request bodies' parsers,
// the pre-boot configuration and the order rules of every endpoint — with a fake backend
// behind it. The bytes arrive in uneven reads as a socket would deliver them. Each body is
// also read as a --config-file, whose sections the same parsers take. Nothing may crash,
// every answer must be well formed, and the output may not grow past its limit by more
// than one answer. Some answers are streams, sent across reads. Input: a byte that picks
// the VM's state and the read size, then HTTP (corpus/make-seeds writes seeds for every
// endpoint).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tests/support/fake_vm_backend.h"
#include "vmm/api/config_file.h"
#include "vmm/api/vm_api.h"
#include "vmm/http/body_stream.h"
#include "vmm/http/connection.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsec::api;
  using namespace dsec::http;
  if (size == 0) {
    return 0;
  }
  dsec::test::FakeVmBackend backend;
  // The first byte picks the VM's state, so that every order rule is reached.
  backend.current = static_cast<InstanceState>(data[0] % 3);
  VmApi api(backend, "fuzz");
  HttpLimits limits;
  limits.max_pending_bytes = 4096;
  HttpConnection connection(limits);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t step = 1 + data[0] % 97;
  // A request with an odd-sized body is answered as a stream (a piece of its body, then its
  // end a read later), so that requests pipelined behind a stream reach the connection too.
  static const auto stream = BodyStream::create();
  bool mid_stream = false;  // output since the last read may start inside a stream's body
  for (size_t at = 0; at < bytes.size() || connection.wants_input(); at += step) {
    if (connection.streaming()) {
      connection.end_stream();
    }
    if (at < bytes.size()) {
      connection.receive(bytes.substr(at, step));
    } else {
      connection.receive_eof();
    }
    while (auto request = connection.next_request()) {
      (void)parse_config_file(request->body);
      const auto response = api.handle(*request);
      // Firecracker's statuses: an unknown path or method is a 400 too; an MMDS document
      // over its size limit a 413.
      if (response.status != 200 && response.status != 204 && response.status != 400 &&
          response.status != 413) {
        std::abort();
      }
      if (stream && request->body.size() % 2 == 1) {
        HttpResponse streamed = response;
        streamed.stream = *stream;  // a marker only: the connection never reads it
        connection.respond(streamed);
        connection.send_chunk(std::string_view(request->body).substr(0, 64));
        mid_stream = connection.streaming();  // not for a HEAD
        if (mid_stream && connection.next_request()) {
          std::abort();  // nothing more is taken while a stream is sent
        }
        break;
      }
      connection.respond(response);
    }
    if (connection.output().size() > limits.max_pending_bytes + 4096) {
      std::abort();
    }
    // The client reads its answers.
    const auto out = connection.output();
    if (!out.empty() && !mid_stream && out.substr(0, 9) != "HTTP/1.1 ") {
      std::abort();
    }
    mid_stream = connection.streaming();
    connection.consume_output(out.size());
    if (connection.finished()) {
      break;
    }
  }
  return 0;
}
