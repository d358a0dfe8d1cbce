//===- TorchScriptShapeOps.cpp - View, slice, split, concat ---------------===//
//
// Shapes are lists of SymInt; `-1` in a view is solved symbolically, so
// `x.view(-1, V)` of a [B, 16, V] tensor is [B*16, V]. Slices of the batch
// dimension are only accepted when they keep all of it.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"
#include "varuna/Import/Decompose.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

FailureOr<Value> TSImporter::transpose(Value v, ArrayRef<int64_t> perm,
                                       Location loc) {
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= static_cast<int64_t>(i) == p;
  if (identity)
    return v;
  return make<TransposeOp>(loc, {v},
                           {attr("perm", b().getDenseI64ArrayAttr(perm))});
}

FailureOr<Value> TSImporter::swapDims(Value v, int64_t a, int64_t c,
                                      Location loc) {
  int64_t rank = tensorType(v).getRank();
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[a], perm[c]);
  return transpose(v, perm, loc);
}

/// Python slice bounds of a dimension of `size`: a negative bound counts
/// from the end, an end past the size (or "to the end") is the size; both
/// then clamped to [0, size]. Null unless size and bounds are static.
static std::optional<std::pair<int64_t, int64_t>>
staticBounds(SymInt start, SymInt end, SymInt size) {
  if (!size.isStatic() || !start.isStatic() || !end.isStatic())
    return std::nullopt;
  auto norm = [&](int64_t v) {
    if (v < 0)
      v += size.constant;
    return std::clamp<int64_t>(v, 0, size.constant);
  };
  return std::make_pair(norm(start.constant), norm(end.constant));
}

FailureOr<Value> TSImporter::sliceOf(Value v, int64_t axis, SymInt start,
                                     SymInt end, int64_t step, Location loc,
                                     Node *n) {
  SymInt size = tensorType(v).getDim(axis);
  constexpr int64_t big = std::numeric_limits<int64_t>::max() / 2;
  if (end.isStatic() && end.constant >= big)
    end = size;
  if (start.isStatic() && start.constant < 0)
    start = start + size;
  if (end.isStatic() && end.constant < 0)
    end = end + size;
  if (step == 1 && start == SymInt(0) && end == size)
    return v;
  if (!size.isStatic())
    return error(n, loc) << "slicing the batch-dependent dimension " << axis
                         << " (size " << size.str() << ") is not supported",
           failure();
  auto bounds = staticBounds(start, end, size);
  if (!bounds)
    return error(n, loc) << "slice bounds depend on the batch size",
           failure();
  if (step <= 0)
    return error(n, loc) << "slice step must be positive", failure();
  auto [s, e] = *bounds;
  if (step == 1 && s == 0 && e == size.constant)
    return v;
  return make<SliceOp>(loc, {v},
                       {i64("axis", axis), i64("start", s), i64("end", e),
                        i64("step", step)});
}

/// Operand 1 as a shape: the dims of that tensor when `ofTensor` (view_as,
/// expand_as...), else an integer list.
static FailureOr<SmallVector<SymInt>>
shapeArg(TSImporter &imp, TSImporter::Node *n, Location loc, bool ofTensor) {
  if (!ofTensor)
    return imp.symIntListArg(n, 1, loc);
  auto other = imp.tensorArg(n, 1, loc);
  if (failed(other))
    return failure();
  return dimsOf(*other);
}

/// The product of the entries of `dims` other than -1, and the index of the
/// -1 entry (-1 for none; the last one, or with `unique` an error for a
/// second one). A product not affine in B is the error `notAffine`.
static FailureOr<std::pair<SymInt, int64_t>>
productBesidesMinusOne(TSImporter &imp, TSImporter::Node *n, Location loc,
                       ArrayRef<SymInt> dims, bool unique,
                       StringRef notAffine) {
  SymInt known = 1;
  int64_t inferred = -1;
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d == SymInt(-1)) {
      if (unique && inferred >= 0)
        return imp.error(n, loc) << "more than one -1 in the shape", failure();
      inferred = i;
      continue;
    }
    auto m = known.mul(d);
    if (!m)
      return imp.error(n, loc) << notAffine, failure();
    known = *m;
  }
  return std::make_pair(known, inferred);
}

LogicalResult TSImporter::hView(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  std::string op = opName(n);
  auto shape = shapeArg(*this, n, loc, op == "view_as" || op == "reshape_as");
  if (failed(shape))
    return failure();
  SmallVector<SymInt> dims = *shape;
  auto prod = productBesidesMinusOne(*this, n, loc, dims, /*unique=*/true,
                                     "the shape's product is not affine in B");
  if (failed(prod))
    return failure();
  auto [known, inferred] = *prod;
  if (inferred >= 0) {
    auto q = tensorType(*x).getNumElements().divExact(known);
    if (!q) {
      InFlightDiagnostic d = error(n, loc)
                             << "cannot infer the -1 dimension: "
                             << tensorType(*x).getNumElements().str()
                             << " elements are not divisible by "
                             << known.str();
      // B*8 into rows of 16: rows would hold parts of several examples
      // (consecutive examples as pairs), which micro-batches cannot split.
      if (!tensorType(*x).getNumElements().isStatic() && known.isStatic())
        d << " (the reshape would put elements of several examples into "
             "one row, e.g. pairing consecutive examples: each example must "
             "stay whole in the batch dimension, so group the examples "
             "before the model, in the data)";
      return failure();
    }
    dims[inferred] = *q;
  }
  return bindResult(n, reshape(*x, dims, loc));
}

LogicalResult TSImporter::hFlatten(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto s = intArg(n, 1, loc), e = intArg(n, 2, loc);
  if (failed(x) || failed(s) || failed(e))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  if (dims.empty())
    return bindResult(n, reshape(*x, {SymInt(1)}, loc));
  int64_t start = normAxis(*s, dims.size()), end = normAxis(*e, dims.size());
  if (start < 0 || end < 0 || start > end)
    return error(n, loc) << "bad flatten range [" << *s << ", " << *e << "]";
  std::optional<SymInt> prod =
      product(ArrayRef<SymInt>(dims).slice(start, end - start + 1));
  if (!prod)
    return error(n, loc) << "flattened size is not affine in B";
  SmallVector<SymInt> out(dims.begin(), dims.begin() + start);
  out.push_back(*prod);
  out.append(dims.begin() + end + 1, dims.end());
  return bindResult(n, reshape(*x, out, loc));
}

LogicalResult TSImporter::hUnflatten(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  auto sizes = symIntListArg(n, 2, loc);
  if (failed(x) || failed(d) || failed(sizes))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  int64_t axis = normAxis(*d, dims.size());
  if (axis < 0)
    return error(n, loc) << "dimension out of range";
  SmallVector<SymInt> parts = *sizes;
  auto prod = productBesidesMinusOne(*this, n, loc, parts, /*unique=*/false,
                                     "sizes are not affine in B");
  if (failed(prod))
    return failure();
  auto [known, inferred] = *prod;
  if (inferred >= 0) {
    auto q = dims[axis].divExact(known);
    if (!q)
      return error(n, loc) << "cannot infer the -1 size";
    parts[inferred] = *q;
  }
  SmallVector<SymInt> out(dims.begin(), dims.begin() + axis);
  out.append(parts.begin(), parts.end());
  out.append(dims.begin() + axis + 1, dims.end());
  return bindResult(n, reshape(*x, out, loc));
}

LogicalResult TSImporter::hUnsqueeze(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  if (failed(x) || failed(d))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  auto axis = normIndex(n, *d, dims.size() + 1, loc);
  if (failed(axis))
    return failure();
  dims.insert(dims.begin() + *axis, SymInt(1));
  return bindResult(n, reshape(*x, dims, loc));
}

LogicalResult TSImporter::hSqueeze(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  SmallVector<int64_t> axes;
  if (n->inputs().size() == 1) {
    for (auto [i, d] : llvm::enumerate(dims))
      if (d == SymInt(1))
        axes.push_back(i);
  } else {
    auto l = intListArg(n, 1, loc);
    if (failed(l))
      return failure();
    for (int64_t a : *l) {
      auto axis = normIndex(n, a, dims.size(), loc);
      if (failed(axis))
        return failure();
      if (dims[*axis] == SymInt(1))
        axes.push_back(*axis);
    }
  }
  SmallVector<SymInt> out;
  for (auto [i, d] : llvm::enumerate(dims))
    if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
      out.push_back(d);
  return bindResult(n, reshape(*x, out, loc));
}

LogicalResult TSImporter::hExpand(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  auto shape = shapeArg(*this, n, loc, opName(n) == "expand_as");
  if (failed(shape))
    return failure();
  SmallVector<SymInt> sizes = *shape;
  SmallVector<SymInt> dims = dimsOf(*x);
  if (sizes.size() < dims.size())
    return error(n, loc) << "expand to fewer dimensions than the input has";
  size_t lead = sizes.size() - dims.size();
  for (size_t i = lead; i < sizes.size(); ++i)
    if (sizes[i] == SymInt(-1))
      sizes[i] = dims[i - lead];
  VTensorType t = tensorType(*x);
  auto type = typeFromDims(sizes, t.getElementType(), loc);
  if (failed(type))
    return failure();
  if (*type == t)
    return bindResult(n, *x);
  return bindResult(n, b().create<ExpandOp>(loc, *type, *x).getResult());
}

LogicalResult TSImporter::hTranspose(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  int64_t a = 0, c = 1;
  if (opName(n) == "t") {
    if (rank < 2)
      return bindResult(n, *x);
  } else {
    auto d0 = intArg(n, 1, loc), d1 = intArg(n, 2, loc);
    if (failed(d0) || failed(d1))
      return failure();
    a = normAxis(*d0, rank);
    c = normAxis(*d1, rank);
    if (a < 0 || c < 0)
      return error(n, loc) << "dimension out of range for rank " << rank;
  }
  return bindResult(n, swapDims(*x, a, c, loc));
}

LogicalResult TSImporter::hPermute(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto l = intListArg(n, 1, loc);
  if (failed(x) || failed(l))
    return failure();
  int64_t rank = tensorType(*x).getRank();
  SmallVector<int64_t> perm;
  for (int64_t p : *l) {
    auto a = normIndex(n, p, rank, loc);
    if (failed(a))
      return failure();
    perm.push_back(*a);
  }
  return bindResult(n, transpose(*x, perm, loc));
}

LogicalResult TSImporter::hSlice(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  auto step = intArg(n, 4, loc);
  if (failed(x) || failed(d) || failed(step))
    return failure();
  auto axis = normIndex(n, *d, tensorType(*x).getRank(), loc);
  if (failed(axis))
    return failure();
  auto start = optArg(n, 2, loc, &TSImporter::symIntArg, SymInt(0));
  if (failed(start))
    return failure();
  auto end = optArg(n, 3, loc, &TSImporter::symIntArg,
                    SymInt(std::numeric_limits<int64_t>::max()));
  if (failed(end))
    return failure();
  auto r = sliceOf(*x, *axis, *start, *end, *step, loc, n);
  if (failed(bindResult(n, r)))
    return failure();
  if (*r == *x)
    recordView(n, {.base = n->input(0), .whole = true});
  else if (*step == 1)
    if (auto bounds =
            staticBounds(*start, *end, tensorType(*x).getDim(*axis)))
      recordView(n, {.base = n->input(0), .axis = *axis,
                     .start = bounds->first, .end = bounds->second});
  return success();
}

LogicalResult TSImporter::hSelect(Node *n, Location loc) {
  if (lookup(n->input(0)).kind == K::PackedSizes) {
    // batch_sizes[0] of a packed sequence: the batch size (nn.LSTM's
    // initial states), a 0-d tensor kept as a number.
    auto d = intArg(n, 1, loc), idx = intArg(n, 2, loc);
    if (failed(d) || failed(idx))
      return failure();
    if (*d != 0 || *idx != 0)
      return error(n, loc) << "of a packed sequence's batch_sizes only "
                              "batch_sizes[0] (the batch size) is supported";
    TSValue size = TSValue::ofInt(lookup(n->input(0)).i);
    size.scalarTensor = true;
    bind(n->output(), size);
    return success();
  }
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc), idx = intArg(n, 2, loc);
  if (failed(x) || failed(d) || failed(idx))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  auto axis = normIndex(n, *d, dims.size(), loc);
  if (failed(axis))
    return failure();
  if (!dims[*axis].isStatic())
    return error(n, loc) << "selecting along the batch-dependent dimension "
                         << *axis << " is not supported";
  auto i = normIndex(n, *idx, dims[*axis].constant, loc, "index");
  if (failed(i))
    return failure();
  auto s = sliceOf(*x, *axis, *i, *i + 1, 1, loc, n);
  if (failed(s))
    return failure();
  dims.erase(dims.begin() + *axis);
  if (failed(bindResult(n, reshape(*s, dims, loc))))
    return failure();
  recordView(n, {.base = n->input(0), .axis = *axis, .start = *i,
                 .end = *i + 1, .select = true});
  return success();
}

LogicalResult TSImporter::hNarrow(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc), s = intArg(n, 2, loc), len = intArg(n, 3, loc);
  if (failed(x) || failed(d) || failed(s) || failed(len))
    return failure();
  int64_t axis = normAxis(*d, tensorType(*x).getRank());
  if (axis < 0)
    return error(n, loc) << "dimension out of range";
  return bindResult(n, sliceOf(*x, axis, *s, *s + *len, 1, loc, n));
}

/// Binds the output list of split/chunk/unbind given the pieces' sizes.
static LogicalResult splitInto(TSImporter &imp, TSImporter::Node *n,
                               Location loc, Value x, int64_t axis,
                               ArrayRef<int64_t> sizes, bool squeeze) {
  TSValue out = TSValue::make(K::List);
  int64_t offset = 0;
  for (int64_t s : sizes) {
    auto piece = imp.sliceOf(x, axis, offset, offset + s, 1, loc, n);
    if (failed(piece))
      return failure();
    Value v = *piece;
    if (squeeze) {
      SmallVector<SymInt> dims = dimsOf(v);
      dims.erase(dims.begin() + axis);
      auto r = imp.reshape(v, dims, loc);
      if (failed(r))
        return failure();
      v = *r;
    }
    out.list.push_back(TSValue::ofTensor(v));
    offset += s;
  }
  imp.bind(n->output(), out);
  return success();
}

LogicalResult TSImporter::hSplit(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 2, loc);
  if (failed(x) || failed(d))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  int64_t axis = normAxis(*d, dims.size());
  if (axis < 0 || !dims[axis].isStatic())
    return error(n, loc) << "split needs a static dimension in range";
  int64_t size = dims[axis].constant;
  SmallVector<int64_t> sizes;
  TSValue arg = lookup(n->input(1));
  if (arg.kind == K::List) {
    auto l = intListArg(n, 1, loc);
    if (failed(l))
      return failure();
    sizes = *l;
  } else {
    auto s = intArg(n, 1, loc);
    if (failed(s) || *s <= 0)
      return failed(s) ? failure()
                       : (error(n, loc) << "split size must be positive");
    for (int64_t o = 0; o < size; o += *s)
      sizes.push_back(std::min(*s, size - o));
  }
  return splitInto(*this, n, loc, *x, axis, sizes, false);
}

/// tensor_split(x, sections | indices, dim): `sections` pieces, the first
/// size % sections of them one longer; or cut at the listed indices.
LogicalResult TSImporter::hTensorSplit(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = optArg(n, 2, loc, &TSImporter::intArg, int64_t(0));
  if (failed(x) || failed(d))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  int64_t axis = normAxis(*d, dims.size());
  if (axis < 0 || !dims[axis].isStatic())
    return error(n, loc) << "tensor_split needs a static dimension in range";
  int64_t size = dims[axis].constant;
  SmallVector<int64_t> sizes;
  if (lookup(n->input(1)).kind == K::List) {
    auto cuts = intListArg(n, 1, loc);
    if (failed(cuts))
      return failure();
    int64_t at = 0;
    for (int64_t c : *cuts) {
      int64_t e = std::clamp<int64_t>(c < 0 ? c + size : c, at, size);
      sizes.push_back(e - at);
      at = e;
    }
    sizes.push_back(size - at);
  } else {
    auto k = intArg(n, 1, loc);
    if (failed(k) || *k <= 0)
      return failed(k) ? failure()
                       : (error(n, loc) << "sections must be positive");
    for (int64_t i = 0; i < *k; ++i)
      sizes.push_back(size / *k + (i < size % *k ? 1 : 0));
  }
  return splitInto(*this, n, loc, *x, axis, sizes, false);
}

LogicalResult TSImporter::hChunk(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto chunks = intArg(n, 1, loc), d = intArg(n, 2, loc);
  if (failed(x) || failed(chunks) || failed(d))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  int64_t axis = normAxis(*d, dims.size());
  if (axis < 0 || !dims[axis].isStatic() || *chunks <= 0)
    return error(n, loc) << "chunk needs a static dimension in range";
  int64_t size = dims[axis].constant;
  int64_t each = (size + *chunks - 1) / *chunks;
  SmallVector<int64_t> sizes;
  for (int64_t o = 0; o < size; o += each)
    sizes.push_back(std::min(each, size - o));
  return splitInto(*this, n, loc, *x, axis, sizes, false);
}

LogicalResult TSImporter::hUnbind(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  if (failed(x) || failed(d))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  int64_t axis = normAxis(*d, dims.size());
  if (axis < 0 || !dims[axis].isStatic())
    return error(n, loc) << "unbind needs a static dimension in range";
  SmallVector<int64_t> sizes(dims[axis].constant, 1);
  return splitInto(*this, n, loc, *x, axis, sizes, true);
}

/// meshgrid(tensors, indexing="ij"|"xy"): each 1-D input reshaped to its
/// own axis and expanded to the grid [n_0, ..., n_k-1]; "xy" (numpy's
/// default) swaps the first two axes of the grid. A list of tensors.
LogicalResult TSImporter::hMeshgrid(Node *n, Location loc) {
  auto l = tensorListArg(n, 0, loc);
  if (failed(l))
    return failure();
  std::string indexing = "ij";
  if (n->inputs().size() > 1 && !isNoneArg(n, 1)) {
    auto s = strArg(n, 1, loc);
    if (failed(s))
      return failure();
    indexing = *s;
  }
  if (indexing != "ij" && indexing != "xy")
    return error(n, loc) << "meshgrid indexing '" << indexing
                         << "' (expected 'ij' or 'xy')";
  SmallVector<Value> in(l->begin(), l->end());
  bool xy = indexing == "xy" && in.size() >= 2;
  if (xy)
    std::swap(in[0], in[1]);
  SmallVector<SymInt> grid;
  for (Value v : in) {
    SmallVector<SymInt> dims = dimsOf(v);
    if (dims.size() > 1)
      return error(n, loc) << "meshgrid of a " << dims.size()
                           << "-D tensor (expected 0-D or 1-D)";
    grid.push_back(dims.empty() ? SymInt(1) : dims[0]);
  }
  TSValue out = TSValue::make(K::List);
  for (auto [i, v] : llvm::enumerate(in)) {
    SmallVector<SymInt> own(in.size(), SymInt(1));
    own[i] = grid[i];
    auto r = reshape(v, own, loc);
    if (failed(r))
      return failure();
    auto type = typeFromDims(grid, tensorType(v).getElementType(), loc);
    if (failed(type))
      return failure();
    Value e = *type == tensorType(*r)
                  ? *r
                  : b().create<ExpandOp>(loc, *type, *r).getResult();
    out.list.push_back(TSValue::ofTensor(e));
  }
  if (xy)
    std::swap(out.list[0], out.list[1]);
  bind(n->output(), out);
  return success();
}

/// Binds the concatenation of `inputs` along `axis` (a single input as is).
static LogicalResult concatInto(TSImporter &imp, TSImporter::Node *n,
                                Location loc, ArrayRef<Value> inputs,
                                int64_t axis) {
  if (inputs.size() == 1)
    return imp.bindResult(n, inputs[0]);
  return imp.bindResult(
      n, imp.make<ConcatOp>(loc, inputs, {imp.i64("axis", axis)}));
}

LogicalResult TSImporter::hCat(Node *n, Location loc) {
  auto l = tensorListArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  if (failed(l) || failed(d))
    return failure();
  if (l->empty())
    return error(n, loc) << "concatenation of no tensors";
  // torch.cat skips 1-D empty tensors whatever the others' rank (Hugging
  // Face's key/value cache starts as one: cat(empty, keys, dim=-2)).
  SmallVector<Value> parts;
  for (Value v : *l) {
    SmallVector<SymInt> dims = dimsOf(v);
    if (!(dims.size() == 1 && dims[0] == SymInt(0)))
      parts.push_back(v);
  }
  if (parts.empty())
    return bindResult(n, (*l)[0]);
  auto axis = normIndex(n, *d, tensorType(parts[0]).getRank(), loc);
  if (failed(axis))
    return failure();
  Type elt = tensorType(parts[0]).getElementType();
  SmallVector<Value> inputs;
  for (Value v : parts)
    inputs.push_back(cast(v, elt, loc));
  return concatInto(*this, n, loc, inputs, *axis);
}

/// hstack / vstack (row_stack) / dstack / column_stack: the tensors made
/// at least 1-, 2- or 3-D as torch does, then concatenated.
LogicalResult TSImporter::hStackAlong(Node *n, Location loc) {
  std::string op = opName(n);
  auto l = tensorListArg(n, 0, loc);
  if (failed(l))
    return failure();
  if (l->empty())
    return error(n, loc) << op << " of no tensors";
  SmallVector<Value> inputs;
  int64_t axis = 0;
  for (Value v : *l) {
    SmallVector<SymInt> dims = dimsOf(v), want = dims;
    if (op == "hstack") {
      if (dims.empty())
        want = {SymInt(1)};
    } else if (op == "vstack" || op == "row_stack") {
      if (dims.size() < 2)
        want = {SymInt(1), dims.empty() ? SymInt(1) : dims[0]};
    } else if (op == "dstack") {
      if (dims.empty())
        want = {SymInt(1), SymInt(1), SymInt(1)};
      else if (dims.size() == 1)
        want = {SymInt(1), dims[0], SymInt(1)};
      else if (dims.size() == 2)
        want = {dims[0], dims[1], SymInt(1)};
    } else { // column_stack: vectors become columns
      if (dims.empty())
        want = {SymInt(1), SymInt(1)};
      else if (dims.size() == 1)
        want = {dims[0], SymInt(1)};
    }
    Value cur = v;
    if (want != dims) {
      auto r = reshape(v, want, loc);
      if (failed(r))
        return failure();
      cur = *r;
    }
    inputs.push_back(cur);
  }
  int64_t rank = tensorType(inputs[0]).getRank();
  if (op == "hstack")
    axis = rank == 1 ? 0 : 1;
  else if (op == "dstack")
    axis = 2;
  else if (op == "column_stack")
    axis = 1;
  Type elt = tensorType(inputs[0]).getElementType();
  for (Value &v : inputs)
    v = cast(v, elt, loc);
  return concatInto(*this, n, loc, inputs, axis);
}

LogicalResult TSImporter::hStack(Node *n, Location loc) {
  auto l = tensorListArg(n, 0, loc);
  auto d = intArg(n, 1, loc);
  if (failed(l) || failed(d))
    return failure();
  if (l->empty())
    return error(n, loc) << "stack of no tensors";
  auto axis = normIndex(n, *d, tensorType((*l)[0]).getRank() + 1, loc);
  if (failed(axis))
    return failure();
  SmallVector<Value> inputs;
  for (Value v : *l) {
    SmallVector<SymInt> dims = dimsOf(v);
    dims.insert(dims.begin() + *axis, SymInt(1));
    auto r = reshape(v, dims, loc);
    if (failed(r))
      return failure();
    inputs.push_back(*r);
  }
  return concatInto(*this, n, loc, inputs, *axis);
}

FailureOr<Value> TSImporter::repeatAxis(Node *n, Location loc, Value v,
                                        int64_t i, SymInt r, bool interleave) {
  TSImporter &imp = *this;
  SmallVector<SymInt> dims = dimsOf(v);
  if (r.isStatic() ? r.constant < 1 : !r.isBatchMultiple())
    return imp.error(n, loc) << "repeat " << r.str() << " of dimension " << i
                             << " is not a positive size",
           failure();
  // A batch-dependent dimension repeated a static number of times stays
  // affine (Mixtral's tokens, each repeated top-k times).
  if (!dims[i].isStatic() && !r.isStatic())
    return imp.error(n, loc) << "repeating the batch-dependent dimension "
                             << i << " a batch-dependent number of times",
           failure();
  int64_t at = interleave ? i + 1 : i;
  SmallVector<SymInt> spread(dims);
  spread.insert(spread.begin() + at, SymInt(1));
  auto one = imp.reshape(v, spread, loc);
  if (failed(one))
    return failure();
  spread[at] = r;
  auto type = imp.typeFromDims(spread, tensorType(v).getElementType(), loc);
  if (failed(type))
    return failure();
  Value expanded = imp.b().create<ExpandOp>(loc, *type, *one);
  std::optional<SymInt> merged = r.mul(dims[i]);
  if (!merged)
    return imp.error(n, loc) << "repeated size of dimension " << i
                             << " is not representable",
           failure();
  dims[i] = *merged;
  return imp.reshape(expanded, dims, loc);
}

/// repeat(self, repeats): tiles self; more repeats than dimensions prepend
/// dimensions of 1 (as torch).
LogicalResult TSImporter::hRepeat(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto reps = symIntListArg(n, 1, loc);
  if (failed(x) || failed(reps))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  if (reps->size() < dims.size())
    return error(n, loc) << "repeat needs at least as many repeats ("
                         << reps->size() << ") as the tensor has dimensions ("
                         << dims.size() << ")";
  Value cur = *x;
  if (reps->size() > dims.size()) {
    dims.insert(dims.begin(), reps->size() - dims.size(), SymInt(1));
    auto r = reshape(cur, dims, loc);
    if (failed(r))
      return failure();
    cur = *r;
  }
  for (auto [i, r] : llvm::enumerate(*reps)) {
    if (r == SymInt(1))
      continue;
    auto next = repeatAxis(n, loc, cur, i, r, /*interleave=*/false);
    if (failed(next))
      return failure();
    cur = *next;
  }
  return bindResult(n, cur);
}

/// repeat_interleave(self, repeats: int, dim): each element repeated along
/// dim (a flattened self when dim is None). Per-element repeat counts (a
/// tensor) are data-dependent and refused.
LogicalResult TSImporter::hRepeatInterleave(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  if (n->inputs().size() < 2 || lookup(n->input(1)).kind != K::Int)
    return error(n, loc) << "repeat_interleave with a tensor of repeats is "
                            "data-dependent; only a number of repeats is "
                            "supported";
  SymInt r = lookup(n->input(1)).i;
  Value cur = *x;
  int64_t axis = 0;
  if (isNoneArg(n, 2)) {
    SmallVector<SymInt> dims = dimsOf(cur);
    std::optional<SymInt> all = product(dims);
    if (!all)
      return error(n, loc) << "cannot flatten " << dimsStr(dims);
    auto flat = reshape(cur, {*all}, loc);
    if (failed(flat))
      return failure();
    cur = *flat;
  } else {
    auto d = intArg(n, 2, loc);
    if (failed(d))
      return failure();
    auto a = normIndex(n, *d, tensorType(cur).getRank(), loc);
    if (failed(a))
      return failure();
    axis = *a;
  }
  if (r == SymInt(1))
    return bindResult(n, cur);
  return bindResult(n, repeatAxis(n, loc, cur, axis, r,
                                  /*interleave=*/true));
}

/// broadcast_tensors(tensors): each expanded to their common shape (a list,
/// as torch returns).
FailureOr<SmallVector<Value>>
TSImporter::broadcastValues(Node *n, Location loc, ArrayRef<Value> values) {
  SmallVector<SymInt> shape;
  for (Value v : values) {
    SmallVector<SymInt> dims = dimsOf(v);
    if (dims.size() > shape.size())
      shape.insert(shape.begin(), dims.size() - shape.size(), SymInt(1));
    size_t lead = shape.size() - dims.size();
    for (size_t i = 0; i < dims.size(); ++i) {
      SymInt &s = shape[lead + i];
      if (dims[i] == s || dims[i] == SymInt(1))
        continue;
      if (s != SymInt(1))
        return error(n, loc) << "shapes do not broadcast: " << dimsStr(dims)
                             << " against " << dimsStr(shape),
               failure();
      s = dims[i];
    }
  }
  SmallVector<Value> out;
  for (Value v : values) {
    auto type = typeFromDims(shape, tensorType(v).getElementType(), loc);
    if (failed(type))
      return failure();
    out.push_back(*type == tensorType(v)
                      ? v
                      : b().create<ExpandOp>(loc, *type, v).getResult());
  }
  return out;
}

LogicalResult TSImporter::hBroadcastTensors(Node *n, Location loc) {
  auto ts = tensorListArg(n, 0, loc);
  auto all = failed(ts) ? FailureOr<SmallVector<Value>>(failure())
                        : broadcastValues(n, loc, *ts);
  if (failed(all))
    return failure();
  TSValue out = TSValue::make(K::List);
  for (Value e : *all)
    out.list.push_back(TSValue::ofTensor(e));
  bind(n->output(), out);
  return success();
}

/// pixel_shuffle(x, r): [N, C*r*r, H, W] -> [N, C, H*r, W*r] as reshape to
/// [N, C, r, r, H, W], transpose to [N, C, H, r, W, r], reshape;
/// pixel_unshuffle the inverse. channel_shuffle(x, g) (ShuffleNet):
/// [N, C, *] as [N, g, C/g, *], the two group axes swapped, merged back.
LogicalResult TSImporter::hPixelShuffle(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto r = intArg(n, 1, loc);
  if (failed(x) || failed(r))
    return failure();
  SmallVector<SymInt> d = dimsOf(*x);
  if (StringRef(opName(n)).ends_with("channel_shuffle")) { // or native_
    if (d.size() < 3 || !d[1].isStatic() || *r < 1 || d[1].constant % *r)
      return error(n, loc) << "channel_shuffle needs an input [N, C, *] "
                              "with a static C that "
                           << *r << " groups divide, got " << dimsStr(d);
    SmallVector<SymInt> split = {d[0], SymInt(*r), SymInt(d[1].constant / *r)};
    split.append(d.begin() + 2, d.end());
    auto a = reshape(*x, split, loc);
    auto t = failed(a) ? a : swapDims(*a, 1, 2, loc);
    return bindResult(n, failed(t) ? t : reshape(*t, d, loc));
  }
  bool shuffle = opName(n) == "pixel_shuffle";
  if (d.size() != 4 || !d[1].isStatic() || !d[2].isStatic() ||
      !d[3].isStatic() || *r < 1)
    return error(n, loc) << opName(n)
                         << " needs an input [N, C, H, W] with static C, H, "
                            "W and a positive factor, got "
                         << dimsStr(d) << " and " << *r;
  int64_t c = d[1].constant, h = d[2].constant, w = d[3].constant, f = *r;
  if (shuffle ? c % (f * f) != 0 : (h % f != 0 || w % f != 0))
    return error(n, loc) << opName(n) << " by " << f << " does not divide "
                         << dimsStr(d);
  SmallVector<SymInt> split, merged;
  SmallVector<int64_t> perm;
  if (shuffle) {
    split = {d[0], SymInt(c / (f * f)), SymInt(f), SymInt(f), d[2], d[3]};
    perm = {0, 1, 4, 2, 5, 3};
    merged = {d[0], SymInt(c / (f * f)), SymInt(h * f), SymInt(w * f)};
  } else {
    split = {d[0], d[1], SymInt(h / f), SymInt(f), SymInt(w / f), SymInt(f)};
    perm = {0, 1, 3, 5, 2, 4};
    merged = {d[0], SymInt(c * f * f), SymInt(h / f), SymInt(w / f)};
  }
  auto a = reshape(*x, split, loc);
  auto t = failed(a) ? a : transpose(*a, perm, loc);
  return bindResult(n, failed(t) ? t : reshape(*t, merged, loc));
}

/// The output sizes and scale factors of an upsample_* node over the
/// spatial dimensions of `d` ([N, C, spatial...]): output_size at input
/// `sizeAt`, or the scales from input `scalesAt` on (one list, or one
/// optional float per dimension). Scales are 0 where only sizes are given;
/// sizes from scales are floor(size * scale), as torch computes them.
static LogicalResult upsampleArgs(TSImporter &imp, TSImporter::Node *n,
                                  Location loc, ArrayRef<SymInt> d,
                                  unsigned sizeAt, unsigned scalesAt,
                                  SmallVectorImpl<int64_t> &sizes,
                                  SmallVectorImpl<double> &scales) {
  int64_t spatial = static_cast<int64_t>(d.size()) - 2;
  if (spatial < 1)
    return imp.error(n, loc) << "expected an input [N, C, spatial...], got "
                             << dimsStr(d);
  for (int64_t i = 0; i < spatial; ++i)
    if (!d[i + 2].isStatic())
      return imp.error(n, loc) << "resizing the batch-dependent dimension "
                               << i + 2 << " is not supported";
  if (!imp.isNoneArg(n, sizeAt)) {
    auto given = imp.intListArg(n, sizeAt, loc);
    if (failed(given))
      return failure();
    if (static_cast<int64_t>(given->size()) != spatial)
      return imp.error(n, loc) << "output size has " << given->size()
                               << " entries for " << spatial
                               << " spatial dimensions";
    sizes.assign(given->begin(), given->end());
    scales.assign(spatial, 0.0);
    return success();
  }
  TSValue &s = imp.lookup(n->input(scalesAt));
  if (s.kind == K::List) {
    for (const TSValue &e : s.list)
      scales.push_back(e.kind == K::Float ? e.f
                                          : static_cast<double>(e.i.constant));
  } else {
    for (unsigned i = scalesAt; i < n->inputs().size(); ++i) {
      auto f = imp.optArg(n, i, loc, &TSImporter::floatArg, 0.0);
      if (failed(f))
        return failure();
      scales.push_back(*f);
    }
  }
  if (static_cast<int64_t>(scales.size()) != spatial)
    return imp.error(n, loc) << "expected " << spatial << " scale factors";
  for (int64_t i = 0; i < spatial; ++i) {
    if (scales[i] <= 0)
      return imp.error(n, loc) << "scale factor " << scales[i];
    sizes.push_back(static_cast<int64_t>(
        std::floor(static_cast<double>(d[i + 2].constant) * scales[i])));
  }
  return success();
}

/// upsample_nearestNd(x, output_size, scale_factors) (or per-dim scales):
/// an integer factor per spatial dimension, each element repeated
/// (repeat_interleave). Non-integer factors are refused.
LogicalResult TSImporter::hUpsampleNearest(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  SmallVector<SymInt> d = dimsOf(*x);
  SmallVector<int64_t> sizes;
  SmallVector<double> scales;
  if (failed(upsampleArgs(*this, n, loc, d, 1, 2, sizes, scales)))
    return failure();
  Value cur = *x;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t in = d[i + 2].constant;
    if (sizes[i] % in != 0 || (scales[i] != 0 && scales[i] != sizes[i] / in))
      return error(n, loc) << "nearest upsampling of dimension " << i + 2
                           << " from " << in << " to " << sizes[i]
                           << " is supported only by an integer factor";
    if (sizes[i] == in)
      continue;
    auto next = repeatAxis(n, loc, cur, i + 2, SymInt(sizes[i] / in),
                           /*interleave=*/true);
    if (failed(next))
      return failure();
    cur = *next;
  }
  return bindResult(n, cur);
}

/// upsample_linear1d / bilinear2d / trilinear3d / bicubic2d(x,
/// output_size, align_corners, scale_factors) (or per-dim scales): F.
/// interpolate's linear and cubic modes as a constant matrix per spatial
/// dimension (Decomposer::resize). The antialiased forms are other ops.
LogicalResult TSImporter::hUpsampleInterpolate(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto corners = boolArg(n, 2, loc);
  if (failed(x) || failed(corners))
    return failure();
  if (!isFloatType(tensorType(*x).getElementType()))
    return error(n, loc) << "interpolating an integer tensor";
  SmallVector<SymInt> d = dimsOf(*x);
  SmallVector<int64_t> sizes;
  SmallVector<double> scales;
  if (failed(upsampleArgs(*this, n, loc, d, 1, 3, sizes, scales)))
    return failure();
  SmallVector<ResizeAxis> axes;
  for (size_t i = 0; i < sizes.size(); ++i)
    axes.push_back({static_cast<int64_t>(i) + 2, sizes[i], scales[i]});
  bool cubic = opName(n) == "upsample_bicubic2d";
  return bindResult(
      n, Decomposer(b(), loc)
             .resize(*x, axes, cubic ? ResizeMode::cubic : ResizeMode::linear,
                     *corners ? ResizeCoordinates::alignCorners
                              : ResizeCoordinates::halfPixel));
}

/// Dimension `dim` of `v` normalized, with its size, which must be static
/// ("<what> the batch-dependent dimension ... is not supported").
static FailureOr<std::pair<int64_t, int64_t>>
staticAxis(TSImporter &imp, TSImporter::Node *n, Value v, int64_t dim,
           Location loc, StringRef what) {
  SmallVector<SymInt> d = dimsOf(v);
  auto axis = imp.normIndex(n, dim, d.size(), loc);
  if (failed(axis))
    return failure();
  if (!d[*axis].isStatic())
    return imp.error(n, loc) << what << " the batch-dependent dimension "
                             << *axis << " is not supported",
           failure();
  return std::make_pair(*axis, d[*axis].constant);
}

/// flip(x, dims): per dimension a gather with the reversed indices.
LogicalResult TSImporter::hFlip(Node *n, Location loc) {
  std::string op = opName(n);
  auto x = tensorArg(n, 0, loc);
  // fliplr / flipud: dimension 1 / 0.
  auto dims = op == "flip" ? intListArg(n, 1, loc)
                           : FailureOr<SmallVector<int64_t>>(
                                 SmallVector<int64_t>{op == "fliplr" ? 1 : 0});
  if (failed(x) || failed(dims))
    return failure();
  Value cur = *x;
  for (int64_t dim : *dims) {
    auto at = staticAxis(*this, n, cur, dim, loc, "flipping");
    if (failed(at))
      return failure();
    auto [axis, size] = *at;
    SmallVector<int64_t> reversed;
    for (int64_t i = size - 1; i >= 0; --i)
      reversed.push_back(i);
    auto g = Decomposer(b(), loc).gatherIndices(cur, axis, reversed);
    if (failed(g))
      return failure();
    cur = *g;
  }
  return bindResult(n, cur);
}

/// roll(x, shifts, dims): per dimension the last `shift` elements moved to
/// the front (concat of two slices). Rolling the flattened tensor (no dims)
/// is refused.
LogicalResult TSImporter::hRoll(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto shifts = intListArg(n, 1, loc);
  auto dims = intListArg(n, 2, loc);
  if (failed(x) || failed(shifts) || failed(dims))
    return failure();
  if (dims->empty() || dims->size() != shifts->size())
    return error(n, loc) << "roll needs one dimension per shift (rolling "
                            "the flattened tensor is not supported)";
  Value cur = *x;
  for (auto [shift, dim] : llvm::zip(*shifts, *dims)) {
    auto at = staticAxis(*this, n, cur, dim, loc, "rolling");
    if (failed(at))
      return failure();
    auto [axis, size] = *at;
    int64_t s = size == 0 ? 0 : ((shift % size) + size) % size;
    if (s == 0)
      continue;
    auto tail = sliceOf(cur, axis, size - s, size, 1, loc, n);
    auto head = sliceOf(cur, axis, 0, size - s, 1, loc, n);
    if (failed(tail) || failed(head))
      return failure();
    auto c = make<ConcatOp>(loc, {*tail, *head}, {i64("axis", axis)});
    if (failed(c))
      return failure();
    cur = *c;
  }
  return bindResult(n, cur);
}
