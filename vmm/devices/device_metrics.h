// The virtio devices' counters, with Firecracker's metric names (its
// src/vmm/src/devices/virtio/*/metrics.rs), and their report: one JSON object whose
// sections are Firecracker's ("block" sums every drive, "block_<drive_id>" is one drive;
// "net" and "net_<iface_id>" likewise; "vsock"; "entropy"). A device kind has one struct
// of MetricCounters, shared (shared_ptr) between the device, which counts on its event
// loop, and the reporter, which reads from another thread. Only what a device really
// counts is here; docs/api.md lists the names.
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "vmm/common/metric_counter.h"

namespace dsec::devices {

// One counter of a metrics struct, by its name in the report.
template <typename Metrics>
struct MetricField {
  const char* name;
  MetricCounter Metrics::*counter;
};

// virtio-blk: requests completed with success, and the data they moved.
struct BlockMetrics {
  MetricCounter read_count;
  MetricCounter read_bytes;
  MetricCounter write_count;
  MetricCounter write_bytes;
  MetricCounter flush_count;
  MetricCounter invalid_reqs_count;             // refused: malformed or unsupported
  MetricCounter rate_limiter_throttled_events;  // a request waited for its rate limiter
};
inline constexpr std::array<MetricField<BlockMetrics>, 7> kBlockMetricFields{{
    {"read_count", &BlockMetrics::read_count},
    {"read_bytes", &BlockMetrics::read_bytes},
    {"write_count", &BlockMetrics::write_count},
    {"write_bytes", &BlockMetrics::write_bytes},
    {"flush_count", &BlockMetrics::flush_count},
    {"invalid_reqs_count", &BlockMetrics::invalid_reqs_count},
    {"rate_limiter_throttled_events", &BlockMetrics::rate_limiter_throttled_events},
}};

// virtio-net: frames between the guest and the TAP, and their bytes (without the
// virtio-net header).
struct NetMetrics {
  MetricCounter rx_packets_count;
  MetricCounter rx_bytes_count;
  MetricCounter tx_packets_count;
  MetricCounter tx_bytes_count;
  MetricCounter tx_malformed_frames;
  MetricCounter rx_rate_limiter_throttled;
  MetricCounter tx_rate_limiter_throttled;
};
inline constexpr std::array<MetricField<NetMetrics>, 7> kNetMetricFields{{
    {"rx_packets_count", &NetMetrics::rx_packets_count},
    {"rx_bytes_count", &NetMetrics::rx_bytes_count},
    {"tx_packets_count", &NetMetrics::tx_packets_count},
    {"tx_bytes_count", &NetMetrics::tx_bytes_count},
    {"tx_malformed_frames", &NetMetrics::tx_malformed_frames},
    {"rx_rate_limiter_throttled", &NetMetrics::rx_rate_limiter_throttled},
    {"tx_rate_limiter_throttled", &NetMetrics::tx_rate_limiter_throttled},
}};

// virtio-vsock: packets to (rx) and from (tx) the guest, and their payload bytes.
struct VsockMetrics {
  MetricCounter rx_packets_count;
  MetricCounter rx_bytes_count;
  MetricCounter tx_packets_count;
  MetricCounter tx_bytes_count;
};
inline constexpr std::array<MetricField<VsockMetrics>, 4> kVsockMetricFields{{
    {"rx_packets_count", &VsockMetrics::rx_packets_count},
    {"rx_bytes_count", &VsockMetrics::rx_bytes_count},
    {"tx_packets_count", &VsockMetrics::tx_packets_count},
    {"tx_bytes_count", &VsockMetrics::tx_bytes_count},
}};

// virtio-rng: queue notifications, bytes given, getrandom failures, requests that waited
// for the rate limiter.
struct EntropyMetrics {
  MetricCounter entropy_event_count;
  MetricCounter entropy_bytes;
  MetricCounter host_rng_fails;
  MetricCounter entropy_rate_limiter_throttled;
};
inline constexpr std::array<MetricField<EntropyMetrics>, 4> kEntropyMetricFields{{
    {"entropy_event_count", &EntropyMetrics::entropy_event_count},
    {"entropy_bytes", &EntropyMetrics::entropy_bytes},
    {"host_rng_fails", &EntropyMetrics::host_rng_fails},
    {"entropy_rate_limiter_throttled", &EntropyMetrics::entropy_rate_limiter_throttled},
}};

// Every device's counters in one VM, and the report of them.
struct DeviceMetrics {
  // By drive id (iface id), in slot order.
  std::vector<std::pair<std::string, std::shared_ptr<BlockMetrics>>> drives;
  std::vector<std::pair<std::string, std::shared_ptr<NetMetrics>>> nets;
  std::shared_ptr<VsockMetrics> vsock;      // null: no vsock device
  std::shared_ptr<EntropyMetrics> entropy;  // null: no virtio-rng

  // Adds each present device's section to `report`, with what each counter counted since
  // the previous call. One reporter at a time.
  void take_report(nlohmann::json& report) const;
};

}  // namespace dsec::devices
