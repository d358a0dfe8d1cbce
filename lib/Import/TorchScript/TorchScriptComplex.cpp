//===- TorchScriptComplex.cpp - Complex tensors and torch.fft -------------===//
//
// Complex tensors (complex64 / complex128), as rotary position embeddings
// in LLaMA's reference code use them:
//
//   xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
//   xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
//
// with freqs_cis a complex buffer made by torch.polar. A complex tensor is
// imported as a real tensor with a trailing axis of 2 (real, imaginary) --
// view_as_real's layout, so view_as_complex and view_as_real move no data
// -- and marked TSValue::complex. Complex buffers and constants are read the
// same way (their bytes are that layout). Every node that reads a complex
// value (or makes one) comes here from convertNode:
//
//  - by formula over the two parts: view_as_complex, view_as_real, polar,
//    complex, real, imag, conj (resolve_conj, resolve_neg: no-ops), abs,
//    exp, to / type a complex dtype (of a real tensor: imaginary part 0),
//    div by a complex tensor (of a complex or real one) and reciprocal:
//    x (c - di) / (c^2 + d^2);
//  - the FFTs (torch.fft.fft / ifft / rfft / irfft and their 2-D and n-D
//    forms, each norm; torch.stft: frames, window, a DFT of each): a DFT
//    along each transformed (static) dimension as
//    a matmul by constant cosine and sine matrices (n / s trimming or
//    zero-padding as torch) -- exact to rounding,
//    O(N^2) per transformed row, meant for the sequence and feature sizes
//    of FNet-style mixing and global filters;
//  - ops bilinear in two complex operands (mul, matmul, mm, bmm, mv,
//    einsum): the op's own handler on the four products of parts,
//    (a c - b d, a d + b c);
//  - through the op's own handler, once on the real parts and once on the
//    imaginary parts, the two results stacked into a complex value: ops that
//    only move, pick or add up elements (view, reshape, slice, select,
//    unsqueeze, transpose, permute, cat, stack, sum, mean, flatten, ...; size
//    and dim read the real part's), add and sub (a real operand joins the
//    real part), mul by a real tensor or number and div by one;
//  - to / type_as another complex type: the value as it is (complex128 is
//    not narrowed to complex64); zeros / new_zeros / empty of a complex
//    dtype: zeros in both parts;
//  - in place, copy_ only (a slice of a complex tensor written, as the
//    Fourier neural operator writes its low modes): the new value, which
//    convertNode writes back through the slices as for real tensors;
//  - anything else (other in-place ops, a
//    conversion to a real dtype, which in torch drops the imaginary part):
//    an error naming the op.
//
// Complex model inputs and losses are not supported (a graph input's dtype
// must be real: addInputs says so).
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"
#include "varuna/Import/Decompose.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace varuna::ts {

namespace {
/// Ops applied to the real and the imaginary parts separately (see above).
const llvm::StringSet<> &partwiseOps() {
  static const llvm::StringSet<> ops = {
      "view",       "reshape",   "flatten", "unflatten", "unsqueeze",
      "squeeze",    "transpose", "t",       "permute",   "movedim",
      "contiguous", "clone",     "detach",  "expand",    "expand_as",
      "repeat",     "slice",     "select",  "narrow",    "index_select",
      "index",      "cat",       "stack",   "chunk",     "split",
      "unbind",     "flip",      "roll",    "sum",       "mean",
      "cumsum",     "neg",       "size",    "dim",       "numel",
      "add",        "sub",       "rsub",    "mul",       "div",
      "zeros_like"};
  return ops;
}

/// Ops linear in each operand: with two complex operands, four products.
const llvm::StringSet<> &bilinearOps() {
  static const llvm::StringSet<> ops = {"mul", "matmul", "mm",
                                        "bmm", "mv",     "einsum"};
  return ops;
}

/// A dtype operand naming a complex type (ScalarType's codes).
bool isComplexDtype(const TSValue &v) {
  return v.kind == K::Int && v.i.isStatic() && v.i.constant >= 0 &&
         v.i.constant < int64_t(c10::ScalarType::NumOptions) &&
         c10::isComplexType(c10::ScalarType(v.i.constant));
}

bool isComplexTensor(const TSValue &v) {
  if (v.kind == K::Tensor)
    return v.complex;
  if (v.kind == K::List)
    return llvm::any_of(v.list, isComplexTensor);
  return false;
}

/// Part k (0 real, 1 imaginary) of the real tensor behind a complex value:
/// its slice of the trailing axis, without that axis.
FailureOr<Value> complexPart(TSImporter &imp, Value c, int64_t k, Location loc,
                             TSImporter::Node *n) {
  SmallVector<SymInt> dims = dimsOf(c);
  auto s = imp.sliceOf(c, dims.size() - 1, SymInt(k), SymInt(k + 1), 1, loc, n);
  if (failed(s))
    return failure();
  dims.pop_back();
  return imp.reshape(*s, dims, loc);
}

/// The complex value with parts re and im (of one shape).
FailureOr<TSValue> complexOf(TSImporter &imp, FailureOr<Value> re,
                             FailureOr<Value> im, Location loc,
                             TSImporter::Node *n) {
  if (failed(re) || failed(im))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*re);
  if (dims != dimsOf(*im))
    return imp.error(n, loc)
               << "the real and imaginary parts have different shapes, "
               << dimsStr(dims) << " and " << dimsStr(dimsOf(*im)),
           failure();
  dims.push_back(SymInt(1));
  Type et = tensorType(*re).getElementType();
  auto r = imp.reshape(*re, dims, loc);
  auto i = imp.reshape(imp.cast(*im, et, loc), dims, loc);
  if (failed(r) || failed(i))
    return failure();
  auto c = imp.make<ConcatOp>(loc, {*r, *i},
                              {imp.i64("axis", int64_t(dims.size()) - 1)});
  if (failed(c))
    return failure();
  TSValue out = TSValue::ofTensor(*c);
  out.complex = true;
  return out;
}

/// A real tensor as a complex one (imaginary part 0) of floating-point type
/// `et` (null: its own, f32 for integers).
FailureOr<TSValue> realAsComplex(TSImporter &imp, Value x, Type et,
                                 Location loc, TSImporter::Node *n) {
  if (!et)
    et = isFloatType(tensorType(x).getElementType())
             ? tensorType(x).getElementType()
             : imp.b().getF32Type();
  Value re = imp.cast(x, et, loc);
  Value zeros = imp.b().create<FullOp>(loc, tensorType(re),
                                       imp.b().getFloatAttr(et, 0.0));
  return complexOf(imp, re, zeros, loc, n);
}

enum class Dft { Forward, Inverse, RealForward, RealInverse };

/// One DFT of (re, im) -- im null: a real input -- along static `axis`, for
/// a signal of length `length` (of the output for RealInverse; an input
/// longer than that is trimmed, a shorter one padded with zeros, as torch's
/// n), scaled by `scale`: a matmul of the axis moved last by constant [N_in, K]
/// cosine and sine matrices. Forward: (a C + b S, b C - a S) for C, S = cos,
/// sin of 2 pi n k / N; Inverse: (a C - b S, b C + a S); RealForward: the first
/// N/2 + 1 outputs; RealInverse: the real a C' - b S' where C', S' weigh
/// each of the N/2 + 1 inputs by how often it appears in the Hermitian
/// spectrum (1 for k = 0 and k = N/2, else 2). The second result is null
/// for RealInverse.
FailureOr<std::pair<Value, Value>> dft(TSImporter &imp, Value re, Value im,
                                       int64_t axis, Dft kind, int64_t length,
                                       double scale, Location loc,
                                       TSImporter::Node *n) {
  int64_t last = tensorType(re).getRank() - 1;
  auto a = imp.swapDims(re, axis, last, loc);
  FailureOr<Value> b =
      im ? imp.swapDims(im, axis, last, loc) : FailureOr<Value>(Value());
  if (failed(a) || failed(b))
    return failure();
  SymInt size = dimsOf(*a)[last];
  int64_t in = size.isStatic() ? size.constant : -1;
  int64_t out = kind == Dft::RealForward ? length / 2 + 1 : length;
  if (in < 0)
    return imp.error(n, loc)
               << "an FFT over dimension " << axis << " of size " << size.str()
               << " is not supported (the size must be static)",
           failure();
  // n / s other than the size: torch trims the input, or pads it with zeros
  // (rows of the matrices that meet no input).
  int64_t expected = kind == Dft::RealInverse ? length / 2 + 1 : length;
  if (in > expected) {
    auto trim = [&](Value v) {
      return imp.sliceOf(v, last, SymInt(0), SymInt(expected), 1, loc, n);
    };
    a = trim(*a);
    if (failed(a) || (*b && failed(b = trim(*b))))
      return failure();
    in = expected;
  }
  std::vector<double> cs(in * out), sn(in * out);
  for (int64_t r = 0; r < in; ++r)
    for (int64_t k = 0; k < out; ++k) {
      double angle = 2 * M_PI * double((r * k) % length) / double(length);
      double w = 1;
      if (kind == Dft::RealInverse)
        w = r == 0 || 2 * r == length ? 1 : 2;
      cs[r * out + k] = w * scale * std::cos(angle);
      sn[r * out + k] = w * scale * std::sin(angle);
    }
  Type et = tensorType(*a).getElementType();
  Decomposer d(imp.b(), loc);
  Value C = d.constant({in, out}, et, cs), S = d.constant({in, out}, et, sn);
  MathBuilder m{imp, loc, et};
  auto mm = [&](Value x, Value w) -> FailureOr<Value> {
    if (!x)
      return failure();
    return imp.make<MatmulOp>(loc, {x, w});
  };
  FailureOr<Value> rOut = failure(), iOut = failure();
  if (!*b) { // a real input: b = 0
    rOut = mm(*a, C);
    iOut = kind == Dft::RealInverse ? FailureOr<Value>(Value())
           : kind == Dft::Inverse   ? mm(*a, S)
                                    : m.un(UnaryKind::neg, mm(*a, S));
  } else if (kind == Dft::Inverse || kind == Dft::RealInverse) {
    rOut = m.bin<SubOp>(mm(*a, C), mm(*b, S));
    iOut = kind == Dft::RealInverse ? FailureOr<Value>(Value())
                                    : m.bin<AddOp>(mm(*b, C), mm(*a, S));
  } else {
    rOut = m.bin<AddOp>(mm(*a, C), mm(*b, S));
    iOut = m.bin<SubOp>(mm(*b, C), mm(*a, S));
  }
  if (failed(rOut) || failed(iOut))
    return failure();
  auto rBack = imp.swapDims(*rOut, axis, last, loc);
  FailureOr<Value> iBack =
      *iOut ? imp.swapDims(*iOut, axis, last, loc) : FailureOr<Value>(Value());
  if (failed(rBack) || failed(iBack))
    return failure();
  return std::make_pair(*rBack, *iBack);
}
} // namespace

LogicalResult TSImporter::convertFFT(Node *n, Location loc, StringRef op) {
  // fft_X(self, n, dim, norm) / fft_Xn(self, s, dim, norm) /
  // fft_X2(self, s, dim=[-2, -1], norm).
  StringRef base = op.drop_front(4); // "fft", "rfft2", "irfftn", ...
  bool nd = base.ends_with("n") || base.ends_with("2");
  StringRef kindName = nd ? base.drop_back() : base;
  if (kindName != "fft" && kindName != "ifft" && kindName != "rfft" &&
      kindName != "irfft")
    return error(n, loc) << "unsupported TorchScript op 'aten::" << op
                         << "' (of torch.fft: fft, ifft, rfft, irfft and "
                            "their 2-D and n-D forms)";
  bool inverse = kindName.starts_with("i");
  bool real = kindName.contains("rfft");
  const TSValue &self = lookup(n->input(0));
  Value re, im;
  if (isComplexTensor(self)) {
    if (kindName == "rfft")
      return operandError(n, 0, loc, "a real tensor (rfft of a complex one)");
    auto c = complexTensor(self, loc);
    if (failed(c))
      return failure();
    auto r = complexPart(*this, *c, 0, loc, n),
         i = complexPart(*this, *c, 1, loc, n);
    if (failed(r) || failed(i))
      return failure();
    re = *r;
    im = *i;
  } else {
    auto x = tensorArg(n, 0, loc);
    if (failed(x))
      return failure();
    Type et = isFloatType(tensorType(*x).getElementType())
                  ? tensorType(*x).getElementType()
                  : b().getF32Type();
    re = cast(*x, et, loc);
  }
  int64_t rank = tensorType(re).getRank();
  // The transformed dimensions, and the signal length along each (the
  // output's for irfft: n or s, else 2 (size - 1) along the last).
  SmallVector<int64_t> dims;
  SmallVector<std::optional<int64_t>> lengths;
  if (!nd) {
    auto d = intArg(n, 2, loc);
    auto len = optArg(n, 1, loc, &TSImporter::intArg, int64_t(-1));
    if (failed(d) || failed(len))
      return failure();
    auto a = normIndex(n, *d, rank, loc);
    if (failed(a))
      return failure();
    dims.push_back(*a);
    lengths.push_back(*len < 0 ? std::nullopt : std::optional<int64_t>(*len));
  } else {
    // s alone names the last len(s) dimensions; neither: all (n-D) or the
    // last two (2-D).
    SmallVector<int64_t> s, given;
    if (!isNoneArg(n, 1)) {
      auto l = intListArg(n, 1, loc);
      if (failed(l))
        return failure();
      s = *l;
    }
    if (!isNoneArg(n, 2)) {
      auto l = intListArg(n, 2, loc);
      if (failed(l))
        return failure();
      given = *l;
    } else if (base.ends_with("2")) {
      given = {-2, -1};
    } else {
      for (int64_t i = s.empty() ? 0 : rank - int64_t(s.size()); i < rank; ++i)
        given.push_back(i);
    }
    for (int64_t g : given) {
      auto a = normIndex(n, g, rank, loc);
      if (failed(a))
        return failure();
      dims.push_back(*a);
    }
    if (!s.empty() && s.size() != dims.size())
      return error(n, loc) << "s has " << s.size() << " sizes for "
                           << dims.size() << " dimensions";
    for (size_t i = 0; i < dims.size(); ++i)
      lengths.push_back(s.empty() ? std::nullopt
                                  : std::optional<int64_t>(s[i]));
  }
  std::string norm = "backward";
  if (!isNoneArg(n, 3)) {
    auto s = strArg(n, 3, loc);
    if (failed(s))
      return failure();
    norm = *s;
  }
  if (norm != "backward" && norm != "forward" && norm != "ortho")
    return error(n, loc) << "unknown FFT norm '" << norm << "'";
  // The last dimension is the real one of rfft / irfft: rfft transforms it
  // first, irfft last.
  SmallVector<size_t> order;
  for (size_t i = 0; i < dims.size(); ++i)
    order.push_back(i);
  if (real && !inverse)
    std::reverse(order.begin(), order.end());
  for (size_t i : order) {
    bool realStep = real && i + 1 == dims.size();
    SymInt size = dimsOf(re)[dims[i]];
    int64_t length =
        lengths[i] ? *lengths[i]
        : !size.isStatic()
            ? -1
            : (realStep && inverse ? 2 * (size.constant - 1) : size.constant);
    if (length < 1)
      return error(n, loc) << "an FFT over dimension " << dims[i] << " of size "
                           << size.str()
                           << " is not supported (the size must be static)";
    double scale = norm == "ortho" ? 1 / std::sqrt(double(length))
                   : (norm == "forward") != inverse ? 1 / double(length)
                                                    : 1.0;
    Dft kind = realStep ? (inverse ? Dft::RealInverse : Dft::RealForward)
                        : (inverse ? Dft::Inverse : Dft::Forward);
    auto r = dft(*this, re, im, dims[i], kind, length, scale, loc, n);
    if (failed(r))
      return failure();
    std::tie(re, im) = *r;
  }
  if (!im) // irfft: a real result
    return bindResult(n, re);
  auto c = complexOf(*this, re, im, loc, n);
  if (failed(c))
    return failure();
  bind(n->output(), *c);
  return success();
}

/// stft(x, n_fft, hop_length, win_length, window, normalized, onesided,
/// return_complex, align_to_window), torch.stft after its Python part (which
/// pads for center=True): x [L] or [B, L] with a static L cut into frames
/// of n_fft every hop_length (n_fft / 4 by default; Tensor.unfold's
/// gather), each times the window (of win_length, centred in n_fft with
/// zeros; ones without one), then the DFT of each frame (dft: RealForward,
/// n_fft / 2 + 1 bins when onesided, the default for a real input), times
/// n_fft^-1/2 when normalized: [.., bins, frames], complex, or its
/// view_as_real layout with return_complex=False.
LogicalResult TSImporter::convertStft(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto nfft = intArg(n, 1, loc);
  if (failed(x) || failed(nfft))
    return failure();
  if (isComplexTensor(lookup(n->input(0))))
    return operandError(n, 0, loc, "a real signal (stft of a complex one is not supported)");
  auto hop = optArg(n, 2, loc, &TSImporter::intArg, *nfft / 4);
  auto winLength = optArg(n, 3, loc, &TSImporter::intArg, *nfft);
  auto normalized = optArg(n, 5, loc, &TSImporter::boolArg, false);
  auto onesided = optArg(n, 6, loc, &TSImporter::boolArg, true);
  auto asComplex = optArg(n, 7, loc, &TSImporter::boolArg, false);
  auto align = optArg(n, 8, loc, &TSImporter::boolArg, false);
  if (failed(hop) || failed(winLength) || failed(normalized) ||
      failed(onesided) || failed(asComplex) || failed(align))
    return failure();
  if (*align)
    return error(n, loc) << "stft with align_to_window=True is not supported";
  Value signal = *x;
  if (!isFloatType(tensorType(signal).getElementType()))
    signal = cast(signal, b().getF32Type(), loc);
  SmallVector<SymInt> dims = dimsOf(signal);
  int64_t last = int64_t(dims.size()) - 1;
  if (dims.empty() || dims.size() > 2 || !dims[last].isStatic())
    return error(n, loc) << "stft of a signal of shape " << dimsStr(dims)
                         << " (it takes [L] or [B, L] with a static L)",
           failure();
  int64_t length = dims[last].constant;
  if (*nfft < 1 || *nfft > length || *hop < 1 || *winLength < 1 ||
      *winLength > *nfft)
    return error(n, loc) << "stft: n_fft " << *nfft << ", hop_length " << *hop
                         << ", win_length " << *winLength
                         << " do not fit a signal of " << length << " samples",
           failure();
  // Frames [.., F, n_fft].
  int64_t frames = (length - *nfft) / *hop + 1;
  SmallVector<int64_t> positions;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t k = 0; k < *nfft; ++k)
      positions.push_back(f * *hop + k);
  Decomposer dec(b(), loc);
  auto picked = dec.gatherIndices(signal, last, positions);
  SmallVector<SymInt> framed(dims.begin(), dims.end() - 1);
  framed.append({SymInt(frames), SymInt(*nfft)});
  auto cut = failed(picked) ? picked : reshape(*picked, framed, loc);
  if (failed(cut))
    return failure();
  Value windowed = *cut;
  Type et = tensorType(windowed).getElementType();
  if (!isNoneArg(n, 4)) {
    auto w = tensorArg(n, 4, loc);
    if (failed(w))
      return failure();
    Value win = cast(*w, et, loc);
    if (tensorType(win).getRank() != 1 ||
        dimsOf(win)[0] != SymInt(*winLength))
      return operandError(n, 4, loc, "a window of win_length samples");
    int64_t left = (*nfft - *winLength) / 2;
    if (*winLength < *nfft) {
      auto padded = make<PadOp>(
          loc, {win},
          {attr("pads", b().getDenseI64ArrayAttr({left, *nfft - *winLength - left})),
           attr("value", b().getZeroAttr(et))});
      if (failed(padded))
        return failure();
      win = *padded;
    }
    auto product = make<MulOp>(loc, {windowed, win});
    if (failed(product))
      return failure();
    windowed = *product;
  } else if (*winLength < *nfft) { // ones of win_length, centred
    int64_t left = (*nfft - *winLength) / 2;
    SmallVector<double> ones(*nfft, 0.0);
    for (int64_t k = left; k < left + *winLength; ++k)
      ones[k] = 1.0;
    auto product = make<MulOp>(loc, {windowed, dec.constant({*nfft}, et, ones)});
    if (failed(product))
      return failure();
    windowed = *product;
  }
  int64_t axis = tensorType(windowed).getRank() - 1;
  auto spectrum =
      dft(*this, windowed, Value(), axis, *onesided ? Dft::RealForward : Dft::Forward,
          *nfft, *normalized ? 1.0 / std::sqrt(double(*nfft)) : 1.0, loc, n);
  if (failed(spectrum))
    return failure();
  // [.., F, bins] -> [.., bins, F].
  auto re = swapDims(spectrum->first, axis - 1, axis, loc);
  auto im = swapDims(spectrum->second, axis - 1, axis, loc);
  auto c = complexOf(*this, re, im, loc, n);
  if (failed(c))
    return failure();
  if (!*asComplex)
    c->complex = false; // view_as_real's layout: the real tensor itself
  bind(n->output(), *c);
  return success();
}

bool TSImporter::touchesComplex(Node *n) {
  // prim:: nodes (lists, tuples) carry values without reading them.
  if (!n->kind().is_aten())
    return false;
  StringRef op = n->kind().toUnqualString();
  if (op == "view_as_complex" || op == "polar" || op == "complex" ||
      op.starts_with("fft_") || op == "stft")
    return true;
  // A cast to a complex dtype, or zeros of one.
  if ((op == "to" || op == "zeros" || op == "new_zeros" || op == "empty") &&
      llvm::any_of(n->inputs(),
                   [&](JitValue *v) { return isComplexDtype(lookup(v)); }))
    return true;
  return llvm::any_of(n->inputs(),
                      [&](JitValue *v) { return isComplexTensor(lookup(v)); });
}

FailureOr<Value> TSImporter::complexTensor(const TSValue &v, Location loc) {
  if (v.tensor)
    return v.tensor;
  return readParam(v.param, loc);
}

LogicalResult TSImporter::convertComplex(Node *n, Location loc, StringRef op) {
  // In place, only copy_ (a slice of a complex tensor written:
  // convertNode writes it back); the result here, the new value.
  bool inplace = op.ends_with("_") && !op.ends_with("__");
  if (inplace && op != "copy_")
    return error(n, loc) << "in-place '" << op
                         << "' on a complex tensor is not supported (write "
                            "x = x op y)";
  auto part = [&](Value c, int64_t k) {
    return complexPart(*this, c, k, loc, n);
  };
  auto complexOf = [&](FailureOr<Value> re, FailureOr<Value> im) {
    return ::varuna::ts::complexOf(*this, re, im, loc, n);
  };
  auto fromParts = [&](FailureOr<Value> re,
                       FailureOr<Value> im) -> LogicalResult {
    auto c = complexOf(re, im);
    if (failed(c))
      return failure();
    bind(n->output(), *c);
    return success();
  };
  // Operand i: a complex tensor's two parts; fails unless it is one.
  auto parts = [&](unsigned i) -> FailureOr<std::pair<Value, Value>> {
    TSValue *v = operand(n, i);
    if (!v || !isComplexTensor(*v) || v->kind != K::Tensor)
      return operandError(n, i, loc, "a complex tensor");
    auto c = complexTensor(*v, loc);
    if (failed(c))
      return failure();
    auto re = part(*c, 0), im = part(*c, 1);
    if (failed(re) || failed(im))
      return failure();
    return std::make_pair(*re, *im);
  };
  auto realTensor = [&](unsigned i) -> FailureOr<Value> {
    TSValue *v = operand(n, i);
    if (v && isComplexTensor(*v))
      return operandError(n, i, loc, "a real tensor");
    return tensorArg(n, i, loc);
  };

  if (op == "zeros" || op == "new_zeros" || op == "empty") {
    // The op's own handler with the dtype's real type; zeros both parts.
    JitValue *dtype = *llvm::find_if(
        n->inputs(), [&](JitValue *v) { return isComplexDtype(lookup(v)); });
    auto it = handlers.find(("aten::" + op).str());
    if (it == handlers.end())
      return error(n, loc) << "unsupported TorchScript op 'aten::" << op << "'";
    TSValue saved = lookup(dtype);
    bind(dtype, TSValue::ofInt(int64_t(
                    c10::toRealValueType(c10::ScalarType(saved.i.constant)))));
    LogicalResult ok = (this->*(it->second))(n, loc);
    bind(dtype, saved);
    if (failed(ok))
      return failure();
    Value zeros = lookup(n->output()).tensor;
    return fromParts(zeros, zeros);
  }
  if (op == "copy_") {
    // copy_(target, src): src (complex, or a real one with imaginary part
    // 0) broadcast to the target's shape.
    if (!isComplexTensor(lookup(n->input(0))))
      return error(n, loc) << "copying a complex tensor into a real one "
                              "drops the imaginary part: copy .real";
    auto target = complexTensor(lookup(n->input(0)), loc);
    if (failed(target))
      return failure();
    FailureOr<Value> src = failure();
    if (isComplexTensor(lookup(n->input(1)))) {
      src = complexTensor(lookup(n->input(1)), loc);
    } else {
      auto r = tensorArg(n, 1, loc);
      auto c = failed(r) ? FailureOr<TSValue>(failure())
                         : realAsComplex(*this, *r,
                                         tensorType(*target).getElementType(),
                                         loc, n);
      src =
          failed(c) ? FailureOr<Value>(failure()) : FailureOr<Value>(c->tensor);
    }
    if (failed(src))
      return failure();
    Value v = cast(*src, tensorType(*target).getElementType(), loc);
    if (dimsOf(v) != dimsOf(*target))
      v = b().create<ExpandOp>(loc, tensorType(*target), v);
    TSValue out = TSValue::ofTensor(v);
    out.complex = true;
    bind(n->output(), out);
    return success();
  }
  if (op == "view_as_complex") {
    auto x = realTensor(0);
    if (failed(x))
      return failure();
    SmallVector<SymInt> dims = dimsOf(*x);
    if (dims.empty() || dims.back() != SymInt(2) ||
        !isFloatType(tensorType(*x).getElementType()))
      return error(n, loc) << "view_as_complex takes a floating-point tensor "
                              "whose last dimension is 2, not "
                           << dimsStr(dims);
    TSValue out = TSValue::ofTensor(*x);
    out.complex = true;
    bind(n->output(), out);
    return success();
  }
  if (op == "view_as_real") {
    auto c = complexTensor(lookup(n->input(0)), loc);
    if (failed(parts(0)) || failed(c)) // checks it is complex
      return failure();
    bindTensor(n->output(), *c);
    return success();
  }
  if (op == "polar" || op == "complex") {
    auto a = realTensor(0), t = realTensor(1);
    if (failed(a) || failed(t))
      return failure();
    if (op == "complex")
      return fromParts(a, t);
    MathBuilder m{*this, loc, tensorType(*a).getElementType()};
    return fromParts(m.bin<MulOp>(*a, m.un(UnaryKind::cos, *t)),
                     m.bin<MulOp>(*a, m.un(UnaryKind::sin, *t)));
  }
  if (op == "real" || op == "imag" || op == "conj" || op == "_conj" ||
      op == "conj_physical" || op == "resolve_conj" || op == "resolve_neg" ||
      op == "abs" || op == "exp") {
    auto p = parts(0);
    if (failed(p))
      return failure();
    auto [re, im] = *p;
    MathBuilder m{*this, loc, tensorType(re).getElementType()};
    if (op == "real" || op == "imag")
      return bindResult(n, op == "real" ? re : im);
    if (op == "resolve_conj" || op == "resolve_neg") {
      bind(n->output(), lookup(n->input(0)));
      return success();
    }
    if (op == "abs")
      return bindResult(
          n, m.un(UnaryKind::sqrt,
                  m.bin<AddOp>(m.bin<MulOp>(re, re), m.bin<MulOp>(im, im))));
    if (op == "exp") {
      auto e = m.un(UnaryKind::exp, re);
      return fromParts(m.bin<MulOp>(e, m.un(UnaryKind::cos, im)),
                       m.bin<MulOp>(e, m.un(UnaryKind::sin, im)));
    }
    return fromParts(re, m.un(UnaryKind::neg, im)); // conj
  }
  bool bothComplex = n->inputs().size() >= 2 &&
                     isComplexTensor(lookup(n->input(0))) &&
                     isComplexTensor(lookup(n->input(1)));
  if (op == "mul" && bothComplex) {
    auto x = parts(0), y = parts(1);
    if (failed(x) || failed(y))
      return failure();
    auto [a, b] = *x;
    auto [c, d] = *y;
    MathBuilder m{*this, loc, tensorType(a).getElementType()};
    return fromParts(m.bin<SubOp>(m.bin<MulOp>(a, c), m.bin<MulOp>(b, d)),
                     m.bin<AddOp>(m.bin<MulOp>(a, d), m.bin<MulOp>(b, c)));
  }
  if ((op == "div" && n->inputs().size() >= 2 &&
       isComplexTensor(lookup(n->input(1)))) ||
      op == "reciprocal") {
    // x / (c + di) = x (c - di) / (c^2 + d^2), x complex (a + bi) or real
    // (b = 0); reciprocal: x = 1. S4D's `C * (exp(dtA) - 1) / A`.
    bool div = op == "div";
    if (div && n->inputs().size() > 2 && !isNoneArg(n, 2))
      return error(n, loc) << "division of complex tensors with a rounding "
                              "mode";
    auto y = parts(div ? 1 : 0);
    if (failed(y))
      return failure();
    auto [c, d] = *y;
    MathBuilder m{*this, loc, tensorType(c).getElementType()};
    FailureOr<Value> a = m.c(1.0);
    Value bi; // the numerator's imaginary part; null for a real one
    if (div && isComplexTensor(lookup(n->input(0)))) {
      auto x = parts(0);
      if (failed(x))
        return failure();
      a = x->first;
      bi = x->second;
    } else if (div) {
      a = asTensor(lookup(n->input(0)), m.et, loc, n);
      if (succeeded(a))
        a = cast(*a, m.et, loc);
    }
    if (failed(a))
      return failure();
    auto den = m.bin<AddOp>(m.bin<MulOp>(c, c), m.bin<MulOp>(d, d));
    FailureOr<Value> re = m.bin<MulOp>(*a, c),
                     im = m.un(UnaryKind::neg, m.bin<MulOp>(*a, d));
    if (bi) { // + b d, + b c
      re = m.bin<AddOp>(re, m.bin<MulOp>(bi, d));
      im = m.bin<AddOp>(im, m.bin<MulOp>(bi, c));
    }
    return fromParts(m.bin<DivOp>(re, den), m.bin<DivOp>(im, den));
  }
  if (op == "to" || op == "type_as") {
    // The target: another tensor's type, or a dtype (None: a device only).
    // Between complex types the value stays as it is.
    bool toComplex = true;
    c10::TypePtr t1 = n->inputs().size() > 1 ? n->input(1)->type() : nullptr;
    if (op == "type_as" || (t1 && t1->cast<c10::TensorType>())) {
      toComplex = isComplexTensor(lookup(n->input(1)));
    } else if (t1) {
      auto isDevice = [](const c10::TypePtr &t) {
        return t->kind() == c10::TypeKind::DeviceObjType;
      };
      bool device =
          isDevice(t1) ||
          (t1->kind() == c10::TypeKind::OptionalType &&
           isDevice(t1->castRaw<c10::OptionalType>()->getElementType()));
      const TSValue *d = operand(n, device ? 2 : 1);
      if (d && d->kind == K::Int && d->i.isStatic())
        toComplex = isComplexDtype(*d);
    }
    if (!isComplexTensor(lookup(n->input(0)))) { // a real tensor made complex
      auto x = tensorArg(n, 0, loc);
      auto c = failed(x) ? FailureOr<TSValue>(failure())
                         : realAsComplex(*this, *x, Type(), loc, n);
      if (failed(c))
        return failure();
      bind(n->output(), *c);
      return success();
    }
    if (!toComplex)
      return error(n, loc) << "'" << op
                           << "' converts a complex tensor to a real dtype, "
                              "which drops the imaginary part: take .real (or "
                              "torch.view_as_real) instead";
    bind(n->output(), lookup(n->input(0)));
    return success();
  }
  if (op.starts_with("fft_"))
    return convertFFT(n, loc, op);
  if (op == "stft")
    return convertStft(n, loc);
  // Bilinear ops of two complex operands: (a + ib)(c + id) by the op's own
  // handler on the four products of parts (mul by formula, above).
  int64_t complexOperands = 0;
  for (JitValue *v : n->inputs()) {
    const TSValue &t = lookup(v);
    complexOperands += t.kind == K::List
                           ? llvm::count_if(t.list, isComplexTensor)
                           : isComplexTensor(t);
  }
  bool bilinear = bilinearOps().contains(op) && complexOperands == 2;
  if (bilinear && llvm::any_of(n->inputs(), [&](JitValue *v) {
        return llvm::count(n->inputs(), v) > 1 && isComplexTensor(lookup(v));
      }))
    return error(n, loc) << "'" << op
                         << "' of a complex tensor with itself is not "
                            "supported";
  if (!partwiseOps().contains(op) && !bilinearOps().contains(op))
    return error(n, loc) << "'" << op
                         << "' on a complex tensor is not supported; "
                            "complex tensors may be made by view_as_complex, "
                            "polar, complex or an FFT, multiplied, added, "
                            "reshaped, sliced and concatenated, and turned "
                            "back by view_as_real, real, imag or an inverse "
                            "FFT";

  // Through the op's own handler on parts: the j-th complex tensor among
  // the operands (lists flattened) is rebound to its part which[j] for the
  // call, and restored after. In the imaginary pass of add / sub a real
  // operand is 0 (it joins the real part only).
  bool additive = op == "add" || op == "sub" || op == "rsub";
  llvm::SmallVector<JitValue *> inputs;
  for (JitValue *v : n->inputs())
    if (!llvm::is_contained(inputs, v))
      inputs.push_back(v);
  llvm::SmallVector<TSValue> saved;
  for (JitValue *v : inputs)
    saved.push_back(lookup(v));
  auto it = handlers.find(("aten::" + op).str());
  if (it == handlers.end())
    return error(n, loc) << "unsupported TorchScript op 'aten::" << op << "'";
  auto runOnParts =
      [&](llvm::ArrayRef<int64_t> which,
          bool imaginaryPass) -> FailureOr<llvm::SmallVector<TSValue>> {
    size_t next = 0;
    std::function<FailureOr<TSValue>(const TSValue &)> partOf =
        [&](const TSValue &v) -> FailureOr<TSValue> {
      if (v.kind == K::List) {
        TSValue out = v;
        for (TSValue &e : out.list) {
          auto p = partOf(e);
          if (failed(p))
            return failure();
          e = *p;
        }
        return out;
      }
      if (v.kind != K::Tensor || !v.complex)
        return v;
      int64_t k = which[std::min(next++, which.size() - 1)];
      auto c = complexTensor(v, loc);
      auto p = failed(c) ? c : part(*c, k);
      if (failed(p))
        return failure();
      return TSValue::ofTensor(*p);
    };
    LogicalResult ok = success();
    for (auto [v, s] : llvm::zip(inputs, saved)) {
      // The 1 of add(x, y, alpha=1) is no tensor: only operands 0 and 1 of
      // add / sub are parts.
      bool operandOfSum = additive && (v == n->input(0) || v == n->input(1));
      if (imaginaryPass && operandOfSum && !isComplexTensor(s))
        bind(v, TSValue::ofFloat(0));
      else if (auto p = partOf(s); succeeded(p))
        bind(v, *p);
      else
        ok = failure();
    }
    if (succeeded(ok))
      ok = (this->*(it->second))(n, loc);
    for (auto [v, s] : llvm::zip(inputs, saved))
      bind(v, s);
    if (failed(ok))
      return failure();
    llvm::SmallVector<TSValue> outs;
    for (JitValue *o : n->outputs())
      outs.push_back(lookup(o));
    return outs;
  };
  if (bilinear) {
    auto rr = runOnParts({0, 0}, false), ii = runOnParts({1, 1}, false);
    auto ri = runOnParts({0, 1}, false), ir = runOnParts({1, 0}, false);
    if (failed(rr) || failed(ii) || failed(ri) || failed(ir))
      return failure();
    auto t = [&](FailureOr<llvm::SmallVector<TSValue>> &r) {
      return asTensor(r->front(), Type(), loc, n);
    };
    auto a = t(rr), bd = t(ii), c = t(ri), d = t(ir);
    if (failed(a))
      return failure();
    MathBuilder m{*this, loc, tensorType(*a).getElementType()};
    return fromParts(m.bin<SubOp>(a, bd), m.bin<AddOp>(c, d));
  }
  llvm::SmallVector<llvm::SmallVector<TSValue>> results;
  for (int64_t k = 0; k < 2; ++k) {
    auto r = runOnParts({k}, k == 1);
    if (failed(r))
      return failure();
    results.push_back(std::move(*r));
  }
  // Outputs: tensors (or lists of them) become complex again; anything else
  // (a size) is the real part's.
  std::function<FailureOr<TSValue>(const TSValue &, const TSValue &)> join =
      [&](const TSValue &re, const TSValue &im) -> FailureOr<TSValue> {
    if (re.kind == K::List) {
      TSValue out = re;
      for (auto [e, f] : llvm::zip(out.list, im.list)) {
        auto j = join(e, f);
        if (failed(j))
          return failure();
        e = *j;
      }
      return out;
    }
    if (re.kind != K::Tensor)
      return re;
    return complexOf(asTensor(re, Type(), loc, n),
                     asTensor(im, Type(), loc, n));
  };
  for (auto [o, re, im] : llvm::zip(n->outputs(), results[0], results[1])) {
    auto j = join(re, im);
    if (failed(j))
      return failure();
    bind(o, *j);
  }
  return success();
}

} // namespace varuna::ts
