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

#endif
