//===- LossScaler.h - Dynamic loss scaling for fp16 training ----*- C++ -*-===//
//
// fp16 gradients underflow unless the loss is scaled up before the backward
// (and the gradients scaled back down after it). The scale is dynamic, as in
// apex and torch.amp.GradScaler: a step whose gradients hold an inf or NaN
// on *any* stage of *any* replica is skipped everywhere (no optimizer step)
// and the scale is multiplied by backoff_factor; after growth_interval
// steps in a row without overflow it is multiplied by growth_factor.
//
// The per-step protocol of a stage (the trainers in Target/ATen):
//
//   roots = loss * count * scaler.scale();          // last stage
//   ... backward ...
//   grads[i] /= total * scaler.scale();
//   bool overflow = !LossScaler::allFinite(grads);  // this rank
//   overflow = allReduceSum(overflow) > 0;          // every rank
//   if (!overflow) { clip; optimizer step; }
//   scaler.update(overflow);
//
// Only at::Tensor is forward-declared here; include an ATen header to call
// allFinite.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_LOSSSCALER_H
#define VARUNA_RUNTIME_LOSSSCALER_H

#include "varuna/Compiler/TrainingConfig.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <stdexcept>
#include <limits>
#include <cstdint>
#include <vector>

namespace at {
class Tensor;
} // namespace at

namespace varuna::rt {

class LossScaler {
public:
  explicit LossScaler(const LossScaleConfig &config)
      : cfg(config), current(static_cast<float>(config.initial)) {}

  /// What the loss is multiplied by this step.
  double scale() const { return current; }
  /// Finite steps in a row since the last change of the scale.
  int64_t goodSteps() const { return good; }

  /// After the step: back off on an overflow, else count towards growth.
  /// The scale is an fp32 number, as torch.amp.GradScaler keeps it
  /// (_amp_update_scale_): each product is rounded to fp32, and a growth
  /// that would overflow fp32 is not taken (the count still restarts).
  void update(bool overflow) {
    if (overflow) {
      current = static_cast<float>(current * cfg.backoffFactor);
      good = 0;
    } else if (++good >= cfg.growthInterval) {
      float grown = static_cast<float>(current * cfg.growthFactor);
      if (std::isfinite(grown))
        current = grown;
      good = 0;
    }
  }

  /// For checkpoints: the scale and the good-step count, restored as saved.
  /// The scale is taken as an fp32 number, as it is kept (a checkpoint
  /// written before it was may hold 2^128: the largest fp32 number then).
  /// Throws std::invalid_argument on a scale that is not a positive number.
  void restore(double scale, int64_t goodSteps) {
    if (!(scale > 0))
      throw std::invalid_argument("the checkpoint's loss scale " +
                                  std::to_string(scale) +
                                  " is not a positive number");
    current = static_cast<float>(
        std::min(scale, double(std::numeric_limits<float>::max())));
    good = goodSteps;
  }

  /// True when every element of every defined gradient is finite.
  static bool allFinite(const std::vector<at::Tensor> &grads);

private:
  LossScaleConfig cfg;
  double current;
  int64_t good = 0;
};

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_LOSSSCALER_H
