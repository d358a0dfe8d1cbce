//===- CompileJob.h - Model file -> compiled job directory ------*- C++ -*-===//
//
// What `varuna-compile MODEL [--config train.json] [--stages P] -o JOBDIR`
// does:
//
//  1. import the model (.onnx, or .pt TorchScript when built with libtorch)
//     and check that it computes a scalar loss;
//  2. run varuna-fuse-gelu, varuna-annotate-costs, varuna-find-cut-points,
//     varuna-outline-sections, varuna-analyze-cross-partition (global
//     reductions from the training config) and varuna-partition (every P, or
//     only --stages);
//  3. write JOBDIR/ir/NN-<stage>.mlir after each step, the final IR as
//     JOBDIR/job.mlir (what varuna-run loads), JOBDIR/report.md (for
//     people) and JOBDIR/manifest.json (for tools; schema in
//     docs/varuna-compile.md). All of it is written into a staging
//     directory beside JOBDIR and moved into JOBDIR (the manifest last) only
//     when the compile succeeded: a failed one leaves JOBDIR as it was.
//
// Errors are diagnostics on the context (naming the file, the field or the
// node) and a failure result; nothing aborts.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_COMPILER_COMPILEJOB_H
#define VARUNA_COMPILER_COMPILEJOB_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace varuna {

struct CompileOptions {
  std::string modelPath;
  std::string outputDir;
  std::string configPath;              // empty: defaults
  int64_t stages = 0;                  // 0: every P from 1 to the sections
  int64_t numCutPoints = 0;            // 0: automatic
  int64_t maxBytesPerCut = 0;          // 0: no cap
  int64_t memoryLimit = 0;             // bytes per device, 0: unlimited
  std::string profilePath;             // measured section times (optional)
  std::vector<std::string> inputShapes; // TorchScript --input-shape values
  bool buildStages = true;             // generate + build JOBDIR/libstages.so
};

/// Compiles a model into a job directory; progress lines go to `log`.
mlir::LogicalResult compileJob(mlir::MLIRContext *ctx,
                               const CompileOptions &options,
                               llvm::raw_ostream &log);

/// Registers the dialects compileJob needs.
void registerCompileDialects(mlir::MLIRContext *ctx);

} // namespace varuna

#endif // VARUNA_COMPILER_COMPILEJOB_H
