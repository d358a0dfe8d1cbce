//===- Schedule.h - Static pipeline schedules -------------------*- C++ -*-===//
//
// The static per-stage task order of one mini-batch (P stages, Nm
// micro-batches), and its simulated timing under the unit-tick model of the
// original Varuna generator. The runtime executes the order (deviating
// opportunistically when a message is late); the simulator replays it with
// measured costs. This header is the whole contract; docs/schedule.md derives
// the worked examples.
//
// Tasks, per stage and micro-batch k in [0, Nm):
//   F(k)  forward: consumes the activation from stage s-1 (stage 0: the input),
//         stashes only its input, sends its output to stage s+1.
//   R(k)  recompute: re-runs the forward from the stash to rebuild the
//         activations the backward needs. Never on the last stage (which keeps
//         its activations for its immediate backward), never in 1F1B.
//   B(k)  backward: consumes the gradient from stage s+1 (the last stage: its
//         own loss), sends the input gradient to stage s-1.
//   W(k)  (zero-bubble only, stages s > 0) the weight gradients of B(k): in
//         that schedule B(k) computes only the input gradient (what stage
//         s-1 waits for) and W(k) the rest later, filling what would be
//         bubbles. Stage 0 has no input gradient: its B(k) is the whole
//         backward and it has no W.
//
// Timing model (integer ticks): F and R take t.forward, B takes t.backward
// (zero-bubble, stages s > 0: B takes t.backward - t.weight, W t.weight), a
// message (activation s-1 -> s, gradient s+1 -> s) takes t.latency. A task
// starts at the first tick where its dependencies are satisfied and its stage
// is free; tasks are never preempted. Dependencies:
//   F(k)@s  after F(k)@s-1 ends (+ latency); stage 0's are ready at tick 0.
//   R(k)@s  after F(k)@s ends; Varuna also: after the schedule's trigger
//           (a decision, not a message), by default one forward-time before
//           the gradient of B(k) from stage s+1 arrives, i.e. at
//           max(start, end + latency - forward) for stage s+1's B(k) in
//           [start, end): R(k) ends just as the gradient arrives. This is the
//           original generator's rule (with backward = 2, forward = 1: the
//           tick after stage s+1 starts B(k)) and it reproduces the paper's
//           Figure 4; RecomputeTrigger::BackwardStart (ready when stage s+1
//           starts B(k)) is the earlier variant, see docs/schedule.md.
//   B(k)@s  after B(k)@s+1 ends (+ latency), or after F(k)@s on the last
//           stage; and after R(k)@s when the stage recomputes.
//   W(k)@s  after B(k)@s.
//
// Kinds:
//   Varuna   generated greedily, tick by tick (the original generator's
//            rules): a free stage takes the first ready task of
//            {backward, recompute, forward} (a started backward runs to its
//            end: "backward in progress" first). After R(k) the stage runs
//            nothing but B(k) (it never holds two recomputed sets, and never
//            forwards while holding one). Ties: the task that became ready
//            first, then the lowest micro-batch. Within one tick stages
//            decide from the last to the first, so a trigger fired at tick t
//            by stage s is seen by stage s-1 at tick t.
//   GPipe    F0 .. F(Nm-1), then R(k) B(k) for k = Nm-1 down to 0 (reverse
//            order: the last forward's backward goes first, as in GPipe);
//            R only on non-last stages (GPipe with re-materialisation).
//   OneFOneB PipeDream-flush / Megatron: w = min(P-s-1, Nm) warm-up
//            forwards, then F(w+i) B(i) for i in [0, Nm-w), then the
//            remaining backwards; no recompute.
//   ZeroBubble  ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"),
//            generated greedily like Varuna's: a free stage takes the
//            earliest-ready B, else the next forward if the stage holds
//            fewer than P - s + 1 micro-batches (a micro-batch is held from
//            its F to its W, on stage 0 to its B: one more than 1F1B's
//            peak), else the earliest-ready W. No recompute. The input
//            gradients travel at once, so a pipeline's fill and drain wait
//            for B's alone; the W's fill the gaps. With F = B = W the
//            makespan is 3 Nm + (P - 1) ticks against 1F1B's 3 (Nm + P - 1).
//            Only the backwards that shorten the schedule are split: the
//            last n of every stage s > 0 (B(k) for k >= splitFrom = Nm - n;
//            the others are whole, with no W), n chosen among 0 .. 2P + 2
//            and Nm for the shortest makespan in the model where W takes
//            splitCostPercent of the backward more (ties: fewer splits).
//            A split costs more than the whole backward in practice (the
//            weight half re-reads what has left the cache), and in the
//            steady state of a pipeline it only moves work: its gain is in
//            the fill and drain. The schedule's own ticks are the plain
//            model's (no split cost).
//   GPipe and 1F1B orders are fixed; their ticks are the list-scheduling of
//   that order (each task at the earliest tick after its predecessor on the
//   stage and its dependencies).
//
// Errors are returned values (the library is built with -fno-exceptions):
// P < 1, Nm < 1, P * Nm > kMaxStageMicroBatches, forward or backward < 1 or
// > kMaxTicks, latency < 0 or > kMaxTicks, zero-bubble with weight outside
// [1, backward - 1], splitCostPercent outside [0, 100].
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_PLAN_SCHEDULE_H
#define VARUNA_PLAN_SCHEDULE_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace varuna {
namespace plan {

enum class TaskKind { Forward, Recompute, Backward, Weight };

struct Task {
  TaskKind kind;
  int microBatch;

  /// "F3", "R3", "B3", "W3".
  std::string str() const;
  bool operator==(const Task &o) const {
    return kind == o.kind && microBatch == o.microBatch;
  }
  bool operator!=(const Task &o) const { return !(*this == o); }
};

enum class ScheduleKind { Varuna, GPipe, OneFOneB, ZeroBubble };

/// Every kind, in the order above.
constexpr ScheduleKind kScheduleKinds[] = {
    ScheduleKind::Varuna, ScheduleKind::GPipe, ScheduleKind::OneFOneB,
    ScheduleKind::ZeroBubble};

/// Whether `stage` of a `kind` pipeline may split its backwards into B and W:
/// zero-bubble, every stage but the first (which sends no input gradient);
/// Schedule::splits says which backwards do.
constexpr bool splitsBackward(ScheduleKind kind, int64_t stage) {
  return kind == ScheduleKind::ZeroBubble && stage > 0;
}

/// "varuna", "gpipe", "1f1b", "zb".
const char *scheduleKindName(ScheduleKind kind);

/// The kind named `name` (scheduleKindName's), or none.
std::optional<ScheduleKind> scheduleKindNamed(const std::string &name);

/// "varuna, gpipe, 1f1b or zb": for error messages.
constexpr const char *kScheduleKindNames = "varuna, gpipe, 1f1b or zb";

/// When Varuna's recompute R(k) at stage s-1 becomes ready, relative to stage
/// s's backward B(k) in [start, end).
enum class RecomputeTrigger {
  /// At max(start, end + latency - forward): one forward-time before the
  /// gradient arrives (the original generator; Figure 4's schedule).
  ForwardBeforeGradient,
  /// At start. With backward = 2 x forward the stage often idles a tick
  /// between R(k) and B(k), and Figure 4 takes 30 ticks instead of 27.
  BackwardStart,
};

/// Durations in ticks. The default is the original generator's unit model.
struct TimingModel {
  int64_t forward = 1;  ///< forward and recompute; >= 1
  int64_t backward = 2; ///< >= 1
  int64_t latency = 0;  ///< activation / gradient message; >= 0
  /// Zero-bubble only: W's share of the backward (stages s > 0), in
  /// [1, backward - 1].
  int64_t weight = 1;
  /// Zero-bubble only: what splitting a backward into B and W costs, in
  /// percent of the backward, when choosing how many to split (the
  /// schedule's ticks leave it out). 12: this runtime's split on a CPU
  /// (docs/pipeline.md). In [0, 100].
  int64_t splitCostPercent = 12;
  RecomputeTrigger recomputeTrigger = RecomputeTrigger::ForwardBeforeGradient;
};

/// One task of a stage with its simulated ticks: it runs in [start, end).
struct ScheduledTask {
  Task task;
  int64_t start = 0;
  int64_t end = 0;
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::Varuna;
  int numStages = 0;
  int numMicroBatches = 0;
  TimingModel timing;
  /// Zero-bubble: stages s > 0 split B(k) into B and W for k >= splitFrom
  /// (0: every backward); no other kind splits.
  int splitFrom = 0;
  /// Per stage, its tasks in execution order (start ticks increasing).
  std::vector<std::vector<ScheduledTask>> stages;

  /// The latest end tick (the first task starts at tick 0).
  int64_t makespan() const;
  /// The most micro-batches stage s holds at once between a forward and its
  /// backward (stashed inputs; the last stage holds full activations), or
  /// its W when the stage has W tasks.
  int64_t maxInFlight(int stage) const;
  /// Stage s's task order alone.
  std::vector<Task> order(int stage) const;
  /// Whether stage s's B(k) is split (the order then has W(k)).
  bool splits(int stage, int k) const {
    return splitsBackward(kind, stage) && k >= splitFrom;
  }
};

/// Either a Schedule or an error message. Check before dereferencing.
class [[nodiscard]] ScheduleResult {
public:
  enum class ErrorKind {
    None,
    InvalidStages,       ///< P < 1
    InvalidMicroBatches, ///< Nm < 1
    InvalidTiming,       ///< a duration out of range
    TooLarge,            ///< P * Nm > kMaxStageMicroBatches
    Internal,            ///< the simulation stalled (a bug)
  };

  static ScheduleResult success(Schedule s) {
    ScheduleResult r;
    r.value = std::move(s);
    return r;
  }
  static ScheduleResult failure(ErrorKind kind, std::string message) {
    ScheduleResult r;
    r.errorKind = kind;
    r.message = std::move(message);
    return r;
  }

  bool ok() const { return value.has_value(); }
  explicit operator bool() const { return ok(); }
  const Schedule &operator*() const { return *value; }
  const Schedule *operator->() const { return &*value; }
  ErrorKind kind() const { return errorKind; }
  /// Empty on success.
  const std::string &error() const { return message; }

private:
  std::optional<Schedule> value;
  ErrorKind errorKind = ErrorKind::None;
  std::string message;
};

/// Bounds checked by schedule().
constexpr int64_t kMaxStageMicroBatches = int64_t(1) << 20;
constexpr int64_t kMaxTicks = int64_t(1) << 31;
/// The largest message latency, in forward times, the tools plan Varuna's
/// static order for (--schedule-latency, a plan's schedule_latency): the
/// schedule's memory grows with it (6 GB at 1e9), and past the micro-batch
/// count more latency no longer changes the order (the planner's own
/// choice stops there).
constexpr int64_t kMaxPlannedLatency = 10000;

/// The static schedule of `kind` for P = numStages, Nm = numMicroBatches.
ScheduleResult schedule(ScheduleKind kind, int numStages, int numMicroBatches,
                        TimingModel timing = {});

/// The makespan in ticks; -1 for an error result.
int64_t makespan(const ScheduleResult &r);

/// One line per stage: "stage 0: F0 F1 R0 B0 R1 B1". An error result renders
/// as "error: <message>".
std::string render(const ScheduleResult &r);

/// ASCII Gantt chart, one line per stage, one cell per time unit (the gcd of
/// the durations and the latency; a tick in the unit model). A task's label
/// fills its first cell, its later cells are '-', idle cells '.'; e.g. P=2,
/// Nm=1 in the unit model:
///   stage 0: F0 .. .. R0 B0 --
///   stage 1: .. F0 B0 -- .. ..
/// (cells as wide as the widest label). An error result renders as
/// "error: <message>".
std::string gantt(const ScheduleResult &r);

} // namespace plan
} // namespace varuna

#endif // VARUNA_PLAN_SCHEDULE_H
