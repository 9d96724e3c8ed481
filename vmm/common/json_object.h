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
  // What an optional field given as JSON null means: a wrong type (the default), or the
  // field left out, as Firecracker (serde's Option) reads its API bodies. A field that
  // must be there is never null.
  enum class Nulls { kWrongType, kAbsent };

  // `what` names the object in messages ("the body", "mem_backend").
  static Result<JsonObject> of(const nlohmann::json& value, std::string what,
                               Nulls nulls = Nulls::kWrongType);
  // JSON text that must parse and be an object; `what` names it ("the body").
  static Result<JsonObject> parse(std::string_view text, std::string what = "the body",
                                  Nulls nulls = Nulls::kWrongType);

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
  // The same, where the field may be absent (nullopt); JSON null as `Nulls` says.
  Result<std::optional<std::string>> optional_string(const char* name,
                                                     Empty empty = Empty::kRefused);
  Result<std::optional<bool>> optional_boolean(const char* name);
  Result<std::optional<uint64_t>> optional_unsigned_int(const char* name);
  Result<std::optional<nlohmann::json>> optional_object(const char* name);
  Result<std::optional<nlohmann::json>> optional_array(const char* name);

  // Whether the field is there; with Nulls::kAbsent a JSON null is not (a PATCH's
  // {"vcpu_count": null} changes nothing, as serde's Option reads it).
  bool has(const char* name) const {
    const auto it = value_.find(name);
    return it != value_.end() && !(nulls_ == Nulls::kAbsent && it->is_null());
  }
  Nulls nulls() const { return nulls_; }
  // Refuses the field if it is there (and, with Nulls::kAbsent, not null): something this
  // VMM cannot do. `why` ends the message.
  Status refuse(const char* name, std::string_view why);
  // Refuses a field none of the calls above asked for.
  Status finish() const;

 private:
  JsonObject(nlohmann::json value, std::string what, Nulls nulls)
      : value_(std::move(value)), what_(std::move(what)), nulls_(nulls) {}
  // The field, if present, after checking its type with `is_type`; `type` names it. An
  // optional field that is null counts as absent where nulls_ says so.
  Result<const nlohmann::json*> find(const char* name, bool (nlohmann::json::*is_type)() const,
                                     const char* type, bool optional = true);
  Result<const nlohmann::json*> get(const char* name, bool (nlohmann::json::*is_type)() const,
                                    const char* type);

  nlohmann::json value_;
  std::string what_;
  Nulls nulls_;
  std::set<std::string, std::less<>> asked_;
};

}  // namespace dsec
