//===- varuna-onnx-fuzz.cpp - libFuzzer harness for the ONNX importer -----===//
//
// Build: cmake -S . -B build-fuzz -G Ninja -DVARUNA_BUILD_FUZZERS=ON
//        ninja -C build-fuzz varuna-onnx-fuzz
// Run:   build-fuzz/bin/varuna-onnx-fuzz -max_total_time=60 CORPUS_DIR
// Any input must give a module or diagnostics; a crash, an ASan report or an
// abort is a bug.
//
//===----------------------------------------------------------------------===//

#include "varuna/Import/ONNXImporter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *ctx = [] {
    auto *c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    // Diagnostics are expected; keep them quiet.
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
    return c;
  }();
  varuna::ONNXImportOptions options;
  auto module = varuna::importONNXFromBuffer(
      ctx, llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "fuzz.onnx", "/nonexistent-fuzz-dir", options);
  (void)module;
  return 0;
}
