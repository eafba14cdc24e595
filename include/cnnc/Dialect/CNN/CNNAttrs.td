//===- CNNAttrs.td - cnn dialect attributes ----------------*- tablegen -*-===//
#ifndef CNNC_DIALECT_CNN_CNNATTRS_TD
#define CNNC_DIALECT_CNN_CNNATTRS_TD

include "cnnc/Dialect/CNN/CNNDialect.td"
include "mlir/IR/EnumAttr.td"

def CNN_LayoutNCHW : I32EnumAttrCase<"NCHW", 0>;
def CNN_LayoutNHWC : I32EnumAttrCase<"NHWC", 1>;
def CNN_LayoutEnum : I32EnumAttr<"Layout",
    "activation layout of a layout-sensitive op",
    [CNN_LayoutNCHW, CNN_LayoutNHWC]> {
  let cppNamespace = "::cnnc::cnn";
  let genSpecializedAttr = 0;
}

// `#cnn.layout<NCHW>` or `#cnn.layout<NHWC>`: the parser accepts nothing else,
// so every layout in the IR is one of the two (see
// LayoutSensitiveOpInterface for what each means).
def CNN_LayoutAttr : EnumAttr<CNN_Dialect, CNN_LayoutEnum, "layout"> {
  let summary = "Activation layout: NCHW (channel dimension 1) or NHWC (last)";
  let assemblyFormat = "`<` $value `>`";
}

// How a loss op combines its per-position losses (ONNX's `reduction` of
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, PyTorch's of
// F.nll_loss): `#cnn.loss_reduction<none>`, `<sum>` or `<mean>`.
def CNN_LossReductionNone : I32EnumAttrCase<"None", 0, "none">;
def CNN_LossReductionSum : I32EnumAttrCase<"Sum", 1, "sum">;
def CNN_LossReductionMean : I32EnumAttrCase<"Mean", 2, "mean">;
def CNN_LossReductionEnum : I32EnumAttr<"LossReduction",
    "reduction of a loss over its positions",
    [CNN_LossReductionNone, CNN_LossReductionSum, CNN_LossReductionMean]> {
  let cppNamespace = "::cnnc::cnn";
  let genSpecializedAttr = 0;
}
def CNN_LossReductionAttr
    : EnumAttr<CNN_Dialect, CNN_LossReductionEnum, "loss_reduction"> {
  let summary = "Loss reduction: none (per position), sum or mean";
  let assemblyFormat = "`<` $value `>`";
}

// The GPU the CUDA target prints for (`cnn.target` on the module, set by
// cnn-prepare-for-emission from --arch): what the launch decisions are
// computed from, so that they are in the IR rather than in the printer.
def CNN_TargetAttr : AttrDef<CNN_Dialect, "Target"> {
  let mnemonic = "target";
  let summary = "The GPU the CUDA target prints for: architecture, SM count, "
                "threads and shared memory per block";
  let description = [{
    `#cnn.target<arch = "sm_90", sms = 132, max_threads = 1024,
    smem_per_block = 232448>`: the nvcc architecture, its streaming
    multiprocessors (a grid-stride kernel's grid fills them), the most
    threads and the most (opt-in) shared memory in bytes a block may have.
  }];
  let parameters = (ins StringRefParameter<"nvcc architecture">:$arch,
                        "int64_t":$sms, "int64_t":$max_threads,
                        "int64_t":$smem_per_block);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

// What cnn-prepare-for-emission decided for how an op's generated kernels
// launch (`cnn.launch` on the op); the CUDA printer reads it and refuses an
// op that launches kernels without it.
def CNN_LaunchAttr : AttrDef<CNN_Dialect, "Launch"> {
  let mnemonic = "launch";
  let summary = "How an op's generated kernels launch: the grid's ceiling, "
                "the block sizes, the elementwise vector width, the "
                "reduction strategy, the multi-tensor chunks";
  let description = [{
    `#cnn.launch<grid_limit = 4224, block = 256, vector = 8,
    reduction = "block_per_result", chunks = array<i64: 1024>>`:
    - `grid_limit`: the most blocks a grid-stride kernel of the op launches
      (32 per SM of the `#cnn.target`): the grid is
      min(ceil(n / block), grid_limit) for n units of work.
    - `block`: the threads of a block of the op's kernels (grid-stride
      loops, a block per result or per channel of the NHWC finishing
      kernels, the partial-sum tiles' lanes x (block / lanes)). 256, the
      size the kernels are compiled for (`__launch_bounds__(256)`,
      256-entry shared arrays).
    - `vector`: the elements a thread of the op's elementwise kernels
      moves at once: 8 (16-byte loads and stores of eight f16, two of eight
      f32) where the kernel's full-size operands are 16-byte aligned in the
      arena and their length a multiple of 8, else one; or 1 (one element
      a thread always).
    - `reduction` (reduce_sum/mean/max and softmax only, required there):
      "block_per_result" (a block of 256 threads per result element, a
      fixed-order tree reduction) or "thread_per_result" (a grid-stride
      loop, one thread per result element).
    - `chunks` (multi-tensor kernels only): the units (elements, or vectors
      of eight) of one block's chunk, one entry per multi-tensor kernel the
      op launches, each a positive multiple of 256.
    - `partial_blocks` (the ops whose per-channel sums of an NHWC tensor
      run as partial sums over row tiles, then a finishing kernel, and
      softmax_cross_entropy, whose loss sums rows in per-block partial sums
      first: required there, absent elsewhere): the most blocks of a
      partial-sum kernel; softmax_cross_entropy's at most 1024, the blocks
      the prelude's xentScratch holds (CNNC_XENT_BLOCKS).
    - `reduce_block` (the ops reducing with one block per result: the
      per-channel sums of an NCHW tensor, a block per channel, and
      softmax_cross_entropy_grad's count of the rows not ignored, one block:
      required there, absent elsewhere): the threads of such a block, a
      multiple of 32 up to 1024 (the prelude's blockSum).
  }];
  let parameters = (ins "int64_t":$grid_limit, "int64_t":$block,
                        "int64_t":$vector,
                        OptionalParameter<"::mlir::StringAttr">:$reduction,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$chunks,
                        DefaultValuedParameter<"int64_t", "0">:$partial_blocks,
                        DefaultValuedParameter<"int64_t", "0">:$reduce_block);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif
