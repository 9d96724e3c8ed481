#include "vmm/e2b/e2b_control_plane.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/pool/pool_api.h"
#include "vmm/pool/sandbox_table.h"

namespace dsec::e2b {
namespace {

using http::HttpRequest;
using http::HttpResponse;
using http::Method;
using pool::PoolError;
using pool::Tenant;
using Args = std::vector<std::string>;

// The most sandboxes one page of GET /v2/sandboxes lists, and its default.
constexpr size_t kMaxPage = 1000;
constexpr size_t kDefaultPage = 100;
constexpr size_t kMaxMetadataEntries = 64;
constexpr size_t kMaxEnvVars = 256;
constexpr size_t kMaxMetadataBytes = 1024;

// E2B's error body: {"code": status, "message"}.
HttpResponse e2b_error(int status, const std::string& message) {
  return HttpResponse::json({{"code", status}, {"message", message}}, status);
}
HttpResponse e2b_error(const PoolError& e) {
  return e2b_error(pool::http_status(e.kind), e.message);
}
HttpResponse not_found(const std::string& id) {
  return e2b_error(404, "sandbox " + id + " not found: it ended, or is not yours");
}

std::string iso_time(int64_t ms) {
  const time_t seconds = ms / 1000;
  tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms % 1000);
}

Result<nlohmann::json> string_map(const nlohmann::json& value, std::string_view field,
                                  size_t max_entries) {
  if (value.is_null()) {
    return nlohmann::json::object();
  }
  if (!value.is_object() || value.size() > max_entries) {
    return fail(
        fmt::format("'{}' must be an object of at most {} string values", field, max_entries));
  }
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string() || key.empty() || key.size() > kMaxMetadataBytes ||
        v.get_ref<const std::string&>().size() > kMaxMetadataBytes) {
      return fail(fmt::format("'{}' must map names to strings, each of 1 to {} bytes", field,
                              kMaxMetadataBytes));
    }
  }
  return value;
}

// The sandbox as E2B's SandboxDetail and ListedSandbox show it, from the pool's view.
nlohmann::json detail(const E2bSandbox& s, const nlohmann::json& view, bool with_token) {
  nlohmann::json d = {{"templateID", s.template_id},
                      {"sandboxID", s.id},
                      {"clientID", "dsec-vmm"},
                      {"startedAt", iso_time(s.started_ms)},
                      {"endAt", iso_time(s.end_ms)},
                      {"envdVersion", kEnvdVersion},
                      {"cpuCount", 0},
                      {"memoryMB", 0},
                      {"diskSizeMB", 0},
                      {"metadata", s.metadata},
                      {"state", view.value("paused", false) ? "paused" : "running"}};
  if (with_token) {
    d["envdAccessToken"] = s.access_token;
  }
  return d;
}

// The owner's sandbox `id` and the pool's view of it; a sandbox the pool ended is dropped.
struct Found {
  E2bSandbox* sandbox = nullptr;
  nlohmann::json view;
};
std::optional<Found> find(pool::Pool& pool, E2bSandboxes& sandboxes, const Tenant& tenant,
                          const std::string& id) {
  E2bSandbox* s = sandboxes.owned(tenant.name, id);
  if (s == nullptr) {
    return std::nullopt;
  }
  auto view = pool.sandbox_json(tenant, id);
  if (!view || view->value("state", "") != "in_use") {
    sandboxes.remove(id);
    return std::nullopt;
  }
  return Found{.sandbox = s, .view = std::move(*view)};
}

// A metadata filter, "k=v&k2=v2" (itself URL-encoded in the query): whether `metadata`
// has every pair.
std::optional<std::vector<std::pair<std::string, std::string>>> metadata_filter(
    const HttpRequest& request) {
  auto text = request.query_param("metadata");
  if (!text) {
    return std::vector<std::pair<std::string, std::string>>{};
  }
  HttpRequest inner;
  inner.query = *text;
  return inner.query_params();
}

// The routes, each behind the check of its caller's X-API-KEY.
class ApiKeyRoutes {
 public:
  using Handler =
      std::function<void(const Tenant&, const HttpRequest&, const Args&, http::Responder)>;
  ApiKeyRoutes(http::Router& router, const pool::TenantAccess& access)
      : router_(router), access_(access) {}
  void add(Method method, std::string_view pattern, Handler handler) {
    router_.add_deferred(
        method, pattern,
        [&access = access_, handler = std::move(handler)](
            const HttpRequest& request, const Args& args, http::Responder respond) {
          auto tenant = access.identify_api_key(request);
          if (!tenant) {
            respond(e2b_error(tenant.error()));
            return;
          }
          handler(*tenant, request, args, std::move(respond));
        });
  }

 private:
  http::Router& router_;
  const pool::TenantAccess& access_;
};

}  // namespace

Result<CreateRequest> parse_create(std::string_view body) {
  const nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return fail("the body must be a JSON object: {\"templateID\": IMAGE, \"timeout\": SECONDS}");
  }
  CreateRequest create;
  const auto template_id = json.find("templateID");
  if (template_id == json.end() || !template_id->is_string()) {
    return fail("'templateID' must name one of the pool's images (GET /images on the pool)");
  }
  create.template_id = template_id->get<std::string>();
  DSEC_TRY(pool::check_name(create.template_id, "templateID"));
  if (const auto timeout = json.find("timeout"); timeout != json.end()) {
    if (!timeout->is_number_unsigned() || timeout->get<uint64_t>() == 0 ||
        timeout->get<uint64_t>() > kMaxTimeoutS) {
      return fail(fmt::format("'timeout' must be 1 to {} seconds", kMaxTimeoutS));
    }
    create.timeout_s = timeout->get<uint64_t>();
  }
  create.metadata = DSEC_TRY(
      string_map(json.value("metadata", nlohmann::json()), "metadata", kMaxMetadataEntries));
  const nlohmann::json env =
      DSEC_TRY(string_map(json.value("envVars", nlohmann::json()), "envVars", kMaxEnvVars));
  for (const auto& [name, value] : env.items()) {
    if (name.find('=') != std::string::npos) {
      return fail("an envVars name may not hold '=': " + name.substr(0, 64));
    }
    create.env.push_back(name + "=" + value.get<std::string>());
  }
  if (json.value("autoPause", false)) {
    return fail(
        "'autoPause' is not supported by this node: leave it out, and pause with "
        "POST /sandboxes/{id}/pause");
  }
  return create;
}

void add_control_plane(http::Router& router, pool::Pool& pool, const pool::TenantAccess& access,
                       E2bSandboxes& sandboxes) {
  ApiKeyRoutes routes(router, access);
  for (const char* path : {"/sandboxes", "/v2/sandboxes"}) {
    routes.add(Method::kPost, path,
               [&pool, &sandboxes](const Tenant& tenant, const HttpRequest& request, const Args&,
                                   http::Responder respond) {
                 auto create = parse_create(request.body);
                 if (!create) {
                   respond(e2b_error(400, create.error().message()));
                   return;
                 }
                 auto token = new_access_token();
                 if (!token) {
                   respond(e2b_error(500, token.error().message()));
                   return;
                 }
                 // Before the answer's capture moves `create`.
                 const pool::AcquireRequest acquire{
                     .image = create->template_id, .ttl_s = create->timeout_s, .idle_timeout_s = 0};
                 pool.acquire(
                     tenant, acquire,
                     [&sandboxes, tenant, create = std::move(*create), token = std::move(*token),
                      respond = std::move(respond)](pool::PoolResult<nlohmann::json> got) mutable {
                       if (!got) {
                         respond(e2b_error(got.error()));
                         return;
                       }
                       const int64_t now = pool::wall_ms_now();
                       E2bSandbox s{.id = got->value("id", ""),
                                    .tenant = tenant.name,
                                    .access_token = token,
                                    .template_id = create.template_id,
                                    .metadata = create.metadata,
                                    .env = create.env,
                                    .started_ms = now,
                                    .end_ms = now + static_cast<int64_t>(create.timeout_s) * 1000};
                       nlohmann::json answer = {{"sandboxID", s.id},
                                                {"templateID", s.template_id},
                                                {"clientID", "dsec-vmm"},
                                                {"envdVersion", kEnvdVersion},
                                                {"envdAccessToken", s.access_token}};
                       sandboxes.add(std::move(s));
                       respond(HttpResponse::json(answer, 201));
                     });
               });
  }
  routes.add(Method::kGet, "/sandboxes/{id}",
             [&pool, &sandboxes](const Tenant& tenant, const HttpRequest&, const Args& args,
                                 http::Responder respond) {
               auto found = find(pool, sandboxes, tenant, args[0]);
               respond(found ? HttpResponse::json(detail(*found->sandbox, found->view, true))
                             : not_found(args[0]));
             });
  routes.add(Method::kDelete, "/sandboxes/{id}",
             [&pool, &sandboxes](const Tenant& tenant, const HttpRequest&, const Args& args,
                                 http::Responder respond) {
               if (sandboxes.owned(tenant.name, args[0]) == nullptr) {
                 respond(not_found(args[0]));
                 return;
               }
               sandboxes.remove(args[0]);
               auto released = pool.release(tenant, args[0]);
               respond(released ? HttpResponse::no_content() : not_found(args[0]));
             });
  routes.add(Method::kPost, "/sandboxes/{id}/timeout",
             [&pool, &sandboxes](const Tenant& tenant, const HttpRequest& request, const Args& args,
                                 http::Responder respond) {
               const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
               const auto timeout = body.is_object() ? body.find("timeout") : body.end();
               if (!body.is_object() || timeout == body.end() || !timeout->is_number_unsigned() ||
                   timeout->get<uint64_t>() == 0 || timeout->get<uint64_t>() > kMaxTimeoutS) {
                 respond(e2b_error(400, fmt::format("the body must be {{\"timeout\": SECONDS}}, "
                                                    "1 to {}",
                                                    kMaxTimeoutS)));
                 return;
               }
               auto found = find(pool, sandboxes, tenant, args[0]);
               if (!found) {
                 respond(not_found(args[0]));
                 return;
               }
               const uint64_t seconds = timeout->get<uint64_t>();
               if (auto set = pool.set_time_to_live(tenant, args[0], seconds); !set) {
                 respond(e2b_error(set.error()));
                 return;
               }
               found->sandbox->end_ms = pool::wall_ms_now() + static_cast<int64_t>(seconds) * 1000;
               respond(HttpResponse::no_content());
             });
  for (const bool v2 : {false, true}) {
    routes.add(Method::kGet, v2 ? "/v2/sandboxes" : "/sandboxes",
               [&pool, &sandboxes, v2](const Tenant& tenant, const HttpRequest& request,
                                       const Args&, http::Responder respond) {
                 const auto wanted = metadata_filter(request);
                 if (!wanted) {
                   respond(e2b_error(400, "'metadata' must be URL-encoded key=value pairs"));
                   return;
                 }
                 const std::string states = request.query_param("state").value_or("running,paused");
                 size_t limit = kDefaultPage;
                 if (auto text = request.query_param("limit")) {
                   const auto parsed = std::strtoull(text->c_str(), nullptr, 10);
                   if (text->empty() || text->size() > 6 || parsed == 0 || parsed > kMaxPage ||
                       !std::ranges::all_of(*text, [](char c) { return c >= '0' && c <= '9'; })) {
                     respond(e2b_error(400, fmt::format("'limit' must be 1 to {}", kMaxPage)));
                     return;
                   }
                   limit = parsed;
                 }
                 const std::string after = request.query_param("nextToken").value_or("");
                 nlohmann::json list = nlohmann::json::array();
                 std::string last;
                 bool more = false;
                 std::vector<std::string> ids;
                 for (const E2bSandbox* s : sandboxes.owned_by(tenant.name)) {
                   ids.push_back(s->id);
                 }
                 for (const std::string& id : ids) {  // by id: owned_by is ordered
                   if (!after.empty() && id <= after) {
                     continue;
                   }
                   auto found = find(pool, sandboxes, tenant, id);
                   if (!found) {
                     continue;
                   }
                   nlohmann::json item = detail(*found->sandbox, found->view, false);
                   const bool state_ok =
                       states.find(item["state"].get<std::string>()) != std::string::npos;
                   const bool metadata_ok = std::ranges::all_of(*wanted, [&](const auto& kv) {
                     return found->sandbox->metadata.value(kv.first, std::string()) == kv.second &&
                            found->sandbox->metadata.contains(kv.first);
                   });
                   if (!state_ok || !metadata_ok) {
                     continue;
                   }
                   if (v2 && list.size() == limit) {
                     more = true;
                     break;
                   }
                   last = id;
                   list.push_back(std::move(item));
                 }
                 HttpResponse answer = HttpResponse::json(list);
                 if (more) {
                   answer.headers.emplace_back("X-Next-Token", last);
                 }
                 respond(std::move(answer));
               });
  }
  routes.add(Method::kPost, "/sandboxes/{id}/pause",
             [&pool, &sandboxes](const Tenant& tenant, const HttpRequest&, const Args& args,
                                 http::Responder respond) {
               if (!find(pool, sandboxes, tenant, args[0])) {
                 respond(not_found(args[0]));
                 return;
               }
               pool.pause(
                   tenant, args[0],
                   [respond = std::move(respond)](pool::PoolResult<nlohmann::json> paused) mutable {
                     respond(paused ? HttpResponse::no_content() : e2b_error(paused.error()));
                   });
             });
  for (const char* path :
       {"/sandboxes/{id}/connect", "/v2/sandboxes/{id}/connect", "/sandboxes/{id}/resume"}) {
    routes.add(Method::kPost, path,
               [&pool, &sandboxes](const Tenant& tenant, const HttpRequest&, const Args& args,
                                   http::Responder respond) {
                 auto found = find(pool, sandboxes, tenant, args[0]);
                 if (!found) {
                   respond(not_found(args[0]));
                   return;
                 }
                 const E2bSandbox& s = *found->sandbox;
                 nlohmann::json answer = {{"sandboxID", s.id},
                                          {"templateID", s.template_id},
                                          {"clientID", "dsec-vmm"},
                                          {"envdVersion", kEnvdVersion},
                                          {"envdAccessToken", s.access_token}};
                 if (!found->view.value("paused", false)) {
                   respond(HttpResponse::json(answer, 200));
                   return;
                 }
                 pool.resume(tenant, args[0],
                             [answer, respond = std::move(respond)](
                                 pool::PoolResult<nlohmann::json> resumed) mutable {
                               respond(resumed ? HttpResponse::json(answer, 201)
                                               : e2b_error(resumed.error()));
                             });
               });
  }
}

}  // namespace dsec::e2b
