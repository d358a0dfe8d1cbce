//===- partition_bench.cpp - Time the balanced partitioner ----------------===//
//
// Measures varuna::plan::partitionAll(sections, maxP): the optimal partition
// for every P in [1, maxP], i.e. what the planner's sweep over pipeline depths
// costs. Wall-clock time of the whole call (table + per-P tie-break + result
// vectors), median of several runs, on fixed seeded GPT-like inputs: an
// embedding section, K-2 transformer-block sections with +-10% jitter, and a
// head section. Usage: partition-bench [runs]
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Partition.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

using namespace varuna::plan;

namespace {

std::vector<Section> gptLike(unsigned k, bool withSends, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  std::vector<Section> secs(k);
  for (unsigned i = 0; i < k; ++i) {
    Section &s = secs[i];
    bool edge = i == 0 || i + 1 == k;
    s.computeSeconds = (edge ? 0.6 : 1.0) * jitter(rng) * 1e-2;
    s.paramBytes = int64_t((edge ? 2.5 : 1.0) * 1.2e9 * jitter(rng));
    s.activationBytes = int64_t(3.75e6 * 8); // 8 examples per micro-batch
    s.sendSecondsAfter = withSends ? 2e-3 * jitter(rng) : 0;
  }
  return secs;
}

struct Case {
  const char *name;
  unsigned k, maxP;
  bool withSends, withLimit;
};

double medianMs(const Case &c, int runs, unsigned &feasible,
                double &bottleneckAtMax) {
  std::vector<Section> secs = gptLike(c.k, c.withSends, 42);
  PartitionOptions opts;
  if (c.withLimit) {
    // 16 GB device: forces more than a few stages.
    opts.memoryLimitBytes = int64_t(16e9);
    opts.maxInFlight = 64;
  }
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<PartitionResult> all = partitionAll(secs, c.maxP, opts);
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    feasible = 0;
    for (const PartitionResult &p : all)
      feasible += p.ok();
    bottleneckAtMax = all.back().ok() ? all.back()->bottleneck : -1;
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
  const Case cases[] = {
      {"compute only", 100, 100, false, false},
      {"compute only", 1000, 300, false, false},
      {"sends + 16 GB limit", 100, 100, true, true},
      {"sends + 16 GB limit", 1000, 300, true, true},
  };
  std::printf("partitionAll(sections, maxP): optimal partition for every P in "
              "[1, maxP];\nwall time of the whole call, median of %d runs\n\n",
              runs);
  std::printf("%-22s %6s %6s %12s %10s %16s\n", "inputs", "K", "maxP",
              "median ms", "feasible P", "bottleneck@maxP");
  for (const Case &c : cases) {
    unsigned feasible = 0;
    double bottleneck = 0;
    double ms = medianMs(c, runs, feasible, bottleneck);
    std::printf("%-22s %6u %6u %12.3f %10u %16.5g\n", c.name, c.k, c.maxP, ms,
                feasible, bottleneck);
  }
  return 0;
}
