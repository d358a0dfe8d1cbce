//===- VarunaAttrs.cpp - varuna dialect attributes ------------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaAttrs.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstdint>

using namespace mlir;
using namespace varuna;

#define GET_ATTRDEF_CLASSES
#include "varuna/Dialect/Varuna/IR/VarunaAttrs.cpp.inc"

void VarunaDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "varuna/Dialect/Varuna/IR/VarunaAttrs.cpp.inc"
      >();
}

LogicalResult DataAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringRef file, int64_t offset, int64_t size,
                               int64_t digest) {
  if (file.empty())
    return emitError() << "#varuna.data needs a file name";
  if (offset < 0 || size < 0)
    return emitError() << "#varuna.data offset and size must be non-negative "
                          "(got offset "
                       << offset << ", size " << size << ")";
  if (digest < -1 || digest > int64_t(UINT32_MAX))
    return emitError() << "#varuna.data digest must be a CRC-32 (0 to "
                       << UINT32_MAX << "), got " << digest;
  return success();
}

//===----------------------------------------------------------------------===//
// #varuna.cost<flops = B*2048 + 16, backward = B*4096, bytes = B*512>
//===----------------------------------------------------------------------===//

/// Parses `12`, `B`, `B*4`, `B*4 + 12` (a negative constant: `+ -3`).
static ParseResult parseSymInt(AsmParser &p, SymInt &out) {
  out = SymInt();
  if (succeeded(p.parseOptionalKeyword("B"))) {
    out.perBatch = 1;
    if (succeeded(p.parseOptionalStar()) && p.parseInteger(out.perBatch))
      return failure();
    if (succeeded(p.parseOptionalPlus()) && p.parseInteger(out.constant))
      return failure();
    return success();
  }
  return p.parseInteger(out.constant);
}

static void printSymInt(AsmPrinter &p, SymInt v) {
  if (v.perBatch == 0) {
    p << v.constant;
    return;
  }
  p << "B";
  if (v.perBatch != 1)
    p << "*" << v.perBatch;
  if (v.constant != 0)
    p << " + " << v.constant;
}

Attribute CostAttr::parse(AsmParser &p, Type) {
  SymInt flops, backward, bytes;
  if (p.parseLess() || p.parseKeyword("flops") || p.parseEqual() ||
      parseSymInt(p, flops) || p.parseComma() || p.parseKeyword("backward") ||
      p.parseEqual() || parseSymInt(p, backward) || p.parseComma() ||
      p.parseKeyword("bytes") || p.parseEqual() || parseSymInt(p, bytes) ||
      p.parseGreater())
    return {};
  return CostAttr::get(p.getContext(), flops, backward, bytes);
}

void CostAttr::print(AsmPrinter &p) const {
  p << "<flops = ";
  printSymInt(p, getFlops());
  p << ", backward = ";
  printSymInt(p, getBackward());
  p << ", bytes = ";
  printSymInt(p, getBytes());
  p << ">";
}
