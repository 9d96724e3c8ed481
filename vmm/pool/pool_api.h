// The pool daemon's HTTP/JSON API (docs/pool.md): routes onto a Pool. Every request is
// first told apart by its caller (tenant_access.h): one refused there is answered 401 or
// 403 with nothing done. Bodies are read by pool_requests; a request the pool refuses is
// answered with the status of its failure's kind and a {"fault_message": ...} that says
// what to change.
#pragma once

#include "vmm/http/message.h"
#include "vmm/http/router.h"
#include "vmm/pool/pool.h"
#include "vmm/pool/tenant_access.h"

namespace dsec::pool {

// The HTTP status a failure's kind is answered with; here, and nowhere else.
int http_status(Failure kind);

// The router for `pool`'s API; the pool and `access` must outlive it.
http::Router pool_router(Pool& pool, const TenantAccess& access);

}  // namespace dsec::pool
