//===- varuna-opt.cpp - Runs varuna passes (mlir-opt style) ---------------===//

#include "varuna/Support/ToolInit.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"

int main(int argc, char **argv) {
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "varuna-opt (Varuna " VARUNA_VERSION ")\n";
  });
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  varuna::registerVarunaPasses();
  mlir::DialectRegistry registry;
  registry.insert<varuna::VarunaDialect, mlir::func::FuncDialect>();
  // LLVM's libraries' options would bury the passes' in --help.
  varuna::hideLibraryOptions({});
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-' && varuna::isModelFile(argv[i])) {
      llvm::errs() << "varuna-opt: error: '" << argv[i]
                   << "' is a model file, not varuna IR: import it first "
                      "(varuna-translate --import-onnx / --import-torchscript "
                   << argv[i] << " -o MODEL.mlir), or compile it "
                      "(varuna-compile)\n";
      return 1;
    }
  std::vector<char *> args = varuna::quietOpDiagnostics(argc, argv);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      int(args.size()) - 1, args.data(), "Varuna optimizer driver\n",
      registry));
}
