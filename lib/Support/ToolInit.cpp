//===- ToolInit.cpp - What every Varuna tool does first -------------------===//

#include "varuna/Support/ToolInit.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"

#include "llvm/Support/PrettyStackTrace.h"

#include <cerrno> // program_invocation_short_name
#include <csignal>
#include <unistd.h>

using namespace varuna;

namespace {
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS,  SIGILL,  SIGFPE,  SIGABRT,
                                 SIGQUIT, SIGTRAP, SIGSYS,  SIGXCPU, SIGXFSZ};
constexpr int kNumFatal = sizeof kFatalSignals / sizeof kFatalSignals[0];
/// The handlers installed before ours (LLVM's stack dump), per signal.
struct sigaction previous[kNumFatal];

void dieAfterStackDump(int sig, siginfo_t *info, void *context) {
  // Sent by another process (kill(1), a launcher): not a crash of ours, and
  // the stack dump would run wherever the signal happened to land -- in
  // malloc, say, where it can deadlock (it is not async-signal-safe: a
  // rank hung so). Die of it at once. Our own faults and abort() dump.
  bool fromOutside = info && info->si_code <= 0 && info->si_pid != ::getpid();
  for (int i = 0; i < kNumFatal && !fromOutside; ++i) {
    if (kFatalSignals[i] != sig)
      continue;
    const struct sigaction &p = previous[i];
    if (p.sa_flags & SA_SIGINFO) {
      if (p.sa_sigaction)
        p.sa_sigaction(sig, info, context);
    } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN &&
               p.sa_handler) {
      p.sa_handler(sig);
    }
  }
  // Blocked while this handler runs: delivered, with the default action,
  // as it returns (a crash's faulting instruction is not re-run).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
} // namespace

ToolInit::ToolInit(int &argc, char **&argv) : init(argc, argv) { finish(); }
ToolInit::ToolInit(int &argc, const char **&argv) : init(argc, argv) {
  finish();
}

void ToolInit::finish() {
  // --version: the tool and Varuna's version (with the LLVM it was built
  // with), not LLVM's own "Debian LLVM version 16 ... Optimized build".
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << program_invocation_short_name << " (Varuna " VARUNA_VERSION
       << "; LLVM " LLVM_VERSION_STRING ")\n";
  });
  llvm::setBugReportMsg("PLEASE report this crash of a Varuna tool to the "
                        "Varuna developers, with the command and the stack "
                        "dump below.\n");
  for (int i = 0; i < kNumFatal; ++i) {
    struct sigaction sa {};
    sa.sa_sigaction = dieAfterStackDump;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    ::sigaction(kFatalSignals[i], &sa, &previous[i]);
  }
}

std::vector<char *> varuna::quietOpDiagnostics(int argc, char **argv) {
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  std::vector<char *> args(argv, argv + argc);
  bool given = false;
  for (int i = 1; i < argc; ++i)
    given |= llvm::StringRef(argv[i]).ltrim('-').startswith(
        "mlir-print-op-on-diagnostic");
  if (!given && argc > 0)
    args.insert(args.begin() + 1, quiet);
  args.push_back(nullptr);
  return args;
}

bool varuna::isModelFile(llvm::StringRef path) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  return ext == ".onnx" || ext == ".pt" || ext == ".pth";
}

void varuna::hideLibraryOptions(std::initializer_list<llvm::StringRef> keep) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.getKey();
    if (name == "help" || name == "version" ||
        llvm::is_contained(keep, name))
      continue;
    if (entry.getValue()->getOptionHiddenFlag() == llvm::cl::NotHidden)
      entry.getValue()->setHiddenFlag(llvm::cl::Hidden);
  }
}
