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
      const size_t n = sections.size();
      // One forward of section k with autograd, from its stashed arguments
      // (leaves that require grad if floating point); the results that
      // require grad become the roots, each with a gradient of ones made
      // after the forward (neither its time nor its memory).
      std::vector<std::vector<at::Tensor>> leaves(n), roots(n), grads(n);
      auto forward = [&](size_t k) -> LogicalResult {
        leaves[k].clear();
        roots[k].clear();
        for (const at::Tensor &t : stash[k].args) {
          at::Tensor l = t.detach();
          if (l.is_floating_point())
            l.requires_grad_(true);
          leaves[k].push_back(l);
        }
        auto o = evaluator.runSection(sections[k], leaves[k], m);
        if (failed(o))
          return failure();
        for (const at::Tensor &r : *o)
          if (r.requires_grad())
            roots[k].push_back(r);
        return success();
      };
      auto ones = [&](size_t k) {
        grads[k].clear();
        for (const at::Tensor &r : roots[k])
          grads[k].push_back(at::ones_like(r));
      };
      auto release = [&](size_t k) {
        leaves[k].clear();
        roots[k].clear();
        grads[k].clear();
      };
      // Times as a stage runs its sections: every forward in order, then
      // every backward in reverse, so that a section's weights and
      // activations have been displaced by the others' in between, as in
      // training (timed alone in a loop, each section ran 10-20% faster
      // than in a pipeline stage).
      std::vector<std::vector<double>> fwd(n), bwd(n), inp(n), wgt(n);
      for (int it = 0; it < options.warmup + options.repeats; ++it) {
        for (size_t k = 0; k < n; ++k) {
          auto t0 = std::chrono::steady_clock::now();
          if (failed(forward(k)))
            return failure();
          if (it >= options.warmup)
            fwd[k].push_back(seconds(t0));
        }
        for (size_t k = n; k-- > 0;) {
          ones(k);
          auto t0 = std::chrono::steady_clock::now();
          if (!roots[k].empty())
            torch::autograd::backward(roots[k], grads[k]);
          if (it >= options.warmup)
            bwd[k].push_back(seconds(t0));
          release(k);
        }
      }
      // Memory, one section at a time: the bytes its forward leaves alive
      // and the peak of its forward and backward.
      for (size_t k = 0; k < n; ++k) {
        CountScope counting;
        int64_t base = counter().current.load();
        if (failed(forward(k)))
          return failure();
        out[k].heldBytes.push_back(counter().current.load() - base);
        ones(k);
        if (!roots[k].empty())
          torch::autograd::backward(roots[k], grads[k]);
        out[k].peakBytes.push_back(counter().peak.load() - base);
        release(k);
      }
      // The zero-bubble split as the runtime runs it (rt::SplitBackward):
      // the input halves in reverse, then the weight halves (all of the
      // backward when nothing received needs a gradient), which zero-bubble
      // defers. Together they take a little longer than the whole backward:
      // the weight half re-reads inputs that have left the cache.
      for (int it = 0; it < options.repeats; ++it) {
        std::vector<rt::SplitBackward> split(n);
        for (size_t k = 0; k < n; ++k)
          if (failed(forward(k)))
            return failure();
        for (size_t k = n; k-- > 0;) {
          ones(k);
          auto t0 = std::chrono::steady_clock::now();
          split[k].inputGradients(roots[k], grads[k], leaves[k]);
          inp[k].push_back(seconds(t0));
        }
        for (size_t k = n; k-- > 0;) {
          auto t0 = std::chrono::steady_clock::now();
          split[k].weightGradients();
          wgt[k].push_back(seconds(t0));
          release(k);
        }
      }
      for (size_t k = 0; k < n; ++k) {
        out[k].forwardSeconds.push_back(median(fwd[k]));
        out[k].backwardSeconds.push_back(median(bwd[k]));
        out[k].inputSeconds.push_back(median(inp[k]));
        out[k].weightSeconds.push_back(median(wgt[k]));
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
