//===- NcclTransport.cpp - Transport over NCCL (GPU) ----------------------===//
//
// Compiled whenever CUDA and NCCL are found (VARUNA_HAVE_NCCL); never run on
// this project's CPU machines. The same Transport interface as Gloo, so the
// pipeline's schedule, headers, bucketing and reductions are shared code.
//
//  * Rendezvous: the job's TCP store (Rendezvous.h); rank 0 of each group
//    publishes the group's ncclUniqueId under "nccl/<group>".
//  * One CUDA stream per communicator; every call is checked
//    (VARUNA_CHECK_NCCL / VARUNA_CHECK_CUDA: call, file, line, the
//    library's error string).
//  * Every wait polls a CUDA event and ncclCommGetAsyncError until the
//    transport's timeout, then aborts the communicator (ncclCommAbort) and
//    throws: a dead peer never hangs a rank.
//  * NCCL has no message tags: sends and receives between two ranks match
//    in order. The pipeline posts them in the same order on both sides
//    (micro-batches in increasing order per direction) and checks every
//    payload's header, so a mismatch is reported, not absorbed.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Transport.h"

#ifdef VARUNA_HAVE_NCCL

#include "Rendezvous.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>
#include <thread>

namespace varuna::rt {

namespace {

ncclDataType_t ncclType(at::ScalarType t) {
  switch (t) {
  case at::kFloat: return ncclFloat32;
  case at::kDouble: return ncclFloat64;
  case at::kHalf: return ncclFloat16;
  case at::kBFloat16: return ncclBfloat16;
  case at::kLong: return ncclInt64;
  case at::kInt: return ncclInt32;
  case at::kChar: return ncclInt8;
  case at::kByte:
  case at::kBool: return ncclUint8;
  default:
    throw Error("NCCL", "dtype", std::string("unsupported tensor type ") +
                                     c10::toString(t),
                __FILE__, __LINE__);
  }
}

/// One communicator with its stream.
struct Comm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::chrono::milliseconds timeout;
  std::string name;

  /// Waits for `event` (recorded on the stream after an operation).
  void wait(cudaEvent_t event, const std::string &what) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      cudaError_t q = cudaEventQuery(event);
      if (q == cudaSuccess)
        break;
      if (q != cudaErrorNotReady)
        VARUNA_CHECK_CUDA(q);
      ncclResult_t async = ncclSuccess;
      VARUNA_CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comm);
        throw Error("NCCL", what, ncclGetErrorString(async), __FILE__,
                    __LINE__);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm);
        throw Error("NCCL", what,
                    "timed out after " + detail::seconds(timeout) +
                        "; communicator '" + name + "' aborted",
                    __FILE__, __LINE__);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    VARUNA_CHECK_CUDA(cudaEventDestroy(event));
  }
  /// Makes the communicator's stream wait for the work already queued on
  /// the device's default stream (where ATen computes the tensors we send
  /// or reduce): without it NCCL could read a tensor still being written.
  void follow() {
    cudaEvent_t e;
    VARUNA_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    VARUNA_CHECK_CUDA(cudaEventRecord(e, cudaStreamLegacy));
    VARUNA_CHECK_CUDA(cudaStreamWaitEvent(stream, e, 0));
    VARUNA_CHECK_CUDA(cudaEventDestroy(e));
  }
  cudaEvent_t record() {
    cudaEvent_t e;
    VARUNA_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    VARUNA_CHECK_CUDA(cudaEventRecord(e, stream));
    return e;
  }
};

Comm connect(c10d::Store &store, const std::string &name, int rank, int size,
             std::chrono::milliseconds timeout) {
  // ncclCommInitRank waits for every member too.
  WaitingForPeers waiting("member " + std::to_string(rank) + " of group '" +
                          name + "': connecting");
  ncclUniqueId id;
  std::string key = "nccl/" + name;
  if (rank == 0) {
    VARUNA_CHECK_NCCL(ncclGetUniqueId(&id));
    const auto *p = reinterpret_cast<const uint8_t *>(&id);
    store.set(key, std::vector<uint8_t>(p, p + sizeof id));
  } else {
    std::vector<uint8_t> bytes;
    try {
      store.wait({key}, timeout);
      bytes = store.get(key);
    } catch (const std::exception &e) {
      throw Error("NCCL", "rendezvous of '" + name + "'",
                  detail::messageOf(e) + " (timeout " +
                      detail::seconds(timeout) + ")",
                  __FILE__, __LINE__);
    }
    if (bytes.size() != sizeof id)
      throw Error("NCCL", "rendezvous of '" + name + "'",
                  "malformed unique id in the store", __FILE__, __LINE__);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  Comm c;
  c.timeout = timeout;
  c.name = name;
  VARUNA_CHECK_NCCL(ncclCommInitRank(&c.comm, size, id, rank));
  VARUNA_CHECK_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  return c;
}

class NcclPending : public Pending {
public:
  NcclPending(Comm &c, cudaEvent_t e, std::string what)
      : comm(c), event(e), what(std::move(what)) {}
  void wait() override {
    if (event)
      comm.wait(event, what);
    event = nullptr;
  }
  bool test() override {
    return !event || cudaEventQuery(event) != cudaErrorNotReady;
  }

private:
  Comm &comm;
  cudaEvent_t event;
  std::string what;
};

void checkDevice(const at::Tensor &t, const std::string &what) {
  if (!t.is_cuda() || !t.is_contiguous())
    throw Error("NCCL", what, "needs a contiguous CUDA tensor", __FILE__,
                __LINE__);
}

class NcclGroup : public Group {
public:
  NcclGroup(Comm c, int rank, int size) : comm(c), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduceSum(std::vector<at::Tensor> &tensors) override {
    allreduceSumAsync(tensors)->wait();
  }
  std::unique_ptr<Pending>
  allreduceSumAsync(std::vector<at::Tensor> &tensors) override {
    std::string what = "allreduce over group '" + comm.name + "'";
    if (size_ == 1 || tensors.empty())
      return std::make_unique<NcclPending>(comm, nullptr, what);
    for (at::Tensor &t : tensors)
      checkDevice(t, what);
    comm.follow();
    VARUNA_CHECK_NCCL(ncclGroupStart());
    for (at::Tensor &t : tensors) {
      VARUNA_CHECK_NCCL(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                      ncclType(t.scalar_type()), ncclSum,
                                      comm.comm, comm.stream));
    }
    VARUNA_CHECK_NCCL(ncclGroupEnd());
    return std::make_unique<NcclPending>(comm, comm.record(), what);
  }
  void barrier() override {
    if (size_ == 1)
      return;
    std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions()
                                                   .dtype(at::kFloat)
                                                   .device(at::kCUDA))};
    allreduceSum(one);
  }

private:
  Comm comm;
  int rank_, size_;
};

class NcclTransport : public Transport {
public:
  explicit NcclTransport(const TransportOptions &o) : options(o) {
    int devices = 0;
    VARUNA_CHECK_CUDA(cudaGetDeviceCount(&devices));
    if (devices == 0)
      throw Error("CUDA", "cudaGetDeviceCount", "no CUDA device", __FILE__,
                  __LINE__);
    int local = 0;
    if (const char *l = std::getenv("LOCAL_RANK"))
      local = std::atoi(l);
    VARUNA_CHECK_CUDA(cudaSetDevice(local % devices));
    store = detail::connectStore(o, "NCCL");
    worldComm = connect(*store, "world", o.rank, o.worldSize, o.timeout);
    worldGroup = std::make_unique<NcclGroup>(worldComm, o.rank, o.worldSize);
  }
  int rank() const override { return options.rank; }
  int size() const override { return options.worldSize; }
  std::chrono::milliseconds timeout() const override { return options.timeout; }
  std::unique_ptr<Pending> send(const at::Tensor &t, int dst,
                                int tag) override {
    std::string what = "send to rank " + std::to_string(dst) + " (" +
                       describeTag(options, tag) + ")";
    checkDevice(t, what);
    worldComm.follow();
    VARUNA_CHECK_NCCL(ncclSend(t.data_ptr(), t.numel(),
                               ncclType(t.scalar_type()), dst, worldComm.comm,
                               worldComm.stream));
    return std::make_unique<NcclPending>(worldComm, worldComm.record(), what);
  }
  std::unique_ptr<Pending> recv(at::Tensor &t, int src, int tag) override {
    std::string what = "recv from rank " + std::to_string(src) + " (" +
                       describeTag(options, tag) + ")";
    checkDevice(t, what);
    worldComm.follow(); // the buffer may be fresh from the default stream
    VARUNA_CHECK_NCCL(ncclRecv(t.data_ptr(), t.numel(),
                               ncclType(t.scalar_type()), src, worldComm.comm,
                               worldComm.stream));
    return std::make_unique<NcclPending>(worldComm, worldComm.record(), what);
  }
  Group &world() override { return *worldGroup; }
  std::unique_ptr<Group>
  group(const std::string &name, const std::vector<int> &ranks,
        std::optional<std::chrono::milliseconds> timeout) override {
    int me = detail::memberIndex(ranks, options.rank, "NCCL", name);
    int n = static_cast<int>(ranks.size());
    if (n == 1)
      return std::make_unique<NcclGroup>(Comm{}, 0, 1);
    // Connecting is bounded by the transport's timeout; the group's waits
    // by its own.
    Comm c = connect(*store, name, me, n, options.timeout);
    if (timeout)
      c.timeout = *timeout;
    return std::make_unique<NcclGroup>(std::move(c), me, n);
  }

private:
  TransportOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  Comm worldComm;
  std::unique_ptr<NcclGroup> worldGroup;
};

} // namespace

std::unique_ptr<Transport> connectNccl(const TransportOptions &options) {
  return std::make_unique<NcclTransport>(options);
}

} // namespace varuna::rt

#else // !VARUNA_HAVE_NCCL

#include "varuna/runtime/Check.h"

namespace varuna::rt {
std::unique_ptr<Transport> connectNccl(const TransportOptions &) {
  throw Error("NCCL", "connectNccl",
              "this build of Varuna has no NCCL (CUDA and NCCL were not found "
              "when it was built)",
              __FILE__, __LINE__);
}
} // namespace varuna::rt

#endif
