//===- VarunaOps.td - varuna dialect operations ------------*- tablegen -*-===//
//
// Semantics follow ATen. Axes are non-negative (importers normalize them).
// Every op's result type is a function of its operand types and attributes;
// ops implementing InferTypeOpInterface compute it, the others (reshape,
// expand, cast, constant, full) state it and their verifiers check it.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNAOPS_TD
#define VARUNA_DIALECT_VARUNA_IR_VARUNAOPS_TD

include "varuna/Dialect/Varuna/IR/VarunaDialect.td"
include "varuna/Dialect/Varuna/IR/VarunaTypes.td"
include "varuna/Dialect/Varuna/IR/VarunaAttrs.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Varuna_Op<string mnemonic, list<Trait> traits = []>
    : Op<Varuna_Dialect, mnemonic, traits>;

def AnyVTensor : Type<CPred<"$_self.isa<::varuna::VTensorType>()">,
                      "varuna tensor", "::varuna::VTensorType">;

// Ops whose result type is inferred from operands and attributes.
class Varuna_InferOp<string mnemonic, list<Trait> traits = []>
    : Varuna_Op<mnemonic, !listconcat(traits,
        [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>])>;

//===----------------------------------------------------------------------===//
// Parameters, constants and graph structure
//===----------------------------------------------------------------------===//

def Varuna_ParamOp : Varuna_Op<"param", [Symbol]> {
  let summary = "A named parameter of the model";
  let description = [{
    Declares a parameter at module level by the name its framework gave it
    (`transformer.h.0.attn.c_attn.weight`). `type` is static. `init` says
    where the initial values are (`#varuna.data`); it may be absent for a
    parameter built by hand in a test. `frozen` marks state that is not
    trained (buffers such as running statistics or registered masks).

    ```mlir
    varuna.param @wte.weight : !varuna.tensor<[64, 32], f32>
        init #varuna.data<file = "gpt.onnx", offset = 812, size = 8192>
    ```

    A parameter read by ops in several places is one parameter: after
    partitioning such a parameter is a *tie*.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyVTensor>:$type,
                       OptionalAttr<AnyAttr>:$init, UnitAttr:$frozen);
  let assemblyFormat = [{
    $sym_name `:` $type (`init` $init^)? (`frozen` $frozen^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The initial-value reference, if any (verified to be #varuna.data).
    ::varuna::DataAttr getInitData() {
      return getInitAttr() ? getInitAttr().dyn_cast<::varuna::DataAttr>()
                           : ::varuna::DataAttr();
    }
    ::varuna::VTensorType getTensorType() {
      return getType().cast<::varuna::VTensorType>();
    }
  }];
}

def Varuna_GetParamOp : Varuna_Op<"get_param",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads a parameter declared by varuna.param";
  let description = [{
    `%w = varuna.get_param @wte.weight : !varuna.tensor<[64, 32], f32>`.
    The result type must equal the parameter's type.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$name attr-dict `:` qualified(type($result))";
}

def Varuna_ConstantOp : Varuna_Op<"constant", [Pure, ConstantLike]> {
  let summary = "A small static tensor";
  let description = [{
    `%c = varuna.constant dense<[1.0, 2.0]> : tensor<2xf32> -> !varuna.tensor<[2], f32>`.
    The value's shape and element type must match the static result type.
    Only small constants (masks, scales, index tables) live in the IR;
    weights are parameters.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$value attr-dict `->` qualified(type($result))";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Varuna_FullOp : Varuna_Op<"full", [Pure]> {
  let summary = "A tensor of the result type filled with one value";
  let description = [{
    `%z = varuna.full 0.0 : f32 -> !varuna.tensor<[B, 16], f32>`: like
    `torch.full`; the shape may depend on B. The value's type must be the
    result's element type (an integer attribute for integer tensors).
  }];
  let arguments = (ins AnyAttr:$value);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$value attr-dict `->` qualified(type($result))";
  let hasVerifier = 1;
}

def Varuna_ArangeOp : Varuna_Op<"arange", [Pure]> {
  let summary = "start + step * i for i in [0, n)";
  let description = [{
    A 1-D tensor of `n` elements where `n` is the result's only dimension,
    which may be `B*k`: `%p = varuna.arange 0, 1 -> !varuna.tensor<[B], i64>`.
    `start` and `step` are numbers of the element type.
  }];
  let arguments = (ins F64Attr:$start, F64Attr:$step);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$start `,` $step attr-dict `->` qualified(type($result))";
  let hasVerifier = 1;
}

def Varuna_CutPointOp : Varuna_Op<"cut_point",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "A boundary where the graph may be split between stages";
  let description = [{
    `%h2 = varuna.cut_point 3 (%h) {bytes_per_example = 2048} : !varuna.tensor<[B, 16, 32], f32>`
    passes through exactly the activations that cross the boundary: ops
    after it use its results, ops before it the originals. Values that do
    not cross as activations -- parameters, constants and what derives only
    from them (duplicated), and what derives only from graph inputs
    (re-read or recomputed) -- are not passed through. `index` numbers the
    cut-points from 1 in graph order; `bytes_per_example` is the size of the
    crossing activations for one example. Placed by varuna-find-cut-points.
  }];
  let arguments = (ins I64Attr:$index, Variadic<AnyVTensor>:$values);
  let results = (outs Variadic<AnyVTensor>:$results);
  let assemblyFormat = [{
    $index ` ` `(` $values `)` attr-dict `:` qualified(type($values))
  }];
  let hasVerifier = 1;
}

def Varuna_SharedParamOp : Varuna_Op<"shared_param",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A parameter read by several sections (a tie)";
  let description = [{
    `varuna.shared_param @wte.weight sections [0, 3]`: every stage holding one
    of these sections keeps a copy of the parameter; their gradients are
    summed across those stages each step so the copies stay identical, and
    the global gradient norm counts the parameter once. Placed by
    varuna-analyze-cross-partition. Parameters that merely have equal
    initial values (de-duplicated by an exporter) are not ties.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, DenseI64ArrayAttr:$sections);
  let assemblyFormat = "$param `sections` $sections attr-dict";
  let hasVerifier = 1;
}

def Varuna_ReductionKind : I64EnumAttr<"ReductionKind", "cross-stage reduction", [
    I64EnumAttrCase<"sum", 0>, I64EnumAttrCase<"sum_of_squares", 1>,
    I64EnumAttrCase<"max", 2>, I64EnumAttrCase<"any", 3>]> {
  let cppNamespace = "::varuna";
}

def Varuna_GlobalReduceOp : Varuna_Op<"global_reduce", [Symbol]> {
  let summary = "A value reduced across all stages of a pipeline every step";
  let description = [{
    State that crosses partitions, made explicit:

    * `varuna.global_reduce @loss sum over "loss"`: the loss of the global
      batch (each last stage's sum, divided by the global count);
    * `varuna.global_reduce @grad_norm sum_of_squares over "gradients"`: the
      global gradient norm for clipping and LAMB (each tie counted once);
    * `varuna.global_reduce @overflow any over "gradients"`: an fp16 overflow
      on any stage skips the step on every stage.

    The runtime performs each with one all-reduce over the replica's stages.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Varuna_ReductionKind:$kind,
                       StrAttr:$over);
  let assemblyFormat = "$sym_name $kind `over` $over attr-dict";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Varuna_BinaryOp<string mnemonic, string what>
    : Varuna_InferOp<mnemonic> {
  let summary = "Elementwise " # what # " with numpy broadcasting";
  let description = [{
    Both operands have the same element type; shapes broadcast as in numpy
    (a static 1 broadcasts against anything, `B*k` only against `B*k` or 1).
    One FLOP per result element.
  }];
  let arguments = (ins AnyVTensor:$lhs, AnyVTensor:$rhs);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` qualified(type($lhs)) `,` qualified(type($rhs)) `->` qualified(type($result))";
}

def Varuna_AddOp : Varuna_BinaryOp<"add", "addition">;
def Varuna_SubOp : Varuna_BinaryOp<"sub", "subtraction">;
def Varuna_MulOp : Varuna_BinaryOp<"mul", "multiplication">;
def Varuna_DivOp : Varuna_BinaryOp<"div", "division (true division for floats, truncation toward zero for integers)">;
def Varuna_PowOp : Varuna_BinaryOp<"pow", "power">;
def Varuna_MaximumOp : Varuna_BinaryOp<"maximum", "maximum">;
def Varuna_MinimumOp : Varuna_BinaryOp<"minimum", "minimum">;
def Varuna_AndOp : Varuna_BinaryOp<"and", "logical and (i1)">;
def Varuna_OrOp : Varuna_BinaryOp<"or", "logical or (i1)">;

def Varuna_ComparePredicate : I64EnumAttr<"ComparePredicate", "comparison", [
    I64EnumAttrCase<"eq", 0>, I64EnumAttrCase<"ne", 1>,
    I64EnumAttrCase<"lt", 2>, I64EnumAttrCase<"le", 3>,
    I64EnumAttrCase<"gt", 4>, I64EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::varuna";
}

def Varuna_CompareOp : Varuna_InferOp<"compare"> {
  let summary = "Elementwise comparison with broadcasting, giving i1";
  let description = [{
    `%m = varuna.compare lt, %a, %b : ... -> !varuna.tensor<[B, 16], i1>`.
  }];
  let arguments = (ins Varuna_ComparePredicate:$predicate, AnyVTensor:$lhs,
                       AnyVTensor:$rhs);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` qualified(type($lhs)) `,` qualified(type($rhs)) `->` qualified(type($result))";
}

def Varuna_WhereOp : Varuna_InferOp<"where"> {
  let summary = "Elementwise select: cond ? lhs : rhs, with broadcasting";
  let arguments = (ins AnyVTensor:$cond, AnyVTensor:$lhs, AnyVTensor:$rhs);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$cond `,` $lhs `,` $rhs attr-dict `:` qualified(type($cond)) `,` qualified(type($lhs)) `,` qualified(type($rhs)) `->` qualified(type($result))";
}

def Varuna_UnaryKind : I64EnumAttr<"UnaryKind", "elementwise function", [
    I64EnumAttrCase<"neg", 0>, I64EnumAttrCase<"exp", 1>,
    I64EnumAttrCase<"log", 2>, I64EnumAttrCase<"sqrt", 3>,
    I64EnumAttrCase<"rsqrt", 4>, I64EnumAttrCase<"reciprocal", 5>,
    I64EnumAttrCase<"tanh", 6>, I64EnumAttrCase<"erf", 7>,
    I64EnumAttrCase<"sigmoid", 8>, I64EnumAttrCase<"relu", 9>,
    I64EnumAttrCase<"gelu", 10>, I64EnumAttrCase<"gelu_tanh", 11>,
    I64EnumAttrCase<"abs", 12>, I64EnumAttrCase<"logical_not", 13, "not">,
    I64EnumAttrCase<"sin", 14>, I64EnumAttrCase<"cos", 15>,
    I64EnumAttrCase<"silu", 16>, I64EnumAttrCase<"softplus", 17>,
    I64EnumAttrCase<"floor", 18>, I64EnumAttrCase<"ceil", 19>,
    I64EnumAttrCase<"tan", 20>, I64EnumAttrCase<"atan", 21>,
    I64EnumAttrCase<"asin", 22>, I64EnumAttrCase<"acos", 23>,
    I64EnumAttrCase<"sinh", 24>, I64EnumAttrCase<"cosh", 25>,
    I64EnumAttrCase<"sign", 26>, I64EnumAttrCase<"round", 27>,
    I64EnumAttrCase<"trunc", 28>, I64EnumAttrCase<"expm1", 29>,
    I64EnumAttrCase<"log1p", 30>, I64EnumAttrCase<"stop_gradient", 31>,
    I64EnumAttrCase<"lgamma", 32>, I64EnumAttrCase<"digamma", 33>,
    I64EnumAttrCase<"erfinv", 34>, I64EnumAttrCase<"erfc", 35>]> {
  let cppNamespace = "::varuna";
}

def Varuna_UnaryOp : Varuna_InferOp<"unary", [SameOperandsAndResultType]> {
  let summary = "An elementwise function";
  let description = [{
    `%y = varuna.unary gelu_tanh, %x : !varuna.tensor<[B, 16, 128], f32>`.
    `gelu` is the erf form, `gelu_tanh` the tanh approximation, `not` takes
    i1; `stop_gradient` (torch's `detach`) is the value itself, through
    which no gradient flows back, and takes any element type; the others
    take floats (`neg` and `abs` also integers). Estimated FLOPs per
    element: 0 for stop_gradient, 1 for neg/abs/relu/not/floor/ceil, 8 for
    the transcendental ones, 14 for gelu/gelu_tanh/silu/softplus.
  }];
  let arguments = (ins Varuna_UnaryKind:$kind, AnyVTensor:$input);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$kind `,` $input attr-dict `:` qualified(type($input))";
  let hasVerifier = 1;
}

def Varuna_CastOp : Varuna_Op<"cast", [Pure]> {
  let summary = "Converts the element type (same shape)";
  let arguments = (ins AnyVTensor:$input);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
  let hasVerifier = 1;
}

def Varuna_DropoutOp : Varuna_Op<"dropout",
    [MemoryEffects<[MemRead, MemWrite]>, SameOperandsAndResultType]> {
  let summary = "Training-mode dropout";
  let description = [{
    Zeroes each element with probability `ratio` and scales the rest by
    1 / (1 - ratio), drawing from the stage's random generator (so two
    dropouts are never merged, and recompute must restore the generator
    state). `ratio` is in [0, 1).
  }];
  let arguments = (ins AnyVTensor:$input, F64Attr:$ratio);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input `,` $ratio attr-dict `:` qualified(type($input))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Varuna_ReshapeOp : Varuna_Op<"reshape", [Pure]> {
  let summary = "Row-major reshape to the result type's shape";
  let description = [{
    The element count is the same as an affine function of B (so a reshape
    of a batched tensor to a fixed shape is rejected: it would bake one batch
    size into the graph).
  }];
  let arguments = (ins AnyVTensor:$input);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
  let hasVerifier = 1;
}

def Varuna_ExpandOp : Varuna_Op<"expand", [Pure]> {
  let summary = "Broadcasts the input to the result type's shape (numpy rules)";
  let arguments = (ins AnyVTensor:$input);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
  let hasVerifier = 1;
}

def Varuna_TransposeOp : Varuna_InferOp<"transpose"> {
  let summary = "Permutes dimensions: result dim i is input dim perm[i]";
  let arguments = (ins AnyVTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input `,` $perm attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
}

def Varuna_SliceOp : Varuna_InferOp<"slice"> {
  let summary = "input[..., start:end:step, ...] along a static axis";
  let description = [{
    `start` and `end` are clamped to [0, size] like Python slicing with a
    positive `step`. The sliced axis must be static.
  }];
  let arguments = (ins AnyVTensor:$input, I64Attr:$axis, I64Attr:$start,
                       I64Attr:$end, I64Attr:$step);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
}

def Varuna_ConcatOp : Varuna_InferOp<"concat"> {
  let summary = "Concatenates along a static axis";
  let arguments = (ins Variadic<AnyVTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
}

def Varuna_GatherOp : Varuna_InferOp<"gather"> {
  let summary = "ONNX Gather / embedding lookup along an axis";
  let description = [{
    result shape = input.shape[:axis] + indices.shape + input.shape[axis+1:];
    indices are i64 or i32 and may be negative (counted from the end).
    `varuna.gather %wte, %ids {axis = 0}` is an embedding lookup; its backward
    is a scatter-add into the parameter's gradient. Gathering along a
    batch-dependent axis (flat indexing such as `mask.flatten()[b * S + s]`)
    is allowed: both sides are sized by the same micro-batch.
    `padding_idx` (axis 0 only; `nn.Embedding(padding_idx=k)`): the rows
    looked up at index k pass no gradient back to the input (the lookup
    alone: a tied use of the same parameter elsewhere still does).
  }];
  let arguments = (ins AnyVTensor:$input, AnyVTensor:$indices, I64Attr:$axis,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` qualified(type($input)) `,` qualified(type($indices)) `->` qualified(type($result))";
  let hasVerifier = 1;
}

def Varuna_GatherElementsOp : Varuna_InferOp<"gather_elements"> {
  let summary = "torch.gather: result[i][j] = input[i][indices[i][j]] along axis";
  let arguments = (ins AnyVTensor:$input, AnyVTensor:$indices, I64Attr:$axis);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` qualified(type($input)) `,` qualified(type($indices)) `->` qualified(type($result))";
}

def Varuna_CumsumOp : Varuna_InferOp<"cumsum"> {
  let summary = "Cumulative sum along a static axis";
  let description = [{
    `torch.cumsum(x, axis)`; `exclusive` starts from 0 (ONNX CumSum),
    `reverse` sums from the end. One FLOP per element.
  }];
  let arguments = (ins AnyVTensor:$input, I64Attr:$axis, BoolAttr:$exclusive,
                       BoolAttr:$reverse);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
}

def Varuna_LinalgKind : I64EnumAttr<"LinalgKind", "linear algebra function", [
    I64EnumAttrCase<"inv", 0>, I64EnumAttrCase<"det", 1>,
    I64EnumAttrCase<"logabsdet", 2>, I64EnumAttrCase<"cholesky", 3>,
    I64EnumAttrCase<"solve", 4>]> {
  let cppNamespace = "::varuna";
}

def Varuna_LinalgOp : Varuna_InferOp<"linalg"> {
  let summary = "Dense linear algebra on (batches of) small square matrices";
  let description = [{
    `a` is [.., n, n] with a static n (so the batch can only be among the
    leading dimensions). `inv`: the inverse [.., n, n]; `det` and
    `logabsdet` (log |det|, torch.slogdet's second result): [..];
    `cholesky`: the lower factor L with a = L L^T [.., n, n]; `solve` (a
    second operand `b` [.., n, k], or [.., n] for one right-hand side): x
    with a x = b, shaped like b, a's leading dimensions either equal to b's
    or absent. Floating point only. Computed (and differentiated) by ATen's
    torch.linalg functions; about n^3 FLOPs per matrix. Glow's invertible
    1x1 convolutions (slogdet of the weight), Gaussian processes (cholesky,
    solve), Mahalanobis distances.
  }];
  let arguments = (ins Varuna_LinalgKind:$kind, Variadic<AnyVTensor>:$operands);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$kind $operands attr-dict `:` functional-type($operands, $result)";
}

def Varuna_RandomDistribution : I64EnumAttr<"RandomDistribution", "distribution", [
    I64EnumAttrCase<"uniform", 0>, I64EnumAttrCase<"normal", 1>]> {
  let cppNamespace = "::varuna";
}

def Varuna_RandomOp : Varuna_Op<"random", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Random numbers of the result type (training-time noise)";
  let description = [{
    `uniform`: values in [a, b); `normal`: mean a, standard deviation b. Drawn
    from the stage's random generator like varuna.dropout (never merged;
    recompute restores the generator state). Used by stochastic depth
    (`drop_path`). The shape may depend on B.
  }];
  let arguments = (ins Varuna_RandomDistribution:$distribution, F64Attr:$a,
                       F64Attr:$b);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$distribution `,` $a `,` $b attr-dict `->` qualified(type($result))";
  let hasVerifier = 1;
}

def Varuna_PadOp : Varuna_InferOp<"pad"> {
  let summary = "Pads with a constant value";
  let description = [{
    `pads` holds the begin pads of every dimension, then the end pads, all
    non-negative (like `F.pad` in constant mode with the order of ONNX Pad).
    A batch-dependent dimension cannot be padded. `value` is a float or
    integer attribute of the element type.
  }];
  let arguments = (ins AnyVTensor:$input, DenseI64ArrayAttr:$pads,
                       AnyAttr:$value);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input `,` $pads `,` `value` `(` $value `)` attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
}

def Varuna_ScatterNDOp : Varuna_InferOp<"scatter_nd"> {
  let summary = "ONNX ScatterND: a copy of data with indexed slices replaced";
  let description = [{
    `indices` is [..., k] (integers, k static, k <= rank(data)); each index
    tuple `indices[i]` selects the slice `data[i0, ..., i(k-1)]`, which is
    replaced by `updates[i]`. `updates` has shape
    `indices.shape[:-1] + data.shape[k:]`; the result has data's type
    (`out = data.clone(); out[tuple(indices.T)] = updates`, the form in-place
    slice assignment such as `x[..., 1:] = y` exports to). Indices must not
    repeat (as ONNX requires); negative indices wrap.
  }];
  let arguments = (ins AnyVTensor:$data, AnyVTensor:$indices,
                       AnyVTensor:$updates);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` qualified(type($data)) `,` qualified(type($indices)) `,` qualified(type($updates)) `->` qualified(type($result))";
}

def Varuna_TriluOp : Varuna_InferOp<"trilu"> {
  let summary = "Keeps the upper (or lower) triangle of the last two dims";
  let description = [{
    `upper`: keep elements with j - i >= k (torch.triu(x, k)); otherwise
    keep j - i <= k (torch.tril(x, k)); others become zero.
  }];
  let arguments = (ins AnyVTensor:$input, I64Attr:$k, BoolAttr:$upper);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input attr-dict `:` qualified(type($input))";
}

//===----------------------------------------------------------------------===//
// Reductions and normalization
//===----------------------------------------------------------------------===//

def Varuna_ReduceKind : I64EnumAttr<"ReduceKind", "reduction", [
    I64EnumAttrCase<"sum", 0>, I64EnumAttrCase<"mean", 1>,
    I64EnumAttrCase<"max", 2>, I64EnumAttrCase<"min", 3>,
    I64EnumAttrCase<"prod", 4>]> {
  let cppNamespace = "::varuna";
}

def Varuna_ReduceOp : Varuna_InferOp<"reduce"> {
  let summary = "Reduces over the listed axes";
  let description = [{
    `%m = varuna.reduce mean, %x {axes = array<i64: 2>, keepdim = true}`.
    Axes are sorted, unique and in range. One FLOP per input element.

    `step_mean` (set by varuna-mark-step-means on a mean over the examples
    that only the loss reads): while the trainer runs a micro-batch inside
    a loss-denominators scope, the mean is its sum divided by the scope's
    next denominator -- how many elements the mean covers over the whole
    step -- instead of by its own micro-batch's count, so that the
    micro-batches' losses add up to the step's. Outside such a scope
    (evaluation, one micro-batch per step) it is a plain mean.
  }];
  let arguments = (ins Varuna_ReduceKind:$kind, AnyVTensor:$input,
                       DenseI64ArrayAttr:$axes, BoolAttr:$keepdim,
                       UnitAttr:$step_mean);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$kind `,` $input attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
}

def Varuna_SoftmaxOp : Varuna_InferOp<"softmax"> {
  let summary = "Softmax (or log-softmax) along one axis";
  let description = [{
    `safe` (softmax only): a row whose inputs are all -inf gives zeros and
    a zero gradient, not NaN -- PyTorch's `_safe_softmax`, which
    `scaled_dot_product_attention` uses, so that a query whose keys are all
    masked (left padding under a causal mask) attends to nothing.
  }];
  let arguments = (ins AnyVTensor:$input, I64Attr:$axis, UnitAttr:$log,
                       UnitAttr:$safe);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$input attr-dict `:` qualified(type($input))";
}

def Varuna_LayerNormOp : Varuna_InferOp<"layer_norm", [AttrSizedOperandSegments]> {
  let summary = "Layer normalization over dims [axis, rank)";
  let description = [{
    (x - mean) / sqrt(var + epsilon) * weight + bias with the biased variance
    over dims [axis, rank); weight and bias (optional) have shape
    x.shape[axis:]. Result has the input's type.
  }];
  let arguments = (ins AnyVTensor:$input, Optional<AnyVTensor>:$weight,
                       Optional<AnyVTensor>:$bias, I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^ `:` qualified(type($weight)))? (`bias` $bias^ `:` qualified(type($bias)))?
    attr-dict `:` qualified(type($input)) `->` qualified(type($result))
  }];
}

def Varuna_BatchNormOp : Varuna_InferOp<"batch_norm", [AttrSizedOperandSegments]> {
  let summary = "Training-mode batch normalization over dim 1 (channels)";
  let description = [{
    Normalizes with the statistics of the current (micro-)batch:
    (x - mean_c) / sqrt(var_c + epsilon) * weight_c + bias_c, mean/var over
    all dims but 1. Note that under micro-batching the statistics are those
    of the micro-batch, as in every pipeline system. `running_mean` and
    `running_var` (frozen parameters) are updated with `momentum` when given.
  }];
  let arguments = (ins AnyVTensor:$input, AnyVTensor:$weight, AnyVTensor:$bias,
                       Optional<AnyVTensor>:$running_mean,
                       Optional<AnyVTensor>:$running_var,
                       F64Attr:$epsilon, F64Attr:$momentum);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias (`running` $running_mean^ `,` $running_var)?
    attr-dict `:` qualified(type(operands)) `->` qualified(type($result))
  }];
}

//===----------------------------------------------------------------------===//
// Linear algebra and convolution
//===----------------------------------------------------------------------===//

def Varuna_MatmulOp : Varuna_InferOp<"matmul"> {
  let summary = "torch.matmul (batched, broadcasting)";
  let description = [{
    For ranks >= 2: [..., n, k] x [..., k, m] -> [..., n, m] with the leading
    dims broadcast; a rank-1 lhs (rhs) is a row (column) vector whose added
    dimension is removed from the result. FLOPs = 2 * n * k * m * prod(batch).
  }];
  let arguments = (ins AnyVTensor:$lhs, AnyVTensor:$rhs);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` qualified(type($lhs)) `,` qualified(type($rhs)) `->` qualified(type($result))";
}

def Varuna_AttentionOp : Varuna_Op<"attention", [Pure]> {
  let summary = "Scaled dot-product attention (one fused kernel)";
  let description = [{
    softmax(where(mask, query @ key_t * scale, -inf), axis = -1) @ value,
    with `query` [..., Tq, d], `key_t` (the keys already transposed)
    [..., d, Tk], `value` [..., Tk, dv] and the result [..., Tq, dv]; the
    optional i1 `mask` (broadcastable to [..., Tq, Tk]) is true where a
    query may attend. Created by varuna-fuse-attention from the written-out
    form; computed (and differentiated) by ATen's
    scaled_dot_product_attention without materializing the [Tq, Tk] scores
    for the backward pass. FLOPs: both matmuls plus the softmax.
  }];
  let arguments = (ins AnyVTensor:$query, AnyVTensor:$key_t, AnyVTensor:$value,
                       Optional<AnyVTensor>:$mask, F64Attr:$scale);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = [{
    $query `,` $key_t `,` $value (`mask` $mask^ `:` qualified(type($mask)))?
    attr-dict `:` qualified(type($query)) `,` qualified(type($key_t)) `,`
    qualified(type($value)) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Varuna_ConvOp : Varuna_InferOp<"conv"> {
  let summary = "N-d convolution (NCHW), like torch.nn.functional.convNd";
  let description = [{
    input [N, C, spatial...], weight [F, C/group, kernel...], bias [F].
    `pads` holds the begin pads then the end pads of each spatial dim.
    out = floor((in + pad_begin + pad_end - dilation*(kernel-1) - 1)/stride) + 1.
    FLOPs = 2 * N * F * prod(out spatial) * (C/group) * prod(kernel).
  }];
  let arguments = (ins AnyVTensor:$input, AnyVTensor:$weight,
                       Optional<AnyVTensor>:$bias, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       I64Attr:$groups);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^ `:` qualified(type($bias)))? attr-dict
    `:` qualified(type($input)) `,` qualified(type($weight)) `->` qualified(type($result))
  }];
}

def Varuna_ConvTransposeOp : Varuna_InferOp<"conv_transpose"> {
  let summary = "N-d transposed convolution, like torch.nn.functional.conv_transposeNd";
  let description = [{
    input [N, C, spatial...], weight [C, F/group, kernel...], bias [F]: the
    gradient of varuna.conv with respect to its input. `pads` are the
    (symmetric) input paddings of that convolution, one per spatial dim;
    `output_padding` adds to one side of each output dim.
    out = (in - 1)*stride - 2*pad + dilation*(kernel-1) + output_padding + 1.
    FLOPs = 2 * N * C * prod(in spatial) * (F/group) * prod(kernel).
  }];
  let arguments = (ins AnyVTensor:$input, AnyVTensor:$weight,
                       Optional<AnyVTensor>:$bias, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$output_padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^ `:` qualified(type($bias)))? attr-dict
    `:` qualified(type($input)) `,` qualified(type($weight)) `->` qualified(type($result))
  }];
}

def Varuna_PoolKind : I64EnumAttr<"PoolKind", "pooling", [
    I64EnumAttrCase<"max", 0>, I64EnumAttrCase<"avg", 1>]> {
  let cppNamespace = "::varuna";
}

def Varuna_PoolOp : Varuna_InferOp<"pool"> {
  let summary = "Max or average pooling over the spatial dims of NC...";
  let description = [{
    Same window arithmetic as varuna.conv (`ceil_mode` rounds up). Average
    pooling divides by the window size including padding only if
    `count_include_pad`.
  }];
  let arguments = (ins Varuna_PoolKind:$kind, AnyVTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       BoolAttr:$ceil_mode, BoolAttr:$count_include_pad);
  let results = (outs AnyVTensor:$result);
  let assemblyFormat = "$kind `,` $input attr-dict `:` qualified(type($input)) `->` qualified(type($result))";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Varuna_LossReduction : I64EnumAttr<"LossReduction", "loss reduction", [
    I64EnumAttrCase<"none", 0>, I64EnumAttrCase<"sum", 1>,
    I64EnumAttrCase<"mean", 2>]> {
  let cppNamespace = "::varuna";
}

def Varuna_CrossEntropyOp : Varuna_InferOp<"cross_entropy"> {
  let summary = "Softmax cross-entropy of logits [N, C, d...] against labels [N, d...]";
  let description = [{
    Like `F.cross_entropy(logits, labels, ignore_index=..., reduction=...)`
    (`log_input` set: the input is already log-probabilities, i.e. NLL loss).
    With `mean`, the sum is divided by the number of labels not equal to
    `ignore_index` *in this micro-batch*; the runtime rescales so the loss is
    the mean over the global batch. `label_smoothing` in [0, 1] (not with
    `log_input`): the target mixes the one-hot label with the uniform
    distribution over the C classes, as `F.cross_entropy(label_smoothing=)`.
    `weight` (optional, [C], the logits' element type; a constant of the
    model: a frozen parameter or a constant) weighs each label's loss by its
    class's weight, as `F.cross_entropy(weight=)`: `mean` then divides by
    the sum of the weights of the labels not ignored (PyTorch's weighted
    mean), and that sum is what the runtime's step denominator counts.
  }];
  let arguments = (ins AnyVTensor:$logits, AnyVTensor:$labels,
                       Optional<AnyVTensor>:$weight,
                       Varuna_LossReduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index, UnitAttr:$log_input,
                       OptionalAttr<F64Attr>:$label_smoothing);
  let results = (outs AnyVTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = "$reduction `,` $logits `,` $labels (`weight` $weight^ `:` qualified(type($weight)))? attr-dict `:` qualified(type($logits)) `,` qualified(type($labels)) `->` qualified(type($result))";
}

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNAOPS_TD
