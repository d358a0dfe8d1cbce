//===- Simulator.cpp - Event-driven simulation of one mini-batch ----------===//
//
// Events are (time, stage) pairs: "stage s may be able to start something
// now" -- posted when a stage finishes a task and when a message reaches it.
// A task's effects (its end, the arrival of the message it sends) are known
// when it starts, since nothing preempts it; readiness compares those known
// times with the event's time. Per stage, the recomputes and backwards whose
// inputs are known are marked in a bitset over positions in the static
// order, so the deviation rule is a scan for the next set bit, then a look
// at the next forward (bounded by the static order's peak in flight).
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>

namespace varuna {
namespace plan {

namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

/// What a stage knows of micro-batch k (one cache line together).
struct MicroBatch {
  double fEnd = kUnknown, rEnd = kUnknown; // its F(k), R(k) end
  double bEnd = kUnknown;                  // its B(k) end (W(k) follows)
  double actArrive = kUnknown, gradArrive = kUnknown;
  int posR = -1, posB = -1; // positions of R(k), B(k) in the order
};

struct StageState {
  std::vector<Task> order;
  std::vector<char> done;             // by position
  size_t next = 0;                    // first position not started
  std::vector<int> posF;              // position of F(k)
  int nextForward = 0;                // forwards run in order: F(k) next
  std::vector<int> posBs;             // the backwards' positions, in order
  size_t nextBackward = 0;            // and run in order: posBs[this] next
  int64_t held = 0, peakHeld = 0;     // micro-batches between F and B; the
                                      // static order's most
  int recomputedHeld = 0;             // recomputed sets awaiting their B
  std::vector<MicroBatch> mb;         // by micro-batch
  size_t candidateWords = 0;         // words of `candidates` ever marked
  std::vector<uint64_t> candidates; // bit per position: an R/B whose
                                    // inputs are known (not yet run)
  double freeAt = 0, busy = 0, lastEnd = 0;
  double lastBackwardStart = 0, lastBackwardEnd = 0;
  bool running = false;
};

/// The stages' pending wake-ups: at most one per stage, earliest first (ties:
/// the lower stage). A winner tree over the stages: leaf s holds stage s's
/// time (kUnknown: none), each inner node the earlier of its children's
/// winners, preferring the left one (the lower stages) on a tie. A change
/// re-plays the matches on the leaf's path: log2(P) comparisons, no
/// branches that depend on the data.
class WakeQueue {
public:
  explicit WakeQueue(int stages) {
    while (leaves < stages)
      leaves *= 2;
    node.assign(2 * size_t(leaves), Node{kUnknown, 0});
    for (int s = 0; s < leaves; ++s)
      node[leaves + s].stage = s;
    for (int i = leaves - 1; i > 0; --i)
      node[i] = node[2 * i];
  }
  bool empty() const { return node[1].time == kUnknown; }
  /// The earliest (time, stage), left in place.
  std::pair<double, int> top() const { return {node[1].time, node[1].stage}; }
  /// Wake s at t unless it already wakes earlier.
  void lower(int s, double t) {
    if (t < node[leaves + s].time)
      reschedule(s, t);
  }
  /// Wake s at t instead, earlier or later.
  void reschedule(int s, double t) {
    size_t i = size_t(leaves) + s;
    node[i].time = t;
    for (i /= 2; i > 0; i /= 2) {
      const Node &l = node[2 * i], &r = node[2 * i + 1];
      Node w = r.time < l.time ? r : l;
      if (w.stage == node[i].stage && w.time == node[i].time)
        break; // the matches above are decided as before
      node[i] = w;
    }
  }
  /// No wake-up for s.
  void remove(int s) { reschedule(s, kUnknown); }

private:
  struct Node {
    double time;
    int stage;
  };
  int leaves = 1;
  std::vector<Node> node; ///< [1, leaves): matches; [leaves, 2 leaves): stages
};

/// How many of the replica's stages compute at each moment of a previous
/// simulation: breakpoints (time, count from then on), sorted.
using BusyProfile = std::vector<std::pair<double, int>>;

BusyProfile busyProfile(const std::vector<SimSpan> &timeline,
                        const std::vector<std::pair<double, double>> &more) {
  std::vector<std::pair<double, int>> edges;
  for (const SimSpan &s : timeline) {
    edges.push_back({s.start, 1});
    edges.push_back({s.end, -1});
  }
  for (auto [start, end] : more) {
    edges.push_back({start, 1});
    edges.push_back({end, -1});
  }
  std::sort(edges.begin(), edges.end());
  BusyProfile out;
  int count = 0;
  for (auto [t, d] : edges) {
    count += d;
    if (!out.empty() && out.back().first == t)
      out.back().second = count;
    else
      out.push_back({t, count});
  }
  return out;
}

/// The time `work` seconds of dedicated-core compute take from `start` when
/// `ranksPerStage` x (stages computing, per `profile`, at least 1) ranks
/// share `cores` cores, `over` times slower still when they outnumber them.
double sharedDuration(const BusyProfile &profile, double start, double work,
                      double ranksPerStage, double cores, double over) {
  // Segment i runs from profile[i] to profile[i + 1]; i = -1 is the time
  // before the first breakpoint (nothing computing).
  auto it = std::upper_bound(
      profile.begin(), profile.end(), start,
      [](double t, const std::pair<double, int> &p) { return t < p.first; });
  std::ptrdiff_t i = (it - profile.begin()) - 1;
  const std::ptrdiff_t size = std::ptrdiff_t(profile.size());
  double t = start, left = work;
  while (true) {
    int n = i >= 0 ? profile[size_t(i)].second : 0;
    double ranks = ranksPerStage * std::max(n, 1);
    double rate = ranks > cores ? cores / ranks / over : 1.0;
    double until = i + 1 < size ? profile[size_t(i + 1)].first : 1e300;
    if (t + left / rate <= until)
      return t + left / rate - start;
    left -= (until - t) * rate;
    t = until;
    ++i;
  }
}

SimulationResult simulateOnce(const SimulationConfig &c,
                              const BusyProfile *profile);

} // namespace

// With shared cores, a task's slowdown depends on what else computes while
// it runs, which depends on the slowdowns: the first pass fixes each task's
// slowdown at its start; each further pass integrates the rate over the
// previous pass's profile of computing stages (a fixed-point iteration; the
// last pass is returned).
static SimulationResult simulateDraw(const SimulationConfig &c);

/// Pipelines of more micro-batches than this are simulated at half and at
/// all of it and extrapolated (see simulate()).
constexpr int kMaxSimulatedMicroBatches = 1024;

static SimulationResult simulateAll(const SimulationConfig &c);

SimulationResult simulate(const SimulationConfig &c) {
  // Past the fill and the drain a pipeline repeats its steady state: each
  // further micro-batch adds the same time, and holds the same or one more
  // micro-batch per stage. Simulating 65536 micro-batches of 200 stages
  // (with --shared-cores: its busy profile too) took minutes and gigabytes
  // and then aborted out of memory; two simulations of at most 1024,
  // extrapolated linearly, take milliseconds (Simulator
  // ExtrapolatesLongPipelines: within 0.1% of the whole simulation). A
  // timeline asked for is the whole one.
  int n = c.numMicroBatches, half = kMaxSimulatedMicroBatches / 2;
  if (c.recordTimeline || n <= kMaxSimulatedMicroBatches)
    return simulateAll(c);
  SimulationConfig a = c, b = c;
  a.numMicroBatches = half;
  b.numMicroBatches = 2 * half;
  SimulationResult ra = simulateAll(a), rb = simulateAll(b);
  if (!ra.ok())
    return ra;
  if (!rb.ok())
    return rb;
  double more = double(n - 2 * half) / double(half);
  SimulationResult r = rb;
  r.minibatchSeconds =
      rb.minibatchSeconds + (rb.minibatchSeconds - ra.minibatchSeconds) * more;
  for (size_t s = 0; s < r.busyFraction.size() && s < ra.busyFraction.size();
       ++s) {
    // Busy time grows as the step does: compute per micro-batch is fixed.
    double busyA = ra.busyFraction[s] * ra.minibatchSeconds,
           busyB = rb.busyFraction[s] * rb.minibatchSeconds;
    r.busyFraction[s] =
        r.minibatchSeconds > 0
            ? (busyB + (busyB - busyA) * more) / r.minibatchSeconds
            : 0;
  }
  r.deviations = rb.deviations + int64_t(double(rb.deviations - ra.deviations) *
                                         more);
  // GPipe holds every micro-batch; the others a bounded number.
  for (size_t s = 0; s < r.inFlight.size() && s < ra.inFlight.size(); ++s)
    r.inFlight[s] =
        rb.inFlight[s] +
        int64_t(std::llround(double(rb.inFlight[s] - ra.inFlight[s]) * more));
  r.allreduceSpans.clear();
  return r;
}

static SimulationResult simulateAll(const SimulationConfig &c) {
  bool jitter = c.link.jitterSeconds > 0;
  for (const LinkModel &l : c.links)
    jitter = jitter || l.jitterSeconds > 0;
  SimulationResult r = simulateDraw(c);
  if (!jitter || c.jitterSamples <= 1 || !r.ok())
    return r;
  SimulationConfig other = c;
  other.recordTimeline = false;
  for (int i = 1; i < c.jitterSamples; ++i) {
    other.seed = c.seed + uint64_t(i / 2);
    other.negateJitter = i % 2 == 1;
    SimulationResult x = simulateDraw(other);
    if (!x.ok())
      return x;
    r.minibatchSeconds += x.minibatchSeconds;
    for (size_t s = 0; s < r.busyFraction.size(); ++s)
      r.busyFraction[s] += x.busyFraction[s];
  }
  r.minibatchSeconds /= c.jitterSamples;
  for (double &b : r.busyFraction)
    b /= c.jitterSamples;
  return r;
}

static SimulationResult simulateDraw(const SimulationConfig &c) {
  if (c.sharedCores <= 0)
    return simulateOnce(c, nullptr);
  SimulationConfig traced = c;
  traced.recordTimeline = true;
  SimulationResult r = simulateOnce(traced, nullptr);
  for (int pass = 0; pass < 4 && r.ok(); ++pass) {
    BusyProfile profile = busyProfile(r.timeline, r.allreduceSpans);
    r = simulateOnce(traced, &profile);
  }
  if (!c.recordTimeline) {
    r.timeline.clear();
    r.stepEnd.clear();
  }
  return r;
}

namespace {

SimulationResult simulateOnce(const SimulationConfig &c,
                              const BusyProfile *profile) {
  SimulationResult res;
  int P = c.numStages, Nm = c.numMicroBatches;
  if (P < 1 || Nm < 1) {
    res.error = "numStages and numMicroBatches must be at least 1";
    return res;
  }
  if (static_cast<int>(c.stages.size()) != P) {
    res.error = "stages has " + std::to_string(c.stages.size()) +
                " entries for " + std::to_string(P) + " stages";
    return res;
  }
  if (!c.boundaryBytes.empty() &&
      static_cast<int>(c.boundaryBytes.size()) != P - 1) {
    res.error = "boundaryBytes needs numStages - 1 entries";
    return res;
  }
  if (!c.links.empty() && static_cast<int>(c.links.size()) != P - 1) {
    res.error = "links needs numStages - 1 entries";
    return res;
  }
  if (!c.messageCpuSeconds.empty() &&
      static_cast<int>(c.messageCpuSeconds.size()) != P - 1) {
    res.error = "messageCpuSeconds needs numStages - 1 entries";
    return res;
  }
  if (!c.allreduceCpuSeconds.empty() &&
      static_cast<int>(c.allreduceCpuSeconds.size()) != P) {
    res.error = "allreduceCpuSeconds needs numStages entries";
    return res;
  }
  // On shared cores a message's CPU (each end) is work of the task that
  // sends it and of the one that receives it.
  const bool messageCpu = c.sharedCores > 0 && !c.messageCpuSeconds.empty();
  auto messageWork = [&](int s, TaskKind k) {
    double w = 0;
    if (k == TaskKind::Forward) {
      w += s > 0 ? c.messageCpuSeconds[s - 1] : 0;     // activation in
      w += s + 1 < P ? c.messageCpuSeconds[s] : 0;     // activation out
    } else if (k == TaskKind::Backward) {
      w += s + 1 < P ? c.messageCpuSeconds[s] : 0;     // gradient in
      w += s > 0 ? c.messageCpuSeconds[s - 1] : 0;     // gradient out
    }
    return w;
  };
  ScheduleResult sched = schedule(c.schedule, P, Nm, c.scheduleTiming);
  if (!sched) {
    res.error = sched.error();
    return res;
  }
  for (int s = 0; s < P; ++s)
    res.inFlight.push_back(sched->maxInFlight(s));
  std::vector<StageState> st(P);
  for (int s = 0; s < P; ++s) {
    StageState &x = st[s];
    x.order = sched->order(s);
    x.done.assign(x.order.size(), 0);
    x.candidates.assign(x.order.size() / 64 + 1, 0);
    x.mb.assign(Nm, MicroBatch());
    x.posF.assign(Nm, -1);
    x.peakHeld = res.inFlight[s];
    if (s == 0)
      for (MicroBatch &b : x.mb)
        b.actArrive = 0;
    for (size_t i = 0; i < x.order.size(); ++i) {
      const Task &t = x.order[i];
      if (t.kind == TaskKind::Forward)
        x.posF[t.microBatch] = static_cast<int>(i);
      else if (t.kind == TaskKind::Recompute)
        x.mb[t.microBatch].posR = static_cast<int>(i);
      else if (t.kind == TaskKind::Backward) {
        x.mb[t.microBatch].posB = static_cast<int>(i);
        x.posBs.push_back(static_cast<int>(i));
      }
    }
  }
  std::mt19937_64 rng(c.seed);
  std::vector<double> linkFreeDown(P, 0), linkFreeUp(P, 0);
  // A message over boundary b (between stages b and b + 1).
  auto transfer = [&](int b, double depart, double bytes, double &linkFree) {
    const LinkModel &l = c.links.empty() ? c.link : c.links[b];
    double start = std::max(depart, linkFree);
    double t = l.bytesPerSecond > 0 ? bytes / l.bytesPerSecond : 0;
    linkFree = start + t;
    double j = 0;
    if (l.jitterSeconds > 0)
      j = std::uniform_real_distribution<double>(-l.jitterSeconds,
                                                 l.jitterSeconds)(rng) *
          (c.negateJitter ? -1.0 : 1.0);
    return start + t + std::max(0.0, l.latencySeconds + j);
  };

  // The deviation belongs to Varuna's schedule (as in the runtime).
  bool deviate = c.deviate && c.schedule == ScheduleKind::Varuna;
  // Each stage has at most one pending wake-up: the end of its running
  // task, or, when idle, the earliest known time at which its next task
  // (or, with the deviation, a candidate) becomes ready.
  WakeQueue events(P);
  for (int s = 0; s < P; ++s)
    events.lower(s, 0.0);

  // Zero-bubble splits some backwards of stages s > 0 into B and W.
  auto split = [&](int s, int k) { return sched->splits(s, k); };
  auto weightPart = [&](int s) {
    const StageCost &sc = c.stages[s];
    return sc.weight < 0 ? sc.backward / 2 : std::min(sc.weight, sc.backward);
  };
  auto duration = [&](int s, TaskKind k, int mb) {
    const StageCost &sc = c.stages[s];
    switch (k) {
    case TaskKind::Forward: return sc.forward;
    case TaskKind::Recompute: return sc.recompute < 0 ? sc.forward : sc.recompute;
    case TaskKind::Backward:
      if (!split(s, mb))
        return sc.backward;
      return sc.input >= 0 ? sc.input : sc.backward - weightPart(s);
    case TaskKind::Weight: return weightPart(s);
    }
    return 0.0;
  };
  // When the inputs of R/B(k) at stage s are known, it becomes a candidate;
  // true if B(k) just became one.
  auto mark = [](StageState &x, int pos) {
    x.candidates[pos >> 6] |= uint64_t(1) << (pos & 63);
    x.candidateWords = std::max(x.candidateWords, size_t(pos >> 6) + 1);
  };
  auto maybeCandidate = [&](int s, int k) {
    if (!deviate)
      return false;
    StageState &x = st[s];
    const MicroBatch &b = x.mb[k];
    bool last = s == P - 1;
    if (b.posR >= 0 && b.fEnd < kUnknown && !x.done[b.posR])
      mark(x, b.posR);
    double in = b.posR >= 0 ? b.rEnd : b.fEnd;
    bool inputs = (last || b.gradArrive < kUnknown) && in < kUnknown;
    if (b.posB >= 0 && inputs && !x.done[b.posB]) {
      mark(x, b.posB);
      return true;
    }
    return false;
  };
  auto readyAt = [&](int s, const Task &t) {
    const MicroBatch &b = st[s].mb[t.microBatch];
    switch (t.kind) {
    case TaskKind::Forward: return b.actArrive;
    case TaskKind::Recompute: return b.fEnd;
    case TaskKind::Backward: {
      double in = b.posR >= 0 ? b.rEnd : b.fEnd;
      return s == P - 1 ? in : std::max(in, b.gradArrive);
    }
    case TaskKind::Weight: return b.bEnd;
    }
    return kUnknown;
  };
  // A message for task `t` of stage s arrives at `at`: a stage that can use
  // it (its next task, or a new candidate) wakes then, or at the end of its
  // running task.
  auto arrive = [&](int s, const Task &t, double at, bool candidate) {
    StageState &x = st[s];
    if (candidate || (x.next < x.order.size() && x.order[x.next] == t))
      events.lower(s, std::max(at, x.freeAt));
  };

  // The position of the task stage s would start at time t: its next task
  // if ready, else (deviating) the first later ready candidate; -1 if none,
  // with `soonest` the earliest known time one becomes ready (kUnknown: it
  // takes a message not yet sent).
  auto firstReady = [&](int s, double t, double &soonest) {
    StageState &x = st[s];
    soonest = kUnknown;
    if (x.next >= x.order.size())
      return -1;
    soonest = readyAt(s, x.order[x.next]);
    if (soonest <= t)
      return static_cast<int>(x.next);
    if (!deviate)
      return -1;
    size_t from = x.next + 1, words = x.candidateWords;
    for (size_t w = from >> 6; w < words; ++w) {
      uint64_t bits = x.candidates[w];
      if (w == from >> 6)
        bits &= ~uint64_t(0) << (from & 63);
      while (bits) {
        int pos = static_cast<int>(w * 64 + __builtin_ctzll(bits));
        bits &= bits - 1;
        // Backwards keep their order, as in the runtime (their gradients
        // add up in it): only the first one left may run ahead.
        if (x.order[pos].kind == TaskKind::Backward &&
            (x.nextBackward >= x.posBs.size() ||
             x.posBs[x.nextBackward] != pos))
          continue;
        // A recompute runs ahead only while the stage holds no recomputed
        // set, as in the runtime (the static order never holds two).
        if (x.order[pos].kind == TaskKind::Recompute && x.recomputedHeld > 0)
          continue;
        double r = readyAt(s, x.order[pos]);
        if (r <= t)
          return pos;
        soonest = std::min(soonest, r);
      }
    }
    // The next forward, if the stage holds fewer micro-batches than the
    // static order at its peak.
    if (x.nextForward < Nm && x.held < x.peakHeld) {
      int pos = x.posF[x.nextForward];
      if (static_cast<size_t>(pos) > x.next) {
        double r = x.mb[x.nextForward].actArrive;
        if (r <= t)
          return pos;
        soonest = std::min(soonest, r);
      }
    }
    return -1;
  };

  size_t remaining = 0;
  for (auto &x : st)
    remaining += x.order.size();
  while (!events.empty() && remaining > 0) {
    // The earliest wake-up stays queued: the stage's next one replaces it.
    auto [now, s] = events.top();
    StageState &x = st[s];
    if (x.next >= x.order.size()) {
      events.remove(s);
      continue;
    }
    double soonest;
    int pick = firstReady(s, now, soonest);
    if (pick < 0) {
      if (soonest < kUnknown)
        events.reschedule(s, soonest);
      else
        events.remove(s); // woken by a message that makes a task ready
      continue;
    }
    if (static_cast<size_t>(pick) != x.next)
      ++res.deviations;
    Task t = x.order[pick];
    x.done[pick] = 1;
    x.candidates[pick >> 6] &= ~(uint64_t(1) << (pick & 63));
    while (x.next < x.order.size() && x.done[x.next])
      ++x.next;
    --remaining;
    double cost = duration(s, t.kind, t.microBatch);
    if (messageCpu)
      cost += messageWork(s, t.kind);
    if (profile) {
      cost = sharedDuration(*profile, now, cost, c.replicasSharing,
                            c.sharedCores, c.oversubscribedSlowdown);
    } else if (c.sharedCores > 0) {
      int computing = 1;
      for (int o = 0; o < P; ++o)
        computing += o != s && st[o].freeAt > now;
      double ranks = double(c.replicasSharing) * computing;
      if (ranks > c.sharedCores)
        cost *= ranks / c.sharedCores * c.oversubscribedSlowdown;
    }
    double end = now + cost;
    x.freeAt = end;
    x.busy += end - now;
    x.lastEnd = std::max(x.lastEnd, end);
    // The last task that adds to the weight gradients: the buckets follow it.
    TaskKind final =
        split(s, t.microBatch) ? TaskKind::Weight : TaskKind::Backward;
    if (t.kind == final && end >= x.lastBackwardEnd) {
      x.lastBackwardStart = now;
      x.lastBackwardEnd = end;
    }
    if (c.recordTimeline)
      res.timeline.push_back({s, t, now, end});
    int k = t.microBatch;
    if (t.kind == TaskKind::Forward) {
      ++x.held;
      ++x.nextForward;
      x.mb[k].fEnd = end;
      maybeCandidate(s, k);
      if (s + 1 < P) {
        double bytes = c.boundaryBytes.empty() ? 0 : c.boundaryBytes[s];
        double at = transfer(s, end, bytes, linkFreeDown[s]);
        st[s + 1].mb[k].actArrive = at;
        // With the deviation, the next forward may run out of order.
        arrive(s + 1, Task{TaskKind::Forward, k}, at,
               deviate && st[s + 1].nextForward == k);
      }
    } else if (t.kind == TaskKind::Recompute) {
      x.mb[k].rEnd = end;
      ++x.recomputedHeld;
      maybeCandidate(s, k);
    } else if (t.kind == TaskKind::Weight) {
      --x.held;
    } else {
      x.mb[k].bEnd = end;
      ++x.nextBackward;
      if (x.mb[k].posR >= 0)
        --x.recomputedHeld;
      if (!split(s, k))
        --x.held;
      if (s > 0) {
        double bytes = c.boundaryBytes.empty() ? 0 : c.boundaryBytes[s - 1];
        double at = transfer(s - 1, end, bytes, linkFreeUp[s]);
        st[s - 1].mb[k].gradArrive = at;
        bool candidate = maybeCandidate(s - 1, k);
        arrive(s - 1, Task{TaskKind::Backward, k}, at, candidate);
      }
    }
    // Wake at the task's end if something known is ready by then, else when
    // the first known thing becomes ready; a message that makes something
    // ready sooner lowers it (arrive).
    double soon;
    if (firstReady(s, end, soon) >= 0)
      events.reschedule(s, end);
    else if (soon < kUnknown)
      events.reschedule(s, soon);
    else
      events.remove(s);
  }
  if (remaining > 0) {
    res.error = "the simulation stalled with " + std::to_string(remaining) +
                " tasks left (an inconsistent schedule)";
    return res;
  }
  // The step's end (PipelineTrainer): the world all-reduce of the loss
  // starts once every stage is done, the buckets are awaited, the ties
  // summed, the norm reduced, then the optimizer.
  double lastTask = 0;
  for (int s = 0; s < P; ++s)
    lastTask = std::max(lastTask, st[s].lastEnd);
  double synced = lastTask + c.syncSeconds;
  std::vector<double> ready(P, synced);
  auto stepSpan = [&](int s, std::string name, int lane, double a, double b) {
    if (c.recordTimeline && b > a)
      res.stepEnd.push_back({s, std::move(name), lane, a, b});
  };
  for (int s = 0; s < P; ++s)
    stepSpan(s, "allreduce loss", 1, st[s].lastEnd, synced);
  for (int s = 0; s < P; ++s) {
    double ar = c.allreduceSeconds.empty() ? 0 : c.allreduceSeconds[s];
    int n = c.allreduceBuckets.empty() ? 1 : std::max(c.allreduceBuckets[s], 1);
    // A bucket's time from `start`: on shared cores its CPU runs at the
    // shared rate (the previous pass's profile), the rest is waiting.
    double cpu = c.sharedCores > 0 && !c.allreduceCpuSeconds.empty()
                     ? std::min(c.allreduceCpuSeconds[s], ar)
                     : 0;
    int index = 0;
    double lastShare = s < static_cast<int>(c.lastBucketShare.size()) && n > 1
                           ? std::clamp(c.lastBucketShare[s], 0.0, 1.0)
                           : 0.0;
    auto bucket = [&](double start) {
      double d = lastShare <= 0 ? ar / n
                 : index == n - 1 ? ar * lastShare
                                  : ar * (1 - lastShare) / (n - 1);
      if (cpu > 0 && profile)
        d = d * (ar - cpu) / ar + sharedDuration(*profile, start, d * cpu / ar,
                                            c.replicasSharing, c.sharedCores,
                                            c.oversubscribedSlowdown);
      if (cpu > 0)
        res.allreduceSpans.push_back({start, start + d});
      stepSpan(s, "allreduce bucket " + std::to_string(index++), 2, start,
               start + d);
      return start + d;
    };
    double done = st[s].lastEnd;
    if (ar > 0 && n == 1) {
      done = bucket(st[s].lastEnd);
    } else if (ar > 0) {
      // Bucket j is final (j+1)/n into the last backward; they are reduced
      // one after another.
      const StageState &x = st[s];
      double t = x.lastBackwardStart;
      for (int j = 0; j < n; ++j)
        t = bucket(std::max(t, x.lastBackwardStart + (x.lastBackwardEnd -
                                                      x.lastBackwardStart) *
                                                         (j + 1) / n));
      done = std::max(x.lastEnd, t);
    }
    ready[s] = std::max(ready[s], done);
    if (s < static_cast<int>(c.runningStatsSeconds.size()) &&
        c.runningStatsSeconds[s] > 0) {
      stepSpan(s, "allreduce running stats", 1, ready[s],
               ready[s] + c.runningStatsSeconds[s]);
      ready[s] += c.runningStatsSeconds[s];
    }
  }
  for (const SimulationConfig::TieReduce &tie : c.ties) {
    double start = 0;
    for (int s : tie.stages) {
      if (s < 0 || s >= P) {
        res.error = "a tie names stage " + std::to_string(s) + " of " +
                    std::to_string(P);
        return res;
      }
      start = std::max(start, ready[s]);
    }
    for (int s : tie.stages) {
      stepSpan(s, "allreduce tie", 1, start, start + tie.seconds);
      ready[s] = start + tie.seconds;
    }
  }
  double finish = *std::max_element(ready.begin(), ready.end());
  if (c.normSync) {
    for (int s = 0; s < P; ++s)
      stepSpan(s, "allreduce norm", 1, finish, finish + c.syncSeconds);
    finish += c.syncSeconds;
  }
  res.minibatchSeconds = finish + c.optimizerSeconds;
  for (int s = 0; s < P; ++s)
    stepSpan(s, "optimizer", 0, finish, res.minibatchSeconds);
  for (int s = 0; s < P; ++s)
    res.busyFraction.push_back(res.minibatchSeconds > 0
                                   ? st[s].busy / res.minibatchSeconds
                                   : 0);
  return res;
}

} // namespace

std::string timelineJson(const SimulationResult &r, int numStages) {
  std::string out = "{\"traceEvents\": [\n";
  char buf[256];
  for (int s = 0; s < numStages; ++s) {
    std::snprintf(buf, sizeof buf,
                  "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                  "\"args\": {\"name\": \"stage %d (simulated)\"}},\n",
                  s, s);
    out += buf;
    // The runtime trace's lanes (runtime/Trace.h).
    const char *lanes[] = {"compute", "communication", "all-reduce"};
    for (int l = 0; l < 3; ++l) {
      std::snprintf(buf, sizeof buf,
                    "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
                    "\"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                    s, l, lanes[l]);
      out += buf;
    }
  }
  // Every span: the tasks, then the step's end, comma-separated.
  size_t total = r.timeline.size() + r.stepEnd.size(), i = 0;
  auto span = [&](const std::string &name, int stage, int lane, double start,
                  double end) {
    // Both ends rounded to the nanosecond, the duration their difference:
    // a span that ends where the next starts does not overlap it by one
    // rounding (a viewer takes that for badly nested slices).
    double ts = std::round(start * 1e9) / 1e3, te = std::round(end * 1e9) / 1e3;
    std::snprintf(buf, sizeof buf,
                  "{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
                  "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f}%s\n",
                  name.c_str(), stage, lane, ts, te - ts,
                  ++i < total ? "," : "");
    out += buf;
  };
  for (const SimSpan &e : r.timeline)
    span(e.task.str(), e.stage, 0, e.start, e.end);
  for (const SimStepSpan &e : r.stepEnd)
    span(e.name, e.stage, e.lane, e.start, e.end);
  return out + "]}\n";
}

} // namespace plan
} // namespace varuna
