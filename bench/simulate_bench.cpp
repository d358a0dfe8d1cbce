//===- simulate_bench.cpp - Time the pipeline simulator and planner -------===//
//
// The numbers: simulating one configuration of 128 devices, P = 36,
// global batch 8192 (D = 3, micro-batch 4: 683 micro-batches for the most
// loaded replica)
// under 10 ms (the paper's simulator: 0.4-0.7 s per configuration); the
// whole sweep over P for G = 300 devices (planSweep, exactly what
// `varuna-plan --devices 300` runs: P = 1..72 of a 72-layer GPT, D =
// floor(300 / P), micro-batch 4) under 200 ms.
//
// The model: 72 GPT layers of hidden size 3072 (the paper's 8.3B shape),
// 1 ms forward and 2 ms backward per example and layer, seeded +-10% per
// layer; 4 x 1024 x 3072 bytes of activation per example at every cut; fp32
// gradients all-reduced over the 10 Gbit/s links of 50 us latency; Varuna's
// schedule with its run-time deviation. Prints the median of several runs.
// Usage: simulate-bench [runs]
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Planner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

using namespace varuna::plan;
using Clock = std::chrono::steady_clock;

static PlanInput gptInput(int layers, int devices) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  PlanInput in;
  const double hidden = 3072, seq = 1024;
  for (int l = 0; l < layers; ++l) {
    double j = jitter(rng);
    in.sections.push_back({1e-3 * j, 2e-3 * j, 4.0 * 12 * hidden * hidden});
  }
  in.cutBytesPerExample.assign(layers - 1, 4.0 * seq * hidden);
  for (int P = 1; P <= layers; ++P) { // even split: the first stages get one more
    std::vector<int64_t> b{0};
    for (int s = 0; s < P; ++s)
      b.push_back(b.back() + layers / P + (s < layers % P ? 1 : 0));
    in.boundaries[P] = b;
  }
  in.devices = devices;
  in.globalBatch = 8192;
  in.microBatch = 4;
  in.link.latencySeconds = 50e-6;
  in.link.bytesPerSecond = 10e9 / 8;
  in.allreduceBytesPerSecond = in.link.bytesPerSecond;
  in.allreduceLatencySeconds = 50e-6;
  return in;
}

template <typename F> static double medianMs(int runs, F &&f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  int runs = 5;
  if (argc > 2 || (argc == 2 && (std::sscanf(argv[1], "%d", &runs) != 1 ||
                                 runs < 1 || runs > 1000))) {
    std::fprintf(stderr, "usage: simulate-bench [runs]   (runs: 1 to 1000, "
                         "default 5; prints the median time of each)\n");
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 1;
  }
  std::string error;
  // 2048 micro-batches of 4 over 3 replicas: 683 for the most loaded.
  SimulationConfig one = configFor(gptInput(72, 128), 36, 3, error);
  if (!error.empty()) {
    std::fprintf(stderr, "simulate-bench: %s\n", error.c_str());
    return 1;
  }
  double estimate = 0;
  double ms = medianMs(runs, [&] { estimate = simulate(one).minibatchSeconds; });
  std::printf("one configuration: 128 devices, P=36 x D=3, %d micro-batches of "
              "4: %.2f ms (target < 10 ms; the paper: 400-700 ms), estimate "
              "%.2f s\n",
              one.numMicroBatches, ms, estimate);
  PlanInput sweep = gptInput(72, 300);
  PlanResult plan;
  ms = medianMs(runs, [&] { plan = planSweep(sweep); });
  if (!plan.ok()) {
    std::fprintf(stderr, "simulate-bench: %s\n", plan.error.c_str());
    return 1;
  }
  const PlanRow &best = plan.rows.front();
  std::printf("sweep over P = 1..72 for 300 devices (%zu configurations, %u "
              "threads): %.1f ms (target < 200 ms); best P=%d x D=%d, %.2f s "
              "per mini-batch\n",
              plan.rows.size(), std::thread::hardware_concurrency(), ms,
              best.stages, best.replicas, best.seconds);
  return 0;
}
