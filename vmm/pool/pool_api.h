// The pool daemon's HTTP/JSON API (docs/pool.md): routes onto a Pool. Bodies are read by
// pool_requests; a request the pool refuses is answered with its status and a
// {"fault_message": ...} that says what to change.
#pragma once

#include "vmm/api/http_message.h"
#include "vmm/api/router.h"
#include "vmm/pool/pool.h"

namespace dsec::pool {

// The router for `pool`'s API; the pool must outlive it.
api::Router pool_router(Pool& pool);

}  // namespace dsec::pool
