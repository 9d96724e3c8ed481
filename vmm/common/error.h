// Errors as values: every fallible operation in dsec-vmm returns Result<T>.
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <utility>

namespace dsec {

// What failed, with what (path, ioctl name, errno), and what the user can do about it.
class Error {
 public:
  Error() = default;
  explicit Error(std::string what, int os_errno = 0, std::string hint = {})
      : what_(std::move(what)), errno_(os_errno), hint_(std::move(hint)) {}

  // An Error for a failed system call or ioctl; `what` names the call and its object.
  static Error from_errno(std::string what, int os_errno, std::string hint = {}) {
    return Error(std::move(what), os_errno, std::move(hint));
  }

  const std::string& what() const { return what_; }
  int os_errno() const { return errno_; }
  const std::string& hint() const { return hint_; }

  // Prepends context, e.g. "loading kernel /x: " + inner message.
  Error with_context(const std::string& context) const {
    Error e = *this;
    e.what_ = context + ": " + what_;
    return e;
  }

  // "what: strerror (ENAME=n); hint"
  std::string message() const {
    std::string m = what_;
    if (errno_ != 0) {
      m += ": ";
      m += std::strerror(errno_);
      m += " (errno ";
      m += std::to_string(errno_);
      m += ")";
    }
    if (!hint_.empty()) {
      m += "; ";
      m += hint_;
    }
    return m;
  }

 private:
  std::string what_;
  int errno_ = 0;
  std::string hint_;
};

template <typename T>
using Result = std::expected<T, Error>;

// Result<void> helpers.
using Status = Result<void>;
inline Status ok() {
  return {};
}
inline std::unexpected<Error> fail(std::string what, std::string hint = {}) {
  return std::unexpected(Error(std::move(what), 0, std::move(hint)));
}
inline std::unexpected<Error> fail_errno(std::string what, int os_errno, std::string hint = {}) {
  return std::unexpected(Error(std::move(what), os_errno, std::move(hint)));
}

}  // namespace dsec

// Propagates the error of a Result expression, or yields its value (GCC statement
// expression). Each use gets its own variable, so uses may nest.
// `var` names a variable, which parentheses would not.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define DSEC_CONCAT_INNER_(a, b) a##b
#define DSEC_CONCAT_(a, b) DSEC_CONCAT_INNER_(a, b)
#define DSEC_TRY_IMPL_(expr, var)                             \
  __extension__({                                             \
    auto&& var = (expr);                                      \
    if (!var) return std::unexpected(std::move(var).error()); \
    std::move(var).value();                                   \
  })
#define DSEC_TRY(expr) DSEC_TRY_IMPL_(expr, DSEC_CONCAT_(dsec_try_result_, __COUNTER__))
// NOLINTEND(bugprone-macro-parentheses)
