//===- CApi.cpp - C API of the CPU reference interpreter ------------------===//
//
// libcnnc_reference.so: the Python package's CPU backend. One session holds
// the parsed step module and the persistent state by name (as the driver's
// reference training does); each call binds the arguments of @train_step or
// @forward and runs the interpreter. Errors are MLIR diagnostics captured into
// a per-thread message.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Reference/cnnc_reference_c.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Reference/Interpreter.h"
#include "cnnc/Reference/Pipeline.h"
#include "cnnc/Reference/TensorEntry.h"
#include "cnnrt/TensorFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <memory>

using namespace mlir;
using namespace cnnc;
using reference::Tensor;

namespace {
thread_local std::string gLastError;

int setError(const std::string &e) {
  gLastError = e;
  return -1;
}

struct StateInfo {
  std::string name;
  int role;
  RankedTensorType type;
};

struct TraceEntry {
  std::string name, op;
  Tensor value;
};
} // namespace

struct cnnref_session {
  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module;
  func::FuncOp step, forward;
  reference::TensorMap state; ///< params, buffers, optimizer state, grads
  std::vector<StateInfo> infos;
  int imageArg = -1, labelsArg = -1, lrArg = -1, stepArg = -1;
  int64_t classes = 0;
  int64_t ignoreIndex = -100; ///< the loss's ignore_index
  int64_t stepCount = 0;
  /// Pipeline stages (cnnref_set_pipeline): the split module and M; the
  /// step's batch is then M micro-batches of @train_step's.
  llvm::SourceMgr stagesSourceMgr; ///< a SourceMgr parses one main buffer
  OwningOpRef<ModuleOp> stages;
  int64_t microBatches = 1;
  std::vector<TraceEntry> trace;
  /// Diagnostics of the current call, joined into gLastError on failure.
  std::string diagnostics;

  cnnref_session() {
    DialectRegistry registry;
    registry.insert<cnn::CNNDialect, func::FuncDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    context.printOpOnDiagnostic(false);
    context.getDiagEngine().registerHandler([this](Diagnostic &d) {
      std::string msg;
      llvm::raw_string_ostream os(msg);
      if (auto name = dyn_cast<NameLoc>(d.getLocation()))
        os << name.getName().getValue() << ": ";
      else if (auto file = dyn_cast<FileLineColLoc>(d.getLocation()))
        os << file.getFilename().getValue() << ":" << file.getLine() << ": ";
      os << d;
      if (!diagnostics.empty())
        diagnostics += "\n";
      diagnostics += msg;
      return success();
    });
  }

  int fail(const std::string &what) {
    std::string msg = what;
    if (!diagnostics.empty())
      msg += ": " + diagnostics;
    diagnostics.clear();
    return setError(msg);
  }

  std::string argName(func::FuncOp f, unsigned i) const {
    for (const char *key : {cnn::kParamAttr, cnn::kBufferAttr, cnn::kStateAttr})
      if (auto s = f.getArgAttrOfType<StringAttr>(i, key))
        return s.str();
    return "";
  }
};

namespace {
RankedTensorType argType(func::FuncOp f, int i) {
  return cast<RankedTensorType>(f.getArgument(i).getType());
}

Tensor fromFloats(RankedTensorType type, const float *data) {
  Tensor t = Tensor::zeros(type);
  std::memcpy(t.data.data(), data, t.data.size() * sizeof(float));
  if (t.kind == reference::ElemKind::F16)
    for (float &v : t.data)
      v = reference::roundToHalf(v);
  return t;
}

const StateInfo *findInfo(const cnnref_session *s, const char *name) {
  for (const StateInfo &i : s->infos)
    if (i.name == name)
      return &i;
  return nullptr;
}
} // namespace

extern "C" {

const char *cnnref_last_error(void) { return gLastError.c_str(); }

cnnref_session *cnnref_open(const char *mlir_path, const char *weights_path) {
  gLastError.clear();
  auto s = std::make_unique<cnnref_session>();
  s->module = parseSourceFile<ModuleOp>(mlir_path, s->sourceMgr,
                                        ParserConfig(&s->context));
  if (!s->module) {
    s->fail(std::string("cannot parse '") + mlir_path + "'");
    return nullptr;
  }
  s->step = s->module->lookupSymbol<func::FuncOp>("train_step");
  s->forward = s->module->lookupSymbol<func::FuncOp>("forward");
  if (!s->step) {
    s->fail(std::string("'") + mlir_path + "' has no @train_step");
    return nullptr;
  }
  for (unsigned i = 0; i < s->step.getNumArguments(); ++i) {
    if (s->step.getArgAttr(i, cnn::kLabelsAttr))
      s->labelsArg = i;
    else if (s->step.getArgAttr(i, cnn::kLRAttr))
      s->lrArg = i;
    else if (s->step.getArgAttr(i, cnn::kStepAttr))
      s->stepArg = i;
    else if (s->step.getArgAttr(i, cnn::kInputAttr))
      s->imageArg = i;
    else {
      int role = s->step.getArgAttr(i, cnn::kParamAttr)    ? CNNREF_PARAM
                 : s->step.getArgAttr(i, cnn::kBufferAttr) ? CNNREF_BUFFER
                                                           : CNNREF_OPT_STATE;
      s->infos.push_back({s->argName(s->step, i), role, argType(s->step, i)});
    }
  }
  if (s->imageArg < 0 || s->labelsArg < 0 || s->lrArg < 0 || s->stepArg < 0) {
    s->fail("@train_step lacks its input, labels, lr or step argument");
    return nullptr;
  }
  s->step.walk([&](cnn::SoftmaxCrossEntropyOp op) {
    s->classes = op.getLogits().getType().getDimSize(1);
    s->ignoreIndex = static_cast<int64_t>(op.getIgnoreIndex());
  });

  std::string weights = weights_path ? weights_path : "";
  if (weights.empty())
    if (auto attr = (*s->module)->getAttrOfType<StringAttr>("cnn.weights")) {
      weights = attr.str();
      if (!llvm::sys::fs::exists(weights)) {
        llvm::SmallString<256> p(llvm::sys::path::parent_path(mlir_path));
        llvm::sys::path::append(p, llvm::sys::path::filename(weights));
        weights = std::string(p);
      }
    }
  if (!weights.empty()) {
    std::vector<cnnrt::TensorEntry> entries;
    std::string err;
    if (!cnnrt::readTensorFile(weights, entries, err)) {
      s->fail("cannot read weights '" + weights + "': " + err);
      return nullptr;
    }
    for (const auto &e : entries)
      s->state[e.name] = reference::fromEntry(e);
  }
  // Every parameter and buffer must have a value; optimizer state starts at
  // zero (the loss scale at its cnn.init).
  for (unsigned i = 0; i < s->step.getNumArguments(); ++i) {
    std::string name = s->argName(s->step, i);
    if (name.empty() || s->state.count(name))
      continue;
    if (!s->step.getArgAttr(i, cnn::kStateAttr)) {
      s->fail("no value for the parameter '" + name + "'");
      return nullptr;
    }
    auto init = s->step.getArgAttrOfType<FloatAttr>(i, "cnn.init");
    s->state[name] = Tensor::zeros(argType(s->step, i),
                                   init ? init.getValueAsDouble() : 0.0);
  }
  for (const StateInfo &info : s->infos)
    if (!s->state[info.name].matches(info.type)) {
      s->fail("the value of '" + info.name + "' has the wrong shape");
      return nullptr;
    }
  return s.release();
}

void cnnref_close(cnnref_session *s) { delete s; }

int cnnref_input_shape(const cnnref_session *s, int64_t *dims, int *rank) {
  auto shape = argType(s->step, s->imageArg).getShape();
  if (shape.size() > 8)
    return setError("input rank above 8");
  *rank = shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    dims[i] = shape[i];
  dims[0] *= s->microBatches; // a pipelined step reads M micro-batches
  return 0;
}

int64_t cnnref_num_classes(const cnnref_session *s) { return s->classes; }

int cnnref_labels_shape(const cnnref_session *s, int64_t *dims, int *rank) {
  auto shape = argType(s->step, s->labelsArg).getShape();
  if (shape.size() > 8)
    return setError("labels rank above 8");
  *rank = shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    dims[i] = shape[i];
  dims[0] *= s->microBatches;
  return 0;
}

int64_t cnnref_ignore_index(const cnnref_session *s) { return s->ignoreIndex; }

int cnnref_output_shape(const cnnref_session *s, int64_t *dims, int *rank) {
  func::FuncOp forward = s->forward; // (a handle: its getters are not const)
  if (!forward || forward.getNumResults() < 1)
    return setError("the module has no @forward with a result");
  auto shape = cast<RankedTensorType>(forward.getResultTypes()[0]).getShape();
  if (shape.size() > 8)
    return setError("output rank above 8");
  *rank = shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    dims[i] = shape[i];
  return 0;
}

int cnnref_step(cnnref_session *s, const float *images, const int64_t *labels,
                float lr, float *loss) {
  func::FuncOp step = s->step;
  auto imageType = argType(step, s->imageArg);
  auto labelsType = argType(step, s->labelsArg);
  // @train_step's arguments of each micro-batch (one without stages): its
  // rows of the images and labels, its micro-step number.
  const int64_t micro = s->microBatches;
  const int64_t imageElems = imageType.getNumElements();
  const int64_t labelElems = labelsType.getNumElements();
  std::vector<std::vector<Tensor>> microArgs(micro);
  for (int64_t m = 0; m < micro; ++m) {
    Tensor labelTensor = Tensor::zeros(labelsType);
    for (int64_t i = 0; i < labelTensor.numel(); ++i) {
      int64_t label = labels[m * labelElems + i];
      if ((label < 0 || label >= s->classes) && label != s->ignoreIndex)
        return setError("label " + std::to_string(label) + " at index " +
                        std::to_string(m * labelElems + i) +
                        " is not a class in [0, " +
                        std::to_string(s->classes) + ") nor the ignore_index " +
                        std::to_string(s->ignoreIndex));
      labelTensor.data[i] = static_cast<float>(label);
    }
    std::vector<Tensor> &args = microArgs[m];
    args.resize(step.getNumArguments());
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto type = argType(step, i);
      if ((int)i == s->imageArg)
        args[i] = fromFloats(type, images + m * imageElems);
      else if ((int)i == s->labelsArg)
        args[i] = labelTensor;
      else if ((int)i == s->lrArg)
        args[i] = Tensor::zeros(type, lr);
      else if ((int)i == s->stepArg)
        args[i] = Tensor::zeros(type, (float)(s->stepCount * micro + m + 1));
      else
        args[i] = s->state.at(s->argName(step, i));
    }
  }
  std::vector<float> microLosses;
  auto results = s->stages ? reference::runScheduledPipelineStep(
                                 *s->stages, microArgs, &microLosses)
                           : reference::run(step, microArgs[0]);
  if (failed(results))
    return s->fail("the training step failed");
  ++s->stepCount;
  for (unsigned r = 0; r < step.getNumResults(); ++r) {
    DictionaryAttr d = step.getResultAttrDict(r);
    if (!d)
      continue;
    if (d.get(cnn::kLossAttr)) {
      *loss = (*results)[r].data[0];
      if (s->stages) {
        // The mean over the micro-batches, summed in their order as the
        // driver's reference training (ReferenceTraining.cpp) reports it.
        *loss = 0;
        for (float l : microLosses)
          *loss += l / (float)microLosses.size();
      }
      continue;
    }
    for (const char *key : {cnn::kParamAttr, cnn::kBufferAttr, cnn::kStateAttr})
      if (auto name = dyn_cast_or_null<StringAttr>(d.get(key)))
        s->state[name.str()] = std::move((*results)[r]);
    if (auto name = dyn_cast_or_null<StringAttr>(d.get(cnn::kGradAttr)))
      s->state[name.str() + ".grad"] = std::move((*results)[r]);
  }
  return 0;
}

int cnnref_set_pipeline(cnnref_session *s, const char *stages_path,
                        int micro_batches) {
  gLastError.clear();
  if (micro_batches < 1)
    return setError("cnnref_set_pipeline: micro_batches must be >= 1, not " +
                    std::to_string(micro_batches));
  OwningOpRef<ModuleOp> stages = parseSourceFile<ModuleOp>(
      stages_path, s->stagesSourceMgr, ParserConfig(&s->context));
  if (!stages)
    return s->fail(std::string("cannot parse '") + stages_path + "'");
  bool any = false;
  stages->walk([&](func::FuncOp f) {
    any |= f->hasAttr("cnn.pipeline_schedule");
  });
  if (!any)
    return setError(std::string("'") + stages_path +
                    "' has no @stage<s>_step (cnn-pipeline-schedule's)");
  s->stages = std::move(stages);
  s->microBatches = micro_batches;
  return 0;
}

int cnnref_eval(cnnref_session *s, const float *images, float *logits) {
  if (s->stages)
    return setError("cnnref_eval: a pipelined step has no evaluation step "
                    "(its @forward takes one micro-batch)");
  if (!s->forward)
    return setError("the module has no @forward");
  auto imageType = argType(s->step, s->imageArg);
  auto args = reference::bindArguments(s->forward, s->state,
                                       {fromFloats(imageType, images)});
  if (failed(args))
    return s->fail("cannot bind the arguments of @forward");
  auto results = reference::run(s->forward, *args);
  if (failed(results) || results->empty())
    return s->fail("@forward failed");
  const Tensor &out = results->front();
  std::memcpy(logits, out.data.data(), out.data.size() * sizeof(float));
  return 0;
}

int cnnref_num_state(const cnnref_session *s) { return s->infos.size(); }

const char *cnnref_state_name(const cnnref_session *s, int i) {
  return i >= 0 && i < (int)s->infos.size() ? s->infos[i].name.c_str()
                                            : nullptr;
}

int cnnref_state_role(const cnnref_session *s, int i) {
  return i >= 0 && i < (int)s->infos.size() ? s->infos[i].role : -1;
}

int cnnref_state_shape(const cnnref_session *s, int i, int64_t *dims,
                       int *rank) {
  if (i < 0 || i >= (int)s->infos.size())
    return setError("state index out of range");
  auto shape = s->infos[i].type.getShape();
  if (shape.size() > 8)
    return setError("state rank above 8");
  *rank = shape.size();
  for (size_t k = 0; k < shape.size(); ++k)
    dims[k] = shape[k];
  return 0;
}

int cnnref_get_state(const cnnref_session *s, const char *name, float *out) {
  auto it = s->state.find(name);
  if (it == s->state.end())
    return setError(std::string("no state tensor '") + name + "'");
  std::memcpy(out, it->second.data.data(),
              it->second.data.size() * sizeof(float));
  return 0;
}

int cnnref_set_state(cnnref_session *s, const char *name, const float *in) {
  const StateInfo *info = findInfo(s, name);
  if (!info)
    return setError(std::string("no state tensor '") + name + "'");
  s->state[name] = fromFloats(info->type, in);
  return 0;
}

int64_t cnnref_step_count(const cnnref_session *s) { return s->stepCount; }
void cnnref_set_step_count(cnnref_session *s, int64_t step) {
  s->stepCount = step;
}

int cnnref_trace(cnnref_session *s, const float *images) {
  if (!s->forward)
    return setError("the module has no @forward");
  s->trace.clear();
  // A copy of @forward that returns every named op's results.
  OpBuilder b(&s->context);
  auto traced = cast<func::FuncOp>(s->forward->clone());
  Block &body = traced.getBody().front();
  SmallVector<Value> values;
  std::vector<TraceEntry> entries;
  for (Operation &op : body.without_terminator()) {
    auto loc = dyn_cast<NameLoc>(op.getLoc());
    for (auto [k, v] : llvm::enumerate(op.getResults())) {
      if (!loc || !isa<RankedTensorType>(v.getType()))
        continue;
      values.push_back(v);
      std::string name = loc.getName().str();
      if (op.getNumResults() > 1)
        name += "#" + std::to_string(k);
      entries.push_back({name, op.getName().getStringRef().str(), {}});
    }
  }
  Operation *ret = body.getTerminator();
  b.setInsertionPoint(ret);
  func::ReturnOp::create(b, ret->getLoc(), values);
  ret->erase();
  SmallVector<Type> types;
  for (Value v : values)
    types.push_back(v.getType());
  traced.setFunctionType(
      FunctionType::get(&s->context, traced.getArgumentTypes(), types));
  traced.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
  OwningOpRef<func::FuncOp> owner(traced);
  auto imageType = argType(s->step, s->imageArg);
  auto args = reference::bindArguments(traced, s->state,
                                       {fromFloats(imageType, images)});
  if (failed(args))
    return s->fail("cannot bind the arguments of @forward");
  auto results = reference::run(traced, *args);
  if (failed(results))
    return s->fail("@forward failed");
  for (size_t i = 0; i < entries.size(); ++i)
    entries[i].value = std::move((*results)[i]);
  s->trace = std::move(entries);
  return 0;
}

int cnnref_trace_count(const cnnref_session *s) { return s->trace.size(); }

const char *cnnref_trace_name(const cnnref_session *s, int i) {
  return i >= 0 && i < (int)s->trace.size() ? s->trace[i].name.c_str()
                                            : nullptr;
}

const char *cnnref_trace_op(const cnnref_session *s, int i) {
  return i >= 0 && i < (int)s->trace.size() ? s->trace[i].op.c_str() : nullptr;
}

int cnnref_trace_shape(const cnnref_session *s, int i, int64_t *dims,
                       int *rank) {
  if (i < 0 || i >= (int)s->trace.size())
    return setError("trace index out of range");
  const auto &shape = s->trace[i].value.shape;
  if (shape.size() > 8)
    return setError("trace rank above 8");
  *rank = shape.size();
  for (size_t k = 0; k < shape.size(); ++k)
    dims[k] = shape[k];
  return 0;
}

int cnnref_trace_get(const cnnref_session *s, int i, float *out) {
  if (i < 0 || i >= (int)s->trace.size())
    return setError("trace index out of range");
  const Tensor &t = s->trace[i].value;
  std::memcpy(out, t.data.data(), t.data.size() * sizeof(float));
  return 0;
}

} // extern "C"
