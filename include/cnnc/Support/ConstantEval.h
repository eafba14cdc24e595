//===- ConstantEval.h - evaluation of small constant tensors ---*- C++ -*-===//
//
// cnnc works on static shapes: the Shape/Gather/Unsqueeze/Concat/... chains
// PyTorch emits to compute shapes are evaluated while importing. A ConstVal is
// a small dense tensor known at import time, either integer (int64, also used
// for bool/int32) or float (f32).
//
// Every function here checks its inputs and returns false with a message in
// `err` instead of asserting: the data comes from an untrusted file. It is a
// library of its own (CNNCSupport, with the host Tensor type) so that the
// importer folds without the reference interpreter.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_SUPPORT_CONSTANTEVAL_H
#define CNNC_SUPPORT_CONSTANTEVAL_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cnnc::constfold {

/// The largest tensor folded at import time (elements).
constexpr int64_t kMaxFoldElements = int64_t(1) << 24;

struct ConstVal {
  bool isInt = false;
  std::vector<int64_t> shape;
  std::vector<int64_t> ints; ///< data when isInt
  std::vector<float> floats; ///< data otherwise

  static ConstVal intTensor(std::vector<int64_t> shape,
                            std::vector<int64_t> data);
  static ConstVal floatTensor(std::vector<int64_t> shape,
                              std::vector<float> data);
  int64_t numel() const { return isInt ? ints.size() : floats.size(); }
  int64_t rank() const { return shape.size(); }
  double at(int64_t i) const { return isInt ? double(ints[i]) : floats[i]; }
  /// The value as a list of integers (any rank; floats are truncated).
  std::vector<int64_t> asInts() const;
};

/// Number of elements of `shape`, or nullopt for negative dims / overflow /
/// more than kMaxFoldElements.
std::optional<int64_t> checkedNumel(const std::vector<int64_t> &shape,
                                    int64_t limit = kMaxFoldElements);
/// Normalizes an axis in [-rank, rank) to [0, rank); false if out of range.
bool normalizeAxis(int64_t &axis, int64_t rank);
std::string shapeStr(const std::vector<int64_t> &shape);

/// NumPy-style broadcast of two shapes. `maxElements` bounds the result:
/// the fold limit for constants; a runtime tensor passes INT64_MAX (the
/// check then only guards against overflow).
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out,
                     std::string &err,
                     int64_t maxElements = kMaxFoldElements);
/// Broadcasts `v` to `shape` (which must be a valid broadcast target).
bool broadcastTo(const ConstVal &v, const std::vector<int64_t> &shape,
                 ConstVal &out, std::string &err);

enum class BinaryKind { Add, Sub, Mul, Div, Equal, Less, Greater, Min, Max };
bool foldBinary(BinaryKind kind, const ConstVal &a, const ConstVal &b,
                ConstVal &out, std::string &err);
bool foldWhere(const ConstVal &cond, const ConstVal &x, const ConstVal &y,
               ConstVal &out, std::string &err);
bool foldGather(const ConstVal &data, const ConstVal &indices, int64_t axis,
                ConstVal &out, std::string &err);
bool foldConcat(const std::vector<const ConstVal *> &inputs, int64_t axis,
                ConstVal &out, std::string &err);
/// ONNX Slice semantics (negative indices, clamping, steps).
bool foldSlice(const ConstVal &data, const std::vector<int64_t> &starts,
               const std::vector<int64_t> &ends,
               const std::vector<int64_t> &axes,
               const std::vector<int64_t> &steps, ConstVal &out,
               std::string &err);
bool foldTranspose(const ConstVal &data, const std::vector<int64_t> &perm,
                   ConstVal &out, std::string &err);
bool foldRange(const ConstVal &start, const ConstVal &limit,
               const ConstVal &delta, ConstVal &out, std::string &err);

/// Shape computations shared by constant folding and tensor ops.
/// ONNX Reshape: 0 copies the input dim (unless allowZero), one -1 is inferred.
bool reshapeTarget(const std::vector<int64_t> &inShape,
                   const std::vector<int64_t> &requested, bool allowZero,
                   std::vector<int64_t> &out, std::string &err);
bool unsqueezeShape(const std::vector<int64_t> &inShape,
                    std::vector<int64_t> axes, std::vector<int64_t> &out,
                    std::string &err);
/// Empty `axes` removes every dimension of size 1.
bool squeezeShape(const std::vector<int64_t> &inShape,
                  std::vector<int64_t> axes, std::vector<int64_t> &out,
                  std::string &err);
/// Resolves ONNX Slice parameters against `shape` into per-dimension
/// (start, step, size).
bool resolveSlice(const std::vector<int64_t> &shape,
                  const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &ends,
                  const std::vector<int64_t> &axes,
                  const std::vector<int64_t> &steps,
                  std::vector<int64_t> &outStart, std::vector<int64_t> &outStep,
                  std::vector<int64_t> &outSize, std::string &err);

} // namespace cnnc::constfold

#endif
