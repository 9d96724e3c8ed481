#include "sdk/error_mapping.h"

#include <cstring>

namespace dsec::sdk::detail {

sdk::Error to_sdk_error(const dsec::Error& error, ErrorCode code) {
  std::string message = error.what();
  if (error.os_errno() != 0) {
    message += ": ";
    message += std::strerror(error.os_errno());
  }
  return {code, std::move(message), error.hint(), error.os_errno()};
}

}  // namespace dsec::sdk::detail
