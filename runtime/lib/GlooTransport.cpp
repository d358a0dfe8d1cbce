//===- GlooTransport.cpp - Transport over Gloo (c10d) ---------------------===//
//
// Gloo through libtorch's c10d: TCPStore for the rendezvous, one
// ProcessGroupGloo per group (a PrefixStore keeps their keys apart).
//
//===----------------------------------------------------------------------===//

#include "Rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

namespace varuna::rt {

namespace {

std::string envString(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  if (v && *v)
    return v;
  if (fallback)
    return fallback;
  throw Error("environment", name, "is not set", __FILE__, __LINE__);
}

int envInt(const char *name, const char *fallback) {
  std::string s = envString(name, fallback);
  try {
    size_t used = 0;
    int v = std::stoi(s, &used);
    if (used == s.size())
      return v;
  } catch (const std::exception &) {
  }
  throw Error("environment", name, "is not an integer: '" + s + "'", __FILE__,
              __LINE__);
}

/// What a timed-out collective or receive adds to its cause: a link too
/// slow for the timeout looks the same as a peer that is gone.
constexpr const char *kSlowLinkHint =
    ", or the link is too slow to carry it in that time (raise --timeout)";

/// Waits for a c10d work item, turning every failure into rt::Error.
void waitWork(const c10::intrusive_ptr<c10d::Work> &work,
              const std::string &what, std::chrono::milliseconds timeout) {
  try {
    if (!work->wait(timeout))
      throw std::runtime_error("timed out");
  } catch (const std::exception &e) {
    std::string m = detail::messageOf(e);
    // A collective does not say which member failed to take part; at
    // least say that one did (a send or receive names its peer).
    bool collective =
        what.rfind("allreduce", 0) == 0 || what.rfind("barrier", 0) == 0;
    throw Error("Gloo", what,
                detail::timedOut(m)
                    ? m + " (timeout " + detail::seconds(timeout) + ")" +
                          (collective
                               ? ": a rank of the group did not take part "
                                 "in time (stopped, gone, or cut off from "
                                 "this host)" +
                                 std::string(kSlowLinkHint)
                               : "")
                    : m,
                __FILE__, __LINE__);
  }
}

/// One or more c10d work items waited as one.
class GlooPending : public Pending {
public:
  GlooPending(std::vector<c10::intrusive_ptr<c10d::Work>> w, std::string what,
              std::chrono::milliseconds timeout)
      : works(std::move(w)), what(std::move(what)), timeout(timeout) {}
  GlooPending(c10::intrusive_ptr<c10d::Work> w, std::string what,
              std::chrono::milliseconds timeout)
      : GlooPending(std::vector<c10::intrusive_ptr<c10d::Work>>{std::move(w)},
                    std::move(what), timeout) {}
  void wait() override {
    for (auto &w : works)
      waitWork(w, what, timeout);
    works.clear();
  }
  bool test() override {
    for (auto &w : works)
      if (!w->isCompleted())
        return false;
    return true;
  }

private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::string what;
  std::chrono::milliseconds timeout;
};

/// A receive whose arrival test() can see. c10d's Gloo recv work says it is
/// completed only once waited (Work::isCompleted is not overridden: the
/// data may have landed long before), so the pipeline's readiness test
/// (Varuna's run-time deviation) saw no message before waiting for it, and
/// deviated from the schedule whatever had arrived. The first test()
/// starts a thread that waits for the work, unbounded, and flags it;
/// wait() waits for that flag under the timeout (the same bound as a
/// direct wait) and aborts the work when it runs out. Without a test() it
/// is a plain wait, no thread.
class GlooRecvPending : public Pending {
public:
  GlooRecvPending(c10::intrusive_ptr<c10d::Work> w, std::string what,
                  std::chrono::milliseconds timeout)
      : work(std::move(w)), what(std::move(what)), timeout(timeout) {}
  ~GlooRecvPending() override { stopWatching(); }

  void wait() override {
    if (!watcher.joinable()) {
      if (work) // not waited yet
        waitWork(std::exchange(work, {}), what, timeout);
      return;
    }
    bool ok;
    {
      std::unique_lock<std::mutex> lock(mutex);
      ok = arrivedCv.wait_for(lock, timeout, [&] { return done; });
    }
    if (!ok) {
      stopWatching();
      throw Error("Gloo", what,
                  "Timed out waiting for the message (timeout " +
                      detail::seconds(timeout) +
                      "): the sender stopped or is cut off from this host" +
                      kSlowLinkHint,
                  __FILE__, __LINE__);
    }
    watcher.join();
    work.reset();
    if (error)
      std::rethrow_exception(std::exchange(error, nullptr));
  }
  bool test() override {
    if (!work)
      return true;
    if (!watcher.joinable())
      watcher = std::thread([this] {
        std::exception_ptr e;
        try {
          // Unbounded here (a day): wait() bounds the waiting.
          waitWork(work, what, std::chrono::hours(24));
        } catch (...) {
          e = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(mutex);
        error = e;
        done = true;
        arrivedCv.notify_all();
      });
    std::lock_guard<std::mutex> lock(mutex);
    return done;
  }

private:
  /// Ends the watching thread: the work aborted if it is still waiting.
  void stopWatching() {
    if (!watcher.joinable())
      return;
    bool finished;
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished = done;
    }
    if (!finished)
      work->abort(); // its waitRecv returns
    watcher.join();
  }

  c10::intrusive_ptr<c10d::Work> work;
  std::string what;
  std::chrono::milliseconds timeout;
  std::thread watcher;
  std::mutex mutex;
  std::condition_variable arrivedCv;
  bool done = false;
  std::exception_ptr error;
};

class GlooGroup : public Group {
public:
  GlooGroup(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, std::string name,
            int rank, int size, std::chrono::milliseconds timeout)
      : pg(std::move(pg)), name(std::move(name)), rank_(rank), size_(size),
        timeout(timeout) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduceSum(std::vector<at::Tensor> &tensors) override {
    allreduceSumAsync(tensors)->wait();
  }
  std::unique_ptr<Pending>
  allreduceSumAsync(std::vector<at::Tensor> &tensors) override {
    // c10d's multi-tensor allreduce means one tensor per device: one work
    // item per tensor, queued in order.
    std::string what = "allreduce over group '" + name + "'";
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    if (size_ > 1)
      for (at::Tensor &t : tensors) {
        std::vector<at::Tensor> one{t};
        try {
          works.push_back(pg->allreduce(one));
        } catch (const std::exception &e) {
          throw Error("Gloo", what, detail::messageOf(e), __FILE__, __LINE__);
        }
      }
    return std::make_unique<GlooPending>(std::move(works), what, timeout);
  }
  void barrier() override {
    if (size_ > 1)
      waitWork(pg->barrier(), "barrier of group '" + name + "'", timeout);
  }

private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::string name;
  int rank_, size_;
  std::chrono::milliseconds timeout;
};

/// The local address this host reaches `host` from: a UDP socket
/// "connected" to it (no packet is sent) is bound by the kernel to the
/// source address of the route. Empty if `host` does not resolve.
/// `resolved` (if given) gets `host`'s own address.
std::string localAddressTowards(const std::string &host, int port,
                                std::string *resolved = nullptr) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) ||
      !res)
    return "";
  std::string out;
  if (resolved) {
    char buf[INET_ADDRSTRLEN];
    const auto *in = reinterpret_cast<const sockaddr_in *>(res->ai_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf))
      *resolved = buf;
  }
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char buf[INET_ADDRSTRLEN];
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf))
      out = buf;
  }
  if (fd >= 0)
    close(fd);
  freeaddrinfo(res);
  return out;
}

/// Whether the interface `name` is a loopback one (false if unknown).
bool isLoopbackInterface(const std::string &name) {
  ifaddrs *all = nullptr;
  if (getifaddrs(&all) != 0)
    return false;
  bool loopback = false;
  for (ifaddrs *i = all; i; i = i->ifa_next)
    if (i->ifa_name && name == i->ifa_name && (i->ifa_flags & IFF_LOOPBACK))
      loopback = true;
  freeifaddrs(all);
  return loopback;
}

/// The Gloo devices (the addresses this rank's peers connect to):
/// GLOO_SOCKET_IFNAME names an interface, or several separated by commas (as
/// in PyTorch: the traffic is spread over them; a list was refused as one
/// interface named "eth0,lo"); else the address this host reaches
/// MASTER_ADDR from -- the loopback when the job is on this machine, this
/// host's own address on the route to rank 0 otherwise (binding to
/// MASTER_ADDR itself, as we once did, fails on any other host or network
/// namespace).
std::vector<std::shared_ptr<::gloo::transport::Device>>
makeDevices(const TransportOptions &o) {
  std::string what = "choosing the network interface";
  try {
    std::string host = o.masterAddr == "localhost" ? "127.0.0.1" : o.masterAddr;
    std::string master;
    std::string local = localAddressTowards(host, o.masterPort, &master);
    if (const char *names = std::getenv("GLOO_SOCKET_IFNAME"); names && *names) {
      std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
      std::string list = names;
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        std::string ifname = list.substr(
            start, comma == std::string::npos ? std::string::npos
                                              : comma - start);
        start = comma == std::string::npos ? list.size() + 1 : comma + 1;
        if (ifname.empty())
          continue;
        // The loopback while rank 0 seems to be on another host (the route
        // to it leaves from another of this host's addresses): this rank
        // would offer its peers 127.0.0.1, and they would connect to
        // themselves. A warning, not an error: MASTER_ADDR may be a
        // service address of this very host (a container's), where lo
        // works.
        if (isLoopbackInterface(ifname) && !local.empty() && local != master &&
            local.rfind("127.", 0) != 0) {
          std::string msg =
              "warning: rank " + std::to_string(o.rank) +
              ": GLOO_SOCKET_IFNAME=" + names +
              (ifname == list ? std::string(" is")
                              : ": " + ifname + " is") +
              " the loopback interface, but MASTER_ADDR '" + o.masterAddr +
              "' looks like another host (reached from " + local +
              "): ranks on other hosts cannot connect to this one over it; "
              "if the run times out connecting, name the interface towards "
              "them or unset GLOO_SOCKET_IFNAME\n";
          std::fputs(msg.c_str(), stderr);
        }
        what = "choosing the network interface '" + ifname +
               "' (GLOO_SOCKET_IFNAME=" + names + ")";
        devices.push_back(
            c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      }
      if (devices.empty())
        throw std::runtime_error("GLOO_SOCKET_IFNAME='" + list +
                                 "' names no interface");
      return devices;
    }
    if (local.empty())
      throw std::runtime_error("MASTER_ADDR '" + o.masterAddr +
                               "' does not resolve to an IPv4 address");
    return {c10d::ProcessGroupGloo::createDeviceForHostname(local)};
  } catch (const std::exception &e) {
    throw Error("Gloo", what, detail::messageOf(e), __FILE__, __LINE__);
  }
}

class GlooTransport : public Transport {
public:
  explicit GlooTransport(const TransportOptions &o) : options(o) {
    store = detail::connectStore(o, "Gloo");
    devices = makeDevices(o);
    std::vector<int> all(o.worldSize);
    for (int i = 0; i < o.worldSize; ++i)
      all[i] = i;
    worldPg = makePg("world", o.rank, o.worldSize);
    worldGroup = std::make_unique<GlooGroup>(worldPg, "world", o.rank,
                                             o.worldSize, o.timeout);
  }

  int rank() const override { return options.rank; }
  int size() const override { return options.worldSize; }
  std::chrono::milliseconds timeout() const override { return options.timeout; }

  std::unique_ptr<Pending> send(const at::Tensor &tensor, int dst,
                                int tag) override {
    std::vector<at::Tensor> v{tensor};
    std::string what = "send to rank " + std::to_string(dst) + " (" +
                       describeTag(options, tag) + ")";
    try {
      return std::make_unique<GlooPending>(worldPg->send(v, dst, tag), what,
                                           options.timeout);
    } catch (const std::exception &e) {
      throw Error("Gloo", what, e.what(), __FILE__, __LINE__);
    }
  }
  std::unique_ptr<Pending> recv(at::Tensor &tensor, int src,
                                int tag) override {
    std::vector<at::Tensor> v{tensor};
    std::string what = "recv from rank " + std::to_string(src) + " (" +
                       describeTag(options, tag) + ")";
    try {
      return std::make_unique<GlooRecvPending>(worldPg->recv(v, src, tag),
                                               what, options.timeout);
    } catch (const std::exception &e) {
      throw Error("Gloo", what, e.what(), __FILE__, __LINE__);
    }
  }
  Group &world() override { return *worldGroup; }
  std::unique_ptr<Group>
  group(const std::string &name, const std::vector<int> &ranks,
        std::optional<std::chrono::milliseconds> timeout) override {
    int me = detail::memberIndex(ranks, options.rank, "Gloo", name);
    int n = static_cast<int>(ranks.size());
    std::chrono::milliseconds t = timeout.value_or(options.timeout);
    auto pg = n > 1 ? makePg("group/" + name, me, n, t) : nullptr;
    return std::make_unique<GlooGroup>(pg, name, me, n, t);
  }

private:
  /// `timeout` bounds its collectives; connecting it, the transport's.
  c10::intrusive_ptr<c10d::ProcessGroupGloo>
  makePg(const std::string &prefix, int rank, int size,
         std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->devices = devices;
    opts->timeout = timeout.value_or(options.timeout);
    opts->threads = 2;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
    WaitingForPeers waiting("rank " + std::to_string(options.rank) +
                            ": connecting group '" + prefix + "'");
    detail::SetupDeadline deadline(
        "rank " + std::to_string(options.rank) + " of " +
            std::to_string(options.worldSize) + ": connecting group '" +
            prefix + "' (timeout " + detail::seconds(options.timeout) +
            ", twice that plus 1 s in all)",
        detail::setupLimit(options.timeout));
    try {
      return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size,
                                                         opts);
    } catch (const std::exception &e) {
      std::string m = detail::messageOf(e);
      throw Error("Gloo", "connecting group '" + prefix + "'",
                  m + " (rank " + std::to_string(options.rank) + " of " +
                      std::to_string(options.worldSize) +
                      (detail::timedOut(m)
                           ? ", timeout " + detail::seconds(options.timeout)
                           : std::string()) +
                      ")",
                  __FILE__, __LINE__);
    }
  }

  TransportOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> worldPg;
  std::unique_ptr<GlooGroup> worldGroup;
};

} // namespace

TransportOptions transportOptionsFromEnv() {
  TransportOptions o;
  o.masterAddr = envString("MASTER_ADDR", "127.0.0.1");
  o.masterPort = envInt("MASTER_PORT", nullptr);
  o.rank = envInt("RANK", nullptr);
  o.worldSize = envInt("WORLD_SIZE", nullptr);
  if (o.worldSize < 1 || o.rank < 0 || o.rank >= o.worldSize)
    throw Error("environment", "RANK/WORLD_SIZE",
                "RANK " + std::to_string(o.rank) + " is not in [0, WORLD_SIZE " +
                    std::to_string(o.worldSize) + ")",
                __FILE__, __LINE__);
  if (o.masterPort < 1 || o.masterPort > 65535)
    throw Error("environment", "MASTER_PORT",
                "is not a port: " + std::to_string(o.masterPort), __FILE__,
                __LINE__);
  return o;
}

std::unique_ptr<Transport> connectGloo(const TransportOptions &options) {
  return std::make_unique<GlooTransport>(options);
}

} // namespace varuna::rt
