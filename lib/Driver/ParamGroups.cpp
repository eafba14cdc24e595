//===- ParamGroups.cpp - --param-groups: frozen parameters, param groups --===//
//
// Reads the JSON file of --param-groups and tags @forward's parameter
// arguments for cnn-autodiff: cnn.frozen (torch's requires_grad=False) and
// cnn.param_options (the settings of a torch param group). cnnc.compile
// writes this file from the torch optimizer; it can be written by hand:
//
//   {"frozen": ["conv1.weight", ...],
//    "groups": [{"params": ["fc.weight", "fc.bias"], "lr": 0.01,
//                "weight_decay": 0, "momentum": 0.9, "dampening": 0,
//                "nesterov": false, "betas": [0.9, 0.999], "eps": 1e-8}]}
//
// Group k of "groups" is cnn-autodiff's group k + 1; parameters in no group
// take the command line's settings (group 0, whose LR is --lr and the
// schedule). Every key of a group but "params" is optional (default: the
// command line's); "lr" makes the group's LR a state tensor
// "optimizer.group<k>.lr" that the host writes before each step.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Driver/Driver.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnrt/HyperParams.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace cnnc;

LogicalResult cnnc::driver::applyParamGroups(const std::string &path,
                                             ModuleOp module) {
  auto fail = [&](const Twine &msg) {
    emitError(UnknownLoc::get(module.getContext()))
        << "--param-groups " << path << ": " << msg;
    return failure();
  };
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return fail("cannot read the file: " + buf.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buf)->getBuffer());
  if (!json)
    return fail("not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return fail("expected an object with \"frozen\" and/or \"groups\"");
  for (const auto &kv : *root)
    if (kv.first != "frozen" && kv.first != "groups")
      return fail("unknown key '" + kv.first.str() +
                  "' (expected \"frozen\" and \"groups\")");
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return fail("the module has no @forward");
  llvm::StringMap<unsigned> argOf;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (auto n = forward.getArgAttrOfType<StringAttr>(i, cnn::kParamAttr))
      argOf[n.getValue()] = i;
  auto lookup = [&](const llvm::json::Value &v, const Twine &where,
                    unsigned &arg) -> LogicalResult {
    std::optional<StringRef> name = v.getAsString();
    if (!name)
      return fail(where + ": parameter names must be strings");
    auto it = argOf.find(*name);
    if (it == argOf.end())
      return fail(where + ": '" + *name + "' is not a parameter of the model");
    arg = it->second;
    return success();
  };
  Builder b(module.getContext());
  if (const llvm::json::Value *frozen = root->get("frozen")) {
    const llvm::json::Array *names = frozen->getAsArray();
    if (!names)
      return fail("\"frozen\" must be an array of parameter names");
    for (const llvm::json::Value &v : *names) {
      unsigned arg = 0;
      if (failed(lookup(v, "\"frozen\"", arg)))
        return failure();
      forward.setArgAttr(arg, cnn::kFrozenAttr, b.getUnitAttr());
    }
  }
  const llvm::json::Value *groupsValue = root->get("groups");
  if (!groupsValue)
    return success();
  const llvm::json::Array *groups = groupsValue->getAsArray();
  if (!groups)
    return fail("\"groups\" must be an array of objects");
  llvm::DenseMap<unsigned, size_t> groupOf;
  for (auto [k, gv] : llvm::enumerate(*groups)) {
    std::string where = "group " + std::to_string(k);
    const llvm::json::Object *g = gv.getAsObject();
    if (!g)
      return fail(where + " is not an object");
    SmallVector<NamedAttribute> opts;
    opts.push_back(b.getNamedAttr("group", b.getI64IntegerAttr(k + 1)));
    // The command line's rules (cnnrt/HyperParams.h) hold for a group too.
    auto number = [&](StringRef key, StringRef attr,
                      const cnnrt::ParamRange &range) -> LogicalResult {
      const llvm::json::Value *v = g->get(key);
      if (!v)
        return success();
      std::optional<double> d = v->getAsNumber();
      if (!d)
        return fail(where + ": '" + key + "' must be a number");
      std::string err;
      if (!cnnrt::checkParam("'" + key.str() + "'", *d, range, err))
        return fail(where + ": " + err);
      opts.push_back(b.getNamedAttr(attr, b.getF32FloatAttr(*d)));
      return success();
    };
    for (const auto &kv : *g)
      if (!llvm::is_contained({StringRef("params"), StringRef("lr"),
                               StringRef("weight_decay"), StringRef("momentum"),
                               StringRef("dampening"), StringRef("nesterov"),
                               StringRef("betas"), StringRef("eps")},
                              StringRef(kv.first)))
        return fail(where + ": unknown setting '" + kv.first.str() +
                    "' (expected params, lr, weight_decay, momentum, "
                    "dampening, nesterov, betas, eps)");
    if (failed(number("lr", "lr", cnnrt::lrRange())) ||
        failed(number("weight_decay", "weight_decay",
                      cnnrt::weightDecayRange())) ||
        failed(number("momentum", "momentum", cnnrt::momentumRange())) ||
        failed(number("dampening", "dampening", cnnrt::dampeningRange())) ||
        failed(number("eps", "epsilon", cnnrt::epsRange())))
      return failure();
    if (const llvm::json::Value *v = g->get("nesterov")) {
      std::optional<bool> n = v->getAsBoolean();
      if (!n)
        return fail(where + ": 'nesterov' must be true or false");
      opts.push_back(b.getNamedAttr("nesterov", b.getBoolAttr(*n)));
    }
    if (const llvm::json::Value *v = g->get("betas")) {
      const llvm::json::Array *a = v->getAsArray();
      std::optional<double> b1 = a && a->size() == 2 ? (*a)[0].getAsNumber()
                                                     : std::nullopt;
      std::optional<double> b2 = a && a->size() == 2 ? (*a)[1].getAsNumber()
                                                     : std::nullopt;
      if (!b1 || !b2)
        return fail(where + ": 'betas' must be [beta1, beta2]");
      std::string err;
      if (!cnnrt::checkParam("'betas'[0]", *b1, cnnrt::betaRange(), err) ||
          !cnnrt::checkParam("'betas'[1]", *b2, cnnrt::betaRange(), err))
        return fail(where + ": " + err);
      opts.push_back(b.getNamedAttr("beta1", b.getF32FloatAttr(*b1)));
      opts.push_back(b.getNamedAttr("beta2", b.getF32FloatAttr(*b2)));
    }
    const llvm::json::Value *pv = g->get("params");
    const llvm::json::Array *names = pv ? pv->getAsArray() : nullptr;
    if (!names)
      return fail(where + ": 'params' must be an array of parameter names");
    DictionaryAttr dict = b.getDictionaryAttr(opts);
    for (const llvm::json::Value &v : *names) {
      unsigned arg = 0;
      if (failed(lookup(v, where, arg)))
        return failure();
      auto [it, fresh] = groupOf.try_emplace(arg, k);
      if (!fresh)
        return fail("'" + *v.getAsString() + "' is in group " +
                    std::to_string(it->second) + " and in group " +
                    std::to_string(k));
      forward.setArgAttr(arg, cnn::kParamOptionsAttr, dict);
    }
  }
  return success();
}
