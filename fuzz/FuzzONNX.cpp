//===- FuzzONNX.cpp - the ONNX importer from protobuf bytes ---------------===//
//
// importONNXBuffer on the input with external data looked up in an empty
// folder (locations outside the model folder are rejected before any file is
// opened). A model that imports must verify.
//
// Two targets share this file: `onnx` mutates the bytes (libFuzzer's own
// mutations), `onnx-model` (CNNC_FUZZ_STRUCTURED) parses the input as a
// ModelProto and mutates its structure: dims (0, negative, huge, unknown),
// initializers (data type, size, duplicated, removed, external data outside
// the folder), nodes (dangling and cyclic inputs, op types, dropped and extra
// inputs), attributes (wrong types, huge or negative values) and the opset.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "cnnc/Frontend/ONNXImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdlib>

#if CNNC_FUZZ_STRUCTURED
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
} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::mt19937_64 rng(seed);
  onnx::ModelProto m;
  // Bytes that are not a model, and one mutation in eight: libFuzzer's own.
  if ((rng() % 8 == 0 || !m.ParseFromArray(data, static_cast<int>(size))) &&
      LLVMFuzzerMutate)
    return LLVMFuzzerMutate(data, size, maxSize);
  onnx::GraphProto &g = *m.mutable_graph();
  for (int k = 1 + rng() % 2; k > 0; --k) {
    switch (rng() % 6) {
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
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry registry;
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  bool sawError = false;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error) {
      sawError = true;
      // The importer's safety net for a handler that failed silently: still
      // a bug to find.
      if (llvm::StringRef(d.str()).contains("failed without a diagnostic"))
        std::abort();
    }
    return mlir::success();
  });
  llvm::MemoryBufferRef buffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.onnx");
  cnnc::ONNXImportOptions options;
  cnnc::reference::TensorMap weights;
  // CNNC_FUZZ_ONNX_DATA_DIR: where external data lives (the regressions set
  // it to their folder); by default an empty, nonexistent one.
  static const char *dataDir = [] {
    const char *d = std::getenv("CNNC_FUZZ_ONNX_DATA_DIR");
    return d ? d : "/nonexistent-cnnc-fuzz";
  }();
  auto module =
      cnnc::importONNXBuffer(buffer, dataDir, context, options, weights);
  if (!module) {
    if (!sawError) // a failure must come with a diagnostic
      std::abort();
    return 0;
  }
  if (mlir::failed(mlir::verify(*module)))
    std::abort();
  return 0;
}
