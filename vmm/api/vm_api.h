// The VM's API endpoints, with Firecracker's paths and bodies, and the order rules between
// them:
//   GET  /                 instance info (id, state, vmm_version, app_name)
//   GET  /vm/config        the VM's configuration
//   PATCH /vm              {"state": "Paused" | "Resumed"}: only with a VM
//   PUT  /snapshot/create  only while the VM is paused
//   PUT  /snapshot/load    only on a fresh VMM (no VM booted or loaded)
// Every refusal is 400 with a fault_message; success is 204, or 200 with JSON for a GET.
// More routes (Firecracker's pre-boot /boot-source, /machine-config, /drives/{id}, ...)
// go on the same router.
#pragma once

#include <string>

#include "vmm/api/http_message.h"
#include "vmm/api/router.h"
#include "vmm/api/vm_backend.h"

namespace dsec::api {

// The version GET / reports.
extern const char* const kVmmVersion;

class VmApi {
 public:
  // `backend` must outlive this object. `instance_id` is GET /'s "id".
  VmApi(VmBackend& backend, std::string instance_id);
  VmApi(const VmApi&) = delete;
  VmApi& operator=(const VmApi&) = delete;

  HttpResponse handle(const HttpRequest& request) const { return router_.route(request); }

 private:
  HttpResponse instance_info() const;
  HttpResponse vm_config() const;
  HttpResponse patch_vm(const HttpRequest& request);
  HttpResponse create_snapshot(const HttpRequest& request);
  HttpResponse load_snapshot(const HttpRequest& request);

  VmBackend& backend_;
  std::string instance_id_;
  Router router_;
};

}  // namespace dsec::api
