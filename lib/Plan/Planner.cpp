//===- Planner.cpp - Sweep pipeline depths with the simulator -------------===//

#include "varuna/Plan/Planner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <thread>

namespace varuna {
namespace plan {

/// How much slower each of k all-reduces of one host is than one alone
/// (PlanInput::devicesPerHost, concurrent).
static double concurrencySlowdown(const PlanInput &in, int k) {
  if (k <= 1)
    return 1;
  if (in.concurrent.rings >= 2 && in.concurrent.slowdown > 0)
    return std::max(1.0, 1 + (in.concurrent.slowdown - 1) * (k - 1) /
                                 (in.concurrent.rings - 1));
  return double(k);
}

/// A ring all-reduce of `bytes` over D replicas (PlanInput::allreduceRings),
/// `k` of them at once on each host.
static double allreduceSeconds(const PlanInput &in, int D, double bytes,
                               int k, bool acrossHosts) {
  if (D < 2)
    return 0;
  double latency = in.allreduceLatencySeconds;
  double bw = in.allreduceBytesPerSecond;
  const std::vector<PlanInput::Ring> &rings =
      acrossHosts && !in.remoteRings.empty() ? in.remoteRings
                                             : in.allreduceRings;
  // The largest measured ring of at most D ranks, else the smallest one.
  const PlanInput::Ring *below = nullptr, *smallest = nullptr;
  for (const PlanInput::Ring &r : rings) {
    if (r.ranks < 2 || r.bytesPerSecond <= 0)
      continue;
    if (r.ranks <= D && (!below || r.ranks > below->ranks))
      below = &r;
    if (!smallest || r.ranks < smallest->ranks)
      smallest = &r;
  }
  const PlanInput::Ring *use = below ? below : smallest;
  if (use) {
    latency = use->latencySeconds * double(D - 1) / double(use->ranks - 1);
    bw = use->bytesPerSecond;
  }
  return latency +
         2.0 * (D - 1) / D * bytes / bw * concurrencySlowdown(in, k);
}

/// The bytes of stage [first, end)'s gradient buckets, as
/// rt::GradientBuckets packs them: its parameters (each once) in reverse
/// order, cut into runs of at most `bucketBytes`, a larger one alone.
/// Empty when a section's parameters are not known.
static std::vector<double> packBuckets(const PlanInput &in, int64_t first,
                                       int64_t end, double bucketBytes) {
  std::vector<double> sizes;
  std::set<std::string> seen;
  for (int64_t k = first; k < end; ++k) {
    const PlanSection &sec = in.sections[k];
    if (sec.gradients.empty() && sec.paramBytes > 0)
      return {};
    for (const auto &[name, bytes] : sec.gradients)
      if (bytes > 0 && seen.insert(name).second)
        sizes.push_back(bytes);
  }
  std::vector<double> buckets;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    if (buckets.empty() || buckets.back() + *it > bucketBytes)
      buckets.push_back(0);
    buckets.back() += *it;
  }
  return buckets;
}

SimulationConfig configFor(const PlanInput &in, int P, int D,
                           std::string &error) {
  SimulationConfig c;
  auto it = in.boundaries.find(P);
  if (it == in.boundaries.end() ||
      it->second.size() != static_cast<size_t>(P) + 1) {
    error = "the job has no partition into " + std::to_string(P) + " stages";
    return c;
  }
  if (D < 1) {
    error = "the replicas must be at least 1, not " + std::to_string(D);
    return c;
  }
  if (in.microBatch < 1 || in.globalBatch % in.microBatch) {
    error = "the batch " + std::to_string(in.globalBatch) +
            " is not a multiple of the micro-batch " +
            std::to_string(in.microBatch);
    return c;
  }
  if (in.globalBatch / in.microBatch < D) {
    error = "the batch " + std::to_string(in.globalBatch) + " has " +
            std::to_string(in.globalBatch / in.microBatch) +
            " micro-batches of " + std::to_string(in.microBatch) +
            ", fewer than the " + std::to_string(D) + " replicas";
    return c;
  }
  const std::vector<int64_t> &b = it->second;
  double m = double(in.microBatch);
  c.schedule = in.schedule;
  c.numStages = P;
  // The most loaded replica's share (the runtime deals the micro-batches
  // out as evenly as they go): the step waits for it.
  int64_t all = in.globalBatch / in.microBatch;
  if ((all + D - 1) / D > std::numeric_limits<int>::max()) {
    // (It wrapped around to a negative count.)
    error = "the batch " + std::to_string(in.globalBatch) + " has " +
            std::to_string((all + D - 1) / D) +
            " micro-batches per replica, more than " +
            std::to_string(std::numeric_limits<int>::max());
    return c;
  }
  c.numMicroBatches = static_cast<int>((all + D - 1) / D);
  c.link = in.link;
  c.jitterSamples = in.jitterSamples;
  c.sharedCores = in.sharedCores;
  c.oversubscribedSlowdown = in.oversubscribedSlowdown;
  c.replicasSharing = D;
  c.optimizerSeconds = in.optimizerSeconds;
  double slowestOptimizer = 0;
  // Varuna's layout: K consecutive ranks per host, rank = r P + s.
  const int K = std::max(in.devicesPerHost, 1);
  auto host = [&](int rank) { return rank / K; };
  if (in.remoteLink)
    for (int s = 0; s + 1 < P; ++s) {
      bool crosses = false;
      for (int r = 0; r < D && !crosses; ++r)
        crosses = host(r * P + s) != host(r * P + s + 1);
      c.links.push_back(crosses ? *in.remoteLink : in.link);
      c.links.back().jitterSeconds = in.link.jitterSeconds;
    }
  for (int s = 0; s < P; ++s) {
    StageCost cost;
    double params = 0, optimizer = 0, stats = 0;
    for (int64_t k = b[s]; k < b[s + 1]; ++k) {
      if (k < 0 || k >= static_cast<int64_t>(in.sections.size())) {
        error = "partition boundary " + std::to_string(k) +
                " is outside the sections";
        return c;
      }
      cost.forward += in.sections[k].forwardSeconds * m;
      cost.backward += in.sections[k].backwardSeconds * m;
      // zb's B and W: the sections' parts, when every one is known.
      auto add = [&](double &sum, double part) {
        sum = k == b[s] ? part * m : sum < 0 || part < 0 ? -1 : sum + part * m;
      };
      add(cost.weight, in.sections[k].weightSeconds);
      add(cost.input, in.sections[k].inputSeconds);
      params += in.sections[k].paramBytes;
      stats += in.sections[k].runningStatsBytes;
      optimizer += in.sections[k].optimizerSeconds;
    }
    slowestOptimizer = std::max(slowestOptimizer, optimizer);
    cost.recompute = cost.forward;
    c.stages.push_back(cost);
    int buckets = in.bucketBytes > 0 && D > 1
                      ? std::max(1, int(std::ceil(params / in.bucketBytes)))
                      : 1;
    bool across = host(s) != host((D - 1) * P + s);
    std::vector<double> packed =
        D > 1 && in.bucketBytes > 0
            ? packBuckets(in, b[s], b[s + 1], in.bucketBytes)
            : std::vector<double>();
    // A parameter larger than a bucket is a bucket of its own (the runtime
    // does not split parameters), taken as final last: the others share
    // the rest of the stage's bytes.
    double largest = 0;
    for (int64_t k = b[s]; k < b[s + 1]; ++k)
      largest = std::max(largest, in.sections[k].largestParamBytes);
    if (!packed.empty()) {
      // The runtime's buckets: the last (the stage's first parameters, an
      // input embedding's among them) final at the end of the backward.
      double total = 0;
      for (double bytes : packed)
        total += allreduceSeconds(in, D, bytes, std::min(K, P), across);
      c.allreduceBuckets.push_back(int(packed.size()));
      c.allreduceSeconds.push_back(total);
      c.lastBucketShare.resize(s, 0.0);
      c.lastBucketShare.push_back(
          total > 0 && packed.size() > 1
              ? allreduceSeconds(in, D, packed.back(), std::min(K, P),
                                 across) /
                    total
              : 0.0);
    } else if (D > 1 && in.bucketBytes > 0 && largest > in.bucketBytes &&
               largest <= params) {
      double rest = params - largest;
      int restBuckets = rest > 0 ? int(std::ceil(rest / in.bucketBytes)) : 0;
      double big = allreduceSeconds(in, D, largest, std::min(K, P), across);
      double others =
          restBuckets > 0 ? restBuckets * allreduceSeconds(in, D,
                                                           rest / restBuckets,
                                                           std::min(K, P),
                                                           across)
                          : 0;
      c.allreduceBuckets.push_back(restBuckets + 1);
      c.allreduceSeconds.push_back(big + others);
      c.lastBucketShare.resize(s, 0.0);
      c.lastBucketShare.push_back(big / (big + others));
    } else {
      c.allreduceBuckets.push_back(buckets);
      c.allreduceSeconds.push_back(
          buckets * allreduceSeconds(in, D, params / buckets, std::min(K, P),
                                     across));
    }
    c.runningStatsSeconds.push_back(
        stats > 0 ? allreduceSeconds(in, D, stats, std::min(K, P),
                                     host(s) != host((D - 1) * P + s))
                  : 0);
    if (in.sharedCores > 0 && in.allreduceCpu)
      c.allreduceCpuSeconds.push_back(
          D < 2 ? 0
                : c.allreduceBuckets.back() * in.allreduceCpu->latency *
                          (D - 1) +
                      in.allreduceCpu->perByte * params * 2.0 * (D - 1) / D);
    if (s + 1 < P) {
      int64_t cut = b[s + 1] - 1;
      double bytes = cut >= 0 && cut < static_cast<int64_t>(
                                           in.cutBytesPerExample.size())
                         ? in.cutBytesPerExample[cut]
                         : 0;
      c.boundaryBytes.push_back(bytes * m);
      if (in.sharedCores > 0 && in.messageCpu)
        c.messageCpuSeconds.push_back(in.messageCpu->latency +
                                      in.messageCpu->perByte * bytes * m);
    }
  }
  c.optimizerSeconds += slowestOptimizer;
  // The step's end: a world all-reduce of a few doubles (the loss totals;
  // the norm), over all P D ranks, across hosts when they do not fit one;
  // each tie's gradients over the stages holding it, in every replica at
  // once (the K / P replicas of a host together).
  c.syncSeconds = allreduceSeconds(in, P * D, 64, 1, P * D > K);
  c.normSync = in.normSync;
  for (const PlanInput::Tie &tie : in.ties) {
    std::vector<int> stages;
    for (int64_t k : tie.sections)
      for (int s = 0; s < P; ++s)
        if (k >= b[s] && k < b[s + 1] &&
            std::find(stages.begin(), stages.end(), s) == stages.end())
          stages.push_back(s);
    if (stages.size() < 2)
      continue;
    std::sort(stages.begin(), stages.end());
    bool across = false;
    for (int r = 0; r < D && !across; ++r)
      across = host(r * P + stages.front()) != host(r * P + stages.back());
    int together = std::max(1, std::min(D, K / P));
    c.ties.push_back({stages, allreduceSeconds(in, int(stages.size()),
                                               tie.bytes, together, across)});
  }
  int64_t T = std::max<int64_t>(in.scheduleLatency, 0);
  if (in.scheduleLatency < 0 && in.schedule == ScheduleKind::Varuna && P > 1) {
    double forward = 0, message = 0;
    for (const StageCost &s : c.stages)
      forward += s.forward / P;
    for (size_t b = 0; b < c.boundaryBytes.size(); ++b) {
      const LinkModel &l = c.links.empty() ? in.link : c.links[b];
      message = std::max(message, l.latencySeconds +
                                      (l.bytesPerSecond > 0
                                           ? c.boundaryBytes[b] / l.bytesPerSecond
                                           : 0));
    }
    if (forward > 0)
      T = static_cast<int64_t>(
          std::ceil(std::min(message / forward, double(c.numMicroBatches))));
  }
  c.scheduleTiming.latency = T;
  // Zero-bubble: how many backwards to split depends on what a split costs;
  // measured, it is what the stages' B and W take over their whole
  // backward (the most of any stage that splits), not the default.
  if (in.schedule == ScheduleKind::ZeroBubble) {
    std::optional<double> worst;
    for (int s = 1; s < P; ++s) {
      const StageCost &st = c.stages[s];
      if (st.input >= 0 && st.weight >= 0 && st.backward > 0)
        worst = std::max(worst.value_or(0.0),
                         (st.input + st.weight - st.backward) / st.backward);
    }
    if (worst)
      c.scheduleTiming.splitCostPercent = std::clamp<int64_t>(
          static_cast<int64_t>(std::lround(*worst * 100)), 0, 100);
  }
  return c;
}

std::vector<double> stageMemory(const PlanInput &in, int P,
                                const std::vector<int64_t> &inFlight) {
  std::vector<double> out;
  auto it = in.boundaries.find(P);
  if (it == in.boundaries.end() || it->second.size() != size_t(P) + 1 ||
      inFlight.size() != size_t(P))
    return out;
  const std::vector<int64_t> &b = it->second;
  double m = double(in.microBatch);
  int64_t K = static_cast<int64_t>(in.sections.size());
  for (int s = 0; s < P; ++s) {
    double params = 0, working = 0;
    for (int64_t k = std::max<int64_t>(b[s], 0); k < std::min(b[s + 1], K);
         ++k) {
      params += in.sections[k].paramBytes;
      working += in.sections[k].workingBytesPerExample * m;
    }
    int64_t cut = b[s] - 1; // the cut in front of the stage
    double stash =
        cut >= 0 && cut < static_cast<int64_t>(in.cutBytesPerExample.size())
            ? in.cutBytesPerExample[cut] * m
            : 0;
    double held = double(inFlight[s]);
    // Without recompute a held micro-batch keeps all its activations.
    bool keeps = in.schedule == ScheduleKind::OneFOneB ||
                 in.schedule == ScheduleKind::ZeroBubble;
    double activations = keeps ? held * (stash + working)
                             : held * stash + working;
    out.push_back(params * (2 + in.stateCopies) + activations);
  }
  return out;
}

int64_t chooseMicroBatch(std::vector<MicroBatchTime> times,
                         double tolerance) {
  if (times.empty())
    return 0;
  std::sort(times.begin(), times.end(),
            [](const MicroBatchTime &a, const MicroBatchTime &b) {
              return a.microBatch < b.microBatch;
            });
  for (size_t i = 0; i + 1 < times.size(); ++i)
    if (times[i + 1].secondsPerExample >
        (1 - tolerance) * times[i].secondsPerExample)
      return times[i].microBatch;
  return times.back().microBatch;
}

PlanResult planSweep(const PlanInput &in) {
  PlanResult res;
  if (in.devices < 1 || in.globalBatch < 1 || in.microBatch < 1) {
    res.error = "devices, batch and micro-batch must be at least 1";
    return res;
  }
  // The configurations first (cheap, in P order), then their simulations
  // spread over threads; rows and skips come out in P order either way.
  struct Candidate {
    int P, D;
    SimulationConfig config;
    SimulationResult result;
    bool fewerReplicas = false; ///< D below floor(G / P): tried, not reported
  };
  std::vector<Candidate> todo;
  int maxP = std::min<int>(in.devices, static_cast<int>(in.sections.size()));
  for (int P = 1; P <= maxP; ++P) {
    std::string tag = "P=" + std::to_string(P) + ": ";
    if (!in.boundaries.count(P)) {
      res.skipped.push_back(tag + "no partition in the job");
      continue;
    }
    // D = floor(G / P), but no more replicas than micro-batches.
    int D = static_cast<int>(std::min<int64_t>(
        in.devices / P, std::max<int64_t>(1, in.globalBatch / in.microBatch)));
    std::string error;
    SimulationConfig c = configFor(in, P, D, error);
    if (!error.empty()) {
      res.skipped.push_back(tag + error);
      continue;
    }
    // Fewer replicas can be faster: each all-reduce's ring grows with D
    // while the compute it saves shrinks (tiny sections, a huge batch).
    // Without this, more devices could predict a slower best plan. A
    // closed-form estimate -- the pipeline as (Nm + P - 1) of its slowest
    // stage's F + R + B, plus the slowest stage's all-reduce and the
    // step's sync -- over every D <= floor(G / P) picks at most one more D
    // to simulate.
    auto estimate = [&](const SimulationConfig &x) {
      double slowest = 0, reduce = 0;
      for (const StageCost &st : x.stages)
        slowest = std::max(slowest, st.forward + st.backward +
                                        (st.recompute < 0 ? st.forward
                                                          : st.recompute));
      for (double a : x.allreduceSeconds)
        reduce = std::max(reduce, a);
      return (x.numMicroBatches + P - 1) * slowest + reduce + x.syncSeconds;
    };
    int bestD = D;
    double best = estimate(c);
    for (int d = D - 1; d >= 1; --d) {
      std::string e;
      SimulationConfig x = configFor(in, P, d, e);
      if (e.empty() && estimate(x) < best) {
        best = estimate(x);
        bestD = d;
      }
    }
    todo.push_back({P, D, std::move(c), {}});
    // Ranks sharing cores (--shared-cores): every rank more slows the others,
    // which the estimate does not see -- each smaller D is simulated (such
    // machines have few devices). Before, 3 and 4 devices predicted a slower
    // best plan than 2.
    // For up to 32 devices every smaller D is simulated too: the estimate
    // misses rings measured slower than their size predicts, and 4 and 9
    // devices predicted a slower best plan than 3 and 8, which their D - 1
    // beat. (Beyond, the sweep would take 12 times as long: 2.6 s for 300
    // devices, where the estimate's choices keep it at 0.2 s.)
    constexpr int kEveryReplicaCountUpToDevices = 32;
    std::vector<int> more;
    if (in.sharedCores > 0 || in.devices <= kEveryReplicaCountUpToDevices)
      for (int d = 1; d < D; ++d)
        more.push_back(d);
    else if (bestD != D)
      // The estimate's choice and its neighbours a factor 1.5 away (the
      // estimate is rough), each simulated.
      more = {bestD, int(std::lround(bestD * 1.5)),
              int(std::lround(bestD / 1.5))};
    if (!more.empty()) {
      std::sort(more.begin(), more.end());
      more.erase(std::unique(more.begin(), more.end()), more.end());
      for (int d : more) {
        if (d < 1 || d >= D)
          continue;
        std::string e;
        SimulationConfig x = configFor(in, P, d, e);
        if (e.empty())
          todo.push_back({P, d, std::move(x), {}, true});
      }
    }
  }
  // Largest first, so one long simulation does not start last.
  std::vector<size_t> byCost(todo.size());
  for (size_t i = 0; i < todo.size(); ++i)
    byCost[i] = todo.size() - 1 - i;
  std::atomic<size_t> nextJob{0};
  auto work = [&] {
    for (size_t j; (j = nextJob.fetch_add(1)) < byCost.size();)
      todo[byCost[j]].result = simulate(todo[byCost[j]].config);
  };
  unsigned threads = in.threads > 0 ? unsigned(in.threads)
                                    : std::thread::hardware_concurrency();
  threads = std::max(1u, std::min<unsigned>(threads, todo.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();

  for (Candidate &x : todo) {
    const SimulationResult &r = x.result;
    std::string tag = "P=" + std::to_string(x.P) + ": ";
    // A smaller D that fails says nothing new: fewer replicas hold more
    // micro-batches each, so it fails where floor(G / P) did (said once).
    if (!r.ok()) {
      if (!x.fewerReplicas)
        res.skipped.push_back(tag + r.error);
      continue;
    }
    std::vector<double> mem = stageMemory(in, x.P, r.inFlight);
    double peak = mem.empty() ? 0 : *std::max_element(mem.begin(), mem.end());
    if (in.memoryLimitBytes > 0 &&
        peak + in.rankBaselineBytes > in.memoryLimitBytes) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "a stage needs %.4g MB (and a rank %.4g MB more for the "
                    "runtime), more than the %.4g MB limit",
                    peak / 1e6, in.rankBaselineBytes / 1e6,
                    in.memoryLimitBytes / 1e6);
      if (!x.fewerReplicas)
        res.skipped.push_back(tag + buf);
      continue;
    }
    PlanRow row;
    row.stages = x.P;
    row.replicas = x.D;
    row.microBatch = in.microBatch;
    row.microBatches = x.config.numMicroBatches;
    row.seconds = r.minibatchSeconds;
    row.examplesPerSecond =
        r.minibatchSeconds > 0 ? double(in.globalBatch) / r.minibatchSeconds
                               : 0;
    row.idleDevices = in.devices - x.P * x.D;
    row.busyFraction = r.busyFraction;
    row.peakStageBytes = peak;
    row.scheduleLatency = x.config.scheduleTiming.latency;
    row.splitCostPercent = x.config.scheduleTiming.splitCostPercent;
    row.schedule = in.schedule;
    res.rows.push_back(row);
  }
  std::stable_sort(res.rows.begin(), res.rows.end(),
                   [](const PlanRow &a, const PlanRow &b) {
                     return a.seconds < b.seconds;
                   });
  // One row per P: its fastest D (the table ranks depths; a slower D of
  // the same P is no choice anyone would take).
  std::set<int> seen;
  res.rows.erase(std::remove_if(res.rows.begin(), res.rows.end(),
                                [&](const PlanRow &r) {
                                  return !seen.insert(r.stages).second;
                                }),
                 res.rows.end());
  if (res.rows.empty())
    res.error = "no configuration fits (see the skipped ones)";
  return res;
}

PlanResult planSchedules(const PlanInput &in,
                         const std::vector<ScheduleKind> &kinds) {
  PlanResult all;
  std::string lastError = "no schedule given";
  for (ScheduleKind k : kinds) {
    PlanInput one = in;
    one.schedule = k;
    PlanResult r = planSweep(one);
    // One stage runs no pipeline schedule: its skip is the same under each
    // (said once, without a schedule's name).
    for (const std::string &s : r.skipped) {
      bool oneStage = s.rfind("P=1: ", 0) == 0;
      if (oneStage && k != kinds.front())
        continue;
      all.skipped.push_back(kinds.size() > 1 && !oneStage
                                ? std::string(scheduleKindName(k)) + " " + s
                                : s);
    }
    if (!r.ok())
      lastError = r.error;
    // One stage runs no pipeline schedule: its rows are the same under each
    // (kept once, the first schedule's).
    for (const PlanRow &row : r.rows)
      if (row.stages > 1 || k == kinds.front())
        all.rows.push_back(row);
  }
  std::stable_sort(all.rows.begin(), all.rows.end(),
                   [](const PlanRow &a, const PlanRow &b) {
                     return a.seconds < b.seconds;
                   });
  if (all.rows.empty())
    all.error = lastError;
  return all;
}

} // namespace plan
} // namespace varuna
