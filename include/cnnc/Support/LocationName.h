//===- LocationName.h - the name an op's launches carry ---------*- C++ -*-===//
//
// The CUDA printer labels every launch and library call with its op's
// location (the ONNX node name the importer gives it; forward, backward and
// optimizer kernels of one node share it): the runtime's profile reports
// time by it (CNNRT_PROFILE, CNNRT_PROFILE_JSON), and cnn-pipeline-partition
// reads a profile back by it. One spelling for both sides.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_SUPPORT_LOCATIONNAME_H
#define CNNC_SUPPORT_LOCATIONNAME_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

#include <string>

namespace cnnc {

/// A NameLoc's name; a FileLineColLoc as "file:line:col"; a FusedLoc's
/// first location's; otherwise "<unknown>".
inline std::string locationName(mlir::Location loc) {
  if (auto n = llvm::dyn_cast<mlir::NameLoc>(loc))
    return n.getName().str();
  if (auto f = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
    return f.getFilename().str() + ":" + std::to_string(f.getLine()) + ":" +
           std::to_string(f.getColumn());
  if (auto f = llvm::dyn_cast<mlir::FusedLoc>(loc))
    if (!f.getLocations().empty())
      return locationName(f.getLocations().front());
  return "<unknown>";
}

} // namespace cnnc

#endif // CNNC_SUPPORT_LOCATIONNAME_H
