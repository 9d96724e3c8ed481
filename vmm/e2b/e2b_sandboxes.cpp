#include "vmm/e2b/e2b_sandboxes.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <array>

#include "vmm/pool/tenant_access.h"

namespace dsec::e2b {

Result<std::string> new_access_token() {
  std::array<uint8_t, 32> bytes{};
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    return fail_errno("getrandom for an envd access token", errno);
  }
  std::string token;
  for (const uint8_t b : bytes) {
    token += fmt::format("{:02x}", b);
  }
  return token;
}

void E2bSandboxes::add(E2bSandbox sandbox) {
  std::string id = sandbox.id;
  sandboxes_.insert_or_assign(std::move(id), std::move(sandbox));
}

void E2bSandboxes::remove(const std::string& id) {
  sandboxes_.erase(id);
}

E2bSandbox* E2bSandboxes::owned(std::string_view tenant, const std::string& id) {
  const auto it = sandboxes_.find(id);
  return it == sandboxes_.end() || it->second.tenant != tenant ? nullptr : &it->second;
}

const E2bSandbox* E2bSandboxes::by_token(const std::string& id, std::string_view token) const {
  const auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || token.empty() ||
      !pool::same_secret(token, it->second.access_token)) {
    return nullptr;
  }
  return &it->second;
}

std::vector<const E2bSandbox*> E2bSandboxes::owned_by(std::string_view tenant) const {
  std::vector<const E2bSandbox*> owned;
  for (const auto& [id, s] : sandboxes_) {
    if (s.tenant == tenant) {
      owned.push_back(&s);
    }
  }
  return owned;
}

}  // namespace dsec::e2b
