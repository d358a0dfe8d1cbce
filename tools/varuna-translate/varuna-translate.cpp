//===- varuna-translate.cpp - Framework exports <-> varuna IR -------------===//
//
//   varuna-translate --import-onnx model.onnx [-o out.mlir]
//   varuna-translate --import-torchscript model.pt [--input-shape ...]
//   varuna-translate --emit-stage-cpp job.mlir [--stage-cpp-dir DIR]
//
//===----------------------------------------------------------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Support/ToolInit.h"
#include "varuna/Import/ONNXImporter.h"
#include "varuna/Target/Cpp/StageCpp.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#ifdef VARUNA_HAVE_TORCHSCRIPT
#include "varuna/Import/TorchScriptImporter.h"
#endif
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

static llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("TorchScript input: name=B,16:int64 (B marks the batch "
                   "dimension); overrides the archive's varuna.json"));

static llvm::cl::opt<std::string> stageCppDir(
    "stage-cpp-dir",
    llvm::cl::desc("--emit-stage-cpp: write the files into this directory "
                   "(default: all to the output, each after a '// ----- "
                   "file: NAME' line)"));

static llvm::MemoryBuffer *mainBuffer(llvm::SourceMgr &sm) {
  return const_cast<llvm::MemoryBuffer *>(
      sm.getMemoryBuffer(sm.getMainFileID()));
}

int main(int argc, char **argv) {
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "varuna-translate (Varuna " VARUNA_VERSION ")\n";
  });

  TranslateToMLIRRegistration importONNX(
      "import-onnx", "Import an ONNX training graph into the varuna dialect",
      [](llvm::SourceMgr &sm, MLIRContext *ctx) -> OwningOpRef<Operation *> {
        llvm::MemoryBuffer *buf = mainBuffer(sm);
        StringRef name = buf->getBufferIdentifier();
        SmallString<256> dir(name);
        llvm::sys::path::remove_filename(dir);
        varuna::ONNXImportOptions options;
        auto module = varuna::importONNXFromBuffer(ctx, buf->getBuffer(), name,
                                                   dir, options);
        return OwningOpRef<Operation *>(module.release());
      });

  TranslateToMLIRRegistration importTorchScript(
      "import-torchscript",
      "Import a traced TorchScript archive into the varuna dialect",
      [](llvm::SourceMgr &sm, MLIRContext *ctx) -> OwningOpRef<Operation *> {
        StringRef name = mainBuffer(sm)->getBufferIdentifier();
#ifdef VARUNA_HAVE_TORCHSCRIPT
        varuna::TorchScriptImportOptions options;
        options.inputShapes.assign(inputShapes.begin(), inputShapes.end());
        auto module = varuna::importTorchScript(ctx, name, options);
        return OwningOpRef<Operation *>(module.release());
#else
        emitError(FileLineColLoc::get(ctx, name, 0, 0))
            << "this varuna-translate was built without libtorch: "
               "TorchScript import is unavailable";
        return nullptr;
#endif
      });

  TranslateFromMLIRRegistration emitStageCpp(
      "emit-stage-cpp",
      "Generate the C++ of every distinct section body and the job table",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        // An error at the module names its location; MLIR's translate
        // main has the whole module printed after it too (some 170 lines).
        op->getContext()->printOpOnDiagnostic(false);
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a module");
        std::string text;
        llvm::raw_string_ostream ts(text);
        module.print(ts);
        auto result = varuna::emitStageCpp(module, varuna::hashJobText(ts.str()));
        if (failed(result))
          return failure();
        for (const varuna::GeneratedFile &f : result->files) {
          if (stageCppDir.empty()) {
            os << "// ----- file: " << f.name << "\n" << f.contents;
            continue;
          }
          if (auto ec = llvm::sys::fs::create_directories(stageCppDir))
            return module.emitError("cannot create '")
                   << stageCppDir << "': " << ec.message();
          std::string path = stageCppDir + "/" + f.name;
          std::error_code ec;
          llvm::raw_fd_ostream out(path, ec);
          if (ec)
            return module.emitError("cannot write '") << path << "': "
                                                      << ec.message();
          out << f.contents;
        }
        if (!stageCppDir.empty())
          os << "wrote " << result->files.size() << " files to " << stageCppDir
             << " (" << result->numSections << " sections, "
             << result->numBodies << " distinct bodies)\n";
        return success();
      },
      [](DialectRegistry &registry) {
        registry.insert<varuna::VarunaDialect, func::FuncDialect>();
      });

  // The options LLVM's libraries registered (some 250: code generators'
  // flags) would bury ours in --help: hidden (--help-hidden lists them).
  // mlirTranslateMain registers the translations and its own options after
  // this, so they stay.
  varuna::hideLibraryOptions({"input-shape", "stage-cpp-dir"});
  return failed(mlirTranslateMain(argc, argv, "Varuna translation tool"));
}
