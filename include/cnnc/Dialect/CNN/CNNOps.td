//===- CNNOps.td - cnn dialect ops -------------------------*- tablegen -*-===//
//
// Every op documents its constraints; each constraint is checked by the
// verifier (or by result type inference, which the verifier runs) and has a
// case in test/Dialect/CNN/invalid.mlir.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_CNNOPS_TD
#define CNNC_DIALECT_CNN_CNNOPS_TD

include "cnnc/Dialect/CNN/CNNDialect.td"
include "cnnc/Dialect/CNN/CNNAttrs.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "cnnc/Dialect/CNN/CNNInterfaces.td"

def CNN_FloatTensor : RankedTensorOf<[F32, F16]>;
def CNN_LabelTensor : RankedTensorOf<[I32, I64]>;
// The per-window argmax position of fused_max_pool2d (one byte each).
def CNN_WindowIndexTensor : RankedTensorOf<[UI8]>;
def CNN_Scalar : 0DTensorOf<[F32]>;

// Result type inference that also verifies: the shape checks of an op live in
// its inferReturnTypes. The CNNVerifyShapes trait runs them at the op's
// location before InferTypeOpInterface compares the inferred and declared
// result types, so a bad op gets one diagnostic naming operands and shapes.
def CNN_VerifyShapes : NativeOpTrait<"CNNVerifyShapes"> {
  let cppNamespace = "::cnnc::cnn";
}
def CNN_InferShapes : TraitList<[CNN_VerifyShapes, InferTypeOpAdaptor]>;
// The same for the reductions, whose result may also be f32 where the input
// is f16 (the sum is accumulated in f32 anyway): cnn-precision keeps
// normalization statistics in f32 (isCompatibleReturnTypes in CNNOps.cpp).
def CNN_InferShapesWide
    : TraitList<[CNN_VerifyShapes, InferTypeOpAdaptorWithIsCompatible]>;

class CNN_PureOp<string mnemonic, list<Trait> traits = []>
    : CNN_Op<mnemonic, !listconcat([Pure], traits)> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// An op with a `layout` attribute: it declares LayoutSensitiveOpInterface,
// which every stage asks instead of reading the attribute by name.
class CNN_LayoutOp<string mnemonic, list<Trait> traits = []>
    : CNN_PureOp<mnemonic, !listconcat([CNN_LayoutSensitiveOpInterface], traits)>;

// An op whose reverse-mode rule is its own (GradientOpInterface): the rule is
// `<Op>::buildGradient` in its family's file, lib/Dialect/CNN/Ops/<Family>.cpp.
def CNN_Gradient : DeclareOpInterfaceMethods<CNN_GradientOpInterface>;
// The op's CUDA lowering as data (KernelCallOpInterface): the printer has one
// case for every op that declares it.
def CNN_KernelCall : DeclareOpInterfaceMethods<CNN_KernelCallOpInterface>;

// Convolution attributes shared by conv2d and its gradients.
defvar ConvAttrs = (ins DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                    DenseI64ArrayAttr:$dilations, I64Attr:$groups);
defvar PoolAttrs = (ins DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                    DenseI64ArrayAttr:$padding, BoolAttr:$ceil_mode);
// The activation layout of a layout-sensitive op (CNN_LayoutOp below):
// #cnn.layout<NCHW> unless cnn-layout made it NHWC.
defvar CNN_Layout = DefaultValuedAttr<CNN_LayoutAttr, "::cnnc::cnn::Layout::NCHW">;
defvar LayoutArg = (ins CNN_Layout:$layout);

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def CNN_ConstantOp : CNN_Op<"constant", [Pure, ConstantLike]> {
  let summary = "Constant tensor";
  let description = [{ A small constant (large weights are parameters instead). }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let hasCustomAssemblyFormat = 1;
  let hasFolder = 1;
  let hasVerifier = 1;
}

def CNN_Conv2DOp : CNN_LayoutOp<"conv2d", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "2-D convolution (NCHW input, FCHW filter, no bias)";
  let description = [{
    `input` is N x C x H x W, `filter` is F x (C/groups) x KH x KW.
    With `layout = #cnn.layout<NHWC>` the input is N x H x W x C, the filter
    F x KH x KW x (C/groups) (KRSC) and the result N x OH x OW x F.
    `strides` and `dilations` have 2 positive entries, `padding` has 4
    non-negative entries (top, left, bottom, right). C and F are divisible by
    `groups`. The result is N x F x OH x OW with
    OH = (H + top + bottom - dil_h * (KH - 1) - 1) / stride_h + 1 >= 1.
  }];
  let arguments = !con((ins CNN_FloatTensor:$input, CNN_FloatTensor:$filter), ConvAttrs,
                       LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_BiasAddOp : CNN_LayoutOp<"bias_add", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Adds a per-channel bias along dimension 1";
  let description = [{
    `input` has rank >= 2; `bias` is 1-D with size input.dim(1) (with
    `layout = #cnn.layout<NHWC>`: the last dimension).
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_FloatTensor:$bias, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Elementwise ops (ElementwiseOpInterface)
//
// Each op below is the whole definition of its semantics: `scalar` builds the
// result from the operand scalars `x` (f32, via the ScalarBuilder `s`),
// `derivative` builds d result / d x[i] * dy (`y` is the result scalar). See
// docs/adding-an-op.md.
//===----------------------------------------------------------------------===//

class CNN_ElementwiseOp<string mnemonic, code scalar, code derivative,
                        list<Trait> traits = []>
    : CNN_PureOp<mnemonic, !listconcat([CNN_ElementwiseOpInterface], traits)> {
  let extraClassDeclaration = [{
    ::mlir::Value buildScalar(::cnnc::cnn::ScalarBuilder &s,
                              ::mlir::ValueRange x) {
  }] # scalar # [{
    }
    ::mlir::Value buildScalarGradient(::cnnc::cnn::ScalarBuilder &s,
                                      ::mlir::ValueRange x, ::mlir::Value y,
                                      ::mlir::Value dy, unsigned i) {
      (void)s; (void)x; (void)y; (void)dy; (void)i;
  }] # derivative # [{
    }
  }];
}

/// f(x): one float operand, the result of the same type.
class CNN_UnaryOp<string mnemonic, code scalar, code derivative,
                  dag attrs = (ins), list<Trait> traits = []>
    : CNN_ElementwiseOp<mnemonic, scalar, derivative,
                        !listconcat([SameOperandsAndResultType], traits)> {
  let arguments = !con((ins CNN_FloatTensor:$input), attrs);
  let results = (outs CNN_FloatTensor:$result);
}

/// f(lhs, rhs) with numpy broadcasting of same-rank operands: each dimension
/// is equal in both, or 1 in one of them; the result has the larger size.
class CNN_BinaryOp<string mnemonic, code scalar, code derivative,
                   list<Trait> traits = []>
    : CNN_ElementwiseOp<mnemonic, scalar, derivative,
                        !listconcat([CNN_InferShapes], traits)> {
  let arguments = (ins CNN_FloatTensor:$lhs, CNN_FloatTensor:$rhs);
  let results = (outs CNN_FloatTensor:$result);
  let description = [{
    Operands have the same element type and rank; each dimension is equal in
    both or 1 in one of them (numpy broadcasting); the result takes the larger
    size. The gradient of a broadcast operand is summed over the broadcast
    dimensions (`cnn.reduce_sum`).
  }];
}

def CNN_ReluOp : CNN_UnaryOp<"relu", [{ return s.max(x[0], s.c(0)); }],
    [{ return s.select(s.gt(y, s.c(0)), dy, s.c(0)); }], (ins), [CNN_Gradient]> {
  let summary = "max(x, 0)";
}

def CNN_ClipOp : CNN_UnaryOp<"clip",
    [{ return s.min(s.max(x[0], s.c(getMin().convertToFloat())),
                    s.c(getMax().convertToFloat())); }],
    [{ return s.mul(dy, s.inside(x[0], getMin().convertToFloat(),
                                 getMax().convertToFloat())); }],
    (ins F32Attr:$min, F32Attr:$max), [CNN_Gradient]> {
  let summary = "min(max(x, min), max) (ReLU6 is clip 0..6)";
  let description = [{ Requires `min <= max`. }];
  let hasVerifier = 1;
}

def CNN_ScaleOp : CNN_UnaryOp<"scale",
    [{ return s.mul(x[0], s.c(getFactor().convertToFloat())); }],
    [{ return s.mul(dy, s.c(getFactor().convertToFloat())); }],
    (ins F32Attr:$factor), [CNN_Gradient]> {
  let summary = "Multiplies every element by a constant factor";
  // The forms of GELU an exporter writes out (CNNCanonicalize.cpp).
  let hasCanonicalizer = 1;
}

def CNN_SigmoidOp : CNN_UnaryOp<"sigmoid", [{ return s.sigmoid(x[0]); }],
    [{ return s.mul(dy, s.mul(y, s.sub(s.c(1), y))); }]> {
  let summary = "1 / (1 + exp(-x))";
}

def CNN_TanhOp : CNN_UnaryOp<"tanh", [{ return s.tanh(x[0]); }],
    [{ return s.mul(dy, s.sub(s.c(1), s.mul(y, y))); }]> {
  let summary = "Hyperbolic tangent";
}

def CNN_ErfOp : CNN_UnaryOp<"erf", [{ return s.erf(x[0]); }],
    [{ return s.mul(dy, s.mul(s.c(1.1283791670955126),
                              s.exp(s.neg(s.mul(x[0], x[0]))))); }]> {
  let summary = "Gauss error function";
}

def CNN_ExpOp : CNN_UnaryOp<"exp", [{ return s.exp(x[0]); }],
    [{ return s.mul(dy, y); }]> {
  let summary = "e^x";
}

def CNN_SqrtOp : CNN_UnaryOp<"sqrt", [{ return s.sqrt(x[0]); }],
    [{ return s.div(s.mul(dy, s.c(0.5)), y); }]> {
  let summary = "Square root";
}

def CNN_NegOp : CNN_UnaryOp<"neg", [{ return s.neg(x[0]); }],
    [{ return s.neg(dy); }]> {
  let summary = "-x";
}

def CNN_AbsOp : CNN_UnaryOp<"abs",
    [{ return s.select(s.lt(x[0], s.c(0)), s.neg(x[0]), x[0]); }],
    // sign(x) * dy, 0 at x = 0 (as PyTorch)
    [{ return s.select(s.gt(x[0], s.c(0)), dy,
                       s.select(s.lt(x[0], s.c(0)), s.neg(dy), s.c(0))); }]> {
  let summary = "|x|";
}

def CNN_ReciprocalOp : CNN_UnaryOp<"reciprocal",
    [{ return s.div(s.c(1), x[0]); }],
    [{ return s.neg(s.mul(dy, s.mul(y, y))); }]> {
  let summary = "1 / x";
}

def CNN_PowOp : CNN_UnaryOp<"pow",
    [{ return s.pow(x[0], s.c(getExponent().convertToFloat())); }],
    [{ float e = getExponent().convertToFloat();
       return s.mul(dy, s.mul(s.c(e), s.pow(x[0], s.c(e - 1)))); }],
    (ins F32Attr:$exponent)> {
  let summary = "x raised to a constant exponent";
}

def CNN_ThresholdedReluOp : CNN_UnaryOp<"thresholded_relu",
    [{ return s.select(s.gt(x[0], s.c(getAlpha().convertToFloat())), x[0],
                       s.c(0)); }],
    [{ return s.select(s.gt(x[0], s.c(getAlpha().convertToFloat())), dy,
                       s.c(0)); }],
    (ins F32Attr:$alpha)> {
  let summary = "x where x > alpha, else 0 (ONNX ThresholdedRelu)";
}

def CNN_LeakyReluOp : CNN_UnaryOp<"leaky_relu",
    [{ return s.select(s.gt(x[0], s.c(0)), x[0],
                       s.mul(x[0], s.c(getAlpha().convertToFloat()))); }],
    [{ return s.select(s.gt(x[0], s.c(0)), dy,
                       s.mul(dy, s.c(getAlpha().convertToFloat()))); }],
    (ins F32Attr:$alpha)> {
  let summary = "x for x > 0, else alpha * x";
}

def CNN_HardSigmoidOp : CNN_UnaryOp<"hard_sigmoid",
    [{ return s.clamp(s.add(s.mul(x[0], s.c(getAlpha().convertToFloat())),
                            s.c(getBeta().convertToFloat())), 0, 1); }],
    [{ ::mlir::Value z = s.add(s.mul(x[0], s.c(getAlpha().convertToFloat())),
                       s.c(getBeta().convertToFloat()));
       return s.mul(s.mul(dy, s.c(getAlpha().convertToFloat())),
                    s.inside(z, 0, 1)); }],
    (ins F32Attr:$alpha, F32Attr:$beta)> {
  let summary = "max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid)";
  let description = [{ PyTorch's hardsigmoid is alpha = 1/6, beta = 0.5. }];
}

def CNN_HardSwishOp : CNN_UnaryOp<"hard_swish",
    [{ return s.mul(x[0], s.div(s.clamp(s.add(x[0], s.c(3)), 0, 6),
                                s.c(6))); }],
    [{ // PyTorch's hardswish_backward: 0 below -3, 1 above 3, (2x + 3) / 6
       // in between (both ends included in the outer branches).
       ::mlir::Value mid = s.mul(dy, s.div(s.add(s.mul(x[0], s.c(2)), s.c(3)),
                                   s.c(6)));
       ::mlir::Value upper = s.select(s.lt(x[0], s.c(3)), mid, dy);
       return s.select(s.gt(x[0], s.c(-3)), upper, s.c(0)); }]> {
  let summary = "x * relu6(x + 3) / 6";
}

def CNN_GeluOp : CNN_UnaryOp<"gelu",
    [{ if (getApproximate() == "tanh")
         return s.mul(s.mul(s.c(0.5), x[0]),
                      s.add(s.c(1), s.tanh(s.mul(s.c(0.7978845608028654),
                          s.add(x[0], s.mul(s.c(0.044715),
                              s.mul(x[0], s.mul(x[0], x[0]))))))));
       return s.mul(s.mul(s.c(0.5), x[0]),
                    s.add(s.c(1), s.erf(s.mul(x[0],
                                              s.c(0.7071067811865476))))); }],
    [{ ::mlir::Value v = x[0];
       if (getApproximate() == "tanh") {
         ::mlir::Value v2 = s.mul(v, v);
         ::mlir::Value inner = s.mul(s.c(0.7978845608028654),
                             s.add(v, s.mul(s.c(0.044715), s.mul(v2, v))));
         ::mlir::Value t = s.tanh(inner);
         ::mlir::Value dinner = s.mul(s.c(0.7978845608028654),
                              s.add(s.c(1), s.mul(s.c(3 * 0.044715), v2)));
         ::mlir::Value d = s.add(s.mul(s.c(0.5), s.add(s.c(1), t)),
                         s.mul(s.mul(s.c(0.5), v),
                               s.mul(s.sub(s.c(1), s.mul(t, t)), dinner)));
         return s.mul(dy, d);
       }
       ::mlir::Value cdf = s.mul(s.c(0.5), s.add(s.c(1), s.erf(s.mul(v,
                                                  s.c(0.7071067811865476)))));
       ::mlir::Value pdf = s.mul(s.c(0.3989422804014327),
                         s.exp(s.mul(s.c(-0.5), s.mul(v, v))));
       return s.mul(dy, s.add(cdf, s.mul(v, pdf))); }],
    (ins DefaultValuedAttr<StrAttr, "\"none\"">:$approximate)> {
  let summary = "Gaussian error linear unit (exact, or the tanh approximation)";
  let description = [{ `approximate` is "none" (erf) or "tanh". }];
  let hasVerifier = 1;
}

// SiLU's derivative reads x alone, as PyTorch's silu_backward does: the
// x * sigmoid(x) an exporter writes (Sigmoid, Mul) keeps sigmoid(x) too for
// the product's gradient (cnn-import-cleanup makes it cnn.silu).
def CNN_SiluOp : CNN_UnaryOp<"silu",
    [{ return s.mul(x[0], s.sigmoid(x[0])); }],
    [{ ::mlir::Value sg = s.sigmoid(x[0]);
       return s.mul(dy, s.mul(sg, s.add(s.c(1),
                                        s.mul(x[0], s.sub(s.c(1), sg))))); }]> {
  let summary = "x * sigmoid(x) (SiLU, swish)";
}

// The exponential family below follows PyTorch's elu kernel: the negative
// branch (alpha * expm1) is taken for x <= 0, so the derivative at 0 is the
// negative branch's (elu_backward with is_result = false).
def CNN_EluOp : CNN_UnaryOp<"elu",
    [{ return s.select(s.gt(x[0], s.c(0)), x[0],
                       s.mul(s.c(getAlpha().convertToFloat()),
                             s.expm1(x[0]))); }],
    [{ return s.select(s.gt(x[0], s.c(0)), dy,
                       s.mul(dy, s.mul(s.c(getAlpha().convertToFloat()),
                                       s.exp(x[0])))); }],
    (ins F32Attr:$alpha)> {
  let summary = "x for x > 0, else alpha * (exp(x) - 1)";
}

def CNN_SeluOp : CNN_UnaryOp<"selu",
    [{ float alpha = getAlpha().convertToFloat();
       float gamma = getGamma().convertToFloat();
       return s.mul(s.c(gamma),
                    s.select(s.gt(x[0], s.c(0)), x[0],
                             s.mul(s.c(alpha), s.expm1(x[0])))); }],
    [{ float alpha = getAlpha().convertToFloat();
       float gamma = getGamma().convertToFloat();
       return s.select(s.gt(x[0], s.c(0)), s.mul(dy, s.c(gamma)),
                       s.mul(dy, s.mul(s.c(double(alpha) * gamma),
                                       s.exp(x[0])))); }],
    (ins F32Attr:$alpha, F32Attr:$gamma)> {
  let summary = "gamma * (x for x > 0, else alpha * (exp(x) - 1))";
}

def CNN_CeluOp : CNN_UnaryOp<"celu",
    [{ ::mlir::Value alpha = s.c(getAlpha().convertToFloat());
       return s.select(s.gt(x[0], s.c(0)), x[0],
                       s.mul(alpha, s.expm1(s.div(x[0], alpha)))); }],
    [{ ::mlir::Value alpha = s.c(getAlpha().convertToFloat());
       return s.select(s.gt(x[0], s.c(0)), dy,
                       s.mul(dy, s.exp(s.div(x[0], alpha)))); }],
    (ins F32Attr:$alpha)> {
  let summary = "max(0, x) + min(0, alpha * (exp(x / alpha) - 1))";
  let description = [{ Requires `alpha != 0`. }];
  let hasVerifier = 1;
}

def CNN_SoftplusOp : CNN_UnaryOp<"softplus",
    // PyTorch's threshold 20 (ScalarBuilder::softplus).
    [{ return s.softplus(x[0]); }],
    [{ return s.select(s.gt(x[0], s.c(20)), dy,
                       s.mul(dy, s.sigmoid(x[0]))); }]> {
  let summary = "log(1 + exp(x)); x for x > 20 (PyTorch's threshold)";
}

// Mish as x * tanh(softplus(x)) with softplus' threshold above (ONNX's and
// F.mish's definition); the derivative reads x alone (PyTorch's
// mish_backward), where the decomposed form kept tanh(softplus(x)) too.
def CNN_MishOp : CNN_UnaryOp<"mish",
    [{ return s.mul(x[0], s.tanh(s.softplus(x[0]))); }],
    [{ ::mlir::Value t = s.tanh(s.softplus(x[0]));
       // softplus' derivative: 1 above its threshold, sigmoid below.
       ::mlir::Value dsp = s.select(s.gt(x[0], s.c(20)), s.c(1),
                                    s.sigmoid(x[0]));
       return s.mul(dy, s.add(t, s.mul(x[0], s.mul(s.sub(s.c(1), s.mul(t, t)),
                                                   dsp)))); }]> {
  let summary = "x * tanh(softplus(x))";
}

def CNN_LogOp : CNN_UnaryOp<"log", [{ return s.log(x[0]); }],
    [{ return s.div(dy, x[0]); }]> {
  let summary = "Natural logarithm";
}

def CNN_AddOp : CNN_BinaryOp<"add", [{ return s.add(x[0], x[1]); }],
    [{ return dy; }], [Commutative, CNN_Gradient]> {
  let summary = "Elementwise sum (numpy broadcasting)";
  let hasCanonicalizer = 1;
}

def CNN_SubOp : CNN_BinaryOp<"sub", [{ return s.sub(x[0], x[1]); }],
    [{ return i == 0 ? dy : s.neg(dy); }]> {
  let summary = "Elementwise difference (numpy broadcasting)";
}

def CNN_MulOp : CNN_BinaryOp<"mul", [{ return s.mul(x[0], x[1]); }],
    [{ return s.mul(dy, x[1 - i]); }], [Commutative, CNN_Gradient]> {
  let summary = "Elementwise product (numpy broadcasting)";
  let hasCanonicalizer = 1;
}

def CNN_DivOp : CNN_BinaryOp<"div", [{ return s.div(x[0], x[1]); }],
    [{ return i == 0 ? s.div(dy, x[1]) : s.neg(s.div(s.mul(dy, y), x[1])); }]> {
  let summary = "Elementwise quotient (numpy broadcasting)";
  let hasCanonicalizer = 1;
}

def CNN_PowTensorOp : CNN_BinaryOp<"pow_tensor",
    [{ return s.pow(x[0], x[1]); }],
    [{ return i == 0
           ? s.mul(dy, s.mul(x[1], s.pow(x[0], s.sub(x[1], s.c(1)))))
           : s.mul(dy, s.mul(y, s.log(x[0]))); }]> {
  let summary = "lhs raised to the power rhs, elementwise (numpy broadcasting)";
}

def CNN_PReluOp : CNN_BinaryOp<"prelu",
    [{ return s.select(s.gt(x[0], s.c(0)), x[0], s.mul(x[0], x[1])); }],
    // PyTorch's prelu backward: x = 0 takes the slope branch for the input
    // and contributes 0 * dy to the slope.
    [{ if (i == 0)
         return s.select(s.gt(x[0], s.c(0)), dy, s.mul(dy, x[1]));
       return s.select(s.gt(x[0], s.c(0)), s.c(0), s.mul(dy, x[0])); }]> {
  let summary = "x for x > 0, else slope * x (slope broadcast to x)";
  let description = [{
    `lhs` is the input, `rhs` the slope; the slope broadcasts to the input
    (unidirectional: each dimension of `rhs` equals the input's or is 1), so
    the result has the input's type. The slope's gradient is summed over the
    broadcast dimensions.
  }];
  let hasVerifier = 1;
}

// PyTorch 1.13's maximum/minimum backward: on a tie each operand gets half
// of dy (at::where(self == other, grad / 2, grad)), the smaller (larger)
// operand none; with a NaN operand both get dy (neither mask holds).
def CNN_MaximumOp : CNN_BinaryOp<"maximum", [{ return s.max(x[0], x[1]); }],
    [{ ::mlir::Value share = s.select(s.eq(x[0], x[1]),
                                      s.mul(dy, s.c(0.5)), dy);
       return s.select(s.lt(x[i], x[1 - i]), s.c(0), share); }],
    [Commutative]> {
  let summary = "Elementwise maximum (numpy broadcasting; NaN propagates)";
}

// ONNX Where with a run-time operand: the condition is a float tensor (0 is
// false), as the importer materializes a constant boolean one.
def CNN_SelectOp : CNN_ElementwiseOp<"select",
    [{ return s.select(s.eq(x[0], s.c(0)), x[2], x[1]); }],
    [{ if (i == 0)
         return {};
       ::mlir::Value isFalse = s.eq(x[0], s.c(0));
       return i == 1 ? s.select(isFalse, s.c(0), dy)
                     : s.select(isFalse, dy, s.c(0)); }],
    [CNN_InferShapes]> {
  let summary = "on_true where condition != 0, else on_false (ONNX Where)";
  let description = [{
    The three operands have the same rank and broadcast as numpy's (each
    dimension 1 or one size in all three); `on_true` and `on_false` have
    the result's element type, the condition may have another. The
    gradient goes to the operand that was selected; the condition has none.
  }];
  let arguments = (ins CNN_FloatTensor:$condition, CNN_FloatTensor:$on_true,
                   CNN_FloatTensor:$on_false);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_MinimumOp : CNN_BinaryOp<"minimum", [{ return s.min(x[0], x[1]); }],
    [{ ::mlir::Value share = s.select(s.eq(x[0], x[1]),
                                      s.mul(dy, s.c(0.5)), dy);
       return s.select(s.gt(x[i], x[1 - i]), s.c(0), share); }],
    [Commutative]> {
  let summary = "Elementwise minimum (numpy broadcasting; NaN propagates)";
}

def CNN_ReduceSumOp : CNN_PureOp<"reduce_sum", [CNN_InferShapesWide, CNN_Gradient]> {
  let summary = "Sum over `axes`, which keep size 1";
  let description = [{
    `axes` are distinct dimensions of `input` in [0, rank). The result has the
    input's rank with the reduced dimensions of size 1 (keepdims). The sum is
    accumulated in f32; the result has the input's element type, or f32 for
    an f16 input (cnn-precision's normalization statistics).
  }];
  let arguments = (ins CNN_FloatTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_ReduceMeanOp : CNN_PureOp<"reduce_mean", [CNN_InferShapesWide, CNN_Gradient]> {
  let summary = "Mean over `axes`, which keep size 1";
  let description = [{ The constraints of `cnn.reduce_sum`. }];
  let arguments = (ins CNN_FloatTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs CNN_FloatTensor:$result);
  let hasCanonicalizer = 1;
}

def CNN_ReduceMaxOp : CNN_PureOp<"reduce_max", [CNN_InferShapesWide, CNN_Gradient]> {
  let summary = "Maximum over `axes`, which keep size 1";
  let description = [{
    The constraints of `cnn.reduce_sum`. A NaN among the reduced elements
    makes the result NaN (numpy's `max`). Its gradient goes to the elements
    equal to the maximum, split evenly among ties (PyTorch's `amax`).
  }];
  let arguments = (ins CNN_FloatTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_ReduceProdOp : CNN_PureOp<"reduce_prod", [CNN_InferShapes]> {
  let summary = "Product over `axes`, which keep size 1 (ONNX ReduceProd)";
  let description = [{
    The constraints of `cnn.reduce_sum`; the product is taken in double.
    Forward only: no gradient rule (cnn-autodiff refuses the op on a
    differentiated path), no CUDA lowering.
  }];
  let arguments = (ins CNN_FloatTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_BatchNormOp : CNN_LayoutOp<"batch_norm", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Batch normalization, inference form (running statistics)";
  let description = [{
    y = scale * (x - mean) / sqrt(var + epsilon) + bias, per channel (dim 1).
    `input` has rank 2 or 4; scale, bias, mean, var are 1-D of size C.
    `momentum` (PyTorch's convention, 1 - ONNX's) is unused here and kept for
    the training form that cnn-autodiff derives from this op.

    `use_running_stats`: the BatchNorm module is in eval mode (PyTorch's
    `module.training == False`, an ONNX node in inference form inside a
    training export): cnn-autodiff keeps this op in the training step, so
    the step normalizes with the running statistics and leaves them
    unchanged, instead of deriving batch_norm_train. Its gradient treats
    mean and var as constants: dx = dy * scale / sqrt(var + epsilon),
    dscale = sum(dy * (x - mean) / sqrt(var + epsilon)), dbias = sum(dy).
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_FloatTensor:$scale,
                   CNN_FloatTensor:$bias, CNN_FloatTensor:$mean,
                   CNN_FloatTensor:$var, F32Attr:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.1f">:$momentum,
                   CNN_Layout:$layout, UnitAttr:$use_running_stats);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_BatchNormTrainOp : CNN_LayoutOp<"batch_norm_train", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Batch normalization, training form (batch statistics)";
  let description = [{
    Normalizes with the batch mean and biased batch variance, returns the
    saved mean and inverse standard deviation for the gradient, and the new
    running statistics as PyTorch updates them:
    running = (1 - momentum) * running + momentum * batch_stat, where the
    variance used there is the unbiased one (n / (n - 1)).
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_FloatTensor:$scale,
                   CNN_FloatTensor:$bias, CNN_FloatTensor:$running_mean,
                   CNN_FloatTensor:$running_var, F32Attr:$epsilon,
                   F32Attr:$momentum, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result, CNN_FloatTensor:$saved_mean,
                 CNN_FloatTensor:$saved_invstd,
                 CNN_FloatTensor:$new_running_mean,
                 CNN_FloatTensor:$new_running_var);
}

def CNN_MaxPool2DOp : CNN_LayoutOp<"max_pool2d", [CNN_InferShapes, CNN_Gradient, CNN_KernelCall]> {
  let summary = "2-D max pooling (padding never wins)";
  let description = [{
    `kernel`, `strides`: 2 positive entries; `padding`: 4 (t, l, b, r), each
    smaller than the kernel. Output size uses floor, or ceil with `ceil_mode`
    (a window must start inside the input or left padding).
  }];
  let arguments = !con((ins CNN_FloatTensor:$input), PoolAttrs, LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_AvgPool2DOp : CNN_LayoutOp<"avg_pool2d", [CNN_InferShapes, CNN_Gradient, CNN_KernelCall]> {
  let summary = "2-D average pooling";
  let description = [{
    As max_pool2d; `count_include_pad` divides by the full kernel area
    (clipped to the padded input), otherwise by the number of real elements.
  }];
  let arguments = !con((ins CNN_FloatTensor:$input), PoolAttrs,
                       (ins BoolAttr:$count_include_pad), LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_GlobalAvgPoolOp : CNN_LayoutOp<"global_avg_pool", [CNN_InferShapes, CNN_Gradient, CNN_KernelCall]> {
  let summary = "Mean over H and W: N x C x H x W -> N x C x 1 x 1";
  let description = [{ With `layout = #cnn.layout<NHWC>`: N x H x W x C -> N x 1 x 1 x C. }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_MatmulOp : CNN_PureOp<"matmul", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Matrix product op(lhs) x op(rhs), 2-D or batched";
  let description = [{
    op(x) is x or its transpose (of the last two dimensions). A linear layer
    y = x W^T is `matmul %x, %w {transpose_rhs = true}`; contracting sizes
    must agree. Operands of rank >= 3 have the same leading (batch)
    dimensions, one product per batch index (no broadcasting).
  }];
  let arguments = (ins CNN_FloatTensor:$lhs, CNN_FloatTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_FlattenOp : CNN_PureOp<"flatten", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Flattens to 2-D: dims [0, axis) and [axis, rank)";
  let arguments = (ins CNN_FloatTensor:$input, I64Attr:$axis);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_ReshapeOp : CNN_PureOp<"reshape", [CNN_Gradient]> {
  let summary = "Reinterprets the elements with a new static shape";
  let description = [{ Same element type and element count. }];
  let arguments = (ins CNN_FloatTensor:$input);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def CNN_ConcatOp : CNN_PureOp<"concat", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Concatenation along `axis`";
  let description = [{ At least one input; same rank, element type and sizes except along `axis`. }];
  let arguments = (ins Variadic<CNN_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_SliceOp : CNN_PureOp<"slice", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Static slice [offsets, offsets + sizes) (the gradient of concat)";
  let description = [{
    Constraints: one offset and one size per dimension of `input`;
    `0 <= offsets[d]`, `1 <= sizes[d]` and `offsets[d] + sizes[d] <=
    input.dim(d)`, evaluated without overflow (an offset near INT64_MAX is
    out of range, not wrapped into it). The result has shape `sizes`.
  }];
  let arguments = (ins CNN_FloatTensor:$input, DenseI64ArrayAttr:$offsets,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs CNN_FloatTensor:$result);
}

// Padding modes of pad/pad_grad (ONNX Pad's modes; PyTorch's constant,
// reflect and replicate).
defvar CNN_PadMode = DefaultValuedAttr<StrAttr, "\"constant\"">;

def CNN_PadOp : CNN_PureOp<"pad", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Pads every dimension: `pads` = [begin_0..begin_{r-1}, end_0..end_{r-1}]";
  let description = [{
    Rank-generic: result.dim(d) = input.dim(d) + pads[d] + pads[r + d],
    which must fit in int64 (and the result obey the dialect's size bound).
    Modes (ONNX Pad): "constant" fills with `value`; "reflect" mirrors
    without repeating the border element (x[-k] = x[k]), so each pad must be
    smaller than its dimension; "edge" repeats the border element.
    Constraints: `pads` has 2 x rank non-negative entries; `mode` is one of
    the three; `value` is used by "constant" only. Negative pads (cropping)
    are a cnn.slice instead. Gradient: constant -> cnn.slice of the output
    gradient; reflect/edge -> cnn.pad_grad.

    ```mlir
    %y = cnn.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, mode = "constant", value = 0.0 : f32}
        : (tensor<2x3x4x4xf32>) -> tensor<2x3x6x6xf32>
    ```
  }];
  let arguments = (ins CNN_FloatTensor:$input, DenseI64ArrayAttr:$pads,
                   CNN_PadMode:$mode, DefaultValuedAttr<F32Attr, "0.0f">:$value);
  let results = (outs CNN_FloatTensor:$result);
  let extraClassDeclaration = [{
    /// Whether this appends zeros at the end of the last dimension only
    /// (the channels of an NHWC tensor or a K, R, S, C filter): what
    /// cnn-precision's channel padding makes, and what cnn-input-format and
    /// cnn-param-format fold into a stored format.
    bool isTrailingZeroPadOfLastDim() {
      if (getMode() != "constant" || !getValue().isZero())
        return false;
      ::llvm::ArrayRef<int64_t> pads = getPads();
      for (size_t d = 0; d + 1 < pads.size(); ++d)
        if (pads[d] != 0)
          return false;
      return true;
    }
  }];
}

def CNN_PadGradOp : CNN_PureOp<"pad_grad", [CNN_InferShapes]> {
  let summary = "Gradient of pad: sums each output gradient into the input element it copies";
  let description = [{
    result.dim(d) = grad_output.dim(d) - pads[d] - pads[r + d] (>= 1). Every
    element of `grad_output` adds into the input element that pad with the
    same `pads` and `mode` copied there: for "reflect" the mirrored borders
    add into the interior elements they mirror, for "edge" the replicated
    borders add into the border element, for "constant" the padding is
    dropped (a slice). Same constraints as cnn.pad, checked against the
    result (the unpadded shape).
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, DenseI64ArrayAttr:$pads,
                   CNN_PadMode:$mode);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_TransposeOp : CNN_PureOp<"transpose", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Permutes dimensions: result.dim(i) = input.dim(permutation[i])";
  let arguments = (ins CNN_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs CNN_FloatTensor:$result);
  let hasFolder = 1;
}

def CNN_CastOp : CNN_ElementwiseOp<"cast", [{ return x[0]; }],
    [{ return dy; }], [CNN_Gradient]> {
  let summary = "Converts the element type (f32 <-> f16), same shape";
  let arguments = (ins CNN_FloatTensor:$input);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def CNN_DropoutOp : CNN_ElementwiseOp<"dropout", [{ return x[0]; }],
    [{ return dy; }], [SameOperandsAndResultType]> {
  let summary = "Dropout at inference: the identity";
  let description = [{ `ratio` in [0, 1). Folds away. }];
  let arguments = (ins CNN_FloatTensor:$input, F32Attr:$ratio);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def CNN_DropoutMaskOp : CNN_PureOp<"dropout_mask"> {
  let summary = "Training-mode dropout mask: 0 or 1/(1-ratio) per element";
  let description = [{
    Element i of the mask is 0 when hash(seed, step, i) < ratio, where the hash
    is the counter-based generator documented in docs/dialect.md, so the CPU
    reference and the GPU draw the same mask. dropout(x) = x * mask.
  }];
  let arguments = (ins CNN_Scalar:$step, F32Attr:$ratio, I64Attr:$seed);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_SoftmaxOp : CNN_PureOp<"softmax", [SameOperandsAndResultType, CNN_Gradient, CNN_KernelCall]> {
  let summary = "Softmax along `axis`";
  let arguments = (ins CNN_FloatTensor:$input, I64Attr:$axis);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_SoftmaxCrossEntropyOp : CNN_PureOp<"softmax_cross_entropy", [CNN_InferShapes, CNN_KernelCall]> {
  let summary = "Mean softmax cross-entropy of N x C logits against N labels";
  let description = [{
    loss = mean_{n : y_n != ignore_index}
             [ -(1-s) log p[n, y_n] - (s / C) sum_c log p[n, c] ]
    with s = `label_smoothing` in [0, 1]: rows whose label is `ignore_index`
    (default -100, PyTorch's) contribute nothing and are not counted, as
    F.cross_entropy(ignore_index=..., label_smoothing=...) computes it (the
    smoothing term too is divided by the count of the other rows; NaN when
    every row is ignored). Every other label must be in [0, C). Returns a
    0-D f32 tensor.
  }];
  let arguments = (ins CNN_FloatTensor:$logits, CNN_LabelTensor:$labels,
                   DefaultValuedAttr<F32Attr, "0.0f">:$label_smoothing,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs CNN_Scalar:$loss);
}

def CNN_NLLLossOp : CNN_PureOp<"nll_loss", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Negative log-likelihood at integer labels (ONNX "
                "NegativeLogLikelihoodLoss, F.nll_loss)";
  let description = [{
    `input` is N x C x d1 x ... x dk (k >= 0, usually log-probabilities),
    `labels` N x d1 x ... x dk (i32 or i64), the optional `weight` C.
    At each position (n, d) with label y = labels[n, d]:
      l[n, d] = -weight[y] * input[n, y, d]   (weight 1 without `weight`)
    and l = 0, weight 0 where y equals `ignore_index` (when the attribute
    is present; ONNX has no default). `reduction` none: l, the labels'
    shape; sum: the sum of l; mean: the sum of l divided by the sum of the
    weights of the positions not ignored (their count without `weight`,
    NaN when it is 0), a 0-D tensor; the result has the input's element
    type. Every label that is not `ignore_index` must lie in [0, C): the
    reference interpreter checks it when the op runs. Differentiable in
    `input` (nll_loss_grad); the labels and the weight are not.
    SoftmaxCrossEntropyLoss imports as log-softmax (over dimension 1)
    followed by this op.
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_LabelTensor:$labels,
                   Optional<CNN_FloatTensor>:$weight,
                   DefaultValuedAttr<CNN_LossReductionAttr,
                       "::cnnc::cnn::LossReduction::Mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_GatherElementsOp : CNN_PureOp<"gather_elements", [CNN_InferShapes, CNN_Gradient]> {
  let summary = "Gathers `input` along `axis` at integer indices (ONNX "
                "GatherElements, torch.gather)";
  let description = [{
    `indices` (i32 or i64) has the rank of `input` and its sizes except
    along `axis` (in [0, rank)); the result has the indices' shape and the
    input's element type: result[p] = input[p with p[axis] replaced by
    indices[p]]. An index lies in [-s, s) for the input's size s along
    `axis` (a negative one counts from the end): the reference interpreter
    checks it when the op runs. Differentiable in `input`
    (gather_elements_grad).
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_LabelTensor:$indices,
                   I64Attr:$axis);
  let results = (outs CNN_FloatTensor:$result);
}

// Forward only: the result is an integer index, so no gradient flows
// through either op (no GradientOpInterface: cnn-autodiff refuses one on a
// differentiated path with "no gradient rule").
class CNN_ArgExtremeOp<string mnemonic, string extreme>
    : CNN_PureOp<mnemonic, [CNN_InferShapes]> {
  let summary = "Index of the " # extreme # " along `axis` (ONNX Arg"
                # !if(!eq(extreme, "maximum"), "Max", "Min") # ")";
  let description = [{
    `axis` in [0, rank). The result is i64 with the input's shape, `axis`
    of size 1 (`keepdims`) or left out. Among equal values the first index
    is taken, the last with `select_last_index`; a NaN counts as the
    extreme (numpy's argmax/argmin). No gradient: the result is an index.
  }];
  let arguments = (ins CNN_FloatTensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                   DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
}
def CNN_ArgMaxOp : CNN_ArgExtremeOp<"arg_max", "maximum">;
def CNN_ArgMinOp : CNN_ArgExtremeOp<"arg_min", "minimum">;

//===----------------------------------------------------------------------===//
// Backward ops (produced by cnn-autodiff)
//===----------------------------------------------------------------------===//

def CNN_Conv2DBwdDataOp : CNN_LayoutOp<"conv2d_bwd_data", [CNN_Gradient]> {
  let summary = "Gradient of conv2d with respect to its input";
  let description = [{
    `grad_output` is the conv2d result gradient, `filter` its filter; the
    result type is the conv2d input type, and conv2d(result, filter) must
    have the type of `grad_output`.
  }];
  let arguments = !con((ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$filter), ConvAttrs,
                       LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_Conv2DBwdFilterOp : CNN_LayoutOp<"conv2d_bwd_filter"> {
  let summary = "Gradient of conv2d with respect to its filter";
  let description = [{ The result type is the filter type; conv2d(input, result) must have the type of `grad_output`. }];
  let arguments = !con((ins CNN_FloatTensor:$input, CNN_FloatTensor:$grad_output), ConvAttrs,
                       LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_BiasGradOp : CNN_LayoutOp<"bias_grad", [CNN_InferShapesWide]> {
  let summary = "Sum over every dimension except 1 (gradient of bias_add)";
  let description = [{
    With `layout = #cnn.layout<NHWC>`: every dimension except the last.
    The result has the input's element type, or f32 for an f16 input: a
    sum over the whole batch of a loss-scaled gradient, which cnn-precision
    keeps in f32 as it keeps the reductions (f16 overflows there first).
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_ReluGradOp : CNN_ElementwiseOp<"relu_grad",
    [{ return s.select(s.gt(x[1], s.c(0)), x[0], s.c(0)); }], [{ return {}; }],
    [SameOperandsAndResultType]> {
  let summary = "grad_output where output > 0, else 0";
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$output);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_ClipGradOp : CNN_ElementwiseOp<"clip_grad",
    [{ return s.select(s.both(s.gt(x[1], s.c(getMin().convertToFloat())),
                              s.lt(x[1], s.c(getMax().convertToFloat()))),
                       x[0], s.c(0)); }], [{ return {}; }],
    [SameOperandsAndResultType]> {
  let summary = "grad_output where min < input < max, else 0";
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$input,
                   F32Attr:$min, F32Attr:$max);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_MaxPool2DGradOp : CNN_LayoutOp<"max_pool2d_grad", [CNN_KernelCall]> {
  let summary = "Routes each output gradient to the first maximum of its window";
  let description = [{ Result type = `input` type; max_pool2d(input) must have the type of `grad_output`. }];
  let arguments = !con((ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$input), PoolAttrs,
                       LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_AvgPool2DGradOp : CNN_LayoutOp<"avg_pool2d_grad", [CNN_KernelCall]> {
  let summary = "Gradient of avg_pool2d; the result type is the input type";
  let arguments = !con((ins CNN_FloatTensor:$grad_output), PoolAttrs,
                       (ins BoolAttr:$count_include_pad), LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_GlobalAvgPoolGradOp : CNN_LayoutOp<"global_avg_pool_grad"> {
  let summary = "Spreads N x C x 1 x 1 gradients evenly over H x W";
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_BatchNormGradOp : CNN_LayoutOp<"batch_norm_grad", [CNN_InferShapes]> {
  let summary = "Gradient of batch_norm_train: (grad_input, grad_scale, grad_bias)";
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$input,
                   CNN_FloatTensor:$scale, CNN_FloatTensor:$saved_mean,
                   CNN_FloatTensor:$saved_invstd, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$grad_input, CNN_FloatTensor:$grad_scale,
                 CNN_FloatTensor:$grad_bias);
}

def CNN_SoftmaxCrossEntropyGradOp : CNN_PureOp<"softmax_cross_entropy_grad", [CNN_InferShapes, CNN_KernelCall]> {
  let summary = "d loss / d logits, times the upstream scalar `grad_loss`";
  let description = [{
    (softmax(logits) - smoothed_onehot(labels)) * grad_loss / V for the rows
    whose label is not `ignore_index`, V the number of those rows; 0 for the
    ignored rows.
  }];
  let arguments = (ins CNN_FloatTensor:$logits, CNN_LabelTensor:$labels,
                   CNN_Scalar:$grad_loss,
                   DefaultValuedAttr<F32Attr, "0.0f">:$label_smoothing,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_NLLLossGradOp : CNN_PureOp<"nll_loss_grad"> {
  let summary = "d nll_loss / d input, times the upstream gradient `grad_loss`";
  let description = [{
    The result has nll_loss's input type N x C x d1 x ... x dk: at
    (n, labels[n, d], d) it is -weight[y] * g / D, 0 elsewhere and at
    ignored positions, with g = grad_loss[n, d] (`reduction` none, so
    `grad_loss` has the labels' shape) or the 0-D grad_loss (sum, mean),
    and D the mean's divisor (the weight sum of the positions not ignored)
    or 1. The attributes are those of the nll_loss it differentiates.
  }];
  let arguments = (ins CNN_FloatTensor:$grad_loss, CNN_LabelTensor:$labels,
                   Optional<CNN_FloatTensor>:$weight,
                   DefaultValuedAttr<CNN_LossReductionAttr,
                       "::cnnc::cnn::LossReduction::Mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_GatherElementsGradOp : CNN_PureOp<"gather_elements_grad"> {
  let summary = "Gradient of gather_elements: `grad_output` added at the "
                "gathered positions of zeros of the input's type";
  let description = [{
    The result type is gather_elements' input type; `grad_output` and
    `indices` have its result's shape. Positions gathered more than once
    receive the sum of their gradients.
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_LabelTensor:$indices,
                   I64Attr:$axis);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Resampling: cnn.resize (ONNX Resize / Upsample, F.interpolate) and its
// gradient
//===----------------------------------------------------------------------===//

// The attributes of resize and resize_grad (ONNX Resize's names). `size` is
// the resized H x W; `scales` the scale factors the user asked for, when
// there were some (the coordinates use 1 / scale, as PyTorch does, which
// differs from in / out when in * scale is not an integer).
defvar ResizeAttrs = (ins DenseI64ArrayAttr:$size,
    DefaultValuedAttr<StrAttr, "\"nearest\"">:$mode,
    DefaultValuedAttr<StrAttr, "\"half_pixel\"">:$coordinate_transformation_mode,
    DefaultValuedAttr<StrAttr, "\"round_prefer_floor\"">:$nearest_mode,
    OptionalAttr<DenseF64ArrayAttr>:$scales);

def CNN_ResizeOp : CNN_LayoutOp<"resize", [CNN_InferShapes, CNN_Gradient, CNN_KernelCall]> {
  let summary = "Nearest or bilinear resampling of H and W (F.interpolate, ONNX Resize)";
  let description = [{
    `input` is N x C x H x W (N x H x W x C with `layout = #cnn.layout<NHWC>`);
    the result is N x C x size[0] x size[1] (NHWC: N x size[0] x size[1] x C).
    Every output row oh reads the input rows of its taps along H, every
    column ow those along W (include/cnnc/Support/Resize.h, shared by the
    reference kernels and the CUDA target):
    - `mode` "nearest": y[oh, ow] = x[lo_h(oh), lo_w(ow)];
      "linear" (bilinear): y = ((x[lo_h, lo_w] (1 - l_w) + x[lo_h, hi_w] l_w)
      (1 - l_h) + (x[hi_h, lo_w] (1 - l_w) + x[hi_h, hi_w] l_w) l_h, in f32.
    - `coordinate_transformation_mode` "half_pixel" ((o + 0.5) r - 0.5),
      "pytorch_half_pixel" (the same, 0 for an output of size 1),
      "align_corners" (o (in - 1) / (out - 1)) or "asymmetric" (o r), with
      r = 1 / scale when `scales` is given, else in / out; linear clamps the
      source into the input (ONNX's edge replication), as PyTorch's
      bilinear, in its f32 arithmetic.
    - `nearest_mode` (nearest only): "round_prefer_floor",
      "round_prefer_ceil", "floor" or "ceil"; "asymmetric" + "floor" is
      PyTorch's 'nearest' with its f32 arithmetic (floor(o * (float)r)).
    Constraints: `input` is 4-D; `size` has 2 entries >= 1 and the result's
    element count fits in int64; `mode`, `coordinate_transformation_mode`
    and `nearest_mode` are among the names above; `scales`, when present,
    has 2 finite entries > 0. Gradient: cnn.resize_grad with the same
    attributes.

    ```mlir
    %y = cnn.resize %x {size = array<i64: 16, 16>, mode = "linear",
                        coordinate_transformation_mode = "half_pixel",
                        scales = array<f64: 2.0, 2.0>}
        : (tensor<2x3x8x8xf32>) -> tensor<2x3x16x16xf32>
    ```
  }];
  let arguments = !con((ins CNN_FloatTensor:$input), ResizeAttrs, LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
}

def CNN_ResizeGradOp : CNN_LayoutOp<"resize_grad", [CNN_KernelCall]> {
  let summary = "Gradient of resize: each output gradient added back into the input elements it read";
  let description = [{
    The adjoint of cnn.resize with the same attributes: `grad_output` has
    the resize result's shape, the result (declared) the resize input's
    type, and dx[h, w] sums dy[oh, ow] times the weight with which output
    (oh, ow) read input (h, w) (nearest: weight 1 for the element it
    copied; linear: the product of the two bilinear weights).
    With `channel_offset` (cnn-fuse, upsample + concat: the gradient of a
    resize whose result was one operand of a channel concatenation),
    `grad_output` is the whole concatenation's gradient and the op reads its
    channels [channel_offset, channel_offset + C), C the result's channels,
    in place of a cnn.slice that copied them out.
    Constraints: the constraints of cnn.resize on the attributes; result
    and `grad_output` are 4-D with the same element type, batch and
    channels, and `size` equals the H and W of `grad_output`; with
    `channel_offset`, `grad_output` may have more channels than the result,
    and 0 <= channel_offset <= its channels - C.
  }];
  let arguments = !con((ins CNN_FloatTensor:$grad_output), ResizeAttrs,
                       (ins OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$channel_offset),
                       LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_FusedResizeConcatOp : CNN_LayoutOp<"fused_resize_concat", [CNN_KernelCall]> {
  let summary = "concat(resize(input), other) along the channels, or concat(other, resize(input)): one kernel";
  let description = [{
    cnn-fuse's upsample + concat (a U-Net decoder): the channel concatenation
    of cnn.resize(`input`) (the resize attributes, as cnn.resize) and
    `other`, the resized channels first when `resized_first`, else after
    `other`'s. Each output element is interpolated from `input` or copied
    from `other`: the resized tensor is never stored. Its values are bit for
    bit those of the cnn.resize and cnn.concat it replaces.
    Constraints: the constraints of cnn.resize on `input` and the
    attributes; `other` is 4-D with the resized tensor's element type,
    batch and spatial size (`size`); the result is the concatenation of the
    two along the channel dimension of `layout`, in the order
    `resized_first` says.

    ```mlir
    %y = cnn.fused_resize_concat %x, %skip {layout = #cnn.layout<NHWC>,
        mode = "linear", resized_first = true, size = array<i64: 16, 16>}
        : (tensor<2x8x8x32xf16>, tensor<2x16x16x16xf16>) -> tensor<2x16x16x48xf16>
    ```
  }];
  let arguments = !con((ins CNN_FloatTensor:$input, CNN_FloatTensor:$other),
                       ResizeAttrs,
                       (ins DefaultValuedAttr<BoolAttr, "true">:$resized_first),
                       LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer ops: update one parameter; hyper-parameters that may change per
// step (learning rate, step count) are 0-D tensor operands.
//===----------------------------------------------------------------------===//

// The optional trailing operands `grad_scale, finite` of the optimizer ops.
defvar CNN_LossScalingAccessors = [{
  /// The loss scale the gradient is divided by (null without loss scaling).
  ::mlir::Value getGradScale() {
    return getLossScaling().size() == 2 ? getLossScaling()[0] : ::mlir::Value();
  }
  /// The all_finite flag; the update is skipped when it is 0.
  ::mlir::Value getFinite() {
    return getLossScaling().size() == 2 ? getLossScaling()[1] : ::mlir::Value();
  }
}];

def CNN_SGDUpdateOp : CNN_PureOp<"sgd_update", [CNN_InferShapes]> {
  let summary = "torch.optim.SGD step for one parameter";
  let description = [{
    g = grad + weight_decay * param;
    if momentum != 0: buf = (step == 1) ? g : momentum * buf + (1 - dampening) * g;
                      g = nesterov ? g + momentum * buf : buf;
    param = param - lr * g.  Results: (new_param, new_momentum_buffer).
    Loss scaling (cnn-precision): two more 0-D f32 operands `grad_scale, finite`
    (the `loss_scaling` group, empty or both): grad is divided by grad_scale
    first, and when finite == 0 the results are param and momentum_buffer
    unchanged (GradScaler skips optimizer.step on inf/NaN).
    `grad` has the param's type, or its shape in f16 for an f32 param (the
    f16 step's gradient, widened on load).
  }];
  let arguments = (ins CNN_FloatTensor:$param, CNN_FloatTensor:$grad,
                   CNN_FloatTensor:$momentum_buffer, CNN_Scalar:$lr,
                   CNN_Scalar:$step, Variadic<CNN_Scalar>:$loss_scaling,
                   F32Attr:$momentum, F32Attr:$dampening,
                   F32Attr:$weight_decay, BoolAttr:$nesterov);
  let results = (outs CNN_FloatTensor:$new_param, CNN_FloatTensor:$new_momentum_buffer);
  let extraClassDeclaration = CNN_LossScalingAccessors;
}

def CNN_AdamUpdateOp : CNN_PureOp<"adam_update", [CNN_InferShapes]> {
  let summary = "torch.optim.Adam / AdamW step for one parameter";
  let description = [{
    Adam: g = grad + wd * param.  AdamW (`decoupled`): param *= 1 - lr * wd.
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    param -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps).
    Results: (new_param, new_m, new_v).
    Loss scaling: optional `grad_scale, finite` as for sgd_update (grad is
    divided by grad_scale; finite == 0 leaves param, m and v unchanged).
    `grad` as for sgd_update (f16 allowed for an f32 param).
  }];
  let arguments = (ins CNN_FloatTensor:$param, CNN_FloatTensor:$grad,
                   CNN_FloatTensor:$exp_avg, CNN_FloatTensor:$exp_avg_sq,
                   CNN_Scalar:$lr, CNN_Scalar:$step,
                   Variadic<CNN_Scalar>:$loss_scaling, F32Attr:$beta1,
                   F32Attr:$beta2, F32Attr:$epsilon, F32Attr:$weight_decay,
                   BoolAttr:$decoupled);
  let results = (outs CNN_FloatTensor:$new_param, CNN_FloatTensor:$new_exp_avg,
                 CNN_FloatTensor:$new_exp_avg_sq);
  let extraClassDeclaration = CNN_LossScalingAccessors;
}

include "cnnc/Dialect/CNN/CNNFusedOps.td"
include "cnnc/Dialect/CNN/CNNAmpOps.td"
include "cnnc/Dialect/CNN/CNNDistOps.td"
include "cnnc/Dialect/CNN/CNNPipelineOps.td"

#endif
