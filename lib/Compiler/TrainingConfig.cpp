//===- TrainingConfig.cpp - Parse and print the training configuration ----===//
//
// A strict reader for the JSON described in docs/training-config.md. Every
// check reports `<source>: <json path>: <what was expected>, got <value>`;
// the first failure is returned as an llvm::Error.
//
//===----------------------------------------------------------------------===//

#include "varuna/Compiler/TrainingConfig.h"
#include "varuna/Support/JSON.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <vector>

using namespace varuna;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

//===----------------------------------------------------------------------===//
// Names, equality, derived quantities
//===----------------------------------------------------------------------===//


int OptimizerConfig::stateCopies() const {
  switch (type) {
  case OptimizerKind::SGD:
    return momentum != 0.0 ? 1 : 0; // momentum buffer
  case OptimizerKind::AdamW:
  case OptimizerKind::LAMB:
    return 2; // first and second moments
  }
  llvm_unreachable("unknown OptimizerKind");
}

std::vector<std::string>
varuna::unmatchedNoWeightDecay(const OptimizerConfig &config,
                               const std::vector<std::string> &names) {
  std::vector<std::string> out;
  for (const std::string &s : config.noWeightDecay)
    if (llvm::none_of(names, [&](const std::string &n) {
          return StringRef(n).contains(s);
        }))
      out.push_back(s);
  return out;
}

bool varuna::operator==(const OptimizerConfig &a, const OptimizerConfig &b) {
  return a.type == b.type && a.lr == b.lr && a.momentum == b.momentum &&
         a.weightDecay == b.weightDecay && a.betas == b.betas &&
         a.eps == b.eps && a.noWeightDecay == b.noWeightDecay &&
         a.noWeightDecay1d == b.noWeightDecay1d;
}

bool varuna::operator==(const LossScaleConfig &a, const LossScaleConfig &b) {
  return a.initial == b.initial && a.growthFactor == b.growthFactor &&
         a.backoffFactor == b.backoffFactor &&
         a.growthInterval == b.growthInterval;
}

bool varuna::operator==(const LRSchedule &a, const LRSchedule &b) {
  return a.warmupSteps == b.warmupSteps && a.decay == b.decay &&
         a.decaySteps == b.decaySteps && a.minLr == b.minLr;
}

double LRSchedule::lrAt(int64_t step, double lr) const {
  if (step < warmupSteps)
    return lr * double(step + 1) / double(warmupSteps);
  if (decay == Decay::None)
    return lr;
  double p = std::min(1.0, double(step - warmupSteps) /
                               double(std::max<int64_t>(decaySteps, 1)));
  double f = decay == Decay::Linear ? 1 - p : (1 + std::cos(M_PI * p)) / 2;
  return minLr + (lr - minLr) * f;
}

static StringRef stringifyDecay(LRSchedule::Decay d) {
  switch (d) {
  case LRSchedule::Decay::None:
    return "none";
  case LRSchedule::Decay::Linear:
    return "linear";
  case LRSchedule::Decay::Cosine:
    return "cosine";
  }
  return "none";
}

bool varuna::operator==(const TrainingConfig &a, const TrainingConfig &b) {
  return a.optimizer == b.optimizer && a.lrSchedule == b.lrSchedule &&
         a.clipGradNorm == b.clipGradNorm &&
         a.precision == b.precision && a.lossScale == b.lossScale &&
         a.needsOverflowCheck() == b.needsOverflowCheck() &&
         a.globalBatchSize == b.globalBatchSize &&
         a.microBatchSize == b.microBatchSize;
}

//===----------------------------------------------------------------------===//
// toJSON
//===----------------------------------------------------------------------===//

json::Value TrainingConfig::toJSON() const {
  json::Object opt{{"type", stringifyOptimizer(optimizer.type)},
                   {"lr", optimizer.lr},
                   {"weight_decay", optimizer.weightDecay}};
  if (optimizer.type == OptimizerKind::SGD) {
    opt["momentum"] = optimizer.momentum;
  } else {
    opt["betas"] = json::Array{optimizer.betas[0], optimizer.betas[1]};
    opt["eps"] = optimizer.eps;
  }
  if (!optimizer.noWeightDecay.empty()) {
    json::Array patterns;
    for (const std::string &p : optimizer.noWeightDecay)
      patterns.push_back(p);
    opt["no_weight_decay"] = std::move(patterns);
  }
  if (optimizer.noWeightDecay1d)
    opt["no_weight_decay_1d"] = true;

  json::Object root{{"optimizer", std::move(opt)},
                    {"precision", stringifyPrecision(precision)}};
  if (lrSchedule.active()) {
    json::Object sched{{"warmup_steps", lrSchedule.warmupSteps},
                       {"decay", stringifyDecay(lrSchedule.decay)}};
    if (lrSchedule.decay != LRSchedule::Decay::None) {
      sched["decay_steps"] = lrSchedule.decaySteps;
      sched["min_lr"] = lrSchedule.minLr;
    }
    root["lr_schedule"] = std::move(sched);
  }
  if (clipGradNorm)
    root["clip_grad_norm"] = *clipGradNorm;
  if (needsOverflowCheck())
    root["loss_scale"] =
        json::Object{{"initial", lossScale.initial},
                     {"growth_factor", lossScale.growthFactor},
                     {"backoff_factor", lossScale.backoffFactor},
                     {"growth_interval", lossScale.growthInterval}};
  if (globalBatchSize)
    root["global_batch_size"] = *globalBatchSize;
  if (microBatchSize)
    root["micro_batch_size"] = *microBatchSize;
  return json::Value(std::move(root));
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

/// The shortest decimal form of `d` that reads back as `d` (`0.1`, not
/// `0.10000000000000001`).
std::string formatNumber(double d) {
  char buf[32];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  return buf;
}

/// A short rendering of a JSON value for "got ..." in messages: scalars as
/// written, containers by kind.
/// A number as "%.8g" prints it (1e+39).
std::string formatShort(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.8g", d);
  return buf;
}

std::string describe(const json::Value &v) {
  switch (v.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return *v.getAsBoolean() ? "true" : "false";
  case json::Value::Number:
    if (std::optional<int64_t> i = v.getAsInteger())
      return std::to_string(*i);
    if (std::optional<uint64_t> u = v.getAsUINT64())
      return std::to_string(*u);
    return formatNumber(*v.getAsNumber());
  case json::Value::String: {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << v; // quoted and escaped
    return os.str();
  }
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  llvm_unreachable("unknown json::Value kind");
}

/// Joins a JSON path: `optimizer` + `lr` -> `optimizer.lr`.
std::string child(StringRef path, StringRef key) {
  return path.empty() ? key.str() : (path + "." + key).str();
}

/// A number range, printed into the "expected" part of messages.
struct Range {
  enum Kind { Positive, NonNegative, UnitHalfOpen, UnitOpen, GreaterThanOne };
  Kind kind;
  bool contains(double d) const {
    switch (kind) {
    case Positive:
      return d > 0;
    case NonNegative:
      return d >= 0;
    case UnitHalfOpen:
      return d >= 0 && d < 1;
    case UnitOpen:
      return d > 0 && d < 1;
    case GreaterThanOne:
      return d > 1;
    }
    llvm_unreachable("unknown Range kind");
  }
  StringRef str() const {
    switch (kind) {
    case Positive:
      return "> 0";
    case NonNegative:
      return ">= 0";
    case UnitHalfOpen:
      return "in [0, 1)";
    case UnitOpen:
      return "in (0, 1)";
    case GreaterThanOne:
      return "> 1";
    }
    llvm_unreachable("unknown Range kind");
  }
};

/// llvm::json keeps one of two equal keys without saying so; a configuration
/// with `"lr"` twice is a mistake. `text` is valid JSON (json::parse accepted
/// it), so a flat scan suffices. Returns the JSON path of the first repeated
/// key, or nothing.
std::optional<std::string> findDuplicateKey(StringRef text) {
  struct Level {
    bool isObject;
    std::set<std::string> keys;
    std::string key;    // object: current key
    unsigned index = 0; // array: current element
    bool expectKey = true;
  };
  std::vector<Level> stack;
  auto pathOf = [&](StringRef last) {
    std::string path;
    for (const Level &l : stack) {
      if (&l == &stack.back())
        break;
      if (l.isObject)
        path += (path.empty() ? "" : ".") + l.key;
      else
        path += "[" + std::to_string(l.index) + "]";
    }
    return path.empty() ? last.str() : path + "." + last.str();
  };
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (c == '"') {
      size_t start = i++;
      while (i < e && text[i] != '"')
        i += text[i] == '\\' ? 2 : 1;
      if (!stack.empty() && stack.back().isObject && stack.back().expectKey) {
        Level &l = stack.back();
        // Keys are compared decoded: "preci\u0073ion" is "precision".
        Expected<json::Value> key = json::parse(text.slice(start, i + 1));
        std::optional<StringRef> str =
            key ? key->getAsString() : std::optional<StringRef>();
        l.key = str ? str->str() : text.slice(start + 1, i).str();
        if (!key)
          llvm::consumeError(key.takeError());
        l.expectKey = false;
        if (!l.keys.insert(l.key).second)
          return pathOf(l.key);
      }
    } else if (c == '{' || c == '[') {
      stack.push_back(Level{c == '{', {}, {}, 0, true});
    } else if (c == '}' || c == ']') {
      if (!stack.empty())
        stack.pop_back();
    } else if (c == ',' && !stack.empty()) {
      if (stack.back().isObject)
        stack.back().expectKey = true;
      else
        ++stack.back().index;
    }
  }
  return std::nullopt;
}

class ConfigParser {
public:
  explicit ConfigParser(StringRef source) : source(source) {}

  Expected<TrainingConfig> parse(StringRef text);

private:
  Error error(StringRef path, const Twine &msg) const {
    std::string where = path.empty() ? "" : (path + ": ").str();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   (source + ": " + where + msg).str());
  }

  Error checkKeys(const json::Object &obj, StringRef path,
                  llvm::ArrayRef<StringRef> allowed) const;
  Expected<const json::Object *> getObject(const json::Value &v,
                                           StringRef path) const;
  Expected<double> getNumber(const json::Value &v, StringRef path,
                             Range range) const;
  Expected<int64_t> getPositiveInteger(const json::Value &v,
                                       StringRef path) const;
  Expected<StringRef> getString(const json::Value &v, StringRef path) const;

  Error parseOptimizer(const json::Value &v, OptimizerConfig &out) const;
  Error parseLRSchedule(const json::Value &v, double lr,
                        LRSchedule &out) const;
  Error parseLossScale(const json::Value &v, LossScaleConfig &out) const;

  StringRef source;
};

} // namespace

Error ConfigParser::checkKeys(const json::Object &obj, StringRef path,
                              llvm::ArrayRef<StringRef> allowed) const {
  // json::Object is unordered: report the smallest unknown key so the
  // message does not depend on hashing.
  std::optional<std::string> unknown;
  for (const auto &kv : obj) {
    StringRef key = kv.first;
    if (llvm::is_contained(allowed, key))
      continue;
    if (!unknown || key < *unknown)
      unknown = key.str();
  }
  if (!unknown)
    return Error::success();
  // Control characters escaped: a NUL ("precision\u0000x") cut the message.
  std::string shown;
  llvm::raw_string_ostream os(shown);
  llvm::printEscapedString(*unknown, os);
  return error(path, "unknown key '" + os.str() + "' (expected one of: " +
                         llvm::join(allowed, ", ") + ")");
}

Expected<const json::Object *> ConfigParser::getObject(const json::Value &v,
                                                       StringRef path) const {
  if (const json::Object *obj = v.getAsObject())
    return obj;
  return error(path, "expected an object, got " + describe(v));
}

Expected<double> ConfigParser::getNumber(const json::Value &v, StringRef path,
                                         Range range) const {
  std::optional<double> d = v.getAsNumber();
  if (!d || !std::isfinite(*d) || !range.contains(*d))
    return error(path,
                 "expected a number " + range.str() + ", got " + describe(v));
  // Training computes in fp32: an lr of 1e39 failed in the first step, in
  // ATen's words ("cannot be converted to type float without overflow").
  if (*d > double(std::numeric_limits<float>::max()))
    return error(path, "expected at most 3.4028235e38 (the largest fp32 "
                       "number: training computes in fp32), got " +
                           describe(v));
  return *d;
}

Expected<int64_t> ConfigParser::getPositiveInteger(const json::Value &v,
                                                   StringRef path) const {
  std::optional<int64_t> i = v.getAsInteger();
  if (!i || *i < 1)
    return error(path, "expected an integer >= 1, got " + describe(v));
  return *i;
}

Expected<StringRef> ConfigParser::getString(const json::Value &v,
                                            StringRef path) const {
  if (std::optional<StringRef> s = v.getAsString())
    return *s;
  return error(path, "expected a string, got " + describe(v));
}

Error ConfigParser::parseOptimizer(const json::Value &v,
                                   OptimizerConfig &out) const {
  static constexpr StringRef path = "optimizer";
  Expected<const json::Object *> objOr = getObject(v, path);
  if (!objOr)
    return objOr.takeError();
  const json::Object &obj = **objOr;
  if (Error e =
          checkKeys(obj, path,
                    {"type", "lr", "momentum", "weight_decay", "betas", "eps",
                     "no_weight_decay", "no_weight_decay_1d"}))
    return e;

  // The type first: it decides which of the other keys are allowed.
  if (const json::Value *t = obj.get("type")) {
    std::string p = child(path, "type");
    std::optional<StringRef> s = t->getAsString();
    std::optional<OptimizerKind> kind;
    if (s)
      for (OptimizerKind k :
           {OptimizerKind::SGD, OptimizerKind::AdamW, OptimizerKind::LAMB})
        if (*s == stringifyOptimizer(k))
          kind = k;
    if (!kind)
      return error(p, "expected one of \"sgd\", \"adamw\", \"lamb\", got " +
                          describe(*t));
    out.type = *kind;
  }
  bool isSGD = out.type == OptimizerKind::SGD;
  StringRef name = stringifyOptimizer(out.type);
  // torch.optim.AdamW's default decay, so that {"type": "adamw"} trains as
  // a PyTorch user's AdamW(params) does.
  if (obj.get("type") && out.type == OptimizerKind::AdamW &&
      !obj.get("weight_decay"))
    out.weightDecay = kAdamWDefaultWeightDecay;

  if (const json::Value *x = obj.get("lr")) {
    Expected<double> d = getNumber(*x, child(path, "lr"), {Range::Positive});
    if (!d)
      return d.takeError();
    out.lr = *d;
  }
  if (const json::Value *x = obj.get("momentum")) {
    std::string p = child(path, "momentum");
    if (!isSGD)
      return error(p, "not used by the " + name +
                          " optimizer (only \"sgd\" takes momentum)");
    Expected<double> d = getNumber(*x, p, {Range::UnitHalfOpen});
    if (!d)
      return d.takeError();
    out.momentum = *d;
  }
  if (const json::Value *x = obj.get("weight_decay")) {
    Expected<double> d =
        getNumber(*x, child(path, "weight_decay"), {Range::NonNegative});
    if (!d)
      return d.takeError();
    out.weightDecay = *d;
  }
  if (const json::Value *x = obj.get("betas")) {
    std::string p = child(path, "betas");
    if (isSGD)
      return error(p, "not used by the sgd optimizer (only \"adamw\" and "
                      "\"lamb\" take betas)");
    const json::Array *arr = x->getAsArray();
    if (!arr || arr->size() != 2) {
      std::string got =
          arr ? "an array of " + std::to_string(arr->size()) + " elements"
              : describe(*x);
      return error(p, "expected an array of 2 numbers in [0, 1), got " + got);
    }
    for (unsigned i = 0; i < 2; ++i) {
      Expected<double> d = getNumber(
          (*arr)[i], p + "[" + std::to_string(i) + "]", {Range::UnitHalfOpen});
      if (!d)
        return d.takeError();
      out.betas[i] = *d;
    }
  }
  if (const json::Value *x = obj.get("eps")) {
    std::string p = child(path, "eps");
    if (isSGD)
      return error(p, "not used by the sgd optimizer (only \"adamw\" and "
                      "\"lamb\" take eps)");
    Expected<double> d = getNumber(*x, p, {Range::Positive});
    if (!d)
      return d.takeError();
    out.eps = *d;
  }
  if (const json::Value *x = obj.get("no_weight_decay")) {
    std::string p = child(path, "no_weight_decay");
    const json::Array *arr = x->getAsArray();
    if (!arr)
      return error(p, "expected an array of strings (parts of parameter "
                      "names, e.g. [\"bias\", \"norm\"]), got " +
                          describe(*x));
    for (size_t i = 0; i < arr->size(); ++i) {
      std::string pi = p + "[" + std::to_string(i) + "]";
      Expected<StringRef> s = getString((*arr)[i], pi);
      if (!s)
        return s.takeError();
      if (s->empty())
        return error(pi, "an empty string would match every parameter (set "
                         "weight_decay to 0 instead)");
      out.noWeightDecay.push_back(s->str());
    }
  }
  if (const json::Value *x = obj.get("no_weight_decay_1d")) {
    std::optional<bool> b = x->getAsBoolean();
    if (!b)
      return error(child(path, "no_weight_decay_1d"),
                   "expected true or false, got " + describe(*x));
    out.noWeightDecay1d = *b;
  }
  if (out.weightDecay == 0.0)
    for (StringRef key : {"no_weight_decay", "no_weight_decay_1d"})
      if (obj.get(key))
        return error(child(path, key),
                     "weight_decay is 0: there is no decay to leave out");
  return Error::success();
}

Error ConfigParser::parseLRSchedule(const json::Value &v, double lr,
                                    LRSchedule &out) const {
  static constexpr StringRef path = "lr_schedule";
  Expected<const json::Object *> objOr = getObject(v, path);
  if (!objOr)
    return objOr.takeError();
  const json::Object &obj = **objOr;
  if (Error e = checkKeys(obj, path,
                          {"warmup_steps", "decay", "decay_steps", "min_lr"}))
    return e;
  if (const json::Value *x = obj.get("warmup_steps")) {
    std::optional<int64_t> i = x->getAsInteger();
    if (!i || *i < 0)
      return error(child(path, "warmup_steps"),
                   "expected an integer >= 0, got " + describe(*x));
    out.warmupSteps = *i;
  }
  if (const json::Value *x = obj.get("decay")) {
    std::optional<StringRef> s = x->getAsString();
    std::optional<LRSchedule::Decay> d;
    if (s)
      for (LRSchedule::Decay k : {LRSchedule::Decay::None,
                                  LRSchedule::Decay::Linear,
                                  LRSchedule::Decay::Cosine})
        if (*s == stringifyDecay(k))
          d = k;
    if (!d)
      return error(child(path, "decay"),
                   "expected one of \"none\", \"linear\", \"cosine\", got " +
                       describe(*x));
    out.decay = *d;
  }
  bool decays = out.decay != LRSchedule::Decay::None;
  for (StringRef key : {"decay_steps", "min_lr"})
    if (!decays && obj.get(key))
      return error(child(path, key),
                   "only meaningful with \"decay\": \"linear\" or \"cosine\"");
  if (const json::Value *x = obj.get("decay_steps")) {
    Expected<int64_t> i = getPositiveInteger(*x, child(path, "decay_steps"));
    if (!i)
      return i.takeError();
    out.decaySteps = *i;
  } else if (decays) {
    return error(child(path, "decay_steps"),
                 "missing: how many steps the decay takes");
  }
  if (const json::Value *x = obj.get("min_lr")) {
    std::optional<double> d = x->getAsNumber();
    if (!d || !std::isfinite(*d) || *d < 0 || *d > lr)
      return error(child(path, "min_lr"),
                   "expected a number in [0, optimizer.lr = " +
                       describe(json::Value(lr)) + "], got " + describe(*x));
    out.minLr = *d;
  }
  return Error::success();
}

Error ConfigParser::parseLossScale(const json::Value &v,
                                   LossScaleConfig &out) const {
  static constexpr StringRef path = "loss_scale";
  Expected<const json::Object *> objOr = getObject(v, path);
  if (!objOr)
    return objOr.takeError();
  const json::Object &obj = **objOr;
  if (Error e = checkKeys(
          obj, path,
          {"initial", "growth_factor", "backoff_factor", "growth_interval"}))
    return e;

  struct NumberField {
    StringRef key;
    Range range;
    double *dest;
  } fields[] = {
      {"initial", {Range::Positive}, &out.initial},
      {"growth_factor", {Range::GreaterThanOne}, &out.growthFactor},
      {"backoff_factor", {Range::UnitOpen}, &out.backoffFactor},
  };
  for (const NumberField &f : fields) {
    if (const json::Value *x = obj.get(f.key)) {
      Expected<double> d = getNumber(*x, child(path, f.key), f.range);
      if (!d)
        return d.takeError();
      *f.dest = *d;
    }
  }
  // The scale is an fp32 number, as GradScaler keeps it (at most fp32's
  // largest, as every number: getNumber).
  if (out.initial < double(std::numeric_limits<float>::min()))
    return error(child(path, "initial"),
                 "expected at least 1.1754944e-38 (the smallest normal fp32 "
                 "number: the scale is kept in fp32), got " +
                     formatShort(out.initial));
  if (const json::Value *x = obj.get("growth_interval")) {
    Expected<int64_t> i =
        getPositiveInteger(*x, child(path, "growth_interval"));
    if (!i)
      return i.takeError();
    out.growthInterval = *i;
  }
  return Error::success();
}

Expected<TrainingConfig> ConfigParser::parse(StringRef text) {
  Expected<json::Value> root = parseUserJSON(text);
  if (!root) {
    // json::ParseError logs as "[line:col, byte=N]: message"; turn that into
    // the compiler-style "file:line:col: invalid JSON: message".
    std::string msg = llvm::toString(root.takeError());
    StringRef rest = msg;
    StringRef loc;
    if (rest.consume_front("[")) {
      std::tie(loc, rest) = rest.split("]: ");
      loc = loc.split(',').first;
    }
    if (loc.empty() || rest.empty())
      return error("", "invalid JSON: " + msg);
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        (source + ":" + loc + ": invalid JSON: " + rest).str());
  }

  if (std::optional<std::string> dup = findDuplicateKey(text))
    return error(*dup, "duplicate key");

  const json::Object *obj = root->getAsObject();
  if (!obj)
    return error("", "expected a JSON object at the top level, got " +
                         describe(*root));
  if (Error e =
          checkKeys(*obj, "",
                    {"optimizer", "lr_schedule", "clip_grad_norm", "precision",
                     "loss_scale", "global_batch_size", "micro_batch_size"}))
    return std::move(e);

  TrainingConfig cfg;
  if (const json::Value *x = obj->get("optimizer"))
    if (Error e = parseOptimizer(*x, cfg.optimizer))
      return std::move(e);

  if (const json::Value *x = obj->get("lr_schedule"))
    if (Error e = parseLRSchedule(*x, cfg.optimizer.lr, cfg.lrSchedule))
      return std::move(e);

  if (const json::Value *x = obj->get("clip_grad_norm")) {
    Expected<double> d = getNumber(*x, "clip_grad_norm", {Range::Positive});
    if (!d)
      return d.takeError();
    cfg.clipGradNorm = *d;
  }

  if (const json::Value *x = obj->get("precision")) {
    std::optional<StringRef> s = x->getAsString();
    std::optional<Precision> p;
    if (s)
      for (Precision q : {Precision::FP32, Precision::BF16, Precision::FP16})
        if (*s == stringifyPrecision(q))
          p = q;
    if (!p)
      return error("precision",
                   "expected one of \"fp32\", \"bf16\", \"fp16\", got " +
                       describe(*x));
    cfg.precision = *p;
  }

  if (const json::Value *x = obj->get("loss_scale")) {
    if (cfg.precision == Precision::FP32)
      return error("loss_scale", "only meaningful with precision \"fp16\" or "
                                 "\"bf16\", but precision is \"fp32\"");
    if (Error e = parseLossScale(*x, cfg.lossScale))
      return std::move(e);
    cfg.lossScaleGiven = true;
  }

  if (const json::Value *x = obj->get("global_batch_size")) {
    Expected<int64_t> i = getPositiveInteger(*x, "global_batch_size");
    if (!i)
      return i.takeError();
    cfg.globalBatchSize = *i;
  }
  if (const json::Value *x = obj->get("micro_batch_size")) {
    Expected<int64_t> i = getPositiveInteger(*x, "micro_batch_size");
    if (!i)
      return i.takeError();
    cfg.microBatchSize = *i;
  }
  if (cfg.globalBatchSize && cfg.microBatchSize &&
      *cfg.globalBatchSize % *cfg.microBatchSize != 0)
    return error("micro_batch_size",
                 "expected a divisor of global_batch_size " +
                     Twine(*cfg.globalBatchSize) + ", got " +
                     Twine(*cfg.microBatchSize));
  return cfg;
}

Expected<TrainingConfig> varuna::parseTrainingConfig(StringRef text,
                                                     StringRef source) {
  return ConfigParser(source).parse(text);
}

Expected<TrainingConfig> varuna::loadTrainingConfig(StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return llvm::createStringError(
        buf.getError(), (path + ": cannot read training configuration: " +
                         buf.getError().message())
                            .str());
  return parseTrainingConfig((*buf)->getBuffer(), path);
}

/// JOBDIR/manifest.json's top-level object (errors name the file); `path`
/// gets the file's path.
static Expected<json::Object> readJobManifest(StringRef jobDir,
                                              llvm::SmallString<256> &path) {
  path = jobDir;
  llvm::sys::path::append(path, "manifest.json");
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return llvm::createStringError(
        buf.getError(),
        "cannot read '" + path + "': " + buf.getError().message() +
            (buf.getError() == std::errc::no_such_file_or_directory
                 ? " (a job directory is written by varuna-compile MODEL -o " +
                       jobDir.str() + ")"
                 : std::string()));
  auto json = llvm::json::parse((*buf)->getBuffer());
  if (!json)
    return llvm::createStringError(
        std::make_error_code(std::errc::invalid_argument),
        "'" + path + "': " + llvm::toString(json.takeError()));
  if (json::Object *obj = json->getAsObject())
    return std::move(*obj);
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument),
      "'" + path + "' is not a JSON object");
}

Expected<json::Object> varuna::loadJobManifest(StringRef jobDir) {
  llvm::SmallString<256> path;
  return readJobManifest(jobDir, path);
}

Expected<TrainingConfig> varuna::loadJobTrainingConfig(StringRef jobDir) {
  llvm::SmallString<256> manifest;
  Expected<json::Object> obj = readJobManifest(jobDir, manifest);
  if (!obj)
    return obj.takeError();
  json::Value *cfg = obj->get("config");
  if (!cfg)
    return llvm::createStringError(
        std::make_error_code(std::errc::invalid_argument),
        "'" + manifest + "' has no training configuration");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << *cfg;
  return parseTrainingConfig(os.str(), manifest);
}

Expected<std::vector<std::string>>
varuna::loadJobParameterNames(StringRef jobDir) {
  llvm::SmallString<256> manifest;
  Expected<json::Object> obj = readJobManifest(jobDir, manifest);
  if (!obj)
    return obj.takeError();
  std::vector<std::string> names;
  std::set<std::string> seen;
  const json::Array *sections = obj->getArray("sections");
  for (const json::Value &sec : sections ? *sections : json::Array()) {
    const json::Object *so = sec.getAsObject();
    const json::Array *params = so ? so->getArray("parameters") : nullptr;
    for (const json::Value &p : params ? *params : json::Array())
      if (std::optional<StringRef> n = p.getAsString())
        if (seen.insert(n->str()).second)
          names.push_back(n->str());
  }
  if (!sections)
    return llvm::createStringError(
        std::make_error_code(std::errc::invalid_argument),
        "'" + manifest + "' has no sections");
  return names;
}
