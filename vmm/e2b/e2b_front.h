// The pool's E2B-compatible front (docs/e2b.md): one router that serves both of E2B's planes
// on one port (dsec-vmm pool --e2b-listen): the control plane (e2b_control_plane.h), and
// envd's, which an SDK reaches at one URL for every sandbox, naming it in an E2b-Sandbox-Id
// header and proving it may use it with X-Access-Token, the envdAccessToken its create
// answered. A sandbox is only ever reached with its own token, and with its owner as the
// pool's caller: another tenant's reads as none (not_found).
//
// envd's plane: the Connect methods of process.Process and filesystem.Filesystem
// (envd_process_service.h, envd_fs_service.h; the others answer unimplemented, naming
// themselves), GET and POST /files (a file's bytes; an upload as multipart/form-data or
// octet-stream, up to pool::kMaxPoolFileBytes), and GET /health.
#pragma once

#include "vmm/e2b/connect_codec.h"
#include "vmm/e2b/e2b_sandboxes.h"
#include "vmm/http/router.h"
#include "vmm/pool/pool.h"
#include "vmm/pool/tenant_access.h"

namespace dsec::e2b {

// The name of the pool server's TCP listener for the front (Caller::listener).
inline constexpr std::string_view kE2bListener = "e2b";

// The front's router; everything given must outlive it.
http::Router e2b_router(pool::Pool& pool, const pool::TenantAccess& access,
                        E2bSandboxes& sandboxes);

// A pool failure's Connect code.
ConnectCode connect_code(pool::Failure kind);

}  // namespace dsec::e2b
