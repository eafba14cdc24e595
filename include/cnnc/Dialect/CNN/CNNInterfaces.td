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

def CNN_LayoutSensitiveOpInterface : OpInterface<"LayoutSensitiveOpInterface"> {
  let cppNamespace = "::cnnc::cnn";
  let description = [{
    An op whose semantics depend on which dimension of its 4-D operands and
    results is the channel. Its `layout` attribute (`#cnn.layout`, NCHW by
    default) says which:
    - NCHW: activations N x C x H x W, filters F x C/groups x KH x KW;
    - NHWC: activations N x H x W x C, filters K x R x S x C/groups (cuDNN's
      KRSC).
    Operands of rank below 4 (per-channel vectors, [N, C] matrices) keep the
    channel at dimension 1 in both. Every 4-D operand and result is permuted
    the same way between the two (NCHW->NHWC is FCHW->KRSC), so:
    - `cnn-layout` makes an NCHW op NHWC by transposing its 4-D operands and
      results and setting the layout, and leaves NHWC ones alone;
    - the reference interpreter runs an NHWC op on its NCHW kernels between
      the inverse transposes;
    - the CUDA target picks the NHWC kernels and cuDNN descriptors.
    The verifiers check shapes with `getChannelDim`.
  }];
  let methods = [
    InterfaceMethod<"The op's activation layout.",
      "::cnnc::cnn::Layout", "getLayout", (ins),
      [{ return $_op.getLayout(); }]>,
    InterfaceMethod<"Sets the op's activation layout (operand types unchanged).",
      "void", "setLayout", (ins "::cnnc::cnn::Layout":$layout),
      [{ $_op.setLayout(layout); }]>,
  ];
  let extraSharedClassDeclaration = [{
    bool isNHWC() { return $_op.getLayout() == ::cnnc::cnn::Layout::NHWC; }
    /// The channel dimension of `type` (an operand's or a result's) under the
    /// op's layout.
    int64_t getChannelDim(::mlir::Type type) {
      return ::cnnc::cnn::channelDim(::llvm::cast<::mlir::RankedTensorType>(type),
                                     $_op.getLayout());
    }
  }];
}

def CNN_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::cnnc::cnn";
  let description = [{
    An op's reverse-mode rule, kept with the op: given the gradients of its
    results, it builds the gradient of each operand that needs one and hands
    it to the `GradientEmitter` (include/cnnc/Dialect/CNN/Gradient.h), which
    sums the gradients a value receives from several users. `cnn-autodiff` is
    a generic driver: it walks the forward ops in reverse and asks each op.
    Elementwise ops without a rule of their own get one from their scalar
    derivative (`ElementwiseOpInterface::buildScalarGradient`).
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the operands' gradients at the builder's insertion point from
        `g.resultGrad(i)` and passes each to `g.accumulate(operand, grad)`,
        for the operands where `g.wants(operand)`. Fails (with a diagnostic
        at the op) where an operand that needs a gradient has none.
      }], "::mlir::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$b, "::cnnc::cnn::GradientEmitter &":$g)>,
  ];
}

def CNN_ReferenceEvalOpInterface : OpInterface<"ReferenceEvalOpInterface"> {
  let cppNamespace = "::cnnc::cnn";
  let description = [{
    How the CPU reference interpreter (lib/Reference) evaluates the op: one
    `evaluate` per op, StableHLO-style, reading its operands' tensors from
    and writing its results' tensors into the interpreter's `Evaluator`. The evaluations are
    external models that lib/Reference attaches (Interpreter.cpp, next to
    each op's `exec`), so the dialect does not depend on the interpreter; the
    interpreter is a generic driver that asks each op. Elementwise ops need
    no model: the driver runs their scalar body (ElementwiseOpInterface), and
    the fused ops run through FusedOps.cpp.
  }];
  let methods = [
    InterfaceMethod<[{
        Computes the op's results from its operands in `evaluator`'s
        environment (the interpreter's state, opaque to the dialect); fails
        with a diagnostic at the op.
      }], "::mlir::LogicalResult", "evaluate",
      (ins "::cnnc::reference::Evaluator &":$evaluator)>,
  ];
}

def CNN_KernelCallOpInterface : OpInterface<"KernelCallOpInterface"> {
  let cppNamespace = "::cnnc::cnn";
  let description = [{
    An op whose CUDA lowering is launches of prelude kernels
    (kernels/<Family>.cuh), described as data kept with the op: for each
    launch, the kernel's name and template arguments (element types,
    flags), the grid as a rule (one thread per element of an operand or
    result, a grid-stride loop over N units, one block per unit), and the
    arguments (the op's buffers, integers and floats from its shapes and
    attributes, records of them, constant tables): KernelCall
    (include/cnnc/Dialect/CNN/KernelCall.h). The description is no target
    text; the CUDA printer has one case for every op with this interface.
    Decisions about the launch are cnn-prepare-for-emission's `#cnn.launch`
    (the grid ceiling, the block, a reduction strategy), which the
    description reads from the attribute it is given. The dialect verifies
    the description wherever the op carries a `#cnn.launch`
    (verifyKernelCall: buffers and grid values of the op, of static shape,
    32-bit arguments in range, ...).
  }];
  let methods = [
    InterfaceMethod<[{
        Appends the op's launches, in order, as `launch` decides them.
      }], "void", "describeKernelCalls",
      (ins "::cnnc::cnn::LaunchAttr":$launch,
           "::llvm::SmallVectorImpl<::cnnc::cnn::KernelCall> &":$calls)>,
  ];
}

#endif
