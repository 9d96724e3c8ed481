// The sandboxes the E2B front made (vmm/e2b): for each, what E2B's API says of it and the
// pool does not keep: its owner, its envd access token (the secret an SDK sends back as
// X-Access-Token on every envd call), its template, metadata and environment, and its
// start and end. The sandbox itself is the pool's, under the same id; one the pool ended
// (its time to live) is dropped here when a call finds it gone.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::e2b {

struct E2bSandbox {
  std::string id;      // the pool's sandbox id
  std::string tenant;  // its owner's name (pool::Tenant::name)
  std::string access_token;
  std::string template_id;
  nlohmann::json metadata = nlohmann::json::object();  // string values
  std::vector<std::string> env;                        // "NAME=value", for every process
  int64_t started_ms = 0;                              // wall clock, ms since the epoch
  int64_t end_ms = 0;
};

// A fresh envd access token: 32 random bytes as hex.
Result<std::string> new_access_token();

class E2bSandboxes {
 public:
  void add(E2bSandbox sandbox);
  void remove(const std::string& id);
  // The sandbox `id` when `tenant` owns it; null otherwise (another tenant's reads as none).
  E2bSandbox* owned(std::string_view tenant, const std::string& id);
  // The sandbox `id` when `token` is its access token (compared in constant time); null
  // otherwise.
  const E2bSandbox* by_token(const std::string& id, std::string_view token) const;
  std::vector<const E2bSandbox*> owned_by(std::string_view tenant) const;

 private:
  std::map<std::string, E2bSandbox> sandboxes_;
};

}  // namespace dsec::e2b
