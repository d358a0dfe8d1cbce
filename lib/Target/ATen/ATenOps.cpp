//===- ATenOps.cpp - The varuna op -> ATen mapping ------------------------===//
//
// One case per varuna op, following the op descriptions in VarunaOps.td
// (training mode; computation in the graph's own dtype, as PyTorch would).
// docs/eval.md has the table; the code generator emits the same calls.
//
//===----------------------------------------------------------------------===//

#include "varuna/Target/ATen/ATenEvaluator.h"

#include "varuna/runtime/Kernels.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <ATen/ATen.h>

#include <limits>

using namespace mlir;

namespace varuna {

namespace {

using Tensors = llvm::ArrayRef<at::Tensor>;

[[noreturn]] void unsupported(const std::string &what) {
  throw ATenEvalError(what);
}

VTensorType resultType(Operation *op) {
  return op->getResult(0).getType().cast<VTensorType>();
}

at::ScalarType resultDType(Operation *op) {
  Type et = resultType(op).getElementType();
  auto st = toScalarType(et);
  if (!st) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "unsupported element type " << et;
    unsupported(os.str());
  }
  return *st;
}

std::vector<int64_t> resultShape(Operation *op, const ATenOpContext &ctx) {
  return concreteShape(resultType(op), ctx.batch);
}

at::TensorOptions resultOptions(Operation *op) {
  return at::TensorOptions().dtype(resultDType(op)).device(at::kCPU);
}

/// A scalar from a float/integer/bool attribute (full, pad values).
at::Scalar scalarFromAttr(Attribute attr) {
  if (auto f = attr.dyn_cast<FloatAttr>())
    return at::Scalar(f.getValueAsDouble());
  if (auto b = attr.dyn_cast<BoolAttr>())
    return at::Scalar(b.getValue());
  if (auto i = attr.dyn_cast<IntegerAttr>()) {
    if (i.getType().isInteger(1))
      return at::Scalar(static_cast<bool>(i.getValue().getBoolValue()));
    if (i.getType().isUnsignedInteger())
      return at::Scalar(static_cast<int64_t>(i.getValue().getZExtValue()));
    return at::Scalar(i.getValue().getSExtValue());
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "unsupported value attribute " << attr;
  unsupported(os.str());
}

/// llvm::ArrayRef -> c10::IntArrayRef (same layout, different class).
c10::IntArrayRef ia(llvm::ArrayRef<int64_t> a) {
  return c10::IntArrayRef(a.data(), a.size());
}

template <typename To, typename From> To code(From v) {
  return static_cast<To>(static_cast<int>(v));
}
// The runtime's op codes mirror the dialect's enum attributes.
static_assert(int(UnaryKind::erfc) == int(rt::Unary::erfc) &&
              int(UnaryKind::stop_gradient) == int(rt::Unary::stop_gradient) &&
              int(UnaryKind::log1p) == int(rt::Unary::log1p) &&
              int(UnaryKind::ceil) == int(rt::Unary::ceil) &&
              int(UnaryKind::logical_not) == int(rt::Unary::logical_not));
static_assert(int(ComparePredicate::ge) == int(rt::Compare::ge));
static_assert(int(ReduceKind::prod) == int(rt::Reduce::prod));
static_assert(int(PoolKind::avg) == int(rt::Pool::avg));
static_assert(int(LossReduction::mean) == int(rt::LossReduction::mean));
static_assert(int(RandomDistribution::normal) == int(rt::Distribution::normal));
static_assert(int(LinalgKind::solve) == int(rt::Linalg::solve));

rt::ElemType elemType(Operation *op) {
  switch (resultDType(op)) {
  case at::kHalf: return rt::ElemType::f16;
  case at::kBFloat16: return rt::ElemType::bf16;
  case at::kFloat: return rt::ElemType::f32;
  case at::kDouble: return rt::ElemType::f64;
  case at::kBool: return rt::ElemType::i1;
  case at::kChar: return rt::ElemType::i8;
  case at::kByte: return rt::ElemType::u8;
  case at::kInt: return rt::ElemType::i32;
  default: return rt::ElemType::i64;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

at::Tensor evaluateOp(Operation *op, Tensors in, ATenOpContext &ctx) {
  return llvm::TypeSwitch<Operation *, at::Tensor>(op)
      // Parameters and constants.
      .Case([&](GetParamOp o) {
        auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
            o, o.getNameAttr());
        if (!param)
          unsupported("no varuna.param named @" + o.getName().str());
        return ctx.getParam(param);
      })
      .Case([&](ConstantOp o) {
        return tensorFromElements(o.getValue(), resultDType(op));
      })
      .Case([&](FullOp o) {
        return at::full(resultShape(op, ctx), scalarFromAttr(o.getValue()),
                        resultOptions(op));
      })
      .Case([&](ArangeOp o) {
        return rt::arangeTensor(elemType(op), resultShape(op, ctx).at(0),
                                o.getStart().convertToDouble(),
                                o.getStep().convertToDouble());
      })
      // Elementwise.
      .Case([&](AddOp) { return rt::binaryKernel(rt::Binary::add, in[0], in[1]); })
      .Case([&](SubOp) { return rt::binaryKernel(rt::Binary::sub, in[0], in[1]); })
      .Case([&](MulOp) { return rt::binaryKernel(rt::Binary::mul, in[0], in[1]); })
      .Case([&](DivOp d) {
        return d->hasAttr(kStepDivisorAttr)
                   ? rt::stepDivideKernel(in[0], in[1])
                   : rt::binaryKernel(rt::Binary::div, in[0], in[1]);
      })
      .Case([&](PowOp) { return rt::binaryKernel(rt::Binary::pow, in[0], in[1]); })
      .Case([&](MaximumOp) {
        return rt::binaryKernel(rt::Binary::maximum, in[0], in[1]);
      })
      .Case([&](MinimumOp) {
        return rt::binaryKernel(rt::Binary::minimum, in[0], in[1]);
      })
      .Case([&](AndOp) {
        return rt::binaryKernel(rt::Binary::logical_and, in[0], in[1]);
      })
      .Case([&](OrOp) {
        return rt::binaryKernel(rt::Binary::logical_or, in[0], in[1]);
      })
      .Case([&](CompareOp o) {
        return rt::compareKernel(code<rt::Compare>(o.getPredicate()), in[0],
                                 in[1]);
      })
      .Case([&](WhereOp) { return at::where(in[0], in[1], in[2]); })
      .Case([&](UnaryOp o) {
        return rt::unaryKernel(code<rt::Unary>(o.getKind()), in[0]);
      })
      .Case([&](CastOp) { return in[0].to(resultDType(op)); })
      .Case([&](DropoutOp o) {
        return rt::dropoutKernel(ctx.generator, in[0],
                                 o.getRatio().convertToDouble());
      })
      .Case([&](RandomOp o) {
        return rt::randomTensor(
            ctx.generator, elemType(op), resultShape(op, ctx),
            code<rt::Distribution>(o.getDistribution()),
            o.getA().convertToDouble(), o.getB().convertToDouble());
      })
      // Shapes.
      .Case([&](ReshapeOp) { return in[0].reshape(resultShape(op, ctx)); })
      .Case([&](ExpandOp) { return in[0].expand(resultShape(op, ctx)); })
      .Case([&](TransposeOp o) { return in[0].permute(ia(o.getPerm())); })
      .Case([&](SliceOp o) {
        return rt::sliceKernel(in[0], static_cast<int64_t>(o.getAxis()),
                               static_cast<int64_t>(o.getStart()),
                               static_cast<int64_t>(o.getEnd()),
                               static_cast<int64_t>(o.getStep()));
      })
      .Case([&](ConcatOp o) {
        return at::cat(std::vector<at::Tensor>(in.begin(), in.end()),
                       static_cast<int64_t>(o.getAxis()));
      })
      .Case([&](GatherOp o) {
        if (std::optional<int64_t> pad = o.getPaddingIdx())
          return rt::embeddingKernel(in[0], in[1], *pad);
        return rt::gatherKernel(in[0], in[1], static_cast<int64_t>(o.getAxis()));
      })
      .Case([&](ScatterNDOp) { return rt::scatterNDKernel(in[0], in[1], in[2]); })
      .Case([&](GatherElementsOp o) {
        return rt::gatherElementsKernel(in[0], in[1],
                                        static_cast<int64_t>(o.getAxis()));
      })
      .Case([&](LinalgOp o) {
        return rt::linalgKernel(code<rt::Linalg>(o.getKind()), in[0],
                                in.size() > 1 ? in[1] : at::Tensor());
      })
      .Case([&](CumsumOp o) {
        return rt::cumsumKernel(in[0], static_cast<int64_t>(o.getAxis()),
                                o.getExclusive(), o.getReverse());
      })
      .Case([&](PadOp o) {
        return rt::padKernel(in[0], ia(o.getPads()), scalarFromAttr(o.getValue()));
      })
      .Case([&](TriluOp o) {
        return rt::triluKernel(in[0], static_cast<int64_t>(o.getK()), o.getUpper());
      })
      // Reductions and normalization.
      .Case([&](ReduceOp o) {
        return rt::reduceKernel(code<rt::Reduce>(o.getKind()), in[0],
                                ia(o.getAxes()), o.getKeepdim(),
                                o.getStepMean());
      })
      .Case([&](SoftmaxOp o) {
        return rt::softmaxKernel(in[0], static_cast<int64_t>(o.getAxis()),
                                 o.getLog(), o.getSafe());
      })
      .Case([&](LayerNormOp o) {
        size_t next = 1;
        at::Tensor weight = o.getWeight() ? in[next++] : at::Tensor();
        at::Tensor bias = o.getBias() ? in[next++] : at::Tensor();
        return rt::layerNormKernel(in[0], static_cast<int64_t>(o.getAxis()),
                                   weight, bias,
                                   o.getEpsilon().convertToDouble());
      })
      .Case([&](BatchNormOp o) {
        bool running = static_cast<bool>(o.getRunningMean());
        at::Tensor mean = running ? in[3] : at::Tensor();
        at::Tensor var = running ? in[4] : at::Tensor();
        return rt::batchNormKernel(in[0], in[1], in[2], mean, var,
                                   o.getMomentum().convertToDouble(),
                                   o.getEpsilon().convertToDouble());
      })
      // Linear algebra, convolution, losses.
      .Case([&](MatmulOp) { return at::matmul(in[0], in[1]); })
      .Case([&](AttentionOp o) {
        return rt::attentionKernel(in[0], in[1], in[2],
                                   o.getMask() ? in[3] : at::Tensor(),
                                   o.getScale().convertToDouble());
      })
      .Case([&](ConvOp o) {
        return rt::convKernel(in[0], in[1], o.getBias() ? in[2] : at::Tensor(),
                              ia(o.getStrides()), ia(o.getPads()),
                              ia(o.getDilations()),
                              static_cast<int64_t>(o.getGroups()));
      })
      .Case([&](ConvTransposeOp o) {
        return rt::convTransposeKernel(
            in[0], in[1], o.getBias() ? in[2] : at::Tensor(),
            ia(o.getStrides()), ia(o.getPads()), ia(o.getOutputPadding()),
            ia(o.getDilations()), static_cast<int64_t>(o.getGroups()));
      })
      .Case([&](PoolOp o) {
        return rt::poolKernel(code<rt::Pool>(o.getKind()), in[0],
                              ia(o.getKernel()), ia(o.getStrides()),
                              ia(o.getPads()), ia(o.getDilations()),
                              o.getCeilMode(), o.getCountIncludePad());
      })
      .Case([&](CrossEntropyOp o) {
        auto ignore = o.getIgnoreIndex();
        return rt::crossEntropyKernel(
            in[0], in[1], code<rt::LossReduction>(o.getReduction()),
            ignore.has_value(), ignore ? static_cast<int64_t>(*ignore) : 0,
            o.getLogInput(), ctx.lossCountSink(),
            o.getLabelSmoothing() ? o.getLabelSmoothing()->convertToDouble()
                                  : 0.0,
            o.getWeight() ? in[2] : at::Tensor());
      })
      .Default([&](Operation *) -> at::Tensor {
        unsupported("op '" + op->getName().getStringRef().str() +
                    "' is not supported by the ATen evaluator");
      });
}

} // namespace varuna
