#include "vmm/pool/pool_api.h"

#include <fmt/format.h>

namespace dsec::pool {
namespace {

using api::HttpRequest;
using api::HttpResponse;
using api::Method;
using Args = std::vector<std::string>;

template <typename T>
HttpResponse answer(const PoolResult<T>& result, int status = 200) {
  if (!result) {
    return HttpResponse::fault(result.error().message, result.error().status);
  }
  if constexpr (std::is_void_v<T>) {
    return HttpResponse::no_content();
  } else {
    return HttpResponse::json(*result, status);
  }
}

HttpResponse bad_body(const Error& e) {
  return HttpResponse::fault(e.message(), 400);
}

}  // namespace

api::Router pool_router(Pool& pool) {
  api::Router router;
  router.add(Method::kGet, "/images", [&pool](const HttpRequest&, const Args&) {
    return HttpResponse::json(pool.images_json());
  });
  router.add(Method::kPut, "/images/{name}", [&pool](const HttpRequest& request, const Args& args) {
    auto spec = parse_image_spec(args[0], request.body);
    if (!spec) {
      return bad_body(spec.error());
    }
    return answer(pool.register_image(*spec));
  });
  router.add(Method::kGet, "/sandboxes", [&pool](const HttpRequest&, const Args&) {
    return HttpResponse::json(pool.sandboxes_json());
  });
  router.add_deferred(Method::kPost, "/sandboxes",
                      [&pool](const HttpRequest& request, const Args&, api::Responder respond) {
                        auto acquire = parse_acquire(request.body);
                        if (!acquire) {
                          respond(bad_body(acquire.error()));
                          return;
                        }
                        pool.acquire(*acquire, [respond = std::move(respond)](
                                                   PoolResult<nlohmann::json> sandbox) mutable {
                          respond(answer(sandbox, 201));
                        });
                      });
  router.add(Method::kGet, "/sandboxes/{id}", [&pool](const HttpRequest&, const Args& args) {
    return answer(pool.sandbox_json(args[0]));
  });
  router.add(Method::kDelete, "/sandboxes/{id}", [&pool](const HttpRequest&, const Args& args) {
    return answer(pool.release(args[0]));
  });
  router.add_deferred(
      Method::kPost, "/sandboxes/{id}/exec",
      [&pool](const HttpRequest& request, const Args& args, api::Responder respond) {
        auto call = parse_exec(request.body);
        if (!call) {
          respond(bad_body(call.error()));
          return;
        }
        pool.exec(args[0], std::move(*call),
                  [respond = std::move(respond)](PoolResult<nlohmann::json> outcome) mutable {
                    respond(answer(outcome));
                  });
      });
  router.add_deferred(
      Method::kPut, "/sandboxes/{id}/files",
      [&pool](const HttpRequest& request, const Args& args, api::Responder respond) {
        auto target = parse_file_target(request.header(kPathHeader), request.header(kModeHeader));
        if (!target) {
          respond(bad_body(target.error()));
          return;
        }
        pool.write_file(args[0], target->guest_path,
                        GuestFile{.bytes = request.body, .mode = target->mode},
                        [respond = std::move(respond)](PoolResult<void> written) mutable {
                          respond(answer(written));
                        });
      });
  router.add_deferred(
      Method::kGet, "/sandboxes/{id}/files",
      [&pool](const HttpRequest& request, const Args& args, api::Responder respond) {
        auto target = parse_file_target(request.header(kPathHeader), "");
        if (!target) {
          respond(bad_body(target.error()));
          return;
        }
        pool.read_file(args[0], target->guest_path,
                       [respond = std::move(respond)](PoolResult<GuestFile> file) mutable {
                         if (!file) {
                           respond(HttpResponse::fault(file.error().message, file.error().status));
                           return;
                         }
                         HttpResponse bytes{
                             .status = 200,
                             .body = std::move(file->bytes),
                             .content_type = "application/octet-stream",
                             .headers = {{"X-Dsec-Mode", fmt::format("{:04o}", file->mode)}}};
                         respond(std::move(bytes));
                       });
      });
  for (const bool pause : {true, false}) {
    router.add_deferred(
        Method::kPost, pause ? "/sandboxes/{id}/pause" : "/sandboxes/{id}/resume",
        [&pool, pause](const HttpRequest&, const Args& args, api::Responder respond) {
          auto respond_with = [respond =
                                   std::move(respond)](PoolResult<nlohmann::json> sandbox) mutable {
            respond(answer(sandbox));
          };
          if (pause) {
            pool.pause(args[0], std::move(respond_with));
          } else {
            pool.resume(args[0], std::move(respond_with));
          }
        });
  }
  router.add_deferred(
      Method::kPost, "/sandboxes/{id}/snapshot",
      [&pool](const HttpRequest& request, const Args& args, api::Responder respond) {
        auto dir = parse_snapshot_dir(request.body);
        if (!dir) {
          respond(bad_body(dir.error()));
          return;
        }
        pool.snapshot(args[0], *dir,
                      [respond = std::move(respond)](PoolResult<nlohmann::json> made) mutable {
                        respond(answer(made, 201));
                      });
      });
  router.add(
      Method::kPost, "/sandboxes/{id}/keepalive",
      [&pool](const HttpRequest&, const Args& args) { return answer(pool.keepalive(args[0])); });
  router.add(Method::kGet, "/metrics", [&pool](const HttpRequest&, const Args&) {
    return HttpResponse::text(pool.metrics(), "text/plain; version=0.0.4");
  });
  return router;
}

}  // namespace dsec::pool
