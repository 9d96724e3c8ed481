#include "vmm/common/json_object.h"

#include <fmt/format.h>

namespace dsec {
namespace {

using nlohmann::json;

// JSON's own names for the types a client may have sent.
const char* type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
      return "a negative integer";
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number with a fraction";
    default:
      return "not a JSON value";
  }
}

}  // namespace

Result<JsonObject> JsonObject::of(const json& value, std::string what, Nulls nulls) {
  if (!value.is_object()) {
    return fail(fmt::format("{} must be a JSON object, not {}", what, type_name(value)));
  }
  return JsonObject(value, std::move(what), nulls);
}

Result<JsonObject> JsonObject::parse(std::string_view text, std::string what, Nulls nulls) {
  if (text.empty()) {
    return fail(what + " is empty: it must be a JSON object");
  }
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return fail(what + " is not valid JSON");
  }
  return of(value, std::move(what), nulls);
}

Result<const json*> JsonObject::find(const char* name, bool (json::*is_type)() const,
                                     const char* type, bool optional) {
  asked_.emplace(name);
  const auto it = value_.find(name);
  if (it == value_.end() || (optional && nulls_ == Nulls::kAbsent && it->is_null())) {
    return nullptr;
  }
  if (!((*it).*is_type)()) {
    return fail(fmt::format("'{}' in {} must be {}, not {}", name, what_, type, type_name(*it)));
  }
  return &*it;
}

Result<const json*> JsonObject::get(const char* name, bool (json::*is_type)() const,
                                    const char* type) {
  const json* field = DSEC_TRY(find(name, is_type, type, /*optional=*/false));
  if (field == nullptr) {
    return fail(fmt::format("'{}' is missing in {}", name, what_));
  }
  return field;
}

Status JsonObject::refuse(const char* name, std::string_view why) {
  asked_.emplace(name);
  const auto it = value_.find(name);
  if (it == value_.end() || (nulls_ == Nulls::kAbsent && it->is_null())) {
    return ok();
  }
  return fail(fmt::format("'{}' in {} is not supported: {}", name, what_, why));
}

namespace {

Result<std::string> checked_string(const json& value, const char* name, const std::string& what,
                                   JsonObject::Empty empty = JsonObject::Empty::kRefused) {
  auto text = value.get<std::string>();
  if (text.empty() && empty == JsonObject::Empty::kRefused) {
    return fail(fmt::format("'{}' in {} must not be empty", name, what));
  }
  if (text.find('\0') != std::string::npos) {
    return fail(fmt::format("'{}' in {} must not contain a NUL character", name, what));
  }
  return text;
}

}  // namespace

Result<std::string> JsonObject::string(const char* name, Empty empty) {
  return checked_string(*DSEC_TRY(get(name, &json::is_string, "a string")), name, what_, empty);
}

Result<uint32_t> JsonObject::unsigned_int32(const char* name) {
  const uint64_t value = DSEC_TRY(unsigned_int(name));
  if (value > UINT32_MAX) {
    return fail(fmt::format("'{}' in {} is {}, more than 32 bits hold", name, what_, value));
  }
  return static_cast<uint32_t>(value);
}

Result<bool> JsonObject::boolean(const char* name) {
  return DSEC_TRY(get(name, &json::is_boolean, "a boolean"))->get<bool>();
}

Result<uint64_t> JsonObject::unsigned_int(const char* name) {
  return DSEC_TRY(get(name, &json::is_number_unsigned, "a non-negative integer"))->get<uint64_t>();
}

Result<json> JsonObject::object(const char* name) {
  return *DSEC_TRY(get(name, &json::is_object, "an object"));
}

Result<json> JsonObject::array(const char* name) {
  return *DSEC_TRY(get(name, &json::is_array, "an array"));
}

Result<std::optional<std::string>> JsonObject::optional_string(const char* name, Empty empty) {
  const json* field = DSEC_TRY(find(name, &json::is_string, "a string"));
  if (field == nullptr) {
    return std::nullopt;
  }
  return DSEC_TRY(checked_string(*field, name, what_, empty));
}

Result<std::optional<uint64_t>> JsonObject::optional_unsigned_int(const char* name) {
  const json* field = DSEC_TRY(find(name, &json::is_number_unsigned, "a non-negative integer"));
  if (field == nullptr) {
    return std::nullopt;
  }
  return field->get<uint64_t>();
}

Result<std::optional<bool>> JsonObject::optional_boolean(const char* name) {
  const json* field = DSEC_TRY(find(name, &json::is_boolean, "a boolean"));
  if (field == nullptr) {
    return std::nullopt;
  }
  return field->get<bool>();
}

Result<std::optional<json>> JsonObject::optional_object(const char* name) {
  const json* field = DSEC_TRY(find(name, &json::is_object, "an object"));
  if (field == nullptr) {
    return std::nullopt;
  }
  return *field;
}

Result<std::optional<json>> JsonObject::optional_array(const char* name) {
  const json* field = DSEC_TRY(find(name, &json::is_array, "an array"));
  if (field == nullptr) {
    return std::nullopt;
  }
  return *field;
}

Status JsonObject::finish() const {
  for (const auto& [key, value] : value_.items()) {
    if (!asked_.contains(key)) {
      std::string known;
      for (const auto& name : asked_) {
        known += known.empty() ? "" : ", ";
        known += name;
      }
      return fail(fmt::format("unknown field '{}' in {} (known fields: {})", key, what_, known));
    }
  }
  return ok();
}

}  // namespace dsec
