//===- SplitBackward.cpp - One backward in two halves ---------------------===//
//
// B: one walk of the graph from the roots marks every node from which a
// leaf's gradient accumulator can be reached. An edge from a marked node to
// an unmarked one (the unmarked side leads to parameters only) is where the
// weight gradients branch off: the marked node gets a pre-hook that records
// the gradients flowing into it. autograd::grad(roots, leaves) then runs
// the marked part only (its exec_info prunes the rest, and nodes compute
// only the outputs on marked paths).
//
// W: each recording node's edges back into the marked part are cut, and
// the engine is run from those nodes (and from the roots that lead to no
// leaf) with the recorded gradients, accumulating into the parameters: a
// node computes only the outputs whose edges are still there, so every
// op's gradient is computed once over B and W together.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/SplitBackward.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace varuna::rt {

namespace {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

/// Records the gradients flowing into a node (its whole input buffer).
class Capture : public torch::autograd::FunctionPreHook {
public:
  explicit Capture(variable_list *into) : into(into) {}
  variable_list operator()(const variable_list &grads) override {
    *into = grads;
    return grads;
  }

private:
  variable_list *into;
};

} // namespace

struct SplitBackward::State {
  struct Branch {
    c10::intrusive_ptr<Node> node; // a marked node that also feeds weights
    variable_list grads;           // flowing into it during B
    Capture *hook = nullptr;
  };
  std::vector<std::unique_ptr<Branch>> branches;
  torch::autograd::edge_list rootEdges; // roots that lead to no leaf
  variable_list rootGrads;
  bool inputsDone = false, weightsDone = false;
};

SplitBackward::SplitBackward() : state(std::make_unique<State>()) {}
SplitBackward::~SplitBackward() = default;
SplitBackward::SplitBackward(SplitBackward &&) noexcept = default;
SplitBackward &SplitBackward::operator=(SplitBackward &&) noexcept = default;

size_t SplitBackward::capturedEdges() const {
  size_t n = state->rootEdges.size();
  for (const auto &b : state->branches)
    n += b->grads.size();
  return n;
}

std::vector<at::Tensor>
SplitBackward::inputGradients(const std::vector<at::Tensor> &roots,
                              const std::vector<at::Tensor> &grads,
                              const std::vector<at::Tensor> &leaves) {
  if (state->inputsDone)
    throw std::logic_error("SplitBackward::inputGradients called twice");
  state->inputsDone = true;
  variable_list g = grads;
  if (g.empty())
    for (const at::Tensor &r : roots)
      g.push_back(at::ones_like(r));
  if (g.size() != roots.size())
    throw std::logic_error("SplitBackward: " + std::to_string(roots.size()) +
                           " roots but " + std::to_string(g.size()) +
                           " gradients");

  std::vector<at::Tensor> wanted; // leaves requiring grad
  std::vector<size_t> wantedAt;
  std::unordered_set<const Node *> targets;
  // Held while B runs: a leaf's accumulator lives only as long as something
  // holds it, and that of a leaf no op reads (a tensor the stage passes on
  // unchanged) would be gone at once -- its address then missed by the
  // walk, and the leaf's gradient sent back empty while W accumulated it.
  std::vector<c10::intrusive_ptr<Node>> accumulators;
  for (size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].defined() && leaves[i].requires_grad()) {
      wanted.push_back(leaves[i]);
      wantedAt.push_back(i);
      accumulators.push_back(
          torch::autograd::impl::grad_accumulator(leaves[i]));
      targets.insert(accumulators.back().get());
    }

  // Marks: 2 = a leaf's accumulator is reachable, 1 = not, 0 = on the stack.
  std::unordered_map<const Node *, char> mark;
  std::vector<Node *> marked; // every node with mark 2 that is not a target
  std::vector<std::pair<Node *, size_t>> stack;
  auto walk = [&](Node *from) {
    if (!from || mark.count(from))
      return;
    mark[from] = 0;
    stack.push_back({from, 0});
    while (!stack.empty()) {
      Node *n = stack.back().first;
      size_t i = stack.back().second;
      if (targets.count(n)) {
        mark[n] = 2;
        stack.pop_back();
        continue;
      }
      const torch::autograd::edge_list &edges = n->next_edges();
      if (i < edges.size()) {
        ++stack.back().second;
        Node *c = edges[i].function.get();
        if (c && !mark.count(c)) {
          mark[c] = 0;
          stack.push_back({c, 0});
        }
        continue;
      }
      char m = 1;
      for (const Edge &e : edges)
        if (e.function && mark[e.function.get()] == 2)
          m = 2;
      mark[n] = m;
      if (m == 2)
        marked.push_back(n);
      stack.pop_back();
    }
  };
  variable_list bRoots, bGrads;
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = torch::autograd::impl::gradient_edge(roots[i]);
    if (!e.is_valid())
      continue;
    walk(e.function.get());
    if (mark[e.function.get()] == 2) {
      bRoots.push_back(roots[i]);
      bGrads.push_back(g[i]);
    } else {
      state->rootEdges.push_back(std::move(e));
      state->rootGrads.push_back(g[i]);
    }
  }
  for (Node *n : marked) {
    bool feedsWeights = false;
    for (const Edge &e : n->next_edges())
      feedsWeights |= e.function && mark[e.function.get()] != 2;
    if (!feedsWeights)
      continue;
    auto b = std::make_unique<State::Branch>();
    b->node = c10::intrusive_ptr<Node>::reclaim_copy(n);
    auto hook = std::make_unique<Capture>(&b->grads);
    b->hook = hook.get();
    n->add_pre_hook(std::move(hook));
    state->branches.push_back(std::move(b));
  }

  // The hooks point into this object: they go whatever happens.
  auto removeHooks = [&] {
    for (auto &b : state->branches) {
      auto &hooks = b->node->pre_hooks();
      for (auto it = hooks.begin(); it != hooks.end(); ++it)
        if (it->get() == b->hook) {
          hooks.erase(it);
          break;
        }
      b->hook = nullptr;
    }
  };
  std::vector<at::Tensor> out(leaves.size());
  if (!bRoots.empty() && !wanted.empty()) {
    variable_list got;
    try {
      got = torch::autograd::grad(bRoots, wanted, bGrads,
                                  /*retain_graph=*/true,
                                  /*create_graph=*/false,
                                  /*allow_unused=*/true);
    } catch (...) {
      removeHooks();
      state->branches.clear();
      throw;
    }
    for (size_t j = 0; j < got.size(); ++j)
      out[wantedAt[j]] = got[j];
  }
  removeHooks();
  // W runs from the recording nodes into the weights only: their edges back
  // into the marked part go (that part then frees with the caller's roots).
  for (auto &b : state->branches) {
    // (Not set_next_edge: it asserts that the node has no parent, for the
    // topological numbers -- which removing an edge keeps valid.)
    for (Edge &e : b->node->next_edges())
      if (e.function && mark[e.function.get()] == 2)
        e = Edge();
  }
  return out;
}

void SplitBackward::weightGradients() {
  if (!state->inputsDone || state->weightsDone)
    throw std::logic_error("SplitBackward::weightGradients must follow "
                           "inputGradients, once");
  state->weightsDone = true;
  torch::autograd::edge_list roots = std::move(state->rootEdges);
  variable_list grads = std::move(state->rootGrads);
  for (auto &b : state->branches)
    for (size_t j = 0; j < b->grads.size(); ++j)
      if (b->grads[j].defined()) {
        roots.emplace_back(b->node, static_cast<uint32_t>(j));
        grads.push_back(std::move(b->grads[j]));
      }
  state->branches.clear();
  if (!roots.empty())
    torch::autograd::Engine::get_default_engine().execute(
        roots, grads, /*keep_graph=*/false, /*create_graph=*/false,
        /*accumulate_grad=*/true);
}

} // namespace varuna::rt
