// Errors of the dsec-vmm embedding library: every fallible call returns a Result<T>, a
// std::expected whose error says what failed and what to do about it. Nothing throws.
#pragma once

#include <expected>
#include <string>

#if defined(DSEC_SDK_BUILDING)
#define DSEC_SDK_API __attribute__((visibility("default")))
#else
#define DSEC_SDK_API
#endif

namespace dsec::sdk {

enum class ErrorCode {
  kInvalidArgument,  // an option or argument the library refuses before doing anything
  kNotFound,         // the dsec-vmm binary, a kernel, an image or a snapshot is not there
  kHost,             // a system call on the host failed (files, processes, sockets)
  kVmmExited,        // the sandbox's VMM process ended (its log's last lines are in the message)
  kAgent,            // the guest agent could not be reached, stopped answering or refused
  kApi,              // the VMM's API socket could not be reached or refused the request
  kOutputLimit,      // a command wrote more than the caller allowed to collect
  kPool,             // the pool daemon's socket could not be reached, or it refused the request
};

class DSEC_SDK_API Error {
 public:
  Error(ErrorCode code, std::string message, std::string hint = {}, int os_errno = 0,
        int http_status = 0)
      : code_(code),
        message_(std::move(message)),
        hint_(std::move(hint)),
        errno_(os_errno),
        http_status_(http_status) {}

  ErrorCode code() const { return code_; }
  // What failed, with what (a path, a command, the system's reason).
  const std::string& message() const { return message_; }
  // What to do about it; may be empty.
  const std::string& hint() const { return hint_; }
  // The errno of a failed system call, or 0.
  int os_errno() const { return errno_; }
  // The HTTP status of a server's refusal (the pool daemon's: 404, 409, 410, 429, 503...),
  // or 0 when no server answered.
  int http_status() const { return http_status_; }
  // "message; hint"
  std::string to_string() const { return hint_.empty() ? message_ : message_ + "; " + hint_; }

 private:
  ErrorCode code_;
  std::string message_;
  std::string hint_;
  int errno_;
  int http_status_;
};

template <typename T>
using Result = std::expected<T, Error>;
using Status = Result<void>;

}  // namespace dsec::sdk
