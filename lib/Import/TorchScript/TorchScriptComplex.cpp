//===- TorchScriptComplex.cpp - Complex tensors
//----------------------------===//
//
// Complex tensors (complex64 / complex128), as rotary position embeddings
// in LLaMA's reference code use them:
//
//   xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
//   xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
//
// with freqs_cis a complex buffer made by torch.polar. A complex tensor is
// imported as a real tensor with a trailing axis of 2 (real, imaginary) --
// view_as_real's layout, so view_as_complex and view_as_real move no data
// -- and marked TSValue::complex. Complex buffers and constants are read the
// same way (their bytes are that layout). Every node that reads a complex
// value (or makes one) comes here from convertNode:
//
//  - by formula over the two parts: view_as_complex, view_as_real, polar,
//    complex, real, imag, conj (resolve_conj, resolve_neg: no-ops), abs,
//    exp, and mul of two complex tensors;
//  - through the op's own handler, once on the real parts and once on the
//    imaginary parts, the two results stacked into a complex value: ops that
//    only move, pick or add up elements (view, reshape, slice, select,
//    unsqueeze, transpose, permute, cat, stack, sum, mean, flatten, ...; size
//    and dim read the real part's), add and sub (a real operand joins the
//    real part), mul by a real tensor or number and div by one;
//  - to / type_as another complex type: the value as it is (complex128 is
//    not narrowed to complex64);
//  - anything else (in place, div by a complex tensor, a conversion to a
//    real dtype, which in torch drops the imaginary part): an error naming
//    the op.
//
// Complex model inputs and losses are not supported (a graph input's dtype
// must be real: addInputs says so).
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace varuna::ts {

namespace {
/// Ops applied to the real and the imaginary parts separately (see above).
const llvm::StringSet<> &partwiseOps() {
  static const llvm::StringSet<> ops = {
      "view",       "reshape",   "flatten", "unflatten", "unsqueeze",
      "squeeze",    "transpose", "t",       "permute",   "movedim",
      "contiguous", "clone",     "detach",  "expand",    "expand_as",
      "repeat",     "slice",     "select",  "narrow",    "index_select",
      "index",      "cat",       "stack",   "chunk",     "split",
      "unbind",     "flip",      "roll",    "sum",       "mean",
      "cumsum",     "neg",       "size",    "dim",       "numel",
      "add",        "sub",       "rsub",    "mul",       "div"};
  return ops;
}

bool isComplexTensor(const TSValue &v) {
  if (v.kind == K::Tensor)
    return v.complex;
  if (v.kind == K::List)
    return llvm::any_of(v.list, isComplexTensor);
  return false;
}
} // namespace

bool TSImporter::touchesComplex(Node *n) {
  // prim:: nodes (lists, tuples) carry values without reading them.
  if (!n->kind().is_aten())
    return false;
  StringRef op = n->kind().toUnqualString();
  if (op == "view_as_complex" || op == "polar" || op == "complex")
    return true;
  return llvm::any_of(n->inputs(),
                      [&](JitValue *v) { return isComplexTensor(lookup(v)); });
}

FailureOr<Value> TSImporter::complexTensor(const TSValue &v, Location loc) {
  if (v.tensor)
    return v.tensor;
  return readParam(v.param, loc);
}

LogicalResult TSImporter::convertComplex(Node *n, Location loc, StringRef op) {
  bool inplace = op.ends_with("_") && !op.ends_with("__");
  if (inplace)
    return error(n, loc) << "in-place '" << op
                         << "' on a complex tensor is not supported (write "
                            "x = x op y)";
  // Part k (0 real, 1 imaginary) of a complex tensor value: its slice of
  // the trailing axis, without that axis.
  auto part = [&](Value c, int64_t k) -> FailureOr<Value> {
    SmallVector<SymInt> dims = dimsOf(c);
    auto s = sliceOf(c, dims.size() - 1, SymInt(k), SymInt(k + 1), 1, loc, n);
    if (failed(s))
      return failure();
    dims.pop_back();
    return reshape(*s, dims, loc);
  };
  // The complex value with parts re and im (same shape).
  auto complexOf = [&](FailureOr<Value> re,
                       FailureOr<Value> im) -> FailureOr<TSValue> {
    if (failed(re) || failed(im))
      return failure();
    SmallVector<SymInt> dims = dimsOf(*re);
    if (dims != dimsOf(*im))
      return error(n, loc) << "the real and imaginary parts have different "
                              "shapes, "
                           << dimsStr(dims) << " and " << dimsStr(dimsOf(*im)),
             failure();
    dims.push_back(SymInt(1));
    Type et = tensorType(*re).getElementType();
    auto r = reshape(*re, dims, loc);
    auto i = reshape(cast(*im, et, loc), dims, loc);
    if (failed(r) || failed(i))
      return failure();
    auto c =
        make<ConcatOp>(loc, {*r, *i}, {i64("axis", int64_t(dims.size()) - 1)});
    if (failed(c))
      return failure();
    TSValue out = TSValue::ofTensor(*c);
    out.complex = true;
    return out;
  };
  auto fromParts = [&](FailureOr<Value> re,
                       FailureOr<Value> im) -> LogicalResult {
    auto c = complexOf(re, im);
    if (failed(c))
      return failure();
    bind(n->output(), *c);
    return success();
  };
  // Operand i: a complex tensor's two parts; fails unless it is one.
  auto parts = [&](unsigned i) -> FailureOr<std::pair<Value, Value>> {
    TSValue *v = operand(n, i);
    if (!v || !isComplexTensor(*v) || v->kind != K::Tensor)
      return operandError(n, i, loc, "a complex tensor");
    auto c = complexTensor(*v, loc);
    if (failed(c))
      return failure();
    auto re = part(*c, 0), im = part(*c, 1);
    if (failed(re) || failed(im))
      return failure();
    return std::make_pair(*re, *im);
  };
  auto realTensor = [&](unsigned i) -> FailureOr<Value> {
    TSValue *v = operand(n, i);
    if (v && isComplexTensor(*v))
      return operandError(n, i, loc, "a real tensor");
    return tensorArg(n, i, loc);
  };

  if (op == "view_as_complex") {
    auto x = realTensor(0);
    if (failed(x))
      return failure();
    SmallVector<SymInt> dims = dimsOf(*x);
    if (dims.empty() || dims.back() != SymInt(2) ||
        !isFloatType(tensorType(*x).getElementType()))
      return error(n, loc) << "view_as_complex takes a floating-point tensor "
                              "whose last dimension is 2, not "
                           << dimsStr(dims);
    TSValue out = TSValue::ofTensor(*x);
    out.complex = true;
    bind(n->output(), out);
    return success();
  }
  if (op == "view_as_real") {
    auto c = complexTensor(lookup(n->input(0)), loc);
    if (failed(parts(0)) || failed(c)) // checks it is complex
      return failure();
    bindTensor(n->output(), *c);
    return success();
  }
  if (op == "polar" || op == "complex") {
    auto a = realTensor(0), t = realTensor(1);
    if (failed(a) || failed(t))
      return failure();
    if (op == "complex")
      return fromParts(a, t);
    MathBuilder m{*this, loc, tensorType(*a).getElementType()};
    return fromParts(m.bin<MulOp>(*a, m.un(UnaryKind::cos, *t)),
                     m.bin<MulOp>(*a, m.un(UnaryKind::sin, *t)));
  }
  if (op == "real" || op == "imag" || op == "conj" || op == "_conj" ||
      op == "conj_physical" || op == "resolve_conj" || op == "resolve_neg" ||
      op == "abs" || op == "exp") {
    auto p = parts(0);
    if (failed(p))
      return failure();
    auto [re, im] = *p;
    MathBuilder m{*this, loc, tensorType(re).getElementType()};
    if (op == "real" || op == "imag")
      return bindResult(n, op == "real" ? re : im);
    if (op == "resolve_conj" || op == "resolve_neg") {
      bind(n->output(), lookup(n->input(0)));
      return success();
    }
    if (op == "abs")
      return bindResult(
          n, m.un(UnaryKind::sqrt,
                  m.bin<AddOp>(m.bin<MulOp>(re, re), m.bin<MulOp>(im, im))));
    if (op == "exp") {
      auto e = m.un(UnaryKind::exp, re);
      return fromParts(m.bin<MulOp>(e, m.un(UnaryKind::cos, im)),
                       m.bin<MulOp>(e, m.un(UnaryKind::sin, im)));
    }
    return fromParts(re, m.un(UnaryKind::neg, im)); // conj
  }
  bool bothComplex = n->inputs().size() >= 2 &&
                     isComplexTensor(lookup(n->input(0))) &&
                     isComplexTensor(lookup(n->input(1)));
  if (op == "mul" && bothComplex) {
    auto x = parts(0), y = parts(1);
    if (failed(x) || failed(y))
      return failure();
    auto [a, b] = *x;
    auto [c, d] = *y;
    MathBuilder m{*this, loc, tensorType(a).getElementType()};
    return fromParts(m.bin<SubOp>(m.bin<MulOp>(a, c), m.bin<MulOp>(b, d)),
                     m.bin<AddOp>(m.bin<MulOp>(a, d), m.bin<MulOp>(b, c)));
  }
  if (op == "div" && n->inputs().size() >= 2 &&
      isComplexTensor(lookup(n->input(1))))
    return error(n, loc) << "division by a complex tensor is not supported "
                            "(multiply by its conjugate over its squared "
                            "abs)";
  if (op == "to" || op == "type_as") {
    // The target: another tensor's type, or a dtype (None: a device only).
    // Between complex types the value stays as it is.
    bool toComplex = true;
    c10::TypePtr t1 = n->inputs().size() > 1 ? n->input(1)->type() : nullptr;
    if (op == "type_as" || (t1 && t1->cast<c10::TensorType>())) {
      toComplex = isComplexTensor(lookup(n->input(1)));
    } else if (t1) {
      auto isDevice = [](const c10::TypePtr &t) {
        return t->kind() == c10::TypeKind::DeviceObjType;
      };
      bool device =
          isDevice(t1) ||
          (t1->kind() == c10::TypeKind::OptionalType &&
           isDevice(t1->castRaw<c10::OptionalType>()->getElementType()));
      const TSValue *d = operand(n, device ? 2 : 1);
      if (d && d->kind == K::Int && d->i.isStatic())
        toComplex = c10::isComplexType(c10::ScalarType(d->i.constant));
    }
    if (!toComplex)
      return error(n, loc) << "'" << op
                           << "' converts a complex tensor to a real dtype, "
                              "which drops the imaginary part: take .real (or "
                              "torch.view_as_real) instead";
    bind(n->output(), lookup(n->input(0)));
    return success();
  }
  if (!partwiseOps().contains(op))
    return error(n, loc) << "'" << op
                         << "' on a complex tensor is not supported; "
                            "complex tensors may be made by view_as_complex, "
                            "polar or complex, multiplied, added, reshaped, "
                            "sliced and concatenated, and turned back by "
                            "view_as_real, real or imag";

  // Through the op's own handler on each part. Operands are rebound to their
  // parts for the call and restored after; a real operand of add / sub
  // joins the real part only.
  bool additive = op == "add" || op == "sub" || op == "rsub";
  llvm::SmallVector<JitValue *> inputs;
  for (JitValue *v : n->inputs())
    if (!llvm::is_contained(inputs, v))
      inputs.push_back(v);
  llvm::SmallVector<TSValue> saved;
  for (JitValue *v : inputs)
    saved.push_back(lookup(v));
  std::function<FailureOr<TSValue>(const TSValue &, int64_t)> partOf =
      [&](const TSValue &v, int64_t k) -> FailureOr<TSValue> {
    if (v.kind == K::List) {
      TSValue out = v;
      for (TSValue &e : out.list) {
        auto p = partOf(e, k);
        if (failed(p))
          return failure();
        e = *p;
      }
      return out;
    }
    if (v.kind != K::Tensor || !v.complex)
      return v;
    auto c = complexTensor(v, loc);
    if (failed(c))
      return failure();
    auto p = part(*c, k);
    if (failed(p))
      return failure();
    return TSValue::ofTensor(*p);
  };
  llvm::SmallVector<llvm::SmallVector<TSValue>> results(2);
  auto it = handlers.find(("aten::" + op).str());
  if (it == handlers.end())
    return error(n, loc) << "unsupported TorchScript op 'aten::" << op << "'";
  for (int64_t k = 0; k < 2; ++k) {
    LogicalResult ok = success();
    for (auto [v, s] : llvm::zip(inputs, saved)) {
      // The 1 of add(x, y, alpha=1) is no tensor: only operands 0 and 1 of
      // add / sub are parts.
      bool operandOfSum = additive && (v == n->input(0) || v == n->input(1));
      if (additive && k == 1 && operandOfSum && !isComplexTensor(s))
        bind(v, TSValue::ofFloat(0));
      else if (auto p = partOf(s, k); succeeded(p))
        bind(v, *p);
      else
        ok = failure();
    }
    if (succeeded(ok))
      ok = (this->*(it->second))(n, loc);
    for (auto [v, s] : llvm::zip(inputs, saved))
      bind(v, s);
    if (failed(ok))
      return failure();
    for (JitValue *o : n->outputs())
      results[k].push_back(lookup(o));
  }
  // Outputs: tensors (or lists of them) become complex again; anything else
  // (a size) is the real part's.
  std::function<FailureOr<TSValue>(const TSValue &, const TSValue &)> join =
      [&](const TSValue &re, const TSValue &im) -> FailureOr<TSValue> {
    if (re.kind == K::List) {
      TSValue out = re;
      for (auto [e, f] : llvm::zip(out.list, im.list)) {
        auto j = join(e, f);
        if (failed(j))
          return failure();
        e = *j;
      }
      return out;
    }
    if (re.kind != K::Tensor)
      return re;
    return complexOf(asTensor(re, Type(), loc, n),
                     asTensor(im, Type(), loc, n));
  };
  for (auto [o, re, im] : llvm::zip(n->outputs(), results[0], results[1])) {
    auto j = join(re, im);
    if (failed(j))
      return failure();
    bind(o, *j);
  }
  return success();
}

} // namespace varuna::ts
