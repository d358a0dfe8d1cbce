//===- BuildStages.cpp - Generate and build a job's stage code ------------===//

#include "varuna/Compiler/BuildStages.h"
#include "varuna/Target/Cpp/StageCpp.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include <chrono>
#include <deque>

using namespace mlir;

namespace varuna {

static std::string envOr(const char *name, const char *fallback) {
  if (auto v = llvm::sys::Process::GetEnv(name))
    return *v;
  return fallback;
}

StageBuildOptions defaultStageBuildOptions() {
  StageBuildOptions o;
  o.cxx = envOr("VARUNA_CXX", VARUNA_STAGE_CXX);
  o.includeDir = envOr("VARUNA_STAGE_INCLUDE", VARUNA_STAGE_INCLUDE);
  o.libDir = envOr("VARUNA_STAGE_LIBDIR", VARUNA_STAGE_LIBDIR);
  return o;
}

bool haveStageRuntime() {
#ifdef VARUNA_HAVE_STAGE_RUNTIME
  return true;
#else
  return false;
#endif
}

std::string jobHashOf(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return hashJobText(os.str());
}

namespace {
struct Command {
  std::string what; // for messages: the file being built
  std::vector<std::string> args;
};

/// Runs `commands` with at most `jobs` at a time; output goes to `logPath`.
/// Returns "" or the failing command and its output.
std::string runAll(const std::vector<Command> &commands, unsigned jobs,
                   StringRef logPath) {
  struct Running {
    llvm::sys::ProcessInfo pi;
    const Command *cmd;
    std::string log;
  };
  std::deque<const Command *> todo;
  for (const Command &c : commands)
    todo.push_back(&c);
  std::vector<Running> running;
  std::string failure;
  unsigned started = 0;
  auto start = [&](const Command *c) -> bool {
    SmallString<256> log(logPath);
    log += "." + std::to_string(started++);
    std::vector<StringRef> argv(c->args.begin(), c->args.end());
    std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                            StringRef(log)};
    std::string err;
    bool failed = false;
    llvm::sys::ProcessInfo pi = llvm::sys::ExecuteNoWait(
        c->args[0], argv, std::nullopt, redirects, 0, &err, &failed);
    if (failed) {
      failure = "cannot run '" + c->args[0] + "': " + err;
      return false;
    }
    running.push_back({pi, c, log.str().str()});
    return true;
  };
  auto output = [](StringRef path) {
    auto buf = llvm::MemoryBuffer::getFile(path);
    std::string s = buf ? (*buf)->getBuffer().str() : "";
    llvm::sys::fs::remove(path);
    return s;
  };
  std::string all;
  while ((!todo.empty() && failure.empty()) || !running.empty()) {
    while (failure.empty() && !todo.empty() && running.size() < jobs) {
      if (!start(todo.front()))
        break;
      todo.pop_front();
    }
    // Wait for the oldest; the others keep running meanwhile.
    Running r = running.front();
    running.erase(running.begin());
    std::string err;
    llvm::sys::ProcessInfo done =
        llvm::sys::Wait(r.pi, std::nullopt, &err);
    std::string out = output(r.log);
    all += out;
    if (done.ReturnCode != 0 && failure.empty()) {
      std::string cmd;
      for (const std::string &a : r.cmd->args)
        cmd += (cmd.empty() ? "" : " ") + a;
      failure = "building " + r.cmd->what + " failed (exit " +
                std::to_string(done.ReturnCode) + "): " + cmd + "\n" + out;
    }
  }
  std::error_code ec;
  llvm::raw_fd_ostream log(logPath, ec);
  if (!ec)
    log << all << failure;
  return failure;
}
} // namespace

LogicalResult buildStages(ModuleOp module, StringRef jobDir,
                          const StageBuildOptions &options, raw_ostream &log) {
  auto t0 = std::chrono::steady_clock::now();
  Location loc = module.getLoc();
  if (!haveStageRuntime())
    return emitError(loc) << "this build of Varuna has no stage runtime "
                             "(libtorch was not found when it was built)";
  FailureOr<StageCppResult> gen = emitStageCpp(module, jobHashOf(module));
  if (failed(gen))
    return failure();

  SmallString<256> genDir(jobDir);
  llvm::sys::path::append(genDir, "gen");
  if (auto ec = llvm::sys::fs::create_directories(genDir))
    return emitError(loc) << "cannot create '" << genDir
                          << "': " << ec.message();
  // Start from a clean directory: stale bodies must not be linked in.
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(genDir, ec), end;
       it != end && !ec; it.increment(ec))
    llvm::sys::fs::remove(it->path());

  std::vector<Command> compiles;
  std::vector<std::string> objects;
  for (const GeneratedFile &f : gen->files) {
    SmallString<256> src(genDir), obj(genDir);
    llvm::sys::path::append(src, f.name);
    llvm::sys::path::append(obj, llvm::sys::path::stem(f.name) + ".o");
    std::error_code wec;
    llvm::raw_fd_ostream os(src, wec);
    if (wec)
      return emitError(loc) << "cannot write '" << src << "': " << wec.message();
    os << f.contents;
    os.close();
    compiles.push_back({f.name,
                        {options.cxx, "-std=c++17", options.optLevel, "-fPIC",
                         "-fvisibility=hidden", "-I", options.includeDir, "-c",
                         src.str().str(), "-o", obj.str().str()}});
    objects.push_back(obj.str().str());
  }
  SmallString<256> logPath(genDir), lib(jobDir), tmpLib(jobDir);
  llvm::sys::path::append(logPath, "build.log");
  llvm::sys::path::append(lib, "libstages.so");
  llvm::sys::path::append(tmpLib, "libstages.so.tmp");
  auto cxx = llvm::sys::findProgramByName(options.cxx);
  if (!cxx)
    return emitError(loc) << "cannot find the C++ compiler '" << options.cxx
                          << "' (set VARUNA_CXX)";
  for (Command &c : compiles)
    c.args[0] = *cxx;
  if (std::string err = runAll(compiles, std::max(1u, options.jobs), logPath);
      !err.empty())
    return emitError(loc) << err;

  Command link{"libstages.so", {*cxx, "-shared", "-o", tmpLib.str().str()}};
  link.args.insert(link.args.end(), objects.begin(), objects.end());
  link.args.push_back("-L" + options.libDir);
  link.args.push_back("-lVarunaStageAPI");
  link.args.push_back("-Wl,-rpath," + options.libDir);
  if (std::string err = runAll({link}, 1, logPath); !err.empty())
    return emitError(loc) << err;
  if (auto rec = llvm::sys::fs::rename(tmpLib, lib))
    return emitError(loc) << "cannot rename '" << tmpLib << "' to '" << lib
                          << "': " << rec.message();
  double secs = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
  log << "  stages:   " << lib << " (" << gen->numSections << " sections, "
      << gen->numBodies << " distinct bodies, built in "
      << llvm::format("%.2f", secs) << " s)\n";
  return success();
}

} // namespace varuna
