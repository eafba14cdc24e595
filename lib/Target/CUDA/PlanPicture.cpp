//===- PlanPicture.cpp - the arena timeline of a train step as SVG --------===//
//
// cnnc --dump-plan-svg FILE: every temporary of @train_step as a rectangle
// spanning its live range (op indices, x) and its byte range in the arena
// (y), with the live bytes per op (the lower bound of any plan) as a curve
// on top. Plain SVG 1.1 written here; each rectangle has a <title> tooltip.
//
//===----------------------------------------------------------------------===//

#include "BufferPlan.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace cnnc;

namespace {
std::string escapeXML(StringRef s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// A stable colour per defining op kind.
std::string colourOf(StringRef op) {
  uint32_t h = static_cast<uint32_t>(llvm::hash_value(op));
  return llvm::formatv("hsl({0},{1}%,{2}%)", h % 360, 45 + (h >> 9) % 30,
                       55 + (h >> 17) % 20)
      .str();
}

std::string mibStr(double bytes) {
  return llvm::formatv("{0:F1} MiB", bytes / 1048576.0).str();
}
} // namespace

LogicalResult cnnc::writeBufferPlanSVG(ModuleOp module, llvm::raw_ostream &os) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return module.emitError("--dump-plan-svg: the module has no @train_step");
  // The plan --dump-plan prints (same buffer names); drawn: the buffers of
  // @train_step's values (their live ranges are its op indices), not
  // @forward's, which share the region.
  auto planOr =
      getBufferPlan(step, module.lookupSymbol<func::FuncOp>("forward"));
  if (failed(planOr))
    return failure();
  const BufferPlan &plan = *planOr;
  std::vector<char> ofStep(plan.buffers.size(), 0);
  for (auto &[constValue, index] : plan.bufferOf)
    if (Region *r = Value(constValue).getParentRegion())
      if (r->getParentOfType<func::FuncOp>() == step ||
          r->getParentOp() == step.getOperation())
        ofStep[index] = 1;
  std::vector<const PlannedBuffer *> temps;
  int lastOp = 0;
  size_t base = SIZE_MAX, top = 0;
  for (auto [k, b] : llvm::enumerate(plan.buffers))
    if (b.role == BufferRole::Temp && b.bytes && ofStep[k]) {
      temps.push_back(&b);
      lastOp = std::max(lastOp, b.lastUse);
      base = std::min(base, b.offset);
      top = std::max(top, b.offset + b.bytes);
    }
  if (temps.empty()) {
    base = 0;
    top = 1;
  }
  // Live bytes per op index.
  std::vector<double> live(lastOp + 2, 0.0);
  for (const PlannedBuffer *b : temps)
    for (int i = b->firstUse; i <= b->lastUse; ++i)
      live[i] += b->bytes;
  double maxLive = *std::max_element(live.begin(), live.end());

  const double W = 1200, H = 640, left = 90, right = 20, topM = 50, bottom = 50;
  const double pw = W - left - right, ph = H - topM - bottom;
  const double span = std::max<double>(top - base, 1);
  auto X = [&](double op) { return left + pw * op / (lastOp + 1); };
  auto Y = [&](double off) { return topM + ph * (1.0 - (off - base) / span); };

  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W
     << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " " << H
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << left << "\" y=\"20\" font-size=\"15\">"
     << escapeXML(
            llvm::formatv("@train_step temporaries: {0} buffers over {1} ops; "
                          "planned {2} ({3}), live-bytes peak {4}; arena {5}",
                          temps.size(), lastOp + 1, mibStr(span),
                          "cnn-memory-plan " + plan.strategy, mibStr(maxLive),
                          mibStr(plan.arenaBytes))
                .str())
     << "</text>\n";
  os << "<text x=\"" << left
     << "\" y=\"38\" fill=\"#555\">x: op index "
        "(live range), y: arena offset; black curve: bytes live at each op "
        "(a lower bound for any plan)</text>\n";
  // Axes and ticks.
  os << "<rect x=\"" << left << "\" y=\"" << topM << "\" width=\"" << pw
     << "\" height=\"" << ph << "\" fill=\"#f8f8f8\" stroke=\"#888\"/>\n";
  for (int k = 0; k <= 8; ++k) {
    double off = base + span * k / 8;
    os << "<text x=\"" << left - 6 << "\" y=\"" << Y(off) + 4
       << "\" text-anchor=\"end\">" << mibStr(off) << "</text>\n";
    double op = (lastOp + 1) * k / 8.0;
    os << "<text x=\"" << X(op) << "\" y=\"" << H - bottom + 16
       << "\" text-anchor=\"middle\">" << static_cast<int>(op) << "</text>\n";
  }
  os << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 12
     << "\" text-anchor=\"middle\">op index in @train_step</text>\n";
  // Buffers.
  for (const PlannedBuffer *b : temps) {
    double x0 = X(b->firstUse), x1 = X(b->lastUse + 1);
    double y0 = Y(b->offset + b->bytes), y1 = Y(b->offset);
    os << "<rect x=\"" << llvm::format("%.2f", x0) << "\" y=\""
       << llvm::format("%.2f", y0) << "\" width=\""
       << llvm::format("%.2f", std::max(x1 - x0, 0.5)) << "\" height=\""
       << llvm::format("%.2f", std::max(y1 - y0, 0.5)) << "\" fill=\""
       << colourOf(b->defOp) << "\" stroke=\"#333\" stroke-width=\"0.3\">"
       << "<title>"
       << escapeXML(llvm::formatv("{0} ({1}): {2} bytes at {3}, ops [{4}, {5}]",
                                  b->name, b->defOp, b->bytes, b->offset,
                                  b->firstUse, b->lastUse)
                        .str())
       << "</title></rect>\n";
  }
  // Live bytes.
  os << "<polyline fill=\"none\" stroke=\"black\" stroke-width=\"1.2\" "
        "points=\"";
  for (int i = 0; i <= lastOp; ++i)
    os << llvm::format("%.2f,%.2f %.2f,%.2f ", X(i), Y(base + live[i]),
                       X(i + 1), Y(base + live[i]));
  os << "\"/>\n</svg>\n";
  return success();
}
