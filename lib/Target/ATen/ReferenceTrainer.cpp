//===- ReferenceTrainer.cpp - Single-process training of a job ------------===//

#include "varuna/Target/ATen/ReferenceTrainer.h"
#include "varuna/Target/ATen/InputRanges.h"
#include "varuna/runtime/LossScaler.h"
#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Target/ATen/CheckpointIO.h"
#include "varuna/Target/ATen/CompiledSections.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/runtime/Checkpoint.h"
#include "varuna/runtime/Kernels.h"
#include "varuna/runtime/Optimizer.h"
#include "varuna/runtime/Stop.h"
#include "varuna/runtime/Trace.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include <ATen/ATen.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <torch/csrc/autograd/autograd.h>

using namespace mlir;
using namespace varuna;

static std::optional<rt::DType> dtypeOf(Type t) {
  if (t.isF32())
    return rt::DType::F32;
  if (t.isF64())
    return rt::DType::F64;
  if (t.isF16())
    return rt::DType::F16;
  if (t.isSignlessInteger(64))
    return rt::DType::I64;
  if (t.isSignlessInteger(32))
    return rt::DType::I32;
  if (t.isSignlessInteger(8))
    return rt::DType::I8;
  if (t.isUnsignedInteger(8))
    return rt::DType::U8;
  if (t.isInteger(1))
    return rt::DType::Bool;
  return std::nullopt;
}

/// The first step of `options` whose micro-batches' mean cross_entropies do
/// not each count the same number of labels in every micro-batch (then
/// weighting the micro-batches by one count is not exact); -1 when every
/// step's do. nullopt when that cannot be read ahead: labels not computed
/// from the inputs alone, or more than kLabelScanRows rows to read (the
/// data repeats after N / gcd(N, M) steps of M from N samples).
static std::optional<int64_t> firstUnevenStep(ModuleOp job,
                                              const TrainOptions &options,
                                              const rt::DataSource &data) {
  std::optional<LabelCounter> counter = LabelCounter::create(job);
  int64_t M = options.globalBatch, m = options.microBatch;
  if (!counter || m <= 0 || M % m != 0)
    return std::nullopt;
  int64_t n = data.numSamples();
  int64_t period = n / std::gcd(n, M);
  int64_t steps = std::min(options.steps, period);
  if (steps * M > kLabelScanRows)
    return std::nullopt;
  try {
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<double> first;
      for (int64_t k = 0; k < M / m; ++k) {
        std::vector<double> c = counter->count(
            data.batch(s, M, k * m, m, counter->inputsRead()), m);
        if (k == 0)
          first = c;
        else if (c != first)
          return s;
      }
    }
  } catch (const std::exception &) {
    return std::nullopt; // the trainer reports a bad input itself
  }
  return -1;
}

/// The values a use's user computes from it: a cut point passes each
/// operand on as its own result; any other op, all its results.
static SmallVector<Value> valuesFrom(OpOperand &use) {
  Operation *user = use.getOwner();
  if (llvm::isa<CutPointOp>(user))
    return {user->getResult(use.getOperandNumber())};
  return SmallVector<Value>(user->getResults().begin(),
                            user->getResults().end());
}

/// Whether `g` picks examples by their position in the batch: along the
/// batch dimension of a batched input, with indices that are not
/// per-example (`h[0]`, `h[-1]`, `h[torch.tensor([0, 3])]` exported to
/// ONNX; TorchScript's select and slice there are refused at import). Each
/// micro-batch picks from its own examples.
static bool picksByPosition(GatherOp g) {
  auto in = llvm::dyn_cast<VTensorType>(g.getInput().getType());
  if (!in || !in.isBatched() || isBatched(g.getIndices()))
    return false;
  int64_t axis = g.getAxis(), rank = static_cast<int64_t>(in.getShape().size());
  return (axis < 0 ? axis + rank : axis) == in.getBatchDim();
}

/// The first gather of `graph` that picks examples by position; null when
/// there is none.
static Operation *positionalPick(func::FuncOp graph) {
  Operation *found = nullptr;
  graph.walk([&](GatherOp g) {
    if (!found && picksByPosition(g))
      found = g;
  });
  return found;
}

/// The first op of `graph` that computes something over the examples (an
/// operand has the batch dimension, no result has) which flows back into
/// per-example values -- a batch statistic by hand (`h - h.mean(0)`, a
/// mean over x[mask] scaling activations), which each micro-batch computes
/// over its own examples -- or that normalizes along the batch dimension
/// itself (a softmax or log_softmax over the examples: each value depends on
/// every example of its micro-batch). Batch norms are counted apart; null
/// when none.
static Operation *batchStatistic(func::FuncOp graph) {
  Operation *found = nullptr;
  graph.walk([&](Operation *op) {
    if (found)
      return;
    if (auto sm = llvm::dyn_cast<SoftmaxOp>(op)) {
      auto t = llvm::cast<VTensorType>(sm.getInput().getType());
      if (t.isBatched() &&
          static_cast<int64_t>(sm.getAxis()) == t.getBatchDim())
        found = op;
      return;
    }
    // Picks by position are reported apart (positionalPick).
    if (auto g = llvm::dyn_cast<GatherOp>(op); g && picksByPosition(g))
      return;
    if (llvm::isa<BatchNormOp>(op) || op->getNumResults() == 0 ||
        !llvm::any_of(op->getOperands(), isBatched) ||
        llvm::any_of(op->getResults(), isBatched))
      return;
    SmallVector<Value> work(op->getResults().begin(), op->getResults().end());
    llvm::DenseSet<Value> seen;
    while (!work.empty() && !found) {
      Value v = work.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        for (Value r : valuesFrom(use)) {
          if (isBatched(r)) {
            found = op;
            break;
          }
          if (seen.insert(r).second)
            work.push_back(r);
        }
        if (found)
          break;
      }
    }
  });
  return found;
}

/// The first `varuna.arange` over the examples (its one dimension B or B*k:
/// `torch.arange(x.shape[0])`) whose values are used as data, not only to
/// index the examples -- class labels, an embedding's ids, a weight. Each
/// micro-batch numbers its own examples from 0, so as data it differs from
/// one full-batch step; as an index into the batch dimension of a batched
/// value (`logits[torch.arange(B), y]`: a gather along that dimension,
/// after any index arithmetic) it selects the same rows either way. The
/// values are followed through every op; a use as a gather's or
/// gather_elements' indices along the batched dimension of a batched input
/// ends the path, and so does the first coordinate of scatter_nd index
/// tuples into a batched data whose batch is dimension 0 (a concat along the
/// tuples' axis, the arange first); reaching the graph's results or any
/// other index use is data. Null when there is none.
static Operation *batchNumbering(func::FuncOp graph) {
  Operation *found = nullptr;
  graph.walk([&](ArangeOp arange) {
    if (found || !isBatched(arange.getResult()))
      return;
    auto indexesExamples = [](Value input, int64_t axis) {
      auto t = llvm::dyn_cast<VTensorType>(input.getType());
      if (!t || !t.isBatched())
        return false;
      int64_t rank = static_cast<int64_t>(t.getShape().size());
      return (axis < 0 ? axis + rank : axis) == t.getBatchDim();
    };
    SmallVector<Value> work{arange.getResult()};
    llvm::DenseSet<Value> seen{arange.getResult()};
    while (!work.empty() && !found) {
      Value v = work.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        // As a gather's (or gather_elements') indices: whether they index
        // the examples.
        auto asIndices = [&](auto g) -> std::optional<bool> {
          if (!g || use.get() != g.getIndices() || v == g.getInput())
            return std::nullopt;
          return indexesExamples(g.getInput(), g.getAxis());
        };
        std::optional<bool> index = asIndices(llvm::dyn_cast<GatherOp>(user));
        if (!index)
          index = asIndices(llvm::dyn_cast<GatherElementsOp>(user));
        if (index && *index)
          continue;
        if (index) {
          found = arange;
          break;
        }
        // As the first coordinate of scatter_nd index tuples (a concat
        // along their last axis, this value first): it names the row of a
        // batched data -- HF's shift_tokens_right, `shifted[:, 1:] = ...`
        // exported to ONNX.
        if (auto cat = llvm::dyn_cast<ConcatOp>(user)) {
          auto in = llvm::dyn_cast<VTensorType>(v.getType());
          auto out = llvm::dyn_cast<VTensorType>(cat.getType());
          int64_t rank = out ? static_cast<int64_t>(out.getShape().size()) : 0;
          int64_t axis = cat.getAxis() < 0 ? cat.getAxis() + rank : cat.getAxis();
          bool firstCoordinate =
              in && rank > 0 && axis == rank - 1 &&
              use.getOperandNumber() == 0 && in.getDim(rank - 1).isStatic() &&
              in.getDim(rank - 1).constant == 1;
          auto rowOfData = [&](OpOperand &u) {
            auto s = llvm::dyn_cast<ScatterNDOp>(u.getOwner());
            return s && u.get() == s.getIndices() && u.get() != s.getData() &&
                   u.get() != s.getUpdates() && indexesExamples(s.getData(), 0);
          };
          if (firstCoordinate && !cat.getResult().use_empty() &&
              llvm::all_of(cat.getResult().getUses(), rowOfData))
            continue;
        }
        if (user->hasTrait<OpTrait::IsTerminator>()) {
          found = arange;
          break;
        }
        for (Value r : valuesFrom(use))
          if (seen.insert(r).second)
            work.push_back(r);
      }
    }
  });
  return found;
}

/// Whether a batch norm of `scope` normalizes over the examples (not BiT's
/// weight standardization, a batch norm of the weights); the first one.
static BatchNormOp batchNormOverExamples(ArrayRef<func::FuncOp> scope,
                                         int *count = nullptr) {
  BatchNormOp first;
  for (func::FuncOp f : scope)
    f.walk([&](BatchNormOp bn) {
      if (!llvm::cast<VTensorType>(bn.getInput().getType()).isBatched())
        return;
      first = first ? first : bn;
      if (count)
        ++*count;
    });
  return first;
}

/// The job's sections when it has them (the graph may hold the same ops
/// again), else its graph.
static SmallVector<func::FuncOp> sectionsOrGraph(ModuleOp job) {
  FailureOr<SmallVector<func::FuncOp>> sections = getSections(job);
  if (succeeded(sections) && !sections->empty())
    return *sections;
  SmallVector<func::FuncOp> scope;
  if (func::FuncOp graph = findTrainingGraph(job))
    scope.push_back(graph);
  return scope;
}

RunSettings varuna::runSettingsFor(ModuleOp job, const TrainOptions &options,
                                   const TrainingConfig &config) {
  RunSettings run;
  run.globalBatch = options.globalBatch;
  run.seed = options.seed;
  run.microBatch = options.microBatch;
  func::FuncOp graph = findTrainingGraph(job);
  run.microBatchMatters = bool(batchNormOverExamples(sectionsOrGraph(job))) ||
                          (graph && batchStatistic(graph));
  job.walk([&](Operation *op) {
    if (auto d = dyn_cast<DropoutOp>(op))
      run.randomOps |= d.getRatio().convertToDouble() > 0;
    else if (isa<RandomOp>(op))
      run.randomOps = true;
  });
  std::string text;
  llvm::raw_string_ostream(text) << config.toJSON();
  run.trainingConfig = text;
  return run;
}

void varuna::warnMicroBatchSemantics(ModuleOp job, const TrainOptions &options,
                                     const rt::DataSource *data) {
  if (options.microBatch >= options.globalBatch)
    return;
  func::FuncOp graph = findTrainingGraph(job);
  int count = 0;
  BatchNormOp first = batchNormOverExamples(sectionsOrGraph(job), &count);
  // The graph's means over the examples (the loss's terms): mean
  // cross_entropies and reduce means of batched values. Weighted by one
  // count per micro-batch (LossAggregation::Mean), they are exact only when
  // every count is proportional to the micro-batch -- not when a
  // cross_entropy counts only the labels not equal to its ignore_index.
  SmallVector<Operation *> means;
  bool ignores = false;
  if (graph)
    graph.walk([&](Operation *op) {
      if (auto ce = llvm::dyn_cast<CrossEntropyOp>(op)) {
        if (ce.getReduction() == LossReduction::mean) {
          means.push_back(op);
          ignores |= ce.getIgnoreIndex().has_value();
        }
      } else if (auto r = llvm::dyn_cast<ReduceOp>(op)) {
        // Over the examples: the batch dimension is reduced away.
        auto in = llvm::dyn_cast<VTensorType>(r.getInput().getType());
        auto out = llvm::dyn_cast<VTensorType>(r.getType());
        if (r.getKind() == ReduceKind::mean && in && in.isBatched() && out &&
            !out.isBatched())
          means.push_back(op);
      }
    });
  // A pick of examples by position says why the loss splits inexactly.
  Operation *pick = graph ? positionalPick(graph) : nullptr;
  if (pick)
    emitWarning(pick->getLoc())
        << "'varuna.gather' picks examples by their position in the batch "
           "(x[0], x[-1] or x[torch.tensor([...])] along the batch "
           "dimension): each micro-batch of "
        << options.microBatch
        << " picks from its own examples, so the loss and gradients differ "
           "from one full-batch step of "
        << options.globalBatch << "; --micro-batch " << options.globalBatch
        << " with one replica trains exactly";
  // An inexact loss gets the warning below, which says more.
  Value inexact = pick ? Value() : lossSplitsInexactly(job);
  if (means.size() > 1 && ignores && !inexact &&
      lossAggregation(job) == LossAggregation::Mean) {
    std::optional<int64_t> uneven =
        data ? firstUnevenStep(job, options, *data) : std::nullopt;
    if (uneven != -1) {
      InFlightDiagnostic w = emitWarning(means[1]->getLoc());
      w << "the loss adds " << means.size()
        << " means over the examples, some cross_entropies counting only "
           "the labels not equal to their ignore_index: each micro-batch of "
        << options.microBatch
        << " is weighted by the count of the last cross_entropy it runs, "
           "which is exact only when they all count the same labels";
      if (uneven)
        w << " (at step " << *uneven
          << " the micro-batches count different numbers of labels)";
    }
  }
  if (Value loss = inexact) {
    Location at = loss.getDefiningOp() ? loss.getDefiningOp()->getLoc()
                                       : graph.getLoc();
    emitWarning(at)
        << "the loss combines reductions over the examples in a way "
           "micro-batches cannot add up to (e.g. a sum over the examples "
           "added to a mean, or a function of a mean): each micro-batch of "
        << options.microBatch
        << " is weighted as a mean over its examples, so the loss and "
           "gradients differ from one full-batch step of "
        << options.globalBatch << "; --micro-batch " << options.globalBatch
        << " with one replica trains exactly";
  }
  if (Operation *stat = graph ? batchStatistic(graph) : nullptr)
    emitWarning(stat->getLoc())
        << "'" << stat->getName().getStringRef()
        << "' computes a statistic over the examples that flows back into "
           "per-example values (like a batch norm): each micro-batch of "
        << options.microBatch
        << " computes it over its own examples, so the loss and gradients "
           "differ from one full-batch step of "
        << options.globalBatch << "; --micro-batch " << options.globalBatch
        << " with one replica trains exactly";
  if (Operation *numbering = graph ? batchNumbering(graph) : nullptr)
    emitWarning(numbering->getLoc())
        << "'varuna.arange' numbers the examples (torch.arange over the "
           "batch size) and its values are used as data, not only to index "
           "the examples: each micro-batch of "
        << options.microBatch << " numbers its own examples from 0 to "
        << options.microBatch - 1
        << ", so the loss and gradients differ from one full-batch step of "
        << options.globalBatch << "; --micro-batch " << options.globalBatch
        << " with one replica trains exactly";
  if (!first)
    return;
  emitWarning(first.getLoc())
      << "batch_norm (" << count << " in the model) normalizes each "
      << "micro-batch of " << options.microBatch
      << " examples with its own statistics, not the step's "
      << options.globalBatch
      << ": the loss and gradients differ from one full-batch PyTorch step, "
         "as in every micro-batched pipeline; the running statistics are "
         "updated once per micro-batch (recomputation does not update them "
         "again) and averaged over the replicas after each step. "
         "--micro-batch "
      << options.globalBatch
      << " with one replica normalizes the whole batch";
}

InFlightDiagnostic varuna::jobError(ModuleOp job, const Twine &msg) {
  StringRef file = "job";
  if (auto loc = job.getLoc().dyn_cast<FileLineColLoc>())
    file = loc.getFilename().getValue();
  return emitError(FileLineColLoc::get(job.getContext(), file, 0, 0), msg);
}

FailureOr<std::unique_ptr<ATenEvaluator>>
varuna::createTrainingEvaluator(ModuleOp job, const TrainOptions &options,
                                double &count) {
  ATenEvalOptions evalOptions;
  evalOptions.seed = options.seed;
  // A mean cross_entropy reports what it averages over; a loss that sums
  // over the examples weighs 1 per micro-batch whatever it counts.
  if (lossAggregation(job) == LossAggregation::Mean)
    evalOptions.onLossCount = [&count](double n) { count = n; };
  if (options.precision == Precision::BF16)
    evalOptions.autocast = at::kBFloat16;
  else if (options.precision == Precision::FP16)
    evalOptions.autocast = at::kHalf;
  if (!options.stageLibrary.empty()) {
    auto compiled = CompiledSections::load(job, options.stageLibrary);
    if (failed(compiled))
      return failure();
    evalOptions.compiled = *compiled;
  }
  auto evaluator = ATenEvaluator::create(job, evalOptions);
  if (failed(evaluator))
    return failure();
  if (!evaluator->getLossIndex())
    return jobError(job, "the graph has no loss result"), failure();
  return std::make_unique<ATenEvaluator>(std::move(*evaluator));
}

FailureOr<TrainerOutputs>
varuna::createTrainerOutputs(ModuleOp job, const TrainingConfig &config,
                             const TrainOptions &options,
                             const std::vector<std::string> &names,
                             bool metrics) {
  TrainerOutputs out;
  try {
    out.optimizer = rt::Optimizer::create(config.optimizer, config.clipGradNorm);
    out.optimizer->setParamNames(names);
  } catch (const std::exception &e) {
    return jobError(job, "optimizer: ") << e.what(), failure();
  }
  if (metrics && !options.metricsPath.empty()) {
    std::string error;
    out.metrics =
        MetricsWriter::open(options.metricsPath, options.resume, error);
    if (!out.metrics)
      return jobError(job, "cannot write metrics to '")
                 << options.metricsPath << "': " << error,
             failure();
  }
  return out;
}

std::unique_ptr<MetricsWriter>
varuna::MetricsWriter::open(const std::string &path, bool resume,
                            std::string &error) {
  auto w = std::make_unique<MetricsWriter>();
  w->path = path;
  w->resume = resume;
  // Appending changes nothing yet; it only proves the file can be written.
  w->os.open(path, resume ? std::ios::app : std::ios::trunc);
  if (!w->os) {
    error = std::strerror(errno);
    return nullptr;
  }
  return w;
}

void varuna::MetricsWriter::write(const StepMetrics &m) {
  // (A resumed run's validation alone replaces no line: it is appended.)
  if (resume && !started && !m.evalOnly) {
    os.close();
    std::vector<std::string> earlier;
    {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) {
        llvm::Expected<llvm::json::Value> v = llvm::json::parse(line);
        if (!v) {
          llvm::consumeError(v.takeError());
          continue;
        }
        const llvm::json::Object *o = v->getAsObject();
        std::optional<int64_t> step = o ? o->getInteger("step") : std::nullopt;
        if (step && *step < m.step)
          earlier.push_back(line);
      }
    }
    os.open(path, std::ios::trunc);
    for (const std::string &line : earlier)
      os << line << "\n";
  }
  started = true;
  os << metricsJsonLine(m) << std::flush;
  // A full disk or a file gone read-only: said once, the run goes on (its
  // steps print their lines anyway); before, the file just stopped.
  if (!os && !failed) {
    failed = true;
    int err = errno;
    llvm::errs() << "varuna-run: warning: cannot write the metrics file '"
                 << path << "' at step " << m.step << ": "
                 << (err ? std::strerror(err) : "write error")
                 << "; its later steps are missing\n";
  }
}

std::string varuna::metricsJsonLine(const StepMetrics &m) {
  std::string scaling;
  if (m.lossScale) {
    // %.17g: the exact double, as checkpoints write it (formatv's default
    // printed 1e36 as 1000000000000000042420637374017).
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.17g", *m.lossScale);
    scaling = llvm::formatv(", \"loss_scale\": {0}, \"skipped\": {1}",
                            scale, m.skipped ? "true" : "false")
                  .str();
  }
  // JSON has no infinities or NaN: such a loss (training or validation) is
  // null, and what it was ("inf", "-inf", "nan") is named beside it, as
  // <field>_nonfinite (a validation loss was written as nan: not JSON).
  auto lossJson = [](double v, const char *field) {
    return std::isfinite(v)
               ? llvm::formatv("{0:e9}", v).str()
               : llvm::formatv("null, \"{0}_nonfinite\": \"{1}\"", field,
                               std::isnan(v) ? "nan"
                               : v > 0       ? "inf"
                                             : "-inf")
                     .str();
  };
  std::string loss = lossJson(m.loss, "loss");
  if (m.deviations >= 0)
    scaling += llvm::formatv(", \"deviations\": {0}", m.deviations).str();
  if (m.lr)
    scaling += llvm::formatv(", \"lr\": {0:e9}", *m.lr).str();
  if (m.evalOnly)
    return llvm::formatv("{{\"step\": {0}, \"eval_only\": true, "
                         "\"eval_loss\": {1}, \"eval_batches\": {2}}\n",
                         m.step, lossJson(m.evalLoss.value_or(0.0), "eval_loss"),
                         m.evalBatches)
        .str();
  if (m.evalLoss)
    scaling += llvm::formatv(", \"eval_loss\": {0}, \"eval_batches\": {1}",
                             lossJson(*m.evalLoss, "eval_loss"), m.evalBatches)
                   .str();
  return llvm::formatv("{{\"step\": {0}, \"loss\": {1}, "
                       "\"examples_per_s\": {2:f3}, \"step_seconds\": "
                       "{3:f6}{4}}\n",
                       m.step, loss, m.examplesPerSecond, m.seconds, scaling)
      .str();
}

FailureOr<std::vector<rt::InputSpec>> varuna::graphInputSpecs(ModuleOp job) {
  auto evaluator = ATenEvaluator::create(job);
  if (failed(evaluator))
    return failure();
  func::FuncOp graph = evaluator->getGraph();
  std::vector<std::string> names = evaluator->getInputNames();
  std::vector<rt::InputSpec> specs;
  for (auto [arg, name] : llvm::zip(graph.getArguments(), names)) {
    auto t = arg.getType().cast<VTensorType>();
    if (t.getBatchDim() != 0 || t.getBatchMultiple() != 1)
      return graph.emitError("input '")
                 << name << "' must have the batch as its first dimension",
             failure();
    auto dt = dtypeOf(t.getElementType());
    if (!dt) {
      InFlightDiagnostic d = jobError(job, "input '");
      d << name << "' has an unsupported element type "
        << t.getElementType();
      if (t.getElementType().isBF16())
        d << ": .npy data has no bfloat16 -- give forward a float32 input "
             "and cast it inside (x.to(torch.bfloat16)), or train in fp32 "
             "with \"precision\": \"bf16\" in the training configuration";
      return failure();
    }
    rt::InputSpec spec;
    spec.name = name;
    spec.dtype = *dt;
    spec.sampleShape.assign(t.getShape().begin() + 1, t.getShape().end());
    specs.push_back(spec);
  }
  return specs;
}

/// The validation pass itself (validate without the due check).
static LogicalResult
runValidation(const TrainOptions &options, StepMetrics &m,
              llvm::function_ref<FailureOr<double>(int64_t, bool &)> batchLoss) {
  int64_t n = options.evalBatchCount();
  double sum = 0;
  for (int64_t b = 0; b < n; ++b) {
    bool stop = false;
    FailureOr<double> loss = batchLoss(b, stop);
    if (failed(loss))
      return failure();
    if (stop) {
      m.stopRequested = true;
      m.evalAbandonedAfter = b;
      return success();
    }
    sum += *loss;
  }
  m.evalLoss = sum / double(n);
  m.evalBatches = n;
  return success();
}

LogicalResult varuna::validate(
    const TrainOptions &options, int64_t done, StepMetrics &m,
    llvm::function_ref<FailureOr<double>(int64_t, bool &)> batchLoss) {
  if (!options.evalDue(done))
    return success();
  return runValidation(options, m, batchLoss);
}

LogicalResult varuna::validateUntrained(
    const TrainOptions &options, int64_t done,
    llvm::function_ref<FailureOr<double>(int64_t, bool &)> batchLoss,
    MetricsWriter *metrics,
    const std::function<void(const StepMetrics &)> &onStep) {
  if (!options.evalData || done < options.steps)
    return success();
  StepMetrics m;
  m.step = done - 1;
  m.evalOnly = true;
  if (failed(runValidation(options, m, batchLoss)))
    return failure();
  if (metrics)
    metrics->write(m);
  onStep(m);
  return success();
}

/// Writes checkpoint `step` (steps completed): `params` (parameters and
/// buffers), their optimizer state, the `frozen` parameters; `bytes` gets
/// the tensors' bytes written. Returns "" or an error.
static std::string
saveCheckpoint(ATenEvaluator &evaluator, const std::string &dir, int64_t step,
               const NamedTensors &params, const NamedTensors &frozen,
               const rt::Optimizer &optimizer, const rt::LossScaler *scaler,
               const RunSettings &run, double &bytes) {
  std::vector<func::FuncOp> sections = evaluator.getSections();
  std::map<std::string, int> home = checkpointHomes(sections);
  rt::OptimizerState state = optimizer.state();
  std::vector<std::vector<rt::TensorBytes>> files(
      std::max<size_t>(1, sections.size()));
  for (size_t k = 0; k < files.size(); ++k) {
    files[k] = sectionTensors(k, home, params, state, frozen);
    for (const rt::TensorBytes &t : files[k])
      bytes += double(t.byteSize());
  }
  return rt::writeCheckpoint(
      dir, step, files,
      trainingState(step, optimizer, evaluator.getGenerator(), scaler, run));
}

namespace {
/// The step's label counts (Normalized losses; see LossNormalization.h):
/// what the mean cross_entropies of sections [first, end) divide by.
struct StepLabels {
  const LabelCounter *counter = nullptr; ///< null: not Normalized
  std::vector<double> counts;
  int sections = 0;
  std::optional<rt::LossDenominators> scope(int first, int end) const {
    if (!counter)
      return std::nullopt;
    return std::optional<rt::LossDenominators>(
        std::in_place, counter->forSections(counts, first, end));
  }
};
} // namespace

/// Forward and backward of the whole graph; returns the loss. `count` (set
/// by the evaluator's observer during the forward) weights the backward.
static FailureOr<double> wholeGraphStep(ATenEvaluator &evaluator,
                                        ArrayRef<at::Tensor> inputs,
                                        unsigned lossIndex, double &count,
                                        bool compiled, double lossScale,
                                        const StepLabels &labels) {
  // Generated code exists per section: chain the sections (with autograd,
  // so one backward covers them all, as one stage holding them would).
  auto denominators = labels.scope(0, labels.sections);
  auto results = compiled ? evaluator.runSections(inputs) : evaluator.run(inputs);
  if (failed(results))
    return failure();
  at::Tensor loss = (*results)[lossIndex];
  torch::autograd::backward({loss * (count * lossScale)});
  return loss.item<double>();
}

/// One micro-batch through the sections with every boundary activated.
static FailureOr<double> stitchedStep(ATenEvaluator &evaluator,
                                      ArrayRef<at::Tensor> inputs,
                                      unsigned lossIndex, double &count,
                                      double lossScale,
                                      const StepLabels &labels) {
  std::vector<func::FuncOp> sections = evaluator.getSections();
  if (sections.empty())
    return evaluator.getGraph().emitError(
               "no sections: compile the job with varuna-compile"),
           failure();
  int64_t batch = inputs.front().size(0);
  llvm::StringMap<at::Tensor> byName;
  for (auto [name, t] : llvm::zip(evaluator.getInputNames(), inputs))
    byName[name] = t;

  // Forward without autograd: stash each section's arguments and RNG state.
  std::vector<SectionStash> stash;
  FailureOr<std::vector<at::Tensor>> sent = failure();
  {
    auto denominators = labels.scope(0, sections.size());
    sent = forwardSections(evaluator, sections, byName, batch, stash);
  }
  if (failed(sent))
    return failure();
  double loss = (*sent)[lossIndex].item<double>();

  // Backward from the last section: recompute, then hand the gradients of the
  // received activations to the previous section.
  // Each recompute replays its forward's random stream; the stream is put
  // back after, so the next micro-batch's forward goes on where this one's
  // ended (as a pipeline stage does).
  at::Tensor streamAt = evaluator.getGenerator().get_state();
  std::vector<at::Tensor> outGrads;
  for (int64_t k = sections.size() - 1; k >= 0; --k) {
    func::FuncOp s = sections[k];
    evaluator.getGenerator().set_state(stash[k].rng);
    std::vector<at::Tensor> args = stash[k].args;
    std::vector<int64_t> recvAt(args.size(), -1);
    for (BlockArgument a : s.getArguments())
      if (auto r = s.getArgAttrOfType<IntegerAttr>(a.getArgNumber(),
                                                   "varuna.recv")) {
        at::Tensor leaf = args[a.getArgNumber()].detach();
        if (leaf.is_floating_point())
          leaf.requires_grad_(true);
        args[a.getArgNumber()] = leaf;
        recvAt[a.getArgNumber()] = r.getInt();
      }
    FailureOr<std::vector<at::Tensor>> out = failure();
    {
      rt::KeepRunningStats recomputing; // the forward above updated them
      auto denominators = labels.scope(k, k + 1);
      out = evaluator.runSection(s, args, batch);
    }
    if (failed(out))
      return failure();
    std::vector<at::Tensor> roots, grads;
    if (k == static_cast<int64_t>(sections.size()) - 1) {
      roots.push_back((*out)[lossIndex] * (count * lossScale));
      grads.push_back(at::Tensor());
    } else {
      for (auto [o, g] : llvm::zip(*out, outGrads))
        if (g.defined() && o.requires_grad()) {
          roots.push_back(o);
          grads.push_back(g);
        }
    }
    if (!roots.empty()) {
      bool allDefined = llvm::all_of(grads, [](const at::Tensor &g) {
        return g.defined();
      });
      if (allDefined)
        torch::autograd::backward(roots, grads);
      else
        torch::autograd::backward(roots);
    }
    size_t numRecv = 0;
    for (int64_t r : recvAt)
      numRecv = std::max<size_t>(numRecv, r + 1);
    outGrads.assign(numRecv, at::Tensor());
    for (auto [i, r] : llvm::enumerate(recvAt))
      if (r >= 0 && args[i].requires_grad())
        outGrads[r] = args[i].grad();
  }
  evaluator.getGenerator().set_state(streamAt);
  return loss;
}

LogicalResult varuna::trainReference(
    ModuleOp job, const TrainingConfig &config, const rt::DataSource &data,
    const TrainOptions &options,
    const std::function<void(const StepMetrics &)> &onStep) {
  if (options.microBatch < 1 || options.globalBatch < 1 ||
      options.globalBatch % options.microBatch)
    return jobError(job, "the global batch (")
           << options.globalBatch << ") must be a positive multiple of the "
           << "micro-batch (" << options.microBatch << ")";

  // Count what the loss averages over, per micro-batch.
  double count = 0;
  auto created = createTrainingEvaluator(job, options, count);
  if (failed(created))
    return failure();
  ATenEvaluator *evaluator = created->get();
  auto lossIndex = evaluator->getLossIndex();
  // A resume overwrites what the checkpoint holds: the model file need not
  // be there for it (finishDeferredParams).
  evaluator->deferUnreadableParams(options.resume);
  auto params = evaluator->trainableParams();
  if (failed(params))
    return failure();
  auto buffers = evaluator->stateBuffers();
  if (failed(buffers))
    return failure();
  auto unread = evaluator->unreadParams(); // kept for checkpoints, dumps
  if (failed(unread))
    return failure();
  auto constants = evaluator->constantParams(); // kept for checkpoints
  if (failed(constants))
    return failure();
  warnMicroBatchSemantics(job, options, &data);

  std::vector<at::Tensor> leaves;
  std::vector<std::string> names;
  for (auto &[n, t] : *params) {
    names.push_back(n);
    leaves.push_back(t);
  }
  auto outputs = createTrainerOutputs(job, config, options, names, true);
  if (failed(outputs))
    return failure();
  std::unique_ptr<rt::Optimizer> optimizer = std::move(outputs->optimizer);
  std::unique_ptr<MetricsWriter> metrics = std::move(outputs->metrics);

  std::optional<rt::LossScaler> scaler;
  if (config.needsOverflowCheck())
    scaler.emplace(config.lossScale);
  // What checkpoints record of this run and a resume compares: once.
  const RunSettings run = runSettingsFor(job, options, config);
  int64_t first = 0;
  if (options.resume) {
    if (options.checkpointDir.empty())
      return jobError(job, "--resume needs --checkpoint-dir");
    std::set<std::string> restored;
    std::optional<rt::CheckpointInfo> ckpt;
    try {
      ckpt = latestCheckpoint(options.checkpointDir, llvm::errs());
      if (ckpt) {
        for (const std::string &w :
             resumeWarnings(*ckpt, run, *optimizer))
          llvm::errs() << "varuna-run: warning: " << w << "\n";
        NamedTensors kept = *buffers; // copies share the tensors
        kept.insert(kept.end(), unread->begin(), unread->end());
        kept.insert(kept.end(), constants->begin(), constants->end());
        first = restoreFrom(*ckpt, checkpointHomes(evaluator->getSections()),
                            *params, kept, *optimizer,
                            evaluator->getGenerator(),
                            /*strict=*/true, scaler ? &*scaler : nullptr,
                            &restored);
        llvm::errs() << "varuna-run: resumed from " << ckpt->path << " (step "
                     << first << ")\n";
        tidyAfterResume(llvm::errs(), options.checkpointDir, first,
                        options.checkpointKeep);
        if (first >= options.steps && !options.evalData) // else: validates
          llvm::errs() << "varuna-run: warning: "
                       << nothingToTrain(first, options.steps) << "\n";
      }
    } catch (const std::exception &e) {
      return jobError(job, "cannot resume: ") << e.what();
    }
    std::string note;
    if (auto error = finishDeferredParams(*evaluator, restored,
                                          ckpt ? &*ckpt : nullptr, note))
      return jobError(job, *error);
    if (!note.empty())
      llvm::errs() << "varuna-run: " << note << "\n";
  }
  int64_t micro = options.globalBatch / options.microBatch;
  const LossAggregation aggregation = lossAggregation(job);
  const bool additive = lossesAddUp(aggregation);
  std::optional<LabelCounter> counter;
  if (aggregation == LossAggregation::Normalized)
    counter = LabelCounter::create(
        job, [&](ParamOp p) { return evaluator->loadParam(p); });
  StepLabels labels;
  labels.counter = counter ? &*counter : nullptr;
  std::optional<LossDivisor> divisor = LossDivisor::create(
      job, [&](ParamOp p) { return evaluator->loadParam(p); });
  std::vector<std::string> inputNames = evaluator->getInputNames();
  std::vector<IndexRange> indexRanges = findIndexRanges(job);
  labels.sections = static_cast<int>(evaluator->getSections().size());
  // Micro-batch j of `step`: its inputs, and in `count` what its loss is
  // weighted by before the forward (the evaluator replaces it for losses
  // whose count it finds: mean cross_entropies).
  auto microBatchInputs = [&](const rt::DataSource &src, int64_t step,
                              int64_t j, std::vector<at::Tensor> &inputs) {
    for (const rt::BatchTensor &b :
         src.batch(step, options.globalBatch, j * options.microBatch,
                   options.microBatch))
      inputs.push_back(tensorFromNpy(b.array));
    // Losses that add up: each as it is (its examples' share of the
    // step's loss, as PyTorch's loss / Nm accumulation has it).
    count = additive ? 1.0 : double(options.microBatch);
    if (divisor) { // a sum over the micro-batch / its own count
      llvm::StringMap<at::Tensor> byName;
      for (auto [name, t] : llvm::zip(inputNames, inputs))
        byName[name] = t;
      count = divisor->evaluate(byName, options.microBatch);
      if (count == 0)
        return jobError(job, "step ")
                   << step << ", micro-batch " << j << ": "
                   << zeroDivisorMessage(options.microBatch),
               failure();
    }
    return success();
  };
  // What the step's weighted losses (their counts adding up to `counted`)
  // are divided by.
  auto stepTotal = [&](const rt::DataSource &src, int64_t step,
                       double counted) {
    if (additive)
      return 1.0; // the micro-batches' losses add up
    if (divisor) // the sums over the step's divisor
      return divisor->evaluate(src.batch(step, options.globalBatch, 0,
                                         options.globalBatch,
                                         divisor->inputsRead()),
                               options.globalBatch);
    return counted;
  };
  // Validation batch b: forward only, in evaluation mode; its loss.
  auto validationLoss = [&](int64_t b, bool &stop) -> FailureOr<double> {
    stop = rt::stopSignal() != 0;
    const rt::DataSource &src = *options.evalData;
    evaluator->seedStep(-1 - b, 0, 0); // random ops: streams of their own
    // Its index inputs were checked before the first step.
    if (counter)
      labels.counts = counter->count(
          src.batch(b, options.globalBatch, 0, options.globalBatch,
                    counter->inputsRead()),
          options.globalBatch);
    at::NoGradGuard noGrad;
    rt::Evaluating evaluating;
    double lossSum = 0, counted = 0;
    for (int64_t j = 0; j < micro; ++j) {
      std::vector<at::Tensor> inputs;
      if (failed(microBatchInputs(src, b, j, inputs)))
        return failure();
      auto denominators = labels.scope(0, labels.sections);
      auto results = options.stageLibrary.empty()
                         ? evaluator->run(inputs)
                         : evaluator->runSections(inputs);
      if (failed(results))
        return failure();
      lossSum += (*results)[*lossIndex].item<double>() * count;
      counted += count;
    }
    return lossSum / stepTotal(src, b, counted);
  };
  if (options.evalData)
    if (auto bad = checkValidationInputs(indexRanges, *options.evalData,
                                         options.evalBatchCount(),
                                         options.globalBatch))
      return jobError(job, *bad);
  rt::Trace trace(!options.tracePath.empty());
  trace.keepSteps(options.traceFirstStep, options.traceLastStep);
  if (failed(validateUntrained(options, first, validationLoss, metrics.get(),
                               onStep)))
    return failure();
  bool stopped = false; // on request, before the last step
  for (int64_t step = first; step < options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    trace.setStep(step);
    evaluator->seedStep(step, 0, 0); // as the pipeline's one rank
    for (at::Tensor &p : leaves)
      p.mutable_grad() = at::Tensor();
    double lossSum = 0, total = 0;
    // The backward's seed: the loss scale, and for weighted losses 1 / M
    // (a micro-batch's count-weighted loss over the step's examples), so
    // that each example's gradient enters the fp16 backward at scale / M,
    // as in PyTorch's scaler.scale(loss * m / M).backward() -- the overflow
    // decisions are PyTorch's and do not depend on the micro-batch count.
    // Before, a micro-batch's backward carried the whole scale (Nm times
    // PyTorch's) and skipped steps PyTorch does not.
    double scale = scaler ? scaler->scale() : 1.0;
    double seed =
        scale * (additive ? 1.0 : 1.0 / double(options.globalBatch));
    try {
      // The whole step's index inputs and labels, read once.
      std::vector<rt::BatchTensor> whole =
          readStepInputs(indexRanges, data, step, options.globalBatch,
                         counter ? &counter->inputsRead() : nullptr);
      if (auto bad = checkStepInputs(indexRanges, whole, data, step,
                                     options.globalBatch))
        return jobError(job, "step ") << step << ": " << *bad;
      if (counter)
        labels.counts = counter->count(whole, options.globalBatch);
      for (int64_t j = 0; j < micro; ++j) {
        std::vector<at::Tensor> inputs;
        if (failed(microBatchInputs(data, step, j, inputs)))
          return failure();
        auto span = trace.scope("F+B " + std::to_string(j), rt::Trace::Compute);
        FailureOr<double> loss =
            options.sections
                ? stitchedStep(*evaluator, inputs, *lossIndex, count, seed,
                               labels)
                : wholeGraphStep(*evaluator, inputs, *lossIndex, count,
                                 !options.stageLibrary.empty(), seed, labels);
        if (failed(loss))
          return failure();
        lossSum += *loss * count;
        total += count;
      }
      total = stepTotal(data, step, total);
      std::vector<at::Tensor> grads;
      for (at::Tensor &p : leaves) {
        at::Tensor g = p.grad();
        if (!g.defined())
          g = at::zeros_like(p);
        grads.push_back(g.div_(total * seed));
      }
      bool overflow = scaler && !rt::LossScaler::allFinite(grads);
      std::optional<double> lr; // the step's, with an lr_schedule
      if (config.lrSchedule.active())
        lr = config.lrSchedule.lrAt(step, config.optimizer.lr);
      std::optional<double> norm;
      if (!overflow) {
        if (config.needsGlobalGradNorm())
          norm = std::sqrt(rt::sumOfSquares(grads));
        if (config.clipGradNorm &&
            config.optimizer.type != OptimizerKind::LAMB)
          rt::clipGradNorm(grads, *config.clipGradNorm, norm);
        auto span = trace.scope("optimizer", rt::Trace::Compute);
        if (lr)
          optimizer->setLearningRate(*lr);
        optimizer->step(leaves, grads, norm);
      }
      StepMetrics m;
      m.lr = lr;
      if (scaler) {
        m.lossScale = scale;
        m.skipped = overflow;
        scaler->update(overflow);
      }
      m.step = step;
      m.loss = lossSum / total;
      m.seconds = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      m.examplesPerSecond = options.globalBatch / m.seconds;
      m.gradNorm = norm.value_or(0.0);
      m.stopRequested = rt::stopSignal() != 0;
      if (m.stopRequested)
        m.stopCause = rt::signalName(rt::stopSignal());
      if (failed(validate(options, step + 1, m, validationLoss)))
        return failure();
      if (m.stopRequested && m.stopCause.empty()) // asked while validating
        m.stopCause = rt::signalName(rt::stopSignal());
      if (metrics)
        metrics->write(m);
      onStep(m);
      stopped = m.stopRequested && step + 1 < options.steps;
      if (options.checkpointDue(step + 1, stopped)) {
        NamedTensors state = *params;
        state.insert(state.end(), buffers->begin(), buffers->end());
        state.insert(state.end(), unread->begin(), unread->end());
        auto start = std::chrono::steady_clock::now();
        double bytes = 0;
        std::string err = saveCheckpoint(*evaluator, options.checkpointDir,
                                         step + 1, state, *constants,
                                         *optimizer,
                                         scaler ? &*scaler : nullptr, run,
                                         bytes);
        if (!err.empty())
          return jobError(job, "checkpoint at step ") << step + 1 << ": " << err;
        reportCheckpointWritten(llvm::errs(), options.checkpointDir, step + 1,
                                bytes, start);
        pruneCheckpoints(llvm::errs(), options.checkpointDir,
                         options.checkpointKeep);
      }
    } catch (const std::exception &e) {
      return jobError(job, "step ") << step << ": " << e.what();
    }
    if (stopped)
      break;
  }

  if (trace.isEnabled()) {
    try {
      // Written as a rank's file, then merged as a pipeline's are: the
      // same format, times from 0.
      std::string part = options.tracePath + ".rank0";
      trace.write(part, 0, "stage 0 / replica 0");
      rt::mergeTraces({part}, options.tracePath);
      std::remove(part.c_str());
    } catch (const std::exception &e) {
      return jobError(job, "trace: ") << e.what();
    }
  }
  if (!options.dumpParamsDir.empty() && !stopped) {
    try {
      // The whole state, as a state_dict holds it (frozen parameters and
      // running statistics too: they were left out).
      for (auto *list : {&*params, &*buffers, &*constants, &*unread})
        for (auto &[n, t] : *list)
          rt::writeNpy(dumpedParamPath(options.dumpParamsDir, n),
                       tensorToNpy(t.detach().contiguous()));
    } catch (const std::exception &e) {
      return jobError(job, "cannot dump parameters: ") << e.what();
    }
  }
  return success();
}
