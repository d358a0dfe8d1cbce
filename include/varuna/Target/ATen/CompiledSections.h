//===- CompiledSections.h - A job's generated stage library -----*- C++ -*-===//
//
// Loads JOBDIR/libstages.so (built by varuna-compile from the job's
// sections, see Compiler/BuildStages.h) and runs a section through its
// generated body. The ATen evaluator uses it, when given, in place of
// interpreting a section's ops (ATenEvalOptions::compiled), so the trainer
// and the checks around it are the same for both engines.
//
// Load-time checks, each an error naming the library and what differs: the
// library exports `varuna_stage_job_table`, its ABI version is this
// runtime's, it was generated from this job.mlir (hash of the printed
// module), and its sections (names, argument, result and parameter counts,
// parameter names) are the module's.
//
// Torch-facing (links VarunaStageAPI).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_COMPILEDSECTIONS_H
#define VARUNA_TARGET_ATEN_COMPILEDSECTIONS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace varuna {
namespace stage {
struct JobTable;
}

class CompiledSections {
public:
  /// Loads `libraryPath` and checks it against `module`.
  static mlir::FailureOr<std::shared_ptr<const CompiledSections>>
  load(mlir::ModuleOp module, const std::string &libraryPath);

  unsigned numSections() const { return paramNames.size(); }
  unsigned numBodies() const;
  /// Parameter names of section `k`, in the order run() wants them.
  const std::vector<std::string> &params(unsigned k) const {
    return paramNames[k];
  }

  /// Runs section `k` at micro-batch size `batch`. `lossCount`, if not
  /// null, receives the count a mean cross-entropy averaged over (unchanged
  /// if none ran; ATenOpContext::countLoss says what counting changes).
  /// Throws std::runtime_error naming the section on failure.
  std::vector<at::Tensor> run(unsigned k, llvm::ArrayRef<at::Tensor> args,
                              llvm::ArrayRef<at::Tensor> params, int64_t batch,
                              at::Generator &generator,
                              double *lossCount) const;

private:
  const stage::JobTable *table = nullptr;
  std::string path;
  std::vector<std::vector<std::string>> paramNames;
};

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_COMPILEDSECTIONS_H
