//===- Simulator.h - Event-driven simulation of one mini-batch --*- C++ -*-===//
//
// Estimates the time of one mini-batch of a P-stage pipeline replica (the
// DESIGN.md section 4 simulator): every stage is modelled, not just the
// slowest. Each stage runs its static task order (plan::schedule: varuna |
// gpipe | 1f1b | zb) as the runtime does (Target/ATen/PipelineTrainer.h): a task
// starts when the stage is free and its inputs are there; with `deviate`,
// when the scheduled task waits for a message, the first later recompute (or
// the first backward left: backwards keep their order) that is ready runs
// instead, else the next forward if its
// activation is there and the stage holds fewer micro-batches than the
// static order does at its peak. Activations and gradients travel over
// per-direction links with latency, bandwidth (transfers on one link are
// serialized) and seeded uniform jitter. A stage all-reduces its gradients
// over the replicas (allreduceSeconds[s], overlapping the other stages'
// work) in allreduceBuckets[s] buckets, as the runtime does
// (rt::GradientBuckets): bucket j of n is final (j+1)/n of the way through
// the stage's last backward (zero-bubble: its last W) and is reduced then, or when bucket j-1 is done
// if later, taking allreduceSeconds[s] / n (or, with lastBucketShare[s],
// the last that share and the others the rest evenly); one bucket starts after the
// last backward. The step then ends as the runtime ends it: one all-reduce
// over every rank (the loss; every rank waits there for the slowest, so it
// starts when the last stage's last task ends), the buckets awaited, each
// tie's gradients summed over the stages holding it, with clipping or LAMB
// a second world all-reduce (the global norm), then the optimizer.
//
// Inputs are per-micro-batch seconds (from varuna-calibrate, or static
// estimates); the output is the mini-batch time, each stage's busy
// fraction and, on request, the timeline (the runtime's Chrome-trace format
// via timelineJson). Plain C++17 without exceptions: errors are returned.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_PLAN_SIMULATOR_H
#define VARUNA_PLAN_SIMULATOR_H

#include "varuna/Plan/Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace varuna {
namespace plan {

struct StageCost {
  double forward = 0;   ///< seconds per micro-batch
  double backward = 0;
  double recompute = -1; ///< < 0: same as forward
  /// Zero-bubble (stages s > 0): what its W takes (the weight gradients);
  /// < 0: half of `backward`. And what its B takes (the input gradients);
  /// < 0: the rest of `backward`. Measured, the two add up to a little
  /// more than the whole backward.
  double weight = -1;
  double input = -1;
};

struct LinkModel {
  double latencySeconds = 0;
  double bytesPerSecond = 0; ///< 0: unlimited
  double jitterSeconds = 0;  ///< uniform in [-jitter, +jitter]
};

struct SimulationConfig {
  ScheduleKind schedule = ScheduleKind::Varuna;
  int numStages = 1;
  int numMicroBatches = 1;
  std::vector<StageCost> stages;        ///< numStages entries
  std::vector<double> boundaryBytes;    ///< numStages - 1: one activation
                                        ///< (and one gradient) message
  LinkModel link;
  /// Per boundary (numStages - 1; between stage b and b + 1), e.g. links
  /// that cross hosts and links that do not; empty: `link` for all.
  std::vector<LinkModel> links;
  uint64_t seed = 0;
  /// With jitter on a link: the mini-batch time and busy fractions are the
  /// mean over this many draws (the timeline, deviations and in-flight
  /// counts are the first draw's). One draw is one random mini-batch, not
  /// what a run averages to. The draws come in antithetic pairs: seeds
  /// seed, seed + 1, ... each drawn as it is and with every jitter negated,
  /// so a static order's mean is never below its time without jitter (its
  /// step time is convex in the delays); 8 independent draws could land
  /// below it (1F1B measured 1.4% faster with jitter).
  int jitterSamples = 1;
  /// The draw's jitter negated (the antithetic half of a pair; simulate()
  /// sets it).
  bool negateJitter = false;
  bool deviate = true; ///< Varuna's schedule only, as in the runtime
  TimingModel scheduleTiming;           ///< what the static orders assume
  std::vector<double> allreduceSeconds; ///< per stage; empty: none
  std::vector<int> allreduceBuckets;    ///< per stage; empty: 1 each
  /// Per stage (empty, or 0: the buckets share allreduceSeconds evenly):
  /// the share of allreduceSeconds[s] its last bucket takes -- a parameter
  /// larger than a bucket is one bucket of its own, reduced after the
  /// backward -- the others sharing the rest evenly.
  std::vector<double> lastBucketShare;
  /// Per stage (empty: none): the all-reduce of its batch norms' running
  /// statistics over the replicas, after its gradient buckets.
  std::vector<double> runningStatsSeconds;
  /// More ranks than cores (a test machine's case; 0: a device per rank,
  /// the default): the P x replicasSharing ranks share `sharedCores` cores,
  /// the replicas in step. While b stages of the replica compute (a task's
  /// own included) each runs at min(1, sharedCores / (replicasSharing x
  /// b)) of its speed: a first pass fixes each task's rate at its start,
  /// four more integrate it over the previous pass's profile of b.
  int sharedCores = 0;
  int replicasSharing = 1;
  /// And while ranks outnumber the cores, every task is this much slower
  /// still (context switches, caches; varuna-calibrate's "oversubscribed").
  double oversubscribedSlowdown = 1;
  /// With sharedCores, what communication takes from compute: the CPU time
  /// one end of a message over boundary b costs (the kernel's copies, the
  /// transport's threads; numStages - 1 entries), added to the work of the
  /// task that sends it and of the one that receives it; and the CPU time
  /// each rank of stage s spends in its gradient all-reduce (numStages
  /// entries), which then runs at the shared rate (the rest of its
  /// allreduceSeconds is waiting) and counts as its stage computing. Empty:
  /// not modelled (with a device per rank they do not compete).
  std::vector<double> messageCpuSeconds;
  std::vector<double> allreduceCpuSeconds;
  double optimizerSeconds = 0;
  /// One all-reduce of a few numbers over all P x D ranks (the step's loss
  /// totals; the global gradient norm); 0: none (one rank).
  double syncSeconds = 0;
  bool normSync = false; ///< a second one for the gradient norm
  /// A tied parameter's gradients summed over the stages holding copies
  /// (stages: at least two distinct, ascending), one tie after another.
  struct TieReduce {
    std::vector<int> stages;
    double seconds = 0;
  };
  std::vector<TieReduce> ties;
  bool recordTimeline = false;
};

struct SimSpan {
  int stage;
  Task task;
  double start, end;
};

/// A span of the step's end (the runtime's names: "allreduce bucket J",
/// "allreduce loss", "allreduce tie", "allreduce norm", "optimizer") on a
/// stage's lane: 1 communication, 2 all-reduce, 0 compute.
struct SimStepSpan {
  int stage;
  std::string name;
  int lane;
  double start, end;
};

struct SimulationResult {
  std::string error; ///< empty on success
  double minibatchSeconds = 0;
  std::vector<double> busyFraction; ///< per stage: compute / mini-batch
  int64_t deviations = 0;           ///< tasks run ahead of the static order
  std::vector<int64_t> inFlight;    ///< per stage: most micro-batches held
                                    ///< at once (the static order's; the
                                    ///< deviation never adds forwards)
  std::vector<SimSpan> timeline;    ///< with recordTimeline
  std::vector<SimStepSpan> stepEnd; ///< with recordTimeline
  /// With sharedCores: when each stage's all-reduce buckets ran (start,
  /// end), as computing time for the next pass (see simulate()).
  std::vector<std::pair<double, double>> allreduceSpans;
  bool ok() const { return error.empty(); }
};

SimulationResult simulate(const SimulationConfig &config);

/// The timeline as Chrome-trace JSON (one process per stage, times in
/// microseconds), the format `varuna-run --trace` writes.
std::string timelineJson(const SimulationResult &result, int numStages);

} // namespace plan
} // namespace varuna

#endif // VARUNA_PLAN_SIMULATOR_H
