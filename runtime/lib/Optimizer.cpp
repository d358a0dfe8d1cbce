//===- Optimizer.cpp - SGD, AdamW, LAMB and global-norm clipping ----------===//
//
// Each update mirrors the PyTorch code named in docs/optimizers.md operation
// by operation (the same ATen kernels with the same scalars), so fp32 results
// agree with torch.optim to rounding.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Optimizer.h"
#include "varuna/runtime/LossScaler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <tuple>
#include <sstream>
#include <stdexcept>

using namespace varuna;
using namespace varuna::rt;

namespace {

/// The shortest decimal that reads back as `v` (`0.1`, not
/// `0.10000000000000001`).
std::string formatNumber(double v) {
  std::string s;
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    s = os.str();
    if (std::strtod(s.c_str(), nullptr) == v)
      break;
  }
  return s;
}

[[noreturn]] void badField(const std::string &field,
                           const std::string &expected, double got) {
  throw std::invalid_argument(field + ": expected " + expected + ", got " +
                              formatNumber(got));
}

void checkPositive(const char *field, double v) {
  if (!std::isfinite(v) || v <= 0)
    badField(field, "a number > 0", v);
}
void checkNonNegative(const char *field, double v) {
  if (!std::isfinite(v) || v < 0)
    badField(field, "a number >= 0", v);
}
void checkUnitInterval(const char *field, double v) {
  if (!std::isfinite(v) || v < 0 || v >= 1)
    badField(field, "a number in [0, 1)", v);
}


std::string formatSizes(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

} // namespace

//===----------------------------------------------------------------------===//
// Optimizer: parameter bookkeeping and state
//===----------------------------------------------------------------------===//

/// The buffers of one parameter, in the order of bufferNames(). A buffer is
/// undefined until first used (SGD's momentum buffer before the first step).
struct Optimizer::ParamState {
  std::vector<at::Tensor> buffers;
  /// This parameter's weight decay in the step being taken
  /// (OptimizerConfig::weightDecayFor: 0 for the excluded ones).
  double weightDecay = 0.0;
};

Optimizer::Optimizer(const OptimizerConfig &config) : cfg(config) {}
Optimizer::~Optimizer() = default;

void Optimizer::setParamNames(std::vector<std::string> newNames) {
  if (steps != 0 || !paramStates.empty())
    throw std::invalid_argument(
        "setParamNames: must be called before the first step or loadState");
  std::set<std::string> seen;
  for (const std::string &n : newNames) {
    if (n.empty())
      throw std::invalid_argument("setParamNames: empty parameter name");
    if (!seen.insert(n).second)
      throw std::invalid_argument("setParamNames: duplicate parameter name '" +
                                  n + "'");
  }
  names = std::move(newNames);
}

void Optimizer::step(std::vector<at::Tensor> &params,
                     const std::vector<at::Tensor> &grads,
                     std::optional<double> globalGradNorm) {
  if (params.size() != grads.size())
    throw std::invalid_argument(
        "optimizer step: " + std::to_string(params.size()) +
        " parameters but " + std::to_string(grads.size()) + " gradients");
  if (names.empty()) {
    for (size_t i = 0; i < params.size(); ++i)
      names.push_back(std::to_string(i));
  } else if (names.size() != params.size()) {
    throw std::invalid_argument(
        "optimizer step: " + std::to_string(params.size()) +
        " parameters but " + std::to_string(names.size()) + " names");
  }
  if (globalGradNorm && *globalGradNorm < 0)
    throw std::invalid_argument("optimizer step: global gradient norm " +
                                formatNumber(*globalGradNorm) + " is negative");

  // Check everything before touching anything, so that a bad call leaves
  // parameters and state as they were.
  std::vector<std::string> expected = bufferNames();
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor &p = params[i], &g = grads[i];
    const std::string &name = names[i];
    if (!p.defined() || !g.defined())
      throw std::invalid_argument("optimizer step: parameter '" + name +
                                  "' has an undefined tensor or gradient");
    if (!at::isFloatingType(p.scalar_type()))
      throw std::invalid_argument("optimizer step: parameter '" + name +
                                  "' is not a floating-point tensor");
    if (g.scalar_type() != p.scalar_type())
      throw std::invalid_argument(
          "optimizer step: gradient of '" + name + "' has dtype " +
          std::string(c10::toString(g.scalar_type())) + ", parameter has " +
          std::string(c10::toString(p.scalar_type())));
    if (!g.sizes().equals(p.sizes()))
      throw std::invalid_argument("optimizer step: gradient of '" + name +
                                  "' has shape " + formatSizes(g.sizes()) +
                                  ", parameter has " + formatSizes(p.sizes()));
    auto it = paramStates.find(name);
    if (it == paramStates.end()) {
      if (steps > 0 && !expected.empty())
        throw std::invalid_argument("optimizer step: no state for parameter '" +
                                    name + "' after " + std::to_string(steps) +
                                    " steps (incomplete loadState?)");
      continue;
    }
    for (size_t b = 0; b < it->second->buffers.size(); ++b) {
      const at::Tensor &buf = it->second->buffers[b];
      if (buf.defined() && !buf.sizes().equals(p.sizes()))
        throw std::invalid_argument(
            "optimizer step: state '" + name + "." + expected[b] +
            "' has shape " + formatSizes(buf.sizes()) + ", parameter has " +
            formatSizes(p.sizes()));
    }
  }
  std::set<std::string> known(names.begin(), names.end());
  for (const auto &entry : paramStates)
    if (!known.count(entry.first))
      throw std::invalid_argument("optimizer step: state for '" + entry.first +
                                  "', which is not a parameter");

  c10::NoGradGuard noGrad;
  double gradScale = 1.0;
  if (usesGlobalGradNorm()) {
    double norm =
        globalGradNorm ? *globalGradNorm : std::sqrt(sumOfSquares(grads));
    if (norm > maxGradNorm)
      gradScale = norm / maxGradNorm;
  }
  ++steps;
  std::vector<ParamState *> states;
  for (size_t i = 0; i < params.size(); ++i) {
    std::unique_ptr<ParamState> &ps = paramStates[names[i]];
    if (!ps) {
      ps = std::make_unique<ParamState>();
      ps->buffers.resize(expected.size());
    }
    // Loaded state follows its parameter's device and dtype, as in
    // torch.optim.Optimizer.load_state_dict (a no-op when they agree).
    for (at::Tensor &buf : ps->buffers)
      if (buf.defined())
        buf = buf.to(params[i].options());
    ps->weightDecay = cfg.weightDecayFor(names[i], params[i].dim());
    states.push_back(ps.get());
  }
  updateAll(params, grads, states, gradScale);
}

void Optimizer::updateAll(std::vector<at::Tensor> &params,
                          const std::vector<at::Tensor> &grads,
                          const std::vector<ParamState *> &states,
                          double gradScale) {
  for (size_t i = 0; i < params.size(); ++i)
    update(params[i], grads[i], *states[i], gradScale);
}

OptimizerState Optimizer::state() const {
  OptimizerState out;
  out.emplace("step", at::scalar_tensor(steps, at::kLong));
  std::vector<std::string> bufNames = bufferNames();
  for (const auto &[name, ps] : paramStates)
    for (size_t b = 0; b < ps->buffers.size(); ++b)
      if (ps->buffers[b].defined())
        out.emplace(name + "." + bufNames[b], ps->buffers[b]);
  return out;
}

void Optimizer::loadState(const OptimizerState &named) {
  auto stepIt = named.find("step");
  if (stepIt == named.end())
    throw std::invalid_argument("loadState: missing 'step'");
  const at::Tensor &stepT = stepIt->second;
  if (!stepT.defined() || stepT.numel() != 1)
    throw std::invalid_argument("loadState: 'step' must be a scalar");
  double stepValue = stepT.item<double>();
  if (!(stepValue >= 0) || stepValue != std::floor(stepValue) ||
      stepValue > 9.0e15)
    throw std::invalid_argument(
        "loadState: 'step' must be an integer >= 0, got " +
        formatNumber(stepValue));

  std::vector<std::string> bufNames = bufferNames();
  std::set<std::string> known(names.begin(), names.end());
  std::map<std::string, std::unique_ptr<ParamState>> loaded;
  c10::NoGradGuard noGrad;
  for (const auto &[key, tensor] : named) {
    if (key == "step")
      continue;
    size_t dot = key.rfind('.');
    std::string name = dot == std::string::npos ? "" : key.substr(0, dot);
    std::string suffix = dot == std::string::npos ? key : key.substr(dot + 1);
    auto bufIt = std::find(bufNames.begin(), bufNames.end(), suffix);
    if (name.empty() || bufIt == bufNames.end()) {
      std::string expectedKeys;
      for (const std::string &b : bufNames)
        expectedKeys += ", '<param>." + b + "'";
      throw std::invalid_argument(
          "loadState: unknown key '" + key + "' for the " + stringifyOptimizer(cfg.type).str() +
          " optimizer (expected 'step'" + expectedKeys + ")");
    }
    if (!names.empty() && !known.count(name))
      throw std::invalid_argument("loadState: '" + key +
                                  "' names no parameter of this optimizer");
    if (!tensor.defined() || !at::isFloatingType(tensor.scalar_type()))
      throw std::invalid_argument("loadState: '" + key +
                                  "' is not a floating-point tensor");
    std::unique_ptr<ParamState> &ps = loaded[name];
    if (!ps) {
      ps = std::make_unique<ParamState>();
      ps->buffers.resize(bufNames.size());
    }
    ps->buffers[bufIt - bufNames.begin()] =
        tensor.detach().clone(at::MemoryFormat::Preserve);
  }
  for (const auto &[name, ps] : loaded) {
    for (size_t b = 0; b < bufNames.size(); ++b) {
      if (!ps->buffers[b].defined())
        throw std::invalid_argument("loadState: missing '" + name + "." +
                                    bufNames[b] + "'");
      if (!ps->buffers[b].sizes().equals(ps->buffers[0].sizes()))
        throw std::invalid_argument(
            "loadState: '" + name + "." + bufNames[b] + "' has shape " +
            formatSizes(ps->buffers[b].sizes()) + " but '" + name + "." +
            bufNames[0] + "' has " + formatSizes(ps->buffers[0].sizes()));
    }
  }
  paramStates = std::move(loaded);
  steps = static_cast<int64_t>(stepValue);
}

//===----------------------------------------------------------------------===//
// The three optimizers
//===----------------------------------------------------------------------===//

namespace {

/// torch.optim.sgd._single_tensor_sgd with dampening 0, nesterov False,
/// maximize False.
class SGDOptimizer final : public Optimizer {
public:
  explicit SGDOptimizer(const OptimizerConfig &c) : Optimizer(c) {}

private:
  std::vector<std::string> bufferNames() const override {
    if (cfg.momentum == 0)
      return {};
    return {"momentum_buffer"};
  }
  void update(at::Tensor &param, const at::Tensor &grad, ParamState &ps,
              double) override {
    at::Tensor g = grad;
    if (ps.weightDecay != 0)
      g = grad.add(param, ps.weightDecay);
    if (cfg.momentum != 0) {
      at::Tensor &buf = ps.buffers[0];
      if (!buf.defined())
        buf = g.detach().clone();
      else
        buf.mul_(cfg.momentum).add_(g, 1.0);
      g = buf;
    }
    param.add_(g, -cfg.lr);
  }
};

/// torch.optim.AdamW(fused=True), amsgrad False, maximize False: ATen's
/// fused kernel over all parameters at once (docs/optimizers.md has the
/// formula; it agrees with torch's single-tensor form to rounding).
class AdamWOptimizer final : public Optimizer {
public:
  explicit AdamWOptimizer(const OptimizerConfig &c) : Optimizer(c) {}

private:
  std::vector<std::string> bufferNames() const override {
    return {"exp_avg", "exp_avg_sq"};
  }
  void updateAll(std::vector<at::Tensor> &params,
                 const std::vector<at::Tensor> &grads,
                 const std::vector<ParamState *> &states,
                 double) override {
    // One call per (device, dtype) of each weight decay (param group), as
    // torch.optim groups them.
    std::map<std::tuple<double, std::string, at::ScalarType>,
             std::vector<size_t>>
        groups;
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor &expAvg = states[i]->buffers[0],
                 &expAvgSq = states[i]->buffers[1];
      if (!expAvg.defined())
        expAvg = at::zeros_like(params[i], at::MemoryFormat::Preserve);
      if (!expAvgSq.defined())
        expAvgSq = at::zeros_like(params[i], at::MemoryFormat::Preserve);
      groups[{states[i]->weightDecay, params[i].device().str(),
              params[i].scalar_type()}]
          .push_back(i);
    }
    for (const auto &[key, members] : groups) {
      std::vector<at::Tensor> p, g, m, v, stepTensors;
      for (size_t i : members) {
        p.push_back(params[i]);
        g.push_back(grads[i]);
        m.push_back(states[i]->buffers[0]);
        v.push_back(states[i]->buffers[1]);
        // The step count after this step, as torch keeps it (a float
        // scalar tensor per parameter, already incremented).
        stepTensors.push_back(at::scalar_tensor(
            static_cast<double>(steps),
            at::TensorOptions().dtype(at::kFloat).device(params[i].device())));
      }
      at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, stepTensors, cfg.lr,
                        cfg.betas[0], cfg.betas[1], std::get<0>(key), cfg.eps,
                        /*amsgrad=*/false, /*maximize=*/false);
    }
  }
  void update(at::Tensor &param, const at::Tensor &grad, ParamState &ps,
              double gradScale) override {
    std::vector<at::Tensor> one{param};
    updateAll(one, {grad}, {&ps}, gradScale);
  }
};

/// LAMB (You et al. 2019, Algorithm 2) as in apex's multi_tensor_lamb with
/// bias correction, grad averaging, adam_w_mode and use_nvlamb (the trust
/// ratio applies to every parameter).
class LAMBOptimizer final : public Optimizer {
public:
  explicit LAMBOptimizer(const OptimizerConfig &c) : Optimizer(c) {}

private:
  std::vector<std::string> bufferNames() const override {
    return {"exp_avg", "exp_avg_sq"};
  }
  void update(at::Tensor &param, const at::Tensor &grad, ParamState &ps,
              double gradScale) override {
    at::Tensor &m = ps.buffers[0], &v = ps.buffers[1];
    if (!m.defined())
      m = at::zeros_like(param, at::MemoryFormat::Preserve);
    if (!v.defined())
      v = at::zeros_like(param, at::MemoryFormat::Preserve);
    double beta1 = cfg.betas[0], beta2 = cfg.betas[1];
    at::Tensor g = gradScale != 1.0 ? grad / gradScale : grad;
    m.mul_(beta1).add_(g, 1 - beta1);
    v.mul_(beta2).addcmul_(g, g, 1 - beta2);
    double step = static_cast<double>(steps);
    double biasCorrection1 = 1 - std::pow(beta1, step);
    double biasCorrection2 = 1 - std::pow(beta2, step);
    at::Tensor update =
        (m / biasCorrection1) / (v / biasCorrection2).sqrt_().add_(cfg.eps);
    if (ps.weightDecay != 0)
      update.add_(param, ps.weightDecay);
    double paramNorm = param.norm().item<double>();
    double updateNorm = update.norm().item<double>();
    double trustRatio =
        paramNorm != 0 && updateNorm != 0 ? paramNorm / updateNorm : 1.0;
    param.add_(update, -cfg.lr * trustRatio);
  }
};

} // namespace

std::unique_ptr<Optimizer>
Optimizer::create(const OptimizerConfig &config,
                  std::optional<double> maxGradNorm) {
  checkPositive("optimizer.lr", config.lr);
  checkNonNegative("optimizer.weight_decay", config.weightDecay);
  std::unique_ptr<Optimizer> opt;
  switch (config.type) {
  case OptimizerKind::SGD:
    checkUnitInterval("optimizer.momentum", config.momentum);
    opt = std::make_unique<SGDOptimizer>(config);
    break;
  case OptimizerKind::AdamW:
  case OptimizerKind::LAMB:
    checkUnitInterval("optimizer.betas[0]", config.betas[0]);
    checkUnitInterval("optimizer.betas[1]", config.betas[1]);
    checkPositive("optimizer.eps", config.eps);
    if (config.type == OptimizerKind::AdamW)
      opt = std::make_unique<AdamWOptimizer>(config);
    else
      opt = std::make_unique<LAMBOptimizer>(config);
    break;
  }
  if (!opt)
    throw std::invalid_argument("optimizer.type: unknown optimizer kind " +
                                std::to_string(static_cast<int>(config.type)));
  if (maxGradNorm) {
    checkPositive("clip_grad_norm", *maxGradNorm);
    opt->maxGradNorm = *maxGradNorm;
  }
  return opt;
}

//===----------------------------------------------------------------------===//
// Global-norm clipping
//===----------------------------------------------------------------------===//

double varuna::rt::sumOfSquares(const std::vector<at::Tensor> &grads) {
  c10::NoGradGuard noGrad;
  double sum = 0;
  for (const at::Tensor &g : grads) {
    if (!g.defined() || g.numel() == 0)
      continue;
    // The norm accumulated in double (no double copy of the tensor), then
    // squared: exact to double rounding.
    double n = at::linalg_vector_norm(g, 2, std::nullopt, false, at::kDouble)
                   .item<double>();
    sum += n * n;
  }
  return sum;
}

double varuna::rt::clipGradNorm(const std::vector<at::Tensor> &grads,
                                double maxNorm,
                                std::optional<double> precomputedTotalNorm) {
  if (!std::isfinite(maxNorm) || maxNorm <= 0)
    badField("clipGradNorm: max_norm", "a number > 0", maxNorm);
  if (precomputedTotalNorm && *precomputedTotalNorm < 0)
    badField("clipGradNorm: total_norm", "a number >= 0",
             *precomputedTotalNorm);
  double total = precomputedTotalNorm ? *precomputedTotalNorm
                                      : std::sqrt(sumOfSquares(grads));
  double coef = maxNorm / (total + 1e-6);
  // torch.clamp(coef, max=1.0) propagates NaN; so does this.
  if (coef > 1.0)
    coef = 1.0;
  if (coef != 1.0) {
    c10::NoGradGuard noGrad;
    for (const at::Tensor &g : grads)
      if (g.defined())
        g.mul_(coef);
  }
  return total;
}

//===----------------------------------------------------------------------===//
// LossScaler (LossScaler.h)
//===----------------------------------------------------------------------===//

bool varuna::rt::LossScaler::allFinite(const std::vector<at::Tensor> &grads) {
  for (const at::Tensor &g : grads)
    if (g.defined() && g.is_floating_point() &&
        !at::isfinite(g).all().item<bool>())
      return false;
  return true;
}
