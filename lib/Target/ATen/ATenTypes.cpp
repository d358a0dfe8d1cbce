//===- ATenTypes.cpp - varuna types and data <-> ATen tensors -------------===//

#include "varuna/Target/ATen/ATenEvaluator.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <ATen/ATen.h>

#include <optional>

using namespace mlir;

namespace varuna {

std::optional<at::ScalarType> toScalarType(Type t) {
  if (t.isF16())
    return at::kHalf;
  if (t.isBF16())
    return at::kBFloat16;
  if (t.isF32())
    return at::kFloat;
  if (t.isF64())
    return at::kDouble;
  if (auto it = t.dyn_cast<IntegerType>()) {
    switch (it.getWidth()) {
    case 1:
      return at::kBool;
    case 8:
      return it.isUnsigned() ? at::kByte : at::kChar;
    case 32:
      return it.isUnsigned() ? std::nullopt
                             : std::optional<at::ScalarType>(at::kInt);
    case 64:
      return it.isUnsigned() ? std::nullopt
                             : std::optional<at::ScalarType>(at::kLong);
    default:
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<int64_t> concreteShape(VTensorType type, int64_t batch) {
  std::vector<int64_t> shape;
  for (int64_t i = 0, e = type.getRank(); i < e; ++i)
    shape.push_back(type.getDim(i).at(batch));
  return shape;
}

at::Tensor tensorFromElements(ElementsAttr attr, at::ScalarType dtype) {
  auto dense = attr.dyn_cast<DenseElementsAttr>();
  if (!dense)
    throw ATenEvalError("only dense elements attributes are supported as "
                        "constant values");
  auto type = dense.getType();
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  int64_t n = type.getNumElements();
  Type et = type.getElementType();
  if (auto ft = et.dyn_cast<FloatType>()) {
    std::vector<double> values;
    values.reserve(n);
    for (APFloat v : dense.getValues<APFloat>()) {
      bool lost = false;
      v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v.convertToDouble());
    }
    return at::from_blob(values.data(), shape, at::kDouble).to(dtype).clone();
  }
  if (auto it = et.dyn_cast<IntegerType>()) {
    bool zext = it.isUnsigned() || it.getWidth() == 1;
    std::vector<int64_t> values;
    values.reserve(n);
    for (APInt v : dense.getValues<APInt>())
      values.push_back(zext ? static_cast<int64_t>(v.getZExtValue())
                            : v.getSExtValue());
    return at::from_blob(values.data(), shape, at::kLong).to(dtype).clone();
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "unsupported constant element type " << et;
  throw ATenEvalError(os.str());
}

static at::ScalarType toScalarType(rt::DType t) {
  switch (t) {
  case rt::DType::F16:
    return at::kHalf;
  case rt::DType::F32:
    return at::kFloat;
  case rt::DType::F64:
    return at::kDouble;
  case rt::DType::I8:
    return at::kChar;
  case rt::DType::U8:
    return at::kByte;
  case rt::DType::I16:
    return at::kShort;
  case rt::DType::U16:
    return at::kUInt16;
  case rt::DType::U32:
    return at::kUInt32;
  case rt::DType::I32:
    return at::kInt;
  case rt::DType::I64:
    return at::kLong;
  case rt::DType::Bool:
    return at::kBool;
  }
  return at::kFloat;
}

/// The .npy dtype holding `type` (toScalarType's inverse), if there is one.
static std::optional<rt::DType> npyDType(at::ScalarType type) {
  for (rt::DType d : {rt::DType::F16, rt::DType::F32, rt::DType::F64,
                      rt::DType::I8, rt::DType::U8, rt::DType::I16,
                      rt::DType::U16, rt::DType::I32, rt::DType::U32,
                      rt::DType::I64, rt::DType::Bool})
    if (toScalarType(d) == type)
      return d;
  return std::nullopt;
}

std::string dtypeName(at::ScalarType type) {
  switch (type) {
  case at::kBFloat16:
    return "bfloat16";
  case at::kComplexFloat:
    return "complex64";
  case at::kComplexDouble:
    return "complex128";
  default:
    break;
  }
  if (std::optional<rt::DType> d = npyDType(type))
    return rt::dtypeName(*d);
  return c10::toString(type);
}

at::Tensor tensorFromNpy(const rt::NpyArray &array) {
  // from_blob does not copy: clone into memory the tensor owns.
  return at::from_blob(const_cast<uint8_t *>(array.data.data()), array.shape,
                       toScalarType(array.dtype))
      .clone();
}

rt::NpyArray tensorToNpy(const at::Tensor &tensor) {
  // .npy has no bfloat16: such a tensor is stored as float32, which holds
  // every bf16 value exactly (bf16 parameters failed --dump-params after
  // the whole run).
  if (tensor.scalar_type() == at::kBFloat16)
    return tensorToNpy(tensor.to(at::kFloat));
  std::optional<rt::DType> dtype = npyDType(tensor.scalar_type());
  if (!dtype)
    throw ATenEvalError(std::string("cannot store a tensor of dtype ") +
                        c10::toString(tensor.scalar_type()) + " as .npy");
  rt::NpyArray out;
  out.dtype = *dtype;
  at::Tensor c = tensor.contiguous();
  out.shape.assign(c.sizes().begin(), c.sizes().end());
  auto *p = static_cast<const uint8_t *>(c.data_ptr());
  out.data.assign(p, p + c.numel() * c.element_size());
  return out;
}

} // namespace varuna
