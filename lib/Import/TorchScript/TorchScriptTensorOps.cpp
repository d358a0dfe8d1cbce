//===- TorchScriptTensorOps.cpp - where, masks, clamp, factories ----------===//
//
// Selection (where, masked_fill, clamp, triu/tril) and tensor factories
// (full/zeros/ones, *_like, arange). Factory shapes are SymInt lists, so
// `torch.arange(x.size(1))` or `torch.zeros(x.shape)` stay batch-generic.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"
#include "varuna/Import/Decompose.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

LogicalResult TSImporter::hClamp(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  std::string op = opName(n);
  TSValue cur = TSValue::ofTensor(*x);
  auto apply = [&](StringRef kind, unsigned i) -> LogicalResult {
    if (isNoneArg(n, i))
      return success();
    auto r = binary(kind, cur, lookup(n->input(i)), loc, n);
    if (failed(r))
      return failure();
    cur = TSValue::ofTensor(*r);
    return success();
  };
  if (op == "relu6") { // clamp(x, 0, 6)
    for (auto [kind, bound] : {std::pair<StringRef, double>{"maximum", 0.0},
                               {"minimum", 6.0}}) {
      auto r = binary(kind, cur, TSValue::ofFloat(bound), loc, n);
      if (failed(r))
        return failure();
      cur = TSValue::ofTensor(*r);
    }
    bind(n->output(), cur);
    return success();
  }
  if (op == "clamp_min" ? failed(apply("maximum", 1))
      : op == "clamp_max"
          ? failed(apply("minimum", 1))
          : failed(apply("maximum", 1)) || failed(apply("minimum", 2)))
    return failure();
  bind(n->output(), cur);
  return success();
}

/// Ops whose result has a size the data decides (nonzero, unique,
/// bincount, ...) and random ops without a formula on uniform or normal
/// draws: refused with what to write instead.
LogicalResult TSImporter::hUnsupportedShape(Node *n, Location loc) {
  std::string op = opName(n);
  if (op == "multinomial" || op == "poisson" || op == "randperm" ||
      op == "binomial" || op == "_standard_gamma" || op == "_sample_dirichlet")
    return error(n, loc) << "draws random numbers from a distribution that "
                            "is not supported (rand, randn, randint, "
                            "bernoulli, normal, uniform_ and exponential_ "
                            "are, and arithmetic on them)";
  return error(n, loc)
         << "returns as many elements as the data decides: every tensor of "
            "a pipeline stage needs a shape known before the data arrives. "
            "Keep the shape fixed -- torch.where(mask, x, 0) or a masked sum "
            "instead of x[mask], one_hot(...).sum(0) instead of bincount";
}

LogicalResult TSImporter::hWhere(Node *n, Location loc) {
  if (n->inputs().size() == 1) // torch.where(mask): its indices
    return hMaskIndices(n, loc);
  if (n->inputs().size() != 3)
    return error(n, loc) << "where with " << n->inputs().size()
                         << " operands";
  auto cond = tensorArg(n, 0, loc);
  if (failed(cond))
    return failure();
  TSValue a = lookup(n->input(1)), c = lookup(n->input(2));
  Type elt;
  if (a.kind == K::Tensor && c.kind == K::Tensor) {
    auto x = asTensor(a, Type(), loc, n), y = asTensor(c, Type(), loc, n);
    if (failed(x) || failed(y))
      return failure();
    elt = promoteTypes(tensorType(*x).getElementType(),
                  tensorType(*y).getElementType());
  } else if (a.kind == K::Tensor || c.kind == K::Tensor) {
    auto x = asTensor(a.kind == K::Tensor ? a : c, Type(), loc, n);
    if (failed(x))
      return failure();
    elt = promoteScalarType(ctx, tensorType(*x).getElementType(),
                        a.kind == K::Tensor ? c : a);
  } else {
    elt = (a.kind == K::Float || c.kind == K::Float) ? Type(b().getF32Type())
                                                     : b().getI64Type();
  }
  auto x = asTensor(a, elt, loc, n), y = asTensor(c, elt, loc, n);
  if (failed(x) || failed(y))
    return failure();
  Value m = cast(*cond, b().getI1Type(), loc);
  return bindResult(
      n, make<WhereOp>(loc, {m, cast(*x, elt, loc), cast(*y, elt, loc)}));
}

LogicalResult TSImporter::hMaskedFill(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc), mask = tensorArg(n, 1, loc);
  if (failed(x) || failed(mask))
    return failure();
  Type elt = tensorType(*x).getElementType();
  auto value = asTensor(lookup(n->input(2)), elt, loc, n);
  if (failed(value))
    return failure();
  Value m = cast(*mask, b().getI1Type(), loc);
  return bindResult(n, make<WhereOp>(loc, {m, cast(*value, elt, loc), *x}));
}

LogicalResult TSImporter::hTrilu(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  auto k = optArg(n, 1, loc, &TSImporter::intArg, 0);
  if (failed(k))
    return failure();
  return bindResult(
      n, make<TriluOp>(loc, {*x},
                       {i64("k", *k),
                        attr("upper", b().getBoolAttr(opName(n) == "triu"))}));
}

static Attribute fillAttr(Type elt, double value);

/// torch.cumsum(x, dim, dtype=None): integer and bool inputs sum in int64,
/// as torch does (RoBERTa's and OPT's position ids from the mask).
LogicalResult TSImporter::hCumsum(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  auto dtype = dtypeArg(n, 2, loc);
  if (failed(x) || failed(d) || failed(dtype))
    return failure();
  auto axis = normIndex(n, *d, tensorType(*x).getRank(), loc);
  if (failed(axis))
    return failure();
  Type elt = *dtype ? *dtype : tensorType(*x).getElementType();
  if (!*dtype && !isFloatType(elt))
    elt = b().getI64Type();
  Value in = cast(*x, elt, loc);
  // Checked: a sum along the batch-dependent dimension is an error.
  return bindResult(n, make<CumsumOp>(loc, {in},
                                      {i64("axis", *axis),
                                       attr("exclusive", b().getBoolAttr(false)),
                                       attr("reverse", b().getBoolAttr(false))}));
}

/// x.T: every dimension reversed.
LogicalResult TSImporter::hNumpyT(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  SmallVector<int64_t> perm;
  for (int64_t i = tensorType(*x).getRank() - 1; i >= 0; --i)
    perm.push_back(i);
  return bindResult(n, transpose(*x, perm, loc));
}

/// F.pad in constant mode: aten::pad(x, pad, mode="constant", value=None)
/// and aten::constant_pad_nd(x, pad, value=0). `pad` lists (begin, end)
/// pairs from the last dimension backwards; a negative pad crops (in
/// constant mode, as torch: RWKV's token shift `F.pad(x, (0, 0, 1, -1))`):
/// a slice, before the positive pads. reflect / replicate / circular pad
/// through Decomposer::padIndexed.
LogicalResult TSImporter::hPad(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto raw = intListArg(n, 1, loc);
  if (failed(x) || failed(raw))
    return failure();
  bool constantNd = opName(n) == "constant_pad_nd";
  std::optional<PadMode> indexed;
  if (!constantNd) {
    auto mode = optArg(n, 2, loc, &TSImporter::strArg, std::string("constant"));
    if (failed(mode))
      return failure();
    indexed = llvm::StringSwitch<std::optional<PadMode>>(*mode)
                  .Case("reflect", PadMode::reflect)
                  .Case("replicate", PadMode::edge)
                  .Case("circular", PadMode::wrap)
                  .Default(std::nullopt);
    if (*mode != "constant" && !indexed)
      return error(n, loc) << "padding mode '" << *mode
                           << "' is not supported (constant, reflect, "
                              "replicate and circular are)";
  }
  auto fill = optArg(n, constantNd ? 2 : 3, loc, &TSImporter::floatArg, 0.0);
  if (failed(fill))
    return failure();
  VTensorType t = tensorType(*x);
  int64_t rank = t.getRank();
  if (raw->size() % 2 || static_cast<int64_t>(raw->size()) > 2 * rank)
    return error(n, loc) << "pad lists " << raw->size()
                         << " values for a tensor of rank " << rank;
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t i = 0; i < raw->size() / 2; ++i) {
    int64_t dim = rank - 1 - static_cast<int64_t>(i);
    int64_t begin = (*raw)[2 * i], end = (*raw)[2 * i + 1];
    if ((begin < 0 || end < 0) && indexed)
      return error(n, loc) << "negative pads (cropping) are only supported "
                              "in constant mode";
    if (begin < 0 || end < 0) {
      SymInt size = tensorType(*x).getDim(dim);
      int64_t cut = std::max<int64_t>(-begin, 0) + std::max<int64_t>(-end, 0);
      if (!size.isStatic() || cut >= size.constant)
        return error(n, loc) << "negative pads crop " << cut << " of dimension "
                             << dim << " of " << dimsStr(dimsOf(*x));
      auto cropped = sliceOf(*x, dim, SymInt(std::max<int64_t>(-begin, 0)),
                             SymInt(size.constant - std::max<int64_t>(-end, 0)),
                             1, loc, n);
      if (failed(cropped))
        return failure();
      *x = *cropped;
    }
    pads[dim] = std::max<int64_t>(begin, 0);
    pads[dim + rank] = std::max<int64_t>(end, 0);
  }
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; }))
    return bindResult(n, *x);
  if (indexed)
    return bindResult(n, Decomposer(b(), loc).padIndexed(*x, pads, *indexed));
  return bindResult(
      n, make<PadOp>(loc, {*x},
                     {attr("pads", b().getDenseI64ArrayAttr(pads)),
                      attr("value", fillAttr(t.getElementType(), *fill))}));
}

//===----------------------------------------------------------------------===//
// Tensor factories
//===----------------------------------------------------------------------===//

static Attribute fillAttr(Type elt, double value) {
  if (auto ft = elt.dyn_cast<FloatType>())
    return FloatAttr::get(ft, value);
  return IntegerAttr::get(elt, static_cast<int64_t>(value));
}

/// The fill value (operand 1 when `hasValue`, else `dflt`) and the dtype
/// operand after it (null for None).
static FailureOr<std::pair<double, Type>> fillArgs(TSImporter &imp,
                                                   TSImporter::Node *n,
                                                   Location loc, bool hasValue,
                                                   double dflt) {
  double value = dflt;
  if (hasValue) {
    auto f = imp.floatArg(n, 1, loc);
    if (failed(f))
      return failure();
    value = *f;
  }
  auto dtype = imp.dtypeArg(n, hasValue ? 2 : 1, loc);
  if (failed(dtype))
    return failure();
  return std::make_pair(value, *dtype);
}

LogicalResult TSImporter::hFull(Node *n, Location loc) {
  std::string op = opName(n);
  // empty / new_empty: zeros (their values are undefined until written,
  // e.g. by normal_ or bernoulli_).
  if (op == "empty" || op == "new_empty")
    op = op == "empty" ? "zeros" : "new_zeros";
  // x.new_zeros(size, dtype, ...) / new_ones / new_full(size, value, ...):
  // as zeros / ones / full after the tensor, whose dtype they default to.
  bool fromTensor = op == "new_zeros" || op == "new_ones" || op == "new_full";
  Type natural = b().getF32Type();
  if (fromTensor) {
    auto x = tensorArg(n, 0, loc);
    if (failed(x))
      return failure();
    natural = tensorType(*x).getElementType();
    op = op == "new_ones" ? "ones" : op == "new_full" ? "full" : "zeros";
  }
  auto dims = symIntListArg(n, fromTensor ? 1 : 0, loc);
  if (failed(dims))
    return failure();
  if (op == "full" && !fromTensor) {
    K kind = lookup(n->input(1)).kind;
    if (kind == K::Int)
      natural = b().getI64Type();
    else if (kind == K::Bool)
      natural = b().getI1Type();
  }
  FailureOr<std::pair<double, Type>> fill = failure();
  if (fromTensor) { // (self, size, [fill_value,] dtype, ...)
    bool full = op == "full";
    auto value = full ? floatArg(n, 2, loc)
                      : FailureOr<double>(op == "ones" ? 1.0 : 0.0);
    auto dtype = dtypeArg(n, full ? 3 : 2, loc);
    if (failed(value) || failed(dtype))
      return failure();
    fill = std::make_pair(*value, *dtype);
  } else {
    fill = fillArgs(*this, n, loc, op == "full", op == "ones" ? 1.0 : 0.0);
  }
  if (failed(fill))
    return failure();
  auto [value, dtype] = *fill;
  Type elt = dtype ? dtype : natural;
  auto type = typeFromDims(*dims, elt, loc);
  if (failed(type))
    return failure();
  Value r = b().create<FullOp>(loc, *type, fillAttr(elt, value));
  return bindResult(n, r);
}

LogicalResult TSImporter::hFullLike(Node *n, Location loc) {
  std::string op = opName(n);
  if (op == "empty_like" && lookup(n->input(0)).kind == K::BatchOrder) {
    // invert_permutation's output buffer: only scatter_ of the order fills
    // it (hScatter); as anything else it is not a tensor.
    bind(n->output(), TSValue::make(K::Other));
    return success();
  }
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  auto fill =
      fillArgs(*this, n, loc, op == "full_like", op == "ones_like" ? 1.0 : 0.0);
  if (failed(fill))
    return failure();
  auto [value, dtype] = *fill;
  VTensorType t = tensorType(*x);
  Type elt = dtype ? dtype : t.getElementType();
  Value r = b().create<FullOp>(loc, t.withElementType(elt),
                               fillAttr(elt, value));
  return bindResult(n, r);
}

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

/// The operand index of the schema argument `name`, if the node has it.
static std::optional<unsigned> argIndex(TSImporter::Node *n, StringRef name) {
  if (const c10::FunctionSchema *s = n->maybeSchema())
    if (auto i = s->argumentIndexWithName(name.str()))
      if (static_cast<size_t>(*i) < n->inputs().size())
        return static_cast<unsigned>(*i);
  return std::nullopt;
}

LogicalResult TSImporter::hRandom(Node *n, Location loc) {
  // Every draw is a varuna.random from the stage's generator (seeded per
  // rank; a recompute replays it), so a run repeats itself under any
  // schedule, but the numbers are not torch's: the draws of a user-passed
  // torch.Generator are not reproduced either.
  std::string op = opName(n);
  bool inplace = StringRef(n->kind().toUnqualString()).ends_with("_");
  auto draw = [&](VTensorType t, RandomDistribution d, double lo,
                  double hi) -> Value {
    return b().create<RandomOp>(loc, t, RandomDistributionAttr::get(ctx, d),
                                b().getF64FloatAttr(lo),
                                b().getF64FloatAttr(hi));
  };
  // The dtype argument's type, or `natural`; random values need a float
  // type except where they are rounded to integers (randint).
  auto resultElem = [&](Type natural, bool anyType) -> FailureOr<Type> {
    Type elt = natural;
    if (auto i = argIndex(n, "dtype")) {
      auto d = dtypeArg(n, *i, loc);
      if (failed(d))
        return failure();
      if (*d)
        elt = *d;
    }
    if (!anyType && !isFloatType(elt))
      return error(n, loc) << "draws random numbers into a tensor of " << elt
                           << " (a floating-point type is needed)",
             failure();
    return elt;
  };
  auto numberArg = [&](StringRef name, double dflt) -> FailureOr<double> {
    auto i = argIndex(n, name);
    if (!i || isNoneArg(n, *i))
      return dflt;
    return floatArg(n, *i, loc);
  };
  auto sizeType = [&](unsigned i, Type elt) -> FailureOr<VTensorType> {
    auto dims = symIntListArg(n, i, loc);
    if (failed(dims))
      return failure();
    return typeFromDims(*dims, elt, loc);
  };
  auto self = [&]() -> FailureOr<VTensorType> {
    auto x = tensorArg(n, 0, loc);
    if (failed(x))
      return failure();
    return tensorType(*x);
  };
  // The type of operand 0 with the dtype argument's element type, or of a
  // new tensor of the size at operand `sizeIdx` (element type `natural`
  // unless the dtype argument names one).
  auto likeType = [&](bool anyType) -> FailureOr<VTensorType> {
    auto t = self();
    if (failed(t))
      return failure();
    auto elt = resultElem(t->getElementType(), anyType);
    if (failed(elt))
      return failure();
    return t->withElementType(*elt);
  };
  auto newType = [&](unsigned sizeIdx, Type natural,
                     bool anyType) -> FailureOr<VTensorType> {
    auto elt = resultElem(natural, anyType);
    if (failed(elt))
      return failure();
    return sizeType(sizeIdx, *elt);
  };

  if (op == "rand" || op == "randn" || op == "rand_like" ||
      op == "randn_like" || (op == "normal" && inplace) || op == "uniform" ||
      op == "exponential") {
    bool like = op.ends_with("_like") || inplace;
    auto t = like ? likeType(false) : newType(0, b().getF32Type(), false);
    if (failed(t))
      return failure();
    bool normal = op == "randn" || op == "randn_like" || op == "normal";
    auto lo = numberArg(normal ? "mean" : "from", 0.0);
    auto hi = numberArg(normal ? "std" : "to", 1.0);
    auto lambd = numberArg("lambd", 1.0);
    if (failed(lo) || failed(hi) || failed(lambd))
      return failure();
    if (normal && *hi < 0)
      return error(n, loc) << "standard deviation " << *hi << " is negative";
    if (op == "exponential" && !(*lambd > 0))
      return error(n, loc) << "exponential rate " << *lambd
                           << " is not positive";
    Value u = draw(
        *t, normal ? RandomDistribution::normal : RandomDistribution::uniform,
        op == "exponential" ? 0.0 : *lo, op == "exponential" ? 1.0 : *hi);
    if (op != "exponential")
      return bindResult(n, u);
    // -log(1 - u) / lambda for u in [0, 1): finite and non-negative.
    auto oneMinus =
        binary("sub", TSValue::ofFloat(1.0), TSValue::ofTensor(u), loc, n);
    if (failed(oneMinus))
      return failure();
    auto logs = unary(UnaryKind::log, *oneMinus, loc);
    if (failed(logs))
      return failure();
    return bindResult(n, binary("mul", TSValue::ofTensor(*logs),
                                TSValue::ofFloat(-1.0 / *lambd), loc, n));
  }

  if (op == "normal") {
    // normal(mean, std) with a tensor for either (or both): mean + std * z
    // over their broadcast shape; normal(mean, std, size) with numbers.
    TSValue mean = *operand(n, 0), std = *operand(n, 1);
    bool tm = mean.kind == TSValue::Kind::Tensor,
         ts = std.kind == TSValue::Kind::Tensor;
    FailureOr<VTensorType> t = failure();
    if (tm || ts) {
      // The broadcast shape (and promoted type) of the two operands.
      auto sum = binary("add", mean, std, loc, n);
      if (failed(sum))
        return failure();
      t = tensorType(*sum);
    } else {
      t = newType(2, b().getF32Type(), false);
    }
    if (failed(t))
      return failure();
    if (!isFloatType(t->getElementType()))
      return operandError(n, 0, loc, "a floating-point mean");
    Value z = draw(*t, RandomDistribution::normal, 0.0, 1.0);
    auto scaled = binary("mul", TSValue::ofTensor(z), std, loc, n);
    if (failed(scaled))
      return failure();
    return bindResult(n,
                      binary("add", mean, TSValue::ofTensor(*scaled), loc, n));
  }

  if (op == "bernoulli") {
    // 1 where a uniform draw falls below p, else 0, in self's type: p is
    // operand 1 (a number or a tensor) or, without it, self's values.
    auto t = self();
    if (failed(t))
      return failure();
    TSValue p =
        isNoneArg(n, 1) || lookup(n->input(1)).kind == TSValue::Kind::Other
            ? *operand(n, 0)
            : *operand(n, 1);
    if (p.kind == TSValue::Kind::Float && (p.f < 0 || p.f > 1))
      return error(n, loc) << "probability " << p.f << " is not in [0, 1]";
    VTensorType ut = t->withElementType(isFloatType(t->getElementType())
                                            ? t->getElementType()
                                            : Type(b().getF32Type()));
    Value u = draw(ut, RandomDistribution::uniform, 0.0, 1.0);
    auto below = binary("lt", TSValue::ofTensor(u), p, loc, n);
    if (failed(below))
      return failure();
    if (tensorType(*below) != ut.withElementType(b().getI1Type()))
      return error(n, loc) << "probabilities of shape " << tensorType(*below)
                           << " do not match the tensor filled " << *t;
    return bindResult(n, cast(*below, t->getElementType(), loc));
  }

  if (op == "randint" || op == "randint_like") {
    // floor of a uniform draw in [low, high), clamped below high (float
    // rounding), as the dtype (int64 by default, self's for randint_like).
    bool like = op == "randint_like";
    auto lowIdx = argIndex(n, "low"), highIdx = argIndex(n, "high");
    if (!highIdx)
      return error(n, loc) << "has no 'high' operand";
    auto low = lowIdx ? intArg(n, *lowIdx, loc) : FailureOr<int64_t>(0);
    auto high = intArg(n, *highIdx, loc);
    if (failed(low) || failed(high))
      return failure();
    if (*high <= *low)
      return error(n, loc) << "random integers in [" << *low << ", " << *high
                           << ") form an empty range";
    if (*high - *low > (int64_t(1) << 24))
      return error(n, loc) << "random integers in [" << *low << ", " << *high
                           << ") span more than 2^24 values (drawn as float32)";
    auto size = argIndex(n, "size");
    if (!like && !size)
      return error(n, loc) << "has no 'size' operand";
    auto t = like ? likeType(true) : newType(*size, b().getI64Type(), true);
    if (failed(t))
      return failure();
    Value u = draw(t->withElementType(b().getF32Type()),
                   RandomDistribution::uniform, double(*low), double(*high));
    auto fl = unary(UnaryKind::floor, u, loc);
    if (failed(fl))
      return failure();
    auto capped = binary("minimum", TSValue::ofTensor(*fl),
                         TSValue::ofFloat(double(*high - 1)), loc, n);
    if (failed(capped))
      return failure();
    return bindResult(n, cast(*capped, t->getElementType(), loc));
  }
  return error(n, loc) << "is not a random op";
}

LogicalResult TSImporter::hArange(Node *n, Location loc) {
  // arange(end, dtype, layout, device, pin) / arange(start, end, dtype, ...)
  // / arange(start, end, step, dtype, ...).
  unsigned nargs = n->inputs().size();
  unsigned numbers = nargs >= 7 ? 3 : nargs == 6 ? 2 : 1;
  SmallVector<TSValue> v;
  for (unsigned i = 0; i < numbers; ++i) {
    TSValue t = lookup(n->input(i));
    if (!t.isScalar())
      return error(n, loc) << "arange bounds must be numbers";
    v.push_back(t);
  }
  TSValue start = numbers > 1 ? v[0] : TSValue::ofInt(0);
  TSValue end = numbers > 1 ? v[1] : v[0];
  TSValue step = numbers > 2 ? v[2] : TSValue::ofInt(1);
  auto dtype = dtypeArg(n, numbers, loc);
  if (failed(dtype))
    return failure();
  bool allInt = start.kind == K::Int && end.kind == K::Int && step.kind == K::Int;
  Type elt = *dtype ? *dtype
                    : allInt ? Type(b().getI64Type()) : Type(b().getF32Type());
  SymInt count;
  double s0, st;
  if (allInt) {
    if (!start.i.isStatic() || !step.i.isStatic() || step.i.constant == 0)
      return error(n, loc) << "arange needs a static start and a nonzero "
                              "static step";
    s0 = start.i.constant;
    st = step.i.constant;
    // ceil((end - start) / step), counted downwards for a negative step.
    int64_t by = std::abs(step.i.constant);
    SymInt span = step.i.constant > 0 ? end.i - start.i : start.i - end.i;
    auto c = (span + SymInt(by - 1)).floorDiv(by);
    if (c && c->isStatic() && c->constant < 0)
      c = SymInt(0);
    if (!c)
      return error(n, loc) << "arange length is not affine in B";
    count = *c;
  } else {
    auto num = [](const TSValue &t) -> std::optional<double> {
      if (t.kind == K::Float)
        return t.f;
      if (t.kind == K::Int && t.i.isStatic())
        return static_cast<double>(t.i.constant);
      return std::nullopt;
    };
    auto a = num(start), e = num(end), s = num(step);
    if (!a || !e || !s || *s == 0)
      return error(n, loc) << "arange with non-static floating-point bounds";
    s0 = *a;
    st = *s;
    count = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((*e - *a) / *s)));
  }
  auto type = typeFromDims({count}, elt, loc);
  if (failed(type))
    return failure();
  Value r = b().create<ArangeOp>(loc, *type, b().getF64FloatAttr(s0),
                                 b().getF64FloatAttr(st));
  return bindResult(n, r);
}

/// linspace(start, end, steps, dtype, ...): a constant of `steps` values
/// from start to end, computed as ATen's vectorized CPU kernel does (fused
/// multiply-adds in the element type; the first half counted from start,
/// the second from end), so that f32 and f64 values are bit-identical
/// (other types are computed in f64). Static numbers only.
LogicalResult TSImporter::hLinspace(Node *n, Location loc) {
  double bounds[2];
  for (unsigned i = 0; i < 2; ++i) {
    TSValue t = lookup(n->input(i));
    if (t.kind == K::Float)
      bounds[i] = t.f;
    else if (t.kind == K::Int && t.i.isStatic())
      bounds[i] = static_cast<double>(t.i.constant);
    else
      return error(n, loc) << "linspace bounds must be static numbers";
  }
  auto steps = intArg(n, 2, loc);
  if (failed(steps))
    return failure();
  if (*steps < 0)
    return error(n, loc) << "linspace with " << *steps << " steps";
  auto dtype = dtypeArg(n, 3, loc);
  if (failed(dtype))
    return failure();
  Type elt = *dtype ? *dtype : Type(b().getF32Type());
  auto values = [&](auto zero) {
    using T = decltype(zero);
    T start = static_cast<T>(bounds[0]), end = static_cast<T>(bounds[1]);
    T step = *steps > 1 ? (end - start) / static_cast<T>(*steps - 1) : T(0);
    SmallVector<double> out;
    for (int64_t i = 0; i < *steps; ++i)
      out.push_back(i < *steps / 2
                        ? std::fma(step, static_cast<T>(i), start)
                        : std::fma(-step, static_cast<T>(*steps - i - 1), end));
    return out;
  };
  SmallVector<double> v = elt.isF32() ? values(0.0f) : values(0.0);
  return bindResult(n, Decomposer(b(), loc).constant({*steps}, elt, v));
}

/// hann_window / hamming_window / blackman_window / bartlett_window
/// (N[, periodic[, alpha, beta]], dtype, ...): a constant, torch's
/// formulas over n / (N - 1) (periodic: a window of N + 1 without its last
/// value; N = 1 is [1]).
LogicalResult TSImporter::hWindow(Node *n, Location loc) {
  std::string op = opName(n);
  auto length = intArg(n, 0, loc);
  if (failed(length))
    return failure();
  // Optional periodic (a bool) and, for hamming, alpha and beta (floats)
  // come before dtype, layout, device, pin_memory.
  unsigned at = 1;
  bool periodic = true;
  double alpha = op == "hann_window" ? 0.5 : 0.54;
  double beta = op == "hann_window" ? 0.5 : 0.46;
  if (n->inputs().size() > at &&
      n->input(at)->type()->kind() == c10::TypeKind::BoolType) {
    auto p = boolArg(n, at++, loc);
    if (failed(p))
      return failure();
    periodic = *p;
    // hamming_window's alpha, then beta (each optional).
    for (double *coefficient : {&alpha, &beta}) {
      if (n->inputs().size() <= at ||
          n->input(at)->type()->kind() != c10::TypeKind::FloatType)
        break;
      auto c = floatArg(n, at++, loc);
      if (failed(c))
        return failure();
      *coefficient = *c;
    }
  }
  auto dtype = dtypeArg(n, at, loc);
  if (failed(dtype))
    return failure();
  if (*length < 0)
    return error(n, loc) << op << " of negative length " << *length;
  Type elt = *dtype ? *dtype : Type(b().getF32Type());
  int64_t count = *length, span = periodic ? count : count - 1;
  SmallVector<double> v;
  for (int64_t i = 0; i < count; ++i) {
    if (count == 1) {
      v.push_back(1.0);
      break;
    }
    double x = static_cast<double>(i) / static_cast<double>(span);
    double c = std::cos(2.0 * M_PI * x);
    if (op == "blackman_window")
      v.push_back(0.42 - 0.5 * c + 0.08 * std::cos(4.0 * M_PI * x));
    else if (op == "bartlett_window")
      v.push_back(1.0 - std::abs(2.0 * x - 1.0));
    else
      v.push_back(alpha - beta * c);
  }
  return bindResult(n, Decomposer(b(), loc).constant({count}, elt, v));
}

/// copy_(self, src) / fill_(self, value) / zero_(self), functional: self's
/// type with the new contents (src cast and broadcast). The write itself is
/// the node loop's: convertNode rebinds self and writeBack updates the
/// tensor self is a slice of.
LogicalResult TSImporter::hCopy(Node *n, Location loc) {
  auto self = tensorArg(n, 0, loc);
  if (failed(self))
    return failure();
  VTensorType t = tensorType(*self);
  TSValue v = opName(n) == "zero" ? TSValue::ofFloat(0.0) : lookup(n->input(1));
  if (v.isScalar()) {
    if (v.kind == K::Int && !v.i.isStatic())
      return error(n, loc) << "the batch-dependent size " << v.i.str()
                           << " is used as a tensor value";
    double x = v.kind == K::Float  ? v.f
               : v.kind == K::Bool ? (v.b ? 1.0 : 0.0)
                                   : static_cast<double>(v.i.constant);
    return bindResult(
        n, b().create<FullOp>(loc, t, fillAttr(t.getElementType(), x))
               .getResult());
  }
  auto src = tensorArg(n, 1, loc);
  if (failed(src))
    return failure();
  Value s = cast(*src, t.getElementType(), loc);
  if (tensorType(s) == t)
    return bindResult(n, s);
  SmallVector<SymInt> from = dimsOf(s), to = dimsOf(*self);
  bool broadcasts = from.size() <= to.size();
  for (size_t i = 0; broadcasts && i < from.size(); ++i) {
    SymInt f = from[from.size() - 1 - i], d = to[to.size() - 1 - i];
    broadcasts = f == d || f == SymInt(1);
  }
  if (!broadcasts)
    return error(n, loc) << "cannot copy a tensor of shape " << dimsStr(from)
                         << " into one of shape " << dimsStr(to);
  return bindResult(n, b().create<ExpandOp>(loc, t, s).getResult());
}
