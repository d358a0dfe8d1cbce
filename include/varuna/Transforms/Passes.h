//===- Passes.h - varuna passes ---------------------------------*- C++ -*-===//

#ifndef VARUNA_TRANSFORMS_PASSES_H
#define VARUNA_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace varuna {

#define GEN_PASS_DECL
#include "varuna/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "varuna/Transforms/Passes.h.inc"

} // namespace varuna

#endif // VARUNA_TRANSFORMS_PASSES_H
