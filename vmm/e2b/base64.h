// Base64 (RFC 4648, standard alphabet, padded), as protobuf's JSON mapping writes `bytes`
// and HTTP Basic authentication carries a user. Decoding is hostile-input safe: it also
// takes the URL-safe alphabet and missing padding (protobuf's JSON readers accept both),
// and refuses any other byte.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsec::e2b {

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace dsec::e2b
