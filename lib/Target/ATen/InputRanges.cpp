//===- InputRanges.cpp - Integer inputs that must stay in range -----------===//

#include "varuna/Target/ATen/InputRanges.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Target/ATen/ATenEvaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <ATen/ATen.h>

#include "varuna/runtime/Stop.h"
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

using namespace mlir;

namespace varuna {

namespace {

/// The job input `v` is, through shape-only ops; empty if it is not one.
std::string inputOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (isa<ReshapeOp, TransposeOp, SliceOp, ExpandOp, CutPointOp>(def)) {
      v = def->getOperand(0);
      continue;
    }
    if (auto c = dyn_cast<CastOp>(def)) {
      auto from = c.getInput().getType().dyn_cast<VTensorType>();
      if (!from || !from.getElementType().isSignlessInteger())
        return "";
      v = c.getInput();
      continue;
    }
    return "";
  }
  auto arg = v.dyn_cast<BlockArgument>();
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp())
                  : func::FuncOp();
  if (!func)
    return "";
  auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
  return name ? name.str() : "";
}

bool isIntegerValue(Value v) {
  auto t = v.getType().dyn_cast<VTensorType>();
  return t && t.getElementType().isSignlessInteger() &&
         !t.getElementType().isInteger(1);
}

} // namespace

std::vector<IndexRange> findIndexRanges(ModuleOp job) {
  std::vector<IndexRange> out;
  std::set<std::tuple<std::string, int64_t, int64_t, std::string>> seen;
  auto add = [&](IndexRange r) {
    if (seen.insert({r.input, r.lo, r.hi, r.what}).second)
      out.push_back(std::move(r));
  };
  job.walk([&](Operation *op) {
    if (auto g = dyn_cast<GatherOp>(op)) {
      auto param = g.getInput().getDefiningOp<GetParamOp>();
      auto t = g.getInput().getType().dyn_cast<VTensorType>();
      int64_t axis = static_cast<int64_t>(g.getAxis());
      if (!param || !t || axis < 0 || axis >= t.getRank() ||
          !t.getDim(axis).isStatic() || !isIntegerValue(g.getIndices()))
        return;
      std::string input = inputOf(g.getIndices());
      if (input.empty())
        return;
      int64_t rows = t.getDim(axis).constant;
      IndexRange r;
      r.input = input;
      // Not [-rows, rows), ONNX Gather's rule: the model is PyTorch's, whose
      // nn.Embedding refuses a negative id; read as row rows - 1 it was a
      // silent difference (-1 is a common padding value).
      r.lo = 0;
      r.hi = rows;
      r.what = (axis == 0 ? "rows of '" : "entries along axis " +
                                              std::to_string(axis) + " of '") +
               param.getName().str() + "'";
      r.op = op;
      add(std::move(r));
    } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
      auto t = ce.getLogits().getType().dyn_cast<VTensorType>();
      if (!t || t.getRank() < 2 || !t.getDim(1).isStatic() ||
          !isIntegerValue(ce.getLabels()))
        return;
      std::string input = inputOf(ce.getLabels());
      if (input.empty())
        return;
      IndexRange r;
      r.input = input;
      r.lo = 0;
      r.hi = t.getDim(1).constant;
      if (auto ignore = ce.getIgnoreIndex())
        r.except = static_cast<int64_t>(*ignore);
      r.what = std::string("classes of a ") +
               (ce.getLogInput() ? "nll_loss" : "cross_entropy");
      r.op = op;
      add(std::move(r));
    }
  });
  return out;
}

std::vector<rt::BatchTensor>
readStepInputs(const std::vector<IndexRange> &ranges,
               const rt::DataSource &data, int64_t step, int64_t M,
               const std::vector<bool> *also) {
  const std::vector<rt::InputSpec> &specs = data.specs();
  std::vector<bool> wanted(specs.size(), false);
  for (size_t i = 0; i < specs.size(); ++i) {
    wanted[i] = also && i < also->size() && (*also)[i];
    for (const IndexRange &r : ranges)
      wanted[i] = wanted[i] || specs[i].name == r.input;
  }
  if (llvm::none_of(wanted, [](bool w) { return w; }))
    return {};
  return data.batch(step, M, 0, M, wanted);
}

std::optional<std::string>
checkStepInputs(const std::vector<IndexRange> &ranges,
                const std::vector<rt::BatchTensor> &whole,
                const rt::DataSource &data, int64_t step, int64_t M) {
  for (const IndexRange &r : ranges) {
    auto it = llvm::find_if(
        whole, [&](const rt::BatchTensor &b) { return b.name == r.input; });
    if (it == whole.end() || it->array.shape.empty())
      continue;
    at::Tensor values = tensorFromNpy(it->array);
    if (values.numel() == 0 ||
        !at::isIntegralType(values.scalar_type(), /*includeBool=*/false))
      continue;
    at::Tensor v = values.to(at::kLong);
    at::Tensor bad = (v < r.lo).logical_or(v >= r.hi);
    if (r.except)
      bad.logical_and_(v != *r.except);
    if (!bad.any().item<bool>())
      continue;
    int64_t flat = bad.flatten().nonzero()[0][0].item<int64_t>();
    int64_t value = v.flatten()[flat].item<int64_t>();
    // The row (example) and the position within it.
    int64_t perRow = v.size(0) > 0 ? v.numel() / v.size(0) : 1;
    int64_t row = flat / perRow, at = flat % perRow;
    std::ostringstream os;
    os << "input '" << r.input << "' of sample "
       << data.sampleIndex(step, M, 0, row) << " holds " << value;
    if (v.dim() > 1) {
      os << " at [";
      for (int64_t d = 1, rest = at; d < v.dim(); ++d) {
        int64_t stride = 1;
        for (int64_t e = d + 1; e < v.dim(); ++e)
          stride *= v.size(e);
        os << (d > 1 ? ", " : "") << rest / stride;
        rest %= stride;
      }
      os << "]";
    }
    os << ", but it indexes the " << r.what << ": it must be in [" << r.lo
       << ", " << r.hi << ")";
    if (r.except)
      os << " or " << *r.except << " (ignored)";
    if (r.what.rfind("rows of", 0) == 0 && value < 0)
      os << " -- PyTorch's nn.Embedding refuses negative ids too; if it "
            "pads, pad with an id of the vocabulary (the padding_idx) and "
            "mask it";
    else if (r.what.rfind("rows of", 0) == 0)
      os << " -- is the data tokenized for this model's vocabulary?";
    else if (r.what.rfind("classes of", 0) == 0)
      os << " -- does the data have more classes than the model?";
    return os.str();
  }
  return std::nullopt;
}

std::optional<std::string>
checkValidationInputs(const std::vector<IndexRange> &ranges,
                      const rt::DataSource &data, int64_t batches, int64_t M) {
  if (ranges.empty())
    return std::nullopt;
  // Batch b holds samples [b M, (b + 1) M) mod N: after N / gcd(N, M)
  // batches they repeat (--eval-batches 3000000 over 10 samples checked
  // every one, for minutes). A stop request ends the check (it was not
  // seen until the check had read the whole validation data).
  int64_t n = data.numSamples();
  if (n > 0)
    batches = std::min(batches, n / std::gcd(n, M));
  for (int64_t b = 0; b < batches; ++b) {
    if (int sig = rt::stopSignal())
      return "stopped (" + rt::signalName(sig) +
             ") while checking the validation data's index inputs, at "
             "batch " +
             std::to_string(b) + " of " + std::to_string(batches);
    if (auto bad = checkStepInputs(ranges, readStepInputs(ranges, data, b, M),
                                   data, b, M))
      return "validation batch " + std::to_string(b) + ": " + *bad;
  }
  return std::nullopt;
}

} // namespace varuna
