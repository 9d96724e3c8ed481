#include "vmm/agent/client_stream.h"

#include <fmt/format.h>

namespace dsec::agent::client_detail {

std::string seconds(std::chrono::milliseconds t) {
  return fmt::format("{:g} s", static_cast<double>(t.count()) / 1000.0);
}

std::unexpected<Error> unexpected_frame(const Frame& f, const char* during) {
  if (f.type == MessageType::kError) {
    auto e = decode_error_reply(f.payload);
    return fail(std::string("the guest agent refused the ") + during + ": " +
                (e ? e->message : "(an unreadable error message)"));
  }
  return fail(std::string("agent protocol: a ") +
              message_type_name(static_cast<uint16_t>(f.type)).value_or("?") +
              " frame during the " + during);
}

Stalled give_up(const char* during, std::chrono::milliseconds timeout) {
  return [during, timeout]() -> Status {
    return fail(fmt::format("the guest stopped answering: nothing moved on its agent connection "
                            "for {} during the {}",
                            seconds(timeout), during),
                kStoppedAnsweringHint);
  };
}

}  // namespace dsec::agent::client_detail
