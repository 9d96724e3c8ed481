// Who may use the pool daemon's API, and as which tenant (docs/pool.md, "Tenants and
// authentication"):
// - on the Unix socket, the caller's uid and gid from SO_PEERCRED: the daemon's own uid
//   (and root) is the operator; a uid given with --allow-uid, or whose primary gid was
//   given with --allow-gid, is the tenant "uid:N"; anyone else is refused (kForbidden);
// - on TCP, a bearer token from the tokens file (kUnauthenticated without a right one),
//   on a request whose Host header names this daemon (kForbidden otherwise: a browser
//   page that rebinds a DNS name to the node's address sends its own name).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/http/message.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/tenant.h"

namespace dsec::pool {

// One line of a tokens file: a tenant and its bearer token.
struct TokenEntry {
  Tenant tenant;
  std::string token;
  bool operator==(const TokenEntry&) const = default;
};

// A tokens file's text, one tenant a line: "NAME TOKEN [operator] [max_sandboxes=N]
// [max_memory=SIZE]" (SIZE in bytes, or with a K, M or G suffix for KiB, MiB, GiB); blank
// lines and lines starting with '#' are skipped. A name is 1 to 64 letters, digits, '-',
// '_', '.'; a token at least 16 characters of RFC 6750's token68. Names and tokens are
// unique, and a file without a tenant is refused. Errors name the line.
Result<std::vector<TokenEntry>> parse_tokens(std::string_view text);
// The file at `path`, refused unless it is a regular file (no symlink) owned by root or
// `daemon_uid`, that neither the group nor others may write, nor others read.
Result<std::vector<TokenEntry>> read_tokens_file(const std::string& path, uid_t daemon_uid);

// Whether a Host header's value (port, if any, ignored; names case-insensitive) is one of
// `names`.
bool host_allowed(std::string_view host, const std::vector<std::string>& names);
// The names a daemon listening on `address` answers to on TCP: the address (an IPv6 one
// in brackets), "localhost", "127.0.0.1" and "[::1]", and `extra` (--allow-host).
std::vector<std::string> default_hosts(const std::string& address,
                                       const std::vector<std::string>& extra);

struct AccessPolicy {
  uid_t daemon_uid = 0;
  std::vector<uid_t> allow_uids;
  std::vector<gid_t> allow_gids;
  std::vector<TokenEntry> tokens;
  std::vector<std::string> hosts;  // Host header names answered on TCP
};

class TenantAccess {
 public:
  explicit TenantAccess(AccessPolicy policy) : policy_(std::move(policy)) {}
  // The tenant `request` comes from, or why it is refused: kUnauthenticated (a TCP request
  // without a right token), kForbidden (a uid not allowed, a Host not this daemon's, or a
  // request the server did not say the caller of).
  PoolResult<Tenant> identify(const http::HttpRequest& request) const;
  // The tenant an E2B SDK's request comes from (vmm/e2b): over TCP only, its Host checked as
  // above, and its token in an X-API-KEY header instead of Authorization.
  PoolResult<Tenant> identify_api_key(const http::HttpRequest& request) const;

 private:
  PoolResult<void> check_host(const http::HttpRequest& request) const;
  // The tenant whose token is `given` (kUnauthenticated with `refusal` when none is).
  PoolResult<Tenant> by_token(std::string_view given, const std::string& refusal) const;
  PoolResult<Tenant> identify_unix(const http::Caller& caller) const;
  PoolResult<Tenant> identify_tcp(const http::HttpRequest& request) const;
  AccessPolicy policy_;
};

// Compares a secret in time that depends on `given`'s length only, not on where it differs.
bool same_secret(std::string_view given, std::string_view expected);

}  // namespace dsec::pool
