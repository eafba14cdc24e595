//===- Interpreter.h - CPU reference interpreter for cnn --------*- C++ -*-===//
//
// Executes a func.func of cnn ops on the CPU in f32. Tensors of f16 type are
// rounded to f16 after every op, as the GPU stores them. This is the golden
// model every pass and the CUDA backend are compared against.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_REFERENCE_INTERPRETER_H
#define CNNC_REFERENCE_INTERPRETER_H

#include "cnnc/Support/Tensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cnnc::reference {

// The interpreter's tensors are cnnc/Support/Tensor.h's, which the importer
// shares without depending on the interpreter.
using cnnc::ElemKind;
using cnnc::elemKindOf;
using cnnc::roundToHalf;
using cnnc::Tensor;
using cnnc::TensorMap;

/// Runs `func` on `args` (one per argument, in order). On failure an error
/// is emitted at the location of the op that failed. Before an op runs, its
/// results' bytes are checked against the host memory left (see
/// hostMemoryLimit): an op that cannot fit fails with an out-of-memory
/// report and sets ranOutOfMemory().
mlir::FailureOr<std::vector<Tensor>> run(mlir::func::FuncOp func,
                                         llvm::ArrayRef<Tensor> args);

/// The bytes the interpreter may hold at once: the host's physical memory,
/// lowered by the address-space and data-segment limits (ulimit -v/-d) and
/// by setHostMemoryLimit.
uint64_t hostMemoryLimit();
/// Lowers hostMemoryLimit to at most `bytes` for this process (0: no limit
/// of its own). The fuzz targets run the interpreter under a small ceiling,
/// so that an absurd model ends in the out-of-memory report rather than in
/// the fuzzer's own memory limit.
void setHostMemoryLimit(uint64_t bytes);
/// Whether a run of this process failed because it ran out of memory (cnnc
/// exits 2 then, like the GPU runtime's out-of-memory report).
bool ranOutOfMemory();

/// cnn-param-format: the public K, C, R, S tensor `pub` in the stored
/// K, R, S, C' form of `stored` (padded channels zero), and back to
/// `publicShape`.
Tensor toStoredForm(const Tensor &pub, mlir::RankedTensorType stored);
Tensor toPublicForm(const Tensor &stored, llvm::ArrayRef<int64_t> publicShape);

/// Builds the argument list of `func`: arguments tagged `cnn.param` or
/// `cnn.buffer` (and optimizer state `cnn.state`) are looked up by name in
/// `named`; the others are taken in order from `positional`. Missing state
/// tensors start at zero; missing params/buffers are an error. Named tensors
/// are in their public form: an argument with `cnn.public_shape` gets the
/// stored form (toStoredForm).
mlir::FailureOr<std::vector<Tensor>>
bindArguments(mlir::func::FuncOp func, const TensorMap &named,
              llvm::ArrayRef<Tensor> positional);

} // namespace cnnc::reference

#endif
