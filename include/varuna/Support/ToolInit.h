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
// ignored; batch systems send it as a warning) and the stop signals
// (runtime/Stop.h) are left as they are.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_SUPPORT_TOOLINIT_H
#define VARUNA_SUPPORT_TOOLINIT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"

#include <initializer_list>

namespace varuna {

/// Hides (from --help; --help-hidden still lists them) every command-line
/// option registered so far but those named in `keep`: the ~250 that LLVM's
/// libraries register (code generators' flags) would bury a tool's own.
/// Call it before a main that registers its own options
/// (mlirTranslateMain, MlirOptMain): those stay.
void hideLibraryOptions(std::initializer_list<llvm::StringRef> keep);

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
