//===- VarunaDialect.cpp - The varuna dialect -----------------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"

using namespace mlir;
using namespace varuna;

#include "varuna/Dialect/Varuna/IR/VarunaDialect.cpp.inc"

void VarunaDialect::initialize() {
  registerTypes();
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "varuna/Dialect/Varuna/IR/VarunaOps.cpp.inc"
      >();
}
