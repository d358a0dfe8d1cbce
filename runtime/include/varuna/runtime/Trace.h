//===- Trace.h - Timeline of a rank, Chrome-trace JSON ----------*- C++ -*-===//
//
// Each rank records spans (forward, recompute, backward, receive waits,
// all-reduces, optimizer) with the machine's monotonic clock, so the spans of
// the ranks of one machine line up. The rank writes them as a Chrome-trace /
// Perfetto JSON file (one "process" per rank, named "stage s / replica r",
// one "thread" per lane: compute, communication, background all-reduces);
// mergeTraces joins the ranks' files into the job's timeline -- the paper's
// Gantt chart (Fig. 7).
// Torch-free.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_TRACE_H
#define VARUNA_RUNTIME_TRACE_H

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace varuna::rt {

class Trace {
public:
  using Clock = std::chrono::steady_clock;
  /// Background all-reduces (gradient buckets) overlap the other two.
  enum Lane : int { Compute = 0, Comm = 1, AllReduce = 2 };

  explicit Trace(bool enabled = false) : enabled(enabled) {}
  bool isEnabled() const { return enabled; }

  /// The training step the spans recorded from now on belong to (its
  /// validation pass included): written as their "step" argument, which
  /// `python -m varuna.trace --steps` selects by. Negative: none.
  void setStep(int64_t s) { step = s; }

  /// Records only the spans of steps `first`..`last` (inclusive) from now
  /// on (and those of no step): a long run's trace grows by some KB per
  /// step and rank, in memory until the end.
  void keepSteps(int64_t first, int64_t last) {
    keepFirst = first;
    keepLast = last;
  }

  /// Records [start, end) on `lane`; `args` is a JSON object body or empty.
  void span(const std::string &name, Lane lane, Clock::time_point start,
            Clock::time_point end, const std::string &args = "");

  /// Times a scope: `auto s = trace.scope("F3", Trace::Compute);`.
  class Scope {
  public:
    Scope(Trace &t, std::string name, Lane lane)
        : trace(t), name(std::move(name)), lane(lane), start(Clock::now()) {}
    ~Scope() {
      if (trace.isEnabled())
        trace.span(name, lane, start, Clock::now());
    }

  private:
    Trace &trace;
    std::string name;
    Lane lane;
    Clock::time_point start;
  };
  Scope scope(std::string name, Lane lane) {
    return Scope(*this, std::move(name), lane);
  }

  /// Writes the spans as a Chrome-trace JSON file; throws std::runtime_error
  /// when the file cannot be written.
  void write(const std::string &path, int pid,
             const std::string &processName) const;

  size_t size() const { return events.size(); }

private:
  struct Event {
    std::string name, args;
    int lane;
    int64_t ts, dur; // microseconds
    int64_t step;
  };
  bool enabled;
  int64_t step = -1;
  int64_t keepFirst = 0, keepLast = INT64_MAX;
  std::vector<Event> events;
};

/// Joins Chrome-trace files written by Trace::write into `out` (events of
/// all, times relative to the earliest event). Throws std::runtime_error
/// naming a file that is missing or malformed.
void mergeTraces(const std::vector<std::string> &inputs, const std::string &out);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_TRACE_H
