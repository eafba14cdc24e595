//===- TensorEntry.h - reference tensors <-> runtime tensor files -*- C++
//-*-===//
//
// One conversion between the interpreter's tensors and the runtime's file
// entries (.cnnw, .npy, CNNT), and the f16 bit conversions they need, shared
// by the driver, the importer and cnnc-reference-run.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_REFERENCE_TENSORENTRY_H
#define CNNC_REFERENCE_TENSORENTRY_H

#include "cnnc/Reference/Interpreter.h"
#include "cnnrt/TensorFile.h"

#include <cstdint>
#include <string>

namespace cnnc::reference {
// The f16 conversions are cnnc/Support/Tensor.h's.
using cnnc::floatToHalf;
using cnnc::halfToFloat;

/// A tensor of a file entry (f16 values widened, integers as floats).
Tensor fromEntry(const cnnrt::TensorEntry &e);
/// The file entry of a tensor, in the tensor's element kind.
cnnrt::TensorEntry toEntry(const std::string &name, const Tensor &t);
} // namespace cnnc::reference

#endif
