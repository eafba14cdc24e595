//===- TensorFile.h - .cnnw / .npy / CNNT tensor files ----------*- C++ -*-===//
//
// Pure C++17 (no CUDA): linked by both the runtime and the compiler.
// Formats are documented in docs/runtime.md. All multi-byte values are
// little-endian.
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_TENSORFILE_H
#define CNNRT_TENSORFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cnnrt {

/// Element types; the numeric values are the on-disk dtype codes.
enum class DType : uint32_t { F32 = 0, F16 = 1, I32 = 2, I64 = 3 };

/// Size in bytes of one element (0 for an unknown code).
size_t dtypeSize(DType dt);
/// "f32", "f16", "i32", "i64" (or "?").
const char *dtypeName(DType dt);
/// True for the four known codes.
bool isValidDType(uint32_t code);

/// One named tensor held in host memory.
struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data; ///< raw little-endian bytes, C order

  int64_t numel() const;
  /// Creates an entry with zeroed data of the right size.
  static TensorEntry zeros(std::string name, DType dt,
                           std::vector<int64_t> shape);
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
};

/// Finds an entry by name (nullptr if absent).
const TensorEntry *findEntry(const std::vector<TensorEntry> &entries,
                             const std::string &name);

//===--- .cnnw weights / checkpoint file ("CNNW0001") ---------------------===//

bool readTensorFile(const std::string &path, std::vector<TensorEntry> &out,
                    std::string &err);
/// Writes to "<path>.tmp.<pid>", fsyncs it, renames it over <path> and fsyncs
/// the directory. On failure the temporary file is removed and <path> is left
/// untouched.
bool writeTensorFileAtomic(const std::string &path,
                           const std::vector<TensorEntry> &entries,
                           std::string &err);

//===--- NumPy .npy (v1.0 written; v1/v2/v3 read) -------------------------===//

/// Reads '<f4', '<f2', '<i4', '<i8' arrays in C order. The entry's name is set
/// to the file's path.
bool readNpy(const std::string &path, TensorEntry &out, std::string &err);
/// Writes atomically (same temp + rename scheme as writeTensorFileAtomic).
bool writeNpy(const std::string &path, const TensorEntry &t, std::string &err);

//===--- raw single tensor ("CNNT") ---------------------------------------===//

bool readRawTensor(const std::string &path, TensorEntry &out, std::string &err);
bool writeRawTensor(const std::string &path, const TensorEntry &t,
                    std::string &err);

/// Writes bytes to "<path>.tmp.<pid>", fsyncs, renames. Shared helper.
bool writeFileAtomic(const std::string &path, const std::string &bytes,
                     std::string &err);

} // namespace cnnrt

#endif // CNNRT_TENSORFILE_H
