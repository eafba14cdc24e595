//===- ONNXImporter.cpp - ONNX protobuf -> cnn dialect --------------------===//
//
// Walks the ONNX graph in node order (ONNX requires topological order) and
// keeps, for every ONNX value name, either an MLIR tensor value or a constant
// known at import time (ConstFold.h). Shape computations are folded; tensor
// ops are built with the cnn ops' result type inference, so shapes propagate
// through the graph without using the file's value_info.
//
// Initializers that feed weights (Conv/Gemm/MatMul/BatchNormalization scale
// and bias, ...) become function arguments tagged {cnn.param = "<name>"}, BN
// running statistics {cnn.buffer = "<name>"}; their values go to the caller's
// TensorMap, never into the IR.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Frontend/ONNXImporter.h"

#include "ConstFold.h"
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Reference/TensorEntry.h"

#include "cnnc_onnx.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::onnximport;

namespace {

/// The largest constant materialized as a cnn.constant (elements).
constexpr int64_t kMaxInlineConstant = 1 << 16;

enum class WeightRole { Param, Buffer };

/// What an ONNX value name stands for during import.
struct Slot {
  Value value;                      ///< a run-time tensor
  std::optional<ConstVal> constant; ///< or a value known at import time
  bool isInitializer = false;       ///< the constant is a graph initializer
  std::string unavailable;          ///< non-empty: why it cannot be used
};

class Importer {
public:
  Importer(MLIRContext &ctx, StringRef path, const ONNXImportOptions &options,
           reference::TensorMap &weights)
      : ctx(ctx), b(&ctx), path(path.str()), options(options), weights(weights),
        fileLoc(FileLineColLoc::get(&ctx, path, 0, 0)), loc(fileLoc) {}

  /// Imports the file at `path`, or `*memory` (named `path`) when set.
  OwningOpRef<ModuleOp> run(std::optional<llvm::MemoryBufferRef> memory = {},
                            StringRef dataDir = {});

private:
  // --- Diagnostics -----------------------------------------------------------
  LogicalResult error(Location loc, const Twine &msg) {
    emitError(loc) << msg;
    return failure();
  }
  LogicalResult nodeError(const Twine &msg) { return error(loc, msg); }
  /// "unsupported ONNX op 'Foo' (node 'n', file 'm.onnx')[: detail]"
  LogicalResult unsupported(const std::string &detail = "") {
    std::string msg =
        fmt::format("unsupported ONNX op '{}' (node '{}', file '{}')",
                    node->op_type(), nodeName, path);
    if (!detail.empty())
      msg += ": " + detail;
    return error(loc, msg);
  }

  // --- Reading the file ------------------------------------------------------
  LogicalResult readInitializer(const onnx::TensorProto &t, ConstVal &out);
  LogicalResult readExternal(const onnx::TensorProto &t, std::string &bytes);
  LogicalResult setUpInput(const onnx::ValueInfoProto &input);

  // --- Values ----------------------------------------------------------------
  /// Input `i` of the current node; null if absent (optional input).
  Slot *input(int i);
  bool hasInput(int i) {
    return i < node->input_size() && !node->input(i).empty();
  }
  /// Input `i` as a run-time tensor: constants are materialized (small) or
  /// become parameters (large initializers). Null after an error.
  Value data(int i);
  /// Input `i` as a weight: a parameter/buffer argument for constants.
  Value weight(int i, WeightRole role, std::optional<int64_t> flatSize = {});
  /// Input `i` as a constant; error if it is not known at import time.
  const ConstVal *constant(int i, const char *what);
  Value materialize(const ConstVal &c);
  Value argumentFor(const std::string &name, const ConstVal &c, WeightRole role,
                    std::optional<int64_t> flatSize);
  void setOutput(int i, Value v) {
    if (i < node->output_size() && !node->output(i).empty())
      slots[node->output(i)] = Slot{v, std::nullopt, false, ""};
  }
  void setOutput(int i, ConstVal c) {
    if (i < node->output_size() && !node->output(i).empty()) {
      Slot s;
      s.constant = std::move(c);
      slots[node->output(i)] = std::move(s);
    }
  }
  void markUnavailable(int i, const std::string &why) {
    if (i < node->output_size() && !node->output(i).empty()) {
      Slot s;
      s.unavailable = why;
      slots[node->output(i)] = std::move(s);
    }
  }
  std::vector<int64_t> shapeOf(Value v) {
    auto s = cast<RankedTensorType>(v.getType()).getShape();
    return std::vector<int64_t>(s.begin(), s.end());
  }
  RankedTensorType tensorType(const std::vector<int64_t> &shape,
                              Type elementType) {
    return RankedTensorType::get(shape, elementType);
  }

  // --- Building ops ----------------------------------------------------------
  /// Creates an op whose result types are inferred; the inference and the
  /// verifier report bad shapes at the node's location. Null after an error.
  template <typename OpTy>
  Value make(ValueRange operands, ArrayRef<NamedAttribute> attrs = {});
  /// Creates an op with an explicit result type and verifies it.
  template <typename OpTy>
  Value makeTyped(Type resultType, ValueRange operands,
                  ArrayRef<NamedAttribute> attrs = {});
  Value reshape(Value v, const std::vector<int64_t> &shape) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getShape() == ArrayRef<int64_t>(shape))
      return v;
    return makeTyped<cnn::ReshapeOp>(tensorType(shape, t.getElementType()),
                                     {v});
  }
  NamedAttribute attr(StringRef name, Attribute a) {
    return b.getNamedAttr(name, a);
  }

  // --- ONNX attributes -------------------------------------------------------
  const onnx::AttributeProto *getAttr(StringRef name) {
    for (const auto &a : node->attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t intAttr(StringRef name, int64_t dflt) {
    auto *a = getAttr(name);
    return a ? a->i() : dflt;
  }
  float floatAttr(StringRef name, float dflt) {
    auto *a = getAttr(name);
    return a ? a->f() : dflt;
  }
  std::string stringAttr(StringRef name, std::string dflt) {
    auto *a = getAttr(name);
    return a ? a->s() : dflt;
  }
  std::optional<std::vector<int64_t>> intsAttr(StringRef name) {
    auto *a = getAttr(name);
    if (!a)
      return std::nullopt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  /// Integers from attribute `name` or else from constant input `i`.
  LogicalResult intsFromAttrOrInput(StringRef name, int i,
                                    std::vector<int64_t> &out, bool &present);

  // --- Ops -------------------------------------------------------------------
  LogicalResult importNode();
  LogicalResult importConv();
  LogicalResult importGemm();
  LogicalResult importMatMul();
  LogicalResult importClip();
  LogicalResult importPool(bool isMax);
  LogicalResult importBatchNorm();
  LogicalResult importBinary(StringRef opType);
  LogicalResult importConcat();
  LogicalResult importReshape();
  LogicalResult importFlatten();
  LogicalResult importTranspose();
  LogicalResult importDropout();
  LogicalResult importConstant();
  LogicalResult importSoftmax();
  LogicalResult importShape();
  LogicalResult importGather();
  LogicalResult importUnsqueezeSqueeze(bool unsqueeze);
  LogicalResult importCast();
  LogicalResult importSlice();
  LogicalResult importReduceMean();
  LogicalResult importConstantOfShape();
  LogicalResult importExpand();
  LogicalResult windowPadding(const std::vector<int64_t> &kernel,
                              const std::vector<int64_t> &strides,
                              const std::vector<int64_t> &dilations, Value in,
                              std::vector<int64_t> &pads);

  MLIRContext &ctx;
  OpBuilder b;
  std::string path;
  const ONNXImportOptions &options;
  reference::TensorMap &weights;
  Location fileLoc;
  int64_t opset = 13;

  onnx::ModelProto model;
  std::string modelDir;
  llvm::StringMap<Slot> slots;
  Block *body = nullptr;
  // Function arguments: the input, then parameters, then buffers.
  SmallVector<NamedAttribute> argAttrs;
  unsigned numParams = 0;
  llvm::StringMap<Value> paramArgs;

  // Current node.
  const onnx::NodeProto *node = nullptr;
  std::string nodeName;
  Location loc;
};

//===----------------------------------------------------------------------===//
// Reading tensors
//===----------------------------------------------------------------------===//

LogicalResult Importer::readExternal(const onnx::TensorProto &t,
                                     std::string &bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset" || kv.key() == "length") {
      char *end = nullptr;
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end || v < 0)
        return error(fileLoc, "initializer '" + t.name() +
                                  "' has an invalid external data " + kv.key());
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty())
    return error(fileLoc, "initializer '" + t.name() +
                              "' has external data without a location");
  // ONNX's rule (onnx.external_data_helper): the location is relative to the
  // model's folder and may not leave it.
  if (llvm::sys::path::is_absolute(location) ||
      llvm::any_of(llvm::make_range(llvm::sys::path::begin(location),
                                    llvm::sys::path::end(location)),
                   [](StringRef c) { return c == ".."; }))
    return error(fileLoc, "external data location '" + location +
                              "' of initializer '" + t.name() +
                              "' leaves the model's folder");
  SmallString<256> full(modelDir);
  llvm::sys::path::append(full, location);
  if (llvm::sys::fs::exists(full) && !llvm::sys::fs::is_regular_file(full))
    return error(fileLoc, "external data '" + full.str() +
                              "' of initializer '" + t.name() +
                              "' is not a regular file");
  auto buf = llvm::MemoryBuffer::getFile(full, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return error(fileLoc, "cannot read external data '" + full.str() +
                              "' of initializer '" + t.name() +
                              "': " + buf.getError().message());
  int64_t size = (*buf)->getBufferSize();
  if (offset > size || (length >= 0 && length > size - offset))
    return error(fileLoc, "external data of initializer '" + t.name() +
                              "' lies outside '" + full.str() + "'");
  if (length < 0)
    length = size - offset;
  bytes.assign((*buf)->getBufferStart() + offset, length);
  return success();
}

LogicalResult Importer::readInitializer(const onnx::TensorProto &t,
                                        ConstVal &out) {
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  auto n = checkedNumel(shape, std::numeric_limits<int32_t>::max());
  if (!n)
    return error(fileLoc, "tensor '" + t.name() + "' has invalid dims " +
                              shapeStr(shape));
  std::string external;
  const std::string *raw = t.has_raw_data() ? &t.raw_data() : nullptr;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (failed(readExternal(t, external)))
      return failure();
    raw = &external;
  }
  out = ConstVal();
  out.shape = shape;
  auto dt = t.data_type();
  size_t elemSize = 0;
  switch (dt) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    elemSize = 4;
    break;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
    elemSize = 8;
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    elemSize = 2;
    break;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    elemSize = 1;
    break;
  default:
    return error(fileLoc, "tensor '" + t.name() + "' has unsupported type " +
                              onnx::TensorProto::DataType_Name(
                                  onnx::TensorProto::DataType(dt)));
  }
  bool isFloat =
      dt == onnx::TensorProto::FLOAT || dt == onnx::TensorProto::DOUBLE ||
      dt == onnx::TensorProto::FLOAT16 || dt == onnx::TensorProto::BFLOAT16;
  out.isInt = !isFloat;
  // The declared shape is checked against the data before anything of its
  // size is allocated.
  if (raw && raw->size() != size_t(*n) * elemSize)
    return error(fileLoc, fmt::format("tensor '{}' has {} bytes of data, "
                                      "expected {} for shape {}",
                                      t.name(), raw->size(),
                                      size_t(*n) * elemSize, shapeStr(shape)));
  if (!raw) {
    int64_t have =
        isFloat
            ? t.float_data_size() + t.double_data_size() + t.int32_data_size()
            : t.int64_data_size() + t.uint64_data_size() + t.int32_data_size();
    if (have < *n)
      return error(fileLoc, fmt::format("tensor '{}' has {} values, expected "
                                        "{} for shape {}",
                                        t.name(), have, *n, shapeStr(shape)));
  }
  if (isFloat)
    out.floats.resize(*n);
  else
    out.ints.resize(*n);
  auto put = [&](int64_t i, double f, int64_t v) {
    if (isFloat)
      out.floats[i] = float(f);
    else
      out.ints[i] = v;
  };
  if (raw) {
    if (raw->size() != size_t(*n) * elemSize)
      return error(fileLoc,
                   fmt::format("tensor '{}' has {} bytes of data, "
                               "expected {} for shape {}",
                               t.name(), raw->size(), size_t(*n) * elemSize,
                               shapeStr(shape)));
    const char *p = raw->data();
    for (int64_t i = 0; i < *n; ++i, p += elemSize) {
      switch (dt) {
      case onnx::TensorProto::FLOAT: {
        float f;
        std::memcpy(&f, p, 4);
        out.floats[i] = f;
        break;
      }
      case onnx::TensorProto::DOUBLE: {
        double d;
        std::memcpy(&d, p, 8);
        out.floats[i] = float(d);
        break;
      }
      case onnx::TensorProto::FLOAT16:
      case onnx::TensorProto::BFLOAT16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out.floats[i] = dt == onnx::TensorProto::FLOAT16
                            ? reference::halfToFloat(h)
                            : bfloat16ToFloat(h);
        break;
      }
      case onnx::TensorProto::INT64:
      case onnx::TensorProto::UINT64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        out.ints[i] = v;
        break;
      }
      case onnx::TensorProto::INT32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        out.ints[i] = v;
        break;
      }
      case onnx::TensorProto::UINT32: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        out.ints[i] = v;
        break;
      }
      case onnx::TensorProto::INT16: {
        int16_t v;
        std::memcpy(&v, p, 2);
        out.ints[i] = v;
        break;
      }
      case onnx::TensorProto::UINT16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        out.ints[i] = v;
        break;
      }
      case onnx::TensorProto::INT8:
        out.ints[i] = int8_t(*p);
        break;
      default: // UINT8, BOOL
        out.ints[i] = uint8_t(*p);
        break;
      }
    }
    return success();
  }
  // Typed fields.
  int64_t have = 0;
  switch (dt) {
  case onnx::TensorProto::FLOAT:
    have = t.float_data_size();
    for (int64_t i = 0; i < std::min(have, *n); ++i)
      put(i, t.float_data(i), 0);
    break;
  case onnx::TensorProto::DOUBLE:
    have = t.double_data_size();
    for (int64_t i = 0; i < std::min(have, *n); ++i)
      put(i, t.double_data(i), 0);
    break;
  case onnx::TensorProto::INT64:
    have = t.int64_data_size();
    for (int64_t i = 0; i < std::min(have, *n); ++i)
      put(i, 0, t.int64_data(i));
    break;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    have = t.uint64_data_size();
    for (int64_t i = 0; i < std::min(have, *n); ++i)
      put(i, 0, int64_t(t.uint64_data(i)));
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    have = t.int32_data_size();
    for (int64_t i = 0; i < std::min(have, *n); ++i) {
      uint16_t h = uint16_t(t.int32_data(i));
      put(i,
          dt == onnx::TensorProto::FLOAT16 ? reference::halfToFloat(h)
                                           : bfloat16ToFloat(h),
          0);
    }
    break;
  default: // INT32, INT16, UINT16, INT8, UINT8, BOOL
    have = t.int32_data_size();
    for (int64_t i = 0; i < std::min(have, *n); ++i)
      put(i, 0, t.int32_data(i));
    break;
  }
  if (have != *n)
    return error(fileLoc, fmt::format("tensor '{}' has {} values, expected {} "
                                      "for shape {}",
                                      t.name(), have, *n, shapeStr(shape)));
  return success();
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

Slot *Importer::input(int i) {
  if (!hasInput(i)) {
    (void)nodeError(fmt::format("node '{}' ({}) is missing input {}", nodeName,
                                node->op_type(), i));
    return nullptr;
  }
  const std::string &name = node->input(i);
  auto it = slots.find(name);
  if (it == slots.end()) {
    (void)nodeError(fmt::format("input '{}' of node '{}' ({}) is not defined "
                                "before the node",
                                name, nodeName, node->op_type()));
    return nullptr;
  }
  if (!it->second.unavailable.empty()) {
    (void)nodeError(fmt::format("input '{}' of node '{}' ({}): {}", name,
                                nodeName, node->op_type(),
                                it->second.unavailable));
    return nullptr;
  }
  return &it->second;
}

Value Importer::materialize(const ConstVal &c) {
  if (c.isInt) {
    (void)nodeError(fmt::format("node '{}' ({}) uses the integer constant '{}' "
                                "as a tensor; only float tensors are supported",
                                nodeName, node->op_type(), shapeStr(c.shape)));
    return {};
  }
  if (c.numel() > kMaxInlineConstant) {
    (void)nodeError(fmt::format("node '{}' ({}) needs a constant of shape {} "
                                "({} elements, more than {})",
                                nodeName, node->op_type(), shapeStr(c.shape),
                                c.numel(), kMaxInlineConstant));
    return {};
  }
  auto type = tensorType(c.shape, b.getF32Type());
  auto value = DenseElementsAttr::get(type, ArrayRef<float>(c.floats));
  return makeTyped<cnn::ConstantOp>(type, {}, {attr("value", value)});
}

Value Importer::argumentFor(const std::string &name, const ConstVal &c,
                            WeightRole role, std::optional<int64_t> flatSize) {
  auto it = paramArgs.find(name);
  if (it != paramArgs.end())
    return it->second;
  if (c.isInt) {
    (void)nodeError(fmt::format("initializer '{}' used as a weight by node "
                                "'{}' ({}) is not a float tensor",
                                name, nodeName, node->op_type()));
    return {};
  }
  std::vector<int64_t> shape = c.shape;
  if (flatSize) {
    if (c.numel() != *flatSize) {
      (void)nodeError(fmt::format("weight '{}' of node '{}' ({}) has shape {}, "
                                  "expected {} elements",
                                  name, nodeName, node->op_type(),
                                  shapeStr(c.shape), *flatSize));
      return {};
    }
    shape = {*flatSize};
  }
  auto type = tensorType(shape, b.getF32Type());
  unsigned index =
      role == WeightRole::Param ? 1 + numParams : body->getNumArguments();
  Location argLoc = NameLoc::get(b.getStringAttr(name), fileLoc);
  Value arg = body->insertArgument(index, type, argLoc);
  argAttrs.insert(
      argAttrs.begin() + index,
      attr(role == WeightRole::Param ? cnn::kParamAttr : cnn::kBufferAttr,
           b.getStringAttr(name)));
  if (role == WeightRole::Param)
    ++numParams;
  reference::Tensor t;
  t.kind = reference::ElemKind::F32;
  t.shape = shape;
  t.data = c.floats;
  weights[name] = std::move(t);
  paramArgs[name] = arg;
  return arg;
}

Value Importer::weight(int i, WeightRole role, std::optional<int64_t> flat) {
  Slot *s = input(i);
  if (!s)
    return {};
  if (s->value) {
    if (!flat)
      return s->value;
    return reshape(s->value, {*flat});
  }
  return argumentFor(node->input(i), *s->constant, role, flat);
}

Value Importer::data(int i) {
  Slot *s = input(i);
  if (!s)
    return {};
  if (s->value)
    return s->value;
  const ConstVal &c = *s->constant;
  if (s->isInitializer && !c.isInt && c.numel() > kMaxInlineConstant)
    return argumentFor(node->input(i), c, WeightRole::Param, std::nullopt);
  Value v = materialize(c);
  if (v)
    s->value = v; // reuse one cnn.constant per ONNX value
  return v;
}

const ConstVal *Importer::constant(int i, const char *what) {
  Slot *s = input(i);
  if (!s)
    return nullptr;
  if (!s->constant) {
    (void)unsupported(fmt::format("{} (input '{}') must be a constant known "
                                  "at import time",
                                  what, node->input(i)));
    return nullptr;
  }
  return &*s->constant;
}

LogicalResult Importer::intsFromAttrOrInput(StringRef name, int i,
                                            std::vector<int64_t> &out,
                                            bool &present) {
  if (auto a = intsAttr(name)) {
    out = *a;
    present = true;
    return success();
  }
  present = hasInput(i);
  if (!present)
    return success();
  const ConstVal *c = constant(i, name.str().c_str());
  if (!c)
    return failure();
  out = c->asInts();
  return success();
}

template <typename OpTy>
Value Importer::make(ValueRange operands, ArrayRef<NamedAttribute> attrs) {
  for (Value v : operands)
    if (!v)
      return {};
  OperationState state(loc, OpTy::getOperationName());
  Type placeholder = b.getNoneType();
  OpTy::build(b, state, TypeRange(ArrayRef<Type>(placeholder)), operands,
              attrs);
  SmallVector<Type> types;
  if (failed(OpTy::inferReturnTypes(
          &ctx, loc, state.operands, state.attributes.getDictionary(&ctx),
          state.getRawProperties(), state.regions, types)))
    return {};
  state.types.assign(types.begin(), types.end());
  Operation *op = b.create(state);
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    op->erase();
    return {};
  }
  return op->getResult(0);
}

template <typename OpTy>
Value Importer::makeTyped(Type resultType, ValueRange operands,
                          ArrayRef<NamedAttribute> attrs) {
  for (Value v : operands)
    if (!v)
      return {};
  OperationState state(loc, OpTy::getOperationName());
  OpTy::build(b, state, TypeRange(ArrayRef<Type>(resultType)), operands, attrs);
  Operation *op = b.create(state);
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    op->erase();
    return {};
  }
  return op->getResult(0);
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

/// Padding (t, l, b, r) from `pads` / `auto_pad` for a window op.
LogicalResult Importer::windowPadding(const std::vector<int64_t> &kernel,
                                      const std::vector<int64_t> &strides,
                                      const std::vector<int64_t> &dilations,
                                      Value in, std::vector<int64_t> &pads) {
  // Strides and dilations divide sizes below and in the op verifiers; the
  // window must fit in int64 arithmetic.
  for (size_t d = 0; d < strides.size() && d < dilations.size(); ++d)
    if (strides[d] <= 0 || dilations[d] <= 0 || strides[d] > (1 << 30) ||
        dilations[d] > (1 << 30))
      return nodeError("node '" + nodeName + "' has strides " +
                       shapeStr(strides) + " and dilations " +
                       shapeStr(dilations) + "; each must be in [1, 2^30]");
  for (int64_t k : kernel)
    if (k <= 0 || k > (1 << 30))
      return nodeError("node '" + nodeName + "' has kernel shape " +
                       shapeStr(kernel) + "; each size must be in [1, 2^30]");
  std::string autoPad = stringAttr("auto_pad", "NOTSET");
  if (autoPad == "NOTSET" || autoPad.empty()) {
    pads = intsAttr("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
    if (pads.size() != 4)
      return unsupported("only 2-D windows are supported (pads " +
                         shapeStr(pads) + ")");
    return success();
  }
  if (autoPad == "VALID") {
    pads = {0, 0, 0, 0};
    return success();
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return unsupported("auto_pad '" + autoPad + "'");
  auto shape = shapeOf(in);
  if (shape.size() != 4)
    return nodeError("input of node '" + nodeName + "' must be 4-D (NCHW)");
  pads.assign(4, 0);
  for (int d = 0; d < 2; ++d) {
    int64_t inSize = shape[2 + d], s = strides[d];
    int64_t out = (inSize + s - 1) / s;
    int64_t total = std::max<int64_t>(
        0, (out - 1) * s + (kernel[d] - 1) * dilations[d] + 1 - inSize);
    int64_t small = total / 2, large = total - small;
    pads[d] = autoPad == "SAME_UPPER" ? small : large;
    pads[d + 2] = autoPad == "SAME_UPPER" ? large : small;
  }
  return success();
}

static bool isPair(const std::vector<int64_t> &v) { return v.size() == 2; }

LogicalResult Importer::importConv() {
  Value x = data(0);
  if (!x)
    return failure();
  Value w = weight(1, WeightRole::Param);
  if (!w)
    return failure();
  auto wShape = shapeOf(w);
  if (wShape.size() != 4 || shapeOf(x).size() != 4)
    return unsupported("only 2-D convolutions (4-D input and weight) are "
                       "supported, got input " +
                       shapeStr(shapeOf(x)) + " and weight " +
                       shapeStr(wShape));
  auto strides = intsAttr("strides").value_or(std::vector<int64_t>{1, 1});
  auto dilations = intsAttr("dilations").value_or(std::vector<int64_t>{1, 1});
  std::vector<int64_t> kernel{wShape[2], wShape[3]};
  if (!isPair(strides) || !isPair(dilations))
    return unsupported("strides/dilations must have 2 entries");
  if (auto ks = intsAttr("kernel_shape"); ks && *ks != kernel)
    return nodeError("kernel_shape " + shapeStr(*ks) + " of node '" + nodeName +
                     "' does not match the weight " + shapeStr(wShape));
  std::vector<int64_t> pads;
  if (failed(windowPadding(kernel, strides, dilations, x, pads)))
    return failure();
  Value y = make<cnn::Conv2DOp>(
      {x, w}, {attr("strides", b.getDenseI64ArrayAttr(strides)),
               attr("padding", b.getDenseI64ArrayAttr(pads)),
               attr("dilations", b.getDenseI64ArrayAttr(dilations)),
               attr("groups", b.getI64IntegerAttr(intAttr("group", 1)))});
  if (!y)
    return failure();
  if (hasInput(2)) {
    Value bias = weight(2, WeightRole::Param);
    y = make<cnn::BiasAddOp>({y, bias});
    if (!y)
      return failure();
  }
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importGemm() {
  if (floatAttr("alpha", 1.0f) != 1.0f || floatAttr("beta", 1.0f) != 1.0f)
    return unsupported("Gemm with alpha or beta other than 1");
  Value a = data(0);
  if (!a)
    return failure();
  Value w = weight(1, WeightRole::Param);
  if (!w)
    return failure();
  if (shapeOf(a).size() != 2 || shapeOf(w).size() != 2)
    return nodeError("Gemm operands of node '" + nodeName +
                     "' must be 2-D, got " + shapeStr(shapeOf(a)) + " and " +
                     shapeStr(shapeOf(w)));
  bool transB = intAttr("transB", 0) != 0;
  Value y = make<cnn::MatmulOp>(
      {a, w}, {attr("transpose_lhs", b.getBoolAttr(intAttr("transA", 0) != 0)),
               attr("transpose_rhs", b.getBoolAttr(transB))});
  if (!y)
    return failure();
  if (hasInput(2)) {
    int64_t n = shapeOf(y)[1];
    Slot *c = input(2);
    if (!c)
      return failure();
    std::vector<int64_t> cShape =
        c->value ? shapeOf(c->value) : c->constant->shape;
    auto numel = checkedNumel(cShape);
    if (!numel || *numel != n ||
        !(cShape.size() == 1 || (cShape.size() == 2 && cShape[0] == 1)))
      return unsupported("Gemm bias of shape " + shapeStr(cShape) +
                         " (only a per-column bias of " + std::to_string(n) +
                         " elements is supported)");
    Value bias = weight(2, WeightRole::Param, n);
    y = make<cnn::BiasAddOp>({y, bias});
    if (!y)
      return failure();
  }
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importMatMul() {
  Value a = data(0);
  if (!a)
    return failure();
  Slot *s = input(1);
  if (!s)
    return failure();
  Value w = s->value ? s->value : weight(1, WeightRole::Param);
  if (!w)
    return failure();
  if (shapeOf(a).size() != 2 || shapeOf(w).size() != 2)
    return unsupported("only 2-D MatMul is supported, got " +
                       shapeStr(shapeOf(a)) + " x " + shapeStr(shapeOf(w)));
  Value y = make<cnn::MatmulOp>({a, w},
                                {attr("transpose_lhs", b.getBoolAttr(false)),
                                 attr("transpose_rhs", b.getBoolAttr(false))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importClip() {
  float lo = -std::numeric_limits<float>::max();
  float hi = std::numeric_limits<float>::max();
  if (getAttr("min") || getAttr("max")) {
    lo = floatAttr("min", lo);
    hi = floatAttr("max", hi);
  }
  for (int i : {1, 2}) {
    if (!hasInput(i))
      continue;
    const ConstVal *c = constant(i, i == 1 ? "min" : "max");
    if (!c)
      return failure();
    if (c->numel() != 1)
      return nodeError("Clip bound of node '" + nodeName +
                       "' must be a scalar, got shape " + shapeStr(c->shape));
    (i == 1 ? lo : hi) = float(c->at(0));
  }
  Value x = data(0);
  Value y = make<cnn::ClipOp>({x}, {attr("min", b.getF32FloatAttr(lo)),
                                    attr("max", b.getF32FloatAttr(hi))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importPool(bool isMax) {
  Value x = data(0);
  if (!x)
    return failure();
  auto kernel = intsAttr("kernel_shape");
  if (!kernel || !isPair(*kernel))
    return unsupported("only 2-D pooling with a kernel_shape of 2 entries is "
                       "supported");
  auto strides = intsAttr("strides").value_or(std::vector<int64_t>{1, 1});
  auto dilations = intsAttr("dilations").value_or(std::vector<int64_t>{1, 1});
  if (!isPair(strides))
    return unsupported("strides must have 2 entries");
  if (dilations != std::vector<int64_t>{1, 1})
    return unsupported("pooling with dilations " + shapeStr(dilations));
  if (intAttr("storage_order", 0) != 0)
    return unsupported("column-major storage_order");
  std::vector<int64_t> pads;
  if (failed(windowPadding(*kernel, strides, dilations, x, pads)))
    return failure();
  SmallVector<NamedAttribute> attrs{
      attr("kernel", b.getDenseI64ArrayAttr(*kernel)),
      attr("strides", b.getDenseI64ArrayAttr(strides)),
      attr("padding", b.getDenseI64ArrayAttr(pads)),
      attr("ceil_mode", b.getBoolAttr(intAttr("ceil_mode", 0) != 0))};
  Value y;
  if (isMax) {
    y = make<cnn::MaxPool2DOp>({x}, attrs);
    markUnavailable(1, "MaxPool indices are not supported");
  } else {
    attrs.push_back(attr("count_include_pad",
                         b.getBoolAttr(intAttr("count_include_pad", 0) != 0)));
    y = make<cnn::AvgPool2DOp>({x}, attrs);
  }
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importBatchNorm() {
  Value x = data(0);
  if (!x)
    return failure();
  Value scale = weight(1, WeightRole::Param);
  if (!scale)
    return failure();
  Value bias = weight(2, WeightRole::Param);
  if (!bias)
    return failure();
  Value mean = weight(3, WeightRole::Buffer);
  if (!mean)
    return failure();
  Value var = weight(4, WeightRole::Buffer);
  if (!var)
    return failure();
  Value y = make<cnn::BatchNormOp>(
      {x, scale, bias, mean, var},
      {attr("epsilon", b.getF32FloatAttr(floatAttr("epsilon", 1e-5f)))});
  if (!y)
    return failure();
  setOutput(0, y);
  // Training-mode exports also return running (and saved) statistics; the
  // training step is built by cnn-autodiff instead.
  for (int i = 1; i < node->output_size(); ++i)
    markUnavailable(i, "training-mode BatchNormalization statistics outputs "
                       "are not supported");
  return success();
}

LogicalResult Importer::importBinary(StringRef opType) {
  BinaryKind kind = llvm::StringSwitch<BinaryKind>(opType)
                        .Case("Add", BinaryKind::Add)
                        .Case("Sub", BinaryKind::Sub)
                        .Case("Mul", BinaryKind::Mul)
                        .Case("Div", BinaryKind::Div)
                        .Case("Equal", BinaryKind::Equal)
                        .Case("Less", BinaryKind::Less)
                        .Case("Greater", BinaryKind::Greater)
                        .Case("Min", BinaryKind::Min)
                        .Default(BinaryKind::Max);
  Slot *l = input(0);
  if (!l)
    return failure();
  Slot *r = input(1);
  if (!r)
    return failure();
  if (l->constant && r->constant) {
    ConstVal out;
    std::string err;
    if (!foldBinary(kind, *l->constant, *r->constant, out, err))
      return nodeError("node '" + nodeName + "' (" + opType + "): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  // x * c or x / c with a scalar constant: cnn.scale.
  if ((kind == BinaryKind::Mul || kind == BinaryKind::Div) &&
      (r->constant || (kind == BinaryKind::Mul && l->constant))) {
    const ConstVal &c = r->constant ? *r->constant : *l->constant;
    int valueIdx = r->constant ? 0 : 1;
    if (c.numel() == 1 && !c.isInt &&
        int64_t(shapeOf((valueIdx ? r : l)->value).size()) >= c.rank()) {
      float f = float(c.at(0));
      if (kind == BinaryKind::Div)
        f = 1.0f / f;
      Value y = make<cnn::ScaleOp>({data(valueIdx)},
                                   {attr("factor", b.getF32FloatAttr(f))});
      if (!y)
        return failure();
      setOutput(0, y);
      return success();
    }
  }
  if (kind != BinaryKind::Add && kind != BinaryKind::Mul)
    return unsupported("only constant operands are supported");
  // One run-time operand and one constant that broadcasts to it.
  if (l->constant || r->constant) {
    int valueIdx = l->constant ? 1 : 0;
    Slot *cs = l->constant ? l : r;
    const ConstVal &c = *cs->constant;
    Value v = data(valueIdx);
    if (!v)
      return failure();
    auto vShape = shapeOf(v);
    if (c.shape != vShape) {
      std::vector<int64_t> bs;
      std::string err;
      if (!broadcastShapes(vShape, c.shape, bs, err) || bs != vShape)
        return nodeError("operands of node '" + nodeName + "' (" + opType +
                         ") have shapes " + shapeStr(shapeOf(v)) + " and " +
                         shapeStr(c.shape) + " that do not broadcast to " +
                         shapeStr(vShape));
      // A per-channel constant (only dim 1 of the value is not 1): bias_add.
      int64_t off = int64_t(vShape.size()) - c.rank();
      bool perChannel = kind == BinaryKind::Add && vShape.size() >= 2 &&
                        !c.isInt && c.numel() == vShape[1] && vShape[1] > 1;
      for (int64_t d = 0; d < c.rank() && perChannel; ++d)
        if (d + off != 1 && c.shape[d] != 1)
          perChannel = false;
      if (perChannel) {
        Value bias;
        if (cs->isInitializer) {
          bias = weight(valueIdx ? 0 : 1, WeightRole::Param, vShape[1]);
        } else {
          ConstVal flat = c;
          flat.shape = {vShape[1]};
          bias = materialize(flat);
        }
        Value y = make<cnn::BiasAddOp>({v, bias});
        if (!y)
          return failure();
        setOutput(0, y);
        return success();
      }
      ConstVal full;
      if (c.isInt || !broadcastTo(c, vShape, full, err) ||
          full.numel() > kMaxInlineConstant)
        return unsupported("broadcasting the constant of shape " +
                           shapeStr(c.shape) + " to " + shapeStr(vShape) +
                           " (only small float constants can be expanded)");
      Value cv = materialize(full);
      Value y = kind == BinaryKind::Add ? make<cnn::AddOp>({v, cv})
                                        : make<cnn::MulOp>({v, cv});
      if (!y)
        return failure();
      setOutput(0, y);
      return success();
    }
  }
  Value lv = data(0);
  if (!lv)
    return failure();
  Value rv = data(1);
  if (!rv)
    return failure();
  if (lv.getType() != rv.getType())
    return nodeError(fmt::format(
        "operands of node '{}' ({}) must have the same shape (broadcasting "
        "of run-time tensors is not supported): '{}' is {} and '{}' is {}",
        nodeName, opType.str(), node->input(0), shapeStr(shapeOf(lv)),
        node->input(1), shapeStr(shapeOf(rv))));
  Value y = kind == BinaryKind::Add ? make<cnn::AddOp>({lv, rv})
                                    : make<cnn::MulOp>({lv, rv});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importConcat() {
  int64_t axis = intAttr("axis", 0);
  bool allConst = true;
  std::vector<Slot *> ins;
  for (int i = 0; i < node->input_size(); ++i) {
    if (!hasInput(i))
      continue;
    Slot *s = input(i);
    if (!s)
      return failure();
    ins.push_back(s);
    allConst &= bool(s->constant);
  }
  if (ins.empty())
    return nodeError("Concat node '" + nodeName + "' has no inputs");
  if (allConst) {
    std::vector<const ConstVal *> cs;
    for (Slot *s : ins)
      cs.push_back(&*s->constant);
    ConstVal out;
    std::string err;
    if (!foldConcat(cs, axis, out, err))
      return nodeError("node '" + nodeName + "' (Concat): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  SmallVector<Value> values;
  for (int i = 0; i < node->input_size(); ++i) {
    if (!hasInput(i))
      continue;
    Value v = data(i);
    if (!v)
      return failure();
    values.push_back(v);
  }
  int64_t rank = shapeOf(values.front()).size();
  if (!normalizeAxis(axis, rank))
    return nodeError("Concat axis " + std::to_string(intAttr("axis", 0)) +
                     " of node '" + nodeName + "' is out of range for rank " +
                     std::to_string(rank));
  Value y =
      make<cnn::ConcatOp>(values, {attr("axis", b.getI64IntegerAttr(axis))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importReshape() {
  const ConstVal *shapeC = constant(1, "shape");
  if (!shapeC)
    return failure();
  Slot *s = input(0);
  if (!s)
    return failure();
  bool allowZero = intAttr("allowzero", 0) != 0;
  std::vector<int64_t> inShape =
      s->value ? shapeOf(s->value) : s->constant->shape;
  std::vector<int64_t> target;
  std::string err;
  if (!reshapeTarget(inShape, shapeC->asInts(), allowZero, target, err))
    return nodeError("node '" + nodeName + "' (Reshape): " + err);
  if (s->constant) {
    ConstVal out = *s->constant;
    out.shape = target;
    setOutput(0, std::move(out));
    return success();
  }
  Value y = reshape(s->value, target);
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importFlatten() {
  Slot *s = input(0);
  if (!s)
    return failure();
  int64_t axis = intAttr("axis", 1);
  std::vector<int64_t> inShape =
      s->value ? shapeOf(s->value) : s->constant->shape;
  int64_t rank = inShape.size();
  if (axis < -rank || axis > rank)
    return nodeError("Flatten axis " + std::to_string(axis) + " of node '" +
                     nodeName + "' is out of range for rank " +
                     std::to_string(rank));
  if (axis < 0)
    axis += rank;
  if (s->constant) {
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= inShape[d];
    ConstVal out = *s->constant;
    out.shape = {outer, outer ? out.numel() / outer : 0};
    setOutput(0, std::move(out));
    return success();
  }
  Value y = make<cnn::FlattenOp>({s->value},
                                 {attr("axis", b.getI64IntegerAttr(axis))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importTranspose() {
  Slot *s = input(0);
  if (!s)
    return failure();
  int64_t rank = s->value ? shapeOf(s->value).size() : s->constant->rank();
  std::vector<int64_t> perm;
  if (auto p = intsAttr("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  if (s->constant) {
    ConstVal out;
    std::string err;
    if (!foldTranspose(*s->constant, perm, out, err))
      return nodeError("node '" + nodeName + "' (Transpose): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  Value y = make<cnn::TransposeOp>(
      {s->value}, {attr("permutation", b.getDenseI64ArrayAttr(perm))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importDropout() {
  float ratio = floatAttr("ratio", 0.5f);
  if (hasInput(1)) {
    const ConstVal *r = constant(1, "ratio");
    if (!r)
      return failure();
    if (r->numel() != 1)
      return nodeError("Dropout ratio of node '" + nodeName +
                       "' must be a scalar");
    ratio = float(r->at(0));
  }
  Value x = data(0);
  Value y =
      make<cnn::DropoutOp>({x}, {attr("ratio", b.getF32FloatAttr(ratio))});
  if (!y)
    return failure();
  setOutput(0, y);
  markUnavailable(1, "the Dropout mask output is not supported");
  return success();
}

LogicalResult Importer::importConstant() {
  ConstVal c;
  if (auto *a = getAttr("value")) {
    if (failed(readInitializer(a->t(), c)))
      return failure();
  } else if (auto *a = getAttr("value_float")) {
    c = ConstVal::floatTensor({}, {a->f()});
  } else if (auto *a = getAttr("value_floats")) {
    c = ConstVal::floatTensor({int64_t(a->floats_size())},
                              {a->floats().begin(), a->floats().end()});
  } else if (auto *a = getAttr("value_int")) {
    c = ConstVal::intTensor({}, {a->i()});
  } else if (auto *a = getAttr("value_ints")) {
    c = ConstVal::intTensor({int64_t(a->ints_size())},
                            {a->ints().begin(), a->ints().end()});
  } else {
    return unsupported("only tensor, float(s) and int(s) values");
  }
  setOutput(0, std::move(c));
  return success();
}

LogicalResult Importer::importSoftmax() {
  Value x = data(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  int64_t axis = intAttr("axis", opset < 13 ? 1 : -1);
  if (!normalizeAxis(axis, rank))
    return nodeError("Softmax axis of node '" + nodeName +
                     "' is out of range for rank " + std::to_string(rank));
  // Before opset 13 Softmax works on the input flattened at `axis`.
  if (opset < 13 && axis != rank - 1)
    return unsupported("opset < 13 Softmax over a non-final axis");
  Value y =
      make<cnn::SoftmaxOp>({x}, {attr("axis", b.getI64IntegerAttr(axis))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importShape() {
  Slot *s = input(0);
  if (!s)
    return failure();
  std::vector<int64_t> shape =
      s->value ? shapeOf(s->value) : s->constant->shape;
  int64_t rank = shape.size();
  int64_t start = intAttr("start", 0), end = intAttr("end", rank);
  auto clampAxis = [&](int64_t a) {
    if (a < 0)
      a += rank;
    return std::clamp<int64_t>(a, 0, rank);
  };
  start = clampAxis(start);
  end = clampAxis(end);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i)
    dims.push_back(shape[i]);
  int64_t n = dims.size();
  setOutput(0, ConstVal::intTensor({n}, std::move(dims)));
  return success();
}

LogicalResult Importer::importGather() {
  const ConstVal *d = constant(0, "data");
  if (!d)
    return failure();
  const ConstVal *i = constant(1, "indices");
  if (!i)
    return failure();
  ConstVal out;
  std::string err;
  if (!foldGather(*d, *i, intAttr("axis", 0), out, err))
    return nodeError("node '" + nodeName + "' (Gather): " + err);
  setOutput(0, std::move(out));
  return success();
}

LogicalResult Importer::importUnsqueezeSqueeze(bool unsqueeze) {
  Slot *s = input(0);
  if (!s)
    return failure();
  std::vector<int64_t> axes;
  bool present = false;
  if (failed(intsFromAttrOrInput("axes", 1, axes, present)))
    return failure();
  if (unsqueeze && !present)
    return nodeError("Unsqueeze node '" + nodeName + "' has no axes");
  std::vector<int64_t> inShape =
      s->value ? shapeOf(s->value) : s->constant->shape;
  std::vector<int64_t> outShape;
  std::string err;
  if (!(unsqueeze ? unsqueezeShape(inShape, axes, outShape, err)
                  : squeezeShape(inShape, axes, outShape, err)))
    return nodeError("node '" + nodeName + "' (" + node->op_type() +
                     "): " + err);
  if (s->constant) {
    ConstVal out = *s->constant;
    out.shape = outShape;
    setOutput(0, std::move(out));
    return success();
  }
  Value y = reshape(s->value, outShape);
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importCast() {
  Slot *s = input(0);
  if (!s)
    return failure();
  int64_t to = intAttr("to", 0);
  bool toFloat =
      to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE ||
      to == onnx::TensorProto::FLOAT16 || to == onnx::TensorProto::BFLOAT16;
  if (s->constant) {
    ConstVal c = *s->constant;
    if (toFloat && c.isInt) {
      c.floats.assign(c.ints.begin(), c.ints.end());
      c.ints.clear();
      c.isInt = false;
    } else if (!toFloat && !c.isInt) {
      c.ints = c.asInts();
      if (to == onnx::TensorProto::BOOL)
        for (int64_t &v : c.ints)
          v = v != 0;
      c.floats.clear();
      c.isInt = true;
    }
    setOutput(0, std::move(c));
    return success();
  }
  auto type = cast<RankedTensorType>(s->value.getType());
  Type target;
  if (to == onnx::TensorProto::FLOAT)
    target = b.getF32Type();
  else if (to == onnx::TensorProto::FLOAT16)
    target = b.getF16Type();
  else
    return unsupported(
        "Cast of a tensor to type " +
        onnx::TensorProto::DataType_Name(onnx::TensorProto::DataType(to)));
  if (type.getElementType() == target) {
    setOutput(0, s->value);
    return success();
  }
  Value y = makeTyped<cnn::CastOp>(type.clone(target), {s->value});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importSlice() {
  Slot *s = input(0);
  if (!s)
    return failure();
  std::vector<int64_t> starts, ends, axes, steps;
  bool present = false;
  if (failed(intsFromAttrOrInput("starts", 1, starts, present)) ||
      failed(intsFromAttrOrInput("ends", 2, ends, present)) ||
      failed(intsFromAttrOrInput("axes", 3, axes, present)) ||
      failed(intsFromAttrOrInput("steps", 4, steps, present)))
    return failure();
  std::string err;
  if (s->constant) {
    ConstVal out;
    if (!foldSlice(*s->constant, starts, ends, axes, steps, out, err))
      return nodeError("node '" + nodeName + "' (Slice): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  std::vector<int64_t> st, sp, sz;
  if (!resolveSlice(shapeOf(s->value), starts, ends, axes, steps, st, sp, sz,
                    err))
    return nodeError("node '" + nodeName + "' (Slice): " + err);
  if (llvm::any_of(sp, [](int64_t v) { return v != 1; }))
    return unsupported("Slice with steps other than 1 on a tensor");
  Value y = make<cnn::SliceOp>({s->value},
                               {attr("offsets", b.getDenseI64ArrayAttr(st)),
                                attr("sizes", b.getDenseI64ArrayAttr(sz))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importReduceMean() {
  Value x = data(0);
  if (!x)
    return failure();
  std::vector<int64_t> axes;
  bool present = false;
  if (failed(intsFromAttrOrInput("axes", 1, axes, present)))
    return failure();
  auto shape = shapeOf(x);
  int64_t rank = shape.size();
  for (int64_t &a : axes)
    if (!normalizeAxis(a, rank))
      return nodeError("ReduceMean axes of node '" + nodeName +
                       "' are out of range");
  llvm::sort(axes);
  if (rank != 4 || axes != std::vector<int64_t>{2, 3})
    return unsupported("only ReduceMean over the spatial axes of a 4-D "
                       "tensor (a global average pool) is supported");
  Value y = make<cnn::GlobalAvgPoolOp>({x});
  if (y && intAttr("keepdims", 1) == 0)
    y = reshape(y, {shape[0], shape[1]});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importConstantOfShape() {
  const ConstVal *shapeC = constant(0, "shape");
  if (!shapeC)
    return failure();
  std::vector<int64_t> shape = shapeC->asInts();
  auto n = checkedNumel(shape);
  if (!n)
    return nodeError("ConstantOfShape node '" + nodeName +
                     "' has an invalid or too large shape " + shapeStr(shape));
  ConstVal fill = ConstVal::floatTensor({}, {0.0f});
  if (auto *a = getAttr("value"))
    if (failed(readInitializer(a->t(), fill)))
      return failure();
  if (fill.numel() != 1)
    return nodeError("ConstantOfShape value of node '" + nodeName +
                     "' must have one element");
  ConstVal out;
  std::string err;
  ConstVal scalar = fill;
  scalar.shape = {};
  if (!broadcastTo(scalar, shape, out, err))
    return nodeError("node '" + nodeName + "' (ConstantOfShape): " + err);
  setOutput(0, std::move(out));
  return success();
}

LogicalResult Importer::importExpand() {
  const ConstVal *d = constant(0, "input");
  if (!d)
    return failure();
  const ConstVal *shapeC = constant(1, "shape");
  if (!shapeC)
    return failure();
  std::vector<int64_t> target, shape = shapeC->asInts();
  std::string err;
  ConstVal out;
  if (!broadcastShapes(d->shape, shape, target, err) ||
      !broadcastTo(*d, target, out, err))
    return nodeError("node '" + nodeName + "' (Expand): " + err);
  setOutput(0, std::move(out));
  return success();
}

LogicalResult Importer::importNode() {
  if (!node->domain().empty() && node->domain() != "ai.onnx")
    return unsupported("domain '" + node->domain() + "'");
  const std::string &op = node->op_type();
  auto unary = [&](auto tag) -> LogicalResult {
    using OpTy = decltype(tag);
    Value y = make<OpTy>({data(0)});
    if (!y)
      return failure();
    setOutput(0, y);
    return success();
  };
  if (op == "Conv")
    return importConv();
  if (op == "Gemm")
    return importGemm();
  if (op == "MatMul")
    return importMatMul();
  if (op == "Relu")
    return unary(cnn::ReluOp());
  if (op == "Clip")
    return importClip();
  if (op == "MaxPool")
    return importPool(/*isMax=*/true);
  if (op == "AveragePool")
    return importPool(/*isMax=*/false);
  if (op == "GlobalAveragePool")
    return unary(cnn::GlobalAvgPoolOp());
  if (op == "BatchNormalization")
    return importBatchNorm();
  if (op == "Add" || op == "Mul" || op == "Sub" || op == "Div" ||
      op == "Equal" || op == "Less" || op == "Greater" || op == "Min" ||
      op == "Max") {
    if ((op == "Min" || op == "Max") && node->input_size() != 2)
      return unsupported("only two operands");
    return importBinary(op);
  }
  if (op == "Concat")
    return importConcat();
  if (op == "Flatten")
    return importFlatten();
  if (op == "Reshape")
    return importReshape();
  if (op == "Transpose")
    return importTranspose();
  if (op == "Dropout")
    return importDropout();
  if (op == "Identity") {
    Slot *s = input(0);
    if (!s)
      return failure();
    if (node->output_size() > 0 && !node->output(0).empty()) {
      Slot copy = *s;
      copy.isInitializer = false; // a new name: never a parameter of its own
      if (s->isInitializer && !s->value && !s->constant->isInt &&
          s->constant->numel() > kMaxInlineConstant) {
        // Keep the parameter name of the initializer.
        Value v = data(0);
        if (!v)
          return failure();
        copy = Slot{v, std::nullopt, false, ""};
      }
      slots[node->output(0)] = std::move(copy);
    }
    return success();
  }
  if (op == "Constant")
    return importConstant();
  if (op == "Softmax")
    return importSoftmax();
  if (op == "Shape")
    return importShape();
  if (op == "Size") {
    Slot *s = input(0);
    if (!s)
      return failure();
    auto shape = s->value ? shapeOf(s->value) : s->constant->shape;
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    setOutput(0, ConstVal::intTensor({}, {n}));
    return success();
  }
  if (op == "Gather")
    return importGather();
  if (op == "Unsqueeze")
    return importUnsqueezeSqueeze(/*unsqueeze=*/true);
  if (op == "Squeeze")
    return importUnsqueezeSqueeze(/*unsqueeze=*/false);
  if (op == "Cast")
    return importCast();
  if (op == "Slice")
    return importSlice();
  if (op == "ReduceMean")
    return importReduceMean();
  if (op == "ConstantOfShape")
    return importConstantOfShape();
  if (op == "Expand")
    return importExpand();
  if (op == "Where") {
    const ConstVal *c = constant(0, "condition");
    const ConstVal *x = c ? constant(1, "X") : nullptr;
    const ConstVal *y = x ? constant(2, "Y") : nullptr;
    if (!y)
      return failure();
    ConstVal out;
    std::string err;
    if (!foldWhere(*c, *x, *y, out, err))
      return nodeError("node '" + nodeName + "' (Where): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  if (op == "Range") {
    const ConstVal *s = constant(0, "start");
    const ConstVal *l = s ? constant(1, "limit") : nullptr;
    const ConstVal *d = l ? constant(2, "delta") : nullptr;
    if (!d)
      return failure();
    ConstVal out;
    std::string err;
    if (!foldRange(*s, *l, *d, out, err))
      return nodeError("node '" + nodeName + "' (Range): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  if (op == "Neg") {
    const ConstVal *c = constant(0, "X");
    if (!c)
      return failure();
    ConstVal out = *c;
    for (int64_t &v : out.ints)
      v = int64_t(0 - uint64_t(v));
    for (float &v : out.floats)
      v = -v;
    setOutput(0, std::move(out));
    return success();
  }
  return unsupported();
}

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

LogicalResult Importer::setUpInput(const onnx::ValueInfoProto &in) {
  Location inLoc = NameLoc::get(b.getStringAttr(in.name()), fileLoc);
  if (!in.type().has_tensor_type())
    return error(inLoc, "graph input '" + in.name() + "' is not a tensor");
  const auto &tt = in.type().tensor_type();
  if (tt.elem_type() != onnx::TensorProto::FLOAT)
    return error(inLoc, "graph input '" + in.name() +
                            "' must be float32, got " +
                            onnx::TensorProto::DataType_Name(
                                onnx::TensorProto::DataType(tt.elem_type())));
  if (!tt.has_shape())
    return error(inLoc, "graph input '" + in.name() + "' has no shape");
  std::vector<int64_t> shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &d = tt.shape().dim(i);
    bool known = d.has_dim_value() && d.dim_value() > 0;
    if (i == 0 && options.batch > 0) {
      shape.push_back(options.batch);
      continue;
    }
    if (!known) {
      std::string name =
          d.has_dim_param() && !d.dim_param().empty()
              ? d.dim_param()
              : (d.has_dim_value() ? std::to_string(d.dim_value())
                                   : std::string("?"));
      if (i == 0)
        return error(inLoc, "dynamic dimension '" + name + "' of input '" +
                                in.name() + "' needs --batch N");
      return error(inLoc, "dynamic dimension '" + name + "' (dimension " +
                              std::to_string(i) + ") of input '" + in.name() +
                              "' is not supported; only the batch dimension "
                              "may be dynamic");
    }
    shape.push_back(d.dim_value());
  }
  Value arg = body->addArgument(tensorType(shape, b.getF32Type()), inLoc);
  argAttrs.push_back(attr(cnn::kInputAttr, b.getUnitAttr()));
  slots[in.name()] = Slot{arg, std::nullopt, false, ""};
  return success();
}

OwningOpRef<ModuleOp> Importer::run(std::optional<llvm::MemoryBufferRef> memory,
                                    StringRef dataDir) {
  std::unique_ptr<llvm::MemoryBuffer> file;
  if (!memory) {
    auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf) {
      (void)error(fileLoc,
                  "cannot open '" + path + "': " + buf.getError().message());
      return nullptr;
    }
    file = std::move(*buf);
    memory = file->getMemBufferRef();
    modelDir = llvm::sys::path::parent_path(path).str();
  } else {
    modelDir = dataDir.str();
  }
  if (memory->getBufferSize() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(memory->getBufferStart(),
                            int(memory->getBufferSize())) ||
      !model.has_graph() || model.ir_version() <= 0) {
    (void)error(fileLoc, "cannot parse '" + path + "' as an ONNX model");
    return nullptr;
  }
  for (const auto &imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
  const onnx::GraphProto &graph = model.graph();
  if (graph.output_size() == 0) {
    (void)error(fileLoc, "the graph of '" + path + "' has no outputs");
    return nullptr;
  }

  auto module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module.getBody());
  auto func =
      func::FuncOp::create(b, fileLoc, "forward", b.getFunctionType({}, {}));
  body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);

  // Initializers (possibly also listed as graph inputs).
  llvm::StringSet<> initNames;
  for (const auto &t : graph.initializer()) {
    Slot s;
    ConstVal c;
    if (failed(readInitializer(t, c)))
      return nullptr;
    s.constant = std::move(c);
    s.isInitializer = true;
    slots[t.name()] = std::move(s);
    initNames.insert(t.name());
  }
  // The data input: the first graph input without an initializer.
  bool haveInput = false;
  for (const auto &in : graph.input()) {
    if (initNames.contains(in.name()))
      continue;
    if (!haveInput) {
      if (failed(setUpInput(in)))
        return nullptr;
      haveInput = true;
      continue;
    }
    Slot s;
    s.unavailable = "graph input '" + in.name() +
                    "' has no initializer; only one data input is supported";
    slots[in.name()] = std::move(s);
  }
  if (!haveInput) {
    (void)error(fileLoc, "'" + path +
                             "' has no graph input without an "
                             "initializer (the image input)");
    return nullptr;
  }

  for (int i = 0; i < graph.node_size(); ++i) {
    node = &graph.node(i);
    nodeName = node->name().empty() ? node->op_type() + "_" + std::to_string(i)
                                    : node->name();
    loc = NameLoc::get(b.getStringAttr(nodeName), fileLoc);
    if (failed(importNode()))
      return nullptr;
  }

  const std::string &outName = graph.output(0).name();
  loc = NameLoc::get(b.getStringAttr(outName), fileLoc);
  auto it = slots.find(outName);
  if (it == slots.end() || !it->second.unavailable.empty()) {
    (void)error(loc, "graph output '" + outName + "' of '" + path +
                         "' is not computed by any node");
    return nullptr;
  }
  Value result = it->second.value;
  if (!result) {
    // A constant output: rare, but representable.
    static const onnx::NodeProto outputNode = [] {
      onnx::NodeProto n;
      n.set_op_type("Identity");
      return n;
    }();
    node = &outputNode;
    nodeName = outName;
    result = materialize(*it->second.constant);
    if (!result)
      return nullptr;
  }
  func::ReturnOp::create(b, loc, result);

  // Final signature: argument attributes in argument order.
  SmallVector<Type> argTypes(body->getArgumentTypes());
  func.setFunctionType(b.getFunctionType(argTypes, {result.getType()}));
  for (auto [i, a] : llvm::enumerate(argAttrs))
    func.setArgAttr(i, a.getName(), a.getValue());
  if (failed(mlir::verify(module))) // a bug in the importer if it fails
    return nullptr;
  return module;
}

} // namespace

OwningOpRef<ModuleOp> cnnc::importONNX(StringRef path, MLIRContext &context,
                                       const ONNXImportOptions &options,
                                       reference::TensorMap &weights) {
  context.loadDialect<cnn::CNNDialect, func::FuncDialect>();
  Importer importer(context, path, options, weights);
  return importer.run();
}

OwningOpRef<ModuleOp> cnnc::importONNXBuffer(llvm::MemoryBufferRef buffer,
                                             StringRef dataDir,
                                             MLIRContext &context,
                                             const ONNXImportOptions &options,
                                             reference::TensorMap &weights) {
  context.loadDialect<cnn::CNNDialect, func::FuncDialect>();
  Importer importer(context, buffer.getBufferIdentifier(), options, weights);
  return importer.run(buffer, dataDir);
}
