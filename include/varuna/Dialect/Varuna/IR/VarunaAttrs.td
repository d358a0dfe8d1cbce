//===- VarunaAttrs.td - varuna dialect attributes ----------*- tablegen -*-===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNAATTRS_TD
#define VARUNA_DIALECT_VARUNA_IR_VARUNAATTRS_TD

include "varuna/Dialect/Varuna/IR/VarunaDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Varuna_DataAttr : AttrDef<Varuna_Dialect, "Data"> {
  let mnemonic = "data";
  let summary = "Where a parameter's initial values live on disk";
  let description = [{
    `#varuna.data<file = "model.onnx.data", offset = 0, size = 8192>`: the
    initial values are `size` bytes at byte `offset` of `file`, little-endian,
    row-major, of the parameter's element type. `file` is relative to the
    directory of the IR's source model (or absolute). Importers never copy
    weight bytes into the IR; they record where they are.

    `digest` (optional; the importers always write it): the CRC-32 of the
    bytes' first and last 4 KiB (`rt::paramDigest`), taken when the model
    was imported. Whoever reads the bytes later compares it, so a model file
    changed or replaced after compiling (re-exported with other weights or
    another shape) is an error naming the parameter instead of weights read
    from the wrong bytes. Absent: not checked.
  }];
  let parameters = (ins
    StringRefParameter<"file the bytes are in">:$file,
    "int64_t":$offset,
    "int64_t":$size,
    DefaultValuedParameter<"int64_t", "-1",
                           "digest of the bytes; -1: none">:$digest
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Varuna_CostAttr : AttrDef<Varuna_Dialect, "Cost"> {
  let mnemonic = "cost";
  let summary = "Estimated cost of one op as affine functions of the batch B";
  let description = [{
    `#varuna.cost<flops = B*2048, backward = B*4096, bytes = B*512>`: forward
    floating-point operations, backward FLOPs (gradients of every input) and
    bytes of the results, each `a*B + c` for micro-batch size B. Attached by
    `varuna-annotate-costs`; the model is documented in docs/cost-model.md.
  }];
  let parameters = (ins "::varuna::SymInt":$flops,
                        "::varuna::SymInt":$backward,
                        "::varuna::SymInt":$bytes);
  let hasCustomAssemblyFormat = 1;
}

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNAATTRS_TD
