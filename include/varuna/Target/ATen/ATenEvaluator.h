//===- ATenEvaluator.h - Executes a varuna graph with ATen ------*- C++ -*-===//
//
// A reference interpreter of the varuna dialect on libtorch's ATen (CPU): it
// runs a training graph's forward pass and loss on given input tensors and is
// the correctness oracle for the importers (varuna-eval must reproduce the
// framework's loss). The op -> ATen mapping (`evaluateOp`) is what the code
// generator emits; keep them in sync (docs/eval.md has the table).
//
// Torch-facing: this header includes ATen and may only be used from targets
// built with varuna_link_torch (C++20, exceptions). Errors never escape as
// exceptions: they are reported as MLIR diagnostics on the offending op.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_ATENEVALUATOR_H
#define VARUNA_TARGET_ATEN_ATENEVALUATOR_H

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/runtime/Npy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace varuna {

class CompiledSections;

//===----------------------------------------------------------------------===//
// Types and data
//===----------------------------------------------------------------------===//

/// The ATen dtype of a varuna element type (f16 bf16 f32 f64 i1 i8 ui8 i32
/// i64), or nullopt.
std::optional<at::ScalarType> toScalarType(mlir::Type elementType);

/// The concrete sizes of `type` for micro-batch size `batch`.
std::vector<int64_t> concreteShape(VTensorType type, int64_t batch);

/// A tensor holding the values of a dense elements attribute (varuna.constant).
/// Throws ATenEvalError on unsupported attributes.
at::Tensor tensorFromElements(mlir::ElementsAttr attr, at::ScalarType dtype);

/// A tensor copied from a .npy array / to a .npy array (bfloat16, which
/// .npy has no dtype for, as float32: exact).
at::Tensor tensorFromNpy(const rt::NpyArray &array);
rt::NpyArray tensorToNpy(const at::Tensor &tensor);

/// A dtype as NumPy and the rest of Varuna's messages name it ("float32",
/// "int64", "bfloat16"), not ATen's ("Float", "Long").
std::string dtypeName(at::ScalarType type);

//===----------------------------------------------------------------------===//
// The op -> ATen mapping
//===----------------------------------------------------------------------===//

/// Thrown by the op mapping for an op or attribute it cannot evaluate; the
/// evaluator turns it into a diagnostic on the op.
class ATenEvalError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What an op needs besides its operands.
struct ATenOpContext {
  int64_t batch = 1;          ///< the micro-batch size B
  at::Generator generator;    ///< for dropout and random
  /// Returns the current value of a parameter (loaded on first use).
  std::function<at::Tensor(ParamOp)> getParam;
  /// Whether a cross_entropy with reduction mean counts its labels into
  /// `lossCount` (set when the caller weighs micro-batches by that count,
  /// ATenEvalOptions::onLossCount). A counted mean over no label is 0, which
  /// the count weighs by 0; uncounted, it is PyTorch's 0/0 (NaN).
  bool countLoss = false;
  /// Set by a counted cross_entropy with reduction mean: the number of labels
  /// the loss averages over (labels != ignore_index); -1 if none ran.
  double lossCount = -1;
  /// Where a mean cross_entropy counts: `lossCount` when counting, else
  /// nowhere (rt::crossEntropyKernel's `lossCount`).
  double *lossCountSink() { return countLoss ? &lossCount : nullptr; }
};

/// Evaluates one varuna op (not func.return) on its operand tensors, in
/// training mode. Throws ATenEvalError (unsupported op or attribute),
/// c10::Error (from ATen) or rt::DataError (parameter bytes).
at::Tensor evaluateOp(mlir::Operation *op, llvm::ArrayRef<at::Tensor> operands,
                      ATenOpContext &ctx);

/// The name graph input `i` of `f` is fed by: its `varuna.name`, else
/// `arg<i>` (as ATenEvaluator::getInputNames).
std::string argumentName(mlir::func::FuncOp f, unsigned i);

/// The arguments of an outlined section, in order: an argument marked
/// `varuna.recv = i` is `received[i]` (what the previous section sent), one
/// marked `varuna.name` is the graph input of that name. Emits an error on
/// the section and fails otherwise.
mlir::FailureOr<std::vector<at::Tensor>>
sectionArguments(mlir::func::FuncOp section, llvm::ArrayRef<at::Tensor> received,
                 const llvm::StringMap<at::Tensor> &inputs);

//===----------------------------------------------------------------------===//
// The evaluator
//===----------------------------------------------------------------------===//

struct ATenEvalOptions {
  /// Directory that #varuna.data file names are relative to; empty: the
  /// directory of the module's `varuna.source`.
  std::string dataDir;
  /// Seed of the generator used by dropout and random.
  uint64_t seed = 0;
  /// Check every op's result against its type (shape with B substituted and
  /// dtype); a mismatch is an error naming the op.
  bool checkResultTypes = true;
  /// Called after every op with its operands and result (the trainer counts
  /// the labels a loss averages over).
  std::function<void(mlir::Operation *, llvm::ArrayRef<at::Tensor>,
                     const at::Tensor &)>
      observer;
  /// Called after a function whose mean cross-entropy ran, with the number
  /// of labels it averaged over (the trainer weights micro-batches by it).
  std::function<void(double)> onLossCount;
  /// The job's generated stage code (CompiledSections.h): when set, every
  /// section runs through its generated body instead of being interpreted.
  std::shared_ptr<const CompiledSections> compiled;
  /// Mixed precision (the training configuration's bf16 / fp16): every
  /// function runs under ATen's CPU autocast with this dtype -- matmuls,
  /// convolutions and the like compute in it, parameters stay fp32 (the
  /// master weights), autograd casts gradients back -- and its results are
  /// cast to their declared types, so values crossing a cut point (and the
  /// loss) keep the IR's types whether or not a stage boundary is there.
  /// Result dtype checks are off then (shapes are still checked).
  std::optional<at::ScalarType> autocast;
};

class ATenEvaluator {
public:
  /// Finds the graph (the func.func with `varuna.graph`) of `module`; emits
  /// an error on the module and fails if there is none or several.
  static mlir::FailureOr<ATenEvaluator> create(mlir::ModuleOp module,
                                               ATenEvalOptions options = {});

  mlir::func::FuncOp getGraph() const { return graph; }
  /// `varuna.name` of each graph input (`arg<i>` if unnamed).
  std::vector<std::string> getInputNames() const;
  /// `varuna.name` of each graph result (`result<i>` if unnamed).
  std::vector<std::string> getResultNames() const;
  /// Index of the result marked `varuna.loss`, if any.
  std::optional<unsigned> getLossIndex() const;

  /// The batch size implied by `inputs`, after checking every input's shape
  /// and dtype against its type; emits an error naming the input otherwise.
  mlir::FailureOr<int64_t> checkInputs(llvm::ArrayRef<at::Tensor> inputs);

  /// Runs the graph on `inputs` (one per graph argument, in order) and
  /// returns one tensor per graph result. Parameters are read from their
  /// #varuna.data on first use and cached (batch_norm updates running stats
  /// in the cache, as training would).
  mlir::FailureOr<std::vector<at::Tensor>> run(llvm::ArrayRef<at::Tensor> inputs);

  /// Every trainable (not frozen) parameter that some function of the
  /// module reads -- or those `wanted` accepts -- loaded and marked
  /// requires_grad, in module order: the leaves training updates. Graph
  /// evaluation reads these same tensors. A pipeline stage asks only for its
  /// own, so no rank loads the whole model.
  mlir::FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
  trainableParams(
      const std::function<bool(llvm::StringRef)> &wanted = nullptr);

  /// The trainable parameters no function reads (a model's pooler that the
  /// loss never uses; the TorchScript importer keeps them), loaded, in
  /// module order, without requires_grad. PyTorch never changes them either
  /// (their gradient stays None: no step, no weight decay); trainers keep
  /// them only so that checkpoints (section 0) and --dump-params hold every
  /// parameter of the model.
  mlir::FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
  unreadParams();

  /// The frozen parameters training writes -- the running statistics of
  /// every batch_norm -- or those `wanted` accepts, loaded, in module order:
  /// not trained, but state a checkpoint keeps and replicas agree on.
  mlir::FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
  stateBuffers(const std::function<bool(llvm::StringRef)> &wanted = nullptr);

  /// The other frozen parameters some function reads -- training never
  /// changes them: attention masks, position ids, layers a fine-tune
  /// freezes -- or those `wanted` accepts, loaded, in module order.
  /// Checkpoints keep them (rt::frozenTensorName) so that a resume reads
  /// nothing from the model file.
  mlir::FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
  constantParams(const std::function<bool(llvm::StringRef)> &wanted = nullptr);

  /// Runs the outlined sections (varuna-outline-sections) one after the
  /// other, each receiving the previous one's sent values and reading the
  /// graph inputs it names, and returns the last section's results -- the
  /// graph's results if the sections compose correctly.
  mlir::FailureOr<std::vector<at::Tensor>>
  runSections(llvm::ArrayRef<at::Tensor> inputs);

  /// The outlined sections in order (empty if there are none).
  std::vector<mlir::func::FuncOp> getSections() const;
  /// Runs one function (a section) on its arguments at micro-batch size
  /// `batch`, with the evaluator's parameters and generator.
  mlir::FailureOr<std::vector<at::Tensor>>
  runSection(mlir::func::FuncOp section, llvm::ArrayRef<at::Tensor> args,
             int64_t batch);
  /// The generator dropout and random ops draw from (its state can be saved
  /// and restored so a recomputed forward draws the same numbers).
  at::Generator &getGenerator() { return generator; }
  /// Reseeds the generator for training step `step` of the rank at
  /// (`stage`, `replica`) from (seed, step, stage, replica): each stage and
  /// replica draws its own numbers (two stages never repeat each other's
  /// dropout masks, nor two replicas their noise), and a step's draws do not
  /// depend on the steps before, so a run resumed from a checkpoint draws
  /// what the uninterrupted run drew.
  void seedStep(int64_t step, int64_t stage, int64_t replica);
  /// The parameter's tensor: read from its #varuna.data on first use, then
  /// the cached one. Throws ATenEvalError (naming it) when it cannot be read.
  at::Tensor loadParam(ParamOp param);

  /// A resume, while it loads the parameters it will overwrite from a
  /// checkpoint: with this on, a parameter whose model file cannot be read
  /// (moved, deleted) or changed since compiling (digest) is not an error;
  /// it gets a NaN-filled tensor and is recorded with the error it would
  /// have raised (deferredParams). The caller restores the checkpoint,
  /// turns this off and makes sure every deferred parameter was restored
  /// (firstUnrestored). Parameters first read after that (frozen ones,
  /// which checkpoints do not hold) raise their error as usual.
  void deferUnreadableParams(bool on) { deferring = on; }
  /// Deferred parameter -> the error its loading raised.
  const std::map<std::string, std::string> &deferredParams() const {
    return deferred;
  }
  /// The first deferred parameter not in `restored`, with its error.
  std::optional<std::pair<std::string, std::string>>
  firstUnrestored(const std::set<std::string> &restored) const;

private:
  ATenEvaluator(mlir::ModuleOp module, mlir::func::FuncOp graph,
                ATenEvalOptions options);
  ATenOpContext makeContext(int64_t batch);
  /// The parameters `keep` accepts, loaded, in module order; an error names
  /// the one that cannot be read.
  mlir::FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
  loadParams(const std::function<bool(ParamOp)> &keep);
  mlir::FailureOr<std::vector<at::Tensor>>
  runFunction(mlir::func::FuncOp func, llvm::ArrayRef<at::Tensor> args,
              ATenOpContext &ctx);
  mlir::FailureOr<std::vector<at::Tensor>>
  runFunctionBody(mlir::func::FuncOp func, llvm::ArrayRef<at::Tensor> args,
                  ATenOpContext &ctx);
  mlir::FailureOr<std::vector<at::Tensor>>
  runCompiled(unsigned k, mlir::func::FuncOp func,
              llvm::ArrayRef<at::Tensor> args, ATenOpContext &ctx);

  mlir::ModuleOp module;
  mutable mlir::func::FuncOp graph; // op handles have no const accessors
  ATenEvalOptions options;
  std::string dataDir;
  llvm::StringMap<at::Tensor> params;
  bool deferring = false;
  std::map<std::string, std::string> deferred;
  at::Generator generator;
  std::vector<std::vector<ParamOp>> compiledParams; // per section
};

/// What a forward pass of the section chain leaves for recomputing each
/// section: its arguments and the generator's state before it ran.
struct SectionStash {
  std::vector<at::Tensor> args;
  at::Tensor rng;
};

/// Runs `sections` one after the other without autograd on the graph
/// inputs `inputs` at micro-batch size `batch` (each receiving what the
/// previous one sent), filling `stash` with one entry per section; returns
/// the last section's results. Fails after a diagnostic.
mlir::FailureOr<std::vector<at::Tensor>>
forwardSections(ATenEvaluator &evaluator,
                llvm::ArrayRef<mlir::func::FuncOp> sections,
                const llvm::StringMap<at::Tensor> &inputs, int64_t batch,
                std::vector<SectionStash> &stash);

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_ATENEVALUATOR_H
