//===- PartitionTest.cpp - Balanced partitioner vs brute force ------------===//

#include "varuna/Plan/Partition.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

using namespace varuna::plan;
using ErrorKind = PartitionResult::ErrorKind;

namespace {

/// An independent model of the contract in Partition.h: direct sums, no
/// prefix arrays, no pruning.
struct Reference {
  const std::vector<Section> &secs;
  const PartitionOptions &opts;

  int64_t inFlight(unsigned s, unsigned p) const {
    if (opts.inFlightPolicy == InFlightPolicy::All)
      return *opts.maxInFlight;
    int64_t n = p - s;
    return opts.maxInFlight ? std::min(n, *opts.maxInFlight) : n;
  }
  double cost(unsigned a, unsigned b) const {
    double c = 0;
    for (unsigned i = a; i < b; ++i)
      c += secs[i].computeSeconds;
    if (a > 0)
      c += secs[a - 1].sendSecondsAfter;
    if (b < secs.size())
      c += secs[b - 1].sendSecondsAfter;
    return c;
  }
  int64_t memory(unsigned a, unsigned b, unsigned s, unsigned p) const {
    int64_t m = 0;
    for (unsigned i = a; i < b; ++i)
      m += secs[i].paramBytes;
    return m + inFlight(s, p) * secs[a].activationBytes;
  }
  bool fits(int64_t m) const {
    return !opts.memoryLimitBytes || m <= *opts.memoryLimitBytes;
  }
};

struct BruteBest {
  bool feasible = false;
  std::vector<unsigned> bounds;
  double bottleneck = 0, sumSquares = 0;
  int64_t minPeakMemory = std::numeric_limits<int64_t>::max();
};

/// Enumerates every composition of K into P non-empty parts, in
/// lexicographic order of the boundary vector.
BruteBest bruteForce(const Reference &ref, unsigned p) {
  unsigned k = ref.secs.size();
  BruteBest best;
  std::vector<unsigned> bounds(p + 1);
  bounds[0] = 0;
  bounds[p] = k;
  auto visit = [&]() {
    double maxCost = 0, sumSq = 0;
    int64_t peak = 0;
    bool fits = true;
    for (unsigned s = 0; s < p; ++s) {
      double c = ref.cost(bounds[s], bounds[s + 1]);
      int64_t m = ref.memory(bounds[s], bounds[s + 1], s, p);
      maxCost = std::max(maxCost, c);
      sumSq += c * c;
      peak = std::max(peak, m);
      fits = fits && ref.fits(m);
    }
    best.minPeakMemory = std::min(best.minPeakMemory, peak);
    if (!fits)
      return;
    // Strict comparisons keep the lexicographically first on ties.
    if (!best.feasible || maxCost < best.bottleneck ||
        (maxCost == best.bottleneck && sumSq < best.sumSquares)) {
      best.feasible = true;
      best.bounds = bounds;
      best.bottleneck = maxCost;
      best.sumSquares = sumSq;
    }
  };
  // Recursive enumeration of bounds[1..p-1].
  std::function<void(unsigned)> rec = [&](unsigned s) {
    if (s == p) {
      visit();
      return;
    }
    for (unsigned b = bounds[s - 1] + 1; b + (p - s) <= k; ++b) {
      bounds[s] = b;
      rec(s + 1);
    }
  };
  rec(1);
  return best;
}

/// Every structural promise of the contract.
void expectValid(const Partition &part, const Reference &ref, unsigned p) {
  unsigned k = ref.secs.size();
  ASSERT_EQ(part.boundaries.size(), p + 1);
  ASSERT_EQ(part.numStages(), p);
  EXPECT_EQ(part.boundaries.front(), 0u);
  EXPECT_EQ(part.boundaries.back(), k);
  double maxCost = 0;
  for (unsigned s = 0; s < p; ++s) {
    unsigned a = part.boundaries[s], b = part.boundaries[s + 1];
    ASSERT_LT(a, b) << "stage " << s << " is empty";
    EXPECT_EQ(part.stageCost[s], ref.cost(a, b));
    EXPECT_EQ(part.stageMemoryBytes[s], ref.memory(a, b, s, p));
    EXPECT_EQ(part.stageInFlight[s], ref.inFlight(s, p));
    EXPECT_TRUE(ref.fits(part.stageMemoryBytes[s])) << "stage " << s;
    maxCost = std::max(maxCost, part.stageCost[s]);
  }
  EXPECT_EQ(part.bottleneck, maxCost);
  EXPECT_EQ(part.stageCost[part.bottleneckStage], maxCost);
}

struct Instance {
  std::vector<Section> sections;
  PartitionOptions options;
};

/// Integer-valued costs (exact in double), sometimes zero, sometimes with
/// send costs, memory limits and either in-flight policy.
Instance randomInstance(std::mt19937 &rng, unsigned k) {
  auto uni = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  Instance in;
  bool sends = uni(0, 2) == 0, zeros = uni(0, 3) == 0;
  int64_t paramTotal = 0, actMax = 0;
  for (unsigned i = 0; i < k; ++i) {
    Section s;
    s.computeSeconds = zeros && uni(0, 2) == 0 ? 0 : uni(1, 20);
    s.paramBytes = uni(0, 100);
    s.activationBytes = uni(0, 40);
    s.sendSecondsAfter = sends ? uni(0, 6) : 0;
    paramTotal += s.paramBytes;
    actMax = std::max<int64_t>(actMax, s.activationBytes);
    in.sections.push_back(s);
  }
  switch (uni(0, 3)) {
  case 0:
    break; // no limit
  case 1:  // tight: often infeasible for some P
    in.options.memoryLimitBytes = uni(40, 120);
    break;
  default: // moderate
    in.options.memoryLimitBytes = paramTotal / 3 + actMax * 2 + uni(1, 60);
    break;
  }
  if (uni(0, 3) == 0) {
    in.options.inFlightPolicy = InFlightPolicy::All;
    in.options.maxInFlight = uni(1, 6);
  } else if (uni(0, 2) == 0) {
    in.options.maxInFlight = uni(1, 4);
  }
  return in;
}

TEST(Partition, MatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(20240607);
  unsigned checked = 0, infeasible = 0;
  for (int iter = 0; iter < 600; ++iter) {
    unsigned k = 1 + iter % 12;
    Instance in = randomInstance(rng, k);
    Reference ref{in.sections, in.options};
    std::vector<PartitionResult> all =
        partitionAll(in.sections, k + 1, in.options);
    ASSERT_EQ(all.size(), k + 1);
    EXPECT_EQ(all[k].kind(), ErrorKind::TooManyStages);
    for (unsigned p = 1; p <= k; ++p) {
      SCOPED_TRACE("iter " + std::to_string(iter) + " K=" + std::to_string(k) +
                   " P=" + std::to_string(p));
      BruteBest want = bruteForce(ref, p);
      PartitionResult one = partition(in.sections, p, in.options);
      const PartitionResult &fromAll = all[p - 1];
      if (!want.feasible) {
        ++infeasible;
        EXPECT_EQ(one.kind(), ErrorKind::MemoryInfeasible) << one.error();
        EXPECT_EQ(fromAll.error(), one.error());
        // The diagnosis reports the exact smallest achievable peak.
        EXPECT_NE(one.error().find("still needs " +
                                   std::to_string(want.minPeakMemory) +
                                   " bytes"),
                  std::string::npos)
            << one.error();
        continue;
      }
      ++checked;
      ASSERT_TRUE(one.ok()) << one.error();
      ASSERT_TRUE(fromAll.ok()) << fromAll.error();
      expectValid(*one, ref, p);
      EXPECT_EQ(one->bottleneck, want.bottleneck);
      EXPECT_EQ(one->sumSquares, want.sumSquares);
      EXPECT_EQ(one->boundaries, want.bounds);
      EXPECT_EQ(fromAll->boundaries, one->boundaries);
    }
  }
  // The generator must exercise both outcomes.
  EXPECT_GT(checked, 2000u);
  EXPECT_GT(infeasible, 100u);
}

/// Textbook O(P K^2) DP without pruning, for sizes brute force cannot reach
/// (integer-valued inputs, so its prefix sums are exact).
double referenceBottleneck(const Reference &ref, unsigned p) {
  unsigned k = ref.secs.size();
  std::vector<double> work(k + 1, 0);
  std::vector<int64_t> bytes(k + 1, 0);
  for (unsigned i = 0; i < k; ++i) {
    work[i + 1] = work[i] + ref.secs[i].computeSeconds;
    bytes[i + 1] = bytes[i] + ref.secs[i].paramBytes;
  }
  auto cost = [&](unsigned a, unsigned b) {
    double c = work[b] - work[a];
    return c + (a > 0 ? ref.secs[a - 1].sendSecondsAfter : 0) +
           (b < k ? ref.secs[b - 1].sendSecondsAfter : 0);
  };
  const double inf = std::numeric_limits<double>::infinity();
  // f[s][b]: best max over stages 0..s-1 covering [0, b).
  std::vector<std::vector<double>> f(p + 1, std::vector<double>(k + 1, inf));
  f[0][0] = 0;
  for (unsigned s = 1; s <= p; ++s)
    for (unsigned b = s; b <= k; ++b)
      for (unsigned a = s - 1; a < b; ++a) {
        int64_t mem = bytes[b] - bytes[a] +
                      ref.inFlight(s - 1, p) * ref.secs[a].activationBytes;
        if (f[s - 1][a] < inf && ref.fits(mem))
          f[s][b] = std::min(f[s][b], std::max(f[s - 1][a], cost(a, b)));
      }
  return f[p][k];
}

TEST(Partition, MatchesQuadraticDPOnLargerInstances) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 24; ++iter) {
    unsigned k = 13 + iter * 2;
    Instance in = randomInstance(rng, k);
    if (in.options.memoryLimitBytes)
      *in.options.memoryLimitBytes *= 3;
    Reference ref{in.sections, in.options};
    std::vector<PartitionResult> all = partitionAll(in.sections, k, in.options);
    for (unsigned p = 1; p <= k; ++p) {
      double want = referenceBottleneck(ref, p);
      const PartitionResult &got = all[p - 1];
      if (want == std::numeric_limits<double>::infinity()) {
        EXPECT_EQ(got.kind(), ErrorKind::MemoryInfeasible);
        continue;
      }
      ASSERT_TRUE(got.ok()) << "K=" << k << " P=" << p << ": " << got.error();
      expectValid(*got, ref, p);
      EXPECT_EQ(got->bottleneck, want) << "K=" << k << " P=" << p;
    }
  }
}

TEST(Partition, BottleneckNonIncreasingInP) {
  // Holds without memory limits and send costs (see Partition.h).
  std::mt19937 rng(99);
  for (int iter = 0; iter < 30; ++iter) {
    unsigned k = 10 + iter * 5;
    std::vector<Section> secs(k);
    for (Section &s : secs)
      s.computeSeconds = std::uniform_real_distribution<double>(0, 5)(rng);
    std::vector<PartitionResult> all = partitionAll(secs, k);
    for (unsigned p = 2; p <= k; ++p) {
      ASSERT_TRUE(all[p - 1].ok());
      EXPECT_LE(all[p - 1]->bottleneck, all[p - 2]->bottleneck)
          << "K=" << k << " P=" << p;
    }
  }
}

std::vector<Section> withCosts(std::vector<double> costs) {
  std::vector<Section> secs;
  for (double c : costs)
    secs.push_back(Section{c, 0, 0, 0});
  return secs;
}

TEST(Partition, UniformCosts) {
  auto secs = withCosts(std::vector<double>(12, 1.0));
  PartitionResult r = partition(secs, 4);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->boundaries, (std::vector<unsigned>{0, 3, 6, 9, 12}));
  EXPECT_EQ(r->bottleneck, 3.0);
  // 12 over 5 stages: bottleneck 3; 3,3,2,2,2 (sum of squares 30) beats
  // 3,3,3,2,1 (32); the smallest boundaries put the short stages first.
  r = partition(secs, 5);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->bottleneck, 3.0);
  EXPECT_EQ(r->boundaries, (std::vector<unsigned>{0, 2, 4, 6, 9, 12}));
  EXPECT_EQ(r->sumSquares, 30.0);
  EXPECT_EQ(r->str(), "[0, 2) [2, 4) [4, 6) [6, 9) [9, 12); bottleneck 3 on "
                      "stage 3");
}

TEST(Partition, OneHugeSection) {
  auto secs = withCosts({1, 1, 100, 1, 1});
  PartitionResult r = partition(secs, 3);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->bottleneck, 100.0);
  EXPECT_EQ(r->bottleneckStage, 1u);
  EXPECT_EQ(r->boundaries, (std::vector<unsigned>{0, 2, 3, 5}));
  // More stages cannot split a section.
  r = partition(secs, 4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bottleneck, 100.0);
}

TEST(Partition, SingleStageAndOneSectionPerStage) {
  auto secs = withCosts({3, 1, 4, 1, 5, 9, 2, 6, 5});
  PartitionResult one = partition(secs, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->boundaries, (std::vector<unsigned>{0, 9}));
  EXPECT_EQ(one->bottleneck, 36.0);
  PartitionResult each = partition(secs, 9);
  ASSERT_TRUE(each.ok());
  EXPECT_EQ(each->boundaries,
            (std::vector<unsigned>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(each->bottleneck, 9.0);
  EXPECT_EQ(each->bottleneckStage, 5u);
}

TEST(Partition, StageCountErrors) {
  auto secs = withCosts(std::vector<double>(9, 1.0));
  PartitionResult r = partition(secs, 12);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.kind(), ErrorKind::TooManyStages);
  EXPECT_EQ(r.error(),
            "P = 12 is larger than the 9 sections; the maximum is 9");
  r = partition(secs, 0);
  EXPECT_EQ(r.kind(), ErrorKind::TooFewStages);
  EXPECT_EQ(r.error(), "P = 0 is invalid: a pipeline needs at least 1 stage");
  EXPECT_EQ(partition({}, 1).error(), "there are no sections to partition");
  EXPECT_TRUE(partitionAll(secs, 0).empty());
}

TEST(Partition, InvalidInputs) {
  auto secs = withCosts({1, -2, 3});
  PartitionResult r = partition(secs, 2);
  EXPECT_EQ(r.kind(), ErrorKind::InvalidInput);
  EXPECT_EQ(r.error(), "section 1 has a negative compute cost (-2)");
  secs = withCosts({1, 2, 3});
  secs[2].paramBytes = -1;
  EXPECT_EQ(partition(secs, 2).error(),
            "section 2 has negative paramBytes (-1)");
  secs[2].paramBytes = 0;
  secs[0].sendSecondsAfter = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(partition(secs, 2).error(),
            "section 0 has a non-finite send cost (nan)");
  secs[0].sendSecondsAfter = 0;
  secs[2].sendSecondsAfter = -1; // after the last section: ignored
  EXPECT_TRUE(partition(secs, 2).ok());
  PartitionOptions opts;
  opts.memoryLimitBytes = 0;
  EXPECT_EQ(partition(secs, 2, opts).error(),
            "the memory limit must be positive (got 0 bytes)");
  opts = {};
  opts.inFlightPolicy = InFlightPolicy::All;
  EXPECT_EQ(partition(secs, 2, opts).kind(), ErrorKind::InvalidInput);
  // Every P of partitionAll reports the input error.
  std::vector<PartitionResult> all = partitionAll(withCosts({1, -1}), 3);
  ASSERT_EQ(all.size(), 3u);
  for (const PartitionResult &e : all)
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
}

TEST(Partition, MemoryLimitInfeasible) {
  std::vector<Section> secs = withCosts({1, 1, 1});
  secs[0].paramBytes = 10;
  secs[1].paramBytes = 50;
  secs[2].paramBytes = 10;
  PartitionOptions opts;
  opts.memoryLimitBytes = 40;
  PartitionResult r = partition(secs, 3, opts);
  EXPECT_EQ(r.kind(), ErrorKind::MemoryInfeasible);
  EXPECT_EQ(r.error(),
            "no partition of 3 sections into 3 stages fits the memory limit "
            "of 40 bytes: the partition with the smallest peak still needs 50 "
            "bytes on stage 1 (section 1 alone: 50 bytes of parameter state + "
            "2 in-flight x 0 bytes of stashed input), 10 bytes over the limit");
}

TEST(Partition, MemoryShapesThePartition) {
  // Compute alone cuts at [0, 2) [2, 4); with a limit of 80 bytes the
  // parameters of sections 0-1 (90 bytes) no longer fit one device.
  std::vector<Section> secs = withCosts({1, 1, 1, 1});
  int64_t params[] = {60, 30, 10, 10};
  for (unsigned i = 0; i < 4; ++i)
    secs[i].paramBytes = params[i];
  PartitionOptions opts;
  opts.memoryLimitBytes = 90;
  PartitionResult r = partition(secs, 2, opts);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->boundaries, (std::vector<unsigned>{0, 2, 4}));
  opts.memoryLimitBytes = 80;
  r = partition(secs, 2, opts);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->boundaries, (std::vector<unsigned>{0, 1, 4}));
  EXPECT_EQ(r->bottleneck, 3.0);
}

TEST(Partition, DeeperPipelinesStashMore) {
  // Stage 0 of P stashes P inputs of section 0 (Varuna's schedule): P = 2
  // fits, P = 3 does not, even though it has smaller stages.
  std::vector<Section> secs = withCosts({1, 1, 1});
  secs[0].activationBytes = 100;
  PartitionOptions opts;
  opts.memoryLimitBytes = 250;
  std::vector<PartitionResult> all = partitionAll(secs, 3, opts);
  EXPECT_TRUE(all[0].ok());
  ASSERT_TRUE(all[1].ok());
  EXPECT_EQ(all[1]->stageInFlight, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(all[1]->stageMemoryBytes[0], 200);
  EXPECT_EQ(all[2].kind(), ErrorKind::MemoryInfeasible);
  EXPECT_NE(all[2].error().find("3 in-flight x 100 bytes of stashed input), "
                                "50 bytes over the limit"),
            std::string::npos)
      << all[2].error();
  // Capping the in-flight count at the micro-batch count makes it fit.
  opts.maxInFlight = 2;
  EXPECT_TRUE(partition(secs, 3, opts).ok());
}

TEST(Partition, SendCostsOnBothSidesOfACut) {
  std::vector<Section> secs = withCosts({1, 1, 1, 1});
  secs[0].sendSecondsAfter = 10;
  secs[1].sendSecondsAfter = 1;
  secs[2].sendSecondsAfter = 10;
  PartitionResult r = partition(secs, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->boundaries, (std::vector<unsigned>{0, 2, 4}));
  EXPECT_EQ(r->stageCost, (std::vector<double>{3, 3}));
  // A third stage must cut an expensive boundary: deeper is worse here.
  r = partition(secs, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bottleneck, 12.0);
}

} // namespace
