//===- Schedule.cpp - Static pipeline schedules ---------------------------===//
//
// One event-driven list scheduler serves the four kinds. Every task (stage,
// kind, micro-batch) counts its unsatisfied dependencies; when the last one is
// satisfied its ready tick is known (the max of its dependencies' ticks, which
// are all known the moment the producing task *starts*, since tasks are never
// preempted). Ticks at which something becomes ready or a stage becomes free
// are visited in increasing order; at each, stages decide from the last to the
// first, so a Varuna recompute trigger fired by stage s at tick t is seen by
// stage s-1 at tick t. A stage picks:
//   - GPipe / 1F1B: the next task of its fixed order, if ready;
//   - Varuna: the earliest-ready backward, else recompute, else forward (with
//     the "after R(k), only B(k)" rule). R(k) at s-1 depends on F(k) there
//     and on the trigger set when stage s starts B(k) (recomputeTrigger()).
//   - zero-bubble: the earliest-ready backward, else the next forward (under
//     the bound on micro-batches held), else the earliest-ready W.
// Every other consequence of starting a task lies strictly in the future
// (durations are >= 1), so one decision per stage per visited tick suffices.
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Schedule.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

using namespace varuna::plan;

namespace {

using ErrorKind = ScheduleResult::ErrorKind;
constexpr int64_t kUnknown = -1;

std::vector<std::vector<Task>> fixedOrders(ScheduleKind kind, int P, int Nm) {
  std::vector<std::vector<Task>> orders(P);
  for (int s = 0; s < P; ++s) {
    std::vector<Task> &o = orders[s];
    bool last = s == P - 1;
    if (kind == ScheduleKind::GPipe) {
      for (int k = 0; k < Nm; ++k)
        o.push_back({TaskKind::Forward, k});
      for (int k = Nm - 1; k >= 0; --k) {
        if (!last)
          o.push_back({TaskKind::Recompute, k});
        o.push_back({TaskKind::Backward, k});
      }
    } else { // OneFOneB
      int warm = std::min(P - s - 1, Nm);
      for (int k = 0; k < warm; ++k)
        o.push_back({TaskKind::Forward, k});
      for (int i = 0; i < Nm - warm; ++i) {
        o.push_back({TaskKind::Forward, warm + i});
        o.push_back({TaskKind::Backward, i});
      }
      for (int k = Nm - warm; k < Nm; ++k)
        o.push_back({TaskKind::Backward, k});
    }
  }
  return orders;
}

class Simulator {
  using Candidate = std::pair<int64_t, int>; ///< (ready tick, micro-batch)

public:
  /// Zero-bubble: stage s > 0 splits B(k) for k >= splitFrom (the last
  /// Nm - splitFrom backwards); ignored by the other kinds.
  /// W takes `splitOverhead` ticks more than t.weight.
  Simulator(ScheduleKind kind, int P, int Nm, TimingModel t, int splitFrom,
            int64_t splitOverhead)
      : kind(kind), P(P), Nm(Nm), t(t), splitFrom(splitFrom),
        splitOverhead(splitOverhead),
        ready(size_t(P) * 4 * Nm, kUnknown),
        pending(size_t(P) * 4 * Nm, 0), started(size_t(P) * 4 * Nm, false),
        busyUntil(P, 0), stages(P) {
    for (auto &tasks : stages)
      tasks.reserve(size_t(3) * Nm);
    for (int s = 0; s < P; ++s)
      for (int k = 0; k < Nm; ++k) {
        pending[id(s, TaskKind::Forward, k)] = s > 0 ? 1 : 0;
        if (hasRecompute(s))
          pending[id(s, TaskKind::Recompute, k)] =
              kind == ScheduleKind::Varuna ? 2 : 1;
        pending[id(s, TaskKind::Backward, k)] = hasRecompute(s) ? 2 : 1;
        if (hasWeight(s, k))
          pending[id(s, TaskKind::Weight, k)] = 1;
      }
    if (greedy()) {
      readyBackward.assign(P, {});
      readyRecompute.assign(P, {});
      readyWeight.assign(P, {});
      nextForward.assign(P, 0);
      heldRecompute.assign(P, -1);
      held.assign(P, 0);
    } else {
      orders = fixedOrders(kind, P, Nm);
      position.assign(P, 0);
    }
    for (int k = 0; k < Nm; ++k)
      markReady(0, TaskKind::Forward, k, 0);
  }

  /// False if the simulation stalled with tasks left (a bug).
  bool run() {
    size_t total = 0;
    for (int s = 0; s < P; ++s)
      for (int k = 0; k < Nm; ++k)
        total += 2 + hasRecompute(s) + hasWeight(s, k);
    size_t done = 0;
    int64_t last = -1;
    (void)last;
    while (true) {
      // The next tick at which something may happen (ticks are visited in
      // increasing order; a tick is marked at most once).
      while (cursor < eventTicks.size() && !eventTicks[cursor])
        ++cursor;
      if (cursor >= eventTicks.size())
        break;
      int64_t now = static_cast<int64_t>(cursor);
      eventTicks[cursor++] = 0;
      for (int s = P - 1; s >= 0; --s) {
        if (busyUntil[s] > now)
          continue;
        std::optional<Task> task = pick(s, now);
        if (!task)
          continue;
        start(s, *task, now);
        ++done;
      }
    }
    return done == total;
  }

  std::vector<std::vector<ScheduledTask>> &result() { return stages; }

private:
  bool hasRecompute(int s) const {
    return (kind == ScheduleKind::Varuna || kind == ScheduleKind::GPipe) &&
           s != P - 1;
  }
  bool hasWeight(int s, int k) const {
    return splitsBackward(kind, s) && k >= splitFrom;
  }
  /// Varuna and zero-bubble pick tasks as they go; GPipe and 1F1B follow
  /// fixed orders.
  bool greedy() const {
    return kind == ScheduleKind::Varuna || kind == ScheduleKind::ZeroBubble;
  }
  size_t id(int s, TaskKind kd, int k) const {
    return (size_t(s) * 4 + size_t(kd)) * Nm + k;
  }
  /// Varuna: when stage s-1 may start R(k), given stage s runs B(k) in
  /// [start, end). By default one forward-time before the gradient arrives
  /// (end + latency), so an R(k) started then ends just as it arrives; never
  /// before `start`. Schedule.h and docs/schedule.md explain the choice.
  int64_t recomputeTrigger(int64_t start, int64_t end) const {
    if (t.recomputeTrigger == RecomputeTrigger::BackwardStart)
      return start;
    return std::max(start, end + t.latency - t.forward);
  }
  int64_t duration(int s, TaskKind kd, int k) const {
    switch (kd) {
    case TaskKind::Forward:
    case TaskKind::Recompute:
      return t.forward;
    case TaskKind::Backward:
      return hasWeight(s, k) ? t.backward - t.weight : t.backward;
    case TaskKind::Weight:
      return t.weight + splitOverhead;
    }
    return t.forward;
  }

  void pushTick(int64_t tick) {
    size_t i = static_cast<size_t>(tick);
    if (i >= eventTicks.size())
      eventTicks.resize(std::max(i + 1, eventTicks.size() * 2), 0);
    eventTicks[i] = 1;
    if (i < cursor)
      cursor = i;
  }

  void markReady(int s, TaskKind kd, int k, int64_t tick) {
    ready[id(s, kd, k)] = tick;
    pushTick(tick);
    if (!greedy() || kd == TaskKind::Forward)
      return;
    std::vector<std::vector<Candidate>> &lists =
        kd == TaskKind::Backward    ? readyBackward
        : kd == TaskKind::Recompute ? readyRecompute
                                    : readyWeight;
    lists[s].push_back({tick, k});
  }

  /// One dependency of (s, kd, k) is satisfied from `tick` on.
  void satisfy(int s, TaskKind kd, int k, int64_t tick) {
    size_t i = id(s, kd, k);
    ready[i] = std::max(ready[i], tick);
    if (--pending[i] == 0)
      markReady(s, kd, k, ready[i]);
  }

  bool isReady(int s, TaskKind kd, int k, int64_t now) const {
    size_t i = id(s, kd, k);
    return pending[i] == 0 && !started[i] && ready[i] <= now;
  }

  /// Removes `c` from `list` (order is irrelevant: lists are scanned).
  static void takeCandidate(std::vector<Candidate> &list, Candidate c) {
    auto it = std::find(list.begin(), list.end(), c);
    if (it != list.end()) {
      *it = list.back();
      list.pop_back();
    }
  }
  /// The micro-batch of the least (ready tick, micro-batch) in `list` that
  /// is ready by `now`, removed; none if nothing is ready. The lists hold
  /// the tasks a stage could start, a handful at a time.
  static std::optional<int> takeEarliest(std::vector<Candidate> &list,
                                         int64_t now) {
    size_t best = list.size();
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].first <= now && (best == list.size() || list[i] < list[best]))
        best = i;
    if (best == list.size())
      return std::nullopt;
    int k = list[best].second;
    list[best] = list.back();
    list.pop_back();
    return k;
  }

  std::optional<Task> pick(int s, int64_t now) {
    if (kind == ScheduleKind::ZeroBubble)
      return pickZeroBubble(s, now);
    if (!greedy()) {
      if (position[s] == orders[s].size())
        return std::nullopt;
      Task next = orders[s][position[s]];
      if (!isReady(s, next.kind, next.microBatch, now))
        return std::nullopt;
      ++position[s];
      return next;
    }
    if (heldRecompute[s] >= 0) {
      // Holding a recomputed set: its backward, or nothing.
      int k = heldRecompute[s];
      if (!isReady(s, TaskKind::Backward, k, now))
        return std::nullopt;
      takeCandidate(readyBackward[s], {ready[id(s, TaskKind::Backward, k)], k});
      heldRecompute[s] = -1;
      return Task{TaskKind::Backward, k};
    }
    // The earliest-ready backward, else the earliest-ready recompute (ties:
    // the lowest micro-batch).
    if (auto k = takeEarliest(readyBackward[s], now))
      return Task{TaskKind::Backward, *k};
    if (auto k = takeEarliest(readyRecompute[s], now)) {
      heldRecompute[s] = *k;
      return Task{TaskKind::Recompute, *k};
    }
    int k = nextForward[s];
    if (k < Nm && isReady(s, TaskKind::Forward, k, now)) {
      ++nextForward[s];
      return Task{TaskKind::Forward, k};
    }
    return std::nullopt;
  }

  /// ZB-H1: a backward first (it unblocks stage s-1), then a forward while
  /// the stage holds fewer than P - s + 1 micro-batches, then a W.
  std::optional<Task> pickZeroBubble(int s, int64_t now) {
    if (auto k = takeEarliest(readyBackward[s], now))
      return Task{TaskKind::Backward, *k};
    int k = nextForward[s];
    if (k < Nm && held[s] < P - s + 1 &&
        isReady(s, TaskKind::Forward, k, now)) {
      ++nextForward[s];
      return Task{TaskKind::Forward, k};
    }
    if (auto k = takeEarliest(readyWeight[s], now))
      return Task{TaskKind::Weight, *k};
    return std::nullopt;
  }

  void start(int s, Task task, int64_t now) {
    int k = task.microBatch;
    started[id(s, task.kind, k)] = true;
    int64_t end = now + duration(s, task.kind, k);
    if (kind == ScheduleKind::ZeroBubble) {
      // Held from F(k) to the task that frees its activations.
      if (task.kind == TaskKind::Forward)
        ++held[s];
      else if (task.kind == (hasWeight(s, k) ? TaskKind::Weight
                                             : TaskKind::Backward))
        --held[s];
    }
    busyUntil[s] = end;
    pushTick(end);
    stages[s].push_back({task, now, end});
    bool last = s == P - 1;
    switch (task.kind) {
    case TaskKind::Forward:
      if (!last)
        satisfy(s + 1, TaskKind::Forward, k, end + t.latency);
      else
        satisfy(s, TaskKind::Backward, k, end);
      if (hasRecompute(s))
        satisfy(s, TaskKind::Recompute, k, end);
      break;
    case TaskKind::Recompute:
      satisfy(s, TaskKind::Backward, k, end);
      break;
    case TaskKind::Backward:
      if (s > 0) {
        satisfy(s - 1, TaskKind::Backward, k, end + t.latency);
        if (kind == ScheduleKind::Varuna)
          satisfy(s - 1, TaskKind::Recompute, k, recomputeTrigger(now, end));
      }
      if (hasWeight(s, k))
        satisfy(s, TaskKind::Weight, k, end);
      break;
    case TaskKind::Weight:
      break;
    }
  }

  ScheduleKind kind;
  int P, Nm;
  TimingModel t;
  int splitFrom;
  int64_t splitOverhead;
  std::vector<int64_t> ready; ///< max of the satisfied dependencies' ticks
  std::vector<int> pending;   ///< unsatisfied dependencies
  std::vector<char> started;
  std::vector<int64_t> busyUntil;
  std::vector<char> eventTicks; ///< ticks at which something may happen
  size_t cursor = 0;            ///< no marked tick below it
  std::vector<std::vector<ScheduledTask>> stages;
  // Varuna and zero-bubble: per stage, the recomputes, backwards and W's
  // whose dependencies are all satisfied and that have not started, as
  // (ready tick, k).
  std::vector<std::vector<Candidate>> readyBackward, readyRecompute,
      readyWeight;
  std::vector<int> nextForward;
  std::vector<int> heldRecompute;
  std::vector<int> held; ///< zero-bubble: micro-batches from F to W (B)
  // GPipe / 1F1B.
  std::vector<std::vector<Task>> orders;
  std::vector<size_t> position;
};

std::string errorText(const ScheduleResult &r) { return "error: " + r.error(); }

} // namespace

std::string Task::str() const {
  char c = kind == TaskKind::Forward     ? 'F'
           : kind == TaskKind::Recompute ? 'R'
           : kind == TaskKind::Backward  ? 'B'
                                         : 'W';
  return c + std::to_string(microBatch);
}

const char *varuna::plan::scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::Varuna:
    return "varuna";
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::ZeroBubble:
    return "zb";
  }
  return "?";
}

std::optional<ScheduleKind>
varuna::plan::scheduleKindNamed(const std::string &name) {
  for (ScheduleKind k : kScheduleKinds)
    if (name == scheduleKindName(k))
      return k;
  return std::nullopt;
}

int64_t Schedule::makespan() const {
  int64_t m = 0;
  for (const auto &st : stages)
    for (const ScheduledTask &x : st)
      m = std::max(m, x.end);
  return m;
}

int64_t Schedule::maxInFlight(int stage) const {
  if (stage < 0 || stage >= int(stages.size()))
    return 0;
  int64_t inFlight = 0, peak = 0;
  for (const ScheduledTask &x : stages[stage]) {
    TaskKind release = splits(stage, x.task.microBatch) ? TaskKind::Weight
                                                        : TaskKind::Backward;
    if (x.task.kind == TaskKind::Forward)
      peak = std::max(peak, ++inFlight);
    else if (x.task.kind == release)
      --inFlight;
  }
  return peak;
}

std::vector<Task> Schedule::order(int stage) const {
  std::vector<Task> o;
  if (stage < 0 || stage >= int(stages.size()))
    return o;
  for (const ScheduledTask &x : stages[stage])
    o.push_back(x.task);
  return o;
}

ScheduleResult varuna::plan::schedule(ScheduleKind kind, int numStages,
                                      int numMicroBatches, TimingModel t) {
  if (numStages < 1)
    return ScheduleResult::failure(
        ErrorKind::InvalidStages,
        "the number of stages must be at least 1, got " +
            std::to_string(numStages));
  if (numMicroBatches < 1)
    return ScheduleResult::failure(
        ErrorKind::InvalidMicroBatches,
        "the number of micro-batches must be at least 1, got " +
            std::to_string(numMicroBatches));
  if (int64_t(numStages) * numMicroBatches > kMaxStageMicroBatches)
    return ScheduleResult::failure(ErrorKind::TooLarge,
                                   std::to_string(numStages) + " stages x " +
                                       std::to_string(numMicroBatches) +
                                       " micro-batches exceeds " +
                                       std::to_string(kMaxStageMicroBatches));
  auto badTicks = [](const char *what, int64_t v, int64_t lo) {
    return ScheduleResult::failure(
        ErrorKind::InvalidTiming,
        std::string(what) + " must be in [" + std::to_string(lo) + ", " +
            std::to_string(kMaxTicks) + "], got " + std::to_string(v));
  };
  if (t.forward < 1 || t.forward > kMaxTicks)
    return badTicks("forward ticks", t.forward, 1);
  if (t.backward < 1 || t.backward > kMaxTicks)
    return badTicks("backward ticks", t.backward, 1);
  if (t.latency < 0 || t.latency > kMaxTicks)
    return badTicks("latency ticks", t.latency, 0);
  if (t.splitCostPercent < 0 || t.splitCostPercent > 100)
    return ScheduleResult::failure(
        ErrorKind::InvalidTiming,
        "the split cost must be in [0, 100] percent, got " +
            std::to_string(t.splitCostPercent));
  if (kind == ScheduleKind::ZeroBubble && numStages > 1 &&
      (t.weight < 1 || t.weight >= t.backward))
    return ScheduleResult::failure(
        ErrorKind::InvalidTiming,
        "zero-bubble weight ticks must be in [1, backward - 1] = [1, " +
            std::to_string(t.backward - 1) + "], got " +
            std::to_string(t.weight));

  auto generate = [&](const TimingModel &model, int splitFrom,
                      int64_t splitOverhead = 0) -> std::optional<Schedule> {
    Simulator sim(kind, numStages, numMicroBatches, model, splitFrom,
                  splitOverhead);
    if (!sim.run())
      return std::nullopt;
    Schedule s;
    s.kind = kind;
    s.numStages = numStages;
    s.numMicroBatches = numMicroBatches;
    s.timing = model;
    s.splitFrom = splitFrom;
    s.stages = std::move(sim.result());
    return s;
  };
  auto stalled = [&] {
    return ScheduleResult::failure(
        ErrorKind::Internal, std::string("the ") + scheduleKindName(kind) +
                                 " schedule stalled (a bug)");
  };
  if (kind != ScheduleKind::ZeroBubble || numStages < 2) {
    std::optional<Schedule> s = generate(t, 0);
    if (!s)
      return stalled();
    return ScheduleResult::success(std::move(*s));
  }
  // Zero-bubble: how many of the last backwards to split, judged in the
  // model with each split costing splitCostPercent of the backward more
  // (ticks scaled by kScale so that a few percent are whole ticks; the cost
  // goes on W). A split pays only in the pipeline's fill and drain, so the
  // candidates are up to 2 P + 2 of the last backwards, and all of them.
  constexpr int64_t kScale = 20;
  TimingModel costed = t;
  costed.forward *= kScale;
  costed.backward *= kScale;
  costed.weight *= kScale;
  costed.latency *= kScale;
  int64_t overhead = (costed.backward * t.splitCostPercent + 50) / 100;
  int best = numMicroBatches;
  int64_t bestSpan = -1;
  auto consider = [&](int n) -> bool {
    std::optional<Schedule> s = generate(costed, numMicroBatches - n, overhead);
    if (!s)
      return false;
    int64_t span = s->makespan();
    if (bestSpan < 0 || span < bestSpan) {
      bestSpan = span;
      best = numMicroBatches - n;
    }
    return true;
  };
  int scan = std::min(numMicroBatches, 2 * numStages + 2);
  for (int n = 0; n <= scan; ++n)
    if (!consider(n))
      return stalled();
  if (scan < numMicroBatches && !consider(numMicroBatches))
    return stalled();
  std::optional<Schedule> s = generate(t, best);
  if (!s)
    return stalled();
  return ScheduleResult::success(std::move(*s));
}

int64_t varuna::plan::makespan(const ScheduleResult &r) {
  return r ? r->makespan() : -1;
}

std::string varuna::plan::render(const ScheduleResult &r) {
  if (!r)
    return errorText(r);
  std::string out;
  for (int s = 0; s < r->numStages; ++s) {
    out += "stage " + std::to_string(s) + ":";
    for (const ScheduledTask &x : r->stages[s])
      out += " " + x.task.str();
    out += "\n";
  }
  return out;
}

std::string varuna::plan::gantt(const ScheduleResult &r) {
  if (!r)
    return errorText(r);
  const TimingModel &t = r->timing;
  int64_t unit = std::gcd(t.forward, t.backward);
  if (r->kind == ScheduleKind::ZeroBubble)
    unit = std::gcd(unit, t.weight);
  if (t.latency > 0)
    unit = std::gcd(unit, t.latency);
  size_t width = Task{TaskKind::Forward, r->numMicroBatches - 1}.str().size();
  int64_t cells = r->makespan() / unit;
  auto pad = [&](std::string s) {
    s.resize(width, s.size() == 1 ? s[0] : ' ');
    return s;
  };
  std::string out;
  for (int s = 0; s < r->numStages; ++s) {
    std::vector<std::string> row(size_t(cells), pad("."));
    for (const ScheduledTask &x : r->stages[s]) {
      row[size_t(x.start / unit)] = pad(x.task.str());
      for (int64_t c = x.start / unit + 1; c < x.end / unit; ++c)
        row[size_t(c)] = pad("-");
    }
    out += "stage " + std::to_string(s) + ":";
    for (const std::string &c : row)
      out += " " + c;
    out += "\n";
  }
  return out;
}
