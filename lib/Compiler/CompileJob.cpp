//===- CompileJob.cpp - Model file -> compiled job directory --------------===//

#include "varuna/Compiler/CompileJob.h"
#include "varuna/Compiler/BuildStages.h"
#include "JobSummary.h"
#include "varuna/Compiler/TrainingConfig.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Import/ONNXImporter.h"
#include "varuna/Plan/Partition.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <cerrno>
#include <csignal>
#include <unistd.h>
#ifdef VARUNA_HAVE_TORCHSCRIPT
#include "varuna/Import/TorchScriptImporter.h"
#endif

using namespace mlir;
using namespace varuna;

void varuna::registerCompileDialects(MLIRContext *ctx) {
  ctx->getOrLoadDialect<VarunaDialect>();
  ctx->getOrLoadDialect<func::FuncDialect>();
}

namespace {

Location fileLoc(MLIRContext *ctx, StringRef path) {
  return FileLineColLoc::get(ctx, path, 0, 0);
}

/// Writes `text` to `path` atomically: a temporary file in the same
/// directory, then a rename.
LogicalResult writeAtomically(MLIRContext *ctx, StringRef path,
                              llvm::function_ref<void(raw_ostream &)> write) {
  SmallString<256> tmp(path);
  tmp += ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return emitError(fileLoc(ctx, path))
             << "cannot write '" << tmp << "': " << ec.message();
    write(os);
    os.flush();
    if (os.has_error()) {
      os.clear_error();
      return emitError(fileLoc(ctx, path)) << "error writing '" << tmp << "'";
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path))
    return emitError(fileLoc(ctx, path))
           << "cannot rename '" << tmp << "' to '" << path
           << "': " << ec.message();
  return success();
}

OwningOpRef<ModuleOp> importModel(MLIRContext *ctx,
                                  const CompileOptions &options) {
  StringRef path = options.modelPath;
  StringRef ext = llvm::sys::path::extension(path);
  if (!llvm::sys::fs::exists(path)) {
    emitError(fileLoc(ctx, path)) << "model file '" << path
                                  << "' does not exist";
    return nullptr;
  }
  if (ext == ".onnx") {
    ONNXImportOptions o;
    o.forTraining = true;
    return importONNX(ctx, path, o);
  }
  if (ext == ".pt" || ext == ".pth" || ext == ".zip") {
#ifdef VARUNA_HAVE_TORCHSCRIPT
    TorchScriptImportOptions o;
    o.inputShapes = options.inputShapes;
    return importTorchScript(ctx, path, o);
#else
    emitError(fileLoc(ctx, path))
        << "this build has no TorchScript importer (libtorch was not found)";
    return nullptr;
#endif
  }
  emitError(fileLoc(ctx, path))
      << "unknown model format '" << ext
      << "': expected .onnx (ONNX) or .pt (TorchScript)";
  return nullptr;
}

/// What a compile writes into JOBDIR, moved there from the staging
/// directory in this order: the manifest (what tools take as "a compiled
/// job") last.
constexpr const char *kJobEntries[] = {"ir",        "gen",     "libstages.so",
                                       "job.mlir",  "report.md",
                                       "manifest.json"};

/// A directory beside `outputDir` (same file system: its entries are
/// renamed into `outputDir`): `<parent>/.<name>.compiling-<pid>`.
FailureOr<std::string> makeStagingDir(MLIRContext *ctx, StringRef outputDir) {
  SmallString<256> out(outputDir);
  llvm::sys::path::remove_dots(out, /*remove_dot_dot=*/false);
  while (out.size() > 1 && llvm::sys::path::is_separator(out.back()))
    out.pop_back();
  if (llvm::sys::fs::exists(out) && !llvm::sys::fs::is_directory(out))
    return emitError(fileLoc(ctx, outputDir))
           << "cannot write the job to '" << outputDir
           << "': it is a file, not a directory";
  StringRef parent = llvm::sys::path::parent_path(out);
  if (!parent.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(parent))
      return emitError(fileLoc(ctx, outputDir))
             << "cannot create '" << parent << "': " << ec.message();
  // Those of compiles killed before they could remove theirs go first.
  std::string prefix = "." + llvm::sys::path::filename(out).str() +
                       ".compiling-";
  std::error_code listed;
  for (llvm::sys::fs::directory_iterator
           it(parent.empty() ? StringRef(".") : parent, listed),
       end;
       it != end && !listed; it.increment(listed)) {
    StringRef name = llvm::sys::path::filename(it->path());
    int pid = 0;
    if (name.consume_front(prefix) && !name.getAsInteger(10, pid) &&
        pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH)
      llvm::sys::fs::remove_directories(it->path());
  }
  SmallString<256> staging(parent);
  llvm::sys::path::append(staging, prefix + std::to_string(::getpid()));
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code ec = llvm::sys::fs::create_directory(staging))
    return emitError(fileLoc(ctx, outputDir))
           << "cannot create '" << staging << "': " << ec.message();
  return std::string(staging);
}

/// Removes the staging directory when the compile ends, however it ends
/// (after a success it holds nothing any more).
struct StagingDir {
  std::string path;
  ~StagingDir() { llvm::sys::fs::remove_directories(path); }
};

/// Moves a finished compile's entries from `staging` into `outputDir`,
/// replacing a previous job's. The old manifest goes first, so that a move
/// cut short leaves no manifest (no job taken for a good one) rather than
/// an old manifest beside new files.
LogicalResult publishJob(MLIRContext *ctx, StringRef staging,
                         StringRef outputDir) {
  Location loc = fileLoc(ctx, outputDir);
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return emitError(loc) << "cannot create '" << outputDir
                          << "': " << ec.message();
  for (bool removing : {true, false})
    for (const char *name : kJobEntries) {
      SmallString<256> from(staging), to(outputDir);
      llvm::sys::path::append(from, name);
      llvm::sys::path::append(to, name);
      if (removing) {
        // Every previous entry, also one this compile does not write
        // (libstages.so under --no-build would not match job.mlir).
        if (llvm::sys::fs::is_directory(to))
          llvm::sys::fs::remove_directories(to);
        else
          llvm::sys::fs::remove(to);
        if (llvm::sys::fs::exists(to))
          return emitError(loc) << "cannot replace '" << to
                                << "' (the previous job's)";
        continue;
      }
      if (!llvm::sys::fs::exists(from))
        continue;
      if (std::error_code ec = llvm::sys::fs::rename(from, to))
        return emitError(loc) << "cannot move '" << from << "' to '" << to
                              << "': " << ec.message();
    }
  return success();
}

/// The graph must compute a scalar floating-point loss.
LogicalResult checkLoss(ModuleOp module, StringRef path) {
  auto graph = getTrainingGraph(module);
  if (failed(graph))
    return failure();
  for (unsigned i = 0; i < graph->getNumResults(); ++i)
    if (graph->getResultAttr(i, kLossAttr))
      return success();
  unsigned scalars = 0;
  for (Type t : graph->getResultTypes())
    if (auto v = dyn_cast<VTensorType>(t))
      scalars += v.getRank() == 0 && isa<FloatType>(v.getElementType());
  auto diag = emitError(fileLoc(module.getContext(), path));
  if (scalars > 1)
    diag << "the graph has " << scalars
         << " scalar float outputs and none is named 'loss', so which is the "
            "loss is not known: name it 'loss' (torch.onnx.export(..., "
            "output_names=['loss', ...]); varuna.export names the first "
            "output so); its outputs are:";
  else
    diag << "the graph has no scalar loss result: its forward must "
            "return the loss (e.g. F.cross_entropy(logits, labels)); "
            "its outputs are:";
  for (unsigned i = 0; i < graph->getNumResults(); ++i) {
    auto n = graph->getResultAttrOfType<StringAttr>(i, kNameAttr);
    diag << " '" << (n ? n.getValue() : StringRef("?")) << "' "
         << graph->getResultTypes()[i];
  }
  return failure();
}

/// Every graph input carries the batch as its first dimension, once (B, not
/// B*k): the trainers split micro-batches along it and read data files so.
/// An ONNX model is refused at import otherwise; a TorchScript one was
/// compiled and then failed in varuna-run.
LogicalResult checkInputBatch(ModuleOp module, StringRef path) {
  auto graph = getTrainingGraph(module);
  if (failed(graph))
    return failure();
  for (BlockArgument a : graph->getArguments()) {
    auto t = dyn_cast<VTensorType>(a.getType());
    if (!t || (t.getBatchDim() == 0 && t.getBatchMultiple() == 1))
      continue;
    auto n = graph->getArgAttrOfType<StringAttr>(a.getArgNumber(), kNameAttr);
    auto diag = emitError(fileLoc(module.getContext(), path))
                << "graph input '" << (n ? n.getValue() : StringRef("?"))
                << "' is " << t << ": ";
    if (!t.isBatched())
      diag << "it does not depend on the batch; every input must have the "
              "batch as its first dimension (make a constant a buffer of "
              "the model instead)";
    else if (t.getBatchDim() != 0)
      diag << "its batch is dimension " << t.getBatchDim()
           << "; varuna splits micro-batches along dimension 0: export it "
              "with the batch first (varuna.export batch_dim=0) and "
              "transpose inside the model";
    else
      diag << "its first dimension is a multiple of the batch; give it as "
              "exactly the batch (B), with the rest in other dimensions";
    return failure();
  }
  return success();
}

/// A graph input no operation reads is still an input: varuna-run needs its
/// data file like any other's. Said, since nothing else shows it.
void warnUnreadInputs(ModuleOp module, StringRef path) {
  auto graph = getTrainingGraph(module);
  if (failed(graph))
    return;
  for (BlockArgument a : graph->getArguments())
    if (a.use_empty()) {
      auto n = graph->getArgAttrOfType<StringAttr>(a.getArgNumber(), kNameAttr);
      std::string name = n ? n.getValue().str() : "?";
      emitWarning(fileLoc(module.getContext(), path))
          << "graph input '" << name
          << "' is read by no operation; it stays an input, so varuna-run "
             "still needs its data ("
          << name << ".npy): export the model without it to drop it";
    }
}

/// Some parameter the loss reads must be trained: a model without one
/// compiled (with a warning about cuts) and then every step of varuna-run
/// failed in autograd ("element 0 of tensors does not require grad").
LogicalResult checkTrainable(ModuleOp module, StringRef path) {
  auto graph = getTrainingGraph(module);
  if (failed(graph))
    return failure();
  if (!getReadParams(*graph).empty())
    return success();
  unsigned frozen = 0;
  for (ParamOp p : module.getOps<ParamOp>())
    frozen += p.getFrozen();
  auto diag = emitError(fileLoc(module.getContext(), path))
              << "the model has no trainable parameters, so there is "
                 "nothing to train: ";
  if (frozen)
    diag << "all " << frozen
         << " of its parameters and buffers are frozen (requires_grad="
            "False)";
  else
    diag << "its forward reads no parameters";
  diag << "; a module saved after torch.jit.freeze has its parameters "
          "folded into constants: save it before freezing";
  return failure();
}

} // namespace

LogicalResult varuna::compileJob(MLIRContext *ctx,
                                 const CompileOptions &options,
                                 raw_ostream &log) {
  registerCompileDialects(ctx);
  // A failing pass names its op; the whole module is no help to a user.
  ctx->printOpOnDiagnostic(false);
  Location jobLoc = fileLoc(ctx, options.outputDir);

  // The training configuration (defaults without --config).
  TrainingConfig config;
  if (!options.configPath.empty()) {
    auto loaded = loadTrainingConfig(options.configPath);
    if (!loaded) {
      // At the file ("train.json:0:0: error: ..."), not "<unknown>:0:".
      // Invalid JSON already says where: "train.json:3:15: invalid JSON".
      std::string msg = llvm::toString(loaded.takeError());
      StringRef text(msg);
      unsigned line = 0, col = 0;
      StringRef rest = text;
      if (rest.consume_front(options.configPath + ":") &&
          !rest.consumeInteger(10, line) && rest.consume_front(":") &&
          !rest.consumeInteger(10, col) && rest.consume_front(": "))
        return emitError(FileLineColLoc::get(ctx, options.configPath, line,
                                             col))
               << rest;
      text.consume_front(options.configPath + ": ");
      return emitError(fileLoc(ctx, options.configPath)) << text;
    }
    config = *loaded;
  }
  if (options.stages < 0)
    return emitError(jobLoc) << "--stages must be at least 1 (or 0: every "
                                "depth), got "
                             << options.stages;
  if (options.numCutPoints < 0)
    return emitError(jobLoc) << "--num-cut-points must be at least 1 (or 0: "
                                "automatic), got "
                             << options.numCutPoints;
  if (options.maxBytesPerCut < 0)
    return emitError(jobLoc) << "--max-bytes-per-cut must not be negative "
                                "(0: no cap), got "
                             << options.maxBytesPerCut;
  if (!options.inputShapes.empty() &&
      llvm::sys::path::extension(options.modelPath) == ".onnx")
    emitWarning(fileLoc(ctx, options.modelPath))
        << "--input-shape is for TorchScript models (.pt), whose files do "
           "not record their inputs; an ONNX model's own input shapes are "
           "used, and --input-shape is ignored";

  // The job records where the weights are: an absolute model path keeps it
  // valid from any working directory.
  CompileOptions opts = options;
  SmallString<256> absModel(options.modelPath);
  if (!llvm::sys::fs::make_absolute(absModel))
    opts.modelPath = std::string(absModel);
  OwningOpRef<ModuleOp> module = importModel(ctx, opts);
  if (!module || failed(checkLoss(*module, options.modelPath)) ||
      failed(checkInputBatch(*module, options.modelPath)) ||
      failed(checkTrainable(*module, options.modelPath)))
    return failure();
  warnUnreadInputs(*module, options.modelPath);

  // Everything is written into a staging directory beside JOBDIR, and
  // moved into JOBDIR only when the whole compile succeeded: a failed one
  // (a pass's error, --stages too large, a missing --profile, the stage
  // build) leaves JOBDIR as it was -- a previous job there intact, no
  // directory when there was none. Before, the ir/ dumps of the failed
  // model replaced the previous job's, beside its job.mlir and manifest.
  FailureOr<std::string> stagingDir = makeStagingDir(ctx, options.outputDir);
  if (failed(stagingDir))
    return failure();
  StagingDir staging{*stagingDir};
  SmallString<256> irDir(staging.path);
  llvm::sys::path::append(irDir, "ir");
  if (std::error_code ec = llvm::sys::fs::create_directories(irDir))
    return emitError(jobLoc) << "cannot create '" << irDir
                             << "': " << ec.message();

  int stageNo = 0;
  auto dump = [&](StringRef name) {
    SmallString<256> path(irDir);
    llvm::sys::path::append(
        path, llvm::formatv("{0:2}-{1}.mlir", stageNo++, name).str());
    for (char &c : path)
      if (c == ' ')
        c = '0';
    return writeAtomically(ctx, path, [&](raw_ostream &os) {
      os << "// Generated by varuna-compile " << options.modelPath
         << " (stage " << name << "); do not edit.\n";
      module->print(os);
    });
  };
  auto run = [&](StringRef name, std::unique_ptr<Pass> pass) {
    PassManager pm(ctx);
    pm.addPass(std::move(pass));
    if (failed(pm.run(*module)))
      return failure();
    return dump(name);
  };

  if (failed(dump("import")))
    return failure();
  if (failed(run("fuse-gelu", createFuseGelu())) ||
      failed(run("fuse-attention", createFuseAttention())) ||
      failed(run("mark-step-means", createMarkStepMeans())) ||
      failed(run("annotate-costs", createAnnotateCosts())))
    return failure();
  FindCutPointsOptions cutOptions;
  cutOptions.numCutPoints = options.numCutPoints;
  cutOptions.maxBytesPerCut = options.maxBytesPerCut;
  if (failed(run("find-cut-points", createFindCutPoints(cutOptions))) ||
      failed(run("outline-sections", createOutlineSections())))
    return failure();
  AnalyzeCrossPartitionOptions crossOptions;
  crossOptions.globalGradNorm = config.needsGlobalGradNorm();
  crossOptions.overflowCheck = config.needsOverflowCheck();
  if (failed(run("analyze-cross-partition",
                 createAnalyzeCrossPartition(crossOptions))))
    return failure();
  PartitionOptions partOptions;
  partOptions.stages = options.stages;
  partOptions.memoryLimit = options.memoryLimit;
  partOptions.rankBaseline = plan::kRankBaselineBytes;
  partOptions.microBatch = config.microBatchSize.value_or(1);
  partOptions.stateCopies = config.optimizer.stateCopies();
  partOptions.profile = options.profilePath;
  if (failed(run("partition", createPartition(partOptions))))
    return failure();

  // The final IR under a stable name: what varuna-run and later tools load.
  SmallString<256> jobIR(staging.path);
  llvm::sys::path::append(jobIR, "job.mlir");
  if (failed(writeAtomically(ctx, jobIR, [&](raw_ostream &os) {
        os << "// Generated by varuna-compile " << options.modelPath
           << "; do not edit.\n";
        module->print(os);
      })))
    return failure();

  // The stage code: generated and built into JOBDIR/libstages.so.
  std::string stagesLine;
  if (options.buildStages) {
    llvm::raw_string_ostream os(stagesLine);
    if (failed(buildStages(*module, staging.path,
                           defaultStageBuildOptions(), os)))
      return failure();
  }

  JobSummary job = JobSummary::read(*module, options.modelPath);
  SmallString<256> manifest(staging.path), report(staging.path);
  llvm::sys::path::append(manifest, "manifest.json");
  llvm::sys::path::append(report, "report.md");
  if (failed(writeAtomically(ctx, report, [&](raw_ostream &os) {
        os << renderReport(job, config);
      })) ||
      failed(writeAtomically(ctx, manifest, [&](raw_ostream &os) {
        os << renderManifest(job, config);
      })) ||
      failed(publishJob(ctx, staging.path, options.outputDir)))
    return failure();
  manifest = options.outputDir;
  llvm::sys::path::append(manifest, "manifest.json");
  report = options.outputDir;
  llvm::sys::path::append(report, "report.md");
  {
    // The library's line names the staging directory it was built in.
    size_t at = stagesLine.find(staging.path);
    if (at != std::string::npos)
      stagesLine.replace(at, staging.path.size(), options.outputDir);
  }

  // The depths partitioned (--stages P: that one only; a P = 1 run needs
  // no partition, but varuna-plan only considers the depths listed).
  std::string depths =
      job.partitions.empty() ? std::string("none")
      : job.partitions.size() == 1
          ? std::to_string(job.partitions.front().stages)
          : std::to_string(job.partitions.front().stages) + ".." +
                std::to_string(job.partitions.back().stages);
  log << "compiled " << options.modelPath << ": " << job.sections.size()
      << " sections, " << job.cutPoints.size() << " cut-points, "
      << job.ties.size() << " tie(s), pipeline depth"
      << (job.partitions.size() == 1 ? " " : "s ") << depths
      << "\n  report:   " << report << "\n  manifest: " << manifest << "\n"
      << stagesLine;
  if (!job.unreadParams.empty())
    log << "note: " << job.unreadParams.size()
        << " trainable parameter(s) the loss never reads, e.g. '"
        << job.unreadParams.front()
        << "': training leaves them as they are (as PyTorch does: their "
           "gradient is None); checkpoints and --dump-params keep them\n";
  return success();
}
