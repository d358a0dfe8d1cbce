//===- TorchScriptImporter.h - TorchScript -> varuna ------------*- C++ -*-===//
//
// Imports a `torch.jit.trace`d module saved with `torch.jit.save` (a `.pt`
// zip archive) into the varuna dialect.
//
// Inputs: the archive path. Input shapes come from the `varuna.json` extra
// file that `varuna.export` writes ({"inputs": [{"name", "shape", "dtype",
// "batch_dim"}], "loss": ..., "parameters": [...], "buffers": [...]});
// `inputShapes` overrides or supplies them for archives made elsewhere
// ("name=BATCHx16:int64" style strings parsed by the tool).
// Output: a module as described in docs/dialect.md: parameters named by their
// module path (`blocks.0.ln1.weight`), each with `#varuna.data` pointing at
// its bytes inside the archive (records are stored uncompressed), the graph
// function whose result is the loss.
// Errors: diagnostics on the context (an unsupported aten op names the op,
// the TorchScript source range and the node), never an exception or abort;
// returns null then.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_IMPORT_TORCHSCRIPTIMPORTER_H
#define VARUNA_IMPORT_TORCHSCRIPTIMPORTER_H

#include "varuna/Import/GraphBuilder.h"
#include <string>
#include <vector>

namespace varuna {

struct TorchScriptImportOptions : ImportOptions {
  /// "name=B,16:int64" entries (B marks the batch dimension); override the
  /// archive's varuna.json.
  std::vector<std::string> inputShapes;
};

/// True when this build has libtorch (the importer is compiled in).
bool torchScriptImportAvailable();

mlir::OwningOpRef<mlir::ModuleOp>
importTorchScript(mlir::MLIRContext *ctx, llvm::StringRef path,
                  const TorchScriptImportOptions &options);

} // namespace varuna

#endif // VARUNA_IMPORT_TORCHSCRIPTIMPORTER_H
