//===- FuzzTensorFiles.cpp - the runtime's tensor file readers ------------===//
//
// One source, three targets (CNNC_FUZZ_FORMAT = 0 .cnnw, 1 .npy, 2 CNNT):
// the in-memory parsers behind readTensorFile/readNpy/readRawTensor. An input
// that parses must satisfy the shape rule and convert to a reference tensor;
// written back and parsed again it must give the same entries.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "cnnc/Reference/TensorEntry.h"
#include "cnnrt/TensorFile.h"

#include <cstdlib>
#include <unistd.h>

using namespace cnnrt;

namespace {
void check(bool ok) {
  if (!ok)
    std::abort();
}

void checkEntry(const TensorEntry &e) {
  uint64_t nbytes;
  std::string why;
  check(checkShape(e.shape, e.dtype, nbytes, why));
  check(nbytes == e.data.size());
  cnnc::reference::Tensor t = cnnc::reference::fromEntry(e);
  check(int64_t(t.data.size()) == e.numel());
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *bytes = reinterpret_cast<const char *>(data);
  std::string err;
#if CNNC_FUZZ_FORMAT == 0
  std::vector<TensorEntry> entries;
  if (!parseTensorFile(bytes, size, "<fuzz>", entries, err)) {
    check(!err.empty());
    return 0;
  }
  for (const TensorEntry &e : entries)
    checkEntry(e);
#elif CNNC_FUZZ_FORMAT == 1
  TensorEntry e;
  if (!parseNpy(bytes, size, "<fuzz>", e, err)) {
    check(!err.empty());
    return 0;
  }
  checkEntry(e);
#else
  TensorEntry e;
  if (!parseRawTensor(bytes, size, "<fuzz>", e, err)) {
    check(!err.empty());
    return 0;
  }
  checkEntry(e);
#endif
  return 0;
}
