//===- PipelineTrainer.cpp - One rank of a P x D pipeline -----------------===//

#include "varuna/Target/ATen/PipelineTrainer.h"
#include "varuna/runtime/Agreement.h"
#include "varuna/runtime/Check.h"
#include "varuna/runtime/LossScaler.h"
#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Target/ATen/CheckpointIO.h"
#include "varuna/runtime/Stop.h"
#include "varuna/Target/ATen/CompiledSections.h"
#include "varuna/Target/ATen/InputRanges.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/runtime/GradientBuckets.h"
#include "varuna/runtime/Kernels.h"
#include "varuna/runtime/Optimizer.h"
#include "varuna/runtime/SplitBackward.h"
#include "varuna/runtime/Trace.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>

using namespace mlir;
using namespace varuna;

namespace {

enum MessageKind : int64_t { kActivation = 0, kGradient = 1 };
constexpr int64_t kHeaderLen = 5; // step, micro-batch, kind, index, numel

/// Tags keep the streams of one pair of ranks apart: kind, header/payload,
/// value index (< 4096) and micro-batch (< 2^17). The layout, which
/// describePipelineTag reads back:
constexpr int kKindShift = 30, kHeaderShift = 29, kIndexShift = 17;
constexpr int64_t kIndexMask = 0xfff, kMicroMask = 0x1ffff;
int tagOf(MessageKind kind, bool header, int64_t index, int64_t micro) {
  return static_cast<int>((int64_t(kind) << kKindShift) |
                          (int64_t(header) << kHeaderShift) |
                          ((index & kIndexMask) << kIndexShift) |
                          (micro & kMicroMask));
}

} // namespace

std::string varuna::describePipelineTag(int tag) {
  int64_t t = tag;
  int64_t kind = t >> kKindShift, header = (t >> kHeaderShift) & 1,
          index = (t >> kIndexShift) & kIndexMask, micro = t & kMicroMask;
  if (kind != kActivation && kind != kGradient)
    return "tag " + std::to_string(tag);
  return std::string(header ? "the header of " : "") +
         (kind == kActivation ? "activation " : "gradient ") +
         std::to_string(index) + " of micro-batch " + std::to_string(micro);
}

namespace {

struct Stash {
  std::vector<at::Tensor> received; // what F(k) received (no autograd)
  at::Tensor rng;                   // generator state before F(k)
  llvm::StringMap<at::Tensor> inputs;
};

struct Live {
  std::vector<at::Tensor> leaves;  // received tensors, requires_grad if float
  std::vector<at::Tensor> outputs; // the stage's results, with autograd
  double count = 0;                // last stage: what the loss averages over
};

/// One rank's pipeline state for a run.
class Rank {
public:
  Rank(ModuleOp job, ATenEvaluator &evaluator, const TrainOptions &options,
       const PipelineOptions &pipeline, rt::Transport &transport)
      : job(job), evaluator(evaluator), options(options), pipeline(pipeline),
        transport(transport) {}

  LogicalResult setUp();
  /// One training step; fills `m`. Throws on communication errors. With
  /// `evaluate`: batch `s` of `data` forward only, in evaluation mode
  /// (rt::Evaluating; no gradient, no state changes), its loss in `m.loss`.
  LogicalResult step(int64_t s, const rt::DataSource &data,
                     const TrainingConfig &config, rt::Optimizer &optimizer,
                     StepMetrics &m, bool evaluate = false);

  std::vector<std::string> paramNames;  // this stage's trainable parameters
  std::vector<at::Tensor> paramLeaves;
  std::set<std::string> notOwned;       // ties this stage does not count
  NamedTensors buffers; // batch_norm running statistics of this stage
  /// The stage's other frozen parameters (masks, frozen layers): not
  /// trained, not reduced, kept in its checkpoint files (constantParams).
  NamedTensors constants;
  /// The stage holding section 0: parameters no section reads, kept as they
  /// are for its checkpoint file and --dump-params (unreadParams()).
  NamedTensors unread;
  bool additive = false; // lossesAddUp(lossAggregation(job))
  /// The last stage's backward seed per unit of loss weight: the loss
  /// scale, and for count-weighted losses 1 / M, so that each example's
  /// gradient enters the fp16 backward at scale / M as in PyTorch's
  /// scaler.scale(loss * m / M).backward() (overflow decisions PyTorch's,
  /// independent of the micro-batch count; before, a micro-batch's backward
  /// carried Nm times that and skipped steps PyTorch does not). Every rank
  /// divides its gradients by the step's total times this.
  double seedScale() const {
    return (scaler ? scaler->scale() : 1.0) *
           (additive ? 1.0 : 1.0 / double(options.globalBatch));
  }
  /// Normalized losses whose mean cross_entropies run on this stage: what
  /// counts their labels, and the step's counts (LossNormalization.h).
  std::optional<LabelCounter> labelCounter;
  std::vector<double> stageLabels;
  /// Ratio losses, last stage: each micro-batch's divisor from its inputs.
  std::optional<LossDivisor> lossDivisor;
  /// Ratio losses, every rank: the divisor of the whole step's inputs, what
  /// the step's loss and gradients are divided by.
  std::optional<LossDivisor> stepDivisor;
  double *countSink = nullptr;          // evaluator's loss-count target
  rt::Trace trace;
  int64_t deviations = 0; // tasks run ahead of the static order
  std::optional<rt::LossScaler> scaler; // fp16 (and bf16 when asked)
  RunSettings run; // what checkpoints record of this run (runSettingsFor)
  std::map<std::string, int> home; // checkpoint file of each parameter
  int firstSection = 0, endSection = 0, numSections = 0;
  std::vector<IndexRange> indexRanges; // inputs the job's sections index by
  NamedTensors named() const {
    NamedTensors out;
    for (auto [n, t] : llvm::zip(paramNames, paramLeaves))
      out.emplace_back(n, t);
    return out;
  }
  /// Writes checkpoint `step`: replica 0's ranks write their sections'
  /// files, rank 0 commits the manifest once every file is written.
  /// Returns the bytes of the checkpoint's section files (rank 0 knows).
  double saveCheckpoint(int64_t step, const rt::Optimizer &optimizer);
  int stageIndex() const { return stage; }
  int replicaIndex() const { return replica; }

private:
  int P() const { return static_cast<int>(pipeline.stages); }
  int rankOf(int st, int rep) const { return rep * P() + st; }
  bool isFirst() const { return stage == 0; }
  bool isLast() const { return stage == P() - 1; }

  FailureOr<std::vector<at::Tensor>>
  runStage(ArrayRef<at::Tensor> received,
           const llvm::StringMap<at::Tensor> &inputs);
  /// Posts the receives of message (kind, k) from `peer` (once).
  void postRecv(MessageKind kind, int64_t k, int peer,
                const std::vector<VTensorType> &types);
  /// Whether message (kind, k) has fully arrived (posting it if needed).
  bool arrived(MessageKind kind, int64_t k, int peer,
               const std::vector<VTensorType> &types);
  /// Waits for message (kind, k), checks its headers, returns the values.
  std::vector<at::Tensor> recvValues(MessageKind kind, int64_t s, int64_t k,
                                     int peer,
                                     const std::vector<VTensorType> &types);
  void sendValue(MessageKind kind, int64_t s, int64_t k, int peer,
                 int64_t index, const at::Tensor &value);

  ModuleOp job;
  ATenEvaluator &evaluator;
  const TrainOptions &options;
  const PipelineOptions &pipeline;
  rt::Transport &transport;

  int stage = 0, replica = 0;
  std::vector<func::FuncOp> sections; // this stage's, in order
  std::vector<VTensorType> inTypes;   // received values (by recv index)
  std::vector<VTensorType> outTypes;  // sent values (the last section's results)
  std::unique_ptr<rt::Group> stageGroup; // this stage across replicas
  /// Every rank, waiting for a checkpoint's writers (checkpointing runs).
  std::unique_ptr<rt::Group> checkpointGroup;
  double checkpointWaitSeconds = 0; ///< its waits' bound
  std::unique_ptr<rt::GradientBuckets> buckets; // D > 1
  std::optional<std::vector<plan::Task>> stageOrder; // the static order
  size_t stagePeak = 0; // its most micro-batches held at once
  std::vector<std::pair<std::string, std::unique_ptr<rt::Group>>> tieGroups;
  std::vector<std::pair<std::unique_ptr<rt::Pending>, at::Tensor>> sends;
  struct PostedValue {
    bool used = false;
    at::ScalarType dtype = at::kFloat;
    at::Tensor header, payload;
    std::unique_ptr<rt::Pending> headerRecv, payloadRecv;
  };
  struct Posted {
    int peer = 0;
    std::vector<PostedValue> values;
  };
  std::map<std::pair<int, int64_t>, Posted> posted; // (kind, micro-batch)
};

LogicalResult Rank::setUp() {
  int rank = transport.rank();
  stage = rank % P();
  replica = rank / P();

  // The partition for P (checkPipeline made sure there is one).
  std::vector<int64_t> bounds = partitionBoundaries(job, P());
  std::vector<func::FuncOp> all = evaluator.getSections();
  if (bounds.size() != static_cast<size_t>(P()) + 1 ||
      bounds.back() != static_cast<int64_t>(all.size()))
    return jobError(job, "the job's partition into ") << P()
           << " stages does not cover its " << all.size() << " sections";
  for (int64_t k = bounds[stage]; k < bounds[stage + 1]; ++k)
    sections.push_back(all[k]);
  firstSection = bounds[stage];
  endSection = bounds[stage + 1];
  numSections = static_cast<int>(all.size());
  home = checkpointHomes(all);
  indexRanges = findIndexRanges(job);

  // What crosses the stage's boundaries.
  func::FuncOp first = sections.front();
  for (BlockArgument a : first.getArguments())
    if (auto r = first.getArgAttrOfType<IntegerAttr>(a.getArgNumber(),
                                                     "varuna.recv")) {
      if (static_cast<size_t>(r.getInt()) >= inTypes.size())
        inTypes.resize(r.getInt() + 1);
      inTypes[r.getInt()] = a.getType().cast<VTensorType>();
    }
  for (Type t : sections.back().getResultTypes())
    outTypes.push_back(t.cast<VTensorType>());

  // The stage's parameters; ties are parameters other stages read too.
  std::map<std::string, std::set<int>> readers; // param -> stages
  for (int st = 0; st < P(); ++st)
    for (int64_t k = bounds[st]; k < bounds[st + 1]; ++k)
      for (StringRef n : getReadParams(all[k]))
        readers[n.str()].insert(st);
  // Only this stage's parameters are loaded (frozen ones on first use).
  auto trainable = evaluator.trainableParams([&](StringRef name) {
    auto it = readers.find(name.str());
    return it != readers.end() && it->second.count(stage) > 0;
  });
  if (failed(trainable))
    return failure();
  for (auto &[name, t] : *trainable) {
    auto it = readers.find(name);
    if (it == readers.end() || !it->second.count(stage))
      continue;
    paramNames.push_back(name);
    paramLeaves.push_back(t);
    if (*it->second.begin() != stage)
      notOwned.insert(name);
  }
  auto written = evaluator.stateBuffers([&](StringRef name) {
    auto it = home.find(name.str());
    return it != home.end() && it->second >= firstSection &&
           it->second < endSection;
  });
  if (failed(written))
    return failure();
  buffers = std::move(*written);
  // Those the stage reads (one another stage reads too is restored from
  // its home's file; written by the stage that holds the home).
  std::set<std::string> readHere;
  for (func::FuncOp f : sections)
    f.walk([&](GetParamOp get) { readHere.insert(get.getName().str()); });
  auto frozen = evaluator.constantParams(
      [&](StringRef name) { return readHere.count(name.str()) > 0; });
  if (failed(frozen))
    return failure();
  constants = std::move(*frozen);
  if (firstSection == 0) {
    auto kept = evaluator.unreadParams();
    if (failed(kept))
      return failure();
    unread = std::move(*kept);
  }
  LossAggregation aggregation = lossAggregation(job);
  additive = lossesAddUp(aggregation);
  if (aggregation == LossAggregation::Normalized) {
    labelCounter = LabelCounter::create(
        job, [this](ParamOp p) { return evaluator.loadParam(p); });
    if (labelCounter && labelCounter->meansIn(firstSection, endSection) == 0)
      labelCounter.reset();
  }
  if (aggregation == LossAggregation::Ratio) {
    stepDivisor = LossDivisor::create(
        job, [this](ParamOp p) { return evaluator.loadParam(p); });
    if (isLast())
      lossDivisor = stepDivisor;
  }

  // Groups, created in the same order on every rank.
  for (int st = 0; st < P(); ++st) {
    if (st != stage)
      continue;
    std::vector<int> ranks;
    for (int r = 0; r < pipeline.replicas; ++r)
      ranks.push_back(rankOf(st, r));
    stageGroup = transport.group("stage" + std::to_string(st), ranks);
  }
  if (stageGroup->size() > 1)
    buckets = std::make_unique<rt::GradientBuckets>(
        paramLeaves, *stageGroup, pipeline.bucketBytes, &trace);
  for (auto &[name, stages] : readers) {
    if (stages.size() < 2)
      continue;
    for (int r = 0; r < pipeline.replicas; ++r) {
      if (r != replica || !stages.count(stage))
        continue;
      std::vector<int> ranks;
      for (int st : stages)
        ranks.push_back(rankOf(st, r));
      tieGroups.emplace_back(
          name, transport.group("tie:" + name + ":r" + std::to_string(r),
                                ranks));
    }
  }
  if (!options.checkpointDir.empty()) {
    std::vector<int> all(transport.size());
    for (int r = 0; r < transport.size(); ++r)
      all[r] = r;
    auto wait = std::max(
        transport.timeout(),
        std::chrono::milliseconds(
            static_cast<int64_t>(pipeline.checkpointTimeoutSeconds * 1000)));
    checkpointGroup = transport.group("checkpoint", all, wait);
    checkpointWaitSeconds = std::chrono::duration<double>(wait).count();
  }
  return success();
}

double Rank::saveCheckpoint(int64_t step, const rt::Optimizer &optimizer) {
  const std::string &dir = options.checkpointDir;
  at::Tensor entries =
      at::zeros({numSections, 3}, at::TensorOptions().dtype(at::kLong));
  std::string writeError;
  if (replica == 0) {
    NamedTensors mine = named();
    mine.insert(mine.end(), buffers.begin(), buffers.end());
    mine.insert(mine.end(), unread.begin(), unread.end());
    rt::OptimizerState state = optimizer.state();
    for (int k = firstSection; k < endSection && writeError.empty(); ++k) {
      rt::CheckpointFile f;
      try {
        writeError = rt::writeCheckpointSection(
            dir, step, k, sectionTensors(k, home, mine, state, constants), &f);
      } catch (const std::exception &e) {
        writeError = e.what();
      }
      if (!writeError.empty())
        break; // said after the all-reduce, which the others wait in
      entries[k][0] = 1;
      entries[k][1] = static_cast<int64_t>(f.bytes);
      entries[k][2] = static_cast<int64_t>(f.crc32);
    }
  }
  // The writers take as long as their disk does: the others wait for them
  // under the checkpoint's timeout, not the training's.
  std::vector<at::Tensor> all{entries};
  auto waitStart = std::chrono::steady_clock::now();
  try {
    checkpointGroup->allreduceSum(all);
  } catch (const rt::Error &e) {
    // Said as it happened: a peer gone fails the wait at once, which read
    // as if --checkpoint-timeout had run out.
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - waitStart)
                        .count();
    bool timedOut = waited >= 0.9 * checkpointWaitSeconds;
    throw std::runtime_error(
        "checkpoint at step " + std::to_string(step) +
        (timedOut ? ": not every rank reached the checkpoint's commit within "
                    "--checkpoint-timeout (a writer of replica 0 still "
                    "writing, or a rank stopped): "
                  : ": a rank left before the checkpoint's commit (after " +
                        std::to_string(int64_t(waited)) + " s): ") +
        e.what());
  }
  // A writer that failed says why; every rank stops at once (before, its
  // peers learnt of it only when its process was gone).
  if (!writeError.empty())
    throw std::runtime_error("checkpoint at step " + std::to_string(step) +
                             ": " + writeError);
  for (int k = 0; k < numSections; ++k)
    if (all[0][k][0].item<int64_t>() != 1)
      throw std::runtime_error(
          "checkpoint at step " + std::to_string(step) + ": section " +
          std::to_string(k) +
          " was not written (its writer, a rank of replica 0, failed: see "
          "its error)");
  double total = 0;
  if (transport.rank() == 0) {
    std::vector<rt::CheckpointFile> files;
    for (int k = 0; k < numSections; ++k) {
      rt::CheckpointFile f;
      f.name = rt::checkpointSectionFileName(k);
      f.section = k;
      f.bytes = static_cast<uint64_t>(all[0][k][1].item<int64_t>());
      f.crc32 = static_cast<uint32_t>(all[0][k][2].item<int64_t>());
      total += double(f.bytes);
      files.push_back(f);
    }
    std::string err = rt::commitCheckpoint(
        dir, step, files,
        trainingState(step, optimizer, evaluator.getGenerator(),
                      scaler ? &*scaler : nullptr, run));
    if (!err.empty())
      throw std::runtime_error("checkpoint at step " + std::to_string(step) +
                               ": " + err);
    // (Before the barrier: no rank goes on to write the next one meanwhile.)
    pruneCheckpoints(llvm::errs(), dir, options.checkpointKeep);
  }
  checkpointGroup->barrier();
  return total;
}

FailureOr<std::vector<at::Tensor>>
Rank::runStage(ArrayRef<at::Tensor> received,
               const llvm::StringMap<at::Tensor> &inputs) {
  std::vector<at::Tensor> sent(received.begin(), received.end());
  std::optional<rt::LossDenominators> denominators;
  if (labelCounter)
    denominators.emplace(stageLabels);
  for (func::FuncOp s : sections) {
    auto args = sectionArguments(s, sent, inputs);
    if (failed(args))
      return failure();
    auto out = evaluator.runSection(s, *args, options.microBatch);
    if (failed(out))
      return failure();
    sent = std::move(*out);
  }
  return sent;
}

/// The dtype a value of `dtype` travels as: bool as bytes; fp32 as bf16
/// when the pipeline asks for bf16 messages.
at::ScalarType wireType(at::ScalarType dtype, bool bf16Messages) {
  if (dtype == at::kBool)
    return at::kByte;
  if (bf16Messages && dtype == at::kFloat)
    return at::kBFloat16;
  return dtype;
}

at::Tensor wire(const at::Tensor &t, bool bf16Messages) {
  at::Tensor c = t.detach().contiguous();
  at::ScalarType w = wireType(c.scalar_type(), bf16Messages);
  return w == c.scalar_type() ? c : c.to(w);
}

void Rank::sendValue(MessageKind kind, int64_t s, int64_t k, int peer,
                     int64_t index, const at::Tensor &value) {
  at::Tensor payload = wire(value, pipeline.bf16Messages);
  at::Tensor header = at::tensor({s, k, int64_t(kind), index, payload.numel()},
                                 at::TensorOptions().dtype(at::kLong));
  sends.emplace_back(
      transport.send(header, peer, tagOf(kind, true, index, k)), header);
  sends.emplace_back(
      transport.send(payload, peer, tagOf(kind, false, index, k)), payload);
}

void Rank::postRecv(MessageKind kind, int64_t k, int peer,
                    const std::vector<VTensorType> &types) {
  auto key = std::make_pair(int(kind), k);
  if (posted.count(key))
    return;
  Posted &p = posted[key];
  p.peer = peer;
  p.values.resize(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    VTensorType t = types[i];
    if (!t)
      continue;
    auto dtype = toScalarType(t.getElementType());
    if (!dtype)
      throw std::runtime_error("boundary value " + std::to_string(i) +
                               " has an unsupported element type");
    if (kind == kGradient && !at::isFloatingType(*dtype))
      continue; // no gradient flows through integer values
    PostedValue &v = p.values[i];
    v.used = true;
    v.dtype = *dtype;
    v.header = at::empty({kHeaderLen}, at::TensorOptions().dtype(at::kLong));
    v.payload = at::empty(
        concreteShape(t, options.microBatch),
        at::TensorOptions().dtype(wireType(*dtype, pipeline.bf16Messages)));
    v.headerRecv = transport.recv(v.header, peer, tagOf(kind, true, i, k));
    v.payloadRecv = transport.recv(v.payload, peer, tagOf(kind, false, i, k));
  }
}

bool Rank::arrived(MessageKind kind, int64_t k, int peer,
                   const std::vector<VTensorType> &types) {
  postRecv(kind, k, peer, types);
  for (PostedValue &v : posted[std::make_pair(int(kind), k)].values)
    if (v.used && !(v.headerRecv->test() && v.payloadRecv->test()))
      return false;
  return true;
}

std::vector<at::Tensor>
Rank::recvValues(MessageKind kind, int64_t s, int64_t k, int peer,
                 const std::vector<VTensorType> &types) {
  postRecv(kind, k, peer, types);
  auto key = std::make_pair(int(kind), k);
  Posted p = std::move(posted[key]);
  posted.erase(key);
  std::vector<at::Tensor> out(p.values.size());
  auto waitStart = rt::Trace::Clock::now();
  int64_t bytes = 0;
  for (size_t i = 0; i < p.values.size(); ++i) {
    PostedValue &v = p.values[i];
    if (!v.used)
      continue;
    v.headerRecv->wait();
    auto *h = v.header.data_ptr<int64_t>();
    const char *what = kind == kActivation ? "activation" : "gradient";
    if (h[0] != s || h[1] != k || h[2] != kind || h[3] != int64_t(i) ||
        h[4] != v.payload.numel())
      throw std::runtime_error(llvm::formatv(
          "rank {0} expected {1} {2} of micro-batch {3}, step {4} ({5} "
          "elements) from rank {6}, but the message is {7} {8} of "
          "micro-batch {9}, step {10} ({11} elements)",
          transport.rank(), what, i, k, s, v.payload.numel(), peer,
          h[2] == kActivation ? "activation" : "gradient", h[3], h[1], h[0],
          h[4]));
    v.payloadRecv->wait();
    bytes += v.payload.numel() * v.payload.element_size();
    out[i] = v.payload.scalar_type() == v.dtype ? v.payload
                                                 : v.payload.to(v.dtype);
  }
  trace.span(std::string(kind == kActivation ? "recv act " : "recv grad ") +
                 std::to_string(k),
             rt::Trace::Comm, waitStart, rt::Trace::Clock::now(),
             "\"from\": " + std::to_string(peer) + ", \"bytes\": " +
                 std::to_string(bytes));
  return out;
}

/// Leaves for a recomputation/backward: detached, requiring grad if float.
std::vector<at::Tensor> makeLeaves(const std::vector<at::Tensor> &received) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor &t : received) {
    at::Tensor l = t.defined() ? t.detach() : t;
    if (l.defined() && l.is_floating_point())
      l.requires_grad_(true);
    leaves.push_back(l);
  }
  return leaves;
}

LogicalResult Rank::step(int64_t s, const rt::DataSource &data,
                         const TrainingConfig &config,
                         rt::Optimizer &optimizer, StepMetrics &m,
                         bool evaluate) {
  auto start = std::chrono::steady_clock::now();
  // Validation batches draw (random ops) from streams of their own.
  evaluator.seedStep(evaluate ? -1 - s : s, stage, replica);
  // The global batch's micro-batches, dealt out in contiguous runs: when D
  // does not divide their number the first replicas take one more (the loss
  // and the gradients are normalized by the global count, so the step is
  // the same synchronous step either way).
  int64_t M = options.globalBatch, mb = options.microBatch;
  int64_t allMicro = M / mb, D = pipeline.replicas;
  int numMicro = static_cast<int>(allMicro / D + (replica < allMicro % D));
  int64_t firstMicro = replica * (allMicro / D) + std::min<int64_t>(replica, allMicro % D);
  // The stage's static order: the same every step (made once per run).
  if (!stageOrder) {
    plan::ScheduleResult sched =
        plan::schedule(pipeline.schedule, P(), numMicro, pipeline.timing);
    if (!sched)
      return jobError(job, "schedule: ") << sched.error(), failure();
    stageOrder = sched->order(stage);
    stagePeak = static_cast<size_t>(sched->maxInFlight(stage));
  }
  // A validation pass runs the forwards only, in order.
  std::vector<plan::Task> forwards;
  if (evaluate)
    for (int k = 0; k < numMicro; ++k)
      forwards.push_back(plan::Task{plan::TaskKind::Forward, k});
  const std::vector<plan::Task> &order = evaluate ? forwards : *stageOrder;
  // Zero-bubble: the micro-batches whose B(k) computes the input gradient
  // only and keeps what W(k) needs to compute the weight gradients later.
  std::set<int> recomputed, splitAt;
  for (const plan::Task &t : order)
    if (t.kind == plan::TaskKind::Recompute)
      recomputed.insert(t.microBatch);
    else if (t.kind == plan::TaskKind::Weight)
      splitAt.insert(t.microBatch);

  for (at::Tensor &p : paramLeaves)
    p.mutable_grad() = at::Tensor();
  // The whole step's index inputs and labels, read once. Every rank checks
  // the whole step (all stop alike); the first rank says why, the others
  // point at it (the same message P x D times said nothing more); a
  // validation batch's were checked before the first step
  // (checkValidationInputs).
  const std::vector<IndexRange> checkedBefore;
  const std::vector<IndexRange> &toCheck =
      evaluate ? checkedBefore : indexRanges;
  std::vector<rt::BatchTensor> whole = readStepInputs(
      toCheck, data, s, M,
      labelCounter ? &labelCounter->inputsRead() : nullptr);
  if (auto bad = checkStepInputs(toCheck, whole, data, s, M)) {
    if (stage == 0 && replica == 0)
      return jobError(job, "step ") << s << ": " << *bad, failure();
    return jobError(job, "step ")
               << s << ": the step's data is invalid (rank 0 says how)",
           failure();
  }
  // The labels the stage's mean cross_entropies count over the whole step
  // (every replica's micro-batches: the data is readable by every rank).
  if (labelCounter)
    stageLabels = labelCounter->forSections(labelCounter->count(whole, M),
                                            firstSection, endSection);
  std::vector<std::string> inputNames = evaluator.getInputNames();
  auto inputsOf = [&](int k) {
    llvm::StringMap<at::Tensor> byName;
    std::vector<rt::BatchTensor> rows =
        data.batch(s, M, (firstMicro + k) * mb, mb);
    for (auto [name, b] : llvm::zip(inputNames, rows))
      byName[name] = tensorFromNpy(b.array);
    return byName;
  };

  std::map<int, Stash> stash;
  std::map<int, Live> live;
  std::map<int, rt::SplitBackward> weightsDue;
  // Runs `addGrads`, a task that adds a micro-batch's gradients to the
  // parameters (B, or W when split): the step's last one arms the
  // data-parallel buckets before it and starts the rest after it.
  int weightTasksDone = 0;
  auto weightTask = [&](auto &&addGrads) {
    bool last = ++weightTasksDone == numMicro;
    if (buckets && last)
      buckets->arm();
    addGrads();
    if (buckets && last)
      buckets->launchRest();
  };
  double lossSum = 0, countSum = 0;
  int prev = rankOf(stage - 1, replica), next = rankOf(stage + 1, replica);
  // The gradients of the received tensors (none: zeros) to stage s-1.
  auto sendInputGradients = [&](int k, const std::vector<at::Tensor> &leaves,
                                const std::vector<at::Tensor> &in) {
    for (auto [i, leaf] : llvm::enumerate(leaves))
      if (leaf.defined() && leaf.is_floating_point())
        sendValue(kGradient, s, k, prev, i,
                  in[i].defined() ? in[i] : at::zeros_like(leaf));
  };
  // Varuna's run-time deviation (Varuna's schedule only): when the scheduled
  // task waits for a message that has not arrived, run the first later
  // recompute (only while the stage holds no recomputed set: the static
  // order never holds two, and a stage waiting for B0's gradient ran R1 R2
  // R3 ahead, every micro-batch's activations at once), or the first
  // backward left, that is ready instead; if there is none, the next
  // forward, if its activation is here and the stage holds fewer
  // micro-batches than the static order does at its peak (so the memory
  // bound is the static schedule's). Forwards keep their order among
  // themselves, and a recompute restores the random stream after it, so the
  // stream each forward sees does not depend on the deviation.
  auto ready = [&](const plan::Task &t) {
    int k = t.microBatch;
    switch (t.kind) {
    case plan::TaskKind::Forward:
      return isFirst() || arrived(kActivation, k, prev, inTypes);
    case plan::TaskKind::Recompute:
      return stash.count(k) > 0;
    case plan::TaskKind::Backward:
      return live.count(k) > 0 && !live[k].outputs.empty() &&
             (isLast() || arrived(kGradient, k, next, outTypes));
    case plan::TaskKind::Weight:
      return weightsDue.count(k) > 0;
    }
    return false;
  };
  // GPipe and 1F1B are defined by their static orders: a backward run ahead
  // on the last stage would send gradients in another order than the
  // previous stage waits for them (GPipe's are in reverse). Zero-bubble's
  // order is static too: running a due W while the next task waits (W
  // sends nothing) was tried and simulated 0-0.3% slower under jitter, as
  // it delays the task whose message comes next (docs/pipeline.md).
  // (A validation pass keeps its forwards in order: no deviation.)
  bool deviate = !evaluate && pipeline.deviate &&
                 pipeline.schedule == plan::ScheduleKind::Varuna;
  const size_t peakHeld = stagePeak;
  // Receives are posted a window of tasks ahead, so a message finds its
  // buffer waiting: posting one after the sender has started (GPipe and
  // 1F1B used to post on demand) cost 2-5 ms each in Gloo here.
  const size_t postWindow = 2 * peakHeld + 2;
  std::vector<plan::Task> remaining = order;
  const int64_t deviationsBefore = deviations;
  while (!remaining.empty()) {
    for (size_t j = 0; j < std::min(postWindow, remaining.size()); ++j) {
      const plan::Task &t = remaining[j];
      if (t.kind == plan::TaskKind::Forward && !isFirst())
        postRecv(kActivation, t.microBatch, prev, inTypes);
      else if (t.kind == plan::TaskKind::Backward && !isLast())
        postRecv(kGradient, t.microBatch, next, outTypes);
    }
    size_t pick = 0;
    if (deviate && !ready(remaining[0])) {
      size_t forward = 0; // the first later forward, 0 if none
      // Backwards keep their order too: they add into the gradients, whose
      // float sums depend on it. (A later gradient can look arrived before
      // an earlier one: arrival is seen by each receive's own waiting
      // thread. B2 ran before B1 in one run of twelve, and runs differed in
      // the last bits.)
      bool backwardBefore = remaining[0].kind == plan::TaskKind::Backward;
      for (size_t j = 1; j < remaining.size(); ++j) {
        if (remaining[j].kind == plan::TaskKind::Forward) {
          if (!forward)
            forward = j;
          continue;
        }
        if (remaining[j].kind == plan::TaskKind::Backward) {
          if (backwardBefore)
            continue;
          backwardBefore = true;
        }
        if (remaining[j].kind == plan::TaskKind::Recompute &&
            llvm::any_of(live, [&](auto &l) {
              return recomputed.count(l.first) > 0;
            }))
          continue;
        if (ready(remaining[j])) {
          pick = j;
          break;
        }
      }
      if (!pick && forward && stash.size() + live.size() < peakHeld &&
          ready(remaining[forward]))
        pick = forward;
      if (pick)
        ++deviations;
    }
    plan::Task t = remaining[pick];
    remaining.erase(remaining.begin() + pick);
    int k = t.microBatch;
    switch (t.kind) {
    case plan::TaskKind::Forward: {
      llvm::StringMap<at::Tensor> inputs = inputsOf(k);
      std::vector<at::Tensor> received =
          isFirst() ? std::vector<at::Tensor>()
                    : recvValues(kActivation, s, k, prev, inTypes);
      *countSink = additive      ? 1.0
                   : lossDivisor ? lossDivisor->evaluate(inputs, mb)
                                 : double(mb);
      if (lossDivisor && *countSink == 0)
        return jobError(job, evaluate ? "validation batch " : "step ")
                   << s << ", micro-batch " << firstMicro + k
                   << ": " << zeroDivisorMessage(mb),
               failure();
      auto computeStart = rt::Trace::Clock::now();
      FailureOr<std::vector<at::Tensor>> out = failure();
      if (evaluate) {
        at::NoGradGuard noGrad;
        rt::Evaluating evaluating;
        out = runStage(received, inputs);
      } else if (recomputed.count(k)) {
        at::NoGradGuard noGrad;
        stash[k] = {received, evaluator.getGenerator().get_state(), inputs};
        out = runStage(received, inputs);
      } else {
        Live &l = live[k];
        l.leaves = makeLeaves(received);
        out = runStage(l.leaves, inputs);
        if (succeeded(out))
          l.outputs = *out;
      }
      if (failed(out))
        return failure();
      // A validation pass's forwards are V<k> in the timeline.
      trace.span((evaluate ? "V" : "F") + std::to_string(k),
                 rt::Trace::Compute, computeStart, rt::Trace::Clock::now());
      if (isLast()) {
        auto lossIndex = evaluator.getLossIndex();
        double loss = (*out)[*lossIndex].item<double>();
        lossSum += loss * *countSink;
        countSum += *countSink;
        if (!evaluate)
          live[k].count = *countSink;
      } else {
        for (auto [i, v] : llvm::enumerate(*out))
          sendValue(kActivation, s, k, next, i, v);
      }
      break;
    }
    case plan::TaskKind::Recompute: {
      auto span = trace.scope("R" + std::to_string(k), rt::Trace::Compute);
      Stash st = std::move(stash.at(k));
      stash.erase(k);
      // F(k)'s random stream again, then the stream where it was.
      at::Generator gen = evaluator.getGenerator();
      at::Tensor streamAt = gen.get_state();
      gen.set_state(st.rng);
      Live &l = live[k];
      l.leaves = makeLeaves(st.received);
      FailureOr<std::vector<at::Tensor>> out = failure();
      {
        rt::KeepRunningStats recomputing; // F(k) updated them
        out = runStage(l.leaves, st.inputs);
      }
      gen.set_state(streamAt);
      if (failed(out))
        return failure();
      l.outputs = std::move(*out);
      break;
    }
    case plan::TaskKind::Backward: {
      Live l = std::move(live.at(k));
      live.erase(k);
      std::vector<at::Tensor> roots, grads;
      if (isLast()) {
        roots.push_back(l.outputs[*evaluator.getLossIndex()] *
                        (l.count * seedScale()));
      } else {
        std::vector<at::Tensor> g = recvValues(kGradient, s, k, next, outTypes);
        for (auto [o, gi] : llvm::zip(l.outputs, g))
          if (gi.defined() && o.requires_grad()) {
            roots.push_back(o);
            grads.push_back(gi);
          }
      }
      if (splitAt.count(k)) {
        // Input gradients now (stage s-1 waits for them), weights in W(k).
        rt::SplitBackward split;
        std::vector<at::Tensor> in;
        {
          auto span = trace.scope("B" + std::to_string(k), rt::Trace::Compute);
          in = split.inputGradients(roots, grads, l.leaves);
        }
        sendInputGradients(k, l.leaves, in);
        weightsDue.emplace(k, std::move(split));
        break;
      }
      // The whole backward: buckets start as their gradients become final.
      weightTask([&] {
        if (!roots.empty()) {
          auto span =
              trace.scope("B" + std::to_string(k), rt::Trace::Compute);
          if (grads.empty())
            torch::autograd::backward(roots);
          else
            torch::autograd::backward(roots, grads);
        }
        if (isFirst())
          return;
        std::vector<at::Tensor> in;
        for (const at::Tensor &leaf : l.leaves)
          in.push_back(leaf.defined() ? leaf.grad() : at::Tensor());
        sendInputGradients(k, l.leaves, in);
      });
      break;
    }
    case plan::TaskKind::Weight: {
      auto it = weightsDue.find(k);
      if (it == weightsDue.end())
        return jobError(job, "schedule: W") << k << " before its B", failure();
      weightTask([&] {
        auto span = trace.scope("W" + std::to_string(k), rt::Trace::Compute);
        it->second.weightGradients();
      });
      weightsDue.erase(it);
      break;
    }
    }
  }
  {
    auto span = trace.scope("wait sends", rt::Trace::Comm);
    for (auto &[p, t] : sends)
      p->wait();
    sends.clear();
  }

  // The loss, what it averages over and (with loss scaling) the ranks whose
  // gradients overflowed, summed over every rank in one all-reduce (while
  // the gradient buckets are in flight: they leave the gradients alone).
  double scale = scaler ? scaler->scale() : 1.0, seed = seedScale();
  double overflowed = 0;
  if (scaler && !evaluate) {
    std::vector<at::Tensor> mine;
    for (at::Tensor &p : paramLeaves)
      mine.push_back(p.grad());
    // A scale backed off to 0 (fp32 underflow after ~150 overflows in a
    // row) unscales to 0/0: GradScaler's inverse scale is then infinite and
    // it skips the step; so does this.
    overflowed = rt::LossScaler::allFinite(mine) && scale > 0 ? 0 : 1;
  }
  // The ranks asked to stop (runtime/Stop.h) ride along, so that all agree
  // on the step after which they stop (or the validation batch after which
  // a pass is abandoned).
  // With the rank, the signal and whether the launcher sent it, summed:
  // which rank it was when one alone was asked (ranks read their requests
  // at different moments, so a launcher's signal to all may be seen by one
  // rank first: not named).
  int signal = rt::stopSignal();
  double stopping = signal != 0 ? 1 : 0;
  std::vector<at::Tensor> totals{at::tensor(
      {lossSum, countSum, overflowed, stopping,
       double(deviations - deviationsBefore),
       signal != 0 ? double(transport.rank()) : 0.0, double(signal),
       signal != 0 && rt::stopFromLauncher() ? 1.0 : 0.0},
      at::TensorOptions().dtype(at::kDouble))};
  {
    auto span = trace.scope("allreduce loss", rt::Trace::Comm);
    transport.world().allreduceSum(totals);
  }
  m.stopRequested = totals[0][3].item<double>() > 0;
  if (totals[0][3].item<double>() == 1 && totals[0][7].item<double>() == 0 &&
      transport.size() > 1)
    m.stopCause = rt::signalName(int(totals[0][6].item<double>())) +
                  " to rank " +
                  std::to_string(int64_t(totals[0][5].item<double>()));
  m.deviations = static_cast<int64_t>(totals[0][4].item<double>());
  // Losses that add up: each micro-batch's backward as it is (its share of
  // the step's loss); weighted ones by their count (and 1 / M, seedScale),
  // undone here.
  double total =
      additive      ? 1.0
      : stepDivisor ? stepDivisor->evaluate(
                          data.batch(s, M, 0, M, stepDivisor->inputsRead()), M)
                    : totals[0][1].item<double>();
  m.loss = totals[0][0].item<double>() / total;
  if (evaluate) {
    m.step = s;
    m.seconds = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    return success();
  }
  // Data parallelism: the stage's gradients summed over its replicas.
  if (buckets) {
    auto span = trace.scope("wait gradient buckets", rt::Trace::Comm);
    buckets->wait();
  }
  // Running statistics: each replica's followed its own micro-batches; they
  // leave the step as their mean, so replicas agree (the oracle:
  // train_oracle.py --micro-batch m --replicas D).
  if (!buffers.empty() && stageGroup->size() > 1) {
    auto span = trace.scope("allreduce running stats", rt::Trace::Comm);
    // One all-reduce per dtype, of them all flattened: one per tensor cost
    // a round trip each (a CNN's 16 statistics: 10.8 ms per step).
    std::map<at::ScalarType, std::vector<at::Tensor *>> byType;
    for (auto &[name, t] : buffers)
      byType[t.scalar_type()].push_back(&t);
    std::vector<at::Tensor> flat;
    for (auto &[type, ts] : byType) {
      std::vector<at::Tensor> parts;
      for (at::Tensor *t : ts)
        parts.push_back(t->reshape({-1}));
      flat.push_back(at::cat(parts));
    }
    stageGroup->allreduceSum(flat); // in place
    size_t i = 0;
    for (auto &[type, ts] : byType) {
      at::Tensor mean = flat[i++].div_(double(stageGroup->size()));
      int64_t offset = 0;
      for (at::Tensor *t : ts) {
        t->copy_(mean.narrow(0, offset, t->numel()).view_as(*t));
        offset += t->numel();
      }
    }
  }
  // The step's learning rate, reported for a skipped step too (as the
  // one-process trainer does).
  if (config.lrSchedule.active())
    m.lr = config.lrSchedule.lrAt(s, config.optimizer.lr);
  if (scaler) {
    // Every rank decides alike: skip the step everywhere on any overflow.
    bool overflow = totals[0][2].item<double>() > 0;
    m.lossScale = scale;
    m.skipped = overflow;
    scaler->update(overflow);
    if (overflow) {
      m.step = s;
      m.seconds = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      m.examplesPerSecond = double(M) / m.seconds;
      return success();
    }
  }

  std::vector<at::Tensor> grads;
  for (at::Tensor &p : paramLeaves) {
    at::Tensor g = p.grad();
    grads.push_back(g.defined() ? g.div_(total * seed) : at::zeros_like(p));
  }
  // Ties: the copies' gradients summed over the stages that hold them.
  for (auto &[name, group] : tieGroups) {
    auto span = trace.scope("allreduce tie " + name, rt::Trace::Comm);
    auto it = std::find(paramNames.begin(), paramNames.end(), name);
    std::vector<at::Tensor> g{grads[it - paramNames.begin()]};
    group->allreduceSum(g);
  }
  // The global gradient norm: each tie counted once, replicas once.
  std::optional<double> norm;
  if (config.needsGlobalGradNorm()) {
    std::vector<at::Tensor> owned;
    for (auto [n, g] : llvm::zip(paramNames, grads))
      if (!notOwned.count(n))
        owned.push_back(g);
    std::vector<at::Tensor> sq{at::tensor(
        {rt::sumOfSquares(owned)}, at::TensorOptions().dtype(at::kDouble))};
    auto span = trace.scope("allreduce norm", rt::Trace::Comm);
    transport.world().allreduceSum(sq);
    norm = std::sqrt(sq[0].item<double>() / double(pipeline.replicas));
  }
  if (config.clipGradNorm && config.optimizer.type != OptimizerKind::LAMB)
    rt::clipGradNorm(grads, *config.clipGradNorm, norm);
  {
    auto span = trace.scope("optimizer", rt::Trace::Compute);
    if (m.lr)
      optimizer.setLearningRate(*m.lr);
    optimizer.step(paramLeaves, grads, norm);
  }

  m.step = s;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count();
  m.examplesPerSecond = double(M) / m.seconds;
  m.gradNorm = norm.value_or(0.0);
  return success();
}

} // namespace

std::vector<int64_t> varuna::partitionBoundaries(ModuleOp job,
                                                 int64_t stages) {
  if (auto parts = job->getAttrOfType<ArrayAttr>("varuna.partitions"))
    for (Attribute a : parts)
      if (auto d = a.dyn_cast<DictionaryAttr>())
        if (auto st = d.getAs<IntegerAttr>("stages"))
          if (st.getInt() == stages)
            if (auto b = d.getAs<DenseI64ArrayAttr>("boundaries"))
              return std::vector<int64_t>(b.asArrayRef().begin(),
                                          b.asArrayRef().end());
  // One stage holds every section, whatever depths the job was compiled
  // for (a job compiled with --stages 2 trained at 1 x 1 but not at 1 x 2).
  if (stages == 1) {
    int64_t sections = 0;
    for (auto f : job.getOps<func::FuncOp>())
      sections += f->hasAttr("varuna.section");
    if (sections > 0)
      return {0, sections};
  }
  return {};
}

LogicalResult varuna::checkPipeline(ModuleOp job, const TrainOptions &options,
                                    const PipelineOptions &pipeline) {
  int64_t P = pipeline.stages, D = pipeline.replicas;
  if (P < 1 || D < 1)
    return jobError(job, "--stages and --replicas must be at least 1");
  if (options.microBatch < 1 || options.globalBatch < 1 ||
      options.globalBatch % options.microBatch ||
      options.globalBatch / options.microBatch < D)
    return jobError(job, "the global batch (")
           << options.globalBatch << ") must be a multiple of --micro-batch ("
           << options.microBatch << ") with at least one micro-batch for each "
           << "of the " << D << " replicas";
  if (options.resume && options.checkpointDir.empty())
    return jobError(job, "--resume needs --checkpoint-dir");
  if (options.sections)
    return jobError(job, "--sections is for --stages 1 --replicas 1 (a "
                         "pipeline always runs section by section)");
  if (partitionBoundaries(job, P).size() != static_cast<size_t>(P) + 1) {
    int64_t sections = 0;
    for (auto f : job.getOps<func::FuncOp>())
      sections += f->hasAttr("varuna.section");
    if (sections < P) // a stage runs at least one section
      return jobError(job, "--stages ")
             << P << " is more than the job's " << sections
             << " sections (the cut points the compiler found): at most "
             << sections << " stages (plan again with varuna-plan, or "
             << "compile with more cut points: varuna-compile "
             << "--num-cut-points)";
    return jobError(job, "the job has no partition into ")
           << P << " stages (it has " << sections
           << " sections; compile it without --stages, or with --stages " << P
           << ")";
  }
  return success();
}

/// Why the ranks do not all see the directory `dir` (empty when they do):
/// checkpoints are written by the ranks holding sections and committed by
/// rank 0, and a trace is merged by rank 0 from every rank's file, so each
/// needs a file system all ranks share. Every rank writes a probe file of
/// this run (a token rank 0 draws, all-reduced) into `dir`; rank 0 reads
/// them all and the result is all-reduced, so every rank answers alike.
/// Before, per-host directories failed at the first checkpoint ("cannot
/// commit checkpoint: ... No such file or directory") or after the run.
static std::string unsharedDirectory(rt::Transport &transport,
                                     const std::string &dir) {
  int rank = transport.rank(), n = transport.size();
  if (n < 2)
    return "";
  std::vector<at::Tensor> token{at::zeros({1}, at::kDouble)};
  if (rank == 0)
    token[0][0] = double(std::random_device{}() % 1000000007u) + 1;
  transport.world().allreduceSum(token);
  std::string text = std::to_string(int64_t(token[0][0].item<double>()));
  auto probe = [&](int r) {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, ".varuna-probe-rank" + std::to_string(r));
    return std::string(p);
  };
  llvm::sys::fs::create_directories(dir);
  // A rank that cannot write there at all (a full disk, no permission) is
  // said as such, with its error, not as an unshared directory.
  std::vector<at::Tensor> writeErrors{at::zeros({n}, at::kDouble)};
  {
    errno = 0;
    std::ofstream os(probe(rank));
    os << text;
    os.close();
    if (os.fail())
      writeErrors[0][rank] = double(errno ? errno : EIO);
  }
  transport.world().allreduceSum(writeErrors);
  for (int r = 0; r < n; ++r)
    if (int e = int(writeErrors[0][r].item<double>())) {
      llvm::sys::fs::remove(probe(rank));
      return "rank " + std::to_string(r) + " cannot write in '" + dir +
             "': " + std::strerror(e);
    }
  std::vector<at::Tensor> missing{at::zeros({1}, at::kDouble)};
  if (rank == 0)
    for (int r = 1; r < n; ++r) {
      std::ifstream is(probe(r));
      std::string seen;
      is >> seen;
      if (seen != text) {
        missing[0][0] = double(r);
        break;
      }
    }
  transport.world().allreduceSum(missing);
  transport.world().barrier();
  llvm::sys::fs::remove(probe(rank));
  int r = int(missing[0][0].item<double>());
  if (r == 0)
    return "";
  return "rank 0 cannot see rank " + std::to_string(r) + "'s files in '" +
         dir + "': it must be a directory on a file system all ranks share";
}

LogicalResult varuna::trainPipeline(
    ModuleOp job, const TrainingConfig &config, const rt::DataSource &data,
    const TrainOptions &options, const PipelineOptions &pipeline,
    rt::Transport &transport,
    const std::function<void(const StepMetrics &)> &onStep) {
  int64_t P = pipeline.stages, D = pipeline.replicas;
  if (failed(checkPipeline(job, options, pipeline)))
    return failure();
  if (transport.size() != P * D)
    return jobError(job, "--stages ")
           << P << " x --replicas " << D << " needs " << P * D
           << " ranks, the job has " << transport.size();

  double count = 0;
  auto created = createTrainingEvaluator(job, options, count);
  if (failed(created))
    return failure();
  ATenEvaluator *evaluator = created->get();

  // A resume overwrites what the checkpoint holds: the model file need not
  // be there for it (finishDeferredParams).
  evaluator->deferUnreadableParams(options.resume);
  Rank rank(job, *evaluator, options, pipeline, transport);
  rank.countSink = &count;
  rank.run = runSettingsFor(job, options, config);
  rank.run.shape = std::to_string(P) + " x " + std::to_string(D);
  if (config.needsOverflowCheck())
    rank.scaler.emplace(config.lossScale);
  rank.trace = rt::Trace(!options.tracePath.empty());
  rank.trace.keepSteps(options.traceFirstStep, options.traceLastStep);
  // A run that fails leaves this rank's spans so far as TRACE.rank<r>
  // (best effort: its peers may be gone): varuna-run's launcher merges the
  // parts it finds into TRACE, a timeline up to the failure. Before, a
  // failed run wrote nothing and said nothing.
  bool traceWritten = false;
  auto partialTrace = llvm::make_scope_exit([&] {
    if (options.tracePath.empty() || traceWritten)
      return;
    try {
      rank.trace.write(options.tracePath + ".rank" +
                           std::to_string(transport.rank()),
                       transport.rank(),
                       "stage " + std::to_string(rank.stageIndex()) +
                           " / replica " + std::to_string(rank.replicaIndex()));
    } catch (const std::exception &) {
    }
  });
  try {
    if (failed(rank.setUp()))
      return failure();
  } catch (const std::exception &e) {
    return jobError(job, "rank ") << transport.rank() << ": " << e.what();
  }
  try {
    // The --dump-params directory too: each stage's ranks write theirs, and
    // per-host directories each held part of the model, with no word.
    llvm::StringRef traceDir = llvm::sys::path::parent_path(options.tracePath);
    std::pair<const char *, std::string> dirs[] = {
        {"the checkpoint directory", options.checkpointDir},
        {"the trace's directory",
         options.tracePath.empty() ? ""
                                   : traceDir.empty() ? "." : traceDir.str()},
        {"the --dump-params directory", options.dumpParamsDir}};
    for (const auto &[what, dir] : dirs)
      if (!dir.empty())
        if (std::string why = unsharedDirectory(transport, dir); !why.empty())
          return jobError(job, "rank ")
                 << transport.rank() << ": " << what << ": " << why;
  } catch (const std::exception &e) {
    return jobError(job, "rank ") << transport.rank() << ": " << e.what();
  }
  if (transport.rank() == 0)
    warnMicroBatchSemantics(job, options, &data);
  auto outputs = createTrainerOutputs(job, config, options, rank.paramNames,
                                      transport.rank() == 0);
  if (failed(outputs))
    return failure();
  std::unique_ptr<rt::Optimizer> optimizer = std::move(outputs->optimizer);
  std::unique_ptr<MetricsWriter> metrics = std::move(outputs->metrics);
  int64_t first = 0;
  if (options.resume) {
    llvm::raw_ostream &log =
        transport.rank() == 0 ? llvm::errs() : llvm::nulls();
    std::set<std::string> restored;
    std::optional<rt::CheckpointInfo> ckpt;
    try {
      if ((ckpt = agreedLatestCheckpoint(transport.world(),
                                         options.checkpointDir, log))) {
        for (const std::string &w :
             resumeWarnings(*ckpt, rank.run, *optimizer))
          log << "varuna-run: warning: " << w << "\n";
        NamedTensors mine = rank.named();
        NamedTensors kept = rank.buffers; // copies share the tensors
        kept.insert(kept.end(), rank.unread.begin(), rank.unread.end());
        kept.insert(kept.end(), rank.constants.begin(), rank.constants.end());
        first = restoreFrom(*ckpt, rank.home, mine, kept, *optimizer,
                            evaluator->getGenerator(), /*strict=*/false,
                            rank.scaler ? &*rank.scaler : nullptr, &restored);
        log << "varuna-run: resumed from " << ckpt->path << " (step " << first
            << ") with " << P << " x " << D << " ranks\n";
        if (first >= options.steps && !options.evalData) // else: validates
          log << "varuna-run: warning: " << nothingToTrain(first, options.steps)
              << "\n";
      }
    } catch (const std::exception &e) {
      return jobError(job, "rank ") << transport.rank()
                                    << ": cannot resume: " << e.what();
    }
    // Every rank must continue from the same checkpoint: on hosts with
    // their own copies of the directory, one may hold another step (or
    // none) -- before, such ranks trained on from different states, the
    // gradient all-reduces mixing them, with no error.
    std::string resumed = "none (no complete checkpoint)";
    if (ckpt) {
      resumed = "step " + std::to_string(first) + ", files";
      for (const rt::CheckpointFile &f : ckpt->manifest.files)
        resumed += " " + f.name + ":" + llvm::utohexstr(f.crc32, true);
    }
    try {
      rt::checkSameSettings(transport.world(),
                            {{"the checkpoint resumed from", resumed}});
    } catch (const std::exception &e) {
      return jobError(job, "rank ") << transport.rank() << ": " << e.what()
                                    << (ckpt ? " ('" + ckpt->path + "')"
                                             : std::string());
    }
    std::string note;
    if (auto error = finishDeferredParams(*evaluator, restored,
                                          ckpt ? &*ckpt : nullptr, note))
      return jobError(job, "rank ") << transport.rank() << ": " << *error;
    if (!note.empty())
      // Rank 0 speaks for its own parameters (the count was taken for the
      // job's: 13 where all 25 did).
      log << "varuna-run: rank 0: " << note << "\n";
    if (ckpt) {
      // Once every rank has read what it resumes from, rank 0 removes
      // the steps this run rewrites, and prunes (CheckpointIO.h).
      try {
        transport.world().barrier();
      } catch (const std::exception &e) {
        return jobError(job, "rank ") << transport.rank() << ": " << e.what();
      }
      if (transport.rank() == 0)
        tidyAfterResume(log, options.checkpointDir, first,
                        options.checkpointKeep);
    }
  }
  if (options.evalData)
    if (auto bad = checkValidationInputs(rank.indexRanges, *options.evalData,
                                         options.evalBatchCount(),
                                         options.globalBatch))
      return jobError(job, *bad);
  // Validation batch b after `evalAfter` steps, its stop cause into
  // `evalInto`.
  int64_t evalAfter = first;
  StepMetrics *evalInto = nullptr;
  auto validationLoss = [&](int64_t b, bool &stop) -> FailureOr<double> {
    StepMetrics e;
    try {
      if (failed(rank.step(b, *options.evalData, config, *optimizer, e,
                           /*evaluate=*/true)))
        return failure();
    } catch (const std::exception &ex) {
      return jobError(job, "rank ")
                 << transport.rank() << ", validation batch " << b
                 << " after step " << evalAfter - 1 << ": " << ex.what(),
             failure();
    }
    stop = e.stopRequested; // every rank's request, summed
    if (stop && evalInto)
      evalInto->stopCause = e.stopCause;
    return e.loss;
  };
  rank.trace.setStep(first);
  if (failed(validateUntrained(options, first, validationLoss, metrics.get(),
                               onStep)))
    return failure();
  bool stopped = false; // on request, before the last step
  for (int64_t s = first; s < options.steps; ++s) {
    StepMetrics m;
    rank.trace.setStep(s);
    try {
      if (failed(rank.step(s, data, config, *optimizer, m)))
        return failure();
    } catch (const std::exception &e) {
      return jobError(job, "rank ") << transport.rank() << ", step " << s
                                    << ": " << e.what();
    }
    evalAfter = s + 1;
    evalInto = &m;
    if (failed(validate(options, s + 1, m, validationLoss)))
      return failure();
    if (metrics)
      metrics->write(m);
    onStep(m);
    stopped = m.stopRequested && s + 1 < options.steps;
    if (options.checkpointDue(s + 1, stopped)) {
      try {
        auto start = std::chrono::steady_clock::now();
        double bytes = rank.saveCheckpoint(s + 1, *optimizer);
        reportCheckpointWritten(transport.rank() == 0 ? llvm::errs()
                                                      : llvm::nulls(),
                                options.checkpointDir, s + 1, bytes, start);
      } catch (const std::exception &e) {
        return jobError(job, "rank ") << transport.rank() << ": " << e.what();
      }
    }
    if (stopped)
      break;
  }
  if (!options.tracePath.empty()) {
    try {
      std::string mine =
          options.tracePath + ".rank" + std::to_string(transport.rank());
      rank.trace.write(mine, transport.rank(),
                       "stage " + std::to_string(rank.stageIndex()) +
                           " / replica " + std::to_string(rank.replicaIndex()));
      transport.world().barrier();
      if (transport.rank() == 0) {
        std::vector<std::string> parts;
        for (int r = 0; r < transport.size(); ++r)
          parts.push_back(options.tracePath + ".rank" + std::to_string(r));
        rt::mergeTraces(parts, options.tracePath);
        for (const std::string &p : parts)
          std::remove(p.c_str());
      }
      traceWritten = true;
    } catch (const std::exception &e) {
      traceWritten = true; // this rank's part is there, or could not be
      return jobError(job, "trace: ") << e.what();
    }
  }
  int stage = transport.rank() % P;
  if (!options.dumpParamsDir.empty() && transport.rank() / P == 0 &&
      !stopped) {
    try {
      for (auto [n, t] : llvm::zip(rank.paramNames, rank.paramLeaves))
        if (!rank.notOwned.count(n))
          rt::writeNpy(dumpedParamPath(options.dumpParamsDir, n),
                       tensorToNpy(t.detach().contiguous()));
      // The rest of the model's state, as a state_dict holds it: batch
      // norms' running statistics (this stage's), frozen parameters and
      // constant buffers (each by the stage holding its checkpoint home:
      // several stages may read one), parameters the loss never reads.
      NamedTensors rest = rank.buffers;
      for (auto &[n, t] : rank.constants) {
        auto home = rank.home.find(n);
        if (home == rank.home.end() || (home->second >= rank.firstSection &&
                                        home->second < rank.endSection))
          rest.emplace_back(n, t);
      }
      rest.insert(rest.end(), rank.unread.begin(), rank.unread.end());
      for (auto &[n, t] : rest)
        rt::writeNpy(dumpedParamPath(options.dumpParamsDir, n),
                     tensorToNpy(t.detach().contiguous()));
    } catch (const std::exception &e) {
      return jobError(job, "stage ") << stage << ": cannot dump parameters: "
                                     << e.what();
    }
  }
  return success();
}
