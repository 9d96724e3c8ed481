#include "vmm/api/api_service.h"

namespace dsec::api {

Result<std::unique_ptr<ApiService>> ApiService::bind(const std::string& socket_path,
                                                     std::string instance_id) {
  auto server = DSEC_TRY(ApiServer::bind(socket_path));
  return std::unique_ptr<ApiService>(new ApiService(std::move(server), std::move(instance_id)));
}

Status ApiService::serve(std::unique_ptr<MachineBackend> backend) {
  if (backend_) {
    return fail("the API serves a backend already");
  }
  backend_ = std::move(backend);
  endpoints_ = std::make_unique<VmApi>(*backend_, instance_id_);
  return server_->serve([this](const HttpRequest& request) { return endpoints_->handle(request); });
}

void ApiService::stop() {
  server_->stop();
}

}  // namespace dsec::api
