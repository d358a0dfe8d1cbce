//===- Calibrate.cpp - Measured section times -----------------------------===//

#include "varuna/Target/ATen/Calibrate.h"
#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Target/ATen/ReferenceTrainer.h"
#include "varuna/runtime/Dataset.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>

using namespace mlir;

namespace varuna {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a)
      .count();
}
} // namespace

FailureOr<std::vector<SectionTiming>>
calibrateSections(ModuleOp job, const CalibrationOptions &options) {
  TrainOptions trainOptions;
  trainOptions.seed = options.seed;
  trainOptions.stageLibrary = options.stageLibrary;
  double count = 0;
  auto created = createTrainingEvaluator(job, trainOptions, count);
  if (failed(created))
    return failure();
  ATenEvaluator &evaluator = **created;
  std::vector<func::FuncOp> sections = evaluator.getSections();
  if (sections.empty())
    return jobError(job, "no sections: compile the job with varuna-compile"),
           failure();
  auto specs = graphInputSpecs(job);
  if (failed(specs))
    return failure();
  for (rt::InputSpec &s : *specs)
    s.vocab = options.vocab;
  rt::SyntheticDataset data(options.seed, *specs);
  if (failed(evaluator.trainableParams())) // leaves that require grad
    return failure();

  std::vector<SectionTiming> out(sections.size());
  try {
    for (int64_t m : options.microBatches) {
      llvm::StringMap<at::Tensor> inputs;
      for (auto [name, b] :
           llvm::zip(evaluator.getInputNames(), data.batch(0, m, 0, m)))
        inputs[name] = tensorFromNpy(b.array);
      // Each section's arguments, from one forward pass of the chain.
      std::vector<std::vector<at::Tensor>> args(sections.size());
      std::vector<at::Tensor> sent;
      {
        at::NoGradGuard noGrad;
        for (auto [k, s] : llvm::enumerate(sections)) {
          auto a = sectionArguments(s, sent, inputs);
          if (failed(a))
            return failure();
          args[k] = std::move(*a);
          auto o = evaluator.runSection(s, args[k], m);
          if (failed(o))
            return failure();
          sent = std::move(*o);
        }
      }
      for (auto [k, s] : llvm::enumerate(sections)) {
        std::vector<double> fwd, bwd;
        for (int it = 0; it < options.warmup + options.repeats; ++it) {
          std::vector<at::Tensor> leaves;
          for (const at::Tensor &t : args[k]) {
            at::Tensor l = t.detach();
            if (l.is_floating_point())
              l.requires_grad_(true);
            leaves.push_back(l);
          }
          auto t0 = std::chrono::steady_clock::now();
          auto o = evaluator.runSection(s, leaves, m);
          if (failed(o))
            return failure();
          double f = seconds(t0);
          std::vector<at::Tensor> roots, grads;
          for (const at::Tensor &r : *o)
            if (r.requires_grad()) {
              roots.push_back(r);
              grads.push_back(at::ones_like(r));
            }
          t0 = std::chrono::steady_clock::now();
          if (!roots.empty())
            torch::autograd::backward(roots, grads);
          double b = seconds(t0);
          if (it >= options.warmup) {
            fwd.push_back(f);
            bwd.push_back(b);
          }
        }
        out[k].forwardSeconds.push_back(median(fwd));
        out[k].backwardSeconds.push_back(median(bwd));
      }
    }
  } catch (const std::exception &e) {
    return jobError(job, "calibration: ") << e.what(), failure();
  }
  return out;
}

} // namespace varuna
