//===- GraphStructure.h - Where a training graph can be cut -----*- C++ -*-===//
//
// Analyses the straight-line body of the graph function for cutting it into
// sections. Position p (1 <= p < N) is the boundary before op p.
//
// Every value has a kind:
//  * Static: derives only from parameters and constants (weights, a
//    transposed weight, a causal mask). Duplicated into every section that
//    uses it; never sent.
//  * InputOnly: derives from graph inputs but no trainable parameter (an
//    attention mask computed from `attention_mask`, position ids, labels).
//    Re-read or recomputed by the section that uses it; never sent.
//  * Activation: derives from graph inputs and trainable parameters (or from
//    a random draw). Crosses a cut by being sent to the next stage.
//
// A position is *clean* if it comes right after an activation op (so two
// cuts always have compute between them), at least one activation crosses
// it, there is compute on both sides, and no parameter is used on both sides
// unless it is a tie (a parameter whose uses span more than half the graph,
// like an embedding reused by the output projection).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_ANALYSIS_GRAPHSTRUCTURE_H
#define VARUNA_ANALYSIS_GRAPHSTRUCTURE_H

#include "varuna/Support/SymInt.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVector.h"
#include <string>

namespace varuna {

class GraphStructure {
public:
  enum class Kind { Static, InputOnly, Activation };

  /// Fails (with a diagnostic) if the body is not a single block of varuna
  /// ops or a cost is not affine in B.
  static mlir::FailureOr<GraphStructure> analyze(mlir::func::FuncOp graph);

  int64_t numOps() const { return ops.size(); }
  mlir::Operation *op(int64_t i) const { return ops[i]; }
  int64_t indexOf(mlir::Operation *op) const; // N for the terminator
  Kind kind(mlir::Value v) const;

  /// Per-example compute weight of op i (forward + backward FLOPs plus bytes
  /// written, the coefficients of B) and its prefix sums: weightBefore(p) is
  /// the weight of ops [0, p).
  double weight(int64_t i) const { return weights[i]; }
  double weightBefore(int64_t p) const { return prefix[p]; }
  double totalWeight() const { return prefix.back(); }

  /// Bytes of the activations crossing position p (affine in B).
  SymInt crossingBytes(int64_t p) const { return bytesAt[p]; }
  bool isClean(int64_t p) const { return clean[p]; }
  /// How many modules have parameters used on both sides of p. A module is a
  /// parameter name up to its first numeric component (`h.3` for
  /// `h.3.attn.c_attn.weight`), else without its last component. Breaks ties
  /// between equally cheap cuts toward the framework's own layer boundaries.
  int64_t moduleSplits(int64_t p) const { return splits[p]; }
  /// The activations crossing p, in definition order.
  llvm::SmallVector<mlir::Value> crossingActivations(int64_t p) const;

  /// Trainable parameters used on both sides of some clean position (ties),
  /// with the op indices that use them.
  const llvm::MapVector<llvm::StringRef, llvm::SmallVector<int64_t>> &
  tiedParams() const {
    return ties;
  }
  /// Every trainable parameter's effective uses (ops that consume it directly
  /// or through a static chain such as a transpose).
  const llvm::MapVector<llvm::StringRef, llvm::SmallVector<int64_t>> &
  paramUses() const {
    return uses;
  }

  /// The ops producing activations, in order (the *activation sequence*).
  /// Static and input-only ops (parameter reads, masks) are left out: they
  /// can sit on either side of a cut, and exporters place them irregularly.
  int64_t numActivationOps() const { return actOps.size(); }
  int64_t activationOp(int64_t k) const { return actOps[k]; }
  /// The position just before activation op k (after activation op k-1).
  int64_t positionBeforeActivation(int64_t k) const {
    return k == 0 ? actOps[0] : actOps[k - 1] + 1;
  }

  /// A hash of activation op k's structure (op name, attributes, types, and
  /// operands: activations by their distance in the activation sequence,
  /// others by kind and type) that is equal for the same op in two
  /// repetitions of a block.
  uint64_t structuralHash(int64_t k) const { return hashes[k]; }

private:
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::DenseMap<mlir::Operation *, int64_t> index;
  llvm::DenseMap<mlir::Value, Kind> kinds;
  llvm::SmallVector<double> weights, prefix;
  llvm::SmallVector<SymInt> bytesAt;
  llvm::SmallVector<bool> clean;
  llvm::SmallVector<int64_t> splits;
  llvm::SmallVector<uint64_t> hashes;
  llvm::SmallVector<int64_t> actOps;
  llvm::MapVector<llvm::StringRef, llvm::SmallVector<int64_t>> uses, ties;
  llvm::DenseMap<mlir::Value, int64_t> lastUse;
};

/// A block of `period` activation ops repeated in the activation sequence:
/// it occurs at each of `starts` (ascending, not overlapping; those
/// [starts[k], starts[k] + period) have the structural hashes of
/// [start, start + period)), `count` = starts.size() times. Occurrences
/// need not be back to back: a model may put other ops between some of its
/// layers (a gate after layer 0, a different layer every few).
struct RepeatedBlock {
  int64_t start = 0, period = 0, count = 0;
  llvm::SmallVector<int64_t> starts;
};

/// The block of the smallest period whose occurrences cover at least 90% of
/// the activation ops that the best-covering one covers, if a block of at
/// least `minPeriod` ops occurs back to back at least twice somewhere: for
/// each period, the longest back-to-back run names the block, then every
/// occurrence of it in the whole sequence counts. (A block of several
/// layers and the op between them -- a gate after every third -- covers a
/// little more than the layer, whose occurrences are the cuts wanted.)
/// (minPeriod 3: a Linear + ReLU layer is 3 ops -- matmul, add, relu -- and
/// with 4 a 20-layer MLP was cut every second layer, 11 sections.)
std::optional<RepeatedBlock> findRepeatedBlock(const GraphStructure &g,
                                               int64_t minPeriod = 3);

} // namespace varuna

#endif // VARUNA_ANALYSIS_GRAPHSTRUCTURE_H
