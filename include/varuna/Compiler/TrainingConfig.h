//===- TrainingConfig.h - The user's training configuration -----*- C++ -*-===//
//
// The training configuration (JSON, documented in docs/training-config.md)
// that varuna-compile, varuna-plan and varuna-run read:
//
//   {
//     "optimizer": {"type": "adamw", "lr": 3e-4, "betas": [0.9, 0.999],
//                   "eps": 1e-8, "weight_decay": 0.01},
//     "clip_grad_norm": 1.0,
//     "precision": "bf16",
//     "loss_scale": {"initial": 65536, "growth_factor": 2.0,
//                    "backoff_factor": 0.5, "growth_interval": 2000},
//     "global_batch_size": 512,
//     "micro_batch_size": 4
//   }
//
// Every key is optional (defaults below). Unknown keys, wrong types,
// out-of-range values and keys that the chosen optimizer or precision does not
// use are errors whose message names the file, the JSON path of the field
// (`optimizer.betas[1]`) and what was expected; parsing never aborts. The
// first error found is returned.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_COMPILER_TRAININGCONFIG_H
#define VARUNA_COMPILER_TRAININGCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace varuna {

enum class OptimizerKind { SGD, AdamW, LAMB };
enum class Precision { FP32, BF16, FP16 };

/// The weight decay of an "adamw" optimizer that names none: PyTorch's
/// (torch.optim.AdamW's default).
inline constexpr double kAdamWDefaultWeightDecay = 0.01;

struct OptimizerConfig {
  OptimizerKind type = OptimizerKind::SGD;
  double lr = 1e-3;                           // > 0
  double momentum = 0.0;                      // SGD only, in [0, 1)
  double weightDecay = 0.0; // >= 0; parsed "adamw": kAdamWDefaultWeightDecay
  std::array<double, 2> betas = {0.9, 0.999}; // AdamW/LAMB, each in [0, 1)
  double eps = 1e-8;                          // AdamW/LAMB, > 0
  /// Parameters left undecayed ("no_weight_decay"): those whose name (the
  /// framework's, `h.0.ln_1.weight`) contains one of these strings, as in
  /// the usual PyTorch param groups `any(nd in n for nd in no_decay)`.
  std::vector<std::string> noWeightDecay;
  /// "no_weight_decay_1d": parameters of fewer than 2 dimensions (biases,
  /// norm scales) are left undecayed too (`p.dim() < 2`).
  bool noWeightDecay1d = false;

  /// The weight decay of the parameter `name` of `rank` dimensions:
  /// weightDecay, or 0 when the exclusions above select it. (Inline: the
  /// runtime's optimizers use it without linking the compiler library.)
  double weightDecayFor(llvm::StringRef name, int64_t rank) const {
    if (weightDecay == 0.0 || (noWeightDecay1d && rank < 2))
      return 0.0;
    for (const std::string &s : noWeightDecay)
      if (name.contains(s))
        return 0.0;
    return weightDecay;
  }

  /// Optimizer state kept per parameter element, in units of the
  /// parameter's size: SGD 0 (1 with momentum), AdamW and LAMB 2.
  int stateCopies() const;
};

/// The "no_weight_decay" strings that no name of `names` contains (a typo, or
/// names of another framework's convention: `LayerNorm.weight` for a model
/// whose norms are `ln_1.weight`), for a warning.
std::vector<std::string>
unmatchedNoWeightDecay(const OptimizerConfig &config,
                       const std::vector<std::string> &names);
bool operator==(const OptimizerConfig &a, const OptimizerConfig &b);
inline bool operator!=(const OptimizerConfig &a, const OptimizerConfig &b) {
  return !(a == b);
}

struct LossScaleConfig {
  double initial = 65536.0;      // > 0
  double growthFactor = 2.0;     // > 1
  double backoffFactor = 0.5;    // in (0, 1)
  int64_t growthInterval = 2000; // >= 1
};
bool operator==(const LossScaleConfig &a, const LossScaleConfig &b);
inline bool operator!=(const LossScaleConfig &a, const LossScaleConfig &b) {
  return !(a == b);
}

/// The learning rate over the steps ("lr_schedule"): linear warm-up from
/// lr / warmup_steps to lr over the first `warmupSteps` steps, then `decay`
/// from lr to `minLr` over the next `decaySteps` (and minLr after them).
/// The lr of step s (0-based), for optimizer.lr = L, W = warmupSteps:
///   s < W:  L (s + 1) / W
///   else, p = min(1, (s - W) / decaySteps):
///     none   L
///     linear minLr + (L - minLr) (1 - p)
///     cosine minLr + (L - minLr) (1 + cos(pi p)) / 2
/// -- what torch.optim.lr_scheduler's LinearLR(start_factor=1/W,
/// total_iters=W-1) then LinearLR / CosineAnnealingLR(T_max=decaySteps,
/// eta_min=minLr) in a SequentialLR give, stepped once per optimizer step.
struct LRSchedule {
  enum class Decay { None, Linear, Cosine };
  int64_t warmupSteps = 0; // >= 0
  Decay decay = Decay::None;
  int64_t decaySteps = 0; // >= 1 with linear / cosine
  double minLr = 0;       // in [0, optimizer.lr]
  bool active() const { return warmupSteps > 0 || decay != Decay::None; }
  /// The learning rate of step `step` for base rate `lr`.
  double lrAt(int64_t step, double lr) const;
};
bool operator==(const LRSchedule &a, const LRSchedule &b);

struct TrainingConfig {
  OptimizerConfig optimizer;
  LRSchedule lrSchedule;
  std::optional<double> clipGradNorm; // > 0 when set
  Precision precision = Precision::FP32;
  /// Dynamic loss scaling: always with fp16; with bf16 only when the file
  /// gives "loss_scale" (lossScaleGiven); an error with fp32. Not emitted by
  /// toJSON when unused.
  LossScaleConfig lossScale;
  bool lossScaleGiven = false;
  std::optional<int64_t> globalBatchSize; // >= 1
  std::optional<int64_t> microBatchSize;  // >= 1, divides the global batch

  /// True when training needs the norm of the gradient over all parameters
  /// of all stages: clipping by global norm, and LAMB (which, like the
  /// original Varuna, normalises by the global gradient norm).
  bool needsGlobalGradNorm() const {
    return clipGradNorm.has_value() || optimizer.type == OptimizerKind::LAMB;
  }
  /// True when an overflow on any stage must skip the step on every stage:
  /// Dynamic loss scaling, with its overflow check and skipped steps: fp16,
  /// or bf16 when asked for. (bf16 has fp32's exponent range.)
  bool needsOverflowCheck() const {
    return precision == Precision::FP16 ||
           (precision == Precision::BF16 && lossScaleGiven);
  }

  /// The configuration as JSON with every default filled in. Keys the chosen
  /// optimizer or precision does not use, and unset optional fields, are
  /// omitted, so that parsing the result gives back an equal configuration.
  llvm::json::Value toJSON() const;
};
bool operator==(const TrainingConfig &a, const TrainingConfig &b);
inline bool operator!=(const TrainingConfig &a, const TrainingConfig &b) {
  return !(a == b);
}

/// Parses `text`; `source` names the file in messages
/// (`<source>: <json path>: <what was expected>, got <value>`).
llvm::Expected<TrainingConfig> parseTrainingConfig(llvm::StringRef text,
                                                   llvm::StringRef source);
/// Reads and parses a file; a file that cannot be read is an error naming
/// the path and the OS error.
llvm::Expected<TrainingConfig> loadTrainingConfig(llvm::StringRef path);
/// JOBDIR/manifest.json's top-level object. Errors name the file.
llvm::Expected<llvm::json::Object> loadJobManifest(llvm::StringRef jobDir);
/// The configuration a compiled job was built with: the "config" object of
/// JOBDIR/manifest.json. Errors name the file.
llvm::Expected<TrainingConfig> loadJobTrainingConfig(llvm::StringRef jobDir);
/// The parameter names of a compiled job (its sections' "parameters" in
/// JOBDIR/manifest.json, each once, in section order). Errors name the file.
llvm::Expected<std::vector<std::string>>
loadJobParameterNames(llvm::StringRef jobDir);

/// "sgd" / "adamw" / "lamb" and "fp32" / "bf16" / "fp16" (inline: the
/// runtime uses them without linking the compiler library).
inline llvm::StringRef stringifyOptimizer(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::AdamW:
    return "adamw";
  case OptimizerKind::LAMB:
    return "lamb";
  }
  return "unknown";
}

inline llvm::StringRef stringifyPrecision(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "unknown";
}

} // namespace varuna

#endif // VARUNA_COMPILER_TRAININGCONFIG_H
