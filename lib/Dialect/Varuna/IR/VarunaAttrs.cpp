//===- VarunaAttrs.cpp - varuna dialect attributes ------------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaAttrs.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

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
                               StringRef file, int64_t offset, int64_t size) {
  if (file.empty())
    return emitError() << "#varuna.data needs a file name";
  if (offset < 0 || size < 0)
    return emitError() << "#varuna.data offset and size must be non-negative "
                          "(got offset "
                       << offset << ", size " << size << ")";
  return success();
}
