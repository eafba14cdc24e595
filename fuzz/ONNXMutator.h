//===- ONNXMutator.h - structure-aware mutations of ONNX models -*- C++ -*-===//
//
// The custom mutator of the ONNX fuzz targets (onnx-model, reference,
// train-step): the input is parsed as a ModelProto and its structure is
// mutated (see ONNXMutator.cpp); bytes that are not a model, and one
// mutation in eight, go to libFuzzer's byte-level mutator.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_FUZZ_ONNXMUTATOR_H
#define CNNC_FUZZ_ONNXMUTATOR_H

#include <cstddef>
#include <cstdint>

namespace cnnc::fuzz {

struct ONNXMutatorOptions {
  /// Also the shape-blowup mutations: the attributes and shape-carrying
  /// inputs that make a tensor grow (kernel, pads, strides, dilations, group,
  /// output_padding, Resize scales/sizes, Pad pads, Expand/Reshape/Tile
  /// shapes, Concat's input count) set near 2^30..2^33, to 0 or to -1.
  bool shapeBlowup = false;
  /// Five mutations in eight keep the model valid (op-aware attribute
  /// values, consistent dims, supported ops inserted/deleted/swapped, dtypes
  /// converted with their data), so that most mutants get past the importer;
  /// the rest stay hostile (and byte-level).
  bool keepValid = false;
};

/// LLVMFuzzerCustomMutator's contract: mutates `data` (`size` bytes, room for
/// `maxSize`) in place and returns the new size.
size_t mutateONNXModel(uint8_t *data, size_t size, size_t maxSize,
                       unsigned seed, const ONNXMutatorOptions &options);

} // namespace cnnc::fuzz

#endif
