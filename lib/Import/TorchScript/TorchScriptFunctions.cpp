//===- TorchScriptFunctions.cpp - Functions without a varuna op ----------===//
//
// Activations (mish, hardswish, elu, leaky_relu, ...), GLU, logsumexp,
// variance / standard deviation, vector norms, RMS and instance
// normalization: each a composition of varuna ops built by the Decomposer
// shared with the ONNX importer (include/varuna/Import/Decompose.h).
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"

#include "varuna/Import/Decompose.h"

#include <limits>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

FailureOr<Value> varuna::ts::floatInput(TSImporter &imp, TSImporter::Node *n,
                                        Location loc) {
  auto x = imp.tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  if (isFloatType(tensorType(*x).getElementType()))
    return *x;
  return imp.cast(*x, imp.b().getF32Type(), loc);
}

LogicalResult TSImporter::hActivation(Node *n, Location loc) {
  std::string op = opName(n);
  auto x = floatInput(*this, n, loc);
  if (failed(x))
    return failure();
  Decomposer d(b(), loc);
  auto param = [&](unsigned i, double dflt) {
    return optArg(n, i, loc, &TSImporter::floatArg, dflt);
  };
  if (op == "elu") { // elu(x, alpha, scale, input_scale)
    auto alpha = param(1, 1.0), scale = param(2, 1.0), in = param(3, 1.0);
    if (failed(alpha) || failed(scale) || failed(in))
      return failure();
    if (*scale != 1.0 || *in != 1.0)
      return error(n, loc) << "elu with scale " << *scale << " and input_scale "
                           << *in << " is not supported (only 1)";
    return bindResult(n, d.activation(Activation::elu, *x, *alpha));
  }
  if (op == "celu" || op == "leaky_relu") {
    auto alpha = param(1, op == "celu" ? 1.0 : 0.01);
    if (failed(alpha))
      return failure();
    return bindResult(n, d.activation(op == "celu" ? Activation::celu
                                                   : Activation::leaky_relu,
                                      *x, *alpha));
  }
  std::optional<Activation> kind =
      llvm::StringSwitch<std::optional<Activation>>(op)
          .Case("mish", Activation::mish)
          .Case("hardswish", Activation::hardswish)
          .Case("hardsigmoid", Activation::hardsigmoid)
          .Case("selu", Activation::selu)
          .Case("log_sigmoid", Activation::logsigmoid)
          .Default(std::nullopt);
  if (!kind)
    return error(n, loc) << "internal: no activation " << op;
  return bindResult(n, d.activation(*kind, *x, 1.0 / 6.0, 0.5));
}

LogicalResult TSImporter::hGlu(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto dim = optArg(n, 1, loc, &TSImporter::intArg, -1);
  if (failed(x) || failed(dim))
    return failure();
  auto axis = normIndex(n, *dim, tensorType(*x).getRank(), loc);
  if (failed(axis))
    return failure();
  return bindResult(n, Decomposer(b(), loc).glu(*x, *axis));
}

LogicalResult TSImporter::hLogSumExp(Node *n, Location loc) {
  // logsumexp(x, dim, keepdim)
  auto x = floatInput(*this, n, loc);
  if (failed(x))
    return failure();
  auto axes = axesArg(n, 1, tensorType(*x).getRank(), loc);
  auto keep = optArg(n, 2, loc, &TSImporter::boolArg, false);
  if (failed(axes) || failed(keep))
    return failure();
  return bindResult(n, Decomposer(b(), loc).logSumExp(*x, *axes, *keep));
}

LogicalResult TSImporter::hVariance(Node *n, Location loc) {
  // var/std(x, unbiased) / (x, dim, unbiased, keepdim) /
  // (x, dim, correction, keepdim)
  auto x = floatInput(*this, n, loc);
  if (failed(x))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  bool keepdim = false;
  double correction = 1.0;
  SmallVector<int64_t> axes;
  auto readCorrection = [&](unsigned i) -> LogicalResult {
    if (isNoneArg(n, i))
      return success();
    TSValue &c = lookup(n->input(i));
    if (c.kind == K::Bool) {
      correction = c.b ? 1.0 : 0.0;
      return success();
    }
    auto f = floatArg(n, i, loc);
    if (failed(f))
      return failure();
    correction = *f;
    return success();
  };
  if (n->inputs().size() <= 2) {
    if (failed(readCorrection(1)))
      return failure();
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  } else {
    auto a = axesArg(n, 1, rank, loc);
    auto k = optArg(n, 3, loc, &TSImporter::boolArg, false);
    if (failed(a) || failed(k) || failed(readCorrection(2)))
      return failure();
    axes = *a;
    keepdim = *k;
  }
  std::string op = opName(n);
  auto v = Decomposer(b(), loc).variance(*x, axes, keepdim, correction,
                                         op == "std" || op == "std_mean");
  if (op != "var_mean" && op != "std_mean")
    return bindResult(n, v);
  // var_mean / std_mean: (the variance or deviation, the mean).
  auto mean = reduce(ReduceKind::mean, *x, axes, keepdim, loc);
  if (failed(v) || failed(mean))
    return failure();
  bindTensor(n->outputs()[0], *v);
  bindTensor(n->outputs()[1], *mean);
  return success();
}

/// linalg_norm(x, ord=None, dim=None, keepdim=False[, dtype]) and
/// frobenius_norm(x, dim, keepdim): ord None or 'fro', the 2-norm of the
/// elements over dim (all of them without it: Frobenius over two); a number
/// over one dimension (or a 1-D x), the vector norm; over two dimensions
/// (or a 2-D x), the matrix norms 1 / -1 (the largest / smallest column
/// sum of |x|) and inf / -inf (row sums). Spectral (2, -2) and nuclear
/// norms need singular values: refused.
LogicalResult TSImporter::hMatrixNorm(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  if (failed(x))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  bool frobenius = opName(n) == "frobenius_norm";
  unsigned dimAt = frobenius ? 1 : 2, keepAt = frobenius ? 2 : 3;
  auto axes = axesArg(n, dimAt, rank, loc);
  auto keep = optArg(n, keepAt, loc, &TSImporter::boolArg, false);
  if (failed(axes) || failed(keep))
    return failure();
  Decomposer d(b(), loc);
  const TSValue *ord = frobenius ? nullptr : operand(n, 1);
  if (!ord || ord->kind == K::None ||
      (ord->kind == K::Str && ord->s == "fro"))
    return bindResult(n, d.vectorNorm(*x, 2.0, *axes, *keep));
  if (ord->kind == K::Str)
    return error(n, loc) << "linalg.norm with ord='" << ord->s
                         << "' is not supported (it needs singular values)";
  auto p = floatArg(n, 1, loc);
  if (failed(p))
    return failure();
  if (axes->size() == 1)
    return bindResult(n, d.vectorNorm(*x, *p, *axes, *keep));
  if (axes->size() != 2 || !(std::abs(*p) == 1.0 || std::isinf(*p)))
    return error(n, loc) << "linalg.norm with ord=" << *p << " over "
                         << axes->size()
                         << " dimensions is not supported (matrix norms: 1, "
                            "-1, inf, -inf; 2 and -2 need singular values)";
  // Sum |x| along one of the two dimensions, then the extreme along the
  // other: columns (sum over the first) for 1, rows for inf.
  int64_t sumAxis = std::isinf(*p) ? (*axes)[1] : (*axes)[0];
  int64_t pickAxis = std::isinf(*p) ? (*axes)[0] : (*axes)[1];
  auto mag = unary(UnaryKind::abs, *x, loc);
  auto sums = failed(mag) ? mag : reduce(ReduceKind::sum, *mag, {sumAxis}, true, loc);
  if (failed(sums))
    return failure();
  auto r = reduce(*p > 0 ? ReduceKind::max : ReduceKind::min, *sums,
                  {pickAxis}, true, loc);
  if (failed(r) || *keep)
    return bindResult(n, r);
  SmallVector<SymInt> out;
  for (auto [i, s] : llvm::enumerate(dimsOf(*r)))
    if (int64_t(i) != sumAxis && int64_t(i) != pickAxis)
      out.push_back(s);
  return bindResult(n, reshape(*r, out, loc));
}

LogicalResult TSImporter::hNorm(Node *n, Location loc) {
  // norm(x, p) / norm(x, p, dim, keepdim[, dtype]) /
  // linalg_vector_norm(x, ord, dim, keepdim, dtype)
  auto x = floatInput(*this, n, loc);
  if (failed(x))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  auto p = optArg(n, 1, loc, &TSImporter::floatArg, 2.0);
  auto axes = axesArg(n, n->inputs().size() > 2 ? 2 : n->inputs().size(),
                      rank, loc);
  auto keep = optArg(n, 3, loc, &TSImporter::boolArg, false);
  if (failed(p) || failed(axes) || failed(keep))
    return failure();
  return bindResult(n, Decomposer(b(), loc).vectorNorm(*x, *p, *axes, *keep));
}

/// _weight_norm(v, g, dim) (nn.utils.weight_norm and
/// parametrizations.weight_norm): v * g / ||v||, the 2-norm over every
/// axis but `dim` (over all of them when dim is -1), kept for broadcasting.
LogicalResult TSImporter::hWeightNorm(Node *n, Location loc) {
  auto v = floatInput(*this, n, loc);
  auto g = tensorArg(n, 1, loc);
  auto dim = optArg(n, 2, loc, &TSImporter::intArg, 0);
  if (failed(v) || failed(g) || failed(dim))
    return failure();
  int64_t rank = tensorType(*v).getRank();
  SmallVector<int64_t> axes;
  if (*dim != -1) {
    auto kept = normIndex(n, *dim, rank, loc);
    if (failed(kept))
      return failure();
    for (int64_t a = 0; a < rank; ++a)
      if (a != *kept)
        axes.push_back(a);
  } else {
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  }
  auto norm = Decomposer(b(), loc).vectorNorm(*v, 2.0, axes, true);
  if (failed(norm))
    return failure();
  auto scale = make<DivOp>(loc, {cast(*g, tensorType(*v).getElementType(), loc),
                                 *norm});
  if (failed(scale))
    return failure();
  return bindResult(n, make<MulOp>(loc, {*v, *scale}));
}

/// Tensor.unfold(dim, size, step): the windows x[..., i*step : i*step +
/// size, ...] for i < n = (L - size) / step + 1 along a static dim, as a
/// dim of n and a new last dim of `size` -- a gather of the n * size
/// constant positions, reshaped, the window axis moved last.
LogicalResult TSImporter::hUnfoldWindows(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto dim = intArg(n, 1, loc);
  auto size = intArg(n, 2, loc), step = intArg(n, 3, loc);
  if (failed(x) || failed(dim) || failed(size) || failed(step))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  auto axis = normIndex(n, *dim, std::max<int64_t>(dims.size(), 1), loc);
  if (failed(axis))
    return failure();
  if (dims.empty() || !dims[*axis].isStatic() || *size < 1 || *step < 1 ||
      *size > dims[*axis].constant)
    return error(n, loc) << "unfold(" << *dim << ", " << *size << ", "
                         << *step << ") needs a static dimension of at least "
                            "the window size and a positive step, got "
                         << dimsStr(dims);
  int64_t windows = (dims[*axis].constant - *size) / *step + 1;
  SmallVector<int64_t> positions;
  for (int64_t w = 0; w < windows; ++w)
    for (int64_t k = 0; k < *size; ++k)
      positions.push_back(w * *step + k);
  auto picked = Decomposer(b(), loc).gatherIndices(*x, *axis, positions);
  if (failed(picked))
    return failure();
  SmallVector<SymInt> split = dims;
  split[*axis] = SymInt(windows);
  split.insert(split.begin() + *axis + 1, SymInt(*size));
  auto r = reshape(*picked, split, loc);
  if (failed(r))
    return failure();
  SmallVector<int64_t> perm;
  for (int64_t a = 0; a < static_cast<int64_t>(split.size()); ++a)
    if (a != *axis + 1)
      perm.push_back(a);
  perm.push_back(*axis + 1);
  return bindResult(n, transpose(*r, perm, loc));
}

LogicalResult TSImporter::hRmsNorm(Node *n, Location loc) {
  // rms_norm(x, normalized_shape, weight, eps)
  auto x = floatInput(*this, n, loc);
  auto shape = intListArg(n, 1, loc);
  if (failed(x) || failed(shape))
    return failure();
  Type et = tensorType(*x).getElementType();
  // torch: eps None is the dtype's machine epsilon.
  double machineEps = et.isF64()   ? std::numeric_limits<double>::epsilon()
                      : et.isF16() ? 0.0009765625
                      : et.isBF16() ? 0.0078125
                                    : std::numeric_limits<float>::epsilon();
  auto eps = optArg(n, 3, loc, &TSImporter::floatArg, machineEps);
  auto w = optArg(n, 2, loc, &TSImporter::tensorArg, Value());
  if (failed(eps) || failed(w))
    return failure();
  int64_t axis = tensorType(*x).getRank() - shape->size();
  if (axis < 0)
    return error(n, loc) << "normalized_shape has more dimensions than the "
                            "input";
  return bindResult(n, Decomposer(b(), loc).rmsNorm(*x, axis, *w, *eps));
}

LogicalResult TSImporter::hInstanceNorm(Node *n, Location loc) {
  // instance_norm(x, weight, bias, running_mean, running_var,
  //               use_input_stats, momentum, eps, cudnn_enabled)
  auto x = tensorArg(n, 0, loc);
  auto useInput = boolArg(n, 5, loc);
  auto eps = floatArg(n, 7, loc);
  if (failed(x) || failed(useInput) || failed(eps))
    return failure();
  if (!*useInput)
    return error(n, loc) << "instance_norm with running statistics "
                            "(track_running_stats in eval mode) is not "
                            "supported";
  // Tracked running statistics (track_running_stats=True in training):
  // varuna keeps batch norms' only, so they would be dropped -- eval and
  // checkpoints silently without them.
  if (!isNoneArg(n, 3) || !isNoneArg(n, 4))
    return error(n, loc)
           << "instance_norm tracking running statistics "
              "(track_running_stats=True): varuna keeps batch norms' running "
              "statistics only, so these would be dropped; use "
              "track_running_stats=False (PyTorch's default for instance "
              "norms)";
  SmallVector<SymInt> dims = dimsOf(*x);
  if (dims.size() < 3 || !dims[1].isStatic())
    return error(n, loc) << "instance_norm needs an input [N, C, ...] with a "
                            "static C, got "
                         << dimsStr(dims);
  return bindResult(n, groupNorm(n, loc, *x, dims[1].constant, 1, 2, *eps));
}

/// pairwise_distance (x1, x2, p, eps, keepdim): the p-norm of x1 - x2 + eps
/// over the last dimension, as ATen computes it; triplet_margin_loss
/// (anchor, positive, negative, margin, p, eps, swap, reduction):
/// max(0, margin + d(a, pos) - d(a, neg)) with those distances, d(a, neg)
/// the smaller of it and d(pos, neg) with swap, then the reduction.
LogicalResult TSImporter::hDistance(Node *n, Location loc) {
  bool triplet = opName(n) == "triplet_margin_loss";
  unsigned pIdx = triplet ? 4 : 2;
  auto p = floatArg(n, pIdx, loc), eps = floatArg(n, pIdx + 1, loc);
  if (failed(p) || failed(eps))
    return failure();
  Decomposer d(b(), loc);
  auto distance = [&](unsigned i, unsigned j, bool keep) -> FailureOr<Value> {
    auto x1 = tensorArg(n, i, loc), x2 = tensorArg(n, j, loc);
    if (failed(x1) || failed(x2))
      return failure();
    Type et = tensorType(*x1).getElementType();
    if (!isFloatType(et))
      return operandError(n, i, loc, "a floating-point tensor");
    MathBuilder m{*this, loc, et};
    auto diff = m.bin<AddOp>(m.bin<SubOp>(*x1, cast(*x2, et, loc)), m.c(*eps));
    if (failed(diff))
      return failure();
    int64_t last = std::max<int64_t>(tensorType(*diff).getRank() - 1, 0);
    return d.vectorNorm(*diff, *p, {last}, keep);
  };
  if (!triplet) {
    auto keep = boolArg(n, 4, loc);
    if (failed(keep))
      return failure();
    return bindResult(n, distance(0, 1, *keep));
  }
  auto margin = floatArg(n, 3, loc);
  auto swap = boolArg(n, 6, loc);
  auto reduction = reductionArg(n, 7, loc);
  if (failed(margin) || failed(swap) || failed(reduction))
    return failure();
  auto pos = distance(0, 1, false), neg = distance(0, 2, false);
  if (failed(pos) || failed(neg))
    return failure();
  MathBuilder m{*this, loc, tensorType(*pos).getElementType()};
  if (*swap)
    neg = m.bin<MinimumOp>(*neg, distance(1, 2, false));
  auto per = m.un(UnaryKind::relu,
                  m.bin<SubOp>(m.bin<AddOp>(*pos, m.c(*margin)), neg));
  if (failed(per))
    return failure();
  return bindResult(n, d.reduceLoss(*per, *reduction));
}

/// Elementwise losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss,
/// binary_cross_entropy(_with_logits), kl_div, soft_margin_loss,
/// margin_ranking_loss, hinge_embedding_loss, cosine_embedding_loss (per
/// row of its last dimension), poisson_nll_loss, each followed by the
/// reduction torch's enum names (0 none, 1 mean, 2 sum).
LogicalResult TSImporter::hElementwiseLoss(Node *n, Location loc) {
  std::string op = opName(n);
  auto x = floatInput(*this, n, loc);
  auto y = tensorArg(n, 1, loc);
  if (failed(x) || failed(y))
    return failure();
  Type et = tensorType(*x).getElementType();
  Value target = cast(*y, et, loc);
  Decomposer d(b(), loc);
  auto c = [&](double v) { return d.scalar(v, et); };
  auto un = [&](UnaryKind k, Value v) { return unary(k, v, loc); };
  unsigned reductionIdx = 2;
  FailureOr<Value> per = failure();
  auto diff = make<SubOp>(loc, {*x, target});
  if (failed(diff))
    return failure();
  if (op == "mse_loss") {
    per = make<MulOp>(loc, {*diff, *diff});
  } else if (op == "l1_loss") {
    per = un(UnaryKind::abs, *diff);
  } else if (op == "smooth_l1_loss" || op == "huber_loss") {
    // d = |x - y|; d < t: 0.5 d^2 (/ beta for smooth L1), else
    // d - 0.5 beta (smooth L1) or delta * (d - 0.5 delta) (Huber).
    auto t = floatArg(n, 3, loc);
    if (failed(t))
      return failure();
    bool huber = op == "huber_loss";
    auto a = un(UnaryKind::abs, *diff);
    if (failed(a))
      return failure();
    if (*t == 0.0) {
      per = a; // smooth L1 with beta 0 is L1 (torch)
    } else {
      auto sq = make<MulOp>(loc, {*a, *a});
      auto quad = failed(sq) ? sq
                             : make<MulOp>(loc, {*sq, c(huber ? 0.5
                                                              : 0.5 / *t)});
      auto lin = make<SubOp>(loc, {*a, c(0.5 * *t)});
      if (huber && succeeded(lin))
        lin = make<MulOp>(loc, {*lin, c(*t)});
      auto small = make<CompareOp>(
          loc, {*a, c(*t)},
          {attr("predicate", ComparePredicateAttr::get(ctx,
                                                       ComparePredicate::lt))});
      if (failed(quad) || failed(lin) || failed(small))
        return failure();
      per = make<WhereOp>(loc, {*small, *quad, *lin});
    }
  } else if (op == "binary_cross_entropy_with_logits") {
    // (x, y, weight, pos_weight, reduction): softplus(x) - x * y; with
    // pos_weight p, (1 - y) x + (1 + (p - 1) y) softplus(-x) (torch's).
    reductionIdx = 4;
    auto pw = optArg(n, 3, loc, &TSImporter::tensorArg, Value());
    if (failed(pw))
      return failure();
    if (!*pw) {
      auto sp = un(UnaryKind::softplus, *x);
      auto xy = make<MulOp>(loc, {*x, target});
      if (failed(sp) || failed(xy))
        return failure();
      per = make<SubOp>(loc, {*sp, *xy});
    } else {
      Value p = cast(*pw, et, loc);
      auto pm1 = make<SubOp>(loc, {p, c(1.0)});
      auto scaled = failed(pm1) ? pm1 : make<MulOp>(loc, {*pm1, target});
      auto lw = failed(scaled) ? scaled : make<AddOp>(loc, {*scaled, c(1.0)});
      auto nx = un(UnaryKind::neg, *x);
      auto sp = failed(nx) ? nx : un(UnaryKind::softplus, *nx);
      auto ny = make<SubOp>(loc, {c(1.0), target});
      if (failed(lw) || failed(sp) || failed(ny))
        return failure();
      auto t1 = make<MulOp>(loc, {*ny, *x});
      auto t2 = make<MulOp>(loc, {*lw, *sp});
      if (failed(t1) || failed(t2))
        return failure();
      per = make<AddOp>(loc, {*t1, *t2});
    }
  } else if (op == "binary_cross_entropy") {
    // (p, y, weight, reduction): -(y log p + (1 - y) log(1 - p)), each log
    // clamped at -100 as torch does.
    reductionIdx = 3;
    auto clampedLog = [&](Value v) -> FailureOr<Value> {
      auto l = un(UnaryKind::log, v);
      return failed(l) ? l : make<MaximumOp>(loc, {*l, c(-100.0)});
    };
    auto q = make<SubOp>(loc, {c(1.0), *x});
    auto lp = clampedLog(*x);
    auto lq = failed(q) ? q : clampedLog(*q);
    auto ny = make<SubOp>(loc, {c(1.0), target});
    if (failed(lp) || failed(lq) || failed(ny))
      return failure();
    auto t1 = make<MulOp>(loc, {target, *lp});
    auto t2 = make<MulOp>(loc, {*ny, *lq});
    if (failed(t1) || failed(t2))
      return failure();
    auto s = make<AddOp>(loc, {*t1, *t2});
    per = failed(s) ? s : un(UnaryKind::neg, *s);
  } else if (op == "kl_div") {
    // (input, target, reduction, log_target): target * (log target - input),
    // 0 where target is 0; exp(t) * (t - input) with log_target.
    auto logTarget = optArg(n, 3, loc, &TSImporter::boolArg, false);
    if (failed(logTarget))
      return failure();
    if (*logTarget) {
      auto e = un(UnaryKind::exp, target);
      auto dd = make<SubOp>(loc, {target, *x});
      if (failed(e) || failed(dd))
        return failure();
      per = make<MulOp>(loc, {*e, *dd});
    } else {
      // log of max(target, tiny): finite where target is 0, where the
      // product is then 0 * finite = 0 (and so is its gradient).
      auto safe = make<MaximumOp>(
          loc, {target, c(std::numeric_limits<float>::min())});
      auto l = failed(safe) ? safe : un(UnaryKind::log, *safe);
      auto dd = failed(l) ? l : make<SubOp>(loc, {*l, *x});
      per = failed(dd) ? dd : make<MulOp>(loc, {target, *dd});
    }
  } else if (op == "soft_margin_loss") { // (x, y, reduction)
    // log(1 + exp(-y x))
    auto yx = make<MulOp>(loc, {target, *x});
    auto neg = failed(yx) ? yx : un(UnaryKind::neg, *yx);
    per = failed(neg) ? neg : un(UnaryKind::softplus, *neg);
  } else if (op == "margin_ranking_loss" || op == "hinge_embedding_loss" ||
             op == "cosine_embedding_loss") {
    // margin_ranking (x1, x2, y, margin, reduction): max(0, -y (x1 - x2) +
    // margin). hinge_embedding (x, y, margin, reduction): x where y != -1,
    // plus max(0, margin - x) where y != 1. cosine_embedding (x1, x2, y,
    // margin, reduction): with c the cosine of x1 and x2 along the last
    // dimension (squared norms + 1e-12), 1 - c where y == 1, max(0, c -
    // margin) where y == -1.
    bool hinge = op == "hinge_embedding_loss";
    unsigned labelIdx = hinge ? 1 : 2, marginIdx = hinge ? 2 : 3;
    reductionIdx = marginIdx + 1;
    auto label = tensorArg(n, labelIdx, loc);
    auto margin = floatArg(n, marginIdx, loc);
    if (failed(label) || failed(margin))
      return failure();
    Value yv = cast(*label, et, loc);
    auto relu = [&](FailureOr<Value> v) {
      return failed(v) ? v : un(UnaryKind::relu, *v);
    };
    auto where = [&](ComparePredicate p, double value, FailureOr<Value> then)
        -> FailureOr<Value> {
      auto m = make<CompareOp>(
          loc, {yv, c(value)},
          {attr("predicate", ComparePredicateAttr::get(ctx, p))});
      if (failed(m) || failed(then))
        return failure();
      return make<WhereOp>(loc, {*m, *then, c(0.0)});
    };
    if (op == "margin_ranking_loss") {
      auto yd = make<MulOp>(loc, {yv, *diff});
      auto m = failed(yd) ? yd : make<SubOp>(loc, {c(*margin), *yd});
      per = relu(m);
    } else if (hinge) {
      auto self = where(ComparePredicate::ne, -1.0, *x);
      auto gap = relu(make<SubOp>(loc, {c(*margin), *x}));
      auto other = where(ComparePredicate::ne, 1.0, gap);
      if (failed(self) || failed(other))
        return failure();
      per = make<AddOp>(loc, {*self, *other});
    } else {
      int64_t last = tensorType(*x).getRank() - 1;
      auto sumLast = [&](Value a, Value bb) -> FailureOr<Value> {
        auto p = make<MulOp>(loc, {a, bb});
        return failed(p) ? p : reduce(ReduceKind::sum, *p, {last}, false, loc);
      };
      auto dot = sumLast(*x, target);
      auto n1 = sumLast(*x, *x), n2 = sumLast(target, target);
      if (failed(dot) || failed(n1) || failed(n2))
        return failure();
      auto m1 = make<AddOp>(loc, {*n1, c(1e-12)});
      auto m2 = make<AddOp>(loc, {*n2, c(1e-12)});
      auto mm = failed(m1) || failed(m2) ? FailureOr<Value>(failure())
                                         : make<MulOp>(loc, {*m1, *m2});
      auto den = failed(mm) ? mm : un(UnaryKind::sqrt, *mm);
      auto cos = failed(den) ? den : make<DivOp>(loc, {*dot, *den});
      if (failed(cos))
        return failure();
      auto pos = where(ComparePredicate::eq, 1.0,
                       make<SubOp>(loc, {c(1.0), *cos}));
      auto neg = where(ComparePredicate::eq, -1.0,
                       relu(make<SubOp>(loc, {*cos, c(*margin)})));
      if (failed(pos) || failed(neg))
        return failure();
      per = make<AddOp>(loc, {*pos, *neg});
    }
  } else if (op == "poisson_nll_loss") {
    // (input, target, log_input, full, eps, reduction): exp(x) - y x, or
    // x - y log(x + eps); `full` adds Stirling's y log y - y +
    // 0.5 log(2 pi y) where y > 1.
    auto logInput = boolArg(n, 2, loc);
    auto full = boolArg(n, 3, loc);
    auto eps = floatArg(n, 4, loc);
    if (failed(logInput) || failed(full) || failed(eps))
      return failure();
    reductionIdx = 5;
    if (*logInput) {
      auto e = un(UnaryKind::exp, *x);
      auto yx = make<MulOp>(loc, {target, *x});
      if (failed(e) || failed(yx))
        return failure();
      per = make<SubOp>(loc, {*e, *yx});
    } else {
      auto shifted = make<AddOp>(loc, {*x, c(*eps)});
      auto l = failed(shifted) ? shifted : un(UnaryKind::log, *shifted);
      auto yl = failed(l) ? l : make<MulOp>(loc, {target, *l});
      per = failed(yl) ? yl : make<SubOp>(loc, {*x, *yl});
    }
    if (succeeded(per) && *full) {
      // Stirling's term (no gradient reaches the target here either):
      // evaluated at max(y, 1) and kept where y > 1.
      auto safe = make<MaximumOp>(loc, {target, c(1.0)});
      if (failed(safe))
        return failure();
      auto ly = un(UnaryKind::log, *safe);
      auto ylogy = failed(ly) ? ly : make<MulOp>(loc, {*safe, *ly});
      auto a = failed(ylogy) ? ylogy : make<SubOp>(loc, {*ylogy, *safe});
      auto twoPi = make<MulOp>(loc, {*safe, c(2.0 * M_PI)});
      auto l2 = failed(twoPi) ? twoPi : un(UnaryKind::log, *twoPi);
      auto half = failed(l2) ? l2 : make<MulOp>(loc, {*l2, c(0.5)});
      auto st = failed(a) || failed(half) ? FailureOr<Value>(failure())
                                          : make<AddOp>(loc, {*a, *half});
      auto gt = make<CompareOp>(
          loc, {target, c(1.0)},
          {attr("predicate",
                ComparePredicateAttr::get(ctx, ComparePredicate::gt))});
      if (failed(st) || failed(gt))
        return failure();
      auto kept = make<WhereOp>(loc, {*gt, *st, c(0.0)});
      per = failed(kept) ? kept : make<AddOp>(loc, {*per, *kept});
    }
  } else {
    return error(n, loc) << "internal: no loss " << op;
  }
  if (failed(per))
    return failure();
  if (op == "binary_cross_entropy" ||
      op == "binary_cross_entropy_with_logits") {
    // weight: each element's loss times weight (broadcast), before the
    // reduction (a mean stays over the elements, as torch's).
    auto w = optArg(n, 2, loc, &TSImporter::tensorArg, Value());
    if (failed(w))
      return failure();
    if (*w)
      per = make<MulOp>(loc, {*per, cast(*w, et, loc)});
    if (failed(per))
      return failure();
  }
  auto reduction = reductionArg(n, reductionIdx, loc);
  if (failed(reduction))
    return failure();
  return bindResult(n, d.reduceLoss(*per, *reduction));
}

/// cosine_similarity(x1, x2, dim, eps): each divided by its 2-norm
/// (clamped at eps, as torch), then the dot product along dim.
LogicalResult TSImporter::hCosineSimilarity(Node *n, Location loc) {
  auto x1 = floatInput(*this, n, loc);
  auto x2 = tensorArg(n, 1, loc);
  auto dim = intArg(n, 2, loc);
  auto eps = floatArg(n, 3, loc);
  if (failed(x1) || failed(x2) || failed(dim) || failed(eps))
    return failure();
  Value b2 = cast(*x2, tensorType(*x1).getElementType(), loc);
  int64_t rank = std::max(tensorType(*x1).getRank(), tensorType(b2).getRank());
  auto axis = normIndex(n, *dim, rank, loc);
  if (failed(axis))
    return failure();
  Decomposer d(b(), loc);
  auto unit = [&](Value v) -> FailureOr<Value> {
    int64_t a = *axis - (rank - tensorType(v).getRank());
    if (a < 0)
      return error(n, loc) << "dimension " << *dim
                           << " is a broadcast dimension of an operand",
             failure();
    auto norm = d.vectorNorm(v, 2.0, {a}, true);
    auto clamped = failed(norm) ? norm
                                : make<MaximumOp>(loc, {*norm,
                                                        d.scalar(*eps,
                                                                 tensorType(v)
                                                                     .getElementType())});
    return failed(clamped) ? clamped : make<DivOp>(loc, {v, *clamped});
  };
  auto u1 = unit(*x1), u2 = unit(b2);
  if (failed(u1) || failed(u2))
    return failure();
  auto prod = make<MulOp>(loc, {*u1, *u2});
  if (failed(prod))
    return failure();
  return bindResult(
      n, reduce(ReduceKind::sum, *prod, {*axis}, false, loc));
}

/// einsum(equation, tensors, path): Decomposer::einsum (the path, torch's
/// contraction order hint, is ignored: operands fold left to right).
LogicalResult TSImporter::hEinsum(Node *n, Location loc) {
  auto eq = strArg(n, 0, loc);
  auto ts = tensorListArg(n, 1, loc);
  if (failed(eq) || failed(ts))
    return failure();
  if (ts->empty())
    return error(n, loc) << "einsum without operands";
  Type et = tensorType(ts->front()).getElementType();
  for (Value v : *ts)
    et = promoteTypes(et, tensorType(v).getElementType());
  SmallVector<Value> same;
  for (Value v : *ts)
    same.push_back(cast(v, et, loc));
  return bindResult(n, Decomposer(b(), loc).einsum(*eq, same));
}

/// bilinear(x1, x2, weight [O, I, J], bias): einsum("...i,oij,...j->...o")
/// (+ bias), on inputs flattened to [N, I] / [N, J] and the result
/// reshaped back.
LogicalResult TSImporter::hBilinear(Node *n, Location loc) {
  auto x1 = floatInput(*this, n, loc);
  auto x2 = tensorArg(n, 1, loc), w = tensorArg(n, 2, loc);
  if (failed(x1) || failed(x2) || failed(w))
    return failure();
  SmallVector<SymInt> d1 = dimsOf(*x1), d2 = dimsOf(*x2), dw = dimsOf(*w);
  if (d1.empty() || d1.size() != d2.size() || dw.size() != 3 ||
      SmallVector<SymInt>(d1.begin(), d1.end() - 1) !=
          SmallVector<SymInt>(d2.begin(), d2.end() - 1))
    return error(n, loc) << "bilinear needs inputs [..., I] and [..., J] "
                            "with the same leading sizes and a weight "
                            "[O, I, J], got "
                         << dimsStr(d1) << ", " << dimsStr(d2) << ", "
                         << dimsStr(dw);
  SmallVector<SymInt> lead(d1.begin(), d1.end() - 1);
  std::optional<SymInt> rows = product(lead);
  if (!rows)
    return error(n, loc) << "cannot flatten " << dimsStr(d1);
  auto a = reshape(*x1, {*rows, d1.back()}, loc);
  auto c = reshape(cast(*x2, tensorType(*x1).getElementType(), loc),
                   {*rows, d2.back()}, loc);
  if (failed(a) || failed(c))
    return failure();
  auto y = Decomposer(b(), loc).einsum("ni,oij,nj->no", {*a, *w, *c});
  if (failed(y))
    return failure();
  SmallVector<SymInt> outDims(lead);
  outDims.push_back(dw[0]);
  auto r = reshape(*y, outDims, loc);
  if (failed(r) || isNoneArg(n, 3))
    return bindResult(n, r);
  auto bias = tensorArg(n, 3, loc);
  if (failed(bias))
    return failure();
  return bindResult(n, make<AddOp>(loc, {*r, *bias}));
}

/// lstm(input, [h0, c0], params, has_biases, num_layers, dropout, train,
/// bidirectional, batch_first) -> (output, h_n, c_n); gru / rnn_tanh /
/// rnn_relu the same with one state tensor h0 -> (output, h_n). nn.LSTM,
/// nn.GRU and nn.RNN, unrolled over the (static) sequence length per layer
/// and direction (Decomposer::recurrentLayer); dropout between layers in
/// training; LSTM projections (proj_size) too. Packed sequences are refused.
LogicalResult TSImporter::hRecurrent(Node *n, Location loc) {
  std::string op = opName(n);
  RecurrentCell cell = op == "lstm"       ? RecurrentCell::lstm
                       : op == "gru"      ? RecurrentCell::gru
                       : op == "rnn_tanh" ? RecurrentCell::rnnTanh
                                          : RecurrentCell::rnnRelu;
  bool lstm = cell == RecurrentCell::lstm;
  // Over a packed sequence: (data, batch_sizes, hx, params, has_biases,
  // num_layers, dropout, train, bidirectional), time-major; else (input,
  // hx, params, ..., bidirectional, batch_first).
  TSValue packed = lookup(n->input(0));
  bool isPacked = packed.kind == K::Packed;
  unsigned o = isPacked ? 1 : 0;
  // Over sorted rows (enforce_sorted=False), the initial states given are
  // sorted too (index_select by sorted_indices); h_n / c_n come out sorted.
  llvm::SaveAndRestore<bool> allow(sortedRowsOk,
                                   isPacked && packed.rowsSorted);
  if (n->inputs().size() != 9 || lookup(n->input(2 + o)).kind != K::List ||
      (lstm && lookup(n->input(1 + o)).kind != K::List))
    return error(n, loc) << "unexpected operands for " << op;
  FailureOr<Value> x =
      isPacked ? FailureOr<Value>(packed.tensor) : floatInput(*this, n, loc);
  auto params = tensorListArg(n, 2 + o, loc);
  auto biases = boolArg(n, 3 + o, loc);
  auto layers = intArg(n, 4 + o, loc);
  auto dropout = floatArg(n, 5 + o, loc);
  auto train = boolArg(n, 6 + o, loc);
  auto bidirectional = boolArg(n, 7 + o, loc);
  auto batchFirst =
      isPacked ? FailureOr<bool>(false) : boolArg(n, 8, loc);
  if (failed(x) || failed(params) || failed(biases) || failed(layers) ||
      failed(dropout) || failed(train) || failed(bidirectional) ||
      failed(batchFirst))
    return failure();
  Value valid = packed.valid; // [T, B] when packed, else null
  SmallVector<Value> states;
  if (lstm) {
    auto hc = tensorListArg(n, 1 + o, loc);
    if (failed(hc))
      return failure();
    states = *hc;
  } else {
    auto h = tensorArg(n, 1 + o, loc);
    if (failed(h))
      return failure();
    states.push_back(*h);
  }
  int64_t dirs = *bidirectional ? 2 : 1;
  size_t perCell = *biases ? 4 : 2;
  size_t cells = static_cast<size_t>(*layers * dirs);
  // An LSTM with proj_size has one more weight per cell, w_hr, last.
  bool projected = lstm && params->size() == cells * (perCell + 1);
  if (projected)
    ++perCell;
  if (params->size() != cells * perCell)
    return error(n, loc) << "expected " << cells * perCell << " weights for "
                         << *layers << " layers, got " << params->size();
  if (states.size() != (lstm ? 2u : 1u))
    return error(n, loc) << "expected " << (lstm ? 2 : 1) << " state tensors";
  Decomposer d(b(), loc);
  Value seq = *x;
  if (*batchFirst) {
    auto t = transpose(seq, {1, 0, 2}, loc);
    if (failed(t))
      return failure();
    seq = *t;
  }
  // The initial state of layer l, direction k: states[.][l * dirs + k].
  auto initial = [&](Value all, int64_t k) -> FailureOr<Value> {
    SmallVector<SymInt> dims = dimsOf(all);
    if (dims.size() != 3)
      return error(n, loc) << "expected a state [layers * directions, B, H], "
                           << "got " << dimsStr(dims),
             failure();
    auto row = make<SliceOp>(loc, {all},
                             {attr("axis", b().getI64IntegerAttr(0)),
                              attr("start", b().getI64IntegerAttr(k)),
                              attr("end", b().getI64IntegerAttr(k + 1)),
                              attr("step", b().getI64IntegerAttr(1))});
    return failed(row) ? row : reshape(*row, {dims[1], dims[2]}, loc);
  };
  SmallVector<Value> lastH, lastC;
  for (int64_t l = 0; l < *layers; ++l) {
    SmallVector<Value> outs;
    for (int64_t k = 0; k < dirs; ++k) {
      int64_t idx = l * dirs + k;
      Value *p = &(*params)[idx * perCell];
      RecurrentWeights w{p[0], p[1], *biases ? p[2] : Value(),
                         *biases ? p[3] : Value(),
                         projected ? p[perCell - 1] : Value()};
      auto h0 = initial(states[0], idx);
      FailureOr<Value> c0 = lstm ? initial(states[1], idx) : FailureOr<Value>(Value());
      if (failed(h0) || failed(c0))
        return failure();
      auto r = d.recurrentLayer(cell, seq, *h0, *c0, w, /*reverse=*/k == 1,
                                valid);
      if (failed(r))
        return failure();
      outs.push_back(r->outputs);
      lastH.push_back(r->h);
      if (lstm)
        lastC.push_back(r->c);
    }
    FailureOr<Value> next = outs[0];
    if (dirs == 2)
      next = make<ConcatOp>(loc, outs, {attr("axis", b().getI64IntegerAttr(2))});
    if (failed(next))
      return failure();
    seq = *next;
    if (*train && *dropout > 0 && l + 1 < *layers)
      seq = b().create<DropoutOp>(loc, seq.getType(), seq,
                                  b().getF64FloatAttr(*dropout))
                .getResult();
  }
  if (*batchFirst) {
    auto t = transpose(seq, {1, 0, 2}, loc);
    if (failed(t))
      return failure();
    seq = *t;
  }
  // h_n (and c_n): the last states stacked [layers * directions, B, H].
  auto stack = [&](ArrayRef<Value> last) -> FailureOr<Value> {
    SmallVector<Value> rows;
    for (Value v : last) {
      SmallVector<SymInt> dims = dimsOf(v);
      auto r = reshape(v, {SymInt(1), dims[0], dims[1]}, loc);
      if (failed(r))
        return failure();
      rows.push_back(*r);
    }
    if (rows.size() == 1)
      return rows[0];
    return make<ConcatOp>(loc, rows, {attr("axis", b().getI64IntegerAttr(0))});
  };
  auto hn = stack(lastH);
  if (failed(hn))
    return failure();
  if (isPacked) { // the output is packed like the input
    TSValue out = TSValue::make(K::Packed);
    out.tensor = seq;
    out.lengths = packed.lengths;
    out.valid = packed.valid;
    out.rowsSorted = packed.rowsSorted;
    bind(n->outputs()[0], out);
  } else {
    bindTensor(n->outputs()[0], seq);
  }
  auto bindState = [&](unsigned i, Value v) {
    TSValue state = TSValue::ofTensor(v);
    state.rowsSorted = packed.rowsSorted;
    bind(n->outputs()[i], state);
  };
  bindState(1, *hn);
  if (lstm) {
    auto cn = stack(lastC);
    if (failed(cn))
      return failure();
    bindState(2, *cn);
  }
  return success();
}

/// i1 [T, B]: step t < lengths[b], for a time-major x [T, B, ...] (static
/// T) and lengths [B].
FailureOr<Value> TSImporter::stepsWithin(Value x, Value lengths,
                                         Location loc) {
  SmallVector<SymInt> dims = dimsOf(x);
  auto steps = b().create<ArangeOp>(
      loc, VTensorType::get(ctx, {dims[0].constant}, -1, b().getI64Type()),
      b().getF64FloatAttr(0.0), b().getF64FloatAttr(1.0));
  auto column = reshape(steps.getResult(), {dims[0], SymInt(1)}, loc);
  auto row = reshape(lengths, {SymInt(1), dims[1]}, loc);
  if (failed(column) || failed(row))
    return failure();
  return make<CompareOp>(
      loc, {*column, *row},
      {attr("predicate", ComparePredicateAttr::get(ctx, ComparePredicate::lt))});
}

/// sort / argsort of an integer [B] (one value per example, as the lengths
/// pack_padded_sequence(enforce_sorted=False) sorts): the values as they
/// are, their rows marked sorted, and a BatchOrder as the indices (see
/// TSValue::Kind::BatchOrder). False (nothing bound) for any other sort.
bool TSImporter::sortsExamples(Node *n, Location loc) {
  const TSValue &in = lookup(n->input(0));
  if (in.kind != K::Tensor || !in.tensor || in.rowsSorted)
    return false;
  VTensorType t = tensorType(in.tensor);
  unsigned at = n->inputs().size() == 4 ? 2 : 1;
  auto dim = optArg(n, at, loc, &TSImporter::intArg, int64_t(-1));
  if (t.getRank() != 1 || t.getDim(0) != SymInt::batch() ||
      !t.getElementType().isa<IntegerType>() || failed(dim) ||
      (*dim != 0 && *dim != -1))
    return false;
  TSValue order = TSValue::make(K::BatchOrder);
  order.i = t.getDim(0);
  if (opName(n) == "argsort") {
    bind(n->output(), order);
    return true;
  }
  TSValue values = in;
  values.rowsSorted = true;
  bind(n->outputs()[0], values);
  bind(n->outputs()[1], order);
  return true;
}

/// _pack_padded_sequence(input, lengths, batch_first): nothing is packed --
/// the padded input, time-major, and the lengths travel on as a packed
/// value, which the recurrent layers run row by row for their lengths and
/// _pad_packed_sequence pads again; batch_sizes (output 1) only gives the
/// batch size (batch_sizes[0], for the initial states). Sorting is not
/// needed: with enforce_sorted=False torch sorts the rows by length first
/// and restores their order after pad_packed_sequence, which here are
/// orders that move nothing (TSValue::Kind::BatchOrder).
LogicalResult TSImporter::hPackPadded(Node *n, Location loc) {
  bool sorted = lookup(n->input(0)).rowsSorted;
  if (sorted != lookup(n->input(1)).rowsSorted)
    return error(n, loc) << "pack_padded_sequence: the input and the lengths "
                            "are in different orders (one sorted by "
                            "enforce_sorted=False's sort, one not)";
  llvm::SaveAndRestore<bool> allow(sortedRowsOk, true);
  auto x = floatInput(*this, n, loc);
  auto lengths = tensorArg(n, 1, loc);
  auto batchFirst = boolArg(n, 2, loc);
  if (failed(x) || failed(lengths) || failed(batchFirst))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x), ld = dimsOf(*lengths);
  Value seq = *x;
  if (*batchFirst && dims.size() == 3) {
    auto t = transpose(seq, {1, 0, 2}, loc);
    if (failed(t))
      return failure();
    seq = *t;
    std::swap(dims[0], dims[1]);
  }
  if (dims.size() != 3 || !dims[0].isStatic() || ld.size() != 1 ||
      ld[0] != dims[1] ||
      !tensorType(*lengths).getElementType().isa<IntegerType>())
    return error(n, loc) << "pack_padded_sequence: expected a padded input "
                            "[B, T, F] (batch_first) or [T, B, F] with a "
                            "static T and integer lengths [B], got "
                         << dimsStr(dimsOf(*x)) << " and " << dimsStr(ld);
  TSValue data = TSValue::make(K::Packed);
  data.tensor = seq;
  data.lengths = cast(*lengths, b().getI64Type(), loc);
  auto valid = stepsWithin(seq, data.lengths, loc);
  if (failed(valid))
    return failure();
  data.valid = *valid;
  data.rowsSorted = sorted;
  bind(n->outputs()[0], data);
  TSValue sizes = TSValue::make(K::PackedSizes);
  sizes.lengths = data.lengths;
  sizes.i = dims[1];
  bind(n->outputs()[1], sizes);
  return success();
}

/// _pad_packed_sequence(data, batch_sizes, batch_first, padding_value,
/// total_length) -> (padded, lengths): the packed values with
/// padding_value past each row's length. total_length must be the padded
/// input's T (pad_packed_sequence(..., total_length=x.shape[1])): without
/// it torch pads to the longest row of the batch, a length of the data
/// that differs from micro-batch to micro-batch.
LogicalResult TSImporter::hPadPacked(Node *n, Location loc) {
  TSValue packed = lookup(n->input(0));
  if (packed.kind != K::Packed)
    return error(n, loc) << "pad_packed_sequence of something that is not "
                            "a packed sequence from pack_padded_sequence";
  auto batchFirst = boolArg(n, 2, loc);
  auto padding = floatArg(n, 3, loc);
  auto total = intArg(n, 4, loc);
  if (failed(batchFirst) || failed(padding) || failed(total))
    return failure();
  SmallVector<SymInt> dims = dimsOf(packed.tensor);
  if (*total != dims[0].constant)
    return error(n, loc)
           << "pad_packed_sequence needs total_length = the padded input's "
              "length ("
           << dims[0].constant << "; got "
           << (*total < 0 ? std::string("none") : std::to_string(*total))
           << "): without it the output is as long as the batch's longest "
              "sequence, which differs between micro-batches -- pass "
              "total_length=x.shape[1]";
  auto column = reshape(packed.valid, {dims[0], dims[1], SymInt(1)}, loc);
  if (failed(column))
    return failure();
  Type et = tensorType(packed.tensor).getElementType();
  auto out = make<WhereOp>(
      loc, {*column, packed.tensor, scalarConstant(*padding, et, loc)});
  if (failed(out))
    return failure();
  Value seq = *out;
  if (*batchFirst) {
    auto t = transpose(seq, {1, 0, 2}, loc);
    if (failed(t))
      return failure();
    seq = *t;
  }
  // Both in the packed sequence's row order (sorted by enforce_sorted=
  // False's sort: index_select by unsorted_indices restores the examples').
  Value outs[] = {seq, packed.lengths};
  for (auto [i, v] : llvm::enumerate(outs)) {
    TSValue out = TSValue::ofTensor(v);
    out.rowsSorted = packed.rowsSorted;
    bind(n->outputs()[i], out);
  }
  return success();
}

/// one_hot(indices, num_classes) -> int64 [..., num_classes]: indices
/// compared with arange(num_classes). num_classes = -1 (the largest index
/// + 1, a value of the data) is refused.
LogicalResult TSImporter::hOneHot(Node *n, Location loc) {
  auto ids = tensorArg(n, 0, loc);
  auto classes = intArg(n, 1, loc);
  if (failed(ids) || failed(classes))
    return failure();
  if (*classes < 1)
    return error(n, loc) << "one_hot needs num_classes (-1 would take it "
                            "from the data, which the graph cannot)";
  auto hit = Decomposer(b(), loc).oneHot(*ids, *classes, false);
  if (failed(hit))
    return failure();
  return bindResult(n, cast(*hit, b().getI64Type(), loc));
}

/// im2col(x, kernel, dilation, padding, stride) (F.unfold) on [N, C, H, W]:
/// a grouped convolution with a constant one-hot weight [C*kh*kw, 1, kh,
/// kw] (output channel c*kh*kw + i*kw + j reads channel c at offset (i,
/// j)), reshaped to [N, C*kh*kw, L].
/// The grouped convolution weight [C*kh*kw, 1, kh, kw] that copies window
/// offset k of channel c to output channel c*kh*kw + k (unfold's column
/// order); as a transposed convolution's weight it adds them back (fold).
static Value windowSelector(OpBuilder &b, Location loc, int64_t c, int64_t kh,
                            int64_t kw, Type et) {
  int64_t per = kh * kw;
  std::vector<double> w(c * per * per, 0.0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t k = 0; k < per; ++k)
      w[(ch * per + k) * per + k] = 1.0;
  return Decomposer(b, loc).constant({c * per, 1, kh, kw}, et, w);
}

LogicalResult TSImporter::hIm2Col(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto kernel = intListArg(n, 1, loc), dil = intListArg(n, 2, loc),
       pad = intListArg(n, 3, loc), stride = intListArg(n, 4, loc);
  if (failed(x) || failed(kernel) || failed(dil) || failed(pad) ||
      failed(stride))
    return failure();
  SmallVector<SymInt> d = dimsOf(*x);
  if (d.size() != 4 || !d[1].isStatic() || kernel->size() != 2 ||
      dil->size() != 2 || pad->size() != 2 || stride->size() != 2)
    return error(n, loc) << "unfold needs an input [N, C, H, W] and two "
                            "values per window argument, got "
                         << dimsStr(d);
  int64_t c = d[1].constant, kh = (*kernel)[0], kw = (*kernel)[1];
  Value weight = windowSelector(b(), loc, c, kh, kw,
                                tensorType(*x).getElementType());
  auto conv = make<ConvOp>(
      loc, {*x, weight},
      {attr("strides", b().getDenseI64ArrayAttr(*stride)),
       attr("pads", b().getDenseI64ArrayAttr(
                        {(*pad)[0], (*pad)[1], (*pad)[0], (*pad)[1]})),
       attr("dilations", b().getDenseI64ArrayAttr(*dil)),
       attr("groups", b().getI64IntegerAttr(c))});
  if (failed(conv))
    return failure();
  SmallVector<SymInt> out = dimsOf(*conv);
  return bindResult(n, reshape(*conv, {out[0], out[1],
                                       SymInt(out[2].constant * out[3].constant)},
                               loc));
}

/// col2im(x, output_size, kernel_size, dilation, padding, stride) (F.fold,
/// nn.Fold): x [N, C*kh*kw, L] as [N, C*kh*kw, Lh, Lw] (the window grid of
/// the output [H, W]), then the transposed grouped convolution with unfold's
/// selector weight: each window's values added back where unfold read them.
LogicalResult TSImporter::hCol2Im(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto size = intListArg(n, 1, loc), kernel = intListArg(n, 2, loc),
       dil = intListArg(n, 3, loc), pad = intListArg(n, 4, loc),
       stride = intListArg(n, 5, loc);
  if (failed(x) || failed(size) || failed(kernel) || failed(dil) ||
      failed(pad) || failed(stride))
    return failure();
  SmallVector<SymInt> d = dimsOf(*x);
  if (d.size() != 3 || !d[1].isStatic() || !d[2].isStatic() ||
      size->size() != 2 || kernel->size() != 2 || dil->size() != 2 ||
      pad->size() != 2 || stride->size() != 2)
    return error(n, loc) << "fold needs an input [N, C*kh*kw, L] with static "
                            "C*kh*kw and L, and two values per window "
                            "argument, got "
                         << dimsStr(d);
  int64_t kh = (*kernel)[0], kw = (*kernel)[1], per = kh * kw;
  int64_t grid[2], outPad[2];
  for (int i = 0; i < 2; ++i) {
    int64_t span = (*dil)[i] * ((*kernel)[i] - 1) + 1;
    int64_t free = (*size)[i] + 2 * (*pad)[i] - span;
    if ((*stride)[i] < 1 || free < 0)
      return error(n, loc) << "fold: a window of " << span
                           << " does not fit output size " << (*size)[i]
                           << " with padding " << (*pad)[i];
    grid[i] = free / (*stride)[i] + 1;
    // what the transposed convolution's arithmetic leaves out
    outPad[i] = (*size)[i] -
                ((grid[i] - 1) * (*stride)[i] - 2 * (*pad)[i] + span);
  }
  if (per < 1 || d[1].constant % per != 0 || d[2].constant != grid[0] * grid[1])
    return error(n, loc) << "fold: input " << dimsStr(d)
                         << " is not [N, C*" << per << ", " << grid[0] * grid[1]
                         << "] for kernel " << kh << "x" << kw
                         << " and output " << (*size)[0] << "x" << (*size)[1];
  int64_t c = d[1].constant / per;
  auto windows = reshape(*x, {d[0], d[1], SymInt(grid[0]), SymInt(grid[1])},
                         loc);
  if (failed(windows))
    return failure();
  Value weight =
      windowSelector(b(), loc, c, kh, kw, tensorType(*x).getElementType());
  return bindResult(
      n, make<ConvTransposeOp>(
             loc, {*windows, weight},
             {attr("strides", b().getDenseI64ArrayAttr(*stride)),
              attr("pads", b().getDenseI64ArrayAttr(*pad)),
              attr("output_padding", b().getDenseI64ArrayAttr(outPad)),
              attr("dilations", b().getDenseI64ArrayAttr(*dil)),
              i64("groups", c)}));
}

/// affine_grid_generator(theta, size, align_corners) (F.affine_grid) for a
/// 4-D size [N, C, H, W].
LogicalResult TSImporter::hAffineGrid(Node *n, Location loc) {
  auto theta = floatInput(*this, n, loc);
  auto size = symIntListArg(n, 1, loc);
  auto align = boolArg(n, 2, loc);
  if (failed(theta) || failed(size) || failed(align))
    return failure();
  if (size->size() != 4 || !(*size)[2].isStatic() || !(*size)[3].isStatic())
    return error(n, loc) << "affine_grid is supported for a 4-D size [N, C, "
                            "H, W] with static H and W (5-D grids are not)";
  return bindResult(n, Decomposer(b(), loc).affineGrid(
                           *theta, (*size)[2].constant, (*size)[3].constant,
                           *align));
}

/// grid_sampler(input, grid, interpolation_mode, padding_mode,
/// align_corners) (F.grid_sample): modes 0 bilinear / 1 nearest, padding 0
/// zeros / 1 border; bicubic and reflection are refused.
LogicalResult TSImporter::hGridSample(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto grid = tensorArg(n, 1, loc);
  auto mode = intArg(n, 2, loc), padding = intArg(n, 3, loc);
  auto align = boolArg(n, 4, loc);
  if (failed(x) || failed(grid) || failed(mode) || failed(padding) ||
      failed(align))
    return failure();
  if (*mode != 0 && *mode != 1)
    return error(n, loc) << "grid_sample: only mode 'bilinear' and 'nearest' "
                            "are supported (got "
                         << (*mode == 2 ? std::string("'bicubic'")
                                        : std::to_string(*mode))
                         << ")";
  if (*padding != 0 && *padding != 1)
    return error(n, loc) << "grid_sample: only padding_mode 'zeros' and "
                            "'border' are supported (got "
                         << (*padding == 2 ? std::string("'reflection'")
                                           : std::to_string(*padding))
                         << ")";
  using Mode = Decomposer::SampleMode;
  return bindResult(n, Decomposer(b(), loc).gridSample(
                           *x, cast(*grid, tensorType(*x).getElementType(), loc),
                           *mode == 0 ? Mode::bilinear : Mode::nearest,
                           *padding == 1, *align));
}

/// prelu(x, weight): x where x > 0, else weight * x, the weight (one value
/// or one per channel) along dimension 1.
LogicalResult TSImporter::hPrelu(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto w = tensorArg(n, 1, loc);
  if (failed(x) || failed(w))
    return failure();
  SmallVector<SymInt> xd = dimsOf(*x), wd = dimsOf(*w);
  Value slope = cast(*w, tensorType(*x).getElementType(), loc);
  if (wd.size() == 1 && wd[0] != SymInt(1)) {
    if (xd.size() < 2 || xd[1] != wd[0])
      return error(n, loc) << "prelu: " << wd[0].str()
                           << " weights for an input " << dimsStr(xd)
                           << " (one per channel, dimension 1)";
    SmallVector<SymInt> shape(xd.size() - 1, SymInt(1));
    shape[0] = wd[0];
    auto r = reshape(slope, shape, loc);
    if (failed(r))
      return failure();
    slope = *r;
  }
  return bindResult(n, Decomposer(b(), loc).prelu(*x, slope));
}

/// topk(x, k, dim, largest, sorted) -> (values, indices); sort(x, dim,
/// descending) and sort.stable(x, stable, dim, descending) -> (values,
/// indices); argsort (the same forms) -> indices. All through
/// Decomposer::topK (k = the size for sorting): always sorted, ties to the
/// lower index (what a stable sort gives).
LogicalResult TSImporter::hTopK(Node *n, Location loc) {
  std::string op = opName(n);
  if (op != "topk" && sortsExamples(n, loc))
    return success();
  auto x = tensorArg(n, 0, loc); // integers keep their type (topK)
  if (failed(x))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  int64_t dim = -1, k = -1;
  bool largest = true;
  if (op == "topk") {
    auto kk = intArg(n, 1, loc);
    auto d = optArg(n, 2, loc, &TSImporter::intArg, int64_t(-1));
    auto l = optArg(n, 3, loc, &TSImporter::boolArg, true);
    if (failed(kk) || failed(d) || failed(l))
      return failure();
    k = *kk;
    dim = *d;
    largest = *l;
  } else {
    // sort / argsort (x, dim, descending) or (x, stable, dim, descending).
    unsigned at = n->inputs().size() == 4 ? 2 : 1;
    auto d = optArg(n, at, loc, &TSImporter::intArg, int64_t(-1));
    auto desc = optArg(n, at + 1, loc, &TSImporter::boolArg, false);
    if (failed(d) || failed(desc))
      return failure();
    dim = *d;
    largest = *desc;
  }
  auto axis = normIndex(n, dim, std::max<int64_t>(rank, 1), loc);
  if (failed(axis))
    return failure();
  if (k < 0)
    k = dimsOf(*x)[*axis].constant;
  auto r = Decomposer(b(), loc).topK(*x, *axis, k, largest);
  if (failed(r))
    return failure();
  if (op == "argsort")
    return bindResult(n, r->second);
  bindTensor(n->outputs()[0], r->first);
  bindTensor(n->outputs()[1], r->second);
  return success();
}

/// scatter(self, dim, index, src | value) and scatter_add(self, dim, index,
/// src) on floating-point tensors (Decomposer::scatterAlong); scatter_reduce
/// with sum, mean, amax or amin (include_self either way;
/// Decomposer::scatterReduce); prod and scatter's reduce= forms (torch has
/// no derivative for them) refused.
LogicalResult TSImporter::hScatter(Node *n, Location loc) {
  std::string op = opName(n);
  if (const TSValue &order = lookup(n->input(2));
      order.kind == K::BatchOrder) {
    // torch's invert_permutation: empty_like(order).scatter_(0, order,
    // arange(order.numel())) -- the inverse order.
    auto dim = intArg(n, 1, loc);
    if (failed(dim))
      return failure();
    Node *src = n->inputs().size() > 3 ? n->input(3)->node() : nullptr;
    if (op != "scatter" || order.b || *dim != 0 || !src ||
        src->kind() != c10::Symbol::fromQualString("aten::arange"))
      return (void)asTensor(order, Type(), loc, n), failure(); // its error
    TSValue inverse = order;
    inverse.b = true;
    bind(n->output(), inverse);
    return success();
  }
  // scatter_reduce(self, dim, index, src, reduce, include_self):
  // Decomposer::scatterReduce.
  std::optional<ReduceKind> reduceKind;
  bool includeSelf = true;
  if (n->inputs().size() > 4) {
    auto how = strArg(n, 4, loc);
    if (failed(how))
      return failure();
    reduceKind = llvm::StringSwitch<std::optional<ReduceKind>>(*how)
                     .Case("sum", ReduceKind::sum)
                     .Case("mean", ReduceKind::mean)
                     .Case("amax", ReduceKind::max)
                     .Case("amin", ReduceKind::min)
                     .Default(std::nullopt);
    if (!reduceKind || op != "scatter_reduce")
      return error(n, loc) << op << " with reduce=\"" << *how
                           << "\" is not supported (scatter_reduce with sum, "
                              "mean, amax and amin is)";
    auto inc = optArg(n, 5, loc, &TSImporter::boolArg, true);
    if (failed(inc))
      return failure();
    includeSelf = *inc;
  }
  auto self = tensorArg(n, 0, loc);
  auto dim = intArg(n, 1, loc);
  auto index = tensorArg(n, 2, loc);
  if (failed(self) || failed(dim) || failed(index))
    return failure();
  Type et = tensorType(*self).getElementType();
  auto axis = normIndex(n, *dim, tensorType(*self).getRank(), loc);
  if (failed(axis))
    return failure();
  Value src;
  TSValue &s = lookup(n->input(3));
  if (s.kind == K::Tensor) {
    auto t = tensorArg(n, 3, loc);
    if (failed(t))
      return failure();
    src = cast(*t, et, loc);
  } else {
    auto v = floatArg(n, 3, loc);
    if (failed(v))
      return failure();
    src = b().create<FullOp>(loc, tensorType(*index).withElementType(et),
                             b().getFloatAttr(et, *v));
  }
  Decomposer d(b(), loc);
  if (reduceKind)
    return bindResult(n, d.scatterReduce(*self, *axis, *index, src, *reduceKind,
                                         includeSelf));
  return bindResult(
      n, d.scatterAlong(*self, *axis, *index, src, op == "scatter_add"));
}

/// `index` [K] (integers) viewed along `axis` of a tensor of `like`'s rank
/// and expanded to `like`'s shape: the per-element index scatterAlong takes.
FailureOr<Value> TSImporter::indexAlong(Value index, int64_t axis, Value like,
                                        Location loc) {
  VTensorType it = tensorType(index), lt = tensorType(like);
  SmallVector<SymInt> dims(lt.getRank(), SymInt(1));
  dims[axis] = it.getDim(0);
  auto shaped = reshape(index, dims, loc);
  if (failed(shaped))
    return failure();
  return Value(b().create<ExpandOp>(
      loc, lt.withElementType(it.getElementType()), *shaped));
}

/// Checks that `index` is a 1-D integer index for dimension `axis` of
/// `self` (a dimension that does not depend on the batch).
static LogicalResult checkSliceIndex(TSImporter &imp, TSImporter::Node *n,
                                     Value index, Value self, int64_t axis,
                                     Location loc) {
  VTensorType it = tensorType(index), st = tensorType(self);
  if (it.getRank() != 1 || !it.getElementType().isSignlessInteger() ||
      it.getElementType().isInteger(1))
    return imp.error(n, loc)
           << "the index must be a 1-D integer tensor, got " << it;
  if (st.getBatchDim() == axis)
    return imp.error(n, loc)
           << "indexes dimension " << axis
           << ", whose size depends on the batch (a write there would mix "
              "micro-batches)";
  return success();
}

/// Operand `i` checked by checkSliceIndex.
static FailureOr<Value> sliceIndex(TSImporter &imp, TSImporter::Node *n,
                                   unsigned i, Value self, int64_t axis,
                                   Location loc) {
  auto index = imp.tensorArg(n, i, loc);
  if (failed(index) || failed(checkSliceIndex(imp, n, *index, self, axis, loc)))
    return failure();
  return *index;
}

/// index_add(self, dim, index [K], source, alpha) / index_copy(self, dim,
/// index, source): source's slices added to (written into) self's slices
/// `index` along dim -- graph message passing (`out.index_add_(0, dst,
/// msg)`). Through Decomposer::scatterAlong; index_copy with a repeated
/// index adds the slices up (torch leaves which one wins undefined).
LogicalResult TSImporter::hIndexAdd(Node *n, Location loc) {
  std::string op = opName(n);
  auto self = tensorArg(n, 0, loc);
  auto dim = intArg(n, 1, loc);
  auto source = tensorArg(n, 3, loc);
  if (failed(self) || failed(dim) || failed(source))
    return failure();
  Type et = tensorType(*self).getElementType();
  auto axis = normIndex(n, *dim, tensorType(*self).getRank(), loc);
  if (failed(axis))
    return failure();
  auto index = sliceIndex(*this, n, 2, *self, *axis, loc);
  if (failed(index))
    return failure();
  Value src = cast(*source, et, loc);
  if (op == "index_add") {
    auto alpha = optArg(n, 4, loc, &TSImporter::floatArg, 1.0);
    if (failed(alpha))
      return failure();
    if (*alpha != 1.0) {
      auto scaled = binary("mul", TSValue::ofTensor(src),
                           TSValue::ofFloat(*alpha), loc, n);
      if (failed(scaled))
        return failure();
      src = *scaled;
    }
  }
  auto idx = indexAlong(*index, *axis, src, loc);
  if (failed(idx))
    return failure();
  return bindResult(n, Decomposer(b(), loc).scatterAlong(
                           *self, *axis, *idx, src, op == "index_add"));
}

/// Whether each position of dimension `axis` (size `size`) is named by
/// `index` [K] (a negative index counting from the end): an i1 tensor of
/// rank `rank`, `size` along `axis`, 1 elsewhere.
FailureOr<Value> TSImporter::indexMask(Value index, int64_t axis, int64_t size,
                                       int64_t rank, Location loc, Node *n) {
  Decomposer d(b(), loc);
  SmallVector<double> positions, fromEnd;
  for (int64_t j = 0; j < size; ++j) {
    positions.push_back(double(j));
    fromEnd.push_back(double(j - size));
  }
  Type it = tensorType(index).getElementType();
  auto col = reshape(index, {tensorType(index).getDim(0), SymInt(1)}, loc);
  if (failed(col))
    return failure();
  auto named = [&](ArrayRef<double> at) {
    return binary("eq", TSValue::ofTensor(*col),
                  TSValue::ofTensor(d.constant({1, size}, it, at)), loc, n);
  };
  auto ahead = named(positions), behind = named(fromEnd);
  auto hits = failed(ahead) || failed(behind)
                  ? FailureOr<Value>(failure())
                  : binary("or", TSValue::ofTensor(*ahead),
                           TSValue::ofTensor(*behind), loc, n); // [K, size]
  if (failed(hits))
    return failure();
  auto any = reduce(ReduceKind::max, cast(*hits, b().getF32Type(), loc), {0},
                    false, loc);
  if (failed(any))
    return failure();
  SmallVector<SymInt> dims(rank, SymInt(1));
  dims[axis] = SymInt(size);
  auto shaped = reshape(cast(*any, b().getI1Type(), loc), dims, loc);
  return shaped;
}

/// index_fill(self, dim, index [K], value): the slices `index` along dim
/// set to value (`h[:, idx] = 1.0` traces to it).
LogicalResult TSImporter::hIndexFill(Node *n, Location loc) {
  auto self = tensorArg(n, 0, loc);
  auto dim = intArg(n, 1, loc);
  if (failed(self) || failed(dim))
    return failure();
  VTensorType st = tensorType(*self);
  auto axis = normIndex(n, *dim, st.getRank(), loc);
  if (failed(axis))
    return failure();
  auto index = sliceIndex(*this, n, 2, *self, *axis, loc);
  if (failed(index))
    return failure();
  auto value = asTensor(lookup(n->input(3)), st.getElementType(), loc, n);
  if (failed(value))
    return failure();
  if (tensorType(*value).getRank() != 0)
    return operandError(n, 3, loc, "a number or a 0-d tensor");
  auto mask =
      indexMask(*index, *axis, st.getDim(*axis).constant, st.getRank(), loc, n);
  if (failed(mask))
    return failure();
  return bindResult(
      n, make<WhereOp>(loc,
                       {*mask, cast(*value, st.getElementType(), loc), *self}));
}

/// index_put(self, indices, values, accumulate): `x[mask] = v` (a boolean
/// mask over leading dimensions, v a number or a 0-d tensor) and `x[..,
/// idx] = v` / `+=` (one 1-D integer index after leading Nones, v
/// broadcast to the indexed slices). Several index tensors, and a mask
/// with values per selected element (their number depends on the data),
/// are refused.
LogicalResult TSImporter::hIndexPut(Node *n, Location loc) {
  auto self = tensorArg(n, 0, loc);
  auto accumulate = optArg(n, 3, loc, &TSImporter::boolArg, false);
  if (failed(self) || failed(accumulate))
    return failure();
  VTensorType st = tensorType(*self);
  Type et = st.getElementType();
  TSValue list = lookup(n->input(1));
  if (list.kind != TSValue::Kind::List)
    return operandError(n, 1, loc, "a list of indices");
  int64_t axis = -1;
  TSValue index;
  for (auto [i, v] : llvm::enumerate(list.list)) {
    if (v.kind == TSValue::Kind::None)
      continue;
    if (axis >= 0)
      return error(n, loc) << "writes through several index tensors; only "
                              "one (after leading ':') is supported";
    axis = static_cast<int64_t>(i);
    index = v;
  }
  if (axis < 0)
    return error(n, loc) << "writes without an index tensor";
  auto idx = asTensor(index, Type(), loc, n);
  auto values = asTensor(lookup(n->input(2)), et, loc, n);
  if (failed(idx) || failed(values))
    return failure();
  Value v = cast(*values, et, loc);
  VTensorType it = tensorType(*idx);
  if (it.getElementType().isInteger(1)) {
    // A mask over dimensions axis .. axis + rank(mask) - 1 of self.
    SmallVector<SymInt> md = dimsOf(*idx), sd = dimsOf(*self);
    if (axis + md.size() > sd.size() ||
        !std::equal(md.begin(), md.end(), sd.begin() + axis))
      return error(n, loc) << "a mask of shape " << dimsStr(md)
                           << " does not match dimensions " << axis
                           << " onwards of " << dimsStr(sd);
    if (tensorType(v).getRank() != 0)
      return error(n, loc) << "writes a tensor of values through a mask (as "
                              "many values as the mask selects, a number "
                              "that depends on the data); write a number, or "
                              "use torch.where(mask, values, x)";
    SmallVector<SymInt> dims(axis, SymInt(1));
    dims.append(md.begin(), md.end());
    dims.append(sd.size() - dims.size(), SymInt(1));
    auto mask = reshape(*idx, dims, loc);
    if (failed(mask))
      return failure();
    if (!*accumulate)
      return bindResult(n, make<WhereOp>(loc, {*mask, v, *self}));
    Value zero = scalarConstant(0.0, et, loc);
    auto added = make<WhereOp>(loc, {*mask, v, zero});
    if (failed(added))
      return failure();
    return bindResult(n, binary("add", TSValue::ofTensor(*self),
                                TSValue::ofTensor(*added), loc, n));
  }
  if (failed(checkSliceIndex(*this, n, *idx, *self, axis, loc)))
    return failure();
  // The slices written: self's shape with K along the axis.
  SmallVector<SymInt> sd = dimsOf(*self);
  sd[axis] = it.getDim(0);
  auto srcType = typeFromDims(sd, et, loc);
  if (failed(srcType))
    return failure();
  Value src = b().create<ExpandOp>(loc, *srcType, v);
  auto along = indexAlong(*idx, axis, src, loc);
  if (failed(along))
    return failure();
  return bindResult(n, Decomposer(b(), loc).scatterAlong(*self, axis, *along,
                                                         src, *accumulate));
}

/// diagonal(self, offset, dim1, dim2): the elements [i, i + offset] of the
/// two (static) dimensions, as a last dimension -- x times a constant 0/1
/// mask, summed over dim2, sliced to the diagonal's length (adding zeros is
/// exact). diag(x [n, m], k) is diagonal(x, k); diag(v [n], 0) and
/// diag_embed(v [.., n]) make a matrix with v on its diagonal; trace(x) sums
/// the diagonal.
LogicalResult TSImporter::hDiagonal(Node *n, Location loc) {
  std::string op = opName(n);
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  VTensorType t = tensorType(*x);
  int64_t rank = t.getRank();
  Decomposer d(b(), loc);
  auto offsetArg = optArg(n, 1, loc, &TSImporter::intArg, 0);
  if (failed(offsetArg))
    return failure();
  int64_t off = op == "trace" ? 0 : *offsetArg;
  if ((op == "diag" && rank == 1) || op == "diag_embed") {
    // v [.., n] -> [.., n, n] (diag: [n, n]) with v on the diagonal.
    if (off != 0 || rank < 1 || t.getBatchDim() == rank - 1)
      return error(n, loc) << op
                           << " supports offset 0 of a last dimension "
                              "that does not depend on the batch";
    if (op == "diag_embed" && n->inputs().size() > 3) {
      auto d1 = intArg(n, 2, loc), d2 = intArg(n, 3, loc);
      if (failed(d1) || failed(d2))
        return failure();
      if (normAxis(*d1, rank + 1) != rank - 1 ||
          normAxis(*d2, rank + 1) != rank)
        return error(n, loc) << "diag_embed into dimensions other than the "
                                "last two is not supported";
    }
    int64_t size = t.getDim(rank - 1).constant;
    SmallVector<double> eye;
    for (int64_t i = 0; i < size; ++i)
      for (int64_t j = 0; j < size; ++j)
        eye.push_back(i == j);
    SmallVector<SymInt> dims = dimsOf(*x);
    dims.push_back(SymInt(1));
    auto col = reshape(*x, dims, loc);
    if (failed(col))
      return failure();
    return bindResult(n, binary("mul", TSValue::ofTensor(*col),
                                TSValue::ofTensor(d.constant(
                                    {size, size}, t.getElementType(), eye)),
                                loc, n));
  }
  int64_t d1 = 0, d2 = 1;
  if (op == "diagonal") {
    auto a = optArg(n, 2, loc, &TSImporter::intArg, 0);
    auto c = optArg(n, 3, loc, &TSImporter::intArg, 1);
    if (failed(a) || failed(c))
      return failure();
    auto na = normIndex(n, *a, rank, loc), nc = normIndex(n, *c, rank, loc);
    if (failed(na) || failed(nc))
      return failure();
    d1 = *na;
    d2 = *nc;
  } else if (rank != 2) {
    return error(n, loc) << op << " of a tensor of rank " << rank
                         << " (expected a matrix)";
  }
  if (d1 == d2 || rank < 2)
    return error(n, loc) << "diagonal of dimensions " << d1 << " and " << d2;
  if (t.getBatchDim() == d1 || t.getBatchDim() == d2)
    return error(n, loc) << "a diagonal over the batch-dependent dimension "
                         << t.getBatchDim() << " is not supported";
  int64_t n1 = t.getDim(d1).constant, n2 = t.getDim(d2).constant;
  int64_t start = std::max<int64_t>(0, -off),
          end = std::min<int64_t>(n1, n2 - off);
  if (end <= start)
    return error(n, loc) << "the diagonal at offset " << off << " of " << n1
                         << " x " << n2 << " is empty";
  SmallVector<int64_t> shape(rank, 1);
  shape[d1] = n1;
  shape[d2] = n2;
  SmallVector<double> mask;
  for (int64_t i = 0; i < n1; ++i)
    for (int64_t j = 0; j < n2; ++j)
      mask.push_back(j - i == off);
  // The mask laid out over (d1, d2) in that order of dimensions.
  if (d1 > d2) {
    SmallVector<double> swapped(mask.size());
    for (int64_t i = 0; i < n1; ++i)
      for (int64_t j = 0; j < n2; ++j)
        swapped[j * n1 + i] = mask[i * n2 + j];
    mask = swapped;
  }
  auto masked = binary(
      "mul", TSValue::ofTensor(*x),
      TSValue::ofTensor(d.constant(shape, t.getElementType(), mask)), loc, n);
  if (failed(masked))
    return failure();
  auto summed = reduce(ReduceKind::sum, *masked, {d2}, false, loc);
  if (failed(summed))
    return failure();
  int64_t a1 = d1 < d2 ? d1 : d1 - 1;
  auto diag = sliceOf(*summed, a1, SymInt(start), SymInt(end), 1, loc, n);
  if (failed(diag))
    return failure();
  if (op == "trace")
    return bindResult(n, reduce(ReduceKind::sum, *diag, {0}, false, loc));
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < rank - 1; ++i)
    if (i != a1)
      perm.push_back(i);
  perm.push_back(a1);
  return bindResult(n, transpose(*diag, perm, loc));
}

/// Linear algebra on small square matrices (varuna.linalg, computed by
/// ATen): inverse / linalg_inv, det / linalg_det, slogdet / linalg_slogdet
/// (sign = sign(det), log |det|), logdet (log det), cholesky /
/// linalg_cholesky (upper: the lower factor transposed), linalg_solve (left
/// only), cholesky_solve(b, L, upper).
LogicalResult TSImporter::hLinalg(Node *n, Location loc) {
  std::string op = opName(n);
  if (StringRef(op).starts_with("linalg_"))
    op = op.substr(7);
  auto a = tensorArg(n, op == "cholesky_solve" ? 1 : 0, loc);
  if (failed(a))
    return failure();
  if (!isFloatType(tensorType(*a).getElementType()))
    *a = cast(*a, b().getF32Type(), loc);
  Type et = tensorType(*a).getElementType();
  MathBuilder m{*this, loc, et};
  auto linalg = [&](LinalgKind kind, ValueRange operands) {
    return make<LinalgOp>(loc, operands,
                          {attr("kind", LinalgKindAttr::get(ctx, kind))});
  };
  auto lastTwoSwapped = [&](FailureOr<Value> v) -> FailureOr<Value> {
    if (failed(v))
      return v;
    return swapDims(*v, tensorType(*v).getRank() - 2,
                    tensorType(*v).getRank() - 1, loc);
  };
  if (op == "inv" || op == "inverse")
    return bindResult(n, linalg(LinalgKind::inv, {*a}));
  if (op == "det" || op == "logdet")
    return bindResult(n, op == "det" ? linalg(LinalgKind::det, {*a})
                                     : m.un(UnaryKind::log,
                                            linalg(LinalgKind::det, {*a})));
  if (op == "slogdet") {
    auto sign = m.un(UnaryKind::sign, linalg(LinalgKind::det, {*a}));
    auto logabs = linalg(LinalgKind::logabsdet, {*a});
    if (failed(sign) || failed(logabs))
      return failure();
    if (n->outputs().size() != 2)
      return error(n, loc) << "slogdet with " << n->outputs().size()
                           << " results";
    bindTensor(n->outputs()[0], *sign);
    bindTensor(n->outputs()[1], *logabs);
    return success();
  }
  if (op == "cholesky") {
    auto upper = optArg(n, 1, loc, &TSImporter::boolArg, false);
    if (failed(upper))
      return failure();
    auto lower = linalg(LinalgKind::cholesky, {*a});
    return bindResult(n, *upper ? lastTwoSwapped(lower) : lower);
  }
  if (op == "solve" || op == "cholesky_solve") {
    bool chol = op == "cholesky_solve";
    auto rhs = tensorArg(n, chol ? 0 : 1, loc);
    if (failed(rhs))
      return failure();
    Value matrix = *a;
    if (chol) { // a = L L^T (upper: U^T U)
      auto upper = optArg(n, 2, loc, &TSImporter::boolArg, false);
      if (failed(upper))
        return failure();
      auto t = lastTwoSwapped(*a);
      auto prod = failed(t) ? t
                  : *upper  ? make<MatmulOp>(loc, {*t, *a})
                            : make<MatmulOp>(loc, {*a, *t});
      if (failed(prod))
        return failure();
      matrix = *prod;
    } else if (!isNoneArg(n, 2)) {
      auto left = boolArg(n, 2, loc);
      if (failed(left))
        return failure();
      if (!*left)
        return error(n, loc) << "solve with left=False (x a = b) is not "
                                "supported";
    }
    return bindResult(n, linalg(LinalgKind::solve,
                                {matrix, cast(*rhs, et, loc)}));
  }
  return error(n, loc) << "is not a supported linear algebra function";
}

/// take_along_dim(x, indices, dim): torch.gather when the two have one
/// shape outside dim (no broadcasting; dim None flattens both).
LogicalResult TSImporter::hTakeAlongDim(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc), idx = tensorArg(n, 1, loc);
  if (failed(x) || failed(idx))
    return failure();
  int64_t axis = 0;
  if (isNoneArg(n, 2)) {
    auto fx = reshape(*x, {tensorType(*x).getNumElements()}, loc);
    auto fi = reshape(*idx, {tensorType(*idx).getNumElements()}, loc);
    if (failed(fx) || failed(fi))
      return failure();
    *x = *fx;
    *idx = *fi;
  } else {
    auto dim = intArg(n, 2, loc);
    if (failed(dim))
      return failure();
    auto a = normIndex(n, *dim, tensorType(*x).getRank(), loc);
    if (failed(a))
      return failure();
    axis = *a;
  }
  SmallVector<SymInt> xd = dimsOf(*x), id = dimsOf(*idx);
  bool same = xd.size() == id.size();
  for (size_t i = 0; same && i < xd.size(); ++i)
    same = static_cast<int64_t>(i) == axis || xd[i] == id[i];
  if (!same)
    return error(n, loc) << "take_along_dim of " << dimsStr(xd) << " by "
                         << dimsStr(id)
                         << ": only indices of the same shape outside the "
                            "dimension are supported (no broadcasting)";
  return bindResult(
      n, make<GatherElementsOp>(loc, {*x, *idx}, {i64("axis", axis)}));
}

/// tensordot(a, b, dims_a, dims_b): the listed dimensions contracted pairwise
/// (Decomposer::einsum with one letter per dimension).
LogicalResult TSImporter::hTensordot(Node *n, Location loc) {
  auto a = tensorArg(n, 0, loc), c = tensorArg(n, 1, loc);
  auto da = intListArg(n, 2, loc), dc = intListArg(n, 3, loc);
  if (failed(a) || failed(c) || failed(da) || failed(dc))
    return failure();
  int64_t ra = tensorType(*a).getRank(), rc = tensorType(*c).getRank();
  if (da->size() != dc->size() || ra + rc > 26)
    return error(n, loc) << "tensordot contracts " << da->size() << " and "
                         << dc->size() << " dimensions";
  std::string la, lc, out;
  for (int64_t i = 0; i < ra; ++i)
    la += char('a' + i);
  for (int64_t i = 0; i < rc; ++i)
    lc += char('a' + ra + i);
  for (auto [x, y] : llvm::zip(*da, *dc)) {
    auto i = normIndex(n, x, ra, loc), j = normIndex(n, y, rc, loc);
    if (failed(i) || failed(j))
      return failure();
    lc[*j] = la[*i];
  }
  for (char ch : la)
    if (lc.find(ch) == std::string::npos)
      out += ch;
  for (char ch : lc)
    if (la.find(ch) == std::string::npos)
      out += ch;
  Value cc = cast(*c, tensorType(*a).getElementType(), loc);
  return bindResult(
      n, Decomposer(b(), loc).einsum(la + "," + lc + "->" + out, {*a, cc}));
}

/// Boolean functions: isnan (x != x), isinf / isposinf / isneginf (|x| or
/// x equal to inf), isfinite (|x| < inf: false for NaN), logical_xor
/// (operands as "not zero") and bitwise / operator xor of bool tensors.
LogicalResult TSImporter::hPredicate(Node *n, Location loc) {
  std::string op = opName(n);
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  Type et = tensorType(*x).getElementType();
  MathBuilder m{*this, loc, et};
  if (op == "logical_xor" || op == "bitwise_xor" || op == "__xor__") {
    auto y = asTensor(lookup(n->input(1)), et, loc, n);
    if (failed(y))
      return failure();
    Type yt = tensorType(*y).getElementType();
    if (op != "logical_xor" && (!et.isInteger(1) || !yt.isInteger(1)))
      return error(n, loc) << op << " is supported on bool tensors only";
    auto truth = [&](Value v) -> FailureOr<Value> {
      Type t = tensorType(v).getElementType();
      if (t.isInteger(1))
        return v;
      return MathBuilder{*this, loc, t}.cmp(ComparePredicate::ne, v,
                                            scalarConstant(0, t, loc));
    };
    return bindResult(n, m.cmp(ComparePredicate::ne, truth(*x), truth(*y)));
  }
  if (!isFloatType(et)) // integers and bools are finite, never NaN
    return bindResult(n,
                      Value(b().create<FullOp>(
                          loc, tensorType(*x).withElementType(b().getI1Type()),
                          b().getBoolAttr(op == "isfinite"))));
  double inf = std::numeric_limits<double>::infinity();
  if (op == "isnan")
    return bindResult(n, m.cmp(ComparePredicate::ne, *x, *x));
  if (op == "isfinite")
    return bindResult(
        n, m.cmp(ComparePredicate::lt, m.un(UnaryKind::abs, *x), m.c(inf)));
  if (op == "isinf")
    return bindResult(
        n, m.cmp(ComparePredicate::eq, m.un(UnaryKind::abs, *x), m.c(inf)));
  return bindResult(
      n, m.cmp(ComparePredicate::eq, *x, m.c(op == "isposinf" ? inf : -inf)));
}

//===----------------------------------------------------------------------===//
// Elementwise and small functions as compositions (hMath)
//===----------------------------------------------------------------------===//

/// Functions of one or two tensors built from varuna ops: exp2 log2 log10
/// square frac hypot lerp addcmul addcdiv logaddexp logaddexp2 copysign
/// heaviside ldexp xlogy nan_to_num
/// softshrink hardshrink threshold logit sinc float_power rrelu (eval)
/// bucketize searchsorted atan2 histc; baddbmm addmm addmv addbmm (beta *
/// self + alpha * product); outer / ger (a[:, None] * b), addr (beta * self
/// + alpha * outer); rad2deg deg2rad; special_entr (-x log x); renorm (each
/// slice along dim with a p-norm above maxnorm scaled to it); linalg_cross /
/// cross (of 3-vectors along dim); special_xlogy / special_logit (aliases);
/// asinh acosh atanh; isclose; fmin fmax (NaN-ignoring); mvlgamma; inner;
/// linalg_matrix_norm ('fro', +-inf, +-1); matrix_power (n >= 0); all /
/// any (over everything, a dimension or a list of them).
LogicalResult TSImporter::hMath(Node *n, Location loc) {
  std::string op = opName(n);
  if (op == "special_xlogy" || op == "special_logit")
    op = op.substr(8);
  if (op == "arcsinh" || op == "arccosh" || op == "arctanh")
    op = "a" + op.substr(3);
  if (op == "special_multigammaln")
    op = "mvlgamma";
  if (op == "linalg_matrix_power")
    op = "matrix_power";
  // Operands that are tensors here take the first tensor's float type.
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  Type et = tensorType(*x).getElementType();
  if (!isFloatType(et)) {
    et = b().getF32Type();
    *x = cast(*x, et, loc);
  }
  MathBuilder m{*this, loc, et};
  auto operand = [&](unsigned i) -> FailureOr<Value> {
    auto v = asTensor(lookup(n->input(i)), et, loc, n);
    return failed(v) ? v : FailureOr<Value>(cast(*v, et, loc));
  };
  auto number = [&](unsigned i, double dflt) -> FailureOr<double> {
    return optArg(n, i, loc, &TSImporter::floatArg, dflt);
  };
  double ln2 = std::log(2.0), ln10 = std::log(10.0);
  FailureOr<Value> r = failure();
  if (op == "exp2") {
    r = m.un(UnaryKind::exp, m.bin<MulOp>(*x, m.c(ln2)));
  } else if (op == "all" || op == "any") {
    // min / max of the values as numbers, != 0 (x is a float tensor here)
    // over everything, a dimension or a list of them.
    auto axes = axesArg(n, 1, tensorType(*x).getRank(), loc);
    auto keep = optArg(n, 2, loc, &TSImporter::boolArg, false);
    if (failed(axes) || failed(keep))
      return failure();
    auto red = axes->empty() ? FailureOr<Value>(*x)
                             : reduce(op == "all" ? ReduceKind::min
                                                  : ReduceKind::max,
                                      *x, *axes, *keep, loc);
    return bindResult(n, m.cmp(ComparePredicate::ne, red, m.c(0)));
  } else if (op == "asinh") {
    // sign(x) ln(|x| + sqrt(x^2 + 1)): no cancellation for negative x.
    auto ax = m.un(UnaryKind::abs, *x);
    r = m.bin<MulOp>(
        m.un(UnaryKind::sign, *x),
        m.un(UnaryKind::log,
             m.bin<AddOp>(ax, m.un(UnaryKind::sqrt,
                                   m.bin<AddOp>(m.bin<MulOp>(*x, *x),
                                                m.c(1))))));
  } else if (op == "acosh") {
    r = m.un(UnaryKind::log,
             m.bin<AddOp>(*x, m.un(UnaryKind::sqrt,
                                   m.bin<SubOp>(m.bin<MulOp>(*x, *x),
                                                m.c(1)))));
  } else if (op == "atanh") {
    r = m.bin<MulOp>(m.bin<SubOp>(m.un(UnaryKind::log1p, *x),
                                  m.un(UnaryKind::log1p,
                                       m.un(UnaryKind::neg, *x))),
                     m.c(0.5));
  } else if (op == "isclose") {
    // |a - b| <= atol + rtol |b| (equal values, infinities included, are
    // close; NaNs only with equal_nan).
    auto y = operand(1);
    auto rtol = number(2, 1e-5), atol = number(3, 1e-8);
    auto equalNan = optArg(n, 4, loc, &TSImporter::boolArg, false);
    if (failed(y) || failed(rtol) || failed(atol) || failed(equalNan))
      return failure();
    auto close = m.cmp(
        ComparePredicate::le, m.un(UnaryKind::abs, m.bin<SubOp>(*x, *y)),
        m.bin<AddOp>(m.c(*atol),
                     m.bin<MulOp>(m.c(*rtol), m.un(UnaryKind::abs, *y))));
    auto same = m.cmp(ComparePredicate::eq, *x, *y);
    auto any = [&](FailureOr<Value> a, FailureOr<Value> c) -> FailureOr<Value> {
      if (failed(a) || failed(c))
        return failure();
      return make<OrOp>(loc, {*a, *c});
    };
    r = any(close, same);
    if (*equalNan) {
      auto both = [&]() -> FailureOr<Value> {
        auto nx = m.cmp(ComparePredicate::ne, *x, *x);
        auto ny = m.cmp(ComparePredicate::ne, *y, *y);
        if (failed(nx) || failed(ny))
          return failure();
        return make<AndOp>(loc, {*nx, *ny});
      }();
      r = any(r, both);
    }
    return bindResult(n, r);
  } else if (op == "fmin" || op == "fmax") {
    // minimum / maximum that take the other value where one is NaN.
    auto y = operand(1);
    auto pick = op == "fmin" ? m.bin<MinimumOp>(*x, y) : m.bin<MaximumOp>(*x, y);
    r = m.where(m.cmp(ComparePredicate::ne, y, y), *x,
                m.where(m.cmp(ComparePredicate::ne, *x, *x), y, pick));
  } else if (op == "mvlgamma") {
    // sum_{j < p} lgamma(x - j / 2) + p (p - 1) / 4 ln(pi).
    auto p = intArg(n, 1, loc);
    if (failed(p))
      return failure();
    if (*p < 1)
      return error(n, loc) << "mvlgamma needs p >= 1, got " << *p;
    FailureOr<Value> sum = m.c(double(*p) * double(*p - 1) / 4.0 *
                               std::log(std::acos(-1.0)));
    for (int64_t j = 0; j < *p; ++j)
      sum = m.bin<AddOp>(sum, m.un(UnaryKind::lgamma,
                                   m.bin<SubOp>(*x, m.c(double(j) / 2))));
    r = sum;
  } else if (op == "inner") {
    // Sum over the last dimension of both: a vector b dots each row of a;
    // two matrices a @ b^T.
    auto y = operand(1);
    if (failed(y))
      return failure();
    int64_t ra = tensorType(*x).getRank(), rb = tensorType(*y).getRank();
    if (ra == 0 || rb == 0) {
      r = m.bin<MulOp>(*x, *y);
    } else if (rb == 1) {
      auto prod = m.bin<MulOp>(*x, *y);
      if (failed(prod))
        return failure();
      r = reduce(ReduceKind::sum, *prod, {ra - 1}, false, loc);
    } else if (ra == 2 && rb == 2) {
      auto yt = transpose(*y, {1, 0}, loc);
      if (failed(yt))
        return failure();
      r = make<MatmulOp>(loc, {*x, *yt});
    } else {
      return error(n, loc) << "inner of ranks " << ra << " and " << rb
                           << " (only a vector second operand, or two "
                              "matrices)";
    }
  } else if (op == "linalg_matrix_norm") {
    // ord 'fro' (default), inf / -inf (max / min row sum of |x|), 1 / -1
    // (column sums); 'nuc' and 2 need singular values (not supported).
    int64_t rank = tensorType(*x).getRank();
    if (rank < 2)
      return error(n, loc) << "matrix_norm of a " << rank << "-D tensor";
    std::string ord = "fro";
    if (n->inputs().size() > 1) {
      const TSValue &o = lookup(n->input(1));
      if (o.kind == TSValue::Kind::Str)
        ord = o.s;
      else if (auto v = floatArg(n, 1, loc); succeeded(v))
        ord = std::isinf(*v) ? (*v > 0 ? "inf" : "-inf")
                             : std::to_string(static_cast<int64_t>(*v));
      else
        return failure();
    }
    auto dims = n->inputs().size() > 2
                    ? intListArg(n, 2, loc)
                    : FailureOr<SmallVector<int64_t>>(SmallVector<int64_t>{-2, -1});
    auto keep = optArg(n, 3, loc, &TSImporter::boolArg, false);
    if (failed(dims) || failed(keep) || dims->size() != 2)
      return failed(dims) || failed(keep)
                 ? failure()
                 : error(n, loc) << "matrix_norm needs two dimensions";
    auto d0 = normIndex(n, (*dims)[0], rank, loc),
         d1 = normIndex(n, (*dims)[1], rank, loc);
    if (failed(d0) || failed(d1) || *d0 == *d1)
      return failed(d0) || failed(d1)
                 ? failure()
                 : error(n, loc) << "matrix_norm over one dimension twice";
    int64_t lo = std::min(*d0, *d1), hi = std::max(*d0, *d1);
    if (ord == "fro") {
      auto sq = m.bin<MulOp>(*x, *x);
      if (failed(sq))
        return failure();
      r = m.un(UnaryKind::sqrt,
               reduce(ReduceKind::sum, *sq, {lo, hi}, *keep, loc));
    } else if (ord == "inf" || ord == "-inf" || ord == "1" || ord == "-1") {
      // inf: sum over the columns (dim1), then max over the rows (dim0).
      bool rows = ord == "inf" || ord == "-inf";
      int64_t first = rows ? *d1 : *d0, second = rows ? *d0 : *d1;
      auto ax = m.un(UnaryKind::abs, *x);
      if (failed(ax))
        return failure();
      auto s1 = reduce(ReduceKind::sum, *ax, {first}, /*keepdim=*/true, loc);
      if (failed(s1))
        return failure();
      ReduceKind k = ord[0] == '-' ? ReduceKind::min : ReduceKind::max;
      auto s2 = reduce(k, *s1, {second}, true, loc);
      if (failed(s2))
        return failure();
      if (*keep) {
        r = s2;
      } else {
        SmallVector<SymInt> out;
        for (auto [i, d] : llvm::enumerate(dimsOf(*s2)))
          if (int64_t(i) != lo && int64_t(i) != hi)
            out.push_back(d);
        r = reshape(*s2, out, loc);
      }
    } else {
      return error(n, loc) << "matrix_norm with ord '" << ord
                           << "' needs singular values (not supported; "
                              "'fro', inf, -inf, 1 and -1 are)";
    }
  } else if (op == "matrix_power") {
    auto k = intArg(n, 1, loc);
    if (failed(k))
      return failure();
    SmallVector<SymInt> dims = dimsOf(*x);
    if (dims.size() < 2 || dims[dims.size() - 1] != dims[dims.size() - 2] ||
        !dims.back().isStatic())
      return error(n, loc) << "matrix_power needs square matrices of a "
                              "static size, got "
                           << dimsStr(dims);
    if (*k < 0)
      return error(n, loc) << "matrix_power with a negative exponent (" << *k
                           << ") is not supported: use linalg.inv first";
    if (*k == 0) {
      int64_t size = dims.back().constant;
      std::vector<Attribute> eye(size * size, b().getFloatAttr(et, 0.0));
      for (int64_t i = 0; i < size; ++i)
        eye[i * size + i] = b().getFloatAttr(et, 1.0);
      Value id = b().create<ConstantOp>(
          loc, VTensorType::get(b().getContext(), {size, size}, -1, et),
          DenseElementsAttr::get(RankedTensorType::get({size, size}, et),
                                 eye));
      // Shaped like x (its batch dimensions), no gradient to x.
      r = m.bin<AddOp>(m.bin<MulOp>(*x, m.c(0)), id);
    } else {
      // Square and multiply.
      FailureOr<Value> result = failure(), base = *x;
      for (int64_t e = *k; e > 0; e >>= 1) {
        if (e & 1)
          result = failed(result) ? base
                                  : make<MatmulOp>(loc, {*result, *base});
        if (e > 1 && succeeded(base))
          base = make<MatmulOp>(loc, {*base, *base});
        if (failed(base))
          return failure();
      }
      r = result;
    }
  } else if (op == "rad2deg" || op == "deg2rad") {
    double pi = std::acos(-1.0);
    r = m.bin<MulOp>(*x, m.c(op == "rad2deg" ? 180.0 / pi : pi / 180.0));
  } else if (op == "special_entr") {
    // -x ln x above 0, 0 at 0, -inf below (torch.special.entr); x = 0 and
    // negative x get no gradient.
    auto pos = m.cmp(ComparePredicate::gt, *x, m.c(0));
    auto safe = m.where(pos, *x, m.c(1));
    r = m.where(pos,
                m.un(UnaryKind::neg, m.bin<MulOp>(safe, m.un(UnaryKind::log,
                                                              safe))),
                m.where(m.cmp(ComparePredicate::eq, *x, m.c(0)), m.c(0),
                        m.c(-std::numeric_limits<double>::infinity())));
  } else if (op == "renorm") {
    // renorm(x, p, dim, maxnorm): x * where(norm > maxnorm, maxnorm /
    // (norm + 1e-7), 1), the norm of each slice along dim over the others.
    auto p = floatArg(n, 1, loc);
    auto d = intArg(n, 2, loc);
    auto maxnorm = floatArg(n, 3, loc);
    if (failed(p) || failed(d) || failed(maxnorm))
      return failure();
    int64_t rank = tensorType(*x).getRank();
    auto dim = normIndex(n, *d, rank, loc);
    if (failed(dim))
      return failure();
    if (!(*p > 0))
      return error(n, loc) << "renorm with p = " << *p << " (only p > 0)";
    SmallVector<int64_t> others;
    for (int64_t i = 0; i < rank; ++i)
      if (i != *dim)
        others.push_back(i);
    // sum |x|^p, then its p-th root where it is positive (0 elsewhere: no
    // infinite derivative of the root at 0 meets a zero gradient there).
    auto powed = *p == 2 ? m.bin<MulOp>(*x, *x)
                         : m.bin<PowOp>(m.un(UnaryKind::abs, *x), m.c(*p));
    if (failed(powed))
      return failure();
    auto sum = reduce(ReduceKind::sum, *powed, others, /*keepdim=*/true, loc);
    auto positive = m.cmp(ComparePredicate::gt, sum, m.c(0));
    auto safe = m.where(positive, sum, m.c(1));
    auto root = *p == 2 ? m.un(UnaryKind::sqrt, safe)
                        : m.bin<PowOp>(safe, m.c(1.0 / *p));
    FailureOr<Value> norm = m.where(positive, root, m.c(0));
    auto factor = m.where(
        m.cmp(ComparePredicate::gt, norm, m.c(*maxnorm)),
        m.bin<DivOp>(m.c(*maxnorm), m.bin<AddOp>(norm, m.c(1e-7))), m.c(1));
    r = m.bin<MulOp>(*x, factor);
  } else if (op == "linalg_cross" || op == "cross") {
    // a x b of 3-vectors along dim (linalg_cross: -1 by default; cross: the
    // first dimension of size 3 when none is given, as torch).
    auto y = operand(1);
    if (failed(y))
      return failure();
    auto both = broadcastValues(n, loc, {*x, *y});
    if (failed(both))
      return failure();
    Value a = (*both)[0], bv = (*both)[1];
    SmallVector<SymInt> dims = dimsOf(a);
    int64_t rank = dims.size(), axis = -1;
    if (n->inputs().size() > 2 && !isNoneArg(n, 2)) {
      auto d = intArg(n, 2, loc);
      if (failed(d))
        return failure();
      auto norm = normIndex(n, *d, rank, loc);
      if (failed(norm))
        return failure();
      axis = *norm;
    } else if (op == "linalg_cross") {
      axis = rank - 1;
    } else {
      for (int64_t i = 0; i < rank && axis < 0; ++i)
        if (dims[i] == SymInt(3))
          axis = i;
    }
    if (axis < 0 || axis >= rank || dims[axis] != SymInt(3))
      return error(n, loc) << op << " needs a dimension of size 3 there, got "
                           << dimsStr(dims);
    auto part = [&](Value v, int64_t i) {
      return sliceOf(v, axis, SymInt(i), SymInt(i + 1), 1, loc, n);
    };
    SmallVector<Value> comps;
    for (int64_t i = 0; i < 3; ++i) {
      int64_t j = (i + 1) % 3, k = (i + 2) % 3;
      auto c = m.bin<SubOp>(m.bin<MulOp>(part(a, j), part(bv, k)),
                            m.bin<MulOp>(part(a, k), part(bv, j)));
      if (failed(c))
        return failure();
      comps.push_back(*c);
    }
    r = make<ConcatOp>(loc, comps, {i64("axis", axis)});
  } else if (op == "log2" || op == "log10") {
    r = m.bin<MulOp>(m.un(UnaryKind::log, *x),
                     m.c(1.0 / (op == "log2" ? ln2 : ln10)));
  } else if (op == "square") {
    r = m.bin<MulOp>(*x, *x);
  } else if (op == "frac") {
    r = m.bin<SubOp>(*x, m.un(UnaryKind::trunc, *x));
  } else if (op == "hypot") {
    auto y = operand(1);
    r = m.un(UnaryKind::sqrt, m.bin<AddOp>(m.bin<MulOp>(*x, *x),
                                           m.bin<MulOp>(y, y)));
  } else if (op == "lerp") {
    auto end = operand(1), w = operand(2);
    r = m.bin<AddOp>(*x, m.bin<MulOp>(w, m.bin<SubOp>(end, *x)));
  } else if (op == "addcmul" || op == "addcdiv") {
    auto t1 = operand(1), t2 = operand(2);
    auto value = number(3, 1.0);
    if (failed(value))
      return failure();
    auto prod = op == "addcmul" ? m.bin<MulOp>(t1, t2) : m.bin<DivOp>(t1, t2);
    r = m.bin<AddOp>(*x, m.bin<MulOp>(prod, m.c(*value)));
  } else if (op == "outer" || op == "ger" || op == "addr") {
    unsigned first = op == "addr" ? 1 : 0;
    auto a = operand(first), v = operand(first + 1);
    if (failed(a) || failed(v))
      return failure();
    if (tensorType(*a).getRank() != 1 || tensorType(*v).getRank() != 1)
      return error(n, loc) << op << " takes two vectors";
    auto col = reshape(*a, {dimsOf(*a)[0], SymInt(1)}, loc);
    auto prod = m.bin<MulOp>(col, *v);
    if (op != "addr") {
      r = prod;
    } else {
      auto beta = optArg(n, 3, loc, &TSImporter::floatArg, 1.0);
      auto alpha = optArg(n, 4, loc, &TSImporter::floatArg, 1.0);
      if (failed(beta) || failed(alpha))
        return failure();
      r = m.bin<AddOp>(m.bin<MulOp>(*x, m.c(*beta)),
                       m.bin<MulOp>(prod, m.c(*alpha)));
    }
  } else if (op == "logaddexp" || op == "logaddexp2") {
    // max(a, b) + log1p(exp(-|a - b|)); base 2: of a ln 2 and b ln 2, over
    // ln 2.
    bool two = op == "logaddexp2";
    auto a = two ? m.bin<MulOp>(*x, m.c(ln2)) : *x;
    auto y = two ? m.bin<MulOp>(operand(1), m.c(ln2)) : operand(1);
    auto gap = m.un(UnaryKind::neg, m.un(UnaryKind::abs, m.bin<SubOp>(a, y)));
    r = m.bin<AddOp>(m.bin<MaximumOp>(a, y),
                     m.un(UnaryKind::log1p, m.un(UnaryKind::exp, gap)));
    if (two)
      r = m.bin<DivOp>(r, m.c(ln2));
  } else if (op == "ldexp") { // x 2^e
    r = m.bin<MulOp>(*x, m.un(UnaryKind::exp,
                              m.bin<MulOp>(operand(1), m.c(ln2))));
  } else if (op == "copysign") {
    // |x| with y's sign (a -0.0 in y counts as positive).
    auto mag = m.un(UnaryKind::abs, *x);
    r = m.where(m.cmp(ComparePredicate::lt, operand(1), m.c(0)),
                m.un(UnaryKind::neg, mag), mag);
  } else if (op == "heaviside") {
    // 1 above 0, values at 0, 0 below (no gradient, as torch).
    r = m.where(
        m.cmp(ComparePredicate::gt, *x, m.c(0)), m.c(1),
        m.where(m.cmp(ComparePredicate::eq, *x, m.c(0)), operand(1), m.c(0)));
  } else if (op == "xlogy") {
    // 0 where x is 0 (also its gradient: y is replaced by 1 there).
    auto y = operand(1);
    auto zero = m.cmp(ComparePredicate::eq, *x, m.c(0));
    auto safe = m.where(zero, m.c(1), y);
    r = m.where(zero, m.c(0), m.bin<MulOp>(*x, m.un(UnaryKind::log, safe)));
  } else if (op == "nan_to_num") {
    auto nan = number(1, 0.0);
    double big = std::numeric_limits<float>::max();
    if (et.isF64())
      big = std::numeric_limits<double>::max();
    else if (et.isF16())
      big = 65504.0;
    else if (et.isBF16())
      big = 3.3895313892515355e38;
    auto pos = number(2, big), neg = number(3, -big);
    if (failed(nan) || failed(pos) || failed(neg))
      return failure();
    double inf = std::numeric_limits<double>::infinity();
    auto isNan = m.cmp(ComparePredicate::ne, *x, *x);
    r = m.where(isNan, m.c(*nan), *x);
    r = m.where(m.cmp(ComparePredicate::eq, *x, m.c(inf)), m.c(*pos), r);
    r = m.where(m.cmp(ComparePredicate::eq, *x, m.c(-inf)), m.c(*neg), r);
  } else if (op == "softshrink" || op == "hardshrink") {
    auto l = number(1, 0.5);
    if (failed(l))
      return failure();
    auto above = m.cmp(ComparePredicate::gt, *x, m.c(*l));
    auto below = m.cmp(ComparePredicate::lt, *x, m.c(-*l));
    if (op == "hardshrink")
      r = m.where(m.bin<OrOp>(above, below), *x, m.c(0));
    else
      r = m.where(above, m.bin<SubOp>(*x, m.c(*l)),
                  m.where(below, m.bin<AddOp>(*x, m.c(*l)), m.c(0)));
  } else if (op == "threshold") {
    auto th = number(1, 0.0), value = number(2, 0.0);
    if (failed(th) || failed(value))
      return failure();
    r = m.where(m.cmp(ComparePredicate::gt, *x, m.c(*th)), *x, m.c(*value));
  } else if (op == "logit") {
    FailureOr<Value> p = *x;
    if (!isNoneArg(n, 1)) {
      auto eps = floatArg(n, 1, loc);
      if (failed(eps))
        return failure();
      p = m.bin<MinimumOp>(m.bin<MaximumOp>(*x, m.c(*eps)), m.c(1.0 - *eps));
    }
    r = m.un(UnaryKind::log, m.bin<DivOp>(p, m.bin<SubOp>(m.c(1), p)));
  } else if (op == "sinc") {
    // sin(pi x) / (pi x), 1 at 0 (where x is replaced by 1 for the division).
    auto zero = m.cmp(ComparePredicate::eq, *x, m.c(0));
    auto px = m.bin<MulOp>(m.where(zero, m.c(1), *x), m.c(M_PI));
    r = m.where(zero, m.c(1), m.bin<DivOp>(m.un(UnaryKind::sin, px), px));
  } else if (op == "float_power") {
    Type f64 = b().getF64Type();
    auto e = asTensor(lookup(n->input(1)), f64, loc, n);
    if (failed(e))
      return failure();
    r = make<PowOp>(loc, {cast(*x, f64, loc), cast(*e, f64, loc)});
  } else if (op == "rrelu") {
    // rrelu(x, lower, upper, training): in eval a leaky relu with the mean
    // slope; in training a random slope per element (refused).
    auto lo = number(1, 1.0 / 8), hi = number(2, 1.0 / 3);
    auto train = optArg(n, 3, loc, &TSImporter::boolArg, false);
    if (failed(lo) || failed(hi) || failed(train))
      return failure();
    if (*train)
      return error(n, loc) << "rrelu in training (random slopes) is not "
                              "supported";
    r = Decomposer(b(), loc).activation(Activation::leaky_relu, *x,
                                        (*lo + *hi) / 2);
  } else if (op == "histc") {
    // Counts per bin of [min, max] (max itself in the last bin, values
    // outside ignored): bin = floor((x - min) * bins / (max - min)) as ATen
    // computes it, one-hot rows summed. Mixtral's tokens per expert.
    auto bins = intArg(n, 1, loc);
    auto lo = number(2, 0.0), hi = number(3, 0.0);
    if (failed(bins) || failed(lo) || failed(hi))
      return failure();
    if (*bins < 1 || !(*hi > *lo))
      return error(n, loc) << "histc needs bins >= 1 and max > min (min = "
                              "max takes them from the data), got bins "
                           << *bins << ", [" << *lo << ", " << *hi << "]";
    auto scaled = m.bin<DivOp>(
        m.bin<MulOp>(m.bin<SubOp>(*x, m.c(*lo)), m.c(double(*bins))),
        m.c(*hi - *lo));
    auto bin = m.where(m.cmp(ComparePredicate::eq, *x, m.c(*hi)),
                       m.c(double(*bins - 1)), m.un(UnaryKind::floor, scaled));
    if (failed(bin))
      return failure();
    Decomposer d(b(), loc);
    auto hit = d.oneHot(cast(*bin, b().getI64Type(), loc), *bins, false);
    if (failed(hit))
      return failure();
    SmallVector<int64_t> axes;
    for (int64_t a = 0, e = tensorType(*x).getRank(); a < e; ++a)
      axes.push_back(a);
    r = reduce(ReduceKind::sum, cast(*hit, et, loc), axes, false, loc);
  } else if (op == "bucketize" || op == "searchsorted") {
    // bucketize(x, boundaries, out_int32, right): the count of boundaries
    // below x (or at most x with right); searchsorted(sorted, x, out_int32,
    // right, side, sorter) is bucketize(x, sorted) for a 1-D sequence.
    bool search = op == "searchsorted";
    auto bounds = search ? FailureOr<Value>(*x) : tensorArg(n, 1, loc);
    if (search)
      x = operand(1);
    auto right = optArg(n, 3, loc, &TSImporter::boolArg, false);
    auto side = search ? optArg(n, 4, loc, &TSImporter::strArg, std::string())
                       : FailureOr<std::string>(std::string());
    if (failed(bounds) || failed(right) || failed(side) || failed(x))
      return failure();
    if (search && !isNoneArg(n, 5))
      return error(n, loc) << "searchsorted with a sorter is not supported";
    bool upper = *right || *side == "right";
    SmallVector<SymInt> bd = dimsOf(*bounds);
    if (bd.size() != 1 || !bd[0].isStatic())
      return error(n, loc) << op
                           << " needs a 1-D static sequence of boundaries";
    SmallVector<SymInt> xd = dimsOf(*x);
    SmallVector<SymInt> col(xd);
    col.push_back(SymInt(1));
    auto xc = reshape(*x, col, loc);
    auto below = m.cmp(upper ? ComparePredicate::le : ComparePredicate::lt,
                       cast(*bounds, et, loc), xc);
    if (failed(below))
      return failure();
    auto counted = reduce(ReduceKind::sum, cast(*below, et, loc),
                          {static_cast<int64_t>(xd.size())}, false, loc);
    if (failed(counted))
      return failure();
    return bindResult(n, cast(*counted, b().getI64Type(), loc));
  } else if (op == "atan2" || op == "arctan2") {
    // atan(y / x) moved by pi in the left half plane; on the y axis
    // +-pi/2 (x replaced by 1 for the division there, so no gradient is
    // 0 / 0).
    auto xx = operand(1);
    auto xZero = m.cmp(ComparePredicate::eq, xx, m.c(0));
    auto ratio = m.bin<DivOp>(*x, m.where(xZero, m.c(1), xx));
    auto base = m.un(UnaryKind::atan, ratio);
    auto left = m.cmp(ComparePredicate::lt, xx, m.c(0));
    auto yNeg = m.cmp(ComparePredicate::lt, *x, m.c(0));
    auto turned = m.where(yNeg, m.bin<SubOp>(base, m.c(M_PI)),
                          m.bin<AddOp>(base, m.c(M_PI)));
    auto onAxis = m.where(m.cmp(ComparePredicate::gt, *x, m.c(0)), m.c(M_PI / 2),
                          m.where(yNeg, m.c(-M_PI / 2), m.c(0)));
    r = m.where(xZero, onAxis, m.where(left, turned, base));
  } else if (op == "baddbmm" || op == "addmm" || op == "addmv" ||
             op == "addbmm") {
    auto a = operand(1), c = operand(2);
    auto beta = number(3, 1.0), alpha = number(4, 1.0);
    if (failed(a) || failed(c) || failed(beta) || failed(alpha))
      return failure();
    auto prod = make<MatmulOp>(loc, {*a, *c});
    if (succeeded(prod) && op == "addbmm")
      prod = reduce(ReduceKind::sum, *prod, {0}, false, loc);
    FailureOr<Value> self = *x;
    if (*beta != 1.0)
      self = *beta == 0.0 ? m.bin<MulOp>(*x, m.c(0)) : m.bin<MulOp>(*x, m.c(*beta));
    if (*alpha != 1.0)
      prod = m.bin<MulOp>(prod, m.c(*alpha));
    r = m.bin<AddOp>(self, prod);
  } else {
    return error(n, loc) << "internal: no composition for " << op;
  }
  return bindResult(n, r);
}

FailureOr<std::pair<Value, int64_t>>
varuna::ts::flatOrAxis(TSImporter &imp, TSImporter::Node *n, Location loc,
                       Value x, bool all, unsigned dimAt) {
  if (all) {
    std::optional<SymInt> count = product(dimsOf(x));
    auto flat = count ? imp.reshape(x, {*count}, loc) : FailureOr<Value>();
    if (failed(flat))
      return failure();
    return std::make_pair(*flat, int64_t(0));
  }
  auto d = imp.intArg(n, dimAt, loc);
  if (failed(d))
    return failure();
  auto a = imp.normIndex(n, *d, tensorType(x).getRank(), loc);
  if (failed(a))
    return failure();
  return std::make_pair(x, *a);
}

/// argmax / argmin(x, dim=None, keepdim) (the first extreme;
/// Decomposer::argExtreme; dim None: of the flattened tensor) and
/// aminmax(x, dim=None, keepdim) -> (min, max).
LogicalResult TSImporter::hArgExtreme(Node *n, Location loc) {
  std::string op = opName(n);
  auto x = tensorArg(n, 0, loc);
  auto keep = optArg(n, 2, loc, &TSImporter::boolArg, false);
  if (failed(x) || failed(keep))
    return failure();
  auto at = flatOrAxis(*this, n, loc, *x, isNoneArg(n, 1), 1);
  if (failed(at))
    return failure();
  Value v = at->first;
  int64_t axis = at->second;
  if (op == "aminmax") {
    auto lo = reduce(ReduceKind::min, v, {axis}, *keep, loc),
         hi = reduce(ReduceKind::max, v, {axis}, *keep, loc);
    if (failed(lo) || failed(hi))
      return failure();
    bindTensor(n->outputs()[0], *lo);
    bindTensor(n->outputs()[1], *hi);
    return success();
  }
  return bindResult(n, Decomposer(b(), loc).argExtreme(v, axis, op == "argmax",
                                                       *keep));
}

/// median(x) (of all elements) and median(x, dim, keepdim) -> (values,
/// indices): the lower middle, element (n - 1) / 2 of the ascending order
/// (Decomposer::topK of the smallest).
LogicalResult TSImporter::hMedian(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  if (failed(x))
    return failure();
  bool all = n->inputs().size() == 1;
  auto keep = all ? FailureOr<bool>(false)
                  : optArg(n, 2, loc, &TSImporter::boolArg, false);
  auto at = flatOrAxis(*this, n, loc, *x, all, 1);
  if (failed(keep) || failed(at))
    return failure();
  Value v = at->first;
  int64_t axis = at->second;
  SymInt size = dimsOf(v)[axis];
  if (!size.isStatic())
    return error(n, loc) << "median along the batch-dependent dimension";
  auto mid = orderStatistic(n, loc, v, axis, (size.constant - 1) / 2, *keep);
  if (failed(mid))
    return failure();
  bindTensor(n->outputs()[0], mid->first);
  if (!all)
    bindTensor(n->outputs()[1], mid->second);
  return success();
}

/// logcumsumexp(x, dim): log(cumsum(exp(x - m))) + m, m the maximum along
/// dim (kept), so no exp overflows.
LogicalResult TSImporter::hLogCumSumExp(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto d = intArg(n, 1, loc);
  if (failed(x) || failed(d))
    return failure();
  auto axis = normIndex(n, *d, tensorType(*x).getRank(), loc);
  if (failed(axis))
    return failure();
  auto mx = reduce(ReduceKind::max, *x, {*axis}, true, loc);
  auto shifted = failed(mx) ? mx : make<SubOp>(loc, {*x, *mx});
  auto e = failed(shifted) ? shifted : unary(UnaryKind::exp, *shifted, loc);
  if (failed(e))
    return failure();
  auto sum = make<CumsumOp>(loc, {*e},
                            {i64("axis", *axis),
                             attr("exclusive", b().getBoolAttr(false)),
                             attr("reverse", b().getBoolAttr(false))});
  if (failed(sum))
    return failure();
  auto l = unary(UnaryKind::log, *sum, loc);
  return bindResult(n, failed(l) ? l : make<AddOp>(loc, {*l, *mx}));
}

/// cumprod(x, dim, dtype): element i is the product over j of x_j where j
/// <= i, else 1 -- x broadcast against a constant lower-triangular mask
/// [n, n] and a `reduce prod` (whose gradient handles zeros, as torch's
/// cumprod). Quadratic in the size along dim (at most
/// Decomposer::kMaxSortSize, the limit of the other quadratic selections).
LogicalResult TSImporter::hCumprod(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto d = intArg(n, 1, loc);
  if (failed(x) || failed(d))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  auto axis = normIndex(n, *d, rank, loc);
  if (failed(axis))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  if (!dims[*axis].isStatic() ||
      dims[*axis].constant > Decomposer::kMaxSortSize)
    return error(n, loc) << "cumprod along dimension " << *axis << " of size "
                         << dims[*axis].str() << ": at most "
                         << Decomposer::kMaxSortSize
                         << " and not the batch dimension";
  int64_t len = dims[*axis].constant;
  Type et = tensorType(*x).getElementType();
  // x as [.., 1 (i), n (j), ..] against the mask [n (i), n (j)] placed at
  // (axis, axis + 1).
  SmallVector<SymInt> spread(dims);
  spread.insert(spread.begin() + *axis, SymInt(1));
  auto xs = reshape(*x, spread, loc);
  SmallVector<int64_t> maskShape(rank + 1, 1);
  maskShape[*axis] = len;
  maskShape[*axis + 1] = len;
  SmallVector<double> vals;
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < len; ++j)
      vals.push_back(j <= i);
  Value mask = Decomposer(b(), loc).constant(maskShape, b().getI1Type(), vals);
  if (failed(xs))
    return failure();
  auto picked = make<WhereOp>(loc, {mask, *xs, scalarConstant(1.0, et, loc)});
  if (failed(picked))
    return failure();
  return bindResult(
      n, reduce(ReduceKind::prod, *picked, {*axis + 1}, false, loc));
}

/// diff(x, n, dim, prepend, append): x[1:] - x[:-1] along dim, n times
/// (prepend / append concatenated first).
LogicalResult TSImporter::hDiff(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto times = optArg(n, 1, loc, &TSImporter::intArg, int64_t(1));
  auto d = optArg(n, 2, loc, &TSImporter::intArg, int64_t(-1));
  if (failed(x) || failed(times) || failed(d))
    return failure();
  auto axis = normIndex(n, *d, tensorType(*x).getRank(), loc);
  if (failed(axis))
    return failure();
  SmallVector<Value> parts;
  for (unsigned i : {3u, 0u, 4u}) {
    if (i == 0) {
      parts.push_back(*x);
      continue;
    }
    if (n->inputs().size() <= i || isNoneArg(n, i))
      continue;
    auto t = tensorArg(n, i, loc);
    if (failed(t))
      return failure();
    parts.push_back(cast(*t, tensorType(*x).getElementType(), loc));
  }
  FailureOr<Value> cur = *x;
  if (parts.size() > 1)
    cur = make<ConcatOp>(loc, parts, {attr("axis", b().getI64IntegerAttr(*axis))});
  for (int64_t k = 0; k < *times && succeeded(cur); ++k) {
    SymInt size = dimsOf(*cur)[*axis];
    if (!size.isStatic())
      return error(n, loc) << "diff along the batch-dependent dimension";
    auto part = [&](int64_t start, int64_t end) {
      return make<SliceOp>(loc, {*cur},
                           {attr("axis", b().getI64IntegerAttr(*axis)),
                            attr("start", b().getI64IntegerAttr(start)),
                            attr("end", b().getI64IntegerAttr(end)),
                            attr("step", b().getI64IntegerAttr(1))});
    };
    auto hi = part(1, size.constant), lo = part(0, size.constant - 1);
    cur = failed(hi) || failed(lo) ? FailureOr<Value>(failure())
                                   : make<SubOp>(loc, {*hi, *lo});
  }
  return bindResult(n, cur);
}

/// eye(n, [m], dtype, ...): a constant identity [n, m].
LogicalResult TSImporter::hEye(Node *n, Location loc) {
  bool square = n->inputs().size() == 5;
  auto rows = intArg(n, 0, loc);
  auto cols = square ? rows : intArg(n, 1, loc);
  auto dtype = dtypeArg(n, square ? 1 : 2, loc);
  if (failed(rows) || failed(cols) || failed(dtype))
    return failure();
  if (*rows < 0 || *cols < 0)
    return error(n, loc) << "eye of a negative size";
  Type et = *dtype ? *dtype : b().getF32Type();
  SmallVector<double> vals;
  for (int64_t i = 0; i < *rows; ++i)
    for (int64_t j = 0; j < *cols; ++j)
      vals.push_back(i == j);
  return bindResult(n, Decomposer(b(), loc).constant({*rows, *cols}, et, vals));
}

/// tril_indices / triu_indices(row, col, offset, dtype, ...): a constant
/// [2, K] of the (i, j) with j - i <= offset (>= for triu), row by row --
/// DLRM's pairwise interactions `Z[:, li, lj]`.
LogicalResult TSImporter::hTrilIndices(Node *n, Location loc) {
  bool upper = opName(n) == "triu_indices";
  auto rows = intArg(n, 0, loc), cols = intArg(n, 1, loc);
  auto offset = optArg(n, 2, loc, &TSImporter::intArg, 0);
  auto dtype = dtypeArg(n, 3, loc);
  if (failed(rows) || failed(cols) || failed(offset) || failed(dtype))
    return failure();
  if (*rows < 0 || *cols < 0)
    return error(n, loc) << "indices of a " << *rows << " x " << *cols
                         << " matrix";
  SmallVector<double> is, js;
  for (int64_t i = 0; i < *rows; ++i)
    for (int64_t j = 0; j < *cols; ++j)
      if (upper ? j - i >= *offset : j - i <= *offset) {
        is.push_back(double(i));
        js.push_back(double(j));
      }
  int64_t k = static_cast<int64_t>(is.size());
  is.append(js.begin(), js.end());
  Type et = *dtype ? *dtype : b().getI64Type();
  return bindResult(n, Decomposer(b(), loc).constant({2, k}, et, is));
}

/// cdist(x1 [.., P, M], x2 [.., R, M], p): the p-norm of every pairwise
/// difference [.., P, R, M] -> [.., P, R] for p = 1, 2, inf; p = 2 takes
/// the root of the sum of squares with zero distances kept out of the
/// square root's gradient (torch's gradient there is 0).
LogicalResult TSImporter::hCdist(Node *n, Location loc) {
  auto a = floatInput(*this, n, loc);
  auto c = tensorArg(n, 1, loc);
  auto p = floatArg(n, 2, loc);
  if (failed(a) || failed(c) || failed(p))
    return failure();
  Type et = tensorType(*a).getElementType();
  Value x2 = cast(*c, et, loc);
  SmallVector<SymInt> da = dimsOf(*a), dc = dimsOf(x2);
  if (da.size() < 2 || dc.size() < 2 || da.back() != dc.back())
    return error(n, loc) << "cdist needs [.., P, M] and [.., R, M], got "
                         << dimsStr(da) << " and " << dimsStr(dc);
  SmallVector<SymInt> ea(da), ec(dc);
  ea.insert(ea.end() - 1, SymInt(1)); // [.., P, 1, M]
  ec.insert(ec.end() - 2, SymInt(1)); // [.., 1, R, M]
  auto ra = reshape(*a, ea, loc), rc = reshape(x2, ec, loc);
  MathBuilder m{*this, loc, et};
  auto diff = m.bin<SubOp>(ra, rc);
  int64_t last = static_cast<int64_t>(ea.size()) - 1;
  auto over = [&](ReduceKind k, FailureOr<Value> v) -> FailureOr<Value> {
    if (failed(v))
      return v;
    return reduce(k, *v, {last}, false, loc);
  };
  FailureOr<Value> r = failure();
  if (*p == 1.0) {
    r = over(ReduceKind::sum, m.un(UnaryKind::abs, diff));
  } else if (*p == 2.0) {
    auto sq = over(ReduceKind::sum, m.bin<MulOp>(diff, diff));
    auto pos = m.cmp(ComparePredicate::gt, sq, m.c(0));
    r = m.where(pos, m.un(UnaryKind::sqrt, m.where(pos, sq, m.c(1))), m.c(0));
  } else if (std::isinf(*p) && *p > 0) {
    r = over(ReduceKind::max, m.un(UnaryKind::abs, diff));
  } else {
    return error(n, loc) << "cdist with p = " << *p
                         << " is not supported (1, 2 and inf are)";
  }
  return bindResult(n, r);
}

/// movedim / moveaxis(x, source, destination) (ints or lists): a transpose.
LogicalResult TSImporter::hMoveDim(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  auto list = [&](unsigned i) -> FailureOr<SmallVector<int64_t>> {
    if (lookup(n->input(i)).kind == K::Int) {
      auto v = intArg(n, i, loc);
      if (failed(v))
        return failure();
      return SmallVector<int64_t>{*v};
    }
    return intListArg(n, i, loc);
  };
  auto src = list(1), dst = list(2);
  if (failed(src) || failed(dst))
    return failure();
  if (src->size() != dst->size())
    return error(n, loc) << "movedim: " << src->size() << " sources for "
                         << dst->size() << " destinations";
  SmallVector<int64_t> perm(rank, -1);
  SmallVector<bool> used(rank, false);
  for (size_t i = 0; i < src->size(); ++i) {
    auto s = normIndex(n, (*src)[i], rank, loc), d = normIndex(n, (*dst)[i], rank, loc);
    if (failed(s) || failed(d))
      return failure();
    if (perm[*d] != -1 || used[*s])
      return error(n, loc) << "movedim: repeated dimension";
    perm[*d] = *s;
    used[*s] = true;
  }
  int64_t next = 0;
  for (int64_t &p : perm) {
    if (p != -1)
      continue;
    while (used[next])
      ++next;
    p = next;
    used[next] = true;
  }
  return bindResult(n, transpose(*x, perm, loc));
}
