// libFuzzer target: a hostile peer's byte stream into the agent protocol's frame decoder,
// and every frame's payload into every message decoder. Anything decoded must re-encode to
// exactly the bytes it came from (the encoding is canonical), and nothing may crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "vmm/agent/fs_protocol.h"
#include "vmm/agent/process_protocol.h"
#include "vmm/agent/protocol.h"

namespace {

template <typename Decode>
void check_round_trip(std::span<const uint8_t> payload, Decode decode) {
  auto m = decode(payload);
  if (!m) return;
  const auto again = dsec::agent::encode(*m);
  if (again.size() != payload.size() || !std::equal(again.begin(), again.end(), payload.begin())) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsec::agent;
  FrameDecoder decoder;
  // Feed in two uneven parts, as a socket would deliver them.
  const size_t split = size > 0 ? data[0] % (size + 1) : 0;
  decoder.feed(std::span(data, split));
  decoder.feed(std::span(data + split, size - split));
  for (int i = 0; i < 64; ++i) {
    auto frame = decoder.next();
    if (!frame || !*frame) break;
    const std::span<const uint8_t> p = (*frame)->payload;
    check_round_trip(p, decode_exec_request);
    check_round_trip(p, decode_exit_status);
    check_round_trip(p, decode_write_file_request);
    check_round_trip(p, decode_read_file_request);
    check_round_trip(p, decode_file_info);
    check_round_trip(p, decode_health_reply);
    check_round_trip(p, decode_error_reply);
    check_round_trip(p, decode_process_start_request);
    check_round_trip(p, decode_process_ref);
    check_round_trip(p, decode_process_input);
    check_round_trip(p, decode_process_signal);
    check_round_trip(p, decode_process_resize);
    check_round_trip(p, decode_process_list_reply);
    check_round_trip(p, decode_fs_entry);
    check_round_trip(p, decode_fs_path);
    check_round_trip(p, decode_fs_list_request);
    check_round_trip(p, decode_fs_move_request);
    check_round_trip(p, decode_fs_watch_request);
    check_round_trip(p, decode_fs_entries);
    check_round_trip(p, decode_fs_made);
    check_round_trip(p, decode_fs_event);
  }
  return 0;
}
