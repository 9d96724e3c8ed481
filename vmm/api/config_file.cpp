#include "vmm/api/config_file.h"

#include <fmt/format.h>

#include "vmm/api/mmds_requests.h"
#include "vmm/common/file.h"

namespace dsec::api {
namespace {

using nlohmann::json;
using Nulls = JsonObject::Nulls;

// Each entry of an array section ("drives[0]", ...) as an object of its own.
template <typename Apply>
Status for_each_entry(const json& list, const char* section, Apply apply) {
  for (size_t i = 0; i < list.size(); ++i) {
    DSEC_TRY(apply(
        DSEC_TRY(JsonObject::of(list[i], fmt::format("{}[{}]", section, i), Nulls::kAbsent))));
  }
  return ok();
}

Result<JsonObject> section(const json& value, const char* name) {
  return JsonObject::of(value, fmt::format("\"{}\"", name), Nulls::kAbsent);
}

Status read_sections(JsonObject& file, ConfigFile& config) {
  PrebootConfig& preboot = config.preboot;
  if (const auto logger = DSEC_TRY(file.optional_object("logger"))) {
    config.logger = DSEC_TRY(parse_logger(DSEC_TRY(section(*logger, "logger"))));
  }
  if (const auto metrics = DSEC_TRY(file.optional_object("metrics"))) {
    config.metrics_path = DSEC_TRY(parse_metrics(DSEC_TRY(section(*metrics, "metrics"))));
  }
  if (const auto source = DSEC_TRY(file.optional_object("boot-source"))) {
    DSEC_TRY(preboot.set_boot_source(
        DSEC_TRY(parse_boot_source(DSEC_TRY(section(*source, "boot-source"))))));
  }
  if (const auto machine = DSEC_TRY(file.optional_object("machine-config"))) {
    DSEC_TRY(preboot.update_machine_config(DSEC_TRY(
        parse_machine_config(DSEC_TRY(section(*machine, "machine-config")), Update::kWhole))));
  }
  if (const auto drives = DSEC_TRY(file.optional_array("drives"))) {
    DSEC_TRY(for_each_entry(*drives, "drives", [&](JsonObject drive) -> Status {
      return preboot.put_drive(DSEC_TRY(parse_drive(std::move(drive), std::nullopt)));
    }));
  }
  if (const auto nets = DSEC_TRY(file.optional_array("network-interfaces"))) {
    DSEC_TRY(for_each_entry(*nets, "network-interfaces", [&](JsonObject net) -> Status {
      return preboot.put_network_interface(
          DSEC_TRY(parse_network_interface(std::move(net), std::nullopt)));
    }));
  }
  if (const auto vsock = DSEC_TRY(file.optional_object("vsock"))) {
    DSEC_TRY(preboot.set_vsock(DSEC_TRY(parse_vsock(DSEC_TRY(section(*vsock, "vsock"))))));
  }
  if (const auto entropy = DSEC_TRY(file.optional_object("entropy"))) {
    preboot.set_entropy(DSEC_TRY(parse_entropy(DSEC_TRY(section(*entropy, "entropy")))));
  }
  // After the interfaces: it names them.
  if (const auto mmds = DSEC_TRY(file.optional_object("mmds-config"))) {
    preboot.set_mmds_config(DSEC_TRY(
        parse_mmds_config(DSEC_TRY(section(*mmds, "mmds-config")), preboot.iface_ids())));
  }
  // Firecracker's sections for devices this VMM has not: null (as GET /vm/config writes
  // them) or absent.
  DSEC_TRY(file.refuse("balloon", "dsec-vmm has no balloon device"));
  DSEC_TRY(file.refuse("cpu-config", "dsec-vmm has no CPU templates"));
  return file.finish();
}

}  // namespace

Result<ConfigFile> parse_config_file(std::string_view text) {
  auto file = DSEC_TRY(JsonObject::parse(text, "the configuration", Nulls::kAbsent));
  ConfigFile config;
  DSEC_TRY(read_sections(file, config));
  return config;
}

Result<ConfigFile> read_config_file(const std::string& path) {
  constexpr uint64_t kMaxConfigBytes = 1 << 20;  // a configuration is a few hundred bytes
  const auto file = map_file(path, kMaxConfigBytes);
  if (!file) {
    return std::unexpected(file.error().with_context("--config-file"));
  }
  const auto bytes = file->bytes();
  auto config = parse_config_file(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (!config) {
    return std::unexpected(config.error().with_context("--config-file " + path));
  }
  return config;
}

}  // namespace dsec::api
