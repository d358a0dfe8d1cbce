//===- TorchScriptOperands.cpp - Operand access and building blocks -------===//
//
// Typed access to a node's operands (each failure is a diagnostic naming the
// node and operand), scalar materialization, casts and reshapes.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

//===----------------------------------------------------------------------===//
// Operand access
//===----------------------------------------------------------------------===//

FailureOr<Value> TSImporter::asTensor(const TSValue &v, Type like,
                                      Location loc, Node *n) {
  switch (v.kind) {
  case K::Tensor:
    if (v.rowsSorted && !sortedRowsOk)
      return error(n, loc)
                 << "this tensor's rows are sorted across the examples (by a "
                    "sort of one value per example, as "
                    "pack_padded_sequence(enforce_sorted=False) does); only "
                    "pack_padded_sequence, the recurrent layers over the "
                    "packed sequence, pad_packed_sequence and index_select "
                    "by the unsorting indices may use it",
             failure();
    if (v.selectMask) // convertNode sends nodes that read one elsewhere
      return error(n, loc) << "a tensor selected by a boolean mask is used "
                              "as a whole one",
             failure();
    if (v.complex) // convertNode sends nodes that read one elsewhere
      return error(n, loc) << "a complex tensor is used as a real one",
             failure();
    if (v.tensor)
      return v.tensor;
    return readParam(v.param, loc);
  case K::Int:
    if (!v.i.isStatic())
      return error(n, loc) << "the batch-dependent size " << v.i.str()
                           << " is used as a tensor value; only shapes may "
                              "depend on the batch size (each micro-batch "
                              "has its own; a mean times the batch size is "
                              "a sum: write .sum(), and a division by "
                              "x.shape[0] is taken as a mean)",
             failure();
    return scalarConstant(static_cast<double>(v.i.constant),
                          like ? like : b().getI64Type(), loc);
  case K::Float:
    return scalarConstant(v.f, like ? like : b().getF32Type(), loc);
  case K::Bool:
    return scalarConstant(v.b, like ? like : b().getI1Type(), loc);
  case K::MaskIndex:
    return error(n, loc) << "an index from torch.where(mask) / "
                            "nonzero(as_tuple=True) (as many as the mask "
                            "selects, a number the data decides) is used as "
                            "a tensor; only x[torch.where(mask)] (as x[mask]) "
                            "is supported",
           failure();
  case K::BatchOrder:
    return error(n, loc) << "the order of a sort across the examples "
                            "(pack_padded_sequence(enforce_sorted=False)'s "
                            "sorted or unsorted indices) may only be used by "
                            "index_select along the batch dimension",
           failure();
  default:
    return error(n, loc) << "expected a tensor operand", failure();
  }
}

LogicalResult TSImporter::operandError(Node *n, unsigned i, Location loc,
                                       StringRef what) {
  error(n, loc) << "operand " << i << " is not " << what;
  return failure();
}

FailureOr<int64_t> TSImporter::normIndex(Node *n, int64_t v, int64_t size,
                                         Location loc, StringRef what) {
  int64_t r = normAxis(v, size);
  if (r < 0)
    return error(n, loc) << what << " " << v << " out of range", failure();
  return r;
}

FailureOr<Value> TSImporter::tensorArg(Node *n, unsigned i, Location loc) {
  TSValue *v = operand(n, i);
  if (!v)
    return error(n, loc) << "missing operand " << i, failure();
  if (v->kind != K::Tensor && !v->scalarTensor && v->kind != K::BatchOrder)
    return operandError(n, i, loc, "a tensor");
  return asTensor(*v, Type(), loc, n);
}

FailureOr<SymInt> TSImporter::symIntArg(Node *n, unsigned i, Location loc) {
  if (TSValue *v = operand(n, i)) {
    if (v->kind == K::Int)
      return v->i;
    if (v->kind == K::Bool)
      return SymInt(v->b ? 1 : 0);
  }
  return operandError(n, i, loc, "a known integer");
}

FailureOr<int64_t> TSImporter::intArg(Node *n, unsigned i, Location loc) {
  auto v = symIntArg(n, i, loc);
  if (failed(v))
    return failure();
  if (!v->isStatic())
    return error(n, loc) << "operand " << i << " is the batch-dependent size "
                         << v->str() << " where a constant is needed",
           failure();
  return v->constant;
}

FailureOr<double> TSImporter::floatArg(Node *n, unsigned i, Location loc) {
  if (TSValue *v = operand(n, i)) {
    if (v->kind == K::Float)
      return v->f;
    if (v->kind == K::Int && v->i.isStatic())
      return static_cast<double>(v->i.constant);
    if (v->kind == K::Bool)
      return v->b ? 1.0 : 0.0;
  }
  return operandError(n, i, loc, "a known number");
}

FailureOr<bool> TSImporter::boolArg(Node *n, unsigned i, Location loc) {
  if (TSValue *v = operand(n, i)) {
    if (v->kind == K::Bool)
      return v->b;
    if (v->kind == K::Int && v->i.isStatic())
      return v->i.constant != 0;
  }
  return operandError(n, i, loc, "a known bool");
}

FailureOr<std::string> TSImporter::strArg(Node *n, unsigned i, Location loc) {
  TSValue *v = operand(n, i);
  if (v && v->kind == K::Str)
    return v->s;
  return operandError(n, i, loc, "a string");
}

FailureOr<SmallVector<SymInt>> TSImporter::symIntListArg(Node *n, unsigned i,
                                                         Location loc) {
  if (TSValue *v = operand(n, i)) {
    if (v->kind == K::Int)
      return SmallVector<SymInt>{v->i};
    if (v->kind == K::List) {
      SmallVector<SymInt> out;
      for (const TSValue &e : v->list) {
        if (e.kind != K::Int)
          return error(n, loc) << "operand " << i
                               << " has an element that is not a known "
                                  "integer",
                 failure();
        out.push_back(e.i);
      }
      return out;
    }
  }
  return operandError(n, i, loc, "an integer list");
}

FailureOr<SmallVector<int64_t>> TSImporter::intListArg(Node *n, unsigned i,
                                                       Location loc) {
  auto l = symIntListArg(n, i, loc);
  if (failed(l))
    return failure();
  SmallVector<int64_t> out;
  for (SymInt s : *l) {
    if (!s.isStatic())
      return error(n, loc) << "operand " << i
                           << " holds the batch-dependent size " << s.str()
                           << " where constants are needed",
             failure();
    out.push_back(s.constant);
  }
  return out;
}

FailureOr<SmallVector<Value>> TSImporter::tensorListArg(Node *n, unsigned i,
                                                        Location loc) {
  TSValue *v = operand(n, i);
  if (!v || v->kind != K::List)
    return operandError(n, i, loc, "a tensor list");
  SmallVector<Value> out;
  for (const TSValue &e : std::vector<TSValue>(v->list)) {
    auto t = asTensor(e, Type(), loc, n);
    if (failed(t))
      return failure();
    out.push_back(*t);
  }
  return out;
}

FailureOr<Type> TSImporter::dtypeArg(Node *n, unsigned i, Location loc) {
  if (isNoneArg(n, i))
    return Type();
  auto code = intArg(n, i, loc);
  if (failed(code))
    return failure();
  auto t = elementTypeOf(ctx, static_cast<c10::ScalarType>(*code));
  if (failed(t))
    return error(n, loc) << "unsupported dtype "
                         << c10::toString(static_cast<c10::ScalarType>(*code)),
           failure();
  return *t;
}

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

Value TSImporter::scalarConstant(double value, Type elementType,
                                 Location loc) {
  auto shaped = RankedTensorType::get({}, elementType);
  Attribute a;
  if (auto ft = elementType.dyn_cast<FloatType>())
    a = FloatAttr::get(ft, value);
  else if (elementType.isInteger(1))
    a = BoolAttr::get(ctx, value != 0);
  else
    a = IntegerAttr::get(elementType, static_cast<int64_t>(value));
  auto dense = DenseElementsAttr::get(shaped, ArrayRef<Attribute>{a});
  return b().create<ConstantOp>(loc, VTensorType::get(ctx, {}, -1, elementType),
                                dense);
}

FailureOr<VTensorType> TSImporter::typeFromDims(ArrayRef<SymInt> dims,
                                                Type elementType,
                                                Location loc) {
  VTensorType t = VTensorType::getFromDims(ctx, dims, elementType);
  if (!t)
    return emitError(loc) << "shape " << dimsStr(dims)
                          << " cannot be represented: every dimension must "
                             "be static or a multiple of B, and at most one "
                             "may depend on B",
           failure();
  return t;
}

Value TSImporter::cast(Value v, Type elementType, Location loc) {
  VTensorType t = tensorType(v);
  if (t.getElementType() == elementType)
    return v;
  return b().create<CastOp>(loc, t.withElementType(elementType), v);
}

FailureOr<Value> TSImporter::reshape(Value v, ArrayRef<SymInt> dims,
                                     Location loc) {
  VTensorType t = tensorType(v);
  if (t.getDims() == SmallVector<SymInt>(dims.begin(), dims.end()))
    return v;
  auto type = typeFromDims(dims, t.getElementType(), loc);
  if (failed(type))
    return failure();
  if (t.getNumElements() != type->getNumElements())
    return emitError(loc) << "cannot reshape " << t << " to "
                          << dimsStr(dims) << ": element counts differ",
           failure();
  return b().create<ReshapeOp>(loc, *type, v).getResult();
}
