//===- Partition.cpp - Balanced grouping of sections into stages ----------===//
//
// Exact min-max contiguous partition with memory limits, by dynamic
// programming over suffixes. Layer j of the table holds, for every start
// section a, the smallest bottleneck with which sections [a, K) can be split
// into j stages. The first of those j stages is stage P - j of a P-stage
// pipeline, and its in-flight count depends only on j (see Partition.h), so
// one table serves every P.
//
// Each table entry minimises over the end b of its first stage. Two exact
// bounds cut that scan short (SuffixTable::entry): going right, the stage's own
// compute only grows; going left, a prefix minimum of the next layer bounds
// what the remaining stages can reach. A second, threshold-constrained pass
// then picks, among the partitions with the optimal bottleneck, the one with
// the smallest sum of squared stage costs.
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Partition.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

using namespace varuna::plan;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
using ErrorKind = PartitionResult::ErrorKind;

int64_t satAdd(int64_t x, int64_t y) {
  int64_t r;
  return __builtin_add_overflow(x, y, &r) ? kMaxBytes : r;
}
int64_t satMul(int64_t x, int64_t y) {
  int64_t r;
  return __builtin_mul_overflow(x, y, &r) ? kMaxBytes : r;
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

/// The validated problem: prefix sums and the stage cost/memory functions.
/// Every stage cost anywhere in this file comes from cost(), so equal
/// partitions compare exactly equal.
class Problem {
public:
  Problem(const std::vector<Section> &sections, const PartitionOptions &opts)
      : sections(sections), opts(opts), numSections(unsigned(sections.size())) {
  }

  /// Checks the inputs and builds the prefix sums; an empty string if valid.
  std::string validate();

  unsigned size() const { return numSections; }
  double compute(unsigned a, unsigned b) const {
    return computePrefix[b] - computePrefix[a];
  }
  double cost(unsigned a, unsigned b) const {
    double c = compute(a, b);
    if (a > 0)
      c += sections[a - 1].sendSecondsAfter;
    if (b < numSections)
      c += sections[b - 1].sendSecondsAfter;
    return c;
  }
  int64_t params(unsigned a, unsigned b) const {
    return paramPrefix[b] - paramPrefix[a];
  }
  /// In-flight micro-batches of a stage with `j` stages from it to the end.
  int64_t inFlight(unsigned j) const {
    if (opts.inFlightPolicy == InFlightPolicy::All)
      return *opts.maxInFlight;
    return opts.maxInFlight ? std::min<int64_t>(j, *opts.maxInFlight) : j;
  }
  int64_t activation(unsigned a) const { return sections[a].activationBytes; }
  int64_t stash(unsigned a, unsigned j) const {
    return satMul(inFlight(j), sections[a].activationBytes);
  }
  int64_t memory(unsigned a, unsigned b, unsigned j) const {
    return satAdd(params(a, b), stash(a, j));
  }
  bool fits(int64_t bytes) const {
    return !opts.memoryLimitBytes || bytes <= *opts.memoryLimitBytes;
  }
  bool hasLimit() const { return opts.memoryLimitBytes.has_value(); }
  int64_t limit() const { return *opts.memoryLimitBytes; }

private:
  const std::vector<Section> &sections;
  const PartitionOptions &opts;
  unsigned numSections;
  std::vector<double> computePrefix;
  std::vector<int64_t> paramPrefix;
};

std::string Problem::validate() {
  if (numSections == 0)
    return "there are no sections to partition";
  if (opts.memoryLimitBytes && *opts.memoryLimitBytes <= 0)
    return "the memory limit must be positive (got " +
           std::to_string(*opts.memoryLimitBytes) + " bytes)";
  if (opts.maxInFlight && *opts.maxInFlight < 1)
    return "maxInFlight must be at least 1 (got " +
           std::to_string(*opts.maxInFlight) + ")";
  if (opts.inFlightPolicy == InFlightPolicy::All && !opts.maxInFlight)
    return "InFlightPolicy::All needs maxInFlight (the number of "
           "micro-batches every stage stashes)";
  computePrefix.assign(numSections + 1, 0);
  paramPrefix.assign(numSections + 1, 0);
  for (unsigned i = 0; i < numSections; ++i) {
    const Section &s = sections[i];
    std::string where = "section " + std::to_string(i) + " has ";
    if (!std::isfinite(s.computeSeconds))
      return where + "a non-finite compute cost (" + fmt(s.computeSeconds) +
             ")";
    if (s.computeSeconds < 0)
      return where + "a negative compute cost (" + fmt(s.computeSeconds) + ")";
    if (s.paramBytes < 0)
      return where + "negative paramBytes (" + std::to_string(s.paramBytes) +
             ")";
    if (s.activationBytes < 0)
      return where + "negative activationBytes (" +
             std::to_string(s.activationBytes) + ")";
    if (i + 1 < numSections) {
      if (!std::isfinite(s.sendSecondsAfter))
        return where + "a non-finite send cost (" + fmt(s.sendSecondsAfter) +
               ")";
      if (s.sendSecondsAfter < 0)
        return where + "a negative send cost (" + fmt(s.sendSecondsAfter) + ")";
    }
    computePrefix[i + 1] = computePrefix[i] + s.computeSeconds;
    if (!std::isfinite(computePrefix[i + 1]))
      return "the total compute cost overflows a double";
    if (__builtin_add_overflow(paramPrefix[i], s.paramBytes,
                               &paramPrefix[i + 1]))
      return "the sections' paramBytes sum overflows int64";
  }
  return "";
}

/// Smallest b in [lo, hi] with pred(b), for a predicate false-then-true;
/// hi + 1 if none.
template <typename Pred>
unsigned firstTrue(unsigned lo, unsigned hi, Pred pred) {
  unsigned end = hi + 1;
  while (lo < end) {
    unsigned mid = lo + (end - lo) / 2;
    if (pred(mid))
      end = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/// One min-max table over suffixes: layer j, entry a = the smallest possible
/// max over stages of stageValue for [a, K) in j stages. Instantiated for the
/// compute bottleneck (double, memory-constrained) and for the peak memory
/// (int64, unconstrained; used to explain infeasibility).
template <typename T, typename Traits> class SuffixTable {
public:
  SuffixTable(const Problem &pb, Traits traits) : pb(pb), traits(traits) {
    unsigned k = pb.size();
    std::vector<T> base(k + 1, Traits::infeasible());
    base[k] = T(0);
    layers.push_back(base);
    prefixMin.push_back(prefixMinOf(base));
  }

  unsigned numLayers() const { return unsigned(layers.size()) - 1; }
  const std::vector<T> &layer(unsigned j) const { return layers[j]; }
  const std::vector<T> &layerPrefixMin(unsigned j) const {
    return prefixMin[j];
  }

  /// Extends the table to j stages.
  void growTo(unsigned j) {
    while (numLayers() < j)
      addLayer();
  }

private:
  static std::vector<T> prefixMinOf(const std::vector<T> &v) {
    std::vector<T> m(v.size());
    T run = Traits::infeasible();
    for (size_t i = 0; i < v.size(); ++i)
      m[i] = run = std::min(run, v[i]);
    return m;
  }

  void addLayer() {
    unsigned j = numLayers() + 1, k = pb.size();
    const std::vector<T> &next = layers[j - 1], &nextMin = prefixMin[j - 1];
    std::vector<T> cur(k + 1, Traits::infeasible());
    for (unsigned a = 0; a + j <= k; ++a)
      cur[a] = entry(j, a, next, nextMin);
    layers.push_back(std::move(cur));
    prefixMin.push_back(prefixMinOf(layers.back()));
  }

  /// min over b in [a+1, K-j+1] of max(value(a, b), next[b]).
  T entry(unsigned j, unsigned a, const std::vector<T> &next,
          const std::vector<T> &nextMin) const {
    unsigned k = pb.size();
    if (!traits.startFits(a, j))
      return Traits::infeasible();
    if (j == 1)
      return traits.value(a, k, j);
    unsigned bLo = a + 1, bHi = k - j + 1;
    // value(a, b) >= its lower bound lowerBound(a, b), which is nondecreasing
    // in b; nextMin is nonincreasing. Start where they cross: in the common
    // case (no limit, no send cost) the optimum is next to it.
    unsigned cross = firstTrue(bLo, bHi, [&](unsigned b) {
      return traits.lowerBound(a, b, j) >= nextMin[b];
    });
    unsigned start = std::max(bLo, cross > bLo ? cross - 1 : bLo);
    T best = Traits::infeasible();
    // Right: value(a, b') >= lowerBound(a, b') >= lowerBound(a, b) for b' > b,
    // so once lowerBound reaches best nothing further right can beat it; the
    // memory check is monotone the same way.
    for (unsigned b = start; b <= bHi; ++b) {
      if (traits.lowerBound(a, b, j) >= best || !traits.rangeFits(a, b, j))
        break;
      T v = std::max(traits.value(a, b, j), next[b]);
      best = std::min(best, v);
    }
    // Left: every b' <= b has next[b'] >= nextMin[b].
    for (unsigned b = start; b-- > bLo;) {
      if (nextMin[b] >= best)
        break;
      if (!traits.rangeFits(a, b, j))
        continue;
      T v = std::max(traits.value(a, b, j), next[b]);
      best = std::min(best, v);
    }
    return best;
  }

  const Problem &pb;
  Traits traits;
  std::vector<std::vector<T>> layers, prefixMin;
};

/// Stage value = cost; stages must fit the memory limit.
struct BottleneckTraits {
  const Problem *pb;
  static double infeasible() { return kInf; }
  bool startFits(unsigned a, unsigned j) const {
    return pb->fits(pb->memory(a, a + 1, j));
  }
  bool rangeFits(unsigned a, unsigned b, unsigned j) const {
    return pb->fits(pb->memory(a, b, j));
  }
  double lowerBound(unsigned a, unsigned b, unsigned) const {
    return pb->compute(a, b);
  }
  double value(unsigned a, unsigned b, unsigned j) const {
    return rangeFits(a, b, j) ? pb->cost(a, b) : kInf;
  }
};

/// Stage value = memory; no constraint (finds the smallest peak memory).
struct PeakMemoryTraits {
  const Problem *pb;
  static int64_t infeasible() { return kMaxBytes; }
  bool startFits(unsigned, unsigned) const { return true; }
  bool rangeFits(unsigned, unsigned, unsigned) const { return true; }
  int64_t lowerBound(unsigned a, unsigned b, unsigned j) const {
    return pb->memory(a, b, j);
  }
  int64_t value(unsigned a, unsigned b, unsigned j) const {
    return pb->memory(a, b, j);
  }
};

using BottleneckTable = SuffixTable<double, BottleneckTraits>;
using PeakMemoryTable = SuffixTable<int64_t, PeakMemoryTraits>;

/// Builds the result for a fixed boundary vector.
Partition describe(const Problem &pb, std::vector<unsigned> bounds) {
  Partition p;
  unsigned numStages = unsigned(bounds.size()) - 1;
  for (unsigned s = 0; s < numStages; ++s) {
    unsigned a = bounds[s], b = bounds[s + 1], j = numStages - s;
    double c = pb.cost(a, b);
    p.stageCost.push_back(c);
    p.stageMemoryBytes.push_back(pb.memory(a, b, j));
    p.stageInFlight.push_back(pb.inFlight(j));
    if (s == 0 || c > p.bottleneck) {
      p.bottleneck = c;
      p.bottleneckStage = s;
    }
    p.sumSquares += c * c;
  }
  p.boundaries = std::move(bounds);
  return p;
}

/// The tie-break pass: among partitions into P stages whose stage costs are
/// all <= the optimal bottleneck T (and that fit memory), the one with the
/// smallest sum of squared costs, then the lexicographically smallest
/// boundaries. Only states (j, a) on some feasible path are visited: the
/// bottleneck table says exactly which suffixes can still be finished within
/// T. The workspace is reused across P without clearing (stamps).
class TieBreaker {
public:
  TieBreaker(const Problem &pb, const BottleneckTable &table, unsigned maxP)
      : pb(pb), table(table), width(pb.size() + 1),
        stamp(size_t(maxP + 1) * width, 0), sumSq(stamp.size()),
        choice(stamp.size()), reach(maxP + 1) {}

  std::vector<unsigned> run(unsigned numStages) {
    unsigned k = pb.size(), id = ++runId;
    double t = table.layer(numStages)[0];
    for (auto &r : reach)
      r.clear();
    reach[numStages].push_back(0);
    // Forward: mark every state reachable from (P, 0) on a feasible path.
    for (unsigned j = numStages; j >= 2; --j)
      for (unsigned a : reach[j])
        forEachStep(j, a, t, [&](unsigned b, double) {
          size_t at = index(j - 1, b);
          if (stamp[at] != id) {
            stamp[at] = id;
            reach[j - 1].push_back(b);
          }
        });
    // Backward: smallest sum of squares to finish from each marked state;
    // iterating b upwards with a strict < keeps the smallest b on ties.
    for (unsigned j = 1; j <= numStages; ++j)
      for (unsigned a : reach[j]) {
        size_t at = index(j, a);
        if (j == 1) {
          double c = pb.cost(a, k);
          sumSq[at] = c * c;
          choice[at] = k;
          continue;
        }
        double best = kInf;
        unsigned arg = 0;
        forEachStep(j, a, t, [&](unsigned b, double c) {
          double v = c * c + sumSq[index(j - 1, b)];
          if (v < best) {
            best = v;
            arg = b;
          }
        });
        sumSq[at] = best;
        choice[at] = arg;
      }
    std::vector<unsigned> bounds{0};
    for (unsigned j = numStages, a = 0; j >= 1; --j)
      bounds.push_back(a = choice[index(j, a)]);
    return bounds;
  }

private:
  size_t index(unsigned j, unsigned a) const { return size_t(j) * width + a; }

  /// Calls fn(b, cost) for every end b of a first stage [a, b) of j stages
  /// such that the stage costs <= t, fits memory, and [b, K) can be finished
  /// in j - 1 stages within t (j >= 2).
  template <typename Fn>
  void forEachStep(unsigned j, unsigned a, double t, Fn fn) const {
    const std::vector<double> &next = table.layer(j - 1);
    const std::vector<double> &nextMin = table.layerPrefixMin(j - 1);
    unsigned bHi = pb.size() - j + 1;
    // nextMin is nonincreasing: skip the ends that leave too much behind.
    unsigned b =
        firstTrue(a + 1, bHi, [&](unsigned x) { return nextMin[x] <= t; });
    for (; b <= bHi; ++b) {
      if (pb.compute(a, b) > t || !pb.fits(pb.memory(a, b, j)))
        break;
      double c = pb.cost(a, b);
      if (c <= t && next[b] <= t)
        fn(b, c);
    }
  }

  const Problem &pb;
  const BottleneckTable &table;
  size_t width;
  uint32_t runId = 0;
  std::vector<uint32_t> stamp;
  std::vector<double> sumSq;
  std::vector<unsigned> choice;
  std::vector<std::vector<unsigned>> reach;
};

std::string tooManyStages(unsigned p, unsigned k) {
  return "P = " + std::to_string(p) + " is larger than the " +
         std::to_string(k) + " sections; the maximum is " + std::to_string(k);
}

/// Why no P-stage partition fits: the partition with the smallest peak memory
/// and its worst stage.
std::string explainMemory(const Problem &pb, PeakMemoryTable &peak,
                          unsigned numStages) {
  peak.growTo(numStages);
  unsigned k = pb.size();
  std::vector<unsigned> bounds{0};
  // Reconstruct one minimiser of the peak.
  for (unsigned j = numStages, a = 0; j >= 1; --j) {
    int64_t target = peak.layer(j)[a];
    unsigned bHi = k - j + 1, pick = bHi;
    for (unsigned b = a + 1; b <= bHi; ++b)
      if (std::max(pb.memory(a, b, j), peak.layer(j - 1)[b]) == target) {
        pick = b;
        break;
      }
    bounds.push_back(a = pick);
  }
  unsigned worst = 0;
  int64_t worstBytes = -1;
  for (unsigned s = 0; s < numStages; ++s) {
    int64_t m = pb.memory(bounds[s], bounds[s + 1], numStages - s);
    if (m > worstBytes) {
      worstBytes = m;
      worst = s;
    }
  }
  unsigned a = bounds[worst], b = bounds[worst + 1], j = numStages - worst;
  std::string sections = b - a == 1 ? "section " + std::to_string(a) + " alone"
                                    : "sections [" + std::to_string(a) + ", " +
                                          std::to_string(b) + ")";
  std::string msg =
      "no partition of " + std::to_string(k) + " sections into " +
      std::to_string(numStages) + " stages fits the memory limit of " +
      std::to_string(pb.limit()) +
      " bytes: the partition with the smallest peak still needs " +
      std::to_string(worstBytes) + " bytes on stage " + std::to_string(worst) +
      " (" + sections + ": " + std::to_string(pb.params(a, b)) +
      " bytes of parameter state + " + std::to_string(pb.inFlight(j)) +
      " in-flight x " + std::to_string(pb.activation(a)) +
      " bytes of stashed input), " + std::to_string(worstBytes - pb.limit()) +
      " bytes over the limit";
  return msg;
}

/// The tables for P up to maxP, and the per-P answer.
class Solver {
public:
  Solver(const Problem &pb, unsigned maxP)
      : pb(pb), table(pb, BottleneckTraits{&pb}), tieBreaker(pb, table, maxP) {
    table.growTo(maxP);
  }

  PartitionResult solve(unsigned p) {
    if (p > pb.size())
      return PartitionResult::failure(ErrorKind::TooManyStages,
                                      tooManyStages(p, pb.size()));
    if (table.layer(p)[0] == kInf) {
      if (!peak)
        peak.emplace(pb, PeakMemoryTraits{&pb});
      return PartitionResult::failure(ErrorKind::MemoryInfeasible,
                                      explainMemory(pb, *peak, p));
    }
    return PartitionResult::success(describe(pb, tieBreaker.run(p)));
  }

private:
  const Problem &pb;
  BottleneckTable table;
  TieBreaker tieBreaker;
  std::optional<PeakMemoryTable> peak;
};

} // namespace

std::string Partition::str() const {
  std::string s;
  for (unsigned i = 0; i + 1 < boundaries.size(); ++i)
    s += (i ? " [" : "[") + std::to_string(boundaries[i]) + ", " +
         std::to_string(boundaries[i + 1]) + ")";
  return s + "; bottleneck " + fmt(bottleneck) + " on stage " +
         std::to_string(bottleneckStage);
}

std::vector<PartitionResult>
varuna::plan::partitionAll(const std::vector<Section> &sections,
                           unsigned maxStages,
                           const PartitionOptions &options) {
  std::vector<PartitionResult> results;
  results.reserve(maxStages);
  Problem pb(sections, options);
  std::string invalid = pb.validate();
  if (!invalid.empty()) {
    for (unsigned p = 1; p <= maxStages; ++p)
      results.push_back(
          PartitionResult::failure(ErrorKind::InvalidInput, invalid));
    return results;
  }
  Solver solver(pb, std::min(maxStages, pb.size()));
  for (unsigned p = 1; p <= maxStages; ++p)
    results.push_back(solver.solve(p));
  return results;
}

PartitionResult varuna::plan::partition(const std::vector<Section> &sections,
                                        unsigned numStages,
                                        const PartitionOptions &options) {
  Problem pb(sections, options);
  std::string invalid = pb.validate();
  if (!invalid.empty())
    return PartitionResult::failure(ErrorKind::InvalidInput, invalid);
  if (numStages < 1)
    return PartitionResult::failure(
        ErrorKind::TooFewStages,
        "P = 0 is invalid: a pipeline needs at least 1 stage");
  if (numStages > pb.size())
    return PartitionResult::failure(ErrorKind::TooManyStages,
                                    tooManyStages(numStages, pb.size()));
  // The table is built bottom-up, so one P costs as much as the table for
  // every P up to it; only the tie-break is specific to P.
  Solver solver(pb, numStages);
  return solver.solve(numStages);
}
