//===- ONNXMutator.cpp - structure-aware mutations of ONNX models ---------===//
//
// Mutates a ModelProto's structure. With keepValid, most mutations keep the
// model valid (see "Validity-keeping mutations" below); the others are
// hostile: dims (0, negative, huge, unknown),
// initializers (data type, size, duplicated, removed, external data outside
// the folder), nodes (dangling and cyclic inputs, op types, dropped and extra
// inputs), attributes (wrong types, huge or negative values) and the opset;
// with shapeBlowup also the attributes and inputs that size a result, near
// the 32-bit boundaries where products and sums overflow.
//
//===----------------------------------------------------------------------===//
#include "ONNXMutator.h"

#include "cnnc_onnx.pb.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

// libFuzzer's byte-level mutator; weak, so that the replay build (no
// libFuzzer) links.
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize)
    __attribute__((weak));

namespace {
int64_t oddValue(std::mt19937_64 &rng) {
  static const int64_t values[] = {0,
                                   -1,
                                   1,
                                   2,
                                   3,
                                   7,
                                   64,
                                   -(int64_t(1) << 31),
                                   int64_t(1) << 31,
                                   int64_t(1) << 40,
                                   int64_t(1) << 62,
                                   INT64_MAX,
                                   INT64_MIN};
  return values[rng() % (sizeof(values) / sizeof(values[0]))];
}

std::string someName(const onnx::GraphProto &g, std::mt19937_64 &rng) {
  switch (rng() % 4) {
  case 0:
    return "dangling_" + std::to_string(rng() % 4);
  case 1:
    if (g.initializer_size())
      return g.initializer(rng() % g.initializer_size()).name();
    [[fallthrough]];
  case 2:
    if (g.node_size()) {
      const onnx::NodeProto &n = g.node(rng() % g.node_size());
      if (n.output_size())
        return n.output(rng() % n.output_size()); // maybe a later node: a cycle
    }
    [[fallthrough]];
  default:
    return g.input_size() ? g.input(rng() % g.input_size()).name() : "";
  }
}

void mutateShape(onnx::ValueInfoProto &v, std::mt19937_64 &rng) {
  auto *shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
  if (shape->dim_size() == 0 || rng() % 5 == 0) {
    shape->add_dim()->set_dim_value(oddValue(rng));
    return;
  }
  auto *d = shape->mutable_dim(rng() % shape->dim_size());
  if (rng() % 4 == 0)
    d->set_dim_param("N");
  else
    d->set_dim_value(oddValue(rng));
}

void mutateTensor(onnx::GraphProto &g, std::mt19937_64 &rng) {
  if (!g.initializer_size())
    return;
  onnx::TensorProto &t = *g.mutable_initializer(rng() % g.initializer_size());
  switch (rng() % 8) {
  case 0:
    if (t.dims_size())
      t.set_dims(rng() % t.dims_size(), oddValue(rng));
    else
      t.add_dims(oddValue(rng));
    break;
  case 1:
    t.set_data_type(static_cast<int32_t>(rng() % 20)); // 0, undefined, 17+
    break;
  case 2:
    if (!t.raw_data().empty())
      t.mutable_raw_data()->resize(rng() % t.raw_data().size());
    else
      t.clear_float_data();
    break;
  case 3:
    *g.add_initializer() = t; // duplicated name
    break;
  case 4: {
    std::swap(*g.mutable_initializer(rng() % g.initializer_size()),
              *g.mutable_initializer(g.initializer_size() - 1));
    g.mutable_initializer()->RemoveLast();
    break;
  }
  default: {
    static const char *const locations[] = {
        "../../etc/passwd", "/etc/passwd", "a/../../b", "data.bin", "",
        "lit_conv_bias_external.onnx.data"};
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    t.clear_raw_data();
    t.clear_external_data();
    auto *e = t.add_external_data();
    e->set_key("location");
    e->set_value(locations[rng() % 6]);
    if (rng() % 2) {
      auto *o = t.add_external_data();
      o->set_key(rng() % 2 ? "offset" : "length");
      o->set_value(std::to_string(oddValue(rng)));
    }
    break;
  }
  }
}

void mutateNode(onnx::GraphProto &g, std::mt19937_64 &rng) {
  if (!g.node_size())
    return;
  onnx::NodeProto &n = *g.mutable_node(rng() % g.node_size());
  static const char *const ops[] = {
      "Conv",    "Relu",        "Add",     "Mul",       "Gemm",
      "Reshape", "Concat",      "MaxPool", "AveragePool", "BatchNormalization",
      "Flatten", "Transpose",   "Split",   "Slice",     "Pad",
      "Softmax", "ReduceMean",  "Sigmoid", "Constant",  "NoSuchOp"};
  switch (rng() % 7) {
  case 0:
    if (n.input_size())
      n.set_input(rng() % n.input_size(), someName(g, rng));
    break;
  case 1:
    if (n.output_size() && n.input_size())
      n.set_input(rng() % n.input_size(), n.output(0)); // a self-cycle
    break;
  case 2:
    n.set_op_type(ops[rng() % (sizeof(ops) / sizeof(ops[0]))]);
    break;
  case 3:
    if (n.input_size())
      n.mutable_input()->RemoveLast();
    break;
  case 4:
    n.add_input(someName(g, rng));
    break;
  case 5:
    *g.add_node() = n; // duplicated outputs
    break;
  default: {
    if (!n.attribute_size()) {
      auto *a = n.add_attribute();
      a->set_name(rng() % 2 ? "axis" : "kernel_shape");
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(oddValue(rng));
      break;
    }
    onnx::AttributeProto &a = *n.mutable_attribute(rng() % n.attribute_size());
    switch (rng() % 5) {
    case 0:
      a.set_type(static_cast<onnx::AttributeProto::AttributeType>(rng() % 15));
      break;
    case 1:
      a.set_i(oddValue(rng));
      break;
    case 2:
      if (a.ints_size())
        a.set_ints(rng() % a.ints_size(), oddValue(rng));
      else
        a.add_ints(oddValue(rng));
      break;
    case 3:
      a.set_f(rng() % 2 ? -1e30f : 0.0f);
      break;
    default:
      a.clear_ints();
      break;
    }
  }
  }
}

/// Sizes near the 32-bit boundaries (2^30..2^33: an int overflows, a
/// product of two overflows int64 soon after), and the degenerate 0 and -1.
int64_t blowupValue(std::mt19937_64 &rng) {
  static const int64_t values[] = {0,
                                   -1,
                                   (int64_t(1) << 30) - 1,
                                   int64_t(1) << 30,
                                   (int64_t(1) << 30) + 1,
                                   (int64_t(1) << 31) - 1,
                                   int64_t(1) << 31,
                                   (int64_t(1) << 31) + 1,
                                   int64_t(1) << 32,
                                   (int64_t(1) << 32) + 8,
                                   (int64_t(1) << 33) - 1,
                                   int64_t(1) << 33,
                                   65536,
                                   3};
  return values[rng() % (sizeof(values) / sizeof(values[0]))];
}

/// Sets element `i` of `t` (raw or typed data, integer or float) to `v`.
void setElement(onnx::TensorProto &t, int64_t i, int64_t v) {
  auto setRaw = [&](const void *p, size_t bytes) {
    std::string &raw = *t.mutable_raw_data();
    if (raw.size() >= (uint64_t(i) + 1) * bytes)
      std::memcpy(&raw[i * bytes], p, bytes);
  };
  switch (t.data_type()) {
  case onnx::TensorProto::INT64:
    if (!t.raw_data().empty())
      setRaw(&v, 8);
    else if (i < t.int64_data_size())
      t.set_int64_data(static_cast<int>(i), v);
    break;
  case onnx::TensorProto::INT32: {
    int32_t w = static_cast<int32_t>(v);
    if (!t.raw_data().empty())
      setRaw(&w, 4);
    else if (i < t.int32_data_size())
      t.set_int32_data(static_cast<int>(i), w);
    break;
  }
  case onnx::TensorProto::FLOAT: {
    float f = static_cast<float>(v);
    if (!t.raw_data().empty())
      setRaw(&f, 4);
    else if (i < t.float_data_size())
      t.set_float_data(static_cast<int>(i), f);
    break;
  }
  default:
    break;
  }
}

/// The element count of a tensor small enough to edit (0 otherwise, also
/// for dims that would overflow: they come from earlier mutations).
int64_t elementCount(const onnx::TensorProto &t) {
  const int64_t cap = int64_t(1) << 20;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d <= 0 || d > cap || n > cap)
      return 0;
    n *= d;
  }
  return n;
}

/// The tensor behind a node's input `name`: an initializer, or the value of
/// the Constant node that makes it (exporters write shapes so).
onnx::TensorProto *tensorNamed(onnx::GraphProto &g, const std::string &name) {
  for (onnx::TensorProto &t : *g.mutable_initializer())
    if (t.name() == name)
      return &t;
  for (onnx::NodeProto &n : *g.mutable_node())
    if (n.op_type() == "Constant" && n.output_size() && n.output(0) == name)
      for (onnx::AttributeProto &a : *n.mutable_attribute())
        if (a.has_t())
          return a.mutable_t();
  return nullptr;
}

/// One shape-blowup mutation of a node: a size attribute, a shape-carrying
/// input tensor, or Concat's input count.
void blowupNode(onnx::GraphProto &g, std::mt19937_64 &rng) {
  if (!g.node_size())
    return;
  onnx::NodeProto &n = *g.mutable_node(rng() % g.node_size());
  switch (rng() % 4) {
  case 0: { // an attribute that sizes the result
    static const char *const names[] = {
        "kernel_shape", "pads",      "strides", "dilations", "group",
        "output_padding", "output_shape", "axis", "axes",  "sizes"};
    const char *name = names[rng() % (sizeof(names) / sizeof(names[0]))];
    onnx::AttributeProto *a = nullptr;
    for (onnx::AttributeProto &x : *n.mutable_attribute())
      if (x.name() == name)
        a = &x;
    if (!a && n.attribute_size() && rng() % 2)
      a = n.mutable_attribute(rng() % n.attribute_size());
    if (!a) {
      a = n.add_attribute();
      a->set_name(name);
      bool scalar = !std::strcmp(name, "group") || !std::strcmp(name, "axis");
      a->set_type(scalar ? onnx::AttributeProto::INT
                         : onnx::AttributeProto::INTS);
      if (!scalar)
        for (int k = 0; k < 2 + int(rng() % 3); ++k)
          a->add_ints(1);
    }
    if (a->type() == onnx::AttributeProto::INT)
      a->set_i(blowupValue(rng));
    else if (a->ints_size())
      a->set_ints(rng() % a->ints_size(), blowupValue(rng));
    else
      a->add_ints(blowupValue(rng));
    break;
  }
  case 1: { // a shape-carrying input (Resize's scales/sizes, Pad's pads,
            // Expand/Reshape/Tile/ConstantOfShape's shape, Slice's ends)
    if (n.input_size() == 0)
      break;
    int which = n.input_size() > 1 ? 1 + int(rng() % (n.input_size() - 1)) : 0;
    onnx::TensorProto *t = tensorNamed(g, n.input(which));
    if (!t)
      break;
    int64_t count = elementCount(*t);
    if (count > 0)
      setElement(*t, static_cast<int64_t>(rng() % count), blowupValue(rng));
    break;
  }
  case 2: { // Concat with many inputs (a sum of sizes)
    if (n.input_size() == 0)
      break;
    static const int copies[] = {1, 7, 64, 1000};
    std::string in = n.input(rng() % n.input_size());
    for (int k = copies[rng() % 4]; k > 0; --k)
      n.add_input(in);
    break;
  }
  default: { // an op that grows its input, in place of this node's
    static const char *const ops[] = {
        "Resize", "Pad",      "Expand", "ConvTranspose", "Concat",
        "Tile",   "Upsample", "Conv",   "MaxPool",       "AveragePool"};
    n.set_op_type(ops[rng() % (sizeof(ops) / sizeof(ops[0]))]);
    break;
  }
  }
}
//===----------------------------------------------------------------------===//
// Validity-keeping mutations: the model stays one the importer accepts most
// of the time (attributes within each op's range, dims changed consistently
// in the tensors that share them, nodes inserted, deleted and swapped from the
// table of ops the importer supports, dtypes converted with their data), so
// that the mutants reach the interpreter and the training step instead of
// ending in an import error. Edge values (0, -1, huge) still come, rarely.
//===----------------------------------------------------------------------===//

/// The bytes per element of the dtypes whose data these mutations rewrite
/// (0: any other, left alone).
size_t elementBytes(int32_t dt) {
  switch (dt) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT16:
    return 2;
  default:
    return 0;
  }
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           man = h & 0x3ff, bits;
  if (exp == 0) { // zero or subnormal: man * 2^-24
    float f = std::ldexp(float(man), -24);
    return sign ? -f : f;
  }
  if (exp == 31)
    bits = sign | 0x7f800000u | (man << 13);
  else
    bits = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  int32_t exp = int32_t((bits >> 23) & 0xff) - 127 + 15;
  uint32_t man = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff) // inf, nan
    return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31)
    return uint16_t(sign | 0x7c00);
  if (exp <= 0)
    return sign; // flushed to zero: values here are small weights anyway
  return uint16_t(sign | (exp << 10) | (man >> 13));
}

/// A tensor's values (any of elementBytes' dtypes, raw or typed), or false
/// when they cannot be read: external, another dtype, or data that does not
/// match the dims (an earlier mutation's doing).
bool readValues(const onnx::TensorProto &t, std::vector<double> &out) {
  size_t bytes = elementBytes(t.data_type());
  int64_t n = elementCount(t);
  if (!bytes || t.data_location() == onnx::TensorProto::EXTERNAL ||
      (n == 0 && t.dims_size()) || n > (int64_t(1) << 20))
    return false;
  if (t.dims_size() == 0)
    n = 1;
  out.assign(size_t(n), 0.0);
  if (!t.raw_data().empty()) {
    if (t.raw_data().size() != size_t(n) * bytes)
      return false;
    const char *p = t.raw_data().data();
    for (int64_t i = 0; i < n; ++i, p += bytes) {
      switch (t.data_type()) {
      case onnx::TensorProto::FLOAT: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case onnx::TensorProto::INT32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        out[i] = v;
        break;
      }
      case onnx::TensorProto::DOUBLE:
        std::memcpy(&out[i], p, 8);
        break;
      case onnx::TensorProto::INT64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        out[i] = double(v);
        break;
      }
      default: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = halfToFloat(h);
        break;
      }
      }
    }
    return true;
  }
  auto take = [&](const auto &field) {
    if (field.size() != n)
      return false;
    for (int64_t i = 0; i < n; ++i)
      out[i] = double(field.Get(int(i)));
    return true;
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    return take(t.float_data());
  case onnx::TensorProto::DOUBLE:
    return take(t.double_data());
  case onnx::TensorProto::INT64:
    return take(t.int64_data());
  case onnx::TensorProto::INT32:
    return take(t.int32_data());
  default: // float16 travels in int32_data as bits
    if (t.int32_data_size() != n)
      return false;
    for (int64_t i = 0; i < n; ++i)
      out[i] = halfToFloat(uint16_t(t.int32_data(int(i))));
    return true;
  }
}

/// Writes `values` as t's raw data in dtype `dt` (the typed fields cleared).
void writeValues(onnx::TensorProto &t, int32_t dt,
                 const std::vector<double> &values) {
  size_t bytes = elementBytes(dt);
  std::string raw(values.size() * bytes, '\0');
  char *p = raw.empty() ? nullptr : &raw[0];
  for (double v : values) {
    switch (dt) {
    case onnx::TensorProto::FLOAT: {
      float f = float(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case onnx::TensorProto::INT32: {
      int32_t w = std::isfinite(v) && std::fabs(v) < 2e9 ? int32_t(v) : 0;
      std::memcpy(p, &w, 4);
      break;
    }
    case onnx::TensorProto::DOUBLE:
      std::memcpy(p, &v, 8);
      break;
    case onnx::TensorProto::INT64: {
      int64_t w = std::isfinite(v) && std::fabs(v) < 9e18 ? int64_t(v) : 0;
      std::memcpy(p, &w, 8);
      break;
    }
    default: {
      uint16_t h = floatToHalf(float(v));
      std::memcpy(p, &h, 2);
      break;
    }
    }
    p += bytes;
  }
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.set_data_type(dt);
  t.set_raw_data(raw);
}

/// Resizes axis `axis` of `t` to `size`, its values repeated or cut so the
/// tensor still holds its shape's elements; false when t cannot be edited.
bool resizeAxis(onnx::TensorProto &t, int axis, int64_t size) {
  std::vector<double> in;
  if (axis < 0 || axis >= t.dims_size() || size < 1 || !readValues(t, in))
    return false;
  int64_t outer = 1, inner = 1, old = t.dims(axis);
  for (int i = 0; i < axis; ++i)
    outer *= t.dims(i);
  for (int i = axis + 1; i < t.dims_size(); ++i)
    inner *= t.dims(i);
  if (outer * size * inner > (int64_t(1) << 20))
    return false;
  std::vector<double> out(size_t(outer * size * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < size; ++a)
      for (int64_t i = 0; i < inner; ++i)
        out[size_t((o * size + a) * inner + i)] =
            in[size_t((o * old + a % old) * inner + i)];
  t.set_dims(axis, size);
  writeValues(t, t.data_type(), out);
  return true;
}

onnx::TensorProto *initializerNamed(onnx::GraphProto &g,
                                    const std::string &name) {
  for (onnx::TensorProto &t : *g.mutable_initializer())
    if (t.name() == name)
      return &t;
  return nullptr;
}

const onnx::AttributeProto *attr(const onnx::NodeProto &n, const char *name) {
  for (const onnx::AttributeProto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

bool isOneOf(const std::string &s, std::initializer_list<const char *> set) {
  for (const char *x : set)
    if (s == x)
      return true;
  return false;
}

/// Unary ops the importer supports whose result has the input's shape.
const char *const kUnaryOps[] = {
    "Relu",    "Sigmoid", "Tanh",     "LeakyRelu", "Elu",  "Selu",
    "Softplus", "Mish",   "Gelu",     "HardSwish", "HardSigmoid",
    "Neg",     "Identity", "Dropout", "Erf",       "Floor", "Exp",
    "Sqrt",    "Reciprocal", "Log",   "Ceil"};

bool isUnary(const std::string &op) {
  for (const char *u : kUnaryOps)
    if (op == u)
      return true;
  return false;
}

/// Ops whose result keeps the channel count of their first input.
bool keepsChannels(const onnx::NodeProto &n) {
  return isUnary(n.op_type()) ||
         isOneOf(n.op_type(), {"MaxPool", "AveragePool", "BatchNormalization",
                               "InstanceNormalization", "PRelu", "Pad",
                               "Resize", "Upsample", "Clip"});
}

int producerOf(const onnx::GraphProto &g, const std::string &name) {
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string &o : g.node(i).output())
      if (o == name)
        return i;
  return -1;
}

/// The channel count (dim 1) of the NCHW value `name`, traced back through
/// channel-keeping ops to a Conv's weight or a graph input; 0 when unknown.
int64_t channelsOf(onnx::GraphProto &g, std::string name) {
  for (int depth = 0; depth < 64; ++depth) {
    int p = producerOf(g, name);
    if (p < 0) {
      for (const onnx::ValueInfoProto &v : g.input())
        if (v.name() == name) {
          const auto &s = v.type().tensor_type().shape();
          if (s.dim_size() == 4 && s.dim(1).dim_value() > 0)
            return s.dim(1).dim_value();
        }
      return 0;
    }
    const onnx::NodeProto &n = g.node(p);
    if (n.op_type() == "Conv" && n.input_size() > 1) {
      onnx::TensorProto *w = initializerNamed(g, n.input(1));
      return w && w->dims_size() == 4 ? w->dims(0) : 0;
    }
    if (!keepsChannels(n) || n.input_size() == 0)
      return 0;
    name = n.input(0);
  }
  return 0;
}

/// After the channel count of `name` became `c`: resizes the tensors of the
/// consumers that carry it (BatchNormalization's parameters, the next Conv's
/// weight), following channel-keeping ops.
void propagateChannels(onnx::GraphProto &g, const std::string &name, int64_t c,
                       int depth = 0) {
  if (depth > 32)
    return;
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto &n = *g.mutable_node(i);
    if (n.input_size() == 0 || n.input(0) != name)
      continue;
    if (n.op_type() == "Conv" && n.input_size() > 1) {
      const onnx::AttributeProto *group = attr(n, "group");
      if (onnx::TensorProto *w = initializerNamed(g, n.input(1)))
        if (!group || group->i() == 1)
          resizeAxis(*w, 1, c);
      continue;
    }
    if (isOneOf(n.op_type(), {"BatchNormalization", "InstanceNormalization",
                              "PRelu"})) {
      for (int k = 1; k < n.input_size(); ++k)
        if (onnx::TensorProto *p = initializerNamed(g, n.input(k)))
          if (p->dims_size() >= 1)
            resizeAxis(*p, 0, c);
    }
    if (keepsChannels(n) && n.output_size())
      propagateChannels(g, n.output(0), c, depth + 1);
  }
}

std::string freshName(const onnx::GraphProto &g, std::mt19937_64 &rng) {
  for (;;) {
    std::string name = "fz" + std::to_string(rng() % 100000);
    bool used = false;
    for (const onnx::NodeProto &n : g.node())
      for (const std::string &o : n.output())
        used |= o == name;
    for (const onnx::TensorProto &t : g.initializer())
      used |= t.name() == name;
    for (const onnx::ValueInfoProto &v : g.input())
      used |= v.name() == name;
    if (!used)
      return name;
  }
}

/// A value computed by the graph (a node output or a graph input that is no
/// initializer), or "" when there is none.
std::string someDataValue(onnx::GraphProto &g, std::mt19937_64 &rng) {
  std::vector<std::string> values;
  for (const onnx::ValueInfoProto &v : g.input())
    if (!initializerNamed(g, v.name()))
      values.push_back(v.name());
  for (const onnx::NodeProto &n : g.node())
    if (n.op_type() != "Constant")
      for (const std::string &o : n.output())
        values.push_back(o);
  return values.empty() ? "" : values[rng() % values.size()];
}

void renameUses(onnx::GraphProto &g, const std::string &from,
                const std::string &to, int exceptNode) {
  for (int i = 0; i < g.node_size(); ++i) {
    if (i == exceptNode)
      continue;
    for (std::string &in : *g.mutable_node(i)->mutable_input())
      if (in == from)
        in = to;
  }
  for (onnx::ValueInfoProto &o : *g.mutable_output())
    if (o.name() == from)
      o.set_name(to);
}

onnx::TensorProto &addWeight(onnx::GraphProto &g, const std::string &name,
                             std::vector<int64_t> dims) {
  onnx::TensorProto &t = *g.add_initializer();
  t.set_name(name);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = double((i * 37) % 11) / 10 - 0.5;
  writeValues(t, onnx::TensorProto::FLOAT, v);
  return t;
}

void setInts(onnx::NodeProto &n, const char *name, std::vector<int64_t> v) {
  onnx::AttributeProto &a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a.add_ints(x);
}

/// Inserts a node after a value and moves the value's uses to its result:
/// a shape-keeping unary op, a pooling, or (where the channel count is
/// known) a BatchNormalization or a 3x3 / 1x1 convolution.
void insertNode(onnx::GraphProto &g, std::mt19937_64 &rng) {
  std::string in = someDataValue(g, rng);
  if (in.empty())
    return;
  std::string out = freshName(g, rng);
  onnx::NodeProto n;
  n.add_input(in);
  n.add_output(out);
  // A weight of c x c x 3 x 3 stays small (the input's max_len).
  int64_t c = channelsOf(g, in);
  if (c > 16)
    c = 0;
  switch (rng() % (c > 0 ? 6 : 3)) {
  case 0:
  case 1:
    n.set_op_type(kUnaryOps[rng() % (sizeof(kUnaryOps) / sizeof(char *))]);
    break;
  case 2: {
    n.set_op_type(rng() % 2 ? "MaxPool" : "AveragePool");
    bool keep = rng() % 2;
    setInts(n, "kernel_shape", {keep ? 3 : 2, keep ? 3 : 2});
    setInts(n, "strides", {keep ? 1 : 2, keep ? 1 : 2});
    if (keep)
      setInts(n, "pads", {1, 1, 1, 1});
    break;
  }
  case 3: {
    n.set_op_type("BatchNormalization");
    for (const char *part : {"_scale", "_bias", "_mean", "_var"}) {
      onnx::TensorProto &t = addWeight(g, out + part, {c});
      if (!std::strcmp(part, "_var"))
        writeValues(t, onnx::TensorProto::FLOAT,
                    std::vector<double>(size_t(c), 1.0));
      n.add_input(out + part);
    }
    break;
  }
  default: {
    n.set_op_type("Conv");
    int64_t k = rng() % 2 ? 3 : 1;
    addWeight(g, out + "_w", {c, c, k, k});
    n.add_input(out + "_w");
    if (rng() % 2) {
      addWeight(g, out + "_b", {c});
      n.add_input(out + "_b");
    }
    setInts(n, "kernel_shape", {k, k});
    setInts(n, "pads", {k / 2, k / 2, k / 2, k / 2});
    break;
  }
  }
  // Insert before the first use so the node order stays topological.
  int at = g.node_size();
  for (int i = 0; i < g.node_size() && at == g.node_size(); ++i)
    for (const std::string &x : g.node(i).input())
      if (x == in) {
        at = i;
        break;
      }
  renameUses(g, in, out, -1);
  // A graph input used as a graph output keeps its name as the output.
  *g.add_node() = n;
  for (int i = g.node_size() - 1; i > at; --i)
    g.mutable_node()->SwapElements(i, i - 1);
}

/// Deletes a node with one result, its uses moved to its first input
/// (shape-keeping nodes first: those leave a valid model).
void deleteNode(onnx::GraphProto &g, std::mt19937_64 &rng) {
  std::vector<int> candidates, keeping;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (n.input_size() == 0 || n.output_size() != 1 || n.input(0).empty())
      continue;
    candidates.push_back(i);
    if (keepsChannels(n))
      keeping.push_back(i);
  }
  std::vector<int> &from = !keeping.empty() && rng() % 4 ? keeping : candidates;
  if (from.empty())
    return;
  int i = from[rng() % from.size()];
  std::string in = g.node(i).input(0), out = g.node(i).output(0);
  bool isGraphOutput = false;
  for (const onnx::ValueInfoProto &o : g.output())
    isGraphOutput |= o.name() == out;
  if (isGraphOutput && producerOf(g, in) < 0)
    return; // the output would be a graph input or an initializer
  renameUses(g, out, in, i);
  g.mutable_node()->DeleteSubrange(i, 1);
}

/// Replaces an op by one of its kind (same arity and shape rule), or swaps
/// the ops of two unary nodes in a chain.
void swapOp(onnx::GraphProto &g, std::mt19937_64 &rng) {
  if (!g.node_size())
    return;
  static const std::vector<std::vector<const char *>> kinds = {
      {"MaxPool", "AveragePool"},
      {"GlobalAveragePool", "GlobalMaxPool"},
      {"Add", "Sub", "Mul", "Div", "Max", "Min"},
      {"ReduceMean", "ReduceMax", "ReduceSum"},
      {"Softmax", "LogSoftmax"},
      {"Gemm", "MatMul"}};
  onnx::NodeProto &n = *g.mutable_node(rng() % g.node_size());
  if (isUnary(n.op_type())) {
    if (rng() % 2) {
      n.set_op_type(kUnaryOps[rng() % (sizeof(kUnaryOps) / sizeof(char *))]);
      n.clear_attribute();
      return;
    }
    for (onnx::NodeProto &m : *g.mutable_node())
      if (&m != &n && isUnary(m.op_type()) && m.input_size() &&
          n.output_size() && m.input(0) == n.output(0)) {
        std::swap(*n.mutable_op_type(), *m.mutable_op_type());
        n.mutable_attribute()->Swap(m.mutable_attribute());
        return;
      }
    return;
  }
  for (const auto &kind : kinds)
    for (const char *op : kind)
      if (n.op_type() == op) {
        n.set_op_type(kind[rng() % kind.size()]);
        return;
      }
}

/// An op-aware value for a known attribute; an edge value one time in six.
void tweakAttribute(onnx::GraphProto &g, std::mt19937_64 &rng) {
  if (!g.node_size())
    return;
  onnx::NodeProto &n = *g.mutable_node(rng() % g.node_size());
  if (n.attribute_size() == 0) {
    // Give the node an attribute its op reads.
    if (isOneOf(n.op_type(), {"Conv", "MaxPool", "AveragePool"}))
      setInts(n, rng() % 2 ? "strides" : "dilations", {2, 2});
    else if (isOneOf(n.op_type(), {"Softmax", "LogSoftmax", "Flatten",
                                   "Concat"})) {
      onnx::AttributeProto &a = *n.add_attribute();
      a.set_name("axis");
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(int64_t(rng() % 4));
    }
    return;
  }
  onnx::AttributeProto &a = *n.mutable_attribute(rng() % n.attribute_size());
  const std::string &name = a.name();
  bool edge = rng() % 6 == 0;
  auto pick = [&](std::initializer_list<int64_t> values) {
    if (edge) {
      static const int64_t edges[] = {0, -1, INT64_MAX, int64_t(1) << 31,
                                      int64_t(1) << 30};
      return edges[rng() % 5];
    }
    return values.begin()[rng() % values.size()];
  };
  auto setOne = [&](int64_t v) {
    if (a.type() == onnx::AttributeProto::INTS) {
      if (a.ints_size())
        a.set_ints(int(rng() % a.ints_size()), v);
      else
        a.add_ints(v);
    } else {
      a.set_i(v);
    }
  };
  if (name == "kernel_shape")
    setOne(pick({1, 2, 3, 5, 7}));
  else if (name == "strides")
    setOne(pick({1, 1, 2, 3}));
  else if (name == "dilations")
    setOne(pick({1, 1, 2, 3}));
  else if (name == "pads")
    setOne(pick({0, 0, 1, 2, 3}));
  else if (name == "output_padding")
    setOne(pick({0, 1}));
  else if (name == "group")
    setOne(pick({1, 2, 3, 4, 8}));
  else if (name == "axis" || name == "axes")
    setOne(pick({-4, -3, -2, -1, 0, 1, 2, 3}));
  else if (isOneOf(name, {"keepdims", "ceil_mode", "count_include_pad",
                          "transA", "transB", "storage_order"}))
    setOne(pick({0, 1}));
  else if (name == "perm" && a.ints_size() > 1) {
    std::vector<int64_t> p(a.ints().begin(), a.ints().end());
    std::shuffle(p.begin(), p.end(), rng);
    for (int i = 0; i < a.ints_size(); ++i)
      a.set_ints(i, p[size_t(i)]);
  } else if (a.type() == onnx::AttributeProto::FLOAT) {
    static const float floats[] = {1e-5f, 0.1f, 0.5f, 0.9f, 1.0f, 2.0f,
                                   0.0f,  -1.0f, 1e30f, 1e-30f};
    a.set_f(floats[rng() % (edge ? 10 : 6)]);
  } else if (a.type() == onnx::AttributeProto::STRING) {
    static const char *const strings[] = {
        "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID",   "nearest",
        "linear", "constant",   "reflect",    "edge",    "tanh",
        "none",   "asymmetric", "half_pixel", "floor",   "round_prefer_floor"};
    a.set_s(strings[rng() % 15]);
  } else if (a.type() == onnx::AttributeProto::INT) {
    a.set_i(pick({0, 1, 2, 3}));
  } else if (a.type() == onnx::AttributeProto::INTS && a.ints_size()) {
    setOne(pick({0, 1, 2, 3}));
  }
}

/// Dims changed consistently: a spatial or batch dim of a graph input, or
/// a channel count (a Conv's output channels or an input's) with the
/// tensors that carry it (bias, BatchNormalization's parameters, the next
/// Conv's weight).
void resizeDims(onnx::GraphProto &g, std::mt19937_64 &rng) {
  static const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 17, 32};
  int64_t s = sizes[rng() % 10];
  switch (rng() % 3) {
  case 0: { // a graph input's dim (N is --batch's; H and W change freely)
    std::vector<onnx::ValueInfoProto *> inputs;
    for (onnx::ValueInfoProto &v : *g.mutable_input())
      if (!initializerNamed(g, v.name()) &&
          v.type().tensor_type().shape().dim_size())
        inputs.push_back(&v);
    if (inputs.empty())
      return;
    auto *shape = inputs[rng() % inputs.size()]
                      ->mutable_type()
                      ->mutable_tensor_type()
                      ->mutable_shape();
    int rank = shape->dim_size();
    int d = rank > 2 ? 2 + int(rng() % (rank - 2)) : int(rng() % rank);
    shape->mutable_dim(d)->set_dim_value(s);
    break;
  }
  case 1: { // a Conv's output channels
    std::vector<int> convs;
    for (int i = 0; i < g.node_size(); ++i)
      if (g.node(i).op_type() == "Conv" && g.node(i).input_size() > 1 &&
          g.node(i).output_size())
        convs.push_back(i);
    if (convs.empty())
      return;
    onnx::NodeProto &n = *g.mutable_node(convs[rng() % convs.size()]);
    const onnx::AttributeProto *group = attr(n, "group");
    onnx::TensorProto *w = initializerNamed(g, n.input(1));
    if ((group && group->i() != 1) || !w || !resizeAxis(*w, 0, s))
      return;
    if (n.input_size() > 2)
      if (onnx::TensorProto *b = initializerNamed(g, n.input(2)))
        resizeAxis(*b, 0, s);
    propagateChannels(g, n.output(0), s);
    break;
  }
  default: { // an NCHW input's channels
    for (onnx::ValueInfoProto &v : *g.mutable_input()) {
      auto *shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
      if (initializerNamed(g, v.name()) || shape->dim_size() != 4)
        continue;
      shape->mutable_dim(1)->set_dim_value(s);
      propagateChannels(g, v.name(), s);
      break;
    }
    break;
  }
  }
}

/// Another dtype for a graph input or an initializer, its data converted.
void changeDtype(onnx::GraphProto &g, std::mt19937_64 &rng) {
  static const int32_t floats[] = {onnx::TensorProto::FLOAT,
                                   onnx::TensorProto::FLOAT16,
                                   onnx::TensorProto::DOUBLE};
  int32_t dt = floats[rng() % 3];
  if (rng() % 2 && g.input_size()) {
    onnx::ValueInfoProto &v = *g.mutable_input(rng() % g.input_size());
    v.mutable_type()->mutable_tensor_type()->set_elem_type(
        rng() % 8 ? dt : onnx::TensorProto::INT64);
    return;
  }
  if (!g.initializer_size())
    return;
  onnx::TensorProto &t = *g.mutable_initializer(rng() % g.initializer_size());
  std::vector<double> v;
  if (!readValues(t, v))
    return;
  bool isFloat = t.data_type() == onnx::TensorProto::FLOAT ||
                 t.data_type() == onnx::TensorProto::FLOAT16 ||
                 t.data_type() == onnx::TensorProto::DOUBLE;
  if (isFloat)
    writeValues(t, dt, v);
  else // integers (shapes, axes) stay integers, in the other width
    writeValues(t,
                t.data_type() == onnx::TensorProto::INT64
                    ? onnx::TensorProto::INT32
                    : onnx::TensorProto::INT64,
                v);
}

void validMutation(onnx::ModelProto &m, std::mt19937_64 &rng) {
  onnx::GraphProto &g = *m.mutable_graph();
  switch (rng() % 12) {
  case 0:
  case 1:
  case 2:
    tweakAttribute(g, rng);
    break;
  case 3:
  case 4:
    resizeDims(g, rng);
    break;
  case 5:
  case 6:
    insertNode(g, rng);
    break;
  case 7:
    deleteNode(g, rng);
    break;
  case 8:
  case 9:
    swapOp(g, rng);
    break;
  case 10:
    changeDtype(g, rng);
    break;
  default: {
    static const int64_t opsets[] = {11, 13, 17, 18};
    if (m.opset_import_size())
      m.mutable_opset_import(0)->set_version(opsets[rng() % 4]);
    break;
  }
  }
}

} // namespace

size_t cnnc::fuzz::mutateONNXModel(uint8_t *data, size_t size, size_t maxSize,
                                   unsigned seed,
                                   const ONNXMutatorOptions &options) {
  std::mt19937_64 rng(seed);
  onnx::ModelProto m;
  // Bytes that are not a model, and one mutation in eight: libFuzzer's own.
  unsigned kind = rng() % 8;
  if ((kind == 0 || !m.ParseFromArray(data, static_cast<int>(size))) &&
      LLVMFuzzerMutate)
    return LLVMFuzzerMutate(data, size, maxSize);
  onnx::GraphProto &g = *m.mutable_graph();
  // With keepValid, five in eight are validity-keeping; the rest (and all
  // without it) the hostile mutations below.
  bool valid = options.keepValid && kind <= 5;
  for (int k = 1 + rng() % (valid ? 3 : 2); valid && k > 0; --k)
    validMutation(m, rng);
  for (int k = valid ? 0 : 1 + rng() % 2; k > 0; --k) {
    switch (rng() % (options.shapeBlowup ? 9 : 6)) {
    case 0:
      if (g.input_size())
        mutateShape(*g.mutable_input(rng() % g.input_size()), rng);
      break;
    case 1:
      if (g.value_info_size())
        mutateShape(*g.mutable_value_info(rng() % g.value_info_size()), rng);
      else if (g.output_size())
        mutateShape(*g.mutable_output(rng() % g.output_size()), rng);
      break;
    case 2:
      mutateTensor(g, rng);
      break;
    case 3:
    case 4:
      mutateNode(g, rng);
      break;
    case 6:
    case 7:
    case 8:
      blowupNode(g, rng);
      break;
    default: {
      static const int64_t opsets[] = {1, 6, 7, 11, 13, 17, 18, 21, 99, -1};
      if (!m.opset_import_size())
        m.add_opset_import();
      m.mutable_opset_import(0)->set_version(opsets[rng() % 10]);
      break;
    }
    }
  }
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate ? LLVMFuzzerMutate(data, size, maxSize) : size;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
