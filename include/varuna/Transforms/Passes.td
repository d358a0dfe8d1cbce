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

#endif // VARUNA_TRANSFORMS_PASSES_TD
