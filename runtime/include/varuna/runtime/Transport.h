//===- Transport.h - How ranks exchange tensors -----------------*- C++ -*-===//
//
// The one small interface the pipeline runtime talks through; the schedule,
// bucketing and synchronization logic above it is the same for every
// backend. Torch-facing (at::Tensor).
//
//  * Rendezvous through a TCP store at MASTER_ADDR:MASTER_PORT (rank 0
//    serves it), the variables torchrun and SLURM set, so ranks can be
//    started by varuna-run, torchrun or srun alike.
//  * Point-to-point send/recv are asynchronous: they return a Pending whose
//    wait() blocks at most the transport's timeout.
//  * Collectives run over groups (the world, or a named subset of ranks
//    that every member creates in the same order).
//  * Every failure -- a peer that is gone, a timeout, a size mismatch --
//    throws rt::Error naming the operation, the peer and the timeout; a rank
//    never hangs past its timeout.
//
// Backends: Gloo over TCP (connectGloo; CPU tensors) -- Gloo as bundled in
// libtorch (c10d's ProcessGroupGloo and TCPStore), because the system
// libgloo in the same process as libtorch_cpu would interpose on libtorch's
// own, newer Gloo symbols. NCCL (GPU) implements the same interface when
// CUDA is found.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_TRANSPORT_H
#define VARUNA_RUNTIME_TRANSPORT_H

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace varuna::rt {

struct TransportOptions {
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  int rank = 0;
  int worldSize = 1;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// What a point-to-point tag carries, for messages (the pipeline's
  /// "activation 0 of micro-batch 3"); unset: "tag N".
  std::function<std::string(int)> describeTag;
};

/// `options.describeTag(tag)`, or "tag N" without one.
inline std::string describeTag(const TransportOptions &options, int tag) {
  return options.describeTag ? options.describeTag(tag)
                             : "tag " + std::to_string(tag);
}

/// Reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE (missing or malformed
/// ones are an error naming the variable).
TransportOptions transportOptionsFromEnv();

class Pending {
public:
  virtual ~Pending() = default;
  /// Blocks until done; throws rt::Error on failure or timeout.
  virtual void wait() = 0;
  /// Whether it is done (a failure counts as done: wait() throws it).
  /// Never blocks; what the schedule's run-time deviation asks.
  virtual bool test() = 0;
};

class Group {
public:
  virtual ~Group() = default;
  virtual int rank() const = 0; ///< this rank's index in the group
  virtual int size() const = 0;
  /// In-place element-wise sum over the group's ranks.
  virtual void allreduceSum(std::vector<at::Tensor> &tensors) = 0;
  /// The same, started in the background: the tensors must stay alive and
  /// untouched until the Pending is waited. Every member must start the
  /// group's collectives in the same order (they match by order).
  virtual std::unique_ptr<Pending>
  allreduceSumAsync(std::vector<at::Tensor> &tensors) = 0;
  virtual void barrier() = 0;
};

class Transport {
public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  /// `tensor` must stay alive and unchanged until the Pending is waited.
  virtual std::unique_ptr<Pending> send(const at::Tensor &tensor, int dst,
                                        int tag) = 0;
  /// Receives into `tensor` (its size must match what the peer sends).
  virtual std::unique_ptr<Pending> recv(at::Tensor &tensor, int src,
                                        int tag) = 0;
  /// All ranks.
  virtual Group &world() = 0;
  /// The group of `ranks` (this rank among them); every member calls this
  /// with the same name and ranks, in the same order relative to its other
  /// group() calls. Its collectives wait at most `timeout` (default: the
  /// transport's; connecting it is bounded by the transport's).
  virtual std::unique_ptr<Group>
  group(const std::string &name, const std::vector<int> &ranks,
        std::optional<std::chrono::milliseconds> timeout = std::nullopt) = 0;
};

/// Connects to the job's store and its peers over TCP (Gloo).
std::unique_ptr<Transport> connectGloo(const TransportOptions &options);

/// Connects over NCCL (GPU tensors; device LOCAL_RANK modulo the devices).
/// Throws rt::Error in a build without NCCL or on a machine without GPUs.
std::unique_ptr<Transport> connectNccl(const TransportOptions &options);

/// Network emulation for tests and benchmarks (this machine's kernel has no
/// netem): every point-to-point send is held back by
/// latency + uniform(-jitter, +jitter) + bytes / bandwidth before it is
/// handed to the transport, from a generator seeded with seed + rank.
/// Off when all are zero. With `collectives`, an all-reduce over a group of
/// n also has traffic 2 (n-1)/n x bytes / bandwidth (a ring's, per rank)
/// on the rank's link, after the traffic of its earlier all-reduces (every
/// group of the rank shares the link), and completes no sooner than its
/// traffic is through plus the latency; no jitter. Otherwise collectives
/// are not delayed. Only timing changes, never results.
struct NetworkEmulation {
  double latencyMs = 0;
  double jitterMs = 0;
  double bandwidthBytesPerS = 0; ///< 0: unlimited
  uint64_t seed = 0;
  bool collectives = false;
  bool enabled() const {
    return latencyMs > 0 || jitterMs > 0 || bandwidthBytesPerS > 0;
  }
};

/// Wraps `inner` so that its sends are delayed as `emulation` says.
std::unique_ptr<Transport> emulateNetwork(std::unique_ptr<Transport> inner,
                                          const NetworkEmulation &emulation);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_TRANSPORT_H
