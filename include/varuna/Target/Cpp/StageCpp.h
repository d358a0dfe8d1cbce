//===- StageCpp.h - varuna sections -> C++ stage code -----------*- C++ -*-===//
//
// The code generator (`varuna-translate --emit-stage-cpp`, run by
// varuna-compile): turns the outlined sections of a compiled job into C++
// that calls only runtime/include/varuna/runtime/StageAPI.h.
//
// Input: a module with sections (func.func with `varuna.section`, from
// varuna-outline-sections), parameters (varuna.param) and the graph.
// Output: one file per distinct section body plus `job_table.cpp`:
//  * `body_<n>.cpp` defines `varuna_body_<n>(ctx, args, params, results)`.
//    Two sections share a body when the code generated for them is the same
//    once parameters are numbered in the order the section reads them -- the
//    repeated transformer layer is emitted once, whatever the depth.
//    Shapes are expressions of the micro-batch size B = ctx.batch, so one
//    build serves every micro-batch size and every pipeline depth.
//  * `job_table.cpp` defines `varuna_stage_job_table()`: per section its
//    name, body, argument/parameter/result counts and parameter names, plus
//    `jobHash` (the runtime refuses a library built from another job.mlir).
// Errors: an op without a code generator (e.g. varuna.global_reduce inside a
// section), an unsupported element type, or a module without sections is an
// error diagnostic on the op / module, and nothing is returned.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_CPP_STAGECPP_H
#define VARUNA_TARGET_CPP_STAGECPP_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace varuna {

struct GeneratedFile {
  std::string name;     ///< file name, no directory
  std::string contents;
};

struct StageCppResult {
  std::vector<GeneratedFile> files;
  unsigned numSections = 0;
  unsigned numBodies = 0;
};

/// Generates the stage code of `module`; `jobHash` is stored in the table.
mlir::FailureOr<StageCppResult> emitStageCpp(mlir::ModuleOp module,
                                             llvm::StringRef jobHash);

/// The hash the runtime compares: FNV-1a (64 bit, hex) of job.mlir's bytes.
std::string hashJobText(llvm::StringRef bytes);

} // namespace varuna

#endif // VARUNA_TARGET_CPP_STAGECPP_H
