//===- PrintGraphSummary.cpp - A readable summary of a graph --------------===//

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

namespace varuna {
#define GEN_PASS_DEF_PRINTGRAPHSUMMARY
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {

std::string shapeStr(VTensorType t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  for (int64_t i = 0; i < t.getRank(); ++i)
    os << (i ? ", " : "") << t.getDim(i).str();
  os << "] " << t.getElementType();
  return os.str();
}

std::string bytesStr(double b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(u ? "%.1f " : "%.0f ", b) << units[u];
  return os.str();
}

std::string groupedInt(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

struct PrintGraphSummary
    : public varuna::impl::PrintGraphSummaryBase<PrintGraphSummary> {
  using PrintGraphSummaryBase::PrintGraphSummaryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> found = getTrainingGraph(module);
    if (failed(found))
      return signalPassFailure();
    func::FuncOp graph = *found;
    std::string error;
    auto out = mlir::openOutputFile(output, &error);
    if (!out) {
      module.emitError("cannot open summary output '") << output << "': "
                                                       << error;
      return signalPassFailure();
    }
    print(module, graph, out->os());
    out->keep();
  }

  void print(ModuleOp module, func::FuncOp graph, raw_ostream &os) {
    os << "graph @" << graph.getSymName();
    if (auto src = module->getAttrOfType<StringAttr>(kSourceAttr))
      os << " (from " << src.getValue() << ")";
    os << "\n";

    os << "inputs:\n";
    for (BlockArgument arg : graph.getArguments()) {
      auto name = graph.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     kNameAttr);
      os << "  " << (name ? name.getValue() : StringRef("?")) << "  "
         << shapeStr(arg.getType().cast<VTensorType>()) << "\n";
    }

    os << "results:\n";
    for (unsigned i = 0; i < graph.getNumResults(); ++i) {
      auto name = graph.getResultAttrOfType<StringAttr>(i, kNameAttr);
      os << "  " << (name ? name.getValue() : StringRef("?")) << "  "
         << shapeStr(graph.getResultTypes()[i].cast<VTensorType>())
         << (graph.getResultAttr(i, kLossAttr) ? "  (loss)" : "") << "\n";
    }

    // Parameters.
    int64_t nTrain = 0, nFrozen = 0, eltTrain = 0, eltFrozen = 0,
            bytesTrain = 0, bytesFrozen = 0;
    SmallVector<ParamOp> params;
    for (auto p : module.getOps<ParamOp>()) {
      params.push_back(p);
      int64_t elts = p.getTensorType().getNumElements().constant;
      int64_t bytes = p.getTensorType().getSizeInBytes().constant;
      if (p.getFrozen()) {
        ++nFrozen, eltFrozen += elts, bytesFrozen += bytes;
      } else {
        ++nTrain, eltTrain += elts, bytesTrain += bytes;
      }
    }
    os << "parameters: " << nTrain << " trainable, " << groupedInt(eltTrain)
       << " elements (" << bytesStr(bytesTrain) << ")";
    if (nFrozen)
      os << "; " << nFrozen << " frozen, " << groupedInt(eltFrozen)
         << " elements (" << bytesStr(bytesFrozen) << ")";
    os << "\n";
    llvm::stable_sort(params, [](ParamOp a, ParamOp b) {
      return a.getTensorType().getNumElements().constant >
             b.getTensorType().getNumElements().constant;
    });
    for (ParamOp p : llvm::ArrayRef(params).take_front(5))
      os << "  " << p.getSymName() << "  " << shapeStr(p.getTensorType())
         << "  " << bytesStr(p.getTensorType().getSizeInBytes().constant)
         << (p.getFrozen() ? "  frozen" : "") << "\n";
    if (params.size() > 5)
      os << "  ... and " << params.size() - 5 << " more\n";

    // Op order, and who reads each parameter.
    DenseMap<Operation *, int64_t> order;
    llvm::MapVector<StringRef, SmallVector<Operation *>> readers;
    llvm::MapVector<StringRef, int64_t> histogram;
    int64_t nOps = 0;
    graph.walk([&](Operation *op) {
      if (op == graph.getOperation())
        return;
      order[op] = nOps++;
      histogram[op->getName().getStringRef()]++;
    });
    graph.walk([&](GetParamOp get) {
      for (Operation *user : get->getUsers())
        readers[get.getName()].push_back(user);
    });
    bool any = false;
    for (auto &[name, users] : readers) {
      if (users.size() < 2)
        continue;
      llvm::sort(users, [&](Operation *a, Operation *b) {
        return order[a] < order[b];
      });
      int64_t spread = order[users.back()] - order[users.front()];
      // Readers far apart in the graph are the interesting ones: after
      // partitioning they may land in different stages (a tie).
      if (spread * 4 < nOps)
        continue;
      if (!any)
        os << "parameters read far apart (tie candidates):\n";
      any = true;
      os << "  " << name << "  read by";
      for (Operation *u : users)
        os << " " << u->getName().getStringRef() << " (op " << order[u]
           << ")";
      os << "\n";
    }
    if (!any)
      os << "parameters read far apart (tie candidates): none\n";

    os << "ops: " << nOps << "\n";
    SmallVector<std::pair<StringRef, int64_t>> hist(histogram.begin(),
                                                    histogram.end());
    llvm::stable_sort(hist, [](auto &a, auto &b) { return a.second > b.second; });
    for (auto &[name, count] : hist)
      os << "  " << llvm::left_justify(name, 24) << count << "\n";
  }
};

} // namespace
