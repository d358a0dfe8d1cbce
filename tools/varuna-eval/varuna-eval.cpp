//===- varuna-eval.cpp - Runs a varuna graph with ATen (the oracle) -------===//
//
//   varuna-eval FILE.mlir --inputs DIR [--seed N] [--data-dir DIR]
//
// DIR holds `<input name>.npy` for every graph input (integers of a
// narrower type than the input's signed one are widened, as varuna-run's
// data reader does: docs/data.md). Prints one line per
// graph result, `<name> = <value>` (scalars with %.9g; other tensors as
// `<name> = <shape> <dtype> sum <sum>`). Exit status 1 on any error.
//
//===----------------------------------------------------------------------===//

#include "varuna/Support/ToolInit.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Target/ATen/CompiledSections.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>

namespace cl = llvm::cl;

static cl::OptionCategory toolOptions("varuna-eval options");

static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<graph.mlir>"),
                                      cl::cat(toolOptions));
static cl::opt<std::string>
    inputsDir("inputs", cl::Required,
              cl::desc("directory with one <input name>.npy per graph input"),
              cl::cat(toolOptions));
static cl::opt<uint64_t> seed("seed", cl::init(0),
                              cl::desc("seed of the dropout/random generator"),
                              cl::cat(toolOptions));
static cl::opt<std::string>
    dataDir("data-dir", cl::init(""),
            cl::desc("directory of the #varuna.data files (default: that of "
                     "the module's varuna.source)"),
            cl::cat(toolOptions));

static cl::opt<bool> sections(
    "sections",
    cl::desc("Run the outlined sections one after the other (each boundary "
             "activated) instead of the whole graph"),
    cl::init(false), cl::cat(toolOptions));

static cl::opt<std::string> stageLibrary(
    "stage-library",
    cl::desc("Run the sections through this generated stage library "
             "(JOBDIR/libstages.so from varuna-compile); implies --sections"),
    cl::init(""), cl::cat(toolOptions));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "varuna-eval: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  varuna::ToolInit initLLVM(argc, argv);
  // Only our options in --help, not the ones LLVM registers.
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv,
                              "Varuna ATen evaluator (correctness oracle)\n");

  if (varuna::isModelFile(inputFile))
    return fail("'" + inputFile + "' is a model file, not varuna IR: import "
                "it first (varuna-translate --import-onnx / "
                "--import-torchscript " + inputFile + " -o MODEL.mlir)");
  mlir::MLIRContext context;
  context.loadDialect<varuna::VarunaDialect, mlir::func::FuncDialect>();
  context.printOpOnDiagnostic(false); // the op's location says enough
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(inputFile, sourceMgr,
                                                      &context);
  if (!module)
    return fail("cannot parse '" + inputFile + "'");

  varuna::ATenEvalOptions options;
  options.dataDir = dataDir;
  options.seed = seed;
  if (!stageLibrary.empty()) {
    auto compiled = varuna::CompiledSections::load(*module, stageLibrary);
    if (mlir::failed(compiled))
      return 1;
    options.compiled = *compiled;
  }
  auto evaluator = varuna::ATenEvaluator::create(*module, options);
  if (mlir::failed(evaluator))
    return 1;

  std::vector<at::Tensor> inputs;
  mlir::func::FuncOp graph = evaluator->getGraph();
  for (auto [i, name] : llvm::enumerate(evaluator->getInputNames())) {
    llvm::SmallString<256> path(inputsDir);
    llvm::sys::path::append(path, name + ".npy");
    try {
      at::Tensor t =
          varuna::tensorFromNpy(varuna::rt::readNpy(path.str().str()));
      // Token ids saved as uint16 or int32 for an int64 input: widened (a
      // narrower integer into a wider signed one; nothing else converts).
      auto type = graph.getArgumentTypes()[i].cast<varuna::VTensorType>();
      std::optional<at::ScalarType> want =
          varuna::toScalarType(type.getElementType());
      if (want && *want != t.scalar_type() &&
          at::isIntegralType(*want, false) && at::isSignedType(*want) &&
          at::isIntegralType(t.scalar_type(), false) &&
          t.element_size() < static_cast<int64_t>(c10::elementSize(*want)))
        t = t.to(*want);
      inputs.push_back(t);
    } catch (const std::exception &e) {
      return fail("graph input '" + name + "': " + e.what());
    }
  }

  auto results = sections || !stageLibrary.empty()
                     ? evaluator->runSections(inputs)
                          : evaluator->run(inputs);
  if (mlir::failed(results))
    return 1;
  auto names = evaluator->getResultNames();
  // One spelling of NaN, whatever its sign bit (printf wrote "-nan").
  auto number = [](double v) {
    if (std::isnan(v))
      return std::string("nan");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return std::string(buf);
  };
  for (auto [name, t] : llvm::zip(names, *results)) {
    if (t.dim() == 0) {
      double v = t.to(at::kDouble).item<double>();
      std::printf("%s = %s\n", name.c_str(), number(v).c_str());
    } else {
      double sum = t.to(at::kDouble).sum().item<double>();
      std::string shape = "[";
      for (int64_t i = 0; i < t.dim(); ++i)
        shape += (i ? ", " : "") + std::to_string(t.size(i));
      std::printf("%s = %s] %s sum %s\n", name.c_str(), shape.c_str(),
                  varuna::dtypeName(t.scalar_type()).c_str(),
                  number(sum).c_str());
    }
  }
  return 0;
}
