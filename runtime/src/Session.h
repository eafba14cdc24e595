//===- Session.h - shared machinery of trainMain and the C API ---*- C++
//-*-===//
//
// Internal header (not installed).
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_SRC_SESSION_H
#define CNNRT_SRC_SESSION_H

#include "cnnrt/Dataset.h"
#include "cnnrt/cnnrt.h"

#include <string>
#include <vector>

namespace cnnrt {

/// Converts `batch` staged uint8 images/int32 labels on the device into the
/// InputImage/InputLabel tensors (enqueued on ctx.stream()).
void launchInputConvert(Context &ctx, const uint8_t *dImages,
                        const int32_t *dLabels);
/// The same for float32 NCHW images and int64 labels already on the device
/// (the Python entry's tensors): x is copied as is (converted to the input
/// tensor's dtype and layout). Either pointer may be null (eval: no labels).
void launchInputConvertF32(Context &ctx, const float *dImages,
                           const int64_t *dLabels);
/// Converts `n` elements of an f32 or f16 arena tensor to f32 at `dst`
/// (device memory), on ctx.stream().
void launchToF32(Context &ctx, const TensorSpec &t, float *dst, int64_t n);
/// Writes ScalarLR and ScalarStep (if the model has them) on ctx.stream().
void launchSetScalars(Context &ctx, float lr, int64_t step);

/// Copies Param/Buffer/OptState/LossScale tensors from `entries` into the
/// arena. Param and Buffer entries are required; a missing OptState starts at
/// zero; a missing LossScale starts at 65536. f32 <-> f16 is converted.
bool loadStateIntoArena(Context &ctx, const std::vector<TensorEntry> &entries,
                        const std::string &source, std::string &err);
/// Reads the persistent state (Param/Buffer/OptState/LossScale) to the host.
/// Synchronizes ctx.stream().
std::vector<TensorEntry> readStateFromArena(Context &ctx);
/// Reads a scalar f32/f16 tensor (synchronizes ctx.stream()).
float readScalar(Context &ctx, const TensorSpec &t);

} // namespace cnnrt

#endif // CNNRT_SRC_SESSION_H
