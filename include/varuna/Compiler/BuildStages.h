//===- BuildStages.h - Generate and build a job's stage code ----*- C++ -*-===//
//
// The last step of varuna-compile: generate the C++ of every distinct section
// body (Target/Cpp/StageCpp.h) into JOBDIR/gen/ and build it, with the C++
// compiler Varuna was built with, into JOBDIR/libstages.so linked against the
// runtime's libVarunaStageAPI.so. varuna-run loads that library and runs
// each stage's sections through it.
//
// Inputs: the compiled module (sections outlined) and the job directory.
// Output: JOBDIR/gen/{body_<n>,job_table}.cpp, their objects, and
// JOBDIR/libstages.so, renamed into place only once linked (a failed build
// never leaves a library that looks good). Errors (no compiler, a compiler
// error, no runtime library) are diagnostics naming the command and its
// output (kept in JOBDIR/gen/build.log).
//
// The compiler, include and library directories default to the ones of this
// build of Varuna; VARUNA_CXX, VARUNA_STAGE_INCLUDE and VARUNA_STAGE_LIBDIR
// override them.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_COMPILER_BUILDSTAGES_H
#define VARUNA_COMPILER_BUILDSTAGES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace varuna {

struct StageBuildOptions {
  std::string cxx;         ///< C++ compiler
  std::string includeDir;  ///< holds varuna/runtime/StageAPI.h
  std::string libDir;      ///< holds libVarunaStageAPI.so
  unsigned jobs = 2;       ///< parallel compiler processes
  std::string optLevel = "-O1";
};

/// The defaults of this build, with the environment's overrides.
StageBuildOptions defaultStageBuildOptions();

/// True when this build of Varuna has the runtime generated code links to.
bool haveStageRuntime();

/// The job hash stored in generated code: of the module's printed form.
std::string jobHashOf(mlir::ModuleOp module);

/// Generates and builds JOBDIR/libstages.so; logs one summary line.
mlir::LogicalResult buildStages(mlir::ModuleOp module, llvm::StringRef jobDir,
                                const StageBuildOptions &options,
                                llvm::raw_ostream &log);

} // namespace varuna

#endif // VARUNA_COMPILER_BUILDSTAGES_H
