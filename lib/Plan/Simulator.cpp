//===- Simulator.cpp - Event-driven simulation of one mini-batch ----------===//
//
// Events are (time, stage) pairs: "stage s may be able to start something
// now" -- posted when a stage finishes a task and when a message reaches it.
// A task's effects (its end, the arrival of the message it sends) are known
// when it starts, since nothing preempts it; readiness compares those known
// times with the event's time. Per stage, the recomputes and backwards whose
// inputs are known are marked in a bitset over positions in the static
// order, so the deviation rule is a scan for the next set bit.
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Simulator.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <random>

namespace varuna {
namespace plan {

namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

struct StageState {
  std::vector<Task> order;
  std::vector<char> done;             // by position
  size_t next = 0;                    // first position not started
  std::vector<int> posF, posR, posB;  // position of F/R/B(k), -1 if none
  std::vector<double> fEnd, rEnd, actArrive, gradArrive;
  std::vector<uint64_t> candidates; // bit per position: an R/B whose
                                    // inputs are known (not yet run)
  double freeAt = 0, busy = 0, lastEnd = 0;
  bool running = false;
};

} // namespace

SimulationResult simulate(const SimulationConfig &c) {
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
  ScheduleResult sched = schedule(c.schedule, P, Nm, c.scheduleTiming);
  if (!sched) {
    res.error = sched.error();
    return res;
  }
  std::vector<StageState> st(P);
  for (int s = 0; s < P; ++s) {
    StageState &x = st[s];
    x.order = sched->order(s);
    x.done.assign(x.order.size(), 0);
    x.candidates.assign(x.order.size() / 64 + 1, 0);
    x.posF.assign(Nm, -1);
    x.posR.assign(Nm, -1);
    x.posB.assign(Nm, -1);
    x.fEnd.assign(Nm, kUnknown);
    x.rEnd.assign(Nm, kUnknown);
    x.actArrive.assign(Nm, s == 0 ? 0.0 : kUnknown);
    x.gradArrive.assign(Nm, kUnknown);
    for (size_t i = 0; i < x.order.size(); ++i) {
      const Task &t = x.order[i];
      auto &pos = t.kind == TaskKind::Forward    ? x.posF
                  : t.kind == TaskKind::Recompute ? x.posR
                                                  : x.posB;
      pos[t.microBatch] = static_cast<int>(i);
    }
  }
  std::mt19937_64 rng(c.seed);
  std::vector<double> linkFreeDown(P, 0), linkFreeUp(P, 0);
  auto transfer = [&](double depart, double bytes, double &linkFree) {
    double start = std::max(depart, linkFree);
    double t = c.link.bytesPerSecond > 0 ? bytes / c.link.bytesPerSecond : 0;
    linkFree = start + t;
    double j = 0;
    if (c.link.jitterSeconds > 0)
      j = std::uniform_real_distribution<double>(-c.link.jitterSeconds,
                                                 c.link.jitterSeconds)(rng);
    return start + t + std::max(0.0, c.link.latencySeconds + j);
  };

  // The deviation belongs to Varuna's schedule (as in the runtime).
  bool deviate = c.deviate && c.schedule == ScheduleKind::Varuna;
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  for (int s = 0; s < P; ++s)
    events.push({0.0, s});

  auto duration = [&](int s, TaskKind k) {
    const StageCost &sc = c.stages[s];
    switch (k) {
    case TaskKind::Forward: return sc.forward;
    case TaskKind::Recompute: return sc.recompute < 0 ? sc.forward : sc.recompute;
    case TaskKind::Backward: return sc.backward;
    }
    return 0.0;
  };
  // When the inputs of R/B(k) at stage s are known, it becomes a candidate.
  auto mark = [](StageState &x, int pos) {
    x.candidates[pos >> 6] |= uint64_t(1) << (pos & 63);
  };
  auto maybeCandidate = [&](int s, int k) {
    if (!deviate)
      return;
    StageState &x = st[s];
    bool last = s == P - 1;
    if (x.posR[k] >= 0 && x.fEnd[k] < kUnknown && !x.done[x.posR[k]])
      mark(x, x.posR[k]);
    bool inputs = (last || x.gradArrive[k] < kUnknown) &&
                  (x.posR[k] >= 0 ? x.rEnd[k] < kUnknown
                                  : x.fEnd[k] < kUnknown);
    if (x.posB[k] >= 0 && inputs && !x.done[x.posB[k]])
      mark(x, x.posB[k]);
  };
  auto readyAt = [&](int s, const Task &t) {
    const StageState &x = st[s];
    int k = t.microBatch;
    switch (t.kind) {
    case TaskKind::Forward: return x.actArrive[k];
    case TaskKind::Recompute: return x.fEnd[k];
    case TaskKind::Backward: {
      double in = x.posR[k] >= 0 ? x.rEnd[k] : x.fEnd[k];
      return s == P - 1 ? in : std::max(in, x.gradArrive[k]);
    }
    }
    return kUnknown;
  };

  size_t remaining = 0;
  for (auto &x : st)
    remaining += x.order.size();
  while (!events.empty() && remaining > 0) {
    auto [now, s] = events.top();
    events.pop();
    StageState &x = st[s];
    if (x.freeAt > now)
      continue;
    while (x.next < x.order.size() && x.done[x.next])
      ++x.next;
    if (x.next >= x.order.size())
      continue;
    int pick = -1;
    if (readyAt(s, x.order[x.next]) <= now) {
      pick = static_cast<int>(x.next);
    } else if (deviate) {
      size_t from = x.next + 1, words = x.candidates.size();
      for (size_t w = from >> 6; w < words && pick < 0; ++w) {
        uint64_t bits = x.candidates[w];
        if (w == from >> 6)
          bits &= ~uint64_t(0) << (from & 63);
        while (bits) {
          int pos = static_cast<int>(w * 64 + __builtin_ctzll(bits));
          bits &= bits - 1;
          if (readyAt(s, x.order[pos]) <= now) {
            pick = pos;
            ++res.deviations;
            break;
          }
        }
      }
    }
    if (pick < 0)
      continue; // woken again by a message or its own end
    Task t = x.order[pick];
    x.done[pick] = 1;
    x.candidates[pick >> 6] &= ~(uint64_t(1) << (pick & 63));
    --remaining;
    double end = now + duration(s, t.kind);
    x.freeAt = end;
    x.busy += end - now;
    x.lastEnd = std::max(x.lastEnd, end);
    if (c.recordTimeline)
      res.timeline.push_back({s, t, now, end});
    int k = t.microBatch;
    if (t.kind == TaskKind::Forward) {
      x.fEnd[k] = end;
      maybeCandidate(s, k);
      if (s + 1 < P) {
        double bytes = c.boundaryBytes.empty() ? 0 : c.boundaryBytes[s];
        st[s + 1].actArrive[k] = transfer(end, bytes, linkFreeDown[s]);
        // A stage busy past the arrival looks again when it is free.
        if (st[s + 1].actArrive[k] > st[s + 1].freeAt)
          events.push({st[s + 1].actArrive[k], s + 1});
      }
    } else if (t.kind == TaskKind::Recompute) {
      x.rEnd[k] = end;
      maybeCandidate(s, k);
    } else if (s > 0) {
      double bytes = c.boundaryBytes.empty() ? 0 : c.boundaryBytes[s - 1];
      st[s - 1].gradArrive[k] = transfer(end, bytes, linkFreeUp[s]);
      maybeCandidate(s - 1, k);
      if (st[s - 1].gradArrive[k] > st[s - 1].freeAt)
        events.push({st[s - 1].gradArrive[k], s - 1});
    }
    events.push({end, s});
  }
  if (remaining > 0) {
    res.error = "the simulation stalled with " + std::to_string(remaining) +
                " tasks left (an inconsistent schedule)";
    return res;
  }
  double finish = 0;
  for (int s = 0; s < P; ++s) {
    double ar = c.allreduceSeconds.empty() ? 0 : c.allreduceSeconds[s];
    finish = std::max(finish, st[s].lastEnd + ar);
  }
  res.minibatchSeconds = finish + c.optimizerSeconds;
  for (int s = 0; s < P; ++s)
    res.busyFraction.push_back(res.minibatchSeconds > 0
                                   ? st[s].busy / res.minibatchSeconds
                                   : 0);
  return res;
}

std::string timelineJson(const SimulationResult &r, int numStages) {
  std::string out = "{\"traceEvents\": [\n";
  char buf[256];
  for (int s = 0; s < numStages; ++s) {
    std::snprintf(buf, sizeof buf,
                  "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                  "\"args\": {\"name\": \"stage %d (simulated)\"}},\n",
                  s, s);
    out += buf;
  }
  for (size_t i = 0; i < r.timeline.size(); ++i) {
    const SimSpan &e = r.timeline[i];
    std::snprintf(buf, sizeof buf,
                  "{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, "
                  "\"ts\": %.3f, \"dur\": %.3f}%s\n",
                  e.task.str().c_str(), e.stage, e.start * 1e6,
                  (e.end - e.start) * 1e6,
                  i + 1 < r.timeline.size() ? "," : "");
    out += buf;
  }
  return out + "]}\n";
}

} // namespace plan
} // namespace varuna
