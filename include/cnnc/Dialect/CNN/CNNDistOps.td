//===- CNNDistOps.td - data-parallel training: collectives -*- tablegen -*-===//
//
// The collective of data-parallel training (made by cnn-data-parallel): one
// all-reduce of a bucket of tensors across the ranks of the job. The
// reference interpreter runs it through its host communicator
// (cnnc::reference::Communicator); the CUDA target prints one ncclAllReduce
// per op on the communication stream.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_CNNDISTOPS_TD
#define CNNC_DIALECT_CNN_CNNDISTOPS_TD

// Not Pure: it communicates, so CSE must not merge two of them and DCE must
// not drop one (every rank has to issue the same collectives in the same
// order, or the job deadlocks).
def CNN_AllReduceOp : CNN_Op<"all_reduce"> {
  let summary = "all-reduce one bucket of tensors across the data-parallel ranks";
  let description = [{
    Every rank passes its own values of the operands; every result is the
    elementwise reduction of that operand over all ranks:
    `avg` (sum / world size: gradients, the reported loss), `sum`, `max` or
    `min` (the loss-scale "all finite" flag: one rank's inf/NaN makes the flag
    0 everywhere, so every rank skips the same step).

    The operands are one *bucket*: tensors of one element type (f32 or f16;
    an f16 bucket is reduced in f16), reduced by one collective call.
    `bucket` numbers the collectives of a function in the order they are
    issued (0, 1, ...); cnn-data-parallel fills buckets in the order the
    gradients become final in the backward schedule, so that the first
    bucket's communication overlaps the rest of the backward pass. `bytes`
    is the bucket's payload (the sum of the operands' sizes), for the plan
    and the runtime's log. With world size 1 the op is the identity.

    ```mlir
    %g0r, %g1r = cnn.all_reduce %g0, %g1 {bucket = 0 : i64, bytes = 1792 : i64,
                     reduction = "avg"}
        : (tensor<16x3x3x3xf32>, tensor<16xf32>) -> (tensor<16x3x3x3xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Variadic<CNN_FloatTensor>:$inputs,
                   DefaultValuedStrAttr<StrAttr, "avg">:$reduction,
                   DefaultValuedAttr<I64Attr, "0">:$bucket,
                   OptionalAttr<I64Attr>:$bytes);
  let results = (outs Variadic<CNN_FloatTensor>:$results);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif
