// VmApi's pre-boot endpoints (Firecracker's configuration of a fresh VMM) and PUT /actions.
#include <fmt/format.h>

#include "vmm/api/vm_api.h"
#include "vmm/machine/config_parts.h"

namespace dsec::api {

void VmApi::add_preboot_routes() {
  add_work_route(http::Method::kPut, "/boot-source",
                 [this](std::string_view body, const Args&) -> Status {
                   const auto source = DSEC_TRY(parse_boot_source(DSEC_TRY(parse_body(body))));
                   DSEC_TRY(before_start("PUT /boot-source"));
                   return preboot_.set_boot_source(source);
                 });
  for (const auto& [method, update] : {std::pair{http::Method::kPut, Update::kWhole},
                                       std::pair{http::Method::kPatch, Update::kPartial}}) {
    add_work_route(
        method, "/machine-config",
        [this, method, update](std::string_view body, const Args&) -> Status {
          const auto change = DSEC_TRY(parse_machine_config(DSEC_TRY(parse_body(body)), update));
          DSEC_TRY(before_start(fmt::format("{} /machine-config", http::method_name(method))));
          return preboot_.update_machine_config(change);
        });
  }
  add_work_route(http::Method::kPut, "/drives/{drive_id}",
                 [this](std::string_view body, const Args& args) -> Status {
                   const auto drive = DSEC_TRY(parse_drive(DSEC_TRY(parse_body(body)), args[0]));
                   DSEC_TRY(before_start("PUT /drives"));
                   return preboot_.put_drive(drive);
                 });
  add_work_route(http::Method::kPut, "/network-interfaces/{iface_id}",
                 [this](std::string_view body, const Args& args) -> Status {
                   const auto net =
                       DSEC_TRY(parse_network_interface(DSEC_TRY(parse_body(body)), args[0]));
                   DSEC_TRY(before_start("PUT /network-interfaces"));
                   return preboot_.put_network_interface(net);
                 });
  add_work_route(
      http::Method::kPatch, "/drives/{drive_id}",
      [this](std::string_view body, const Args& args) { return patch_drive(body, args[0]); });
  add_work_route(http::Method::kPatch, "/network-interfaces/{iface_id}",
                 [this](std::string_view body, const Args& args) {
                   return patch_network_interface(body, args[0]);
                 });
  add_work_route(http::Method::kPut, "/vsock",
                 [this](std::string_view body, const Args&) -> Status {
                   const auto vsock = DSEC_TRY(parse_vsock(DSEC_TRY(parse_body(body))));
                   DSEC_TRY(before_start("PUT /vsock"));
                   return preboot_.set_vsock(vsock);
                 });
  add_work_route(http::Method::kPut, "/entropy",
                 [this](std::string_view body, const Args&) -> Status {
                   const auto entropy = DSEC_TRY(parse_entropy(DSEC_TRY(parse_body(body))));
                   DSEC_TRY(before_start("PUT /entropy"));
                   preboot_.set_entropy(entropy);
                   return ok();
                 });
  add_work_route(http::Method::kPut, "/logger",
                 [this](std::string_view body, const Args&) -> Status {
                   const auto logger = DSEC_TRY(parse_logger(DSEC_TRY(parse_body(body))));
                   DSEC_TRY(before_start("PUT /logger"));
                   return backend_.configure_logger(logger);
                 });
  add_work_route(http::Method::kPut, "/metrics",
                 [this](std::string_view body, const Args&) -> Status {
                   const auto path = DSEC_TRY(parse_metrics(DSEC_TRY(parse_body(body))));
                   DSEC_TRY(before_start("PUT /metrics"));
                   return backend_.configure_metrics(path);
                 });
  add_work_route(http::Method::kPut, "/actions",
                 [this](std::string_view body, const Args&) -> Status { return act(body); });
}

Result<machine::MachineConfig> VmApi::running_vm_config() const {
  DSEC_TRY(with_vm());
  if (auto config = backend_.config()) {
    return std::move(*config);
  }
  return fail("the VM's configuration cannot be read");
}

Status VmApi::patch_drive(std::string_view body, const std::string& drive_id) {
  const auto update = DSEC_TRY(parse_drive_update(DSEC_TRY(parse_body(body)), drive_id));
  const auto config = DSEC_TRY(running_vm_config());
  const auto& drives = config.drives;
  for (size_t i = 0; i < drives.size(); ++i) {
    if ((drives[i].id.empty() ? machine::guest_drive_name(i) : drives[i].id) == drive_id) {
      // The file first, as Firecracker does: a file that cannot be the disk changes nothing.
      if (update.path_on_host) {
        DSEC_TRY(backend_.set_drive_file(i, *update.path_on_host));
      }
      return backend_.set_drive_rate_limiter(
          i, update.rate_limiter.applied_to(drives[i].rate_limiter));
    }
  }
  return fail(fmt::format("the VM has no drive '{}' (GET /vm/config lists its drives)", drive_id));
}

Status VmApi::patch_network_interface(std::string_view body, const std::string& iface_id) {
  const auto update =
      DSEC_TRY(parse_network_interface_update(DSEC_TRY(parse_body(body)), iface_id));
  const auto config = DSEC_TRY(running_vm_config());
  for (size_t i = 0; i < config.nets.size(); ++i) {
    const auto& net = config.nets[i];
    if (net.iface_id() == iface_id) {
      return backend_.set_net_rate_limiters(i,
                                            update.rx_rate_limiter.applied_to(net.rx_rate_limiter),
                                            update.tx_rate_limiter.applied_to(net.tx_rate_limiter));
    }
  }
  return fail(fmt::format(
      "the VM has no network interface '{}' (GET /vm/config lists its interfaces)", iface_id));
}

Status VmApi::act(std::string_view body) {
  switch (DSEC_TRY(parse_action(DSEC_TRY(parse_body(body))))) {
    case Action::kInstanceStart:
      DSEC_TRY(before_start("InstanceStart"));
    {
      auto config = DSEC_TRY(preboot_.boot_config());
      if (config.mmds) {
        config.mmds->service = mmds_;  // configured by PUT /mmds/config
      }
      return backend_.boot(config);
    }
    case Action::kSendCtrlAltDel:
      DSEC_TRY(with_vm());
      return backend_.send_ctrl_alt_del();
    case Action::kFlushMetrics:
      return backend_.flush_metrics();
  }
  return fail("unknown action");
}

}  // namespace dsec::api
