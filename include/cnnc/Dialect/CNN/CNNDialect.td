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
}

class CNN_Op<string mnemonic, list<Trait> traits = []>
    : Op<CNN_Dialect, mnemonic, traits>;

#endif
