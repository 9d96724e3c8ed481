// The pool daemon's answers (docs/pool.md) read into the library's types: each field of the
// type and within the bounds it must have, whatever the daemon on the other end of the
// socket sent. Fields the library does not know are left alone, so that a newer daemon's
// answers still read.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "dsec/pool.h"
#include "vmm/common/error.h"

namespace dsec::sdk::detail {

// A sandbox: POST /sandboxes, GET /sandboxes/{id}.
dsec::Result<PoolSandbox> pool_sandbox_of(const nlohmann::json& value);
// {"sandboxes": [...]}: GET /sandboxes.
dsec::Result<std::vector<PoolSandbox>> pool_sandboxes_of(const nlohmann::json& value);
// An image's name and limits: PUT /images/{name}.
dsec::Result<PoolImage> pool_image_of(const nlohmann::json& value);
// {"images": [...]}: GET /images.
dsec::Result<std::vector<PoolImageStatus>> pool_images_of(const nlohmann::json& value);

// The bodies the library sends: PUT /images/{name} and POST /sandboxes.
nlohmann::json pool_image_body(const PoolImage& image);
nlohmann::json acquire_body(const AcquireOptions& options);

}  // namespace dsec::sdk::detail
