#include "vmm/api/vm_api.h"

#include <spdlog/spdlog.h>

#include "vmm/api/vm_config_json.h"
#include "vmm/api/vm_requests.h"

#ifndef DSEC_VMM_VERSION
#error "DSEC_VMM_VERSION comes from the project's version (vmm/CMakeLists.txt)"
#endif

namespace dsec::api {

const char* const kVmmVersion = DSEC_VMM_VERSION;

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

// 204 when `done` succeeded, else 400 with its message.
HttpResponse answer(const char* request, const Status& done) {
  if (!done) {
    spdlog::warn("api: {} refused: {}", request, done.error().message());
    return HttpResponse::fault(done.error().message());
  }
  return HttpResponse::no_content();
}

constexpr const char* kNoVm = "there is no VM yet: load a snapshot first (PUT /snapshot/load)";

}  // namespace

VmApi::VmApi(VmBackend& backend, std::string instance_id)
    : backend_(backend), instance_id_(std::move(instance_id)) {
  using Args = std::vector<std::string>;
  router_.add(Method::kGet, "/",
              [this](const HttpRequest&, const Args&) { return instance_info(); });
  router_.add(Method::kGet, "/vm/config",
              [this](const HttpRequest&, const Args&) { return vm_config(); });
  router_.add(Method::kPatch, "/vm",
              [this](const HttpRequest& r, const Args&) { return patch_vm(r); });
  router_.add(Method::kPut, "/snapshot/create",
              [this](const HttpRequest& r, const Args&) { return create_snapshot(r); });
  router_.add(Method::kPut, "/snapshot/load",
              [this](const HttpRequest& r, const Args&) { return load_snapshot(r); });
}

HttpResponse VmApi::instance_info() const {
  return HttpResponse::json({{"id", instance_id_},
                             {"state", state_name(backend_.state())},
                             {"vmm_version", kVmmVersion},
                             {"app_name", "dsec-vmm"}});
}

HttpResponse VmApi::vm_config() const {
  const auto config = backend_.config();
  if (!config) {
    return HttpResponse::fault(kNoVm);
  }
  return HttpResponse::json(vm_config_json(*config));
}

HttpResponse VmApi::patch_vm(const HttpRequest& request) {
  const auto change = parse_vm_state(request.body);
  if (!change) {
    return answer("PATCH /vm", std::unexpected(change.error()));
  }
  if (backend_.state() == InstanceState::kNotStarted) {
    return answer("PATCH /vm", fail(kNoVm));
  }
  return answer("PATCH /vm",
                *change == VmStateChange::kPause ? backend_.pause() : backend_.resume());
}

HttpResponse VmApi::create_snapshot(const HttpRequest& request) {
  const auto create = parse_snapshot_create(request.body);
  if (!create) {
    return answer("PUT /snapshot/create", std::unexpected(create.error()));
  }
  switch (backend_.state()) {
    case InstanceState::kNotStarted:
      return answer("PUT /snapshot/create", fail(kNoVm));
    case InstanceState::kRunning:
      return answer("PUT /snapshot/create",
                    fail("cannot create a snapshot while running: pause the VM first (PATCH /vm "
                         "{\"state\": \"Paused\"})"));
    case InstanceState::kPaused:
      break;
  }
  return answer("PUT /snapshot/create", backend_.create_snapshot(*create));
}

HttpResponse VmApi::load_snapshot(const HttpRequest& request) {
  const auto load = parse_snapshot_load(request.body);
  if (!load) {
    return answer("PUT /snapshot/load", std::unexpected(load.error()));
  }
  if (backend_.state() != InstanceState::kNotStarted) {
    return answer("PUT /snapshot/load",
                  fail("cannot load a snapshot: this VMM already has a VM (booted or loaded); "
                       "start a fresh one (dsec-vmm serve --api-sock PATH) for each load"));
  }
  return answer("PUT /snapshot/load", backend_.load_snapshot(*load));
}

}  // namespace dsec::api
