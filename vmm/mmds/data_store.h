// MMDS's data store: one JSON document, set whole by PUT /mmds, changed by PATCH /mmds (a
// JSON merge patch, RFC 7396), read by the API and, a path at a time, by the guest. The
// document's compact serialization is at most `size_limit` bytes (Firecracker's
// --mmds-size-limit, 51200 by default); a body nested deeper than kMaxDepth is refused
// before it is parsed, so that no recursion (the merge, the serializer) runs deep. Not
// thread-safe: mmds::Mmds holds it under its lock.
#pragma once

#include <cstddef>
#include <expected>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec::mmds {

// How a guest's GET is answered: EC2 IMDS's text (an object's keys, one a line, "/" after
// an object's; a string as itself) or the JSON of the value.
enum class OutputFormat { kImds, kJson };

// Why a guest's GET has no answer (Firecracker's 404 and 501).
enum class GetError { kNotFound, kUnsupportedValueType };

// Why a PUT or PATCH is refused: not JSON (or too deep), or too large once applied (413),
// or a PATCH before any PUT.
enum class UpdateError { kInvalid, kTooLarge, kNotInitialized };

struct UpdateRefusal {
  UpdateError kind;
  std::string message;
};

class DataStore {
 public:
  static constexpr size_t kDefaultSizeLimit = 51200;
  // serde_json's recursion limit, which Firecracker's parser has.
  static constexpr int kMaxDepth = 128;

  explicit DataStore(size_t size_limit = kDefaultSizeLimit) : size_limit_(size_limit) {}

  std::expected<void, UpdateRefusal> put(std::string_view body);
  std::expected<void, UpdateRefusal> patch(std::string_view body);
  // The document; {} until the first PUT.
  const nlohmann::json& value() const { return value_; }
  size_t size_limit() const { return size_limit_; }
  // The value at `path` ("/latest/meta-data/", as a guest's URL path: "//" counts as "/",
  // a trailing "/" is ignored, ~0 and ~1 are JSON pointer escapes; array elements by index).
  std::expected<std::string, GetError> get(std::string_view path, OutputFormat format) const;

 private:
  size_t size_limit_;
  nlohmann::json value_ = nlohmann::json::object();
  bool initialized_ = false;
};

// `text` as JSON, refused with a message when it is not JSON or nests deeper than
// `max_depth` arrays and objects.
Result<nlohmann::json> parse_bounded_json(std::string_view text, int max_depth);

// RFC 7396: `patch` merged into `target`.
void merge_patch(nlohmann::json& target, const nlohmann::json& patch);

// "//" collapsed to "/", as Firecracker makes a guest's path a JSON pointer.
std::string collapse_slashes(std::string_view path);

}  // namespace dsec::mmds
