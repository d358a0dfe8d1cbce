//===- SymIntTest.cpp - Integers affine in the batch size -----------------===//

#include "varuna/Support/SymInt.h"
#include <gtest/gtest.h>

using varuna::SymInt;

TEST(SymInt, Arithmetic) {
  SymInt b = SymInt::batch(), k(16);
  EXPECT_EQ((b.mul(k))->str(), "B*16");
  EXPECT_EQ((b.scaled(4) + SymInt(2)).str(), "B*4+2");
  EXPECT_EQ((b - SymInt(3)).str(), "B-3");
  EXPECT_FALSE(b.mul(b).has_value()) << "B*B is not affine";
  EXPECT_EQ(SymInt::batch(16).at(3), 48);
}

TEST(SymInt, Division) {
  EXPECT_EQ(*SymInt::batch(16).divExact(SymInt(4)), SymInt::batch(4));
  EXPECT_EQ(*SymInt::batch(16).divExact(SymInt::batch(1)), SymInt(16));
  EXPECT_FALSE(SymInt::batch(3).divExact(SymInt(2)).has_value());
  EXPECT_FALSE(SymInt(16).divExact(SymInt::batch()).has_value());
  // floor((4B + 3) / 2) = 2B + 1 for every B.
  EXPECT_EQ(*SymInt(4, 3).floorDiv(SymInt(2)), SymInt(2, 1));
  EXPECT_EQ(*SymInt(4, 3).mod(SymInt(2)), SymInt(1));
  EXPECT_EQ(*SymInt(-7).floorDiv(SymInt(2)), SymInt(-4));
  EXPECT_FALSE(SymInt(3, 0).floorDiv(SymInt(2)).has_value());
}

TEST(SymInt, Predicates) {
  EXPECT_TRUE(SymInt::batch(2).isBatchMultiple());
  EXPECT_FALSE(SymInt(2, 1).isBatchMultiple());
  EXPECT_TRUE(SymInt(5).isStatic());
}

TEST(SymInt, Product) {
  EXPECT_EQ(*varuna::product(llvm::ArrayRef<SymInt>()), SymInt(1));
  EXPECT_EQ(*varuna::product({SymInt(3), SymInt::batch(2), SymInt(4)}),
            SymInt::batch(24));
  EXPECT_EQ(*varuna::product({SymInt(0), SymInt::batch()}), SymInt(0));
  EXPECT_FALSE(varuna::product({SymInt::batch(), SymInt(2), SymInt::batch()}));
}
