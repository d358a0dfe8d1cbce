//===- SplitBackward.h - One backward in two halves: inputs, then weights -*- C++ -*-===//
//
// The zero-bubble schedule's split of one micro-batch's backward (Qi et al.,
// "Zero Bubble Pipeline Parallelism"): B computes only the gradients of the
// stage's received tensors -- what the previous stage waits for -- and W,
// later, the gradients of the parameters. Together they compute what one
// torch::autograd::backward(roots, grads) computes, every op's gradient
// once (no part of the backward runs twice).
//
// Contract
//  * inputGradients(roots, grads, leaves): `roots` are the stage's results
//    with autograd, `grads` their gradients (empty: each root is a scalar
//    and its gradient is 1), `leaves` the received tensors (leaves of the
//    graph; those not requiring grad are ignored). Returns one tensor per
//    leaf: its gradient, or an undefined tensor when it has none. The
//    parameters' .grad are not touched. The graph is kept for W: at every
//    edge where the backward leaves the part of the graph that leads to a
//    leaf (a node that also feeds parameters, or a root that leads to no
//    leaf), the gradient flowing in is captured.
//  * weightGradients(): back-propagates the captured gradients into the
//    parameters only, accumulating into their .grad as a full backward
//    does (post-accumulate-grad hooks fire, so rt::GradientBuckets works
//    unchanged), then frees the graph. Call it exactly once after
//    inputGradients; a SplitBackward is used once.
//  * Between the two, the micro-batch holds only what the weight gradients
//    need (the nodes past the captured edges and their saved tensors); the
//    part that only led to the leaves is freed when the caller drops the
//    roots.
//  * A graph in which no root leads to a leaf (a first stage) captures the
//    roots themselves: inputGradients does nothing, weightGradients is the
//    whole backward.
//  * Errors: autograd's exceptions (c10::Error) propagate; weightGradients
//    before inputGradients or twice throws std::logic_error.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_SPLITBACKWARD_H
#define VARUNA_RUNTIME_SPLITBACKWARD_H

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace varuna::rt {

class SplitBackward {
public:
  SplitBackward();
  ~SplitBackward();
  SplitBackward(SplitBackward &&) noexcept;
  SplitBackward &operator=(SplitBackward &&) noexcept;

  std::vector<at::Tensor> inputGradients(const std::vector<at::Tensor> &roots,
                                         const std::vector<at::Tensor> &grads,
                                         const std::vector<at::Tensor> &leaves);
  void weightGradients();

  /// How many edges were captured (for tests and traces).
  size_t capturedEdges() const;

private:
  struct State;
  std::unique_ptr<State> state;
};

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_SPLITBACKWARD_H
