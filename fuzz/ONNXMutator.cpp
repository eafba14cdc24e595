//===- ONNXMutator.cpp - structure-aware mutations of ONNX models ---------===//
//
// Mutates a ModelProto's structure: dims (0, negative, huge, unknown),
// initializers (data type, size, duplicated, removed, external data outside
// the folder), nodes (dangling and cyclic inputs, op types, dropped and extra
// inputs), attributes (wrong types, huge or negative values) and the opset;
// with shapeBlowup also the attributes and inputs that size a result, near
// the 32-bit boundaries where products and sums overflow.
//
//===----------------------------------------------------------------------===//
#include "ONNXMutator.h"

#include "cnnc_onnx.pb.h"

#include <cstring>
#include <random>
#include <string>

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
} // namespace

size_t cnnc::fuzz::mutateONNXModel(uint8_t *data, size_t size, size_t maxSize,
                                   unsigned seed,
                                   const ONNXMutatorOptions &options) {
  std::mt19937_64 rng(seed);
  onnx::ModelProto m;
  // Bytes that are not a model, and one mutation in eight: libFuzzer's own.
  if ((rng() % 8 == 0 || !m.ParseFromArray(data, static_cast<int>(size))) &&
      LLVMFuzzerMutate)
    return LLVMFuzzerMutate(data, size, maxSize);
  onnx::GraphProto &g = *m.mutable_graph();
  for (int k = 1 + rng() % 2; k > 0; --k) {
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
