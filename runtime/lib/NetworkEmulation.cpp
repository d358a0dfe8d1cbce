//===- NetworkEmulation.cpp - Delay, jitter and bandwidth for sends -------===//
//
// A decorator over any Transport: sends are queued with a due time and
// posted by one background thread when due; receives pass straight through.
// A send's Pending waits until it was posted, then for the inner send. The
// per-rank generator is seeded, so a run's delays repeat. Collectives (when
// emulated) start at once and their Pending also waits for a due time.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Check.h"
#include "varuna/runtime/Transport.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace varuna::rt {

namespace {

using Clock = std::chrono::steady_clock;

struct DelayedSend {
  std::mutex mutex;
  std::condition_variable posted;
  bool done = false;
  std::string error;
  std::unique_ptr<Pending> inner;
};

class DelayedPending : public Pending {
public:
  DelayedPending(std::shared_ptr<DelayedSend> s,
                 std::chrono::milliseconds timeout)
      : send(std::move(s)), timeout(timeout) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(send->mutex);
    // The emulated delay comes on top of the transport's timeout.
    if (!send->posted.wait_for(lock, timeout + std::chrono::minutes(1),
                               [&] { return send->done; }))
      throw Error("emulation", "delayed send", "never posted", __FILE__,
                  __LINE__);
    if (!send->error.empty())
      throw Error("emulation", "delayed send", send->error, __FILE__,
                  __LINE__);
    std::unique_ptr<Pending> p = std::move(send->inner);
    lock.unlock();
    if (p)
      p->wait();
  }
  bool test() override {
    std::lock_guard<std::mutex> lock(send->mutex);
    return send->done && (!send->inner || send->inner->test());
  }

private:
  std::shared_ptr<DelayedSend> send;
  std::chrono::milliseconds timeout;
};

/// A collective that may not be seen done before `due`.
class DueCollective : public Pending {
public:
  DueCollective(std::unique_ptr<Pending> inner, Clock::time_point due)
      : inner(std::move(inner)), due(due) {}
  void wait() override {
    inner->wait();
    std::this_thread::sleep_until(due);
  }
  bool test() override { return inner->test() && Clock::now() >= due; }

private:
  std::unique_ptr<Pending> inner;
  Clock::time_point due;
};

/// A group whose all-reduces take at least the emulated link's time: their
/// traffic is serialized on the rank's link (shared by all its groups),
/// the latency comes on top.
class EmulatedGroup : public Group {
public:
  EmulatedGroup(Group &inner, const NetworkEmulation &e,
                std::shared_ptr<Clock::time_point> link)
      : inner(inner), e(e), linkBusy(std::move(link)) {}
  int rank() const override { return inner.rank(); }
  int size() const override { return inner.size(); }
  void allreduceSum(std::vector<at::Tensor> &tensors) override {
    allreduceSumAsync(tensors)->wait();
  }
  std::unique_ptr<Pending>
  allreduceSumAsync(std::vector<at::Tensor> &tensors) override {
    double bytes = 0;
    for (const at::Tensor &t : tensors)
      bytes += double(t.numel() * t.element_size());
    int n = inner.size();
    double traffic = n > 1 && e.bandwidthBytesPerS > 0
                         ? 1000.0 * 2 * (n - 1) / n * bytes / e.bandwidthBytesPerS
                         : 0;
    double latency = n > 1 ? e.latencyMs : 0;
    auto us = [](double ms) {
      return std::chrono::microseconds(int64_t(ms * 1000));
    };
    Clock::time_point start = std::max(Clock::now(), *linkBusy);
    *linkBusy = start + us(traffic);
    return std::make_unique<DueCollective>(inner.allreduceSumAsync(tensors),
                                           *linkBusy + us(latency));
  }
  void barrier() override { inner.barrier(); }

private:
  Group &inner;
  NetworkEmulation e;
  std::shared_ptr<Clock::time_point> linkBusy;
};

/// Owns the inner group it wraps.
class OwningEmulatedGroup : public EmulatedGroup {
public:
  OwningEmulatedGroup(std::unique_ptr<Group> g, const NetworkEmulation &e,
                      std::shared_ptr<Clock::time_point> link)
      : EmulatedGroup(*g, e, std::move(link)), owned(std::move(g)) {}

private:
  std::unique_ptr<Group> owned;
};

class EmulatedTransport : public Transport {
public:
  EmulatedTransport(std::unique_ptr<Transport> inner, NetworkEmulation e)
      : inner(std::move(inner)), emulation(e),
        rng(e.seed * 1000003ULL + static_cast<uint64_t>(this->inner->rank())),
        poster([this] { run(); }) {}
  ~EmulatedTransport() override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    poster.join();
  }

  int rank() const override { return inner->rank(); }
  int size() const override { return inner->size(); }
  std::chrono::milliseconds timeout() const override {
    return inner->timeout();
  }
  Group &world() override {
    if (!emulation.collectives)
      return inner->world();
    if (!worldGroup)
      worldGroup =
          std::make_unique<EmulatedGroup>(inner->world(), emulation, link);
    return *worldGroup;
  }
  std::unique_ptr<Group>
  group(const std::string &name, const std::vector<int> &ranks,
        std::optional<std::chrono::milliseconds> timeout) override {
    if (!emulation.collectives)
      return inner->group(name, ranks, timeout);
    return std::make_unique<OwningEmulatedGroup>(
        inner->group(name, ranks, timeout), emulation, link);
  }
  std::unique_ptr<Pending> recv(at::Tensor &tensor, int src,
                                int tag) override {
    return inner->recv(tensor, src, tag);
  }
  std::unique_ptr<Pending> send(const at::Tensor &tensor, int dst,
                                int tag) override {
    auto s = std::make_shared<DelayedSend>();
    std::lock_guard<std::mutex> lock(mutex);
    double ms = emulation.latencyMs;
    if (emulation.jitterMs > 0)
      ms += std::uniform_real_distribution<double>(-emulation.jitterMs,
                                                   emulation.jitterMs)(rng);
    if (emulation.bandwidthBytesPerS > 0)
      ms += 1000.0 * double(tensor.numel() * tensor.element_size()) /
            emulation.bandwidthBytesPerS;
    // A link delivers in order: never before the previous send to dst.
    Clock::time_point due =
        Clock::now() + std::chrono::microseconds(
                           static_cast<int64_t>(std::max(0.0, ms) * 1000));
    Clock::time_point &last = lastDue[dst];
    due = std::max(due, last);
    last = due;
    queue.emplace(due, Item{s, tensor, dst, tag});
    wake.notify_all();
    return std::make_unique<DelayedPending>(s, inner->timeout());
  }

private:
  struct Item {
    std::shared_ptr<DelayedSend> send;
    at::Tensor tensor;
    int dst, tag;
  };

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      if (stopping && queue.empty())
        return;
      if (queue.empty()) {
        wake.wait(lock);
        continue;
      }
      auto it = queue.begin();
      if (Clock::now() < it->first) {
        wake.wait_until(lock, it->first);
        continue;
      }
      Item item = std::move(it->second);
      queue.erase(it);
      lock.unlock();
      std::unique_ptr<Pending> p;
      std::string error;
      try {
        p = inner->send(item.tensor, item.dst, item.tag);
      } catch (const std::exception &e) {
        error = e.what();
      }
      {
        std::lock_guard<std::mutex> g(item.send->mutex);
        item.send->inner = std::move(p);
        item.send->error = error;
        item.send->done = true;
      }
      item.send->posted.notify_all();
      lock.lock();
    }
  }

  std::unique_ptr<Transport> inner;
  NetworkEmulation emulation;
  std::unique_ptr<EmulatedGroup> worldGroup;
  // When the rank's link is free of collective traffic (all its groups).
  std::shared_ptr<Clock::time_point> link =
      std::make_shared<Clock::time_point>();
  std::mt19937_64 rng;
  std::mutex mutex;
  std::condition_variable wake;
  std::multimap<Clock::time_point, Item> queue;
  std::map<int, Clock::time_point> lastDue;
  bool stopping = false;
  std::thread poster;
};

} // namespace

std::unique_ptr<Transport> emulateNetwork(std::unique_ptr<Transport> inner,
                                          const NetworkEmulation &emulation) {
  if (!emulation.enabled())
    return inner;
  return std::make_unique<EmulatedTransport>(std::move(inner), emulation);
}

} // namespace varuna::rt
