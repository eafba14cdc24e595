//===- CNNAmpOps.td - mixed precision: loss scaling ops ----*- tablegen -*-===//
//
// Ops of dynamic loss scaling (made by cnn-precision). Together with the
// optional `grad_scale, finite` operands of sgd_update/adam_update they
// implement torch.amp.GradScaler inside the train step: the loss gradient is
// seeded with the scale S, parameter gradients are checked for inf/NaN,
// divided by S in the optimizer update (which is skipped when any is not
// finite), and S is updated by GradScaler.update's rule.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_CNNAMPOPS_TD
#define CNNC_DIALECT_CNN_CNNAMPOPS_TD

def CNN_AllFiniteOp : CNN_PureOp<"all_finite"> {
  let summary = "1.0 when every element of every input is finite, else 0.0";
  let description = [{
    At least one input (f32 or f16 tensors of any shapes). The result is a
    0-D f32 flag: 1.0 if no element is +-inf or NaN, else 0.0.

    ```mlir
    %ok = cnn.all_finite %g0, %g1 : (tensor<8x3x3x3xf16>, tensor<8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<CNN_FloatTensor>:$inputs);
  let results = (outs CNN_Scalar:$result);
  let hasVerifier = 1;
}

def CNN_LossScaleUpdateOp : CNN_PureOp<"loss_scale_update"> {
  let summary = "torch.amp.GradScaler.update: the next loss scale and growth tracker";
  let description = [{
    `scale`, `growth_tracker` (the count of consecutive finite steps, held in
    an f32 scalar) and `finite` (the flag of cnn.all_finite) are 0-D f32.
    As torch's `_amp_update_scale_`:

      if finite == 0: scale *= backoff_factor; tracker = 0
      else: tracker += 1
            if tracker == growth_interval:
              if isfinite(scale * growth_factor): scale *= growth_factor
              tracker = 0

    `growth_interval` >= 1, `growth_factor` > 1, 0 < `backoff_factor` < 1.
    Results: (new_scale, new_growth_tracker).
  }];
  let arguments = (ins CNN_Scalar:$scale, CNN_Scalar:$growth_tracker,
                   CNN_Scalar:$finite,
                   DefaultValuedAttr<I64Attr, "2000">:$growth_interval,
                   DefaultValuedAttr<F32Attr, "2.0f">:$growth_factor,
                   DefaultValuedAttr<F32Attr, "0.5f">:$backoff_factor);
  let results = (outs CNN_Scalar:$new_scale, CNN_Scalar:$new_growth_tracker);
  let hasVerifier = 1;
}

def CNN_UnscaleOp : CNN_PureOp<"unscale"> {
  let summary = "x / scale, converted to the result's element type";
  let description = [{
    Divides every element by the 0-D f32 `scale` (computed in f32) and
    converts to the result element type (same shape as `input`). Used for
    the gradients a train step returns (optimizer none) under loss scaling:
    `cnn.unscale %g16, %S : (tensor<4xf16>, tensor<f32>) -> tensor<4xf32>`.
  }];
  let arguments = (ins CNN_FloatTensor:$input, CNN_Scalar:$scale);
  let results = (outs CNN_FloatTensor:$result);
  let hasVerifier = 1;
}

#endif
