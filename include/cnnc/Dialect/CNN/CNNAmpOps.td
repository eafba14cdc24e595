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

def CNN_LossScaleUpdateOp : CNN_PureOp<"loss_scale_update", [CNN_KernelCall]> {
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

//===----------------------------------------------------------------------===//
// Gradient clipping and accumulation (made by cnn-autodiff)
//===----------------------------------------------------------------------===//

def CNN_ClipDivisorOp : CNN_PureOp<"clip_divisor"> {
  let summary = "torch.nn.utils.clip_grad_norm_ as the divisor of the gradients";
  let description = [{
    `scale` is the 0-D f32 factor the gradients carry (1.0, or the loss
    scale S under cnn-precision, which sets it); `grads` (f32 or f16, any
    shapes, at least one) are every trained parameter's gradient times it.
    As clip_grad_norm_(max_norm) after GradScaler.unscale_:

      norm = sqrt(sum of g^2 over all grads) / scale
      coef = min(1, max_norm / (norm + 1e-6))
      divisor = scale / coef

    The optimizer updates divide their gradient by `divisor` (their
    `grad_scale` operand). A non-finite norm gives a non-finite or zero
    coefficient; under loss scaling such a step is skipped anyway (the
    `finite` operand of the updates), as GradScaler skips clipping with it.
    `max_norm` > 0.
  }];
  let arguments = (ins CNN_Scalar:$scale, Variadic<CNN_FloatTensor>:$grads,
                   F32Attr:$max_norm);
  let results = (outs CNN_Scalar:$divisor);
  let hasVerifier = 1;
}

def CNN_AccumulateGradOp : CNN_PureOp<"accumulate_grad"> {
  let summary = "gradient accumulation over `every` micro-steps";
  let description = [{
    `acc` (a state tensor, f32) holds the sum of the earlier micro-steps'
    gradients; `grad` (the parameter's shape, f32, or f16 under loss
    scaling: widened on load, and then scaled by the loss scale, which the
    micro-steps of one optimizer step share) is this micro-step's, of the
    undivided loss; `step` is the 1-based micro-step number. As torch's
    loop of `every` backward passes of loss / every:

      sum = acc + grad / every
      new_acc = (step mod every == 0) ? 0 : sum

    The update reads `sum` and applies only on the last micro-step
    (cnn.accumulation_step's flag). `every` >= 2.
  }];
  let arguments = (ins CNN_FloatTensor:$acc, CNN_FloatTensor:$grad,
                   CNN_Scalar:$step, I64Attr:$every);
  let results = (outs CNN_FloatTensor:$sum, CNN_FloatTensor:$new_acc);
  let hasVerifier = 1;
}

def CNN_AccumulationStepOp : CNN_PureOp<"accumulation_step"> {
  let summary = "whether this micro-step applies the update, and its number";
  let description = [{
    From the 1-based micro-step number `step`: `apply` = 1.0 on every
    `every`-th micro-step (else 0.0: the updates are skipped, their
    `finite` operand), and `optimizer_step` = ceil(step / every), the
    1-based number of the optimizer step the micro-step belongs to (SGD's
    first-step rule, Adam's bias correction). `every` >= 2.
  }];
  let arguments = (ins CNN_Scalar:$step, I64Attr:$every);
  let results = (outs CNN_Scalar:$apply, CNN_Scalar:$optimizer_step);
  let hasVerifier = 1;
}

#endif
