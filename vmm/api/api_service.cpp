#include "vmm/api/api_service.h"

#include <spdlog/spdlog.h>

namespace dsec::api {

Result<std::unique_ptr<ApiService>> ApiService::bind(const std::string& socket_path,
                                                     std::string instance_id,
                                                     size_t max_body_bytes) {
  http::HttpLimits limits;
  if (max_body_bytes != 0) {
    limits.max_body_bytes = max_body_bytes;
  }
  auto server = http::HttpServer::bind(socket_path, limits);
  if (!server) {
    return std::unexpected(server.error().with_context("--api-sock"));
  }
  return std::unique_ptr<ApiService>(new ApiService(std::move(*server), std::move(instance_id)));
}

Status ApiService::serve(std::unique_ptr<MachineBackend> backend, std::shared_ptr<mmds::Mmds> mmds) {
  if (backend_) {
    return fail("the API serves a backend already");
  }
  backend_ = std::move(backend);
  endpoints_ = std::make_unique<VmApi>(*backend_, instance_id_, std::move(mmds));
  // Before serve(): the loop is the API thread's from then on.
  DSEC_TRY(schedule_metrics_flush());
  return server_->serve(
      [this](const http::HttpRequest& request) { return endpoints_->handle(request); });
}

Status ApiService::schedule_metrics_flush() {
  // No thread of its own: a timer on the loop that serves the requests, so that the
  // lines and FlushMetrics's come from one thread.
  const auto armed = server_->loop().add_timer(kMetricsPeriod, [this] {
    if (backend_->metrics_configured()) {
      if (auto flushed = backend_->flush_metrics(); !flushed) {
        spdlog::warn("{}", flushed.error().message());
      }
    }
    if (auto again = schedule_metrics_flush(); !again) {
      spdlog::warn("metrics: no more periodic lines: {}", again.error().message());
    }
  });
  if (!armed) {
    return std::unexpected(armed.error());
  }
  return ok();
}

void ApiService::stop() {
  server_->stop();
}

}  // namespace dsec::api
