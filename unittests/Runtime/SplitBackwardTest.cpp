//===- SplitBackwardTest.cpp - B then W equals one backward ---------------===//
//
// The oracle is libtorch's own backward over the same graph: the split
// (input gradients first, weight gradients later) must give the same
// gradients, touch no parameter in B, and run the weights' part only in W.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/SplitBackward.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/variable.h>

#include <gtest/gtest.h>

#include <stdexcept>

using varuna::rt::SplitBackward;

namespace {

struct Params {
  at::Tensor w1, b1, g, beta, w2, tie;
  std::vector<at::Tensor> all() const { return {w1, b1, g, beta, w2, tie}; }
};

Params makeParams() {
  at::manual_seed(3);
  auto p = [](at::IntArrayRef shape) {
    return at::randn(shape).requires_grad_(true);
  };
  return {p({16, 8}), p({16}), p({16}), p({16}), p({8, 16}), p({8, 8})};
}

/// A small stage: two roots -- one through the received tensor `x`, one
/// (a tied weight's penalty) through parameters only; `tie` is used twice,
/// and a received tensor `unused` reaches no root.
std::vector<at::Tensor> stage(const Params &p, const at::Tensor &x) {
  at::Tensor h = at::linear(x, p.w1, p.b1);
  h = at::layer_norm(h, {16}, p.g, p.beta);
  h = at::gelu(h);
  at::Tensor y = at::linear(h, p.w2);
  y = at::matmul(y, p.tie) + at::matmul(x, p.tie.t());
  at::Tensor penalty = (p.tie * p.tie).sum() * 0.01;
  return {y, penalty};
}

void expectClose(const at::Tensor &got, const at::Tensor &want,
                 const std::string &what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_TRUE(want.defined()) << what;
  EXPECT_TRUE(at::allclose(got, want, 1e-6, 1e-7))
      << what << ": max diff " << (got - want).abs().max().item<double>();
}

} // namespace

TEST(SplitBackward, EqualsOneBackward) {
  at::manual_seed(1);
  at::Tensor x0 = at::randn({4, 8});
  at::Tensor gy = at::randn({4, 8});
  at::Tensor unused0 = at::randn({3});

  // Oracle: one backward.
  Params ref = makeParams();
  at::Tensor xr = x0.clone().requires_grad_(true);
  std::vector<at::Tensor> outs = stage(ref, xr);
  torch::autograd::backward(outs, {gy, at::ones({})});

  // Split: B, then W after more work happened on other graphs.
  Params p = makeParams();
  at::Tensor x = x0.clone().requires_grad_(true);
  at::Tensor unused = unused0.clone().requires_grad_(true);
  SplitBackward split;
  std::vector<at::Tensor> in;
  {
    std::vector<at::Tensor> roots = stage(p, x);
    in = split.inputGradients(roots, {gy, at::ones({})}, {x, unused});
  } // the roots go: W must not need them
  ASSERT_EQ(in.size(), 2u);
  expectClose(in[0], xr.grad(), "input gradient");
  EXPECT_FALSE(in[1].defined()) << "a leaf that reaches no root";
  EXPECT_FALSE(x.grad().defined()) << "B accumulates into no leaf";
  for (const at::Tensor &w : p.all())
    EXPECT_FALSE(w.grad().defined()) << "B touched a parameter";
  EXPECT_GT(split.capturedEdges(), 0u);

  split.weightGradients();
  std::vector<at::Tensor> got = p.all(), want = ref.all();
  const char *names[] = {"w1", "b1", "g", "beta", "w2", "tie"};
  for (size_t i = 0; i < got.size(); ++i)
    expectClose(got[i].grad(), want[i].grad(), names[i]);
  EXPECT_FALSE(x.grad().defined()) << "W accumulates into no leaf";
}

TEST(SplitBackward, AccumulatesOverMicroBatches) {
  // Two micro-batches: B0 B1 W0 W1 sums like two backwards.
  Params ref = makeParams(), p = makeParams();
  at::manual_seed(5);
  at::Tensor xa = at::randn({4, 8}), xb = at::randn({4, 8});
  for (const at::Tensor &x : {xa, xb}) {
    auto outs = stage(ref, x.clone().requires_grad_(true));
    torch::autograd::backward({outs[0].sum()});
  }
  SplitBackward a, b;
  a.inputGradients({stage(p, xa.clone().requires_grad_(true))[0].sum()}, {},
                   {});
  at::Tensor leafB = xb.clone().requires_grad_(true);
  b.inputGradients({stage(p, leafB)[0].sum()}, {}, {leafB});
  a.weightGradients();
  b.weightGradients();
  std::vector<at::Tensor> got = p.all(), want = ref.all();
  for (size_t i = 0; i < got.size(); ++i)
    if (want[i].grad().defined())
      expectClose(got[i].grad(), want[i].grad(), "parameter " + std::to_string(i));
}

TEST(SplitBackward, NoLeafMeansAllInW) {
  // A first stage: nothing received requires grad, so B does nothing and
  // W is the whole backward.
  Params ref = makeParams(), p = makeParams();
  at::Tensor x = at::randn({4, 8});
  torch::autograd::backward({stage(ref, x)[0].sum()});
  SplitBackward split;
  std::vector<at::Tensor> in =
      split.inputGradients({stage(p, x)[0].sum()}, {}, {x});
  EXPECT_FALSE(in[0].defined());
  EXPECT_FALSE(p.w1.grad().defined());
  split.weightGradients();
  expectClose(p.w1.grad(), ref.w1.grad(), "w1");
  expectClose(p.tie.grad(), ref.tie.grad(), "tie");
}

TEST(SplitBackward, ForwardedLeaves) {
  // A middle stage that passes received tensors on unchanged (a skip
  // connection or an auxiliary loss on its way to the last stage): the
  // leaf is a root itself, alone (`u`) or also used (`x`).
  at::manual_seed(7);
  at::Tensor x0 = at::randn({4, 8}), u0 = at::randn({4, 8});
  at::Tensor gy = at::randn({4, 8}), gx = at::randn({4, 8}),
             gu = at::randn({4, 8});
  Params ref = makeParams(), p = makeParams();
  at::Tensor xr = x0.clone().requires_grad_(true),
             ur = u0.clone().requires_grad_(true);
  torch::autograd::backward({stage(ref, xr)[0], xr, ur}, {gy, gx, gu});

  at::Tensor x = x0.clone().requires_grad_(true),
             u = u0.clone().requires_grad_(true);
  SplitBackward split;
  std::vector<at::Tensor> in =
      split.inputGradients({stage(p, x)[0], x, u}, {gy, gx, gu}, {x, u});
  ASSERT_EQ(in.size(), 2u);
  expectClose(in[0], xr.grad(), "used and forwarded");
  expectClose(in[1], ur.grad(), "forwarded only");
  split.weightGradients();
  expectClose(p.w1.grad(), ref.w1.grad(), "w1");
  expectClose(p.tie.grad(), ref.tie.grad(), "tie");
  EXPECT_FALSE(x.grad().defined()) << "W accumulates into no leaf";
}

TEST(SplitBackward, MisuseIsAnError) {
  SplitBackward split;
  EXPECT_THROW(split.weightGradients(), std::logic_error);
  Params p = makeParams();
  at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  split.inputGradients({stage(p, x)[0].sum()}, {}, {x});
  EXPECT_THROW(split.inputGradients({}, {}, {}), std::logic_error);
  split.weightGradients();
  EXPECT_THROW(split.weightGradients(), std::logic_error);
  SplitBackward other;
  EXPECT_THROW(other.inputGradients({stage(p, x)[0].sum()},
                                    {at::ones({}), at::ones({})}, {x}),
               std::logic_error);
}
