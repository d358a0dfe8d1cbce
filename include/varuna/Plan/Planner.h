//===- Planner.h - Sweep pipeline depths with the simulator -----*- C++ -*-===//
//
// The auto-configuration of DESIGN.md section 4 on per-example section
// costs: for every P from 1 to min(sections, devices) that has a partition
// (and fits the memory limit), D = floor(devices / P) (at most M / m),
// Nm = ceil(M / (D m)) micro-batches for the most loaded replica (the
// runtime deals M / m micro-batches out as evenly as they go); the stages' costs are the partition's sums,
// the boundary messages the cut-point sizes, the data-parallel all-reduce a
// ring over D of the stage's parameter bytes, the step's end (a world
// all-reduce of the loss, each tie's all-reduce over its stages, the norm's
// with clipping), the optimizer the slowest
// stage's (its sections' measured steps); each configuration is
// simulated (Simulator.h), on as many threads as there are cores, and the
// rows come back fastest first.
//
// Costs come either from measured times (seconds per example) or from the
// compiler's FLOP estimates divided by an assumed FLOP rate; the tool says
// which. Plain C++17, no exceptions.
//
// Memory of stage s (stageMemory), for the --memory limit: its parameters
// with their gradients and `stateCopies` optimizer copies; the stashed
// input of every micro-batch in flight (cut bytes x m; in flight: as many
// as the static order holds at once -- about P - s for 1F1B, a few more
// for Varuna, which forwards while it waits, all Nm for GPipe); and the
// working memory of one
// micro-batch (the measured peak of its sections' forward + backward,
// summed: an upper bound), times the micro-batches in flight for 1F1B,
// which keeps activations instead of recomputing them.
//
// The micro-batch size (chooseMicroBatch): the smallest measured size whose
// next larger size improves the time per example by less than a tolerance
// (5%): larger micro-batches would only deepen the pipeline bubble.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_PLAN_PLANNER_H
#define VARUNA_PLAN_PLANNER_H

#include "varuna/Plan/Simulator.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace varuna {
namespace plan {

struct PlanSection {
  double forwardSeconds = 0;  ///< per example
  double backwardSeconds = 0; ///< per example
  double paramBytes = 0;
  double workingBytesPerExample = 0; ///< measured fwd + bwd peak; 0: unknown
  double optimizerSeconds = 0;       ///< one step over its parameters
  /// Per example: the two parts of a split backward (zero-bubble's B and
  /// W); < 0: unknown (the simulator splits `backward` in half).
  double weightSeconds = -1;
  double inputSeconds = -1;
  /// Batch norms' running statistics (manifest `running_stats_bytes`),
  /// averaged over the replicas after each step.
  double runningStatsBytes = 0;
  /// Its largest parameter (manifest `largest_param_bytes`; 0: unknown): a
  /// gradient bucket of its own however large, taken to be final only at
  /// the end of the stage's backward (an input embedding's is).
  double largestParamBytes = 0;
  /// The section's parameters, in the order it reads them, with their
  /// gradients' bytes (manifest `parameters` and `gradient_bytes`; 0: a
  /// frozen one). Known: the stage's buckets are packed as the runtime
  /// packs them (rt::GradientBuckets: in reverse order, runs of at most
  /// bucketBytes, a larger parameter alone); empty: ceil(bytes / bucket).
  std::vector<std::pair<std::string, double>> gradients;
};

struct PlanInput {
  std::vector<PlanSection> sections;
  std::vector<double> cutBytesPerExample;                ///< K - 1
  std::map<int, std::vector<int64_t>> boundaries;        ///< P -> P + 1 ints
  int devices = 1;
  int64_t globalBatch = 1;
  int64_t microBatch = 1;
  ScheduleKind schedule = ScheduleKind::Varuna;
  double memoryLimitBytes = 0; ///< 0: unlimited
  /// What a rank holds besides its stage (plan::kRankBaselineBytes, which
  /// varuna-plan passes), counted against memoryLimitBytes, not in the
  /// stage memory the table shows.
  double rankBaselineBytes = 0;
  double stateCopies = 2;      ///< optimizer state per parameter (Adam: 2)
  /// The message latency Varuna's static order plans for, in forward times
  /// (varuna-run --schedule-latency); < 0: from the link, see configFor.
  int64_t scheduleLatency = -1;
  LinkModel link;
  double allreduceBytesPerSecond = 1.25e9;
  double allreduceLatencySeconds = 0;
  /// Measured rings (varuna-calibrate): an all-reduce over R ranks takes
  /// latency + 2 (R-1)/R x bytes / bytesPerSecond. When given, D replicas
  /// use the largest measured R <= D (the smallest if none), the latency
  /// scaled by (D-1)/(R-1); else the two numbers above.
  struct Ring {
    int ranks;
    double latencySeconds, bytesPerSecond;
  };
  std::vector<Ring> allreduceRings;
  /// Devices per host (K): in Varuna's layout a host holds consecutive
  /// ranks, i.e. min(K, P) stages of one replica, whose all-reduces run at
  /// once and share the host's network. Their bandwidth is divided by the
  /// slowdown measured for concurrent rings (rings of 2 all-reducing
  /// together vs one alone), interpolated linearly in the number of rings;
  /// without a measurement by that number.
  int devicesPerHost = 1;
  /// Measured across hosts (varuna-calibrate --across-hosts): the link and
  /// the rings used where Varuna's layout -- devicesPerHost consecutive
  /// ranks per host, replica r's stage s on rank r P + s -- puts the two
  /// ends of a stage boundary, or the members of a stage's ring, on
  /// different hosts in any replica. Absent: `link` and the rings above
  /// everywhere.
  std::optional<LinkModel> remoteLink;
  std::vector<Ring> remoteRings;
  struct Concurrent {
    int rings = 0;          ///< how many rings of 2 ran at once (0: none)
    double slowdown = 1;    ///< their per-ring time / one ring's, large sizes
  } concurrent;
  double optimizerSeconds = 0; ///< per step, on top of the slowest stage's
  /// Tied parameters (the manifest's `ties`): where the partition puts a
  /// tie's sections on two or more stages, its gradient (bytes) is
  /// all-reduced over those stages at the step's end, in every replica at
  /// once.
  struct Tie {
    std::vector<int64_t> sections;
    double bytes = 0;
  };
  std::vector<Tie> ties;
  /// With clipping or LAMB the step reduces the global gradient norm over
  /// all ranks too (the manifest's global_reductions has grad_norm).
  bool normSync = false;
  /// varuna-run --bucket-mb in bytes: a stage's gradients are all-reduced
  /// in buckets of at most this many bytes (each paying the latency; see
  /// PlanSection::gradients) that overlap its last backward; 0: one, after
  /// it.
  double bucketBytes = 25.0 * 1048576;
  int threads = 0; ///< simulations run in parallel; 0: one per core
  /// With link.jitterSeconds: each configuration's time is the mean of
  /// this many simulated draws (SimulationConfig::jitterSamples).
  int jitterSamples = 8;
  /// All ranks on one machine with this many cores, more ranks than cores
  /// possible (SimulationConfig::sharedCores); 0: a device per rank.
  int sharedCores = 0;
  double oversubscribedSlowdown = 1; ///< calibration's "oversubscribed"
  /// With sharedCores: the CPU communication costs (varuna-calibrate's
  /// cpu_seconds fits, latency + bytes x perByte): per end of a boundary
  /// message, and per rank of a ring-of-2 all-reduce (D replicas: the
  /// latency (D - 1) times, the bytes 2 (D - 1) / D times, as a ring's
  /// traffic grows). Absent: not modelled.
  struct CpuCost {
    double latency = 0, perByte = 0;
  };
  std::optional<CpuCost> messageCpu, allreduceCpu;
};

struct PlanRow {
  int stages = 0, replicas = 0;
  int64_t microBatch = 0, microBatches = 0;
  double seconds = 0, examplesPerSecond = 0;
  int idleDevices = 0;
  double peakStageBytes = 0; ///< the largest stage's memory (stageMemory)
  int64_t scheduleLatency = 0; ///< what the static order was planned for
  /// zb: what a split backward was taken to cost (TimingModel; from the
  /// calibration's B and W when it has them).
  int64_t splitCostPercent = TimingModel().splitCostPercent;
  ScheduleKind schedule = ScheduleKind::Varuna;
  std::vector<double> busyFraction;
};

struct PlanResult {
  std::string error;            ///< empty on success
  std::vector<PlanRow> rows;    ///< fastest first
  std::vector<std::string> skipped; ///< "P=3: does not fit memory", ...
  bool ok() const { return error.empty(); }
};

/// The simulation config of one (P, D) from `in` (for --simulate). With
/// in.scheduleLatency < 0 and Varuna's schedule, the static order plans for
/// the time of the slowest boundary message (its link's latency + its
/// activation over the link's bandwidth) in units of the mean stage's forward time, rounded up: on
/// a slow link it starts more forwards before the first backward, as
/// varuna-run --schedule-latency does with the same number. (Rounding a
/// message time below one forward down to 0 lost up to 10% in the paper
/// what-if; a larger latency than needed costs only stash memory.)
SimulationConfig configFor(const PlanInput &in, int stages, int replicas,
                           std::string &error);

PlanResult planSweep(const PlanInput &in);

/// planSweep once per schedule in `kinds` (in.schedule ignored), the rows
/// merged, fastest first (ties: the earlier kind); with several kinds a
/// skipped line names its schedule ("zb P=3: ..."). The memory check is each schedule's own: 1F1B
/// and zero-bubble keep whole activations of the micro-batches a stage
/// holds, Varuna and GPipe only their stashed inputs -- so under a tight
/// --memory the choice can fall to a slower schedule that recomputes.
/// Fails only when no schedule has a row.
PlanResult planSchedules(const PlanInput &in,
                         const std::vector<ScheduleKind> &kinds);

/// Bytes each stage of the P-stage partition needs at in.microBatch when
/// stage s holds inFlight[s] micro-batches at once (SimulationResult::
/// inFlight: the static order's); empty if `in` has no partition into P
/// stages or inFlight has not P entries.
std::vector<double> stageMemory(const PlanInput &in, int stages,
                                const std::vector<int64_t> &inFlight);

/// (micro-batch size, seconds per example), in any order.
struct MicroBatchTime {
  int64_t microBatch;
  double secondsPerExample;
};

/// The smallest size whose next larger one is less than `tolerance`
/// (relative) faster per example; 0 for an empty list.
int64_t chooseMicroBatch(std::vector<MicroBatchTime> times,
                         double tolerance = 0.05);

} // namespace plan
} // namespace varuna

#endif // VARUNA_PLAN_PLANNER_H
