// The VM's API endpoints, with Firecracker's paths and bodies, and Firecracker's order
// rules between them (docs/api.md):
//   GET  /, /version, /vm/config, /machine-config           always
//   PUT  /boot-source, /machine-config, /drives/{id},
//        /network-interfaces/{id}, /vsock, /entropy, /logger,
//        /metrics,
//   PATCH /machine-config                                   before the VM starts only
//   PUT  /actions FlushMetrics                              always, once /metrics is set
//   PUT  /actions InstanceStart                             before: boots the configured VM
//   PUT  /snapshot/load                                     on a fresh VMM only: no VM, and
//                                                           nothing configured for a boot
//   PATCH /vm, PUT /actions SendCtrlAltDel,
//   PATCH /drives/{id}, /network-interfaces/{id}            with a VM only
//   PUT  /snapshot/create                                   only while the VM is paused
// A body is checked before the order rules; every refusal is 400 with a fault_message;
// success is 204, or 200 with JSON for a GET.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/api/preboot_config.h"
#include "vmm/api/vm_backend.h"
#include "vmm/http/message.h"
#include "vmm/http/router.h"
#include "vmm/mmds/mmds.h"

namespace dsec::api {

// The version GET / reports.
extern const char* const kVmmVersion;
// The Firecracker release whose API (its swagger) and command line this VMM follows, which
// `dsec-vmm firecracker --version` reports as Firecracker does.
extern const char* const kFirecrackerVersion;

class VmApi {
 public:
  // `backend` must outlive this object. `instance_id` is GET /'s "id".
  // `mmds` is the metadata service's store (the --metadata a command line loaded into
  // it); nullptr: the VM's own if it has one (a --config-file's), else a new, empty one.
  VmApi(VmBackend& backend, std::string instance_id, std::shared_ptr<mmds::Mmds> mmds = nullptr);
  VmApi(const VmApi&) = delete;
  VmApi& operator=(const VmApi&) = delete;

  http::HttpResponse handle(const http::HttpRequest& request) const {
    return router_.route(request);
  }
  // The method and path pattern of every endpoint handle() serves.
  std::vector<http::Router::RouteName> routes() const { return router_.routes(); }

 private:
  using Args = std::vector<std::string>;
  // A request that changes something: `work` gets its body (and the path's ids) and says
  // whether it was done; 204, or 400 with its message.
  using Work = std::function<Status(std::string_view body, const Args& args)>;
  void add_work_route(http::Method method, std::string_view pattern, Work work);

  // vm_api.cpp: the instance, its state and its snapshots.
  http::HttpResponse instance_info() const;
  http::HttpResponse vm_config() const;
  http::HttpResponse machine_config() const;
  Status patch_vm(std::string_view body);
  Status create_snapshot(std::string_view body);
  Status load_snapshot(std::string_view body);

  // vm_api_mmds.cpp: PUT /mmds/config, PUT, PATCH and GET /mmds.
  void add_mmds_routes();
  // PUT or PATCH /mmds: 204, or 400 (413 for a document over the size limit).
  http::HttpResponse update_mmds(const http::HttpRequest& request, bool patch);

  // vm_api_preboot.cpp: Firecracker's pre-boot configuration and the actions.
  void add_preboot_routes();
  Status act(std::string_view body);
  // PATCH /drives/{id} (a new file, rate limiters), /network-interfaces/{id} (rate
  // limiters): a running VM's devices.
  Status patch_drive(std::string_view body, const std::string& drive_id);
  Status patch_network_interface(std::string_view body, const std::string& iface_id);
  // The VM's configuration; an error unless there is a VM.
  Result<machine::MachineConfig> running_vm_config() const;
  // An error unless there is no VM yet: `request` (as "PUT /vsock") is pre-boot only.
  Status before_start(std::string_view request) const;
  // An error unless there is a VM.
  Status with_vm() const;

  VmBackend& backend_;
  std::string instance_id_;
  PrebootConfig preboot_;
  std::shared_ptr<mmds::Mmds> mmds_;
  http::Router router_{http::Router::Unmatched::kFirecracker};
};

}  // namespace dsec::api
