//===- Decompose.cpp - Framework functions as compositions of ops ---------===//

#include "varuna/Import/Decompose.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace mlir;
using namespace varuna;

template <typename OpTy>
FailureOr<Value> Decomposer::make(ValueRange operands,
                                  ArrayRef<NamedAttribute> attrs) {
  MLIRContext *ctx = b.getContext();
  SmallVector<Type, 1> types;
  auto dict = DictionaryAttr::get(ctx, attrs);
  if (failed(OpTy::inferReturnTypes(ctx, loc, operands, dict, {}, types)) ||
      types.size() != 1 || !types[0])
    return emitError(loc) << "cannot build " << OpTy::getOperationName()
                          << " for this decomposition",
           failure();
  return b.create<OpTy>(loc, types, operands, attrs)->getResult(0);
}

Value Decomposer::scalar(double v, Type et) {
  auto shaped = RankedTensorType::get({}, et);
  Attribute a = et.isa<FloatType>()
                    ? Attribute(FloatAttr::get(et, v))
                    : Attribute(IntegerAttr::get(et, static_cast<int64_t>(v)));
  return b.create<ConstantOp>(loc, VTensorType::get(b.getContext(), {}, -1, et),
                              DenseElementsAttr::get(shaped, {a}));
}

Value Decomposer::constant(ArrayRef<int64_t> shape, Type et,
                           ArrayRef<double> values) {
  SmallVector<Attribute> attrs;
  for (double v : values)
    attrs.push_back(et.isa<FloatType>() ? Attribute(FloatAttr::get(et, v))
                    : et.isInteger(1)   ? Attribute(b.getBoolAttr(v != 0.0))
                                        : Attribute(IntegerAttr::get(
                                              et, static_cast<int64_t>(v))));
  return b.create<ConstantOp>(
      loc, VTensorType::get(b.getContext(), shape, -1, et),
      DenseElementsAttr::get(RankedTensorType::get(shape, et), attrs));
}

FailureOr<Value> Decomposer::gatherIndices(Value x, int64_t axis,
                                           ArrayRef<int64_t> indices) {
  SmallVector<double> idx(indices.begin(), indices.end());
  Value at = constant({static_cast<int64_t>(idx.size())}, b.getI64Type(), idx);
  return make<GatherOp>({x, at},
                        {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))});
}

static Type elementTypeOf(Value v) {
  return v.getType().cast<VTensorType>().getElementType();
}

FailureOr<Value> Decomposer::advancedIndex(Value x, ArrayRef<int64_t> axes,
                                           ArrayRef<Value> indices) {
  auto t = x.getType().cast<VTensorType>();
  int64_t rank = t.getRank();
  SmallVector<SymInt> dims = t.getDims();
  // The indexed axes first (in order), then the others.
  SmallVector<int64_t> perm(axes.begin(), axes.end());
  for (int64_t a = 0; a < rank; ++a)
    if (!llvm::is_contained(axes, a))
      perm.push_back(a);
  FailureOr<Value> moved = transpose(x, perm);
  if (failed(moved))
    return failure();
  SmallVector<SymInt> indexed, flat;
  for (int64_t a : axes)
    indexed.push_back(dims[a]);
  std::optional<SymInt> n = product(indexed);
  if (!n)
    return emitError(loc) << "indexing " << t << ": the indexed axes "
                          << "depend on the batch size more than once",
           failure();
  flat.push_back(*n);
  for (size_t i = axes.size(); i < perm.size(); ++i)
    flat.push_back(dims[perm[i]]);
  FailureOr<Value> source = reshape(*moved, flat);
  if (failed(source))
    return failure();
  // linear = sum_i (idx_i mod d_i) * stride_i. The first index needs no
  // mod: a negative one counts from the end of the flattened axis too.
  Type i64 = b.getI64Type();
  FailureOr<Value> linear;
  int64_t stride = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    Value idx = indices[i];
    if (elementTypeOf(idx) != i64)
      idx = b.create<CastOp>(loc, idx.getType().cast<VTensorType>()
                                      .withElementType(i64),
                             idx);
    FailureOr<Value> term = idx;
    if (i > 0) {
      if (!indexed[i].isStatic())
        return emitError(loc) << "indexing " << t << " at axis " << axes[i]
                              << " after axis " << axes[0]
                              << ": only the first indexed axis may depend "
                                 "on the batch size",
               failure();
      term = remainder(idx, scalar(double(indexed[i].constant), i64),
                       /*floorMod=*/true);
      if (succeeded(term) && stride != 1)
        term = make<MulOp>({*term, scalar(double(stride), i64)});
      stride *= indexed[i].constant;
    } else if (stride != 1) {
      term = make<MulOp>({idx, scalar(double(stride), i64)});
    }
    if (failed(term))
      return failure();
    linear = i + 1 == axes.size() ? term : make<AddOp>({*linear, *term});
    if (failed(linear))
      return failure();
  }
  FailureOr<Value> out = make<GatherOp>(
      {*source, *linear}, {b.getNamedAttr("axis", b.getI64IntegerAttr(0))});
  if (failed(out))
    return failure();
  // Adjacent indexed axes after axis 0: S goes back where they were.
  bool adjacent = axes.back() - axes.front() + 1 ==
                  static_cast<int64_t>(axes.size());
  if (!adjacent || axes.front() == 0)
    return out;
  int64_t s = linear->getType().cast<VTensorType>().getRank();
  int64_t before = axes.front(), total = s + rank - int64_t(axes.size());
  SmallVector<int64_t> back;
  for (int64_t i = 0; i < before; ++i)
    back.push_back(s + i);
  for (int64_t i = 0; i < s; ++i)
    back.push_back(i);
  for (int64_t i = s + before; i < total; ++i)
    back.push_back(i);
  return transpose(*out, back);
}

FailureOr<Value> Decomposer::unary(UnaryKind kind, Value x) {
  return make<UnaryOp>({x}, {b.getNamedAttr(
                                "kind", UnaryKindAttr::get(b.getContext(),
                                                           kind))});
}

FailureOr<Value> Decomposer::reduce(ReduceKind kind, Value x,
                                    ArrayRef<int64_t> axes, bool keepdim) {
  return make<ReduceOp>(
      {x}, {b.getNamedAttr("kind", ReduceKindAttr::get(b.getContext(), kind)),
            b.getNamedAttr("axes", b.getDenseI64ArrayAttr(axes)),
            b.getNamedAttr("keepdim", b.getBoolAttr(keepdim))});
}

FailureOr<Value> Decomposer::reduceAll(ReduceKind kind, Value x) {
  int64_t rank = x.getType().cast<VTensorType>().getRank();
  return reduce(kind, x, llvm::to_vector(llvm::seq<int64_t>(0, rank)),
                /*keepdim=*/false);
}

FailureOr<Value> Decomposer::times(Value x, double c) {
  return make<MulOp>({x, scalar(c, elementTypeOf(x))});
}

FailureOr<Value> Decomposer::plus(Value x, double c) {
  return make<AddOp>({x, scalar(c, elementTypeOf(x))});
}

FailureOr<Value> Decomposer::activation(Activation kind, Value x, double alpha,
                                        double beta) {
  Type et = elementTypeOf(x);
  if (!et.isa<FloatType>())
    return emitError(loc) << "expected a floating-point tensor", failure();
  Value zero = scalar(0.0, et);
  // exp(min(x, 0) * s) - 1: the negative side of elu / celu.
  auto expm1Below = [&](double s) -> FailureOr<Value> {
    auto m = make<MinimumOp>({x, zero});
    if (failed(m))
      return failure();
    if (s != 1.0 && failed(m = times(*m, s)))
      return failure();
    auto e = unary(UnaryKind::exp, *m);
    return failed(e) ? e : plus(*e, -1.0);
  };
  switch (kind) {
  case Activation::mish: { // x * tanh(softplus(x))
    auto sp = unary(UnaryKind::softplus, x);
    auto t = failed(sp) ? sp : unary(UnaryKind::tanh, *sp);
    return failed(t) ? t : make<MulOp>({x, *t});
  }
  case Activation::hardsigmoid: { // clamp(alpha * x + beta, 0, 1)
    auto s = times(x, alpha);
    auto t = failed(s) ? s : plus(*s, beta);
    auto lo = failed(t) ? t : make<MaximumOp>({*t, zero});
    return failed(lo) ? lo : make<MinimumOp>({*lo, scalar(1.0, et)});
  }
  case Activation::hardswish: { // x * hardsigmoid(x) (1/6, 1/2)
    auto h = activation(Activation::hardsigmoid, x, 1.0 / 6.0, 0.5);
    return failed(h) ? h : make<MulOp>({x, *h});
  }
  case Activation::elu:
  case Activation::selu:
  case Activation::celu: { // relu(x) + alpha * (exp(min(x, 0) / s) - 1)
    double scale = 1.0;
    if (kind == Activation::selu) {
      alpha = 1.6732632423543772848170429916717;
      scale = 1.0507009873554804934193349852946;
    }
    if (kind == Activation::celu && alpha == 0.0)
      return emitError(loc) << "celu with alpha 0", failure();
    auto neg = expm1Below(kind == Activation::celu ? 1.0 / alpha : 1.0);
    auto negScaled = failed(neg) ? neg : times(*neg, alpha);
    auto pos = unary(UnaryKind::relu, x);
    if (failed(negScaled) || failed(pos))
      return failure();
    auto sum = make<AddOp>({*pos, *negScaled});
    return failed(sum) || scale == 1.0 ? sum : times(*sum, scale);
  }
  case Activation::leaky_relu: { // where(x > 0, x, alpha * x)
    auto gt = make<CompareOp>(
        {x, zero}, {b.getNamedAttr("predicate",
                                   ComparePredicateAttr::get(
                                       b.getContext(), ComparePredicate::gt))});
    auto s = times(x, alpha);
    if (failed(gt) || failed(s))
      return failure();
    return make<WhereOp>({*gt, x, *s});
  }
  case Activation::softsign: { // x / (1 + |x|)
    auto a = unary(UnaryKind::abs, x);
    auto d = failed(a) ? a : plus(*a, 1.0);
    return failed(d) ? d : make<DivOp>({x, *d});
  }
  case Activation::logsigmoid: { // -softplus(-x)
    auto n = unary(UnaryKind::neg, x);
    auto sp = failed(n) ? n : unary(UnaryKind::softplus, *n);
    return failed(sp) ? sp : unary(UnaryKind::neg, *sp);
  }
  }
  return emitError(loc) << "unknown activation", failure();
}

FailureOr<Value> Decomposer::glu(Value x, int64_t axis) {
  auto t = x.getType().cast<VTensorType>();
  SymInt size = t.getDim(axis);
  if (!size.isStatic() || size.constant % 2 != 0)
    return emitError(loc) << "GLU needs an even, static size along dimension "
                          << axis << ", got " << size.str(),
           failure();
  int64_t half = size.constant / 2;
  auto part = [&](int64_t start) {
    return make<SliceOp>({x}, {b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
                               b.getNamedAttr("start", b.getI64IntegerAttr(start)),
                               b.getNamedAttr("end",
                                              b.getI64IntegerAttr(start + half)),
                               b.getNamedAttr("step", b.getI64IntegerAttr(1))});
  };
  auto a = part(0), g = part(half);
  if (failed(a) || failed(g))
    return failure();
  auto s = unary(UnaryKind::sigmoid, *g);
  return failed(s) ? s : make<MulOp>({*a, *s});
}

FailureOr<Value> Decomposer::logSumExp(Value x, ArrayRef<int64_t> axes,
                                       bool keepdim) {
  auto m = reduce(ReduceKind::max, x, axes, true);
  auto d = failed(m) ? m : make<SubOp>({x, *m});
  auto e = failed(d) ? d : unary(UnaryKind::exp, *d);
  auto s = failed(e) ? e : reduce(ReduceKind::sum, *e, axes, keepdim);
  auto l = failed(s) ? s : unary(UnaryKind::log, *s);
  if (failed(l))
    return failure();
  auto shift = keepdim ? m : reduce(ReduceKind::max, x, axes, false);
  return failed(shift) ? shift : make<AddOp>({*l, *shift});
}

FailureOr<Value> Decomposer::variance(Value x, ArrayRef<int64_t> axes,
                                      bool keepdim, double correction,
                                      bool sqrtOf) {
  auto t = x.getType().cast<VTensorType>();
  int64_t count = 1;
  bool overExamples = false;
  for (int64_t a : axes) {
    overExamples |= !t.getDim(a).isStatic();
    if (t.getDim(a).isStatic())
      count *= t.getDim(a).constant;
  }
  auto mean = reduce(ReduceKind::mean, x, axes, true);
  auto d = failed(mean) ? mean : make<SubOp>({x, *mean});
  auto sq = failed(d) ? d : make<MulOp>({*d, *d});
  auto s = failed(sq) ? sq : reduce(ReduceKind::sum, *sq, axes, keepdim);
  if (overExamples) {
    // Over the examples (a std of per-example losses): the count is the
    // micro-batch's, summed from ones at run time -- a statistic of the
    // micro-batch, which varuna-run warns about where it matters.
    Type et = t.getElementType();
    auto zero = failed(s) ? s : times(x, 0.0);
    auto ones = failed(zero) ? zero : make<AddOp>({*zero, scalar(1.0, et)});
    auto n = failed(ones) ? ones
                          : reduce(ReduceKind::sum, *ones, axes, keepdim);
    auto denom = failed(n) || correction == 0
                     ? n
                     : make<SubOp>({*n, scalar(correction, et)});
    auto v = failed(denom) ? denom : make<DivOp>({*s, *denom});
    return failed(v) || !sqrtOf ? v : unary(UnaryKind::sqrt, *v);
  }
  double n = static_cast<double>(count) - correction;
  // torch: a non-positive divisor gives inf / nan.
  auto v = failed(s) ? s
                     : times(*s, n > 0 ? 1.0 / n
                                       : std::numeric_limits<double>::infinity());
  return failed(v) || !sqrtOf ? v : unary(UnaryKind::sqrt, *v);
}

FailureOr<Value> Decomposer::vectorNorm(Value x, double p,
                                        ArrayRef<int64_t> axes, bool keepdim) {
  if (p == 2.0) {
    auto sq = make<MulOp>({x, x});
    auto s = failed(sq) ? sq : reduce(ReduceKind::sum, *sq, axes, keepdim);
    return failed(s) ? s : unary(UnaryKind::sqrt, *s);
  }
  auto a = unary(UnaryKind::abs, x);
  if (failed(a))
    return failure();
  if (p == 1.0)
    return reduce(ReduceKind::sum, *a, axes, keepdim);
  if (std::isinf(p))
    return reduce(p > 0 ? ReduceKind::max : ReduceKind::min, *a, axes, keepdim);
  if (p == 0.0)
    return emitError(loc) << "a 0-norm (a count of the nonzero elements) is "
                             "not supported",
           failure();
  // (sum |x|^p)^(1/p).
  Type et = x.getType().cast<VTensorType>().getElementType();
  auto powered = make<PowOp>({*a, scalar(p, et)});
  auto s = failed(powered) ? powered : reduce(ReduceKind::sum, *powered, axes, keepdim);
  return failed(s) ? s : make<PowOp>({*s, scalar(1.0 / p, et)});
}

FailureOr<Value> Decomposer::rmsNorm(Value x, int64_t axis, Value weight,
                                     double eps) {
  int64_t rank = x.getType().cast<VTensorType>().getRank();
  SmallVector<int64_t> axes;
  for (int64_t i = axis; i < rank; ++i)
    axes.push_back(i);
  auto sq = make<MulOp>({x, x});
  auto ms = failed(sq) ? sq : reduce(ReduceKind::mean, *sq, axes, true);
  auto shifted = failed(ms) ? ms : plus(*ms, eps);
  auto inv = failed(shifted) ? shifted : unary(UnaryKind::rsqrt, *shifted);
  auto y = failed(inv) ? inv : make<MulOp>({x, *inv});
  return failed(y) || !weight ? y : make<MulOp>({*y, weight});
}

//===----------------------------------------------------------------------===//
// einsum
//===----------------------------------------------------------------------===//

FailureOr<Value> Decomposer::reshape(Value x, ArrayRef<SymInt> dims) {
  auto t = x.getType().cast<VTensorType>();
  if (t.getDims() == SmallVector<SymInt>(dims.begin(), dims.end()))
    return x;
  VTensorType type =
      VTensorType::getFromDims(b.getContext(), dims, t.getElementType());
  if (!type || type.getNumElements() != t.getNumElements())
    return emitError(loc) << "cannot reshape " << t << " to "
                          << dims.size() << " dimensions",
           failure();
  return b.create<ReshapeOp>(loc, type, x).getResult();
}

FailureOr<Value> Decomposer::transpose(Value x, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= static_cast<int64_t>(i) == p;
  if (identity)
    return x;
  return make<TransposeOp>({x},
                           {b.getNamedAttr("perm", b.getDenseI64ArrayAttr(perm))});
}

FailureOr<Value> Decomposer::arrange(Value x, std::string &have,
                                     StringRef keep) {
  SmallVector<int64_t> summed;
  std::string kept;
  for (auto [i, c] : llvm::enumerate(have)) {
    if (keep.contains(c))
      kept.push_back(c);
    else
      summed.push_back(i);
  }
  if (!summed.empty()) {
    auto r = reduce(ReduceKind::sum, x, summed, false);
    if (failed(r))
      return failure();
    x = *r;
    have = kept;
  }
  return x;
}

FailureOr<Value> Decomposer::einsumPair(Value a, std::string la, Value bv,
                                        std::string lb, StringRef out) {
  // Letters only one side has and the result does not need: summed first.
  std::string keepA, keepB;
  for (char c : la)
    if (out.contains(c) || lb.find(c) != std::string::npos)
      keepA.push_back(c);
  for (char c : lb)
    if (out.contains(c) || la.find(c) != std::string::npos)
      keepB.push_back(c);
  auto ra = arrange(a, la, keepA), rb = arrange(bv, lb, keepB);
  if (failed(ra) || failed(rb))
    return failure();
  a = *ra;
  bv = *rb;
  auto dimsA = a.getType().cast<VTensorType>().getDims();
  auto dimsB = bv.getType().cast<VTensorType>().getDims();
  std::string batch, freeA, freeB, contracted;
  for (char c : la) {
    bool inB = lb.find(c) != std::string::npos;
    (inB ? (out.contains(c) ? batch : contracted) : freeA).push_back(c);
  }
  for (char c : lb)
    if (la.find(c) == std::string::npos)
      freeB.push_back(c);
  auto sizeIn = [](ArrayRef<SymInt> dims, const std::string &letters, char c) {
    return dims[letters.find(c)];
  };
  SmallVector<SymInt> batchDims, freeADims, freeBDims, contractedDims;
  for (char c : batch) {
    SymInt x = sizeIn(dimsA, la, c), y = sizeIn(dimsB, lb, c);
    if (x != y && x != SymInt(1) && y != SymInt(1))
      return emitError(loc) << "einsum: letter '" << c << "' has sizes "
                            << x.str() << " and " << y.str(),
             failure();
    batchDims.push_back(x == SymInt(1) ? y : x);
  }
  for (char c : contracted) {
    SymInt x = sizeIn(dimsA, la, c), y = sizeIn(dimsB, lb, c);
    if (x != y)
      return emitError(loc) << "einsum: summed letter '" << c
                            << "' has sizes " << x.str() << " and " << y.str(),
             failure();
    contractedDims.push_back(x);
  }
  for (char c : freeA)
    freeADims.push_back(sizeIn(dimsA, la, c));
  for (char c : freeB)
    freeBDims.push_back(sizeIn(dimsB, lb, c));
  // a -> [batch, freeA, contracted], b -> [batch, contracted, freeB].
  auto permFor = [](const std::string &letters,
                    std::initializer_list<const std::string *> groups) {
    SmallVector<int64_t> perm;
    for (const std::string *g : groups)
      for (char c : *g)
        perm.push_back(letters.find(c));
    return perm;
  };
  auto pa = transpose(a, permFor(la, {&batch, &freeA, &contracted}));
  auto pb = transpose(bv, permFor(lb, {&batch, &contracted, &freeB}));
  auto m = product(freeADims), k = product(contractedDims),
       n = product(freeBDims);
  if (failed(pa) || failed(pb) || !m || !k || !n)
    return emitError(loc) << "einsum: the grouped sizes cannot be "
                             "represented",
           failure();
  auto batchOf = [&](ArrayRef<SymInt> dims, const std::string &letters) {
    SmallVector<SymInt> own;
    for (char c : batch)
      own.push_back(sizeIn(dims, letters, c));
    return own;
  };
  SmallVector<SymInt> shapeA = batchOf(dimsA, la), shapeB = batchOf(dimsB, lb);
  shapeA.append({*m, *k});
  shapeB.append({*k, *n});
  auto ga = reshape(*pa, shapeA), gb = reshape(*pb, shapeB);
  if (failed(ga) || failed(gb))
    return failure();
  auto prod = make<MatmulOp>({*ga, *gb});
  if (failed(prod))
    return failure();
  SmallVector<SymInt> full(batchDims);
  full.append(freeADims.begin(), freeADims.end());
  full.append(freeBDims.begin(), freeBDims.end());
  auto split = reshape(*prod, full);
  if (failed(split))
    return failure();
  std::string have = batch + freeA + freeB;
  SmallVector<int64_t> perm;
  for (char c : out)
    perm.push_back(have.find(c));
  return transpose(*split, perm);
}

FailureOr<Value> Decomposer::einsum(StringRef equation,
                                    ArrayRef<Value> operands) {
  std::string eq;
  for (char c : equation)
    if (c != ' ')
      eq.push_back(c);
  if (eq.find("...") != std::string::npos) {
    // Name the dimensions "..." stands for with letters the equation does
    // not use, aligned from the right (the longest "..." gets them all).
    std::string unused;
    for (char c = 'A'; c <= 'z'; ++c)
      if (llvm::isAlpha(c) && eq.find(c) == std::string::npos)
        unused.push_back(c);
    size_t arrow = eq.find("->");
    std::string lhsStr = eq.substr(0, arrow);
    SmallVector<StringRef> parts;
    StringRef(lhsStr).split(parts, ',');
    if (parts.size() != operands.size())
      return emitError(loc) << "einsum '" << equation << "' names "
                            << parts.size() << " operands, got "
                            << operands.size(),
             failure();
    size_t most = 0;
    SmallVector<size_t> spans;
    for (auto [term, v] : llvm::zip(parts, operands)) {
      int64_t rank = v.getType().cast<VTensorType>().getRank();
      size_t named = term.size() - (term.contains("...") ? 3 : 0);
      if (!term.contains("...") || static_cast<int64_t>(named) > rank) {
        spans.push_back(0);
        continue;
      }
      spans.push_back(rank - named);
      most = std::max<size_t>(most, rank - named);
    }
    if (most > unused.size())
      return emitError(loc) << "einsum '" << equation
                            << "': too many dimensions under '...'",
             failure();
    std::string all = unused.substr(0, most);
    std::string expanded;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i)
        expanded.push_back(',');
      std::string t = parts[i].str();
      if (size_t at = t.find("..."); at != std::string::npos)
        t.replace(at, 3, all.substr(most - spans[i]));
      expanded += t;
    }
    std::string out;
    if (arrow != std::string::npos) {
      out = eq.substr(arrow + 2);
      if (size_t at = out.find("..."); at != std::string::npos)
        out.replace(at, 3, all);
    } else {
      // Implicit: the "..." dimensions first, then the letters used once.
      std::string counts(128, 0);
      for (char c : expanded)
        if (c != ',')
          ++counts[c];
      out = all;
      for (int c = 0; c < 128; ++c)
        if (counts[c] == 1 && all.find(static_cast<char>(c)) == std::string::npos)
          out.push_back(static_cast<char>(c));
    }
    eq = expanded + "->" + out;
  }
  StringRef lhs = eq, rhs;
  bool explicitOut = false;
  if (size_t arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = StringRef(eq).take_front(arrow);
    rhs = StringRef(eq).drop_front(arrow + 2);
    explicitOut = true;
  }
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != operands.size())
    return emitError(loc) << "einsum '" << equation << "' names "
                          << terms.size() << " operands, got "
                          << operands.size(),
           failure();
  std::string counts(128, 0);
  for (auto [term, v] : llvm::zip(terms, operands)) {
    if (static_cast<int64_t>(term.size()) !=
        v.getType().cast<VTensorType>().getRank())
      return emitError(loc) << "einsum '" << equation << "': term '" << term
                            << "' does not match an operand of rank "
                            << v.getType().cast<VTensorType>().getRank(),
             failure();
    for (char c : term) {
      if (!llvm::isAlpha(c))
        return emitError(loc) << "einsum '" << equation
                              << "': unexpected character '" << c << "'",
               failure();
      if (term.count(c) > 1)
        return emitError(loc) << "einsum '" << equation << "': letter '" << c
                              << "' repeats within a term (a diagonal), "
                                 "which is not supported",
               failure();
      ++counts[c];
    }
  }
  std::string out;
  if (explicitOut) {
    out = rhs.str();
  } else {
    for (int c = 0; c < 128; ++c)
      if (counts[c] == 1)
        out.push_back(static_cast<char>(c));
  }
  // Fold left to right; each intermediate keeps the letters a later operand
  // or the output uses.
  Value acc = operands[0];
  std::string accLetters = terms[0].str();
  for (size_t i = 1; i < operands.size(); ++i) {
    std::string later = out;
    for (size_t j = i + 1; j < terms.size(); ++j)
      later += terms[j].str();
    std::string next;
    for (char c : accLetters + terms[i].str())
      if (later.find(c) != std::string::npos &&
          next.find(c) == std::string::npos)
        next.push_back(c);
    auto r = einsumPair(acc, accLetters, operands[i], terms[i].str(), next);
    if (failed(r))
      return failure();
    acc = *r;
    accLetters = next;
  }
  auto summed = arrange(acc, accLetters, out);
  if (failed(summed))
    return failure();
  SmallVector<int64_t> perm;
  for (char c : out) {
    size_t at = accLetters.find(c);
    if (at == std::string::npos)
      return emitError(loc) << "einsum '" << equation << "': output letter '"
                            << c << "' is in no operand",
             failure();
    perm.push_back(at);
  }
  return transpose(*summed, perm);
}

FailureOr<Value> Decomposer::divideByBatch(Value x, SymInt size) {
  auto refuse = [&](StringRef why) -> FailureOr<Value> {
    emitError(loc) << "dividing by the batch size " << size.str() << ": "
                   << why
                   << "; only a sum over the batch dimension can be divided "
                      "by it (loss.sum() / x.shape[0], kl_div's "
                      "\"batchmean\"), since a graph cannot hold the batch "
                      "size as data";
    return failure();
  };
  if (!size.isBatchMultiple())
    return refuse("it is not a multiple of B");
  // Sums added up (accumulated from zeros: Mixtral's per-layer counts):
  // each divided, zeros left alone.
  auto zeros = [](Value v) {
    auto full = v.getDefiningOp<FullOp>();
    if (!full)
      return false;
    if (auto f = full.getValue().dyn_cast<FloatAttr>())
      return f.getValueAsDouble() == 0.0;
    if (auto i = full.getValue().dyn_cast<IntegerAttr>())
      return i.getValue().isZero();
    return false;
  };
  if (llvm::isa_and_nonnull<AddOp, SubOp>(x.getDefiningOp())) {
    Operation *op = x.getDefiningOp();
    SmallVector<Value> parts;
    for (Value o : op->getOperands()) {
      FailureOr<Value> d = zeros(o) ? FailureOr<Value>(o) : divideByBatch(o, size);
      if (failed(d))
        return failure();
      parts.push_back(*d);
    }
    return llvm::isa<AddOp>(op) ? make<AddOp>(parts) : make<SubOp>(parts);
  }
  // A constant multiple of such a dividend (-0.5 * kl.sum(), a sum / 100,
  // -sum): (c s) / B = c (s / B), each micro-batch's share still exact.
  Operation *def = x.getDefiningOp();
  auto isConstant = [](Value v) { return bool(v.getDefiningOp<ConstantOp>()); };
  if (llvm::isa_and_nonnull<MulOp, DivOp>(def) &&
      (isConstant(def->getOperand(1)) ||
       (llvm::isa<MulOp>(def) && isConstant(def->getOperand(0))))) {
    unsigned at = isConstant(def->getOperand(1)) ? 0 : 1;
    auto d = divideByBatch(def->getOperand(at), size);
    if (failed(d))
      return failure();
    SmallVector<Value, 2> operands(def->getOperands());
    operands[at] = *d;
    return llvm::isa<MulOp>(def) ? make<MulOp>(operands)
                                 : make<DivOp>(operands);
  }
  if (auto neg = x.getDefiningOp<UnaryOp>();
      neg && neg.getKind() == UnaryKind::neg) {
    auto d = divideByBatch(neg.getInput(), size);
    return failed(d) ? d : unary(UnaryKind::neg, *d);
  }
  // A cross-entropy's reduction="sum" (F.cross_entropy(z, y,
  // reduction="sum") / x.shape[0]) is the sum of its "none" form.
  if (auto ce = x.getDefiningOp<CrossEntropyOp>();
      ce && ce.getReduction() == LossReduction::sum) {
    SmallVector<NamedAttribute> attrs(ce->getAttrs());
    for (NamedAttribute &a : attrs)
      if (a.getName() == ce.getReductionAttrName())
        a.setValue(LossReductionAttr::get(b.getContext(), LossReduction::none));
    FailureOr<Value> none = make<CrossEntropyOp>(ce->getOperands(), attrs);
    if (failed(none))
      return failure();
    FailureOr<Value> total = reduceAll(ReduceKind::sum, *none);
    return failed(total) ? total : divideByBatch(*total, size);
  }
  auto sum = x.getDefiningOp<ReduceOp>();
  if (!sum || sum.getKind() != ReduceKind::sum)
    return refuse("the dividend is not a sum");
  auto in = sum.getInput().getType().cast<VTensorType>();
  if (!in.getElementType().isa<FloatType>())
    return refuse("the sum is not floating-point");
  int64_t bd = in.getBatchDim();
  ArrayRef<int64_t> axes = sum.getAxes();
  if (bd < 0 || !llvm::is_contained(axes, bd))
    return refuse("the sum does not run over the batch dimension");
  // sum over axes / (k B) = mean over the batch dimension (size m B, m the
  // input's batch multiple) of the sum over the other axes, times m / k.
  bool keep = sum.getKeepdim();
  SmallVector<int64_t> others;
  int64_t at = bd;
  for (int64_t a : axes)
    if (a != bd) {
      others.push_back(a);
      if (a < bd && !keep)
        --at;
    }
  FailureOr<Value> v = sum.getInput();
  if (!others.empty())
    v = reduce(ReduceKind::sum, *v, others, keep);
  if (succeeded(v))
    v = reduce(ReduceKind::mean, *v, {at}, keep);
  double scale = static_cast<double>(in.getBatchMultiple()) /
                 static_cast<double>(size.perBatch);
  if (succeeded(v) && scale != 1.0)
    v = times(*v, scale);
  return v;
}

namespace {
/// Moving `axis` of a rank-`rank` tensor last (perm) and back; `rows` are
/// the other dimensions in order, once known.
struct AxisLast {
  SmallVector<int64_t> perm, back;
  SmallVector<SymInt> rows;

  AxisLast(int64_t axis, int64_t rank) : back(rank) {
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis)
        perm.push_back(i);
    perm.push_back(axis);
    for (int64_t i = 0; i < rank; ++i)
      back[perm[i]] = i;
  }
  /// Records the rows from a value with the axis moved last.
  void setRows(Value moved) {
    rows = moved.getType().cast<VTensorType>().getDims();
    rows.pop_back();
  }
  /// rows followed by `tail`.
  SmallVector<SymInt> shaped(std::initializer_list<SymInt> tail) const {
    SmallVector<SymInt> d(rows);
    d.append(tail.begin(), tail.end());
    return d;
  }
};
} // namespace

/// Weights [in][out] of resampling one axis from `in` to `out` elements.
static std::vector<double> resizeWeights(int64_t in, int64_t out,
                                         double scale, ResizeMode mode,
                                         ResizeCoordinates coord,
                                         double cubicA) {
  if (scale <= 0)
    scale = static_cast<double>(out) / static_cast<double>(in);
  std::vector<double> w(in * out, 0.0);
  auto add = [&](int64_t i, int64_t o, double v) {
    w[std::clamp<int64_t>(i, 0, in - 1) * out + o] += v;
  };
  for (int64_t o = 0; o < out; ++o) {
    double d = static_cast<double>(o), src = 0;
    switch (coord) {
    case ResizeCoordinates::halfPixel:
      src = (d + 0.5) / scale - 0.5;
      break;
    case ResizeCoordinates::pytorchHalfPixel:
      src = out > 1 ? (d + 0.5) / scale - 0.5 : 0.0;
      break;
    case ResizeCoordinates::alignCorners:
      src = out > 1 ? d * static_cast<double>(in - 1) /
                          static_cast<double>(out - 1)
                    : 0.0;
      break;
    case ResizeCoordinates::asymmetric:
      src = d / scale;
      break;
    }
    if (mode == ResizeMode::linear) {
      src = std::clamp(src, 0.0, static_cast<double>(in - 1));
      int64_t i0 = static_cast<int64_t>(std::floor(src));
      double t = src - static_cast<double>(i0);
      add(i0, o, 1.0 - t);
      add(i0 + 1, o, t);
      continue;
    }
    // Cubic convolution (Keys) at distances 1 + t, t, 1 - t, 2 - t.
    double a = cubicA;
    auto near = [a](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
    auto far = [a](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
    int64_t i0 = static_cast<int64_t>(std::floor(src));
    double t = src - static_cast<double>(i0);
    add(i0 - 1, o, far(1 + t));
    add(i0, o, near(t));
    add(i0 + 1, o, near(1 - t));
    add(i0 + 2, o, far(2 - t));
  }
  return w;
}

FailureOr<Value> Decomposer::resize(Value x, ArrayRef<ResizeAxis> axes,
                                    ResizeMode mode,
                                    ResizeCoordinates coordinates,
                                    double cubicA) {
  FailureOr<Value> cur = x;
  for (const ResizeAxis &ax : axes) {
    auto t = cur->getType().cast<VTensorType>();
    SmallVector<SymInt> dims = t.getDims();
    int64_t rank = dims.size();
    if (ax.axis < 0 || ax.axis >= rank)
      return emitError(loc) << "resize: axis " << ax.axis
                            << " out of range for rank " << rank,
             failure();
    SymInt in = dims[ax.axis];
    if (!in.isStatic())
      return emitError(loc) << "resizing the batch-dependent dimension "
                            << ax.axis << " is not supported",
             failure();
    if (ax.size < 1 || in.constant < 1)
      return emitError(loc) << "resizing dimension " << ax.axis << " from "
                            << in.constant << " to " << ax.size,
             failure();
    if (ax.size == in.constant && (ax.scale <= 0 || ax.scale == 1.0))
      continue;
    std::vector<double> w = resizeWeights(in.constant, ax.size, ax.scale,
                                          mode, coordinates, cubicA);
    Value weights = constant({in.constant, ax.size}, t.getElementType(), w);
    // Move the axis last, multiply, move it back.
    AxisLast moved(ax.axis, rank);
    cur = transpose(*cur, moved.perm);
    if (succeeded(cur))
      cur = make<MatmulOp>({*cur, weights});
    if (succeeded(cur))
      cur = transpose(*cur, moved.back);
    if (failed(cur))
      return failure();
  }
  return cur;
}

FailureOr<Value> Decomposer::slice(Value x, int64_t axis, int64_t start,
                                   int64_t end) {
  return make<SliceOp>({x}, {b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
                             b.getNamedAttr("start", b.getI64IntegerAttr(start)),
                             b.getNamedAttr("end", b.getI64IntegerAttr(end)),
                             b.getNamedAttr("step", b.getI64IntegerAttr(1))});
}

FailureOr<RecurrentResult>
Decomposer::recurrentLayer(RecurrentCell cell, Value x, Value h0, Value c0,
                           const RecurrentWeights &w, bool reverse,
                           Value valid) {
  auto xt = x.getType().cast<VTensorType>();
  auto ht = h0.getType().cast<VTensorType>();
  auto wt = w.wIh.getType().cast<VTensorType>();
  int64_t gates = cell == RecurrentCell::lstm  ? 4
                  : cell == RecurrentCell::gru ? 3
                                               : 1;
  int64_t hidden = wt.getRank() == 2 && wt.getDim(0).isStatic()
                       ? wt.getDim(0).constant / gates
                       : -1;
  // The state's size: H, or the projection's P.
  int64_t state = hidden;
  if (w.wHr) {
    auto pt = w.wHr.getType().cast<VTensorType>();
    state = cell == RecurrentCell::lstm && pt.getRank() == 2 &&
                    pt.getDim(0).isStatic() && pt.getDim(1) == SymInt(hidden)
                ? pt.getDim(0).constant
                : -1;
  }
  if (xt.getRank() != 3 || ht.getRank() != 2 || wt.getRank() != 2 ||
      !xt.getDim(0).isStatic() || hidden <= 0 || state <= 0 ||
      wt.getDim(0) != SymInt(gates * hidden) ||
      ht.getDim(1) != SymInt(state) ||
      (cell == RecurrentCell::lstm && !c0))
    return emitError(loc) << "recurrent layer: expected a time-major input "
                             "[T, B, I] with a static T, a state [B, S] and "
                             "weights ["
                          << gates << "*H, I] (S = H, or an LSTM projection's "
                          << "P with weights [P, H]), got " << xt << ", "
                          << ht << ", " << wt,
           failure();
  int64_t steps = xt.getDim(0).constant;
  SymInt batch = xt.getDim(1);
  auto fail = [] { return FailureOr<RecurrentResult>(failure()); };
  // Input projection of every step at once: [T, B, G*H].
  auto wIhT = transpose(w.wIh, {1, 0});
  FailureOr<Value> xw = failed(wIhT) ? wIhT : make<MatmulOp>({x, *wIhT});
  if (succeeded(xw) && w.bIh)
    xw = make<AddOp>({*xw, w.bIh});
  auto wHhT = transpose(w.wHh, {1, 0});
  if (failed(xw) || failed(wHhT))
    return fail();
  auto gate = [&](Value v, int64_t k) { return slice(v, 1, k * hidden, (k + 1) * hidden); };
  auto sig = [&](FailureOr<Value> v) {
    return failed(v) ? v : unary(UnaryKind::sigmoid, *v);
  };
  auto tanhOf = [&](FailureOr<Value> v) {
    return failed(v) ? v : unary(UnaryKind::tanh, *v);
  };
  auto mul = [&](FailureOr<Value> a, FailureOr<Value> c) {
    return failed(a) || failed(c) ? FailureOr<Value>(failure())
                                  : make<MulOp>({*a, *c});
  };
  auto add = [&](FailureOr<Value> a, FailureOr<Value> c) {
    return failed(a) || failed(c) ? FailureOr<Value>(failure())
                                  : make<AddOp>({*a, *c});
  };
  if (valid && valid.getType().cast<VTensorType>().getDims() !=
                   SmallVector<SymInt>{SymInt(steps), batch})
    return emitError(loc) << "recurrent layer: the valid steps must be [T, "
                             "B] for the input "
                          << xt << ", got " << valid.getType(),
           fail();
  Value h = h0, c = c0;
  SmallVector<Value> outs(steps);
  for (int64_t i = 0; i < steps; ++i) {
    int64_t t = reverse ? steps - 1 - i : i;
    // valid: this step counts for row b ([B, 1]); else the state stays.
    Value keep;
    if (valid) {
      auto v = slice(valid, 0, t, t + 1);
      auto column = failed(v) ? v : reshape(*v, {batch, SymInt(1)});
      if (failed(column))
        return fail();
      keep = *column;
    }
    auto masked = [&](Value now, Value before) -> FailureOr<Value> {
      return keep ? make<WhereOp>({keep, now, before}) : FailureOr<Value>(now);
    };
    auto step = slice(*xw, 0, t, t + 1);
    auto xs = failed(step) ? step : reshape(*step, {batch, SymInt(gates * hidden)});
    FailureOr<Value> hw = make<MatmulOp>({h, *wHhT});
    if (succeeded(hw) && w.bHh)
      hw = make<AddOp>({*hw, w.bHh});
    if (failed(xs) || failed(hw))
      return fail();
    FailureOr<Value> next = failure();
    switch (cell) {
    case RecurrentCell::lstm: {
      auto g = make<AddOp>({*xs, *hw});
      if (failed(g))
        return fail();
      auto in = sig(gate(*g, 0)), forget = sig(gate(*g, 1));
      auto cand = tanhOf(gate(*g, 2)), out = sig(gate(*g, 3));
      auto cNew = add(mul(forget, c), mul(in, cand));
      if (failed(cNew))
        return fail();
      next = mul(out, tanhOf(*cNew));
      auto cKept = masked(*cNew, c);
      if (failed(cKept))
        return fail();
      c = *cKept;
      if (succeeded(next) && w.wHr) { // projected: [B, H] x [H, P]
        auto wHrT = transpose(w.wHr, {1, 0});
        next = failed(wHrT) ? wHrT : make<MatmulOp>({*next, *wHrT});
      }
      break;
    }
    case RecurrentCell::gru: {
      auto r = sig(add(gate(*xs, 0), gate(*hw, 0)));
      auto z = sig(add(gate(*xs, 1), gate(*hw, 1)));
      auto n = tanhOf(add(gate(*xs, 2), mul(r, gate(*hw, 2))));
      // (1 - z) n + z h = n + z (h - n)
      auto diff = failed(n) ? n : make<SubOp>({h, *n});
      next = add(n, mul(z, diff));
      break;
    }
    case RecurrentCell::rnnTanh:
    case RecurrentCell::rnnRelu: {
      auto pre = make<AddOp>({*xs, *hw});
      next = failed(pre) ? pre
                         : unary(cell == RecurrentCell::rnnTanh
                                     ? UnaryKind::tanh
                                     : UnaryKind::relu,
                                 *pre);
      break;
    }
    }
    if (failed(next))
      return fail();
    auto hKept = masked(*next, h);
    if (failed(hKept))
      return fail();
    h = *hKept;
    // Output: the state, zeros at steps past the row's length.
    Value o = h;
    if (keep) {
      auto zeroed = make<WhereOp>({keep, h, scalar(0, elementTypeOf(h))});
      if (failed(zeroed))
        return fail();
      o = *zeroed;
    }
    auto row = reshape(o, {SymInt(1), batch, SymInt(state)});
    if (failed(row))
      return fail();
    outs[t] = *row;
  }
  auto all = steps == 1 ? FailureOr<Value>(outs[0])
                        : make<ConcatOp>(ValueRange(outs),
                                         {b.getNamedAttr(
                                             "axis", b.getI64IntegerAttr(0))});
  if (failed(all))
    return fail();
  return RecurrentResult{*all, h, c};
}

FailureOr<Value> Decomposer::padIndexed(Value x, ArrayRef<int64_t> pads,
                                        PadMode mode) {
  auto t = x.getType().cast<VTensorType>();
  int64_t rank = t.getRank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return emitError(loc) << "pad: expected " << 2 * rank << " pads, got "
                          << pads.size(),
           failure();
  const char *name = mode == PadMode::reflect ? "reflect"
                     : mode == PadMode::edge  ? "replicate"
                                              : "circular";
  FailureOr<Value> cur = x;
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t before = pads[axis], after = pads[axis + rank];
    if (before == 0 && after == 0)
      continue;
    SymInt size = t.getDim(axis);
    if (!size.isStatic())
      return emitError(loc) << name << " padding of the batch-dependent "
                            << "dimension " << axis << " is not supported",
             failure();
    int64_t n = size.constant;
    int64_t limit = mode == PadMode::reflect ? n - 1 : mode == PadMode::wrap ? n : INT64_MAX;
    if (n < 1 || before > limit || after > limit)
      return emitError(loc) << name << " padding of dimension " << axis
                            << " (size " << n << ") by " << before << " and "
                            << after << ": at most " << limit
                            << " on each side",
             failure();
    SmallVector<int64_t> idx;
    for (int64_t p = -before; p < n + after; ++p) {
      int64_t i = p;
      if (mode == PadMode::reflect)
        i = p < 0 ? -p : p >= n ? 2 * (n - 1) - p : p;
      else if (mode == PadMode::edge)
        i = std::clamp<int64_t>(p, 0, n - 1);
      else
        i = ((p % n) + n) % n;
      idx.push_back(i);
    }
    cur = gatherIndices(*cur, axis, idx);
    if (failed(cur))
      return failure();
  }
  return cur;
}

FailureOr<Value> Decomposer::oneHot(Value indices, int64_t depth,
                                    bool negatives) {
  auto t = indices.getType().cast<VTensorType>();
  if (!t.getElementType().isa<IntegerType>() || depth < 1)
    return emitError(loc) << "one-hot: expected integer indices and a "
                             "positive depth, got "
                          << t << " and " << depth,
           failure();
  SmallVector<SymInt> dims = t.getDims();
  dims.push_back(SymInt(1));
  auto column = reshape(indices, dims);
  if (failed(column))
    return failure();
  Type et = t.getElementType();
  auto rangeType = VTensorType::get(b.getContext(), {depth}, -1, et);
  auto compare = [&](double start) {
    Value r = b.create<ArangeOp>(loc, rangeType, b.getF64FloatAttr(start),
                                 b.getF64FloatAttr(1.0));
    return make<CompareOp>(
        {*column, r},
        {b.getNamedAttr("predicate", ComparePredicateAttr::get(
                                         b.getContext(), ComparePredicate::eq))});
  };
  auto hit = compare(0);
  if (failed(hit) || !negatives)
    return hit;
  auto wrapped = compare(-static_cast<double>(depth));
  return failed(wrapped) ? wrapped : make<OrOp>({*hit, *wrapped});
}

FailureOr<Value> Decomposer::softTargetCrossEntropy(Value x, Value target,
                                                    Value weight,
                                                    LossReduction reduction,
                                                    double smoothing) {
  auto xt = x.getType().cast<VTensorType>();
  auto tt = target.getType().cast<VTensorType>();
  if (xt.getRank() < 2 || xt.getDims() != tt.getDims() ||
      !xt.getDim(1).isStatic())
    return emitError(loc) << "a cross-entropy against probabilities needs "
                             "logits [N, C, ...] with a static C and targets "
                             "of the same shape, got "
                          << x.getType() << " and " << target.getType(),
           failure();
  int64_t classes = xt.getDim(1).constant;
  Value t = target;
  if (elementTypeOf(t) != elementTypeOf(x)) {
    t = b.create<CastOp>(loc, tt.withElementType(elementTypeOf(x)), t);
  }
  if (smoothing != 0.0) {
    auto kept = times(t, 1.0 - smoothing);
    if (failed(kept))
      return failure();
    auto spread = plus(*kept, smoothing / double(classes));
    if (failed(spread))
      return failure();
    t = *spread;
  }
  if (weight) { // [C] -> [C, 1, ...] against axis 1
    SmallVector<SymInt> dims(xt.getRank() - 1, SymInt(1));
    dims[0] = SymInt(classes);
    auto w = reshape(weight, dims);
    if (failed(w))
      return failure();
    auto wt = make<MulOp>({t, *w});
    if (failed(wt))
      return failure();
    t = *wt;
  }
  auto logp = make<SoftmaxOp>({x}, {b.getNamedAttr("axis", b.getI64IntegerAttr(1)),
                                    b.getNamedAttr("log", b.getUnitAttr())});
  if (failed(logp))
    return failure();
  auto prod = make<MulOp>({t, *logp});
  if (failed(prod))
    return failure();
  auto perElement = reduce(ReduceKind::sum, *prod, {1}, /*keepdim=*/false);
  if (failed(perElement))
    return failure();
  auto loss = unary(UnaryKind::neg, *perElement);
  if (failed(loss))
    return failure();
  return reduceLoss(*loss, reduction);
}

FailureOr<Value> Decomposer::reduceLoss(Value per, LossReduction reduction) {
  if (reduction == LossReduction::none)
    return per;
  return reduceAll(reduction == LossReduction::mean ? ReduceKind::mean
                                                    : ReduceKind::sum,
                   per);
}

FailureOr<Value> Decomposer::embeddingBag(Value weight, Value bags,
                                          BagMode mode, Value perSample,
                                          std::optional<int64_t> paddingIdx) {
  auto wt = weight.getType().cast<VTensorType>();
  auto bt = bags.getType().cast<VTensorType>();
  if (wt.getRank() != 2 || bt.getRank() != 2 || !bt.getDim(1).isStatic() ||
      !bt.getElementType().isa<IntegerType>())
    return emitError(loc) << "embedding_bag needs a weight [V, D] and integer "
                             "bags [N, L] with a static L, got "
                          << weight.getType() << " and " << bags.getType(),
           failure();
  Type et = wt.getElementType();
  int64_t length = bt.getDim(1).constant;
  SmallVector<SymInt> column = bt.getDims(); // [N, L, 1]
  column.push_back(SymInt(1));
  auto rows = make<GatherOp>({weight, bags},
                             {b.getNamedAttr("axis", b.getI64IntegerAttr(0))});
  if (failed(rows))
    return failure();
  Value e = *rows; // [N, L, D]
  if (perSample) {
    auto w = reshape(perSample, column);
    auto scaled = failed(w) ? w : make<MulOp>({e, *w});
    if (failed(scaled))
      return failure();
    e = *scaled;
  }
  Value keep, count; // [N, L, 1] i1 and [N, 1] entries kept
  if (paddingIdx) {
    auto ne = make<CompareOp>(
        {bags, scalar(double(*paddingIdx), bt.getElementType())},
        {b.getNamedAttr("predicate", ComparePredicateAttr::get(
                                         b.getContext(), ComparePredicate::ne))});
    auto col = failed(ne) ? ne : reshape(*ne, column);
    if (failed(col))
      return failure();
    keep = *col;
    Value kept = b.create<CastOp>(loc, bt.withElementType(et), *ne);
    auto c = reduce(ReduceKind::sum, kept, {1}, /*keepdim=*/true);
    if (failed(c))
      return failure();
    count = *c;
  }
  double fill =
      mode == BagMode::max ? -std::numeric_limits<double>::infinity() : 0.0;
  if (keep) {
    auto masked = make<WhereOp>({keep, e, scalar(fill, et)});
    if (failed(masked))
      return failure();
    e = *masked;
  }
  auto r = reduce(mode == BagMode::max ? ReduceKind::max : ReduceKind::sum, e,
                  {1}, /*keepdim=*/false); // [N, D]
  if (failed(r) || !count)
    return mode == BagMode::mean && succeeded(r) ? times(*r, 1.0 / length)
                                                 : r;
  if (mode == BagMode::mean) {
    auto atLeastOne = make<MaximumOp>({count, scalar(1.0, et)});
    return failed(atLeastOne) ? atLeastOne : make<DivOp>({*r, *atLeastOne});
  }
  if (mode == BagMode::max) { // a bag of padding only: zeros
    auto any = make<CompareOp>(
        {count, scalar(0.0, et)},
        {b.getNamedAttr("predicate", ComparePredicateAttr::get(
                                         b.getContext(), ComparePredicate::gt))});
    return failed(any) ? any : make<WhereOp>({*any, *r, scalar(0.0, et)});
  }
  return r;
}

/// Where pixel i of `size` lies in [-1, 1] (torch's normalized
/// coordinates): pixel centers spread over [-1, 1] with alignCorners, else
/// over [-1 + 1/size, 1 - 1/size]; one pixel is at 0.
static double normalizedCoordinate(int64_t i, int64_t size,
                                   bool alignCorners) {
  if (size <= 1)
    return 0.0;
  return alignCorners ? -1.0 + 2.0 * double(i) / double(size - 1)
                      : (2.0 * double(i) + 1.0) / double(size) - 1.0;
}

FailureOr<Value> Decomposer::affineGrid(Value theta, int64_t height,
                                        int64_t width, bool alignCorners) {
  auto tt = theta.getType().cast<VTensorType>();
  if (tt.getRank() != 3 || tt.getDim(1) != SymInt(2) ||
      tt.getDim(2) != SymInt(3) || !tt.getElementType().isa<FloatType>() ||
      height < 1 || width < 1)
    return emitError(loc) << "affine_grid needs floating-point theta [N, 2, "
                             "3] and a 4-D size, got "
                          << theta.getType() << " (3-D grids are not "
                             "supported)",
           failure();
  std::vector<double> base;
  base.reserve(height * width * 3);
  for (int64_t h = 0; h < height; ++h)
    for (int64_t w = 0; w < width; ++w) {
      base.push_back(normalizedCoordinate(w, width, alignCorners));
      base.push_back(normalizedCoordinate(h, height, alignCorners));
      base.push_back(1.0);
    }
  Value points =
      constant({1, height * width, 3}, tt.getElementType(), base);
  auto thetaT = transpose(theta, {0, 2, 1}); // [N, 3, 2]
  auto grid = failed(thetaT) ? thetaT : make<MatmulOp>({points, *thetaT});
  if (failed(grid))
    return failure();
  return reshape(*grid,
                 {tt.getDim(0), SymInt(height), SymInt(width), SymInt(2)});
}

FailureOr<Value> Decomposer::gridSample(Value x, Value grid, SampleMode mode,
                                        bool border, bool alignCorners) {
  auto xt = x.getType().cast<VTensorType>();
  auto gt = grid.getType().cast<VTensorType>();
  if (xt.getRank() != 4 || gt.getRank() != 4 ||
      !xt.getElementType().isa<FloatType>() ||
      gt.getElementType() != xt.getElementType() ||
      xt.getDim(0) != gt.getDim(0) || gt.getDim(3) != SymInt(2) ||
      !xt.getDim(1).isStatic() || !xt.getDim(2).isStatic() ||
      !xt.getDim(3).isStatic() || !gt.getDim(1).isStatic() ||
      !gt.getDim(2).isStatic())
    return emitError(loc) << "grid_sample needs x [N, C, H, W] and a grid [N, "
                             "Ho, Wo, 2] of its element type with static "
                             "C, H, W, Ho, Wo, got "
                          << x.getType() << " and " << grid.getType()
                          << " (5-D inputs are not supported)",
           failure();
  MLIRContext *ctx = b.getContext();
  Type et = xt.getElementType();
  SymInt n = xt.getDim(0);
  int64_t c = xt.getDim(1).constant, h = xt.getDim(2).constant,
          w = xt.getDim(3).constant;
  int64_t k = gt.getDim(1).constant * gt.getDim(2).constant;
  auto cmp = [&](ComparePredicate p, Value l, double r) {
    return make<CompareOp>(
        {l, scalar(r, et)},
        {b.getNamedAttr("predicate", ComparePredicateAttr::get(ctx, p))});
  };
  auto clamp = [&](Value v, double hi) -> FailureOr<Value> {
    auto lo = make<MaximumOp>({v, scalar(0.0, et)});
    return failed(lo) ? lo : make<MinimumOp>({*lo, scalar(hi, et)});
  };
  // Pixel coordinates [N, K] of the grid's x (axis 0) and y (axis 1).
  auto coordinate = [&](int64_t axis, int64_t size) -> FailureOr<Value> {
    auto part = slice(grid, 3, axis, axis + 1);
    auto flat = failed(part) ? part : reshape(*part, {n, SymInt(k)});
    double scale = alignCorners ? (size - 1) / 2.0 : size / 2.0;
    auto scaled = failed(flat) ? flat : times(*flat, scale);
    auto shifted = failed(scaled) ? scaled : plus(*scaled, (size - 1) / 2.0);
    if (failed(shifted) || !border)
      return shifted;
    return clamp(*shifted, double(size - 1));
  };
  auto ix = coordinate(0, w), iy = coordinate(1, h);
  if (failed(ix) || failed(iy))
    return failure();
  auto flatX = reshape(x, {n, SymInt(c), SymInt(h * w)});
  if (failed(flatX))
    return failure();
  SmallVector<SymInt> column{n, SymInt(1), SymInt(k)};
  // x at integer-valued pixel coordinates (xi, yi) [N, K] -> [N, C, K],
  // zeros outside the image.
  auto sample = [&](Value xi, Value yi) -> FailureOr<Value> {
    Value inside;
    for (auto [v, size] : {std::pair(xi, w), std::pair(yi, h)}) {
      auto lo = cmp(ComparePredicate::ge, v, 0.0);
      auto hi = cmp(ComparePredicate::le, v, double(size - 1));
      auto both = failed(lo) || failed(hi) ? FailureOr<Value>(failure())
                                           : make<AndOp>({*lo, *hi});
      auto all = failed(both) ? both : accumulate<AndOp>(inside, *both);
      if (failed(all))
        return failure();
      inside = *all;
    }
    auto xc = clamp(xi, double(w - 1)), yc = clamp(yi, double(h - 1));
    auto row = failed(yc) ? yc : times(*yc, double(w));
    auto lin = failed(row) || failed(xc) ? FailureOr<Value>(failure())
                                         : make<AddOp>({*row, *xc});
    if (failed(lin))
      return failure();
    auto lt = lin->getType().cast<VTensorType>();
    Value index = b.create<CastOp>(loc, lt.withElementType(b.getI64Type()),
                                   *lin);
    auto index3 = reshape(index, column);
    if (failed(index3))
      return failure();
    Value expanded = b.create<ExpandOp>(
        loc,
        VTensorType::getFromDims(ctx, {n, SymInt(c), SymInt(k)},
                                 b.getI64Type()),
        *index3);
    auto v = make<GatherElementsOp>(
        {*flatX, expanded}, {b.getNamedAttr("axis", b.getI64IntegerAttr(2))});
    auto mask = reshape(inside, column);
    if (failed(v) || failed(mask))
      return failure();
    return make<WhereOp>({*mask, *v, scalar(0.0, et)});
  };
  FailureOr<Value> out = failure();
  if (mode == SampleMode::nearest) {
    auto xn = unary(UnaryKind::round, *ix), yn = unary(UnaryKind::round, *iy);
    if (failed(xn) || failed(yn))
      return failure();
    out = sample(*xn, *yn);
  } else {
    auto x0 = unary(UnaryKind::floor, *ix), y0 = unary(UnaryKind::floor, *iy);
    if (failed(x0) || failed(y0))
      return failure();
    auto x1 = plus(*x0, 1.0), y1 = plus(*y0, 1.0);
    auto wx1 = make<SubOp>({*ix, *x0}), wy1 = make<SubOp>({*iy, *y0});
    if (failed(x1) || failed(y1) || failed(wx1) || failed(wy1))
      return failure();
    auto wx0 = make<SubOp>({scalar(1.0, et), *wx1});
    auto wy0 = make<SubOp>({scalar(1.0, et), *wy1});
    if (failed(wx0) || failed(wy0))
      return failure();
    Value sum;
    for (auto [xi, wx] : {std::pair(*x0, *wx0), std::pair(*x1, *wx1)})
      for (auto [yi, wy] : {std::pair(*y0, *wy0), std::pair(*y1, *wy1)}) {
        auto v = sample(xi, yi);
        auto weight = make<MulOp>({wx, wy});
        auto weight3 = failed(weight) ? weight : reshape(*weight, column);
        auto term = failed(v) || failed(weight3)
                        ? FailureOr<Value>(failure())
                        : make<MulOp>({*v, *weight3});
        auto total = failed(term) ? term : accumulate<AddOp>(sum, *term);
        if (failed(total))
          return failure();
        sum = *total;
      }
    out = sum;
  }
  if (failed(out))
    return failure();
  return reshape(*out, {n, SymInt(c), gt.getDim(1), gt.getDim(2)});
}

/// The classes of a margin loss's scores x [N, C], or an error naming
/// `what`.
static FailureOr<int64_t> marginClasses(Location loc, Value x,
                                        StringRef what) {
  auto xt = x.getType().cast<VTensorType>();
  if (xt.getRank() != 2 || !xt.getDim(1).isStatic() ||
      !xt.getElementType().isa<FloatType>())
    return emitError(loc) << what
                          << " needs floating-point scores [N, C] with a "
                             "static C, got "
                          << x.getType(),
           failure();
  return xt.getDim(1).constant;
}

FailureOr<Value> Decomposer::multiMarginLoss(Value x, Value labels, int64_t p,
                                             double margin, Value weight,
                                             LossReduction reduction) {
  auto classes = marginClasses(loc, x, "multi_margin_loss");
  if (failed(classes))
    return failure();
  auto lt = labels.getType().cast<VTensorType>();
  if (lt.getRank() != 1 || !lt.getElementType().isa<IntegerType>())
    return emitError(loc) << "multi_margin_loss needs integer class labels "
                             "[N], got "
                          << labels.getType(),
           failure();
  if (p != 1 && p != 2)
    return emitError(loc) << "multi_margin_loss: p must be 1 or 2, got " << p,
           failure();
  Type et = elementTypeOf(x);
  Value zero = scalar(0, et);
  auto hit = oneHot(labels, *classes, /*negatives=*/false); // [N, C]
  if (failed(hit))
    return failure();
  auto picked = make<WhereOp>({*hit, x, zero});
  auto xy = failed(picked) ? picked
                           : reduce(ReduceKind::sum, *picked, {1},
                                    /*keepdim=*/true); // [N, 1]
  if (failed(xy))
    return failure();
  // max(0, margin - x_y + x_i), 0 at i == y
  auto gap = make<SubOp>({x, *xy});
  auto shifted = failed(gap) ? gap : plus(*gap, margin);
  auto hinge = failed(shifted) ? shifted : unary(UnaryKind::relu, *shifted);
  if (failed(hinge))
    return failure();
  Value h = *hinge;
  if (p == 2) {
    auto sq = make<MulOp>({h, h});
    if (failed(sq))
      return failure();
    h = *sq;
  }
  auto others = make<WhereOp>({*hit, zero, h});
  auto row = failed(others) ? others
                            : reduce(ReduceKind::sum, *others, {1},
                                     /*keepdim=*/false); // [N]
  if (failed(row))
    return failure();
  Value per = *row;
  if (weight) {
    auto wt = weight.getType().dyn_cast<VTensorType>();
    if (!wt || wt.getRank() != 1 || wt.getElementType() != et)
      return emitError(loc) << "multi_margin_loss: the class weights must be "
                               "1-D with the scores' element type, got "
                            << weight.getType(),
             failure();
    auto w = make<GatherOp>({weight, labels},
                            {b.getNamedAttr("axis", b.getI64IntegerAttr(0))});
    auto weighted = failed(w) ? w : make<MulOp>({per, *w});
    if (failed(weighted))
      return failure();
    per = *weighted;
  }
  auto scaled = times(per, 1.0 / double(*classes));
  if (failed(scaled))
    return failure();
  return reduceLoss(*scaled, reduction);
}

FailureOr<Value> Decomposer::multilabelMarginLoss(Value x, Value target,
                                                  LossReduction reduction) {
  auto classes = marginClasses(loc, x, "multilabel_margin_loss");
  if (failed(classes))
    return failure();
  auto tt = target.getType().cast<VTensorType>();
  if (tt.getDims() != x.getType().cast<VTensorType>().getDims() ||
      !tt.getElementType().isa<IntegerType>())
    return emitError(loc) << "multilabel_margin_loss needs integer targets "
                             "of the scores' shape, got "
                          << target.getType() << " for scores "
                          << x.getType(),
           failure();
  MLIRContext *ctx = b.getContext();
  Type et = elementTypeOf(x), it = tt.getElementType();
  Value zero = scalar(0, et);
  auto predicate = [&](ComparePredicate p) {
    return b.getNamedAttr("predicate", ComparePredicateAttr::get(ctx, p));
  };
  // listed[n, j]: no negative entry at or before j in row n.
  auto negative = make<CompareOp>({target, scalar(0, it)},
                                  {predicate(ComparePredicate::lt)});
  if (failed(negative))
    return failure();
  Value negatives = b.create<CastOp>(loc, tt.withElementType(et), *negative);
  Value seen = b.create<CumsumOp>(loc, negatives, 1, false, false);
  auto listed = make<CompareOp>({seen, zero}, {predicate(ComparePredicate::eq)});
  auto safe = failed(listed) ? listed
                             : make<WhereOp>({*listed, target, scalar(0, it)});
  // hit[n, j, i]: entry j of row n is listed and names class i.
  auto named = failed(safe) ? safe : oneHot(*safe, *classes, false);
  if (failed(named))
    return failure();
  SmallVector<SymInt> column = tt.getDims();
  column.push_back(SymInt(1));
  auto listedColumn = reshape(*listed, column); // [N, C, 1]
  auto hit = failed(listedColumn) ? listedColumn
                                  : make<AndOp>({*named, *listedColumn});
  if (failed(hit))
    return failure();
  // x_j [N, C(j)]: the score of the class entry j names.
  SmallVector<SymInt> row = tt.getDims();
  row.insert(row.begin() + 1, SymInt(1));
  auto xRow = reshape(x, row); // [N, 1, C(i)]
  auto picked = failed(xRow) ? xRow : make<WhereOp>({*named, *xRow, zero});
  auto xj = failed(picked) ? picked
                           : reduce(ReduceKind::sum, *picked, {2},
                                    /*keepdim=*/true); // [N, C(j), 1]
  // target[n, i]: class i is listed in row n.
  Value hitF = b.create<CastOp>(
      loc, hit->getType().cast<VTensorType>().withElementType(et), *hit);
  auto count = reduce(ReduceKind::sum, hitF, {1}, /*keepdim=*/true);
  auto isTarget = failed(count) ? count
                                : make<CompareOp>({*count, zero},
                                                  {predicate(
                                                      ComparePredicate::gt)});
  if (failed(xj) || failed(isTarget))
    return failure();
  // max(0, 1 - x_j + x_i) over listed j and unlisted i.
  auto gap = make<SubOp>({*xRow, *xj}); // [N, C(j), C(i)]
  auto shifted = failed(gap) ? gap : plus(*gap, 1.0);
  auto hinge = failed(shifted) ? shifted : unary(UnaryKind::relu, *shifted);
  auto fromListed =
      failed(hinge) ? hinge : make<WhereOp>({*listedColumn, *hinge, zero});
  auto toOthers = failed(fromListed)
                      ? fromListed
                      : make<WhereOp>({*isTarget, zero, *fromListed});
  auto perRow = failed(toOthers) ? toOthers
                                 : reduce(ReduceKind::sum, *toOthers, {1, 2},
                                          /*keepdim=*/false); // [N]
  auto scaled = failed(perRow) ? perRow
                               : times(*perRow, 1.0 / double(*classes));
  if (failed(scaled))
    return failure();
  return reduceLoss(*scaled, reduction);
}

FailureOr<Value> Decomposer::remainder(Value a, Value bv, bool floorMod) {
  Type et = elementTypeOf(a);
  if (et != elementTypeOf(bv))
    return emitError(loc) << "remainder of " << a.getType() << " by "
                          << bv.getType() << ": the element types differ",
           failure();
  bool isFloat = et.isa<FloatType>();
  auto cmp = [&](ComparePredicate p, Value l, Value r) {
    return make<CompareOp>(
        {l, r}, {b.getNamedAttr("predicate",
                                ComparePredicateAttr::get(b.getContext(), p))});
  };
  Value zero = scalar(0, et);
  // r = a - b * q: q truncated (integers: fmod) or floored (floats: mod).
  FailureOr<Value> q = make<DivOp>({a, bv});
  if (succeeded(q) && isFloat)
    q = unary(UnaryKind::floor, *q);
  FailureOr<Value> bq = failed(q) ? q : make<MulOp>({bv, *q});
  FailureOr<Value> r = failed(bq) ? bq : make<SubOp>({a, *bq});
  if (failed(r))
    return failure();
  // Integers (truncated) need the floor fix for floorMod; floats (floored)
  // the truncation fix for fmod: where r != 0 and its sign differs from
  // the wanted one's, move it by b.
  if (isFloat == floorMod)
    return r;
  Value signOf = floorMod ? bv : a;
  auto nonzero = cmp(ComparePredicate::ne, *r, zero);
  auto rNeg = cmp(ComparePredicate::lt, *r, zero);
  auto wNeg = cmp(ComparePredicate::lt, signOf, zero);
  auto differ = failed(rNeg) || failed(wNeg)
                    ? FailureOr<Value>(failure())
                    : cmp(ComparePredicate::ne, *rNeg, *wNeg);
  auto fix = failed(nonzero) || failed(differ)
                 ? FailureOr<Value>(failure())
                 : make<AndOp>({*nonzero, *differ});
  auto moved = floorMod ? make<AddOp>({*r, bv}) : make<SubOp>({*r, bv});
  if (failed(fix) || failed(moved))
    return failure();
  return make<WhereOp>({*fix, *moved, *r});
}

FailureOr<Value> Decomposer::prelu(Value x, Value slope) {
  auto pos = make<CompareOp>(
      {x, scalar(0, elementTypeOf(x))},
      {b.getNamedAttr("predicate", ComparePredicateAttr::get(
                                       b.getContext(), ComparePredicate::gt))});
  auto scaled = make<MulOp>({x, slope});
  if (failed(pos) || failed(scaled))
    return failure();
  return make<WhereOp>({*pos, x, *scaled});
}


FailureOr<std::pair<Value, Value>> Decomposer::topK(Value x, int64_t axis,
                                                    int64_t k, bool largest) {
  auto t = x.getType().cast<VTensorType>();
  int64_t rank = t.getRank();
  auto fail = [] { return FailureOr<std::pair<Value, Value>>(failure()); };
  if (axis < 0 || axis >= rank || !t.getDim(axis).isStatic()) {
    InFlightDiagnostic d = emitError(loc)
                           << "sorting along dimension " << axis << " of " << t
                           << ": the dimension must exist and not depend on "
                              "the batch size";
    if (axis >= 0 && axis < rank)
      d << " (sorting across the examples picks some of them by value -- "
           "hard-example mining, a top-k of per-example losses -- which a "
           "micro-batch could do only among its own examples; weigh every "
           "example instead, e.g. a focal loss. A mixture of experts that "
           "groups tokens by expert sorts them too: compute each token's "
           "experts with static shapes, e.g. transformers' "
           "experts_implementation=\"batched_mm\")";
    return fail();
  }
  int64_t n = t.getDim(axis).constant;
  Type et = t.getElementType();
  if (!et.isa<FloatType>()) {
    // Integers and bools: ordered as f64 (exact below 2^53), the values
    // cast back (argsort of MAE's shuffled patch indices).
    Value wide = b.create<CastOp>(loc, t.withElementType(b.getF64Type()), x);
    auto r = topK(wide, axis, k, largest);
    if (failed(r))
      return fail();
    auto vt = r->first.getType().cast<VTensorType>();
    Value values = b.create<CastOp>(loc, vt.withElementType(et), r->first);
    return std::make_pair(values, r->second);
  }
  if (n > kMaxSortSize || k < 0 || k > n)
    return emitError(loc) << "sorting " << n << " elements for the top " << k
                          << ": at most " << kMaxSortSize
                          << " elements are supported (the selection is "
                             "quadratic in the size)",
           fail();
  MLIRContext *ctx = b.getContext();
  auto cmp = [&](ComparePredicate p, Value l, Value r) {
    return make<CompareOp>(
        {l, r}, {b.getNamedAttr("predicate", ComparePredicateAttr::get(ctx, p))});
  };
  AxisLast moved(axis, rank);
  FailureOr<Value> xt = transpose(x, moved.perm);
  if (failed(xt))
    return fail();
  moved.setRows(*xt);
  auto shaped = [&](std::initializer_list<SymInt> tail) {
    return moved.shaped(tail);
  };
  auto col = reshape(*xt, shaped({SymInt(n), SymInt(1)}));
  auto row = reshape(*xt, shaped({SymInt(1), SymInt(n)}));
  if (failed(col) || failed(row))
    return fail();
  // beats[.., i, j]: element j comes before element i.
  auto better = cmp(largest ? ComparePredicate::gt : ComparePredicate::lt,
                    *row, *col);
  auto same = cmp(ComparePredicate::eq, *row, *col);
  SmallVector<double> lower;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      lower.push_back(j < i);
  Value earlier = constant({n, n}, b.getI1Type(), lower);
  auto tie = failed(same) ? same : make<AndOp>({*same, earlier});
  auto beats = failed(better) || failed(tie) ? FailureOr<Value>(failure())
                                             : make<OrOp>({*better, *tie});
  if (failed(beats))
    return fail();
  Value counted = b.create<CastOp>(
      loc, beats->getType().cast<VTensorType>().withElementType(et), *beats);
  auto rankOf = reduce(ReduceKind::sum, counted,
                       {static_cast<int64_t>(moved.rows.size()) + 1},
                       /*keepdim=*/true); // [.., n, 1]
  auto rankRow = failed(rankOf) ? rankOf : reshape(*rankOf, shaped({SymInt(1), SymInt(n)}));
  SmallVector<double> ks, is;
  for (int64_t r = 0; r < k; ++r)
    ks.push_back(static_cast<double>(r));
  for (int64_t i = 0; i < n; ++i)
    is.push_back(static_cast<double>(i));
  if (failed(rankRow))
    return fail();
  auto pick = cmp(ComparePredicate::eq, *rankRow, constant({k, 1}, et, ks));
  if (failed(pick))
    return fail();
  Value onehot = b.create<CastOp>(
      loc, pick->getType().cast<VTensorType>().withElementType(et), *pick);
  auto values = make<MatmulOp>({onehot, *col}); // [.., k, 1]
  auto positions = make<MatmulOp>({onehot, constant({n, 1}, et, is)});
  if (failed(values) || failed(positions))
    return fail();
  auto finish = [&](Value v) -> FailureOr<Value> {
    auto flat = reshape(v, shaped({SymInt(k)}));
    return failed(flat) ? flat : transpose(*flat, moved.back);
  };
  auto v = finish(*values), p = finish(*positions);
  if (failed(v) || failed(p))
    return fail();
  Value idx = b.create<CastOp>(
      loc, p->getType().cast<VTensorType>().withElementType(b.getI64Type()), *p);
  return std::make_pair(*v, idx);
}

FailureOr<Value> Decomposer::scatterAlong(Value self, int64_t axis,
                                          Value index, Value src, bool add) {
  return scatterReduce(self, axis, index, src, ReduceKind::sum, add);
}

FailureOr<Value> Decomposer::scatterReduce(Value self, int64_t axis,
                                           Value index, Value src,
                                           ReduceKind kind, bool includeSelf) {
  auto st = self.getType().cast<VTensorType>();
  auto it = index.getType().cast<VTensorType>();
  auto vt = src.getType().cast<VTensorType>();
  int64_t rank = st.getRank();
  auto refuse = [&](StringRef why) -> FailureOr<Value> {
    emitError(loc) << "scatter along dimension " << axis << " into " << st
                   << " at " << it << " from " << vt << ": " << why;
    return failure();
  };
  if (kind != ReduceKind::sum && kind != ReduceKind::mean &&
      kind != ReduceKind::max && kind != ReduceKind::min)
    return refuse("only sum, mean, amax and amin reductions");
  if (axis < 0 || axis >= rank || !st.getDim(axis).isStatic() ||
      !it.getDim(axis).isStatic())
    return refuse("the dimension must exist and not depend on the batch size");
  if (it.getRank() != rank || it.getDims() != vt.getDims() ||
      !it.getElementType().isa<IntegerType>())
    return refuse("the index (integers) and the source need one shape of the "
                  "same rank");
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis && it.getDim(i) != st.getDim(i))
      return refuse("the index must match the tensor outside the scattered "
                    "dimension");
  if (!st.getElementType().isa<FloatType>() ||
      vt.getElementType() != st.getElementType())
    return refuse("only floating-point tensors of one element type");
  int64_t n = st.getDim(axis).constant, m = it.getDim(axis).constant;
  AxisLast moved(axis, rank);
  auto s = transpose(self, moved.perm), ix = transpose(index, moved.perm),
       v = transpose(src, moved.perm);
  if (failed(s) || failed(ix) || failed(v))
    return failure();
  moved.setRows(*s);
  auto shaped = [&](std::initializer_list<SymInt> tail) {
    return moved.shaped(tail);
  };
  // onehot[.., j, i] = index[.., j] == i (oneHot adds the last axis).
  auto hit = oneHot(*ix, n, /*negatives=*/true); // [.., m, n]
  if (failed(hit))
    return failure();
  Type et = st.getElementType();
  Value onehot = b.create<CastOp>(
      loc, hit->getType().cast<VTensorType>().withElementType(et), *hit);
  int64_t mAxis = static_cast<int64_t>(moved.rows.size());
  bool sum = kind == ReduceKind::sum;
  // The sum of what is sent to each position, [.., n] (src row x one-hot).
  auto sent = [&]() -> FailureOr<Value> {
    auto srcRow = reshape(*v, shaped({SymInt(1), SymInt(m)}));
    auto spread = failed(srcRow) ? srcRow : make<MatmulOp>({*srcRow, onehot});
    return failed(spread) ? spread : reshape(*spread, shaped({SymInt(n)}));
  };
  if (sum && includeSelf) { // scatter_add: self plus what is sent
    auto flat = sent();
    auto out = failed(flat) ? flat : make<AddOp>({*s, *flat});
    return failed(out) ? out : transpose(*out, moved.back);
  }
  // The positions some index names keep the reduction; the others self.
  auto count = reduce(ReduceKind::sum, onehot, {mAxis}, false); // [.., n]
  auto covered =
      failed(count)
          ? count
          : make<CompareOp>(
                {*count, scalar(0, et)},
                {b.getNamedAttr("predicate",
                                ComparePredicateAttr::get(
                                    b.getContext(), ComparePredicate::gt))});
  if (failed(covered))
    return failure();
  FailureOr<Value> out = failure();
  if (sum || kind == ReduceKind::mean) {
    auto flat = sent();
    if (failed(flat))
      return failure();
    FailureOr<Value> total = includeSelf ? make<AddOp>({*s, *flat}) : *flat;
    if (succeeded(total) && kind == ReduceKind::mean) {
      // Over the elements sent (and self): at least 1 where not covered.
      auto den = includeSelf ? make<AddOp>({*count, scalar(1, et)})
                             : make<MaximumOp>({*count, scalar(1, et)});
      total = failed(den) ? den : make<DivOp>({*total, *den});
    }
    out = failed(total) ? total : make<WhereOp>({*covered, *total, *s});
  } else {
    // where(onehot, src, -inf / inf) reduced over the sources.
    bool max = kind == ReduceKind::max;
    auto srcCol = reshape(*v, shaped({SymInt(m), SymInt(1)}));
    double inf = std::numeric_limits<double>::infinity();
    auto picked =
        failed(srcCol)
            ? srcCol
            : make<WhereOp>({*hit, *srcCol, scalar(max ? -inf : inf, et)});
    auto red = failed(picked) ? picked : reduce(kind, *picked, {mAxis}, false);
    if (succeeded(red) && includeSelf)
      red = max ? make<MaximumOp>({*red, *s}) : make<MinimumOp>({*red, *s});
    out = failed(red) ? red : make<WhereOp>({*covered, *red, *s});
  }
  return failed(out) ? out : transpose(*out, moved.back);
}

FailureOr<Value> Decomposer::argExtreme(Value x, int64_t axis, bool largest,
                                        bool keepdim) {
  auto t = x.getType().cast<VTensorType>();
  int64_t rank = t.getRank();
  if (axis < 0 || axis >= rank || !t.getDim(axis).isStatic())
    return emitError(loc) << "arg" << (largest ? "max" : "min")
                          << " along dimension " << axis << " of " << t
                          << ": the dimension must exist and not depend on "
                             "the batch size",
           failure();
  int64_t n = t.getDim(axis).constant;
  Value v = x;
  Type ft = t.getElementType().isa<FloatType>() ? t.getElementType()
                                                : Type(b.getF32Type());
  if (ft != t.getElementType())
    v = b.create<CastOp>(loc, t.withElementType(ft), x);
  auto best = reduce(largest ? ReduceKind::max : ReduceKind::min, v, {axis},
                     /*keepdim=*/true);
  auto at = failed(best)
                ? best
                : make<CompareOp>(
                      {v, *best},
                      {b.getNamedAttr("predicate",
                                      ComparePredicateAttr::get(
                                          b.getContext(), ComparePredicate::eq))});
  if (failed(at))
    return failure();
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  SmallVector<double> pos;
  for (int64_t i = 0; i < n; ++i)
    pos.push_back(static_cast<double>(i));
  Value positions = constant(shape, ft, pos);
  auto cand = make<WhereOp>({*at, positions, scalar(static_cast<double>(n), ft)});
  auto first = failed(cand) ? cand
                            : reduce(ReduceKind::min, *cand, {axis}, keepdim);
  if (failed(first))
    return failure();
  return b
      .create<CastOp>(loc,
                      first->getType().cast<VTensorType>().withElementType(
                          b.getI64Type()),
                      *first)
      .getResult();
}

FailureOr<Value> Decomposer::ctcLoss(Value logProbs, Value targets,
                                     Value inputLengths, Value targetLengths,
                                     int64_t blank, LossReduction reduction,
                                     bool zeroInfinity) {
  auto lt = logProbs.getType().cast<VTensorType>();
  auto tt = targets.getType().cast<VTensorType>();
  auto ilt = inputLengths.getType().cast<VTensorType>();
  auto tlt = targetLengths.getType().cast<VTensorType>();
  if (lt.getRank() != 3 || !lt.getDim(0).isStatic() ||
      !lt.getDim(2).isStatic() || !lt.getElementType().isa<FloatType>())
    return emitError(loc) << "ctc_loss needs log-probabilities [T, N, C] with "
                             "a static T and C, got "
                          << logProbs.getType(),
           failure();
  SymInt batch = lt.getDim(1);
  if (tt.getRank() != 2 || tt.getDim(0) != batch || !tt.getDim(1).isStatic() ||
      tt.getDim(1).constant < 1 || !tt.getElementType().isa<IntegerType>())
    return emitError(loc) << "ctc_loss needs padded integer targets [N, S] "
                             "(static S >= 1); got "
                          << targets.getType()
                          << " (targets concatenated into one 1-D tensor are "
                             "split by their lengths, data a micro-batch "
                             "cannot divide: pad them to [N, S])",
           failure();
  for (VTensorType l : {ilt, tlt})
    if (l.getRank() != 1 || l.getDim(0) != batch ||
        !l.getElementType().isa<IntegerType>())
      return emitError(loc) << "ctc_loss needs integer lengths [N], got " << l,
             failure();
  MLIRContext *ctx = b.getContext();
  int64_t steps = lt.getDim(0).constant, classes = lt.getDim(2).constant;
  int64_t labels = tt.getDim(1).constant, width = 2 * labels + 1;
  if (blank < 0 || blank >= classes)
    return emitError(loc) << "ctc_loss: blank " << blank
                          << " is not a class (C = " << classes << ")",
           failure();
  Type et = lt.getElementType(), i64 = b.getI64Type();
  // A finite stand-in for log(0): -inf would make 0 * inf = NaN in the
  // gradients of paths that are not possible yet.
  double never = et.isF16() ? -6.0e4 : -1.0e30;
  auto predicate = [&](ComparePredicate p) {
    return b.getNamedAttr("predicate", ComparePredicateAttr::get(ctx, p));
  };
  auto axisAttr = [&](int64_t a) {
    return b.getNamedAttr("axis", b.getI64IntegerAttr(a));
  };
  auto toI64 = [&](Value v) -> Value {
    auto t = v.getType().cast<VTensorType>();
    return t.getElementType() == i64
               ? v
               : b.create<CastOp>(loc, t.withElementType(i64), v).getResult();
  };
  Value il = toI64(inputLengths), tl = toI64(targetLengths);
  // Entries past a row's target length are padding torch never reads (any
  // value, -1 too): clamped into the classes so that gathering them is
  // safe; they only reach positions past the row's end.
  auto low = make<MaximumOp>({toI64(targets), scalar(0.0, i64)});
  auto clamped =
      failed(low) ? low
                  : make<MinimumOp>({*low, scalar(double(classes - 1), i64)});
  if (failed(clamped))
    return failure();
  Value tg = *clamped;
  // ext [N, 2S+1]: blank, target 0, blank, target 1, ..., blank.
  auto zeros = times(tg, 0.0);
  auto blanks = failed(zeros) ? zeros : plus(*zeros, double(blank));
  auto bcol = failed(blanks)
                  ? blanks
                  : reshape(*blanks, {batch, SymInt(labels), SymInt(1)});
  auto tcol = reshape(tg, {batch, SymInt(labels), SymInt(1)});
  if (failed(bcol) || failed(tcol))
    return failure();
  auto pairs =
      make<ConcatOp>({*tcol, *bcol}, {axisAttr(2)}); // t0 blank t1 blank ...
  auto flat =
      failed(pairs) ? pairs : reshape(*pairs, {batch, SymInt(2 * labels)});
  auto lead = failed(blanks) ? blanks : slice(*blanks, 1, 0, 1);
  auto extended = failed(flat) || failed(lead)
                      ? FailureOr<Value>(failure())
                      : make<ConcatOp>({*lead, *flat}, {axisAttr(1)});
  if (failed(extended))
    return failure();
  Value ext = *extended;
  // emit [N, T, 2S+1]: each step's log-probability of each extended label.
  auto byRow = transpose(logProbs, {1, 0, 2});
  auto index3 = reshape(ext, {batch, SymInt(1), SymInt(width)});
  if (failed(byRow) || failed(index3))
    return failure();
  Value index = b.create<ExpandOp>(
      loc,
      VTensorType::getFromDims(ctx, {batch, SymInt(steps), SymInt(width)}, i64),
      *index3);
  auto emit = make<GatherElementsOp>({*byRow, index}, {axisAttr(2)});
  if (failed(emit))
    return failure();
  auto emitAt = [&](int64_t t) -> FailureOr<Value> {
    auto s = slice(*emit, 1, t, t + 1);
    return failed(s) ? s : reshape(*s, {batch, SymInt(width)});
  };
  auto positions = [&](auto keep) {
    SmallVector<double> v;
    for (int64_t s = 0; s < width; ++s)
      v.push_back(keep(s) ? 1.0 : 0.0);
    return constant({1, width}, b.getI1Type(), v);
  };
  Value neverV = scalar(never, et);
  // skip [N, 2S+1]: label s may follow label s - 2 directly (s a target
  // that differs from the previous target).
  Value skip;
  {
    auto head = slice(ext, 1, 0, 2), body = slice(ext, 1, 0, width - 2);
    if (failed(head) || failed(body))
      return failure();
    auto prev2 = make<ConcatOp>({*head, *body}, {axisAttr(1)});
    auto differs =
        failed(prev2)
            ? prev2
            : make<CompareOp>({ext, *prev2}, {predicate(ComparePredicate::ne)});
    auto label = make<CompareOp>({ext, scalar(double(blank), i64)},
                                 {predicate(ComparePredicate::ne)});
    if (failed(differs) || failed(label))
      return failure();
    auto both = make<AndOp>({*differs, *label});
    auto s =
        failed(both)
            ? both
            : make<AndOp>({*both, positions([](int64_t s) { return s >= 2; })});
    if (failed(s))
      return failure();
    skip = *s;
  }
  auto e0 = emitAt(0);
  if (failed(e0))
    return failure();
  auto alpha =
      make<WhereOp>({positions([](int64_t s) { return s < 2; }), *e0, neverV});
  if (failed(alpha))
    return failure();
  auto lengthColumn = reshape(il, {batch, SymInt(1)});
  if (failed(lengthColumn))
    return failure();
  // log(exp(a) + exp(b) [+ exp(c)]), shifted by the maximum (all finite).
  auto logAddExp = [&](ArrayRef<Value> terms) -> FailureOr<Value> {
    Value m;
    for (Value v : terms) {
      auto a = m ? make<MaximumOp>({m, v}) : FailureOr<Value>(v);
      if (failed(a))
        return failure();
      m = *a;
    }
    Value sum;
    for (Value v : terms) {
      auto d = make<SubOp>({v, m});
      auto e = failed(d) ? d : unary(UnaryKind::exp, *d);
      auto s = failed(e) ? e : accumulate<AddOp>(sum, *e);
      if (failed(s))
        return failure();
      sum = *s;
    }
    auto l = unary(UnaryKind::log, sum);
    return failed(l) ? l : make<AddOp>({m, *l});
  };
  // [N, by] columns of `never` that shift alpha right by one or two
  // labels: the same every frame, made once.
  Value neverColumns[3];
  for (int64_t by : {1, 2}) {
    auto pad = slice(*e0, 1, 0, by);
    auto zeroed = failed(pad) ? pad : times(*pad, 0.0);
    auto padded = failed(zeroed) ? zeroed : plus(*zeroed, never);
    if (failed(padded))
      return failure();
    neverColumns[by] = *padded;
  }
  auto shifted = [&](Value a, int64_t by) -> FailureOr<Value> {
    auto rest = slice(a, 1, 0, width - by);
    if (failed(rest))
      return failure();
    return make<ConcatOp>({neverColumns[by], *rest}, {axisAttr(1)});
  };
  for (int64_t t = 1; t < steps; ++t) {
    // From the same label, the one before, or (skip) the one before that.
    auto a1 = shifted(*alpha, 1), a2 = shifted(*alpha, 2);
    auto kept = failed(a2) ? a2 : make<WhereOp>({skip, *a2, neverV});
    auto lse = failed(a1) || failed(kept) ? FailureOr<Value>(failure())
                                          : logAddExp({*alpha, *a1, *kept});
    auto here = emitAt(t);
    if (failed(lse) || failed(here))
      return failure();
    auto next = make<AddOp>({*lse, *here});
    // A row whose input has ended keeps its last step's values.
    auto active = make<CompareOp>({*lengthColumn, scalar(double(t), i64)},
                                  {predicate(ComparePredicate::gt)});
    if (failed(next) || failed(active))
      return failure();
    alpha = make<WhereOp>({*active, *next, *alpha});
    if (failed(alpha))
      return failure();
  }
  // The paths end on the last label or the blank after it: ext positions
  // 2 tl and 2 tl - 1 (none for an empty target).
  auto endBlank = times(tl, 2.0);
  auto endLabel = failed(endBlank) ? endBlank : plus(*endBlank, -1.0);
  auto endLabelSafe = failed(endLabel)
                          ? endLabel
                          : make<MaximumOp>({*endLabel, scalar(0.0, i64)});
  if (failed(endLabelSafe))
    return failure();
  auto pick = [&](Value at) -> FailureOr<Value> {
    auto col = reshape(at, {batch, SymInt(1)});
    return failed(col) ? col
                       : make<GatherElementsOp>({*alpha, *col}, {axisAttr(1)});
  };
  auto atBlank = pick(*endBlank), atLabel = pick(*endLabelSafe);
  auto hasLabels = make<CompareOp>({tl, scalar(0.0, i64)},
                                   {predicate(ComparePredicate::gt)});
  auto hasColumn =
      failed(hasLabels) ? hasLabels : reshape(*hasLabels, {batch, SymInt(1)});
  if (failed(atBlank) || failed(atLabel) || failed(hasColumn))
    return failure();
  auto label = make<WhereOp>({*hasColumn, *atLabel, neverV});
  auto total = failed(label) ? label : logAddExp({*atBlank, *label});
  auto perRow = failed(total) ? total : reshape(*total, {batch});
  auto loss = failed(perRow) ? perRow : unary(UnaryKind::neg, *perRow);
  if (failed(loss))
    return failure();
  // No path (the input shorter than its target needs): torch's inf, or 0
  // with zero_infinity.
  auto impossible = make<CompareOp>({*loss, scalar(-never / 2, et)},
                                    {predicate(ComparePredicate::gt)});
  if (failed(impossible))
    return failure();
  loss = make<WhereOp>(
      {*impossible,
       scalar(zeroInfinity ? 0.0 : std::numeric_limits<double>::infinity(), et),
       *loss});
  if (failed(loss) || reduction != LossReduction::mean)
    return failed(loss) ? loss : reduceLoss(*loss, reduction);
  // mean: each row's loss over its target length (at least 1), then the
  // mean over the examples.
  auto lengthF = b.create<CastOp>(
      loc, tl.getType().cast<VTensorType>().withElementType(et), tl);
  auto atLeast1 = make<MaximumOp>({lengthF, scalar(1.0, et)});
  auto perLabel = failed(atLeast1) ? atLeast1 : make<DivOp>({*loss, *atLeast1});
  return failed(perLabel) ? perLabel : reduceAll(ReduceKind::mean, *perLabel);
}
