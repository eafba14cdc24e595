//===- Passes.td - cnnc passes -----------------------------*- tablegen -*-===//
#ifndef CNNC_TRANSFORMS_PASSES_TD
#define CNNC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CNNAutodiff : Pass<"cnn-autodiff", "mlir::ModuleOp"> {
  let summary = "Builds the training step (loss, backward, optimizer) from a forward function";
  let description = [{
    Takes the forward function `forward(input, params..., buffers...) -> logits`
    and appends a function `train_step` computing, in one body: the forward
    pass in training mode (batch_norm -> batch_norm_train, dropout ->
    dropout_mask + mul), the mean softmax cross-entropy against integer
    labels, the gradient of every parameter (reverse mode; gradients of values
    used more than once are summed), and one optimizer update per parameter.

    Before:
    ```mlir
    func.func @forward(%x: tensor<8x4xf32> {cnn.input},
                       %w: tensor<3x4xf32> {cnn.param = "fc.weight"}) -> tensor<8x3xf32> {
      %y = cnn.matmul %x, %w {transpose_rhs = true} : (...) -> tensor<8x3xf32>
      return %y : tensor<8x3xf32>
    }
    ```
    After (SGD with momentum), besides @forward:
    ```mlir
    func.func @train_step(%x: tensor<8x4xf32>, %labels: tensor<8xi32>,
        %lr: tensor<f32>, %step: tensor<f32>, %w: tensor<3x4xf32>,
        %w_mom: tensor<3x4xf32>) -> (tensor<f32>, tensor<3x4xf32>, tensor<3x4xf32>) {
      %y = cnn.matmul %x, %w {transpose_rhs = true}
      %loss = cnn.softmax_cross_entropy %y, %labels
      %one = cnn.constant dense<1.0> : tensor<f32>
      %dy = cnn.softmax_cross_entropy_grad %y, %labels, %one
      %dw = cnn.matmul %dy, %x {transpose_lhs = true}
      %w2, %mom2 = cnn.sgd_update %w, %dw, %w_mom, %lr, %step {momentum = 0.9 ...}
      return %loss, %w2, %mom2
    }
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd, adam, adamw, or none (return the gradients instead of updating)">,
    Option<"momentum", "momentum", "double", "0.9", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", "0.0", "weight decay">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "Adam epsilon">,
    Option<"labelSmoothing", "label-smoothing", "double", "0.0",
           "cross-entropy label smoothing">,
    Option<"forwardName", "forward", "std::string", "\"forward\"",
           "name of the forward function">,
  ];
}

def CNNLayout : Pass<"cnn-layout", "mlir::ModuleOp"> {
  let summary = "Makes convolutions, pooling and BN work on NHWC tensors";
  let description = [{
    Switches every layout-sensitive op (an op with a `layout` attribute:
    conv2d, conv2d_bwd_data/_filter, bias_add, bias_grad, batch_norm,
    batch_norm_train/_grad, max/avg_pool2d(_grad), global_avg_pool(_grad),
    fused_conv2d) of every function to `layout = "NHWC"`: activations
    N x H x W x C, filters K x R x S x C/groups (cuDNN's KRSC). Each op is
    first rewritten in place between transposes; transposes are then pushed
    down through layout-agnostic ops (relu, add, mul, clip, scale, cast,
    relu_grad, clip_grad, concat, slice) and inverse pairs cancel, so the
    step stays NHWC between its edges. What remains:

    - the image argument (NCHW) is transposed once;
    - parameters keep PyTorch's FCHW layout (weights file, optimizer): each
      filter is transposed FCHW -> KRSC where it is used (one transpose per
      filter, shared by conv2d and conv2d_bwd_data) and each filter gradient
      KRSC -> FCHW before the optimizer; 1-D parameters are unaffected;
    - flatten/reshape of spatial NHWC data keeps PyTorch's NCHW order: the
      NHWC -> NCHW transpose stays in front of it. A transpose that moves only
      unit dimensions (N x 1 x 1 x C after global_avg_pool, 1x1 filters)
      becomes a free cnn.reshape.

    Before:
    ```mlir
    %y = cnn.conv2d %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64,
           padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
         : (tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x32x32xf32>
    %r = cnn.relu %y : (tensor<8x16x32x32xf32>) -> tensor<8x16x32x32xf32>
    %p = cnn.global_avg_pool %r : (tensor<8x16x32x32xf32>) -> tensor<8x16x1x1xf32>
    %f = cnn.flatten %p {axis = 1 : i64} : (tensor<8x16x1x1xf32>) -> tensor<8x16xf32>
    ```
    After:
    ```mlir
    %xt = cnn.transpose %x {permutation = array<i64: 0, 2, 3, 1>}
          : (tensor<8x3x32x32xf32>) -> tensor<8x32x32x3xf32>
    %wt = cnn.transpose %w {permutation = array<i64: 0, 2, 3, 1>}
          : (tensor<16x3x3x3xf32>) -> tensor<16x3x3x3xf32>
    %y = cnn.conv2d %xt, %wt {..., layout = "NHWC"}
         : (tensor<8x32x32x3xf32>, tensor<16x3x3x3xf32>) -> tensor<8x32x32x16xf32>
    %r = cnn.relu %y : (tensor<8x32x32x16xf32>) -> tensor<8x32x32x16xf32>
    %p = cnn.global_avg_pool %r {layout = "NHWC"}
         : (tensor<8x32x32x16xf32>) -> tensor<8x1x1x16xf32>
    %f = cnn.reshape %p : (tensor<8x1x1x16xf32>) -> tensor<8x16xf32>
    ```
  }];
}

def CNNPrecision : Pass<"cnn-precision", "mlir::ModuleOp"> {
  let summary = "f16 compute with f32 master weights, optimizer state and dynamic loss scaling";
  let description = [{ (filled in with the implementation: IR before/after) }];
}

def CNNFuse : Pass<"cnn-fuse", "mlir::ModuleOp"> {
  let summary = "Fuses conv+bias+relu(+residual), elementwise chains and backward pairs";
  let description = [{ (filled in with the implementation: IR before/after) }];
}

def CNNMemoryPlan : Pass<"cnn-memory-plan", "mlir::ModuleOp"> {
  let summary = "Plans every tensor of the train step into one arena";
  let description = [{ (filled in with the implementation: IR before/after) }];
}

#endif
