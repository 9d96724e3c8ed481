// E2B's control plane (its API's spec/openapi.yml) on the pool: the routes an E2B SDK calls
// at E2B_API_URL to create, find, list, time and delete sandboxes, each behind the caller's
// X-API-KEY (a tenant's token: TenantAccess::identify_api_key). A sandbox is a clone of the
// pool image named by templateID, and lives for its timeout (no idle timeout). Errors are
// E2B's {"code": status, "message": ...}.
#pragma once

#include <string_view>

#include "vmm/e2b/e2b_sandboxes.h"
#include "vmm/http/router.h"
#include "vmm/pool/pool.h"
#include "vmm/pool/tenant_access.h"

namespace dsec::e2b {

// The envd version the front's sandboxes report: it turns on the SDKs' features it serves
// (stdin and its close, the default user, octet-stream uploads), not later ones (file
// metadata, 0.6.2).
inline constexpr std::string_view kEnvdVersion = "0.5.7";
// A sandbox's time to live when the create asks for none (E2B's default), and the longest.
inline constexpr uint64_t kDefaultTimeoutS = 300;
inline constexpr uint64_t kMaxTimeoutS = uint64_t{24} * 3600;

// Adds the control plane's routes to `router`; everything given must outlive it.
void add_control_plane(http::Router& router, pool::Pool& pool, const pool::TenantAccess& access,
                       E2bSandboxes& sandboxes);

// What POST /sandboxes asks for, read from its body (hostile): templateID, timeout,
// metadata, envVars.
struct CreateRequest {
  std::string template_id;
  uint64_t timeout_s = kDefaultTimeoutS;
  nlohmann::json metadata = nlohmann::json::object();
  std::vector<std::string> env;  // "NAME=value"
};
Result<CreateRequest> parse_create(std::string_view body);

}  // namespace dsec::e2b
