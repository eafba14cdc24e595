//===- Resize.h - where cnn.resize reads its input ------------*- C++ -*-===//
//
// The source taps of one spatial dimension of cnn.resize / cnn.resize_grad:
// one rule shared by the dialect's verifier (the attribute spellings), the
// reference kernels and the CUDA target. The target prints the taps as
// tables instead of recomputing them on the device, so the GPU reads the
// same indices and weights as the reference, bit for bit (device code
// contracts a * b + c into one FMA, which could round a nearest index or a
// floor the other way). Header-only and free of MLIR, as the reference
// kernels must be.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_SUPPORT_RESIZE_H
#define CNNC_SUPPORT_RESIZE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace cnnc {

/// `mode`: "nearest" or "linear" (bilinear on H and W).
enum class ResizeMode { Nearest, Linear };
/// `coordinate_transformation_mode`, ONNX Resize's names.
enum class ResizeCoord {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric
};
/// `nearest_mode`, ONNX Resize's names (read by "nearest" only).
enum class ResizeNearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

inline std::optional<ResizeMode> parseResizeMode(std::string_view s) {
  if (s == "nearest")
    return ResizeMode::Nearest;
  if (s == "linear")
    return ResizeMode::Linear;
  return std::nullopt;
}
inline std::optional<ResizeCoord> parseResizeCoord(std::string_view s) {
  if (s == "half_pixel")
    return ResizeCoord::HalfPixel;
  if (s == "pytorch_half_pixel")
    return ResizeCoord::PytorchHalfPixel;
  if (s == "align_corners")
    return ResizeCoord::AlignCorners;
  if (s == "asymmetric")
    return ResizeCoord::Asymmetric;
  return std::nullopt;
}
inline std::optional<ResizeNearest> parseResizeNearest(std::string_view s) {
  if (s == "round_prefer_floor")
    return ResizeNearest::RoundPreferFloor;
  if (s == "round_prefer_ceil")
    return ResizeNearest::RoundPreferCeil;
  if (s == "floor")
    return ResizeNearest::Floor;
  if (s == "ceil")
    return ResizeNearest::Ceil;
  return std::nullopt;
}

/// Output index o of one dimension reads input `lo` with weight 1 - `l1`
/// and input `hi` with weight `l1` (linear); nearest reads `lo` (== hi,
/// l1 = 0) and copies it.
struct ResizeTap {
  int64_t lo, hi;
  float l1;
};

/// The taps of one dimension resized from `in` to `out` elements. `scale`
/// is the user's scale factor (out / in as requested, e.g. 2 or 1.5) or 0
/// when the output size was given instead.
///
/// linear: PyTorch's upsample_bilinear2d (CPU), which torch.onnx.export
/// writes as half_pixel or align_corners: the ratio in/out is the f32
/// (float)(1.0 / scale) when a scale was given, else (float)in / out
/// ((float)(in - 1) / (out - 1) for align_corners, 0 when out == 1); the
/// source x = ratio * (o + 0.5) - 0.5 (evaluated in double, rounded to f32,
/// negative clamped to 0; pytorch_half_pixel: 0 when the resized length
/// in * scale, or out, is 1), x = ratio * o
/// for align_corners and asymmetric; lo = min(floor(x), in - 1),
/// hi = min(lo + 1, in - 1), l1 = clamp(x - lo, 0, 1). A dimension that
/// keeps its size is copied (as PyTorch does whatever the scale). ONNX's
/// linear pads the edges by replication, which is the same as the clamps.
///
/// nearest with asymmetric + floor: PyTorch's 'nearest' (what its exporter
/// writes): min(floor((float)o * ratio), in - 1) in f32 with the ratio as
/// above (so 14 -> 20 reads floor(10 * 0.7f) = 6 at o = 10, as PyTorch);
/// a dimension that keeps its size is copied, one that doubles reads o / 2.
///
/// nearest otherwise: ONNX's reference in double, x from the coordinate
/// mode with scale = the given one or out / in (align_corners: the integral
/// out; the importer refuses a scale with a fractional in * scale there,
/// where ONNX's reference and PyTorch differ), rounded by `nearest` (an
/// integral x is itself), clamped into [0, in).
inline std::vector<ResizeTap> resizeTaps(int64_t in, int64_t out,
                                         ResizeMode mode, ResizeCoord coord,
                                         ResizeNearest nearest, double scale) {
  std::vector<ResizeTap> taps(out > 0 ? out : 0);
  auto clampIndex = [&](int64_t i) {
    return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1);
  };
  // pytorch_half_pixel's special case: ONNX compares the resized length
  // in * scale (before the floor) with 1.
  bool unitLength = scale > 0 ? (double)in * scale == 1.0 : out == 1;
  bool torchNearest = mode == ResizeMode::Nearest &&
                      coord == ResizeCoord::Asymmetric &&
                      nearest == ResizeNearest::Floor;
  if (mode == ResizeMode::Linear || torchNearest) {
    float ratio;
    if (coord == ResizeCoord::AlignCorners)
      ratio = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.f;
    else
      ratio = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
    for (int64_t o = 0; o < out; ++o) {
      ResizeTap &t = taps[o];
      if (in == out) {
        t = {o, o, 0.f};
        continue;
      }
      if (torchNearest) {
        // PyTorch's nearest_idx takes o / 2 for an exact doubling.
        int64_t i = out == 2 * in
                        ? o / 2
                        : clampIndex((int64_t)std::floor((float)o * ratio));
        t = {i, i, 0.f};
        continue;
      }
      float x;
      if (coord == ResizeCoord::AlignCorners ||
          coord == ResizeCoord::Asymmetric)
        x = ratio * (float)o;
      else if (coord == ResizeCoord::PytorchHalfPixel && unitLength)
        x = 0.f;
      else
        x = (float)((double)ratio * ((double)o + 0.5) - 0.5);
      x = std::max(x, 0.f);
      int64_t lo = std::min<int64_t>((int64_t)std::floor(x), in - 1);
      float l1 = std::min(std::max(x - (float)lo, 0.f), 1.f);
      t = {lo, lo < in - 1 ? lo + 1 : lo, l1};
    }
    return taps;
  }
  double s = scale > 0 ? scale : (double)out / (double)in;
  for (int64_t o = 0; o < out; ++o) {
    double x = 0; // every ResizeCoord sets it; GCC cannot see the switch is total
    switch (coord) {
    case ResizeCoord::AlignCorners:
      x = out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0;
      break;
    case ResizeCoord::Asymmetric:
      x = (double)o / s;
      break;
    case ResizeCoord::PytorchHalfPixel:
      x = unitLength ? -0.5 : ((double)o + 0.5) / s - 0.5;
      break;
    case ResizeCoord::HalfPixel:
      x = ((double)o + 0.5) / s - 0.5;
      break;
    }
    double f = std::floor(x), frac = x - f;
    int64_t i = (int64_t)f;
    if (frac != 0) {
      bool up = false;
      switch (nearest) {
      case ResizeNearest::RoundPreferFloor:
        up = frac > 0.5;
        break;
      case ResizeNearest::RoundPreferCeil:
        up = frac >= 0.5;
        break;
      case ResizeNearest::Floor:
        break;
      case ResizeNearest::Ceil:
        up = true;
        break;
      }
      i += up ? 1 : 0;
    }
    i = clampIndex(i);
    taps[o] = {i, i, 0.f};
  }
  return taps;
}

/// resizeTaps from the attribute spellings of cnn.resize (which its
/// verifier checked; an unknown name reads as the ONNX default).
inline std::vector<ResizeTap>
resizeTaps(int64_t in, int64_t out, std::string_view mode,
           std::string_view coord, std::string_view nearest, double scale) {
  return resizeTaps(
      in, out, parseResizeMode(mode).value_or(ResizeMode::Nearest),
      parseResizeCoord(coord).value_or(ResizeCoord::HalfPixel),
      parseResizeNearest(nearest).value_or(ResizeNearest::RoundPreferFloor),
      scale);
}

/// For the gather form of the gradient: the outputs [first, last] of one
/// dimension whose taps read input i (first > last: none). Taps move
/// forward monotonically with o, so those outputs are contiguous; the
/// gradient kernel still checks each tap, so the range only bounds it.
struct ResizeRange {
  int64_t first, last;
};
inline std::vector<ResizeRange>
resizeRanges(int64_t in, const std::vector<ResizeTap> &taps) {
  std::vector<ResizeRange> r(in > 0 ? in : 0,
                             ResizeRange{(int64_t)taps.size(), -1});
  for (int64_t o = 0; o < (int64_t)taps.size(); ++o)
    for (int64_t i : {taps[o].lo, taps[o].hi}) {
      r[i].first = std::min(r[i].first, o);
      r[i].last = std::max(r[i].last, o);
    }
  return r;
}

} // namespace cnnc

#endif // CNNC_SUPPORT_RESIZE_H
