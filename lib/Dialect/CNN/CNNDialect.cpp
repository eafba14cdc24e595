//===- CNNDialect.cpp - cnn dialect registration ----------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

using namespace mlir;
using namespace cnnc::cnn;

#include "cnnc/Dialect/CNN/CNNOpsDialect.cpp.inc"

void CNNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "cnnc/Dialect/CNN/CNNOps.cpp.inc"
      >();
}

Operation *CNNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
