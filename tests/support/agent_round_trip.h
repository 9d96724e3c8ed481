// For the agent protocol's message tests: a message encodes and decodes back to itself,
// and every truncation of its encoding is refused.
#pragma once

#include <gtest/gtest.h>

#include <span>

namespace dsec::test {

template <typename M, typename Decode>
void expect_round_trip_and_truncations_fail(const M& m, Decode decode) {
  const auto wire = encode(m);
  auto back = decode(wire);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, m);
  for (size_t cut = 0; cut < wire.size(); ++cut) {
    EXPECT_FALSE(decode(std::span(wire).first(cut)).has_value()) << "cut at " << cut;
  }
}

}  // namespace dsec::test
