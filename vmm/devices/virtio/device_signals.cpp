#include "vmm/devices/virtio/device_signals.h"

#include <spdlog/spdlog.h>

#include <string>

namespace dsec::virtio {

void signal_used_if_wanted(VirtQueue& queue, const GuestMemory& memory,
                           VirtioInterrupt& interrupt) {
  const auto wanted = queue.needs_notification(memory);
  if (!wanted || *wanted) {
    interrupt.signal_used_buffer();
  }
}

void report_broken_queue(VirtioInterrupt& interrupt, LogRateLimiter& limiter,
                         std::string_view device, const Error& error) {
  if (!interrupt.needs_reset()) {
    interrupt.signal_needs_reset();
  }
  if (auto held_back = limiter.allow()) {
    spdlog::warn("{}: the driver broke a queue, the device needs a reset: {}{}", device,
                 error.message(),
                 *held_back != 0 ? fmt::format(" ({} similar messages suppressed)", *held_back)
                                 : std::string());
  }
}

void serve_available_chains(VirtQueue& queue, GuestMemory& memory, VirtioInterrupt& interrupt,
                            DeviceLog log, const ChainServer& serve, const ChainAdmission& admit) {
  bool returned = false;
  for (;;) {
    auto chain = queue.pop(memory);
    if (!chain) {
      report_broken_queue(interrupt, log.limiter, log.device, chain.error());
      break;
    }
    const std::optional<DescriptorChain>& next = *chain;
    if (!next) {
      break;
    }
    if (admit && !admit(*next)) {
      queue.undo_pop();
      break;
    }
    const auto written = serve(*next);
    if (!written) {
      report_broken_queue(interrupt, log.limiter, log.device, written.error());
      break;
    }
    if (auto added = queue.add_used(memory, next->head, *written); !added) {
      report_broken_queue(interrupt, log.limiter, log.device, added.error());
      break;
    }
    returned = true;
  }
  if (returned) {
    signal_used_if_wanted(queue, memory, interrupt);
  }
}

}  // namespace dsec::virtio
