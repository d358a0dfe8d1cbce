//===- TorchScriptNNOps.cpp - Linear algebra, normalization, losses -------===//
//
// aten::linear becomes transpose + matmul + add (so a weight shared with an
// embedding is one parameter read by a gather and a matmul);
// scaled_dot_product_attention is decomposed into matmul, scale, mask,
// softmax (and dropout), matmul.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"
#include "varuna/Import/Decompose.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

namespace {
/// A window attribute list of `n` entries: one value repeats, empty gives
/// `dflt` (or `fallback` when given).
SmallVector<int64_t> window(ArrayRef<int64_t> l, int64_t n, int64_t dflt,
                            ArrayRef<int64_t> fallback = {}) {
  if (l.empty())
    return fallback.empty() ? SmallVector<int64_t>(n, dflt)
                            : SmallVector<int64_t>(fallback);
  if (l.size() == 1)
    return SmallVector<int64_t>(n, l[0]);
  return SmallVector<int64_t>(l);
}

SmallVector<int64_t> twice(ArrayRef<int64_t> pads) {
  SmallVector<int64_t> out(pads);
  out.append(pads.begin(), pads.end());
  return out;
}

FailureOr<Value> makePool(TSImporter &imp, Location loc, Value x, PoolKind kind,
                          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                          bool ceilMode, bool countIncludePad) {
  OpBuilder &b = imp.b();
  return imp.make<PoolOp>(
      loc, {x},
      {imp.attr("kind", PoolKindAttr::get(imp.ctx, kind)),
       imp.attr("kernel", b.getDenseI64ArrayAttr(kernel)),
       imp.attr("strides", b.getDenseI64ArrayAttr(strides)),
       imp.attr("pads", b.getDenseI64ArrayAttr(pads)),
       imp.attr("dilations", b.getDenseI64ArrayAttr(dilations)),
       imp.attr("ceil_mode", b.getBoolAttr(ceilMode)),
       imp.attr("count_include_pad", b.getBoolAttr(countIncludePad))});
}

} // namespace

LogicalResult TSImporter::hEmbedding(Node *n, Location loc) {
  if (opName(n) == "embedding_renorm")
    return error(n, loc)
           << "nn.Embedding(max_norm=...) rescales the rows it looks up in "
              "the weight itself, in place, inside forward: not supported "
              "(micro-batches and replicas would rescale different rows); "
              "drop max_norm, or renormalize the weight after the "
              "optimizer step";
  auto w = tensorArg(n, 0, loc), ids = tensorArg(n, 1, loc);
  if (failed(w) || failed(ids))
    return failure();
  auto pad = optArg(n, 2, loc, &TSImporter::intArg, -1);
  if (failed(pad))
    return failure();
  auto scale = optArg(n, 3, loc, &TSImporter::boolArg, false);
  if (failed(scale))
    return failure();
  if (*scale)
    return error(n, loc) << "embedding scale_grad_by_freq is not supported";
  if (*pad >= 0) // the rows at padding_idx get no gradient from here
    return bindResult(n, make<GatherOp>(loc, {*w, *ids},
                                        {i64("axis", 0), i64("padding_idx", *pad)}));
  return bindResult(n, make<GatherOp>(loc, {*w, *ids}, {i64("axis", 0)}));
}

/// embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode,
/// sparse, per_sample_weights, include_last_offset, padding_idx) as
/// nn.EmbeddingBag traces it for a 2-D input [N, L]: the indices flattened
/// and offsets = arange(0, numel, L). Bags of one size are imported
/// (Decomposer::embeddingBag on the indices as [N, L]); offsets from data
/// (bags of different sizes in a 1-D input) are refused: a micro-batch
/// cannot split a flat list of bags.
LogicalResult TSImporter::hEmbeddingBag(Node *n, Location loc) {
  auto w = tensorArg(n, 0, loc), ids = tensorArg(n, 1, loc);
  auto scale = boolArg(n, 3, loc);
  auto mode = intArg(n, 4, loc);
  auto last = optArg(n, 7, loc, &TSImporter::boolArg, false);
  auto pad = optArg(n, 8, loc, &TSImporter::intArg, -1);
  if (failed(w) || failed(ids) || failed(scale) || failed(mode) ||
      failed(last) || failed(pad))
    return failure();
  if (*scale)
    return error(n, loc) << "embedding_bag scale_grad_by_freq is not "
                            "supported";
  if (*mode < 0 || *mode > 2)
    return error(n, loc) << "embedding_bag: unknown mode " << *mode;
  for (unsigned i = 1; i < n->outputs().size(); ++i)
    if (n->output(i)->hasUses())
      return error(n, loc) << "embedding_bag: only the bags' values (output "
                              "0) can be used, output "
                           << i << " is read";
  // offsets = arange(0, numel(indices), L)
  Node *offsets = n->input(2)->node();
  SymInt numel = tensorType(*ids).getRank() == 1 ? tensorType(*ids).getDim(0)
                                                 : SymInt(-1);
  bool fixed = offsets->kind().toQualString() == std::string("aten::arange") &&
               offsets->inputs().size() == 7 && !*last;
  auto known = [&](unsigned i) -> std::optional<SymInt> {
    TSValue &v = lookup(offsets->input(i));
    if (v.kind == TSValue::Kind::Int)
      return v.i;
    return std::nullopt;
  };
  std::optional<SymInt> start, end, step;
  if (fixed) {
    start = known(0), end = known(1), step = known(2);
    fixed = start && end && step && *start == SymInt(0) && *end == numel &&
            step->isStatic() && step->constant > 0 &&
            numel.perBatch % step->constant == 0 &&
            numel.constant % step->constant == 0;
  }
  if (!fixed)
    return error(n, loc) << "embedding_bag is supported for bags of one size "
                            "(nn.EmbeddingBag on a 2-D input [N, L]); "
                            "offsets from the data (bags of different sizes "
                            "in a 1-D input) or include_last_offset are not";
  int64_t length = step->constant;
  auto bags = reshape(*ids, {SymInt(numel.perBatch / length,
                                    numel.constant / length),
                             SymInt(length)},
                      loc);
  if (failed(bags))
    return failure();
  Value perSample;
  if (!isNoneArg(n, 6)) {
    if (*mode != 0)
      return error(n, loc) << "embedding_bag: per_sample_weights are only "
                              "defined for mode 'sum' (as in torch)";
    auto psw = tensorArg(n, 6, loc);
    if (failed(psw))
      return failure();
    auto shaped = reshape(*psw, tensorType(*bags).getDims(), loc);
    if (failed(shaped))
      return failure();
    perSample = *shaped;
  }
  std::optional<int64_t> padding;
  if (*pad >= 0)
    padding = *pad;
  using Mode = Decomposer::BagMode;
  Mode m = *mode == 0 ? Mode::sum : *mode == 1 ? Mode::mean : Mode::max;
  auto r = Decomposer(b(), loc).embeddingBag(*w, *bags, m, perSample, padding);
  if (failed(r))
    return failure();
  bindTensor(n->outputs()[0], *r);
  return success();
}

LogicalResult TSImporter::hMatmul(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc), y = tensorArg(n, 1, loc);
  if (failed(x) || failed(y))
    return failure();
  return bindResult(n, make<MatmulOp>(loc, {*x, *y}));
}

LogicalResult TSImporter::hLinear(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc), w = tensorArg(n, 1, loc);
  if (failed(x) || failed(w))
    return failure();
  Value wt = *w;
  if (tensorType(wt).getRank() == 2) {
    auto t = transpose(wt, {1, 0}, loc);
    if (failed(t))
      return failure();
    wt = *t;
  }
  auto r = make<MatmulOp>(loc, {*x, wt});
  if (failed(r))
    return failure();
  auto bias = optArg(n, 2, loc, &TSImporter::tensorArg, Value());
  if (failed(bias))
    return failure();
  if (*bias)
    r = make<AddOp>(loc, {*r, *bias});
  return bindResult(n, r);
}

LogicalResult TSImporter::hAddmm(Node *n, Location loc) {
  auto self = tensorArg(n, 0, loc), m1 = tensorArg(n, 1, loc),
       m2 = tensorArg(n, 2, loc);
  if (failed(self) || failed(m1) || failed(m2))
    return failure();
  auto beta = optArg(n, 3, loc, &TSImporter::floatArg, 1.0);
  if (failed(beta))
    return failure();
  auto alpha = optArg(n, 4, loc, &TSImporter::floatArg, 1.0);
  if (failed(alpha))
    return failure();
  auto prod = make<MatmulOp>(loc, {*m1, *m2});
  if (failed(prod))
    return failure();
  TSValue p = TSValue::ofTensor(*prod), s = TSValue::ofTensor(*self);
  if (*alpha != 1) {
    auto m = binary("mul", p, TSValue::ofFloat(*alpha), loc, n);
    if (failed(m))
      return failure();
    p = TSValue::ofTensor(*m);
  }
  if (*beta != 1) {
    auto m = binary("mul", s, TSValue::ofFloat(*beta), loc, n);
    if (failed(m))
      return failure();
    s = TSValue::ofTensor(*m);
  }
  return bindResult(n, binary("add", p, s, loc, n));
}

LogicalResult TSImporter::hSoftmax(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  if (failed(x) || failed(d))
    return failure();
  std::string op = opName(n);
  Value v = *x;
  bool safe = op == "_safe_softmax";
  if ((op[0] != '_' || safe) && n->inputs().size() > 2) {
    auto dt = dtypeArg(n, 2, loc);
    if (failed(dt))
      return failure();
    if (*dt)
      v = cast(v, *dt, loc);
  }
  auto axis = normIndex(n, *d, tensorType(v).getRank(), loc);
  if (failed(axis))
    return failure();
  SmallVector<NamedAttribute> attrs{i64("axis", *axis)};
  if (op.find("log_softmax") != std::string::npos)
    attrs.push_back(attr("log", b().getUnitAttr()));
  if (safe)
    attrs.push_back(attr("safe", b().getUnitAttr()));
  return bindResult(n, make<SoftmaxOp>(loc, {v}, attrs));
}

LogicalResult TSImporter::hLayerNorm(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto shape = intListArg(n, 1, loc);
  auto eps = floatArg(n, 4, loc);
  if (failed(x) || failed(shape) || failed(eps))
    return failure();
  SmallVector<Value> operands{*x};
  int32_t hasW = 0, hasB = 0;
  for (unsigned i : {2u, 3u}) {
    if (isNoneArg(n, i))
      continue;
    auto t = tensorArg(n, i, loc);
    if (failed(t))
      return failure();
    operands.push_back(*t);
    (i == 2 ? hasW : hasB) = 1;
  }
  int64_t axis = tensorType(*x).getRank() - shape->size();
  return bindResult(
      n, make<LayerNormOp>(loc, operands,
                           {i64("axis", axis),
                            attr("epsilon", b().getF64FloatAttr(*eps)),
                            attr("operand_segment_sizes",
                                 b().getDenseI32ArrayAttr({1, hasW, hasB}))}));
}

LogicalResult TSImporter::hBatchNorm(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto training = boolArg(n, 5, loc);
  auto momentum = floatArg(n, 6, loc), eps = floatArg(n, 7, loc);
  if (failed(x) || failed(training) || failed(eps))
    return failure();
  VTensorType t = tensorType(*x);
  if (t.getRank() < 2 || !t.getDim(1).isStatic())
    return error(n, loc) << "input " << t << " needs a static channel dim 1";
  int64_t c = t.getDim(1).constant;
  auto vec = [&](unsigned i, double fill) -> FailureOr<Value> {
    if (!isNoneArg(n, i))
      return tensorArg(n, i, loc);
    auto type = VTensorType::get(ctx, {c}, -1, t.getElementType());
    return b()
        .create<FullOp>(loc, type, FloatAttr::get(t.getElementType(), fill))
        .getResult();
  };
  auto w = vec(1, 1.0), bias = vec(2, 0.0);
  if (failed(w) || failed(bias))
    return failure();
  bool haveStats = !isNoneArg(n, 3) && !isNoneArg(n, 4);
  if (*training) {
    SmallVector<Value> operands{*x, *w, *bias};
    if (haveStats) {
      auto rm = tensorArg(n, 3, loc), rv = tensorArg(n, 4, loc);
      if (failed(rm) || failed(rv))
        return failure();
      operands.push_back(*rm);
      operands.push_back(*rv);
    }
    double mom = succeeded(momentum) ? *momentum : 0.1;
    int32_t s = haveStats ? 1 : 0;
    return bindResult(
        n,
        make<BatchNormOp>(loc, operands,
                          {attr("epsilon", b().getF64FloatAttr(*eps)),
                           attr("momentum", b().getF64FloatAttr(mom)),
                           attr("operand_segment_sizes",
                                b().getDenseI32ArrayAttr({1, 1, 1, s, s}))}));
  }
  // Eval mode: (x - mean) * rsqrt(var + eps) * w + b with [C, 1, ...] views.
  if (!haveStats)
    return error(n, loc) << "eval-mode batch_norm without running statistics";
  auto rm = tensorArg(n, 3, loc), rv = tensorArg(n, 4, loc);
  if (failed(rm) || failed(rv))
    return failure();
  SmallVector<SymInt> dims(t.getRank() - 1, SymInt(1));
  dims[0] = c;
  auto view = [&](Value v) { return reshape(v, dims, loc); };
  auto mean = view(*rm), var = view(*rv), wv = view(*w), bv = view(*bias);
  if (failed(mean) || failed(var) || failed(wv) || failed(bv))
    return failure();
  auto r = binary("add", TSValue::ofTensor(*var), TSValue::ofFloat(*eps), loc,
                  n);
  if (succeeded(r))
    r = unary(UnaryKind::rsqrt, *r, loc);
  if (succeeded(r))
    r = make<MulOp>(loc, {*r, *wv});
  FailureOr<Value> centered = make<SubOp>(loc, {*x, *mean});
  if (failed(r) || failed(centered))
    return failure();
  r = make<MulOp>(loc, {*centered, *r});
  if (succeeded(r))
    r = make<AddOp>(loc, {*r, *bv});
  return bindResult(n, r);
}

LogicalResult TSImporter::hConvolution(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc), w = tensorArg(n, 1, loc);
  if (failed(x) || failed(w))
    return failure();
  int64_t sp = tensorType(*x).getRank() - 2;
  if (sp < 1)
    return error(n, loc) << "input must be [N, C, spatial...]";
  bool full = opName(n) == "_convolution" || opName(n) == "convolution";
  bool transposeOp = StringRef(opName(n)).starts_with("conv_transpose");
  // conv2d(input, weight, bias, stride, padding, dilation, groups);
  // _convolution(..., stride, padding, dilation, transposed, output_padding,
  //              groups, ...);
  // conv_transpose2d(input, weight, bias, stride, padding, output_padding,
  //                  groups, dilation)
  SmallVector<Value> operands{*x, *w};
  auto bias = optArg(n, 2, loc, &TSImporter::tensorArg, Value());
  if (failed(bias))
    return failure();
  if (*bias)
    operands.push_back(*bias);
  bool transposed = transposeOp;
  if (full) {
    auto t = boolArg(n, 6, loc);
    if (failed(t))
      return failure();
    transposed = *t;
  }
  if (transposed) {
    auto stride = intListArg(n, 3, loc), pad = intListArg(n, 4, loc);
    auto outPad = intListArg(n, full ? 7 : 5, loc);
    auto dil = intListArg(n, full ? 5 : 7, loc);
    auto groups = intArg(n, full ? 8 : 6, loc);
    if (failed(stride) || failed(pad) || failed(outPad) || failed(dil) ||
        failed(groups))
      return failure();
    return bindResult(
        n, make<ConvTransposeOp>(
               loc, operands,
               {attr("strides", b().getDenseI64ArrayAttr(window(*stride, sp, 1))),
                attr("pads", b().getDenseI64ArrayAttr(window(*pad, sp, 0))),
                attr("output_padding",
                     b().getDenseI64ArrayAttr(window(*outPad, sp, 0))),
                attr("dilations", b().getDenseI64ArrayAttr(window(*dil, sp, 1))),
                i64("groups", *groups)}));
  }
  auto stride = intListArg(n, 3, loc), dil = intListArg(n, 5, loc);
  auto groups = intArg(n, full ? 8 : 6, loc);
  if (failed(stride) || failed(dil) || failed(groups))
    return failure();
  SmallVector<int64_t> strides = window(*stride, sp, 1),
                       dilations = window(*dil, sp, 1), pads;
  if (!full && lookup(n->input(4)).kind == K::Str) {
    // padding="valid" (none) / "same" (conv2d(padding="same"),
    // aten::_convolution_mode): dilation * (k - 1) in all, the odd one at
    // the end, as torch pads.
    auto mode = strArg(n, 4, loc);
    if (failed(mode))
      return failure();
    if (*mode != "same" && *mode != "valid")
      return error(n, loc) << "padding '" << *mode
                           << "' (expected 'same' or 'valid')";
    SmallVector<SymInt> kernel = dimsOf(*w);
    pads.assign(2 * sp, 0);
    for (int64_t i = 0; *mode == "same" && i < sp; ++i) {
      if (strides[i] != 1)
        return error(n, loc) << "padding 'same' with stride " << strides[i]
                             << " (torch allows it with stride 1 only)";
      int64_t total = dilations[i] * (kernel[2 + i].constant - 1);
      pads[i] = total / 2;
      pads[sp + i] = total - total / 2;
    }
  } else {
    auto pad = intListArg(n, 4, loc);
    if (failed(pad))
      return failure();
    pads = twice(window(*pad, sp, 0));
  }
  return bindResult(
      n, make<ConvOp>(loc, operands,
                      {attr("strides", b().getDenseI64ArrayAttr(strides)),
                       attr("pads", b().getDenseI64ArrayAttr(pads)),
                       attr("dilations", b().getDenseI64ArrayAttr(dilations)),
                       i64("groups", *groups)}));
}

LogicalResult TSImporter::hMaxPool(Node *n, Location loc) {
  // max_poolNd(input, kernel, stride, padding, dilation, ceil_mode)
  auto x = tensorArg(n, 0, loc);
  auto kernel = intListArg(n, 1, loc), stride = intListArg(n, 2, loc),
       pad = intListArg(n, 3, loc), dil = intListArg(n, 4, loc);
  auto ceil = boolArg(n, 5, loc);
  if (failed(x) || failed(kernel) || failed(stride) || failed(pad) ||
      failed(dil) || failed(ceil))
    return failure();
  int64_t sp = tensorType(*x).getRank() - 2;
  SmallVector<int64_t> k = window(*kernel, sp, 1);
  return bindResult(n, makePool(*this, loc, *x, PoolKind::max, k,
                                window(*stride, sp, 1, k),
                                twice(window(*pad, sp, 0)), window(*dil, sp, 1),
                                *ceil, false));
}

LogicalResult TSImporter::hAvgPool(Node *n, Location loc) {
  // avg_poolNd(input, kernel, stride, padding, ceil_mode, count_include_pad,
  //            divisor_override)
  auto x = tensorArg(n, 0, loc);
  auto kernel = intListArg(n, 1, loc), stride = intListArg(n, 2, loc),
       pad = intListArg(n, 3, loc);
  auto ceil = boolArg(n, 4, loc), include = boolArg(n, 5, loc);
  if (failed(x) || failed(kernel) || failed(stride) || failed(pad) ||
      failed(ceil) || failed(include))
    return failure();
  if (!isNoneArg(n, 6))
    return error(n, loc) << "avg_pool divisor_override is not supported";
  int64_t sp = tensorType(*x).getRank() - 2;
  SmallVector<int64_t> k = window(*kernel, sp, 1);
  return bindResult(n, makePool(*this, loc, *x, PoolKind::avg, k,
                                window(*stride, sp, 1, k),
                                twice(window(*pad, sp, 0)),
                                SmallVector<int64_t>(sp, 1), *ceil, *include));
}

LogicalResult TSImporter::hAdaptiveAvgPool(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto out = intListArg(n, 1, loc);
  if (failed(x) || failed(out))
    return failure();
  // adaptive_max_poolNd returns (values, indices): the indices unsupported.
  bool isMax = StringRef(opName(n)).starts_with("adaptive_max");
  if (isMax && n->outputs().size() > 1 && n->output(1)->hasUses())
    return error(n, loc) << "the indices of adaptive max pooling are not "
                            "supported";
  ReduceKind reduceKind = isMax ? ReduceKind::max : ReduceKind::mean;
  PoolKind poolKind = isMax ? PoolKind::max : PoolKind::avg;
  auto bindFirst = [&](FailureOr<Value> r) {
    if (failed(r))
      return failure();
    bindTensor(n->outputs()[0], *r);
    return success();
  };
  VTensorType t = tensorType(*x);
  int64_t sp = t.getRank() - 2;
  SmallVector<int64_t> o = window(*out, sp, 1);
  if (sp < 1 || static_cast<int64_t>(o.size()) != sp)
    return error(n, loc) << "output size does not match the input rank";
  if (llvm::all_of(o, [](int64_t v) { return v == 1; })) {
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < sp; ++i)
      axes.push_back(i + 2);
    return bindFirst(reduce(reduceKind, *x, axes, true, loc));
  }
  SmallVector<int64_t> k;
  bool divides = true;
  for (int64_t i = 0; i < sp; ++i) {
    SymInt in = t.getDim(i + 2);
    if (!in.isStatic() || o[i] <= 0)
      return error(n, loc) << "adaptive pooling from " << in.str() << " to "
                           << o[i] << " is supported only for static sizes";
    divides &= in.constant % o[i] == 0;
    k.push_back(in.constant / o[i]);
  }
  if (divides)
    return bindFirst(makePool(*this, loc, *x, poolKind, k, k,
                              SmallVector<int64_t>(2 * sp, 0),
                              SmallVector<int64_t>(sp, 1), false, true));
  // Windows of uneven sizes: output j of a dimension of size I pools
  // [floor(j I / O), ceil((j + 1) I / O)), as torch. The windows are
  // rectangles, so the dimensions pool one after the other (a mean of equal
  // rows' means, a max of maxes): per dimension, a reduce of each window's
  // slice, concatenated.
  Value v = *x;
  for (int64_t i = 0; i < sp; ++i) {
    int64_t axis = i + 2, in = t.getDim(axis).constant;
    if (in == o[i])
      continue;
    SmallVector<Value> parts;
    for (int64_t j = 0; j < o[i]; ++j) {
      int64_t start = j * in / o[i], end = ((j + 1) * in + o[i] - 1) / o[i];
      auto s = sliceOf(v, axis, SymInt(start), SymInt(end), 1, loc, n);
      auto r = failed(s) ? s : reduce(reduceKind, *s, {axis}, true, loc);
      if (failed(r))
        return failure();
      parts.push_back(*r);
    }
    auto c = parts.size() == 1
                 ? FailureOr<Value>(parts[0])
                 : make<ConcatOp>(loc, parts, {i64("axis", axis)});
    if (failed(c))
      return failure();
    v = *c;
  }
  return bindFirst(v);
}

FailureOr<SmallVector<int64_t>> TSImporter::axesArg(Node *n, unsigned i,
                                                    int64_t rank,
                                                    Location loc) {
  SmallVector<int64_t> axes;
  if (!isNoneArg(n, i)) {
    SmallVector<int64_t> listed;
    if (lookup(n->input(i)).kind == K::Int) {
      auto a = intArg(n, i, loc);
      if (failed(a))
        return failure();
      listed.push_back(*a);
    } else {
      auto l = intListArg(n, i, loc);
      if (failed(l))
        return failure();
      listed = *l;
    }
    for (int64_t a : listed) {
      auto axis = normIndex(n, a, rank, loc);
      if (failed(axis))
        return failure();
      axes.push_back(*axis);
    }
  }
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

LogicalResult TSImporter::hReduce(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  std::string op = opName(n);
  int64_t rank = tensorType(*x).getRank();
  SmallVector<int64_t> axes;
  bool keepdim = false;
  unsigned dtypeIdx = 1;
  // mean(x, dtype) / mean(x, dims, keepdim, dtype) / amax(x, dims, keepdim)
  // / prod(x, dim, keepdim, dtype)
  bool withDims = n->inputs().size() >= 3;
  auto all = axesArg(n, withDims ? 1 : n->inputs().size(), rank, loc);
  if (failed(all))
    return failure();
  axes = *all;
  if (withDims) {
    auto k = boolArg(n, 2, loc);
    if (failed(k))
      return failure();
    keepdim = *k;
    dtypeIdx = 3;
  }
  Value v = *x;
  bool typed = false;
  if (n->inputs().size() > dtypeIdx &&
      (op == "mean" || op == "sum" || op == "prod")) {
    auto dt = dtypeArg(n, dtypeIdx, loc);
    if (failed(dt))
      return failure();
    if (*dt)
      v = cast(v, *dt, loc);
    typed = bool(*dt);
  }
  // torch sums and multiplies bool and integer tensors in int64: a count of
  // a mask ((labels != -100).sum(-1)) summed as i1 was 0 or 1.
  if (!typed && (op == "sum" || op == "prod") &&
      !isFloatType(tensorType(v).getElementType()))
    v = cast(v, b().getI64Type(), loc);
  ReduceKind kind = op == "mean"   ? ReduceKind::mean
                    : op == "sum"  ? ReduceKind::sum
                    : op == "amax" ? ReduceKind::max
                    : op == "amin" ? ReduceKind::min
                                   : ReduceKind::prod;
  if (kind == ReduceKind::mean && !tensorType(v).getElementType().isa<FloatType>())
    return error(n, loc) << "mean of an integer tensor";
  return bindResult(n, reduce(kind, v, axes, keepdim, loc));
}

/// aten::min / aten::max: with a tensor (or number) as second operand
/// elementwise (hArith); alone, the reduction over every element; with a
/// dimension (and keepdim), the values along it and, when used, the
/// indices (the first extreme, Decomposer::argExtreme).
LogicalResult TSImporter::hMinMax(Node *n, Location loc) {
  size_t count = n->inputs().size();
  if (count == 2 && lookup(n->input(1)).kind != K::Int)
    return hArith(n, loc);
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  ReduceKind kind = opName(n) == "min" ? ReduceKind::min : ReduceKind::max;
  int64_t rank = tensorType(*x).getRank();
  if (count == 1) {
    SmallVector<int64_t> all;
    for (int64_t i = 0; i < rank; ++i)
      all.push_back(i);
    return bindResult(n, reduce(kind, *x, all, false, loc));
  }
  auto d = intArg(n, 1, loc);
  auto keep = optArg(n, 2, loc, &TSImporter::boolArg, false);
  if (failed(d) || failed(keep))
    return failure();
  auto axis = normIndex(n, *d, rank, loc);
  if (failed(axis))
    return failure();
  auto r = reduce(kind, *x, {*axis}, *keep, loc);
  if (failed(r))
    return failure();
  bindTensor(n->outputs()[0], *r);
  if (n->outputs().size() > 1 && n->output(1)->hasUses()) {
    auto idx = Decomposer(b(), loc)
                   .argExtreme(*x, *axis, kind == ReduceKind::max, *keep);
    if (failed(idx))
      return failure();
    bindTensor(n->outputs()[1], *idx);
  }
  return success();
}

FailureOr<Value> TSImporter::groupNorm(Node *n, Location loc, Value x,
                                       int64_t groups, unsigned weightIdx,
                                       unsigned biasIdx, double eps) {
  SmallVector<SymInt> dims = dimsOf(x);
  if (dims.size() < 2)
    return error(n, loc) << "needs an input [N, C, ...], got "
                         << dimsStr(dims),
           failure();
  int64_t rest = 1;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (!dims[i].isStatic())
      return error(n, loc) << "needs static sizes after the batch "
                              "dimension, got "
                           << dimsStr(dims),
             failure();
    rest *= dims[i].constant;
  }
  int64_t c = dims[1].constant;
  if (groups <= 0 || c % groups != 0)
    return error(n, loc) << c << " channels cannot be split into " << groups
                         << " groups",
           failure();
  auto grouped = reshape(x, {dims[0], SymInt(groups), SymInt(rest / groups)},
                         loc);
  if (failed(grouped))
    return failure();
  auto normed = make<LayerNormOp>(
      loc, {*grouped},
      {i64("axis", 2), attr("epsilon", b().getF64FloatAttr(eps)),
       attr("operand_segment_sizes", b().getDenseI32ArrayAttr({1, 0, 0}))});
  if (failed(normed))
    return failure();
  auto y = reshape(*normed, dims, loc);
  if (failed(y))
    return failure();
  // weight and bias [C] -> [C, 1, ...] to broadcast over the positions.
  SmallVector<SymInt> perChannel(dims.size() - 1, SymInt(1));
  perChannel[0] = SymInt(c);
  for (unsigned i : {weightIdx, biasIdx}) {
    if (isNoneArg(n, i))
      continue;
    auto p = tensorArg(n, i, loc);
    if (failed(p))
      return failure();
    auto shaped = reshape(*p, perChannel, loc);
    if (failed(shaped))
      return failure();
    y = i == weightIdx ? make<MulOp>(loc, {*y, *shaped})
                       : make<AddOp>(loc, {*y, *shaped});
    if (failed(y))
      return failure();
  }
  return y;
}

/// aten::group_norm(x, groups, weight, bias, eps, cudnn_enabled).
LogicalResult TSImporter::hGroupNorm(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto groups = intArg(n, 1, loc);
  auto eps = floatArg(n, 4, loc);
  if (failed(x) || failed(groups) || failed(eps))
    return failure();
  return bindResult(n, groupNorm(n, loc, *x, *groups, 2, 3, *eps));
}

FailureOr<LossReduction> TSImporter::reductionArg(Node *n, unsigned i,
                                                 Location loc) {
  auto value = optArg(n, i, loc, &TSImporter::intArg, 1);
  if (failed(value))
    return failure();
  switch (*value) {
  case 0:
    return LossReduction::none;
  case 1:
    return LossReduction::mean;
  case 2:
    return LossReduction::sum;
  default:
    return error(n, loc) << "unknown reduction " << *value, failure();
  }
}

/// Shared by cross_entropy_loss and nll_loss:
/// (self, target, weight, reduction, ignore_index, ...).
static LogicalResult lossCommon(TSImporter &imp, TSImporter::Node *n,
                                Location loc, bool logInput) {
  auto x = imp.tensorArg(n, 0, loc), y = imp.tensorArg(n, 1, loc);
  auto red = imp.reductionArg(n, 3, loc);
  auto ignore = imp.intArg(n, 4, loc);
  if (failed(x) || failed(y) || failed(red) || failed(ignore))
    return failure();
  double smoothing = 0.0;
  if (!logInput) {
    auto s = imp.optArg(n, 5, loc, &TSImporter::floatArg, 0.0);
    if (failed(s))
      return failure();
    if (!(*s >= 0.0 && *s <= 1.0))
      return imp.error(n, loc) << "label_smoothing=" << *s
                               << " is outside [0, 1]";
    smoothing = *s;
  }
  LossReduction reduction = *red;
  if (!logInput && isFloatType(tensorType(*y).getElementType())) {
    // Class probabilities as targets.
    Value w;
    if (!imp.isNoneArg(n, 2)) {
      auto wv = imp.tensorArg(n, 2, loc);
      if (failed(wv))
        return failure();
      w = *wv;
    }
    return imp.bindResult(n, Decomposer(imp.b(), loc).softTargetCrossEntropy(
                                 *x, *y, w, reduction, smoothing));
  }
  SmallVector<Value, 3> operands{*x, *y};
  if (!imp.isNoneArg(n, 2)) { // class weights
    auto w = imp.tensorArg(n, 2, loc);
    if (failed(w))
      return failure();
    operands.push_back(imp.cast(*w, tensorType(*x).getElementType(), loc));
  }
  MLIRContext *ctx = imp.ctx;
  SmallVector<NamedAttribute> attrs{
      imp.attr("reduction", LossReductionAttr::get(ctx, reduction)),
      imp.i64("ignore_index", *ignore)};
  if (logInput)
    attrs.push_back(imp.attr("log_input", UnitAttr::get(ctx)));
  if (smoothing != 0.0)
    attrs.push_back(
        imp.attr("label_smoothing", FloatAttr::get(Float64Type::get(ctx), smoothing)));
  return imp.bindResult(n, imp.make<CrossEntropyOp>(loc, operands, attrs));
}

LogicalResult TSImporter::hCrossEntropy(Node *n, Location loc) {
  return lossCommon(*this, n, loc, /*logInput=*/false);
}

LogicalResult TSImporter::hNllLoss(Node *n, Location loc) {
  return lossCommon(*this, n, loc, /*logInput=*/true);
}

/// multi_margin_loss(self, target, p, margin, weight, reduction) and
/// multilabel_margin_loss(self, target, reduction): scores [N, C].
LogicalResult TSImporter::hMarginLoss(Node *n, Location loc) {
  bool multilabel = opName(n) == "multilabel_margin_loss";
  auto x = tensorArg(n, 0, loc), y = tensorArg(n, 1, loc);
  auto reduction = reductionArg(n, multilabel ? 2 : 5, loc);
  if (failed(x) || failed(y) || failed(reduction))
    return failure();
  Decomposer d(b(), loc);
  if (multilabel)
    return bindResult(n, d.multilabelMarginLoss(*x, *y, *reduction));
  auto p = floatArg(n, 2, loc), margin = floatArg(n, 3, loc);
  auto weight = optArg(n, 4, loc, &TSImporter::tensorArg, Value());
  if (failed(p) || failed(margin) || failed(weight))
    return failure();
  if (*p != 1.0 && *p != 2.0)
    return error(n, loc) << "multi_margin_loss: p must be 1 or 2 (as in "
                            "torch), got "
                         << *p;
  return bindResult(n, d.multiMarginLoss(*x, *y, int64_t(*p), *margin, *weight,
                                         *reduction));
}

/// ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
/// reduction, zero_infinity) with the lengths as tensors [N] and padded
/// targets [N, S] (Decomposer::ctcLoss).
LogicalResult TSImporter::hCtcLoss(Node *n, Location loc) {
  for (unsigned i : {2u, 3u})
    if (lookup(n->input(i)).kind == TSValue::Kind::List)
      return error(n, loc) << "ctc_loss with " << (i == 2 ? "input" : "target")
                           << "_lengths as a list: pass the lengths as a "
                              "tensor [N] (a list has the traced batch's "
                              "length and values)";
  auto x = tensorArg(n, 0, loc);
  auto y = tensorArg(n, 1, loc); // masked_select's: TorchScriptSelection.cpp
  auto il = tensorArg(n, 2, loc), tl = tensorArg(n, 3, loc);
  auto blank = optArg(n, 4, loc, &TSImporter::intArg, 0);
  auto reduction = reductionArg(n, 5, loc);
  auto zeroInf = optArg(n, 6, loc, &TSImporter::boolArg, false);
  if (failed(x) || failed(y) || failed(il) || failed(tl) || failed(blank) ||
      failed(reduction) || failed(zeroInf))
    return failure();
  return bindResult(n, Decomposer(b(), loc).ctcLoss(*x, *y, *il, *tl, *blank,
                                                    *reduction, *zeroInf));
}

LogicalResult TSImporter::hSDPA(Node *n, Location loc) {
  // scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
  //                              scale, enable_gqa)
  auto q = tensorArg(n, 0, loc), k = tensorArg(n, 1, loc),
       v = tensorArg(n, 2, loc);
  auto dropout = floatArg(n, 4, loc);
  auto causal = boolArg(n, 5, loc);
  if (failed(q) || failed(k) || failed(v) || failed(dropout) || failed(causal))
    return failure();
  auto gqa = optArg(n, 7, loc, &TSImporter::boolArg, false);
  if (failed(gqa))
    return failure();
  VTensorType qt = tensorType(*q);
  int64_t rank = qt.getRank();
  if (rank < 2 || !qt.getDim(rank - 1).isStatic())
    return error(n, loc) << "query " << qt << " needs a static last dim";
  if (*gqa && rank >= 3) {
    // Grouped-query attention: key and value have fewer heads (dim -3),
    // each serving Hq / Hk consecutive query heads -- torch repeats them
    // with repeat_interleave.
    SymInt hq = qt.getDim(rank - 3), hk = tensorType(*k).getDim(rank - 3),
           hv = tensorType(*v).getDim(rank - 3);
    if (hk != hq || hv != hq) {
      if (!hq.isStatic() || !hk.isStatic() || !hv.isStatic() ||
          hk != hv || hk.constant < 1 || hq.constant % hk.constant != 0)
        return error(n, loc)
               << "enable_gqa needs static head counts, the query's ("
               << hq.str() << ") a multiple of the key's and value's ("
               << hk.str() << ", " << hv.str() << ")";
      SymInt r(hq.constant / hk.constant);
      k = repeatAxis(n, loc, *k, rank - 3, r, /*interleave=*/true);
      v = repeatAxis(n, loc, *v, rank - 3, r, /*interleave=*/true);
      if (failed(k) || failed(v))
        return failure();
    }
  }
  auto scale = optArg(
      n, 6, loc, &TSImporter::floatArg,
      1.0 / std::sqrt(static_cast<double>(qt.getDim(rank - 1).constant)));
  if (failed(scale))
    return failure();
  auto kt = swapDims(*k, rank - 2, rank - 1, loc);
  if (failed(kt))
    return failure();
  auto s = make<MatmulOp>(loc, {*q, *kt});
  if (failed(s))
    return failure();
  Type elt = qt.getElementType();
  s = make<MulOp>(loc, {*s, scalarConstant(*scale, elt, loc)});
  if (failed(s))
    return failure();
  double ninf = -std::numeric_limits<double>::infinity();
  if (*causal) {
    VTensorType st = tensorType(*s);
    SymInt l = st.getDim(rank - 2), m = st.getDim(rank - 1);
    if (!l.isStatic() || !m.isStatic())
      return error(n, loc) << "is_causal needs static sequence lengths";
    auto ones = b().create<FullOp>(
        loc, VTensorType::get(ctx, {l.constant, m.constant}, -1, elt),
        FloatAttr::get(elt, 1.0));
    auto tri = make<TriluOp>(loc, {ones.getResult()},
                             {i64("k", 0), attr("upper", b().getBoolAttr(false))});
    if (failed(tri))
      return failure();
    auto keep = binary("ne", TSValue::ofTensor(*tri), TSValue::ofFloat(0), loc,
                       n);
    if (failed(keep))
      return failure();
    s = make<WhereOp>(loc, {*keep, *s, scalarConstant(ninf, elt, loc)});
    if (failed(s))
      return failure();
  }
  auto mask = optArg(n, 3, loc, &TSImporter::tensorArg, Value());
  if (failed(mask))
    return failure();
  if (*mask) {
    if (tensorType(*mask).getElementType().isInteger(1))
      s = make<WhereOp>(loc, {*mask, *s, scalarConstant(ninf, elt, loc)});
    else
      s = make<AddOp>(loc, {*s, cast(*mask, elt, loc)});
    if (failed(s))
      return failure();
  }
  // PyTorch's SDPA: a query whose keys are all masked attends to nothing
  // (zeros), not NaN.
  s = make<SoftmaxOp>(loc, {*s},
                      {i64("axis", rank - 1), attr("safe", b().getUnitAttr())});
  if (failed(s))
    return failure();
  if (*dropout > 0) {
    if (*dropout >= 1)
      return error(n, loc) << "dropout_p " << *dropout << " is outside [0, 1)";
    s = b().create<DropoutOp>(loc, s->getType(), *s,
                              b().getF64FloatAttr(*dropout))
            .getResult();
  }
  return bindResult(n, make<MatmulOp>(loc, {*s, *v}));
}

LogicalResult TSImporter::selectByOrder(Node *n, Location loc,
                                      const TSValue &order, int64_t dim) {
  TSValue in = lookup(n->input(0));
  bool ok = in.kind == TSValue::Kind::Tensor && in.rowsSorted == order.b;
  FailureOr<Value> x = failure();
  if (ok) {
    llvm::SaveAndRestore<bool> allow(sortedRowsOk, true);
    x = asTensor(in, Type(), loc, n);
    if (failed(x))
      return failure();
  }
  SmallVector<SymInt> dims = ok ? dimsOf(*x) : SmallVector<SymInt>();
  auto axis = ok ? normIndex(n, dim, dims.size(), loc) : FailureOr<int64_t>(0);
  if (failed(axis))
    return failure();
  if (!ok || dims[*axis] != order.i)
    return error(n, loc)
           << "index_select by the " << (order.b ? "unsorting" : "sorting")
           << " order of pack_padded_sequence(enforce_sorted=False) needs a "
           << (order.b ? "tensor whose rows it sorted" : "tensor in the "
                                                         "examples' order")
           << " and the batch dimension";
  TSValue out = TSValue::ofTensor(*x);
  out.rowsSorted = !order.b;
  bind(n->output(), out);
  return success();
}

template <typename OpTy>
LogicalResult TSImporter::hGatherAlong(Node *n, Location loc) {
  if (std::is_same_v<OpTy, GatherOp> &&
      lookup(n->input(2)).kind == TSValue::Kind::BatchOrder) {
    auto d = intArg(n, 1, loc);
    return failed(d) ? failure()
                     : selectByOrder(n, loc, lookup(n->input(2)), *d);
  }
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  auto idx = tensorArg(n, 2, loc);
  if (failed(x) || failed(d) || failed(idx))
    return failure();
  auto axis = normIndex(n, *d, tensorType(*x).getRank(), loc);
  if (failed(axis))
    return failure();
  return bindResult(n, make<OpTy>(loc, {*x, *idx}, {i64("axis", *axis)}));
}

/// x[..., idx, ...] (aten::index with one index tensor in the list, the
/// others None): a gather along that axis, numpy's result shape. Several
/// index tensors: numpy's advanced indexing (Decomposer::advancedIndex).
/// A boolean mask over the leading dimensions selects rows
/// (TorchScriptSelection.cpp).
LogicalResult TSImporter::hIndex(Node *n, Location loc) {
  if (const TSValue &list = lookup(n->input(1));
      list.kind == TSValue::Kind::List && list.list.size() == 1 &&
      list.list[0].kind == TSValue::Kind::BatchOrder) // lengths[unsorted]
    return selectByOrder(n, loc, list.list[0], 0);
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  TSValue list = lookup(n->input(1));
  if (list.kind != TSValue::Kind::List)
    return error(n, loc) << "expected a list of indices";
  // x[torch.where(mask)]: every component of the mask's indices, in order,
  // is x[mask].
  if (!list.list.empty() && list.list[0].kind == K::MaskIndex) {
    Value mask = list.list[0].tensor;
    bool whole = int64_t(list.list.size()) == tensorType(mask).getRank();
    for (auto [a, e] : llvm::enumerate(list.list))
      whole &= e.kind == K::MaskIndex && e.tensor == mask &&
               e.i == SymInt(int64_t(a));
    if (!whole)
      return error(n, loc) << "indexes with part of torch.where(mask) / "
                              "nonzero(as_tuple=True) (as many indices as "
                              "the mask selects); x[torch.where(mask)] with "
                              "all of them, in order, is supported";
    return bindSelection(n, loc, *x, mask);
  }
  SmallVector<int64_t> axes;
  SmallVector<Value> indices;
  for (auto [i, v] : llvm::enumerate(list.list)) {
    if (v.kind == TSValue::Kind::None)
      continue;
    auto idx = asTensor(v, Type(), loc, n);
    if (failed(idx))
      return failure();
    // A uint8 index is a mask too (torch's older form of one).
    if (tensorType(*idx).getElementType().isUnsignedInteger(8))
      idx = cast(*idx, b().getI1Type(), loc);
    if (i == 0 && tensorType(*idx).getElementType().isInteger(1) &&
        llvm::all_of(ArrayRef(list.list).drop_front(),
                     [](const TSValue &e) { return e.kind == K::None; }))
      return bindSelection(n, loc, *x, *idx);
    if (tensorType(*idx).getElementType().isInteger(1))
      return error(n, loc) << "a boolean mask after other indices (x[:, "
                              "mask]) selects a data-dependent number of "
                              "elements; only a mask over the leading "
                              "dimensions (x[mask]) is supported";
    if (!tensorType(*idx).getElementType().isSignlessInteger(64) &&
        !tensorType(*idx).getElementType().isSignlessInteger(32))
      return error(n, loc)
             << "indexing with a boolean or floating-point tensor (a mask "
                "selects a data-dependent number of elements) is not "
                "supported";
    axes.push_back(static_cast<int64_t>(i));
    indices.push_back(*idx);
  }
  if (axes.empty())
    return error(n, loc) << "indexing without an index tensor";
  if (axes.size() == 1)
    return bindResult(
        n, make<GatherOp>(loc, {*x, indices[0]}, {i64("axis", axes[0])}));
  return bindResult(n, Decomposer(b(), loc).advancedIndex(*x, axes, indices));
}

void TSImporter::registerNNOps(llvm::StringMap<Handler> &t) {
  auto reg = [&](std::initializer_list<const char *> kinds, Handler h) {
    for (const char *k : kinds)
      t[k] = h;
  };
  reg({"aten::embedding", "aten::embedding_renorm"}, &TSImporter::hEmbedding);
  reg({"aten::embedding_bag"}, &TSImporter::hEmbeddingBag);
  reg({"aten::matmul", "aten::mm", "aten::bmm", "aten::mv", "aten::dot",
       "aten::vdot"},
      &TSImporter::hMatmul);
  reg({"aten::linear"}, &TSImporter::hLinear);
  reg({"aten::addmm"}, &TSImporter::hAddmm);
  reg({"aten::softmax", "aten::log_softmax", "aten::_softmax",
       "aten::_log_softmax", "aten::_safe_softmax"},
      &TSImporter::hSoftmax);
  reg({"aten::layer_norm"}, &TSImporter::hLayerNorm);
  reg({"aten::batch_norm"}, &TSImporter::hBatchNorm);
  reg({"aten::group_norm"}, &TSImporter::hGroupNorm);
  reg({"aten::instance_norm"}, &TSImporter::hInstanceNorm);
  reg({"aten::rms_norm"}, &TSImporter::hRmsNorm);
  reg({"aten::mish", "aten::hardswish", "aten::hardsigmoid", "aten::elu",
       "aten::selu", "aten::celu", "aten::leaky_relu", "aten::log_sigmoid"},
      &TSImporter::hActivation);
  reg({"aten::glu"}, &TSImporter::hGlu);
  reg({"aten::mse_loss", "aten::l1_loss", "aten::smooth_l1_loss",
       "aten::huber_loss", "aten::binary_cross_entropy",
       "aten::binary_cross_entropy_with_logits", "aten::kl_div",
       "aten::soft_margin_loss", "aten::margin_ranking_loss",
       "aten::hinge_embedding_loss", "aten::cosine_embedding_loss",
       "aten::poisson_nll_loss"},
      &TSImporter::hElementwiseLoss);
  reg({"aten::cosine_similarity"}, &TSImporter::hCosineSimilarity);
  reg({"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu"},
      &TSImporter::hRecurrent);
  reg({"aten::one_hot"}, &TSImporter::hOneHot);
  reg({"aten::im2col"}, &TSImporter::hIm2Col);
  reg({"aten::col2im"}, &TSImporter::hCol2Im);
  reg({"aten::_pack_padded_sequence"}, &TSImporter::hPackPadded);
  reg({"aten::_pad_packed_sequence"}, &TSImporter::hPadPacked);
  reg({"aten::affine_grid_generator"}, &TSImporter::hAffineGrid);
  reg({"aten::grid_sampler"}, &TSImporter::hGridSample);
  reg({"aten::prelu", "aten::_prelu_kernel"}, &TSImporter::hPrelu);
  reg({"aten::topk", "aten::sort", "aten::argsort"}, &TSImporter::hTopK);
  reg({"aten::scatter", "aten::scatter_add", "aten::scatter_reduce"},
      &TSImporter::hScatter);
  reg({"aten::index_add", "aten::index_copy"}, &TSImporter::hIndexAdd);
  reg({"aten::index_fill"}, &TSImporter::hIndexFill);
  reg({"aten::index_put"}, &TSImporter::hIndexPut);
  reg({"aten::diagonal", "aten::diag", "aten::diag_embed", "aten::trace"},
      &TSImporter::hDiagonal);
  reg({"aten::exp2", "aten::log2", "aten::log10", "aten::square",
       "aten::frac", "aten::hypot", "aten::lerp", "aten::addcmul",
       "aten::addcdiv", "aten::logaddexp", "aten::xlogy", "aten::nan_to_num",
       "aten::softshrink", "aten::hardshrink", "aten::threshold",
       "aten::logit", "aten::sinc", "aten::float_power", "aten::rrelu",
       "aten::bucketize", "aten::histc", "aten::baddbmm", "aten::addmm", "aten::addmv",
       "aten::addbmm", "aten::atan2", "aten::arctan2", "aten::logaddexp2",
       "aten::copysign", "aten::heaviside", "aten::searchsorted",
       "aten::outer", "aten::ger", "aten::addr", "aten::ldexp",
       "aten::rad2deg", "aten::deg2rad", "aten::special_entr",
       "aten::special_xlogy", "aten::special_logit", "aten::renorm",
       "aten::linalg_cross", "aten::cross", "aten::asinh", "aten::acosh",
       "aten::atanh", "aten::arcsinh", "aten::arccosh", "aten::arctanh",
       "aten::isclose", "aten::fmin", "aten::fmax", "aten::mvlgamma",
       "aten::special_multigammaln", "aten::inner",
       "aten::linalg_matrix_norm", "aten::linalg_matrix_power",
       "aten::matrix_power", "aten::all", "aten::any"},
      &TSImporter::hMath);
  reg({"aten::take_along_dim"}, &TSImporter::hTakeAlongDim);
  reg({"aten::inverse", "aten::linalg_inv", "aten::det", "aten::linalg_det",
       "aten::logdet", "aten::slogdet", "aten::linalg_slogdet",
       "aten::cholesky", "aten::linalg_cholesky", "aten::linalg_solve",
       "aten::cholesky_solve"},
      &TSImporter::hLinalg);
  reg({"aten::tensordot"}, &TSImporter::hTensordot);
  reg({"aten::isnan", "aten::isinf", "aten::isposinf", "aten::isneginf",
       "aten::isfinite", "aten::logical_xor", "aten::bitwise_xor",
       "aten::__xor__"},
      &TSImporter::hPredicate);
  reg({"aten::argmax", "aten::argmin", "aten::aminmax"},
      &TSImporter::hArgExtreme);
  reg({"aten::median"}, &TSImporter::hMedian);
  reg({"aten::kthvalue"}, &TSImporter::hKthValue);
  reg({"aten::quantile"}, &TSImporter::hQuantile);
  reg({"aten::count_nonzero"}, &TSImporter::hCountNonzero);
  reg({"aten::nansum", "aten::nanmean"}, &TSImporter::hNanReduce);
  reg({"aten::cov", "aten::corrcoef"}, &TSImporter::hCovariance);
  reg({"aten::cummax", "aten::cummin"}, &TSImporter::hCumExtreme);
  reg({"aten::trapezoid", "aten::trapz"}, &TSImporter::hTrapezoid);
  reg({"aten::kron"}, &TSImporter::hKron);
  reg({"aten::rot90"}, &TSImporter::hRot90);
  reg({"aten::block_diag"}, &TSImporter::hBlockDiag);
  reg({"aten::logcumsumexp"}, &TSImporter::hLogCumSumExp);
  reg({"aten::diff"}, &TSImporter::hDiff);
  reg({"aten::cumprod"}, &TSImporter::hCumprod);
  reg({"aten::eye"}, &TSImporter::hEye);
  reg({"aten::tril_indices", "aten::triu_indices"}, &TSImporter::hTrilIndices);
  reg({"aten::cdist"}, &TSImporter::hCdist);
  reg({"aten::movedim", "aten::moveaxis"}, &TSImporter::hMoveDim);
  reg({"aten::tensor_split"}, &TSImporter::hTensorSplit);
  reg({"aten::einsum"}, &TSImporter::hEinsum);
  reg({"aten::bilinear"}, &TSImporter::hBilinear);
  reg({"aten::logsumexp"}, &TSImporter::hLogSumExp);
  reg({"aten::var", "aten::std", "aten::var_mean", "aten::std_mean"},
      &TSImporter::hVariance);
  reg({"aten::norm", "aten::linalg_vector_norm"}, &TSImporter::hNorm);
  reg({"aten::linalg_norm", "aten::frobenius_norm"}, &TSImporter::hMatrixNorm);
  reg({"aten::pairwise_distance", "aten::triplet_margin_loss"},
      &TSImporter::hDistance);
  reg({"aten::_weight_norm"}, &TSImporter::hWeightNorm);
  reg({"aten::unfold"}, &TSImporter::hUnfoldWindows);
  reg({"aten::min", "aten::max"}, &TSImporter::hMinMax);
  reg({"aten::_convolution", "aten::convolution", "aten::_convolution_mode",
       "aten::conv1d",
       "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d",
       "aten::conv_transpose2d", "aten::conv_transpose3d"},
      &TSImporter::hConvolution);
  reg({"aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d"},
      &TSImporter::hMaxPool);
  reg({"aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d"},
      &TSImporter::hAvgPool);
  reg({"aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d",
       "aten::adaptive_avg_pool3d", "aten::adaptive_max_pool1d",
       "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d"},
      &TSImporter::hAdaptiveAvgPool);
  reg({"aten::mean", "aten::sum", "aten::amax", "aten::amin", "aten::prod"},
      &TSImporter::hReduce);
  reg({"aten::cross_entropy_loss"}, &TSImporter::hCrossEntropy);
  reg({"aten::multi_margin_loss", "aten::multilabel_margin_loss"},
      &TSImporter::hMarginLoss);
  reg({"aten::nll_loss", "aten::nll_loss_nd", "aten::nll_loss2d"},
      &TSImporter::hNllLoss);
  reg({"aten::scaled_dot_product_attention"}, &TSImporter::hSDPA);
  reg({"aten::ctc_loss"}, &TSImporter::hCtcLoss);
  reg({"aten::gather"}, &TSImporter::hGatherAlong<GatherElementsOp>);
  reg({"aten::index_select"}, &TSImporter::hGatherAlong<GatherOp>);
  reg({"aten::index"}, &TSImporter::hIndex);
}
