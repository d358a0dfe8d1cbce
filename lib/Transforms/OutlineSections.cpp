//===- OutlineSections.cpp - One function per section ---------------------===//

#include "varuna/Analysis/GraphStructure.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/Hashing.h"

namespace varuna {
#define GEN_PASS_DEF_OUTLINESECTIONS
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {

/// Structural hash of the computation behind each value. Cut-points are
/// transparent; graph inputs hash by name, parameters by symbol. `bind`
/// supplies hashes for block arguments.
class DeepHasher {
public:
  explicit DeepHasher(std::function<std::optional<llvm::hash_code>(BlockArgument)> bind)
      : bind(std::move(bind)) {}

  std::optional<llvm::hash_code> hash(Value v) {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    std::optional<llvm::hash_code> h;
    if (auto arg = v.dyn_cast<BlockArgument>()) {
      h = bind(arg);
    } else {
      auto r = v.cast<OpResult>();
      Operation *op = r.getOwner();
      if (auto cut = dyn_cast<CutPointOp>(op)) {
        h = hash(cut.getValues()[r.getResultNumber()]);
      } else {
        llvm::hash_code acc = llvm::hash_combine(
            op->getName().getStringRef(), r.getResultNumber(),
            v.getType().getAsOpaquePointer());
        for (NamedAttribute a : op->getAttrs())
          if (a.getName() != "varuna.cost")
            acc = llvm::hash_combine(acc, a.getName(), a.getValue());
        for (Value operand : op->getOperands()) {
          auto oh = hash(operand);
          if (!oh)
            return std::nullopt;
          acc = llvm::hash_combine(acc, *oh);
        }
        h = acc;
      }
    }
    if (h)
      memo[v] = *h;
    return h;
  }

private:
  std::function<std::optional<llvm::hash_code>(BlockArgument)> bind;
  DenseMap<Value, llvm::hash_code> memo;
};

/// The name of graph input `i`: its varuna.name, or "input<i>".
StringAttr inputName(func::FuncOp graph, unsigned i) {
  if (auto n = graph.getArgAttrOfType<StringAttr>(i, kNameAttr))
    return n;
  return StringAttr::get(graph.getContext(), "input" + std::to_string(i));
}

struct OutlineSections
    : public varuna::impl::OutlineSectionsBase<OutlineSections> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> found = getTrainingGraph(module);
    if (failed(found))
      return signalPassFailure();
    func::FuncOp graph = *found;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr("varuna.section")) {
        f.emitError("the module already has sections");
        return signalPassFailure();
      }
    FailureOr<GraphStructure> g = GraphStructure::analyze(graph);
    if (failed(g))
      return signalPassFailure();

    // Section boundaries: the cut-points in order.
    SmallVector<CutPointOp> cuts(graph.getOps<CutPointOp>());
    SmallVector<func::FuncOp> sections;
    for (size_t k = 0; k <= cuts.size(); ++k) {
      FailureOr<func::FuncOp> s =
          outline(graph, *g, cuts, k);
      if (failed(s))
        return signalPassFailure();
      sections.push_back(*s);
    }
    if (failed(check(graph, cuts, sections)))
      return signalPassFailure();
  }

  FailureOr<func::FuncOp> outline(func::FuncOp graph, const GraphStructure &g,
                                  ArrayRef<CutPointOp> cuts, size_t k) {
    OpBuilder b(&getContext());
    Block &body = graph.getBody().front();
    CutPointOp entry = k ? cuts[k - 1] : CutPointOp();
    CutPointOp exit = k < cuts.size() ? cuts[k] : CutPointOp();
    std::string name = "section_" + std::to_string(k);
    b.setInsertionPoint(graph);
    auto func = b.create<func::FuncOp>(graph.getLoc(), name,
                                       b.getFunctionType({}, {}));
    func->setAttr("varuna.section", b.getI64IntegerAttr(k));
    Block *block = func.addEntryBlock();
    b.setInsertionPointToEnd(block);

    IRMapping map;
    SmallVector<DictionaryAttr> argAttrs;
    // Received activations first, in cut order.
    if (entry)
      for (auto [i, r] : llvm::enumerate(entry.getResults())) {
        map.map(r, block->addArgument(r.getType(), entry.getLoc()));
        argAttrs.push_back(
            b.getDictionaryAttr(b.getNamedAttr("varuna.recv",
                                               b.getI64IntegerAttr(i))));
      }
    // Graph inputs on demand.
    auto inputArg = [&](BlockArgument a) {
      if (map.contains(a))
        return map.lookup(a);
      Value v = block->addArgument(a.getType(), a.getLoc());
      argAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(kNameAttr, inputName(graph, a.getArgNumber()))));
      map.map(a, v);
      return v;
    };
    // Static and input-only values are recomputed where used.
    std::function<FailureOr<Value>(Value)> materialize =
        [&](Value v) -> FailureOr<Value> {
      if (map.contains(v))
        return map.lookup(v);
      if (auto a = v.dyn_cast<BlockArgument>())
        return inputArg(a);
      Operation *def = v.getDefiningOp();
      if (g.kind(v) == GraphStructure::Kind::Activation ||
          isa<CutPointOp>(def))
        return graph.emitError("internal error: activation used across "
                               "sections without a cut-point"),
               failure();
      for (Value operand : def->getOperands())
        if (failed(materialize(operand)))
          return failure();
      Operation *clone = b.clone(*def, map);
      (void)clone;
      return map.lookup(v);
    };

    // The section's own activation ops, in order.
    bool inside = !entry;
    Operation *end = exit ? exit.getOperation() : body.getTerminator();
    for (Operation &op : body) {
      if (&op == end)
        break;
      if (!inside) {
        inside = &op == entry.getOperation();
        continue;
      }
      if (isa<CutPointOp>(op) || op.getNumResults() == 0 ||
          g.kind(op.getResult(0)) != GraphStructure::Kind::Activation)
        continue;
      for (Value operand : op.getOperands())
        if (failed(materialize(operand)))
          return failure();
      b.clone(op, map);
    }

    // Results.
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resAttrs;
    if (exit) {
      for (auto [i, v] : llvm::enumerate(exit.getValues())) {
        auto m = materialize(v);
        if (failed(m))
          return failure();
        results.push_back(*m);
        resAttrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr("varuna.send", b.getI64IntegerAttr(i))));
      }
    } else {
      for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands())) {
        auto m = materialize(v);
        if (failed(m))
          return failure();
        results.push_back(*m);
        resAttrs.push_back(graph.getResultAttrDict(i)
                               ? graph.getResultAttrDict(i)
                               : b.getDictionaryAttr({}));
      }
    }
    b.create<func::ReturnOp>(graph.getLoc(), results);
    func.setFunctionType(b.getFunctionType(block->getArgumentTypes(),
                                           ValueRange(results).getTypes()));
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(resAttrs);

    // Summed cost, if the graph was annotated.
    SymInt flops, backward, bytes;
    func.walk([&](Operation *op) {
      if (auto c = op->getAttrOfType<CostAttr>("varuna.cost")) {
        flops = flops + c.getFlops();
        backward = backward + c.getBackward();
        bytes = bytes + c.getBytes();
      }
    });
    if (graph->hasAttr("varuna.total_cost"))
      func->setAttr("varuna.cost",
                    CostAttr::get(&getContext(), flops, backward, bytes));
    return func;
  }

  /// Composing the sections must reproduce every value sent across a cut
  /// and every graph result.
  LogicalResult check(func::FuncOp graph, ArrayRef<CutPointOp> cuts,
                      ArrayRef<func::FuncOp> sections) {
    auto inputHash = [](StringAttr name) {
      return llvm::hash_combine(StringRef("input"), name.getValue());
    };
    DeepHasher original([&](BlockArgument a) -> std::optional<llvm::hash_code> {
      return inputHash(inputName(graph, a.getArgNumber()));
    });
    SmallVector<llvm::hash_code> sent; // hashes of the previous section's results
    for (size_t k = 0; k < sections.size(); ++k) {
      func::FuncOp s = sections[k];
      CutPointOp cut = k < cuts.size() ? cuts[k] : CutPointOp();
      SmallVector<llvm::hash_code> prev = sent;
      DeepHasher h([&](BlockArgument a) -> std::optional<llvm::hash_code> {
        if (auto recv = s.getArgAttrOfType<IntegerAttr>(a.getArgNumber(),
                                                        "varuna.recv")) {
          if (recv.getInt() < static_cast<int64_t>(prev.size()))
            return prev[recv.getInt()];
          return std::nullopt;
        }
        if (auto n = s.getArgAttrOfType<StringAttr>(a.getArgNumber(),
                                                    kNameAttr))
          return inputHash(n);
        return std::nullopt;
      });
      Operation *ret = s.getBody().front().getTerminator();
      ValueRange expected =
          cut ? ValueRange(cut.getValues())
              : ValueRange(graph.getBody().front().getTerminator()->getOperands());
      sent.clear();
      for (auto [i, pair] : llvm::enumerate(llvm::zip(ret->getOperands(), expected))) {
        auto [got, want] = pair;
        auto hg = h.hash(got), hw = original.hash(want);
        if (!hg || !hw || *hg != *hw)
          return s.emitError("sections do not compose to the original graph: ")
                 << (k < cuts.size() ? "value " : "result ") << i << " of "
                 << s.getSymName() << " differs from the original";
        sent.push_back(*hg);
      }
    }
    return success();
  }
};

} // namespace
