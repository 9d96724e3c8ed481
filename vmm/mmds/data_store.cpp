#include "vmm/mmds/data_store.h"

#include <fmt/format.h>

#include <charconv>

namespace dsec::mmds {

using nlohmann::json;

namespace {

// The deepest nesting of arrays and objects in `text`, outside strings; stops counting
// past `limit`.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) {
        return deepest;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// One step of a JSON pointer: ~1 is '/', ~0 is '~'; nullopt for another '~'.
std::optional<std::string> unescape_token(std::string_view token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] != '~') {
      out.push_back(token[i]);
      continue;
    }
    if (i + 1 == token.size() || (token[i + 1] != '0' && token[i + 1] != '1')) {
      return std::nullopt;
    }
    out.push_back(token[++i] == '0' ? '~' : '/');
  }
  return out;
}

// The value `pointer` ("" or "/a/b") names in `root`; nullptr when there is none.
const json* resolve(const json& root, std::string_view pointer) {
  if (pointer.empty()) {
    return &root;
  }
  if (pointer.front() != '/') {
    return nullptr;
  }
  const json* at = &root;
  size_t start = 1;
  for (;;) {
    const size_t end = std::min(pointer.find('/', start), pointer.size());
    const auto token = unescape_token(pointer.substr(start, end - start));
    if (!token) {
      return nullptr;
    }
    if (at->is_object()) {
      const auto it = at->find(*token);
      if (it == at->end()) {
        return nullptr;
      }
      at = &*it;
    } else if (at->is_array()) {
      size_t index = 0;
      const char* first = token->data();
      const char* last = first + token->size();
      const auto [ptr, ec] = std::from_chars(first, last, index);
      // JSON pointer: digits only, no leading zero.
      if (token->empty() || ec != std::errc() || ptr != last ||
          (token->size() > 1 && token->front() == '0') || index >= at->size()) {
        return nullptr;
      }
      at = &(*at)[index];
    } else {
      return nullptr;
    }
    if (end == pointer.size()) {
      return at;
    }
    start = end + 1;
  }
}

std::expected<std::string, GetError> imds_text(const json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (!value.is_object()) {
    return std::unexpected(GetError::kUnsupportedValueType);
  }
  std::string out;
  for (const auto& [key, child] : value.items()) {
    if (!out.empty()) {
      out.push_back('\n');
    }
    out += key;
    if (child.is_object()) {
      out.push_back('/');
    }
  }
  return out;
}

std::unexpected<UpdateRefusal> refuse(UpdateError kind, std::string message) {
  return std::unexpected(UpdateRefusal{kind, std::move(message)});
}

}  // namespace

Result<json> parse_bounded_json(std::string_view text, int max_depth) {
  if (nesting_depth(text, max_depth) > max_depth) {
    return fail(
        fmt::format("the MMDS document nests arrays and objects more than {} deep", max_depth),
        "flatten it");
  }
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return fail("the MMDS document is not valid JSON");
  }
  return value;
}

void merge_patch(json& target, const json& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) {
    target = json::object();
  }
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      target.erase(key);
    } else {
      merge_patch(target[key], value);
    }
  }
}

std::string collapse_slashes(std::string_view path) {
  std::string out;
  for (const char c : path) {
    if (c != '/' || out.empty() || out.back() != '/') {
      out.push_back(c);
    }
  }
  return out;
}

std::expected<void, UpdateRefusal> DataStore::put(std::string_view body) {
  auto value = parse_bounded_json(body, kMaxDepth);
  if (!value) {
    return refuse(UpdateError::kInvalid, value.error().message());
  }
  if (value->dump().size() > size_limit_) {
    return refuse(UpdateError::kTooLarge, "The MMDS patch request doesn't fit.");
  }
  value_ = std::move(*value);
  initialized_ = true;
  return {};
}

std::expected<void, UpdateRefusal> DataStore::patch(std::string_view body) {
  auto patch = parse_bounded_json(body, kMaxDepth);
  if (!patch) {
    return refuse(UpdateError::kInvalid, patch.error().message());
  }
  if (!initialized_) {
    return refuse(UpdateError::kNotInitialized, "The MMDS data store is not initialized.");
  }
  json patched = value_;
  merge_patch(patched, *patch);
  // The merge puts each of the patch's values where the patch has it: the result nests no
  // deeper than the document or the patch did.
  if (patched.dump().size() > size_limit_) {
    return refuse(UpdateError::kTooLarge, "The MMDS patch request doesn't fit.");
  }
  value_ = std::move(patched);
  return {};
}

std::expected<std::string, GetError> DataStore::get(std::string_view path,
                                                    OutputFormat format) const {
  std::string pointer = collapse_slashes(path);
  if (!pointer.empty() && pointer.back() == '/') {
    pointer.pop_back();
  }
  const json* value = resolve(value_, pointer);
  if (value == nullptr) {
    return std::unexpected(GetError::kNotFound);
  }
  if (format == OutputFormat::kJson) {
    return value->dump();
  }
  return imds_text(*value);
}

}  // namespace dsec::mmds
