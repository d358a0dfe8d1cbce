//===- ONNXShapeImporters.cpp - Shape-manipulating ONNX ops ---------------===//
//
// Reshape, Flatten, (Un)Squeeze, Expand, Concat, Gather, Slice, Split,
// Transpose, ConstantOfShape, Range, Trilu. Each works on known tensors (shape
// arithmetic evaluated at import) and on runtime tensors (varuna ops).
//
//===----------------------------------------------------------------------===//

#include "KnownValue.h"
#include "varuna/Import/Decompose.h"
#include "ONNXOpImporters.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;
using namespace varuna;
using namespace varuna::onnx_import;

namespace {

/// Dims of input i (known or runtime), plus the runtime value if any.
struct Operand {
  SmallVector<SymInt> dims;
  Value value;                    // null for known
  const KnownTensor *known = nullptr;
};

FailureOr<Operand> operand(NodeContext &nc, size_t i) {
  if (!nc.hasInput(i))
    return nc.error("input " + Twine(i) + " is missing");
  Operand o;
  ImportValue &v = nc.input(i);
  if (v.isKnown()) {
    o.known = &*v.known;
    for (int64_t d : v.known->shape)
      o.dims.push_back(d);
    return o;
  }
  auto r = nc.runtime(i);
  if (failed(r))
    return failure();
  o.value = *r;
  o.dims = typeOf(*r).getDims();
  return o;
}

/// Gives `o` the new dims: a known tensor keeps its elements.
LogicalResult setReshaped(NodeContext &nc, const Operand &o,
                          ArrayRef<SymInt> dims) {
  if (o.known) {
    std::vector<int64_t> shape;
    for (SymInt d : dims) {
      if (!d.isStatic())
        return nc.error("reshapes a constant to a batch-dependent shape");
      shape.push_back(d.constant);
    }
    KnownTensor t = *o.known;
    t.shape = shape;
    if (t.numel() != o.known->numel())
      return nc.error("cannot reshape a constant of " +
                      Twine(o.known->numel()) + " elements to " +
                      dimsStr(dims));
    nc.setOutput(0, std::move(t));
    return success();
  }
  auto r = reshapeTo(nc, o.value, dims);
  if (failed(r))
    return failure();
  nc.setOutput(0, *r);
  return success();
}

/// The element count of a tensor's dimensions (always exists: at most one
/// depends on B).
SymInt elements(ArrayRef<SymInt> dims) {
  return product(dims).value_or(SymInt(0, -1));
}

LogicalResult importReshape(NodeContext &nc) {
  auto o = operand(nc, 0);
  auto shape = nc.knownInput(1, "target shape");
  if (failed(o) || failed(shape))
    return failure();
  bool allowZero = nc.intAttr("allowzero").value_or(0) != 0;
  SmallVector<SymInt> dims;
  int64_t inferAt = -1;
  for (int64_t i = 0, n = shape->numel(); i < n; ++i) {
    SymInt s = shape->intAt(i);
    if (s == SymInt(0) && !allowZero) {
      if (i >= static_cast<int64_t>(o->dims.size()))
        return nc.error("target dimension " + Twine(i) +
                        " is 0 (copy) but the input has rank " +
                        Twine(o->dims.size()));
      s = o->dims[i];
    } else if (s == SymInt(-1)) {
      if (inferAt >= 0)
        return nc.error("more than one target dimension is -1");
      inferAt = i;
    } else if (s.isStatic() && s.constant < 0) {
      return nc.error("invalid target dimension " + Twine(s.constant));
    }
    dims.push_back(s);
  }
  if (inferAt >= 0) {
    SmallVector<SymInt> rest(dims);
    rest.erase(rest.begin() + inferAt);
    auto d = elements(o->dims).divExact(elements(rest));
    if (!d)
      return nc.error("cannot infer the -1 dimension: " +
                      elements(o->dims).str() + " elements do not divide by " +
                      elements(rest).str() +
                      (elements(o->dims).isStatic() ? "" :
                       " (the target shape may have been exported with a "
                       "fixed batch size)"));
    dims[inferAt] = *d;
  }
  return setReshaped(nc, *o, dims);
}

LogicalResult importFlatten(NodeContext &nc) {
  auto o = operand(nc, 0);
  if (failed(o))
    return failure();
  int64_t rank = o->dims.size();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(1), rank);
  if (axis < 0 || axis > rank)
    return nc.error("axis out of range");
  ArrayRef<SymInt> d(o->dims);
  SmallVector<SymInt> dims{elements(d.take_front(axis)),
                           elements(d.drop_front(axis))};
  return setReshaped(nc, *o, dims);
}

FailureOr<std::vector<int64_t>> axesOf(NodeContext &nc, size_t inputIndex,
                                       int64_t rank) {
  std::vector<int64_t> axes;
  if (nc.hasInput(inputIndex)) {
    auto k = nc.knownInput(inputIndex, "axes");
    if (failed(k))
      return failure();
    auto s = staticInts(nc, *k, "axes");
    if (failed(s))
      return failure();
    axes = *s;
  } else if (auto a = nc.intsAttr("axes")) {
    axes = *a;
  }
  for (int64_t &a : axes) {
    a = nc.normalizeAxis(a, rank);
    if (a < 0 || a >= rank)
      return nc.error("axis out of range for rank " + Twine(rank));
  }
  llvm::sort(axes);
  return axes;
}

LogicalResult importSqueeze(NodeContext &nc) {
  auto o = operand(nc, 0);
  if (failed(o))
    return failure();
  int64_t rank = o->dims.size();
  auto axes = axesOf(nc, 1, rank);
  if (failed(axes))
    return failure();
  SmallVector<SymInt> dims;
  for (int64_t i = 0; i < rank; ++i) {
    bool listed = llvm::is_contained(*axes, i);
    if (listed && o->dims[i] != SymInt(1))
      return nc.error("cannot squeeze dimension " + Twine(i) + " of size " +
                      o->dims[i].str());
    if (listed || (axes->empty() && o->dims[i] == SymInt(1)))
      continue;
    dims.push_back(o->dims[i]);
  }
  return setReshaped(nc, *o, dims);
}

LogicalResult importUnsqueeze(NodeContext &nc) {
  auto o = operand(nc, 0);
  if (failed(o))
    return failure();
  int64_t outRank = o->dims.size();
  std::vector<int64_t> raw;
  if (nc.hasInput(1)) {
    auto s = staticIntsInput(nc, 1, "axes");
    if (failed(s))
      return failure();
    raw = *s;
  } else if (auto a = nc.intsAttr("axes")) {
    raw = *a;
  }
  outRank += raw.size();
  for (int64_t &a : raw) {
    a = nc.normalizeAxis(a, outRank);
    if (a < 0 || a >= outRank)
      return nc.error("axis out of range");
  }
  SmallVector<SymInt> dims;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i) {
    if (llvm::is_contained(raw, i))
      dims.push_back(1);
    else
      dims.push_back(o->dims[next++]);
  }
  return setReshaped(nc, *o, dims);
}

LogicalResult importExpand(NodeContext &nc) {
  auto o = operand(nc, 0);
  auto shape = nc.knownInput(1, "target shape");
  if (failed(o) || failed(shape))
    return failure();
  size_t rank = std::max<size_t>(o->dims.size(), shape->numel());
  SmallVector<SymInt> dims(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t ia = o->dims.size() - rank + i, ib = shape->numel() - rank + i;
    SymInt a = ia >= 0 ? o->dims[ia] : SymInt(1);
    SymInt b = ib >= 0 ? shape->intAt(ib) : SymInt(1);
    if (a != b && a != SymInt(1) && b != SymInt(1))
      return nc.error("cannot expand dimension " + a.str() + " to " + b.str());
    dims[i] = a == SymInt(1) ? b : a;
  }
  if (o->known) {
    // Small known tensors are expanded at import time.
    bool isStatic = llvm::all_of(dims, [](SymInt d) { return d.isStatic(); });
    int64_t n = isStatic ? elements(dims).constant : -1;
    if (isStatic && n <= kMaxKnownElements) {
      std::vector<int64_t> shapeOut, idx;
      for (SymInt d : dims)
        shapeOut.push_back(d.constant);
      for (int64_t flat = 0; flat < n; ++flat) {
        int64_t f = flat, src = 0, stride = 1;
        for (int64_t i = rank - 1, j = o->known->shape.size() - 1; i >= 0;
             --i, --j) {
          int64_t coord = f % shapeOut[i];
          f /= shapeOut[i];
          if (j >= 0) {
            if (o->known->shape[j] != 1)
              src += coord * stride;
            stride *= o->known->shape[j];
          }
        }
        idx.push_back(src);
      }
      nc.setOutput(0, gatherFlat(*o->known, idx, shapeOut));
      return success();
    }
  }
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  VTensorType out =
      VTensorType::getFromDims(nc.ctx(), dims, typeOf(*v).getElementType());
  if (!out)
    return nc.error("expanded shape " + dimsStr(dims) + " is not valid");
  if (out == typeOf(*v)) {
    nc.setOutput(0, *v);
    return success();
  }
  nc.setOutput(0, nc.b().create<ExpandOp>(nc.loc, out, *v).getResult());
  return success();
}

LogicalResult importConcat(NodeContext &nc) {
  auto axisAttr = nc.intAttr("axis");
  if (!axisAttr)
    return nc.error("missing 'axis'");
  bool known = true;
  for (size_t i = 0; i < nc.numInputs(); ++i)
    known &= nc.hasInput(i) && nc.input(i).isKnown() &&
             nc.input(i).known->shape.size() == 1;
  if (known && nc.numInputs() > 0) {
    KnownTensor out = *nc.input(0).known;
    for (size_t i = 1; i < nc.numInputs(); ++i) {
      const KnownTensor &t = *nc.input(i).known;
      out.ints.insert(out.ints.end(), t.ints.begin(), t.ints.end());
      out.floats.insert(out.floats.end(), t.floats.begin(), t.floats.end());
      out.shape[0] += t.shape[0];
    }
    nc.setOutput(0, std::move(out));
    return success();
  }
  SmallVector<Value> vals;
  for (size_t i = 0; i < nc.numInputs(); ++i) {
    auto v = nc.runtime(i);
    if (failed(v))
      return failure();
    // ONNX allows empty inputs; they contribute nothing.
    if (typeOf(*v).getNumElements() == SymInt(0))
      continue;
    vals.push_back(*v);
  }
  if (vals.empty())
    return nc.error("all inputs are empty");
  int64_t axis = nc.normalizeAxis(*axisAttr, typeOf(vals[0]).getRank());
  if (vals.size() == 1) {
    nc.setOutput(0, vals[0]);
    return success();
  }
  return setResult(nc, nc.create<ConcatOp>(ValueRange(vals), axis));
}

LogicalResult importGather(NodeContext &nc) {
  auto data = operand(nc, 0);
  if (failed(data))
    return failure();
  int64_t rank = data->dims.size();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(0), rank);
  if (axis < 0 || axis >= rank)
    return nc.error("axis out of range");
  ImportValue &idx = nc.input(1);
  if (data->known && idx.isKnown()) {
    const KnownTensor &d = *data->known;
    auto ids = staticInts(nc, *idx.known, "indices");
    if (failed(ids))
      return failure();
    int64_t outer = 1, inner = 1, n = d.shape[axis];
    for (int64_t i = 0; i < axis; ++i)
      outer *= d.shape[i];
    for (int64_t i = axis + 1; i < rank; ++i)
      inner *= d.shape[i];
    std::vector<int64_t> flat, shape(d.shape.begin(), d.shape.begin() + axis);
    shape.insert(shape.end(), idx.known->shape.begin(),
                 idx.known->shape.end());
    shape.insert(shape.end(), d.shape.begin() + axis + 1, d.shape.end());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k : *ids) {
        if (k < -n || k >= n)
          return nc.error("index " + Twine(k) + " out of range for size " +
                          Twine(n));
        k = k < 0 ? k + n : k;
        for (int64_t in = 0; in < inner; ++in)
          flat.push_back((o * n + k) * inner + in);
      }
    nc.setOutput(0, gatherFlat(d, flat, shape));
    return success();
  }
  // nn.Embedding(padding_idx) through varuna.export's metadata: the lookup
  // passes no gradient to the padding row.
  std::optional<int64_t> pad;
  if (axis == 0 && nc.input(0).isParam())
    pad = nc.importer.paddingIdxOf(nc.input(0).param);
  auto v = nc.runtime(0), i = nc.runtime(1);
  if (failed(v) || failed(i))
    return failure();
  return setResult(nc, nc.create<GatherOp>(
                           *v, *i, axis,
                           pad ? nc.b().getI64IntegerAttr(*pad) : IntegerAttr()));
}

LogicalResult importGatherElements(NodeContext &nc) {
  auto v = nc.runtime(0), i = nc.runtime(1);
  if (failed(v) || failed(i))
    return failure();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(0),
                                  typeOf(*v).getRank());
  return setResult(nc, nc.create<GatherElementsOp>(*v, *i, axis));
}

LogicalResult importSlice(NodeContext &nc) {
  auto data = operand(nc, 0);
  auto starts = nc.knownInput(1, "starts");
  auto ends = nc.knownInput(2, "ends");
  if (failed(data) || failed(starts) || failed(ends))
    return failure();
  int64_t rank = data->dims.size(), n = starts->numel();
  if (ends->numel() != n)
    return nc.error("starts and ends differ in length");
  std::vector<int64_t> axes, steps(n, 1);
  if (nc.hasInput(3)) {
    auto s = staticIntsInput(nc, 3, "axes");
    if (failed(s))
      return failure();
    axes = *s;
  } else {
    for (int64_t i = 0; i < n; ++i)
      axes.push_back(i);
  }
  if (nc.hasInput(4)) {
    auto s = staticIntsInput(nc, 4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  }
  if (static_cast<int64_t>(axes.size()) != n ||
      static_cast<int64_t>(steps.size()) != n)
    return nc.error("axes/steps length differs from starts");

  // Each (axis, start, end, step) with batch-independent bounds.
  struct Cut { int64_t axis, start, end, step; };
  SmallVector<Cut> cuts;
  for (int64_t i = 0; i < n; ++i) {
    int64_t axis = nc.normalizeAxis(axes[i], rank);
    if (axis < 0 || axis >= rank)
      return nc.error("axis out of range");
    if (steps[i] == 0)
      return nc.error("slice step is 0");
    SymInt st = starts->intAt(i), en = ends->intAt(i), size = data->dims[axis];
    if (!size.isStatic()) {
      // Only the whole batch dimension can be taken.
      bool whole = st == SymInt(0) && steps[i] == 1 &&
                   (en == size || (en.isStatic() && en.constant >= INT32_MAX));
      if (!whole)
        return nc.error("slices the batch-dependent dimension " + Twine(axis) +
                        " (" + st.str() + ":" + en.str() + ")");
      continue;
    }
    if (!st.isStatic() || !en.isStatic())
      return nc.error("slice bounds depend on the batch size");
    int64_t s = st.constant, e = en.constant, d = size.constant;
    if (steps[i] > 0) {
      s = std::clamp<int64_t>(s < 0 ? s + d : s, 0, d);
      e = std::clamp<int64_t>(e < 0 ? e + d : e, 0, d);
    } else {
      // ONNX: negative steps clamp start to [0, d-1] and end to [-1, d-1].
      s = std::clamp<int64_t>(s < 0 ? s + d : s, 0, d - 1);
      e = std::clamp<int64_t>(e < 0 ? e + d : e, -1, d - 1);
    }
    if (s == 0 && e == d && steps[i] == 1)
      continue;
    cuts.push_back({axis, s, e, steps[i]});
  }
  if (data->known) {
    KnownTensor t = *data->known;
    for (const Cut &c : cuts) {
      int64_t outer = 1, inner = 1, d = t.shape[c.axis];
      for (int64_t i = 0; i < c.axis; ++i)
        outer *= t.shape[i];
      for (size_t i = c.axis + 1; i < t.shape.size(); ++i)
        inner *= t.shape[i];
      std::vector<int64_t> flat, picked;
      for (int64_t k = c.start; c.step > 0 ? k < c.end : k > c.end;
           k += c.step)
        picked.push_back(k);
      int64_t count = picked.size();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k : picked)
          for (int64_t in = 0; in < inner; ++in)
            flat.push_back((o * d + k) * inner + in);
      std::vector<int64_t> shape = t.shape;
      shape[c.axis] = count;
      t = gatherFlat(t, flat, shape);
    }
    nc.setOutput(0, std::move(t));
    return success();
  }
  Value v = data->value;
  for (const Cut &c : cuts) {
    // A negative step (torch.flip, x[::-1]) gathers the indices it picks.
    if (c.step < 0) {
      SmallVector<int64_t> picked;
      for (int64_t k = c.start; k > c.end; k += c.step)
        picked.push_back(k);
      auto g = Decomposer(nc.b(), nc.loc).gatherIndices(v, c.axis, picked);
      if (failed(g))
        return failure();
      v = *g;
      continue;
    }
    auto r = nc.create<SliceOp>(v, c.axis, c.start, c.end, c.step);
    if (failed(r))
      return failure();
    v = *r;
  }
  nc.setOutput(0, v);
  return success();
}

/// DepthToSpace (modes DCR and CRD: torch's pixel_shuffle) and
/// SpaceToDepth: reshape to six dimensions, transpose, reshape.
LogicalResult importDepthToSpace(NodeContext &nc) {
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  SmallVector<SymInt> d = typeOf(*v).getDims();
  int64_t f = nc.intAttr("blocksize").value_or(0);
  bool depthToSpace = nc.node.op_type() == "DepthToSpace";
  std::string mode = nc.stringAttr("mode").value_or("DCR");
  if (d.size() != 4 || !d[1].isStatic() || !d[2].isStatic() ||
      !d[3].isStatic() || f < 1)
    return nc.error("expected an input [N, C, H, W] with static C, H, W and "
                    "a positive blocksize");
  if (mode != "DCR" && mode != "CRD")
    return nc.error("unknown mode '" + mode + "'");
  int64_t c = d[1].constant, h = d[2].constant, w = d[3].constant;
  if (depthToSpace ? c % (f * f) != 0 : (h % f != 0 || w % f != 0))
    return nc.error("blocksize " + Twine(f) + " does not divide the input");
  SmallVector<SymInt> split, merged;
  SmallVector<int64_t> perm;
  SymInt F(f);
  if (depthToSpace) {
    SymInt cc(c / (f * f));
    if (mode == "DCR") {
      split = {d[0], F, F, cc, d[2], d[3]};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      split = {d[0], cc, F, F, d[2], d[3]};
      perm = {0, 1, 4, 2, 5, 3};
    }
    merged = {d[0], cc, SymInt(h * f), SymInt(w * f)};
  } else {
    split = {d[0], d[1], SymInt(h / f), F, SymInt(w / f), F};
    perm = {0, 3, 5, 1, 2, 4};
    merged = {d[0], SymInt(c * f * f), SymInt(h / f), SymInt(w / f)};
  }
  auto a = reshapeTo(nc, *v, split);
  if (failed(a))
    return failure();
  auto t = nc.create<TransposeOp>(*a, ArrayRef<int64_t>(perm));
  if (failed(t))
    return failure();
  return setResult(nc, reshapeTo(nc, *t, merged));
}

/// Resize. Nearest by integer factors of the spatial dimensions
/// (F.interpolate(mode="nearest"), nn.Upsample): each element repeated,
/// through a new axis of 1 after the dimension, expanded and merged; with an
/// integer factor, the coordinate modes torch exports (asymmetric + floor,
/// (pytorch_)half_pixel + round_prefer_floor/ceil) all pick floor(i /
/// factor). Linear and cubic (bilinear, bicubic, ...): a constant matrix per
/// resized dimension (Decomposer::resize) for the coordinate modes
/// half_pixel, pytorch_half_pixel, align_corners and asymmetric. Other
/// modes, non-integer nearest factors, exclude_outside, antialias and the
/// opset-18 `axes` are refused with what they are.
LogicalResult importResize(NodeContext &nc) {
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  std::string mode = nc.stringAttr("mode").value_or("nearest");
  std::string coord =
      nc.stringAttr("coordinate_transformation_mode").value_or("half_pixel");
  std::string nearest =
      nc.stringAttr("nearest_mode").value_or("round_prefer_floor");
  if (nc.intAttr("antialias").value_or(0) != 0)
    return nc.error("antialiased resizing is not supported");
  if (nc.intsAttr("axes"))
    return nc.error("the 'axes' attribute is not supported (give scales or "
                    "sizes for every dimension)");
  SmallVector<SymInt> d = typeOf(*v).getDims();
  int64_t rank = d.size();
  std::vector<int64_t> sizes(rank, -1);
  std::vector<double> scales(rank, 0.0);
  // Opsets 11-12 give an empty scales tensor next to sizes.
  FailureOr<KnownTensor> givenScales = failure();
  if (nc.hasInput(2)) {
    givenScales = nc.knownInput(2, "scales");
    if (failed(givenScales))
      return failure();
  }
  if (succeeded(givenScales) &&
      (givenScales->numel() != 0 || !nc.hasInput(3))) {
    if (givenScales->numel() != rank)
      return nc.error("expected " + Twine(rank) + " scales");
    for (int64_t i = 0; i < rank; ++i) {
      scales[i] = givenScales->floatAt(i);
      if (scales[i] <= 0)
        return nc.error("scale " + std::to_string(scales[i]) +
                        " for dimension " + Twine(i));
      if (scales[i] != 1.0 && d[i].isStatic())
        sizes[i] = static_cast<int64_t>(
            std::floor(static_cast<double>(d[i].constant) * scales[i]));
    }
  } else if (nc.hasInput(3)) {
    auto given = nc.knownInput(3, "sizes");
    if (failed(given))
      return failure();
    if (given->numel() != rank)
      return nc.error("expected " + Twine(rank) + " sizes");
    for (int64_t i = 0; i < rank; ++i) {
      SymInt out = given->intAt(i);
      if (out == d[i])
        continue;
      if (!out.isStatic())
        return nc.error("resizing dimension " + Twine(i) + " from " +
                        d[i].str() + " to " + out.str());
      sizes[i] = out.constant;
    }
  } else {
    return nc.error("neither scales nor sizes given");
  }
  for (int64_t i = 0; i < rank; ++i)
    if (!d[i].isStatic() &&
        (sizes[i] >= 0 || (scales[i] != 0 && scales[i] != 1)))
      return nc.error("resizing the batch-dependent dimension " + Twine(i));

  if (mode == "linear" || mode == "cubic") {
    auto c = llvm::StringSwitch<std::optional<ResizeCoordinates>>(coord)
                 .Case("half_pixel", ResizeCoordinates::halfPixel)
                 .Case("pytorch_half_pixel",
                       ResizeCoordinates::pytorchHalfPixel)
                 .Case("align_corners", ResizeCoordinates::alignCorners)
                 .Case("asymmetric", ResizeCoordinates::asymmetric)
                 .Default(std::nullopt);
    if (!c)
      return nc.error("coordinate_transformation_mode '" + coord +
                      "' is not supported for " + mode + " resizing");
    if (nc.intAttr("exclude_outside").value_or(0) != 0)
      return nc.error("exclude_outside=1 is not supported");
    SmallVector<ResizeAxis> axes;
    for (int64_t i = 0; i < rank; ++i)
      if (sizes[i] >= 0)
        axes.push_back({i, sizes[i], scales[i]});
    double a = nc.floatAttr("cubic_coeff_a").value_or(-0.75);
    return setResult(nc, Decomposer(nc.b(), nc.loc)
                             .resize(*v, axes,
                                     mode == "cubic" ? ResizeMode::cubic
                                                     : ResizeMode::linear,
                                     *c, a));
  }
  bool floorPick = coord == "asymmetric" && nearest == "floor";
  bool roundPick = (coord == "half_pixel" || coord == "pytorch_half_pixel") &&
                   (nearest == "round_prefer_floor" ||
                    nearest == "round_prefer_ceil");
  if (mode != "nearest" || !(floorPick || roundPick))
    return nc.error("resizing with mode '" + mode +
                    "', coordinate_transformation_mode '" + coord +
                    "', nearest_mode '" + nearest +
                    "' is not supported (nearest by integer factors, "
                    "linear and cubic are)");
  Value cur = *v;
  for (int64_t i = 0; i < rank; ++i) {
    if (sizes[i] < 0 || sizes[i] == d[i].constant)
      continue;
    int64_t in = d[i].constant;
    if (sizes[i] % in != 0 || (scales[i] != 0 && scales[i] != sizes[i] / in))
      return nc.error("resizing dimension " + Twine(i) + " from " +
                      Twine(in) + " to " + Twine(sizes[i]) +
                      " (nearest: only integer factors are supported)");
    int64_t factor = sizes[i] / in;
    SmallVector<SymInt> spread(d);
    spread.insert(spread.begin() + i + 1, SymInt(1));
    auto one = reshapeTo(nc, cur, spread);
    if (failed(one))
      return failure();
    spread[i + 1] = SymInt(factor);
    VTensorType et = VTensorType::getFromDims(nc.ctx(), spread,
                                              typeOf(cur).getElementType());
    Value expanded = nc.b().create<ExpandOp>(nc.loc, et, *one);
    d[i] = SymInt(sizes[i]);
    auto merged = reshapeTo(nc, expanded, d);
    if (failed(merged))
      return failure();
    cur = *merged;
  }
  nc.setOutput(0, cur);
  return success();
}

/// Sequences, as far as static graphs use them (torch exports tensor_split
/// and some unbinds as SplitToSequence + SequenceAt): SplitToSequence with
/// known split sizes, SequenceConstruct, SequenceAt and SequenceLength at
/// known positions, ConcatFromSequence. The sequence is a list of the
/// tensors; nothing is built for it.
LogicalResult importSequence(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  auto seqInput = [&]() -> const std::vector<Value> * {
    const ImportValue &v = nc.input(0);
    return v.sequence ? &*v.sequence : nullptr;
  };
  if (op == "SequenceConstruct") {
    ImportValue out;
    out.sequence.emplace();
    for (size_t i = 0; i < nc.numInputs(); ++i) {
      auto v = nc.runtime(i);
      if (failed(v))
        return failure();
      out.sequence->push_back(*v);
    }
    nc.setOutput(0, out);
    return success();
  }
  if (op == "SplitToSequence") {
    auto v = nc.runtime(0);
    if (failed(v))
      return failure();
    VTensorType t = typeOf(*v);
    int64_t rank = t.getRank();
    int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(0), rank);
    if (axis < 0 || axis >= rank || !t.getDim(axis).isStatic())
      return nc.error("the split axis must be in range and not the batch "
                      "dimension");
    int64_t size = t.getDim(axis).constant;
    std::vector<int64_t> sizes;
    bool squeeze = false;
    if (nc.hasInput(1)) {
      auto known = nc.knownInput(1, "split");
      auto split = failed(known) ? FailureOr<std::vector<int64_t>>(failure())
                                 : staticInts(nc, *known, "split");
      if (failed(split))
        return failure();
      if (known->shape.empty()) { // one size: equal pieces
        int64_t each = (*split)[0];
        if (each <= 0)
          return nc.error("split size must be positive");
        for (int64_t o = 0; o < size; o += each)
          sizes.push_back(std::min(each, size - o));
      } else {
        sizes = *split;
      }
    } else {
      sizes.assign(size, 1);
      squeeze = nc.intAttr("keepdims").value_or(1) == 0;
    }
    ImportValue out;
    out.sequence.emplace();
    int64_t at = 0;
    for (int64_t s : sizes) {
      auto piece = nc.create<SliceOp>(*v, axis, at, at + s, int64_t(1));
      if (failed(piece))
        return failure();
      Value p = *piece;
      if (squeeze) {
        SmallVector<SymInt> d = typeOf(p).getDims();
        d.erase(d.begin() + axis);
        auto r = reshapeTo(nc, p, d);
        if (failed(r))
          return failure();
        p = *r;
      }
      out.sequence->push_back(p);
      at += s;
    }
    if (at != size)
      return nc.error("split sizes add up to " + Twine(at) + ", not " +
                      Twine(size));
    nc.setOutput(0, out);
    return success();
  }
  const std::vector<Value> *seq = seqInput();
  if (!seq)
    return nc.error("input 0 is not a sequence");
  int64_t count = seq->size();
  if (op == "SequenceLength") {
    nc.setOutput(0, KnownTensor::ofInts(nc.b().getI64Type(), {}, {SymInt(count)}));
    return success();
  }
  if (op == "SequenceAt") {
    auto pos = staticIntsInput(nc, 1, "position");
    if (failed(pos))
      return failure();
    if (pos->size() != 1)
      return nc.error("position must be one number");
    int64_t p = (*pos)[0] < 0 ? (*pos)[0] + count : (*pos)[0];
    if (p < 0 || p >= count)
      return nc.error("position " + Twine((*pos)[0]) +
                      " outside a sequence of " + Twine(count));
    nc.setOutput(0, (*seq)[p]);
    return success();
  }
  // ConcatFromSequence(axis, new_axis)
  if (count == 0)
    return nc.error("concatenating an empty sequence");
  int64_t rank = typeOf((*seq)[0]).getRank();
  bool newAxis = nc.intAttr("new_axis").value_or(0) != 0;
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(0),
                                  rank + (newAxis ? 1 : 0));
  if (axis < 0 || axis > rank - (newAxis ? 0 : 1))
    return nc.error("axis out of range");
  SmallVector<Value> parts;
  for (Value v : *seq) {
    if (!newAxis) {
      parts.push_back(v);
      continue;
    }
    SmallVector<SymInt> d = typeOf(v).getDims();
    d.insert(d.begin() + axis, SymInt(1));
    auto r = reshapeTo(nc, v, d);
    if (failed(r))
      return failure();
    parts.push_back(*r);
  }
  if (parts.size() == 1) {
    nc.setOutput(0, parts[0]);
    return success();
  }
  return setResult(nc, nc.create<ConcatOp>(ValueRange(parts), axis));
}

LogicalResult importSplit(NodeContext &nc) {
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  VTensorType t = typeOf(*v);
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(0), t.getRank());
  if (axis < 0 || axis >= t.getRank())
    return nc.error("axis out of range");
  if (!t.getDim(axis).isStatic())
    return nc.error("splits the batch-dependent dimension");
  int64_t size = t.getShape()[axis], outs = nc.node.output_size();
  std::vector<int64_t> sizes;
  if (nc.hasInput(1)) {
    auto s = staticIntsInput(nc, 1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (auto a = nc.intsAttr("split")) {
    sizes = *a;
  } else {
    int64_t parts = nc.intAttr("num_outputs").value_or(outs);
    int64_t chunk = (size + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::min(chunk, size - i * chunk));
  }
  if (static_cast<int64_t>(sizes.size()) != outs)
    return nc.error("split sizes do not match the " + Twine(outs) +
                    " outputs");
  int64_t start = 0;
  for (int64_t i = 0; i < outs; ++i) {
    auto r = nc.create<SliceOp>(*v, axis, start, start + sizes[i], 1);
    if (failed(r))
      return failure();
    nc.setOutput(i, *r);
    start += sizes[i];
  }
  if (start != size)
    return nc.error("split sizes add up to " + Twine(start) + ", not " +
                    Twine(size));
  return success();
}

/// A known tensor with its dimensions permuted (result dim i = input dim
/// perm[i]).
KnownTensor permuteKnown(const KnownTensor &t, ArrayRef<int64_t> perm) {
  int64_t rank = t.shape.size();
  std::vector<int64_t> outShape, inStrides(rank, 1);
  for (int64_t i = rank - 2; i >= 0; --i)
    inStrides[i] = inStrides[i + 1] * t.shape[i + 1];
  for (int64_t p : perm)
    outShape.push_back(t.shape[p]);
  std::vector<int64_t> flat;
  for (int64_t f = 0, n = t.numel(); f < n; ++f) {
    int64_t rem = f, src = 0;
    for (int64_t i = rank - 1; i >= 0; --i) {
      int64_t coord = rem % outShape[i];
      rem /= outShape[i];
      src += coord * inStrides[perm[i]];
    }
    flat.push_back(src);
  }
  return gatherFlat(t, flat, outShape);
}

LogicalResult importTranspose(NodeContext &nc) {
  ImportValue &in = nc.input(0);
  int64_t rank = in.isKnown() ? int64_t(in.known->shape.size()) : -1;
  std::vector<int64_t> perm;
  if (in.isKnown()) {
    if (auto p = nc.intsAttr("perm"))
      perm = *p;
    else
      for (int64_t i = rank - 1; i >= 0; --i)
        perm.push_back(i);
    std::vector<int64_t> sorted = perm;
    llvm::sort(sorted);
    for (int64_t i = 0; i < rank; ++i)
      if (static_cast<int64_t>(sorted.size()) != rank || sorted[i] != i)
        return nc.error("perm is not a permutation of the input's dims");
    nc.setOutput(0, permuteKnown(*in.known, perm));
    return success();
  }
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  rank = typeOf(*v).getRank();
  if (auto p = nc.intsAttr("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  return setResult(nc, nc.create<TransposeOp>(*v, perm));
}

LogicalResult importConstantOfShape(NodeContext &nc) {
  auto shape = nc.knownInput(0, "shape");
  if (failed(shape))
    return failure();
  Type et = nc.b().getF32Type();
  double fval = 0;
  int64_t ival = 0;
  if (auto *a = nc.attr("value")) {
    et = convertElementType(nc.ctx(), a->t().data_type());
    if (!et)
      return nc.error("unsupported fill type");
    InitializerData d;
    d.proto = &a->t();
    auto k = nc.importer.file().readKnown(d, et, nc.loc);
    if (failed(k) || k->numel() != 1)
      return nc.error("the fill value must have one element");
    fval = k->floatAt(0);
    ival = k->intAt(0).constant;
  }
  SmallVector<SymInt> dims;
  for (int64_t i = 0; i < shape->numel(); ++i)
    dims.push_back(shape->intAt(i));
  bool isStatic = llvm::all_of(dims, [](SymInt d) { return d.isStatic(); });
  if (isStatic) {
    int64_t n = elements(dims).constant;
    if (n <= kMaxKnownElements) {
      std::vector<int64_t> s;
      for (SymInt d : dims)
        s.push_back(d.constant);
      if (et.isa<FloatType>())
        nc.setOutput(0, KnownTensor::ofFloats(et, s,
                                              std::vector<double>(n, fval)));
      else
        nc.setOutput(0, KnownTensor::ofInts(et, s,
                                            std::vector<SymInt>(n, ival)));
      return success();
    }
  }
  VTensorType t = VTensorType::getFromDims(nc.ctx(), dims, et);
  if (!t)
    return nc.error("shape " + dimsStr(dims) + " is not valid");
  Attribute value = et.isa<FloatType>()
                        ? Attribute(nc.b().getFloatAttr(et, fval))
                        : Attribute(nc.b().getIntegerAttr(et, ival));
  nc.setOutput(0, nc.b().create<FullOp>(nc.loc, t, value).getResult());
  return success();
}

LogicalResult importRange(NodeContext &nc) {
  auto start = nc.knownInput(0, "start"), limit = nc.knownInput(1, "limit"),
       delta = nc.knownInput(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  Type et = start->elementType;
  if (start->isFloat()) {
    double s = start->floatAt(0), l = limit->floatAt(0), d = delta->floatAt(0);
    if (d == 0)
      return nc.error("delta is zero");
    int64_t n = std::max<int64_t>(0, std::ceil((l - s) / d));
    if (n > kMaxKnownElements)
      return nc.error("range too long to evaluate");
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(s + i * d);
    nc.setOutput(0, KnownTensor::ofFloats(et, {n}, v));
    return success();
  }
  SymInt s = start->intAt(0), l = limit->intAt(0), d = delta->intAt(0);
  if (!d.isStatic() || d.constant == 0)
    return nc.error("delta must be a non-zero fixed number");
  if (s.isStatic() && l.isStatic()) {
    int64_t n = std::max<int64_t>(
        0, (l.constant - s.constant + d.constant - (d.constant > 0 ? 1 : -1)) /
               d.constant);
    if (n <= kMaxKnownElements) {
      std::vector<SymInt> v;
      for (int64_t i = 0; i < n; ++i)
        v.push_back(s.constant + i * d.constant);
      nc.setOutput(0, KnownTensor::ofInts(et, {n}, v));
      return success();
    }
  }
  auto n = (l - s).divExact(d);
  if (!s.isStatic() || !n)
    return nc.error("range length (" + l.str() + " - " + s.str() + ") / " +
                    d.str() + " is not a valid size");
  VTensorType t = VTensorType::getFromDims(nc.ctx(), {*n}, et);
  if (!t)
    return nc.error("range length " + n->str() + " is not a valid size");
  nc.setOutput(0, nc.b()
                      .create<ArangeOp>(nc.loc, t,
                                        nc.b().getF64FloatAttr(s.constant),
                                        nc.b().getF64FloatAttr(d.constant))
                      .getResult());
  return success();
}

/// EyeLike(x, k, dtype): ones on the k-th diagonal of a matrix of x's
/// (static) shape, of `dtype` or x's element type -- what torch.eye(n)
/// exports as. x's values are not read.
LogicalResult importEyeLike(NodeContext &nc) {
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  VTensorType t = typeOf(*v);
  if (t.getRank() != 2 || !t.getDim(0).isStatic() || !t.getDim(1).isStatic())
    return nc.error("the input must be a matrix of fixed size, not of "
                    "shape " + dimsStr(t.getDims()));
  Type et = t.getElementType();
  if (auto dt = nc.intAttr("dtype")) {
    et = convertElementType(nc.ctx(), static_cast<int>(*dt));
    if (!et)
      return nc.error("unsupported dtype " + std::to_string(*dt));
  }
  int64_t rows = t.getDim(0).constant, cols = t.getDim(1).constant;
  int64_t k = nc.intAttr("k").value_or(0);
  if (rows * cols > kMaxKnownElements)
    return nc.error("a " + std::to_string(rows) + " x " +
                    std::to_string(cols) + " identity is too large");
  std::vector<double> ones(rows * cols, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    if (i + k >= 0 && i + k < cols)
      ones[i * cols + i + k] = 1.0;
  if (et.isa<FloatType>()) {
    nc.setOutput(0, KnownTensor::ofFloats(et, {rows, cols}, ones));
  } else {
    std::vector<SymInt> ints;
    for (double x : ones)
      ints.push_back(SymInt(static_cast<int64_t>(x)));
    nc.setOutput(0, KnownTensor::ofInts(et, {rows, cols}, ints));
  }
  return success();
}

LogicalResult importTrilu(NodeContext &nc) {
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  int64_t k = 0;
  if (nc.hasInput(1)) {
    auto kk = nc.knownInput(1, "k");
    if (failed(kk))
      return failure();
    auto s = staticInts(nc, *kk, "k");
    if (failed(s) || s->size() != 1)
      return nc.error("k must be one fixed number");
    k = (*s)[0];
  }
  bool upper = nc.intAttr("upper").value_or(1) != 0;
  return setResult(nc, nc.create<TriluOp>(*v, k, upper));
}

LogicalResult importPad(NodeContext &nc) {
  std::string mode = nc.stringAttr("mode").value_or("constant");
  auto indexed = llvm::StringSwitch<std::optional<PadMode>>(mode)
                     .Case("reflect", PadMode::reflect)
                     .Case("edge", PadMode::edge)
                     .Case("wrap", PadMode::wrap)
                     .Default(std::nullopt);
  if (mode != "constant" && !indexed)
    return nc.error("pad mode '" + mode + "' is not supported (constant, "
                    "reflect, edge and wrap are)");
  auto v = nc.runtime(0);
  auto padsK = nc.knownInput(1, "pads");
  if (failed(v) || failed(padsK))
    return failure();
  auto raw = staticInts(nc, *padsK, "pads");
  if (failed(raw))
    return failure();
  VTensorType t = typeOf(*v);
  int64_t rank = t.getRank();
  std::vector<int64_t> axes;
  if (nc.hasInput(3)) {
    auto s = staticIntsInput(nc, 3, "axes");
    if (failed(s))
      return failure();
    axes = *s;
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  int64_t n = axes.size();
  if (static_cast<int64_t>(raw->size()) != 2 * n)
    return nc.error("expected " + Twine(2 * n) + " pads");
  std::vector<int64_t> pads(2 * rank, 0);
  Value x = *v;
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = nc.normalizeAxis(axes[i], rank);
    if (a < 0 || a >= rank)
      return nc.error("axis out of range");
    int64_t before = (*raw)[i], after = (*raw)[i + n];
    // A negative pad crops (nn.ZeroPad2d((0, 0, 1, -1)), RWKV's time
    // shift): slice it off first, then pad what is positive.
    if (before < 0 || after < 0) {
      SymInt size = t.getDim(a);
      if (!size.isStatic())
        return nc.error("negative pads (cropping) of the batch-dependent "
                        "axis " + Twine(a) + " are not supported");
      int64_t start = std::max<int64_t>(0, -before),
              end = size.constant - std::max<int64_t>(0, -after);
      if (end <= start)
        return nc.error("negative pads " + Twine(before) + ", " +
                        Twine(after) + " crop all " + Twine(size.constant) +
                        " elements of axis " + Twine(a));
      auto cropped = nc.create<SliceOp>(x, a, start, end, int64_t(1));
      if (failed(cropped))
        return failure();
      x = *cropped;
    }
    pads[a] = std::max<int64_t>(0, before);
    pads[a + rank] = std::max<int64_t>(0, after);
  }
  Type et = t.getElementType();
  double fill = 0;
  if (nc.hasInput(2)) {
    auto c = nc.knownInput(2, "constant_value");
    if (failed(c))
      return failure();
    fill = c->isFloat() ? c->floatAt(0) : double(c->intAt(0).constant);
  }
  Attribute value = et.isa<FloatType>()
                        ? Attribute(nc.b().getFloatAttr(et, fill))
                        : Attribute(nc.b().getIntegerAttr(et, int64_t(fill)));
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; })) {
    nc.setOutput(0, x);
    return success();
  }
  if (indexed)
    return setResult(nc,
                     Decomposer(nc.b(), nc.loc).padIndexed(x, pads, *indexed));
  return setResult(nc, nc.create<PadOp>(x, pads, value));
}

LogicalResult importCumSum(NodeContext &nc) {
  auto v = nc.runtime(0);
  auto axisK = nc.knownInput(1, "axis");
  if (failed(v) || failed(axisK))
    return failure();
  auto axis = staticInts(nc, *axisK, "axis");
  if (failed(axis) || axis->size() != 1)
    return nc.error("axis must be one fixed number");
  int64_t a = nc.normalizeAxis((*axis)[0], typeOf(*v).getRank());
  bool exclusive = nc.intAttr("exclusive").value_or(0) != 0;
  bool reverse = nc.intAttr("reverse").value_or(0) != 0;
  return setResult(nc, nc.create<CumsumOp>(*v, a, exclusive, reverse));
}

/// Tile = for each repeated dim: insert a dim, expand it, merge it.
LogicalResult importTile(NodeContext &nc) {
  auto o = operand(nc, 0);
  auto repK = nc.knownInput(1, "repeats");
  if (failed(o) || failed(repK))
    return failure();
  int64_t rank = o->dims.size();
  if (repK->numel() != rank)
    return nc.error("expected " + Twine(rank) + " repeats");
  if (nc.input(0).isKnown() && repK->isStatic()) {
    // Known at import time (split sizes torch computes from shapes): each
    // output element reads input element (out index % input size) per dim.
    const KnownTensor &in = *nc.input(0).known;
    std::vector<int64_t> shape, reps;
    for (int64_t i = 0; i < rank; ++i) {
      reps.push_back(repK->intAt(i).constant);
      shape.push_back(in.shape[i] * reps.back());
    }
    int64_t total = 1;
    for (int64_t d : shape)
      total *= d;
    std::vector<int64_t> indices;
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t rest = flat, src = 0, stride = 1;
      for (int64_t i = rank - 1; i >= 0; --i) {
        int64_t at = rest % shape[i];
        rest /= shape[i];
        src += (at % in.shape[i]) * stride;
        stride *= in.shape[i];
      }
      indices.push_back(src);
    }
    nc.setOutput(0, gatherFlat(in, indices, shape));
    return success();
  }
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  Value cur = *v;
  for (int64_t i = 0; i < rank; ++i) {
    // A repeat may depend on the batch size (alibi.repeat(batch, 1, 1)):
    // then the tiled dimension becomes the batch-dependent one.
    SymInt r = repK->intAt(i);
    if (r == SymInt(1))
      continue;
    if (r.isStatic() ? r.constant < 1 : !r.isBatchMultiple())
      return nc.error("repeat " + r.str() + " is not a positive size");
    SmallVector<SymInt> dims = typeOf(cur).getDims();
    if (!dims[i].isStatic())
      return nc.error("cannot tile the batch-dependent dimension");
    SmallVector<SymInt> withOne(dims);
    withOne.insert(withOne.begin() + i, SymInt(1));
    auto a = reshapeTo(nc, cur, withOne);
    if (failed(a))
      return failure();
    withOne[i] = r;
    VTensorType et = VTensorType::getFromDims(nc.ctx(), withOne,
                                              typeOf(cur).getElementType());
    if (!et)
      return nc.error("tiled shape is not valid (two batch-dependent "
                      "dimensions)");
    Value expanded = nc.b().create<ExpandOp>(nc.loc, et, *a);
    dims[i] = *r.mul(dims[i]);
    auto merged = reshapeTo(nc, expanded, dims);
    if (failed(merged))
      return failure();
    cur = *merged;
  }
  nc.setOutput(0, cur);
  return success();
}

LogicalResult importRandomLike(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  VTensorType t = typeOf(*v);
  if (auto dt = nc.intAttr("dtype")) {
    Type et = convertElementType(nc.ctx(), *dt);
    if (!et || !et.isa<FloatType>())
      return nc.error("random values must be floating-point");
    t = t.withElementType(et);
  }
  if (!t.getElementType().isa<FloatType>())
    return nc.error("random values must be floating-point");
  bool uniform = op == "RandomUniformLike";
  double a = uniform ? nc.floatAttr("low").value_or(0.0f)
                     : nc.floatAttr("mean").value_or(0.0f);
  double b = uniform ? nc.floatAttr("high").value_or(1.0f)
                     : nc.floatAttr("scale").value_or(1.0f);
  nc.setOutput(0, nc.b()
                      .create<RandomOp>(nc.loc, t,
                                        RandomDistributionAttr::get(
                                            nc.ctx(),
                                            uniform
                                                ? RandomDistribution::uniform
                                                : RandomDistribution::normal),
                                        nc.b().getF64FloatAttr(a),
                                        nc.b().getF64FloatAttr(b))
                      .getResult());
  return success();
}

LogicalResult importScatterND(NodeContext &nc) {
  std::string red = nc.stringAttr("reduction").value_or("none");
  if (red != "none")
    return nc.error("reduction '" + red + "' is not supported (only none)");
  auto d = nc.runtime(0), i = nc.runtime(1), u = nc.runtime(2);
  if (failed(d) || failed(i) || failed(u))
    return failure();
  return setResult(nc, nc.create<ScatterNDOp>(*d, *i, *u));
}

} // namespace

OpImporter onnx_import::lookupShapeOpImporter(StringRef op) {
  return llvm::StringSwitch<OpImporter>(op)
      .Case("Reshape", importReshape)
      .Case("Flatten", importFlatten)
      .Case("Squeeze", importSqueeze)
      .Case("Unsqueeze", importUnsqueeze)
      .Case("Expand", importExpand)
      .Case("Concat", importConcat)
      .Case("Gather", importGather)
      .Case("GatherElements", importGatherElements)
      .Case("Slice", importSlice)
      .Case("Split", importSplit)
      .Case("Transpose", importTranspose)
      .Case("ConstantOfShape", importConstantOfShape)
      .Case("EyeLike", importEyeLike)
      .Case("Range", importRange)
      .Case("Trilu", importTrilu)
      .Case("Pad", importPad)
      .Case("ScatterND", importScatterND)
      .Case("CumSum", importCumSum)
      .Case("Tile", importTile)
      .Cases("DepthToSpace", "SpaceToDepth", importDepthToSpace)
      .Case("Resize", importResize)
      .Cases("SplitToSequence", "SequenceConstruct", "SequenceAt",
             "SequenceLength", "ConcatFromSequence", importSequence)
      .Cases("RandomUniformLike", "RandomNormalLike", importRandomLike)
      .Default(nullptr);
}
