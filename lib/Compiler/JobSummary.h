//===- JobSummary.h - What a compiled job contains --------------*- C++ -*-===//
//
// Everything report.md and manifest.json say, read once from the final IR.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_LIB_COMPILER_JOBSUMMARY_H
#define VARUNA_LIB_COMPILER_JOBSUMMARY_H

#include "varuna/Compiler/TrainingConfig.h"
#include "varuna/Support/SymInt.h"
#include "mlir/IR/BuiltinOps.h"
#include <string>
#include <vector>

namespace varuna {

struct JobSummary {
  struct Input {
    std::string name, dtype;
    std::vector<std::string> shape; // "B", "B*4", "16"
  };
  struct CutPoint {
    int64_t index = 0, bytesPerExample = 0, values = 0;
  };
  struct Section {
    int64_t index = 0;
    std::string function;
    std::vector<std::string> parameters, inputs;
    SymInt flops, backward;
    int64_t paramBytes = 0, receives = 0, sends = 0, duplicated = 0;
    /// The largest of its parameters: a gradient bucket of its own, which
    /// no bucket size splits.
    int64_t largestParamBytes = 0;
    /// Per entry of `parameters`: the bytes of its gradient (0 for a frozen
    /// one), which the planner packs into buckets as the runtime does.
    std::vector<int64_t> gradientBytes;
    /// Batch norms' running statistics the section updates: averaged over
    /// the replicas after each step (one small all-reduce per stage).
    int64_t runningStatsBytes = 0;
    int64_t body = 0; // index of the first section with the same body
    std::vector<int64_t> forwarded;
  };
  struct Tie {
    std::string parameter;
    std::vector<int64_t> sections;
    int64_t bytes = 0; ///< one copy's (what the tie all-reduce carries)
  };
  struct Reduction {
    std::string name, kind, over;
  };
  struct Partition {
    int64_t stages = 0;
    std::vector<int64_t> boundaries, memory;
    double bottleneck = 0, imbalance = 1;
  };

  std::string model, graph, loss;
  std::vector<Input> inputs;
  int64_t trainableParams = 0, trainableBytes = 0, frozenParams = 0;
  /// Trainable parameters no function reads (kept as they are).
  std::vector<std::string> unreadParams;
  std::vector<int64_t> repeatedBlock; // start, period, count (may be empty)
  std::vector<CutPoint> cutPoints;
  std::vector<Section> sections;
  std::vector<Tie> ties;
  std::vector<Reduction> reductions;
  std::vector<Partition> partitions;

  static JobSummary read(mlir::ModuleOp module, llvm::StringRef model);
};

/// manifest.json and report.md contents.
std::string renderManifest(const JobSummary &job, const TrainingConfig &config);
std::string renderReport(const JobSummary &job, const TrainingConfig &config);

} // namespace varuna

#endif // VARUNA_LIB_COMPILER_JOBSUMMARY_H
