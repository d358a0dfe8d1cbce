//===- StageAPI.h - What generated stage code calls -------------*- C++ -*-===//
//
// The only header the generated section code (varuna-translate
// --emit-stage-cpp) includes. It is torch-free on purpose: a generated
// translation unit compiles in well under a second whatever the model, so
// building a 48-layer model costs what building a 4-layer one does (one
// function per distinct section body).
//
// Contract:
//  * `Tensor` is an opaque, reference-counted handle to an ATen tensor
//    (one pointer; copies share the tensor, as at::Tensor copies do).
//  * One function per varuna op, with the op's attributes as plain
//    arguments and shapes as integer lists in which the generated code has
//    already substituted the micro-batch size B (`{16 * B, 64}`). Each has
//    the semantics of the op's description in VarunaOps.td and is computed
//    by the same kernel the ATen evaluator uses (runtime/Kernels.h), so
//    generated code and `varuna-eval` agree bit for bit.
//  * Errors (an ATen error, an unsupported variant) are thrown as
//    `varuna::stage::Error` with a message; the runtime catches them and
//    names the section.
//  * Autograd: the functions record autograd history whenever grad mode is
//    on, so a section called with grad mode on can be back-propagated.
//
// A generated library exports `varuna_stage_job_table()` (JobTable below):
// one entry per section naming its body function and its parameters, in the
// order the body reads them.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_STAGEAPI_H
#define VARUNA_RUNTIME_STAGEAPI_H

#include "varuna/runtime/OpCodes.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>

#define VARUNA_STAGE_API __attribute__((visibility("default")))

namespace varuna::stage {

using rt::Binary;
using rt::Compare;
using rt::Distribution;
using rt::Linalg;
using rt::ElemType;
using rt::LossReduction;
using rt::Pool;
using rt::Reduce;
using rt::Unary;

class VARUNA_STAGE_API Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An opaque handle to an ATen tensor (undefined when default-constructed).
class VARUNA_STAGE_API Tensor {
public:
  Tensor() noexcept;
  Tensor(const Tensor &other);
  Tensor(Tensor &&other) noexcept;
  Tensor &operator=(const Tensor &other);
  Tensor &operator=(Tensor &&other) noexcept;
  ~Tensor();
  bool defined() const noexcept;

  /// The storage of the at::Tensor (for runtime/lib/StageAPI.cpp only).
  void *storage() noexcept { return storage_; }
  const void *storage() const noexcept { return storage_; }

private:
  alignas(void *) unsigned char storage_[sizeof(void *)];
};

/// A list of integers written in place: `{16 * B, 64}`.
struct IntList {
  const int64_t *data;
  size_t size;
  IntList(std::initializer_list<int64_t> l) : data(l.begin()), size(l.size()) {}
  IntList(const int64_t *d, size_t n) : data(d), size(n) {}
};

/// What a section body needs besides its tensors.
struct Context {
  int64_t batch = 1;          ///< the micro-batch size B
  void *generator = nullptr;  ///< at::Generator* for dropout and random
  /// Set by cross_entropy with reduction mean when `countLoss`: how many
  /// labels the loss averages over (labels != ignore_index); -1 if none ran.
  double lossCount = -1;
  /// Whether a mean cross_entropy counts into `lossCount` (a counted mean
  /// over no label is 0; uncounted it is 0/0, as PyTorch's). Last, so that
  /// libraries generated before it (which read only `batch`) still work.
  bool countLoss = false;
};

// --- Constants and factories --------------------------------------------
/// A tensor of `shape` from `n` values (n == 1: splat), converted to `type`.
VARUNA_STAGE_API Tensor constant_f(ElemType type, IntList shape,
                                   const double *values, int64_t n);
VARUNA_STAGE_API Tensor constant_i(ElemType type, IntList shape,
                                   const int64_t *values, int64_t n);
VARUNA_STAGE_API Tensor full_f(ElemType type, IntList shape, double value);
VARUNA_STAGE_API Tensor full_i(ElemType type, IntList shape, int64_t value);
VARUNA_STAGE_API Tensor arange(ElemType type, int64_t n, double start,
                               double step);
VARUNA_STAGE_API Tensor random(Context &ctx, ElemType type, IntList shape,
                               Distribution dist, double a, double b);

// --- Elementwise -------------------------------------------------------------
VARUNA_STAGE_API Tensor binary(Binary kind, const Tensor &a, const Tensor &b);
/// varuna.div marked step_divisor (rt::stepDivideKernel).
VARUNA_STAGE_API Tensor step_divide(const Tensor &sum, const Tensor &count);
VARUNA_STAGE_API Tensor compare(Compare pred, const Tensor &a, const Tensor &b);
VARUNA_STAGE_API Tensor where(const Tensor &c, const Tensor &a, const Tensor &b);
VARUNA_STAGE_API Tensor unary(Unary kind, const Tensor &x);
VARUNA_STAGE_API Tensor cast(const Tensor &x, ElemType type);
VARUNA_STAGE_API Tensor dropout(Context &ctx, const Tensor &x, double ratio);

// --- Shapes ------------------------------------------------------------------
VARUNA_STAGE_API Tensor reshape(const Tensor &x, IntList shape);
VARUNA_STAGE_API Tensor expand(const Tensor &x, IntList shape);
VARUNA_STAGE_API Tensor transpose(const Tensor &x, IntList perm);
VARUNA_STAGE_API Tensor slice(const Tensor &x, int64_t axis, int64_t start,
                              int64_t end, int64_t step);
VARUNA_STAGE_API Tensor concat(std::initializer_list<Tensor> xs, int64_t axis);
/// Slices of `x` along `axis` that tile it (sizes adding up to its size
/// there), into out[0 .. sizes.size): the views slice() would give, made by
/// one autograd node whose backward concatenates the pieces' gradients
/// (separate slices would each scatter theirs into zeros of x's size, to be
/// added up). The code generator emits it for a value's slices that tile it.
VARUNA_STAGE_API void split(const Tensor &x, int64_t axis, IntList sizes,
                            Tensor *out);
VARUNA_STAGE_API Tensor gather(const Tensor &x, const Tensor &idx, int64_t axis);
/// Lookup along axis 0 whose rows at `padding_idx` get no gradient.
VARUNA_STAGE_API Tensor embedding(const Tensor &table, const Tensor &idx,
                                  int64_t padding_idx);
VARUNA_STAGE_API Tensor gather_elements(const Tensor &x, const Tensor &idx,
                                        int64_t axis);
VARUNA_STAGE_API Tensor scatter_nd(const Tensor &data, const Tensor &idx,
                                   const Tensor &updates);
VARUNA_STAGE_API Tensor cumsum(const Tensor &x, int64_t axis, bool exclusive,
                               bool reverse);
/// varuna.linalg of `a` (and `b` for solve).
VARUNA_STAGE_API Tensor linalg(Linalg kind, const Tensor &a);
VARUNA_STAGE_API Tensor linalg(Linalg kind, const Tensor &a, const Tensor &b);
/// `pads`: ONNX order (all begins, then all ends).
VARUNA_STAGE_API Tensor pad(const Tensor &x, IntList pads, double value);
VARUNA_STAGE_API Tensor trilu(const Tensor &x, int64_t k, bool upper);

// --- Reductions and normalization -------------------------------------------
/// `step_mean`: varuna.reduce's step_mean (rt::reduceKernel).
VARUNA_STAGE_API Tensor reduce(Reduce kind, const Tensor &x, IntList axes,
                               bool keepdim, bool step_mean = false);
VARUNA_STAGE_API Tensor softmax(const Tensor &x, int64_t axis, bool log);
/// varuna.softmax's `safe`: all -inf rows give zeros (rt::softmaxKernel).
VARUNA_STAGE_API Tensor safe_softmax(const Tensor &x, int64_t axis);
/// `weight`/`bias` may be undefined.
VARUNA_STAGE_API Tensor layer_norm(const Tensor &x, int64_t axis,
                                   const Tensor &weight, const Tensor &bias,
                                   double epsilon);
/// `mean`/`var` may be undefined (no running statistics).
VARUNA_STAGE_API Tensor batch_norm(const Tensor &x, const Tensor &weight,
                                   const Tensor &bias, const Tensor &mean,
                                   const Tensor &var, double momentum,
                                   double epsilon);

// --- Linear algebra, convolution, losses ------------------------------------
VARUNA_STAGE_API Tensor matmul(const Tensor &a, const Tensor &b);
/// `mask` may be undefined.
VARUNA_STAGE_API Tensor attention(const Tensor &q, const Tensor &keyT,
                                  const Tensor &v, const Tensor &mask,
                                  double scale);
/// `pads`: ONNX order (begins, then ends, of each spatial dim).
VARUNA_STAGE_API Tensor conv(const Tensor &x, const Tensor &w, const Tensor &b,
                             IntList strides, IntList pads, IntList dilations,
                             int64_t groups);
/// `pads`: one per spatial dim (symmetric), as torch's conv_transposeNd.
VARUNA_STAGE_API Tensor conv_transpose(const Tensor &x, const Tensor &w,
                                       const Tensor &b, IntList strides,
                                       IntList pads, IntList outputPadding,
                                       IntList dilations, int64_t groups);
VARUNA_STAGE_API Tensor pool(Pool kind, const Tensor &x, IntList kernel,
                             IntList strides, IntList pads, IntList dilations,
                             bool ceilMode, bool countIncludePad);
VARUNA_STAGE_API Tensor cross_entropy(Context &ctx, const Tensor &logits,
                                      const Tensor &labels,
                                      LossReduction reduction, bool hasIgnore,
                                      int64_t ignoreIndex, bool logInput);
/// cross_entropy with class weights [C] (and label smoothing in [0, 1],
/// logits only).
VARUNA_STAGE_API Tensor cross_entropy_weighted(
    Context &ctx, const Tensor &logits, const Tensor &labels,
    const Tensor &weight, LossReduction reduction, bool hasIgnore,
    int64_t ignoreIndex, bool logInput, double smoothing);
/// cross_entropy of logits with label smoothing (0 < smoothing <= 1).
VARUNA_STAGE_API Tensor cross_entropy_smoothed(Context &ctx,
                                               const Tensor &logits,
                                               const Tensor &labels,
                                               LossReduction reduction,
                                               bool hasIgnore,
                                               int64_t ignoreIndex,
                                               double smoothing);

// --- The generated library's table -------------------------------------------
using BodyFn = void (*)(Context &ctx, const Tensor *args, const Tensor *params,
                        Tensor *results);

struct SectionEntry {
  const char *name;          ///< the section function (section_<k>)
  int body;                  ///< index of its distinct body
  BodyFn fn;
  int numArgs, numParams, numResults;
  const char *const *params; ///< parameter names, in the order fn reads them
};

inline constexpr int kAbiVersion = 1;

struct JobTable {
  int abiVersion;            ///< kAbiVersion of the generator
  const char *jobHash;       ///< hash of the job.mlir the code came from
  int numSections;
  const SectionEntry *sections;
  int numBodies;
};

} // namespace varuna::stage

extern "C" {
/// Exported by every generated stage library.
typedef const varuna::stage::JobTable *(*varuna_stage_job_table_fn)();
}

#endif // VARUNA_RUNTIME_STAGEAPI_H
