#include "vmm/api/vm_api.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "vmm/api/vm_config_json.h"
#include "vmm/api/vm_requests.h"

#ifndef DSEC_VMM_VERSION
#error "DSEC_VMM_VERSION comes from the project's version (vmm/CMakeLists.txt)"
#endif

namespace dsec::api {

const char* const kVmmVersion = DSEC_VMM_VERSION;
const char* const kFirecrackerVersion = "1.16.1";

namespace {

const char* state_name(InstanceState state) {
  switch (state) {
    case InstanceState::kNotStarted:
      return "Not started";
    case InstanceState::kRunning:
      return "Running";
    case InstanceState::kPaused:
      return "Paused";
  }
  return "Not started";
}

}  // namespace

VmApi::VmApi(VmBackend& backend, std::string instance_id, std::shared_ptr<mmds::Mmds> mmds)
    : backend_(backend), instance_id_(std::move(instance_id)), mmds_(std::move(mmds)) {
  if (const auto config = backend_.config(); !mmds_ && config && config->mmds) {
    mmds_ = config->mmds->service;
  }
  if (!mmds_) {
    mmds_ = std::make_shared<mmds::Mmds>();
  }
  router_.add(http::Method::kGet, "/",
              [this](const http::HttpRequest&, const Args&) { return instance_info(); });
  router_.add(http::Method::kGet, "/version", [](const http::HttpRequest&, const Args&) {
    return http::HttpResponse::json({{"firecracker_version", kVmmVersion}});
  });
  router_.add(http::Method::kGet, "/vm/config",
              [this](const http::HttpRequest&, const Args&) { return vm_config(); });
  router_.add(http::Method::kGet, "/machine-config",
              [this](const http::HttpRequest&, const Args&) { return machine_config(); });
  add_work_route(http::Method::kPatch, "/vm",
                 [this](std::string_view body, const Args&) { return patch_vm(body); });
  add_work_route(http::Method::kPut, "/snapshot/create",
                 [this](std::string_view body, const Args&) { return create_snapshot(body); });
  add_work_route(http::Method::kPut, "/snapshot/load",
                 [this](std::string_view body, const Args&) { return load_snapshot(body); });
  add_preboot_routes();
  add_mmds_routes();
}

void VmApi::add_work_route(http::Method method, std::string_view pattern, Work work) {
  router_.add(method, pattern,
              [work = std::move(work), method, pattern = std::string(pattern)](
                  const http::HttpRequest& request, const Args& args) {
                const Status done = work(request.body, args);
                auto response = done ? http::HttpResponse::no_content()
                                     : http::HttpResponse::fault(done.error().message());
                if (!done) {
                  spdlog::warn("api: {} {} refused: {}", request.method_text, request.path,
                               done.error().message());
                }
                // As Firecracker: the answer to a body with a deprecated field says so, and
                // the log has why.
                if (const auto deprecated = deprecation_of(method, pattern, request.body)) {
                  spdlog::warn("api: {}", *deprecated);
                  response.headers.emplace_back("Deprecation", "true");
                }
                return response;
              });
}

Status VmApi::before_start(std::string_view request) const {
  if (backend_.state() != InstanceState::kNotStarted) {
    return fail(fmt::format(
        "{} is not supported after the VM started: its configuration is fixed once it runs "
        "(start a fresh VMM, dsec-vmm serve, for another)",
        request));
  }
  return ok();
}

Status VmApi::with_vm() const {
  if (backend_.state() == InstanceState::kNotStarted) {
    return fail(
        "there is no VM yet: start one (PUT /actions {\"action_type\": \"InstanceStart\"}) or "
        "load a snapshot (PUT /snapshot/load) first");
  }
  return ok();
}

http::HttpResponse VmApi::instance_info() const {
  return http::HttpResponse::json({{"id", instance_id_},
                                   {"state", state_name(backend_.state())},
                                   {"vmm_version", kVmmVersion},
                                   {"app_name", "dsec-vmm"}});
}

http::HttpResponse VmApi::vm_config() const {
  const auto config = backend_.config();
  return http::HttpResponse::json(vm_config_json(config ? *config : preboot_.config()));
}

http::HttpResponse VmApi::machine_config() const {
  const auto config = backend_.config();
  return http::HttpResponse::json(machine_config_json(config ? *config : preboot_.config()));
}

Status VmApi::patch_vm(std::string_view body) {
  const auto change = DSEC_TRY(parse_vm_state(body));
  DSEC_TRY(with_vm());
  return change == VmStateChange::kPause ? backend_.pause() : backend_.resume();
}

Status VmApi::create_snapshot(std::string_view body) {
  const auto create = DSEC_TRY(parse_snapshot_create(body));
  DSEC_TRY(with_vm());
  if (backend_.state() == InstanceState::kRunning) {
    return fail(
        "cannot create a snapshot while running: pause the VM first (PATCH /vm {\"state\": "
        "\"Paused\"})");
  }
  return backend_.create_snapshot(create);
}

Status VmApi::load_snapshot(std::string_view body) {
  const auto load = DSEC_TRY(parse_snapshot_load(body));
  if (backend_.state() != InstanceState::kNotStarted) {
    return fail(
        "cannot load a snapshot: this VMM already has a VM (booted or loaded); start a fresh "
        "one (dsec-vmm serve --api-sock PATH) for each load");
  }
  if (preboot_.configures_a_boot()) {
    return fail(
        "cannot load a snapshot: this VMM was configured for a boot (boot source, machine "
        "configuration or devices); start a fresh one (dsec-vmm serve --api-sock PATH) for the "
        "load");
  }
  return backend_.load_snapshot(load);
}

}  // namespace dsec::api
