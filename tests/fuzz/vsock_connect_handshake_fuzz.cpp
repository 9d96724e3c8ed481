// libFuzzer target: the host side of hybrid vsock's handshake (HostListener and
// parse_connect_line). A host process connects to the device's Unix socket and writes the
// fuzzer's bytes in the fuzzer's pieces, then shuts its writing side, closes, or just
// waits. The listener must hand the socket on exactly when the bytes start with a
// well-formed "CONNECT <port>\n" line (checked against a parser of our own here), with that
// port, leaving every byte after the line in the socket; otherwise it closes the socket.
//
// Input: u8 flags (bit 0: shut down writing at the end, bit 1: close at the end), u8 count
// of pieces (mod 8), that many u8 piece sizes, then the bytes (what the pieces leave over
// goes last).
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "tests/fuzz/fuzz_input.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/virtio/vsock/host_listener.h"
#include "vmm/devices/virtio/vsock/unix_socket.h"
#include "vmm/io/event_loop.h"

namespace {

using dsec::UniqueFd;
using dsec::fuzz::check;
namespace vsock = dsec::virtio::vsock;

// The port the first line names, if the bytes start with a well-formed CONNECT line.
std::optional<uint32_t> expected_port(std::span<const uint8_t> bytes) {
  const std::string prefix = "CONNECT ";
  size_t i = 0;
  for (; i < prefix.size(); ++i) {
    if (i >= bytes.size() || bytes[i] != prefix[i]) return std::nullopt;
  }
  uint64_t port = 0;
  const size_t first_digit = i;
  for (; i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9'; ++i) {
    port = port * 10 + (bytes[i] - '0');
    if (port > UINT32_MAX) return std::nullopt;
  }
  const size_t digits = i - first_digit;
  if (digits == 0 || (digits > 1 && bytes[first_digit] == '0') || i >= bytes.size() ||
      bytes[i] != '\n') {
    return std::nullopt;
  }
  return static_cast<uint32_t>(port);
}

struct Harness {
  Harness() {
    char dir[] = "/tmp/dsec-fuzz-handshake-XXXXXX";
    check(::mkdtemp(dir) != nullptr);
    path = std::string(dir) + "/vsock.sock";
    listener = std::move(vsock::HostListener::create(
                             loop, path, [](const std::function<void()>& work) { work(); },
                             [this](UniqueFd socket, uint32_t port) {
                               handed_on = std::move(socket);
                               handed_port = port;
                             })
                             .value());
    listener->set_open(true);
  }

  // Turns the loop until `done` holds, for a bounded number of turns.
  template <typename F>
  void turn_until(F done) {
    for (int i = 0; i < 200 && !done(); ++i) {
      check(loop.run_once(std::chrono::milliseconds(1)).has_value());
    }
  }

  dsec::io::EventLoop loop = std::move(dsec::io::EventLoop::create(64).value());
  std::string path;
  std::unique_ptr<vsock::HostListener> listener;
  UniqueFd handed_on;
  uint32_t handed_port = 0;
};

std::vector<uint8_t> drain(int fd) {
  std::vector<uint8_t> out;
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) return out;
    out.insert(out.end(), buf, buf + n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  dsec::fuzz::FuzzInput in({data, size});
  const auto flags = in.take<uint8_t>();
  std::vector<size_t> pieces(in.take<uint8_t>() % 8);
  for (size_t& piece : pieces) piece = in.take<uint8_t>();
  const std::span<const uint8_t> bytes = in.rest();

  // The parser alone, on the first line.
  const std::optional<uint32_t> expected = expected_port(bytes);
  size_t line_end = 0;
  while (line_end < bytes.size() && bytes[line_end] != '\n') ++line_end;
  if (line_end < bytes.size()) {
    const std::string_view line(reinterpret_cast<const char*>(bytes.data()), line_end + 1);
    check(vsock::parse_connect_line(line) == expected);
  }

  auto client = dsec::io::connect_unix(h.path);
  check(client.has_value());
  std::span<const uint8_t> left = bytes;
  pieces.push_back(left.size());
  for (size_t piece : pieces) {
    const auto chunk = left.first(std::min(piece, left.size()));
    left = left.subspan(chunk.size());
    // Fails once the listener closed the socket over a bad line: the host hears so.
    (void)::send(client->get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    check(h.loop.run_once(std::chrono::milliseconds(0)).has_value());
  }
  // A line not yet whole (no newline within kMaxConnectLine bytes, fewer bytes than that)
  // keeps the listener waiting for the rest: the host then shuts its writing side.
  const bool incomplete = line_end == bytes.size() && bytes.size() < vsock::kMaxConnectLine;
  if ((flags & 1) != 0 || incomplete) {
    ::shutdown(client->get(), SHUT_WR);
  }
  // Closed by the listener: EOF, or ECONNRESET where it closed with our bytes unread.
  const auto closed = [&client] {
    uint8_t byte = 0;
    const ssize_t n = ::recv(client->get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
  };
  h.turn_until([&] { return h.handed_on || closed(); });
  check(h.handed_on || closed());
  check(h.listener->pending_count() == 0);

  // Handed on exactly for a well-formed first line, with its port, and the bytes after
  // the line still in the socket.
  check(static_cast<bool>(h.handed_on) == expected.has_value());
  if (h.handed_on) {
    check(h.handed_port == *expected);
    const size_t after = line_end + 1;
    const std::vector<uint8_t> rest = drain(h.handed_on.get());
    check(rest == std::vector<uint8_t>(bytes.begin() + static_cast<ptrdiff_t>(after), bytes.end()));
    h.handed_on.reset();
  }
  return 0;
}
