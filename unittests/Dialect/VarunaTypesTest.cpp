//===- VarunaTypesTest.cpp - !varuna.tensor queries -----------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace varuna;

namespace {
struct VarunaTypes : ::testing::Test {
  VarunaTypes() { ctx.loadDialect<VarunaDialect>(); }
  MLIRContext ctx;
};
} // namespace

TEST_F(VarunaTypes, SizesAreAffineInBatch) {
  Builder b(&ctx);
  auto t = VTensorType::get(&ctx, {4, 16, 64}, 0, b.getF32Type());
  EXPECT_EQ(t.getDim(0), SymInt::batch(4));
  EXPECT_EQ(t.getNumElements(), SymInt::batch(4 * 16 * 64));
  EXPECT_EQ(t.getSizeInBytes().at(2), 2 * 4 * 16 * 64 * 4);
  auto bf = t.withElementType(b.getBF16Type());
  EXPECT_EQ(bf.getSizeInBytes(), SymInt::batch(4 * 16 * 64 * 2));
}

TEST_F(VarunaTypes, FromDims) {
  Builder b(&ctx);
  auto t = VTensorType::getFromDims(&ctx, {SymInt(8), SymInt::batch(16)},
                                    b.getI64Type());
  ASSERT_TRUE(t);
  EXPECT_EQ(t.getBatchDim(), 1);
  EXPECT_EQ(t.getBatchMultiple(), 16);
  // Two batch-dependent dims, or B + 1, are not shapes.
  EXPECT_FALSE(VTensorType::getFromDims(
      &ctx, {SymInt::batch(), SymInt::batch()}, b.getF32Type()));
  EXPECT_FALSE(
      VTensorType::getFromDims(&ctx, {SymInt(1, 1)}, b.getF32Type()));
}

TEST_F(VarunaTypes, Broadcast) {
  Builder b(&ctx);
  auto x = VTensorType::get(&ctx, {1, 16, 32}, 0, b.getF32Type());
  auto y = VTensorType::get(&ctx, {16, 1}, -1, b.getF32Type());
  std::string err;
  auto r = broadcastTypes(x, y, b.getF32Type(), err);
  ASSERT_TRUE(succeeded(r)) << err;
  EXPECT_EQ(r->getDims(),
            (SmallVector<SymInt>{SymInt::batch(), 16, 32}));
  auto z = VTensorType::get(&ctx, {2, 16, 32}, -1, b.getF32Type());
  EXPECT_TRUE(failed(broadcastTypes(x, z, b.getF32Type(), err)));
  EXPECT_NE(err.find("cannot broadcast dimension B against 2"),
            std::string::npos);
}
