//===- TorchScriptStatistics.cpp - Statistics and small array functions --===//
//
// torch functions without a varuna op of their own, each a composition of
// varuna ops (gradients follow from the ops'):
//   kthvalue, quantile         order statistics (Decomposer::topK, as median)
//   count_nonzero, nansum, nanmean
//   cov, corrcoef              over a static number of observations
//   cummax, cummin             the running extreme and where it was
//   trapezoid / trapz          the trapezoidal rule, by dx or by sample points
//   kron, rot90, block_diag    shapes made of their operands' elements
// Every axis these order, integrate or rearrange must be static; a
// batch-dependent one is an error naming the function (a graph cannot hold
// the batch size as data).
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"

#include "varuna/Import/Decompose.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

/// The static size of `axis` of v, or an error naming what needs it.
static FailureOr<int64_t> staticSize(TSImporter &imp, TSImporter::Node *n,
                                     Location loc, Value v, int64_t axis,
                                     StringRef what) {
  SymInt size = dimsOf(v)[axis];
  if (!size.isStatic())
    return imp.error(n, loc) << what << " along the batch-dependent dimension "
                             << axis << " (size " << size.str()
                             << ") is not supported: its size must be static",
           failure();
  return size.constant;
}

/// Dimension `dim` of v normalized, with its static size (an error names
/// `what` when it is out of range or batch-dependent).
static FailureOr<std::pair<int64_t, int64_t>>
staticAxis(TSImporter &imp, TSImporter::Node *n, Location loc, Value v,
           int64_t dim, StringRef what) {
  auto axis = imp.normIndex(n, dim, tensorType(v).getRank(), loc);
  auto size = failed(axis) ? FailureOr<int64_t>()
                           : staticSize(imp, n, loc, v, *axis, what);
  if (failed(size))
    return failure();
  return std::make_pair(*axis, *size);
}

/// v without its (size 1) `axis`.
static FailureOr<Value> dropAxis(TSImporter &imp, Value v, int64_t axis,
                                 Location loc) {
  SmallVector<SymInt> d = dimsOf(v);
  d.erase(d.begin() + axis);
  return imp.reshape(v, d, loc);
}

/// v with a new axis of size 1 at `axis`.
static FailureOr<Value> addAxis(TSImporter &imp, Value v, int64_t axis,
                                Location loc) {
  SmallVector<SymInt> d = dimsOf(v);
  d.insert(d.begin() + axis, SymInt(1));
  return imp.reshape(v, d, loc);
}

/// Elements [start, end) of static `axis`.
static FailureOr<Value> range(TSImporter &imp, Value v, int64_t axis,
                              int64_t start, int64_t end, Location loc) {
  return imp.make<SliceOp>(loc, {v},
                           {imp.i64("axis", axis), imp.i64("start", start),
                            imp.i64("end", end), imp.i64("step", 1)});
}

//===----------------------------------------------------------------------===//
// Order statistics
//===----------------------------------------------------------------------===//

FailureOr<std::pair<Value, Value>>
TSImporter::orderStatistic(Node *n, Location loc, Value v, int64_t axis,
                           int64_t r, bool keepdim) {
  auto sorted = Decomposer(b(), loc).topK(v, axis, r + 1, /*largest=*/false);
  if (failed(sorted))
    return failure();
  auto pick = [&](Value t) -> FailureOr<Value> {
    auto s = range(*this, t, axis, r, r + 1, loc);
    if (failed(s) || keepdim)
      return s;
    return dropAxis(*this, *s, axis, loc);
  };
  auto values = pick(sorted->first), indices = pick(sorted->second);
  if (failed(values) || failed(indices))
    return failure();
  return std::make_pair(*values, *indices);
}

/// kthvalue(x, k, dim=-1, keepdim=False) -> (values, indices): the k-th
/// smallest along dim (k counts from 1).
LogicalResult TSImporter::hKthValue(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto k = intArg(n, 1, loc);
  auto d = optArg(n, 2, loc, &TSImporter::intArg, -1);
  auto keep = optArg(n, 3, loc, &TSImporter::boolArg, false);
  if (failed(x) || failed(k) || failed(d) || failed(keep))
    return failure();
  auto at = staticAxis(*this, n, loc, *x, *d, "kthvalue");
  if (failed(at))
    return failure();
  auto [axis, size] = *at;
  if (*k < 1 || *k > size)
    return error(n, loc) << "kthvalue: k = " << *k << " is out of range for "
                         << size << " elements",
           failure();
  auto kth = orderStatistic(n, loc, *x, axis, *k - 1, *keep);
  if (failed(kth))
    return failure();
  bindTensor(n->outputs()[0], kth->first);
  bindTensor(n->outputs()[1], kth->second);
  return success();
}

/// The q values of operand 1: a number or a constant tensor of at most one
/// dimension (whether it was a tensor decides the result's shape).
static FailureOr<std::pair<SmallVector<double>, bool>>
quantileLevels(TSImporter &imp, TSImporter::Node *n, Location loc) {
  const TSValue &q = imp.lookup(n->input(1));
  SmallVector<double> levels;
  if (q.kind != TSValue::Kind::Tensor) {
    auto v = imp.floatArg(n, 1, loc);
    if (failed(v))
      return failure();
    levels.push_back(*v);
    return std::make_pair(levels, false);
  }
  auto t = imp.tensorArg(n, 1, loc);
  if (failed(t))
    return failure();
  auto c = t->getDefiningOp<ConstantOp>();
  auto dense = c ? llvm::dyn_cast<DenseElementsAttr>(c.getValue())
                 : DenseElementsAttr();
  if (!dense || tensorType(*t).getRank() > 1 ||
      !isFloatType(tensorType(*t).getElementType()))
    return imp.error(n, loc) << "quantile: q must be a number or a constant "
                                "floating-point tensor of at most one "
                                "dimension (computed levels are not supported)",
           failure();
  for (APFloat f : dense.getValues<APFloat>())
    levels.push_back(f.convertToDouble());
  return std::make_pair(levels, tensorType(*t).getRank() == 1);
}

/// quantile(x, q, dim=None, keepdim=False, interpolation='linear'): for each
/// level q, the element at position q (n - 1) of the ascending order along
/// dim (of all elements without dim), between two neighbours as
/// `interpolation` says (linear, lower, higher, nearest, midpoint). A 1-D
/// q puts its levels in a new first dimension.
LogicalResult TSImporter::hQuantile(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  auto levels = quantileLevels(*this, n, loc);
  auto keep = optArg(n, 3, loc, &TSImporter::boolArg, false);
  auto mode = optArg(n, 4, loc, &TSImporter::strArg, std::string("linear"));
  if (failed(x) || failed(levels) || failed(keep) || failed(mode))
    return failure();
  if (*mode != "linear" && *mode != "lower" && *mode != "higher" &&
      *mode != "nearest" && *mode != "midpoint")
    return error(n, loc) << "quantile: unknown interpolation '" << *mode << "'",
           failure();
  int64_t rank = tensorType(*x).getRank();
  bool all = isNoneArg(n, 2);
  auto at = flatOrAxis(*this, n, loc, *x, all, 2);
  if (failed(at))
    return failure();
  auto [v, axis] = *at;
  auto size = staticSize(*this, n, loc, v, axis, "quantile");
  if (failed(size))
    return failure();
  // The positions each level reads, and the sort up to the highest.
  struct Level {
    int64_t lo, hi;
    double frac;
  };
  Type et = tensorType(v).getElementType();
  SmallVector<Level> plan;
  int64_t highest = 0;
  for (double q : levels->first) {
    if (!(q >= 0 && q <= 1))
      return error(n, loc) << "quantile: q = " << q << " is not in [0, 1]",
             failure();
    // q in the element type's precision, as torch takes it: in f32, 0.3
    // is 0.30000001, whose position 4.5000002 among 16 "nearest" rounds to
    // 5 (half to even: exact halves such as 7.5 go to 8).
    double level = et.isF64() ? q : double(float(q));
    double pos = level * double(*size - 1);
    int64_t lo = int64_t(std::floor(pos)), hi = int64_t(std::ceil(pos));
    double frac = pos - double(lo);
    if (*mode == "lower")
      hi = lo, frac = 0;
    else if (*mode == "higher")
      lo = hi, frac = 0;
    else if (*mode == "nearest") // torch rounds half to even
      lo = hi = int64_t(std::nearbyint(pos)), frac = 0;
    else if (*mode == "midpoint")
      frac = lo == hi ? 0 : 0.5;
    plan.push_back({lo, hi, frac});
    highest = std::max(highest, hi);
  }
  auto sorted =
      Decomposer(b(), loc).topK(v, axis, highest + 1, /*largest=*/false);
  if (failed(sorted))
    return failure();
  MathBuilder m{*this, loc, et};
  SmallVector<Value> results;
  for (const Level &l : plan) {
    auto lo = range(*this, sorted->first, axis, l.lo, l.lo + 1, loc);
    FailureOr<Value> r = lo;
    if (l.frac != 0) {
      auto hi = range(*this, sorted->first, axis, l.hi, l.hi + 1, loc);
      r = m.bin<AddOp>(lo, m.bin<MulOp>(m.bin<SubOp>(hi, lo), m.c(l.frac)));
    }
    if (succeeded(r) && all && *keep) { // every dimension kept as 1
      SmallVector<SymInt> ones(rank, SymInt(1));
      r = reshape(*r, ones, loc);
    } else if (succeeded(r) && !*keep) {
      r = dropAxis(*this, *r, axis, loc);
    }
    if (succeeded(r) && levels->second)
      r = addAxis(*this, *r, 0, loc);
    if (failed(r))
      return failure();
    results.push_back(*r);
  }
  if (results.size() == 1)
    return bindResult(n, results[0]);
  return bindResult(n, make<ConcatOp>(loc, results, {i64("axis", 0)}));
}

//===----------------------------------------------------------------------===//
// Counting and NaN-skipping reductions
//===----------------------------------------------------------------------===//

/// count_nonzero(x, dim=None | int | list): the number (i64) of elements
/// that are not zero.
LogicalResult TSImporter::hCountNonzero(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  auto axes = axesArg(n, 1, tensorType(*x).getRank(), loc);
  if (failed(axes))
    return failure();
  MathBuilder m{*this, loc, tensorType(*x).getElementType()};
  auto nonzero = m.cmp(ComparePredicate::ne, *x, m.c(0));
  if (failed(nonzero))
    return failure();
  return bindResult(n, reduce(ReduceKind::sum,
                              cast(*nonzero, b().getI64Type(), loc), *axes,
                              false, loc));
}

/// nansum / nanmean(x, dim=None, keepdim=False, dtype=None): the sum or
/// mean of the elements that are not NaN (NaNs count as zeros and are not
/// counted; their gradient is zero, as torch's).
LogicalResult TSImporter::hNanReduce(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  auto axes = axesArg(n, 1, tensorType(*x).getRank(), loc);
  auto keep = optArg(n, 2, loc, &TSImporter::boolArg, false);
  auto dt = n->inputs().size() > 3 ? dtypeArg(n, 3, loc) : FailureOr<Type>(Type());
  if (failed(axes) || failed(keep) || failed(dt))
    return failure();
  Value v = *dt ? cast(*x, *dt, loc) : *x;
  Type et = tensorType(v).getElementType();
  if (!isFloatType(et)) // no NaNs: the plain reduction
    return opName(n) == "nanmean"
               ? (error(n, loc) << "nanmean of an integer tensor", failure())
               : bindResult(n, reduce(ReduceKind::sum, v, *axes, *keep, loc));
  MathBuilder m{*this, loc, et};
  auto nan = m.cmp(ComparePredicate::ne, v, v); // only NaN differs from itself
  auto kept = m.where(nan, m.c(0), v);
  auto sum = failed(kept) ? kept : reduce(ReduceKind::sum, *kept, *axes, *keep, loc);
  if (failed(sum) || opName(n) == "nansum")
    return bindResult(n, sum);
  auto counted = m.where(nan, m.c(0), m.c(1));
  auto count = failed(counted)
                   ? counted
                   : reduce(ReduceKind::sum, *counted, *axes, *keep, loc);
  return bindResult(n, m.bin<DivOp>(sum, count));
}

//===----------------------------------------------------------------------===//
// Covariance
//===----------------------------------------------------------------------===//

/// cov(x, correction=1, fweights=None, aweights=None) and corrcoef(x): x is
/// [variables, observations] (or [observations]); the covariance sums
/// (x - mean)(x - mean)^T over a static number N of observations and
/// divides by N - correction; corrcoef divides by the outer product of the
/// standard deviations. Weights are refused.
LogicalResult TSImporter::hCovariance(Node *n, Location loc) {
  auto x = floatInput(*this, n, loc);
  if (failed(x))
    return failure();
  bool corr = opName(n) == "corrcoef";
  int64_t correction = 1;
  if (!corr) {
    auto c = optArg(n, 1, loc, &TSImporter::intArg, 1);
    if (failed(c))
      return failure();
    correction = *c;
    if (!isNoneArg(n, 2) || !isNoneArg(n, 3))
      return error(n, loc) << "cov with fweights or aweights is not supported",
             failure();
  }
  int64_t rank = tensorType(*x).getRank();
  if (rank > 2)
    return error(n, loc) << opName(n) << " of a tensor of rank " << rank
                         << " (it takes one or two dimensions)",
           failure();
  Value v = *x;
  if (rank < 2) { // a single variable
    auto one = reshape(v, {SymInt(1), rank == 0 ? SymInt(1) : dimsOf(v)[0]}, loc);
    if (failed(one))
      return failure();
    v = *one;
  }
  auto observations = staticSize(*this, n, loc, v, 1, opName(n));
  if (failed(observations))
    return failure();
  MathBuilder m{*this, loc, tensorType(v).getElementType()};
  auto mean = reduce(ReduceKind::mean, v, {1}, true, loc);
  auto centered = m.bin<SubOp>(v, mean);
  auto t = failed(centered) ? centered : transpose(*centered, {1, 0}, loc);
  auto c = failed(t) ? t : make<MatmulOp>(loc, {*centered, *t});
  if (failed(c))
    return failure();
  FailureOr<Value> r = c;
  if (corr) {
    // c_ij / sqrt(c_ii c_jj): the divisor cancels.
    int64_t d = dimsOf(*c)[0].constant;
    SmallVector<double> mask(d * d, 0.0);
    for (int64_t i = 0; i < d; ++i)
      mask[i * d + i] = 1.0;
    Value id = Decomposer(b(), loc).constant({d, d}, m.et, mask);
    auto masked = m.bin<MulOp>(*c, id);
    auto diag = failed(masked) ? masked
                               : reduce(ReduceKind::sum, *masked, {1}, false, loc);
    auto sd = m.un(UnaryKind::sqrt, diag);
    auto col = failed(sd) ? sd : reshape(*sd, {SymInt(d), SymInt(1)}, loc);
    auto row = failed(sd) ? sd : reshape(*sd, {SymInt(1), SymInt(d)}, loc);
    r = m.bin<DivOp>(*c, m.bin<MulOp>(col, row));
  } else {
    r = m.bin<DivOp>(*c, m.c(double(*observations - correction)));
  }
  if (succeeded(r) && rank < 2)
    r = reshape(*r, SmallVector<SymInt>{}, loc);
  return bindResult(n, r);
}

//===----------------------------------------------------------------------===//
// Running extremes
//===----------------------------------------------------------------------===//

/// cummax / cummin(x, dim) -> (values, indices): for each position i along
/// dim the extreme of elements 0..i and the index of its last occurrence
/// (torch's tie rule). Quadratic: the [.., n, n, ..] table of x_j masked to
/// j <= i, its extreme's position found from the end, and the values
/// gathered there (so the gradient reaches that one element, as torch's).
LogicalResult TSImporter::hCumExtreme(Node *n, Location loc) {
  bool max = opName(n) == "cummax";
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  if (failed(x) || failed(d))
    return failure();
  Type et = tensorType(*x).getElementType();
  if (!isFloatType(et))
    return error(n, loc) << opName(n) << " of an integer tensor is not "
                                         "supported (cast it to float)",
           failure();
  int64_t rank = tensorType(*x).getRank();
  auto at = staticAxis(*this, n, loc, *x, *d, opName(n));
  if (failed(at))
    return failure();
  auto [axis, len] = *at;
  // mask[i, j] = j <= i, as [n, n, 1, ...] for the dimensions after dim.
  SmallVector<double> lower(len * len, 0.0);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j <= i; ++j)
      lower[i * len + j] = 1.0;
  SmallVector<int64_t> maskShape{len, len};
  maskShape.append(rank - axis - 1, 1);
  Decomposer dec(b(), loc);
  Value mask = dec.constant(maskShape, b().getI1Type(), lower);
  MathBuilder m{*this, loc, et};
  double fill = max ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  auto table = addAxis(*this, *x, axis, loc); // j at axis + 1
  auto masked = m.where(mask, table, m.c(fill));
  SmallVector<int64_t> reversed;
  for (int64_t j = len - 1; j >= 0; --j)
    reversed.push_back(j);
  auto flipped = failed(masked) ? masked
                                : dec.gatherIndices(*masked, axis + 1, reversed);
  auto fromEnd = failed(flipped)
                     ? flipped
                     : dec.argExtreme(*flipped, axis + 1, max, false);
  if (failed(fromEnd))
    return failure();
  MathBuilder mi{*this, loc, tensorType(*fromEnd).getElementType()};
  auto indices = mi.bin<SubOp>(mi.c(double(len - 1)), *fromEnd);
  auto values = failed(indices)
                    ? indices
                    : make<GatherElementsOp>(loc, {*x, *indices},
                                             {i64("axis", axis)});
  if (failed(values))
    return failure();
  bindTensor(n->outputs()[0], *values);
  bindTensor(n->outputs()[1], *indices);
  return success();
}

//===----------------------------------------------------------------------===//
// Integration
//===----------------------------------------------------------------------===//

/// trapezoid / trapz(y, x, dim=-1) and (y, dx=1, dim=-1): the trapezoidal
/// rule along dim, sum((y[1:] + y[:-1]) / 2 * spacing) with a constant
/// spacing dx or the differences of the sample points x (x of y's shape,
/// or 1-D along dim).
LogicalResult TSImporter::hTrapezoid(Node *n, Location loc) {
  auto y = floatInput(*this, n, loc);
  if (failed(y))
    return failure();
  bool points = lookup(n->input(1)).kind == TSValue::Kind::Tensor;
  auto d = optArg(n, 2, loc, &TSImporter::intArg, -1);
  if (failed(d))
    return failure();
  int64_t rank = tensorType(*y).getRank();
  auto at = staticAxis(*this, n, loc, *y, *d, opName(n));
  if (failed(at))
    return failure();
  auto [axis, size] = *at;
  Type et = tensorType(*y).getElementType();
  MathBuilder m{*this, loc, et};
  if (size < 2) // no interval: zero (of the reduced shape)
    return bindResult(n, m.bin<MulOp>(reduce(ReduceKind::sum, *y, {axis},
                                             false, loc),
                                      m.c(0)));
  auto ends = m.bin<AddOp>(range(*this, *y, axis, 1, size, loc),
                           range(*this, *y, axis, 0, size - 1, loc));
  FailureOr<Value> terms = failure();
  if (points) {
    auto xs = tensorArg(n, 1, loc);
    if (failed(xs))
      return failure();
    Value pts = cast(*xs, et, loc);
    if (tensorType(pts).getRank() == 1 && rank > 1) { // along dim
      SmallVector<SymInt> shape(rank, SymInt(1));
      shape[axis] = dimsOf(pts)[0];
      auto viewed = reshape(pts, shape, loc);
      if (failed(viewed))
        return failure();
      pts = *viewed;
    }
    int64_t along = tensorType(pts).getRank() == rank ? axis : 0;
    auto spacing = m.bin<SubOp>(range(*this, pts, along, 1, size, loc),
                                range(*this, pts, along, 0, size - 1, loc));
    terms = m.bin<MulOp>(m.bin<MulOp>(ends, spacing), m.c(0.5));
  } else {
    auto dx = optArg(n, 1, loc, &TSImporter::floatArg, 1.0);
    if (failed(dx))
      return failure();
    terms = m.bin<MulOp>(ends, m.c(0.5 * *dx));
  }
  if (failed(terms))
    return failure();
  return bindResult(n, reduce(ReduceKind::sum, *terms, {axis}, false, loc));
}

//===----------------------------------------------------------------------===//
// Shapes made of the operands' elements
//===----------------------------------------------------------------------===//

/// kron(a, b): the Kronecker product, of shape a_i b_i (the operand of
/// lower rank gets leading dimensions of 1): a as [a0, 1, a1, 1, ...] times
/// b as [1, b0, 1, b1, ...], merged pairwise. Static shapes only.
LogicalResult TSImporter::hKron(Node *n, Location loc) {
  auto a = tensorArg(n, 0, loc), c = tensorArg(n, 1, loc);
  if (failed(a) || failed(c))
    return failure();
  Type et = promoteTypes(tensorType(*a).getElementType(),
                         tensorType(*c).getElementType());
  Value x = cast(*a, et, loc), y = cast(*c, et, loc);
  int64_t rank = std::max(tensorType(x).getRank(), tensorType(y).getRank());
  auto padded = [&](Value v) {
    SmallVector<int64_t> d(rank - tensorType(v).getRank(), 1);
    for (SymInt s : dimsOf(v))
      d.push_back(s.isStatic() ? s.constant : -1);
    return d;
  };
  SmallVector<int64_t> da = padded(x), db = padded(y);
  if (llvm::is_contained(da, -1) || llvm::is_contained(db, -1))
    return error(n, loc) << "kron of a tensor with a batch-dependent "
                            "dimension is not supported",
           failure();
  SmallVector<SymInt> sa, sb, out;
  for (int64_t i = 0; i < rank; ++i) {
    sa.append({SymInt(da[i]), SymInt(1)});
    sb.append({SymInt(1), SymInt(db[i])});
    out.push_back(SymInt(da[i] * db[i]));
  }
  auto ra = reshape(x, sa, loc), rb = reshape(y, sb, loc);
  auto prod = failed(ra) || failed(rb) ? FailureOr<Value>()
                                       : make<MulOp>(loc, {*ra, *rb});
  return bindResult(n, failed(prod) ? prod : reshape(*prod, out, loc));
}

/// rot90(x, k=1, dims=[0, 1]): k quarter turns from dims[0] toward
/// dims[1] (flips and a transpose, as torch).
LogicalResult TSImporter::hRot90(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto k = optArg(n, 1, loc, &TSImporter::intArg, 1);
  if (failed(x) || failed(k))
    return failure();
  SmallVector<int64_t> dims{0, 1};
  if (!isNoneArg(n, 2)) {
    auto l = intListArg(n, 2, loc);
    if (failed(l))
      return failure();
    dims.assign(l->begin(), l->end());
  }
  int64_t rank = tensorType(*x).getRank();
  if (dims.size() != 2)
    return error(n, loc) << "rot90 takes two dimensions, got " << dims.size(),
           failure();
  auto d0 = normIndex(n, dims[0], rank, loc), d1 = normIndex(n, dims[1], rank, loc);
  if (failed(d0) || failed(d1))
    return failure();
  if (*d0 == *d1)
    return error(n, loc) << "rot90 needs two different dimensions", failure();
  Decomposer dec(b(), loc);
  auto flip = [&](FailureOr<Value> v, int64_t axis) -> FailureOr<Value> {
    if (failed(v))
      return v;
    auto size = staticSize(*this, n, loc, *v, axis, "rot90");
    if (failed(size))
      return failure();
    SmallVector<int64_t> reversed;
    for (int64_t i = *size - 1; i >= 0; --i)
      reversed.push_back(i);
    return dec.gatherIndices(*v, axis, reversed);
  };
  auto swap = [&](FailureOr<Value> v) {
    return failed(v) ? v : swapDims(*v, *d0, *d1, loc);
  };
  switch (((*k % 4) + 4) % 4) {
  case 1:
    return bindResult(n, swap(flip(*x, *d1)));
  case 2:
    return bindResult(n, flip(flip(*x, *d0), *d1));
  case 3:
    return bindResult(n, swap(flip(*x, *d0)));
  default:
    return bindResult(n, *x);
  }
}

/// block_diag(tensors): the operands (0-D as [1, 1], 1-D as [1, n], 2-D)
/// along the diagonal of a zero matrix: each padded to the total width,
/// then stacked by rows. Static shapes only.
LogicalResult TSImporter::hBlockDiag(Node *n, Location loc) {
  auto list = tensorListArg(n, 0, loc);
  if (failed(list))
    return failure();
  if (list->empty())
    return error(n, loc) << "block_diag of no tensors", failure();
  Type et = tensorType((*list)[0]).getElementType();
  for (Value v : *list)
    et = promoteTypes(et, tensorType(v).getElementType());
  SmallVector<Value> blocks;
  int64_t width = 0;
  for (Value v : *list) {
    if (tensorType(v).getRank() > 2)
      return error(n, loc) << "block_diag of a tensor of rank "
                           << tensorType(v).getRank() << " (at most 2)",
             failure();
    for (SymInt s : dimsOf(v))
      if (!s.isStatic())
        return error(n, loc) << "block_diag of a tensor with a "
                                "batch-dependent dimension is not supported",
               failure();
    SmallVector<SymInt> d = dimsOf(v);
    while (d.size() < 2)
      d.insert(d.begin(), SymInt(1));
    auto b2 = reshape(cast(v, et, loc), d, loc);
    if (failed(b2))
      return failure();
    blocks.push_back(*b2);
    width += d[1].constant;
  }
  SmallVector<Value> rows;
  int64_t left = 0;
  for (Value blk : blocks) {
    int64_t w = dimsOf(blk)[1].constant;
    auto row = make<PadOp>(
        loc, {blk},
        {attr("pads", b().getDenseI64ArrayAttr({0, left, 0, width - left - w})),
         attr("value", b().getZeroAttr(et))});
    if (failed(row))
      return failure();
    rows.push_back(*row);
    left += w;
  }
  if (rows.size() == 1)
    return bindResult(n, rows[0]);
  return bindResult(n, make<ConcatOp>(loc, rows, {i64("axis", 0)}));
}
