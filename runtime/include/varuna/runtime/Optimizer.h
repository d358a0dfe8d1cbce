//===- Optimizer.h - SGD, AdamW, LAMB and global-norm clipping --*- C++ -*-===//
//
// The optimizers a stage applies to its parameters after each mini-batch,
// built from the training configuration's OptimizerConfig
// (varuna/Compiler/TrainingConfig.h). The formulas, with the PyTorch code
// they match, are in docs/optimizers.md.
//
// Contract:
//  - `Optimizer::create(config)` validates the fields the chosen optimizer
//    uses (lr > 0; weight_decay >= 0; SGD: momentum in [0, 1); AdamW/LAMB:
//    betas in [0, 1), eps > 0; all finite) and throws std::invalid_argument
//    naming the field (`optimizer.lr: expected a number > 0, got 0`).
//  - `step(params, grads)` updates `params` in place, without recording
//    autograd history; `grads` are read, never modified. params[i] and
//    grads[i] must have the same shape and floating dtype, and every call
//    must pass the same parameters in the same order (shapes are checked
//    against the state). Misuse throws std::invalid_argument.
//      SGD   == torch.optim.SGD(lr, momentum, weight_decay) (dampening 0,
//               nesterov False): decay added to the gradient, momentum
//               buffer initialised to the first (decayed) gradient.
//      AdamW == torch.optim.AdamW(lr, betas, eps, weight_decay) with
//               amsgrad False, computed by ATen's fused AdamW kernel (what
//               torch.optim.AdamW(fused=True) runs: one pass over each
//               parameter, 2.5-4x faster on a CPU than the single-tensor
//               form, docs/optimizers.md);
//               it agrees with the single-tensor form (foreach False) to
//               rounding, ~1e-8 of a parameter's scale after 10 steps.
//      LAMB  == You et al. 2019, Algorithm 2 as in NVIDIA apex FusedLAMB
//               (bias correction, decoupled decay added to the Adam update,
//               trust ratio ||p|| / ||update|| applied to every parameter,
//               1 when either norm is 0), with the gradient pre-normalised by
//               the *global* gradient norm when it exceeds max_grad_norm
//               (the training configuration's clip_grad_norm, default 1.0).
//  - Each parameter's weight decay is config.weightDecayFor(name, dims):
//    the parameters no_weight_decay / no_weight_decay_1d select get none,
//    as in torch.optim with a second param group of weight_decay 0.
//  - Per-parameter state is keyed by the parameter's name (setParamNames;
//    default "0", "1", ...). `state()` exposes it as named tensors:
//    `<name>.momentum_buffer` (SGD with momentum), `<name>.exp_avg` and
//    `<name>.exp_avg_sq` (AdamW, LAMB), and `step` (int64 scalar, the number
//    of steps taken). `loadState()` copies such a map into an optimizer built
//    from the same configuration; continuing from it is bit-identical to
//    continuing the original.
//  - Global-norm clipping is `torch.nn.utils.clip_grad_norm_` (norm type 2):
//    grads *= min(1, max_norm / (total_norm + 1e-6)). In a pipeline each
//    stage computes `sumOfSquares` of its gradients (each tied parameter
//    counted once), the stages of a replica all-reduce the sums, and every
//    stage passes sqrt(total) as the precomputed norm.
//
// The per-step protocol of one stage:
//
//   std::optional<double> norm;
//   if (cfg.needsGlobalGradNorm())
//     norm = std::sqrt(allReduceSum(sumOfSquares(grads)));
//   if (cfg.clipGradNorm && cfg.optimizer.type != OptimizerKind::LAMB)
//     clipGradNorm(grads, *cfg.clipGradNorm, norm);
//   opt->step(params, grads, norm);   // opt = Optimizer::create(cfg.optimizer,
//                                     // cfg.clipGradNorm)
//
// (LAMB's pre-normalisation *is* its clipping: it is not clipped twice.)
//
// Only at::Tensor is forward-declared here; include <ATen/core/Tensor.h> (or
// any ATen header) to call these functions.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_OPTIMIZER_H
#define VARUNA_RUNTIME_OPTIMIZER_H

#include "varuna/Compiler/TrainingConfig.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace at {
class Tensor;
} // namespace at

namespace varuna::rt {

/// Named optimizer state, as written to and read from checkpoints.
using OptimizerState = std::map<std::string, at::Tensor>;

class Optimizer {
public:
  /// Builds the optimizer `config` describes. `maxGradNorm` is the training
  /// configuration's clip_grad_norm: LAMB pre-normalises the gradient by the
  /// global norm when it exceeds it (1.0 when unset, apex's default); SGD and
  /// AdamW do not use it (clip with clipGradNorm before step()). Throws
  /// std::invalid_argument naming the offending field.
  static std::unique_ptr<Optimizer>
  create(const OptimizerConfig &config,
         std::optional<double> maxGradNorm = std::nullopt);

  virtual ~Optimizer();
  Optimizer(const Optimizer &) = delete;
  Optimizer &operator=(const Optimizer &) = delete;

  const OptimizerConfig &config() const { return cfg; }

  /// The learning rate the next step() uses (the trainers set it from the
  /// training configuration's lr_schedule before each step; > 0).
  void setLearningRate(double lr) { cfg.lr = lr; }

  /// Names the parameters, in the order step() receives them; the names key
  /// the state. Must be called before the first step or loadState(), with
  /// unique, non-empty names.
  void setParamNames(std::vector<std::string> names);

  /// True when step() uses the global gradient norm (LAMB).
  bool usesGlobalGradNorm() const { return cfg.type == OptimizerKind::LAMB; }

  /// One update of `params` (in place) from `grads`. `globalGradNorm` is the
  /// 2-norm of the gradients of *all* stages; only LAMB uses it, and computes
  /// it from `grads` when absent (single-stage training).
  void step(std::vector<at::Tensor> &params,
            const std::vector<at::Tensor> &grads,
            std::optional<double> globalGradNorm = std::nullopt);

  /// Number of steps taken (or loaded).
  int64_t stepCount() const { return steps; }

  /// What it keeps for each parameter (the state()'s key suffixes), e.g.
  /// {"exp_avg", "exp_avg_sq"} for AdamW, {} for SGD without momentum.
  std::vector<std::string> stateNames() const { return bufferNames(); }

  /// The state as named tensors. The tensors are the live buffers: copy them
  /// (or write them out) before the next step if they are to be kept.
  OptimizerState state() const;

  /// Replaces the state with copies of the tensors of `named` (as returned by
  /// state(), possibly from another process). Throws std::invalid_argument on
  /// an unknown key, a missing `step`, a non-floating or misshaped tensor or
  /// a parameter missing some of its buffers; a parameter without buffers is
  /// rejected at the next step() when the step count is > 0.
  void loadState(const OptimizerState &named);

protected:
  explicit Optimizer(const OptimizerConfig &config);

  struct ParamState;
  /// The update of one parameter; `gradScale` is LAMB's pre-normalisation
  /// divisor (1 for no scaling).
  virtual void update(at::Tensor &param, const at::Tensor &grad,
                      ParamState &state, double gradScale) = 0;
  /// The update of all parameters (states[i] is params[i]'s): update() of
  /// each unless the optimizer has a kernel for them all (AdamW).
  virtual void updateAll(std::vector<at::Tensor> &params,
                         const std::vector<at::Tensor> &grads,
                         const std::vector<ParamState *> &states,
                         double gradScale);
  /// Names of the per-parameter buffers this optimizer keeps.
  virtual std::vector<std::string> bufferNames() const = 0;

  OptimizerConfig cfg;
  /// LAMB's max_grad_norm (see create()).
  double maxGradNorm = 1.0;
  int64_t steps = 0;

private:
  std::vector<std::string> names;
  std::map<std::string, std::unique_ptr<ParamState>> paramStates;
};

/// The sum of squares of all elements of `grads`, accumulated in double: a
/// stage's contribution to the squared global gradient norm.
double sumOfSquares(const std::vector<at::Tensor> &grads);

/// torch.nn.utils.clip_grad_norm_(norm_type=2) on `grads` (in place; the
/// tensors are shared handles). The total norm is `precomputedTotalNorm` when
/// given (sqrt of the all-reduced sumOfSquares), else computed from `grads`.
/// Returns the total norm before clipping. Like PyTorch (error_if_nonfinite
/// False), an infinite norm zeroes the gradients and a NaN norm makes them
/// NaN; the runtime's overflow check skips such steps. Throws
/// std::invalid_argument if maxNorm is not a finite number > 0 or the
/// precomputed norm is negative.
double clipGradNorm(const std::vector<at::Tensor> &grads, double maxNorm,
                    std::optional<double> precomputedTotalNorm = std::nullopt);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_OPTIMIZER_H
