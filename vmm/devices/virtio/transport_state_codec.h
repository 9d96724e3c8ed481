// A virtio-mmio transport's state (TransportState, its queues included) as the bytes of a
// snapshot section, and back. decode() takes bytes from a state file: it checks every
// count and never reads past them; whether the state fits the device is
// MmioTransport::restore()'s to check.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/virtio/mmio_transport.h"

namespace dsec::virtio {

std::vector<uint8_t> encode_transport_state(const TransportState& state);
Result<TransportState> decode_transport_state(std::span<const uint8_t> bytes);

}  // namespace dsec::virtio
