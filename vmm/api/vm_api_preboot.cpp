// VmApi's pre-boot endpoints (Firecracker's configuration of a fresh VMM) and PUT /actions.
#include <fmt/format.h>

#include "vmm/api/vm_api.h"

namespace dsec::api {

void VmApi::add_preboot_routes() {
  add_work_route(Method::kPut, "/boot-source",
                 [this](std::string_view body, const Args&) -> Status {
                   const auto source = DSEC_TRY(parse_boot_source(DSEC_TRY(parse_body(body))));
                   DSEC_TRY(before_start("PUT /boot-source"));
                   return preboot_.set_boot_source(source);
                 });
  for (const auto& [method, update] :
       {std::pair{Method::kPut, Update::kWhole}, std::pair{Method::kPatch, Update::kPartial}}) {
    add_work_route(method, "/machine-config",
                   [this, method, update](std::string_view body, const Args&) -> Status {
                     const auto change =
                         DSEC_TRY(parse_machine_config(DSEC_TRY(parse_body(body)), update));
                     DSEC_TRY(before_start(fmt::format("{} /machine-config", method_name(method))));
                     return preboot_.update_machine_config(change);
                   });
  }
  add_work_route(Method::kPut, "/drives/{drive_id}",
                 [this](std::string_view body, const Args& args) -> Status {
                   const auto drive = DSEC_TRY(parse_drive(DSEC_TRY(parse_body(body)), args[0]));
                   DSEC_TRY(before_start("PUT /drives"));
                   return preboot_.put_drive(drive);
                 });
  add_work_route(Method::kPut, "/network-interfaces/{iface_id}",
                 [this](std::string_view body, const Args& args) -> Status {
                   const auto net =
                       DSEC_TRY(parse_network_interface(DSEC_TRY(parse_body(body)), args[0]));
                   DSEC_TRY(before_start("PUT /network-interfaces"));
                   return preboot_.put_network_interface(net);
                 });
  // Firecracker changes a running VM's drive (its file, its rate limiter) and interface
  // (its rate limiters) with these; dsec-vmm cannot yet, and says so.
  for (const char* resource : {"drives/{drive_id}", "network-interfaces/{iface_id}"}) {
    add_work_route(Method::kPatch, fmt::format("/{}", resource),
                   [this](std::string_view, const Args& args) -> Status {
                     DSEC_TRY(with_vm());
                     return fail(fmt::format(
                         "'{}': dsec-vmm cannot change a device of a running VM (its file or "
                         "rate limiters)",
                         args[0]));
                   });
  }
  add_work_route(Method::kPut, "/vsock", [this](std::string_view body, const Args&) -> Status {
    const auto vsock = DSEC_TRY(parse_vsock(DSEC_TRY(parse_body(body))));
    DSEC_TRY(before_start("PUT /vsock"));
    return preboot_.set_vsock(vsock);
  });
  add_work_route(Method::kPut, "/entropy", [this](std::string_view body, const Args&) -> Status {
    DSEC_TRY(parse_entropy(DSEC_TRY(parse_body(body))));
    DSEC_TRY(before_start("PUT /entropy"));
    preboot_.set_entropy();
    return ok();
  });
  add_work_route(Method::kPut, "/logger", [this](std::string_view body, const Args&) -> Status {
    const auto logger = DSEC_TRY(parse_logger(DSEC_TRY(parse_body(body))));
    DSEC_TRY(before_start("PUT /logger"));
    return backend_.configure_logger(logger);
  });
  add_work_route(Method::kPut, "/metrics", [this](std::string_view body, const Args&) -> Status {
    DSEC_TRY(parse_metrics(DSEC_TRY(parse_body(body))));
    DSEC_TRY(before_start("PUT /metrics"));
    return fail("PUT /metrics is not supported: dsec-vmm writes no Firecracker metrics yet");
  });
  add_work_route(Method::kPut, "/actions",
                 [this](std::string_view body, const Args&) -> Status { return act(body); });
}

Status VmApi::act(std::string_view body) {
  switch (DSEC_TRY(parse_action(DSEC_TRY(parse_body(body))))) {
    case Action::kInstanceStart:
      DSEC_TRY(before_start("InstanceStart"));
      return backend_.boot(DSEC_TRY(preboot_.boot_config()));
    case Action::kSendCtrlAltDel:
      DSEC_TRY(with_vm());
      return backend_.send_ctrl_alt_del();
    case Action::kFlushMetrics:
      DSEC_TRY(with_vm());
      return fail("FlushMetrics is not supported: dsec-vmm writes no Firecracker metrics yet");
  }
  return fail("unknown action");
}

}  // namespace dsec::api
