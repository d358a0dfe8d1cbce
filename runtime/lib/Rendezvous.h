//===- Rendezvous.h - The job's TCP store (private to the runtime) --------===//
//
// Shared by the Gloo and NCCL transports: rank 0 serves a c10d TCPStore at
// MASTER_ADDR:MASTER_PORT, every rank connects; failures become rt::Error
// naming the address, the rank and the timeout.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_LIB_RENDEZVOUS_H
#define VARUNA_RUNTIME_LIB_RENDEZVOUS_H

#include "varuna/runtime/Check.h"
#include "varuna/runtime/Stop.h"
#include "varuna/runtime/Transport.h"

#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <netdb.h>
#include <thread>
#include <unistd.h>

namespace varuna::rt::detail {

inline std::string seconds(std::chrono::milliseconds t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", t.count() / 1000.0);
  return buf;
}

/// The message of an exception, without c10's backtrace.
inline std::string messageOf(const std::exception &e) {
  std::string m;
  if (auto *ce = dynamic_cast<const c10::Error *>(&e))
    m = ce->what_without_backtrace();
  else
    m = e.what();
  // Gloo's advice after "Connection closed by peer ...": ours is the
  // launcher's line naming the rank that died.
  size_t advice = m.find(" This is typically caused by a remote worker");
  if (advice != std::string::npos)
    m = m.substr(0, advice) + " (that rank is gone)";
  return m;
}

/// Whether a failure is a timeout (its message says so): only then do our
/// errors name the timeout.
inline bool timedOut(const std::string &message) {
  for (const char *w : {"timed out", "Timed out", "timeout", "Timeout"})
    if (message.find(w) != std::string::npos)
      return true;
  return false;
}

/// c10d logs its own warnings and errors when a peer goes away or does not
/// answer (a TCPStore wait that lost its connection, a client that timed
/// out), each with a C++ backtrace of 16-20 frames, ahead of the rt::Error
/// that names the same failure. Only fatal messages are logged, unless the
/// user set TORCH_CPP_LOG_LEVEL (libtorch reads it in Python only).
inline void quietC10Logging() {
  ::setenv("TORCH_CPP_LOG_LEVEL", "FATAL", /*overwrite=*/0);
  c10::initLogging();
}

/// Ends the process with an error if a set-up wait outlives `limit`.
/// c10d's TCPStore client bounds its connect but not every read after it:
/// a store whose server accepted the connection and then froze (rank 0
/// stopped, a stalled host) or another program listening on MASTER_PORT
/// that never answers kept a rank waiting forever, whatever --timeout said.
/// Nothing has trained yet, so nothing is lost; the launcher names the rank.
class SetupDeadline {
public:
  SetupDeadline(std::string what, std::chrono::milliseconds limit)
      : what(std::move(what)), limit(limit),
        watcher([this] { watch(); }) {}
  ~SetupDeadline() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
    }
    wake.notify_all();
    watcher.join();
  }
  SetupDeadline(const SetupDeadline &) = delete;
  SetupDeadline &operator=(const SetupDeadline &) = delete;

private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    if (wake.wait_for(lock, limit, [this] { return done; }))
      return;
    std::string msg = std::string(program_invocation_short_name) +
                      ": error: " + what + ": no answer within " +
                      seconds(limit) + "\n";
    ssize_t ignored = ::write(2, msg.data(), msg.size());
    (void)ignored;
    std::_Exit(1);
  }

  std::string what;
  std::chrono::milliseconds limit;
  std::mutex mutex;
  std::condition_variable wake;
  bool done = false;
  std::thread watcher; // last: started once the rest is set
};

/// How long a set-up step may take in all: c10d's client connects, then
/// validates, each with the timeout; a second more for the rest.
inline std::chrono::milliseconds setupLimit(std::chrono::milliseconds t) {
  return 2 * t + std::chrono::milliseconds(1000);
}

/// Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the store at
/// MASTER_PORT is its agent's, which outlives a restart: every rank is a
/// client, and the keys of restart N live under "/worker/attempt_N/" (as
/// PyTorch's own env:// rendezvous puts them), so that a restarted job does
/// not meet its previous attempt's keys ("rank 0 was started twice").
/// Elsewhere rank 0 serves the store and the prefix is empty.
inline std::string agentStorePrefix() {
  const char *agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (!agent || std::string(agent) != "True")
    return "";
  const char *attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return std::string("/worker/attempt_") + (attempt && *attempt ? attempt : "0");
}

inline c10::intrusive_ptr<c10d::Store>
connectStore(const TransportOptions &o, const char *library) {
  quietC10Logging();
  std::string attemptPrefix = agentStorePrefix();
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(o.masterPort);
  so.isServer = o.rank == 0 && attemptPrefix.empty();
  so.numWorkers = o.worldSize;
  so.timeout = o.timeout;
  so.waitWorkers = true;
  std::string where = o.masterAddr + ":" + std::to_string(o.masterPort);
  // A name that does not resolve: said at once (c10d retried it for the
  // whole timeout, then spoke of a socket that timed out connecting).
  {
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    int rc = ::getaddrinfo(o.masterAddr.c_str(), nullptr, &hints, &res);
    if (rc != 0)
      throw Error(library, "rendezvous at " + where,
                  "MASTER_ADDR '" + o.masterAddr + "' does not resolve: " +
                      ::gai_strerror(rc) + " (rank " + std::to_string(o.rank) +
                      " of " + std::to_string(o.worldSize) + ")",
                  __FILE__, __LINE__);
    ::freeaddrinfo(res);
  }
  WaitingForPeers waiting("rank " + std::to_string(o.rank) +
                          ": rendezvous at " + where);
  SetupDeadline deadline(
      "rank " + std::to_string(o.rank) + " of " +
          std::to_string(o.worldSize) + ": rendezvous at " + where +
          (o.rank == 0 ? std::string()
                       : " (rank 0 serves it: nothing answered there -- "
                         "nothing listens (rank 0 not started, or "
                         "MASTER_ADDR not rank 0's host), rank 0 stopped "
                         "or stalled, or another program on MASTER_PORT)") +
          " (timeout " + seconds(o.timeout) + ", twice that plus 1 s in all)",
      setupLimit(o.timeout));
  c10::intrusive_ptr<c10d::Store> store;
  int64_t joined = 0;
  std::string theirs; // rank 0's WORLD_SIZE, at the other ranks
  try {
    store = c10::make_intrusive<c10d::TCPStore>(o.masterAddr, so);
    if (!attemptPrefix.empty())
      store = c10::make_intrusive<c10d::PrefixStore>(attemptPrefix, store);
    // Each rank joins once: a second process with the same RANK would
    // take the first one's place in the groups' address exchange.
    joined = store->add("varuna/joined/rank" + std::to_string(o.rank), 1);
    // Every rank is started with rank 0's WORLD_SIZE: a rank with another
    // one met the others here and failed a timeout later in words about
    // groups (or, WORLD_SIZE 4 against rank 0's 2, half the ranks trained
    // alone).
    const std::string key = "varuna/world_size";
    if (o.rank == 0) {
      std::string mine = std::to_string(o.worldSize);
      store->set(key, std::vector<uint8_t>(mine.begin(), mine.end()));
    } else {
      std::vector<uint8_t> v = store->get(key);
      theirs.assign(v.begin(), v.end());
    }
  } catch (const std::exception &e) {
    throw Error(library, "rendezvous at " + where,
                messageOf(e) + " (rank " + std::to_string(o.rank) + " of " +
                    std::to_string(o.worldSize) + ", timeout " +
                    seconds(o.timeout) + ")",
                __FILE__, __LINE__);
  }
  if (joined > 1)
    throw Error(library, "rendezvous at " + where,
                "rank " + std::to_string(o.rank) +
                    " was started twice: another process already joined "
                    "as rank " + std::to_string(o.rank) + " of " +
                    std::to_string(o.worldSize) +
                    " (each process needs its own RANK)",
                __FILE__, __LINE__);
  if (o.rank != 0 && theirs != std::to_string(o.worldSize))
    throw Error(library, "rendezvous at " + where,
                "WORLD_SIZE is " + std::to_string(o.worldSize) +
                    " here (rank " + std::to_string(o.rank) + "), " + theirs +
                    " at rank 0: start every rank with the same WORLD_SIZE",
                __FILE__, __LINE__);
  return store;
}

/// This rank's index in a group's `ranks`; throws naming the group if it is
/// not a member.
inline int memberIndex(const std::vector<int> &ranks, int rank,
                       const char *library, const std::string &group) {
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == rank)
      return static_cast<int>(i);
  throw Error(library, "group '" + group + "'",
              "rank " + std::to_string(rank) + " is not a member", __FILE__,
              __LINE__);
}

} // namespace varuna::rt::detail

#endif // VARUNA_RUNTIME_LIB_RENDEZVOUS_H
