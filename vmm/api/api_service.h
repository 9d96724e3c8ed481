// A VMM's API as a command runs it (`--api-sock`): the socket, bound before anything
// starts so that a path in use fails the command at once; the endpoints and their backend,
// attached once there is something to drive; and a stop that ends the API thread before
// the backend or its VM go.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "vmm/api/machine_backend.h"
#include "vmm/api/vm_api.h"
#include "vmm/http/server.h"

namespace dsec::api {

class ApiService {
 public:
  // Firecracker's default instance id.
  static constexpr const char* kDefaultInstanceId = "anonymous-instance";
  // How often the metrics are written without a FlushMetrics, as Firecracker does.
  static constexpr std::chrono::seconds kMetricsPeriod{60};

  // Binds `socket_path`. `instance_id` is what GET / calls the VMM. A request whose body
  // is over `max_body_bytes` (0: HttpLimits' default) is refused.
  static Result<std::unique_ptr<ApiService>> bind(const std::string& socket_path,
                                                  std::string instance_id,
                                                  size_t max_body_bytes = 0);
  ApiService(const ApiService&) = delete;
  ApiService& operator=(const ApiService&) = delete;
  ~ApiService() { stop(); }

  // Starts the API thread ahead of serve() (HttpServer::launch).
  Status launch(http::HttpServer::ThreadStart setup) { return server_->launch(std::move(setup)); }
  // Serves the endpoints over `backend`, which this object then owns, and writes its
  // metrics, once configured, every kMetricsPeriod on the API thread.
  // `mmds`: the metadata service's store (VmApi's constructor).
  Status serve(std::unique_ptr<MachineBackend> backend, std::shared_ptr<mmds::Mmds> mmds = nullptr);
  MachineBackend* backend() { return backend_.get(); }
  // Ends the API thread and removes the socket; the backend (and a VM it owns) stays
  // until this object goes.
  void stop();

 private:
  ApiService(std::unique_ptr<http::HttpServer> server, std::string instance_id)
      : instance_id_(std::move(instance_id)), server_(std::move(server)) {}

  // Arms the next periodic metrics line on the API thread's loop.
  Status schedule_metrics_flush();

  std::string instance_id_;
  std::unique_ptr<MachineBackend> backend_;
  std::unique_ptr<VmApi> endpoints_;
  std::unique_ptr<http::HttpServer> server_;  // last: destroyed, and so stopped, first
};

}  // namespace dsec::api
