// Strict reading of one JSON object from outside (an API client's request body, a
// snapshot's configuration): each field is asked for with the type it must have, and
// finish() refuses any field nobody asked for. Every message names the field and what was
// expected (for an API client, its fault_message).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "vmm/common/error.h"

namespace dsec {

class JsonObject {
 public:
  // `what` names the object in messages ("the body", "mem_backend").
  static Result<JsonObject> of(const nlohmann::json& value, std::string what);
  // JSON text that must parse and be an object; `what` names it ("the body").
  static Result<JsonObject> parse(std::string_view text, std::string what = "the body");

  // Whether a string field may be "" (a drive's optional id); by default it may not, since
  // most name files and devices.
  enum class Empty { kRefused, kAllowed };

  // A field that must be there, of the type asked for. A string must not hold a NUL byte,
  // nor be empty unless allowed.
  Result<std::string> string(const char* name, Empty empty = Empty::kRefused);
  // An unsigned integer that must also fit 32 bits.
  Result<uint32_t> unsigned_int32(const char* name);
  Result<bool> boolean(const char* name);
  Result<uint64_t> unsigned_int(const char* name);
  Result<nlohmann::json> object(const char* name);
  Result<nlohmann::json> array(const char* name);
  // The same, where the field may be absent (nullopt). JSON null counts as a wrong type.
  Result<std::optional<std::string>> optional_string(const char* name);
  Result<std::optional<bool>> optional_boolean(const char* name);
  Result<std::optional<uint64_t>> optional_unsigned_int(const char* name);
  Result<std::optional<nlohmann::json>> optional_object(const char* name);
  Result<std::optional<nlohmann::json>> optional_array(const char* name);

  bool has(const char* name) const { return value_.contains(name); }
  // Refuses a field none of the calls above asked for.
  Status finish() const;

 private:
  JsonObject(nlohmann::json value, std::string what)
      : value_(std::move(value)), what_(std::move(what)) {}
  // The field, if present, after checking its type with `is_type`; `type` names it.
  Result<const nlohmann::json*> find(const char* name, bool (nlohmann::json::*is_type)() const,
                                     const char* type);
  Result<const nlohmann::json*> get(const char* name, bool (nlohmann::json::*is_type)() const,
                                    const char* type);

  nlohmann::json value_;
  std::string what_;
  std::set<std::string, std::less<>> asked_;
};

}  // namespace dsec
