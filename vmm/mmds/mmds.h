// The microVM metadata service (Firecracker's MMDS): the data store (data_store.h), its
// version's rules and the session tokens (token_authority.h), and the answer to each HTTP
// request a guest sends to the MMDS address (docs/mmds.md). One per VMM, shared between
// the API's thread and the network devices' event loop: every call takes its lock.
//
// A guest's request, as Firecracker answers it:
//   PUT /latest/api/token with X-metadata-token-ttl-seconds: 1..21600   200, a token
//   GET <path>                                                           200, the value
// Version 2 needs a valid X-metadata-token on every GET (401 without, or with one that is
// unknown or expired); version 1 answers a GET without one, and checks one that is there.
// EC2's header names (X-aws-ec2-metadata-token...) are taken as well. A GET's answer is
// IMDS text, or JSON with "Accept: application/json" (unless imds_compat).
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/mmds/data_store.h"
#include "vmm/mmds/token_authority.h"

namespace dsec::mmds {

enum class MmdsVersion { kV1, kV2 };

// A request line and headers, as the guest sent them (names lower-cased).
struct GuestRequest {
  std::string method;
  std::string target;  // "/latest/meta-data" or "http://169.254.169.254/latest/meta-data"
  std::vector<std::pair<std::string, std::string>> headers;

  std::string_view header(std::string_view lower_name) const;
};

struct GuestResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::string allow{};  // the Allow header of a 405

  // HTTP/1.1 status line, headers and body.
  std::string serialize() const;
};

class Mmds {
 public:
  using Clock = TokenAuthority::Clock;

  explicit Mmds(size_t size_limit = DataStore::kDefaultSizeLimit) : store_(size_limit) {}
  Mmds(const Mmds&) = delete;
  Mmds& operator=(const Mmds&) = delete;

  void configure(MmdsVersion version, bool imds_compat);
  std::expected<void, UpdateRefusal> put(std::string_view body);
  std::expected<void, UpdateRefusal> patch(std::string_view body);
  // The whole document (GET /mmds).
  nlohmann::json value() const;
  size_t size_limit() const { return store_.size_limit(); }

  GuestResponse answer(const GuestRequest& request, Clock::time_point now);

 private:
  GuestResponse answer_get(const GuestRequest& request, const std::string& path,
                           Clock::time_point now) const;
  GuestResponse answer_put(const GuestRequest& request, const std::string& path,
                           Clock::time_point now);

  mutable std::mutex mutex_;
  DataStore store_;
  TokenAuthority tokens_;
  MmdsVersion version_ = MmdsVersion::kV1;
  bool imds_compat_ = false;
};

// The path of a request target: an absolute URL's scheme and host dropped, the query and
// fragment too; empty when there is no path.
std::string target_path(std::string_view target);

}  // namespace dsec::mmds
