//===- DataFixture.h - files and model settings the data tests share ------===//
//
// The set-up DataTest.cpp (classification data) and DenseDataTest.cpp
// (per-pixel labels, masks) both need: a scratch directory, raw file writes,
// a v1.0 .npy writer and the SourceOptions of a model. Header-only: each
// test file is its own translation unit of cnnrt_host_tests.
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_TEST_DATAFIXTURE_H
#define CNNRT_TEST_DATAFIXTURE_H

#include "cnnrt/Dataset.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace cnnrt::datafixture {

/// A fresh directory under /tmp (the tests leave it for inspection).
inline std::string tempDir() {
  char tmpl[] = "/tmp/cnnrt_data_XXXXXX";
  const char *d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

inline void writeBytes(const std::string &path, const std::vector<uint8_t> &b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char *>(b.data()), b.size());
}

/// Writes a v1.0 .npy with the given descr ('<i8', '|u1', ...) and raw data.
inline void writeNpy(const std::string &path, const std::string &descr,
                     const std::vector<int64_t> &shape, const void *data,
                     size_t bytes) {
  std::string sh;
  for (int64_t d : shape)
    sh += std::to_string(d) + ", ";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, " +
                  "'shape': (" + sh + "), }";
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 255);
  out += static_cast<char>(h.size() >> 8);
  out += h;
  out.append(static_cast<const char *>(data), bytes);
  std::ofstream f(path, std::ios::binary);
  f.write(out.data(), out.size());
}

/// A classifier's data settings: C x H x W images, `classes` outputs.
inline SourceOptions model(int C, int H, int W, int classes) {
  SourceOptions o;
  o.C = C;
  o.H = H;
  o.W = W;
  o.numClasses = classes;
  return o;
}

/// A dense model's: labels H x W per image, `ignore` left out of the loss.
inline SourceOptions denseModel(int C, int H, int W, int classes,
                                int64_t ignore = 255) {
  SourceOptions o = model(C, H, W, classes);
  o.labelH = H;
  o.labelW = W;
  o.ignoreIndex = ignore;
  return o;
}

} // namespace cnnrt::datafixture

#endif
