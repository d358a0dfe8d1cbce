//===- PlannerTest.cpp - Properties of the P x D sweep --------------------===//

#include "varuna/Plan/Planner.h"

#include <gtest/gtest.h>

#include <random>

using namespace varuna::plan;

namespace {

/// Every P from 1 to `layers` with an even split (the first stages one
/// more), and links of `latency` seconds and `bytesPerSecond`.
void evenSplitsAndLinks(PlanInput &in, int layers, double latency,
                        double bytesPerSecond) {
  for (int P = 1; P <= layers; ++P) {
    std::vector<int64_t> b{0};
    for (int s = 0; s < P; ++s)
      b.push_back(b.back() + layers / P + (s < layers % P ? 1 : 0));
    in.boundaries[P] = b;
  }
  in.link.latencySeconds = latency;
  in.link.bytesPerSecond = bytesPerSecond;
  in.allreduceBytesPerSecond = bytesPerSecond;
}

/// A 16-layer GPT-like job: seeded per-layer costs (+-20%), every P from 1
/// to 16 with an even split, 1 Gbit/s links.
PlanInput gpt(int devices) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.8, 1.2);
  PlanInput in;
  const int layers = 16;
  for (int l = 0; l < layers; ++l) {
    double j = u(rng);
    in.sections.push_back({2e-3 * j, 4e-3 * j, 4.0 * 12 * 1024 * 1024});
  }
  in.cutBytesPerExample.assign(layers - 1, 4.0 * 512 * 1024);
  evenSplitsAndLinks(in, layers, 100e-6, 1e9 / 8);
  in.devices = devices;
  in.globalBatch = 512;
  in.microBatch = 4;
  return in;
}

} // namespace

// More devices never predict a slower best plan: every (P, D) open to G
// devices stays open to G + 1, or is replaced by the same P with a larger
// D, which here is never slower.
TEST(Planner, MoreDevicesNeverSlower) {
  double previous = 1e30;
  for (int G = 1; G <= 40; ++G) {
    PlanResult r = planSweep(gpt(G));
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_LE(r.rows.front().seconds, previous * (1 + 1e-12)) << "G=" << G;
    previous = r.rows.front().seconds;
  }
}

// Also with ranks sharing cores (--shared-cores 2): each rank more slows
// the others, which the sweep's closed-form estimate does not see, so every
// smaller D is simulated (a new user's LM on 2 cores: the best plan for 3
// and 4 devices was slower than for 2, 1 x 3 and 1 x 4 chosen over 1 x 2).
TEST(Planner, MoreDevicesNeverSlowerOnSharedCores) {
  for (int variant = 0; variant < 12; ++variant) {
  double previous = 1e30;
  for (int G = 1; G <= 8; ++G) {
    PlanInput in = gpt(G);
    in.sharedCores = 2;
    in.globalBatch = variant % 2 ? 32 : 16;
    in.microBatch = 1 << ((variant / 2) % 3);
    in.oversubscribedSlowdown = variant / 6 ? 1.3 : 1.0;
    in.messageCpu = PlanInput::CpuCost{1e-4, 1e-9};
    in.allreduceCpu = PlanInput::CpuCost{2e-4, 1e-9};
    PlanResult r = planSweep(in);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_LE(r.rows.front().seconds, previous * (1 + 1e-12)) << "G=" << G << " variant " << variant;
    previous = r.rows.front().seconds;
  }
  }
}

// Fewer replicas than floor(G / P) can be faster: with tiny sections and a
// huge batch, a ring of 300 all-reduces slower than the compute it saves
// (a new user's 72-layer MLP: 1 x 100 predicted 0.221 s, 1 x 200 0.284 s,
// and the best plan for 300 devices was slower than for 100). The sweep
// now also simulates the D a closed-form estimate prefers.
TEST(Planner, FewerReplicasWhenTheRingCostsMore) {
  auto mlp = [](int devices) {
    PlanInput in;
    for (int l = 0; l < 8; ++l)
      in.sections.push_back({2e-6, 4e-6, 4.0 * 1024 * 1024});
    in.cutBytesPerExample.assign(7, 4.0 * 256);
    evenSplitsAndLinks(in, 8, 50e-6, 10e9 / 8);
    in.devices = devices;
    in.globalBatch = 8192;
    in.microBatch = 4;
    // Measured on a ring of 2: the latency grows with the ring.
    in.allreduceRings.push_back({2, 200e-6, in.link.bytesPerSecond});
    return in;
  };
  PlanResult few = planSweep(mlp(50)), many = planSweep(mlp(300));
  ASSERT_TRUE(few.ok() && many.ok());
  const PlanRow &best = many.rows.front();
  EXPECT_LT(best.stages * best.replicas, 300);
  EXPECT_GT(best.idleDevices, 0);
  EXPECT_LE(best.seconds, few.rows.front().seconds * 1.01);
}

// A measured ring of 4 much slower than the ring of 2 scaled (what a
// loaded machine measures): the closed-form estimate keeps D = 4, and the
// best plan for 4 (and 9) devices was slower than for 3 (and 8), whose D
// still fits. Up to 16 replicas every smaller D is simulated.
TEST(Planner, MoreDevicesNeverSlowerWithASlowMeasuredRing) {
  struct Case {
    double latency, slower;
    int batch;
  };
  for (Case c : {Case{1e-3, 1, 16}, Case{1e-3, 2, 64}, Case{1e-3, 8, 512},
                 Case{1e-2, 8, 512}}) {
    double previous = 1e30;
    for (int G = 1; G <= 12; ++G) {
      PlanInput in = gpt(G);
      for (PlanSection &s : in.sections) { // a small model
        s.paramBytes /= 1000;
        s.forwardSeconds /= 100;
        s.backwardSeconds /= 100;
      }
      in.globalBatch = c.batch;
      in.allreduceRings = {{2, 100e-6, in.link.bytesPerSecond},
                           {4, c.latency, in.link.bytesPerSecond / c.slower}};
      PlanResult r = planSweep(in);
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_LE(r.rows.front().seconds, previous * (1 + 1e-12))
          << "G=" << G << ", ring of 4: " << c.latency << " s, "
          << c.slower << " x slower, batch " << c.batch;
      previous = r.rows.front().seconds;
    }
  }
}

// The sweep's rows do not depend on how many threads simulate them.
TEST(Planner, ThreadsDoNotChangeTheResult) {
  PlanInput in = gpt(24);
  in.link.jitterSeconds = 50e-6;
  in.threads = 1;
  PlanResult one = planSweep(in);
  in.threads = 3;
  PlanResult three = planSweep(in);
  ASSERT_TRUE(one.ok() && three.ok());
  ASSERT_EQ(one.rows.size(), three.rows.size());
  for (size_t i = 0; i < one.rows.size(); ++i) {
    EXPECT_EQ(one.rows[i].stages, three.rows[i].stages);
    EXPECT_EQ(one.rows[i].replicas, three.rows[i].replicas);
    EXPECT_EQ(one.rows[i].seconds, three.rows[i].seconds);
  }
}

// Rows are fastest first, D x P never exceeds the devices, and every P of
// the job up to the device count is either a row or a skip with a reason.
TEST(Planner, RowsAndSkips) {
  PlanInput in = gpt(6);
  in.boundaries.erase(5);
  PlanResult r = planSweep(in);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.rows.size(), 5u); // P = 1, 2, 3, 4, 6
  for (size_t i = 0; i < r.rows.size(); ++i) {
    EXPECT_LE(r.rows[i].stages * r.rows[i].replicas, 6);
    EXPECT_EQ(r.rows[i].idleDevices,
              6 - r.rows[i].stages * r.rows[i].replicas);
    if (i)
      EXPECT_LE(r.rows[i - 1].seconds, r.rows[i].seconds);
  }
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0], "P=5: no partition in the job");
}

// Every schedule swept at once: the rows are each schedule's own sweep,
// merged fastest first, and the best is the best of the four; a memory
// limit between what the recomputing schedules need and what 1F1B and
// zero-bubble need (they keep whole activations) leaves only the former.
TEST(Planner, AllSchedules) {
  const std::vector<ScheduleKind> kinds = {
      ScheduleKind::Varuna, ScheduleKind::GPipe, ScheduleKind::OneFOneB,
      ScheduleKind::ZeroBubble};
  PlanInput in = gpt(8);
  for (PlanSection &s : in.sections)
    s.workingBytesPerExample = 64.0 * 1024 * 1024;
  PlanResult all = planSchedules(in, kinds);
  ASSERT_TRUE(all.ok()) << all.error;
  size_t rows = 0;
  double best = 1e30;
  for (ScheduleKind k : kinds) {
    PlanInput one = in;
    one.schedule = k;
    PlanResult r = planSweep(one);
    ASSERT_TRUE(r.ok()) << r.error;
    best = std::min(best, r.rows.front().seconds);
    // One stage is the same under every schedule: listed once, the first's.
    size_t mine = 0, expected = 0;
    for (const PlanRow &x : all.rows)
      mine += x.schedule == k;
    for (const PlanRow &x : r.rows)
      expected += x.stages > 1 || k == kinds.front();
    EXPECT_EQ(mine, expected) << scheduleKindName(k);
    rows += expected;
  }
  EXPECT_EQ(all.rows.size(), rows);
  size_t oneStage = 0;
  for (const PlanRow &x : all.rows)
    oneStage += x.stages == 1;
  EXPECT_EQ(oneStage, 1u);
  EXPECT_EQ(all.rows.front().seconds, best);
  for (size_t i = 1; i < all.rows.size(); ++i)
    EXPECT_LE(all.rows[i - 1].seconds, all.rows[i].seconds);
  // Pipelined, zero-bubble beats 1F1B at every shape (the same compute,
  // less bubble).
  auto row = [&](const PlanResult &r, ScheduleKind k, int P) {
    for (const PlanRow &x : r.rows)
      if (x.schedule == k && x.stages == P)
        return x;
    ADD_FAILURE() << "no " << scheduleKindName(k) << " row with P=" << P;
    return PlanRow();
  };
  for (int P : {2, 4, 8})
    EXPECT_LT(row(all, ScheduleKind::ZeroBubble, P).seconds,
              row(all, ScheduleKind::OneFOneB, P).seconds)
        << "P=" << P;

  // Just under what zb's P = 2 needs: that row goes (the skip names the
  // schedule), Varuna's P = 2, which holds only stashed inputs, stays.
  PlanInput tight = in;
  tight.memoryLimitBytes =
      row(all, ScheduleKind::ZeroBubble, 2).peakStageBytes * 0.99;
  ASSERT_LT(row(all, ScheduleKind::Varuna, 2).peakStageBytes,
            tight.memoryLimitBytes);
  PlanResult fit = planSchedules(tight, kinds);
  ASSERT_TRUE(fit.ok()) << fit.error;
  for (const PlanRow &x : fit.rows) {
    EXPECT_LE(x.peakStageBytes, tight.memoryLimitBytes);
    EXPECT_FALSE(x.schedule == ScheduleKind::ZeroBubble && x.stages == 2);
  }
  row(fit, ScheduleKind::Varuna, 2);
  bool named = false;
  for (const std::string &s : fit.skipped)
    named |= s.rfind("zb P=2: a stage needs", 0) == 0;
  EXPECT_TRUE(named);
  // One stage, too big under every schedule, is skipped once, without a
  // schedule's name (it was once per schedule).
  PlanInput small = in;
  small.memoryLimitBytes =
      row(all, ScheduleKind::Varuna, 1).peakStageBytes * 0.99;
  PlanResult pipelined = planSchedules(small, kinds);
  ASSERT_TRUE(pipelined.ok()) << pipelined.error;
  size_t oneStageSkips = 0;
  for (const std::string &s : pipelined.skipped)
    oneStageSkips += s.find("P=1: ") != std::string::npos;
  EXPECT_EQ(oneStageSkips, 1u);
  EXPECT_EQ(pipelined.skipped.front().rfind("P=1: a stage needs", 0), 0u)
      << pipelined.skipped.front();
  EXPECT_FALSE(planSchedules(in, {}).ok());
}

// Stage memory, worked by hand: 2 sections of 100 parameter bytes, 10 bytes
// of working memory per example each, 7 bytes per example at the cut;
// m = 2, Adam (2 state copies): parameters 4 x 100 = 400 per stage.
//   Varuna, P = 2, Nm = 8: stage 0 holds no stash (no cut in front), 20 of
//   working memory: 420; stage 1: 1 in flight x 14 + 20 = 434 (whatever
//   stage 0 holds).
//   GPipe: stage 1 stashes all 8: 8 x 14 + 20 = 532.
//   1F1B keeps activations: stage 0 2 x (0 + 20) + 400 = 440, stage 1
//   1 x (14 + 20) + 400 = 434.
TEST(Planner, StageMemory) {
  PlanInput in;
  in.sections = {{0, 0, 100, 10}, {0, 0, 100, 10}};
  in.cutBytesPerExample = {7};
  in.boundaries[2] = {0, 1, 2};
  in.microBatch = 2;
  auto held = [&](ScheduleKind k) {
    return schedule(k, 2, 8)->maxInFlight(0) * 10 +
           schedule(k, 2, 8)->maxInFlight(1);
  };
  // Varuna's stage 0 runs F2 while stage 1's B0 is under way: 3 held.
  EXPECT_EQ(held(ScheduleKind::Varuna), 31);
  EXPECT_EQ(held(ScheduleKind::GPipe), 88);
  EXPECT_EQ(held(ScheduleKind::OneFOneB), 21);
  EXPECT_EQ(stageMemory(in, 2, {3, 1}), (std::vector<double>{420, 434}));
  in.schedule = ScheduleKind::GPipe;
  EXPECT_EQ(stageMemory(in, 2, {8, 8}), (std::vector<double>{420, 532}));
  in.schedule = ScheduleKind::OneFOneB;
  EXPECT_EQ(stageMemory(in, 2, {2, 1}), (std::vector<double>{440, 434}));
  EXPECT_TRUE(stageMemory(in, 3, {1, 1, 1}).empty());
  EXPECT_TRUE(stageMemory(in, 2, {1}).empty());

  // The limit skips P = 1 (800 + 40 bytes) but keeps P = 2.
  in.schedule = ScheduleKind::Varuna;
  in.boundaries[1] = {0, 2};
  in.sections[0].forwardSeconds = in.sections[1].forwardSeconds = 1e-3;
  in.devices = 2;
  in.globalBatch = 16;
  in.memoryLimitBytes = 500;
  PlanResult r = planSweep(in);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].stages, 2);
  EXPECT_EQ(r.rows[0].peakStageBytes, 434);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].rfind("P=1: a stage needs", 0), 0u) << r.skipped[0];
}

// The micro-batch size: the smallest whose next size gains less than 5% per
// example; the largest when every step still gains; input order does not
// matter.
TEST(Planner, ChooseMicroBatch) {
  EXPECT_EQ(chooseMicroBatch({{1, 10.0}, {2, 6.0}, {4, 5.0}, {8, 4.9}}), 4);
  EXPECT_EQ(chooseMicroBatch({{8, 4.9}, {2, 6.0}, {1, 10.0}, {4, 5.0}}), 4);
  EXPECT_EQ(chooseMicroBatch({{1, 10.0}, {2, 9.8}, {4, 5.0}}), 1);
  EXPECT_EQ(chooseMicroBatch({{1, 10.0}, {2, 8.0}, {4, 6.0}}), 4);
  EXPECT_EQ(chooseMicroBatch({{3, 1.0}}), 3);
  EXPECT_EQ(chooseMicroBatch({}), 0);
}

// Measured rings: D replicas use the largest measured ring <= D (the
// smallest when none is), latency scaled by (D-1)/(R-1). One stage of 1 MB
// of parameters, rings of 2 (1 ms, 1 GB/s) and 4 (3 ms, 0.5 GB/s):
//   D = 2: 1 ms + 1 x 1 MB / 1 GB/s = 2 ms;
//   D = 3: ring 2: 2 ms + 4/3 x 1 ms = 3.333 ms;
//   D = 8: ring 4: 3 ms x 7/3 + 7/4 x 1 MB / 0.5 GB/s = 7 + 3.5 = 10.5 ms.
TEST(Planner, MeasuredRings) {
  PlanInput in;
  in.sections = {{1e-3, 2e-3, 1e6}};
  in.boundaries[1] = {0, 1};
  in.globalBatch = 64;
  in.microBatch = 1;
  in.allreduceRings = {{4, 3e-3, 0.5e9}, {2, 1e-3, 1e9}};
  std::string error;
  for (auto [D, want] : {std::pair{2, 2e-3}, std::pair{3, 2e-3 + 4e-3 / 3},
                         std::pair{8, 10.5e-3}}) {
    SimulationConfig c = configFor(in, 1, D, error);
    ASSERT_TRUE(error.empty()) << error;
    EXPECT_NEAR(c.allreduceSeconds[0], want, 1e-12) << "D=" << D;
  }
  EXPECT_EQ(configFor(in, 1, 1, error).allreduceSeconds[0], 0);
}

// Buckets: 1 MB of gradients in buckets of 0.3 MB -> 4 buckets of 0.25 MB,
// each 1 ms + 0.25 MB / 1 GB/s = 1.25 ms on a ring of 2 -> 5 ms in all; one
// replica has neither buckets nor an all-reduce.
TEST(Planner, GradientBuckets) {
  PlanInput in;
  in.sections = {{1e-3, 2e-3, 1e6}};
  in.boundaries[1] = {0, 1};
  in.globalBatch = 64;
  in.microBatch = 1;
  in.allreduceRings = {{2, 1e-3, 1e9}};
  in.bucketBytes = 0.3e6;
  std::string error;
  SimulationConfig c = configFor(in, 1, 2, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(c.allreduceBuckets, std::vector<int>{4});
  EXPECT_NEAR(c.allreduceSeconds[0], 5e-3, 1e-12);
  c = configFor(in, 1, 1, error);
  EXPECT_EQ(c.allreduceBuckets, std::vector<int>{1});
  EXPECT_EQ(c.allreduceSeconds[0], 0);

  // A parameter larger than a bucket (an input embedding) is one bucket of
  // its own, reduced after the backward. On a 100 MB/s ring of 1 us: 0.8 MB
  // of the 1 MB in one bucket (8.001 ms), the other 0.2 MB in one (2.001
  // ms); the step ends later than when four even buckets, the first final
  // a quarter into the last backward, overlapped it (a new user's 102 MB
  // embedding: 1 x 2 predicted 53% fast).
  in.allreduceRings = {{2, 1e-6, 1e8}};
  double even = simulate(configFor(in, 1, 2, error)).minibatchSeconds;
  in.sections[0].largestParamBytes = 0.8e6;
  c = configFor(in, 1, 2, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(c.allreduceBuckets, std::vector<int>{2});
  EXPECT_NEAR(c.allreduceSeconds[0], 10.002e-3, 1e-12);
  ASSERT_EQ(c.lastBucketShare.size(), 1u);
  EXPECT_NEAR(c.lastBucketShare[0], 8.001 / 10.002, 1e-12);
  EXPECT_GT(simulate(c).minibatchSeconds, even + 0.4e-3);
}

// With the parameters known, buckets are packed as the runtime packs them:
// reversed, runs of at most the bucket size, a larger parameter alone, a
// parameter two sections read counted once. Sections {a 0.5, b 0.2} and
// {b, c 0.1, d 0.7} MB in one stage, buckets of 0.3 MB: reversed d c b a ->
// [d 0.7] [c 0.1 + b 0.2] [a 0.5]: 3 buckets (ceil(1.5 / 0.3) = 5 by the
// bytes alone). A tiny bucket size gives one bucket per parameter: the
// planner counted ceil(bytes / size), 1319 where the runtime made 36.
TEST(Planner, GradientBucketsPackedAsTheRuntime) {
  PlanInput in;
  in.sections = {{1e-3, 2e-3, 0.7e6}, {1e-3, 2e-3, 1.0e6}};
  in.sections[0].gradients = {{"a", 0.5e6}, {"b", 0.2e6}};
  in.sections[1].gradients = {{"b", 0.2e6}, {"c", 0.1e6}, {"d", 0.7e6},
                              {"frozen", 0}};
  in.boundaries[1] = {0, 2};
  in.globalBatch = 64;
  in.microBatch = 1;
  in.allreduceRings = {{2, 1e-3, 1e9}};
  in.bucketBytes = 0.3e6;
  std::string error;
  SimulationConfig c = configFor(in, 1, 2, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(c.allreduceBuckets, std::vector<int>{3});
  // 3 x 1 ms + 1.5 MB / 1 GB/s.
  EXPECT_NEAR(c.allreduceSeconds[0], 4.5e-3, 1e-12);
  ASSERT_EQ(c.lastBucketShare.size(), 1u);
  EXPECT_NEAR(c.lastBucketShare[0], 1.5e-3 / 4.5e-3, 1e-12);
  in.bucketBytes = 10;
  EXPECT_EQ(configFor(in, 1, 2, error).allreduceBuckets, std::vector<int>{4});
}

// Measured across hosts: used where Varuna's layout (K consecutive ranks
// per host, rank = r P + s) crosses a host. P = 2, D = 2: with K = 1 every
// boundary and ring crosses; with K = 2 each replica is one host (the
// boundary stays local, the stage rings {0, 2} and {1, 3} cross); with
// K = 4 nothing crosses. Local: 1 GB/s links and rings; remote: 0.1 GB/s.
TEST(Planner, AcrossHosts) {
  PlanInput in;
  in.sections = {{1e-3, 2e-3, 1e6}, {1e-3, 2e-3, 1e6}};
  in.cutBytesPerExample = {1e5};
  in.boundaries[2] = {0, 1, 2};
  in.globalBatch = 64;
  in.microBatch = 1;
  in.link = {0, 1e9, 0};
  in.allreduceRings = {{2, 0, 1e9}};
  in.remoteLink = LinkModel{0, 1e8, 0};
  in.remoteRings = {{2, 0, 1e8}};
  std::string error;
  auto check = [&](int K, double linkBw, double ringSeconds) {
    in.devicesPerHost = K;
    SimulationConfig c = configFor(in, 2, 2, error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_EQ(c.links.size(), 1u) << "K=" << K;
    EXPECT_EQ(c.links[0].bytesPerSecond, linkBw) << "K=" << K;
    EXPECT_NEAR(c.allreduceSeconds[0], ringSeconds, 1e-12) << "K=" << K;
  };
  // 1 MB over a ring of 2: 1 x 1 MB / bandwidth (x2 for K = 2's two
  // concurrent rings on a host without a concurrency measurement).
  check(1, 1e8, 1e-2);
  check(2, 1e9, 2e-2);
  check(4, 1e9, 2e-3);
  // Without remote measurements nothing changes.
  in.remoteLink.reset();
  in.remoteRings.clear();
  in.devicesPerHost = 1;
  EXPECT_TRUE(configFor(in, 2, 2, error).links.empty());
}

// With only a ring larger than D measured, D uses it (latency scaled down).
TEST(Planner, MeasuredRingLargerThanD) {
  PlanInput in;
  in.sections = {{1e-3, 2e-3, 1e6}};
  in.boundaries[1] = {0, 1};
  in.globalBatch = 64;
  in.microBatch = 1;
  in.allreduceRings = {{4, 3e-3, 0.5e9}};
  std::string error;
  // D = 2: 3 ms x 1/3 + 1 x 1 MB / 0.5 GB/s = 1 + 2 = 3 ms.
  EXPECT_NEAR(configFor(in, 1, 2, error).allreduceSeconds[0], 3e-3, 1e-12);
}

// Devices per host: min(K, P) stages of a replica all-reduce at once on a
// host. One 2-stage pipeline, 1 MB per stage, 1 GB/s, D = 2 (factor 1):
// alone 1 ms; K = 2 with no measurement: x 2 = 2 ms; measured 3 rings at
// once 1.5x slower: for 2 rings 1 + 0.5 x 1/2 = 1.25 -> 1.25 ms; K = 8 is
// capped at P = 2 stages.
TEST(Planner, DevicesPerHost) {
  PlanInput in;
  in.sections = {{1e-3, 2e-3, 1e6}, {1e-3, 2e-3, 1e6}};
  in.boundaries[2] = {0, 1, 2};
  in.globalBatch = 64;
  in.microBatch = 1;
  in.allreduceBytesPerSecond = 1e9;
  std::string error;
  auto seconds = [&] { return configFor(in, 2, 2, error).allreduceSeconds[0]; };
  EXPECT_NEAR(seconds(), 1e-3, 1e-12);
  in.devicesPerHost = 2;
  EXPECT_NEAR(seconds(), 2e-3, 1e-12);
  in.concurrent = {3, 1.5};
  EXPECT_NEAR(seconds(), 1.25e-3, 1e-12);
  in.devicesPerHost = 8;
  EXPECT_NEAR(seconds(), 1.25e-3, 1e-12);
}

// The step's end. With a measured ring of 2 (1 ms latency, 1e9 B/s), the
// world sync is an all-reduce of 64 bytes over all P D ranks: (P D - 1) ms
// + 2 (P D - 1) / (P D) x 64 ns. A tie is all-reduced over the stages that
// hold its sections when the partition splits them (1e6 bytes over 2
// stages: 1 ms + 1 ms; over 3: 2 ms + 4/3 ms), not at all inside one
// stage; the norm's sync follows the manifest.
TEST(Planner, StepEndSyncAndTies) {
  PlanInput in;
  for (int k = 0; k < 4; ++k)
    in.sections.push_back({1e-3, 2e-3, 1e6});
  in.boundaries[1] = {0, 4};
  in.boundaries[2] = {0, 2, 4};
  in.boundaries[4] = {0, 1, 2, 3, 4};
  in.globalBatch = 8;
  in.microBatch = 1;
  in.allreduceRings = {{2, 1e-3, 1e9}};
  in.ties = {{{0, 3}, 1e6}, {{0, 1, 3}, 1e6}};
  in.normSync = true;
  std::string error;
  SimulationConfig one = configFor(in, 1, 1, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(one.syncSeconds, 0);
  EXPECT_TRUE(one.ties.empty());
  double sync4 = 3e-3 + 2.0 * 3 / 4 * 64 / 1e9;
  SimulationConfig two = configFor(in, 2, 2, error);
  EXPECT_NEAR(two.syncSeconds, sync4, 1e-12);
  EXPECT_TRUE(two.normSync);
  ASSERT_EQ(two.ties.size(), 2u);
  EXPECT_EQ(two.ties[0].stages, (std::vector<int>{0, 1}));
  EXPECT_NEAR(two.ties[0].seconds, 2e-3, 1e-12);
  SimulationConfig four = configFor(in, 4, 1, error);
  EXPECT_NEAR(four.syncSeconds, sync4, 1e-12);
  ASSERT_EQ(four.ties.size(), 2u);
  EXPECT_EQ(four.ties[0].stages, (std::vector<int>{0, 3}));
  EXPECT_EQ(four.ties[1].stages, (std::vector<int>{0, 1, 3}));
  EXPECT_NEAR(four.ties[1].seconds, 2e-3 + 4e-3 / 3, 1e-12);
  // The simulated step pays them one after another (one replica: no
  // data-parallel all-reduce): sync, tie 0 on stages 0 and 3, tie 1 after
  // it (it shares stages with it), the norm's sync.
  double with = simulate(four).minibatchSeconds;
  four.ties.clear();
  four.syncSeconds = 0;
  four.normSync = false;
  EXPECT_NEAR(with - simulate(four).minibatchSeconds,
              2 * sync4 + 2e-3 + 2e-3 + 4e-3 / 3, 1e-12);
}

// Communication's CPU on shared cores: a message end costs 0.1 ms + 1 ns
// per byte (the cut's 1e6 bytes per example x m = 2: 2.1 ms), a rank of a
// ring of D = 2 all-reducing a stage's 2e6 bytes 0.2 ms + 2 ms; with D = 4
// the latency thrice and the bytes 1.5 times. Without --shared-cores, or
// without the measurement, none.
TEST(Planner, CommunicationCpuOnSharedCores) {
  PlanInput in;
  for (int k = 0; k < 4; ++k)
    in.sections.push_back({1e-3, 2e-3, 1e6});
  in.cutBytesPerExample.assign(3, 1e6);
  in.boundaries[2] = {0, 2, 4};
  in.globalBatch = 16;
  in.microBatch = 2;
  in.messageCpu = PlanInput::CpuCost{1e-4, 1e-9};
  in.allreduceCpu = PlanInput::CpuCost{2e-4, 1e-9};
  std::string error;
  SimulationConfig off = configFor(in, 2, 2, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(off.messageCpuSeconds.empty());
  EXPECT_TRUE(off.allreduceCpuSeconds.empty());
  in.sharedCores = 2;
  SimulationConfig two = configFor(in, 2, 2, error);
  ASSERT_EQ(two.messageCpuSeconds.size(), 1u);
  EXPECT_NEAR(two.messageCpuSeconds[0], 2.1e-3, 1e-12);
  ASSERT_EQ(two.allreduceCpuSeconds.size(), 2u);
  EXPECT_NEAR(two.allreduceCpuSeconds[1], 2.2e-3, 1e-12);
  SimulationConfig four = configFor(in, 2, 4, error);
  EXPECT_NEAR(four.allreduceCpuSeconds[0], 6e-4 + 3e-3, 1e-12);
  SimulationConfig one = configFor(in, 2, 1, error);
  EXPECT_EQ(one.allreduceCpuSeconds[0], 0);
  // It costs time: the same configuration simulated without it is faster.
  double with = simulate(two).minibatchSeconds;
  two.messageCpuSeconds.clear();
  two.allreduceCpuSeconds.clear();
  EXPECT_GT(with, simulate(two).minibatchSeconds);
}

// Zero-bubble's order depends on what a split backward costs: measured
// (the sections' B and W over their whole backward), the plan takes the
// most of any stage that splits, rounded to a percent, and carries it in
// its rows (varuna-plan writes it into the plan for varuna-run); without
// the measurement, the default.
TEST(Planner, ZeroBubbleSplitCostMeasured) {
  PlanInput in = gpt(4);
  in.schedule = ScheduleKind::ZeroBubble;
  std::string error;
  SimulationConfig unknown = configFor(in, 2, 1, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(unknown.scheduleTiming.splitCostPercent,
            TimingModel().splitCostPercent);
  for (size_t k = 0; k < in.sections.size(); ++k) {
    PlanSection &s = in.sections[k];
    // Stage 1 (sections 8..15) pays 30% more for the split, stage 0 50%
    // (stage 0 never splits: it is not counted).
    double over = k < 8 ? 1.5 : 1.3;
    s.inputSeconds = 0.5 * s.backwardSeconds * over;
    s.weightSeconds = 0.5 * s.backwardSeconds * over;
  }
  SimulationConfig measured = configFor(in, 2, 1, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(measured.scheduleTiming.splitCostPercent, 30);
  PlanResult r = planSweep(in);
  ASSERT_TRUE(r.ok()) << r.error;
  for (const PlanRow &row : r.rows)
    if (row.stages > 1)
      EXPECT_GE(row.splitCostPercent, 30) << row.stages;
  // A split that is cheaper than the whole backward costs nothing (0, not
  // negative); other schedules keep the default.
  for (PlanSection &s : in.sections)
    s.inputSeconds = s.weightSeconds = 0.4 * s.backwardSeconds;
  EXPECT_EQ(configFor(in, 2, 1, error).scheduleTiming.splitCostPercent, 0);
  in.schedule = ScheduleKind::OneFOneB;
  EXPECT_EQ(configFor(in, 2, 1, error).scheduleTiming.splitCostPercent,
            TimingModel().splitCostPercent);
}
