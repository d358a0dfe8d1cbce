//===- AnalyzeCrossPartition.cpp - Values that cross sections -------------===//

#include "varuna/Analysis/GraphStructure.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

namespace varuna {
#define GEN_PASS_DEF_ANALYZECROSSPARTITION
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {
struct AnalyzeCrossPartition
    : public varuna::impl::AnalyzeCrossPartitionBase<AnalyzeCrossPartition> {
  using AnalyzeCrossPartitionBase::AnalyzeCrossPartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto sections = getSections(module, /*required=*/true);
    if (failed(sections))
      return signalPassFailure();
    if (!module.getOps<GlobalReduceOp>().empty()) {
      module.emitError("cross-partition analysis already ran");
      return signalPassFailure();
    }
    OpBuilder b(&getContext());

    // Which sections read each trainable parameter.
    llvm::MapVector<StringRef, SmallVector<int64_t>> readers;
    for (auto [k, s] : llvm::enumerate(*sections)) {
      SmallVector<StringRef> params = getReadParams(s);
      for (StringRef p : params)
        readers[p].push_back(k);
      SmallVector<Attribute> names;
      for (StringRef p : params)
        names.push_back(b.getStringAttr(p));
      s->setAttr("varuna.params", b.getArrayAttr(names));
      annotateSection(b, s);
    }

    // Sections equal up to parameter names share one body (the code
    // generator emits one function per distinct body).
    llvm::StringMap<int64_t> firstWithBody;
    for (auto [k, s] : llvm::enumerate(*sections)) {
      auto [it, inserted] = firstWithBody.try_emplace(bodySignature(s), k);
      s->setAttr("varuna.body", b.getI64IntegerAttr(it->second));
    }

    // Records go before the first function.
    b.setInsertionPoint((*module.getOps<func::FuncOp>().begin()).getOperation());
    for (auto &[param, secs] : readers)
      if (secs.size() > 1)
        b.create<SharedParamOp>(module.getLoc(),
                                FlatSymbolRefAttr::get(&getContext(), param),
                                b.getDenseI64ArrayAttr(secs));
    auto reduce = [&](StringRef name, ReductionKind kind, StringRef over) {
      b.create<GlobalReduceOp>(module.getLoc(), b.getStringAttr(name),
                               ReductionKindAttr::get(&getContext(), kind),
                               b.getStringAttr(over));
    };
    reduce("loss", ReductionKind::sum, "loss");
    if (globalGradNorm)
      reduce("grad_norm", ReductionKind::sum_of_squares, "gradients");
    if (overflowCheck)
      reduce("overflow", ReductionKind::any, "gradients");
  }

  /// Structure of a section's body, exactly: ops, attributes (parameter
  /// names excluded), types and operand positions, argument and result
  /// attributes. Two sections with the same signature can share code.
  static std::string bodySignature(func::FuncOp s) {
    std::string sig;
    llvm::raw_string_ostream os(sig);
    DenseMap<Value, int64_t> id;
    Block &body = s.getBody().front();
    for (BlockArgument a : body.getArguments())
      id[a] = id.size();
    os << s.getFunctionType() << s.getAllArgAttrs() << s.getAllResultAttrs()
       << "\n";
    for (Operation &op : body) {
      os << op.getName();
      for (NamedAttribute a : op.getAttrs())
        if (a.getName() != "varuna.cost" && !isa<GetParamOp>(op))
          os << " " << a.getName() << "=" << a.getValue();
      for (Value v : op.getOperands())
        os << " %" << id.lookup(v);
      for (Value r : op.getResults()) {
        os << " : " << r.getType();
        id[r] = id.size();
      }
      os << "\n";
    }
    return os.str();
  }

  /// Forwarded activations, graph inputs read, duplicated static ops.
  void annotateSection(OpBuilder &b, func::FuncOp s) {
    Block &body = s.getBody().front();
    SmallVector<int64_t> forwarded;
    for (Value v : body.getTerminator()->getOperands())
      if (auto arg = v.dyn_cast<BlockArgument>())
        if (auto recv = s.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                        "varuna.recv"))
          forwarded.push_back(recv.getInt());
    s->setAttr("varuna.forwarded", b.getDenseI64ArrayAttr(forwarded));

    SmallVector<Attribute> inputs;
    for (BlockArgument a : body.getArguments())
      if (auto n = s.getArgAttrOfType<StringAttr>(a.getArgNumber(), kNameAttr))
        inputs.push_back(n);
    s->setAttr("varuna.inputs", b.getArrayAttr(inputs));

    // Static ops other than parameter reads: constants, shape-only ops and
    // transforms of weights, recomputed in this section.
    int64_t duplicated = 0;
    DenseMap<Value, bool> dynamic;
    for (BlockArgument a : body.getArguments())
      dynamic[a] = true;
    for (Operation &op : body.without_terminator()) {
      bool dyn = isa<RandomOp>(op);
      for (Value v : op.getOperands())
        dyn |= dynamic.lookup(v);
      for (Value r : op.getResults())
        dynamic[r] = dyn;
      if (!dyn && !isa<GetParamOp>(op))
        ++duplicated;
    }
    s->setAttr("varuna.duplicated", b.getI64IntegerAttr(duplicated));
  }
};
} // namespace
