//===- FuzzTensorFiles.cpp - the runtime's tensor file readers ------------===//
//
// One source, four targets (CNNC_FUZZ_FORMAT = 0 .cnnw, 1 .npy, 2 CNNT,
// 3 safetensors): the in-memory parsers behind readTensorFile/readNpy/
// readRawTensor/readSafetensors. An input that parses must satisfy the shape
// rule and convert to a reference tensor; a safetensors input written back
// and parsed again must give the same entries and metadata.
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
#elif CNNC_FUZZ_FORMAT == 3
  std::vector<TensorEntry> entries;
  SafetensorsMetadata meta;
  if (!parseSafetensors(bytes, size, "<fuzz>", entries, err, &meta)) {
    check(!err.empty());
    return 0;
  }
  for (const TensorEntry &e : entries)
    checkEntry(e);
  std::string again;
  check(serializeSafetensors(entries, meta, again, err));
  std::vector<TensorEntry> back;
  SafetensorsMetadata backMeta;
  check(parseSafetensors(again.data(), again.size(), "<again>", back, err,
                         &backMeta));
  check(backMeta == meta && back.size() == entries.size());
  for (size_t i = 0; i < back.size(); ++i)
    check(back[i].name == entries[i].name &&
          back[i].dtype == entries[i].dtype &&
          back[i].shape == entries[i].shape && back[i].data == entries[i].data);
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
