//===- StageBridge.h - stage::Tensor <-> at::Tensor -------------*- C++ -*-===//
//
// For the runtime code that calls generated bodies (torch-facing): wraps
// ATen tensors into the opaque handles of StageAPI.h and back, sharing the
// tensor (no copy).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_STAGEBRIDGE_H
#define VARUNA_RUNTIME_STAGEBRIDGE_H

#include "varuna/runtime/StageAPI.h"
#include <ATen/core/Tensor.h>

namespace varuna::stage {

VARUNA_STAGE_API Tensor fromATen(const at::Tensor &t);
VARUNA_STAGE_API at::Tensor toATen(const Tensor &t);

} // namespace varuna::stage

#endif // VARUNA_RUNTIME_STAGEBRIDGE_H
