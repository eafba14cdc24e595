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
  let description = [{ (filled in with the implementation: IR before/after) }];
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
