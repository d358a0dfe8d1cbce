//===- CheckpointIO.cpp - Parameters <-> per-section checkpoints ----------===//

#include "varuna/Target/ATen/CheckpointIO.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/runtime/Agreement.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>

using namespace mlir;

namespace varuna {

namespace {

std::string safetensorsDType(at::ScalarType t) {
  switch (t) {
  case at::kFloat: return "F32";
  case at::kDouble: return "F64";
  case at::kHalf: return "F16";
  case at::kBFloat16: return "BF16";
  case at::kLong: return "I64";
  case at::kInt: return "I32";
  case at::kChar: return "I8";
  case at::kByte: return "U8";
  case at::kBool: return "BOOL";
  default: throw std::runtime_error("cannot checkpoint a tensor of type " +
                                    std::string(c10::toString(t)));
  }
}

at::ScalarType scalarTypeOf(const std::string &d) {
  static const std::map<std::string, at::ScalarType> types = {
      {"F32", at::kFloat}, {"F64", at::kDouble}, {"F16", at::kHalf},
      {"BF16", at::kBFloat16}, {"I64", at::kLong}, {"I32", at::kInt},
      {"I8", at::kChar}, {"U8", at::kByte}, {"BOOL", at::kBool}};
  auto it = types.find(d);
  if (it == types.end())
    throw std::runtime_error("checkpoint tensor of unsupported dtype " + d);
  return it->second;
}

/// A view of the tensor's bytes, not a copy (a checkpoint of a big stage
/// would otherwise hold its whole state twice): the TensorBytes keeps the
/// (contiguous, CPU) tensor alive, and nothing changes it before the
/// checkpoint is written -- the trainers write between steps.
rt::TensorBytes toBytes(const std::string &name, const at::Tensor &t) {
  auto c = std::make_shared<at::Tensor>(t.detach().contiguous().cpu());
  rt::TensorBytes b;
  b.name = name;
  b.dtype = safetensorsDType(c->scalar_type());
  b.shape.assign(c->sizes().begin(), c->sizes().end());
  b.view = static_cast<const uint8_t *>(c->data_ptr());
  b.viewSize = static_cast<size_t>(c->numel() * c->element_size());
  b.keepAlive = std::move(c);
  return b;
}

at::Tensor fromBytes(const rt::TensorBytes &b) {
  at::Tensor t =
      at::empty(b.shape, at::TensorOptions().dtype(scalarTypeOf(b.dtype)));
  if (static_cast<size_t>(t.numel() * t.element_size()) != b.byteSize())
    throw std::runtime_error("checkpoint tensor '" + b.name + "' has " +
                             std::to_string(b.byteSize()) +
                             " bytes for its shape");
  if (b.byteSize() > 0)
    std::memcpy(t.data_ptr(), b.bytes(), b.byteSize());
  return t;
}

const char *const kStateKinds[] = {"momentum_buffer", "exp_avg", "exp_avg_sq"};

} // namespace

std::map<std::string, int> checkpointHomes(ArrayRef<func::FuncOp> sections) {
  std::map<std::string, int> home;
  for (auto [k, s] : llvm::enumerate(sections))
    if (auto names = s->getAttrOfType<ArrayAttr>("varuna.params"))
      for (Attribute a : names)
        home.emplace(a.cast<StringAttr>().getValue().str(), k);
  // Frozen parameters (not in varuna.params) that a section reads, such as
  // the running statistics its batch_norms update.
  for (auto [k, s] : llvm::enumerate(sections)) {
    func::FuncOp f = s; // walk() is not const
    f.walk([&, k = k](GetParamOp get) {
      home.emplace(get.getName().str(), static_cast<int>(k));
    });
  }
  return home;
}

std::vector<rt::TensorBytes>
sectionTensors(int k, const std::map<std::string, int> &home,
               const NamedTensors &params, const rt::OptimizerState &state,
               const NamedTensors &frozen) {
  std::vector<rt::TensorBytes> out;
  for (auto &[name, t] : params) {
    auto it = home.find(name);
    if ((it == home.end() ? 0 : it->second) != k)
      continue;
    out.push_back(toBytes(name, t));
    for (const char *kind : kStateKinds) {
      auto st = state.find(name + "." + kind);
      if (st != state.end())
        out.push_back(
            toBytes(rt::optimizerStateTensorName(name, kind), st->second));
    }
  }
  for (auto &[name, t] : frozen) {
    auto it = home.find(name);
    if ((it == home.end() ? 0 : it->second) == k)
      out.push_back(toBytes(rt::frozenTensorName(name), t));
  }
  return out;
}

/// "adamw (exp_avg, exp_avg_sq)", "sgd (no state)": an optimizer as a
/// resume's errors name it.
static std::string describeOptimizer(llvm::StringRef type,
                                     llvm::StringRef stateNames) {
  return type.str() + " (" +
         (stateNames.empty() ? std::string("no state")
                             : "keeps " + stateNames.str()) +
         ")";
}

static std::string joinStateNames(const rt::Optimizer &optimizer) {
  std::string out;
  for (const std::string &n : optimizer.stateNames())
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

rt::TrainingState trainingState(int64_t step, const rt::Optimizer &optimizer,
                                at::Generator &generator,
                                const rt::LossScaler *scaler,
                                const RunSettings &run) {
  rt::TrainingState meta;
  meta["optimizer"] = stringifyOptimizer(optimizer.config().type).str();
  meta["optimizer_state"] = joinStateNames(optimizer);
  meta["global_batch"] = std::to_string(run.globalBatch);
  meta["seed"] = std::to_string(run.seed);
  if (run.microBatch > 0)
    meta["micro_batch"] = std::to_string(run.microBatch);
  meta["shape"] = run.shape;
  if (!run.trainingConfig.empty())
    meta["training_config"] = run.trainingConfig;
  if (scaler) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", scaler->scale());
    meta["loss_scale"] = buf;
    meta["loss_scale_good_steps"] = std::to_string(scaler->goodSteps());
  }
  meta["step"] = std::to_string(step);
  meta["optimizer_step"] = std::to_string(optimizer.stepCount());
  at::Tensor rng = generator.get_state();
  meta["rng_state"] = llvm::toHex(llvm::ArrayRef<uint8_t>(
      static_cast<const uint8_t *>(rng.data_ptr()), rng.numel()));
  return meta;
}

/// The leaves of two JSON texts that differ, "path there -> here" each
/// ("optimizer.lr 0.003 there, 0.01 here; clip_grad_norm 0.5 there, none
/// here"); "" when they are equal as JSON.
static std::string configDifferences(const std::string &thereText,
                                     const std::string &hereText) {
  llvm::Expected<llvm::json::Value> there = llvm::json::parse(thereText);
  llvm::Expected<llvm::json::Value> here = llvm::json::parse(hereText);
  if (!there || !here) {
    llvm::consumeError(there.takeError());
    llvm::consumeError(here.takeError());
    return "unreadable";
  }
  std::vector<std::string> parts;
  // Numbers as people write them (0.003), in arrays too: betas printed as
  // [0.90000000000000002,0.999].
  std::function<std::string(const llvm::json::Value *)> text =
      [&](const llvm::json::Value *v) {
        if (!v)
          return std::string("none");
        std::string s;
        if (const llvm::json::Array *a = v->getAsArray()) {
          for (const llvm::json::Value &e : *a)
            s += (s.empty() ? "" : ",") + text(&e);
          return "[" + s + "]";
        }
        if (std::optional<double> d = v->getAsNumber(); d && !v->getAsInteger())
          llvm::raw_string_ostream(s) << llvm::format("%.10g", *d);
        else
          llvm::raw_string_ostream(s) << *v;
        return s;
      };
  std::function<void(const std::string &, const llvm::json::Value *,
                     const llvm::json::Value *)>
      walk = [&](const std::string &path, const llvm::json::Value *a,
                 const llvm::json::Value *b) {
        const llvm::json::Object *oa = a ? a->getAsObject() : nullptr;
        const llvm::json::Object *ob = b ? b->getAsObject() : nullptr;
        if (oa && ob) {
          std::set<std::string> keys;
          for (const auto &kv : *oa)
            keys.insert(kv.first.str());
          for (const auto &kv : *ob)
            keys.insert(kv.first.str());
          for (const std::string &k : keys)
            walk(path.empty() ? k : path + "." + k, oa->get(k), ob->get(k));
          return;
        }
        if (!a || !b || *a != *b)
          parts.push_back(path + " " + text(a) + " there, " + text(b) +
                          " here");
      };
  walk("", &*there, &*here);
  std::string out;
  for (const std::string &p : parts)
    out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::vector<std::string> resumeWarnings(const rt::CheckpointInfo &ckpt,
                                        const RunSettings &run,
                                        const rt::Optimizer &optimizer) {
  std::vector<std::string> out;
  const rt::TrainingState &meta = ckpt.manifest.state;
  std::string mine = stringifyOptimizer(optimizer.config().type).str();
  auto it = meta.find("optimizer");
  if (it != meta.end() && it->second != mine &&
      meta.count("optimizer_state") &&
      meta.at("optimizer_state") == joinStateNames(optimizer))
    out.push_back("'" + ckpt.path + "' was written by a run with the " +
                  it->second + " optimizer; this one continues its state (" +
                  meta.at("optimizer_state") + ") with " + mine +
                  ", not as the interrupted run would have");
  it = meta.find("global_batch");
  if (it != meta.end() && it->second != std::to_string(run.globalBatch))
    out.push_back("'" + ckpt.path + "' was written by a run with --batch " +
                  it->second + "; this one has --batch " +
                  std::to_string(run.globalBatch) +
                  ": step s reads examples [s x batch, (s+1) x batch), so "
                  "from here on other examples than the interrupted run "
                  "would have read, and the hyper-parameters were set for " +
                  it->second + " (--batch " + it->second +
                  " continues it exactly)");
  it = meta.find("micro_batch");
  if (it != meta.end() && run.microBatchMatters && run.microBatch > 0 &&
      it->second != std::to_string(run.microBatch))
    out.push_back("'" + ckpt.path + "' was written by a run with micro-"
                  "batches of " + it->second + "; this one has " +
                  std::to_string(run.microBatch) +
                  ": the model normalizes over each micro-batch's examples "
                  "(batch norm, statistics over the batch), so it trains "
                  "differently from here on (--micro-batch " + it->second +
                  " continues it exactly)");
  // Random ops draw per (step, stage, replica) and micro-batch by micro-
  // batch: under another shape they draw otherwise (a prober saw a 2 x 2
  // run with dropout resumed under 1 x 1 leave the uninterrupted run's
  // losses with no word).
  auto shape = meta.find("shape");
  auto micro = meta.find("micro_batch");
  bool otherShape = shape != meta.end() && shape->second != run.shape;
  bool otherMicro = micro != meta.end() && run.microBatch > 0 &&
                    micro->second != std::to_string(run.microBatch);
  if (run.randomOps && (otherShape || otherMicro)) {
    std::string theirs =
        (shape != meta.end() ? shape->second : run.shape) + " ranks" +
        (micro != meta.end() ? " in micro-batches of " + micro->second : "");
    out.push_back("'" + ckpt.path + "' was written by a run of " + theirs +
                  "; this one has " + run.shape + " ranks in micro-batches "
                  "of " + std::to_string(run.microBatch) +
                  ": the model's dropout (or other random ops) draws per "
                  "stage, replica and micro-batch, so it draws otherwise "
                  "from here on and the losses leave the interrupted run's "
                  "(" + theirs + " continues it exactly)");
  }
  it = meta.find("training_config");
  if (it != meta.end() && !run.trainingConfig.empty() &&
      it->second != run.trainingConfig)
    if (std::string d = configDifferences(it->second, run.trainingConfig);
        !d.empty())
      out.push_back("'" + ckpt.path + "' was written by a run with another "
                    "training configuration (" + d + "): this run goes on "
                    "with its own (the interrupted run's continues it "
                    "exactly)");
  it = meta.find("seed");
  if (it != meta.end() && it->second != std::to_string(run.seed))
    out.push_back("'" + ckpt.path + "' was written by a run with --seed " +
                  it->second + "; this one has --seed " +
                  std::to_string(run.seed) +
                  ": dropout and other random ops draw differently from "
                  "here on (and --synthetic data holds other examples)");
  return out;
}

void reportCheckpointWritten(llvm::raw_ostream &log, const std::string &dir,
                             int64_t step, double bytes,
                             std::chrono::steady_clock::time_point start) {
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  if (seconds < 2.0)
    return;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s in %.1f s",
                bytes >= 1e9 ? bytes / 1e9 : bytes / 1e6,
                bytes >= 1e9 ? "GB" : "MB", seconds);
  log << "varuna-run: checkpoint '" << dir << "/"
      << rt::checkpointStepDirName(step) << "' written: " << buf << "\n";
}

std::string dumpedParamPath(const std::string &dir, const std::string &name) {
  std::string file;
  for (char c : name)
    file += c == '%' ? "%25" : c == '/' ? "%2F" : std::string(1, c);
  return dir + "/" + file + ".npy";
}

void pruneCheckpoints(llvm::raw_ostream &log, const std::string &dir,
                      int64_t keep) {
  if (keep <= 0)
    return;
  // By the files' sizes: reading every kept checkpoint whole after each
  // commit cost more than writing them (a resume reads them all anyway).
  rt::PruneResult r =
      rt::keepLast(dir, static_cast<int>(std::min<int64_t>(keep, INT32_MAX)),
                   /*readFiles=*/false);
  if (!r.error.empty())
    log << "varuna-run: warning: --keep-checkpoints " << keep
        << ": cannot remove the older checkpoints: " << r.error << "\n";
}

void tidyAfterResume(llvm::raw_ostream &log, const std::string &dir,
                     int64_t step, int64_t keep) {
  rt::PruneResult r = rt::removeNewerThan(dir, step);
  for (const std::string &path : r.removed)
    log << "varuna-run: removed '" << path
        << "' (torn, newer than the checkpoint resumed from: this run "
           "writes that step again)\n";
  if (!r.error.empty())
    log << "varuna-run: warning: cannot remove the checkpoints newer than "
           "step "
        << step << ": " << r.error << "\n";
  pruneCheckpoints(log, dir, keep);
}

std::optional<rt::CheckpointInfo> latestCheckpoint(const std::string &dir,
                                                   llvm::raw_ostream &log) {
  rt::FindResult found = rt::findLatestComplete(dir);
  for (const std::string &w : found.warnings)
    log << "varuna-run: warning: " << w << "\n";
  if (!found.error.empty())
    throw std::runtime_error(found.error);
  if (!found.latest)
    log << "varuna-run: no complete checkpoint in '" << dir
        << "'; starting from step 0\n";
  return found.latest;
}

std::optional<rt::CheckpointInfo>
agreedLatestCheckpoint(rt::Group &world, const std::string &dir,
                       llvm::raw_ostream &log) {
  std::optional<rt::CheckpointInfo> ckpt;
  int64_t step = -1;
  if (world.rank() == 0 && (ckpt = latestCheckpoint(dir, log)))
    step = ckpt->step;
  step = rt::valueOfRankZero(world, step);
  if (world.rank() == 0 || step < 0)
    return ckpt;
  rt::CheckpointInfo info;
  std::string why = rt::openCheckpoint(dir, step, &info);
  if (!why.empty())
    throw std::runtime_error("rank 0 resumes from step " +
                             std::to_string(step) + ", which this rank "
                             "cannot: " + why);
  return info;
}

int64_t restoreFrom(const rt::CheckpointInfo &ckpt,
                    const std::map<std::string, int> &home,
                    NamedTensors &params, NamedTensors &buffers,
                    rt::Optimizer &optimizer, at::Generator &generator,
                    bool strict, rt::LossScaler *scaler,
                    std::set<std::string> *restoredOut) {
  std::map<std::string, at::Tensor *> byName;
  std::set<int> files;
  for (NamedTensors *list : {&params, &buffers})
    for (auto &[name, t] : *list) {
      byName[name] = &t;
      auto it = home.find(name);
      files.insert(it == home.end() ? 0 : it->second);
    }
  if (strict)
    for (size_t k = 0; k < ckpt.manifest.files.size(); ++k)
      if (ckpt.sectionFile(k))
        files.insert(k);
  rt::OptimizerState state;
  std::set<std::string> restored, kinds;
  auto load = [&](int k) {
    rt::SafetensorsFile file = rt::loadSection(ckpt, k);
    for (const rt::TensorBytes &b : file.tensors) {
      llvm::StringRef name(b.name);
      if (name.consume_front("optimizer/")) {
        auto [kind, param] = name.split('/');
        kinds.insert(kind.str());
        if (byName.count(param.str()))
          state[param.str() + "." + kind.str()] = fromBytes(b);
        continue;
      }
      // Frozen parameters (rt::frozenTensorName) restore like buffers.
      name.consume_front("frozen/");
      auto it = byName.find(name.str());
      if (it == byName.end()) {
        if (strict)
          throw std::runtime_error("checkpoint has unknown parameter '" +
                                   b.name + "'");
        continue;
      }
      at::Tensor t = fromBytes(b);
      if (!it->second->sizes().equals(t.sizes()))
        throw std::runtime_error("checkpoint parameter '" + b.name +
                                 "' has another shape than the model's");
      at::NoGradGuard noGrad;
      it->second->copy_(t);
      restored.insert(name.str());
    }
  };
  std::set<int> loaded;
  for (int k : files)
    if (ckpt.sectionFile(k) && loaded.insert(k).second)
      load(k);
  // A job compiled again with other cut points numbers its sections
  // otherwise than the one that wrote the checkpoint: what is not in its
  // home section's file is looked for in the checkpoint's other files, read
  // only then (it said the checkpoint held 7 of 13 parameters, or had no
  // file for section 4).
  bool allFound = llvm::all_of(
      byName, [&](const auto &entry) { return restored.count(entry.first); });
  for (const rt::CheckpointFile &f : ckpt.manifest.files)
    if (!allFound && f.section >= 0 && loaded.insert(f.section).second)
      load(f.section);
  size_t restoredParams = 0;
  std::string missing;
  for (auto &[name, t] : params) {
    if (restored.count(name))
      ++restoredParams;
    else if (missing.empty())
      missing = name;
  }
  if (restoredParams != params.size())
    throw std::runtime_error("checkpoint '" + ckpt.path + "' holds " +
                             std::to_string(restoredParams) + " of the " +
                             std::to_string(params.size()) +
                             " parameters (missing '" + missing + "')");
  const rt::TrainingState &meta = ckpt.manifest.state;
  auto field = [&](const char *key) -> const std::string & {
    auto it = meta.find(key);
    if (it == meta.end())
      throw std::runtime_error("checkpoint '" + ckpt.path +
                               "' has no training state '" + key + "'");
    return it->second;
  };
  // The optimizer must be able to continue the checkpoint's: the same state
  // per parameter (recorded since the manifest names it; before, what the
  // files hold tells).
  std::vector<std::string> mine = optimizer.stateNames();
  std::string mineText = joinStateNames(optimizer);
  auto theirs = meta.find("optimizer_state");
  bool other = theirs != meta.end() ? theirs->second != mineText : false;
  for (const std::string &k : kinds)
    other |= std::find(mine.begin(), mine.end(), k) == mine.end();
  std::string stateless;
  if (!mine.empty() && std::stoll(field("optimizer_step")) > 0)
    for (auto &[name, t] : params)
      if (!state.count(name + "." + mine.front()) && stateless.empty())
        stateless = name;
  if (other || !stateless.empty()) {
    std::string was =
        meta.count("optimizer")
            ? describeOptimizer(meta.at("optimizer"),
                                theirs != meta.end() ? theirs->second : "")
            : kinds.empty() ? std::string("one that keeps no state")
                            : "one that keeps " +
                                  llvm::join(kinds.begin(), kinds.end(), ", ");
    throw std::runtime_error(
        "checkpoint '" + ckpt.path + "' was written with the optimizer " +
        was + ", which this run's " +
        describeOptimizer(stringifyOptimizer(optimizer.config().type),
                          mineText) +
        " cannot continue" +
        (other || stateless.empty() ? ""
                           : " (no " + mine.front() + " for '" + stateless +
                                 "')") +
        ": resume with the interrupted run's optimizer (the training "
        "config's optimizer.type; for sgd, momentum 0 or not)");
  }
  state["step"] = at::scalar_tensor(
      static_cast<int64_t>(std::stoll(field("optimizer_step"))),
      at::TensorOptions().dtype(at::kLong));
  optimizer.loadState(state);
  std::string rngBytes;
  if (!llvm::tryGetFromHex(field("rng_state"), rngBytes))
    throw std::runtime_error("checkpoint has a malformed rng_state");
  at::Tensor rngState = at::empty({static_cast<int64_t>(rngBytes.size())},
                                  at::TensorOptions().dtype(at::kByte));
  std::memcpy(rngState.data_ptr(), rngBytes.data(), rngBytes.size());
  generator.set_state(rngState);
  if (scaler && meta.count("loss_scale"))
    scaler->restore(std::stod(field("loss_scale")),
                    std::stoll(field("loss_scale_good_steps")));
  if (restoredOut)
    restoredOut->insert(restored.begin(), restored.end());
  return std::stoll(field("step"));
}

std::string nothingToTrain(int64_t at, int64_t steps) {
  return "the checkpoint holds " + std::to_string(at) +
         " steps and --steps is " + std::to_string(steps) +
         ": nothing to train (--steps counts from the start of the run; give "
         "more than " + std::to_string(at) + " to continue it)";
}

std::optional<std::string>
finishDeferredParams(ATenEvaluator &evaluator,
                     const std::set<std::string> &restored,
                     const rt::CheckpointInfo *checkpoint, std::string &note) {
  evaluator.deferUnreadableParams(false);
  note.clear();
  if (auto missed = evaluator.firstUnrestored(restored))
    return missed->second +
           (checkpoint
                ? "; the checkpoint " + checkpoint->path +
                      " does not hold it (checkpoints keep the trained "
                      "parameters and batch-norm statistics, not frozen "
                      "ones)"
                : std::string("; there is no checkpoint to take it from"));
  const auto &deferred = evaluator.deferredParams();
  if (!deferred.empty())
    note = std::to_string(deferred.size()) +
           " parameter(s) came from the checkpoint alone: the model file the "
           "job was compiled from is gone or changed (@" +
           deferred.begin()->first + " the first)";
  return std::nullopt;
}

} // namespace varuna
