//===- VarunaDialect.td - The varuna dialect ---------------*- tablegen -*-===//
//
// The `varuna` dialect holds one *training graph*: graph inputs whose leading
// (batch) dimension is symbolic, named parameters with a reference to their
// initial values, compute ops with ATen-like semantics, and the scalar loss.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNADIALECT_TD
#define VARUNA_DIALECT_VARUNA_IR_VARUNADIALECT_TD

include "mlir/IR/OpBase.td"

def Varuna_Dialect : Dialect {
  let name = "varuna";
  let cppNamespace = "::varuna";
  let summary = "Training graphs for pipeline-parallel compilation";
  let description = [{
    A module in this dialect is one training graph imported from a framework
    export (ONNX or TorchScript):

    * `varuna.param` ops at module level declare the parameters by the names
      the framework gave them, with their static type and a reference
      (`#varuna.data`) to their initial values on disk. Weight bytes never
      appear in the IR text.
    * One `func.func` (marked `varuna.graph`) computes the loss: its arguments
      are the graph inputs (named by `varuna.name` argument attributes), the
      result marked `varuna.loss` is the scalar loss.
    * Values are `!varuna.tensor<[dims], type>`: every dimension is static
      except at most one that is a multiple of the micro-batch size `B`
      (`B` or `B*k`). Every op's FLOPs and bytes are therefore affine in `B`.

    Ops follow ATen semantics (numpy broadcasting, ONNX-style negative axes are
    normalized at import) so the code generator can emit ATen calls directly.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let useFoldAPI = kEmitFoldAdaptorFolder;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
}

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNADIALECT_TD
