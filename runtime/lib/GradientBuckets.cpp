//===- GradientBuckets.cpp - Data-parallel gradients, reduced in buckets --===//

#include "varuna/runtime/GradientBuckets.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <string>

namespace varuna::rt {

namespace {

/// Tells the buckets that parameter `index`'s gradient is final.
class FinalHook : public torch::autograd::PostAccumulateGradHook {
public:
  FinalHook(GradientBuckets &b, size_t index) : buckets(b), index(index) {}
  void operator()(const torch::autograd::Variable &) override {
    buckets.finalized(index);
  }

private:
  GradientBuckets &buckets;
  size_t index;
};

} // namespace

GradientBuckets::GradientBuckets(std::vector<at::Tensor> ps, Group &group,
                                 size_t bucketBytes, Trace *trace)
    : params(std::move(ps)), bucketOf(params.size()), group(group),
      trace(trace) {
  size_t bytes = 0;
  for (size_t j = params.size(); j-- > 0;) {
    const at::Tensor &p = params[j];
    size_t size = static_cast<size_t>(p.numel()) * p.element_size();
    bool fresh = buckets.empty() || bytes + size > bucketBytes ||
                 params[buckets.back().params.front()].scalar_type() !=
                     p.scalar_type();
    if (fresh) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().params.push_back(j);
    bytes += size;
    bucketOf[j] = buckets.size() - 1;
  }
}

GradientBuckets::~GradientBuckets() { disarm(); }

void GradientBuckets::disarm() {
  if (!armed)
    return;
  for (at::Tensor &p : params)
    torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  armed = false;
}

void GradientBuckets::arm() {
  next = 0;
  hookError = nullptr;
  for (Bucket &b : buckets) {
    b.waiting = b.params.size();
    b.buffer.clear();
    b.pending.reset();
  }
  for (size_t i = 0; i < params.size(); ++i)
    torch::autograd::impl::set_post_acc_grad_hooks(
        params[i], std::make_unique<FinalHook>(*this, i));
  armed = true;
}

void GradientBuckets::finalized(size_t i) {
  if (!armed || hookError)
    return;
  Bucket &b = buckets[bucketOf[i]];
  if (b.waiting > 0)
    --b.waiting;
  try {
    launchReady();
  } catch (...) {
    hookError = std::current_exception(); // never throw into autograd
  }
}

void GradientBuckets::launchReady() {
  while (next < buckets.size() && buckets[next].waiting == 0)
    launch(buckets[next++]);
}

void GradientBuckets::launch(Bucket &b) {
  std::vector<at::Tensor> flat;
  for (size_t i : b.params) {
    const at::Tensor &g = params[i].grad();
    flat.push_back(g.defined() ? g.reshape({-1})
                               : at::zeros({params[i].numel()},
                                           params[i].options()));
  }
  b.buffer = {at::cat(flat)};
  b.started = Trace::Clock::now();
  b.pending = group.allreduceSumAsync(b.buffer);
}

void GradientBuckets::launchRest() {
  disarm();
  if (hookError)
    std::rethrow_exception(std::exchange(hookError, nullptr));
  for (Bucket &b : buckets)
    b.waiting = 0;
  launchReady();
}

void GradientBuckets::wait() {
  launchRest(); // no-op when already called
  for (size_t n = 0; n < buckets.size(); ++n) {
    Bucket &b = buckets[n];
    if (!b.pending)
      continue; // waited already
    b.pending->wait();
    if (trace && trace->isEnabled())
      trace->span("allreduce bucket " + std::to_string(n), Trace::AllReduce,
                  b.started, Trace::Clock::now());
    int64_t off = 0;
    for (size_t i : b.params) {
      at::Tensor &p = params[i];
      int64_t count = p.numel();
      at::Tensor sum = b.buffer[0].narrow(0, off, count).view_as(p);
      if (p.grad().defined())
        p.mutable_grad().copy_(sum);
      else
        p.mutable_grad() = sum.clone();
      off += count;
    }
    b.pending.reset();
    b.buffer.clear();
  }
}

} // namespace varuna::rt
