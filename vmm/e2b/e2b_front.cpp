#include "vmm/e2b/e2b_front.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "vmm/agent/client.h"
#include "vmm/e2b/connect_codec.h"
#include "vmm/e2b/e2b_control_plane.h"
#include "vmm/e2b/envd_fs_service.h"
#include "vmm/e2b/envd_process_service.h"
#include "vmm/e2b/multipart.h"
#include "vmm/http/body_stream.h"

namespace dsec::e2b {
namespace {

using http::HttpRequest;
using http::HttpResponse;
using http::Method;
using Args = std::vector<std::string>;

// What a stream's messages may fill before its work waits for the client to read them.
constexpr size_t kStreamBufferBytes = size_t{1} << 20;

// envd's methods this front does not serve, each answered unimplemented by name.
constexpr std::array<std::string_view, 4> kUnserved = {
    "/process.Process/StreamInput", "/filesystem.Filesystem/CreateWatcher",
    "/filesystem.Filesystem/GetWatcherEvents", "/filesystem.Filesystem/RemoveWatcher"};

// The sandbox an envd request names, when its access token is right.
ConnectResult<const E2bSandbox*> envd_sandbox(const E2bSandboxes& sandboxes,
                                              const HttpRequest& request) {
  const std::string id(request.header("e2b-sandbox-id"));
  const std::string_view token = request.header("x-access-token");
  if (id.empty()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "an envd request names its sandbox in an E2b-Sandbox-Id header");
  }
  if (token.empty()) {
    return connect_error(ConnectCode::kUnauthenticated,
                         "an envd request needs an X-Access-Token header: the envdAccessToken "
                         "that creating the sandbox answered");
  }
  const E2bSandbox* s = sandboxes.by_token(id, token);
  if (s == nullptr) {
    return connect_error(ConnectCode::kNotFound, "no sandbox " + id.substr(0, 128) +
                                                     " with this access token: it ended, "
                                                     "or the token is another's");
  }
  return s;
}

pool::Tenant owner_of(const E2bSandbox& s) {
  return pool::Tenant{.name = s.tenant, .is_operator = false, .quota = {}};
}

ConnectError pool_failure(const pool::PoolError& e) {
  return ConnectError{.code = connect_code(e.kind), .message = e.message};
}

// envd's REST errors: {"code": status, "message"}.
HttpResponse rest_error(int status, const std::string& message) {
  return HttpResponse::json({{"code", status}, {"message", message}}, status);
}
HttpResponse rest_error(const ConnectError& e) {
  return rest_error(http_status(e.code), e.message);
}

// An envd call's sandbox, request message and caller, once its token, message and user
// checked out.
struct EnvdCall {
  const E2bSandbox* sandbox;
  nlohmann::json message;
  EnvdCaller caller;
};
ConnectResult<EnvdCall> envd_call(const E2bSandboxes& sandboxes, const HttpRequest& request,
                                  bool stream) {
  const E2bSandbox* s = DSEC_TRY(envd_sandbox(sandboxes, request));
  auto message = DSEC_TRY(stream ? stream_request(request.body) : unary_request(request.body));
  auto user = DSEC_TRY(basic_user(request.header("authorization")));
  return EnvdCall{.sandbox = s,
                  .message = std::move(message),
                  .caller = {.user = std::move(user), .env = s->env, .client = request.client}};
}

// The sandbox is gone from the pool: its E2B record goes too.
void forget_if_gone(E2bSandboxes& sandboxes, const std::string& id,
                    const pool::PoolResult<void>& still_in_use) {
  if (!still_in_use && (still_in_use.error().kind == pool::Failure::kGone ||
                        still_in_use.error().kind == pool::Failure::kNotFound)) {
    sandboxes.remove(id);
  }
}

void add_unary_method(http::Router& router, pool::Pool& pool, E2bSandboxes& sandboxes,
                      std::string_view path, UnaryWork work) {
  router.add_deferred(
      Method::kPost, path,
      [&pool, &sandboxes, work = std::move(work)](const HttpRequest& request, const Args&,
                                                  http::Responder respond) {
        auto call = envd_call(sandboxes, request, /*stream=*/false);
        if (!call) {
          respond(unary_error(call.error()));
          return;
        }
        auto unary = std::make_shared<ConnectResult<nlohmann::json>>(
            connect_error(ConnectCode::kInternal, "the request did not run"));
        pool.agent_request(
            owner_of(*call->sandbox), call->sandbox->id,
            [work, message = std::move(call->message), caller = std::move(call->caller),
             unary](const std::string& vsock) {
              agent::AgentClient agent = agent::vsock_uds_client(vsock);
              *unary = work(agent, message, caller);
              return unary->has_value() || unary->error().code != ConnectCode::kInternal;
            },
            [&sandboxes, id = call->sandbox->id, unary,
             respond = std::move(respond)](pool::PoolResult<void> still_in_use) mutable {
              forget_if_gone(sandboxes, id, still_in_use);
              if (!still_in_use &&
                  (unary->has_value() || unary->error().code == ConnectCode::kInternal)) {
                respond(unary_error(pool_failure(still_in_use.error())));
                return;
              }
              respond(*unary ? unary_reply(**unary) : unary_error(unary->error()));
            });
      });
}

// How often a quiet stream sends a keepalive event: the Keepalive-Ping-Interval header's
// seconds (the SDKs send 50), 1 to 300; 50 without one.
std::chrono::seconds keepalive_interval(const HttpRequest& request) {
  const std::string_view asked = request.header("keepalive-ping-interval");
  uint64_t seconds = 0;
  const auto [end, err] = std::from_chars(asked.data(), asked.data() + asked.size(), seconds);
  if (asked.empty() || err != std::errc() || end != asked.data() + asked.size()) {
    seconds = 50;
  }
  return std::chrono::seconds(std::clamp<uint64_t>(seconds, 1, 300));
}

// A server stream: answered at once with the stream's head, its messages sent as the work
// emits them, its end-stream frame once the work is done.
void add_stream_method(http::Router& router, pool::Pool& pool, E2bSandboxes& sandboxes,
                       std::string_view path, StreamWork work, const nlohmann::json& keepalive) {
  router.add_deferred(
      Method::kPost, path,
      [&pool, &sandboxes, work = std::move(work), keepalive = message_envelope(keepalive)](
          const HttpRequest& request, const Args&, http::Responder respond) {
        auto call = envd_call(sandboxes, request, /*stream=*/true);
        if (!call) {
          respond(stream_reply({}, call.error()));
          return;
        }
        auto body = http::BodyStream::create(http::BodyStream::Options{
            .max_buffered = kStreamBufferBytes,
            .heartbeat_interval = keepalive_interval(request),
            .heartbeat = keepalive});
        if (!body) {
          respond(stream_reply({}, ConnectError{.code = ConnectCode::kResourceExhausted,
                                                .message = body.error().message()}));
          return;
        }
        std::shared_ptr<http::BodyStream> stream = std::move(*body);
        respond(HttpResponse{.status = 200,
                             .body = {},
                             .content_type = std::string(kStreamContentType),
                             .headers = {},
                             .stream = stream});
        call->caller.client = stream->presence();
        auto error = std::make_shared<std::optional<ConnectError>>();
        pool.agent_request(
            owner_of(*call->sandbox), call->sandbox->id,
            [work, message = std::move(call->message), caller = std::move(call->caller), stream,
             error](const std::string& vsock) {
              agent::AgentClient agent = agent_for_client(vsock, caller.client);
              const Emit emit = [&stream](const nlohmann::json& m) {
                return stream->write(message_envelope(m));
              };
              *error = work(agent, message, caller, emit);
              return !*error || (*error)->code != ConnectCode::kInternal;
            },
            [&sandboxes, id = call->sandbox->id, stream,
             error](pool::PoolResult<void> still_in_use) {
              forget_if_gone(sandboxes, id, still_in_use);
              if (!still_in_use && !*error) {
                *error = pool_failure(still_in_use.error());
              }
              // On the loop's thread, which sends the stream: never waits for room.
              stream->finish_with(end_stream_envelope(*error));
            });
      });
}

// The absolute guest path of a /files request.
ConnectResult<std::string> file_path(const HttpRequest& request) {
  auto path = request.query_param("path");
  if (!path || path->empty() || path->front() != '/') {
    return connect_error(ConnectCode::kInvalidArgument,
                         "/files takes ?path= with an absolute guest path");
  }
  return *path;
}

// A pool's failure to copy a file: a path the guest has no file at is 404.
HttpResponse copy_failure(const pool::PoolError& e) {
  if (e.kind == pool::Failure::kAgentFailed) {
    return rest_error(agent_failure(Error(e.message)));
  }
  return rest_error(pool_failure(e));
}

void add_files(http::Router& router, pool::Pool& pool, E2bSandboxes& sandboxes) {
  router.add_deferred(
      Method::kGet, "/files",
      [&pool, &sandboxes](const HttpRequest& request, const Args&, http::Responder respond) {
        auto sandbox = envd_sandbox(sandboxes, request);
        auto path = file_path(request);
        if (!sandbox || !path) {
          respond(rest_error(!sandbox ? sandbox.error() : path.error()));
          return;
        }
        pool.read_file(
            owner_of(**sandbox), (*sandbox)->id, *path,
            [respond = std::move(respond)](pool::PoolResult<pool::GuestFile> file) mutable {
              if (!file) {
                respond(copy_failure(file.error()));
                return;
              }
              respond(HttpResponse{.status = 200,
                                   .body = std::move(file->bytes),
                                   .content_type = "application/octet-stream",
                                   .headers = {},
                                   .stream = {}});
            });
      });
  router.add_deferred(
      Method::kPost, "/files",
      [&pool, &sandboxes](const HttpRequest& request, const Args&, http::Responder respond) {
        auto sandbox = envd_sandbox(sandboxes, request);
        if (!sandbox) {
          respond(rest_error(sandbox.error()));
          return;
        }
        std::string guest_path;
        std::string bytes;
        const std::string_view type = request.header("content-type");
        if (type.starts_with("application/octet-stream")) {
          auto path = file_path(request);
          if (!path) {
            respond(rest_error(path.error()));
            return;
          }
          guest_path = *path;
          bytes = request.body;
        } else {
          auto boundary = multipart_boundary(type);
          auto parts = boundary ? parse_multipart(request.body, *boundary)
                                : Result<std::vector<FormPart>>(std::unexpected(boundary.error()));
          if (!parts) {
            respond(rest_error(400, parts.error().message()));
            return;
          }
          const auto file = std::ranges::find(*parts, std::string("file"), &FormPart::name);
          if (file == parts->end() || parts->size() != 1) {
            respond(rest_error(400, "upload one file at a time, in a form part named 'file'"));
            return;
          }
          auto path = file_path(request);
          guest_path = path ? *path : file->filename;
          if (guest_path.empty() || guest_path.front() != '/') {
            respond(rest_error(400, "/files takes ?path= with an absolute guest path"));
            return;
          }
          bytes = std::move(file->data);
        }
        const size_t slash = guest_path.rfind('/');
        nlohmann::json written = nlohmann::json::array(
            {{{"path", guest_path}, {"name", guest_path.substr(slash + 1)}, {"type", "file"}}});
        pool.write_file(
            owner_of(**sandbox), (*sandbox)->id, guest_path,
            pool::GuestFile{.bytes = std::move(bytes), .mode = 0644},
            [written, respond = std::move(respond)](pool::PoolResult<void> done) mutable {
              respond(done ? HttpResponse::json(written) : copy_failure(done.error()));
            });
      });
}

}  // namespace

ConnectCode connect_code(pool::Failure kind) {
  switch (kind) {
    case pool::Failure::kInvalid:
      return ConnectCode::kInvalidArgument;
    case pool::Failure::kNotFound:
    case pool::Failure::kGone:
      return ConnectCode::kNotFound;
    case pool::Failure::kConflict:
      return ConnectCode::kFailedPrecondition;
    case pool::Failure::kFull:
    case pool::Failure::kQuota:
      return ConnectCode::kResourceExhausted;
    case pool::Failure::kAgentFailed:
      return ConnectCode::kInternal;
    case pool::Failure::kUnavailable:
      return ConnectCode::kUnavailable;
    case pool::Failure::kUnauthenticated:
      return ConnectCode::kUnauthenticated;
    case pool::Failure::kForbidden:
      return ConnectCode::kPermissionDenied;
  }
  return ConnectCode::kUnknown;
}

http::Router e2b_router(pool::Pool& pool, const pool::TenantAccess& access,
                        E2bSandboxes& sandboxes) {
  http::Router router;
  add_control_plane(router, pool, access, sandboxes);
  for (auto methods : {process_methods(), fs_methods()}) {
    for (EnvdMethod& method : methods) {
      if (method.stream) {
        add_stream_method(router, pool, sandboxes, method.path, std::move(method.stream),
                          method.keepalive);
      } else {
        add_unary_method(router, pool, sandboxes, method.path, std::move(method.unary));
      }
    }
  }
  for (const std::string_view path : kUnserved) {
    router.add(Method::kPost, path, [path](const HttpRequest&, const Args&) {
      return unary_error(ConnectError{.code = ConnectCode::kUnimplemented,
                                      .message = std::string(path.substr(1)) +
                                                 " is not served by this node (dsec-vmm's E2B "
                                                 "front): see docs/e2b.md"});
    });
  }
  add_files(router, pool, sandboxes);
  router.add(Method::kGet, "/health",
             [](const HttpRequest&, const Args&) { return HttpResponse::no_content(); });
  return router;
}

}  // namespace dsec::e2b
