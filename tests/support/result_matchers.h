// gtest helpers for Result<T>: fail the test with the Error's message, not just "false".
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "vmm/common/error.h"

#define DSEC_TEST_CONCAT_INNER(a, b) a##b
#define DSEC_TEST_CONCAT(a, b) DSEC_TEST_CONCAT_INNER(a, b)

// ASSERT_OK(status_or_result): the operation succeeded; otherwise prints its Error.
#define ASSERT_OK(expr)                                                            \
  do {                                                                             \
    const auto& dsec_ok_result_ = (expr);                                          \
    ASSERT_TRUE(dsec_ok_result_.has_value()) << dsec_ok_result_.error().message(); \
  } while (0)

// ASSERT_OK_AND_ASSIGN(auto x, make_x()): declares x from the value of a successful Result.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(DSEC_TEST_CONCAT(dsec_result_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(result, lhs, expr)           \
  auto result = (expr);                                        \
  ASSERT_TRUE(result.has_value()) << result.error().message(); \
  lhs = std::move(result).value()

namespace dsec::test {

// The message of a Result expected to fail, for EXPECT_THAT(error_of(...), HasSubstr(...));
// "(it was accepted)" when it did not fail.
template <typename T>
std::string error_of(const Result<T>& r) {
  return r ? std::string("(it was accepted)") : r.error().message();
}

}  // namespace dsec::test
