//===- GraphUtils.cpp - Finding the graph and its sections ----------------===//

#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace varuna;

func::FuncOp varuna::findTrainingGraph(ModuleOp module) {
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(kGraphAttr))
      return f;
  return {};
}

FailureOr<func::FuncOp> varuna::getTrainingGraph(ModuleOp module) {
  if (func::FuncOp f = findTrainingGraph(module))
    return f;
  return module.emitError("no training graph: expected a func.func marked '")
             << kGraphAttr << "'",
         failure();
}

FailureOr<SmallVector<func::FuncOp>> varuna::getSections(ModuleOp module,
                                                       bool required) {
  SmallVector<func::FuncOp> sections;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr("varuna.section"))
      sections.push_back(f);
  llvm::stable_sort(sections, [](func::FuncOp a, func::FuncOp b) {
    return a->getAttrOfType<IntegerAttr>("varuna.section").getInt() <
           b->getAttrOfType<IntegerAttr>("varuna.section").getInt();
  });
  for (auto [i, s] : llvm::enumerate(sections))
    if (s->getAttrOfType<IntegerAttr>("varuna.section").getInt() !=
        static_cast<int64_t>(i))
      return s.emitError("sections must be numbered 0 to K-1; found ")
                 << s->getAttr("varuna.section") << " at position " << i,
             failure();
  if (required && sections.empty())
    return module.emitError("no sections: run varuna-outline-sections first"),
           failure();
  return sections;
}

SmallVector<StringRef> varuna::getReadParams(func::FuncOp func) {
  ModuleOp module = func->getParentOfType<ModuleOp>();
  llvm::SetVector<StringRef> names;
  func.walk([&](GetParamOp get) {
    auto p = module.lookupSymbol<ParamOp>(get.getNameAttr());
    if (p && !p.getFrozen())
      names.insert(get.getName());
  });
  return SmallVector<StringRef>(names.begin(), names.end());
}

llvm::StringSet<> varuna::getReadParamNames(ModuleOp module) {
  llvm::StringSet<> read;
  module.walk([&](GetParamOp get) { read.insert(get.getName()); });
  return read;
}

bool varuna::isBatched(Value v) {
  auto t = llvm::dyn_cast<VTensorType>(v.getType());
  return t && t.isBatched();
}

std::optional<double> varuna::splatFloatConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = c.getValue().dyn_cast<DenseElementsAttr>();
  if (!dense || !dense.isSplat() || !dense.getElementType().isa<FloatType>())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

void varuna::eraseDeadPureOps(Operation *root) {
  bool changed = true;
  while (changed) {
    changed = false;
    root->walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (isa<VarunaDialect>(op->getDialect()) && op->use_empty() &&
          op->getNumResults() > 0 && isMemoryEffectFree(op) &&
          !isa<ParamOp>(op)) {
        op->erase();
        changed = true;
      }
    });
  }
}
