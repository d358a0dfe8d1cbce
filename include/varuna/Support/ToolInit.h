//===- ToolInit.h - What every Varuna tool does first -----------*- C++ -*-===//
//
// llvm::InitLLVM (UTF-8 arguments, a stack dump when the tool crashes),
// with two changes for Varuna's tools:
//
// * the crash message asks for a report to Varuna, not to LLVM's project
//   (InitLLVM's default), and
// * a fatal signal -- a crash, or one sent from outside with kill(1):
//   SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGQUIT, SIGTRAP, SIGSYS,
//   SIGXCPU, SIGXFSZ -- ends the process as the signal would: after the
//   stack dump for the process's own faults and abort(), at once for one
//   sent by another process (a stack dump where such a signal lands, in
//   malloc say, can deadlock). LLVM's handler only prints and returns: a
//   crash re-faults and dies, but a signal sent from outside left the
//   process running, so a rank sent SIGSEGV kept training and its launcher
//   never learnt (found by killing ranks at random).
//
// SIGPIPE (LLVM: exit status 74), SIGUSR1 (LLVM's information signal:
// ignored, except by varuna-run, which takes it as a stop request like the
// other stop signals: runtime/Stop.h) and the stop signals are left as they
// are.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_SUPPORT_TOOLINIT_H
#define VARUNA_SUPPORT_TOOLINIT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"

#include <initializer_list>
#include <vector>

namespace varuna {

/// Hides (from --help; --help-hidden still lists them) every command-line
/// option registered so far but those named in `keep`: the ~250 that LLVM's
/// libraries register (code generators' flags) would bury a tool's own.
/// Call it before a main that registers its own options
/// (mlirTranslateMain, MlirOptMain): those stay.
void hideLibraryOptions(std::initializer_list<llvm::StringRef> keep);

/// For tools built on MlirOptMain: `argv` with
/// `--mlir-print-op-on-diagnostic=false` added unless given. An error at the
/// module (a pass run on the wrong stage of IR) names its location;
/// MLIR's default printed the whole module after it too, hundreds of lines
/// in generic form. The result points into `argv` and static storage.
std::vector<char *> quietOpDiagnostics(int argc, char **argv);

/// Whether `path` names a model file, not IR (.onnx, .pt, .pth): an MLIR
/// tool given one says so instead of failing on its first binary byte.
bool isModelFile(llvm::StringRef path);

class ToolInit {
public:
  ToolInit(int &argc, char **&argv);
  ToolInit(int &argc, const char **&argv);

private:
  void finish();
  llvm::InitLLVM init;
};

} // namespace varuna

#endif // VARUNA_SUPPORT_TOOLINIT_H
