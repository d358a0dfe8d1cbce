//===- Partition.h - Balanced grouping of sections into stages --*- C++ -*-===//
//
// The compiler cuts the model into K consecutive *sections* (the pieces between
// cut-points). At run time the planner groups them into P pipeline stages:
// stage s runs sections [boundaries[s], boundaries[s+1]). This header is the
// partitioner's whole contract; docs/partition.md explains the algorithm.
//
// Inputs, per section i in [0, K):
//   computeSeconds     forward + backward (+ recompute) cost. Any additive cost
//                      works (seconds, FLOPs); must be finite and >= 0.
//   paramBytes         parameters + gradients + optimizer state held by the
//                      section; >= 0.
//   activationBytes    bytes of the section's *input* activation, stashed once
//                      per in-flight micro-batch. Only the first section of a
//                      stage stashes (the rest is recomputed); >= 0.
//   sendSecondsAfter   cost of cutting between section i and i+1 (sending the
//                      activation forward and its gradient back). When that
//                      boundary is a stage boundary the cost is added to BOTH
//                      adjacent stages (each side pays its send or receive).
//                      Ignored for the last section; finite and >= 0.
//
// Stage cost and memory (stage s of P over sections [a, b)):
//   cost(s)   = sum computeSeconds[a..b)
//               + (a > 0 ? sendSecondsAfter[a-1] : 0)
//               + (b < K ? sendSecondsAfter[b-1] : 0)
//   inFlight(s, P) = min(P - s, maxInFlight)       (InFlightPolicy::Pipelined:
//                    Varuna's schedule and 1F1B; stage s has at most P - s
//                    micro-batches between its forward and its backward)
//                  = maxInFlight                   (InFlightPolicy::All: GPipe)
//               where maxInFlight is the micro-batch count Nm (unbounded when
//               not given; the All policy requires it).
//   memory(s) = sum paramBytes[a..b) + inFlight(s, P) * activationBytes[a]
// inFlight depends only on P - s (the number of stages from s to the end);
// that is what lets partitionAll() share one table across every P.
//
// Output: P+1 boundaries (first 0, last K, strictly increasing: every stage is
// non-empty), per-stage cost / memory / in-flight count, the bottleneck (the
// largest stage cost) and the stage that has it.
//
// Optimality (exact, not heuristic):
//   1. minimise the bottleneck, max_s cost(s), subject to memory(s) <= limit
//      for every stage;
//   2. among the partitions with that bottleneck, minimise sum_s cost(s)^2
//      (the stages below the bottleneck are evened out too: costs 4,3,3,
//      sum of squares 34, are preferred to 4,4,2, 36);
//   3. among those, the lexicographically smallest boundary vector.
// Ties are compared exactly: every stage cost is computed by one function, so
// integer-valued inputs (below 2^53) give bit-exact, reproducible results.
//
// Errors are returned, never thrown or asserted (this library is linked into
// MLIR tools built with -fno-exceptions): P < 1, P > K, invalid inputs
// (negative or non-finite costs, negative byte counts, overflowing sums), and
// no partition fitting the memory limit (the message names the stage and
// sections of the partition with the smallest peak memory and the overshoot).
//
// Note: the bottleneck is non-increasing in P when there is no memory limit
// and no send cost. Send costs (a cut adds cost) and the in-flight rule (a
// deeper pipeline stashes more on its first stages) can make a larger P worse
// or infeasible; the planner sweeps every P and compares anyway.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_PLAN_PARTITION_H
#define VARUNA_PLAN_PARTITION_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace varuna {
namespace plan {

/// One section: the piece of the model between two consecutive cut-points.
struct Section {
  double computeSeconds = 0;
  int64_t paramBytes = 0;
  int64_t activationBytes = 0;
  double sendSecondsAfter = 0;
};

enum class InFlightPolicy {
  /// Stage s of P stashes min(P - s, maxInFlight) inputs (Varuna, 1F1B).
  Pipelined,
  /// Every stage stashes maxInFlight inputs (GPipe: all Nm micro-batches).
  All,
};

/// What a rank holds besides its stage's model state: libtorch, the
/// transports' buffers, the process (measured 190-240 MB on CPU; a GPU's
/// CUDA context is of the same order). A per-device memory limit is met by
/// the stage's state plus this: without it a job compiled for 1.5 GiB had
/// a rank killed at 1.5 GiB (estimated 1.38 GiB, measured 1.62).
constexpr int64_t kRankBaselineBytes = int64_t(256) << 20;

struct PartitionOptions {
  /// Per-device memory limit in bytes; no limit when unset. Must be > 0.
  std::optional<int64_t> memoryLimitBytes;
  InFlightPolicy inFlightPolicy = InFlightPolicy::Pipelined;
  /// Micro-batches per replica (Nm): caps the in-flight count. Required (>= 1)
  /// by InFlightPolicy::All.
  std::optional<int64_t> maxInFlight;
};

struct Partition {
  /// P+1 section indices: stage s runs sections [boundaries[s],
  /// boundaries[s+1]).
  std::vector<unsigned> boundaries;
  std::vector<double> stageCost;
  std::vector<int64_t> stageMemoryBytes;
  std::vector<int64_t> stageInFlight;
  /// max_s stageCost[s], and the first stage that reaches it.
  double bottleneck = 0;
  unsigned bottleneckStage = 0;
  /// sum_s stageCost[s]^2 (the secondary objective).
  double sumSquares = 0;

  unsigned numStages() const { return unsigned(stageCost.size()); }
  /// "[0, 3) [3, 7) [7, 9); bottleneck 12 on stage 1".
  std::string str() const;
};

/// Either a Partition or an error message. Check before dereferencing.
class [[nodiscard]] PartitionResult {
public:
  enum class ErrorKind {
    None,
    InvalidInput,  ///< negative / non-finite costs, bad options, no sections
    TooFewStages,  ///< P < 1
    TooManyStages, ///< P > K
    MemoryInfeasible,
  };

  static PartitionResult success(Partition p) {
    PartitionResult r;
    r.value = std::move(p);
    return r;
  }
  static PartitionResult failure(ErrorKind kind, std::string message) {
    PartitionResult r;
    r.errorKind = kind;
    r.message = std::move(message);
    return r;
  }

  bool ok() const { return value.has_value(); }
  explicit operator bool() const { return ok(); }
  const Partition &operator*() const { return *value; }
  const Partition *operator->() const { return &*value; }
  ErrorKind kind() const { return errorKind; }
  /// Empty on success.
  const std::string &error() const { return message; }

private:
  std::optional<Partition> value;
  ErrorKind errorKind = ErrorKind::None;
  std::string message;
};

/// The optimal partition of `sections` into `numStages` stages.
PartitionResult partition(const std::vector<Section> &sections,
                          unsigned numStages,
                          const PartitionOptions &options = {});

/// The optimal partition for every P in [1, maxStages]: element P-1 is what
/// partition(sections, P, options) returns (P > K gives the TooManyStages
/// error). Shares the work across P: O(maxStages * K * log K) for typical
/// inputs, O(maxStages * K^2) in the worst case.
std::vector<PartitionResult> partitionAll(const std::vector<Section> &sections,
                                          unsigned maxStages,
                                          const PartitionOptions &options = {});

} // namespace plan
} // namespace varuna

#endif // VARUNA_PLAN_PARTITION_H
