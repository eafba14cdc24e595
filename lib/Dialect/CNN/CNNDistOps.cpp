//===- CNNDistOps.cpp - verifier of cnn.all_reduce ------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace cnnc::cnn;

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand (a bucket is never empty)");
  if (getInputs().size() != getResults().size())
    return emitOpError("has ")
           << getInputs().size() << " operands but " << getResults().size()
           << " results (one result per operand)";
  StringRef r = getReduction();
  if (r != "avg" && r != "sum" && r != "max" && r != "min")
    return emitOpError("'reduction' must be avg, sum, max or min, got '")
           << r << "'";
  // I64Attr's accessor is unsigned: read the signed value.
  int64_t bucket = getBucketAttr().getValue().getSExtValue();
  if (bucket < 0)
    return emitOpError("'bucket' must be >= 0, got ") << bucket;
  Type elem = cast<RankedTensorType>(getInputs().front().getType())
                  .getElementType();
  int64_t bytes = 0;
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getInputs(), getResults()))) {
    auto [in, out] = pair;
    auto t = cast<RankedTensorType>(in.getType());
    if (in.getType() != out.getType())
      return emitOpError("result #")
             << i << " is " << out.getType() << " but operand #" << i
             << " is " << in.getType() << " (must be the same type)";
    if (t.getElementType() != elem)
      return emitOpError("operand #")
             << i << " is " << in.getType()
             << " but operand #0 has element type " << elem
             << " (one bucket is one element type: one collective call)";
    bytes += t.getNumElements() * (elem.isF16() ? 2 : 4);
  }
  if (auto b = getBytesAttr(); b && b.getValue().getSExtValue() != bytes)
    return emitOpError("'bytes' is ")
           << b.getValue().getSExtValue() << " but the operands hold " << bytes << " bytes";
  return success();
}
