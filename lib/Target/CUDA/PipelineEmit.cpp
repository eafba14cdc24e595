//===- PipelineEmit.cpp - CUDA text of the pipeline-stage ops -------------===//
//
// See PipelineEmit.h.
//
//===----------------------------------------------------------------------===//
#include "PipelineEmit.h"

#include "cnnc/Dialect/CNN/CNNOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <fmt/format.h>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

bool cnnc::isPipelineOp(Operation *op) {
  return isa<MicroBatchOp, SendOp, RecvOp, TransfersOp, TransferWaitOp>(op);
}

bool cnnc::isPipelineTransfer(Operation *op) {
  return isa<SendOp, RecvOp, TransfersOp>(op);
}

/// The bytes of a tensor of `t` (f32, f16, bf16, integers; a sub-byte
/// element type is refused by the caller).
static int64_t bytesOf(RankedTensorType t) {
  return t.getNumElements() *
         static_cast<int64_t>(t.getElementType().getIntOrFloatBitWidth() / 8);
}

static LogicalResult checkBytes(Operation *op, RankedTensorType t) {
  if (!t.hasStaticShape() || !t.getElementType().isIntOrFloat() ||
      t.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return op->emitError("CUDA backend: '")
           << op->getName()
           << "' of a tensor without a static shape or of a sub-byte "
              "element type is not supported";
  return success();
}

/// One half of a transfer of `v`'s bytes with stage `peer`: `dist::send` /
/// `recv` on the compute stream, or with cnn-pipeline-async-transfers'
/// `event` and `link` `sendAsync` / `recvAsync` on that link's stream.
static LogicalResult printTransfer(Operation *op, StringRef kind, Value v,
                                   uint64_t peer, uint64_t tag,
                                   std::optional<uint64_t> event,
                                   std::optional<uint64_t> link,
                                   function_ref<int64_t(Value)> offsetOf,
                                   const std::string &loc, std::string &out) {
  auto t = cast<RankedTensorType>(v.getType());
  if (failed(checkBytes(op, t)))
    return failure();
  if (event && !link)
    return op->emitError("CUDA backend: an asynchronous transfer without "
                         "its 'link' (cnn-pipeline-async-transfers sets it)");
  std::string eventArg =
      event ? fmt::format("{}, {}, ", *event, static_cast<int64_t>(*link)) : "";
  out += fmt::format("  cnnrt::dist::{}{}(ctx, A + {}, {}ull, {}, {}\"tag {} "
                     "at {}\");\n",
                     kind.str(), event ? "Async" : "", offsetOf(v), bytesOf(t),
                     static_cast<int64_t>(peer), eventArg,
                     static_cast<int64_t>(tag), loc);
  return success();
}

LogicalResult cnnc::printPipelineOp(Operation *op,
                                    function_ref<int64_t(Value)> offsetOf,
                                    const std::string &loc, std::string &out) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<MicroBatchOp>([&](MicroBatchOp m) {
        auto t = cast<RankedTensorType>(m.getResult().getType());
        if (failed(checkBytes(op, t)))
          return failure();
        int64_t bytes = bytesOf(t);
        auto index = static_cast<int64_t>(m.getIndex());
        out += fmt::format(
            "  // micro-batch {} of {}: rows {}..{} of the batch\n"
            "  ctx.check(cudaMemcpyAsync(A + {}, A + {}, {}, "
            "cudaMemcpyDeviceToDevice, s), \"{}\");\n",
            index, static_cast<int64_t>(m.getCount()), index * t.getDimSize(0),
            (index + 1) * t.getDimSize(0) - 1, offsetOf(m.getResult()),
            offsetOf(m.getInput()) + index * bytes, bytes, loc);
        return success();
      })
      .Case<SendOp>([&](SendOp snd) {
        return printTransfer(op, "send", snd.getInput(), snd.getPeer(),
                             snd.getTag(), snd.getEvent(), snd.getLink(),
                             offsetOf, loc, out);
      })
      .Case<RecvOp>([&](RecvOp rcv) {
        return printTransfer(op, "recv", rcv.getResult(), rcv.getPeer(),
                             rcv.getTag(), rcv.getEvent(), rcv.getLink(),
                             offsetOf, loc, out);
      })
      .Case<TransferWaitOp>([&](TransferWaitOp w) {
        out += fmt::format("  cnnrt::dist::transferWait(ctx, {});\n",
                           static_cast<uint64_t>(w.getEvent()));
        return success();
      })
      .Case<TransfersOp>([&](TransfersOp g) {
        // One NCCL group: every send and receive of it posted before any
        // waits for its peer.
        out += "  cnnrt::dist::groupStart(ctx);\n";
        for (auto [v, peer, tag] :
             llvm::zip(g.getInputs(), g.getSendPeers(), g.getSendTags()))
          if (failed(printTransfer(op, "send", v, peer, tag, std::nullopt,
                                   std::nullopt, offsetOf, loc, out)))
            return failure();
        for (auto [v, peer, tag] :
             llvm::zip(g.getResults(), g.getRecvPeers(), g.getRecvTags()))
          if (failed(printTransfer(op, "recv", v, peer, tag, std::nullopt,
                                   std::nullopt, offsetOf, loc, out)))
            return failure();
        out += "  cnnrt::dist::groupEnd(ctx);\n";
        return success();
      })
      .Default([&](Operation *) {
        return op->emitError("CUDA backend: not a pipeline op");
      });
}
