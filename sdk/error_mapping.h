// The library's internal errors (dsec::Error, vmm/common/error.h) as the public
// dsec::sdk::Error, with the code of the step that failed.
#pragma once

#include <expected>

#include "dsec/error.h"
#include "vmm/common/error.h"

namespace dsec::sdk::detail {

// The message is the internal one's what and system reason; its hint stays the hint.
sdk::Error to_sdk_error(const dsec::Error& error, ErrorCode code);

// `result` with its error mapped to `code`.
template <typename T>
sdk::Result<T> with_code(dsec::Result<T> result, ErrorCode code) {
  if (!result) {
    return std::unexpected(to_sdk_error(result.error(), code));
  }
  if constexpr (std::is_void_v<T>) {
    return {};
  } else {
    return std::move(result).value();
  }
}

}  // namespace dsec::sdk::detail
