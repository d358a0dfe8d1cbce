//===- varuna-compile.cpp - Model + training config -> job directory ------===//
//
//   varuna-compile MODEL [--config train.json] [--stages P] -o JOBDIR
//
// See include/varuna/Compiler/CompileJob.h and docs/varuna-compile.md.
//
//===----------------------------------------------------------------------===//

#include "varuna/Support/ByteSize.h"
#include "varuna/Support/ToolInit.h"
#include "varuna/Compiler/CompileJob.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"
#include <cmath>

namespace cl = llvm::cl;

static cl::OptionCategory toolOptions("varuna-compile options");

static cl::opt<std::string> model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx | model.pt>"),
                                  cl::cat(toolOptions));
static cl::opt<std::string> output("o", cl::Required,
                                   cl::desc("Job directory to write"),
                                   cl::value_desc("JOBDIR"),
                                   cl::cat(toolOptions));
static cl::opt<std::string> config("config",
                                   cl::desc("Training configuration (JSON)"),
                                   cl::value_desc("train.json"),
                                   cl::cat(toolOptions));
static cl::opt<int64_t> stages("stages",
                               cl::desc("Partition for this pipeline depth "
                                        "only (default: every depth)"),
                               cl::init(0), cl::cat(toolOptions));
static cl::opt<int64_t> cutPoints("num-cut-points",
                                  cl::desc("Number of cut-points (default: "
                                           "automatic)"),
                                  cl::init(0), cl::cat(toolOptions));
static cl::opt<int64_t> maxCutBytes(
    "max-bytes-per-cut",
    cl::desc("Largest activation bytes per example a cut may carry"),
    cl::init(0), cl::cat(toolOptions));
static cl::opt<double, false, varuna::ByteSizeParser>
    memory("memory-limit",
           cl::desc("Device memory per stage (bytes, or 16GiB, 2.5G)"),
           cl::init(0), cl::cat(toolOptions));
static cl::opt<std::string>
    profile("profile",
            cl::desc("Measured section times (JSON) for the partitioner"),
            cl::value_desc("profile.json"), cl::cat(toolOptions));
static cl::list<std::string>
    inputShapes("input-shape", cl::desc("TorchScript input: name=B,16:int64"),
                cl::cat(toolOptions));

static cl::opt<bool> noBuild(
    "no-build",
    cl::desc("Do not generate and build the stage code (JOBDIR/libstages.so)"),
    cl::init(false), cl::cat(toolOptions));

int main(int argc, char **argv) {
  varuna::ToolInit init(argc, argv);
  // Only our options in --help, not the ones LLVM registers.
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv, "Varuna compiler driver\n");

  mlir::MLIRContext ctx;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &ctx);
  varuna::CompileOptions options;
  options.modelPath = model;
  options.outputDir = output;
  options.configPath = config;
  options.stages = stages;
  options.numCutPoints = cutPoints;
  options.maxBytesPerCut = maxCutBytes;
  if (memory != 0 && !(memory >= 1 && memory <= 9.0e18)) {
    llvm::errs() << "varuna-compile: error: --memory-limit must be 0 (none) "
                    "or between 1 byte and 9e18 bytes\n";
    return 1;
  }
  options.memoryLimit = static_cast<int64_t>(std::llround(double(memory)));
  options.profilePath = profile;
  options.buildStages = !noBuild;
  options.inputShapes.assign(inputShapes.begin(), inputShapes.end());
  return mlir::failed(varuna::compileJob(&ctx, options, llvm::outs())) ? 1 : 0;
}
