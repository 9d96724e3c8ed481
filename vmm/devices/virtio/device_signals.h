// What every virtio device does the same way when it returns buffers or finds its driver
// broke a queue: one mechanism, so the devices cannot drift apart.
#pragma once

#include <cstdint>
#include <functional>
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
void report_broken_queue(VirtioInterrupt& interrupt, LogRateLimiter& limiter,
                         std::string_view device, const Error& error);

// A device's name and the limiter of its guest-triggered warnings, for report_broken_queue().
struct DeviceLog {
  std::string_view device;
  LogRateLimiter& limiter;
};

// Serves every chain the driver has made available on `queue`, in order, for devices that
// answer a chain at once (virtio-rng, the tx queues of virtio-net and virtio-vsock).
// `serve(chain)` returns how many bytes it wrote into the chain's device-writable buffers,
// or an Error meaning the driver broke the queue. Each served chain goes back to the used
// ring; the first Error, from `serve` or from a malformed ring, is reported as
// report_broken_queue() does and ends the work. At the end the driver gets one used-buffer
// interrupt, if any chain went back and it wants one. With `admit`, a chain it refuses (a
// rate limiter out of tokens) stays in the ring, and the work ends until the device calls
// again.
using ChainServer = std::function<Result<uint32_t>(const DescriptorChain& chain)>;
using ChainAdmission = std::function<bool(const DescriptorChain& chain)>;
void serve_available_chains(VirtQueue& queue, GuestMemory& memory, VirtioInterrupt& interrupt,
                            DeviceLog log, const ChainServer& serve,
                            const ChainAdmission& admit = {});

}  // namespace dsec::virtio
