#include "vmm/devices/device_metrics.h"

namespace dsec::devices {
namespace {

using nlohmann::json;

template <typename Metrics, size_t N>
json take_section(Metrics& metrics, const std::array<MetricField<Metrics>, N>& fields) {
  json section = json::object();
  for (const auto& field : fields) {
    section[field.name] = (metrics.*field.counter).take_since_last_report();
  }
  return section;
}

// Firecracker's per-device sections ("<kind>_<id>") and their sum ("<kind>").
template <typename Metrics, size_t N>
void add_device_sections(
    json& report, const char* kind,
    const std::vector<std::pair<std::string, std::shared_ptr<Metrics>>>& devices,
    const std::array<MetricField<Metrics>, N>& fields) {
  if (devices.empty()) {
    return;
  }
  json sum = json::object();
  for (const auto& field : fields) {
    sum[field.name] = uint64_t{0};
  }
  for (const auto& [id, metrics] : devices) {
    json section = take_section(*metrics, fields);
    for (const auto& field : fields) {
      sum[field.name] =
          sum[field.name].template get<uint64_t>() + section[field.name].template get<uint64_t>();
    }
    report[std::string(kind) + "_" + id] = std::move(section);
  }
  report[kind] = std::move(sum);
}

}  // namespace

void DeviceMetrics::take_report(json& report) const {
  add_device_sections(report, "block", drives, kBlockMetricFields);
  add_device_sections(report, "net", nets, kNetMetricFields);
  if (vsock) {
    report["vsock"] = take_section(*vsock, kVsockMetricFields);
  }
  if (entropy) {
    report["entropy"] = take_section(*entropy, kEntropyMetricFields);
  }
}

}  // namespace dsec::devices
