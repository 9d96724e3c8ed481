// The failure messages' file sections keep a file's last lines (tests/support/file_text.h).
#include "tests/support/file_text.h"

#include <gtest/gtest.h>

namespace dsec::test {
namespace {

TEST(TextTail, KeepsTheLastLinesAndCountsTheOnesLeftOut) {
  EXPECT_EQ(text_tail("a\nb\nc\n", 2), "[... 1 earlier lines left out]\nb\nc\n");
  EXPECT_EQ(text_tail("a\nb\nc", 2), "[... 1 earlier lines left out]\nb\nc");
  EXPECT_EQ(text_tail("a\nb\nc\nd\n", 1), "[... 3 earlier lines left out]\nd\n");
}

TEST(TextTail, KeepsATextOfNoMoreLinesWhole) {
  EXPECT_EQ(text_tail("a\nb\n", 2), "a\nb\n");
  EXPECT_EQ(text_tail("a\nb", 5), "a\nb");
  EXPECT_EQ(text_tail("", 3), "");
  EXPECT_EQ(text_tail("\n\n\n", 1), "[... 2 earlier lines left out]\n\n");
}

}  // namespace
}  // namespace dsec::test
