//===- ScheduleTest.cpp - Static pipeline schedules -----------------------===//
//
// Hand-computed schedules (the paper's examples), then invariants checked on
// random shapes against an independent reading of the contract in Schedule.h:
// the checks recompute every readiness tick from the result's own ticks, never
// from the generator's internals.
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Schedule.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

using namespace varuna::plan;
using ErrorKind = ScheduleResult::ErrorKind;

namespace {

std::string str(const std::vector<Task> &tasks) {
  std::string s;
  for (const Task &t : tasks)
    s += (s.empty() ? "" : " ") + t.str();
  return s;
}

/// "F0@0 F1@1 R0@6 ...": a stage's tasks with their start ticks.
std::string ticks(const Schedule &s, int stage) {
  std::string out;
  for (const ScheduledTask &x : s.stages[stage])
    out +=
        (out.empty() ? "" : " ") + x.task.str() + "@" + std::to_string(x.start);
  return out;
}

ScheduleResult make(ScheduleKind kind, int P, int Nm, TimingModel t = {}) {
  ScheduleResult r = schedule(kind, P, Nm, t);
  EXPECT_TRUE(r.ok()) << r.error();
  return r;
}

//===----------------------------------------------------------------------===//
// The paper's examples
//===----------------------------------------------------------------------===//

// PAPER-FACTS, P=3, Nm=2, unit model (F = R = 1 tick, B = 2).
//   stage 0: F0 [0,1) F1 [1,2)
//   stage 1: F0 [1,2) F1 [2,3)
//   stage 2: F0 [2,3); at 3 both B0 (after its own F0) and F1 are ready:
//            backward first, B0 [3,5); F1 [5,6); B1 [6,8).
//   stage 1: R0 is ready one forward-time before the gradient of B0 arrives:
//            5 - 1 = 4, R0 [4,5), B0 [5,7); R1 at 8 - 1 = 7, R1 [7,8),
//            B1 [8,10).
//   stage 0: R0 at 7 - 1 = 6, R0 [6,7), B0 [7,9); R1 at 9, B1 [10,12).
TEST(ScheduleTest, PaperExampleThreeStagesTwoMicroBatches) {
  ScheduleResult r = make(ScheduleKind::Varuna, 3, 2);
  EXPECT_EQ(str(r->order(0)), "F0 F1 R0 B0 R1 B1");
  EXPECT_EQ(str(r->order(1)), "F0 F1 R0 B0 R1 B1");
  EXPECT_EQ(str(r->order(2)), "F0 B0 F1 B1");
  EXPECT_EQ(ticks(*r, 0), "F0@0 F1@1 R0@6 B0@7 R1@9 B1@10");
  EXPECT_EQ(ticks(*r, 1), "F0@1 F1@2 R0@4 B0@5 R1@7 B1@8");
  EXPECT_EQ(ticks(*r, 2), "F0@2 B0@3 F1@5 B1@6");
  EXPECT_EQ(makespan(r), 12);
  EXPECT_EQ(render(r), "stage 0: F0 F1 R0 B0 R1 B1\n"
                       "stage 1: F0 F1 R0 B0 R1 B1\n"
                       "stage 2: F0 B0 F1 B1\n");
  EXPECT_EQ(gantt(r), "stage 0: F0 F1 .. .. .. .. R0 B0 -- R1 B1 --\n"
                      "stage 1: .. F0 F1 .. R0 B0 -- R1 B1 -- .. ..\n"
                      "stage 2: .. .. F0 B0 -- F1 B1 -- .. .. .. ..\n");
}

// Figure 4: P=4, Nm=5, backward = 2 x forward.
//
// GPipe (with re-materialisation), by hand. Forwards: stage s runs F0..F4 in
// [s, s+5). Backwards in reverse order, R(k) right before B(k):
//   stage 3: F4 ends at 8; B4 [8,10) B3 [10,12) B2 [12,14) B1 [14,16)
//            B0 [16,18).
//   stage 2: F4 ends at 7, R4 [7,8); B4 waits for stage 3's B4: [10,12);
//            then R3 [12,13) B3 [13,15) R2 [15,16) B2 [16,18) R1 [18,19)
//            B1 [19,21) R0 [21,22) B0 [22,24)  (3 ticks per micro-batch:
//            the gradient is always there before R+B is done).
//   stage 1: R4 [6,7), B4 [12,14), then R+B per micro-batch, each B waiting
//            for stage 2's (done at 15, 18, 21, 24): R3 [14,15) B3 [15,17)
//            R2 [17,18) B2 [18,20) R1 [20,21) B1 [21,23) R0 [23,24)
//            B0 [24,26).
//   stage 0: R4 [5,6), B4 [14,16) R3 [16,17) B3 [17,19) R2 [19,20)
//            B2 [20,22) R1 [22,23) B1 [23,25) R0 [25,26) B0 [26,28).
//   GPipe's makespan: 28.
//
// Varuna, by hand (R(k) at s-1 ready at max(start, end - 1) of B(k) at s):
//   stage 0: F0..F4 [0,5)     stage 1: F0..F4 [1,6)
//   stage 3: F0 [3,4) B0 [4,6) F1 [6,7) B1 [7,9) F2 [9,10) B2 [10,12); idle
//            until F3 arrives: F3 [15,16) B3 [16,18) F4 [18,19) B4 [19,21).
//   stage 2: F0 [2,3) F1 [3,4) F2 [4,5); at 5 R0 (ready 6 - 1 = 5) beats F3:
//            R0 [5,6) B0 [6,8); R1 ready 9 - 1 = 8: R1 [8,9) B1 [9,11);
//            R2 [11,12) B2 [12,14); nothing to recompute (stage 3 is idle
//            without F3), so F3 [14,15) F4 [15,16), idle at 16; R3 (ready
//            18 - 1) [17,18) B3 [18,20); R4 [20,21) B4 [21,23).
//   stage 1: R0 [7,8) B0 [8,10) R1 [10,11) B1 [11,13) R2 [13,14)
//            B2 [14,16) R3 [19,20) B3 [20,22) R4 [22,23) B4 [23,25).
//   stage 0: R0 [9,10) B0 [10,12) R1 [12,13) B1 [13,15) R2 [15,16)
//            B2 [16,18) R3 [21,22) B3 [22,24) R4 [24,25) B4 [25,27).
//   Varuna's makespan: 27, one tick less than GPipe's, as in the paper.
//
// With the earlier trigger (R ready when stage s STARTS B(k)) each R lands
// a tick early and the stage, holding the recomputed set, idles a tick before
// B(k) instead of running a forward: 30 ticks, more than GPipe's 28. That is
// why the default is the original generator's just-in-time trigger.
TEST(ScheduleTest, Figure4VarunaBeatsGPipeByOneTick) {
  ScheduleResult g = make(ScheduleKind::GPipe, 4, 5);
  EXPECT_EQ(makespan(g), 28);
  EXPECT_EQ(ticks(*g, 0), "F0@0 F1@1 F2@2 F3@3 F4@4 R4@5 B4@14 R3@16 B3@17 "
                          "R2@19 B2@20 R1@22 B1@23 R0@25 B0@26");
  EXPECT_EQ(ticks(*g, 2), "F0@2 F1@3 F2@4 F3@5 F4@6 R4@7 B4@10 R3@12 B3@13 "
                          "R2@15 B2@16 R1@18 B1@19 R0@21 B0@22");
  EXPECT_EQ(ticks(*g, 3),
            "F0@3 F1@4 F2@5 F3@6 F4@7 B4@8 B3@10 B2@12 B1@14 B0@16");

  ScheduleResult v = make(ScheduleKind::Varuna, 4, 5);
  EXPECT_EQ(makespan(v), 27);
  EXPECT_EQ(makespan(v), makespan(g) - 1);
  EXPECT_EQ(ticks(*v, 0), "F0@0 F1@1 F2@2 F3@3 F4@4 R0@9 B0@10 R1@12 B1@13 "
                          "R2@15 B2@16 R3@21 B3@22 R4@24 B4@25");
  EXPECT_EQ(ticks(*v, 1), "F0@1 F1@2 F2@3 F3@4 F4@5 R0@7 B0@8 R1@10 B1@11 "
                          "R2@13 B2@14 R3@19 B3@20 R4@22 B4@23");
  EXPECT_EQ(ticks(*v, 2), "F0@2 F1@3 F2@4 R0@5 B0@6 R1@8 B1@9 R2@11 B2@12 "
                          "F3@14 F4@15 R3@17 B3@18 R4@20 B4@21");
  EXPECT_EQ(ticks(*v, 3),
            "F0@3 B0@4 F1@6 B1@7 F2@9 B2@10 F3@15 B3@16 F4@18 B4@19");

  // Forwards are interleaved with backwards (not all first) on stages 2 and 3;
  // GPipe runs every forward before any backward.
  auto forwardAfterBackward = [](const std::vector<Task> &o) {
    bool sawBackward = false;
    for (const Task &t : o) {
      sawBackward |= t.kind == TaskKind::Backward;
      if (sawBackward && t.kind == TaskKind::Forward)
        return true;
    }
    return false;
  };
  EXPECT_TRUE(forwardAfterBackward(v->order(2)));
  EXPECT_TRUE(forwardAfterBackward(v->order(3)));
  for (int s = 0; s < 4; ++s)
    EXPECT_FALSE(forwardAfterBackward(g->order(s))) << "stage " << s;

  TimingModel early;
  early.recomputeTrigger = RecomputeTrigger::BackwardStart;
  EXPECT_EQ(makespan(make(ScheduleKind::Varuna, 4, 5, early)), 30);
}

// 1F1B, P=4, Nm=8: stage s warms up with min(P-s-1, Nm) forwards.
//   stage 0: 3 warm-up forwards, then F3 B0 F4 B1 ... F7 B4, then B5 B6 B7.
//   stage 3: no warm-up: F0 B0 F1 B1 ... F7 B7.
// Makespan: the last stage gets F0 at 3 and then runs F B pairs back to back
// (3 ticks each: every stage's steady state is also 3 ticks per micro-batch,
// so F(k+1) is always there in time): 3 + 8 x 3 = 27; B7's gradient then
// crosses stages 2, 1, 0 (2 ticks each): 33.
TEST(ScheduleTest, OneFOneBFourStagesEightMicroBatches) {
  ScheduleResult r = make(ScheduleKind::OneFOneB, 4, 8);
  EXPECT_EQ(str(r->order(0)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(str(r->order(3)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(str(r->order(1)),
            "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  for (size_t i = 1; i < r->stages[3].size(); ++i)
    EXPECT_EQ(r->stages[3][i].start, r->stages[3][i - 1].end) << i;
  EXPECT_EQ(r->stages[3].front().start, 3);
  EXPECT_EQ(makespan(r), 33);
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(r->maxInFlight(s), 4 - s);
}

// Zero-bubble (ZB-H1), P=2, Nm=4, unit model: F = 1; stage 1 splits a
// backward (B = 2) into B = 1 and W = 1; stage 0 has no input gradient, so
// its B is the whole 2 ticks and it has no W. A stage holds a micro-batch
// from its F to its W (a whole backward: its B), at most P - s + 1.
// Splitting all four backwards:
//   stage 0: F0 [0,1) F1 [1,2) F2 [2,3) (holds 3); the gradient of B0 is
//            there at 3: B0 [3,5); B1's at 5: B1 [5,7); B2's comes at 8:
//            F3 [7,8) first; B2 [8,10); B3 at 11: [11,13).
//   stage 1: F0 [1,2) B0 [2,3) F1 [3,4) B1 [4,5); F2 (there since 3) waits:
//            it holds 2 (no W yet), so W0 [5,6) F2 [6,7) B2 [7,8); F3 is
//            there at 8 but it holds 2 again: W1 [8,9) F3 [9,10) B3 [10,11)
//            W2 [11,12) W3 [12,13).
// Makespan 13, against 1F1B's 15: stage 0 waits for B's of one tick, not
// for B+W. Splitting only B2 and B3 (splitFrom 2) also takes 13 ticks:
//   stage 1: F0 [1,2) B0 [2,4) F1 [4,5) B1 [5,7) F2 [7,8) B2 [8,9) F3
//            [9,10) B3 [10,11) W2 [11,12) W3 [12,13);
//   stage 0: F0 F1 F2 [0,3), B0 [4,6) F3 [6,7) B1 [7,9) B2 [9,11) B3
//            [11,13).
// Splitting only B3 takes 14 (stage 0's B2 starts at 10), so the schedule
// splits two.
TEST(ScheduleTest, ZeroBubbleTwoStagesFourMicroBatches) {
  ScheduleResult r = make(ScheduleKind::ZeroBubble, 2, 4);
  EXPECT_EQ(r->splitFrom, 2);
  EXPECT_EQ(ticks(*r, 0), "F0@0 F1@1 F2@2 B0@4 F3@6 B1@7 B2@9 B3@11");
  EXPECT_EQ(ticks(*r, 1),
            "F0@1 B0@2 F1@4 B1@5 F2@7 B2@8 F3@9 B3@10 W2@11 W3@12");
  EXPECT_EQ(makespan(r), 13);
  EXPECT_EQ(makespan(make(ScheduleKind::OneFOneB, 2, 4)), 15);
  EXPECT_EQ(r->maxInFlight(0), 3);
  EXPECT_EQ(r->maxInFlight(1), 2);
  EXPECT_FALSE(r->splits(0, 3));
  EXPECT_FALSE(r->splits(1, 1));
  EXPECT_TRUE(r->splits(1, 2));
  EXPECT_EQ(gantt(r), "stage 0: F0 F1 F2 .. B0 -- F3 B1 -- B2 -- B3 --\n"
                      "stage 1: .. F0 B0 -- F1 B1 -- F2 B2 F3 B3 W2 W3\n");
}

// With the unit model, splits free (splitCostPercent 0) and Nm >= 2, the
// last stage never idles after its F0 at P-1 (3 Nm ticks of work) and ends
// with W(Nm-2) W(Nm-1), so its B(Nm-1) ends at 3 Nm + P - 3; that gradient
// then crosses P - 2 stages of one-tick B's and stage 0's two: 3 Nm + 2P -
// 3, against 1F1B's 3 (Nm + P - 1) -- P ticks less. With the default split
// cost the schedule splits what pays in the costed model (in ticks without
// the cost it may take longer), never longer than 1F1B's.
TEST(ScheduleTest, ZeroBubbleMakespanUnitModel) {
  TimingModel free;
  free.splitCostPercent = 0;
  for (int P = 2; P <= 8; ++P)
    for (int Nm = 2; Nm <= 16; ++Nm) {
      SCOPED_TRACE("P=" + std::to_string(P) + " Nm=" + std::to_string(Nm));
      ScheduleResult r = make(ScheduleKind::ZeroBubble, P, Nm, free);
      EXPECT_EQ(makespan(r), 3 * Nm + 2 * P - 3);
      int64_t oneFOneB = makespan(make(ScheduleKind::OneFOneB, P, Nm));
      EXPECT_EQ(oneFOneB, 3 * (Nm + P - 1));
      ScheduleResult costed = make(ScheduleKind::ZeroBubble, P, Nm);
      EXPECT_LE(makespan(costed), oneFOneB);
    }
}

// P = 2, Nm = 8: splitting the last two backwards reaches the makespan of
// splitting all eight (25 ticks; stage 0's first backward waits for B0
// either way: it runs F0 F1 F2 first); splitting one gives 26, none 1F1B's
// 27. At 12% a split (the default) two are worth it; at 25% (W 1.5 ticks
// in the costed model) only the last one; at 100% none.
TEST(ScheduleTest, ZeroBubbleSplitsWhatPays) {
  auto with = [](int64_t percent) {
    TimingModel t;
    t.splitCostPercent = percent;
    return make(ScheduleKind::ZeroBubble, 2, 8, t);
  };
  ScheduleResult r = with(12);
  EXPECT_EQ(r->splitFrom, 6);
  EXPECT_EQ(makespan(r), 25);
  EXPECT_EQ(render(r),
            "stage 0: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7\n"
            "stage 1: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 W6 W7\n");
  EXPECT_EQ(with(0)->splitFrom, 6);
  EXPECT_EQ(with(25)->splitFrom, 7);
  EXPECT_EQ(makespan(with(25)), 26);
  EXPECT_EQ(with(100)->splitFrom, 8);
  EXPECT_EQ(makespan(with(100)), 27);
  EXPECT_EQ(render(with(100)).find('W'), std::string::npos);
}

TEST(ScheduleTest, SingleStage) {
  ScheduleResult v = make(ScheduleKind::Varuna, 1, 3);
  EXPECT_EQ(render(v), "stage 0: F0 B0 F1 B1 F2 B2\n");
  EXPECT_EQ(makespan(v), 9);
  ScheduleResult g = make(ScheduleKind::GPipe, 1, 3);
  EXPECT_EQ(render(g), "stage 0: F0 F1 F2 B2 B1 B0\n");
  EXPECT_EQ(makespan(g), 9);
  ScheduleResult o = make(ScheduleKind::OneFOneB, 1, 3);
  EXPECT_EQ(render(o), "stage 0: F0 B0 F1 B1 F2 B2\n");
  EXPECT_EQ(makespan(o), 9);
  EXPECT_EQ(gantt(v), "stage 0: F0 B0 -- F1 B1 -- F2 B2 --\n");
}

TEST(ScheduleTest, GanttUsesTheCommonTimeUnit) {
  TimingModel t;
  t.forward = 2;
  t.backward = 4;
  ScheduleResult r = make(ScheduleKind::Varuna, 2, 1, t);
  // Unit model P=2, Nm=1: F0 [0,1); stage 1 F0 [1,2) B0 [2,4); stage 0
  // R0 at 4 - 1 = 3, B0 [4,6). Doubling every duration doubles every tick;
  // the chart divides by 2.
  EXPECT_EQ(ticks(*r, 0), "F0@0 R0@6 B0@8");
  EXPECT_EQ(gantt(r), "stage 0: F0 .. .. R0 B0 --\n"
                      "stage 1: .. F0 B0 -- .. ..\n");
  // Ten micro-batches: labels are three characters wide.
  ScheduleResult wide = make(ScheduleKind::OneFOneB, 1, 11);
  EXPECT_EQ(gantt(wide).substr(0, 25), "stage 0: F0  B0  --- F1  ");
}

TEST(ScheduleTest, LatencyDelaysMessagesNotLocalWork) {
  TimingModel t;
  t.latency = 3;
  ScheduleResult r = make(ScheduleKind::Varuna, 2, 1, t);
  // F0 [0,1) -> arrives at 4: stage 1 F0 [4,5) B0 [5,7) -> gradient at 10;
  // R0 ready at 10 - 1 = 9: R0 [9,10) B0 [10,12).
  EXPECT_EQ(ticks(*r, 0), "F0@0 R0@9 B0@10");
  EXPECT_EQ(ticks(*r, 1), "F0@4 B0@5");
  EXPECT_EQ(makespan(r), 12);
}

//===----------------------------------------------------------------------===//
// Invariants
//===----------------------------------------------------------------------===//

struct Key {
  int stage;
  TaskKind kind;
  int mb;
  bool operator<(const Key &o) const {
    return std::tie(stage, kind, mb) < std::tie(o.stage, o.kind, o.mb);
  }
};

/// Checks `r` against the contract; `where` names the case in failures.
void checkInvariants(ScheduleKind kind, int P, int Nm, const TimingModel &t,
                     const ScheduleResult &r, const std::string &where) {
  SCOPED_TRACE(where);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->numStages, P);
  ASSERT_EQ(r->numMicroBatches, Nm);
  ASSERT_EQ(int(r->stages.size()), P);
  bool recomputes = kind != ScheduleKind::OneFOneB;

  // Exactly one F and one B per micro-batch and stage; R exactly where the
  // kind recomputes; durations; stages never run two tasks at once.
  std::map<Key, ScheduledTask> at;
  for (int s = 0; s < P; ++s) {
    bool withR = recomputes && s != P - 1;
    ASSERT_EQ(r->stages[s].size(), size_t(Nm) * (withR ? 3 : 2)) << s;
    int64_t free = 0;
    for (const ScheduledTask &x : r->stages[s]) {
      ASSERT_GE(x.task.microBatch, 0);
      ASSERT_LT(x.task.microBatch, Nm);
      ASSERT_TRUE(withR || x.task.kind != TaskKind::Recompute) << s;
      ASSERT_TRUE(at.insert({{s, x.task.kind, x.task.microBatch}, x}).second)
          << "duplicate " << x.task.str() << " on stage " << s;
      ASSERT_EQ(x.end - x.start,
                x.task.kind == TaskKind::Backward ? t.backward : t.forward);
      ASSERT_GE(x.start, free) << "overlap on stage " << s;
      free = x.end;
    }
  }
  auto get = [&](int s, TaskKind k, int mb) { return at.at({s, k, mb}); };
  auto has = [&](int s, TaskKind k, int mb) { return at.count({s, k, mb}); };

  // When each task's dependencies allow it to start (Schedule.h), from the
  // result's own ticks.
  auto readyAt = [&](int s, TaskKind k, int mb) -> int64_t {
    switch (k) {
    case TaskKind::Forward:
      return s == 0 ? 0 : get(s - 1, k, mb).end + t.latency;
    case TaskKind::Recompute: {
      int64_t ready = get(s, TaskKind::Forward, mb).end;
      if (kind == ScheduleKind::Varuna) {
        ScheduledTask b = get(s + 1, TaskKind::Backward, mb);
        int64_t trigger =
            t.recomputeTrigger == RecomputeTrigger::BackwardStart
                ? b.start
                : std::max(b.start, b.end + t.latency - t.forward);
        ready = std::max(ready, trigger);
      }
      return ready;
    }
    case TaskKind::Backward: {
      int64_t ready = s == P - 1 ? get(s, TaskKind::Forward, mb).end
                                 : get(s + 1, k, mb).end + t.latency;
      if (has(s, TaskKind::Recompute, mb))
        ready = std::max(ready, get(s, TaskKind::Recompute, mb).end);
      return ready;
    }
    case TaskKind::Weight:
      return get(s, TaskKind::Backward, mb).end;
    }
    return 0;
  };
  for (const auto &[key, x] : at)
    ASSERT_GE(x.start, readyAt(key.stage, key.kind, key.mb))
        << x.task.str() << " on stage " << key.stage << " starts too early";

  // Explicit dependency spot checks (the same facts, stated directly).
  for (int s = 0; s < P; ++s)
    for (int k = 0; k < Nm; ++k) {
      if (s > 0) {
        EXPECT_GE(get(s, TaskKind::Forward, k).start,
                  get(s - 1, TaskKind::Forward, k).end);
      }
      if (s < P - 1) {
        EXPECT_GE(get(s, TaskKind::Backward, k).start,
                  get(s + 1, TaskKind::Backward, k).end);
      }
      if (has(s, TaskKind::Recompute, k)) {
        EXPECT_LE(get(s, TaskKind::Recompute, k).end,
                  get(s, TaskKind::Backward, k).start);
      }
    }

  if (kind != ScheduleKind::Varuna) {
    // Fixed order, list-scheduled: each task starts as soon as both its
    // predecessor on the stage and its dependencies allow.
    for (int s = 0; s < P; ++s) {
      std::vector<Task> want;
      bool last = s == P - 1;
      if (kind == ScheduleKind::GPipe) {
        for (int k = 0; k < Nm; ++k)
          want.push_back({TaskKind::Forward, k});
        for (int k = Nm - 1; k >= 0; --k) {
          if (!last)
            want.push_back({TaskKind::Recompute, k});
          want.push_back({TaskKind::Backward, k});
        }
      } else {
        int warm = std::min(P - s - 1, Nm), f = 0, b = 0;
        while (f < warm)
          want.push_back({TaskKind::Forward, f++});
        while (f < Nm) {
          want.push_back({TaskKind::Forward, f++});
          want.push_back({TaskKind::Backward, b++});
        }
        while (b < Nm)
          want.push_back({TaskKind::Backward, b++});
        EXPECT_EQ(r->maxInFlight(s), std::min(P - s, Nm));
      }
      ASSERT_EQ(str(r->order(s)), str(want)) << "stage " << s;
      int64_t free = 0;
      for (const ScheduledTask &x : r->stages[s]) {
        EXPECT_EQ(x.start,
                  std::max(free, readyAt(s, x.task.kind, x.task.microBatch)))
            << x.task.str() << " on stage " << s;
        free = x.end;
      }
    }
    return;
  }

  // Varuna. Forwards in micro-batch order; every R(k) immediately followed by
  // B(k) (never two recomputed sets, no forward while holding one).
  for (int s = 0; s < P; ++s) {
    std::vector<Task> o = r->order(s);
    int nextF = 0;
    for (size_t i = 0; i < o.size(); ++i) {
      if (o[i].kind == TaskKind::Forward) {
        EXPECT_EQ(o[i].microBatch, nextF++) << "stage " << s;
      }
      if (o[i].kind == TaskKind::Recompute) {
        ASSERT_LT(i + 1, o.size());
        EXPECT_EQ(o[i + 1], (Task{TaskKind::Backward, o[i].microBatch}))
            << "stage " << s << " holds two sets after " << o[i].str();
      }
    }
  }
  // The greedy rule: a stage not holding a recomputed set starts a task at
  // the first tick any is ready, and the one it starts has the highest
  // priority (backward > recompute > forward; ties: earliest ready, then
  // lowest micro-batch) among those ready then. A stage holding R(k) starts
  // B(k) as soon as it is ready.
  auto rank = [](TaskKind k) {
    return k == TaskKind::Backward ? 0 : k == TaskKind::Recompute ? 1 : 2;
  };
  for (int s = 0; s < P; ++s) {
    const std::vector<ScheduledTask> &st = r->stages[s];
    int64_t free = 0;
    for (size_t i = 0; i < st.size(); ++i) {
      const ScheduledTask &x = st[i];
      int64_t now = x.start;
      if (i > 0 && st[i - 1].task.kind == TaskKind::Recompute) {
        EXPECT_EQ(now,
                  std::max(free, readyAt(s, x.task.kind, x.task.microBatch)));
        free = x.end;
        continue;
      }
      // Candidates: the tasks of this stage not yet started; forwards only
      // the next one (they go in order); not the backwards of a non-last
      // stage (their recompute is later, so they cannot be ready).
      int64_t xr = readyAt(s, x.task.kind, x.task.microBatch);
      bool sawForward = x.task.kind == TaskKind::Forward;
      for (size_t j = i + 1; j < st.size(); ++j) {
        const Task &c = st[j].task;
        if (c.kind == TaskKind::Forward) {
          if (sawForward)
            continue;
          sawForward = true;
        }
        if (c.kind == TaskKind::Backward &&
            has(s, TaskKind::Recompute, c.microBatch))
          continue;
        int64_t ready = std::max(free, readyAt(s, c.kind, c.microBatch));
        EXPECT_FALSE(ready < now)
            << "stage " << s << " idle while " << c.str() << " was ready at "
            << ready << "; ran " << x.task.str() << " at " << now;
        if (ready == now) {
          int64_t cr = readyAt(s, c.kind, c.microBatch);
          bool better = rank(c.kind) < rank(x.task.kind) ||
                        (rank(c.kind) == rank(x.task.kind) &&
                         std::make_pair(cr, c.microBatch) <
                             std::make_pair(xr, x.task.microBatch));
          EXPECT_FALSE(better) << "stage " << s << " at " << now << " ran "
                               << x.task.str() << " over " << c.str();
        }
      }
      EXPECT_EQ(now, std::max(free, readyAt(s, x.task.kind, x.task.microBatch)))
          << x.task.str() << " on stage " << s << " could start earlier";
      free = x.end;
    }
  }
  // Stash count in the unit model (a characterisation of the generator, not
  // a rule it enforces; docs/schedule.md): stage s < P-1 holds at most
  // min(Nm, 3(P-s-1)) micro-batches between F and B, the last stage one.
  // Not 1F1B's P-s: a non-last stage keeps forwarding until its first
  // recompute trigger comes back.
  if (t.forward == 1 && t.backward == 2 && t.latency == 0 &&
      t.recomputeTrigger == RecomputeTrigger::ForwardBeforeGradient) {
    for (int s = 0; s < P; ++s) {
      EXPECT_EQ(r->maxInFlight(s),
                s == P - 1 ? 1 : std::min(Nm, 3 * (P - s - 1)))
          << "stage " << s;
    }
  }
}

TEST(ScheduleTest, InvariantsUnitModel) {
  std::mt19937 rng(20240607);
  for (int iter = 0; iter < 200; ++iter) {
    int P = std::uniform_int_distribution<int>(1, 8)(rng);
    int Nm = std::uniform_int_distribution<int>(1, 16)(rng);
    for (ScheduleKind kind :
         {ScheduleKind::Varuna, ScheduleKind::GPipe, ScheduleKind::OneFOneB})
      checkInvariants(kind, P, Nm, {}, schedule(kind, P, Nm),
                      std::string(scheduleKindName(kind)) + " P=" +
                          std::to_string(P) + " Nm=" + std::to_string(Nm));
  }
}

TEST(ScheduleTest, InvariantsExhaustiveSmall) {
  for (int P = 1; P <= 8; ++P)
    for (int Nm = 1; Nm <= 16; ++Nm)
      for (ScheduleKind kind :
           {ScheduleKind::Varuna, ScheduleKind::GPipe, ScheduleKind::OneFOneB})
        checkInvariants(kind, P, Nm, {}, schedule(kind, P, Nm),
                        std::string(scheduleKindName(kind)) + " P=" +
                            std::to_string(P) + " Nm=" + std::to_string(Nm));
}

TEST(ScheduleTest, InvariantsRandomTiming) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    int P = std::uniform_int_distribution<int>(1, 8)(rng);
    int Nm = std::uniform_int_distribution<int>(1, 16)(rng);
    TimingModel t;
    t.forward = std::uniform_int_distribution<int>(1, 4)(rng);
    t.backward = std::uniform_int_distribution<int>(1, 8)(rng);
    t.latency = std::uniform_int_distribution<int>(0, 3)(rng);
    t.recomputeTrigger = iter % 2 ? RecomputeTrigger::BackwardStart
                                  : RecomputeTrigger::ForwardBeforeGradient;
    for (ScheduleKind kind :
         {ScheduleKind::Varuna, ScheduleKind::GPipe, ScheduleKind::OneFOneB})
      checkInvariants(
          kind, P, Nm, t, schedule(kind, P, Nm, t),
          std::string(scheduleKindName(kind)) + " P=" + std::to_string(P) +
              " Nm=" + std::to_string(Nm) + " f=" + std::to_string(t.forward) +
              " b=" + std::to_string(t.backward) +
              " l=" + std::to_string(t.latency) +
              " trigger=" + std::to_string(int(t.recomputeTrigger)));
  }
}

/// Zero-bubble's contract (Schedule.h), from the result's own ticks: each
/// task once with its duration (W only for the split backwards, the last
/// Nm - splitFrom), no overlap, dependencies, forwards in
/// order, at most P - s + 1 micro-batches held, and the greedy rule: a
/// stage never idles while it may start something, and it starts a ready
/// backward before a forward, a ready forward before a W.
void checkZeroBubble(int P, int Nm, const TimingModel &t,
                     const std::string &where) {
  SCOPED_TRACE(where);
  ScheduleResult r = schedule(ScheduleKind::ZeroBubble, P, Nm, t);
  ASSERT_TRUE(r.ok()) << r.error();
  std::map<Key, ScheduledTask> at;
  for (int s = 0; s < P; ++s) {
    int splitCount = s > 0 ? Nm - r->splitFrom : 0;
    ASSERT_EQ(r->stages[s].size(), size_t(Nm) * 2 + splitCount) << s;
    int64_t free = 0;
    for (const ScheduledTask &x : r->stages[s]) {
      ASSERT_NE(x.task.kind, TaskKind::Recompute);
      ASSERT_TRUE(s > 0 || x.task.kind != TaskKind::Weight);
      ASSERT_TRUE(at.insert({{s, x.task.kind, x.task.microBatch}, x}).second);
      bool split = r->splits(s, x.task.microBatch);
      ASSERT_TRUE(split || x.task.kind != TaskKind::Weight);
      int64_t want = x.task.kind == TaskKind::Forward ? t.forward
                     : x.task.kind == TaskKind::Weight ? t.weight
                     : split                           ? t.backward - t.weight
                                                       : t.backward;
      ASSERT_EQ(x.end - x.start, want) << x.task.str() << " stage " << s;
      ASSERT_GE(x.start, free);
      free = x.end;
    }
  }
  auto get = [&](int s, TaskKind k, int mb) { return at.at({s, k, mb}); };
  auto readyAt = [&](int s, TaskKind k, int mb) -> int64_t {
    switch (k) {
    case TaskKind::Forward:
      return s == 0 ? 0 : get(s - 1, k, mb).end + t.latency;
    case TaskKind::Backward:
      return s == P - 1 ? get(s, TaskKind::Forward, mb).end
                        : get(s + 1, k, mb).end + t.latency;
    case TaskKind::Weight:
      return get(s, TaskKind::Backward, mb).end;
    case TaskKind::Recompute:
      break;
    }
    return 0;
  };
  for (int s = 0; s < P; ++s) {
    const std::vector<ScheduledTask> &st = r->stages[s];
    int held = 0, nextF = 0;
    int64_t free = 0;
    for (size_t i = 0; i < st.size(); ++i) {
      const ScheduledTask &x = st[i];
      int64_t now = x.start;
      // What the stage may start: a backward not started, the next forward
      // while it holds fewer than P - s + 1, a W whose B has run. Each
      // becomes startable at max(free, ready).
      int64_t firstB = kMaxTicks, forward = kMaxTicks, firstW = kMaxTicks;
      for (size_t j = i; j < st.size(); ++j) {
        const Task &c = st[j].task;
        int64_t ready = std::max(free, readyAt(s, c.kind, c.microBatch));
        if (c.kind == TaskKind::Backward)
          firstB = std::min(firstB, ready);
        else if (c.kind == TaskKind::Forward && c.microBatch == nextF &&
                 held < P - s + 1)
          forward = ready;
        else if (c.kind == TaskKind::Weight &&
                 get(s, TaskKind::Backward, c.microBatch).start < now)
          firstW = std::min(firstW, ready);
      }
      EXPECT_EQ(now, std::min({firstB, forward, firstW}))
          << "stage " << s << " idle before " << x.task.str();
      if (x.task.kind != TaskKind::Backward)
        EXPECT_GT(firstB, now) << "stage " << s << ": " << x.task.str()
                               << " at " << now << " over a ready backward";
      if (x.task.kind == TaskKind::Weight)
        EXPECT_GT(forward, now) << "stage " << s << ": " << x.task.str()
                                << " at " << now << " over a ready forward";
      EXPECT_GE(now, readyAt(s, x.task.kind, x.task.microBatch));
      if (x.task.kind == TaskKind::Forward) {
        EXPECT_EQ(x.task.microBatch, nextF++) << "stage " << s;
        ++held;
      }
      if (x.task.kind == (r->splits(s, x.task.microBatch) ? TaskKind::Weight
                                                          : TaskKind::Backward))
        --held;
      free = x.end;
    }
  }
}

TEST(ScheduleTest, ZeroBubbleInvariants) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    int P = std::uniform_int_distribution<int>(1, 8)(rng);
    int Nm = std::uniform_int_distribution<int>(1, 16)(rng);
    TimingModel t;
    if (iter >= 50) { // the unit model first
      t.forward = std::uniform_int_distribution<int>(1, 4)(rng);
      t.backward = std::uniform_int_distribution<int>(2, 8)(rng);
      t.weight = std::uniform_int_distribution<int>(1, int(t.backward) - 1)(rng);
      t.latency = std::uniform_int_distribution<int>(0, 3)(rng);
    }
    checkZeroBubble(P, Nm, t,
                    "P=" + std::to_string(P) + " Nm=" + std::to_string(Nm) +
                        " f=" + std::to_string(t.forward) +
                        " b=" + std::to_string(t.backward) +
                        " w=" + std::to_string(t.weight) +
                        " l=" + std::to_string(t.latency));
  }
}

TEST(ScheduleTest, LargeShapesRun) {
  // 64 stages x 4096 micro-batches: every non-last Varuna stage spends
  // F+R+B = 4 ticks per micro-batch, so the makespan is at least 4 x 4096.
  ScheduleResult r = make(ScheduleKind::Varuna, 64, 4096);
  EXPECT_GE(makespan(r), 4 * 4096);
  EXPECT_LT(makespan(r), 4 * 4096 + 4 * 64 * 3);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(ScheduleTest, Errors) {
  for (ScheduleKind kind :
       {ScheduleKind::Varuna, ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    ScheduleResult r = schedule(kind, 0, 4);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.kind(), ErrorKind::InvalidStages);
    EXPECT_EQ(r.error(), "the number of stages must be at least 1, got 0");
    EXPECT_EQ(schedule(kind, -3, 4).kind(), ErrorKind::InvalidStages);
    r = schedule(kind, 4, 0);
    EXPECT_EQ(r.kind(), ErrorKind::InvalidMicroBatches);
    EXPECT_EQ(r.error(),
              "the number of micro-batches must be at least 1, got 0");
    EXPECT_EQ(schedule(kind, 4, -1).kind(), ErrorKind::InvalidMicroBatches);
    // P is checked first.
    EXPECT_EQ(schedule(kind, 0, 0).kind(), ErrorKind::InvalidStages);
    EXPECT_EQ(makespan(r), -1);
    EXPECT_EQ(render(r), "error: " + r.error());
    EXPECT_EQ(gantt(r), "error: " + r.error());
  }
  EXPECT_EQ(schedule(ScheduleKind::Varuna, 1 << 11, 1 << 10).kind(),
            ErrorKind::TooLarge);
  TimingModel t;
  t.forward = 0;
  EXPECT_EQ(schedule(ScheduleKind::Varuna, 2, 2, t).kind(),
            ErrorKind::InvalidTiming);
  t = {};
  t.backward = -1;
  EXPECT_EQ(schedule(ScheduleKind::GPipe, 2, 2, t).error(),
            "backward ticks must be in [1, 2147483648], got -1");
  t = {};
  t.latency = -1;
  EXPECT_EQ(schedule(ScheduleKind::OneFOneB, 2, 2, t).kind(),
            ErrorKind::InvalidTiming);
  t = {};
  t.forward = kMaxTicks + 1;
  EXPECT_EQ(schedule(ScheduleKind::Varuna, 2, 2, t).kind(),
            ErrorKind::InvalidTiming);
  t = {};
  t.weight = 2; // all of the backward
  EXPECT_EQ(schedule(ScheduleKind::ZeroBubble, 2, 2, t).error(),
            "zero-bubble weight ticks must be in [1, backward - 1] = [1, 1], "
            "got 2");
  EXPECT_TRUE(schedule(ScheduleKind::GPipe, 2, 2, t).ok()); // unused there
  t = {};
  t.splitCostPercent = 101;
  EXPECT_EQ(schedule(ScheduleKind::ZeroBubble, 2, 2, t).error(),
            "the split cost must be in [0, 100] percent, got 101");
}

TEST(ScheduleTest, TaskNames) {
  EXPECT_EQ((Task{TaskKind::Forward, 3}).str(), "F3");
  EXPECT_EQ((Task{TaskKind::Recompute, 3}).str(), "R3");
  EXPECT_EQ((Task{TaskKind::Backward, 12}).str(), "B12");
  EXPECT_EQ((Task{TaskKind::Weight, 5}).str(), "W5");
  EXPECT_STREQ(scheduleKindName(ScheduleKind::OneFOneB), "1f1b");
  for (ScheduleKind k : {ScheduleKind::Varuna, ScheduleKind::GPipe,
                         ScheduleKind::OneFOneB, ScheduleKind::ZeroBubble})
    EXPECT_EQ(scheduleKindNamed(scheduleKindName(k)), k);
  EXPECT_EQ(scheduleKindNamed("zigzag"), std::nullopt);
}

} // namespace
