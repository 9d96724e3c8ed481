// What every virtio device does the same way when it returns buffers or finds its driver
// broke a queue: one mechanism, so the devices cannot drift apart.
#pragma once

#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/log_rate_limiter.h"
#include "vmm/devices/virtio/interrupt.h"
#include "vmm/devices/virtio/queue.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// After add_used(): a used-buffer interrupt if the driver wants one. If the rings cannot
// be read, it notifies anyway: a spurious interrupt costs the driver little.
void signal_used_if_wanted(VirtQueue& queue, const GuestMemory& memory, VirtioInterrupt& interrupt);

// A queue the driver broke refuses all work until the driver resets the device: sets
// DEVICE_NEEDS_RESET (once) and logs why, rate-limited by `limiter`. `device` names the
// device in the log ("virtio-rng").
void report_broken_queue(VirtioInterrupt& interrupt, LogRateLimiter& limiter, std::string_view device,
                         const Error& error);

}  // namespace dsec::virtio
