//===- CNNFusedOps.td - ops made by cnn-fuse ---------------*- tablegen -*-===//
//
// Fused ops are produced by the cnn-fuse pass only. Each keeps the exact
// semantics of the op sequence it replaces; the reference interpreter runs
// them, so every fusion is checked by running the step before and after.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_CNNFUSEDOPS_TD
#define CNNC_DIALECT_CNN_CNNFUSEDOPS_TD

def CNN_FusedConv2DOp : CNN_LayoutOp<"fused_conv2d", [AttrSizedOperandSegments]> {
  let summary = "conv2d with an epilogue: act(conv(x, w) + bias + residual)";
  let description = [{
    `bias` (1-D, one per output channel) and `residual` (the result's type)
    are optional; `activation` is "none", "relu" or "clip" (`clip_min`,
    `clip_max`, ReLU6 is clip 0..6). `layout` is the activation layout (NCHW
    with FCHW filters, or NHWC with KRSC filters). The CUDA target runs the
    convolution through cuDNN into the result and applies the epilogue in one
    generated kernel.
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_FloatTensor:$filter,
                   Optional<CNN_FloatTensor>:$bias,
                   Optional<CNN_FloatTensor>:$residual,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups,
                   CNN_Layout:$layout,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$activation,
                   DefaultValuedAttr<F32Attr, "0.0f">:$clip_min,
                   DefaultValuedAttr<F32Attr, "6.0f">:$clip_max);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_BatchNormStatsOp : CNN_LayoutOp<"batch_norm_stats"> {
  let summary = "The statistics half of batch_norm_train";
  let description = [{
    Batch mean and inverse standard deviation per channel (f32), the updated
    running statistics, and the per-channel affine map of the normalization,
    `alpha = invstd * scale` and `beta = bias - mean * alpha` (computed from
    the f64 statistics and rounded once), exactly as batch_norm_train
    computes them. The normalization itself, `y = x * alpha + beta`, becomes
    elementwise (and fuses with what follows, e.g. a residual add and a
    ReLU) and reproduces batch_norm_train's result bit for bit.

    Constraints: `input` is 2-D or 4-D; every other operand and every result
    is 1-D with the channel count of `input` (per `layout`).
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_FloatTensor:$scale,
                   CNN_FloatTensor:$bias, CNN_FloatTensor:$running_mean,
                   CNN_FloatTensor:$running_var, F32Attr:$epsilon,
                   F32Attr:$momentum,
                   CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$saved_mean, CNN_FloatTensor:$saved_invstd,
                 CNN_FloatTensor:$new_running_mean,
                 CNN_FloatTensor:$new_running_var, CNN_FloatTensor:$alpha,
                 CNN_FloatTensor:$beta);
  let hasVerifier = 1;
}

def CNN_FusedConv2DStatsOp : CNN_LayoutOp<"fused_conv2d_stats",
                                          [AttrSizedOperandSegments]> {
  let summary = "conv2d with the per-channel sum and sum of squares of its result";
  let description = [{
    `result = conv2d(x, filter)` (attributes as conv2d) where x is `input`,
    or, with the optional prologue operands `scale` and `shift` (both or
    neither), the previous BatchNorm's apply and ReLU,
    `x = relu(round(input * scale + shift))` per input channel, rounded to
    the element type of `input` as the unfused normalization stored it: the
    normalized tensor is never stored (cuDNN's scale-bias-ReLU prologue;
    the CUDA target's cuDNN graph takes `scale` and `shift` rounded to the
    element type, as cuDNN's fast engines do: within f16 training's
    tolerance, not bit for bit).
    Per output
    channel k, f32, `sum[k] = Σ result[.., k]` and `sum_sq[k] = Σ
    result[.., k]²` over the N×P×Q elements of the channel: the statistics a
    following BatchNormalization needs, computed while the convolution's
    output is still in registers (cuDNN's GenStats epilogue, the MLPerf
    ResNet recipe) instead of by a kernel that reads the result again. The
    sums are of the result as computed; the order of summation is
    unspecified (the reference interpreter sums the stored values in f64).

    Constraints: the result is conv2d's result type; `sum` and `sum_sq` are
    1-D f32 of the result's channel count (per `layout`); `scale` and
    `shift` come together and are 1-D f32 of the input's channel count.

    ```mlir
    %y, %s, %ss = cnn.fused_conv2d_stats %x, %w {dilations = array<i64: 1, 1>,
        groups = 1 : i64, layout = #cnn.layout<nhwc>,
        padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
        : (tensor<8x16x16x64xf16>, tensor<64x3x3x64xf16>)
        -> (tensor<8x16x16x64xf16>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_FloatTensor:$filter,
                   Optional<CNN_FloatTensor>:$scale,
                   Optional<CNN_FloatTensor>:$shift,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups,
                   CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result, CNN_FloatTensor:$sum,
                 CNN_FloatTensor:$sum_sq);
  let hasVerifier = 1;
}

def CNN_FusedConv2DBwdDataOp : CNN_LayoutOp<"fused_conv2d_bwd_data"> {
  let summary = "conv2d_bwd_data with the residual-gradient epilogue: relu_grad(dx + addend, relu_output)";
  let description = [{
    `result = relu_grad(conv2d_bwd_data(grad_output, filter) + addend,
    relu_output)`: where `relu_output > 0` the sum of the convolution's
    input gradient and `addend`, else 0. In a residual network this is the
    gradient at a block's output ReLU, the sum of the next block's
    convolution input gradient and its shortcut's gradient (`addend`); the
    unfused step writes the convolution's gradient, then reads it again with
    `addend` and `relu_output` in an elementwise kernel. Fused (cuDNN's
    dgrad + add + ReLU-backward graph, the MLPerf ResNet recipe) the sum and
    mask are applied while the gradient is still in registers.

    Rounding: the reference interpreter rounds the convolution's gradient
    and the sum to the element type, as the unfused ops store them (it is
    bit-identical to them); the CUDA target's cuDNN graph keeps both in f32
    and rounds once (within f16 training's tolerance, not bit for bit). The
    runtime times the graph against the split form (the convolution as
    cnn-select-lowering chose it, then the elementwise epilogue) and runs
    the faster.

    Constraints: the attributes and `grad_output`, `filter` are those of
    conv2d_bwd_data, and conv2d(result, filter) has the type of
    `grad_output`; `addend` and `relu_output` have the result's type.

    ```mlir
    %dx = cnn.fused_conv2d_bwd_data %dy, %w, %dres, %y {dilations = array<i64: 1, 1>,
        groups = 1 : i64, layout = #cnn.layout<NHWC>,
        padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
        : (tensor<8x14x14x64xf16>, tensor<64x1x1x256xf16>,
           tensor<8x14x14x256xf16>, tensor<8x14x14x256xf16>)
        -> tensor<8x14x14x256xf16>
    ```
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$filter,
                   CNN_FloatTensor:$addend, CNN_FloatTensor:$relu_output,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups,
                   CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_FusedConv2DBwdFilterOp : CNN_LayoutOp<"fused_conv2d_bwd_filter"> {
  let summary = "conv2d_bwd_filter of the previous BatchNorm's apply + ReLU";
  let description = [{
    `result = conv2d_bwd_filter(relu(round(input * scale + shift)),
    grad_output)`: the filter gradient of a convolution whose input is the
    normalization `relu(x * scale + shift)` per input channel (the
    prologue of its `fused_conv2d_stats`), rounded to the element type of
    `input` as the unfused normalization stored it. The normalized tensor is
    neither stored from the forward pass nor recomputed into memory: cuDNN's
    scale-bias-ReLU prologue applies it while loading `input` (the graph
    takes `scale` and `shift` rounded to the element type, as cuDNN's fast
    engines do: within f16 training's tolerance, not bit for bit; the
    reference interpreter uses them in f32). The runtime times the graph
    against the split form (the normalization into a scratch buffer, then
    the convolution as cnn-select-lowering chose it).

    Constraints: the attributes and `input`, `grad_output` and the result
    are those of conv2d_bwd_filter (conv2d(input, result) has the type of
    `grad_output`); `scale` and `shift` are 1-D f32 of the input's channel
    count.
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_FloatTensor:$grad_output,
                   CNN_FloatTensor:$scale, CNN_FloatTensor:$shift,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups,
                   CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_FusedMaxPool2DOp : CNN_LayoutOp<"fused_max_pool2d",
                                        [AttrSizedOperandSegments, CNN_KernelCall]> {
  let summary = "max_pool2d that keeps each window's argmax, with an optional BatchNorm apply + ReLU prologue";
  let description = [{
    `result = max_pool2d(x)` (attributes as max_pool2d) where x is `input`,
    or, with the optional prologue operands `scale` and `shift` (both or
    neither), `x = relu(round(input * scale + shift))` per channel, rounded
    to the element type of `input` as the unfused normalization stored it
    (ResNet's stem: BatchNorm, ReLU, max pooling; the normalized tensor is
    never stored). `window_index` holds, per pooled element, the position
    `kh * kernel[1] + kw` inside its window of the window's first maximum
    (rows first, NaN wins): what max_pool2d_index_grad routes the gradient
    by, so the backward pass neither keeps nor re-reads the pooled input.

    Constraints (cited by the verifier): the result is max_pool2d's result
    type for `input`; `window_index` has the result's shape and element type
    ui8, so the kernel covers at most 255 positions; `scale` and `shift`
    come together and are 1-D f32 of the input's channel count.

    ```mlir
    %y, %i = cnn.fused_max_pool2d %c, %alpha, %beta {ceil_mode = false,
        kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>,
        padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
        : (tensor<8x32x32x64xf16>, tensor<64xf32>, tensor<64xf32>)
        -> (tensor<8x16x16x64xf16>, tensor<8x16x16x64xui8>)
    ```
  }];
  let arguments = !con((ins CNN_FloatTensor:$input,
                            Optional<CNN_FloatTensor>:$scale,
                            Optional<CNN_FloatTensor>:$shift),
                       PoolAttrs, LayoutArg);
  let results = (outs CNN_FloatTensor:$result, CNN_WindowIndexTensor:$window_index);
  let hasVerifier = 1;
}

def CNN_MaxPool2DIndexGradOp : CNN_LayoutOp<"max_pool2d_index_grad", [CNN_KernelCall]> {
  let summary = "Gradient of max pooling from the window index fused_max_pool2d kept";
  let description = [{
    Each element of the result (the pooled input's type) is the sum of
    `grad_output` over the windows whose recorded first maximum it is
    (`window_index` from fused_max_pool2d with the same attributes): the
    value max_pool2d_grad computes, without the pooled input.

    Constraints (cited by the verifier): max_pool2d of the result type has
    the type of `grad_output`; `window_index` has the shape of
    `grad_output` and element type ui8.
  }];
  let arguments = !con((ins CNN_FloatTensor:$grad_output,
                            CNN_WindowIndexTensor:$window_index),
                       PoolAttrs, LayoutArg);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

def CNN_BatchNormFinalizeOp : CNN_PureOp<"batch_norm_finalize", [CNN_KernelCall]> {
  let summary = "batch_norm_stats from per-channel sums";
  let description = [{
    The results of batch_norm_stats for a tensor of `count` elements per
    channel whose per-channel sum and sum of squares are `sum` and `sum_sq`
    (from fused_conv2d_stats): `mean = sum / count`, `var = max(sum_sq /
    count - mean², 0)` (biased; the running variance is updated with the
    unbiased `var * count / (count - 1)`), computed in f64; then the saved
    statistics, running statistics and `alpha`, `beta` exactly as
    batch_norm_stats computes them from its mean and variance.

    Constraints: `count` ≥ 1; every operand and result is 1-D with the
    channel count of `sum`; `sum`, `sum_sq` and the saved statistics,
    `alpha` and `beta` are f32.
  }];
  let arguments = (ins CNN_FloatTensor:$sum, CNN_FloatTensor:$sum_sq,
                   CNN_FloatTensor:$scale, CNN_FloatTensor:$bias,
                   CNN_FloatTensor:$running_mean,
                   CNN_FloatTensor:$running_var, I64Attr:$count,
                   F32Attr:$epsilon, F32Attr:$momentum);
  let results = (outs CNN_FloatTensor:$saved_mean, CNN_FloatTensor:$saved_invstd,
                 CNN_FloatTensor:$new_running_mean,
                 CNN_FloatTensor:$new_running_var, CNN_FloatTensor:$alpha,
                 CNN_FloatTensor:$beta);
  let hasVerifier = 1;
}

def CNN_BatchNormSumsOp : CNN_LayoutOp<"batch_norm_sums"> {
  let summary = "Per-channel sum and sum of squares: one rank's share of SyncBatchNorm's statistics";
  let description = [{
    Per channel k of `input` (per `layout`), f32: `sum[k] = Σ input[.., k]`
    and `sum_sq[k] = Σ input[.., k]²` over every other dimension, accumulated
    in f64 and rounded once (the order of summation is unspecified). Made by
    cnn-data-parallel's sync-bn rewrite: the sums of the ranks add up (one
    cnn.all_reduce of both vectors) to the global batch's sums, which
    batch_norm_finalize turns into the statistics. cnn-conv-stats computes
    them in the epilogue of the convolution that produces `input`
    (fused_conv2d_stats) where cuDNN's engines apply.

    Constraints: `input` is 2-D, 3-D or 4-D; `sum` and `sum_sq` are 1-D f32
    of the channel count.

    ```mlir
    %s, %ss = cnn.batch_norm_sums %x {layout = #cnn.layout<NHWC>}
        : (tensor<8x16x16x64xf16>) -> (tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$sum, CNN_FloatTensor:$sum_sq);
  let hasVerifier = 1;
}

def CNN_BatchNormGradSumsOp : CNN_LayoutOp<"batch_norm_grad_sums"> {
  let summary = "batch_norm_grad's per-channel sums, without the input gradient";
  let description = [{
    Per channel k (per `layout`), f32: `sum_dy[k] = Σ dy[.., k]` and
    `sum_dy_xhat[k] = Σ dy[.., k] · (x[.., k] - saved_mean[k]) ·
    saved_invstd[k]` where dy is `grad_output` and x is `input`: the
    `grad_bias` and `grad_scale` of batch_norm_grad, accumulated in f64.
    cnn-data-parallel's sync-bn rewrite adds them up over the ranks (one
    cnn.all_reduce) and computes the input gradient of the global batch
    elementwise from the sums.

    Constraints: `grad_output` has the type of `input` (2-D, 3-D or 4-D);
    `saved_mean`, `saved_invstd` and both results are 1-D f32 of the
    channel count.
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$input,
                   CNN_FloatTensor:$saved_mean, CNN_FloatTensor:$saved_invstd,
                   CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$sum_dy, CNN_FloatTensor:$sum_dy_xhat);
  let hasVerifier = 1;
}

def CNN_FusedBatchNormAffineReluGradSumsOp
    : CNN_LayoutOp<"fused_batch_norm_affine_relu_grad_sums"> {
  let summary = "batch_norm_grad_sums of relu_grad(grad_output, y), the mask recomputed from x";
  let description = [{
    batch_norm_grad_sums of g = relu_grad(grad_output, y) where the forward
    computed y = relu(x * alpha + beta) in one kernel (`alpha`, `beta`: the
    batch_norm_finalize results of the same normalization): `sum_dy[k] = Σ
    g[.., k]`, `sum_dy_xhat[k] = Σ g[.., k] · (x[.., k] - saved_mean[k]) ·
    saved_invstd[k]`, accumulated in f64. The mask y > 0 is recomputed as
    round(x * alpha + beta) > 0, rounded to the element type of `input` as y
    was (fused_batch_norm_affine_relu_grad's rule), so g is never stored and
    y is not read. cnn-fuse makes this op from the sync-bn rewrite's
    batch_norm_grad_sums (the data-parallel step's counterpart of
    fused_batch_norm_affine_relu_grad).

    Constraints: `grad_output` has the type of `input` (2-D, 3-D or 4-D);
    `saved_mean`, `saved_invstd`, `alpha`, `beta` and both results are 1-D
    f32 of the channel count.
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$input,
                   CNN_FloatTensor:$saved_mean, CNN_FloatTensor:$saved_invstd,
                   CNN_FloatTensor:$alpha, CNN_FloatTensor:$beta,
                   CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$sum_dy, CNN_FloatTensor:$sum_dy_xhat);
  let hasVerifier = 1;
}

def CNN_FusedBatchNormReluGradOp : CNN_LayoutOp<"fused_batch_norm_relu_grad"> {
  let summary = "batch_norm_grad of relu_grad(grad_output, relu_output)";
  let description = [{
    The ReLU mask is applied while reading `grad_output`, so the masked
    gradient is never stored. Results as batch_norm_grad.
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$relu_output,
                   CNN_FloatTensor:$input, CNN_FloatTensor:$scale,
                   CNN_FloatTensor:$saved_mean, CNN_FloatTensor:$saved_invstd,
                   CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$grad_input, CNN_FloatTensor:$grad_scale,
                 CNN_FloatTensor:$grad_bias);
  let hasVerifier = 1;
}

def CNN_FusedBatchNormAffineReluGradOp
    : CNN_LayoutOp<"fused_batch_norm_affine_relu_grad"> {
  let summary = "fused_batch_norm_relu_grad with the ReLU mask recomputed from x";
  let description = [{
    batch_norm_grad of relu_grad(grad_output, y) where the forward computed
    y = relu(x * alpha + beta) in one kernel (`alpha`, `beta`: the
    batch_norm_stats results of the same normalization). The mask y > 0 is
    recomputed as round(x * alpha + beta) > 0, rounded to the element type of
    `grad_output` as y was, so it is the stored output's mask exactly, and
    `y` is not read: two of the seven full-size tensor passes of
    fused_batch_norm_relu_grad go away. cnn-fuse makes this op only where it
    can see that y is that normalization.

    Constraints: `grad_output` has the type of `input`; `scale`,
    `saved_mean`, `saved_invstd`, `alpha`, `beta` are 1-D with the channel
    count of `input` (per `layout`). Results as batch_norm_grad.
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$input,
                   CNN_FloatTensor:$scale, CNN_FloatTensor:$saved_mean,
                   CNN_FloatTensor:$saved_invstd, CNN_FloatTensor:$alpha,
                   CNN_FloatTensor:$beta, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$grad_input, CNN_FloatTensor:$grad_scale,
                 CNN_FloatTensor:$grad_bias);
  let hasVerifier = 1;
}

def CNN_FusedDualBatchNormGradOp
    : CNN_LayoutOp<"fused_dual_batch_norm_grad"> {
  let summary = "Two batch_norm_grad of one grad_output in one pair of passes";
  let description = [{
    `batch_norm_grad(grad_output, input_a, scale_a, saved_mean_a,
    saved_invstd_a)` and the same for `_b`, the results of the two ops bit
    for bit: a residual block whose shortcut has its own BatchNorm (ResNet's
    downsampling blocks) sends one gradient into two normalizations. Both
    reductions read `grad_output` once, and one apply pass writes both
    input gradients, so each pass reads it once instead of twice (ResNet-50
    layer1.0 at batch 128: 2 x 196 MiB less traffic). cnn-fuse makes this op.

    Constraints (cited by the verifier): `input_a` and `input_b` have the
    type of `grad_output`; `scale_*`, `saved_mean_*`, `saved_invstd_*` are
    1-D with its channel count (per `layout`); `grad_input_*` have its type;
    `grad_scale_*` and `grad_bias_*` are 1-D of that count. (`grad_bias_a`
    and `grad_bias_b` are both the per-channel sum of `grad_output`.)

    ```mlir
    %da, %dsa, %dba, %db, %dsb, %dbb = cnn.fused_dual_batch_norm_grad %dy,
        %a, %sa, %ma, %ia, %b, %sb, %mb, %ib {layout = #cnn.layout<NHWC>}
        : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>,
           tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>,
           tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
        -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>,
            tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins CNN_FloatTensor:$grad_output, CNN_FloatTensor:$input_a,
                   CNN_FloatTensor:$scale_a, CNN_FloatTensor:$saved_mean_a,
                   CNN_FloatTensor:$saved_invstd_a, CNN_FloatTensor:$input_b,
                   CNN_FloatTensor:$scale_b, CNN_FloatTensor:$saved_mean_b,
                   CNN_FloatTensor:$saved_invstd_b, CNN_Layout:$layout);
  let results = (outs CNN_FloatTensor:$grad_input_a,
                 CNN_FloatTensor:$grad_scale_a, CNN_FloatTensor:$grad_bias_a,
                 CNN_FloatTensor:$grad_input_b, CNN_FloatTensor:$grad_scale_b,
                 CNN_FloatTensor:$grad_bias_b);
  let hasVerifier = 1;
}

def CNN_FusedMaxPool2DBatchNormReluGradOp
    : CNN_LayoutOp<"fused_max_pool2d_batch_norm_relu_grad"> {
  let summary = "fused_batch_norm_affine_relu_grad of max_pool2d_index_grad's result";
  let description = [{
    `fused_batch_norm_affine_relu_grad(g, input, scale, saved_mean,
    saved_invstd, alpha, beta)` where `g = max_pool2d_index_grad(grad_output,
    window_index)` (pooling attributes as that op), rounded to the element
    type of `input` as the unfused gradient stored it: the results of the two
    ops bit for bit. The pooling gradient is gathered where the BatchNorm
    gradient reads it (in both of its passes), so the full-size gradient of
    the pooled input is never written nor read back (ResNet's stem:
    128x112x112x64 f16, 196 MiB at batch 128, written once and read twice
    by the unfused pair). cnn-max-pool-index makes this op.

    Constraints (cited by the verifier): max_pool2d of `input`'s type (with
    the attributes) has the type of `grad_output`; `window_index` has the
    shape of `grad_output` and element type ui8 (at most 255 positions per
    window); `scale`, `saved_mean`, `saved_invstd`, `alpha`, `beta` are 1-D
    with the channel count of `input` (per `layout`); `grad_input` has the
    type of `input`; `grad_scale` and `grad_bias` are 1-D of that count.

    ```mlir
    %dx, %ds, %db = cnn.fused_max_pool2d_batch_norm_relu_grad %dy, %i, %c,
        %scale, %mean, %invstd, %alpha, %beta {ceil_mode = false,
        kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>,
        padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
        : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>, tensor<2x8x8x16xf16>,
           tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>,
           tensor<16xf32>)
        -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = !con((ins CNN_FloatTensor:$grad_output,
                            CNN_WindowIndexTensor:$window_index,
                            CNN_FloatTensor:$input, CNN_FloatTensor:$scale,
                            CNN_FloatTensor:$saved_mean,
                            CNN_FloatTensor:$saved_invstd,
                            CNN_FloatTensor:$alpha, CNN_FloatTensor:$beta),
                       PoolAttrs, LayoutArg);
  let results = (outs CNN_FloatTensor:$grad_input, CNN_FloatTensor:$grad_scale,
                 CNN_FloatTensor:$grad_bias);
  let hasVerifier = 1;
}

def CNN_FusedElementwiseOp : CNN_Op<"fused_elementwise",
    [Pure, IsolatedFromAbove, CNN_LayoutSensitiveOpInterface,
     SingleBlockImplicitTerminator<"::cnnc::cnn::YieldOp">]> {
  let summary = "A chain of elementwise ops as one op with a scalar region";
  let description = [{
    The region computes, for every element index i of the results, the
    result scalars from the input scalars (f32 block arguments, one per
    input, in order) with `arith` ops, and yields one f32 per result; results
    of f16 type are rounded when stored. `broadcast` says how input k is
    indexed: 0 = like the results (same number of elements), 1 = per channel
    (a 1-D tensor of the channel count; channel of i per `layout`), 2 = one
    scalar (a tensor of one element), 3 = numpy broadcast (the results' rank,
    each dimension equal or 1: a size-1 dimension is repeated). All results
    have the same shape. The body uses the `arith` and `math` ops of
    ScalarBuilder.h. The
    CUDA target emits one kernel per op.

    ```mlir
    %y = cnn.fused_elementwise %x, %b {broadcast = array<i64: 0, 1>}
        : (tensor<8x16x4x4xf32>, tensor<16xf32>) -> tensor<8x16x4x4xf32> {
    ^bb0(%a: f32, %c: f32):
      %s = arith.addf %a, %c : f32
      %z = arith.constant 0.0 : f32
      %r = arith.maximumf %s, %z : f32
      cnn.yield %r : f32
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                   DenseI64ArrayAttr:$broadcast,
                   CNN_Layout:$layout);
  let results = (outs Variadic<CNN_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether this is a BatchNorm apply + ReLU as cnn-fuse leaves it:
    /// inputs (x, alpha, beta) with broadcast (0, 1, 1), alpha and beta f32,
    /// and the body relu(x * alpha + beta), optionally rounded to the
    /// result's element type (truncf + extf) before the yield. The passes
    /// that take it as a prologue (cnn-conv-stats, cnn-max-pool-index) ask
    /// this, so the form is recognized in one place.
    bool isScaleShiftRelu();
  }];
}

def CNN_YieldOp : CNN_Op<"yield", [Pure, Terminator,
                                   HasParent<"FusedElementwiseOp">]> {
  let summary = "Yields the result scalars of a fused_elementwise body";
  let arguments = (ins Variadic<F32>:$values);
  let builders = [OpBuilder<(ins), [{ /* no values */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif
