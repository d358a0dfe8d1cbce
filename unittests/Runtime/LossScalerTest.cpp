//===- LossScalerTest.cpp - The dynamic loss scale's arithmetic -----------===//
//
// rt::LossScaler against torch.amp.GradScaler's rules (_amp_update_scale_):
// the scale is an fp32 number, and a growth past fp32's range is not taken.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/LossScaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using varuna::LossScaleConfig;
using varuna::rt::LossScaler;

namespace {

TEST(LossScaler, GrowsAndBacksOff) {
  LossScaleConfig c;
  c.initial = 1024;
  c.growthInterval = 2;
  LossScaler s(c);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.goodSteps(), 1);
  s.update(false);
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.goodSteps(), 0);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
}

// 2^127 x 2 is not an fp32 number: GradScaler keeps 2^127 (and restarts the
// count); before, the scale became 2^128 and every step at it overflowed.
TEST(LossScaler, NeverGrowsPastFp32) {
  LossScaleConfig c;
  c.initial = std::ldexp(1.0, 126);
  c.growthInterval = 1;
  LossScaler s(c);
  s.update(false);
  EXPECT_EQ(s.scale(), std::ldexp(1.0, 127));
  for (int i = 0; i < 3; ++i) {
    s.update(false);
    EXPECT_EQ(s.scale(), std::ldexp(1.0, 127));
    EXPECT_EQ(s.goodSteps(), 0);
  }
  EXPECT_LE(s.scale(), double(std::numeric_limits<float>::max()));
}

// Each product is rounded to fp32, as the scale tensor holds it.
TEST(LossScaler, RoundsToFp32) {
  LossScaleConfig c;
  c.initial = 4;
  c.growthFactor = 1e10;
  c.growthInterval = 1;
  LossScaler s(c);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), double(static_cast<float>(
                           double(static_cast<float>(4 * 1e10)) * 1e10)));
  EXPECT_NE(s.scale(), 4e20);
}

// A checkpoint's scale is taken as fp32 (one written before the scale was
// may hold 2^128 or a double product); a non-positive one is refused.
TEST(LossScaler, RestoreRoundsToFp32) {
  LossScaler s{LossScaleConfig{}};
  s.restore(65536 * std::pow(1.5, 20), 3);
  EXPECT_EQ(s.scale(), double(static_cast<float>(65536 * std::pow(1.5, 20))));
  EXPECT_EQ(s.goodSteps(), 3);
  s.restore(std::ldexp(1.0, 128), 0);
  EXPECT_EQ(s.scale(), double(std::numeric_limits<float>::max()));
  EXPECT_THROW(s.restore(0, 0), std::invalid_argument);
  EXPECT_THROW(s.restore(std::nan(""), 0), std::invalid_argument);
}

} // namespace
