//===- ConstantEval.cpp - evaluation of small constant tensors ------------===//
#include "cnnc/Support/ConstantEval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace cnnc::constfold {

ConstVal ConstVal::intTensor(std::vector<int64_t> shape,
                             std::vector<int64_t> data) {
  ConstVal v;
  v.isInt = true;
  v.shape = std::move(shape);
  v.ints = std::move(data);
  return v;
}

ConstVal ConstVal::floatTensor(std::vector<int64_t> shape,
                               std::vector<float> data) {
  ConstVal v;
  v.shape = std::move(shape);
  v.floats = std::move(data);
  return v;
}

std::vector<int64_t> ConstVal::asInts() const {
  if (isInt)
    return ints;
  std::vector<int64_t> r;
  r.reserve(floats.size());
  // Clamped: converting a float outside int64's range is undefined (a float
  // tensor of 4.6e24 given as Slice's starts, found by the structured ONNX
  // fuzzer); the consumers range-check the values.
  for (float f : floats)
    r.push_back(!std::isfinite(f)                ? 0
                : f >= 9.2233720368547758e18f  ? INT64_MAX
                : f <= -9.2233720368547758e18f ? INT64_MIN
                                               : int64_t(f));
  return r;
}

std::optional<int64_t> checkedNumel(const std::vector<int64_t> &shape,
                                    int64_t limit) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > limit / d)
      return std::nullopt;
    n *= d;
  }
  if (n > limit)
    return std::nullopt;
  return n;
}

bool normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
std::vector<int64_t> strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// Maps each linear index of `outShape` to the linear index into `inShape`
/// broadcast to it (inShape right-aligned, size-1 dims repeated).
std::vector<int64_t> broadcastIndex(const std::vector<int64_t> &inShape,
                                    const std::vector<int64_t> &outShape) {
  int64_t n = 1;
  for (int64_t d : outShape)
    n *= d;
  std::vector<int64_t> idx(n);
  auto inStr = strides(inShape);
  size_t off = outShape.size() - inShape.size();
  std::vector<int64_t> coord(outShape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t lin = 0;
    for (size_t d = 0; d < inShape.size(); ++d)
      if (inShape[d] != 1)
        lin += coord[d + off] * inStr[d];
    idx[i] = lin;
    for (int64_t d = int64_t(outShape.size()) - 1; d >= 0; --d) {
      if (++coord[d] < outShape[d])
        break;
      coord[d] = 0;
    }
  }
  return idx;
}

ConstVal toFloat(const ConstVal &v) {
  if (!v.isInt)
    return v;
  std::vector<float> f(v.ints.begin(), v.ints.end());
  return ConstVal::floatTensor(v.shape, std::move(f));
}
} // namespace

bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out,
                     std::string &err, int64_t maxElements) {
  size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) {
      err = "shapes " + shapeStr(a) + " and " + shapeStr(b) +
            " cannot be broadcast together";
      return false;
    }
    out[i] = da == 1 ? db : da;
  }
  if (!checkedNumel(out, maxElements)) {
    err = "broadcast shape " + shapeStr(out) +
          (maxElements == kMaxFoldElements ? " is too large to fold"
                                           : " has too many elements");
    return false;
  }
  return true;
}

bool broadcastTo(const ConstVal &v, const std::vector<int64_t> &shape,
                 ConstVal &out, std::string &err) {
  std::vector<int64_t> bs;
  if (!broadcastShapes(v.shape, shape, bs, err))
    return false;
  if (bs != shape) {
    err = "cannot broadcast " + shapeStr(v.shape) + " to " + shapeStr(shape);
    return false;
  }
  auto idx = broadcastIndex(v.shape, shape);
  out = ConstVal();
  out.isInt = v.isInt;
  out.shape = shape;
  if (v.isInt) {
    out.ints.resize(idx.size());
    for (size_t i = 0; i < idx.size(); ++i)
      out.ints[i] = v.ints[idx[i]];
  } else {
    out.floats.resize(idx.size());
    for (size_t i = 0; i < idx.size(); ++i)
      out.floats[i] = v.floats[idx[i]];
  }
  return true;
}

bool foldBinary(BinaryKind kind, const ConstVal &a, const ConstVal &b,
                ConstVal &out, std::string &err) {
  std::vector<int64_t> shape;
  if (!broadcastShapes(a.shape, b.shape, shape, err))
    return false;
  auto ia = broadcastIndex(a.shape, shape), ib = broadcastIndex(b.shape, shape);
  bool compare = kind == BinaryKind::Equal || kind == BinaryKind::Less ||
                 kind == BinaryKind::Greater;
  out = ConstVal();
  out.shape = shape;
  if (a.isInt && b.isInt) {
    out.isInt = true;
    out.ints.resize(ia.size());
    for (size_t i = 0; i < ia.size(); ++i) {
      int64_t x = a.ints[ia[i]], y = b.ints[ib[i]], r = 0;
      switch (kind) {
      case BinaryKind::Add:
        r = int64_t(uint64_t(x) + uint64_t(y));
        break;
      case BinaryKind::Sub:
        r = int64_t(uint64_t(x) - uint64_t(y));
        break;
      case BinaryKind::Mul:
        r = int64_t(uint64_t(x) * uint64_t(y));
        break;
      case BinaryKind::Div:
        if (y == 0) {
          err = "integer division by zero";
          return false;
        }
        r = (x == std::numeric_limits<int64_t>::min() && y == -1) ? x : x / y;
        break;
      case BinaryKind::Equal:
        r = x == y;
        break;
      case BinaryKind::Less:
        r = x < y;
        break;
      case BinaryKind::Greater:
        r = x > y;
        break;
      case BinaryKind::Min:
        r = std::min(x, y);
        break;
      case BinaryKind::Max:
        r = std::max(x, y);
        break;
      }
      out.ints[i] = r;
    }
    return true;
  }
  ConstVal fa = toFloat(a), fb = toFloat(b);
  if (compare) {
    out.isInt = true;
    out.ints.resize(ia.size());
  } else {
    out.floats.resize(ia.size());
  }
  for (size_t i = 0; i < ia.size(); ++i) {
    float x = fa.floats[ia[i]], y = fb.floats[ib[i]];
    switch (kind) {
    case BinaryKind::Add:
      out.floats[i] = x + y;
      break;
    case BinaryKind::Sub:
      out.floats[i] = x - y;
      break;
    case BinaryKind::Mul:
      out.floats[i] = x * y;
      break;
    case BinaryKind::Div:
      out.floats[i] = x / y;
      break;
    case BinaryKind::Min:
      out.floats[i] = std::min(x, y);
      break;
    case BinaryKind::Max:
      out.floats[i] = std::max(x, y);
      break;
    case BinaryKind::Equal:
      out.ints[i] = x == y;
      break;
    case BinaryKind::Less:
      out.ints[i] = x < y;
      break;
    case BinaryKind::Greater:
      out.ints[i] = x > y;
      break;
    }
  }
  return true;
}

bool foldWhere(const ConstVal &cond, const ConstVal &x, const ConstVal &y,
               ConstVal &out, std::string &err) {
  std::vector<int64_t> s1, shape;
  if (!broadcastShapes(cond.shape, x.shape, s1, err) ||
      !broadcastShapes(s1, y.shape, shape, err))
    return false;
  auto ic = broadcastIndex(cond.shape, shape);
  auto ix = broadcastIndex(x.shape, shape);
  auto iy = broadcastIndex(y.shape, shape);
  out = ConstVal();
  out.shape = shape;
  out.isInt = x.isInt && y.isInt;
  ConstVal fx = out.isInt ? x : toFloat(x), fy = out.isInt ? y : toFloat(y);
  if (out.isInt)
    out.ints.resize(ic.size());
  else
    out.floats.resize(ic.size());
  for (size_t i = 0; i < ic.size(); ++i) {
    bool c = cond.at(ic[i]) != 0;
    if (out.isInt)
      out.ints[i] = c ? fx.ints[ix[i]] : fy.ints[iy[i]];
    else
      out.floats[i] = c ? fx.floats[ix[i]] : fy.floats[iy[i]];
  }
  return true;
}

bool foldGather(const ConstVal &data, const ConstVal &indices, int64_t axis,
                ConstVal &out, std::string &err) {
  if (data.rank() == 0) {
    err = "Gather needs data of rank >= 1";
    return false;
  }
  if (!normalizeAxis(axis, data.rank())) {
    err = "Gather axis " + std::to_string(axis) + " is out of range for rank " +
          std::to_string(data.rank());
    return false;
  }
  if (!indices.isInt) {
    err = "Gather indices must be integers";
    return false;
  }
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (!checkedNumel(shape)) {
    err = "Gather result " + shapeStr(shape) + " is too large to fold";
    return false;
  }
  int64_t outer = 1, inner = 1, dim = data.shape[axis];
  for (int64_t i = 0; i < axis; ++i)
    outer *= data.shape[i];
  for (int64_t i = axis + 1; i < data.rank(); ++i)
    inner *= data.shape[i];
  out = ConstVal();
  out.isInt = data.isInt;
  out.shape = shape;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t idx : indices.ints) {
      if (idx < -dim || idx >= dim) {
        err = "Gather index " + std::to_string(idx) +
              " is out of range for a dimension of size " + std::to_string(dim);
        return false;
      }
      if (idx < 0)
        idx += dim;
      int64_t base = (o * dim + idx) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        if (data.isInt)
          out.ints.push_back(data.ints[base + i]);
        else
          out.floats.push_back(data.floats[base + i]);
      }
    }
  return true;
}

bool foldConcat(const std::vector<const ConstVal *> &inputs, int64_t axis,
                ConstVal &out, std::string &err) {
  if (inputs.empty()) {
    err = "Concat needs at least one input";
    return false;
  }
  const ConstVal &first = *inputs.front();
  int64_t rank = first.rank();
  if (!normalizeAxis(axis, rank)) {
    err = "Concat axis " + std::to_string(axis) + " is out of range for rank " +
          std::to_string(rank);
    return false;
  }
  bool allInt = true;
  for (const ConstVal *v : inputs)
    allInt &= v->isInt;
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (const ConstVal *v : inputs) {
    if (v->rank() != rank) {
      err = "Concat inputs " + shapeStr(first.shape) + " and " +
            shapeStr(v->shape) + " have different ranks";
      return false;
    }
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && v->shape[d] != first.shape[d]) {
        err = "Concat inputs " + shapeStr(first.shape) + " and " +
              shapeStr(v->shape) + " differ outside axis " +
              std::to_string(axis);
        return false;
      }
    shape[axis] += v->shape[axis];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  out = ConstVal();
  out.isInt = allInt;
  out.shape = shape;
  for (int64_t o = 0; o < outer; ++o)
    for (const ConstVal *v : inputs) {
      int64_t chunk = v->numel() / std::max<int64_t>(outer, 1);
      if (outer == 0)
        break;
      for (int64_t i = 0; i < chunk; ++i) {
        int64_t k = o * chunk + i;
        if (allInt)
          out.ints.push_back(v->ints[k]);
        else
          out.floats.push_back(float(v->at(k)));
      }
    }
  return true;
}

bool resolveSlice(const std::vector<int64_t> &shape,
                  const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &ends,
                  const std::vector<int64_t> &axesIn,
                  const std::vector<int64_t> &stepsIn,
                  std::vector<int64_t> &outStart, std::vector<int64_t> &outStep,
                  std::vector<int64_t> &outSize, std::string &err) {
  int64_t rank = shape.size();
  if (starts.size() != ends.size()) {
    err = "Slice starts and ends have different lengths";
    return false;
  }
  std::vector<int64_t> axes = axesIn, steps = stepsIn;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    err = "Slice starts, ends, axes and steps have different lengths";
    return false;
  }
  outStart.assign(rank, 0);
  outStep.assign(rank, 1);
  outSize = shape;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i];
    if (!normalizeAxis(axis, rank) || seen[axis]) {
      err = "Slice axis " + std::to_string(axes[i]) +
            " is out of range or repeated for rank " + std::to_string(rank);
      return false;
    }
    seen[axis] = true;
    int64_t dim = shape[axis], step = steps[i];
    if (step == 0) {
      err = "Slice step must not be 0";
      return false;
    }
    auto clampIdx = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v = v < -dim ? -1 - dim : v; // avoid overflow near INT64_MIN
      if (v < 0)
        v += dim;
      return std::clamp(v, lo, hi);
    };
    int64_t start, end;
    if (step > 0) {
      start = clampIdx(starts[i], 0, dim);
      end = clampIdx(ends[i], 0, dim);
    } else {
      start = clampIdx(starts[i], 0, dim - 1);
      end = clampIdx(ends[i], -1, dim - 1);
    }
    int64_t size = 0;
    if (step > 0 && end > start)
      size = (end - start + step - 1) / step;
    else if (step < 0 && end < start)
      size = (start - end + (-step) - 1) / (-step);
    outStart[axis] = start;
    outStep[axis] = step;
    outSize[axis] = size;
  }
  return true;
}

bool foldSlice(const ConstVal &data, const std::vector<int64_t> &starts,
               const std::vector<int64_t> &ends,
               const std::vector<int64_t> &axes,
               const std::vector<int64_t> &steps, ConstVal &out,
               std::string &err) {
  std::vector<int64_t> st, sp, sz;
  if (!resolveSlice(data.shape, starts, ends, axes, steps, st, sp, sz, err))
    return false;
  auto inStr = strides(data.shape);
  auto n = checkedNumel(sz);
  if (!n) {
    err = "Slice result is too large";
    return false;
  }
  out = ConstVal();
  out.isInt = data.isInt;
  out.shape = sz;
  std::vector<int64_t> coord(sz.size(), 0);
  for (int64_t i = 0; i < *n; ++i) {
    int64_t lin = 0;
    for (size_t d = 0; d < sz.size(); ++d)
      lin += (st[d] + coord[d] * sp[d]) * inStr[d];
    if (data.isInt)
      out.ints.push_back(data.ints[lin]);
    else
      out.floats.push_back(data.floats[lin]);
    for (int64_t d = int64_t(sz.size()) - 1; d >= 0; --d) {
      if (++coord[d] < sz[d])
        break;
      coord[d] = 0;
    }
  }
  return true;
}

bool foldTranspose(const ConstVal &data, const std::vector<int64_t> &perm,
                   ConstVal &out, std::string &err) {
  int64_t rank = data.rank();
  std::vector<bool> seen(rank, false);
  if (int64_t(perm.size()) != rank) {
    err = "Transpose perm has " + std::to_string(perm.size()) +
          " entries for rank " + std::to_string(rank);
    return false;
  }
  std::vector<int64_t> shape(rank);
  for (int64_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]]) {
      err = "Transpose perm " + shapeStr(perm) + " is not a permutation";
      return false;
    }
    seen[perm[i]] = true;
    shape[i] = data.shape[perm[i]];
  }
  auto inStr = strides(data.shape);
  out = ConstVal();
  out.isInt = data.isInt;
  out.shape = shape;
  std::vector<int64_t> coord(rank, 0);
  for (int64_t i = 0, n = data.numel(); i < n; ++i) {
    int64_t lin = 0;
    for (int64_t d = 0; d < rank; ++d)
      lin += coord[d] * inStr[perm[d]];
    if (data.isInt)
      out.ints.push_back(data.ints[lin]);
    else
      out.floats.push_back(data.floats[lin]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++coord[d] < shape[d])
        break;
      coord[d] = 0;
    }
  }
  return true;
}

bool foldRange(const ConstVal &start, const ConstVal &limit,
               const ConstVal &delta, ConstVal &out, std::string &err) {
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1) {
    err = "Range needs scalar start, limit and delta";
    return false;
  }
  double s = start.at(0), l = limit.at(0), d = delta.at(0);
  if (d == 0) {
    err = "Range delta must not be 0";
    return false;
  }
  double n = std::max(0.0, std::ceil((l - s) / d));
  if (!(n <= double(kMaxFoldElements))) {
    err = "Range result is too large to fold";
    return false;
  }
  out = ConstVal();
  out.isInt = start.isInt && limit.isInt && delta.isInt;
  out.shape = {int64_t(n)};
  for (int64_t i = 0; i < int64_t(n); ++i) {
    if (out.isInt)
      out.ints.push_back(start.ints[0] + i * delta.ints[0]);
    else
      out.floats.push_back(float(s + i * d));
  }
  return true;
}

bool reshapeTarget(const std::vector<int64_t> &inShape,
                   const std::vector<int64_t> &requested, bool allowZero,
                   std::vector<int64_t> &out, std::string &err) {
  out.clear();
  int64_t inferred = -1, known = 1;
  auto inNumel = checkedNumel(inShape, std::numeric_limits<int64_t>::max());
  if (!inNumel) {
    err = "input shape " + shapeStr(inShape) + " is invalid";
    return false;
  }
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t d = requested[i];
    if (d == 0 && !allowZero) {
      if (i >= inShape.size()) {
        err = "shape " + shapeStr(requested) + " copies dimension " +
              std::to_string(i) + " that input " + shapeStr(inShape) +
              " does not have";
        return false;
      }
      d = inShape[i];
    } else if (d == -1) {
      if (inferred >= 0) {
        err = "shape " + shapeStr(requested) + " has more than one -1";
        return false;
      }
      inferred = i;
      out.push_back(-1);
      continue;
    } else if (d < -1) {
      err = "shape " + shapeStr(requested) + " has a negative dimension";
      return false;
    }
    out.push_back(d);
    if (d != 0 && known > std::numeric_limits<int64_t>::max() / d) {
      err = "shape " + shapeStr(requested) + " is too large";
      return false;
    }
    known *= d;
  }
  if (inferred >= 0) {
    if (known == 0 || *inNumel % known) {
      err =
          "cannot reshape " + shapeStr(inShape) + " to " + shapeStr(requested);
      return false;
    }
    out[inferred] = *inNumel / known;
  } else if (known != *inNumel) {
    err = "cannot reshape " + shapeStr(inShape) + " (" +
          std::to_string(*inNumel) + " elements) to " + shapeStr(out);
    return false;
  }
  return true;
}

bool unsqueezeShape(const std::vector<int64_t> &inShape,
                    std::vector<int64_t> axes, std::vector<int64_t> &out,
                    std::string &err) {
  int64_t rank = inShape.size() + axes.size();
  std::vector<bool> isNew(rank, false);
  for (int64_t &a : axes) {
    if (!normalizeAxis(a, rank) || isNew[a]) {
      err = "Unsqueeze axes " + shapeStr(axes) + " are invalid for rank " +
            std::to_string(inShape.size());
      return false;
    }
    isNew[a] = true;
  }
  out.clear();
  size_t k = 0;
  for (int64_t i = 0; i < rank; ++i)
    out.push_back(isNew[i] ? 1 : inShape[k++]);
  return true;
}

bool squeezeShape(const std::vector<int64_t> &inShape,
                  std::vector<int64_t> axes, std::vector<int64_t> &out,
                  std::string &err) {
  int64_t rank = inShape.size();
  std::vector<bool> drop(rank, false);
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i)
      drop[i] = inShape[i] == 1;
  }
  for (int64_t a : axes) {
    int64_t n = a;
    if (!normalizeAxis(n, rank) || inShape[n] != 1) {
      err = "Squeeze axis " + std::to_string(a) +
            " is out of range or not of size 1 in " + shapeStr(inShape);
      return false;
    }
    drop[n] = true;
  }
  out.clear();
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      out.push_back(inShape[i]);
  return true;
}

} // namespace cnnc::constfold
