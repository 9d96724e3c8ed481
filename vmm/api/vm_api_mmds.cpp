// VmApi's MMDS endpoints, as Firecracker's: PUT /mmds/config before the VM starts; PUT,
// PATCH and GET /mmds at any time (the guest sees a change at once).
#include <spdlog/spdlog.h>

#include "vmm/api/mmds_requests.h"
#include "vmm/api/vm_api.h"

namespace dsec::api {

void VmApi::add_mmds_routes() {
  add_work_route(http::Method::kPut, "/mmds/config",
                 [this](std::string_view body, const Args&) -> Status {
                   const auto config = DSEC_TRY(
                       parse_mmds_config(DSEC_TRY(parse_body(body)), preboot_.iface_ids()));
                   DSEC_TRY(before_start("PUT /mmds/config"));
                   preboot_.set_mmds_config(config);
                   mmds_->configure(config.version, config.imds_compat);
                   return ok();
                 });
  router_.add(http::Method::kPut, "/mmds", [this](const http::HttpRequest& request, const Args&) {
    return update_mmds(request, false);
  });
  router_.add(http::Method::kPatch, "/mmds",
              [this](const http::HttpRequest& request, const Args&) {
                return update_mmds(request, true);
              });
  router_.add(http::Method::kGet, "/mmds", [this](const http::HttpRequest&, const Args&) {
    return http::HttpResponse::json(mmds_->value());
  });
}

http::HttpResponse VmApi::update_mmds(const http::HttpRequest& request, bool patch) {
  const auto done = patch ? mmds_->patch(request.body) : mmds_->put(request.body);
  if (done) {
    return http::HttpResponse::no_content();
  }
  spdlog::warn("api: {} /mmds refused: {}", request.method_text, done.error().message);
  // As Firecracker: a document over --mmds-size-limit is 413, anything else 400.
  return http::HttpResponse::fault(done.error().message,
                                   done.error().kind == mmds::UpdateError::kTooLarge ? 413 : 400);
}

}  // namespace dsec::api
