//===- TorchScriptSelection.cpp - Values selected by a boolean mask -------===//
//
// `x[mask]` (aten::index by a boolean mask over x's leading dimensions) and
// `x.masked_select(mask)` have as many rows as the mask selects -- a number
// the data decides, which no tensor of a stage may have. Users write them
// mostly to compute a loss over some positions:
//
//   F.cross_entropy(logits[mask], labels[mask])
//   ((pred - target)[mask] ** 2).mean()
//   out[mask] = self.proj(h[mask])
//
// so the importer keeps such a value unselected (TSValue::selectMask: the
// whole x and the mask) and lets it flow through the ops that treat every
// selected row alike, computing them on every row; where the rows meet, the
// mask takes effect:
//
//   * elementwise ops (arithmetic, comparisons, activations, casts, where,
//     clamp, masked_fill, ...) of selections by the same mask, numbers and
//     tensors that broadcast along the selection's other dimensions;
//   * ops along its other dimensions (softmax, log_softmax, cumsum,
//     logsumexp, argmax, norms, unsqueeze, sum / mean / amax / amin / prod
//     over them, linear, matmul by a matrix, layer / RMS norm, embedding and
//     one_hot of selected indices, cosine_similarity, glu);
//   * sum and mean over the selected rows: a sum of where(mask, x, 0) (the
//     mean divides it by the selected count, at least 1: torch's mean of an
//     empty selection is nan, here 0); amax / amin of where(mask, x, -+inf);
//   * losses: cross_entropy / nll_loss of class indices ignore the rows the
//     mask leaves out (the target there becomes ignore_index, so weights,
//     label smoothing and the mean are torch's); the elementwise losses and
//     probability targets are computed per element and reduced as above;
//   * writes: x[mask] = v[mask]-like values (index_put, masked_scatter with a
//     selection by the same mask) become where(mask, v, x); ctc_loss reads
//     masked_select(labels, mask) of [N, S] labels as padded targets.
//
// The selected count enters a loss only as the divisor of a sum: a
// cross-entropy's count, or a mean's division marked step_divisor, which
// each micro-batch takes as the whole step's count (LossNormalization.h), so
// means over selections add up exactly across micro-batches, also next to
// other means. Anything else reading a selection (its size, reshapes,
// concatenation, dropout's draws, a reduction of its rows other than
// sum / mean, two different masks) is an error naming the op.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"

#include "varuna/Import/Decompose.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

namespace {

/// The selection a node reads: its mask and how many leading dimensions of
/// the unselected tensor the mask covers.
struct Selection {
  Value mask;
  int64_t dims = 0;
};

/// A selection's rank as torch sees it: [selected] + the trailing dims.
int64_t selectedRank(const TSValue &v) {
  return tensorType(v.tensor).getRank() - v.selectDims + 1;
}

/// Gives operands of one node other values for the duration of a handler
/// call. Each operand gets a fresh placeholder value (a traced graph shares
/// constants between operands and nodes: the `1` of a slice's dim is its
/// step's too), restored and destroyed afterwards.
class Rebind {
public:
  Rebind(TSImporter &imp, torch::jit::Node *n) : imp(imp), n(n) {}
  Rebind(const Rebind &) = delete;
  ~Rebind() {
    for (auto &[i, old, placeholder] : llvm::reverse(saved)) {
      n->replaceInput(i, old);
      imp.forget(placeholder->output());
      placeholder->destroy();
    }
  }
  void set(unsigned i, TSValue t) {
    torch::jit::Node *placeholder =
        n->owningGraph()->create(c10::prim::Constant, 1);
    saved.push_back({i, n->input(i), placeholder});
    n->replaceInput(i, placeholder->output());
    imp.bind(placeholder->output(), std::move(t));
  }

private:
  TSImporter &imp;
  torch::jit::Node *n;
  SmallVector<std::tuple<unsigned, torch::jit::Value *, torch::jit::Node *>>
      saved;
};

/// The unselected tensor behind a selection, as a plain value.
TSValue whole(const TSValue &v) { return TSValue::ofTensor(v.tensor); }

/// The index of `n`'s schema argument `name`, or -1.
int argIndex(TSImporter::Node *n, StringRef name) {
  if (const c10::FunctionSchema *s = n->maybeSchema())
    for (auto [i, a] : llvm::enumerate(s->arguments()))
      if (a.name() == name && i < n->inputs().size())
        return int(i);
  return -1;
}

/// Whether a and b hold the same values: the same value, or results of the
/// same pure op with the same attributes on operands that hold the same
/// values (`m > 0` written twice), up to `depth` ops deep.
bool sameValues(Value a, Value b, int depth = 12) {
  if (a == b)
    return true;
  if (depth == 0 || a.getType() != b.getType())
    return false;
  Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
  if (!x || !y || x->getName() != y->getName() || !isPure(x) ||
      x->getAttrDictionary() != y->getAttrDictionary() ||
      x->getNumOperands() != y->getNumOperands() ||
      llvm::cast<OpResult>(a).getResultNumber() !=
          llvm::cast<OpResult>(b).getResultNumber())
    return false;
  for (unsigned i = 0; i < x->getNumOperands(); ++i)
    if (!sameValues(x->getOperand(i), y->getOperand(i), depth - 1))
      return false;
  return true;
}

} // namespace

bool TSImporter::readsSelection(Node *n) {
  for (JitValue *in : n->inputs()) {
    const TSValue &v = lookup(in);
    if (v.selectMask)
      return true;
    if (v.kind == K::List)
      for (const TSValue &e : v.list)
        if (e.selectMask)
          return true;
  }
  return false;
}

InFlightDiagnostic TSImporter::selectionError(Node *n, Location loc) {
  return error(n, loc)
         << "reads a tensor selected by a boolean mask (x[mask] or "
            "masked_select), whose number of rows the data decides: ";
}

FailureOr<Value> TSImporter::broadcastMask(Value mask, Value like,
                                           Location loc) {
  SmallVector<SymInt> dims = dimsOf(mask);
  dims.append(tensorType(like).getRank() - dims.size(), SymInt(1));
  return reshape(mask, dims, loc);
}

FailureOr<Value> TSImporter::selectedReduce(Node *n, Location loc,
                                            const TSValue &sel,
                                            ArrayRef<int64_t> trailing,
                                            ReduceKind kind, bool keepdim) {
  Value x = sel.tensor;
  Type et = tensorType(x).getElementType();
  bool mean = kind == ReduceKind::mean;
  bool extreme = kind == ReduceKind::max || kind == ReduceKind::min;
  if ((mean || extreme) && !isFloatType(et))
    return error(n, loc) << (mean ? "mean" : "an extreme")
                         << " of an integer tensor's selected rows",
           failure();
  if (!isFloatType(et)) // torch sums integers and bools in int64
    x = cast(x, b().getI64Type(), loc), et = b().getI64Type();
  int64_t k = sel.selectDims;
  auto mask = broadcastMask(sel.selectMask, x, loc);
  if (failed(mask))
    return failure();
  // The rows left out: 0 for sums, -inf / +inf for max / min (an empty
  // selection's extreme is that; torch raises).
  double fill = kind == ReduceKind::max   ? -INFINITY
                : kind == ReduceKind::min ? INFINITY
                                          : 0.0;
  auto kept = make<WhereOp>(loc, {*mask, x, scalarConstant(fill, et, loc)});
  if (failed(kept))
    return failure();
  SmallVector<int64_t> axes;
  for (int64_t a = 0; a < k; ++a)
    axes.push_back(a);
  axes.append(trailing.begin(), trailing.end());
  auto sum = reduce(extreme ? kind : ReduceKind::sum, *kept, axes,
                    /*keepdim=*/false, loc);
  if (failed(sum))
    return failure();
  Value out = *sum;
  if (mean) {
    // The selected count times the trailing elements each row adds, at
    // least 1 (an empty selection gives 0 rather than torch's nan).
    int64_t per = 1;
    SmallVector<SymInt> xd = dimsOf(x);
    for (int64_t a : trailing) {
      if (!xd[a].isStatic())
        return error(n, loc) << "a mean over the batch-dependent dimension "
                             << a << " of a masked selection",
               failure();
      per *= xd[a].constant;
    }
    // One divisor per mask and row size, computed once: means over the
    // same selection divide by the same value (also one Ratio for the loss
    // analysis where the step's count cannot be taken from the inputs).
    MathBuilder m{*this, loc, et};
    Value &divisor = selectedCounts[{sel.selectMask, per, et}];
    if (!divisor) {
      SmallVector<int64_t> maskAxes;
      for (int64_t a = 0; a < k; ++a)
        maskAxes.push_back(a);
      auto count = reduce(ReduceKind::sum, cast(sel.selectMask, et, loc),
                          maskAxes, false, loc);
      auto d = m.bin<MaximumOp>(m.bin<MulOp>(count, m.c(double(per))),
                                m.c(1.0));
      if (failed(d))
        return failure();
      divisor = *d;
    }
    auto q = m.bin<DivOp>(out, divisor);
    if (failed(q))
      return failure();
    // Micro-batches divide by the whole step's count (LossNormalization.h).
    q->getDefiningOp()->setAttr(kStepDivisorAttr, b().getUnitAttr());
    out = *q;
  }
  if (!keepdim)
    return out;
  // torch keeps the selected axis and the reduced ones as 1.
  SmallVector<SymInt> dims{SymInt(1)};
  SmallVector<SymInt> xd = dimsOf(x);
  for (int64_t a = k; a < int64_t(xd.size()); ++a)
    dims.push_back(llvm::is_contained(trailing, a) ? SymInt(1) : xd[a]);
  return reshape(out, dims, loc);
}

FailureOr<Value> TSImporter::compactedRows(Value labels, Value mask,
                                           Location loc) {
  SmallVector<SymInt> dims = dimsOf(labels);
  int64_t width = dims[1].constant;
  Type et = tensorType(labels).getElementType();
  Type i64 = b().getI64Type();
  Value selected = cast(mask, i64, loc);
  Value before = b().create<CumsumOp>(loc, selected, 1, /*exclusive=*/true,
                                      /*reverse=*/false);
  SmallVector<double> columns;
  for (int64_t j = 0; j < width; ++j)
    columns.push_back(double(j));
  Value column = Decomposer(b(), loc).constant({1, 1, width}, i64, columns);
  MathBuilder m{*this, loc, i64};
  SmallVector<SymInt> three{dims[0], dims[1], SymInt(1)};
  auto at = reshape(before, three, loc);
  auto sel = reshape(selected, three, loc);
  auto rows = reshape(cast(labels, i64, loc), three, loc);
  auto hit = m.where(m.cmp(ComparePredicate::eq, at, column), sel, m.c(0));
  auto moved = m.bin<MulOp>(hit, rows);
  auto out = failed(moved) ? moved
                           : reduce(ReduceKind::sum, *moved, {1}, false, loc);
  if (failed(out))
    return failure();
  return cast(*out, et, loc);
}

/// torch.where(mask) / nonzero(as_tuple=True) (aten::nonzero_numpy; hWhere
/// with one operand): a list of MaskIndex values, one per mask dimension.
LogicalResult TSImporter::hMaskIndices(Node *n, Location loc) {
  auto mask = tensorArg(n, 0, loc);
  if (failed(mask))
    return failure();
  Value m = *mask;
  if (!tensorType(m).getElementType().isInteger(1)) // nonzero of numbers
    m = cast(m, b().getI1Type(), loc);
  TSValue out = TSValue::make(K::List);
  for (int64_t a = 0; a < tensorType(m).getRank(); ++a)
    out.list.push_back(
        {.kind = K::MaskIndex, .tensor = m, .i = SymInt(a)});
  bind(n->output(), out);
  return success();
}

/// masked_select(x, mask): x selected by the mask broadcast to x's shape
/// (as torch broadcasts it), over all of x's dimensions.
LogicalResult TSImporter::hMaskedSelect(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc), mask = tensorArg(n, 1, loc);
  if (failed(x) || failed(mask))
    return failure();
  auto both = broadcastValues(n, loc, {*x, *mask});
  if (failed(both))
    return failure();
  return bindSelection(n, loc, (*both)[0], (*both)[1]);
}

LogicalResult TSImporter::bindSelection(Node *n, Location loc, Value x,
                                        Value mask) {
  SmallVector<SymInt> xd = dimsOf(x), md = dimsOf(mask);
  if (!tensorType(mask).getElementType().isInteger(1))
    return error(n, loc) << "expected a boolean mask";
  if (md.size() > xd.size() || !std::equal(md.begin(), md.end(), xd.begin()))
    return error(n, loc) << "a mask of shape " << dimsStr(md)
                         << " selects from a tensor of shape " << dimsStr(xd)
                         << ": it must cover the leading dimensions (a mask "
                            "over later ones, x[:, mask], is not supported)";
  if (md.empty())
    return error(n, loc) << "a 0-d mask (x[True]) is not supported";
  // A mask computed again (logits[m > 0], labels[m > 0]) is the same one.
  auto same = llvm::find_if(selectionMasks,
                            [&](Value m) { return sameValues(m, mask); });
  if (same == selectionMasks.end())
    selectionMasks.push_back(mask);
  else
    mask = *same;
  TSValue v = TSValue::ofTensor(x);
  v.selectMask = mask;
  v.selectDims = int64_t(md.size());
  bind(n->output(), v);
  return success();
}

LogicalResult TSImporter::convertSelected(Node *n, Location loc,
                                          StringRef kind, Handler h) {
  std::string op = opName(n);
  // Lists and tuples hold selections as they are; an op reading one from a
  // list is checked when it does (only broadcast_tensors may).
  static const std::initializer_list<StringRef> containers = {
      "ListConstruct", "TupleConstruct", "ListUnpack",
      "TupleUnpack",   "__getitem__",    "TupleIndex"};
  if (h && llvm::is_contained(containers, StringRef(op)))
    return (this->*h)(n, loc);
  // The one mask every selected operand (or element of broadcast_tensors'
  // list) shares, and the first one's rank.
  Selection s;
  int64_t rank = -1;
  bool ranksDiffer = false;
  SmallVector<TSValue> operands;
  for (JitValue *in : n->inputs()) {
    const TSValue &v = lookup(in);
    if (op == "broadcast_tensors" && v.kind == K::List)
      operands.append(v.list.begin(), v.list.end());
    else
      operands.push_back(v);
  }
  for (const TSValue &v : operands) {
    if (!v.selectMask)
      continue;
    if (s.mask && (v.selectMask != s.mask || v.selectDims != s.dims))
      return selectionError(n, loc)
             << "'" << kind << "' combines selections by two different "
                "masks (only one mask can be followed through)";
    ranksDiffer |= rank >= 0 && selectedRank(v) != rank;
    if (!s.mask)
      rank = selectedRank(v);
    s = {v.selectMask, v.selectDims};
  }
  auto selected = [&](int i) {
    return i >= 0 && i < int(n->inputs().size()) &&
           lookup(n->input(i)).selectMask;
  };
  Rebind rebind(*this, n);
  auto unselectAll = [&] {
    for (unsigned i = 0; i < n->inputs().size(); ++i)
      if (TSValue v = lookup(n->input(i)); v.selectMask)
        rebind.set(i, whole(v));
  };
  // Calls the handler on the whole tensors; its tensor results are
  // selections by the mask over `dims` leading dimensions.
  auto run = [&](Value mask, int64_t dims) -> LogicalResult {
    if (failed((this->*h)(n, loc)))
      return failure();
    for (JitValue *out : n->outputs()) {
      TSValue &v = lookup(out);
      if (v.kind != K::Tensor || !v.tensor)
        return selectionError(n, loc) << "'" << kind
                                      << "' gives no tensor of it";
      v.selectMask = mask;
      v.selectDims = dims;
    }
    return success();
  };
  // A selection axis (of `size` axes) as an axis of the whole tensor; 0
  // (the selected rows) has none.
  auto wholeAxis = [&](int64_t d, int64_t size) -> std::optional<int64_t> {
    int64_t a = normAxis(d, size);
    if (a <= 0)
      return std::nullopt;
    return a + s.dims - 1;
  };

  // Plain tensors must broadcast along the other dimensions: a tensor of
  // the selection's rank with a first size other than 1 would pair its rows
  // with the selected ones.
  auto checkPlain = [&](const TSValue &v) -> LogicalResult {
    if (v.selectMask || v.kind != K::Tensor || v.scalarTensor)
      return success();
    auto t = asTensor(v, Type(), loc, n);
    if (failed(t))
      return failure();
    SmallVector<SymInt> d = dimsOf(*t);
    if (int64_t(d.size()) > rank ||
        (int64_t(d.size()) == rank && d[0] != SymInt(1)))
      return selectionError(n, loc)
             << "'" << kind << "' pairs its rows with a tensor of shape "
             << dimsStr(d) << "; only tensors that broadcast along its "
             << "other dimensions can be combined with it";
    return success();
  };

  using H = Handler;
  static const std::initializer_list<StringRef> mathElementwise = {
      "exp2",     "log2",       "log10",      "square",     "frac",
      "hypot",    "lerp",       "addcmul",    "addcdiv",    "logaddexp",
      "xlogy",    "nan_to_num", "softshrink", "hardshrink", "threshold",
      "logit",    "sinc",       "float_power", "atan2",     "arctan2",
      "logaddexp2", "copysign", "heaviside",  "ldexp"};
  bool elementwise =
      llvm::is_contained(
          std::initializer_list<H>{
              &TSImporter::hArith, &TSImporter::hCompare,
              &TSImporter::hLogical, &TSImporter::hUnary, &TSImporter::hGelu,
              &TSImporter::hActivation, &TSImporter::hPredicate,
              &TSImporter::hClamp, &TSImporter::hWhere,
              &TSImporter::hMaskedFill},
          h) ||
      (h == &TSImporter::hMath &&
       llvm::is_contained(mathElementwise, StringRef(op)));
  bool passThrough = llvm::is_contained(
      std::initializer_list<H>{&TSImporter::hTo, &TSImporter::hDetach,
                               &TSImporter::hPassThrough},
      h);
  if (elementwise || passThrough || op == "broadcast_tensors") {
    if (ranksDiffer)
      return selectionError(n, loc)
             << "'" << kind << "' pairs selections of different ranks";
    if (op == "broadcast_tensors") {
      for (const TSValue &v : operands)
        if (failed(checkPlain(v)))
          return failure();
      TSValue list = lookup(n->input(0));
      for (TSValue &e : list.list)
        if (e.selectMask)
          e = whole(e);
      rebind.set(0, list);
      if (failed((this->*h)(n, loc)))
        return failure();
      for (TSValue &e : lookup(n->output()).list)
        e.selectMask = s.mask, e.selectDims = s.dims;
      return success();
    }
    for (auto [i, in] : llvm::enumerate(n->inputs()))
      if (!(passThrough && i > 0) && failed(checkPlain(lookup(in))))
        return failure();
    unselectAll();
    return run(s.mask, s.dims);
  }

  // Reductions and ops along a dimension: `dim` names the selection's
  // axes. Sum and mean over the selected rows are masked sums; other ops
  // must stay within a row.
  bool alongDim = llvm::is_contained(
      std::initializer_list<H>{
          &TSImporter::hSoftmax, &TSImporter::hCumsum, &TSImporter::hGlu,
          &TSImporter::hUnsqueeze, &TSImporter::hArgExtreme,
          &TSImporter::hLogSumExp, &TSImporter::hCosineSimilarity,
          &TSImporter::hNorm, &TSImporter::hReduce, &TSImporter::hSqueeze,
          &TSImporter::hSelect, &TSImporter::hSlice},
      h);
  if (alongDim && selected(0) && !(op == "aminmax")) {
    const TSValue sel = lookup(n->input(0));
    if (h == &TSImporter::hCosineSimilarity && !selected(1))
      return selectionError(n, loc) << "cosine_similarity of a selection "
                                       "and a plain tensor";
    int dimAt = argIndex(n, "dim");
    // The axes named, as the selection's; None or missing: all of them.
    SmallVector<int64_t> named;
    bool isList = false;
    int64_t size = op == "unsqueeze" ? rank + 1 : rank;
    if (dimAt < 0 || isNoneArg(n, dimAt)) {
      for (int64_t a = 0; a < rank; ++a)
        named.push_back(a);
    } else if (const TSValue &d = lookup(n->input(dimAt)); d.kind == K::List) {
      isList = true;
      auto l = intListArg(n, dimAt, loc);
      if (failed(l))
        return failure();
      named.assign(l->begin(), l->end());
      if (named.empty())
        for (int64_t a = 0; a < rank; ++a)
          named.push_back(a);
    } else {
      auto d1 = intArg(n, dimAt, loc);
      if (failed(d1))
        return failure();
      named.push_back(*d1);
    }
    SmallVector<int64_t> mapped;
    bool overRows = false;
    for (int64_t d : named) {
      if (normAxis(d, size) < 0)
        return error(n, loc) << "dimension " << d << " out of range";
      if (std::optional<int64_t> a = wholeAxis(d, size))
        mapped.push_back(*a);
      else
        overRows = true;
    }
    if (overRows && op == "slice") { // x[m][:, ...]: all rows, unchanged
      auto start = optArg(n, 2, loc, &TSImporter::intArg, 0);
      auto end = optArg(n, 3, loc, &TSImporter::intArg, INT64_MAX);
      auto step = optArg(n, 4, loc, &TSImporter::intArg, 1);
      if (failed(start) || failed(end) || failed(step))
        return failure();
      if (*start == 0 && *end >= (INT64_MAX >> 1) && *step == 1) {
        bind(n->output(), sel);
        return success();
      }
    }
    if (overRows) {
      std::optional<ReduceKind> rk =
          h != &TSImporter::hReduce ? std::nullopt
          : op == "sum"             ? std::optional(ReduceKind::sum)
          : op == "mean"            ? std::optional(ReduceKind::mean)
          : op == "amax"            ? std::optional(ReduceKind::max)
          : op == "amin"            ? std::optional(ReduceKind::min)
                                    : std::nullopt;
      if (!rk)
        return selectionError(n, loc)
               << "'" << kind << "' over its selected rows is not supported "
                  "(sum, mean, amax and amin are)";
      int keepAt = argIndex(n, "keepdim");
      auto keepdim = keepAt < 0 ? FailureOr<bool>(false)
                                : optArg(n, keepAt, loc, &TSImporter::boolArg,
                                         false);
      int dtypeAt = argIndex(n, "dtype");
      auto dtype = dtypeAt < 0 ? FailureOr<Type>(Type())
                               : dtypeArg(n, dtypeAt, loc);
      if (failed(keepdim) || failed(dtype))
        return failure();
      llvm::sort(mapped);
      TSValue v = sel;
      if (*dtype)
        v.tensor = cast(v.tensor, *dtype, loc);
      return bindResult(
          n, selectedReduce(n, loc, v, mapped, *rk, *keepdim));
    }
    unselectAll();
    if (dimAt >= 0) {
      TSValue d;
      if (isList) {
        d = TSValue::make(K::List);
        for (int64_t a : mapped)
          d.list.push_back(TSValue::ofInt(a));
      } else {
        d = TSValue::ofInt(mapped[0]);
      }
      rebind.set(dimAt, d);
    }
    return run(s.mask, s.dims);
  }

  // Dropout that drops nothing (p = 0, eval mode) passes it on; dropping
  // would draw torch's random numbers for the selected elements only,
  // which the whole tensor cannot reproduce.
  if (h == &TSImporter::hDropout && selected(0)) {
    auto p = floatArg(n, 1, loc);
    auto train = boolArg(n, 2, loc);
    if (failed(p) || failed(train))
      return failure();
    if (!*train || *p == 0.0) {
      bind(n->output(), lookup(n->input(0)));
      return success();
    }
    return selectionError(n, loc)
           << "dropout of it draws random numbers for the selected elements "
              "only, which is not supported; apply dropout before selecting";
  }

  // Ops on each row's trailing dimensions.
  if (h == &TSImporter::hLinear && selected(0) && !selected(1) &&
      !selected(2)) {
    unselectAll();
    return run(s.mask, s.dims);
  }
  if (op == "matmul" && selected(0) && !selected(1) && rank >= 2) {
    auto w = tensorArg(n, 1, loc);
    if (failed(w))
      return failure();
    if (tensorType(*w).getRank() <= 2) {
      unselectAll();
      return run(s.mask, s.dims);
    }
  }
  if ((h == &TSImporter::hLayerNorm || h == &TSImporter::hRmsNorm) &&
      selected(0) && !selected(2) && !selected(3)) {
    auto shape = intListArg(n, 1, loc);
    if (failed(shape))
      return failure();
    if (int64_t(shape->size()) < rank) {
      unselectAll();
      return run(s.mask, s.dims);
    }
  }
  if ((h == &TSImporter::hEmbedding && selected(1) && !selected(0)) ||
      (h == &TSImporter::hOneHot && selected(0))) {
    unselectAll();
    return run(s.mask, s.dims);
  }

  // Losses. Class indices: the rows left out get ignore_index. Others: per
  // element, then reduced over the selection.
  bool classLoss =
      h == &TSImporter::hCrossEntropy || h == &TSImporter::hNllLoss;
  if ((classLoss || h == &TSImporter::hElementwiseLoss) && selected(0)) {
    int reductionAt = argIndex(n, "reduction");
    if (reductionAt < 0)
      return selectionError(n, loc) << "'" << kind << "' has no reduction";
    auto reduction = reductionArg(n, reductionAt, loc);
    if (failed(reduction))
      return failure();
    // Class losses take the selections by their rows, [N, trailing...];
    // their per-row losses are unflattened to the mask's dimensions again.
    Value mask = s.mask;
    int64_t dims = s.dims;
    SmallVector<SymInt> md = dimsOf(s.mask);
    auto unflatten = [&]() -> LogicalResult {
      Value v = lookup(n->output()).tensor;
      SmallVector<SymInt> d = dimsOf(v), to = md;
      to.append(d.begin() + 1, d.end());
      auto r = reshape(v, to, loc);
      if (failed(r))
        return failure();
      TSValue out = TSValue::ofTensor(*r);
      out.selectMask = s.mask;
      out.selectDims = s.dims;
      bind(n->output(), out);
      mask = s.mask;
      dims = s.dims;
      return success();
    };
    if (classLoss) {
      if (!selected(1))
        return selectionError(n, loc)
               << "the loss's target must be selected by the same mask";
      std::optional<SymInt> rows = product(md);
      if (!rows)
        return error(n, loc) << "a mask of shape " << dimsStr(md)
                             << " has more than one batch-dependent "
                                "dimension";
      auto flat = [&](Value v) -> FailureOr<Value> {
        SmallVector<SymInt> d = dimsOf(v);
        SmallVector<SymInt> to{*rows};
        to.append(d.begin() + s.dims, d.end());
        return reshape(v, to, loc);
      };
      auto flatMask = reshape(s.mask, {*rows}, loc);
      auto input = flat(lookup(n->input(0)).tensor);
      auto target = flat(lookup(n->input(1)).tensor);
      if (failed(flatMask) || failed(input) || failed(target))
        return failure();
      mask = *flatMask;
      dims = 1;
      rebind.set(0, TSValue::ofTensor(*input));
      Type tt = tensorType(*target).getElementType();
      if (!isFloatType(tt)) {
        int ignoreAt = argIndex(n, "ignore_index");
        auto ignore = ignoreAt < 0 ? FailureOr<int64_t>(-100)
                                   : optArg(n, ignoreAt, loc,
                                            &TSImporter::intArg, -100);
        auto m = broadcastMask(mask, *target, loc);
        if (failed(ignore) || failed(m))
          return failure();
        auto kept = make<WhereOp>(
            loc, {*m, *target, scalarConstant(double(*ignore), tt, loc)});
        if (failed(kept))
          return failure();
        rebind.set(1, TSValue::ofTensor(*kept));
        if (*reduction != LossReduction::none)
          return (this->*h)(n, loc);
        return failed((this->*h)(n, loc)) ? failure() : unflatten();
      }
      rebind.set(1, TSValue::ofTensor(*target));
    } else {
      for (JitValue *in : n->inputs())
        if (failed(checkPlain(lookup(in))))
          return failure();
      unselectAll();
    }
    // Per element (per row for probability targets), then reduced.
    rebind.set(reductionAt, TSValue::ofInt(0));
    if (failed(run(mask, dims)) || (classLoss && failed(unflatten())))
      return failure();
    if (*reduction == LossReduction::none)
      return success();
    TSValue per = lookup(n->output());
    SmallVector<int64_t> trailing;
    for (int64_t a = dims; a < tensorType(per.tensor).getRank(); ++a)
      trailing.push_back(a);
    auto r = selectedReduce(n, loc, per, trailing,
                            *reduction == LossReduction::mean
                                ? ReduceKind::mean
                                : ReduceKind::sum,
                            false);
    if (failed(r))
      return failure();
    bindTensor(n->output(), *r);
    return success();
  }

  // x[mask] = values selected by the same mask, masked_scatter likewise:
  // where(mask, values, x).
  if ((h == &TSImporter::hIndexPut || op == "masked_scatter") &&
      selected(2) && !selected(0) && !selected(1)) {
    auto self = tensorArg(n, 0, loc);
    if (failed(self))
      return failure();
    Value mask;
    if (op == "masked_scatter") {
      auto m = tensorArg(n, 1, loc);
      if (failed(m))
        return failure();
      mask = *m;
    } else if (const TSValue &l = lookup(n->input(1));
               l.kind == K::List && !l.list.empty() &&
               l.list[0].kind == K::Tensor) {
      mask = l.list[0].tensor;
      for (const TSValue &e : ArrayRef(l.list).drop_front())
        if (e.kind != K::None)
          mask = Value();
    }
    // The mask itself, or it with trailing 1s (m[..., None]), expanded.
    while (mask && !sameValues(mask, s.mask)) {
      Operation *def = mask.getDefiningOp();
      Value in = def && llvm::isa<ExpandOp, ReshapeOp>(def) ? def->getOperand(0)
                                                           : Value();
      if (in && llvm::isa<ReshapeOp>(def)) {
        SmallVector<SymInt> from = dimsOf(in), to = dimsOf(mask);
        if (from.size() > to.size() ||
            !std::equal(from.begin(), from.end(), to.begin()) ||
            !llvm::all_of(ArrayRef(to).drop_front(from.size()),
                          [](SymInt d) { return d == SymInt(1); }))
          in = Value();
      }
      mask = in;
    }
    if (!mask)
      return selectionError(n, loc) << "'" << kind << "' writes it through "
                                       "another mask than the one that "
                                       "selected it";
    bool accumulate = false;
    if (h == &TSImporter::hIndexPut) {
      auto a = optArg(n, 3, loc, &TSImporter::boolArg, false);
      if (failed(a))
        return failure();
      accumulate = *a;
    }
    Type et = tensorType(*self).getElementType();
    Value values = cast(lookup(n->input(2)).tensor, et, loc);
    auto m = broadcastMask(s.mask, *self, loc);
    if (failed(m))
      return failure();
    if (!accumulate)
      return bindResult(n, make<WhereOp>(loc, {*m, values, *self}));
    auto added = make<WhereOp>(loc, {*m, values, scalarConstant(0, et, loc)});
    if (failed(added))
      return failure();
    return bindResult(n, make<AddOp>(loc, {*self, *added}));
  }

  // ctc_loss's targets: masked_select(labels [N, S], mask [N, S]), each
  // row's selected labels moved to its front (Hugging Face's CTC loss
  // flattens its targets so).
  if (op == "ctc_loss" && selected(1) && !selected(0)) {
    const TSValue &t = lookup(n->input(1));
    SmallVector<SymInt> d = dimsOf(t.tensor);
    if (t.selectDims == 2 && d.size() == 2 && d[1].isStatic() &&
        !isFloatType(tensorType(t.tensor).getElementType())) {
      auto rows = compactedRows(t.tensor, t.selectMask, loc);
      if (failed(rows))
        return failure();
      rebind.set(1, TSValue::ofTensor(*rows));
      return (this->*h)(n, loc);
    }
  }

  return selectionError(n, loc)
         << "'" << kind << "' cannot read it. Elementwise ops, ops along its "
            "other dimensions, sum and mean, losses and x[mask] = ... can; "
            "or keep the shape fixed -- torch.where(mask, x, 0) or a masked "
            "sum";
}
