// Between the SDK's public types (dsec/sandbox_client.h) and the agent client's
// (vmm/agent/client.h), for the SandboxClient's files.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "dsec/sandbox_client.h"
#include "vmm/agent/client.h"

namespace dsec::sdk::detail {

ExitStatus exit_status_of(const agent::ExitStatus& status);
std::string_view as_text(std::span<const uint8_t> bytes);
std::span<const uint8_t> as_bytes(std::string_view text);
// An agent sink that hands what comes to `sink` (when set); `sink` must outlive it.
agent::Sink sink_of(const OutputSink& sink);

}  // namespace dsec::sdk::detail
