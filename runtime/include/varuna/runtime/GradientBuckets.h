//===- GradientBuckets.h - Data-parallel gradients, reduced in buckets -*- C++ -*-===//
//
// One stage's data-parallel gradient sum over its replicas, started while
// the stage's last backward of the step is still running (DESIGN.md section
// 3, "synchronization"). Shared by every transport: CPU tests run the code
// GPUs run.
//
// Contract
//  * Buckets: the stage's parameters in reverse order (the order a backward
//    finishes them), cut into runs of one dtype of at most `bucketBytes`
//    (a larger parameter is a bucket of its own).
//  * arm(), called just before the rank's last backward of the step,
//    installs a post-accumulate-gradient hook on each parameter: once
//    autograd has accumulated a parameter's last gradient it is final. A
//    bucket whose gradients are all final is copied into one flat buffer
//    and its all-reduce started in the background -- but never before the
//    buckets ahead of it, so every replica starts the same collectives in
//    the same order whatever order its hooks fire in (collectives match by
//    order). The parameters' own gradients are not touched meanwhile.
//  * launchRest(), after the last backward: removes the hooks and starts
//    the buckets not started yet (parameters the last micro-batch did not
//    reach count as final now; a missing gradient is sent as zeros).
//  * wait(): waits for every bucket and stores the sums as the parameters'
//    gradients (a parameter without a gradient gets one).
//  * The result is the plain sum over the replicas, bit-identical on every
//    replica (the transport's reduction delivers one result to all).
//  * Errors: a transport failure or timeout throws rt::Error (from the
//    launch or from wait()); a hook never throws into autograd -- a launch
//    failure there is kept and rethrown by launchRest().
//  * Spans: "allreduce bucket i" on the trace's all-reduce lane, from its
//    start to when wait() saw it done.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_GRADIENTBUCKETS_H
#define VARUNA_RUNTIME_GRADIENTBUCKETS_H

#include "varuna/runtime/Trace.h"
#include "varuna/runtime/Transport.h"

#include <ATen/core/Tensor.h>

#include <exception>
#include <memory>
#include <vector>

namespace varuna::rt {

class GradientBuckets {
public:
  /// `params` are leaves requiring grad; `group` is the stage's replicas.
  GradientBuckets(std::vector<at::Tensor> params, Group &group,
                  size_t bucketBytes, Trace *trace = nullptr);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets &) = delete;
  GradientBuckets &operator=(const GradientBuckets &) = delete;

  void arm();
  void launchRest();
  void wait();

  /// Called by parameter i's hook (public for the hook only).
  void finalized(size_t i);

private:
  struct Bucket {
    std::vector<size_t> params;
    size_t waiting = 0; // parameters not final yet
    std::vector<at::Tensor> buffer;
    std::unique_ptr<Pending> pending;
    Trace::Clock::time_point started;
  };
  void launchReady();
  void launch(Bucket &b);
  void disarm();

  std::vector<at::Tensor> params;
  std::vector<size_t> bucketOf; // parameter -> bucket
  std::vector<Bucket> buckets;
  Group &group;
  Trace *trace;
  size_t next = 0; // the first bucket not started
  bool armed = false;
  std::exception_ptr hookError;
};

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_GRADIENTBUCKETS_H
