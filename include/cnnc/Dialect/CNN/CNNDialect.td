//===- CNNDialect.td - the cnn dialect ---------------------*- tablegen -*-===//
#ifndef CNNC_DIALECT_CNN_CNNDIALECT_TD
#define CNNC_DIALECT_CNN_CNNDIALECT_TD

include "mlir/IR/OpBase.td"

def CNN_Dialect : Dialect {
  let name = "cnn";
  let summary = "Convolutional-network training ops on ranked tensors";
  let description = [{
    The `cnn` dialect models one training step of a convolutional network with
    value semantics on builtin ranked tensors: forward ops (conv2d, batch_norm,
    pooling, matmul, ...), their backward ops, loss and optimizer updates.
    Layout-sensitive ops (LayoutSensitiveOpInterface) operate on NCHW tensors
    (4-D: batch, channels, height, width) unless their `layout` is
    `#cnn.layout<NHWC>`. Element types are f32 and f16; labels are i32/i64.
    Model parameters are function arguments tagged `cnn.param = "name"`; their
    values live outside the IR in a `.cnnw` weights file.

    Constraint on every op (CNN_BoundedResults): each result is statically
    shaped, its element count is at most the context's ceiling (2^40 by
    default, the bound on graph inputs too) and its size in bytes fits in
    int64; the sizes an op derives from its attributes (padding, windows,
    concatenation) are computed with checked arithmetic.
  }];
  let cppNamespace = "::cnnc::cnn";
  let hasConstantMaterializer = 1;
  // #cnn.layout<...> (CNNAttrs.td).
  let useDefaultAttributePrinterParser = 1;
  // The discardable `cnn.*` attributes (argument roles, the memory plan, the
  // weights file) are checked by the dialect: CNNDialect.cpp lists them.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
  let extraClassDeclaration = [{
    /// The most elements a tensor of this context may have (CNN_BoundedResults
    /// and the importer's graph inputs); a tool may lower or raise it.
    int64_t getMaxTensorElements() const { return maxTensorElements; }
    void setMaxTensorElements(int64_t n) { maxTensorElements = n; }

  private:
    int64_t maxTensorElements = ::cnnc::kDefaultMaxTensorElements;

  public:
  }];
}

// Every result of a cnn op has a bounded size: its element count and byte
// size fit in int64 and the element count is at most the dialect's ceiling
// (cnnc/Support/ShapeLimits.h, the rule graph inputs obey too), so no pass,
// planner or kernel sees an overflowing or absurd shape. Checked first,
// before the op's own shape verification.
def CNN_BoundedResults : NativeOpTrait<"CNNBoundedResults"> {
  let cppNamespace = "::cnnc::cnn";
}

class CNN_Op<string mnemonic, list<Trait> traits = []>
    : Op<CNN_Dialect, mnemonic, !listconcat([CNN_BoundedResults], traits)>;

#endif
