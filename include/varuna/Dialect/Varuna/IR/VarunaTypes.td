//===- VarunaTypes.td - varuna dialect types ---------------*- tablegen -*-===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNATYPES_TD
#define VARUNA_DIALECT_VARUNA_IR_VARUNATYPES_TD

include "varuna/Dialect/Varuna/IR/VarunaDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Varuna_TensorType : TypeDef<Varuna_Dialect, "VTensor"> {
  let mnemonic = "tensor";
  let summary = "A tensor whose shape may scale with the micro-batch size";
  let description = [{
    `!varuna.tensor<[B, 16, 64], f32>` is a row-major tensor of element type
    `f32`. Each dimension is either a static size or `B*k`: `k` times the
    micro-batch size `B`, which is chosen at run time (written `B` when k = 1).
    At most one dimension may depend on `B`. `!varuna.tensor<[], f32>` is a
    scalar.

    Storage: `shape[batchDim]` holds the multiple `k`; `batchDim` is -1 for a
    fully static tensor.

    Element types: f16, bf16, f32, f64, i1, i8, ui8, i32, i64.
  }];
  let parameters = (ins
    ArrayRefParameter<"int64_t", "dimension sizes (the batch multiple at batchDim)">:$shape,
    "int64_t":$batchDim,
    "::mlir::Type":$elementType
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let skipDefaultBuilders = 0;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::llvm::ArrayRef<int64_t>":$shape,
                                        "::mlir::Type":$elementType), [{
      return $_get(elementType.getContext(), shape, -1, elementType);
    }]>
  ];
  let extraClassDeclaration = [{
    int64_t getRank() const { return getShape().size(); }
    bool isBatched() const { return getBatchDim() >= 0; }
    /// The multiple k of a batched tensor (0 if static).
    int64_t getBatchMultiple() const {
      return isBatched() ? getShape()[getBatchDim()] : 0;
    }
    /// Size of dimension `i` as an affine function of B.
    ::varuna::SymInt getDim(int64_t i) const;
    ::llvm::SmallVector<::varuna::SymInt> getDims() const;
    ::varuna::SymInt getNumElements() const;
    ::varuna::SymInt getSizeInBytes() const;
    /// Bytes of one element (bit-packed types round up to a byte).
    int64_t getElementBytes() const;
    /// A type with the same shape and another element type.
    VTensorType withElementType(::mlir::Type type) const;
    /// Builds the type of the given symbolic dims; fails (returns null) if a
    /// dim is not `k*B` or static, or more than one dim depends on B.
    static VTensorType getFromDims(::mlir::MLIRContext *ctx,
                                  ::llvm::ArrayRef<::varuna::SymInt> dims,
                                  ::mlir::Type elementType);
  }];
}

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNATYPES_TD
