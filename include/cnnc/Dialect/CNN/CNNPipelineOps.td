//===- CNNPipelineOps.td - pipeline stages: point-to-point -*- tablegen -*-===//
//
// Model parallelism by pipeline stages (docs/pipeline-parallel.md): the
// training step split by cnn-pipeline-split into one forward and one
// backward function per stage; activations cross a cut forward and their
// gradients backward through a matched cnn.send / cnn.recv pair. The
// reference interpreter moves the tensor through an in-memory mailbox
// (lib/Reference/Pipeline.cpp); a GPU runtime would use NCCL send/recv.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_CNNPIPELINEOPS_TD
#define CNNC_DIALECT_CNN_CNNPIPELINEOPS_TD

// Neither op is Pure: each is one half of a transfer, so CSE must not merge
// two and DCE must not drop a send whose result nobody reads (the peer waits
// for it).
def CNN_SendOp : CNN_Op<"send"> {
  let summary = "sends a tensor to another pipeline stage";
  let description = [{
    Hands `input` to stage `peer`, which receives it with the `cnn.recv` of
    the same `tag`. Tags number the tensors crossing the cuts of one step
    (activations forward, their gradients backward); a stage sends and
    receives each tag once per micro-batch, in micro-batch order, so the
    pair needs no micro-batch number. Inside a stage function (one with
    `cnn.pipeline_stage`) the peer is another stage.

    ```mlir
    cnn.send %act {peer = 1 : i64, tag = 0 : i64} : tensor<4x16x8x8xf32>
    ```

    With `event` (cnn-pipeline-async-transfers, CUDA target): the send runs
    on the stream of its link (this stage and `peer`) once the compute
    stream has reached it, and the compute stream goes on; the
    `cnn.transfer_wait` of the same event, later in the function and
    reading `input` (which keeps the buffer alive until then), is where
    the compute stream waits for it. `link` (set with `event`) names the
    stage's link that carries it: 0 the one to the stage before, 1 the one
    to the stage after, 2 the one between the first and the last stage
    (interleaved stages; with two stages it carries every transfer from
    stage 1 to stage 0, so each direction has a link of its own). The
    runtime issues the transfer on that link's stream.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$peer, I64Attr:$tag,
                   OptionalAttr<I64Attr>:$event, OptionalAttr<I64Attr>:$link);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def CNN_RecvOp : CNN_Op<"recv"> {
  let summary = "receives a tensor from another pipeline stage";
  let description = [{
    The tensor that stage `peer` sent with the same `tag`; its type is the
    sent value's (the pair is checked when the stages run: a mismatch is an
    error naming the tag).

    ```mlir
    %act = cnn.recv {peer = 0 : i64, tag = 0 : i64} : tensor<4x16x8x8xf32>
    ```

    With `event` (cnn-pipeline-async-transfers, CUDA target): the receive
    is posted on its link's stream once the compute stream has reached it
    (it may stand well before its readers, so that it overlaps the
    compute); the result may be read only after the `cnn.transfer_wait` of
    the same event, which must come before every other reader. `link` as
    cnn.send's.
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$tag,
                   OptionalAttr<I64Attr>:$event, OptionalAttr<I64Attr>:$link);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// Not Pure, as send and recv.
def CNN_TransfersOp : CNN_Op<"transfers"> {
  let summary = "sends and receives that run as one group";
  let description = [{
    The CUDA target's form of adjacent cnn.send / cnn.recv ops of a stage
    (cnn-pipeline-stage makes it under the 1f1b schedule): `inputs[i]` goes
    to stage `send_peers[i]` with tag `send_tags[i]`, result j comes from
    stage `recv_peers[j]` with tag `recv_tags[j]`, all in one NCCL group,
    so that a stage sending forward while its neighbour sends backward does
    not block on its send before posting its receive (1F1B's steady state:
    a blocking send on each side waits for the other's receive). Per peer,
    sends and receives keep their order (NCCL pairs them by order).
    ```mlir
    %g = cnn.transfers %a {send_peers = array<i64: 1>, send_tags = array<i64: 0>,
        recv_peers = array<i64: 1>, recv_tags = array<i64: 1>}
        : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                   DenseI64ArrayAttr:$send_peers, DenseI64ArrayAttr:$send_tags,
                   DenseI64ArrayAttr:$recv_peers, DenseI64ArrayAttr:$recv_tags);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $results)";
  let hasVerifier = 1;
}

def CNN_TransferWaitOp : CNN_Op<"transfer_wait"> {
  let summary = "the compute stream waits for an asynchronous send or receive";
  let description = [{
    Made by cnn-pipeline-async-transfers: the step's compute stream waits
    here for the `cnn.send` or `cnn.recv` with the same `event` (earlier in
    the function) to complete. `tensor` is what that op sends or received:
    reading it keeps a sent buffer alive in the memory plan until NCCL has
    read it, and puts the wait for a received one before its readers.
    Constraints (verified): exactly one send or receive of the function has
    `event`, before this op, and `tensor` is its input (send) or result
    (recv); a received value's other readers all come after this op.

    ```mlir
    %a = cnn.recv {event = 0 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<4x16x8x8xf16>
    ...
    cnn.transfer_wait %a {event = 0 : i64} : tensor<4x16x8x8xf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$tensor, I64Attr:$event);
  let assemblyFormat = "$tensor attr-dict `:` type($tensor)";
  let hasVerifier = 1;
}

def CNN_MicroBatchOp : CNN_Op<"micro_batch", [Pure]> {
  let summary = "micro-batch `index` of `count`: a row range of the batch";
  let description = [{
    Rows [index x n, (index + 1) x n) of the outer (batch) dimension of
    `input`, n = input.dim(0) / count: cnn-pipeline-schedule's per-stage
    step takes the global batch (images, labels) once and cuts the M
    micro-batches from it. Batch is the outer dimension in NCHW and NHWC
    alike, so a micro-batch is a contiguous range in either layout. Any
    element type (labels are integers).

    ```mlir
    %x1 = cnn.micro_batch %x {index = 1 : i64, count = 4 : i64}
        : tensor<8x3x32x32xf32> -> tensor<2x3x32x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$index,
                   I64Attr:$count);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif
