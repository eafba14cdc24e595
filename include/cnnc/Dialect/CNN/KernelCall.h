//===- KernelCall.h - an op's kernel launches as data -----------*- C++ -*-===//
//
// KernelCallOpInterface's vocabulary: what an op's lowering to a prelude
// kernel (kernels/<Family>.cuh) is, as data the target prints: the kernel's
// name and template arguments, the grid as a rule over the op's values, and
// the arguments (the op's buffers, integers and floats from its shapes and
// attributes, records of them, constant tables). No target syntax: the CUDA
// printer (lib/Target/CUDA/EmitCUDA.cpp, one case for every op implementing
// the interface) turns a KernelCall into `kernel<targs><<<grid, block, 0,
// stream>>>(args)`. The launch decisions (`#cnn.launch`: the grid ceiling,
// the block, a reduction strategy) stay cnn-prepare-for-emission's; the
// description reads them from the attribute it is given.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_KERNELCALL_H
#define CNNC_DIALECT_CNN_KERNELCALL_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace cnnc::cnn {

/// One argument of a kernel call.
struct KernelArg {
  enum class Kind {
    Buffer, // an operand or result of the op (its memory)
    Null,   // no buffer (an optional pointer the kernel skips)
    I32,    // an integer the kernel takes as `int`
    I64,    // an integer the kernel takes as `int64_t`
    F32,    // a float
    Bool,
    Record, // a struct of the kernel family (PoolParams{...}): `fields`
    Table,  // constant table #`index` of KernelCall::tables
    /// The partial sums of a two-pass reduction: a scratch buffer of
    /// `integer` doubles the runtime holds (not a value of the op), shared
    /// by the op's calls, so its first call's partials reach its second.
    Scratch,
  };
  Kind kind = Kind::Null;
  /// Buffer: the value; `written` when the kernel writes it.
  mlir::Value value;
  bool written = false;
  /// Buffer: its parameter name in a wrapper kernel (KernelCall::wrap);
  /// Record: the struct's name.
  std::string name;
  int64_t integer = 0; // I32, I64, Bool, Table (the index)
  double real = 0;     // F32
  /// F32 of an f32 hyper-parameter (a momentum): printed as the shortest
  /// decimal that rounds to it, as PyTorch's Python float.
  bool decimal = false;
  /// Record (a std::vector: KernelArg is incomplete here).
  std::vector<KernelArg> fields;

  static KernelArg read(mlir::Value v, llvm::StringRef name = "") {
    KernelArg a;
    a.kind = Kind::Buffer;
    a.value = v;
    a.name = name.str();
    return a;
  }
  static KernelArg write(mlir::Value v, llvm::StringRef name = "") {
    KernelArg a = read(v, name);
    a.written = true;
    return a;
  }
  static KernelArg null() { return KernelArg(); }
  static KernelArg i32(int64_t v) { return scalar(Kind::I32, v); }
  static KernelArg i64(int64_t v) { return scalar(Kind::I64, v); }
  static KernelArg boolean(bool v) { return scalar(Kind::Bool, v); }
  static KernelArg f32(double v) {
    KernelArg a;
    a.kind = Kind::F32;
    a.real = v;
    return a;
  }
  static KernelArg hyperParameter(float v) {
    KernelArg a = f32(v);
    a.decimal = true;
    return a;
  }
  static KernelArg record(llvm::StringRef type,
                          llvm::ArrayRef<KernelArg> fields) {
    KernelArg a;
    a.kind = Kind::Record;
    a.name = type.str();
    a.fields.assign(fields.begin(), fields.end());
    return a;
  }
  static KernelArg table(int64_t index) { return scalar(Kind::Table, index); }
  static KernelArg scratch(int64_t doubles) {
    return scalar(Kind::Scratch, doubles);
  }

private:
  static KernelArg scalar(Kind k, int64_t v) {
    KernelArg a;
    a.kind = k;
    a.integer = v;
    return a;
  }
};

/// A constant table a call reads (resize's source taps): rows of one record
/// type, each row a Record of scalars.
struct KernelTable {
  std::string rowType;
  std::vector<KernelArg> rows;
};

/// A template argument of the kernel.
struct KernelTemplateArg {
  enum class Kind { ElementType, Bool };
  Kind kind;
  mlir::Type type; // ElementType: f32 or f16
  bool flag = false;
  static KernelTemplateArg elementType(mlir::Type t) {
    return {Kind::ElementType, t, false};
  }
  static KernelTemplateArg boolean(bool b) { return {Kind::Bool, {}, b}; }
};

/// How many blocks the call launches, as a rule the target resolves with
/// the op's `#cnn.launch`.
struct KernelGrid {
  enum class Kind {
    /// A grid-stride loop with one thread per `perThread` elements of
    /// `value` (an operand or result of the op): min(ceil(units / block),
    /// grid_limit) blocks.
    ThreadPerElement,
    /// A grid-stride loop over `units` units of work.
    ThreadPerUnit,
    /// One block per unit (a row of a softmax): `units` blocks.
    BlockPerUnit,
  };
  Kind kind = Kind::ThreadPerUnit;
  mlir::Value value;
  int64_t perThread = 1;
  int64_t units = 0;

  static KernelGrid threadPerElement(mlir::Value v, int64_t perThread = 1) {
    return {Kind::ThreadPerElement, v, perThread, 0};
  }
  static KernelGrid threadPerUnit(int64_t units) {
    return {Kind::ThreadPerUnit, {}, 1, units};
  }
  static KernelGrid blockPerUnit(int64_t units) {
    return {Kind::BlockPerUnit, {}, 1, units};
  }
};

/// How many threads a block of the call has, as a rule the target resolves
/// with the op's `#cnn.launch`.
enum class KernelBlock {
  Launch,      // `#cnn.launch`'s block (the default)
  ReduceBlock, // its reduce_block: a one-block reduction (bnSums, channelSum)
  Single,      // one thread: a scalar update (the loss scale)
};

/// One launch of a prelude kernel.
struct KernelCall {
  /// The kernel's name in the prelude (kernels/<Family>.cuh).
  std::string kernel;
  llvm::SmallVector<KernelTemplateArg, 4> templateArgs;
  KernelGrid grid;
  KernelBlock block = KernelBlock::Launch;
  llvm::SmallVector<KernelArg, 8> args;
  /// Constant tables, in the order the target declares them; arguments
  /// name them by index (KernelArg::table).
  llvm::SmallVector<KernelTable, 0> tables;
  /// `kernel` is a device function taking the tables: the target wraps it
  /// in a kernel of its own that takes the buffers (by their names) and
  /// binds the scalars, records and tables at compile time.
  bool wrap = false;
};

class LaunchAttr;

/// The launches that sum (or average) an N x pixels x C tensor `x` over its
/// pixels into the N x C values of `y`, each divided by `divisor`
/// (global_avg_pool: the pixel count): kernels/PoolingNHWC.cuh's
/// spatialSumTiles, a block per (image, chunk of channels, split of the
/// pixels), and where the pixels are split, spatialSumFinish adding the
/// splits in order. The splits and chunks follow from `launch`'s grid_limit
/// and block. Needs n * C and the pixel count of at most kSpatialSumMaxCount
/// (the kernels count in int, their chunk and split ends beyond them).
constexpr int64_t kSpatialSumMaxCount = (int64_t(1) << 30) - 1;
void describeSpatialSum(mlir::Value x, mlir::Value y, int64_t n,
                        int64_t pixels, int64_t channels, double divisor,
                        LaunchAttr launch,
                        llvm::SmallVectorImpl<KernelCall> &calls);

/// A reduce_sum / reduce_mean over one run of consecutive dimensions as
/// describeSpatialSum's `outer` x `middle` x `inner` (n x pixels x C): the
/// pixels of an NHWC tensor, or the trailing H x W of a 5-D split-attention
/// tensor (inner 1). Present where describeSpatialSum applies: f16 / f32
/// values, at least kSpatialSumMinElements summed per result (below that the
/// generic thread per result adds few elements each), a block's threads
/// (256) where the run is innermost (inner 1: one lane a block), the counts
/// within kSpatialSumMaxCount. cnn-select-lowering's "spatial_sum".
struct SpatialSumShape {
  int64_t outer, middle, inner;
};
constexpr int64_t kSpatialSumMinElements = 32;
std::optional<SpatialSumShape> spatialSumShape(mlir::Operation *op);
/// describeSpatialSum's launches for such a reduction (the mean divides by
/// the elements summed); fails where spatialSumShape has none.
mlir::LogicalResult
describeSpatialReduction(mlir::Operation *op, LaunchAttr launch,
                         llvm::SmallVectorImpl<KernelCall> &calls);

/// A cnn.transpose that keeps its leading dimensions and swaps the next two
/// groups of consecutive dimensions (NCHW -> NHWC: permutation (0, 2, 3, 1),
/// batch N, rows C, columns H x W; NHWC -> NCHW: (0, 3, 1, 2), rows H x W,
/// columns C), as kernels/Transpose.cuh's batchedTranspose2D takes it:
/// out[b][c][r] = in[b][r][c]. Present for static f16 / f32 shapes whose
/// rows and columns are both at least kTiledTransposeMinSide (a narrower
/// side leaves most of each warp idle in one of the tile's passes, where
/// the generic gather's strided reads fall in few sectors).
/// cnn-select-lowering's "tiled" (under --tiled-transpose).
struct TiledTransposeShape {
  int64_t batch, rows, cols;
};
constexpr int64_t kTiledTransposeMinSide = 16;
std::optional<TiledTransposeShape> tiledTransposeShape(mlir::Operation *op);
/// batchedTranspose2D's launch for such a transpose: a block per 32 x 32
/// tile, at most `launch`'s grid ceiling of them (the blocks loop over the
/// rest); fails where tiledTransposeShape has none.
mlir::LogicalResult
describeTiledTranspose(mlir::Operation *op, LaunchAttr launch,
                       llvm::SmallVectorImpl<KernelCall> &calls);

/// Checks `call`, a description of `op`'s launch: its buffers and its
/// grid's value are operands or results of `op` with a static shape (the
/// grid's element count a multiple of `perThread`), its 32-bit integers
/// (I32 arguments and record fields) fit in int32, a block-per-unit grid
/// has 1 to 2^31 - 1 blocks, the element types are f32 or f16, the table
/// indices exist, a scratch holds at least one double, and a one-thread
/// block launches one block. One error through `emitError` naming the
/// kernel. (A reduce_block rule's size is the `#cnn.launch` verifier's:
/// usesReduceBlock ops must carry one.)
mlir::LogicalResult
verifyKernelCall(mlir::Operation *op, const KernelCall &call,
                 llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

} // namespace cnnc::cnn

#endif
