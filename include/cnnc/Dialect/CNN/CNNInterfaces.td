//===- CNNInterfaces.td - cnn op interfaces ----------------*- tablegen -*-===//
//
// What an op *is*, declared once on the op and asked by every stage: the
// reference interpreter, cnn-fuse, cnn-autodiff, cnn-layout, the memory plan
// and the CUDA target never list op names.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_CNNINTERFACES_TD
#define CNNC_DIALECT_CNN_CNNINTERFACES_TD

include "mlir/IR/OpBase.td"

def CNN_ElementwiseOpInterface : OpInterface<"ElementwiseOpInterface"> {
  let cppNamespace = "::cnnc::cnn";
  let description = [{
    An op whose every result element is a function of the operand elements at
    the same index. Operands have the result's rank; a dimension of size 1 in
    an operand is broadcast (numpy rules). The op defines that function once,
    as a scalar body of `arith`/`math` ops on f32 (`buildScalar`), and its
    derivative (`buildScalarGradient`). From these:
    - the reference interpreter evaluates the op (through a one-op
      `cnn.fused_elementwise`),
    - `cnn-fuse` merges it with its elementwise neighbours into one kernel,
    - `cnn-lower-elementwise` makes the lone ones `cnn.fused_elementwise`, the
      only elementwise form the CUDA target prints,
    - `cnn-autodiff` builds the gradient of each operand (summed over the
      broadcast dimensions),
    - `cnn-layout` permutes the op's operands freely (layout-agnostic) and the
      memory plan may compute it in place.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the f32 scalar of the result from the f32 scalars of the
        operands (in operand order) at the builder's insertion point.
      }], "::mlir::Value", "buildScalar",
      (ins "::cnnc::cnn::ScalarBuilder &":$s, "::mlir::ValueRange":$x)>,
    InterfaceMethod<[{
        Builds the scalar gradient of operand #`index`: d result / d x[index]
        times `dy` (the result's gradient); `y` is the result scalar. Returns
        a null value where the operand has no gradient.
      }], "::mlir::Value", "buildScalarGradient",
      (ins "::cnnc::cnn::ScalarBuilder &":$s, "::mlir::ValueRange":$x,
           "::mlir::Value":$y, "::mlir::Value":$dy, "unsigned":$index),
      [{}], [{ return {}; }]>,
  ];
}

#endif
