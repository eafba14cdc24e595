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

    A forward function may return several N x C logits: the main
    classifier's first, then auxiliary classifiers' (GoogLeNet and
    Inception-v3 in training mode). The loss is then
    CE(main) + aux-loss-weight * sum CE(aux) (torchvision's reference
    training scripts use 0.4), one scalar as before, and @forward (the
    evaluation function) keeps only the main logits.

    Dense prediction: logits N x C x H x W (all of them, with one H x W)
    train against per-pixel labels N x H x W (the @train_step argument). Each
    logits tensor is transposed to N x H x W x C and reshaped to
    (N*H*W) x C before the loss, so the loss sees one row per pixel
    (cnn-layout cancels the transpose against an NHWC network's last one).
    Labels equal to `ignore-index` are left out of the loss and of its mean.

    Param groups: `cnn.param_options` on a parameter overrides the options
    for it (group, lr, weight_decay, momentum, dampening, nesterov, beta1,
    beta2, epsilon); a group with its own `lr` reads it from the 0-D state
    "optimizer.group<k>.lr" (cnn.init: the LR it starts at), written by the
    host before a step, so each group's LR can follow its own schedule.
    `no-bn-weight-decay` is the group {weight_decay = 0} of the 1-D
    parameters that set no weight_decay of their own.

    `clip-grad-norm` > 0: cnn.clip_divisor of all trained gradients is the
    updates' grad_scale (torch.nn.utils.clip_grad_norm_). `accumulate` N > 1:
    each parameter gets the state "<param>.grad_accum"; cnn.accumulate_grad
    adds grad / N to it, and the update (numbered by the optimizer step,
    cnn.accumulation_step) applies only on every N-th step, as torch's loop
    of N backward passes of loss / N and one optimizer.step().

    Frozen parameters (`cnn.frozen` on a `cnn.param` argument: torch's
    requires_grad=False) get no gradient, no update and no optimizer state;
    they stay arguments of @train_step (after the buffers) and are not
    returned, so nothing that only they need (a frozen conv's
    conv2d_bwd_filter, the backward pass below a frozen backbone) is built.

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
    Option<"noBNWeightDecay", "no-bn-weight-decay", "bool", "false",
           "no weight decay on 1-D parameters (BatchNorm scale/shift, biases),"
           " as the usual ImageNet recipes">,
    Option<"clipGradNorm", "clip-grad-norm", "double", "0.0",
           "clip the gradients to this global L2 norm before the update "
           "(torch.nn.utils.clip_grad_norm_; 0: no clipping)">,
    Option<"accumulate", "accumulate", "int64_t", "1",
           "gradient accumulation: apply the update every N steps (micro-"
           "steps) to the mean of their gradients; BN statistics update at "
           "every micro-step">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "Adam epsilon">,
    Option<"labelSmoothing", "label-smoothing", "double", "0.0",
           "cross-entropy label smoothing">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "label that contributes nothing to the loss and is not counted in "
           "its mean (PyTorch's ignore_index; e.g. 255 for segmentation "
           "masks' void pixels)">,
    Option<"forwardName", "forward", "std::string", "\"forward\"",
           "name of the forward function">,
    Option<"auxLossWeight", "aux-loss-weight", "double", "0.4",
           "weight of each auxiliary classifier's cross-entropy in the loss">,
  ];
}

def CNNImportCleanup : Pass<"cnn-import-cleanup", "mlir::ModuleOp"> {
  let summary = "Gives imported broadcasting ops their specialized forms";
  let description = [{
    The importer maps ONNX Add/Mul/Div/ReduceMean to the broadcasting cnn
    ops; their canonicalization patterns give the specialized forms the
    passes and the CUDA target know (cnn.scale for a scalar factor,
    cnn.bias_add for a per-channel addend, cnn.global_avg_pool for a
    spatial mean) and make the activations exporters write out one op
    again: cnn.gelu for GELU before opset 20 (x * 0.5 * (1 + erf(x / sqrt
    2)), or the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))), cnn.silu for x * sigmoid(x), cnn.mish for x * tanh(softplus(x)):
    their gradients read x alone, where the written-out forms stored their
    intermediates for the backward pass. Only these patterns run, without
    folding: folders would
    drop cnn.dropout, from which cnn-autodiff builds the training mask. The
    first pass of cnn-train-pipeline; cnnc runs it when it imports an ONNX
    model.
  }];
}

def CNNLayout : Pass<"cnn-layout", "mlir::ModuleOp"> {
  let summary = "Makes convolutions, pooling and BN work on NHWC tensors";
  let description = [{
    Switches every layout-sensitive op (an op with a `layout` attribute:
    conv2d, conv2d_bwd_data/_filter, bias_add, bias_grad, batch_norm,
    batch_norm_train/_grad, max/avg_pool2d(_grad), global_avg_pool(_grad),
    fused_conv2d) of every function to `layout = #cnn.layout<NHWC>`: activations
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

    Pipeline transfers (cnn.send, cnn.recv, cnn.transfers of a stage's
    step) carry their 4-D tensors in NHWC and get
    `cnn.transfer_layout = #cnn.layout<NHWC>`: every stage is compiled on
    its own and both ends of a cut apply the same rule, so a cut between
    NHWC ops costs no transpose on either side.

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
    %y = cnn.conv2d %xt, %wt {..., layout = #cnn.layout<NHWC>}
         : (tensor<8x32x32x3xf32>, tensor<16x3x3x3xf32>) -> tensor<8x32x32x16xf32>
    %r = cnn.relu %y : (tensor<8x32x32x16xf32>) -> tensor<8x32x32x16xf32>
    %p = cnn.global_avg_pool %r {layout = #cnn.layout<NHWC>}
         : (tensor<8x32x32x16xf32>) -> tensor<8x1x1x16xf32>
    %f = cnn.reshape %p : (tensor<8x1x1x16xf32>) -> tensor<8x16xf32>
    ```
  }];
}

def CNNInputFormat : Pass<"cnn-input-format", "mlir::ModuleOp"> {
  let summary = "The image input arrives in the format the first convolution reads";
  let description = [{
    After cnn-layout and cnn-precision the image argument (`cnn.input`, f32
    NCHW) of @train_step and @forward goes through a chain of single-use
    ops before the first convolution: `cast` to f16, `transpose` to NHWC,
    `pad` of the channels (to 4 or a multiple of 8) with zeros. The runtime already
    converts every batch into the input tensor (bytes or f32 NCHW from the
    loader or the C API, with normalization): this pass folds the chain
    into the argument's type, so that conversion writes the f16, NHWC,
    channel-padded tensor directly and the step starts with the first
    convolution (three kernels and two copies of the batch fewer per step).
    The argument gets `cnn.image_shape` (the N, C, H, W of the images, what
    the runtime's ModelSpec describes) and `cnn.image_layout`. The longest
    prefix of cast, transpose, pad that every function has is folded, so
    @train_step and @forward keep one input tensor. Runs after cnn-layout
    and cnn-precision (and their canonicalization), for the CUDA target
    only: the reference interpreter reads f32 NCHW inputs.

    Before:
    ```mlir
    func.func @train_step(%x: tensor<32x3x32x32xf32> {cnn.input}, ...) {
      %0 = cnn.cast %x : (tensor<32x3x32x32xf32>) -> tensor<32x3x32x32xf16>
      %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : ... -> tensor<32x32x32x3xf16>
      %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : ... -> tensor<32x32x32x8xf16>
      %3 = cnn.conv2d %2, ...
    ```
    After:
    ```mlir
    func.func @train_step(%x: tensor<32x32x32x8xf16> {cnn.input,
        cnn.image_layout = #cnn.layout<NHWC>,
        cnn.image_shape = array<i64: 32, 3, 32, 32>}, ...) {
      %3 = cnn.conv2d %x, ...
    ```
  }];
  let statistics = [
    Statistic<"numFolded", "folded-ops", "input conversion ops folded into the argument">,
  ];
}

def CNNParamFormat : Pass<"cnn-param-format", "mlir::ModuleOp"> {
  let summary = "Convolution filters stored as the NHWC convolution reads them";
  let description = [{
    After cnn-layout (and cnn-precision) every step re-lays each filter out:
    the f32 master weight K x C x R x S is cast to f16, transposed to
    K x R x S x C and its channels zero-padded to what the NHWC convolution
    reads (4 or a multiple of 8 where the input's channels were padded); the
    filter gradient comes back the same way (slice, transpose to K x C x R x
    S) before the optimizer. This pass stores the parameter, and its
    optimizer state (momentum, Adam's moments), in the convolution's format
    K x R x S x C' instead: the transposes, pads and slices leave the step
    (SimpleCNN: 6 of 46 launches; ResNet-50: 34 transposes). The argument,
    its state and the returned values get `cnn.public_shape` (K, C, R, S):
    the shape of the tensor in weights files, checkpoints and the C API,
    which the runtime and the reference interpreter convert at their
    boundary. The optimizer is elementwise, so it updates the stored form
    as it did the public one; the padded channels stay exactly zero because
    they meet zero input channels (their gradient is zero; the pass checks
    that the convolution's input is a zero channel pad or the image the
    runtime pads with zeros, and leaves the filter alone otherwise). Other
    uses in @forward read the public form, rebuilt at the entry. CUDA
    target, NHWC only; runs after cnn-input-format.

    Before:
    ```mlir
    func.func @train_step(..., %w: tensor<16x3x3x3xf32> {cnn.param = "conv1.weight"}, ...) {
      %0 = cnn.cast %w : (tensor<16x3x3x3xf32>) -> tensor<16x3x3x3xf16>
      %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : ...
      %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : ... -> tensor<16x3x3x8xf16>
      ...
      %g = cnn.slice %dw {offsets = ..., sizes = array<i64: 16, 3, 3, 3>} : (tensor<16x3x3x8xf16>) -> ...
      %gt = cnn.transpose %g {permutation = array<i64: 0, 3, 1, 2>} : ...
      %p, %m = cnn.sgd_update %w, %gt, %mom, ...
    ```
    After:
    ```mlir
    func.func @train_step(..., %w: tensor<16x3x3x8xf32> {cnn.param = "conv1.weight",
        cnn.public_shape = array<i64: 16, 3, 3, 3>}, ...) {
      %0 = cnn.cast %w : (tensor<16x3x3x8xf32>) -> tensor<16x3x3x8xf16>
      ...
      %p, %m = cnn.sgd_update %w, %dw, %mom, ...
    ```
  }];
  let statistics = [
    Statistic<"numParams", "params", "filters stored in the convolution's format">,
    Statistic<"numFolded", "folded-ops", "transposes and pads removed from the forward">,
  ];
}

def CNNPrecision : Pass<"cnn-precision", "mlir::ModuleOp"> {
  let summary = "f16 compute with f32 master weights, optimizer state and dynamic loss scaling";
  let description = [{
    Mixed precision as torch.autocast + torch.amp.GradScaler, on @train_step
    (after cnn-autodiff) and @forward:
    - the image input is cast to f16 right after the argument and every
      activation / activation gradient becomes f16 (conv and matmul run on
      Tensor Cores with f32 accumulation);
    - parameters stay f32 arguments (master weights); each parameter that an
      op needs in f16 (conv filter, matmul weight, bias) gets one cnn.cast
      shared by its forward and backward uses; batch_norm keeps f32
      scale/bias/statistics, softmax_cross_entropy returns an f32 loss;
    - dynamic loss scaling: the loss-gradient seed (constant 1.0) becomes the
      scale S, a new state argument {cnn.state = "loss_scale", cnn.loss_scale,
      cnn.init = <init-scale>} (plus "loss_scale.growth_tracker");
      cnn.all_finite checks every parameter gradient, which goes to its
      optimizer update as it is (f16; the update widens it on load) with
      `grad_scale, finite` (divide by S;
      skip the update when not finite); cnn.loss_scale_update applies
      GradScaler.update (halve on inf/NaN, grow after growth-interval clean
      steps); the new S and tracker are returned as state. The updates are
      numbered by the applied steps, a third state scalar
      "optimizer.applied_steps" (+ finite each step), not by the global step:
      GradScaler never calls optimizer.step() on a skipped step, so Adam's
      bias correction (and SGD's first momentum step) count applied steps.
      With optimizer none, the returned cnn.grad gradients are unscaled
      (cnn.unscale, f32).
    - channel padding: a conv2d (groups 1) whose input channel count is not a
      multiple of 8 gets input and filter zero-padded along C (one cnn.pad
      each): to the next multiple of 8 (Tensor Cores), except that a large
      strided stem (kernel area >= 25, stride >= 2, at most 4 channels: the
      RGB 7x7 stride-2 stem) reads 4, where cuDNN's stem kernels are fastest;
      its conv2d_bwd_filter/bwd_data are sliced back.
    - normalization statistics in f32, as autocast runs group_norm,
      layer_norm and norm in f32 (GroupNorm / InstanceNorm / LayerNorm and
      ReduceL2 are imported decomposed into reductions and elementwise ops):
      every reduce_sum / reduce_mean / reduce_max returns f32 (an f16 input
      is read as it is, the sum was f32 already); an elementwise op whose
      float operands are all such statistics or constants, and whose result
      is no larger than they are, stays f32 (mean, var + eps, sqrt, 1 / std,
      GRN's gx / mean(gx), and the same in the backward pass); an
      elementwise op all of whose users are reductions (or such ops) is
      computed and stored in f32 (the square (x - mean)^2, ReduceL2's
      x * x, the dy * y of a gradient sum), which in f16 loses digits and
      overflows for |x| > 256. cnn-fuse merges the widening cast into that
      op's kernel. The big ops that use statistics (x - mean, d / std) are
      f16 as before: a fused_elementwise reads the f32 statistics as they
      are, other ops through one cast of the small tensor.
      `f32-statistics=false` turns this off (comparisons only).
    - parameter arithmetic in f32, as autocast casts to f16 only at the
      inputs of its f16 ops (conv, matmul) and leaves what a model computes
      from its f32 parameters in f32: an op whose float operands all derive
      from cnn.param arguments and constants (weight standardization:
      NF-Nets' ScaledStdConv2d and BiT's StdConv2d batch-normalize the
      weight; gain * w) keeps f32 operands and results, and so does its
      backward: an op whose results flow only into parameter gradients
      without passing an f16 op, and that reads a parameter value or such
      an op's f32 result (batch_norm_grad over the weight, the gain's
      scale; reshapes of their results), its f16 gradient operand (the
      conv's dW) widened once. Data movement (reshape, transpose) is f32
      only where it feeds or carries that arithmetic. In f16 the gain's
      gradient, a sum over the whole filter at the loss scale, overflowed
      and every first step skipped (nf_resnet).
      bias_grad is a reduction too: f32 unless it is the bias gradient of a
      conv or matmul (its dy read by that op's backward, f16 in autocast);
      the affine shift of GroupNorm / InstanceNorm / LayerNorm (f32 ops in
      autocast) sums its gradient over the batch in f32 (in f16 it
      overflowed in a BiT block at the loss scale).
    - @forward: the same f16 conversion; the logits are cast back to f32.

    Before (SGD, after cnn-autodiff):
    ```mlir
    func.func @train_step(%x: tensor<8x3x4x4xf32> {cnn.input}, %labels: tensor<8xi32> {cnn.labels},
        %lr: tensor<f32> {cnn.lr}, %step: tensor<f32> {cnn.step},
        %w: tensor<10x3x4x4xf32> {cnn.param = "w"}, %m: tensor<10x3x4x4xf32> {cnn.state = "w.momentum_buffer"})
        -> (tensor<f32> {cnn.loss}, ...) {
      %y = cnn.conv2d %x, %w ...                 // f32
      %loss = cnn.softmax_cross_entropy %yf, %labels
      %one = cnn.constant dense<1.0> : tensor<f32>
      %dy = cnn.softmax_cross_entropy_grad %yf, %labels, %one
      %dw = cnn.conv2d_bwd_filter %x, %dyr ...
      %w2, %m2 = cnn.sgd_update %w, %dw, %m, %lr, %step {...}
      return %loss, %w2, %m2
    }
    ```
    After:
    ```mlir
    func.func @train_step(%x: tensor<8x3x4x4xf32> {cnn.input}, ..., %w: tensor<10x3x4x4xf32> {cnn.param = "w"},
        %m: ..., %S: tensor<f32> {cnn.init = 6.553600e+04 : f32, cnn.loss_scale, cnn.state = "loss_scale"},
        %t: tensor<f32> {cnn.state = "loss_scale.growth_tracker"},
        %n: tensor<f32> {cnn.state = "optimizer.applied_steps"})
        -> (tensor<f32> {cnn.loss}, ..., tensor<f32> {cnn.state = "loss_scale"},
            tensor<f32> {cnn.state = "loss_scale.growth_tracker"},
            tensor<f32> {cnn.state = "optimizer.applied_steps"}) {
      %xh = cnn.cast %x : (tensor<8x3x4x4xf32>) -> tensor<8x3x4x4xf16>
      %wh = cnn.cast %w : (tensor<10x3x4x4xf32>) -> tensor<10x3x4x4xf16>
      %xp = cnn.pad %xh {pads = array<i64: 0, 0, 0, 0, 0, 5, 0, 0>}  // channel padding 3 -> 8
      %y = cnn.conv2d %xp, %wp ...                                   // f16
      %loss = cnn.softmax_cross_entropy %yf, %labels                // f32 loss
      %dy = cnn.softmax_cross_entropy_grad %yf, %labels, %S         // seeded with S, f16
      %dwp = cnn.conv2d_bwd_filter %xp, %dyr ...
      %dw = cnn.slice %dwp {offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 10, 3, 4, 4>}
      %ok = cnn.all_finite %dw : (tensor<10x3x4x4xf16>) -> tensor<f32>
      %S2, %t2 = cnn.loss_scale_update %S, %t, %ok {backoff_factor = 5.0e-01 : f32,
                   growth_factor = 2.0 : f32, growth_interval = 2000 : i64}
      %n2 = cnn.add %n, %ok : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %w2, %m2 = cnn.sgd_update %w, %dw, %m, %lr, %n2, %S, %ok {...}
      return %loss, %w2, %m2, %S2, %t2, %n2
    }
    ```
    Initial value of S: bindArguments of the reference interpreter and the
    driver use `cnn.init`; the CUDA runtime starts a LossScale tensor missing
    from the weights file at 65536 (the default init-scale).
  }];
  let options = [
    Option<"initScale", "init-scale", "double", "65536.0",
           "initial loss scale (GradScaler init_scale)">,
    Option<"growthInterval", "growth-interval", "int64_t", "2000",
           "consecutive finite steps before the scale grows">,
    Option<"growthFactor", "growth-factor", "double", "2.0",
           "scale multiplier after growth-interval finite steps">,
    Option<"backoffFactor", "backoff-factor", "double", "0.5",
           "scale multiplier on a step with inf/NaN gradients">,
    Option<"padChannelsOpt", "pad-channels", "bool", "true",
           "zero-pad conv input channels to a multiple of 8 (4 for an RGB 7x7/s2 stem)">,
    Option<"f32Statistics", "f32-statistics", "bool", "true",
           "keep normalization statistics (reductions, what is computed from "
           "them, the squares they sum) in f32; false: everything f16 (for "
           "comparisons only)">,
  ];
}

def CNNDataParallel : Pass<"cnn-data-parallel", "mlir::ModuleOp"> {
  let summary = "All-reduces the gradients of @train_step in buckets (data parallelism)";
  let description = [{
    Data-parallel training (DDP semantics): every rank runs the same step on
    its own shard of the batch; this pass makes the step exchange what the
    ranks must agree on, with `cnn.all_reduce` ops:
    - every parameter gradient (operand `grad` of each optimizer update, or a
      `cnn.grad` result with optimizer none) is averaged over the ranks
      before its update. Gradients are grouped into *buckets* of at most
      `bucket-mb` MiB, one element type each, **in the order they become
      final in the backward schedule** (the position of their defining op),
      packed from the last gradient back so that the bucket closing at the
      end of the backward pass (the one whose all-reduce nothing hides)
      holds at most 1 MiB; each bucket's all_reduce is placed right after
      its last gradient: the runtime starts it on the communication stream
      while the rest of the backward pass runs. `bucket` numbers the collectives in issue
      order. Constant gradients (zeros of unused parameters) are the same on
      every rank and are not reduced.
    - under loss scaling (after cnn-precision) the f16 gradient is reduced,
      in f16, before its optimizer update reads it,
      and `cnn.all_finite` reads the reduced gradients: one rank's inf/NaN
      reaches every rank's flag, so all ranks skip the same step and back
      the scale off together (no separate collective is needed for the
      flag; the reduced values are bitwise the same on every rank).
    - the loss result is averaged (the reported loss is the global batch's),
      in a last one-element bucket.
    BatchNorm batch statistics stay per rank (DDP's default); the running
    statistics of rank 0 are the ones checkpointed. With `sync-bn`, every
    batch_norm_train normalizes with the global batch's statistics: the
    rank's per-channel sums (cnn.batch_norm_sums, which cnn-conv-stats moves
    into the producing convolution's epilogue) added up by one two-vector
    all-reduce, then batch_norm_finalize over the global count; its
    batch_norm_grad with the global sums of dy and dy * xhat
    (cnn.batch_norm_grad_sums, one two-vector all-reduce), as PyTorch's
    SyncBatchNorm: N ranks x batch B then compute what one rank with batch
    N*B does.

    Runs after cnn-autodiff (and after cnn-layout/cnn-precision when they
    run), before cnn-fuse and the memory plan. The function gets the
    attribute `cnn.data_parallel = {buckets = N, bucket_mb = ...}`.

    Before (SGD, after cnn-autodiff):
    ```mlir
    %dw1 = cnn.conv2d_bwd_filter ...          // final first (last layer)
    %db1 = cnn.bias_grad ...
    %dw0 = cnn.conv2d_bwd_filter ...
    %w0n, %m0n = cnn.sgd_update %w0, %dw0, %m0, %lr, %step {...}
    %w1n, %m1n = cnn.sgd_update %w1, %dw1, %m1, %lr, %step {...}
    return %loss, ...
    ```
    After (`bucket-mb` small enough for two buckets):
    ```mlir
    %dw1 = cnn.conv2d_bwd_filter ...
    %db1 = cnn.bias_grad ...
    %r:2 = cnn.all_reduce %dw1, %db1 {bucket = 0 : i64, bytes = 4136 : i64, reduction = "avg"} : ...
    %dw0 = cnn.conv2d_bwd_filter ...
    %r0 = cnn.all_reduce %dw0 {bucket = 1 : i64, bytes = 1728 : i64, reduction = "avg"} : ...
    %w0n, %m0n = cnn.sgd_update %w0, %r0, %m0, %lr, %step {...}
    %w1n, %m1n = cnn.sgd_update %w1, %r#0, %m1, %lr, %step {...}
    %l = cnn.all_reduce %loss {bucket = 2 : i64, bytes = 4 : i64, reduction = "avg"} : ...
    return %l, ...
    ```
  }];
  let options = [
    Option<"bucketMB", "bucket-mb", "double", "25.0",
           "largest bucket in MiB (a gradient larger than that is a bucket "
           "alone); 0 puts every gradient in its own bucket">,
    Option<"syncBN", "sync-bn", "bool", "false",
           "BatchNorm with the global batch's statistics (SyncBatchNorm)">,
    Option<"worldSize", "world-size", "int64_t", "0",
           "number of ranks (sync-bn: the global count of the running "
           "variance's unbiased estimate)">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "all_reduce ops of gradients">,
    Statistic<"numGradients", "gradients", "gradients all-reduced">,
    Statistic<"numSyncBN", "sync-bn", "batch_norm_train ops synchronized">
  ];
}

def CNNDgradEpilogue : Pass<"cnn-dgrad-epilogue", "mlir::ModuleOp"> {
  let summary = "Fuses the residual-gradient add and ReLU gradient into the backward-data convolution before them";
  let description = [{
    In a residual network the gradient at a block's output ReLU is
    `relu_grad(conv2d_bwd_data(dy, w) + shortcut_grad, y)`: the next block's
    input gradient plus its shortcut's. Unfused, the convolution writes its
    gradient, and an elementwise kernel reads it again with the shortcut's
    gradient and `y` to write the sum: four full-size tensor passes (ResNet-50
    batch 128: ~1.9 ms of the step). This pass rewrites
    `relu_grad(add(conv2d_bwd_data(dy, w), a), y)` (the add's operands in
    either order; the convolution's gradient and the sum used only there)
    into `fused_conv2d_bwd_data(dy, w, a, y)`, which the CUDA target runs as
    cuDNN's dgrad + add + ReLU-backward graph (the MLPerf ResNet recipe),
    timed against the split form.

    Only NHWC convolutions of one group whose input and output channel
    counts are multiples of 8, all tensors of one element type, f16 unless
    `any-precision` (the form cuDNN's runtime fusion engines take). Runs
    before cnn-fuse (which would merge the add and relu_grad into an
    elementwise kernel); the CUDA target's NHWC f16 pipeline only
    (`cnnc --dgrad-epilogue=false` turns it off).

    ```mlir
    %d = cnn.conv2d_bwd_data %dy, %w {...} : (...) -> tensor<8x14x14x256xf16>
    %s = cnn.add %a, %d : (...) -> tensor<8x14x14x256xf16>
    %g = cnn.relu_grad %s, %y : (...) -> tensor<8x14x14x256xf16>
    // becomes
    %g = cnn.fused_conv2d_bwd_data %dy, %w, %a, %y {...} : (...) -> tensor<8x14x14x256xf16>
    ```
  }];
  let options = [
    Option<"anyPrecision", "any-precision", "bool", /*default=*/"false",
           "Also rewrite f32 convolutions (the reference interpreter runs "
           "them; the CUDA target's graphs are f16 only)">
  ];
  let statistics = [
    Statistic<"numFused", "fused", "Residual-gradient add + ReLU gradient fused into a backward-data convolution">
  ];
}

def CNNConvStats : Pass<"cnn-conv-stats", "mlir::ModuleOp"> {
  let summary = "Computes BatchNorm statistics in the epilogue of the convolution before it";
  let description = [{
    A BatchNorm after a convolution reads the convolution's output once more
    only to sum it per channel (batch_norm_stats). This pass rewrites
    `batch_norm_stats(conv2d(x, w))` into `fused_conv2d_stats(x, w)`, whose
    per-channel sum and sum of squares come out of the convolution itself
    (cuDNN's GenStats epilogue: NVIDIA's MLPerf ResNet recipe), and a
    `batch_norm_finalize` of those sums. Only NHWC f16 convolutions of one
    group with 8-aligned channels are rewritten: the form cuDNN's runtime
    fusion engines take (the runtime still times the fused graph against the
    convolution plus a statistics kernel and runs the faster).

    The variance comes from E[x²] - E[x]² (in f64, from f32 sums) instead of
    the two-pass shifted sums of batch_norm_stats: within f16 training's
    tolerance, not bit for bit.

    Then (option `prologue`; in the CUDA target's pipeline by default,
    `cnnc --conv-prologue=false` turns it off: ResNet-50 on the H100 stores
    800 MiB less and runs 1.5-2 % faster) a `fused_conv2d_stats` whose input is the
    previous BatchNorm's apply + ReLU, `relu(x * alpha + beta)` (a
    fused_elementwise as cnn-fuse leaves it), reads `x` and takes `alpha`,
    `beta` as its prologue (cuDNN's scale-bias-ReLU prologue): the forward
    pass no longer makes the normalized tensor. Where the filter gradient
    still reads it, the fused_elementwise moves down to right before its
    first use, so it is recomputed in the backward pass from `x` (kept for
    the BatchNorm gradient anyway) instead of being stored across the step.
    Where that recomputation feeds filter gradients only (option
    `wgrad-prologue`; on in this pass, off in the CUDA target's pipeline
    unless `cnnc --wgrad-prologue`: each graph times faster than the split
    form alone, yet ResNet-50's whole step on the H100 measured 21.45 ms with
    it against 21.27 ms without), it becomes their prologue as well,
    `fused_conv2d_bwd_filter(x, dy, alpha, beta)` (cuDNN's scale-bias-ReLU
    prologue on the wgrad's input, timed against the split form): the
    normalized tensor is not written to memory in the backward pass either.

    Runs after cnn-fuse, before
    cnn-lower-elementwise; the CUDA target's pipeline only (`--no-conv-stats`
    turns it off).

    ```mlir
    %y = cnn.conv2d %x, %w {...} : (...) -> tensor<8x16x16x64xf16>
    %m, %is, %rm, %rv, %a, %b = cnn.batch_norm_stats %y, %g, %be, %rm0, %rv0 {...}
    // becomes
    %y, %s, %ss = cnn.fused_conv2d_stats %x, %w {...}
    %m, %is, %rm, %rv, %a, %b = cnn.batch_norm_finalize %s, %ss, %g, %be, %rm0, %rv0
        {count = 2048 : i64, ...}
    %n = cnn.fused_elementwise %y, %a, %b ... // relu(y * a + b)
    %z = cnn.conv2d %n, %w2 ...
    // (and %z's BatchNorm) becomes
    %z, %s2, %ss2 = cnn.fused_conv2d_stats %y, %w2, %a, %b {...}
    ```
  }];
  let options = [
    Option<"anyPrecision", "any-precision", "bool", /*default=*/"false",
           "Also rewrite f32 convolutions (the reference interpreter runs "
           "them; the CUDA target's GenStats graphs are f16 only)">,
    Option<"prologue", "prologue", "bool", /*default=*/"true",
           "Fuse the BatchNorm apply + ReLU that feeds a fused_conv2d_stats "
           "into it as its prologue">,
    Option<"wgradPrologue", "wgrad-prologue", "bool", /*default=*/"true",
           "With `prologue`: the BatchNorm apply + ReLU left for filter "
           "gradients only becomes their prologue (fused_conv2d_bwd_filter) "
           "instead of being recomputed into memory">
  ];
  let statistics = [
    Statistic<"numFused", "fused", "BatchNorm statistics computed in a convolution's epilogue">,
    Statistic<"numPrologues", "prologues", "BatchNorm apply + ReLU fused into the next convolution">,
    Statistic<"numSunk", "sunk", "BatchNorm apply + ReLU moved to their first backward use">,
    Statistic<"numWgradPrologues", "wgrad-prologues", "BatchNorm apply + ReLU fused into a filter gradient">
  ];
}

def CNNMaxPoolIndex : Pass<"cnn-max-pool-index", "mlir::ModuleOp"> {
  let summary = "Max pooling records each window's argmax; its gradient routes by it (and the BN + ReLU before it becomes its prologue)";
  let description = [{
    max_pool2d_grad(dy, x) finds each window's first maximum again in the
    pooled input x, so the step keeps x from the forward pass to the backward
    pass and reads it there again (ResNet's stem: 196 MiB at batch 128). This
    pass makes the forward pooling record the position of each window's
    maximum, one byte per pooled element, and the gradient route by it:
    `max_pool2d(x)` becomes `fused_max_pool2d(x)` with the `window_index`
    result, and each `max_pool2d_grad(dy, x)` of it becomes
    `max_pool2d_index_grad(dy, window_index)`. Poolings without a gradient
    (the eval forward) and kernels of more than 255 positions are left alone.

    Where x is a BatchNorm apply + ReLU (the scale-shift-ReLU
    fused_elementwise cnn-fuse makes) that only the pooling reads, it becomes
    the pooling's prologue (`prologue`): the normalized tensor is neither
    written nor stored. The results are those of the unfused ops bit for bit.
    In the backward pass, where the gradient's only reader is the BatchNorm +
    ReLU gradient of that same normalization (fused_batch_norm_affine_relu_grad,
    NHWC with a multiple of 8 channels), the two become one
    fused_max_pool2d_batch_norm_relu_grad (`grad-fusion`): the pooling
    gradient is gathered where the BatchNorm gradient reads it and the
    full-size gradient is never stored. The CUDA pipeline folds only with
    `cnnc --pool-bn-grad` (off by default: measured slower than the separate
    gather on the H100).
    The CUDA target's pipeline runs it after cnn-conv-stats
    (`cnnc --max-pool-index=false` turns it off).

    ```mlir
    %x = cnn.fused_elementwise %c, %alpha, %beta {broadcast = array<i64: 0, 1, 1>, ...} // relu(c * alpha + beta)
    %y = cnn.max_pool2d %x {...} : (tensor<8x32x32x64xf16>) -> tensor<8x16x16x64xf16>
    ...
    %dx = cnn.max_pool2d_grad %dy, %x {...}
    // becomes
    %y, %i = cnn.fused_max_pool2d %c, %alpha, %beta {...}
        : (...) -> (tensor<8x16x16x64xf16>, tensor<8x16x16x64xui8>)
    ...
    %dx = cnn.max_pool2d_index_grad %dy, %i {...}
        : (tensor<8x16x16x64xf16>, tensor<8x16x16x64xui8>) -> tensor<8x32x32x64xf16>
    // and, with grad-fusion, where %dx's only reader is
    // %dc, %ds, %db = cnn.fused_batch_norm_affine_relu_grad %dx, %c, ...
    %dc, %ds, %db = cnn.fused_max_pool2d_batch_norm_relu_grad %dy, %i, %c, ...
    ```
  }];
  let options = [
    Option<"prologue", "prologue", "bool", /*default=*/"true",
           "Fold a BatchNorm apply + ReLU read only by the pooling into it">,
    Option<"gradFusion", "grad-fusion", "bool", /*default=*/"true",
           "Fold the gradient into the BatchNorm + ReLU gradient that is its only reader">
  ];
  let statistics = [
    Statistic<"numIndexed", "indexed", "max_pool2d_grad ops routed by the forward's window index">,
    Statistic<"numPrologues", "prologues", "BatchNorm apply + ReLU folded into a pooling">,
    Statistic<"numGradFusions", "grad-fusions", "pooling gradients folded into a BatchNorm + ReLU gradient">
  ];
}

def CNNRemat : Pass<"cnn-remat", "mlir::ModuleOp"> {
  let summary = "Recomputes cheap activations (elementwise, expanding 1x1 convolutions) in the backward pass instead of storing them";
  let description = [{
    A BatchNorm network keeps both the convolution output (the BatchNorm
    gradient reads it) and the BN-apply + ReLU output (the next
    convolution's filter gradient and the ReLU mask read it) from the
    forward pass to the backward pass. The second is one elementwise kernel
    of the first: this pass clones such a one-result `fused_elementwise`
    right before its first use after the largest gap (at least `min-gap`
    ops) between its uses, and points that use and every later one at the
    clone. It does so only when each full-size input is used at or after
    that point anyway and is not itself recomputed, so no large buffer
    lives longer and clones never chain (the value a clone reads is kept).
    The clone computes the same body on the same inputs: the step's results
    are bit-identical, its stored activations fewer (the static plan of
    ResNet-50 at batch 128: docs/benchmarks.md). Clones carry `cnn.remat`.
    A 1x1 convolution whose input is at most half its output (a
    bottleneck's expanding conv3, a 64 -> 256 shortcut) is recomputed the
    same way (conv2d, or fused_conv2d_stats with its BN prologue: the
    clone's statistics go unread); its input and filter must be stored
    until then anyway. An elementwise clone costs about three bytes of
    memory traffic per byte freed (it reads two full-size inputs and writes
    its result), such a convolution 1.25-1.5, so `budget-mb` recomputes
    only as much as a memory target needs, convolutions first.
    Runs after cnn-fuse and cnn-lower-elementwise, before
    cnn-select-lowering and cnn-memory-plan.

    ```mlir
    %y = cnn.fused_elementwise %x, %a, %b ... // relu(x * a + b)
    %z = cnn.conv2d %y, %w ...                 // forward use
    ...                                        // the rest of the step
    %dw = cnn.conv2d_bwd_filter %y, %dz ...    // backward use
    // becomes
    %y = cnn.fused_elementwise %x, %a, %b ...
    %z = cnn.conv2d %y, %w ...
    ...
    %y2 = cnn.fused_elementwise %x, %a, %b ... {cnn.remat}
    %dw = cnn.conv2d_bwd_filter %y2, %dz ...
    ```
  }];
  let options = [
    Option<"minGap", "min-gap", "int64_t", /*default=*/"16",
           "Recompute only across a gap of at least this many ops">,
    Option<"budgetMB", "budget-mb", "int64_t", /*default=*/"0",
           "Free about this many MiB of stored activations, no more: the "
           "least traffic per byte freed first, then the largest (the "
           "latest among equals), stopping once the sum reaches it (0: "
           "every candidate, latest first)">,
    Option<"budgetPercent", "budget-percent", "int64_t", /*default=*/"0",
           "Without budget-mb: free about this percentage of the stored "
           "activations (the bytes of every value read across a gap of "
           "min-gap ops), in budget-mb's order (0: no such budget)">,
    Option<"onlyConvolutions", "convolutions-only", "bool",
           /*default=*/"false",
           "Recompute the 1x1 convolutions alone (the GPU pipeline's "
           "default: at most 1.5 bytes of traffic per byte freed)">
  ];
  let statistics = [
    Statistic<"numRemat", "recomputed", "activations recomputed in the backward pass">,
    Statistic<"bytesFreed", "bytes", "bytes of activations no longer stored across the gap">,
    Statistic<"bytesStored", "stored-bytes", "bytes of activations stored across a gap before the pass">
  ];
}

def CNNSelectLowering : Pass<"cnn-select-lowering", "mlir::ModuleOp"> {
  let summary = "Chooses how each op runs on the GPU, as attributes the CUDA emitter prints";
  let description = [{
    The CUDA target's lowering choices, made in IR (the emitter decides
    nothing; it refuses a function this pass has not seen):
    - `cnn.lowering = "gemm"` on conv2d / conv2d_bwd_data / conv2d_bwd_filter
      that are NHWC 1x1, stride 1, unpadded, one group: a cuBLASLt matrix
      product over the N*H*W pixels (on fused_conv2d_stats: the convolution
      of its split form, which the runtime times against cuDNN's
      conv + GenStats graph);
    - `cnn.lowering = "vec8"` on NHWC max_pool2d / max_pool2d_grad with
      C % 8 == 0: eight channels per thread;
    - `cnn.lowering = "cudnn_bias_act"` on fused_conv2d whose epilogue is
      cudnnConvolutionBiasActivationForward's (a bias of the data type, relu
      or none): the runtime times it against conv + epilogue;
    - `cnn.lowering = "channel_sum"` on reduce_sum / reduce_mean over every
      dimension but the innermost (an NHWC tensor's per-channel sums): the
      coalesced two-pass kernels of bias_grad; `"channel_sum_vec8"` when
      that dimension is a multiple of 8 (eight channels per thread);
    - `cnn.lowering = "spatial_sum"` on the other reduce_sum / reduce_mean
      over one run of consecutive dimensions, of f16 / f32 values, at least
      32 per result (256 where the run is innermost; an NHWC tensor's
      pixels: squeeze-excitation's gradient; the trailing H x W of a 5-D
      split attention): the blocks of
      global_avg_pool's spatialSumTiles over (outer, chunk of the inner
      dimensions, split of the run) instead of a thread or a block per
      result (no `reduction` strategy);
    - `cnn.lowering = "tiled"` on cnn.transpose that keeps leading
      dimensions and swaps the next two groups of dimensions (NCHW <-> NHWC:
      permutations (0, 2, 3, 1) and (0, 3, 1, 2)), f16 / f32, both groups
      at least 16 elements, with `tiled-transpose` (the default; off: every
      transpose is the gather): batchedTranspose2D's
      32 x 32 shared-memory tiles (reads and writes coalesced) instead of the
      generic gather, which reads at a stride of C or H x W;
    - `cnn.update_group = k` on optimizer updates that share one
      multi-tensor kernel (same algorithm, hyper-parameters, element types
      and scalar operands; results read only by the return);
    - `cnn.cast_group = k` on a contiguous run of one-input fused_elementwise
      ops with the same body and types whose inputs are parameters (the f16
      working copies of the weights at the start of a step): one
      multi-tensor kernel per run;
    - `cnn.lowering = "vec8"` on every member of such a group (of two or
      more) and on all_finite when each of their tensors has a multiple of
      8 elements: the multi-tensor kernel moves eight elements per thread.
    Functions get `cnn.lowering_selected`. Runs after cnn-fuse and
    cnn-lower-elementwise, before cnn-memory-plan.

    ```mlir
    %y = cnn.conv2d %x, %w {..., layout = #cnn.layout<NHWC>}
        : (tensor<8x4x4x64xf16>, tensor<256x1x1x64xf16>) -> tensor<8x4x4x256xf16>
    // becomes
    %y = cnn.conv2d %x, %w {..., cnn.lowering = "gemm", layout = #cnn.layout<NHWC>} ...
    ```
  }];
  let options = [
    Option<"tiledTranspose", "tiled-transpose", "bool", /*default=*/"true",
           "Batched 2-D transposes (NCHW <-> NHWC) in shared-memory tiles "
           "(default on; off: the generic gather)">
  ];
  let statistics = [
    Statistic<"numGemm", "gemm", "convolutions run as cuBLASLt products">,
    Statistic<"numVec8", "vec8", "ops with eight channels or elements per thread">,
    Statistic<"numCudnnFused", "cudnn-bias-act", "fused convs offered to cuDNN's bias-activation form">,
    Statistic<"numChannelSum", "channel-sum", "reductions over all but the innermost dimension">,
    Statistic<"numSpatialSum", "spatial-sum", "reductions over one run of dimensions in spatialSumTiles' blocks">,
    Statistic<"numTiledTranspose", "tiled-transpose", "transposes in batchedTranspose2D's shared-memory tiles">,
    Statistic<"numGrouped", "grouped-updates", "optimizer updates in multi-tensor groups">,
    Statistic<"numCastGrouped", "grouped-casts", "parameter casts in multi-tensor groups">
  ];
}

def CNNLowerElementwise : Pass<"cnn-lower-elementwise", "mlir::ModuleOp"> {
  let summary = "Makes every remaining elementwise op a one-op fused_elementwise";
  let description = [{
    The CUDA target prints one form of elementwise computation: the
    `cnn.fused_elementwise` op with a scalar body. This pass gives every op
    with the ElementwiseOpInterface that cnn-fuse left alone (or all of them,
    at -O0) that form, from the op's own scalar body, so the target needs no
    per-op knowledge. Always part of the GPU pipeline, before the memory plan.

    Before:
    ```mlir
    %y = cnn.sigmoid %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
    ```
    After:
    ```mlir
    %y = cnn.fused_elementwise %x {broadcast = array<i64: 0>, layout = #cnn.layout<NCHW>}
        : (tensor<2x8xf32>) -> tensor<2x8xf32> {
    ^bb0(%a: f32):
      %one = arith.constant 1.0 : f32
      %n = arith.negf %a : f32
      %e = math.exp %n : f32
      %d = arith.addf %one, %e : f32
      %s = arith.divf %one, %d : f32
      cnn.yield %s : f32
    }
    ```
  }];
  let statistics = [
    Statistic<"numLowered", "lowered-ops", "Elementwise ops given the fused form">
  ];
}

def CNNFuse : Pass<"cnn-fuse", "mlir::ModuleOp"> {
  let summary = "Fuses conv+bias+relu(+residual), elementwise chains and backward pairs";
  let description = [{
    Five rewrites on @train_step and @forward, each exact: the reference
    interpreter gives bit-identical numbers before and after
    (test/e2e/test_fuse.py), because each fused op performs the f32
    operations of the ops it replaces in their order.
    1. conv2d [+ bias_add] [+ add residual] [+ relu | clip] -> fused_conv2d
       when every intermediate has one user (clip_grad is first re-pointed at
       the clip output, which carries the same mask).
    2. batch_norm_train -> batch_norm_stats (statistics and the per-channel
       affine map alpha, beta) + a fused_elementwise y = x * alpha + beta, so
       the residual add and ReLU that follow join it.
    3. batch_norm_grad(relu_grad(dy, y)) -> fused_batch_norm_relu_grad, in
       either layout (the mask is applied while reading dy; the masked
       gradient is never stored). Where y = relu(x * alpha + beta) is the
       normalization of 2 (no residual add between), the op becomes
       fused_batch_norm_affine_relu_grad: the mask is recomputed from x,
       which the gradient reads anyway, and y is not read. Two batch_norm_grad
       of one gradient (a shortcut with its own BatchNorm: ResNet's
       downsampling blocks) become one fused_dual_batch_norm_grad, whose
       passes read that gradient once for both.
    4. Every elementwise op becomes a fused_elementwise with an `arith` body;
       producer/consumer pairs of the same shape merge while the consumer's
       other operands are defined before the producer.
    5. Upsample + concat (`resize-concat`): a cnn.concat of two operands
       along the channel dimension, one of them a cnn.resize with no other
       user, becomes one cnn.fused_resize_concat (the resized tensor is
       never stored and re-read); a cnn.resize_grad whose `grad_output` is a
       single-use cnn.slice of a channel range (every other dimension
       whole) reads that range of the slice's input in place
       (`channel_offset`). Both layouts, f32 and f16.
    Each rewrite is a `RewritePattern`: 1-4's conversions run with the greedy
    driver, phase by phase; the merges of 4 with a driver that applies the
    first match in block order and starts over (the merge order decides the
    groups, see Fuse.cpp). Counts are the pass statistics below
    (`--mlir-pass-statistics` in builds with LLVM_ENABLE_STATS;
    `cnnc --stats` in every build, through cnnc::getFusionCounts).

    Before:
    ```mlir
    %c = cnn.conv2d %x, %w {...} : (...) -> tensor<2x4x8x8xf32>
    %b = cnn.bias_add %c, %bias : (...) -> tensor<2x4x8x8xf32>
    %r = cnn.relu %b : (...) -> tensor<2x4x8x8xf32>
    %g = cnn.relu_grad %dy, %r : (...) -> tensor<2x4x8x8xf32>
    %s = cnn.scale %g {factor = 0.5 : f32} : (...) -> tensor<2x4x8x8xf32>
    ```
    After:
    ```mlir
    %r = cnn.fused_conv2d %x, %w, %bias {activation = "relu", ...}
    %s = cnn.fused_elementwise %dy, %r {broadcast = array<i64: 0, 0>} : (...) -> tensor<2x4x8x8xf32> {
    ^bb0(%a: f32, %y: f32):
      %zero = arith.constant 0.0 : f32
      %pos = arith.cmpf ogt, %y, %zero : f32
      %m = arith.select %pos, %a, %zero : f32
      %half = arith.constant 0.5 : f32
      %v = arith.mulf %m, %half : f32
      cnn.yield %v : f32
    }
    ```
  }];
  let options = [
    Option<"recomputeReluMask", "recompute-relu-mask", "bool", "true",
           "Give fused BN-ReLU gradients (and the sync-bn gradient sums, "
           "fused_batch_norm_affine_relu_grad_sums) the mask recomputed from "
           "x where the ReLU output is the BN normalization (off: read the "
           "stored output)">,
    Option<"dualBatchNormGrad", "dual-bn-grad", "bool", "true",
           "Make two batch_norm_grad of one gradient one "
           "fused_dual_batch_norm_grad (off: keep them apart)">,
    Option<"groupNormChannelView", "group-norm-channel-view", "bool", "true",
           "Rebuild GroupNorm's normalization on the channel view so its "
           "scale, shift and activation join it (off: leave it on the "
           "grouped view; the A/B of docs/benchmarks.md)">,
    Option<"resizeConcat", "resize-concat", "bool", "true",
           "Make a channel concat of a single-use resize one "
           "fused_resize_concat, and a resize_grad of a channel slice read "
           "the range in place (off: keep resize, concat and slice)">,
  ];
  let statistics = [
    Statistic<"numConvEpilogueOps", "conv-epilogue-ops",
              "Ops folded into fused_conv2d (the convolutions included)">,
    Statistic<"numBatchNormSplits", "bn-splits",
              "batch_norm_train split into statistics + normalization">,
    Statistic<"numBatchNormReluGradOps", "bn-relu-grad-ops",
              "Ops folded into fused_batch_norm_relu_grad">,
    Statistic<"numReluMasksRecomputed", "relu-masks-recomputed",
              "fused_batch_norm_relu_grad ops given the mask recomputed from x">,
    Statistic<"numBatchNormGradPairs", "bn-grad-pairs",
              "batch_norm_grad pairs of one gradient made one fused_dual_batch_norm_grad">,
    Statistic<"numElementwiseOps", "elementwise-ops",
              "Elementwise ops given the fused_elementwise form">,
    Statistic<"numElementwiseMerges", "elementwise-merges",
              "fused_elementwise producer/consumer merges">,
    Statistic<"numGroupedToChannelView", "grouped-to-channel-view",
              "Elementwise ops on a GroupNorm grouped view rebuilt on the "
              "channel view (joining its scale, shift and activation)">,
    Statistic<"numResizeConcats", "resize-concats",
              "concat(resize) pairs made one fused_resize_concat">,
    Statistic<"numResizeGradSlices", "resize-grad-slices",
              "resize_grad ops reading a channel range in place of a slice">,
  ];
}

def CNNPipelinePartition : Pass<"cnn-pipeline-partition", "mlir::ModuleOp"> {
  let summary = "Chooses the pipeline stages of @train_step (model parallelism) from a cost model";
  let description = [{
    Partitions the training step into `stages` contiguous ranges of its
    forward ops (forward and backward of a range of layers run on one GPU
    each; docs/pipeline-parallel.md) and records the decision as attributes
    (cnnc/Transforms/PipelinePlan.h): `cnn.stage` on every op, and on the
    module `cnn.pipeline` with the cuts, each stage's peak bytes, kept
    activations, parameter bytes and time estimate, and the bytes crossing
    each cut. cnn-pipeline-split reads them.

    Cost model: a forward op's time is max(FLOPs / 50 TFLOP/s, bytes /
    3 TB/s) (`half-precision`: 400 TFLOP/s and half the bytes) plus
    `launch-us` (its launches' latency, which the roofline does not see),
    or its measured time with `profile`, a stage's
    time three times its forward ops' plus its transfers (the activations
    crossing its cuts and their gradients, at `link-gbps`; an activation
    read by u forward ops beyond a cut has u gradients coming back apart),
    or the larger of the two with `overlap-transfers`. A stage's peak is
    its parameters, BN buffers and optimizer state, plus the activations
    its backward pass reads (values that live from the forward into the
    backward pass) times the micro-batches in flight (the GPipe schedule
    keeps all `micro-batches` on every stage; `schedule=1f1b` keeps
    min(M, S - s) on stage s: its warm-up forwards), plus the largest op's
    operands and results. The
    cuts minimize the slowest stage; among cuts within `time-slack` (10 %)
    of that, the fewest bytes crossing the cuts, and among those the
    smallest slowest stage; every stage's peak within
    `device-memory-bytes` (0: no limit). `stages=0` takes the fewest stages
    that fit. A cut never separates two readers of one parameter. A layer
    that alone exceeds the budget is an error naming it.

    Backward and optimizer ops take the stage of the forward values and
    parameters they read; an op reading a gradient runs on that gradient's
    stage or an earlier one (gradients flow back across the cuts), as late
    as its other operands allow. Ops reading nothing but arguments and
    constants (the accumulation step) carry no stage: every stage that uses
    them gets a copy.

    The micro-batches are gradient accumulation's micro-steps: @train_step
    must be built with `accumulate` = `micro-batches` (one optimizer update
    per M micro-batches). Refused (an error naming it): clip-grad-norm and
    loss scaling (they need every stage's gradients), cnn.all_reduce
    (pipeline x data parallel is not built).

    Before (cnn-autodiff accumulate=2, SGD):
    ```mlir
    func.func @train_step(%x: tensor<2x4xf32> {cnn.input}, ...) -> (...) {
      %h = cnn.matmul %x, %w0 {transpose_rhs = true}
      %r = cnn.relu %h
      %y = cnn.matmul %r, %w1 {transpose_rhs = true}
      %loss = cnn.softmax_cross_entropy %y, %labels
      %dy = cnn.softmax_cross_entropy_grad %y, %labels, %one
      %dw1 = cnn.matmul %dy, %r {transpose_lhs = true}
      %dr = cnn.matmul %dy, %w1
      %dh = cnn.relu_grad %dr, %r
      %dw0 = cnn.matmul %dh, %x {transpose_lhs = true}
      ...
    }
    ```
    After (`stages=2`):
    ```mlir
    module attributes {cnn.pipeline = {cut_bytes = array<i64: 64>,
        cut_tensors = array<i64: 2>, cuts = array<i64: 1>, micro_batches = 2 : i64,
        stage_peak_bytes = array<i64: ...>, stages = 2 : i64, ...}} {
      %h = cnn.matmul %x, %w0 {cnn.stage = 0 : i64, transpose_rhs = true}
      %r = cnn.relu %h {cnn.stage = 0 : i64}
      %y = cnn.matmul %r, %w1 {cnn.stage = 1 : i64, transpose_rhs = true}
      ...
      %dr = cnn.matmul %dy, %w1 {cnn.stage = 1 : i64}
      %dh = cnn.relu_grad %dr, %r {cnn.stage = 1 : i64}
      %dw0 = cnn.matmul %dh, %x {cnn.stage = 0 : i64, transpose_lhs = true}
    ```
    (`%r` crosses forward, `%dh` backward.)
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "2",
           "number of stages (0: the fewest whose peaks fit "
           "device-memory-bytes)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "micro-batches per step (the step's accumulation count)">,
    Option<"deviceMemoryBytes", "device-memory-bytes", "int64_t", "0",
           "each stage's memory budget in bytes (0: no limit)">,
    Option<"printPlan", "print-plan", "bool", "false",
           "print the plan (cuts, per-stage memory and time, bubble) to "
           "stdout">,
    Option<"halfPrecision", "half-precision", "bool", "false",
           "time the step as its f16 form runs (cnn-precision after the "
           "split): Tensor Core FLOPs, half the bytes moved and sent">,
    Option<"overlapTransfers", "overlap-transfers", "bool", "false",
           "the transfers overlap the stage's compute (the CUDA target's "
           "cnn-pipeline-async-transfers): a stage takes the larger of its "
           "compute and its transfers, not their sum">,
    Option<"launchUs", "launch-us", "double", "5.0",
           "microseconds added to each forward op's roofline time (its "
           "launches' latency and tails; the stage's time triples it with "
           "the backward pass); not with `profile`. 5: ResNet-50 f16 at "
           "micro-batch 32 gets the cuts its measured step gives (24, 56, "
           "108 against 24, 58, 108 at S=4; 0 gave 24, 46, 88)">,
    Option<"linkGBps", "link-gbps", "double", "100.0",
           "the bandwidth between two stages' GPUs in GB/s (NCCL send/recv "
           "over NVLink; 0: transfers cost nothing)">,
    Option<"profile", "profile", "std::string", "\"\"",
           "a measured step (CNNRT_PROFILE_JSON of the unpartitioned step "
           "at the micro-batch size): each forward op takes the time of "
           "the launches named by its location (its forward and backward "
           "kernels), split over the ops sharing the location by their "
           "roofline estimates; launches of no forward op's location (the "
           "optimizer: 1/M of it per micro-batch) are spread by parameter "
           "bytes. Empty: the roofline">,
    Option<"timeSlack", "time-slack", "double", "0.10",
           "among cuts whose slowest stage is within this fraction of the "
           "best balance, take the fewest crossing bytes (0: the best "
           "balance only)">,
    Option<"schedule", "schedule", "std::string", "\"gpipe\"",
           "the schedule the stages run (cnn-pipeline-schedule's): gpipe "
           "keeps all M micro-batches' activations on every stage, 1f1b "
           "min(M, S - s) on stage s">,
    Option<"chunks", "chunks", "int64_t", "1",
           "interleaved stages: each of the S stages (GPUs) runs V chunks, "
           "the S x V virtual stages cut as S x V stages would be and "
           "placed in a loop (virtual stage v on stage v mod S), so that "
           "the GPipe bubble falls from (S-1)/(M+S-1) to "
           "(S-1)/(V x M+S-1); the plan's cuts, times and peaks are the "
           "virtual stages'. Needs an explicit `stages` >= 2 and gpipe">,
  ];
  let statistics = [
    Statistic<"numStages", "stages", "pipeline stages chosen">,
    Statistic<"numCrossings", "crossings", "tensors sent between stages">
  ];
}

def CNNPipelineSplit : Pass<"cnn-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Splits @train_step into per-stage forward and backward functions with cnn.send/cnn.recv";
  let description = [{
    Reads cnn-pipeline-partition's `cnn.stage` and replaces @train_step by
    2 x S functions `@stage<s>_forward` and `@stage<s>_backward`, each with
    `cnn.pipeline_stage = s`. A value made on stage a and read on stage b
    is sent once (`cnn.send {peer = b, tag = t}` after its definition) and
    received once (`cnn.recv {peer = a, tag = t}` where stage b first needs
    it): activations in the forward functions, their gradients in the
    backward functions. Transfers join adjacent stages only: a value read
    more than one stage away (a U-Net's long skip connection across several
    cuts) is relayed, every stage between receiving it from the stage
    before and sending it on where the value is made in @train_step's
    order (in the forward function when it or a stage beyond reads it in
    the forward pass, else in the backward one). Ops without a stage
    (constants, the accumulation step) are cloned into every function that
    reads them.

    A stage function takes the arguments of @train_step it reads (each
    marked `cnn.pipeline_arg = <index in @train_step>`); the backward
    function also takes what its forward function kept for it (the
    activations the backward pass reads, `cnn.pipeline_saved = <k>`), which
    the forward function returns after its share of @train_step's results.
    Each function lists the @train_step results it returns in
    `cnn.pipeline_results`. Per micro-batch the forward functions run in
    stage order and the backward functions in reverse stage order (the
    reference runs the GPipe schedule: all forwards of the M micro-batches,
    then all backwards, lib/Reference/Pipeline.cpp); the step's gradient
    accumulation sums the M micro-batches' gradients and applies one
    optimizer update on the last. BatchNorm normalizes each micro-batch
    with its own statistics, as PyTorch's pipeline APIs do.

    Before (after cnn-pipeline-partition, stages=2):
    ```mlir
    %r = cnn.relu %h {cnn.stage = 0 : i64}
    %y = cnn.matmul %r, %w1 {cnn.stage = 1 : i64, transpose_rhs = true}
    ...
    %dh = cnn.relu_grad %dr, %r {cnn.stage = 1 : i64}
    %dw0 = cnn.matmul %dh, %x {cnn.stage = 0 : i64, transpose_lhs = true}
    ```
    After:
    ```mlir
    func.func @stage0_forward(%x {cnn.pipeline_arg = 0 : i64}, %w0 {...})
        -> (tensor<2x8xf32>) attributes {cnn.pipeline_stage = 0 : i64, ...} {
      %h = cnn.matmul %x, %w0 {transpose_rhs = true}
      %r = cnn.relu %h
      cnn.send %r {peer = 1 : i64, tag = 0 : i64} : tensor<2x8xf32>
      return
    }
    func.func @stage1_forward(...) {
      %r = cnn.recv {peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
      %y = cnn.matmul %r, %w1 {transpose_rhs = true}
      ...
      return %loss, %r, %y   // the loss; %r, %y kept for @stage1_backward
    }
    func.func @stage1_backward(..., %r {cnn.pipeline_saved = 0 : i64}, ...) {
      ...
      %dh = cnn.relu_grad %dr, %r
      cnn.send %dh {peer = 0 : i64, tag = 1 : i64} : tensor<2x8xf32>
      ...
    }
    func.func @stage0_backward(%x ..., ...) {
      %dh = cnn.recv {peer = 1 : i64, tag = 1 : i64} : tensor<2x8xf32>
      %dw0 = cnn.matmul %dh, %x {transpose_lhs = true}
      ...
    }
    ```
  }];
  let options = [
    Option<"sendsFirst", "sends-first", "bool", "true",
           "in each stage function, the ops its cnn.send ops need come first "
           "(in their order), the rest after: a backward function hands its "
           "input gradients on before the weight gradients nothing "
           "downstream waits for, which shortens GPipe's drain by each "
           "stage's weight-gradient time">,
  ];
  let statistics = [
    Statistic<"numTransfers", "transfers", "cnn.send/cnn.recv pairs made">,
    Statistic<"numRelayed", "relayed",
              "receive-and-send pairs on stages between a value's maker and "
              "a reader more than one stage away">,
    Statistic<"numHoisted", "hoisted",
              "ops moved ahead of the ops no send needs (sends-first)">
  ];
}

def CNNPipelineSchedule : Pass<"cnn-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Unrolls each pipeline stage's micro-batches into one @stage<s>_step function in the schedule's order";
  let description = [{
    Reads cnn-pipeline-split's `@stage<s>_forward` / `@stage<s>_backward`
    and the plan's `micro_batches` M, and replaces them by one function
    `@stage<s>_step` per stage: the M micro-batches' forward and backward
    bodies inlined in the schedule's order (`gpipe`: every forward, then
    every backward; `1f1b`: min(S - s, M) warm-up forwards, then one
    backward and one forward alternating, then the remaining backwards),
    so each stage is one training-step-like function a GPU target can
    plan, capture and replay. The persistent values (parameters, optimizer
    state, gradient accumulators, BatchNorm running statistics) thread
    from one micro-batch's body to the next by name, in micro-batch order,
    as the unpartitioned step with `accumulate=M` run M times; the
    activations a backward body reads come from its own micro-batch's
    forward body. The cnn.send / cnn.recv of micro-batch m keep their tags:
    a pair is matched by its order on both peers (NCCL's rule, and the
    reference mailbox's FIFO), micro-batch order on both sides. Receives
    rise to follow their peer's send order (the split receives where a
    tensor is first needed, which can be after a tensor sent later), and
    every link is checked: a stage whose receives cannot follow its peer's
    sends is an error naming the two stages.

    Interleaved plans (`chunks` V > 1, cnn-pipeline-partition): stage s
    runs virtual stages s, s + S, ..., breadth-first (every micro-batch's
    forward through chunk 0, then chunk 1, ...; the backward passes from
    the last chunk to the first), its peers mapped from virtual stages to
    stages (`cnn.pipeline_chunks = V` on the function); a tensor between
    virtual stages that are not adjacent is an error, and only gpipe.

    Arguments of `@stage<s>_step`: first the image and labels of the M
    micro-batches (M x B rows; every stage takes them, read or not, so all
    stages read one batch stream), micro-batch m cut out by `cnn.micro_batch
    {index = m, count = M}`; then each other @train_step argument the stage
    reads (`cnn.pipeline_arg`), the step number being the pipeline step k
    (1, 2, ...): micro-batch m runs as accumulation's micro-step
    (k - 1) x M + m + 1, computed in the function. Results: the
    @train_step results the stage makes (`cnn.pipeline_results`), from
    the last micro-batch that makes them, and on the last stage the M
    losses (`cnn.loss`, `cnn.micro_batch = m`).
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", "\"gpipe\"",
           "gpipe (all forwards, then all backwards) or 1f1b (S - s warm-up "
           "forwards, then alternating)">,
  ];
}

def CNNPipelineStage : Pass<"cnn-pipeline-stage", "mlir::ModuleOp"> {
  let summary = "Keeps one pipeline stage's @stage<s>_step as the module's @train_step (the CUDA target's per-stage step)";
  let description = [{
    Reads cnn-pipeline-schedule's module and keeps stage `stage`'s
    `@stage<s>_step`, renamed `@train_step`; every other function goes
    (the other stages, and `@forward`: a pipelined step has no evaluation
    step). The function gets `cnn.num_classes` (the last stage's logits'
    channels: a stage without the loss still tells the runtime the class
    count) and `cnn.pipeline_stages = S`. On the last stage the M
    micro-batch losses (`cnn.loss`, `cnn.micro_batch = m`) become one
    `cnn.loss` result, their mean (summed in micro-batch order, then
    `cnn.scale` by 1/M), which the runtime prints as the step's loss. The
    CUDA target runs its step pipeline (cnn-gpu-pipeline) on the result,
    once per stage (docs/pipeline-parallel.md).
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "0", "the stage to keep (0 .. S - 1)">,
  ];
}

def CNNPipelineAsyncTransfers : Pass<"cnn-pipeline-async-transfers", "mlir::ModuleOp"> {
  let summary = "A pipeline stage's sends and receives overlap its compute (CUDA target, GPipe)";
  let description = [{
    On a stage's `@train_step` (cnn-pipeline-stage's, with
    `cnn.pipeline_stages`): every `cnn.send` and `cnn.recv` gets an `event`
    and a `cnn.transfer_wait` of it. The CUDA target issues the transfer on
    the stream of its link (this stage and the peer: a communicator and a
    stream per neighbour) when the compute stream reaches the op, and makes
    the compute stream wait at the `cnn.transfer_wait`:

    - a receive rises to just after the wait of the previous receive of its
      tag (the same tensor, one micro-batch earlier) or the previous send to
      its peer, whichever is later, or to the top of the step; its wait
      stands where the receive was, before every reader;
    - a send's wait goes just before the next send to the same peer, or at
      the end of the step: the memory plan keeps the sent tensor until then.

    A link's transfers keep their order, and every wait stands where the
    synchronous form waited or later, so the schedule stays free of
    deadlocks. The function gets `cnn.transfer_events` (how many events the
    runtime creates). Steps with 1F1B's grouped transfers (`cnn.transfers`)
    and steps of no pipeline are left as they are. Runs before
    cnn-memory-plan, after every pass that adds readers.

    Before (stage 1 of 2, two micro-batches):
    ```mlir
    %x0 = cnn.recv {peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %y0 = cnn.relu %x0 : tensor<2x8xf32>
    %x1 = cnn.recv {peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %y1 = cnn.relu %x1 : tensor<2x8xf32>
    cnn.send %g0 {peer = 0 : i64, tag = 1 : i64} : tensor<2x8xf32>
    cnn.send %g1 {peer = 0 : i64, tag = 1 : i64} : tensor<2x8xf32>
    ```
    After:
    ```mlir
    %x0 = cnn.recv {event = 0 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    cnn.transfer_wait %x0 {event = 0 : i64} : tensor<2x8xf32>
    %x1 = cnn.recv {event = 1 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %y0 = cnn.relu %x0 : tensor<2x8xf32>
    cnn.transfer_wait %x1 {event = 1 : i64} : tensor<2x8xf32>
    %y1 = cnn.relu %x1 : tensor<2x8xf32>
    cnn.send %g0 {event = 2 : i64, peer = 0 : i64, tag = 1 : i64} : tensor<2x8xf32>
    cnn.transfer_wait %g0 {event = 2 : i64} : tensor<2x8xf32>
    cnn.send %g1 {event = 3 : i64, peer = 0 : i64, tag = 1 : i64} : tensor<2x8xf32>
    cnn.transfer_wait %g1 {event = 3 : i64} : tensor<2x8xf32>
    ```
  }];
  let statistics = [
    Statistic<"numAsync", "async-transfers", "transfers made asynchronous">,
  ];
}

def CNNMemoryPlan : Pass<"cnn-memory-plan", "mlir::ModuleOp"> {
  let summary = "Plans every tensor of the train step into one arena";
  let description = [{
    Assigns every tensor of `@train_step` and `@forward` (the evaluation
    step) a byte offset in one device arena and records the plan in the IR,
    so the CUDA target only reads it (the plan is the only one: the target
    refuses a module without it, and the cnnc driver runs this pass on a
    step given as MLIR that lacks it):

      [ persistent tensors | cuDNN/cuBLASLt workspace | temporaries ]

    Persistent tensors (inputs, labels, lr, step, parameters, BN statistics,
    optimizer state, the loss, @forward's logits) are laid out in argument
    order; an optimizer update or BN running statistic is written in place
    into its argument's buffer when nothing reads the old value later
    (otherwise the emitter copies it at the end of the step). The workspace
    region (`workspace-mb`) replaces the runtime's separate allocation: the
    runtime only picks algorithms whose workspace fits. Temporaries are
    planned per function over its schedule (op order): a buffer lives from
    its defining op to the last use of any value sharing it; views (reshape,
    flatten) share their source's buffer; an elementwise op (relu, add, mul,
    scale, clip, cast, dropout, relu_grad, clip_grad, bias_add's input,
    fused_elementwise's broadcast-0 inputs) writes its result into an
    operand's buffer when that operand dies there and the byte sizes match.
    Buffers are packed by best-fit decreasing (MemoryPlanner.h: several
    orders tried, smallest peak kept); both functions share the temporary
    region. Offsets: `cnn.offset` (i64 on arguments, one i64 per result on
    ops), `cnn.in_place` (operand reused per result, -1 none); module:
    `cnn.arena_bytes`, `cnn.persistent_bytes`, `cnn.workspace_offset`,
    `cnn.workspace_bytes`, `cnn.temp_offset`, `cnn.{train,eval}_peak_bytes`,
    `cnn.{train,eval}_lower_bound_bytes` (max over time of live bytes),
    `cnn.plan_strategy`. Run it last: the emitter rejects a plan that does
    not cover every value or lets two live temporaries overlap.

    Before:
    ```mlir
    func.func @train_step(%x: tensor<4x8xf32> {cnn.input}, ...,
        %w: tensor<8x8xf32> {cnn.param = "w"},
        %mom: tensor<8x8xf32> {cnn.state = "w.momentum_buffer"}) -> (...) {
      %h = cnn.matmul %x, %w {transpose_rhs = true}
      %r = cnn.relu %h
      %s = cnn.scale %r {factor = 5.0e-01 : f32}
      ...
      %dh = cnn.relu_grad %dr, %r
      %dw = cnn.matmul %dh, %x {transpose_lhs = true}
      %w2, %m2 = cnn.sgd_update %w, %dw, %mom, %lr, %step {...}
      return %loss, %w2, %m2
    }
    ```
    After (`workspace-mb=1`):
    ```mlir
    module attributes {cnn.arena_bytes = 1051392 : i64,
        cnn.persistent_bytes = 1792 : i64, cnn.temp_offset = 1050368 : i64,
        cnn.train_lower_bound_bytes = 388 : i64, cnn.train_peak_bytes = 772 : i64,
        cnn.workspace_bytes = 1048576 : i64, cnn.workspace_offset = 1792 : i64, ...} {
      func.func @train_step(%x: tensor<4x8xf32> {cnn.input, cnn.offset = 0 : i64}, ...,
          %w: tensor<8x8xf32> {cnn.offset = 1024 : i64, cnn.param = "w"},
          %mom: tensor<8x8xf32> {cnn.offset = 1280 : i64, cnn.state = "w.momentum_buffer"}) {
        %h = cnn.matmul %x, %w {cnn.offset = array<i64: 1050368>, transpose_rhs = true}
        // %h dies here: the ReLU overwrites it.
        %r = cnn.relu %h {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: 1050368>}
        // %r is read again by relu_grad: a buffer of its own.
        %s = cnn.scale %r {cnn.offset = array<i64: 1050624>, factor = 5.0e-01 : f32}
        ...
        %dh = cnn.relu_grad %dr, %r {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: 1050880>}
        %dw = cnn.matmul %dh, %x {cnn.offset = array<i64: 1050368>, transpose_lhs = true}
        %w2, %m2 = cnn.sgd_update %w, %dw, %mom, %lr, %step {cnn.offset = array<i64: 1024, 1280>, ...}
        return %loss, %w2, %m2
      }
    }
    ```
  }];
  let options = [
    Option<"workspaceMB", "workspace-mb", "int64_t", "-1",
           "MiB of the arena reserved for the cuDNN/cuBLASLt workspace (the "
           "runtime picks algorithms that fit). -1: the largest tensor a "
           "convolution touches, clamped to [4, 64] MiB; 0: no region (the "
           "runtime allocates the workspace separately, as without the pass)">,
    Option<"inPlace", "in-place", "bool", "true",
           "let elementwise ops write their result into a dying operand">,
    Option<"reuse", "reuse", "bool", "true",
           "share memory between temporaries whose live ranges do not "
           "overlap; false gives every temporary its own range and writes "
           "nothing in place (-O0, --no-memory-plan)">,
    Option<"alignment", "alignment", "int64_t", "256",
           "byte alignment of every buffer (a power of two)">,
  ];
}

def CNNPrepareForEmission : Pass<"cnn-prepare-for-emission", "mlir::ModuleOp"> {
  let summary = "Decides how the CUDA target's generated kernels launch, as verified attributes the printer reads";
  let description = [{
    The last pass of the CUDA target's pipeline (CIRCT's PrepareForEmission
    before ExportVerilog): what the CUDA printer used to decide while
    printing is decided here, in IR, so that the printer only prints.

    - The module gets `cnn.target = #cnn.target<...>`: the GPU of the `arch`
      option (one table: sm_80 108 SMs, sm_86 84, sm_89 142, sm_90 and
      sm_90a 132; an architecture not in it is an error naming it), or,
      without the option, the module's own `cnn.target`, else sm_90.
    - Elementwise ops left outside the fused form get it (the printer knows
      `fused_elementwise` only).
    - Every op whose CUDA lowering launches a generated kernel gets
      `cnn.launch = #cnn.launch<...>`:
      - `grid_limit`: the most blocks of a grid-stride kernel, 32 per SM of
        the target (the printer's grid is min(ceil(n / 256), grid_limit));
      - `reduction` on reduce_sum / reduce_mean / reduce_max (other than
        cnn-select-lowering's "channel_sum" and "spatial_sum" ones) and
        softmax:
        "block_per_result" when each result reduces at least 32 times as
        many elements as there are results (a block of 256 threads per
        result, a fixed-order tree: ConvNeXt's LayerNorm weight gradients
        left 96 threads summing 200K values each at one thread per result)
        and there are at most 2^31 - 1 results, else "thread_per_result";
        softmax over a contiguous axis is a row per block, any other axis a
        thread per (outer, inner) pair;
      - `chunks` on the ops that launch multi-tensor kernels (the last
        member of a `cnn.update_group` / `cnn.cast_group` of two or more,
        all_finite per element type of two or more tensors, f16 before f32,
        clip_divisor): each kernel's chunk of units, at most 8192 (1024 in
        the eight-element "vec8" form) and smaller for a small group, so
        that about 8 blocks per SM still get one (a multiple of 256, at
        least 256);
      - `partial_blocks` on the ops that sum an NHWC tensor per channel
        through partial sums over row tiles (bias_grad, the BatchNorm
        statistics, sums and gradients in NHWC, fused_conv2d_stats, the
        "channel_sum" reductions): the most blocks of a partial-sum kernel,
        2048 on the H100's 132 SMs (measured) in proportion to the target's.
      Library calls alone (conv2d and its gradients, matmul, all_reduce)
      and views (reshape, flatten) get nothing.

    The printer refuses a module without `cnn.target` and an op that
    launches a kernel without `cnn.launch`; the dialect verifies both
    attributes (ranges, the reduction strategy exactly where it applies).

    ```mlir
    %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>, keep_dims = false}
        : (tensor<8x56x56x96xf32>) -> tensor<96xf32>
    // becomes (sm_90: 132 SMs)
    %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>,
        cnn.launch = #cnn.launch<grid_limit = 4224,
                                 reduction = "block_per_result">,
        keep_dims = false} : (tensor<8x56x56x96xf32>) -> tensor<96xf32>
    // and the module
    module attributes {cnn.target = #cnn.target<arch = "sm_90", sms = 132,
                                                max_threads = 1024,
                                                smem_per_block = 232448>}
    ```
  }];
  let options = [
    Option<"arch", "arch", "std::string", "\"\"",
           "nvcc architecture to prepare for (sm_80, sm_86, sm_89, sm_90, "
           "sm_90a); empty: the module's cnn.target, else sm_90">,
  ];
  let statistics = [
    Statistic<"numLaunch", "launch-ops", "ops given launch decisions">,
    Statistic<"numBlockPerResult", "block-per-result", "reductions with a block per result">,
    Statistic<"numThreadPerResult", "thread-per-result", "reductions with a thread per result">,
    Statistic<"numMultiTensor", "multi-tensor-kernels", "multi-tensor kernels given their chunk size">
  ];
}

#endif
