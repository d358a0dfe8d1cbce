//===- Passes.td - varuna passes ---------------------------*- tablegen -*-===//

#ifndef VARUNA_TRANSFORMS_PASSES_TD
#define VARUNA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PrintGraphSummary : Pass<"varuna-print-graph-summary", "mlir::ModuleOp"> {
  let summary = "Prints a readable summary of a training graph";
  let description = [{
    An analysis that leaves the IR unchanged and prints, to the stream named
    by `output` (default stdout):

    * the graph inputs with their symbolic shapes (`[B, 16] i64`),
    * parameter count and bytes (trainable and frozen), the largest
      parameters, and every parameter read in more than one place (a tie
      candidate, e.g. an embedding reused by the output projection),
    * a histogram of op kinds, and the loss result with its type.

    ```
    graph gpt (from gpt.onnx)
      inputs:  input_ids [B, 16] i64, labels [B, 16] i64
      params:  28 trainable, 52,352 elements (204.5 KiB) ...
    ```

    Preconditions: the module holds one `func.func` marked `varuna.graph`.
    Fails (with a diagnostic on the module) if there is none.
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "Where to print the summary ('-' for stdout)">
  ];
}

def AnnotateCosts : Pass<"varuna-annotate-costs", "mlir::ModuleOp"> {
  let summary = "Attaches estimated FLOPs and bytes, affine in B, to every op";
  let description = [{
    Sets `varuna.cost = #varuna.cost<flops = .., backward = .., bytes = ..>`
    on every op of the training graph (see `varuna::getOpCost` and
    docs/cost-model.md), and the sum over the graph on the graph function as
    `varuna.total_cost`. Each number is `a*B + c` for micro-batch size B, so
    one annotation serves every micro-batch size.

    Before:
    ```mlir
    %y = varuna.matmul %x, %w : !varuna.tensor<[B, 16, 32], f32>,
        !varuna.tensor<[32, 96], f32> -> !varuna.tensor<[B, 16, 96], f32>
    ```
    After:
    ```mlir
    %y = varuna.matmul %x, %w {varuna.cost = #varuna.cost<flops = B*98304,
        backward = B*196608, bytes = B*6144>} : ...
    ```

    Preconditions: a verified module with one `func.func` marked
    `varuna.graph`. Fails (diagnostic on the module) if there is none, or on
    an op whose cost is not affine in B. Re-running it overwrites the
    annotations (idempotent).
  }];
  let dependentDialects = ["::varuna::VarunaDialect"];
}

def FindCutPoints : Pass<"varuna-find-cut-points", "mlir::ModuleOp"> {
  let summary = "Places cut-points where only small activations cross";
  let description = [{
    Chooses the boundaries at which the training graph may be split into
    pipeline stages and makes each explicit as a `varuna.cut_point` that
    passes through exactly the activations crossing it (see
    `varuna::GraphStructure` for what counts as crossing).

    1. A position is a candidate if it is *clean*: activations cross it,
       there is compute on both sides, and no parameter is used on both sides
       unless it is a tie (uses spanning more than half the graph, like tied
       embeddings, or a parameter of at most 64 KiB, like a gate applied
       after a few layers) -- so a cut never falls inside an attention block.
    2. Repeated blocks are found by structural hashing (the transformer layer
       repeated N times): for each block size of at least 3 ops (a Linear +
       ReLU layer: matmul, add, relu), the longest back-to-back run
       names the block, then every occurrence of it counts, also those with
       other ops between them (a gate after some layers); the smallest block
       covering at least 90% of what the best-covering one covers is taken
       (a block of three layers and their gate covers a little more than
       the layer). If it covers at least half of the graph, the cuts are
       the boundaries before each occurrence and after the last, at the
       phase of the block where the fewest
       bytes cross (the earliest such phase: the layer boundary, where only
       the residual stream crosses). The sections before the first block
       (embedding) and after the last (head and loss) stay sections of their
       own unless their compute is under a quarter of the median section's,
       in which case they merge with their neighbour.
    3. Otherwise (ResNet, ConvNeXt with stages of different widths), or when
       `num-cut-points` asks for more cuts than there are block boundaries,
       the cuts are placed for balanced compute: cut j goes near the j/(K+1)
       point of the graph's compute, at the candidate with the fewest crossing
       bytes within half a section of it. The default is 8 cuts.

    `max-bytes-per-cut` drops candidates that carry more bytes per example.

    Before (one layer of a GPT block stack):
    ```mlir
    %h1 = varuna.add %h0, %mlp0 : ... -> !varuna.tensor<[B, 16, 32], f32>
    %w = varuna.get_param @h.1.ln_1.weight : ...
    %n = varuna.layer_norm %h1 weight %w ...
    ```
    After:
    ```mlir
    %h1 = varuna.add %h0, %mlp0 : ... -> !varuna.tensor<[B, 16, 32], f32>
    %c = varuna.cut_point 1 (%h1) {bytes_per_example = 2048 : i64} : !varuna.tensor<[B, 16, 32], f32>
    %w = varuna.get_param @h.1.ln_1.weight : ...
    %n = varuna.layer_norm %c weight %w ...
    ```

    The graph function gets `varuna.num_sections` and, when a repeated block
    was found, `varuna.repeated_block = [start op, ops per block, count]`
    (count: its occurrences).

    Preconditions: one `func.func` marked `varuna.graph`, straight-line body,
    no `varuna.cut_point` yet. Failure modes: no graph; `num-cut-points`
    larger than the number of clean positions (the message gives the
    maximum); no candidate under `max-bytes-per-cut` (the message gives the
    smallest crossing). A graph with no clean position gets a warning and
    stays one section.
  }];
  let options = [
    Option<"numCutPoints", "num-cut-points", "int64_t", /*default=*/"0",
           "Number of cut-points to place (0: automatic)">,
    Option<"maxBytesPerCut", "max-bytes-per-cut", "int64_t", /*default=*/"0",
           "Largest activation bytes per example a cut may carry (0: no cap)">
  ];
  let dependentDialects = ["::varuna::VarunaDialect"];
}

def OutlineSections : Pass<"varuna-outline-sections", "mlir::ModuleOp"> {
  let summary = "Outlines each section between cut-points into a function";
  let description = [{
    For a graph with cut-points 1..K-1, creates `func.func @section_k` for
    k = 0..K-1 holding the ops between cut-point k and k+1, with explicit
    inputs and outputs:

    * arguments: the activations received at cut-point k (`varuna.recv = i`,
      the i-th value of the cut), then the graph inputs the section reads
      (`varuna.name`);
    * results: the activations sent at cut-point k+1 (`varuna.send = i`);
      the last section returns the graph's results (`varuna.loss` kept);
    * parameters are read inside with `varuna.get_param`; static values
      (weights, transposed weights, masks from constants) and input-only
      values (attention masks, position ids) are recomputed in every section
      that uses them -- each decision is visible as the cloned ops;
    * `varuna.section = k` and the section's summed `varuna.cost` (when costs
      were annotated).

    An activation produced in section i and used in section j > i+1 already
    passes through every cut-point in between, so it is forwarded: it is an
    output and an input of the intermediate sections.

    The original graph function stays (for reference and the check). The
    pass then checks that composing the sections reproduces it: the
    structural hash of every graph result and of every value sent across a
    cut, computed through the sections (arguments bound to the previous
    section's results), must equal the hash computed on the original graph.

    Before:
    ```mlir
    func.func @forward(%x) attributes {varuna.graph} {
      %h = ... %x ...
      %c = varuna.cut_point 1 (%h) : ...
      %l = ... %c ...
      return %l
    }
    ```
    After (in addition):
    ```mlir
    func.func @section_0(%x {varuna.name = "x"}) -> (... {varuna.send = 0})
    func.func @section_1(%h {varuna.recv = 0}) -> (... {varuna.loss})
    ```

    Preconditions: one graph function with cut-points (a graph with none
    gives one section). Fails if the check fails (naming the section and the
    value) or if sections already exist.
  }];
  let dependentDialects = ["::varuna::VarunaDialect", "::mlir::func::FuncDialect"];
}

def AnalyzeCrossPartition
    : Pass<"varuna-analyze-cross-partition", "mlir::ModuleOp"> {
  let summary = "Makes every value that crosses sections explicit";
  let description = [{
    Runs on outlined sections (varuna-outline-sections) and records each
    cross-partition decision in the IR:

    * ties: a trainable parameter read by several sections gets
      `varuna.shared_param @p sections [i, j]`; its gradient is summed across
      those stages and the copies stay identical;
    * forwarded activations: on each section, `varuna.forwarded` lists the
      received values it passes on unchanged (produced in section i, used in
      j > i + 1);
    * recomputed inputs: `varuna.inputs` lists the graph inputs a section
      reads (values derived only from inputs, such as attention masks and
      position ids, are recomputed there rather than sent);
    * duplicated constants: `varuna.duplicated` counts the static ops
      (constants, shape-only ops, weight transposes) recomputed in a section;
    * `varuna.params` lists the parameters each section reads;
    * `varuna.body = j`: the section's body equals section j's up to
      parameter names (j is the first such section), so the code generator
      emits one function for both -- the repeated layers of a transformer
      share one;
    * global state: `varuna.global_reduce @loss sum over "loss"` always;
      `@grad_norm sum_of_squares over "gradients"` with `global-grad-norm`
      (clipping by global norm, LAMB); `@overflow any over "gradients"` with
      `overflow-check` (fp16 dynamic loss scaling).

    Before:
    ```mlir
    func.func @section_0(...) attributes {varuna.section = 0} {
      %w = varuna.get_param @wte.weight ...
    func.func @section_3(...) attributes {varuna.section = 3} {
      %w = varuna.get_param @wte.weight ...
    ```
    After:
    ```mlir
    varuna.shared_param @wte.weight sections [0, 3]
    varuna.global_reduce @loss sum over "loss"
    func.func @section_0(...) attributes {varuna.params = ["wte.weight", ...], ...}
    ```

    Preconditions: sections exist. Fails otherwise, or if run twice.
  }];
  let options = [
    Option<"globalGradNorm", "global-grad-norm", "bool", /*default=*/"false",
           "The optimizer needs the global gradient norm (clipping, LAMB)">,
    Option<"overflowCheck", "overflow-check", "bool", /*default=*/"false",
           "fp16 dynamic loss scaling: skip the step on any overflow">
  ];
  let dependentDialects = ["::varuna::VarunaDialect"];
}

def Partition : Pass<"varuna-partition", "mlir::ModuleOp"> {
  let summary = "Groups consecutive sections into P balanced pipeline stages";
  let description = [{
    For every P from 1 to the number of sections K (or only `stages`), finds
    the grouping of consecutive sections into P stages that minimizes the
    slowest stage (exact; varuna::partitionAll in lib/Plan), under an
    optional per-device memory limit, and records it on the module:

    ```mlir
    module attributes {varuna.partitions = [
        {stages = 2 : i64, boundaries = array<i64: 0, 5, 9>,
         bottleneck = 1.2e9 : f64, imbalance = 1.04 : f64}, ...]}
    ```

    The cost of a section is its forward + backward FLOPs per example (the
    `varuna.cost` from varuna-annotate-costs). Memory per stage: parameters
    read (weights + gradients + `state-copies` optimizer states, 4 bytes per
    element each) plus the stashed stage input of each in-flight
    micro-batch (`micro-batch` examples each; Varuna's schedule keeps P - s at
    stage s).

    With `profile`, measured times replace the estimates: a JSON file
    `{"sections": [{"index": 0, "forward_seconds": 0.012,
    "backward_seconds": 0.025}, ...]}` with one entry per section, or
    varuna-calibrate's calibration.json, whose times are arrays by
    micro-batch size (the largest size's are taken; docs/cost-model.md).

    Preconditions: outlined sections with costs. Fails on `stages` larger
    than the number of sections (stating the maximum), or when no grouping
    fits `memory-limit` (naming the stage that does not fit).
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Only this pipeline depth (0: every P from 1 to the sections)">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes of device memory per stage (0: unlimited)">,
    Option<"rankBaseline", "rank-baseline", "int64_t", /*default=*/"0",
           "Bytes a rank holds besides its stage (the runtime, libtorch), "
           "taken off memory-limit (varuna-compile: 256 MiB)">,
    Option<"microBatch", "micro-batch", "int64_t", /*default=*/"1",
           "Examples per micro-batch, for the stashed activations">,
    Option<"stateCopies", "state-copies", "int64_t", /*default=*/"2",
           "Optimizer state copies per parameter (AdamW: 2, SGD: 0 or 1)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "Measured section times (JSON) replacing the static estimates">
  ];
}

def FuseAttention : Pass<"varuna-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Recognizes scaled dot-product attention written out";
  let description = [{
    Exporters write attention as matmul, scale, mask, softmax, matmul; this
    pass replaces the chain with one `varuna.attention`, which ATen computes
    with its fused scaled_dot_product_attention kernel: faster, and the
    backward pass no longer keeps the [Tq, Tk] scores and probabilities of
    every head (the biggest activations of a transformer layer).

    The chain, each intermediate with no other use:
    ```mlir
    %s = varuna.matmul %q, %kt          // [..., Tq, d] x [..., d, Tk]
    %x = varuna.mul %s, %scale          // optional: mul or div by a scalar
    %m = varuna.where %c, %ninf, %x     // optional: %ninf is -inf; or
                                        //   where %c, %x, %ninf
    %p = varuna.softmax %m {axis = last}
    %y = varuna.matmul %p, %v           // [..., Tk, dv]
    ```
    becomes `%y = varuna.attention %q, %kt, %v mask %keep {scale}` where
    `%keep` is true where the query may attend: `%c` for the second `where`
    form, and for the first the input of `%c = varuna.unary not, %keep` (or
    a new `not` of `%c`). q, k_t and v must have the same rank and leading
    dimensions. A dropout between softmax and the last matmul (ratio > 0)
    keeps the chain as it is, since the fused kernel would draw different
    random numbers than the original model. The ops left dead are erased.
    Always succeeds.
  }];
  let dependentDialects = ["::varuna::VarunaDialect"];
}

def FuseGelu : Pass<"varuna-fuse-gelu", "mlir::ModuleOp"> {
  let summary = "Recognizes GELU written out as elementwise ops";
  let description = [{
    Exporters write GELU as a chain of elementwise ops; this pass replaces
    the chain with one `varuna.unary gelu` (erf form) or `gelu_tanh` (tanh
    approximation), which ATen evaluates -- and differentiates -- with one
    kernel instead of eight, saving the intermediate activations too.

    Erf form, `0.5 * x * (1 + erf(x / sqrt(2)))` in any operand order, with
    the division also written as a multiplication by 1/sqrt(2):
    ```mlir
    %d = varuna.div %x, %sqrt2
    %e = varuna.unary erf, %d
    %a = varuna.add %e, %one
    %m = varuna.mul %x, %a
    %y = varuna.mul %m, %half
    ```
    becomes `%y = varuna.unary gelu, %x`.

    Tanh form, `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`
    with `x^3` as `x * (x * x)`, `(x * x) * x` or `pow(x, 3)`, becomes
    `varuna.unary gelu_tanh, %x`.

    Constants must match to a relative 1e-5; every intermediate must have no
    other use (else the chain is left alone). The chain's other ops become
    dead and are erased. Always succeeds.
  }];
  let dependentDialects = ["::varuna::VarunaDialect"];
}

def MarkStepMeans : Pass<"varuna-mark-step-means", "mlir::ModuleOp"> {
  let summary = "Marks the loss's means over the examples as step means "
                "and makes its terms without examples step means";
  let description = [{
    A step of M examples runs as micro-batches of m. A mean over the
    examples that the loss adds to other terms (an MoE auxiliary loss next
    to a cross_entropy whose ignore_index drops labels unevenly, a mean next
    to a sum) only adds up over the micro-batches when each micro-batch
    divides its sum by what the mean covers over the whole step, not by its
    own count. This pass finds those means and sets `step_mean` on them;
    the trainers then pass each one its step's denominator in program order
    with the mean cross_entropies (rt::LossDenominators; see
    LossNormalization.h), and the micro-batches' losses add up exactly.

    Marked: each `varuna.reduce mean` of the training graph (func.func
    marked varuna.graph) whose input has the batch dimension and whose
    result does not, and whose result is read only by ops whose results
    have no batch dimension either, transitively, ending only in the
    graph's loss result (varuna.loss). A mean over the examples that flows
    back into per-example values (a batch statistic normalizing
    activations) or into another output is left alone: its value must stay
    the micro-batch's own. Likewise, a `varuna.div` the importer marked
    `varuna.step_divisor` (a mean over an x[mask] selection: a sum divided
    by the selected count) loses the mark unless its result feeds only the
    loss. The mark changes nothing outside a trainer's
    loss-denominators scope (evaluation, whole-batch steps, losses the
    trainer weighs another way).

    ```mlir
    %m = varuna.reduce mean, %x {axes = array<i64: 0, 1>, keepdim = false}
           : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
    %l = varuna.add %ce, %m ...
    return %l           // {varuna.loss}
    ```
    gets `{step_mean}` on `%m`.

    Terms of the loss that do not depend on the examples at all -- a
    weight penalty (`ce + 0.01 * (w ** 2).sum()`), a KL divergence of
    weight posteriors, a number -- would be counted once per micro-batch
    by losses that add up. Each such term (an operand of the loss's add /
    sub, found through neg, cast, reshape and mul / div by a factor that
    does not depend on the examples either, whose other side does) becomes
    a step mean of itself over the examples: `varuna.expand` to [B], then
    `varuna.reduce mean {step_mean}`. Each micro-batch then adds its share
    m / M of the term, and the step counts it once; outside a
    loss-denominators scope the mean is the term itself.

    ```mlir
    %l = varuna.add %ce, %penalty   // %penalty from parameters alone
    ```
    becomes `varuna.add %ce, %m` with `%m = varuna.reduce mean, %e
    {step_mean}` of `%e = varuna.expand %penalty : [] -> [B]`.

    Runs before varuna-outline-sections (the sections copy the mark); a
    module that already has sections is an error. Without a training graph
    or a loss result, nothing is marked.
  }];
  let dependentDialects = ["::varuna::VarunaDialect"];
}

#endif // VARUNA_TRANSFORMS_PASSES_TD
