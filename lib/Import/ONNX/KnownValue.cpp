//===- KnownValue.cpp - Import-time evaluation of small tensors -----------===//

#include "KnownValue.h"
#include "llvm/ADT/StringSwitch.h"
#include <cmath>

using namespace mlir;
using namespace varuna;
using namespace varuna::onnx_import;

int64_t KnownTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool KnownTensor::isStatic() const {
  for (const SymInt &v : ints)
    if (!v.isStatic())
      return false;
  return true;
}

KnownTensor KnownTensor::ofInts(Type type, std::vector<int64_t> shape,
                                std::vector<SymInt> values) {
  KnownTensor t;
  t.elementType = type;
  t.shape = std::move(shape);
  t.ints = std::move(values);
  return t;
}

KnownTensor KnownTensor::ofFloats(Type type, std::vector<int64_t> shape,
                                  std::vector<double> values) {
  KnownTensor t;
  t.elementType = type;
  t.shape = std::move(shape);
  t.floats = std::move(values);
  return t;
}

double KnownTensor::floatAt(int64_t i) const {
  return isFloat() ? floats[i] : static_cast<double>(ints[i].constant);
}

SymInt KnownTensor::intAt(int64_t i) const {
  return isFloat() ? SymInt(static_cast<int64_t>(floats[i])) : ints[i];
}

bool onnx_import::isKnownBinary(StringRef op) {
  return llvm::StringSwitch<bool>(op)
      .Cases("Add", "Sub", "Mul", "Div", "Mod", "Pow", true)
      .Cases("Max", "Min", "Equal", "Less", "Greater", true)
      .Cases("LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", true)
      .Default(false);
}

bool onnx_import::isKnownUnary(StringRef op) {
  return llvm::StringSwitch<bool>(op)
      .Cases("Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", true)
      .Cases("Floor", "Ceil", "Not", "Identity", true)
      .Default(false);
}

static std::optional<std::vector<int64_t>>
broadcastShape(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t ia = a.size() - rank + i, ib = b.size() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Flat index into `shape` (right-aligned broadcast) of output index `flat`.
static int64_t sourceIndex(int64_t flat, const std::vector<int64_t> &out,
                           const std::vector<int64_t> &shape) {
  int64_t idx = 0, stride = 1;
  for (int64_t i = out.size() - 1, j = shape.size() - 1; i >= 0; --i, --j) {
    int64_t coord = flat % out[i];
    flat /= out[i];
    if (j >= 0) {
      if (shape[j] != 1)
        idx += coord * stride;
      stride *= shape[j];
    }
  }
  return idx;
}

FailureOr<KnownTensor> onnx_import::evalBinary(StringRef op,
                                               const KnownTensor &a,
                                               const KnownTensor &b,
                                               std::string &error) {
  auto shape = broadcastShape(a.shape, b.shape);
  if (!shape) {
    error = "shapes do not broadcast";
    return failure();
  }
  bool isCompare = llvm::StringSwitch<bool>(op)
                       .Cases("Equal", "Less", "Greater", "LessOrEqual",
                              "GreaterOrEqual", true)
                       .Default(false);
  KnownTensor out;
  out.shape = *shape;
  int64_t n = out.numel();
  MLIRContext *ctx = a.elementType.getContext();
  out.elementType = isCompare ? IntegerType::get(ctx, 1) : a.elementType;
  bool floats = a.isFloat() || b.isFloat();

  for (int64_t i = 0; i < n; ++i) {
    int64_t ia = sourceIndex(i, out.shape, a.shape),
            ib = sourceIndex(i, out.shape, b.shape);
    if (floats) {
      double x = a.floatAt(ia), y = b.floatAt(ib);
      if ((!a.isFloat() && !a.ints[ia].isStatic()) ||
          (!b.isFloat() && !b.ints[ib].isStatic())) {
        error = "a batch-dependent integer is mixed with floating-point values";
        return failure();
      }
      double r;
      if (op == "Add") r = x + y;
      else if (op == "Sub") r = x - y;
      else if (op == "Mul") r = x * y;
      else if (op == "Div") r = x / y;
      else if (op == "Pow") r = std::pow(x, y);
      else if (op == "Max") r = std::max(x, y);
      else if (op == "Min") r = std::min(x, y);
      else if (op == "Mod") r = std::fmod(x, y);
      else if (op == "Equal") r = x == y;
      else if (op == "Less") r = x < y;
      else if (op == "Greater") r = x > y;
      else if (op == "LessOrEqual") r = x <= y;
      else if (op == "GreaterOrEqual") r = x >= y;
      else {
        error = "not defined on floating-point values";
        return failure();
      }
      if (isCompare)
        out.ints.push_back(SymInt(static_cast<int64_t>(r)));
      else
        out.floats.push_back(r);
      continue;
    }
    SymInt x = a.ints[ia], y = b.ints[ib];
    std::optional<SymInt> r;
    auto needStatic = [&]() {
      if (x.isStatic() && y.isStatic())
        return true;
      error = "the result of " + op.str() + "(" + x.str() + ", " + y.str() +
              ") depends on the batch size in a way the graph cannot express";
      return false;
    };
    if (op == "Add") r = x + y;
    else if (op == "Sub") r = x - y;
    else if (op == "Mul") r = x.mul(y);
    else if (op == "Div") r = x.floorDiv(y);
    else if (op == "Mod") r = x.mod(y);
    else if (op == "Equal" || op == "Less" || op == "Greater" ||
             op == "LessOrEqual" || op == "GreaterOrEqual" || op == "Max" ||
             op == "Min") {
      if (x == y) {
        bool eq = op == "Equal" || op == "LessOrEqual" ||
                  op == "GreaterOrEqual";
        r = (op == "Max" || op == "Min") ? x : SymInt(eq ? 1 : 0);
      } else {
        // B >= 1, so B*k + c vs B*k' + c' is decided when the difference
        // has one sign for every B >= 1.
        SymInt d = x - y;
        std::optional<int> sign;
        if (d.isStatic())
          sign = d.constant > 0 ? 1 : (d.constant < 0 ? -1 : 0);
        else if (d.perBatch > 0 && d.perBatch + d.constant > 0)
          sign = 1;
        else if (d.perBatch < 0 && d.perBatch + d.constant < 0)
          sign = -1;
        if (!sign) {
          if (!needStatic())
            return failure();
        }
        int s = *sign;
        if (op == "Equal") r = SymInt(s == 0);
        else if (op == "Less") r = SymInt(s < 0);
        else if (op == "Greater") r = SymInt(s > 0);
        else if (op == "LessOrEqual") r = SymInt(s <= 0);
        else if (op == "GreaterOrEqual") r = SymInt(s >= 0);
        else if (op == "Max") r = s >= 0 ? x : y;
        else r = s <= 0 ? x : y;
      }
    } else if (op == "Pow") {
      if (!needStatic())
        return failure();
      int64_t v = 1;
      for (int64_t k = 0; k < y.constant; ++k)
        v *= x.constant;
      r = SymInt(v);
    } else if (op == "And" || op == "Or" || op == "Xor") {
      if (!needStatic())
        return failure();
      bool p = x.constant != 0, q = y.constant != 0;
      r = SymInt(op == "And" ? (p && q) : op == "Or" ? (p || q) : (p != q));
    }
    if (!r) {
      if (error.empty())
        error = "the result of " + op.str() + "(" + x.str() + ", " + y.str() +
                ") is not affine in the batch size";
      return failure();
    }
    out.ints.push_back(*r);
  }
  return out;
}

FailureOr<KnownTensor> onnx_import::evalUnary(StringRef op,
                                              const KnownTensor &a,
                                              std::string &error) {
  KnownTensor out = a;
  if (op == "Identity")
    return out;
  if (!a.isFloat()) {
    for (SymInt &v : out.ints) {
      if (op == "Neg")
        v = -v;
      else if (op == "Not" && v.isStatic())
        v = SymInt(v.constant == 0);
      else if (op == "Abs" && v.isStatic())
        v = SymInt(std::abs(v.constant));
      else if (op == "Floor" || op == "Ceil")
        continue;
      else {
        error = op.str() + " of integer " + v.str() + " is not supported";
        return failure();
      }
    }
    return out;
  }
  for (double &v : out.floats) {
    if (op == "Neg") v = -v;
    else if (op == "Abs") v = std::fabs(v);
    else if (op == "Sqrt") v = std::sqrt(v);
    else if (op == "Reciprocal") v = 1.0 / v;
    else if (op == "Exp") v = std::exp(v);
    else if (op == "Log") v = std::log(v);
    else if (op == "Floor") v = std::floor(v);
    else if (op == "Ceil") v = std::ceil(v);
    else {
      error = op.str() + " is not defined on floating-point values";
      return failure();
    }
  }
  return out;
}

FailureOr<KnownTensor> onnx_import::evalCast(const KnownTensor &a, Type to,
                                             std::string &error) {
  KnownTensor out;
  out.shape = a.shape;
  out.elementType = to;
  int64_t n = a.numel();
  if (to.isa<FloatType>()) {
    for (int64_t i = 0; i < n; ++i) {
      if (!a.isFloat() && !a.ints[i].isStatic()) {
        error = "casting the batch-dependent value " + a.ints[i].str() +
                " to floating point is not supported";
        return failure();
      }
      out.floats.push_back(a.floatAt(i));
    }
    return out;
  }
  bool toBool = to.isInteger(1);
  for (int64_t i = 0; i < n; ++i) {
    SymInt v = a.intAt(i);
    if (a.isFloat() && toBool)
      v = SymInt(a.floats[i] != 0.0);
    else if (toBool) {
      if (!v.isStatic()) {
        error = "casting a batch-dependent value to bool is not supported";
        return failure();
      }
      v = SymInt(v.constant != 0);
    }
    out.ints.push_back(v);
  }
  return out;
}

KnownTensor onnx_import::gatherFlat(const KnownTensor &a,
                                    ArrayRef<int64_t> indices,
                                    std::vector<int64_t> shape) {
  KnownTensor out;
  out.elementType = a.elementType;
  out.shape = std::move(shape);
  for (int64_t i : indices) {
    if (a.isFloat())
      out.floats.push_back(a.floats[i]);
    else
      out.ints.push_back(a.ints[i]);
  }
  return out;
}
