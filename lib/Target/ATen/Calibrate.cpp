//===- Calibrate.cpp - Measured section times -----------------------------===//

#include "varuna/Target/ATen/Calibrate.h"
#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Target/ATen/ReferenceTrainer.h"
#include "varuna/runtime/Dataset.h"
#include "varuna/runtime/Optimizer.h"
#include "varuna/runtime/SplitBackward.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_map>

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
/// Counts the bytes ATen's CPU allocator hands out while installed (the
/// current total and its peak); allocation itself is the wrapped
/// allocator's. Its pointers are "simple" (context == data, as some ATen
/// kernels require), so the wrapped blocks are found again by address.
/// Installed for one measurement at a time (CountScope).
class CountingAllocator final : public at::Allocator {
public:
  at::DataPtr allocate(size_t n) override {
    at::DataPtr inner = base->allocate(n);
    void *data = inner.get();
    if (!data) // n == 0
      return inner;
    {
      std::lock_guard<std::mutex> lock(mutex);
      blocks.emplace(data, Block{std::move(inner), n});
    }
    int64_t now = current.fetch_add(int64_t(n)) + int64_t(n);
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    return {data, data, &release, at::Device(at::kCPU)};
  }
  void copy_data(void *dest, const void *src, size_t count) const override {
    base->copy_data(dest, src, count);
  }
  /// Kernels that take scratch space call raw_allocate/raw_deallocate.
  at::DeleterFnPtr raw_deleter() const override { return &release; }

  at::Allocator *base = nullptr;
  std::atomic<int64_t> current{0}, peak{0};

private:
  struct Block {
    at::DataPtr inner; // frees the memory when the block is erased
    size_t bytes = 0;
  };
  static void release(void *data);
  std::mutex mutex;
  std::unordered_map<void *, Block> blocks;
};

/// Blocks from the counter may outlive the measurement: it lives forever.
CountingAllocator &counter() {
  static CountingAllocator *c = new CountingAllocator;
  return *c;
}

void CountingAllocator::release(void *data) {
  CountingAllocator &c = counter();
  Block block;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.blocks.find(data);
    if (it == c.blocks.end())
      return;
    block = std::move(it->second);
    c.blocks.erase(it);
  }
  c.current.fetch_sub(int64_t(block.bytes));
} // block.inner frees the memory here

/// Installs the counter as the CPU allocator for its lifetime, with the
/// peak reset to the current total.
struct CountScope {
  CountScope() {
    CountingAllocator &c = counter();
    c.base = c10::GetCPUAllocator();
    c.peak = c.current.load();
    c10::SetCPUAllocator(&c, /*priority=*/UINT8_MAX);
  }
  ~CountScope() { c10::SetCPUAllocator(counter().base, UINT8_MAX); }
};

/// Each section's optimizer step over its parameters, with the gradients
/// the last backward left (a parameter without one gets zeros). Throws what
/// the optimizer throws.
void timeOptimizer(ATenEvaluator &evaluator,
                   const std::vector<func::FuncOp> &sections,
                   const CalibrationOptions &options,
                   std::vector<SectionTiming> &out) {
  auto params = evaluator.trainableParams();
  if (failed(params))
    return;
  llvm::StringMap<at::Tensor> byName;
  for (auto &[name, t] : *params)
    byName[name] = t;
  for (auto [k, s] : llvm::enumerate(sections)) {
    std::vector<std::string> names;
    std::vector<at::Tensor> ps, gs;
    if (auto list = s->getAttrOfType<ArrayAttr>("varuna.params"))
      for (Attribute a : list) {
        auto name = llvm::cast<StringAttr>(a).getValue();
        auto it = byName.find(name);
        if (it == byName.end())
          continue; // frozen
        names.push_back(name.str());
        ps.push_back(it->second);
        at::Tensor g = it->second.grad();
        gs.push_back(g.defined() ? g.detach() : at::zeros_like(it->second));
      }
    if (ps.empty())
      continue;
    std::unique_ptr<rt::Optimizer> opt =
        rt::Optimizer::create(*options.optimizer, options.clipGradNorm);
    opt->setParamNames(names);
    std::vector<double> times;
    for (int it = 0; it < options.warmup + options.repeats; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      opt->step(ps, gs, 1.0);
      if (it >= options.warmup)
        times.push_back(seconds(t0));
    }
    out[k].optimizerSeconds = median(times);
  }
}

} // namespace

FailureOr<std::vector<SectionTiming>>
calibrateSections(ModuleOp job, const CalibrationOptions &options) {
  TrainOptions trainOptions;
  trainOptions.seed = options.seed;
  trainOptions.stageLibrary = options.stageLibrary;
  trainOptions.precision = options.precision;
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
      std::vector<SectionStash> stash;
      if (failed(forwardSections(evaluator, sections, inputs, m, stash)))
        return failure();
      for (auto [k, s] : llvm::enumerate(sections)) {
        std::vector<double> fwd, bwd, inp, wgt;
        // One forward of the section with autograd, from its stashed
        // arguments (leaves that require grad if floating point); the
        // results that require grad become the roots, each with a gradient
        // of ones made after the forward (neither its time nor its memory).
        std::vector<at::Tensor> leaves, roots, grads;
        auto forward = [&, s = s, k = k]() -> LogicalResult {
          leaves.clear();
          roots.clear();
          for (const at::Tensor &t : stash[k].args) {
            at::Tensor l = t.detach();
            if (l.is_floating_point())
              l.requires_grad_(true);
            leaves.push_back(l);
          }
          auto o = evaluator.runSection(s, leaves, m);
          if (failed(o))
            return failure();
          for (const at::Tensor &r : *o)
            if (r.requires_grad())
              roots.push_back(r);
          return success();
        };
        auto ones = [&] {
          grads.clear();
          for (const at::Tensor &r : roots)
            grads.push_back(at::ones_like(r));
        };
        // Iteration `measureMemory` (after the warm-up and the timed runs)
        // counts allocations instead of timing.
        int measureMemory = options.warmup + options.repeats;
        for (int it = 0; it <= measureMemory; ++it) {
          std::optional<CountScope> counting;
          int64_t base = 0;
          if (it == measureMemory) {
            counting.emplace();
            base = counter().current.load();
          }
          auto t0 = std::chrono::steady_clock::now();
          if (failed(forward()))
            return failure();
          double f = seconds(t0);
          int64_t held = counter().current.load() - base;
          ones();
          t0 = std::chrono::steady_clock::now();
          if (!roots.empty())
            torch::autograd::backward(roots, grads);
          double b = seconds(t0);
          if (it == measureMemory) {
            out[k].heldBytes.push_back(held);
            out[k].peakBytes.push_back(counter().peak.load() - base);
          } else if (it >= options.warmup) {
            fwd.push_back(f);
            bwd.push_back(b);
          }
        }
        // The zero-bubble split as the runtime runs it (rt::SplitBackward):
        // the input half, then the weight half (all of the backward when
        // nothing received needs a gradient). Together they take a little
        // longer than the whole backward: the weight half re-reads inputs
        // that have left the cache.
        for (int it = 0; it < options.repeats; ++it) {
          if (failed(forward()))
            return failure();
          ones();
          rt::SplitBackward split;
          auto t0 = std::chrono::steady_clock::now();
          split.inputGradients(roots, grads, leaves);
          inp.push_back(seconds(t0));
          t0 = std::chrono::steady_clock::now();
          split.weightGradients();
          wgt.push_back(seconds(t0));
        }
        out[k].forwardSeconds.push_back(median(fwd));
        out[k].backwardSeconds.push_back(median(bwd));
        out[k].inputSeconds.push_back(median(inp));
        out[k].weightSeconds.push_back(median(wgt));
      }
    }
    if (options.optimizer)
      timeOptimizer(evaluator, sections, options, out);
  } catch (const std::exception &e) {
    return jobError(job, "calibration: ") << e.what(), failure();
  }
  return out;
}

} // namespace varuna
