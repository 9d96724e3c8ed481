#include "vmm/pool/pool_api.h"

#include <fmt/format.h>

namespace dsec::pool {
namespace {

using http::HttpRequest;
using http::HttpResponse;
using http::Method;
using Args = std::vector<std::string>;

HttpResponse fault(const PoolError& e) {
  HttpResponse response = HttpResponse::fault(e.message, http_status(e.kind));
  if (e.kind == Failure::kUnauthenticated) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer");
  }
  return response;
}

template <typename T>
HttpResponse answer(const PoolResult<T>& result, int status = 200) {
  if (!result) {
    return fault(result.error());
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

// Who may take a route: any tenant the daemon knows, or its operator only.
enum class Who { kTenant, kOperator };

// The pool's routes, each behind the check of its caller: a handler runs only for a
// caller that TenantAccess knows and `Who` allows, and learns which tenant it is.
class TenantRoutes {
 public:
  using Handler = std::function<HttpResponse(const Tenant&, const HttpRequest&, const Args&)>;
  using Deferred =
      std::function<void(const Tenant&, const HttpRequest&, const Args&, http::Responder)>;

  TenantRoutes(http::Router& router, const TenantAccess& access)
      : router_(router), access_(access) {}

  void add(Method method, std::string_view pattern, Who who, Handler handler) {
    add_deferred(method, pattern, who,
                 [handler = std::move(handler)](const Tenant& tenant, const HttpRequest& request,
                                                const Args& args, http::Responder respond) {
                   respond(handler(tenant, request, args));
                 });
  }
  void add_deferred(Method method, std::string_view pattern, Who who, Deferred handler) {
    router_.add_deferred(
        method, pattern,
        [&access = access_, who, pattern = std::string(pattern), handler = std::move(handler)](
            const HttpRequest& request, const Args& args, http::Responder respond) {
          auto tenant = access.identify(request);
          if (!tenant) {
            respond(fault(tenant.error()));
            return;
          }
          if (who == Who::kOperator && !tenant->is_operator) {
            respond(fault(error(Failure::kForbidden, pattern + " is the operator's (the daemon's "
                                                               "own user, or a token marked "
                                                               "operator); tenants may list "
                                                               "images and acquire sandboxes")));
            return;
          }
          handler(*tenant, request, args, std::move(respond));
        });
  }

 private:
  http::Router& router_;
  const TenantAccess& access_;
};

}  // namespace

int http_status(Failure kind) {
  switch (kind) {
    case Failure::kInvalid:
      return 400;
    case Failure::kUnauthenticated:
      return 401;
    case Failure::kForbidden:
      return 403;
    case Failure::kNotFound:
      return 404;
    case Failure::kConflict:
      return 409;
    case Failure::kGone:
      return 410;
    case Failure::kFull:
    case Failure::kQuota:
      return 429;
    case Failure::kAgentFailed:
      return 502;
    case Failure::kUnavailable:
      return 503;
  }
  return 500;
}

http::Router pool_router(Pool& pool, const TenantAccess& access) {
  http::Router router;
  TenantRoutes routes(router, access);
  routes.add(Method::kGet, "/images", Who::kTenant,
             [&pool](const Tenant&, const HttpRequest&, const Args&) {
               return HttpResponse::json(pool.images_json());
             });
  routes.add(Method::kPut, "/images/{name}", Who::kOperator,
             [&pool](const Tenant&, const HttpRequest& request, const Args& args) {
               auto spec = parse_image_spec(args[0], request.body);
               if (!spec) {
                 return bad_body(spec.error());
               }
               return answer(pool.register_image(*spec));
             });
  routes.add(Method::kGet, "/sandboxes", Who::kTenant,
             [&pool](const Tenant& tenant, const HttpRequest&, const Args&) {
               return HttpResponse::json(pool.sandboxes_json(tenant));
             });
  routes.add_deferred(
      Method::kPost, "/sandboxes", Who::kTenant,
      [&pool](const Tenant& tenant, const HttpRequest& request, const Args&,
              http::Responder respond) {
        auto acquire = parse_acquire(request.body);
        if (!acquire) {
          respond(bad_body(acquire.error()));
          return;
        }
        pool.acquire(tenant, *acquire,
                     [respond = std::move(respond)](PoolResult<nlohmann::json> sandbox) mutable {
                       respond(answer(sandbox, 201));
                     });
      });
  routes.add(Method::kGet, "/sandboxes/{id}", Who::kTenant,
             [&pool](const Tenant& tenant, const HttpRequest&, const Args& args) {
               return answer(pool.sandbox_json(tenant, args[0]));
             });
  routes.add(Method::kDelete, "/sandboxes/{id}", Who::kTenant,
             [&pool](const Tenant& tenant, const HttpRequest&, const Args& args) {
               return answer(pool.release(tenant, args[0]));
             });
  routes.add_deferred(
      Method::kPost, "/sandboxes/{id}/exec", Who::kTenant,
      [&pool](const Tenant& tenant, const HttpRequest& request, const Args& args,
              http::Responder respond) {
        auto call = parse_exec(request.body);
        if (!call) {
          respond(bad_body(call.error()));
          return;
        }
        call->client = request.client;  // a client that leaves ends its command
        pool.exec(tenant, args[0], std::move(*call),
                  [respond = std::move(respond)](PoolResult<nlohmann::json> outcome) mutable {
                    respond(answer(outcome));
                  });
      });
  routes.add_deferred(
      Method::kPut, "/sandboxes/{id}/files", Who::kTenant,
      [&pool](const Tenant& tenant, const HttpRequest& request, const Args& args,
              http::Responder respond) {
        auto target = parse_file_target(request.header(kPathHeader), request.header(kModeHeader));
        if (!target) {
          respond(bad_body(target.error()));
          return;
        }
        pool.write_file(tenant, args[0], target->guest_path,
                        GuestFile{.bytes = request.body, .mode = target->mode},
                        [respond = std::move(respond)](PoolResult<void> written) mutable {
                          respond(answer(written));
                        });
      });
  routes.add_deferred(Method::kGet, "/sandboxes/{id}/files", Who::kTenant,
                      [&pool](const Tenant& tenant, const HttpRequest& request, const Args& args,
                              http::Responder respond) {
                        auto target = parse_file_target(request.header(kPathHeader), "");
                        if (!target) {
                          respond(bad_body(target.error()));
                          return;
                        }
                        pool.read_file(
                            tenant, args[0], target->guest_path,
                            [respond = std::move(respond)](PoolResult<GuestFile> file) mutable {
                              if (!file) {
                                respond(fault(file.error()));
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
    routes.add_deferred(
        Method::kPost, pause ? "/sandboxes/{id}/pause" : "/sandboxes/{id}/resume", Who::kTenant,
        [&pool, pause](const Tenant& tenant, const HttpRequest&, const Args& args,
                       http::Responder respond) {
          auto respond_with = [respond =
                                   std::move(respond)](PoolResult<nlohmann::json> sandbox) mutable {
            respond(answer(sandbox));
          };
          if (pause) {
            pool.pause(tenant, args[0], std::move(respond_with));
          } else {
            pool.resume(tenant, args[0], std::move(respond_with));
          }
        });
  }
  routes.add_deferred(
      Method::kPost, "/sandboxes/{id}/snapshot", Who::kTenant,
      [&pool](const Tenant& tenant, const HttpRequest& request, const Args& args,
              http::Responder respond) {
        auto name = parse_snapshot_name(request.body);
        if (!name) {
          respond(bad_body(name.error()));
          return;
        }
        pool.snapshot(tenant, args[0], *name,
                      [respond = std::move(respond)](PoolResult<nlohmann::json> made) mutable {
                        respond(answer(made, 201));
                      });
      });
  routes.add(Method::kPatch, "/sandboxes/{id}/network", Who::kTenant,
             [&pool](const Tenant& tenant, const HttpRequest& request, const Args& args) {
               auto egress = parse_network_patch(request.body);
               if (!egress) {
                 return bad_body(egress.error());
               }
               return answer(pool.set_network(tenant, args[0], *egress));
             });
  routes.add(Method::kPost, "/sandboxes/{id}/ports", Who::kTenant,
             [&pool](const Tenant& tenant, const HttpRequest& request, const Args& args) {
               auto port = parse_port_forward(request.body);
               if (!port) {
                 return bad_body(port.error());
               }
               return answer(pool.forward_port(tenant, args[0], *port), 201);
             });
  routes.add(Method::kPost, "/sandboxes/{id}/keepalive", Who::kTenant,
             [&pool](const Tenant& tenant, const HttpRequest&, const Args& args) {
               return answer(pool.keepalive(tenant, args[0]));
             });
  routes.add(Method::kGet, "/metrics", Who::kTenant,
             [&pool](const Tenant&, const HttpRequest&, const Args&) {
               return HttpResponse::text(pool.metrics(), "text/plain; version=0.0.4");
             });
  return router;
}

}  // namespace dsec::pool
