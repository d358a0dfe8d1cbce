//===- InputRanges.h - Integer inputs that must stay in range ---*- C++ -*-===//
//
// A job's integer inputs that index something: token ids into an embedding
// (`varuna.gather` of a parameter's rows), class labels of a
// `varuna.cross_entropy`. Data tokenized for another vocabulary, or labels
// past the classifier's classes, would otherwise fail deep inside a
// generated section with ATen's "index out of range in self" (or "Target
// 1500 is out of bounds"), naming neither the input nor the sample. Every
// rank checks each step's whole batch against all of them before its first
// micro-batch runs, so each one stops with the same message (and not with a
// broken connection to a rank that stopped first).
//
// Contract
//  * findIndexRanges(job): every gather whose `input` is a parameter with a
//    static size along `axis`, and every cross_entropy with a static class
//    dimension (logits dim 1), whose indices / labels come from a job input
//    through shape-only ops (reshape, transpose, slice, expand, integer
//    casts, cut points). An index computed from an input (ids + offset) is
//    not checked. Allowed: gather [0, rows) (the op would count negative
//    indices from the end, as ONNX's Gather does, but the model is
//    PyTorch's, whose nn.Embedding refuses them), cross_entropy
//    [0, classes) and its ignore_index.
//  * readStepInputs(ranges, data, step, M, also): the step's M samples of
//    the inputs the ranges name and of those `also` marks (another reader of
//    the whole step: the label counter), in one read.
//  * checkStepInputs(ranges, whole, data, step, M): given that read (or any
//    DataSource::batch of the step's M samples with the ranges' inputs in
//    it), returns the first value out of range
//    (inputs in the ranges' order, values row-major) as an error message
//    naming the input, the sample (the dataset's index), the position
//    within the example, the value, the allowed range and what it indexes;
//    none when all are in range. Non-integer inputs are not checked; the
//    data source's errors propagate (rt::DataError).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_INPUTRANGES_H
#define VARUNA_TARGET_ATEN_INPUTRANGES_H

#include "varuna/runtime/Dataset.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace varuna {

struct IndexRange {
  std::string input;             ///< the job input's name
  int64_t lo = 0, hi = 0;        ///< allowed: [lo, hi)
  std::optional<int64_t> except; ///< also allowed (ignore_index)
  std::string what;              ///< "rows of the embedding 'wte.weight'"
  mlir::Operation *op = nullptr; ///< the gather / cross_entropy
};

std::vector<IndexRange> findIndexRanges(mlir::ModuleOp job);

std::vector<rt::BatchTensor>
readStepInputs(const std::vector<IndexRange> &ranges,
               const rt::DataSource &data, int64_t step, int64_t M,
               const std::vector<bool> *also = nullptr);

std::optional<std::string>
checkStepInputs(const std::vector<IndexRange> &ranges,
                const std::vector<rt::BatchTensor> &whole,
                const rt::DataSource &data, int64_t step, int64_t M);

/// Checks the index inputs of the `batches` validation batches of `data`
/// (TrainOptions::evalData) before training starts, so that held-out data
/// tokenized for another vocabulary stops the run at once rather than at
/// its first validation: "validation batch b: <checkStepInputs' message>".
std::optional<std::string>
checkValidationInputs(const std::vector<IndexRange> &ranges,
                      const rt::DataSource &data, int64_t batches, int64_t M);

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_INPUTRANGES_H
