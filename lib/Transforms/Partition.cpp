//===- Partition.cpp - Group sections into balanced pipeline stages -------===//

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Plan/Partition.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

namespace varuna {
#define GEN_PASS_DEF_PARTITION
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {

/// Bytes of the parameters a section reads (each parameter once).
int64_t paramBytes(func::FuncOp s) {
  ModuleOp module = s->getParentOfType<ModuleOp>();
  int64_t bytes = 0;
  for (StringRef name : getReadParams(s))
    if (auto p = module.lookupSymbol<ParamOp>(name))
      bytes += p.getTensorType().getSizeInBytes().constant;
  return bytes;
}

/// Bytes per example of the activations a section receives (its stashed
/// stage input when it starts a stage).
int64_t receivedBytes(func::FuncOp s) {
  int64_t bytes = 0;
  for (BlockArgument a : s.getArguments())
    if (s.getArgAttr(a.getArgNumber(), "varuna.recv") ||
        s.getArgAttr(a.getArgNumber(), kNameAttr))
      bytes += a.getType().cast<VTensorType>().getSizeInBytes().perBatch;
  return bytes;
}

/// Measured forward + backward seconds per section from a profile file.
FailureOr<std::vector<double>> readProfile(ModuleOp module, StringRef path,
                                           size_t numSections) {
  auto fail = [&](const Twine &msg) {
    module.emitError("profile '") << path << "': " << msg;
    return failure();
  };
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return fail("cannot read: " + buf.getError().message());
  auto json = llvm::json::parse((*buf)->getBuffer());
  if (!json)
    return fail("invalid JSON: " + llvm::toString(json.takeError()));
  auto *root = json->getAsObject();
  auto *list = root ? root->getArray("sections") : nullptr;
  if (!list)
    return fail("expected an object with a 'sections' list");
  if (list->size() != numSections)
    return fail("has " + Twine(list->size()) + " sections, the model has " +
                Twine(numSections));
  // A time is a number, or (varuna-calibrate's calibration.json) an array
  // by micro-batch size, sorted: the largest size's, where the sections'
  // proportions are least blurred by fixed per-call costs.
  auto timeOf = [](const llvm::json::Object *o,
                   StringRef key) -> std::optional<double> {
    const llvm::json::Value *v = o ? o->get(key) : nullptr;
    if (!v)
      return std::nullopt;
    if (const llvm::json::Array *a = v->getAsArray())
      return a->empty() ? std::nullopt : a->back().getAsNumber();
    return v->getAsNumber();
  };
  std::vector<double> seconds(numSections, -1);
  for (auto [i, entry] : llvm::enumerate(*list)) {
    auto *o = entry.getAsObject();
    auto index = o ? o->getInteger("index") : std::nullopt;
    auto fwd = timeOf(o, "forward_seconds");
    auto bwd = timeOf(o, "backward_seconds");
    if (!index || !fwd || !bwd || !(*fwd >= 0) || !(*bwd >= 0))
      return fail("sections[" + Twine(i) +
                  "]: expected {index, forward_seconds >= 0, "
                  "backward_seconds >= 0} (numbers, or arrays by micro-batch "
                  "size as in a calibration.json)");
    // (As varuna-plan bounds a calibration's times: a time of 1e300 made
    // the partitioner's sums overflow, and it crashed.)
    if (!(*fwd <= 1e15) || !(*bwd <= 1e15))
      return fail("sections[" + Twine(i) + "]: a time of " +
                  llvm::formatv("{0:e2}", std::max(*fwd, *bwd)).str() +
                  " s is outside [0, 1e15]");
    if (*index < 0 || *index >= static_cast<int64_t>(numSections) ||
        seconds[*index] >= 0)
      return fail("sections[" + Twine(i) + "]: bad or repeated index " +
                  Twine(*index));
    seconds[*index] = *fwd + *bwd;
  }
  return seconds;
}

struct Partition : public varuna::impl::PartitionBase<Partition> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto sections = getSections(module, /*required=*/true);
    if (failed(sections))
      return signalPassFailure();
    if (microBatch < 1 || stateCopies < 0 || memoryLimit < 0 || stages < 0) {
      module.emitError("invalid varuna-partition options");
      return signalPassFailure();
    }
    std::vector<plan::Section> input;
    for (func::FuncOp s : *sections) {
      auto cost = s->getAttrOfType<CostAttr>("varuna.cost");
      if (!cost) {
        s.emitError("section has no cost: run varuna-annotate-costs before "
                    "outlining");
        return signalPassFailure();
      }
      plan::Section sec;
      sec.computeSeconds =
          double(cost.getFlops().perBatch + cost.getBackward().perBatch);
      // Weights and gradients (fp32) plus the optimizer's state copies.
      sec.paramBytes = paramBytes(s) * (2 + stateCopies);
      sec.activationBytes = receivedBytes(s) * microBatch;
      input.push_back(sec);
    }
    int64_t k = input.size();
    if (!profile.empty()) {
      auto measured = readProfile(module, profile, input.size());
      if (failed(measured))
        return signalPassFailure();
      for (auto [sec, secs] : llvm::zip(input, *measured))
        sec.computeSeconds = secs;
    }
    plan::PartitionOptions options;
    if (rankBaseline < 0) {
      module.emitError("invalid varuna-partition options");
      return signalPassFailure();
    }
    if (memoryLimit > 0) {
      if (memoryLimit <= rankBaseline) {
        module.emitError("the memory limit of ")
            << static_cast<int64_t>(memoryLimit)
            << " bytes per device is not more than the "
            << static_cast<int64_t>(rankBaseline)
            << " bytes a rank holds besides its stage (the runtime, "
               "libtorch)";
        return signalPassFailure();
      }
      options.memoryLimitBytes =
          static_cast<int64_t>(memoryLimit) - static_cast<int64_t>(rankBaseline);
    }

    SmallVector<Attribute> records;
    Builder b(&getContext());
    auto record = [&](const plan::Partition &p) {
      double mean = 0;
      for (double c : p.stageCost)
        mean += c;
      mean /= p.numStages();
      SmallVector<int64_t> bounds(p.boundaries.begin(), p.boundaries.end());
      SmallVector<NamedAttribute> fields{
          b.getNamedAttr("stages", b.getI64IntegerAttr(p.numStages())),
          b.getNamedAttr("boundaries", b.getDenseI64ArrayAttr(bounds)),
          b.getNamedAttr("bottleneck", b.getF64FloatAttr(p.bottleneck)),
          b.getNamedAttr("imbalance",
                         b.getF64FloatAttr(mean > 0 ? p.bottleneck / mean : 1.0)),
          b.getNamedAttr("memory",
                         b.getDenseI64ArrayAttr(SmallVector<int64_t>(
                             p.stageMemoryBytes.begin(),
                             p.stageMemoryBytes.end())))};
      records.push_back(b.getDictionaryAttr(fields));
    };

    if (stages > 0) {
      plan::PartitionResult r = plan::partition(input, stages, options);
      if (!r) {
        module.emitError(r.error());
        return signalPassFailure();
      }
      record(*r);
    } else {
      std::string deepest; // why the deepest pipeline does not fit
      for (plan::PartitionResult &r : plan::partitionAll(input, k, options)) {
        if (r)
          record(*r);
        else if (r.kind() != plan::PartitionResult::ErrorKind::MemoryInfeasible) {
          module.emitError(r.error());
          return signalPassFailure();
        } else
          deepest = r.error();
      }
      if (records.empty()) {
        auto diag = module.emitError("no pipeline depth fits the memory limit of ")
                    << static_cast<int64_t>(memoryLimit) << " bytes per device";
        if (rankBaseline > 0)
          diag << " (" << static_cast<int64_t>(rankBaseline)
               << " of them for the runtime each rank holds)";
        if (!deepest.empty())
          diag << "; the deepest: " << deepest;
        return signalPassFailure();
      }
    }
    module->setAttr("varuna.partitions", b.getArrayAttr(records));
  }
};
} // namespace
