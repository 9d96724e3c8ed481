// A clone's DNS resolver in its guest (docs/network.md, "DNS"): the image's egress names a
// resolver, and each clone's /etc/resolv.conf gets it through the agent once its VMM says
// ready and before the pool counts it ready, so that no acquire waits for it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "vmm/common/error.h"
#include "vmm/io/event_loop.h"
#include "vmm/pool/background_task.h"

namespace dsec::pool {

inline constexpr const char* kResolvConf = "/etc/resolv.conf";

// "nameserver A.B.C.D\n".
std::string resolv_conf(uint32_t resolver);

// Writes resolv_conf(resolver) to the guest's /etc/resolv.conf through the agent at `vsock`,
// on a thread of its own (background_task.h); `done` runs on the loop's thread with the
// outcome, unless the task is destroyed first.
Result<std::unique_ptr<BackgroundTask>> write_guest_resolver(
    io::EventLoop& loop, const std::string& vsock, uint32_t resolver,
    std::move_only_function<void(Status)> done);

}  // namespace dsec::pool
