#include "sdk/agent_conversions.h"

namespace dsec::sdk::detail {

ExitStatus exit_status_of(const agent::ExitStatus& status) {
  switch (status.kind) {
    case agent::ExitStatus::Kind::kExited:
      return {ExitStatus::Kind::kExited, status.code};
    case agent::ExitStatus::Kind::kSignaled:
      return {ExitStatus::Kind::kSignaled, status.code};
    case agent::ExitStatus::Kind::kTimedOut:
      return {ExitStatus::Kind::kTimedOut, status.code};
  }
  return {ExitStatus::Kind::kExited, status.code};
}

std::string_view as_text(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};  // NOLINT: bytes as text
}

std::span<const uint8_t> as_bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};  // NOLINT: text as bytes
}

agent::Sink sink_of(const OutputSink& sink) {
  return [&sink](std::span<const uint8_t> bytes) -> dsec::Status {
    if (sink) {
      sink(as_text(bytes));
    }
    return ok();
  };
}

}  // namespace dsec::sdk::detail
