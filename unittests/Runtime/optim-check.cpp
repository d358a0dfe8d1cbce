//===- optim-check.cpp - The optimizers against a PyTorch oracle ----------===//
//
//   varuna-optim-check DIR
//     DIR is written by test/Runtime/Inputs/optim_fixture.py: config.json
//     (the optimizer in training-config form, clip_grad_norm, parameter names,
//     the global gradient norm of each step, the tolerance), param0.<i>.npy,
//     grad.<t>.<i>.npy and expected.<t>.<i>.npy. Applies the steps with
//     varuna::rt::Optimizer (clipping with clipGradNorm first for SGD/AdamW;
//     odd steps pass the norm precomputed from two "stages" of sumOfSquares,
//     even steps let the callee compute it), compares the parameters with the
//     expected ones after every step, and after step 5 writes the state to
//     DIR/state/<key>.npy, loads it into a fresh optimizer and checks that
//     steps 6.. are bit-identical. Prints one summary line; exits 1 on failure.
//     The error of a tensor is max|actual - expected| / max|expected|.
//
//   varuna-optim-check --create key=value...
//     Builds an OptimizerConfig (keys: type lr momentum weight_decay beta1
//     beta2 eps clip) and calls Optimizer::create: prints `ok`, or
//     `error: <message>` and exits 1.
//
//   varuna-optim-check --misuse
//     Calls the API wrongly in a fixed list of ways; prints one
//     `<case>: <message>` line per case, checks that each throws
//     std::invalid_argument and leaves the parameters untouched.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Npy.h"
#include "varuna/runtime/Optimizer.h"

#include <ATen/ATen.h>

#include "llvm/Support/JSON.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

using namespace varuna;
using namespace varuna::rt;
namespace fs = std::filesystem;

namespace {

struct CheckFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string &msg) { throw CheckFailure(msg); }

at::Tensor tensorFromNpy(const NpyArray &a) {
  at::ScalarType type;
  switch (a.dtype) {
  case DType::F32:
    type = at::kFloat;
    break;
  case DType::F64:
    type = at::kDouble;
    break;
  case DType::I64:
    type = at::kLong;
    break;
  default:
    fail(std::string("unsupported npy dtype ") + dtypeName(a.dtype));
  }
  return at::from_blob(const_cast<uint8_t *>(a.data.data()), a.shape,
                       at::TensorOptions().dtype(type))
      .clone();
}

void writeTensor(const std::string &path, const at::Tensor &t) {
  at::Tensor c = t.contiguous().cpu();
  DType type;
  switch (c.scalar_type()) {
  case at::kFloat:
    type = DType::F32;
    break;
  case at::kDouble:
    type = DType::F64;
    break;
  case at::kLong:
    type = DType::I64;
    break;
  default:
    fail("cannot write dtype " + std::string(c10::toString(c.scalar_type())));
  }
  std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
  writeNpy(path, type, shape, c.data_ptr());
}

at::Tensor load(const fs::path &p) {
  return tensorFromNpy(readNpy(p.string()));
}

double relError(const at::Tensor &actual, const at::Tensor &expected) {
  at::Tensor a = actual.to(at::kDouble), e = expected.to(at::kDouble);
  double scale = e.abs().max().item<double>();
  double diff = (a - e).abs().max().item<double>();
  return diff / std::max(scale, 1e-30);
}

std::vector<at::Tensor> cloneAll(const std::vector<at::Tensor> &ts) {
  std::vector<at::Tensor> out;
  for (const at::Tensor &t : ts)
    out.push_back(t.clone());
  return out;
}

OptimizerKind parseKind(const std::string &s) {
  if (s == "sgd")
    return OptimizerKind::SGD;
  if (s == "adamw")
    return OptimizerKind::AdamW;
  if (s == "lamb")
    return OptimizerKind::LAMB;
  fail("unknown optimizer type '" + s + "'");
}

double number(const llvm::json::Object &o, llvm::StringRef key) {
  std::optional<double> v = o.getNumber(key);
  if (!v)
    fail("config.json: missing number '" + key.str() + "'");
  return *v;
}

//===----------------------------------------------------------------------===//
// The oracle check
//===----------------------------------------------------------------------===//

int checkFixture(const fs::path &dir) {
  std::ifstream in(dir / "config.json");
  if (!in)
    fail("cannot read " + (dir / "config.json").string());
  std::stringstream text;
  text << in.rdbuf();
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text.str());
  if (!json)
    fail("config.json: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Object *optJ =
      root ? root->getObject("optimizer") : nullptr;
  if (!optJ)
    fail("config.json: no 'optimizer' object");

  OptimizerConfig cfg;
  std::string typeName = optJ->getString("type").value_or("").str();
  cfg.type = parseKind(typeName);
  for (const auto &kv : *optJ) {
    std::string key = kv.first.str();
    if (key == "type")
      continue;
    if (key == "lr")
      cfg.lr = number(*optJ, key);
    else if (key == "momentum")
      cfg.momentum = number(*optJ, key);
    else if (key == "weight_decay")
      cfg.weightDecay = number(*optJ, key);
    else if (key == "eps")
      cfg.eps = number(*optJ, key);
    else if (key == "betas") {
      const llvm::json::Array *b = kv.second.getAsArray();
      if (!b || b->size() != 2 || !(*b)[0].getAsNumber() ||
          !(*b)[1].getAsNumber())
        fail("config.json: optimizer.betas: expected two numbers");
      cfg.betas = {*(*b)[0].getAsNumber(), *(*b)[1].getAsNumber()};
    } else
      fail("config.json: unknown optimizer key '" + key + "'");
  }
  std::optional<double> clip = root->getNumber("clip_grad_norm");
  int64_t steps = static_cast<int64_t>(number(*root, "steps"));
  double tolerance = number(*root, "tolerance");
  const llvm::json::Array *paramsJ = root->getArray("params");
  const llvm::json::Array *normsJ = root->getArray("grad_norms");
  if (!paramsJ || !normsJ || normsJ->size() != static_cast<size_t>(steps))
    fail("config.json: missing 'params' or 'grad_norms'");
  std::vector<std::string> names;
  for (const llvm::json::Value &p : *paramsJ)
    names.push_back(p.getAsObject()->getString("name").value_or("").str());
  size_t n = names.size();
  const int64_t restoreAfter = 5;

  std::vector<at::Tensor> params, paramsB;
  for (size_t i = 0; i < n; ++i)
    params.push_back(load(dir / ("param0." + std::to_string(i) + ".npy")));

  std::unique_ptr<Optimizer> opt = Optimizer::create(cfg, clip), optB;
  opt->setParamNames(names);
  bool lamb = cfg.type == OptimizerKind::LAMB;
  double maxErr = 0, maxNormErr = 0;
  size_t stateTensors = 0;

  // One stage-style step: global norm (precomputed from two halves of the
  // parameters on odd steps), clipping for SGD/AdamW, the update.
  auto applyStep = [&](Optimizer &o, std::vector<at::Tensor> &ps,
                       std::vector<at::Tensor> grads, int64_t t) {
    std::optional<double> norm;
    if (t % 2 == 1) {
      std::vector<at::Tensor> first(grads.begin(), grads.begin() + n / 2);
      std::vector<at::Tensor> second(grads.begin() + n / 2, grads.end());
      norm = std::sqrt(sumOfSquares(first) + sumOfSquares(second));
    }
    if (clip && !lamb)
      clipGradNorm(grads, *clip, norm);
    o.step(ps, grads, norm);
  };

  for (int64_t t = 1; t <= steps; ++t) {
    std::vector<at::Tensor> grads;
    for (size_t i = 0; i < n; ++i)
      grads.push_back(load(dir / ("grad." + std::to_string(t) + "." +
                                  std::to_string(i) + ".npy")));
    double want = *(*normsJ)[t - 1].getAsNumber();
    double normErr = std::abs(std::sqrt(sumOfSquares(grads)) - want) / want;
    maxNormErr = std::max(maxNormErr, normErr);
    if (normErr > 1e-12)
      fail("step " + std::to_string(t) +
           ": sumOfSquares disagrees with the "
           "fixture's global norm (relative error " +
           std::to_string(normErr) + ")");

    if (optB)
      applyStep(*optB, paramsB, cloneAll(grads), t);
    applyStep(*opt, params, cloneAll(grads), t);

    for (size_t i = 0; i < n; ++i) {
      at::Tensor expected = load(dir / ("expected." + std::to_string(t) + "." +
                                        std::to_string(i) + ".npy"));
      if (!expected.sizes().equals(params[i].sizes()))
        fail("step " + std::to_string(t) + ": '" + names[i] +
             "' has the wrong shape");
      double err = relError(params[i], expected);
      maxErr = std::max(maxErr, err);
      if (!(err <= tolerance)) {
        std::ostringstream os;
        os << "step " << t << ": '" << names[i] << "' relative error " << err
           << " exceeds " << tolerance;
        fail(os.str());
      }
      if (optB && !at::equal(params[i], paramsB[i]))
        fail("step " + std::to_string(t) + ": '" + names[i] +
             "' differs after restoring the state of step " +
             std::to_string(restoreAfter));
    }

    if (t == restoreAfter) {
      // Checkpoint through .npy files and restore into a fresh optimizer.
      fs::path stateDir = dir / "state";
      fs::remove_all(stateDir);
      fs::create_directories(stateDir);
      OptimizerState st = opt->state();
      for (const auto &[key, tensor] : st)
        writeTensor((stateDir / (key + ".npy")).string(), tensor);
      OptimizerState loaded;
      for (const fs::directory_entry &e : fs::directory_iterator(stateDir)) {
        std::string file = e.path().filename().string();
        loaded.emplace(file.substr(0, file.size() - 4), load(e.path()));
      }
      stateTensors = loaded.size();
      size_t perParam =
          cfg.type == OptimizerKind::SGD ? (cfg.momentum != 0 ? 1 : 0) : 2;
      if (stateTensors != 1 + perParam * n)
        fail("state after step " + std::to_string(t) + " has " +
             std::to_string(stateTensors) + " tensors, expected " +
             std::to_string(1 + perParam * n));
      optB = Optimizer::create(cfg, clip);
      optB->setParamNames(names);
      optB->loadState(loaded);
      if (optB->stepCount() != t)
        fail("restored step count " + std::to_string(optB->stepCount()));
      paramsB = cloneAll(params);
    }
  }
  OptimizerState sa = opt->state(), sb = optB->state();
  if (sa.size() != sb.size())
    fail("final states differ in size");
  for (const auto &[key, tensor] : sa)
    if (!sb.count(key) || !at::equal(tensor, sb.at(key)))
      fail("final state '" + key + "' differs after restoring");

  char clipText[32] = "none";
  if (clip)
    std::snprintf(clipText, sizeof clipText, "%g", *clip);
  std::printf("%s clip=%s: %zu params, %lld steps, max rel err %.2e "
              "(tolerance %.0e), grad norm rel err %.1e, restored from step "
              "%lld (%zu state tensors): identical: PASS\n",
              typeName.c_str(), clipText, n, static_cast<long long>(steps),
              maxErr, tolerance, maxNormErr,
              static_cast<long long>(restoreAfter), stateTensors);
  return 0;
}

//===----------------------------------------------------------------------===//
// Error cases
//===----------------------------------------------------------------------===//

int checkCreate(int argc, char **argv) {
  OptimizerConfig cfg;
  std::optional<double> clip;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (eq == std::string::npos)
      fail("expected key=value, got '" + arg + "'");
    std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    if (key == "type") {
      cfg.type = parseKind(value);
      continue;
    }
    double v = std::strtod(value.c_str(), nullptr);
    if (key == "lr")
      cfg.lr = v;
    else if (key == "momentum")
      cfg.momentum = v;
    else if (key == "weight_decay")
      cfg.weightDecay = v;
    else if (key == "beta1")
      cfg.betas[0] = v;
    else if (key == "beta2")
      cfg.betas[1] = v;
    else if (key == "eps")
      cfg.eps = v;
    else if (key == "clip")
      clip = v;
    else
      fail("unknown key '" + key + "'");
  }
  try {
    Optimizer::create(cfg, clip);
  } catch (const std::invalid_argument &e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  std::printf("ok\n");
  return 0;
}

int checkMisuse() {
  int failures = 0;
  auto expectError = [&](const char *name, const std::function<void()> &fn) {
    try {
      fn();
    } catch (const std::invalid_argument &e) {
      std::printf("%s: %s\n", name, e.what());
      return;
    }
    std::printf("%s: NO ERROR\n", name);
    ++failures;
  };
  OptimizerConfig adamw;
  adamw.type = OptimizerKind::AdamW;
  auto w = [] { return at::ones({2, 3}); };

  expectError("count", [&] {
    std::vector<at::Tensor> ps = {w(), w()}, gs = {w()};
    Optimizer::create(adamw)->step(ps, gs);
  });
  expectError("shape", [&] {
    std::vector<at::Tensor> ps = {w()}, gs = {at::ones({3, 2})};
    Optimizer::create(adamw)->step(ps, gs);
  });
  expectError("dtype", [&] {
    std::vector<at::Tensor> ps = {w()}, gs = {at::ones({2, 3}, at::kDouble)};
    Optimizer::create(adamw)->step(ps, gs);
  });
  expectError("integer-param", [&] {
    std::vector<at::Tensor> ps = {at::ones({2}, at::kLong)},
                            gs = {at::ones({2}, at::kLong)};
    Optimizer::create(adamw)->step(ps, gs);
  });
  expectError("names", [&] {
    Optimizer::create(adamw)->setParamNames({"a", "a"});
  });
  expectError("clip-max-norm", [&] { clipGradNorm({w()}, 0.0); });
  expectError("clip-total-norm", [&] { clipGradNorm({w()}, 1.0, -1.0); });
  expectError("load-no-step", [&] {
    Optimizer::create(adamw)->loadState({{"a.exp_avg", w()}});
  });
  expectError("load-unknown-key", [&] {
    Optimizer::create(adamw)->loadState(
        {{"step", at::scalar_tensor(1, at::kLong)},
         {"a.momentum_buffer", w()}});
  });
  expectError("load-missing-buffer", [&] {
    Optimizer::create(adamw)->loadState(
        {{"step", at::scalar_tensor(1, at::kLong)}, {"a.exp_avg", w()}});
  });
  expectError("load-unknown-param", [&] {
    auto o = Optimizer::create(adamw);
    o->setParamNames({"a"});
    o->loadState({{"step", at::scalar_tensor(1, at::kLong)},
                  {"b.exp_avg", w()},
                  {"b.exp_avg_sq", w()}});
  });
  // A failed step leaves the parameter and the state untouched.
  {
    auto o = Optimizer::create(adamw);
    o->setParamNames({"a", "b"});
    o->loadState({{"step", at::scalar_tensor(3, at::kLong)},
                  {"a.exp_avg", at::ones({3})},
                  {"a.exp_avg_sq", at::ones({3})}});
    std::vector<at::Tensor> ps = {w(), w()}, gs = {w(), w()};
    expectError("state-shape", [&] { o->step(ps, gs); });
    o->loadState({{"step", at::scalar_tensor(3, at::kLong)},
                  {"a.exp_avg", w()},
                  {"a.exp_avg_sq", w()}});
    expectError("state-missing", [&] { o->step(ps, gs); });
    if (!at::equal(ps[0], w()) || !at::equal(ps[1], w()) ||
        o->stepCount() != 3) {
      std::printf("a failed step modified the parameters or the step count\n");
      ++failures;
    }
  }
  std::printf("%d misuse case(s) not rejected\n", failures);
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr,
                 "usage: varuna-optim-check DIR | --create key=value... "
                 "| --misuse\n");
    return 2;
  }
  try {
    if (!std::strcmp(argv[1], "--create"))
      return checkCreate(argc, argv);
    if (!std::strcmp(argv[1], "--misuse"))
      return checkMisuse();
    return checkFixture(argv[1]);
  } catch (const std::exception &e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
