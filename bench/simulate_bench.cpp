//===- simulate_bench.cpp - Time the pipeline simulator -------------------===//
//
// The numbers: simulating one configuration of 128 devices, P = 36,
// global batch 8192 (D = 3, micro-batch 4: 682 micro-batches per replica)
// under 10 ms (the paper's simulator: 0.4-0.7 s); the whole sweep over P
// for G = 300 devices (P = 1..72 of a 72-layer GPT, D = floor(300 / P),
// micro-batch 4) under 200 ms. Per-stage costs are GPT-like and seeded
// (+-10%), with a 10 Gbit/s link of 50 us latency, Varuna's schedule with
// its run-time deviation; median of several runs. Usage: simulate-bench [runs]
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Simulator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

using namespace varuna::plan;
using Clock = std::chrono::steady_clock;

static SimulationConfig config(int layers, int P, int D, int M, int m,
                               unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  SimulationConfig c;
  c.schedule = ScheduleKind::Varuna;
  c.numStages = P;
  c.numMicroBatches = std::max(1, M / (D * m));
  double perLayerF = 0.004 * m; // seconds per micro-batch per layer
  for (int s = 0; s < P; ++s) {
    int l = layers / P + (s < layers % P ? 1 : 0);
    double f = perLayerF * l * jitter(rng);
    c.stages.push_back({f, 2 * f, f});
  }
  c.boundaryBytes.assign(P - 1, 4.0 * m * 1024 * 3072); // m x seq x hidden fp32
  c.link.latencySeconds = 50e-6;
  c.link.bytesPerSecond = 10e9 / 8;
  // Ring all-reduce of the stage's fp32 weights (12 h^2 per layer, h = 3072)
  // over the 10 Gbit/s link: 2 (D-1)/D x bytes / bandwidth.
  for (int s = 0; s < P; ++s) {
    int l = layers / P + (s < layers % P ? 1 : 0);
    double bytes = 4.0 * 12 * 3072.0 * 3072.0 * l;
    c.allreduceSeconds.push_back(2.0 * (D - 1) / D * bytes /
                                 c.link.bytesPerSecond);
  }
  return c;
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
  int runs = argc > 1 ? std::atoi(argv[1]) : 5;
  SimulationConfig one = config(72, 36, 3, 8192, 4, 1);
  double estimate = 0;
  double ms = medianMs(runs, [&] { estimate = simulate(one).minibatchSeconds; });
  std::printf("one configuration: 128 devices, P=36 x D=3, %d micro-batches of "
              "4: %.2f ms (target < 10 ms; the paper: 660 ms), estimate %.2f s\n",
              one.numMicroBatches, ms, estimate);
  int best = 0;
  double bestTime = 1e30;
  ms = medianMs(runs, [&] {
    for (int P = 1; P <= 72; ++P) {
      int D = 300 / P;
      if (D < 1)
        break;
      SimulationResult r = simulate(config(72, P, D, 8192, 4, P));
      if (r.ok() && r.minibatchSeconds < bestTime) {
        bestTime = r.minibatchSeconds;
        best = P;
      }
    }
  });
  std::printf("sweep over P = 1..72 for 300 devices: %.1f ms (target < 200 ms); "
              "best P = %d (%.2f s per mini-batch)\n",
              ms, best, bestTime);
  return 0;
}
