//===- ByteSizeTest.cpp - Byte counts on the command line -----------------===//

#include "varuna/Support/ByteSize.h"

#include <gtest/gtest.h>

using varuna::parseByteSize;

namespace {

TEST(ByteSize, Forms) {
  EXPECT_EQ(parseByteSize("4000000000"), 4e9);
  EXPECT_EQ(parseByteSize("4e9"), 4e9);
  EXPECT_EQ(parseByteSize("2.5G"), 2.5e9);
  EXPECT_EQ(parseByteSize("2500MB"), 2.5e9);
  EXPECT_EQ(parseByteSize("2500 mb"), 2.5e9);
  EXPECT_EQ(parseByteSize("16GiB"), 16.0 * (1ull << 30));
  EXPECT_EQ(parseByteSize("512k"), 512e3);
  EXPECT_EQ(parseByteSize("1Ti"), double(1ull << 40));
  EXPECT_EQ(parseByteSize("0"), 0.0);
  EXPECT_EQ(parseByteSize("12B"), 12.0);
  EXPECT_EQ(parseByteSize("1e3k"), 1e6);
  EXPECT_EQ(parseByteSize("0.0"), 0.0);
}

TEST(ByteSize, Rejected) {
  for (const char *bad : {"", "G", "2.5X", "-1", "-2G", "inf", "nan", "1GG",
                          "1 GiBs", "abc", "0x10", "0x1e3", "0x1p30", "1e-400",
                          "+2G", "1e", "1..2G"})
    EXPECT_EQ(parseByteSize(bad), std::nullopt) << bad;
}

} // namespace
