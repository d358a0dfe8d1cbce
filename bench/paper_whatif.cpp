//===- paper_whatif.cpp - The paper's Tables 3 and 5, simulated -----------===//
//
// A what-if at the paper's scale (docs/paper-whatif.md): calibration numbers
// derived from the paper's setting instead of measured here, fed to the same
// planner and simulator varuna-plan uses. Assumptions (all in gptInput):
//  * GPT-2 2.5B: 54 layers, hidden 1920, seq 1024; 8.3B: 72 layers, hidden
//    3072, seq 1024 (PAPER-FACTS "Models"). One cut point per layer.
//  * Compute on a V100: forward FLOPs per example and layer
//    2 x 12 h^2 x seq + 4 x seq^2 x h, backward twice that, at 42 TFLOP/s
//    (fp16). 42 is the one fitted constant: with it the ideal per-GPU rate
//    of 8.3B (F + R + B over 72 layers) is the 0.6 examples/s/GPU of the
//    paper's Table 5 and 2.5B's is 1.97 (Table 3's best: 1.85).
//  * Activations and gradients at a cut: seq x h fp16 per example
//    (3.75 MiB for 2.5B, as the paper says).
//  * Network: 1-GPU VMs, 10 Gbit/s Ethernet, 200 us per message + up to
//    +-100 us of jitter (several switch levels); the data-parallel ring
//    all-reduce of the stage's fp16 gradients at the same line rate;
//    `--gbps` scales it ("a 2x slower network": half the bandwidth, twice
//    the latency).
//  * Optimizer: Adam over fp32 master weights, 16 bytes per parameter read
//    and written at 900 GB/s.
//  * Memory (Table 3's planner runs only): 16 GB per V100; 16 bytes per
//    parameter (fp16 weights and gradients, fp32 master weights and Adam's
//    two moments); a micro-batch's working memory during its recomputed
//    backward seq x h x (34 + 5 a seq / h) bytes per example and layer
//    (Megatron's activation estimate; a = h / 96 heads).
//  * Global batch 8192, micro-batch 4 (Table 3) or 8 (Table 5); when D does
//    not divide the 2048 micro-batches the most loaded replica's share sets
//    the pace, as in varuna-run.
//
// Usage: paper-whatif [--gbps G]
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace varuna::plan;

namespace {

struct Model {
  const char *name;
  int layers;
  double hidden, seq;
};
constexpr double kDeviceMemory = 16e9;
const Model kGpt25{"GPT-2 2.5B", 54, 1920, 1024};
const Model kGpt83{"GPT-2 8.3B", 72, 3072, 1024};

constexpr double kFlops = 42e12;

/// The planner's input for `model` on `devices` V100s; `slowdown` divides
/// the bandwidth and multiplies latency and jitter.
PlanInput gptInput(const Model &model, int devices, int64_t microBatch,
                   double gbps, double slowdown) {
  PlanInput in;
  double h = model.hidden, seq = model.seq;
  double forward = 2 * 12 * h * h * seq + 4 * seq * seq * h; // per example
  double params = 12 * h * h;
  double heads = h / 96;
  double working = seq * h * (34 + 5 * heads * seq / h);
  for (int l = 0; l < model.layers; ++l)
    in.sections.push_back(
        {forward / kFlops, 2 * forward / kFlops, 2 * params /* fp16 */, working});
  in.stateCopies = 6; // x 2 bytes: fp16 gradient, fp32 master, Adam m and v
  in.cutBytesPerExample.assign(model.layers - 1, 2 * seq * h);
  for (int P = 1; P <= model.layers; ++P) {
    std::vector<int64_t> b{0};
    for (int s = 0; s < P; ++s)
      b.push_back(b.back() + model.layers / P + (s < model.layers % P ? 1 : 0));
    in.boundaries[P] = b;
  }
  in.devices = devices;
  in.globalBatch = 8192;
  in.microBatch = microBatch;
  in.link.bytesPerSecond = gbps * 1e9 / 8 / slowdown;
  in.link.latencySeconds = 200e-6 * slowdown;
  in.link.jitterSeconds = 100e-6 * slowdown;
  in.allreduceBytesPerSecond = in.link.bytesPerSecond;
  in.allreduceLatencySeconds = in.link.latencySeconds;
  // Adam on the largest stage's fp32 master weights.
  in.optimizerSeconds =
      16.0 * params * ((model.layers + 5) / 6) / 900e9; // at P >= 6
  return in;
}

/// One P x D.
double examplesPerGpu(PlanInput in, int P, int D, ScheduleKind kind) {
  in.schedule = kind;
  std::string error;
  SimulationConfig c = configFor(in, P, D, error);
  if (!error.empty()) {
    std::fprintf(stderr, "paper-whatif: %s\n", error.c_str());
    std::exit(1);
  }
  c.seed = 1;
  SimulationResult r = simulate(c);
  if (!r.ok()) {
    std::fprintf(stderr, "paper-whatif: %s\n", r.error.c_str());
    std::exit(1);
  }
  return double(in.globalBatch) / r.minibatchSeconds / (P * D);
}

} // namespace

int main(int argc, char **argv) {
  double gbps = 10;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--gbps") && i + 1 < argc) {
      // (atof took "abc" as 0 and planned for a 0 Gbit/s network.)
      char *end = nullptr;
      const char *text = argv[++i];
      gbps = std::strtod(text, &end);
      if (end == text || *end || !std::isfinite(gbps) || gbps <= 0 ||
          gbps > 1e6) {
        std::fprintf(stderr,
                     "paper-whatif: --gbps must be a number of Gbit/s in "
                     "(0, 1e6], not '%s'\n",
                     text);
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: paper-whatif [--gbps G]\n");
      return 2;
    }
  std::printf("network: %g Gbit/s, 200 us +- 100 us per message\n\n", gbps);

  // Table 3: GPT-2 2.5B, P = 6, 9, 18 at 36 and 100 GPUs.
  std::printf("Table 3 (GPT-2 2.5B, batch 8192, m = 4): examples/s per GPU "
              "(paper in brackets)\n");
  const double paper3[2][3] = {{1.85, 1.83, 1.39}, {1.62, 1.66, 1.10}};
  int g = 0;
  for (int G : {36, 100}) {
    PlanInput in = gptInput(kGpt25, G, 4, gbps, 1);
    int k = 0;
    for (int P : {6, 9, 18}) {
      int D = G / P;
      double total = examplesPerGpu(in, P, D, ScheduleKind::Varuna);
      std::printf("  %3d GPUs  %2dx%-2d  %.2f  [%.2f]\n", G, P, D, total,
                  paper3[g][k++]);
    }
    in.globalBatch = 8192;
    in.memoryLimitBytes = kDeviceMemory;
    PlanResult plan = planSweep(in);
    if (!plan.ok()) {
      for (const std::string &why : plan.skipped)
        std::fprintf(stderr, "  skipped %s\n", why.c_str());
      std::fprintf(stderr, "paper-whatif: %d GPUs: %s\n", G,
                   plan.error.c_str());
      return 1;
    }
    int smallest = 1;
    while (smallest <= 54 && !std::any_of(plan.rows.begin(), plan.rows.end(),
                                          [&](const PlanRow &r) {
                                            return r.stages == smallest;
                                          }))
      ++smallest;
    const PlanRow &best = plan.rows.front();
    std::printf("  %3d GPUs  planSweep (16 GB, P >= %d fits, D = G / P): "
                "%dx%d, %.2f per GPU, %.1f GB\n",
                G, smallest, best.stages, best.replicas,
                best.examplesPerSecond / (best.stages * best.replicas),
                best.peakStageBytes / 1e9);
    ++g;
  }

  // Table 5: GPT-2 8.3B, 4 stages, Varuna vs GPipe as the network slows.
  std::printf("\nTable 5 (GPT-2 8.3B, 4 stages x 8 replicas, batch 8192, "
              "m = 8): examples/s per GPU, Varuna / GPipe (paper)\n");
  const char *names[] = {"normal", "1.5x slower", "2x slower"};
  const double paper5[3][2] = {{0.6, 0.55}, {0.59, 0.48}, {0.59, 0.426}};
  int i = 0;
  for (double slow : {1.0, 1.5, 2.0}) {
    PlanInput in = gptInput(kGpt83, 32, 8, gbps, slow);
    double v = examplesPerGpu(in, 4, 8, ScheduleKind::Varuna);
    double gp = examplesPerGpu(in, 4, 8, ScheduleKind::GPipe);
    std::printf("  %-12s %.3f / %.3f  (%.2f / %.3f)\n", names[i], v, gp,
                paper5[i][0], paper5[i][1]);
    ++i;
  }
  return 0;
}
