//===- ONNXImporter.cpp - ONNX protobuf -> cnn dialect --------------------===//
//
// Walks the ONNX graph in node order (ONNX requires topological order) and
// keeps, for every ONNX value name, either an MLIR tensor value or a constant
// known at import time (cnnc/Support/ConstantEval.h). Shape computations are
// folded; tensor ops are built with the cnn ops' result type inference, so
// shapes propagate through the graph without using the file's value_info.
//
// Float initializers are the model's trainable state: those that feed weights
// (Conv/Gemm/MatMul/BatchNormalization scale and bias, ...) or flow into
// tensor ops (Transpose, Reshape, elementwise: paramInput) become function
// arguments tagged {cnn.param = "<name>"}, BN running statistics
// {cnn.buffer = "<name>"}; their values go to the caller's TensorMap, never
// into the IR. Integer initializers (shapes, axes) and float scalars are
// constants, folded at import.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Frontend/ONNXImporter.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Support/ConstantEval.h"
#include "cnnc/Support/Tensor.h"
#include "cnnc/Support/Resize.h"

#include "cnnc_onnx.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fmt/format.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::constfold;

namespace {

/// The largest constant materialized as a cnn.constant (elements).
constexpr int64_t kMaxInlineConstant = 1 << 16;

enum class WeightRole { Param, Buffer };

/// What an ONNX value name stands for during import.
struct Slot {
  Value value;                      ///< a run-time tensor
  std::optional<ConstVal> constant; ///< or a value known at import time
  bool isInitializer = false;       ///< the constant is a graph initializer
  /// The float initializer this constant is a reshaped view of (Unsqueeze,
  /// Squeeze, Reshape folded it): a learned slope that the exporter
  /// unsqueezed (PReLU) trains under this name.
  std::string viewOf;
  /// An Identity's copy of a float initializer (or of such a copy): an eval
  /// export writes value-identical weights once and gives each further use
  /// its name so; a weight there is a parameter of its own, unlike the value
  /// of a Constant node (isWeightInitializer).
  bool initializerCopy = false;
  std::string unavailable;          ///< non-empty: why it cannot be used
  /// For an Expand of a run-time tensor (`value` the broadcast): its input,
  /// with the rank of `value`. A consumer that broadcasts its operands
  /// anyway reads this instead when the result is the same (importBinary).
  Value expandedFrom;
};

class Importer {
public:
  Importer(MLIRContext &ctx, StringRef path, const ONNXImportOptions &options,
           TensorMap &weights)
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
  LogicalResult nodeError(const Twine &msg) {
    InFlightDiagnostic d = emitError(loc) << msg;
    // The likeliest cause of a shape error after --batch replaced a fixed
    // exported batch: a shape the exporter computed from the old batch.
    if (exportedBatch > 0)
      d.attachNote() << "--batch " << options.batch
                     << " replaced the batch " << exportedBatch
                     << " the model was exported with; shapes the exporter "
                        "computed from it keep "
                     << exportedBatch
                     << ": export the model with the batch you train with";
    return failure();
  }
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
  /// Input `i` of an op that moves or combines tensors (Transpose, Reshape,
  /// elementwise, ...): a float initializer there is a trainable parameter
  /// (a training export's LayerNorm weight over the last dimension, a Linear
  /// weight transposed ahead of MatMul), so it becomes its {cnn.param}
  /// argument and the op is imported on it. Folding it into a constant would
  /// freeze it and name the result after the op's output. A scalar stays a
  /// constant: exporters write constants such as x * 2 that way (a learned
  /// scalar is rare in CNNs), and canonicalization folds it into cnn.scale.
  Slot *paramInput(int i);
  bool hasInput(int i) {
    return i < node->input_size() && !node->input(i).empty();
  }
  /// Whether the constant in `s` is model state where an op takes it as a
  /// weight (a normalization's scale and bias): an initializer or an
  /// Identity's copy of one. Anything else known at import time (a Constant
  /// node: PyTorch's affine=False BatchNorm, GroupNorm's InstanceNorm; a
  /// folded value) is fixed, never a parameter.
  static bool isWeightInitializer(const Slot &s) {
    return s.isInitializer || s.initializerCopy;
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
    if (!v)
      return {};
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

public:
  // --- Ops (the handlers of the op table) ------------------------------------
  LogicalResult importNode();
  LogicalResult importIdentity();
  LogicalResult importSize();
  LogicalResult importWhere();
  LogicalResult importRange();
  LogicalResult importNeg();
  LogicalResult importCeilFloor();
  LogicalResult importMinMax();
  LogicalResult importNegNode();
  LogicalResult importPow();
  LogicalResult importReduce();
  LogicalResult importLayerNorm();
  LogicalResult importInstanceNorm();
  LogicalResult importLogSoftmax();
  LogicalResult importNLLLoss();
  LogicalResult importSoftmaxCrossEntropyLoss();
  LogicalResult importArgMax() { return importArgExtreme<cnn::ArgMaxOp>(); }
  LogicalResult importArgMin() { return importArgExtreme<cnn::ArgMinOp>(); }
  template <typename OpTy> LogicalResult importArgExtreme();
  /// x - m - log(sum(exp(x - m))) over `axes`, m = cnn.reduce_max there.
  Value logSoftmax(Value x, ArrayRef<int64_t> axes);
  /// Input `i` as an integer tensor (class labels, gather indices; `what`
  /// names it in errors): a run-time integer tensor, or an integer constant
  /// materialized as an i64 cnn.constant. Null after an error.
  Value integerInput(int i, StringRef what);
  /// The `reduction` and `ignore_index` attributes of a loss node as the
  /// loss ops' attributes; failure (one diagnostic) for a reduction that
  /// is not none, sum or mean.
  LogicalResult lossAttributes(SmallVectorImpl<NamedAttribute> &attrs);
  LogicalResult importGlobalMaxPool();
  LogicalResult importPRelu();
  LogicalResult importSplit();
  /// DepthToSpace (DCR or CRD) and SpaceToDepth: reshape, transpose,
  /// reshape.
  LogicalResult importDepthSpace();
  LogicalResult importLRN();
  /// A 1-D window op (N x C x L) runs as the 2-D one with a 1 x k window
  /// over N x C x 1 x L: the shape with a 1 inserted before the last
  /// dimension, and the window attributes with a leading 1 (pads 0).
  Value as1xL(Value v) {
    if (!v)
      return {};
    auto shape = shapeOf(v);
    shape.insert(shape.end() - 1, 1);
    return reshape(v, shape);
  }
  static std::vector<int64_t> window1xK(const std::vector<int64_t> &v,
                                        int64_t lead) {
    return {lead, v[0]};
  }
  static std::vector<int64_t> pads1xK(const std::vector<int64_t> &pads) {
    return {0, pads[0], 0, pads[1]};
  }
  /// Marks output 0, a constant folded from input 0 by a shape op, as a view
  /// of input 0's initializer (Slot::viewOf).
  void keepViewOf(Slot *in) {
    if (node->output_size() == 0 || node->output(0).empty() || !in->constant ||
        in->constant->isInt)
      return;
    std::string origin = in->isInitializer ? node->input(0) : in->viewOf;
    slots[node->output(0)].viewOf = origin;
  }
  /// `v` (rank <= `rank`) with leading 1s up to `rank`.
  Value alignRank(Value v, int64_t rank) {
    if (!v)
      return {};
    auto shape = shapeOf(v);
    std::vector<int64_t> aligned(rank - int64_t(shape.size()), 1);
    aligned.insert(aligned.end(), shape.begin(), shape.end());
    return reshape(v, aligned);
  }
  /// A splat constant of rank `rank` (all dims 1).
  Value scalarConstant(float value, int64_t rank) {
    return materialize(
        ConstVal::floatTensor(std::vector<int64_t>(rank, 1), {value}));
  }
  LogicalResult importBinaryNode() { return importBinary(node->op_type()); }
  LogicalResult importAvgPool() { return importPool(/*isMax=*/false); }
  LogicalResult importMaxPool() { return importPool(/*isMax=*/true); }
  LogicalResult importRelu() { return importUnary<cnn::ReluOp>(); }
  LogicalResult importAbs() { return importUnary<cnn::AbsOp>(); }
  LogicalResult importGlobalAvgPool() {
    return importUnary<cnn::GlobalAvgPoolOp>();
  }
  LogicalResult importSqueeze() { return importUnsqueezeSqueeze(false); }
  LogicalResult importUnsqueeze() { return importUnsqueezeSqueeze(true); }
  template <typename OpTy>
  LogicalResult importUnary(ArrayRef<NamedAttribute> attrs = {}) {
    Value y = make<OpTy>({data(0)}, attrs);
    if (!y)
      return failure();
    setOutput(0, y);
    return success();
  }
  // Activations: one cnn op each, attributes with ONNX's defaults.
  LogicalResult importSigmoid() { return importUnary<cnn::SigmoidOp>(); }
  LogicalResult importTanh() { return importUnary<cnn::TanhOp>(); }
  LogicalResult importErf() { return importUnary<cnn::ErfOp>(); }
  LogicalResult importExp() { return importUnary<cnn::ExpOp>(); }
  LogicalResult importSqrt() { return importUnary<cnn::SqrtOp>(); }
  LogicalResult importReciprocal() { return importUnary<cnn::ReciprocalOp>(); }
  LogicalResult importHardSwish() { return importUnary<cnn::HardSwishOp>(); }
  LogicalResult importLog() { return importUnary<cnn::LogOp>(); }
  LogicalResult importSoftplus() { return importUnary<cnn::SoftplusOp>(); }
  /// Mish (opset 18; PyTorch exports it so from opset 18 on, as
  /// Mul(x, Tanh(Softplus(x))) before): x * tanh(softplus(x)).
  LogicalResult importMish() { return importUnary<cnn::MishOp>(); }
  LogicalResult importElu() {
    return importUnary<cnn::EluOp>(
        {attr("alpha", b.getF32FloatAttr(floatAttr("alpha", 1.0f)))});
  }
  LogicalResult importSelu() {
    // ONNX's defaults are the f32 values of SELU's constants (PyTorch's).
    return importUnary<cnn::SeluOp>(
        {attr("alpha",
              b.getF32FloatAttr(floatAttr("alpha", 1.67326319217681884765625f))),
         attr("gamma", b.getF32FloatAttr(
                           floatAttr("gamma", 1.05070102214813232421875f)))});
  }
  LogicalResult importCelu() {
    float alpha = floatAttr("alpha", 1.0f);
    if (alpha == 0.0f)
      return nodeError(fmt::format("node '{}' (Celu): alpha 0 is not "
                                   "supported (CELU divides by alpha)",
                                   nodeName));
    return importUnary<cnn::CeluOp>({attr("alpha", b.getF32FloatAttr(alpha))});
  }
  LogicalResult importThresholdedRelu() {
    return importUnary<cnn::ThresholdedReluOp>(
        {attr("alpha", b.getF32FloatAttr(floatAttr("alpha", 1.0f)))});
  }
  LogicalResult importGatherElements();
  LogicalResult importLeakyRelu() {
    return importUnary<cnn::LeakyReluOp>(
        {attr("alpha", b.getF32FloatAttr(floatAttr("alpha", 0.01f)))});
  }
  LogicalResult importHardSigmoid() {
    return importUnary<cnn::HardSigmoidOp>(
        {attr("alpha", b.getF32FloatAttr(floatAttr("alpha", 0.2f))),
         attr("beta", b.getF32FloatAttr(floatAttr("beta", 0.5f)))});
  }
  LogicalResult importGelu() {
    std::string approx = stringAttr("approximate", "none");
    if (approx != "none" && approx != "tanh")
      return unsupported("Gelu with approximate='" + approx + "'");
    return importUnary<cnn::GeluOp>(
        {attr("approximate", b.getStringAttr(approx))});
  }
  LogicalResult importConv();
  LogicalResult importConvTranspose();
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
  LogicalResult importConstantOfShape();
  LogicalResult importExpand();
  /// `x` broadcast to `target` (a valid numpy broadcast of its shape, of at
  /// least its rank) as cnn.add(x, 0) with splat zero constants over the
  /// broadcast dimensions; the ops it creates are appended to `created`.
  Value broadcastRunTime(Value x, const std::vector<int64_t> &target,
                         SmallVectorImpl<Operation *> &created);
  LogicalResult importPad();
  LogicalResult importResize();
  LogicalResult windowPadding(const std::vector<int64_t> &kernel,
                              const std::vector<int64_t> &strides,
                              const std::vector<int64_t> &dilations, Value in,
                              std::vector<int64_t> &pads);

private:
  /// One diagnostic listing every op type without a handler at the model's
  /// opset (count and first node of each); failure if there is one.
  LogicalResult checkSupported();
  /// For --train: one warning if the graph was exported for inference.
  void warnIfExportedForInference();

  // --batch over a model exported with a fixed batch: a tracing exporter
  // writes `x.view(x.size(0), -1)` as a Reshape to the constant [B0, -1],
  // which must follow the new batch (importReshape).
  /// The image input's exported static batch when --batch replaced it, else 0.
  int64_t exportedBatch = 0;
  /// Reshape targets whose leading B0 became the new batch, and the first.
  unsigned rebatchedReshapes = 0;
  std::string firstRebatchedReshape;
  static bool isDefaultDomain(const std::string &domain) {
    return domain.empty() || domain == "ai.onnx";
  }
  /// The name of node `i`; unnamed nodes are "<OpType>_<index>".
  std::string nodeNameAt(int i) {
    const onnx::NodeProto &n = model.graph().node(i);
    return n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
  }

  MLIRContext &ctx;
  OpBuilder b;
  std::string path;
  const ONNXImportOptions &options;
  TensorMap &weights;
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
  /// The ops broadcastRunTime built for Expand nodes, in order: those left
  /// without users (every consumer read the input, importBinary) are erased
  /// at the end of the import.
  SmallVector<Operation *> expandOps;

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
  // The text check above does not see symlinks: a link inside the folder
  // may point anywhere, and its target's bytes would land in the output. So
  // the file is opened once (O_NONBLOCK: a FIFO must not block the open),
  // and the *opened* file's real path (/proc/self/fd, no check-then-open
  // race) must lie inside the model folder's real path.
  auto fail = [&](const Twine &why) {
    return error(fileLoc, "external data '" + full.str() +
                              "' of initializer '" + t.name() + "' " + why);
  };
  char dirBuf[PATH_MAX];
  if (!::realpath(modelDir.empty() ? "." : modelDir.c_str(), dirBuf))
    return fail("cannot be resolved: the model's folder: " +
                Twine(std::strerror(errno)));
  std::string realDir = dirBuf;
  int fd = ::open(full.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return error(fileLoc, "cannot read external data '" + full.str() +
                              "' of initializer '" + t.name() +
                              "': " + std::strerror(errno));
  auto closeFd = llvm::make_scope_exit([&] { ::close(fd); });
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail("cannot be read: " + Twine(std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return fail("is not a regular file");
  std::string procPath = "/proc/self/fd/" + std::to_string(fd);
  char fileBuf[PATH_MAX];
  if (!::realpath(procPath.c_str(), fileBuf))
    return fail("cannot be resolved: " + Twine(std::strerror(errno)));
  StringRef realFile = fileBuf;
  std::string prefix = realDir == "/" ? realDir : realDir + "/";
  if (!realFile.starts_with(prefix))
    return fail("resolves to '" + realFile + "', outside the model's folder '" +
                realDir + "' (through a symbolic link)");
  auto buf = llvm::MemoryBuffer::getOpenFile(
      llvm::sys::fs::convertFDToNativeFile(fd), full,
      static_cast<uint64_t>(st.st_size), /*RequiresNullTerminator=*/false);
  if (!buf)
    return fail("cannot be read: " + Twine(buf.getError().message()));
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
                            ? halfToFloat(h)
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
          dt == onnx::TensorProto::FLOAT16 ? halfToFloat(h)
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

/// A one-element float initializer named as a torch state_dict entry
/// ("stages.0.skipinit_gain": module path and attribute) is a learned scalar
/// (timm's NormFreeBlock skipinit gain, a 0-d nn.Parameter). Exporters name
/// the constants they fold otherwise ("onnx::Mul_12", "/blk/Constant",
/// tf2onnx's "mul/y:0" or "const_fold_opt__7"), and those stay constants.
static bool isLearnedScalar(const std::string &name, const ConstVal &c) {
  if (c.isInt || c.numel() != 1)
    return false;
  bool dotted = false;
  for (size_t k = 0; k < name.size(); ++k) {
    char ch = name[k];
    if (ch == '.') {
      // No empty segment, and a segment does not start with '.'.
      if (k == 0 || name[k - 1] == '.' || k + 1 == name.size())
        return false;
      dotted = true;
    } else if (!(llvm::isAlnum(ch) || ch == '_')) {
      return false;
    }
  }
  return dotted && !llvm::isDigit(name[0]);
}

Slot *Importer::paramInput(int i) {
  Slot *s = input(i);
  if (!s || s->value || !s->isInitializer || s->constant->isInt ||
      (s->constant->numel() == 1 &&
       !isLearnedScalar(node->input(i), *s->constant)))
    return s;
  Value arg = argumentFor(node->input(i), *s->constant, WeightRole::Param,
                          std::nullopt);
  if (!arg)
    return nullptr;
  // From here on every consumer sees the parameter, not its initial value.
  s->value = arg;
  s->constant.reset();
  s->isInitializer = false;
  return s;
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
  Tensor t;
  t.kind = ElemKind::F32;
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
  // The window has as many spatial dimensions as the kernel (1 or 2).
  size_t spatial = kernel.size();
  std::string autoPad = stringAttr("auto_pad", "NOTSET");
  if (autoPad == "NOTSET" || autoPad.empty()) {
    pads = intsAttr("pads").value_or(std::vector<int64_t>(2 * spatial, 0));
    if (pads.size() != 2 * spatial)
      return unsupported(
          fmt::format("pads {} for a {}-D window", shapeStr(pads), spatial));
    return success();
  }
  if (autoPad == "VALID") {
    pads.assign(2 * spatial, 0);
    return success();
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return unsupported("auto_pad '" + autoPad + "'");
  auto shape = shapeOf(in);
  if (shape.size() != 2 + spatial || strides.size() != spatial ||
      dilations.size() != spatial)
    return nodeError(
        fmt::format("input of node '{}' must be {}-D", nodeName, 2 + spatial));
  pads.assign(2 * spatial, 0);
  for (size_t d = 0; d < spatial; ++d) {
    int64_t inSize = shape[2 + d], s = strides[d];
    int64_t out = (inSize + s - 1) / s;
    int64_t total = std::max<int64_t>(
        0, (out - 1) * s + (kernel[d] - 1) * dilations[d] + 1 - inSize);
    int64_t small = total / 2, large = total - small;
    pads[d] = autoPad == "SAME_UPPER" ? small : large;
    pads[d + spatial] = autoPad == "SAME_UPPER" ? large : small;
  }
  return success();
}

/// Conv -> cnn.conv2d (+ cnn.bias_add). A 1-D one (N x C x L input,
/// F x C/group x K weight: Conv1d) runs as 1 x K over N x C x 1 x L, the
/// weight reshaped, so the parameter keeps its exported 3-D shape.
LogicalResult Importer::importConv() {
  Value x = data(0);
  if (!x)
    return failure();
  Value w = weight(1, WeightRole::Param);
  if (!w)
    return failure();
  auto xShape = shapeOf(x), wShape = shapeOf(w);
  size_t spatial = wShape.size() - 2;
  if ((spatial != 1 && spatial != 2) || xShape.size() != wShape.size())
    return unsupported("only 1-D and 2-D convolutions (3-D or 4-D input and "
                       "weight) are supported, got input " +
                       shapeStr(xShape) + " and weight " + shapeStr(wShape));
  std::vector<int64_t> ones(spatial, 1);
  auto strides = intsAttr("strides").value_or(ones);
  auto dilations = intsAttr("dilations").value_or(ones);
  std::vector<int64_t> kernel(wShape.begin() + 2, wShape.end());
  if (strides.size() != spatial || dilations.size() != spatial)
    return unsupported(
        fmt::format("strides/dilations must have {} entries", spatial));
  if (auto ks = intsAttr("kernel_shape"); ks && *ks != kernel)
    return nodeError("kernel_shape " + shapeStr(*ks) + " of node '" + nodeName +
                     "' does not match the weight " + shapeStr(wShape));
  std::vector<int64_t> pads;
  if (failed(windowPadding(kernel, strides, dilations, x, pads)))
    return failure();
  if (spatial == 1) {
    x = as1xL(x);
    w = as1xL(w);
    strides = window1xK(strides, 1);
    dilations = window1xK(dilations, 1);
    pads = pads1xK(pads);
  }
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
  if (spatial == 1) {
    auto yShape = shapeOf(y);
    y = reshape(y, {yShape[0], yShape[1], yShape[3]});
    if (!y)
      return failure();
  }
  setOutput(0, y);
  return success();
}

/// ConvTranspose is the input gradient of the convolution whose input has
/// the transposed convolution's output shape and whose filter is W (ONNX's
/// C_in x C_out/group x kH x kW is conv2d's F x C/groups x KH x KW of that
/// convolution): cnn.conv2d_bwd_data (+ cnn.bias_add). A 1-D one runs as
/// 1 x k.
LogicalResult Importer::importConvTranspose() {
  Value x = data(0);
  if (!x)
    return failure();
  Value w = weight(1, WeightRole::Param);
  if (!w)
    return failure();
  auto xShape = shapeOf(x), wShape = shapeOf(w);
  size_t spatial = wShape.size() - 2;
  if ((spatial != 1 && spatial != 2) || xShape.size() != wShape.size())
    return unsupported("only 1-D and 2-D transposed convolutions (3-D or 4-D "
                       "input and weight) are supported, got input " +
                       shapeStr(xShape) + " and weight " + shapeStr(wShape));
  std::vector<int64_t> ones(spatial, 1), zeros(spatial, 0);
  auto strides = intsAttr("strides").value_or(ones);
  auto dilations = intsAttr("dilations").value_or(ones);
  auto outputPadding = intsAttr("output_padding").value_or(zeros);
  std::vector<int64_t> kernel(wShape.begin() + 2, wShape.end());
  if (strides.size() != spatial || dilations.size() != spatial ||
      outputPadding.size() != spatial)
    return unsupported(fmt::format("strides, dilations and output_padding "
                                   "must have {} entries",
                                   spatial));
  if (auto ks = intsAttr("kernel_shape"); ks && *ks != kernel)
    return nodeError("kernel_shape " + shapeStr(*ks) + " of node '" + nodeName +
                     "' does not match the weight " + shapeStr(wShape));
  int64_t groups = intAttr("group", 1);
  if (groups < 1 || wShape[0] != xShape[1] || wShape[0] % groups != 0)
    return nodeError(fmt::format("node '{}' (ConvTranspose): weight {} does "
                                 "not fit input {} with group {}",
                                 nodeName, shapeStr(wShape), shapeStr(xShape),
                                 groups));
  for (size_t d = 0; d < spatial; ++d)
    if (strides[d] < 1 || dilations[d] < 1 || kernel[d] < 1 ||
        strides[d] > (1 << 30) || dilations[d] > (1 << 30) ||
        kernel[d] > (1 << 30) || outputPadding[d] < 0 ||
        outputPadding[d] >= std::max(strides[d], dilations[d]))
      return nodeError(fmt::format(
          "node '{}' (ConvTranspose) has strides {}, dilations {}, kernel {} "
          "and output_padding {}; each size must be in [1, 2^30] and "
          "output_padding smaller than the stride or the dilation",
          nodeName, shapeStr(strides), shapeStr(dilations), shapeStr(kernel),
          shapeStr(outputPadding)));
  // The output size is s * (in - 1) + output_padding + (k - 1) * d + 1
  // less the pads; with output_shape (or SAME auto_pad: in * s) the pads are
  // what makes it that size, the larger half at the end for SAME_UPPER.
  std::string autoPad = stringAttr("auto_pad", "NOTSET");
  if (autoPad.empty())
    autoPad = "NOTSET";
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return unsupported("auto_pad '" + autoPad + "'");
  auto outputShapeAttr = intsAttr("output_shape");
  if (outputShapeAttr && outputShapeAttr->size() != spatial)
    return unsupported(fmt::format("output_shape {} must have {} entries",
                                   shapeStr(*outputShapeAttr), spatial));
  std::vector<int64_t> pads(2 * spatial, 0), outSize(spatial);
  if (autoPad == "NOTSET" && !outputShapeAttr) {
    pads = intsAttr("pads").value_or(std::vector<int64_t>(2 * spatial, 0));
    if (pads.size() != 2 * spatial)
      return unsupported(
          fmt::format("pads {} for a {}-D window", shapeStr(pads), spatial));
  }
  for (size_t d = 0; d < spatial; ++d) {
    // Checked: strides up to 2^30 times a dimension up to 2^40, and
    // output_shape and pads straight from the file, can exceed int64.
    int64_t full, extent, sameSize, total, outD;
    bool overflow = llvm::MulOverflow(strides[d], xShape[2 + d] - 1, full) ||
                    llvm::MulOverflow(kernel[d] - 1, dilations[d], extent) ||
                    llvm::AddOverflow(full, outputPadding[d] + 1, full) ||
                    llvm::AddOverflow(full, extent, full) ||
                    llvm::MulOverflow(xShape[2 + d], strides[d], sameSize);
    if (!overflow) {
      if (outputShapeAttr || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
        overflow = llvm::SubOverflow(
            full, outputShapeAttr ? (*outputShapeAttr)[d] : sameSize, total);
      else
        overflow = llvm::SubOverflow(full, pads[d], outD) ||
                   llvm::SubOverflow(outD, pads[d + spatial], outD);
    }
    if (overflow)
      return nodeError(fmt::format(
          "node '{}' (ConvTranspose): the output size of input {} with "
          "strides {}, kernel {}, pads {} and output_shape {} does not fit "
          "in int64",
          nodeName, shapeStr(xShape), shapeStr(strides), shapeStr(kernel),
          shapeStr(pads),
          outputShapeAttr ? shapeStr(*outputShapeAttr) : std::string("[]")));
    if (outputShapeAttr || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      outSize[d] = outputShapeAttr ? (*outputShapeAttr)[d] : sameSize;
      // Python's floor division, as ONNX's reference: a negative total
      // pads the end (more output, all of it the bias).
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[d] = autoPad == "SAME_UPPER" ? half : total - half;
      pads[d + spatial] = total - pads[d];
    } else {
      outSize[d] = outD;
    }
  }
  // Output beyond the last window (a negative end pad) is the
  // output_padding of the convolution this is the gradient of: at most
  // stride - 1 rows that no window reaches.
  for (size_t d = 0; d < spatial; ++d) {
    if (pads[d + spatial] < 0 && -pads[d + spatial] < strides[d])
      pads[d + spatial] = 0;
    if (pads[d] < 0 || pads[d + spatial] < 0 || outSize[d] < 1)
      return unsupported(fmt::format("pads {} and output size {} (negative "
                                     "pads are not supported)",
                                     shapeStr(pads), shapeStr(outSize)));
  }
  if (spatial == 1) {
    x = as1xL(x);
    w = as1xL(w);
    strides = window1xK(strides, 1);
    dilations = window1xK(dilations, 1);
    pads = pads1xK(pads);
    outSize = window1xK(outSize, 1);
  }
  auto type =
      tensorType({xShape[0], wShape[1] * groups, outSize[0], outSize[1]},
                 cast<RankedTensorType>(x.getType()).getElementType());
  Value y = makeTyped<cnn::Conv2DBwdDataOp>(
      type, {x, w},
      {attr("strides", b.getDenseI64ArrayAttr(strides)),
       attr("padding", b.getDenseI64ArrayAttr(pads)),
       attr("dilations", b.getDenseI64ArrayAttr(dilations)),
       attr("groups", b.getI64IntegerAttr(groups))});
  if (!y)
    return failure();
  if (hasInput(2)) {
    Value bias = weight(2, WeightRole::Param);
    y = make<cnn::BiasAddOp>({y, bias});
    if (!y)
      return failure();
  }
  if (spatial == 1)
    y = reshape(y, {xShape[0], wShape[1] * groups, outSize[1]});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importGemm() {
  // Y = alpha * op(A) x op(B) + beta * C, C broadcast to M x N.
  float alpha = floatAttr("alpha", 1.0f), beta = floatAttr("beta", 1.0f);
  Value a = data(0);
  if (!a)
    return failure();
  Slot *bs = input(1);
  if (!bs)
    return failure();
  Value w = bs->value ? bs->value : weight(1, WeightRole::Param);
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
  if (alpha != 1.0f)
    y = make<cnn::ScaleOp>({y}, {attr("factor", b.getF32FloatAttr(alpha))});
  if (!y)
    return failure();
  if (hasInput(2) && beta != 0.0f) {
    int64_t m = shapeOf(y)[0], n = shapeOf(y)[1];
    Slot *c = input(2);
    if (!c)
      return failure();
    std::vector<int64_t> cShape =
        c->value ? shapeOf(c->value) : c->constant->shape;
    auto numel = checkedNumel(cShape);
    bool perColumn =
        numel && *numel == n &&
        (cShape.size() == 1 || (cShape.size() == 2 && cShape[0] == 1));
    auto scaled = [&](Value v) -> Value {
      if (beta == 1.0f || !v)
        return v;
      return make<cnn::ScaleOp>({v}, {attr("factor", b.getF32FloatAttr(beta))});
    };
    Value bias;
    if (perColumn) {
      bias = scaled(weight(2, WeightRole::Param, n));
      y = make<cnn::BiasAddOp>({y, bias});
    } else if (cShape == std::vector<int64_t>{m, n}) {
      bias = scaled(data(2));
      y = make<cnn::AddOp>({y, bias});
    } else {
      // A scalar or a column: expand a small constant to M x N.
      std::vector<int64_t> bshape;
      std::string err;
      ConstVal full;
      if (!c->constant || c->constant->isInt ||
          !broadcastShapes({m, n}, cShape, bshape, err) ||
          bshape != std::vector<int64_t>{m, n} ||
          !broadcastTo(*c->constant, {m, n}, full, err) ||
          full.numel() > kMaxInlineConstant)
        return unsupported("Gemm bias of shape " + shapeStr(cShape) +
                           " for a result of shape " + shapeStr({m, n}));
      for (float &f : full.floats)
        f *= beta;
      y = make<cnn::AddOp>({y, materialize(full)});
    }
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
  // numpy matmul: a 1-D lhs is a row, a 1-D rhs a column (removed after);
  // N-D x 2-D multiplies the rows of the flattened leading dimensions;
  // N-D x N-D with the same leading dimensions is the batched cnn.matmul.
  auto aShape = shapeOf(a), wShape = shapeOf(w);
  if (aShape.size() >= 3 && wShape.size() == aShape.size() &&
      std::equal(aShape.begin(), aShape.end() - 2, wShape.begin())) {
    Value y = make<cnn::MatmulOp>(
        {a, w}, {attr("transpose_lhs", b.getBoolAttr(false)),
                 attr("transpose_rhs", b.getBoolAttr(false))});
    if (!y)
      return failure();
    setOutput(0, y);
    return success();
  }
  if (aShape.empty() || wShape.empty() || wShape.size() > 2)
    return unsupported("MatMul of " + shapeStr(aShape) + " x " +
                       shapeStr(wShape) +
                       " (the right operand must be 1-D or 2-D, or have the "
                       "left one's rank and leading dimensions)");
  std::vector<int64_t> outShape(aShape.begin(), aShape.end() - 1);
  if (aShape.size() == 1)
    outShape.clear();
  int64_t k = aShape.back();
  int64_t rows = 1;
  for (int64_t d : outShape)
    rows *= d;
  if (wShape.size() == 1)
    w = reshape(w, {wShape[0], 1});
  else
    outShape.push_back(wShape[1]);
  Value a2 = reshape(a, {rows, k});
  Value y = make<cnn::MatmulOp>({a2, w},
                                {attr("transpose_lhs", b.getBoolAttr(false)),
                                 attr("transpose_rhs", b.getBoolAttr(false))});
  if (!y)
    return failure();
  y = reshape(y, outShape);
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
  // A computed constant folds: TF "same" padding (timm's pad_same) clamps
  // its pad amounts at 0 with a Clip of values computed from static sizes.
  // An initializer keeps its path through data() (a large one is a
  // parameter).
  Slot *in = input(0);
  if (!in)
    return failure();
  if (in->constant && !in->isInitializer) {
    ConstVal out = *in->constant;
    // Integer data is compared as double and a bound saturated: one beyond
    // int64's range (the default +-FLT_MAX) must not be converted as is.
    auto toInt = [](double d) -> int64_t {
      if (d >= 9.2233720368547758e18)
        return std::numeric_limits<int64_t>::max();
      if (d <= -9.2233720368547758e18)
        return std::numeric_limits<int64_t>::min();
      return int64_t(d);
    };
    for (int64_t &v : out.ints) {
      if (double(v) < double(lo))
        v = toInt(std::ceil(double(lo)));
      if (double(v) > double(hi))
        v = toInt(std::floor(double(hi)));
    }
    for (float &v : out.floats)
      v = std::min(std::max(v, lo), hi);
    setOutput(0, std::move(out));
    return success();
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
  if (!kernel || kernel->size() < 1 || kernel->size() > 2)
    return unsupported("only 1-D and 2-D pooling (a kernel_shape of 1 or 2 "
                       "entries) is supported");
  size_t spatial = kernel->size();
  std::vector<int64_t> ones(spatial, 1);
  auto strides = intsAttr("strides").value_or(ones);
  auto dilations = intsAttr("dilations").value_or(ones);
  if (strides.size() != spatial)
    return unsupported(fmt::format("strides must have {} entries", spatial));
  if (dilations != ones)
    return unsupported("pooling with dilations " + shapeStr(dilations));
  // storage_order only orders the Indices output, which is not offered.
  auto inShape = shapeOf(x);
  if (inShape.size() != 2 + spatial)
    return nodeError(fmt::format("input of node '{}' ({}) must be {}-D for a "
                                 "kernel_shape of {} entries, got {}",
                                 nodeName, node->op_type(), 2 + spatial,
                                 spatial, shapeStr(inShape)));
  std::vector<int64_t> pads;
  if (failed(windowPadding(*kernel, strides, dilations, x, pads)))
    return failure();
  if (spatial == 1) {
    x = as1xL(x);
    kernel = window1xK(*kernel, 1);
    strides = window1xK(strides, 1);
    pads = pads1xK(pads);
  }
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
  if (y && spatial == 1) {
    auto yShape = shapeOf(y);
    y = reshape(y, {yShape[0], yShape[1], yShape[3]});
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
  // cnn.batch_norm takes N x C and N x C x H x W; N x C x L (BatchNorm1d
  // over a sequence) normalizes per channel over N and L alike, as
  // N x C x L x 1.
  std::vector<int64_t> xShape = shapeOf(x);
  if (xShape.size() != 2 && xShape.size() != 3 && xShape.size() != 4)
    return unsupported("BatchNormalization of a rank-" +
                       std::to_string(xShape.size()) + " input " +
                       shapeStr(xShape) + " (rank 2, 3 or 4 is supported)");
  if (xShape.size() == 3)
    x = reshape(x, {xShape[0], xShape[1], xShape[2], 1});
  auto restore = [&](Value y) { return reshape(y, xShape); };
  // scale / bias: an initializer is a parameter; a Constant node is a fixed
  // value, not one: PyTorch exports BatchNorm2d(affine=False) so (ones and
  // zeros), and training it would add parameters PyTorch does not have.
  auto affine = [&](int i) -> Value {
    Slot *s = input(i);
    if (!s)
      return {};
    if (!s->constant || isWeightInitializer(*s))
      return weight(i, WeightRole::Param);
    if (s->constant->numel() != xShape[1]) {
      (void)nodeError(fmt::format("BatchNormalization input {} of node '{}' "
                                  "has shape {}, expected {} values",
                                  i, nodeName, shapeStr(s->constant->shape),
                                  xShape[1]));
      return {};
    }
    ConstVal c = *s->constant;
    c.shape = {xShape[1]};
    return materialize(c);
  };
  Value scale = affine(1);
  if (!scale)
    return failure();
  Value bias = affine(2);
  if (!bias)
    return failure();
  Value mean = weight(3, WeightRole::Buffer);
  if (!mean)
    return failure();
  Value var = weight(4, WeightRole::Buffer);
  if (!var)
    return failure();
  // Opsets 7-8 have `spatial` (1: per channel, the only form cnn has);
  // opset 14+ has training_mode.
  if (intAttr("spatial", 1) != 1)
    return unsupported("BatchNormalization with spatial=0");
  float epsilon = floatAttr("epsilon", 1e-5f);
  // ONNX's momentum weighs the old running statistic (default 0.9); cnn's
  // is PyTorch's, 1 - ONNX's (MNASNet: 0.0003). The f32 attribute is read
  // as the shortest decimal that rounds to it (0.9997, not 0.99970001) so
  // 1 - it is PyTorch's value.
  double onnxMomentum =
      std::stod(fmt::format("{}", floatAttr("momentum", 0.9f)));
  if (!(onnxMomentum >= 0 && onnxMomentum <= 1))
    return nodeError(fmt::format("node '{}' (BatchNormalization): momentum "
                                 "{} is outside [0, 1]",
                                 nodeName, onnxMomentum));
  if (options.runForward && intAttr("training_mode", 0) != 0) {
    // Run as exported: normalize with the batch statistics. ONNX's momentum
    // weighs the running value, cnn's (PyTorch's) the batch statistic.
    auto train = cnn::BatchNormTrainOp::create(
        b, loc,
        TypeRange{x.getType(), scale.getType(), scale.getType(),
                  scale.getType(), scale.getType()},
        x, scale, bias, mean, var, b.getF32FloatAttr(epsilon),
        b.getF32FloatAttr(1.0 - onnxMomentum), nullptr);
    if (failed(mlir::verify(train, /*verifyRecursively=*/false)))
      return failure();
    Value y = restore(train.getResult());
    if (!y)
      return failure();
    setOutput(0, y);
    // ONNX updates the running variance with the biased batch variance,
    // PyTorch (and cnn) with the unbiased one: not offered.
    for (int i = 1; i < node->output_size(); ++i)
      markUnavailable(i, "the running statistics outputs of a training-mode "
                         "BatchNormalization are not supported");
    return success();
  }
  // A node in inference form (training_mode 0 and no running-statistics
  // outputs) is what PyTorch exports for a BatchNorm module in eval mode
  // (TrainingMode.PRESERVE): the training step normalizes it with the
  // running statistics and leaves them as they are, as PyTorch's step does.
  int outputs = 0;
  for (const std::string &o : node->output())
    outputs += !o.empty();
  SmallVector<NamedAttribute> bnAttrs{
      attr("epsilon", b.getF32FloatAttr(epsilon)),
      attr("momentum", b.getF32FloatAttr(1.0 - onnxMomentum))};
  if (intAttr("training_mode", 0) == 0 && outputs <= 1)
    bnAttrs.push_back(attr("use_running_stats", b.getUnitAttr()));
  Value y = make<cnn::BatchNormOp>({x, scale, bias, mean, var}, bnAttrs);
  y = restore(y);
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
  // Pow's exponent may be an integer tensor; the base (and the result) is
  // float, as for the other ops, whose operands share one type.
  bool isPow = opType == "Pow";
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
  if (isPow && l->constant && r->constant)
    return unsupported("a constant base is not supported");
  // A float initializer (not a scalar) is a parameter (paramInput): folding
  // it with a constant would freeze it. timm's ScaledStdConv2d multiplies
  // its learned gain by a constant scale before the BatchNormalization on
  // its weight (gain * scale).
  auto isParam = [](const Slot *s) {
    return s->isInitializer && !s->constant->isInt &&
           s->constant->numel() != 1;
  };
  if (l->constant && r->constant && !isParam(l) && !isParam(r)) {
    ConstVal out;
    std::string err;
    if (!foldBinary(kind, *l->constant, *r->constant, out, err))
      return nodeError("node '" + nodeName + "' (" + opType + "): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  if (!isPow && kind != BinaryKind::Add && kind != BinaryKind::Sub &&
      kind != BinaryKind::Mul && kind != BinaryKind::Div)
    return unsupported("only constant operands are supported");
  if (!(l = paramInput(0)) || !(r = paramInput(1)))
    return failure();
  // Faithfully the broadcasting cnn op; canonicalization turns a scalar
  // factor into cnn.scale and a per-channel addend into cnn.bias_add.
  std::vector<int64_t> shapes[2];
  for (int i = 0; i < 2; ++i) {
    Slot *s = i ? r : l;
    shapes[i] = s->value ? shapeOf(s->value) : s->constant->shape;
  }
  std::vector<int64_t> outShape;
  std::string err;
  // A runtime tensor is not bounded by the constant-folding limit (an
  // activation of batch 64 at 112x112 has 25.7M elements).
  if (!broadcastShapes(shapes[0], shapes[1], outShape, err,
                       std::numeric_limits<int64_t>::max()))
    return nodeError(fmt::format(
        "operands of node '{}' ({}) do not broadcast: '{}' is {} and '{}' is "
        "{} ({})",
        nodeName, opType.str(), node->input(0), shapeStr(shapes[0]),
        node->input(1), shapeStr(shapes[1]), err));
  // An Expand's output that this op would broadcast anyway: its input gives
  // the same result (ECA's x * y.expand_as(x)), and the broadcast is left
  // unused. Operand 1 is checked against operand 0 as it will be read.
  Value unexpanded[2];
  for (int i = 0; i < 2; ++i) {
    Slot *s = i ? r : l;
    if (!s->value || !s->expandedFrom)
      continue;
    std::vector<int64_t> from = shapeOf(s->expandedFrom), same;
    std::string ignored;
    if (broadcastShapes(from, shapes[1 - i], same, ignored,
                        std::numeric_limits<int64_t>::max()) &&
        same == outShape) {
      unexpanded[i] = s->expandedFrom;
      shapes[i] = from;
    }
  }
  int64_t rank = outShape.size();
  Value operands[2];
  for (int i = 0; i < 2; ++i) {
    Slot *s = i ? r : l;
    // The operand's shape with leading 1s up to the result's rank.
    std::vector<int64_t> aligned(rank - shapes[i].size(), 1);
    aligned.insert(aligned.end(), shapes[i].begin(), shapes[i].end());
    if (s->value) {
      operands[i] = reshape(unexpanded[i] ? unexpanded[i] : s->value, aligned);
      continue;
    }
    const ConstVal &c = *s->constant;
    // A per-channel initializer (only dimension 1 of the result not 1) stays
    // a parameter: the channel vector, expanded by a reshape.
    bool perChannel = s->isInitializer && !c.isInt && rank >= 2 &&
                      c.numel() > 1 && c.numel() == outShape[1];
    for (int64_t d = 0; d < rank && perChannel; ++d)
      if (d != 1 && aligned[d] != 1)
        perChannel = false;
    if (perChannel) {
      operands[i] = reshape(weight(i, WeightRole::Param, c.numel()), aligned);
      continue;
    }
    if (s->isInitializer && isLearnedScalar(node->input(i), c)) {
      operands[i] =
          reshape(weight(i, WeightRole::Param, std::nullopt), aligned);
      continue;
    }
    if (c.numel() == 1 || !s->isInitializer ||
        c.numel() <= kMaxInlineConstant) {
      ConstVal shaped = c;
      if (isPow && c.isInt) // float(int) as numpy's float ** int
        shaped = ConstVal::floatTensor(
            c.shape, std::vector<float>(c.ints.begin(), c.ints.end()));
      shaped.shape = aligned;
      operands[i] = materialize(shaped);
      continue;
    }
    operands[i] = reshape(data(i), aligned);
  }
  if (!operands[0] || !operands[1])
    return failure();
  Value y;
  switch (kind) {
  case BinaryKind::Add:
    y = make<cnn::AddOp>({operands[0], operands[1]});
    break;
  case BinaryKind::Sub:
    y = make<cnn::SubOp>({operands[0], operands[1]});
    break;
  case BinaryKind::Mul:
    y = make<cnn::MulOp>({operands[0], operands[1]});
    break;
  default:
    y = isPow ? make<cnn::PowTensorOp>({operands[0], operands[1]})
              : make<cnn::DivOp>({operands[0], operands[1]});
    break;
  }
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
  // Copied first: when the data and the shape are the same initializer,
  // paramInput turns it into a parameter and frees the constant (a
  // heap-use-after-free found by the structured ONNX fuzzer).
  std::vector<int64_t> requested = shapeC->asInts();
  Slot *s = paramInput(0);
  if (!s)
    return failure();
  bool allowZero = intAttr("allowzero", 0) != 0;
  std::vector<int64_t> inShape =
      s->value ? shapeOf(s->value) : s->constant->shape;
  // The export-time batch at the front of a target whose input leads with
  // the batch --batch set: the exporter computed it from the batch (see
  // exportedBatch), so it is the batch.
  if (exportedBatch > 0 && s->value && !requested.empty() &&
      requested[0] == exportedBatch && !inShape.empty() &&
      inShape[0] == options.batch) {
    requested[0] = options.batch;
    if (rebatchedReshapes++ == 0)
      firstRebatchedReshape = nodeName;
  }
  std::vector<int64_t> target;
  std::string err;
  if (!reshapeTarget(inShape, requested, allowZero, target, err))
    return nodeError("node '" + nodeName + "' (Reshape): " + err);
  if (s->constant) {
    ConstVal out = *s->constant;
    out.shape = target;
    setOutput(0, std::move(out));
    keepViewOf(s);
    return success();
  }
  Value y = reshape(s->value, target);
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importFlatten() {
  Slot *s = paramInput(0);
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
  Slot *s = paramInput(0);
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
  // Opset 12+: training_mode input (default false); before: is_test attr
  // (opset < 7) or none (inference).
  bool training = false;
  if (hasInput(2)) {
    Slot *t = input(2);
    if (!t)
      return failure();
    if (!t->constant) {
      if (options.runForward)
        return unsupported("a training_mode computed at run time");
      training = true;
    } else {
      training = t->constant->numel() == 1 && t->constant->at(0) != 0;
    }
  }
  if (options.runForward && training && ratio != 0.0f)
    return unsupported(fmt::format(
        "Dropout in training mode (training_mode=1, ratio {}) draws a random "
        "mask; the reference run of @forward is deterministic (export the "
        "model in eval mode, or train it with --train)",
        ratio));
  if (ratio < 0.0f || ratio >= 1.0f)
    return nodeError(fmt::format("Dropout ratio {} of node '{}' is outside "
                                 "[0, 1)",
                                 ratio, nodeName));
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
  Slot *s = paramInput(0);
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
    keepViewOf(s);
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

/// Expand (opset 8+): numpy's bidirectional broadcast of the input to
/// `shape`; the result's shape is broadcast(input, shape), so `shape` may
/// have fewer dimensions than the input, or 1s where it has more. Constants
/// fold. A run-time tensor (or a float initializer: a parameter, as for the
/// other ops that move tensors) becomes cnn.add(x, 0): an op every stage
/// knows, whose gradient is x's summed over the broadcast dimensions. The
/// output slot keeps x (Slot::expandedFrom): a broadcasting consumer whose
/// other operand already has the expanded shape (ECA's x * y.expand_as(x))
/// reads x itself, and a broadcast no consumer needs is erased at the end
/// of the import (no memory, no kernel).
LogicalResult Importer::importExpand() {
  const ConstVal *shapeC = constant(1, "shape");
  if (!shapeC)
    return failure();
  // Copied first: paramInput may free the constant (see importReshape).
  std::vector<int64_t> requested = shapeC->asInts();
  Slot *s = paramInput(0);
  if (!s)
    return failure();
  std::vector<int64_t> inShape =
      s->value ? shapeOf(s->value) : s->constant->shape;
  std::vector<int64_t> target;
  std::string err;
  if (s->constant) {
    ConstVal out;
    if (!broadcastShapes(inShape, requested, target, err) ||
        !broadcastTo(*s->constant, target, out, err))
      return nodeError("node '" + nodeName + "' (Expand): " + err);
    setOutput(0, std::move(out));
    return success();
  }
  if (!broadcastShapes(inShape, requested, target, err,
                       std::numeric_limits<int64_t>::max()))
    return nodeError("node '" + nodeName + "' (Expand): " + err);
  Value x = alignRank(s->value, target.size());
  if (!x)
    return failure();
  if (x != s->value)
    expandOps.push_back(x.getDefiningOp());
  Value y = broadcastRunTime(x, target, expandOps);
  if (!y)
    return failure();
  setOutput(0, y);
  if (y != x && node->output_size() > 0 && !node->output(0).empty())
    slots[node->output(0)].expandedFrom = x;
  return success();
}

Value Importer::broadcastRunTime(Value x, const std::vector<int64_t> &target,
                                 SmallVectorImpl<Operation *> &created) {
  auto type = cast<RankedTensorType>(x.getType());
  std::vector<int64_t> shape = shapeOf(x);
  // The broadcast dimensions, in groups whose zero constant has at most
  // kMaxInlineConstant elements (a dimension larger than that alone): the
  // CUDA target fills each constant's buffer.
  std::vector<std::vector<int64_t>> groups;
  int64_t size = 0;
  for (size_t d = 0; d < target.size(); ++d) {
    if (shape[d] == target[d])
      continue;
    if (groups.empty() || size * target[d] > kMaxInlineConstant) {
      groups.emplace_back(target.size(), 1);
      size = 1;
    }
    groups.back()[d] = target[d];
    size *= target[d];
  }
  Value y = x;
  for (const std::vector<int64_t> &zeroShape : groups) {
    auto zeroType = tensorType(zeroShape, type.getElementType());
    Value zero = makeTyped<cnn::ConstantOp>(
        zeroType, {}, {attr("value", DenseElementsAttr::get(zeroType, 0.0f))});
    if (!zero)
      return {};
    created.push_back(zero.getDefiningOp());
    y = make<cnn::AddOp>({y, zero});
    if (!y)
      return {};
    created.push_back(y.getDefiningOp());
  }
  return y;
}

LogicalResult Importer::importIdentity() {
  // Not paramInput: the exporter writes value-identical initializers (an eval
  // export's folded zero biases) once, behind Identity nodes that give each
  // use its name; each must stay a parameter of its own.
  Slot *s = input(0);
  if (!s)
    return failure();
  if (node->output_size() > 0 && !node->output(0).empty()) {
    Slot copy = *s;
    // A new name: not an initializer for paramInput, but a weight named so
    // is a parameter of its own (Slot::initializerCopy).
    copy.initializerCopy = s->isInitializer || s->initializerCopy;
    copy.isInitializer = false;
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

LogicalResult Importer::importSize() {
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

/// Where: folded on constants; with a run-time X or Y, cnn.select on the
/// constant condition materialized as 0 / 1 (cnnc has no run-time boolean
/// tensors: a computed condition is refused).
LogicalResult Importer::importWhere() {
  Slot *xs = input(1), *ys = xs ? input(2) : nullptr;
  if (!ys)
    return failure();
  if (!xs->constant || !ys->constant) {
    const ConstVal *c = constant(0, "condition");
    if (!c)
      return failure();
    std::vector<float> flags(c->numel());
    for (int64_t k = 0; k < c->numel(); ++k)
      flags[k] = c->at(k) != 0 ? 1.0f : 0.0f;
    Value cond = materialize(ConstVal::floatTensor(c->shape, flags));
    Value x = data(1), y = data(2);
    if (!cond || !x || !y)
      return failure();
    int64_t rank = std::max({shapeOf(cond).size(), shapeOf(x).size(),
                             shapeOf(y).size()});
    Value r = make<cnn::SelectOp>(
        {alignRank(cond, rank), alignRank(x, rank), alignRank(y, rank)});
    if (!r)
      return failure();
    setOutput(0, r);
    return success();
  }
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

LogicalResult Importer::importRange() {
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

LogicalResult Importer::importNeg() {
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

/// Ceil / Floor of a constant (TF "same" padding computes its pads from the
/// static shapes, e.g. timm's tf_efficientnet): folded; a run-time operand is
/// refused by `constant` with the op named.
LogicalResult Importer::importCeilFloor() {
  const ConstVal *c = constant(0, "X");
  if (!c)
    return failure();
  ConstVal out = *c;
  bool ceil = node->op_type() == "Ceil";
  for (float &v : out.floats)
    v = ceil ? std::ceil(v) : std::floor(v);
  setOutput(0, std::move(out));
  return success();
}

/// Min / Max over 1..n inputs (numpy broadcasting): constants fold; with a
/// run-time operand, a chain of cnn.minimum / cnn.maximum.
LogicalResult Importer::importMinMax() {
  StringRef opType = node->op_type();
  bool isMax = opType == "Max";
  // Sum and Mean: a chain of cnn.add (Mean then scaled by 1 / n).
  bool isSum = opType == "Sum" || opType == "Mean";
  std::vector<int> present;
  for (int i = 0; i < node->input_size(); ++i)
    if (hasInput(i))
      present.push_back(i);
  if (present.empty())
    return nodeError(fmt::format("{} node '{}' has no inputs",
                                 node->op_type(), nodeName));
  std::vector<Slot *> ins;
  bool allConst = true;
  for (int i : present) {
    Slot *s = input(i);
    if (!s)
      return failure();
    ins.push_back(s);
    allConst &= bool(s->constant);
  }
  if (allConst) {
    ConstVal acc = *ins[0]->constant;
    for (size_t k = 1; k < ins.size(); ++k) {
      ConstVal out;
      std::string err;
      BinaryKind kind = isSum   ? BinaryKind::Add
                        : isMax ? BinaryKind::Max
                                : BinaryKind::Min;
      if (!foldBinary(kind, acc, *ins[k]->constant, out, err))
        return nodeError("node '" + nodeName + "' (" + node->op_type() +
                         "): " + err);
      acc = std::move(out);
    }
    if (opType == "Mean") {
      ConstVal out;
      std::string err;
      if (!foldBinary(BinaryKind::Div, acc,
                      ConstVal::floatTensor({}, {float(ins.size())}), out,
                      err))
        return nodeError("node '" + nodeName + "' (Mean): " + err);
      acc = std::move(out);
    }
    setOutput(0, std::move(acc));
    return success();
  }
  // Initializers among run-time operands are parameters (as for Add).
  SmallVector<Value> values;
  std::vector<int64_t> outShape;
  for (int i : present) {
    Slot *s = paramInput(i);
    if (!s)
      return failure();
    Value v = s->value ? s->value : data(i);
    if (!v)
      return failure();
    std::vector<int64_t> next;
    std::string err;
    if (values.empty()) {
      next = shapeOf(v);
    } else if (!broadcastShapes(outShape, shapeOf(v), next, err,
                                std::numeric_limits<int64_t>::max())) {
      return nodeError(fmt::format("operands of node '{}' ({}) do not "
                                   "broadcast: '{}' is {} ({})",
                                   nodeName, node->op_type(), node->input(i),
                                   shapeStr(shapeOf(v)), err));
    }
    outShape = next;
    values.push_back(v);
  }
  int64_t rank = outShape.size();
  Value y = alignRank(values[0], rank);
  for (size_t k = 1; k < values.size() && y; ++k) {
    Value rhs = alignRank(values[k], rank);
    y = isSum   ? make<cnn::AddOp>({y, rhs})
        : isMax ? make<cnn::MaximumOp>({y, rhs})
                : make<cnn::MinimumOp>({y, rhs});
  }
  if (y && opType == "Mean" && values.size() > 1)
    y = make<cnn::DivOp>({y, scalarConstant(float(values.size()), rank)});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

LogicalResult Importer::importNegNode() {
  Slot *s = input(0);
  if (!s)
    return failure();
  if (s->constant)
    return importNeg();
  return importUnary<cnn::NegOp>();
}

LogicalResult Importer::importPow() {
  Slot *e = input(1);
  if (!e)
    return failure();
  // Any other exponent: the broadcasting binary op.
  if (!e->constant || e->constant->numel() != 1)
    return importBinary("Pow");
  Value y = make<cnn::PowOp>(
      {data(0)},
      {attr("exponent", b.getF32FloatAttr(float(e->constant->at(0))))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// ReduceMean / ReduceSum / ReduceMax and the reductions composed of them
/// and elementwise ops (ReduceL2, ReduceL1, ReduceSumSquare, ReduceLogSum,
/// ReduceMin): axes from the attribute (before opset 18, 13 for ReduceSum)
/// or the constant input; keepdims; noop_with_empty_axes.
LogicalResult Importer::importReduce() {
  StringRef opType = node->op_type();
  Value x = data(0);
  if (!x)
    return failure();
  std::vector<int64_t> axes;
  bool present = false;
  if (failed(intsFromAttrOrInput("axes", 1, axes, present)))
    return failure();
  auto shape = shapeOf(x);
  int64_t rank = shape.size();
  if (axes.empty()) {
    if (intAttr("noop_with_empty_axes", 0) != 0) {
      setOutput(0, x);
      return success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes)
    if (!normalizeAxis(a, rank))
      return nodeError(fmt::format("{} axes {} of node '{}' are out of range "
                                   "for rank {}",
                                   node->op_type(), shapeStr(axes), nodeName,
                                   rank));
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return nodeError(fmt::format("{} axes of node '{}' repeat a dimension",
                                 node->op_type(), nodeName));
  NamedAttribute axesAttr = attr("axes", b.getDenseI64ArrayAttr(axes));
  Value y;
  if (opType == "ReduceMean")
    y = make<cnn::ReduceMeanOp>({x}, {axesAttr});
  else if (opType == "ReduceMax")
    y = make<cnn::ReduceMaxOp>({x}, {axesAttr});
  else if (opType == "ReduceL2") // torch.norm(x, 2, dim)
    y = make<cnn::SqrtOp>(
        {make<cnn::ReduceSumOp>({make<cnn::MulOp>({x, x})}, {axesAttr})});
  else if (opType == "ReduceSumSquare")
    y = make<cnn::ReduceSumOp>({make<cnn::MulOp>({x, x})}, {axesAttr});
  else if (opType == "ReduceL1") // torch.norm(x, 1, dim)
    y = make<cnn::ReduceSumOp>({make<cnn::AbsOp>({x})}, {axesAttr});
  else if (opType == "ReduceLogSum")
    y = make<cnn::LogOp>({make<cnn::ReduceSumOp>({x}, {axesAttr})});
  else if (opType == "ReduceProd")
    y = make<cnn::ReduceProdOp>({x}, {axesAttr});
  else if (opType == "ReduceMin") // torch.amin: -max(-x), ties split as amax
    y = make<cnn::NegOp>(
        {make<cnn::ReduceMaxOp>({make<cnn::NegOp>({x})}, {axesAttr})});
  else
    y = make<cnn::ReduceSumOp>({x}, {axesAttr});
  if (y && intAttr("keepdims", 1) == 0) {
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(axes, d))
        kept.push_back(shape[d]);
    y = reshape(y, kept);
  }
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// LayerNormalization (opset 17) over dims [axis, rank):
///   d = x - mean(x); y = d / sqrt(mean(d * d) + epsilon) * scale + bias
/// with scale and bias broadcast (rank-aligned) against the input.
LogicalResult Importer::importLayerNorm() {
  Value x = data(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  int64_t axis = intAttr("axis", -1);
  if (!normalizeAxis(axis, rank))
    return nodeError(fmt::format("LayerNormalization axis {} of node '{}' is "
                                 "out of range for rank {}",
                                 intAttr("axis", -1), nodeName, rank));
  float epsilon = floatAttr("epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d)
    axes.push_back(d);
  NamedAttribute axesAttr = attr("axes", b.getDenseI64ArrayAttr(axes));
  Value mean = make<cnn::ReduceMeanOp>({x}, {axesAttr});
  Value d = make<cnn::SubOp>({x, mean});
  Value var = make<cnn::ReduceMeanOp>({make<cnn::MulOp>({d, d})}, {axesAttr});
  Value denom = make<cnn::SqrtOp>(
      {make<cnn::AddOp>({var, scalarConstant(epsilon, rank)})});
  Value y = make<cnn::DivOp>({d, denom});
  if (!y)
    return failure();
  auto affine = [&](int i) -> Value {
    Slot *s = input(i);
    if (!s)
      return {};
    Value v = s->value ? s->value : weight(i, WeightRole::Param);
    if (v && int64_t(shapeOf(v).size()) > rank) {
      (void)nodeError(fmt::format("LayerNormalization input {} of node '{}' "
                                  "has a higher rank than the input",
                                  i, nodeName));
      return {};
    }
    return alignRank(v, rank);
  };
  y = make<cnn::MulOp>({y, affine(1)});
  if (y && hasInput(2))
    y = make<cnn::AddOp>({y, affine(2)});
  if (!y)
    return failure();
  setOutput(0, y);
  for (int i = 1; i < node->output_size(); ++i)
    markUnavailable(i, "the Mean and InvStdDev outputs of LayerNormalization "
                       "are not supported");
  return success();
}

/// InstanceNormalization over the spatial dims [2, rank), per sample and
/// channel, decomposed as LayerNormalization is:
///   d = x - mean(x); y = d / sqrt(mean(d * d) + epsilon) * scale[c] + bias[c]
/// PyTorch exports nn.GroupNorm as Reshape(N x G x -1) -> this (scale 1,
/// bias 0: Constant nodes, left out) -> Reshape -> Mul -> Add.
LogicalResult Importer::importInstanceNorm() {
  Value x = data(0);
  if (!x)
    return failure();
  auto shape = shapeOf(x);
  int64_t rank = shape.size();
  if (rank < 3)
    return nodeError(fmt::format("input of node '{}' (InstanceNormalization) "
                                 "must have rank >= 3 (N x C x D1 ...), got {}",
                                 nodeName, shapeStr(shape)));
  float epsilon = floatAttr("epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  NamedAttribute axesAttr = attr("axes", b.getDenseI64ArrayAttr(axes));
  Value mean = make<cnn::ReduceMeanOp>({x}, {axesAttr});
  Value d = make<cnn::SubOp>({x, mean});
  Value var = make<cnn::ReduceMeanOp>({make<cnn::MulOp>({d, d})}, {axesAttr});
  Value denom = make<cnn::SqrtOp>(
      {make<cnn::AddOp>({var, scalarConstant(epsilon, rank)})});
  Value y = make<cnn::DivOp>({d, denom});
  if (!y)
    return failure();
  // scale / bias: C values, as 1 x C x 1 ... A Constant node (not an
  // initializer or a copy of one) is a fixed value, not a parameter: the
  // identity ones are dropped (GroupNorm's and an affine=False
  // InstanceNorm's).
  std::vector<int64_t> perChannel(rank, 1);
  perChannel[1] = shape[1];
  auto affine = [&](int i, float identity) -> std::optional<Value> {
    Slot *s = input(i);
    if (!s)
      return Value();
    if (s->constant && !isWeightInitializer(*s)) {
      if (!s->constant->isInt && s->constant->numel() == shape[1] &&
          llvm::all_of(s->constant->floats,
                       [&](float v) { return v == identity; }))
        return std::nullopt;
      ConstVal c = *s->constant;
      if (c.numel() != shape[1]) {
        (void)nodeError(fmt::format("InstanceNormalization input {} of node "
                                    "'{}' has shape {}, expected {} values",
                                    i, nodeName, shapeStr(c.shape), shape[1]));
        return Value();
      }
      c.shape = perChannel;
      return materialize(c);
    }
    return reshape(weight(i, WeightRole::Param, shape[1]), perChannel);
  };
  if (auto scale = affine(1, 1.0f)) {
    y = make<cnn::MulOp>({y, *scale});
    if (!y)
      return failure();
  }
  if (auto bias = affine(2, 0.0f)) {
    y = make<cnn::AddOp>({y, *bias});
    if (!y)
      return failure();
  }
  setOutput(0, y);
  return success();
}

/// LogSoftmax: x - m - log(sum(exp(x - m))) with m = max(x) over the axis
/// (opset 13+) or, before opset 13, over [axis, rank) (the input flattened
/// to 2-D at `axis`, the second dimension normalized). Subtracting the max
/// keeps exp from overflowing.
LogicalResult Importer::importLogSoftmax() {
  Value x = data(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  int64_t axis = intAttr("axis", opset < 13 ? 1 : -1);
  if (!normalizeAxis(axis, rank))
    return nodeError(fmt::format("LogSoftmax axis {} of node '{}' is out of "
                                 "range for rank {}",
                                 intAttr("axis", opset < 13 ? 1 : -1), nodeName,
                                 rank));
  std::vector<int64_t> axes{axis};
  if (opset < 13)
    for (int64_t d = axis + 1; d < rank; ++d)
      axes.push_back(d);
  Value y = logSoftmax(x, axes);
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

Value Importer::logSoftmax(Value x, ArrayRef<int64_t> axes) {
  NamedAttribute axesAttr = attr("axes", b.getDenseI64ArrayAttr(axes));
  Value m = make<cnn::ReduceMaxOp>({x}, {axesAttr});
  Value d = make<cnn::SubOp>({x, m});
  Value lse = make<cnn::LogOp>(
      {make<cnn::ReduceSumOp>({make<cnn::ExpOp>({d})}, {axesAttr})});
  return make<cnn::SubOp>({d, lse});
}

Value Importer::integerInput(int i, StringRef what) {
  Slot *s = input(i);
  if (!s)
    return {};
  if (s->value) {
    if (!cast<RankedTensorType>(s->value.getType())
             .getElementType()
             .isInteger())
      (void)nodeError(fmt::format("{} '{}' of node '{}' ({}) must be an "
                                  "integer tensor",
                                  what.str(), node->input(i), nodeName,
                                  node->op_type()));
    return s->value;
  }
  const ConstVal &c = *s->constant;
  if (!c.isInt) {
    (void)nodeError(fmt::format("{} '{}' of node '{}' ({}) must be an "
                                "integer tensor, got float values",
                                what.str(), node->input(i), nodeName,
                                node->op_type()));
    return {};
  }
  if (c.numel() > kMaxInlineConstant) {
    (void)nodeError(fmt::format("node '{}' ({}) needs a constant of shape {} "
                                "({} elements, more than {})",
                                nodeName, node->op_type(), shapeStr(c.shape),
                                c.numel(), kMaxInlineConstant));
    return {};
  }
  auto type = tensorType(c.shape, b.getI64Type());
  Value v = makeTyped<cnn::ConstantOp>(
      type, {}, {attr("value", DenseElementsAttr::get(type, ArrayRef(c.ints)))});
  if (v)
    s->value = v;
  return v;
}

LogicalResult
Importer::lossAttributes(SmallVectorImpl<NamedAttribute> &attrs) {
  std::string reduction = stringAttr("reduction", "mean");
  std::optional<cnn::LossReduction> kind =
      cnn::symbolizeLossReduction(reduction);
  if (!kind)
    return unsupported(fmt::format("reduction '{}' (none, sum or mean)",
                                   reduction));
  attrs.push_back(
      attr("reduction", cnn::LossReductionAttr::get(&ctx, *kind)));
  if (getAttr("ignore_index"))
    attrs.push_back(
        attr("ignore_index", b.getI64IntegerAttr(intAttr("ignore_index", 0))));
  return success();
}

LogicalResult Importer::importDepthSpace() {
  bool toSpace = node->op_type() == "DepthToSpace";
  Value x = data(0);
  if (!x)
    return failure();
  auto s = shapeOf(x);
  int64_t block = intAttr("blocksize", 0);
  std::string mode = stringAttr("mode", "DCR");
  if (toSpace && mode != "DCR" && mode != "CRD")
    return unsupported("mode '" + mode + "' (DCR or CRD)");
  if (s.size() != 4 || block < 1)
    return nodeError(fmt::format("node '{}' ({}) needs an N x C x H x W "
                                 "input and a blocksize >= 1, got {} and {}",
                                 nodeName, node->op_type(), shapeStr(s),
                                 block));
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  std::vector<int64_t> split, perm, merged;
  if (toSpace) {
    if (c % (block * block) != 0)
      return nodeError(fmt::format("node '{}' (DepthToSpace): channels {} are "
                                   "not a multiple of blocksize^2 = {}",
                                   nodeName, c, block * block));
    int64_t cb = c / (block * block);
    if (mode == "DCR") {
      split = {n, block, block, cb, h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      split = {n, cb, block, block, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    }
    merged = {n, cb, h * block, w * block};
  } else {
    if (h % block != 0 || w % block != 0)
      return nodeError(fmt::format("node '{}' (SpaceToDepth): H x W {} x {} "
                                   "are not multiples of the blocksize {}",
                                   nodeName, h, w, block));
    split = {n, c, h / block, block, w / block, block};
    perm = {0, 3, 5, 1, 2, 4};
    merged = {n, c * block * block, h / block, w / block};
  }
  Value y = make<cnn::TransposeOp>(
      {reshape(x, split)}, {attr("permutation", b.getDenseI64ArrayAttr(perm))});
  y = reshape(y, merged);
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// LRN (AlexNet, GoogLeNet): y = x / (bias + alpha / size * s)^beta with s
/// the sum of x^2 over the channels [c - floor((size-1)/2), c +
/// ceil((size-1)/2)] clipped to [0, C). The window sum is size times an
/// average pooling of x^2 over N x 1 x C x (rest) with a size x 1 window and
/// that padding, counting the padding: every part has a gradient rule and a
/// GPU kernel.
LogicalResult Importer::importLRN() {
  Value x = data(0);
  if (!x)
    return failure();
  auto shape = shapeOf(x);
  int64_t size = intAttr("size", 0);
  if (shape.size() < 3 || size < 1)
    return nodeError(fmt::format("node '{}' (LRN) needs an N x C x D1 ... "
                                 "input and a size >= 1, got {} and {}",
                                 nodeName, shapeStr(shape), size));
  float alpha = floatAttr("alpha", 1e-4f), beta = floatAttr("beta", 0.75f);
  float bias = floatAttr("bias", 1.0f);
  int64_t rest = 1;
  for (size_t d = 2; d < shape.size(); ++d)
    rest *= shape[d];
  int64_t rank = shape.size();
  Value square = make<cnn::MulOp>({x, x});
  Value windows = make<cnn::AvgPool2DOp>(
      {reshape(square, {shape[0], 1, shape[1], rest})},
      {attr("kernel", b.getDenseI64ArrayAttr({size, 1})),
       attr("strides", b.getDenseI64ArrayAttr({1, 1})),
       attr("padding",
            b.getDenseI64ArrayAttr({(size - 1) / 2, 0, size / 2, 0})),
       attr("ceil_mode", b.getBoolAttr(false)),
       attr("count_include_pad", b.getBoolAttr(true))});
  // bias + alpha / size * sum = bias + alpha * average.
  Value scaled = make<cnn::ScaleOp>(
      {reshape(windows, shape)}, {attr("factor", b.getF32FloatAttr(alpha))});
  Value base = make<cnn::AddOp>({scaled, scalarConstant(bias, rank)});
  Value y = make<cnn::DivOp>(
      {x, make<cnn::PowOp>({base},
                           {attr("exponent", b.getF32FloatAttr(beta))})});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// GatherElements(data, indices): cnn.gather_elements.
LogicalResult Importer::importGatherElements() {
  Value x = data(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  int64_t axis = intAttr("axis", 0);
  if (!normalizeAxis(axis, rank))
    return nodeError(fmt::format("GatherElements axis {} of node '{}' is out "
                                 "of range for rank {}",
                                 intAttr("axis", 0), nodeName, rank));
  Value y = make<cnn::GatherElementsOp>(
      {x, integerInput(1, "indices")},
      {attr("axis", b.getI64IntegerAttr(axis))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// NegativeLogLikelihoodLoss(input, target[, weight]): cnn.nll_loss.
LogicalResult Importer::importNLLLoss() {
  SmallVector<NamedAttribute> attrs;
  if (failed(lossAttributes(attrs)))
    return failure();
  SmallVector<Value> operands{data(0), integerInput(1, "labels")};
  if (hasInput(2))
    operands.push_back(data(2));
  Value loss = make<cnn::NLLLossOp>(operands, attrs);
  if (!loss)
    return failure();
  setOutput(0, loss);
  return success();
}

/// SoftmaxCrossEntropyLoss(scores, labels[, weights]) -> (loss[, log_prob]):
/// the log-softmax over dimension 1 (LogSoftmax's decomposition, the
/// optional second output) and cnn.nll_loss of it, F.cross_entropy's
/// definition. cnn.softmax_cross_entropy, the training loss cnn-autodiff
/// appends, is not reused: it takes N x C logits, means only, has no class
/// weights and no gradient rule (it is the loss, not an op inside the
/// forward).
LogicalResult Importer::importSoftmaxCrossEntropyLoss() {
  SmallVector<NamedAttribute> attrs;
  if (failed(lossAttributes(attrs)))
    return failure();
  Value x = data(0);
  if (!x)
    return failure();
  if (shapeOf(x).size() < 2)
    return nodeError(fmt::format("scores of node '{}' "
                                 "(SoftmaxCrossEntropyLoss) must be N x C x "
                                 "d1 x ... (rank >= 2), got {}",
                                 nodeName, shapeStr(shapeOf(x))));
  Value logProb = logSoftmax(x, {1});
  SmallVector<Value> operands{logProb, integerInput(1, "labels")};
  if (hasInput(2))
    operands.push_back(data(2));
  Value loss = make<cnn::NLLLossOp>(operands, attrs);
  if (!loss)
    return failure();
  setOutput(0, loss);
  setOutput(1, logProb);
  return success();
}

/// ArgMax / ArgMin (axis, keepdims, select_last_index): cnn.arg_max /
/// cnn.arg_min, an i64 result.
template <typename OpTy> LogicalResult Importer::importArgExtreme() {
  Value x = data(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  int64_t axis = intAttr("axis", 0);
  if (!normalizeAxis(axis, rank))
    return nodeError(fmt::format("{} axis {} of node '{}' is out of range for "
                                 "rank {}",
                                 node->op_type(), intAttr("axis", 0), nodeName,
                                 rank));
  Value y = make<OpTy>(
      {x}, {attr("axis", b.getI64IntegerAttr(axis)),
            attr("keepdims", b.getBoolAttr(intAttr("keepdims", 1) != 0)),
            attr("select_last_index",
                 b.getBoolAttr(intAttr("select_last_index", 0) != 0))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// GlobalMaxPool: the maximum over the spatial dims [2, rank), kept as 1s.
LogicalResult Importer::importGlobalMaxPool() {
  Value x = data(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  if (rank < 3)
    return nodeError(fmt::format("input of node '{}' (GlobalMaxPool) must "
                                 "have rank >= 3 (N x C x D1 ...), got {}",
                                 nodeName, shapeStr(shapeOf(x))));
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  Value y = make<cnn::ReduceMaxOp>(
      {x}, {attr("axes", b.getDenseI64ArrayAttr(axes))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// PRelu: the slope broadcasts to the input (unidirectional). PyTorch's
/// nn.PReLU exports its weight ([C] or [1]) unsqueezed to C x 1 x 1; the
/// slope is a learned parameter even where it is one value (an initializer
/// or a view of one, Slot::viewOf), which elsewhere stays a constant.
LogicalResult Importer::importPRelu() {
  Value x = data(0);
  if (!x)
    return failure();
  Slot *s = paramInput(1);
  if (!s)
    return failure();
  Value slope = s->value;
  if (!slope) {
    const ConstVal &c = *s->constant;
    if (s->isInitializer)
      slope = argumentFor(node->input(1), c, WeightRole::Param, std::nullopt);
    else if (!s->viewOf.empty() && !c.isInt)
      slope = reshape(
          argumentFor(s->viewOf, c, WeightRole::Param, c.numel()), c.shape);
    else
      slope = data(1);
    if (!slope)
      return failure();
  }
  auto xShape = shapeOf(x), sShape = shapeOf(slope);
  std::vector<int64_t> out;
  std::string err;
  if (sShape.size() > xShape.size() ||
      !broadcastShapes(xShape, sShape, out, err,
                       std::numeric_limits<int64_t>::max()) ||
      out != xShape)
    return nodeError(fmt::format("the slope '{}' {} of node '{}' (PRelu) does "
                                 "not broadcast to the input {}",
                                 node->input(1), shapeStr(sShape), nodeName,
                                 shapeStr(xShape)));
  Value y = make<cnn::PReluOp>({x, alignRank(slope, xShape.size())});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// Split into cnn.slice ops: sizes from the `split` input (opset 13+) or
/// attribute, else equal parts (opset 18: num_outputs, the last part may
/// be smaller).
LogicalResult Importer::importSplit() {
  Slot *s = input(0);
  if (!s)
    return failure();
  std::vector<int64_t> shape =
      s->value ? shapeOf(s->value) : s->constant->shape;
  int64_t rank = shape.size();
  int64_t axis = intAttr("axis", 0);
  if (!normalizeAxis(axis, rank))
    return nodeError(fmt::format("Split axis {} of node '{}' is out of range "
                                 "for rank {}",
                                 intAttr("axis", 0), nodeName, rank));
  int64_t dim = shape[axis];
  int64_t n = node->output_size();
  std::vector<int64_t> sizes;
  bool present = false;
  if (failed(intsFromAttrOrInput("split", 1, sizes, present)))
    return failure();
  if (!present) {
    int64_t parts = getAttr("num_outputs") ? intAttr("num_outputs", n) : n;
    if (parts != n || parts <= 0)
      return nodeError(fmt::format("Split node '{}' has {} outputs but "
                                   "num_outputs {}",
                                   nodeName, n, parts));
    if (opset < 18 && dim % parts != 0)
      return nodeError(fmt::format("Split node '{}' cannot split dimension {} "
                                   "of size {} into {} equal parts",
                                   nodeName, axis, dim, parts));
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= chunk)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, left)));
  }
  // Each size within [0, dim] before summing (a size of INT64_MAX overflowed
  // the sum: found by the structured ONNX fuzzer).
  int64_t total = 0;
  bool inRange =
      llvm::all_of(sizes, [&](int64_t v) { return v >= 0 && v <= dim; });
  if (inRange)
    for (int64_t v : sizes)
      if (llvm::AddOverflow(total, v, total))
        inRange = false;
  if (int64_t(sizes.size()) != n || !inRange || total != dim)
    return nodeError(fmt::format("Split sizes {} of node '{}' do not divide "
                                 "dimension {} of size {} into {} outputs",
                                 shapeStr(sizes), nodeName, axis, dim, n));
  int64_t offset = 0;
  for (int64_t i = 0; i < n; offset += sizes[i], ++i) {
    if (sizes[i] == 0) {
      markUnavailable(i, "Split output " + std::to_string(i) +
                             " is empty (zero-size tensors are not supported)");
      continue;
    }
    if (s->constant) {
      ConstVal out;
      std::string err;
      if (!foldSlice(*s->constant, {offset}, {offset + sizes[i]}, {axis}, {},
                     out, err))
        return nodeError("node '" + nodeName + "' (Split): " + err);
      setOutput(i, std::move(out));
      continue;
    }
    std::vector<int64_t> offsets(rank, 0), sz = shape;
    offsets[axis] = offset;
    sz[axis] = sizes[i];
    Value y = make<cnn::SliceOp>(
        {s->value}, {attr("offsets", b.getDenseI64ArrayAttr(offsets)),
                     attr("sizes", b.getDenseI64ArrayAttr(sz))});
    if (!y)
      return failure();
    setOutput(i, y);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The op table
//===----------------------------------------------------------------------===//

namespace {
/// Whether cnn-autodiff differentiates / the CUDA target runs what an ONNX op
/// becomes. `Const` marks ops folded at import time (shape computations):
/// nothing of them is left at run time.
enum class Support { Yes, No, Const };

/// The newest default-domain opset the handlers are written against.
constexpr int kMaxOpset = 22;

/// One ONNX op type over a range of default-domain opsets: the handler that
/// imports it, and what docs/ops.md says about it.
struct OpHandler {
  const char *opType;
  int minOpset, maxOpset;
  LogicalResult (Importer::*handler)();
  Support gradient, gpuKernel;
  const char *notes;
};

constexpr Support Y = Support::Yes, N = Support::No, C = Support::Const;

// clang-format off
const OpHandler kOpHandlers[] = {
  {"Abs", 6, kMaxOpset, &Importer::importAbs, Y, Y, "cnn.abs"},
  {"ArgMax", 1, kMaxOpset, &Importer::importArgMax, N, N, "cnn.arg_max (axis, keepdims, select_last_index): an int64 index, no gradient"},
  {"ArgMin", 1, kMaxOpset, &Importer::importArgMin, N, N, "cnn.arg_min (axis, keepdims, select_last_index): an int64 index, no gradient"},
  {"Add", 7, kMaxOpset, &Importer::importBinaryNode, Y, Y, "cnn.add (numpy broadcasting); canonicalized: a per-channel addend becomes cnn.bias_add; constants fold"},
  {"AveragePool", 7, kMaxOpset, &Importer::importAvgPool, Y, Y, "1-D (as 1 x k) and 2-D; cnn.avg_pool2d (ceil_mode, count_include_pad, auto_pad)"},
  {"BatchNormalization", 7, kMaxOpset, &Importer::importBatchNorm, Y, Y, "N x C, N x C x L (as N x C x L x 1) and N x C x H x W: cnn.batch_norm (training_mode=1: cnn.batch_norm_train when run forward; inference form, an eval-mode module: running statistics in the training step, not updated)"},
  {"Cast", 6, kMaxOpset, &Importer::importCast, Y, Y, "to float32/float16: cnn.cast; constants fold"},
  {"Clip", 6, kMaxOpset, &Importer::importClip, Y, Y, "constant min/max (attributes before opset 11, inputs after): cnn.clip; a computed constant folds (TF \"same\" padding's clamped pad amounts)"},
  {"Concat", 4, kMaxOpset, &Importer::importConcat, Y, Y, "cnn.concat; constants fold"},
  {"Constant", 1, kMaxOpset, &Importer::importConstant, C, C, "value, value_float(s), value_int(s)"},
  {"ConstantOfShape", 9, kMaxOpset, &Importer::importConstantOfShape, C, C, "constant shape only (folded)"},
  {"Conv", 1, kMaxOpset, &Importer::importConv, Y, Y, "1-D (as 1 x k) and 2-D, groups, dilations, auto_pad: cnn.conv2d (+ cnn.bias_add)"},
  {"ConvTranspose", 1, kMaxOpset, &Importer::importConvTranspose, Y, Y, "1-D (as 1 x k) and 2-D, groups, dilations, output_padding, output_shape, auto_pad: cnn.conv2d_bwd_data (+ cnn.bias_add)"},
  {"DepthToSpace", 1, kMaxOpset, &Importer::importDepthSpace, Y, Y, "4-D, DCR or CRD (opset 11+): cnn.reshape, cnn.transpose, cnn.reshape"},
  {"Div", 7, kMaxOpset, &Importer::importBinaryNode, Y, Y, "cnn.div (numpy broadcasting); canonicalized: by a scalar constant becomes cnn.scale; constants fold"},
  {"Dropout", 1, kMaxOpset, &Importer::importDropout, Y, Y, "cnn.dropout (identity in @forward, a mask in the training step); no mask output"},
  {"Ceil", 6, kMaxOpset, &Importer::importCeilFloor, C, C, "constants only (folded; TF same-padding arithmetic)"},
  {"Equal", 7, kMaxOpset, &Importer::importBinaryNode, C, C, "constants only (folded)"},
  {"Expand", 8, kMaxOpset, &Importer::importExpand, Y, Y, "numpy broadcast to the shape (a constant input): cnn.add of splat zeros (the gradient sums over the broadcast dimensions); read through by Add/Sub/Mul/Div/Pow that broadcast anyway; constants fold"},
  {"Flatten", 1, kMaxOpset, &Importer::importFlatten, Y, Y, "cnn.flatten"},
  {"Gather", 1, kMaxOpset, &Importer::importGather, C, C, "constants only (shape computations, folded)"},
  {"Gemm", 7, kMaxOpset, &Importer::importGemm, Y, Y, "cnn.matmul (+ cnn.bias_add for a per-column bias)"},
  {"GlobalAveragePool", 1, kMaxOpset, &Importer::importGlobalAvgPool, Y, Y, "4-D: cnn.global_avg_pool"},
  {"Floor", 6, kMaxOpset, &Importer::importCeilFloor, C, C, "constants only (folded)"},
  {"Greater", 7, kMaxOpset, &Importer::importBinaryNode, C, C, "constants only (folded)"},
  {"Identity", 1, kMaxOpset, &Importer::importIdentity, Y, Y, "no op"},
  {"Less", 7, kMaxOpset, &Importer::importBinaryNode, C, C, "constants only (folded)"},
  {"MatMul", 1, kMaxOpset, &Importer::importMatMul, Y, Y, "2-D: cnn.matmul; N-D x 2-D: reshape, cnn.matmul, reshape; N-D x N-D with the same leading dimensions: batched cnn.matmul"},
  {"Max", 8, kMaxOpset, &Importer::importMinMax, Y, Y, "1..n inputs (numpy broadcasting): a chain of cnn.maximum (a tie splits the gradient, as PyTorch); constants fold"},
  {"MaxPool", 8, kMaxOpset, &Importer::importMaxPool, Y, Y, "1-D (as 1 x k) and 2-D, no dilations, no indices output: cnn.max_pool2d"},
  {"Min", 8, kMaxOpset, &Importer::importMinMax, Y, Y, "1..n inputs (numpy broadcasting): a chain of cnn.minimum (a tie splits the gradient, as PyTorch); constants fold"},
  {"Mul", 7, kMaxOpset, &Importer::importBinaryNode, Y, Y, "cnn.mul (numpy broadcasting); canonicalized: by a scalar constant becomes cnn.scale; constants fold"},
  {"Neg", 6, kMaxOpset, &Importer::importNegNode, Y, Y, "cnn.neg; constants fold"},
  {"Range", 11, kMaxOpset, &Importer::importRange, C, C, "constants only (folded)"},
  {"ReduceMax", 1, kMaxOpset, &Importer::importReduce, Y, Y, "cnn.reduce_max (axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape)"},
  {"ReduceMean", 1, kMaxOpset, &Importer::importReduce, Y, Y, "cnn.reduce_mean (axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape); canonicalized: over H and W of a 4-D tensor becomes cnn.global_avg_pool"},
  {"ReduceProd", 1, kMaxOpset, &Importer::importReduce, N, N, "cnn.reduce_prod (axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape); forward only"},
  {"ReduceSum", 1, kMaxOpset, &Importer::importReduce, Y, Y, "cnn.reduce_sum (axes attribute before opset 13, constant input after; keepdims=0: cnn.reshape)"},
  {"Relu", 6, kMaxOpset, &Importer::importRelu, Y, Y, "cnn.relu"},
  {"Erf", 9, kMaxOpset, &Importer::importErf, Y, Y, "cnn.erf"},
  {"Exp", 6, kMaxOpset, &Importer::importExp, Y, Y, "cnn.exp"},
  {"Gelu", 20, kMaxOpset, &Importer::importGelu, Y, Y, "cnn.gelu (approximate none or tanh)"},
  {"HardSigmoid", 6, kMaxOpset, &Importer::importHardSigmoid, Y, Y, "cnn.hard_sigmoid"},
  {"HardSwish", 14, kMaxOpset, &Importer::importHardSwish, Y, Y, "cnn.hard_swish"},
  {"ThresholdedRelu", 10, kMaxOpset, &Importer::importThresholdedRelu, Y, Y, "cnn.thresholded_relu (alpha, default 1)"},
  {"LeakyRelu", 6, kMaxOpset, &Importer::importLeakyRelu, Y, Y, "cnn.leaky_relu"},
  {"Pad", 2, kMaxOpset, &Importer::importPad, Y, Y, "constant/reflect/edge, constant pads (attribute before opset 11, inputs after): cnn.pad"},
  {"Resize", 10, kMaxOpset, &Importer::importResize, Y, Y, "4-D, H and W only: cnn.resize, nearest (nearest_mode round_prefer_floor/ceil, floor, ceil) or linear (bilinear), coordinate_transformation_mode half_pixel, pytorch_half_pixel, align_corners or asymmetric (opset 10: asymmetric, nearest rounds down), constant scales or sizes (axes at 18+); no cubic, tf_crop_and_resize, antialias, exclude_outside"},
  {"Upsample", 7, 9, &Importer::importResize, Y, Y, "4-D, H and W only: cnn.resize, nearest (rounds down) or linear, asymmetric coordinates, constant scales (attribute at opset 7, input at 9)"},
  {"Reciprocal", 6, kMaxOpset, &Importer::importReciprocal, Y, Y, "cnn.reciprocal"},
  {"Sigmoid", 6, kMaxOpset, &Importer::importSigmoid, Y, Y, "cnn.sigmoid"},
  {"Sqrt", 6, kMaxOpset, &Importer::importSqrt, Y, Y, "cnn.sqrt"},
  {"Tanh", 6, kMaxOpset, &Importer::importTanh, Y, Y, "cnn.tanh"},
  {"Reshape", 5, kMaxOpset, &Importer::importReshape, Y, Y, "constant shape (allowzero): cnn.reshape"},
  {"Shape", 1, kMaxOpset, &Importer::importShape, C, C, "static shapes (start/end): folded"},
  {"Size", 1, kMaxOpset, &Importer::importSize, C, C, "static shapes: folded"},
  {"Slice", 1, kMaxOpset, &Importer::importSlice, Y, Y, "constant starts/ends/axes, steps 1: cnn.slice; constants fold"},
  {"SpaceToDepth", 1, kMaxOpset, &Importer::importDepthSpace, Y, Y, "4-D: cnn.reshape, cnn.transpose, cnn.reshape"},
  {"Sum", 8, kMaxOpset, &Importer::importMinMax, Y, Y, "1..n inputs (numpy broadcasting): a chain of cnn.add; constants fold"},
  {"Mean", 8, kMaxOpset, &Importer::importMinMax, Y, Y, "1..n inputs (numpy broadcasting): a chain of cnn.add divided by n; constants fold"},
  {"Softmax", 1, kMaxOpset, &Importer::importSoftmax, Y, Y, "cnn.softmax (before opset 13: last axis only)"},
  {"SoftmaxCrossEntropyLoss", 12, kMaxOpset, &Importer::importSoftmaxCrossEntropyLoss, Y, N, "LogSoftmax's decomposition over dimension 1 (the log_prob output) and cnn.nll_loss of it; labels a constant or an integer tensor"},
  {"NegativeLogLikelihoodLoss", 12, kMaxOpset, &Importer::importNLLLoss, Y, N, "cnn.nll_loss (reduction none/sum/mean, class weights, ignore_index, N x C x d1 x ...); labels a constant or an integer tensor; differentiable in the input"},
  {"Squeeze", 1, kMaxOpset, &Importer::importSqueeze, Y, Y, "constant axes: cnn.reshape"},
  {"Sub", 7, kMaxOpset, &Importer::importBinaryNode, Y, Y, "cnn.sub (numpy broadcasting); constants fold"},
  {"Transpose", 1, kMaxOpset, &Importer::importTranspose, Y, Y, "cnn.transpose; constants fold"},
  {"Unsqueeze", 1, kMaxOpset, &Importer::importUnsqueeze, Y, Y, "constant axes: cnn.reshape"},
  {"Where", 9, kMaxOpset, &Importer::importWhere, Y, N, "constants fold; a run-time X or Y with a constant condition: cnn.select (numpy broadcasting; the CUDA target takes splat constants only, so not a non-uniform condition)"},
  {"GatherElements", 11, kMaxOpset, &Importer::importGatherElements, Y, N, "cnn.gather_elements (indices a constant or an integer tensor; negative indices count from the end); differentiable in the data"},
  {"Celu", 12, kMaxOpset, &Importer::importCelu, Y, Y, "cnn.celu (alpha != 0)"},
  {"Elu", 6, kMaxOpset, &Importer::importElu, Y, Y, "cnn.elu"},
  {"GlobalMaxPool", 1, kMaxOpset, &Importer::importGlobalMaxPool, Y, Y, "cnn.reduce_max over the spatial dimensions (keepdims)"},
  {"InstanceNormalization", 6, kMaxOpset, &Importer::importInstanceNorm, Y, Y, "decomposed as LayerNormalization over the spatial dimensions (scale, bias per channel; Constant scale 1 / bias 0 left out); with Reshape, Mul, Add: nn.GroupNorm"},
  {"LRN", 1, kMaxOpset, &Importer::importLRN, Y, Y, "x / (bias + alpha * avg_pool(x^2 over a size x 1 window of N x 1 x C x (H*W), the padding counted))^beta: cnn.mul, cnn.avg_pool2d, cnn.scale, cnn.add, cnn.pow, cnn.div"},
  {"Log", 6, kMaxOpset, &Importer::importLog, Y, Y, "cnn.log"},
  {"LogSoftmax", 1, kMaxOpset, &Importer::importLogSoftmax, Y, Y, "decomposed: x - m - log(reduce_sum(exp(x - m))), m = cnn.reduce_max (before opset 13: over [axis, rank))"},
  {"Mish", 18, kMaxOpset, &Importer::importMish, Y, Y, "cnn.mish"},
  {"PRelu", 7, kMaxOpset, &Importer::importPRelu, Y, Y, "cnn.prelu (the slope broadcasts to the input; a one-value slope is a parameter too)"},
  {"ReduceL2", 1, kMaxOpset, &Importer::importReduce, Y, Y, "cnn.sqrt(cnn.reduce_sum(x * x)) (axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape)"},
  {"ReduceL1", 1, kMaxOpset, &Importer::importReduce, Y, Y, "cnn.reduce_sum(cnn.abs(x)) (axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape)"},
  {"ReduceSumSquare", 1, kMaxOpset, &Importer::importReduce, Y, Y, "cnn.reduce_sum(x * x) (axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape)"},
  {"ReduceLogSum", 1, kMaxOpset, &Importer::importReduce, Y, Y, "cnn.log(cnn.reduce_sum(x)) (axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape)"},
  {"ReduceMin", 1, kMaxOpset, &Importer::importReduce, Y, Y, "-cnn.reduce_max(-x) (a tie splits the gradient, as torch.amin; axes attribute before opset 18, constant input after; keepdims=0: cnn.reshape)"},
  {"Selu", 6, kMaxOpset, &Importer::importSelu, Y, Y, "cnn.selu"},
  {"Softplus", 1, kMaxOpset, &Importer::importSoftplus, Y, Y, "cnn.softplus (x above 20, as PyTorch)"},
  {"LayerNormalization", 17, kMaxOpset, &Importer::importLayerNorm, Y, Y, "decomposed: cnn.reduce_mean, sub, mul, add, sqrt, div (scale, bias broadcast); no Mean/InvStdDev outputs"},
  {"Pow", 7, kMaxOpset, &Importer::importPow, Y, Y, "scalar constant exponent: cnn.pow; any other (float or integer) exponent: cnn.pow_tensor (numpy broadcasting)"},
  {"Split", 2, kMaxOpset, &Importer::importSplit, Y, Y, "split sizes as attribute (before 13) or constant input, num_outputs (18+), equal parts: cnn.slice per output"},
};
// clang-format on

/// The handler of `opType` at default-domain opset `opset`, or null.
const OpHandler *findHandler(StringRef opType, int64_t opset) {
  for (const OpHandler &h : kOpHandlers)
    if (opType == h.opType && opset >= h.minOpset && opset <= h.maxOpset)
      return &h;
  return nullptr;
}

/// The opsets `opType` is handled at, "" if it is not handled at all.
std::string handledOpsets(StringRef opType) {
  std::string out;
  for (const OpHandler &h : kOpHandlers)
    if (opType == h.opType)
      out += fmt::format("{}{}-{}", out.empty() ? "" : ", ", h.minOpset,
                         h.maxOpset);
  return out;
}
} // namespace

LogicalResult Importer::importNode() {
  const OpHandler *h = findHandler(node->op_type(), opset);
  if (!h || !isDefaultDomain(node->domain())) // checked by checkSupported()
    return unsupported();
  // ONNX graphs are in SSA form: every name is defined once. A node that
  // redefines a name (its own input, an earlier output, an initializer)
  // would overwrite the slot a handler still reads (found by the structured
  // ONNX fuzzer: a Split writing its input's name lost it mid-import).
  for (int i = 0; i < node->output_size(); ++i) {
    const std::string &name = node->output(i);
    if (name.empty())
      continue;
    for (int j = 0; j < i; ++j)
      if (node->output(j) == name)
        return nodeError(fmt::format("node '{}' ({}) names two of its "
                                     "outputs '{}'",
                                     nodeName, node->op_type(), name));
    if (slots.count(name))
      return nodeError(fmt::format(
          "output '{}' of node '{}' ({}) is already defined (by an "
          "initializer, a graph input or an earlier node): ONNX names each "
          "value once",
          name, nodeName, node->op_type()));
  }
  return (this->*h->handler)();
}

LogicalResult Importer::checkSupported() {
  struct Unsupported {
    int count = 0;
    int firstIndex = 0;
    std::string firstNode, why;
  };
  // In order of first appearance.
  std::vector<std::pair<std::string, Unsupported>> found;
  const onnx::GraphProto &graph = model.graph();
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &n = graph.node(i);
    std::string key, why;
    if (!isDefaultDomain(n.domain())) {
      key = n.domain() + "." + n.op_type();
      why = "domain '" + n.domain() + "' is not supported";
    } else if (!findHandler(n.op_type(), opset)) {
      key = n.op_type();
      std::string ranges = handledOpsets(n.op_type());
      if (!ranges.empty())
        why = fmt::format("handled at opsets {}, the model imports opset {}",
                          ranges, opset);
    } else {
      continue;
    }
    auto it = llvm::find_if(found, [&](auto &e) { return e.first == key; });
    if (it == found.end()) {
      Unsupported u;
      u.firstIndex = i;
      u.firstNode = nodeNameAt(i);
      u.why = why;
      found.emplace_back(key, u);
      it = std::prev(found.end());
    }
    ++it->second.count;
  }
  if (found.empty())
    return success();
  // One diagnostic for all of them, located at the first unsupported node.
  std::string msg;
  if (found.size() == 1) {
    const auto &[op, u] = found.front();
    msg = fmt::format("unsupported ONNX op '{}' (node '{}', file '{}')", op,
                      u.firstNode, path);
    if (u.count > 1)
      msg += fmt::format(", {} nodes", u.count);
    if (!u.why.empty())
      msg += ": " + u.why;
  } else {
    msg = fmt::format("{} unsupported ONNX op types in '{}' (opset {}):",
                      found.size(), path, opset);
    for (const auto &[op, u] : found) {
      msg +=
          fmt::format("\n  '{}': {} node{}, first '{}' (node #{})", op, u.count,
                      u.count == 1 ? "" : "s", u.firstNode, u.firstIndex);
      if (!u.why.empty())
        msg += ": " + u.why;
    }
  }
  return error(
      NameLoc::get(b.getStringAttr(found.front().second.firstNode), fileLoc),
      msg);
}

//===----------------------------------------------------------------------===//
// Inference exports given to --train
//===----------------------------------------------------------------------===//

void Importer::warnIfExportedForInference() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> initNames;
  for (const auto &t : graph.initializer())
    initNames.insert(t.name());
  std::vector<std::string> signs;
  bool fromTorch = StringRef(model.producer_name()).contains("pytorch");
  // A training export with some BatchNorm modules in eval mode (PyTorch's
  // TrainingMode.PRESERVE, what cnnc.compile writes for frozen-BN
  // fine-tuning) has both forms: its inference-form nodes are deliberate.
  bool hasTrainingBN = false;
  for (const onnx::NodeProto &n : graph.node()) {
    if (!isDefaultDomain(n.domain()) || n.op_type() != "BatchNormalization")
      continue;
    int outputs = 0;
    for (const auto &o : n.output())
      outputs += !o.empty();
    hasTrainingBN |= outputs > 1;
  }
  for (int i = 0; i < graph.node_size() && signs.size() < 3; ++i) {
    const onnx::NodeProto &n = graph.node(i);
    if (!isDefaultDomain(n.domain()))
      continue;
    auto attrInt = [&](StringRef name) -> int64_t {
      for (const auto &a : n.attribute())
        if (a.name() == name)
          return a.i();
      return 0;
    };
    int outputs = 0;
    for (const auto &o : n.output())
      outputs += !o.empty();
    if (n.op_type() == "BatchNormalization" && outputs == 1 &&
        attrInt("training_mode") == 0 && !hasTrainingBN) {
      signs.push_back(fmt::format("BatchNormalization node '{}' is in "
                                  "inference form (training_mode 0, no "
                                  "running-statistics outputs)",
                                  nodeNameAt(i)));
    } else if (n.op_type() == "Dropout" && outputs == 1 && n.input_size() < 3) {
      signs.push_back(fmt::format("Dropout node '{}' is in inference form "
                                  "(no training_mode input, no mask output)",
                                  nodeNameAt(i)));
    } else if (fromTorch && n.op_type() == "Conv" && n.input_size() > 1 &&
               initNames.contains(n.input(1)) &&
               StringRef(n.input(1)).starts_with("onnx::Conv_")) {
      // PyTorch's eval export fuses BatchNorm into the preceding Conv
      // (even with do_constant_folding=False); the fused weight is a new
      // tensor named "onnx::Conv_<n>" instead of the module's parameter.
      signs.push_back(fmt::format("the weight '{}' of Conv node '{}' is not a "
                                  "module parameter: PyTorch folded a "
                                  "BatchNorm into it",
                                  n.input(1), nodeNameAt(i)));
    }
  }
  if (signs.empty())
    return;
  std::string msg = fmt::format(
      "'{}' looks exported for inference ({}); training it trains a "
      "different network (BatchNorm folded away or frozen: an inference-form "
      "BatchNormalization trains as a module in eval mode, with its running "
      "statistics, which the step does not update; Dropout gone). "
      "Export it for training: torch.onnx.export(model.train(), x, path, "
      "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False) "
      "and, on PyTorch 2.x, dynamo=False",
      path, llvm::join(signs, "; "));
  emitWarning(fileLoc) << msg;
}

/// ONNX Pad -> cnn.pad: opset 2-10 take `pads`/`value` attributes, opset
/// 11+ take `pads`, an optional scalar `constant_value` and (opset 18+)
/// `axes` as constant inputs. Negative pads crop: a cnn.slice first.
LogicalResult Importer::importPad() {
  Value x = data(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  std::vector<int64_t> pads, axes;
  float value = 0;
  if (opset < 11) {
    auto a = intsAttr("pads");
    if (!a)
      return nodeError("node '" + nodeName + "' (Pad): missing 'pads'");
    pads = *a;
    value = floatAttr("value", 0.0f);
  } else {
    bool present = false;
    if (failed(intsFromAttrOrInput("pads", 1, pads, present)))
      return failure();
    if (!present)
      return nodeError("node '" + nodeName + "' (Pad): missing 'pads'");
    if (hasInput(2)) {
      const ConstVal *c = constant(2, "constant_value");
      if (!c)
        return failure();
      if (c->numel() != 1)
        return nodeError("node '" + nodeName +
                         "' (Pad): constant_value must be a scalar");
      value = c->at(0);
    }
    if (failed(intsFromAttrOrInput("axes", 3, axes, present)))
      return failure();
  }
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    return nodeError(fmt::format("node '{}' (Pad): {} pads for {} axes of a "
                                 "rank-{} input (expected 2 per axis)",
                                 nodeName, pads.size(), axes.size(), rank));
  // A pad beyond 2^40 (the importer's bound on a dimension) could only
  // overflow the shape arithmetic below (INT64_MIN has no negation).
  constexpr int64_t kMaxPad = int64_t(1) << 40;
  for (int64_t p : pads)
    if (p < -kMaxPad || p > kMaxPad)
      return nodeError(fmt::format("node '{}' (Pad): pad {} out of range "
                                   "(|pad| <= 2^40)",
                                   nodeName, p));
  // Pads of all dimensions, [begin..., end...].
  std::vector<int64_t> all(2 * rank, 0);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    int64_t d = axis < 0 ? axis + rank : axis;
    if (d < 0 || d >= rank)
      return nodeError(fmt::format("node '{}' (Pad): axis {} out of range for "
                                   "rank {}",
                                   nodeName, axis, rank));
    all[d] = pads[i];
    all[rank + d] = pads[axes.size() + i];
  }
  std::string mode = stringAttr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return unsupported("mode '" + mode + "'");
  if (llvm::any_of(all, [](int64_t p) { return p < 0; })) {
    std::vector<int64_t> shape = shapeOf(x), offs(rank), sizes(rank);
    for (int64_t d = 0; d < rank; ++d) {
      offs[d] = std::max<int64_t>(0, -all[d]);
      sizes[d] = shape[d] - offs[d] - std::max<int64_t>(0, -all[rank + d]);
      if (sizes[d] < 1)
        return nodeError(fmt::format("node '{}' (Pad): pads {} crop away "
                                     "dimension {} of size {}",
                                     nodeName, shapeStr(all), d, shape[d]));
    }
    x = make<cnn::SliceOp>({x}, {attr("offsets", b.getDenseI64ArrayAttr(offs)),
                                 attr("sizes", b.getDenseI64ArrayAttr(sizes))});
    if (!x)
      return failure();
    for (int64_t &p : all)
      p = std::max<int64_t>(p, 0);
  }
  Value y = x;
  if (llvm::any_of(all, [](int64_t p) { return p != 0; }))
    y = make<cnn::PadOp>({x}, {attr("pads", b.getDenseI64ArrayAttr(all)),
                               attr("mode", b.getStringAttr(mode)),
                               attr("value", b.getF32FloatAttr(value))});
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
}

/// Resize (opset 10+) and Upsample (7-9): H and W of a 4-D input, nearest
/// or bilinear, as cnn.resize. Every other variant is one diagnostic naming
/// the op and the attribute or input at fault.
LogicalResult Importer::importResize() {
  const std::string &op = node->op_type();
  bool upsample = op == "Upsample";
  Value x = data(0);
  if (!x)
    return failure();
  std::vector<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  if (rank != 4)
    return unsupported(fmt::format("a rank-{} input {} (only 4-D N x C x H x "
                                   "W is resized)",
                                   rank, shapeStr(shape)));
  std::string mode = stringAttr("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return unsupported("mode '" + mode + "' (nearest and linear are)");
  // Before opset 11 Resize and Upsample have no coordinate attributes:
  // asymmetric, and nearest rounds down (onnxruntime's reading, and what
  // PyTorch's 'nearest' computes; its bilinear differs there, as its
  // exporter warns).
  std::string coord = "asymmetric", nearest = "floor";
  if (!upsample && opset >= 11) {
    coord = stringAttr("coordinate_transformation_mode", "half_pixel");
    if (!parseResizeCoord(coord))
      return unsupported("coordinate_transformation_mode '" + coord +
                         "' (half_pixel, pytorch_half_pixel, align_corners "
                         "and asymmetric are)");
    nearest = stringAttr("nearest_mode", "round_prefer_floor");
    if (!parseResizeNearest(nearest))
      return unsupported("nearest_mode '" + nearest + "'");
    if (intAttr("exclude_outside", 0) != 0)
      return unsupported("exclude_outside=" +
                         std::to_string(intAttr("exclude_outside", 0)));
    if (intAttr("antialias", 0) != 0)
      return unsupported("antialias=" +
                         std::to_string(intAttr("antialias", 0)));
    std::string policy = stringAttr("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch")
      return unsupported("keep_aspect_ratio_policy '" + policy + "'");
  }
  // The scales or sizes, one per axis of `axes` (opset 18+; all by default).
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (upsample && opset < 9) {
    const onnx::AttributeProto *a = getAttr("scales");
    if (!a)
      return nodeError("node '" + nodeName + "' (Upsample): missing 'scales'");
    scales.assign(a->floats().begin(), a->floats().end());
  } else {
    int scalesInput = opset >= 11 && !upsample ? 2 : 1;
    if (hasInput(scalesInput)) {
      const ConstVal *c = constant(scalesInput, "scales");
      if (!c)
        return failure();
      for (int64_t i = 0; i < c->numel(); ++i)
        scales.push_back(c->at(i));
    }
    if (opset >= 11 && !upsample && hasInput(3)) {
      const ConstVal *c = constant(3, "sizes");
      if (!c)
        return failure();
      sizes = c->asInts();
    }
  }
  if (scales.empty() == sizes.empty())
    return nodeError(fmt::format(
        "node '{}' ({}): exactly one of 'scales' and 'sizes' must be given "
        "(got {} scales and {} sizes)",
        nodeName, op, scales.size(), sizes.size()));
  std::vector<int64_t> axes;
  if (auto a = intsAttr("axes"); a && !upsample && opset >= 18) {
    for (int64_t axis : *a) {
      if (!normalizeAxis(axis, rank) || llvm::is_contained(axes, axis))
        return nodeError(fmt::format("node '{}' ({}): axes {} must be "
                                     "distinct axes of a rank-{} input",
                                     nodeName, op, shapeStr(*a), rank));
      axes.push_back(axis);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  size_t given = scales.empty() ? sizes.size() : scales.size();
  if (given != axes.size())
    return nodeError(fmt::format("node '{}' ({}): {} {} for {} axes", nodeName,
                                 op, given, scales.empty() ? "sizes" : "scales",
                                 axes.size()));
  // Per dimension: the output size and the scale (0: from the sizes).
  std::vector<int64_t> out = shape;
  std::vector<double> scale(rank, scales.empty() ? 0.0 : 1.0);
  for (auto [i, d] : llvm::enumerate(axes)) {
    if (!scales.empty()) {
      double sc = scales[i];
      if (!std::isfinite(sc) || !(sc > 0))
        return nodeError(fmt::format("node '{}' ({}): scale {} must be finite "
                                     "and > 0",
                                     nodeName, op, sc));
      double o = std::floor((double)shape[d] * sc);
      if (o < 1 || o > (double)(int64_t(1) << 40))
        return nodeError(fmt::format("node '{}' ({}): scale {} resizes "
                                     "dimension {} of size {} to {}",
                                     nodeName, op, sc, d, shape[d], o));
      out[d] = (int64_t)o;
      scale[d] = sc;
    } else {
      if (sizes[i] < 1)
        return nodeError(fmt::format("node '{}' ({}): sizes {} must be >= 1",
                                     nodeName, op, shapeStr(sizes)));
      out[d] = sizes[i];
    }
  }
  // align_corners maps the corners of the resized length onto each other:
  // ONNX's reference takes that length as in * scale, PyTorch as the output
  // size floor(in * scale); they agree only when in * scale is integral.
  if (coord == "align_corners" && !scales.empty())
    for (int64_t d : {2, 3})
      if ((double)shape[d] * scale[d] != (double)out[d])
        return unsupported(fmt::format(
            "coordinate_transformation_mode 'align_corners' with scale {} of "
            "a dimension of size {} (a fractional resized length, where "
            "ONNX's reference and PyTorch differ; give 'sizes' instead)",
            scale[d], shape[d]));
  if (out[0] != shape[0] || out[1] != shape[1])
    return unsupported(fmt::format("resizing the batch or channel dimension "
                                   "({} to {}); only H and W are",
                                   shapeStr(shape), shapeStr(out)));
  SmallVector<NamedAttribute> attrs = {
      attr("size", b.getDenseI64ArrayAttr({out[2], out[3]})),
      attr("mode", b.getStringAttr(mode)),
      attr("coordinate_transformation_mode", b.getStringAttr(coord))};
  if (mode == "nearest")
    attrs.push_back(attr("nearest_mode", b.getStringAttr(nearest)));
  if (!scales.empty())
    attrs.push_back(
        attr("scales", b.getDenseF64ArrayAttr({scale[2], scale[3]})));
  Value y = make<cnn::ResizeOp>({x}, attrs);
  if (!y)
    return failure();
  setOutput(0, y);
  return success();
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
      if (known && d.dim_value() != options.batch)
        exportedBatch = d.dim_value();
      shape.push_back(options.batch);
      continue;
    }
    if (d.has_dim_value() && d.dim_value() == 0)
      return error(inLoc, "input '" + in.name() +
                              "' has a zero-size "
                              "dimension (dimension " +
                              std::to_string(i) +
                              "); empty tensors are not supported");
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
  // A declared shape is checked before anything is built from it: later
  // shape arithmetic (flatten, matmul) must not overflow. The rule and its
  // ceiling are those of every op result (CNN_BoundedResults).
  int64_t ceiling =
      ctx.getOrLoadDialect<cnn::CNNDialect>()->getMaxTensorElements();
  if (!boundedNumel(shape, /*elementBytes=*/4, ceiling))
    return error(inLoc, "input '" + in.name() + "' has shape " +
                            shapeStr(shape) + ": too many elements (at most " +
                            std::to_string(ceiling) + ")");
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

  if (failed(checkSupported()))
    return nullptr;
  if (options.forTraining)
    warnIfExportedForInference();
  // Every failure must come with a diagnostic. A handler that fails
  // silently (a bug: the structured ONNX fuzzer found two) still gets one,
  // naming the node, instead of a bare exit 1.
  int64_t errors = 0;
  ScopedDiagnosticHandler countErrors(&ctx, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      ++errors;
    return failure(); // and on to the caller's handler
  });
  for (int i = 0; i < graph.node_size(); ++i) {
    node = &graph.node(i);
    nodeName = nodeNameAt(i);
    loc = NameLoc::get(b.getStringAttr(nodeName), fileLoc);
    int64_t before = errors;
    if (failed(importNode())) {
      if (errors == before)
        (void)nodeError(fmt::format(
            "internal error: importing node '{}' ({}) failed without a "
            "diagnostic; please report this model",
            nodeName, node->op_type()));
      return nullptr;
    }
  }
  if (rebatchedReshapes > 0)
    emitWarning(fileLoc) << fmt::format(
        "--batch {0} replaced the exported batch {1}: {2} Reshape target "
        "shape(s) beginning with {1} (first: node '{3}') now begin with {0}, "
        "since the exporter computed them from the batch; export with the "
        "batch you train with (or a dynamic batch) if that is not what the "
        "model means",
        options.batch, exportedBatch, rebatchedReshapes, firstRebatchedReshape);

  // Every graph output, in order (GoogLeNet and Inception-v3 in training
  // mode return their auxiliary classifiers' logits after the main ones).
  SmallVector<Value> results;
  for (const auto &output : graph.output()) {
    const std::string &outName = output.name();
    loc = NameLoc::get(b.getStringAttr(outName), fileLoc);
    auto it = slots.find(outName);
    if (it == slots.end()) {
      (void)error(loc, "graph output '" + outName + "' of '" + path +
                           "' is not computed by any node");
      return nullptr;
    }
    // Outputs cnn does not produce (a training export's BN statistics) are
    // left out; the step computes those itself.
    if (!it->second.unavailable.empty() && !results.empty())
      continue;
    if (!it->second.unavailable.empty()) {
      (void)error(loc, "graph output '" + outName + "' of '" + path +
                           "': " + it->second.unavailable);
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
    results.push_back(result);
  }
  func::ReturnOp::create(b, loc, results);
  for (Operation *op : llvm::reverse(expandOps))
    if (op->use_empty())
      op->erase();

  // Final signature: argument attributes in argument order.
  SmallVector<Type> argTypes(body->getArgumentTypes());
  func.setFunctionType(
      b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, a] : llvm::enumerate(argAttrs))
    func.setArgAttr(i, a.getName(), a.getValue());
  if (failed(mlir::verify(module))) // a bug in the importer if it fails
    return nullptr;
  return module;
}

} // namespace

OwningOpRef<ModuleOp> cnnc::importONNX(StringRef path, MLIRContext &context,
                                       const ONNXImportOptions &options,
                                       TensorMap &weights) {
  context.loadDialect<cnn::CNNDialect, func::FuncDialect>();
  Importer importer(context, path, options, weights);
  return importer.run();
}

OwningOpRef<ModuleOp> cnnc::importONNXBuffer(llvm::MemoryBufferRef buffer,
                                             StringRef dataDir,
                                             MLIRContext &context,
                                             const ONNXImportOptions &options,
                                             TensorMap &weights) {
  context.loadDialect<cnn::CNNDialect, func::FuncDialect>();
  Importer importer(context, buffer.getBufferIdentifier(), options, weights);
  return importer.run(buffer, dataDir);
}

//===----------------------------------------------------------------------===//
// The op table for docs/ops.md
//===----------------------------------------------------------------------===//

std::vector<ONNXOpDoc> cnnc::onnxOpTable() {
  auto word = [](Support s) -> std::string {
    switch (s) {
    case Support::Yes:
      return "yes";
    case Support::No:
      return "no";
    case Support::Const:
      return "n/a";
    }
    return "?";
  };
  std::vector<ONNXOpDoc> docs;
  for (const OpHandler &h : kOpHandlers)
    docs.push_back({h.opType, h.minOpset, h.maxOpset, word(h.gradient),
                    word(h.gpuKernel), h.notes});
  llvm::stable_sort(docs, [](const ONNXOpDoc &a, const ONNXOpDoc &b) {
    return std::tie(a.opType, a.minOpset) < std::tie(b.opType, b.minOpset);
  });
  return docs;
}

void cnnc::printONNXOpTable(llvm::raw_ostream &os, bool markdown) {
  std::vector<ONNXOpDoc> docs = onnxOpTable();
  if (!markdown) {
    for (const ONNXOpDoc &d : docs)
      os << fmt::format("{:<20} {:>2}-{:<2} grad={:<3} gpu={:<3} {}\n",
                        d.opType, d.minOpset, d.maxOpset, d.gradient,
                        d.gpuKernel, d.notes);
    return;
  }
  os << "# ONNX ops cnnc imports\n\n"
        "<!-- Generated by `cnnc --list-onnx-ops=markdown > docs/ops.md` from "
        "the importer's op table\n"
        "     (lib/Frontend/ONNX/ONNXImporter.cpp); the test `docs-ops` fails "
        "when this file differs. -->\n\n"
        "Opsets are versions of the default domain (`ai.onnx`). *Gradient*: "
        "cnn-autodiff differentiates what the op\n"
        "becomes; *GPU kernel*: the CUDA target runs it; *n/a*: the op is "
        "folded at import time (shape\n"
        "computations on constants) and leaves nothing at run time. A model "
        "with ops outside this table is\n"
        "refused with one diagnostic listing every unsupported op type.\n\n"
        "| ONNX op | opsets | gradient | GPU kernel | notes |\n"
        "|---|---|---|---|---|\n";
  for (const ONNXOpDoc &d : docs)
    os << fmt::format("| {} | {}-{} | {} | {} | {} |\n", d.opType, d.minOpset,
                      d.maxOpset, d.gradient, d.gpuKernel, d.notes);
}
