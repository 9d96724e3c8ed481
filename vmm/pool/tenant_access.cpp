#include "vmm/pool/tenant_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "vmm/common/unique_fd.h"
#include "vmm/pool/pool_requests.h"

namespace dsec::pool {
namespace {

constexpr size_t kMaxTokensFileBytes = size_t{1} << 20;
constexpr size_t kMinTokenLength = 16;

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> words;
  size_t at = 0;
  while (at < line.size()) {
    const size_t start = line.find_first_not_of(" \t\r", at);
    if (start == std::string_view::npos) {
      break;
    }
    const size_t end = std::min(line.find_first_of(" \t\r", start), line.size());
    words.push_back(line.substr(start, end - start));
    at = end;
  }
  return words;
}

bool is_token68(std::string_view token) {
  return std::ranges::all_of(token, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("-._~+/=").find(c) != std::string_view::npos;
  });
}

Result<uint64_t> parse_number(std::string_view text, std::string_view what) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  uint64_t scale = 1;
  const std::string_view suffix(end, text.data() + text.size());
  if (suffix == "K") {
    scale = uint64_t{1} << 10;
  } else if (suffix == "M") {
    scale = uint64_t{1} << 20;
  } else if (suffix == "G") {
    scale = uint64_t{1} << 30;
  } else if (!suffix.empty()) {
    scale = 0;
  }
  if (ec != std::errc() || end == text.data() || scale == 0 || value > UINT64_MAX / scale) {
    return fail(std::string(what) + " '" + std::string(text) + "' is not a number",
                "write digits, with a K, M or G suffix for sizes");
  }
  return value * scale;
}

Result<TokenEntry> parse_line(const std::vector<std::string_view>& words) {
  if (words.size() < 2) {
    return fail("a tenant needs a name and a token", "write NAME TOKEN [options]");
  }
  TokenEntry entry;
  entry.tenant.name = std::string(words[0]);
  DSEC_TRY(check_name(entry.tenant.name, "a tenant's name"));
  entry.token = std::string(words[1]);
  if (entry.token.size() < kMinTokenLength || !is_token68(entry.token)) {
    return fail("the token of " + entry.tenant.name +
                    " is shorter than 16 characters or holds "
                    "characters a bearer token cannot",
                "make one with: head -c 32 /dev/urandom | base64");
  }
  for (size_t i = 2; i < words.size(); ++i) {
    const std::string_view word = words[i];
    const size_t eq = word.find('=');
    const std::string_view key = word.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : word.substr(eq + 1);
    if (word == "operator") {
      entry.tenant.is_operator = true;
    } else if (key == "max_sandboxes" && !value.empty()) {
      const uint64_t n = DSEC_TRY(parse_number(value, "max_sandboxes"));
      if (n > UINT32_MAX || value.find_first_not_of("0123456789") != std::string_view::npos) {
        return fail("max_sandboxes '" + std::string(value) + "' is not a count");
      }
      entry.tenant.quota.max_sandboxes = static_cast<uint32_t>(n);
    } else if (key == "max_memory" && !value.empty()) {
      entry.tenant.quota.max_memory_bytes = DSEC_TRY(parse_number(value, "max_memory"));
    } else {
      return fail("unknown option '" + std::string(word) + "'",
                  "options are operator, max_sandboxes=N, max_memory=SIZE");
    }
  }
  return entry;
}

// "host" from "host:port", "[v6]" from "[v6]:port".
std::string_view without_port(std::string_view host) {
  if (host.starts_with('[')) {
    const size_t close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  const size_t colon = host.find(':');
  if (colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos) {
    return host.substr(0, colon);
  }
  return host;
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

Result<std::vector<TokenEntry>> parse_tokens(std::string_view text) {
  std::vector<TokenEntry> entries;
  std::set<std::string> names;
  size_t line_number = 0;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_number;
    const auto words = words_of(line);
    if (words.empty() || words[0].starts_with('#')) {
      continue;
    }
    const std::string where = "tokens file, line " + std::to_string(line_number);
    auto entry = parse_line(words);
    if (!entry) {
      return std::unexpected(entry.error().with_context(where));
    }
    if (!names.insert(entry->tenant.name).second) {
      return fail(where + ": tenant " + entry->tenant.name + " is named twice",
                  "give each tenant one line");
    }
    for (const auto& other : entries) {
      if (other.token == entry->token) {
        return fail(where + ": " + entry->tenant.name + " has the token of " + other.tenant.name,
                    "give each tenant a token of its own");
      }
    }
    entries.push_back(std::move(*entry));
  }
  if (entries.empty()) {
    return fail("the tokens file names no tenant: every request over TCP would be refused",
                "write one line per tenant: NAME TOKEN [options]");
  }
  return entries;
}

Result<std::vector<TokenEntry>> read_tokens_file(const std::string& path, uid_t daemon_uid) {
  const std::string what = "--tokens " + path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    return fail_errno(what + ": cannot open it", errno,
                      errno == ELOOP ? "name the file itself, not a symbolic link" : "");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno(what + ": fstat", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(what + " is not a regular file");
  }
  if (st.st_uid != 0 && st.st_uid != daemon_uid) {
    return fail(what + " belongs to uid " + std::to_string(st.st_uid) +
                    ", who could change who may use the pool",
                "make root or the daemon's user its owner (chown)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH | S_IROTH)) != 0) {
    return fail(what + " may be written by its group or others, or read by others", "chmod 600 it");
  }
  std::string text(kMaxTokensFileBytes + 1, '\0');
  size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail_errno(what + ": read", errno);
    }
    if (n == 0) {
      break;
    }
    size += static_cast<size_t>(n);
  }
  if (size > kMaxTokensFileBytes) {
    return fail(what + " is larger than 1 MiB");
  }
  text.resize(size);
  auto entries = parse_tokens(text);
  if (!entries) {
    return std::unexpected(entries.error().with_context(what));
  }
  return entries;
}

bool host_allowed(std::string_view host, const std::vector<std::string>& names) {
  const std::string_view name = without_port(host);
  return !name.empty() &&
         std::ranges::any_of(names, [&](const std::string& n) { return same_name(name, n); });
}

std::vector<std::string> default_hosts(const std::string& address,
                                       const std::vector<std::string>& extra) {
  std::vector<std::string> names = {"localhost", "127.0.0.1", "[::1]"};
  names.push_back(address.find(':') != std::string::npos ? "[" + address + "]" : address);
  names.insert(names.end(), extra.begin(), extra.end());
  return names;
}

bool same_secret(std::string_view given, std::string_view expected) {
  unsigned difference = given.size() == expected.size() ? 0U : 1U;
  for (size_t i = 0; i < given.size(); ++i) {
    const char e = expected.empty() ? '\0' : expected[i % expected.size()];
    difference |= static_cast<unsigned char>(given[i] ^ e);
  }
  return difference == 0;
}

PoolResult<Tenant> TenantAccess::identify(const http::HttpRequest& request) const {
  switch (request.caller.transport) {
    case http::Caller::Transport::kUnix:
      return identify_unix(request.caller);
    case http::Caller::Transport::kTcp:
      return identify_tcp(request);
    case http::Caller::Transport::kNone:
      break;
  }
  return std::unexpected(error(Failure::kForbidden, "the server could not tell who connected"));
}

PoolResult<Tenant> TenantAccess::identify_unix(const http::Caller& caller) const {
  if (caller.uid == policy_.daemon_uid || caller.uid == 0) {
    return Tenant{.name = "uid:" + std::to_string(caller.uid), .is_operator = true, .quota = {}};
  }
  if (std::ranges::find(policy_.allow_uids, caller.uid) != policy_.allow_uids.end() ||
      std::ranges::find(policy_.allow_gids, caller.gid) != policy_.allow_gids.end()) {
    return Tenant{.name = "uid:" + std::to_string(caller.uid), .is_operator = false, .quota = {}};
  }
  return std::unexpected(error(
      Failure::kForbidden,
      "uid " + std::to_string(caller.uid) + " (gid " + std::to_string(caller.gid) +
          ") may not use this pool: its operator allows a user with --allow-uid or --allow-gid"));
}

PoolResult<void> TenantAccess::check_host(const http::HttpRequest& request) const {
  const std::string_view host = request.header("host");
  if (!host_allowed(host, policy_.hosts)) {
    return std::unexpected(
        error(Failure::kForbidden,
              "the Host header '" + std::string(host.substr(0, 256)) +
                  "' names no address of this daemon: connect by its address, or ask its operator "
                  "to add the name with --allow-host"));
  }
  return {};
}

PoolResult<Tenant> TenantAccess::by_token(std::string_view given,
                                          const std::string& refusal) const {
  // Every token compared, so that the time says nothing about which one nearly matched.
  const TokenEntry* match = nullptr;
  for (const auto& entry : policy_.tokens) {
    if (same_secret(given, entry.token) && !given.empty()) {
      match = &entry;
    }
  }
  if (match == nullptr) {
    return std::unexpected(error(Failure::kUnauthenticated, refusal));
  }
  return match->tenant;
}

PoolResult<Tenant> TenantAccess::identify_tcp(const http::HttpRequest& request) const {
  DSEC_TRY(check_host(request));
  const std::string_view authorization = request.header("authorization");
  constexpr std::string_view kScheme = "bearer ";
  const bool bearer = authorization.size() > kScheme.size() &&
                      same_name(authorization.substr(0, kScheme.size()), kScheme);
  const std::string_view given = bearer ? authorization.substr(kScheme.size()) : "";
  return by_token(given, bearer ? "the bearer token is not one this daemon knows"
                                : "a request over TCP needs an Authorization: "
                                  "Bearer TOKEN header with a tenant's token");
}

PoolResult<Tenant> TenantAccess::identify_api_key(const http::HttpRequest& request) const {
  if (request.caller.transport != http::Caller::Transport::kTcp) {
    return std::unexpected(
        error(Failure::kForbidden, "the E2B API is served on TCP only (--e2b-listen)"));
  }
  DSEC_TRY(check_host(request));
  const std::string_view key = request.header("x-api-key");
  return by_token(key, key.empty() ? "an E2B request needs an X-API-KEY header with a tenant's "
                                     "token (E2B_API_KEY)"
                                   : "the X-API-KEY is not a token this daemon knows");
}

}  // namespace dsec::pool
