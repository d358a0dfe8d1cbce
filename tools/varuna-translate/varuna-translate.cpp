//===- varuna-translate.cpp - Framework exports <-> varuna IR -------------===//
//
//   varuna-translate --import-onnx model.onnx [-o out.mlir]
//   varuna-translate --import-torchscript model.pt [--input-shape ...]
//
//===----------------------------------------------------------------------===//

#include "varuna/Import/ONNXImporter.h"
#ifdef VARUNA_HAVE_TORCHSCRIPT
#include "varuna/Import/TorchScriptImporter.h"
#endif
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

static llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("TorchScript input: name=B,16:int64 (B marks the batch "
                   "dimension); overrides the archive's varuna.json"));

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

  return failed(mlirTranslateMain(argc, argv, "Varuna translation tool"));
}
