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
#include <utility>
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

  /// Number of elements; -1 when a dimension is negative or the product
  /// overflows int64 (readers reject such shapes before building an entry).
  int64_t numel() const;
  /// Creates an entry with zeroed data of the right size.
  static TensorEntry zeros(std::string name, DType dt,
                           std::vector<int64_t> shape);
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
};

/// The shape rules every reader applies (the .cnnw, .npy and CNNT readers,
/// python/cnnc/cnnw.py and the ONNX importer agree on them): rank <= 8, no
/// negative dimension, and numel * dtypeSize fits in int64. On success
/// `nbytes` is the data size the shape and dtype need; on failure `why` says
/// what is wrong (without a file name).
constexpr uint32_t kMaxRank = 8;
bool checkShape(const std::vector<int64_t> &shape, DType dt, uint64_t &nbytes,
                std::string &why);

/// Opens `path` for reading without ever blocking: O_NONBLOCK for the open
/// itself (a FIFO with no writer would block there forever), then fstat of
/// the opened descriptor (no check-then-open race) must show a regular file,
/// then O_NONBLOCK is cleared for the reads. Returns the descriptor, or -1
/// with `err` naming the file and why ("not a regular file (a FIFO)").
int openRegularFile(const std::string &path, std::string &err);

/// Reads a whole regular file (the readers' common first step).
bool readFileBytes(const std::string &path, std::vector<char> &buf,
                   std::string &err);
/// Strict UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF), as Python's decoder.
bool isValidUtf8(const std::string &s);

/// Finds an entry by name (nullptr if absent).
const TensorEntry *findEntry(const std::vector<TensorEntry> &entries,
                             const std::string &name);

//===--- .cnnw weights / checkpoint file ("CNNW0001") ---------------------===//

/// readTensorFile and writeTensorFileAtomic read and write the safetensors
/// format instead when the path ends in ".safetensors" (see below).
bool readTensorFile(const std::string &path, std::vector<TensorEntry> &out,
                    std::string &err);
/// Parses the bytes of a .cnnw file (`path` only names it in messages).
/// Entry names must be unique, non-empty UTF-8.
bool parseTensorFile(const char *data, size_t size, const std::string &path,
                     std::vector<TensorEntry> &out, std::string &err);
/// Writes the file with the rules of OutputFile (atomic for regular files,
/// in place for devices and fifos, through symlinks). On failure <path> is
/// left untouched.
bool writeTensorFileAtomic(const std::string &path,
                           const std::vector<TensorEntry> &entries,
                           std::string &err);

//===--- safetensors (https://huggingface.co/docs/safetensors) ------------===//
//
// u64 header length N, N bytes of JSON {name: {"dtype", "shape",
// "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the data
// (offsets relative to its start). The rules are the safetensors crate's
// (what safetensors.torch.load_file accepts): N <= 100,000,000, the header is
// a UTF-8 JSON object, the tensors' byte ranges tile the data exactly (no
// gap, overlap or trailing byte), each range is numel * itemsize. F32, F16,
// I32 and I64 are read; other dtypes (BF16, F64, ...) are an error naming
// them. readTensorFile/writeTensorFileAtomic choose this format for a path
// ending in ".safetensors" (isSafetensorsPath).

/// The string-to-string "__metadata__" of a file, in file order.
using SafetensorsMetadata = std::vector<std::pair<std::string, std::string>>;

/// Whether `path` ends in ".safetensors" (any case).
bool isSafetensorsPath(const std::string &path);
/// Parses the bytes of a safetensors file; entries are returned in the order
/// of their data offsets. `metadata` (optional) receives "__metadata__".
bool parseSafetensors(const char *data, size_t size, const std::string &path,
                      std::vector<TensorEntry> &out, std::string &err,
                      SafetensorsMetadata *metadata = nullptr);
bool readSafetensors(const std::string &path, std::vector<TensorEntry> &out,
                     std::string &err, SafetensorsMetadata *metadata = nullptr);
/// The bytes of a safetensors file holding `entries` in their order, the
/// header padded with spaces to a multiple of 8 bytes (as the reference
/// writer does). False (with `err`) for an entry whose data does not match
/// its shape or whose name is empty, not UTF-8, "__metadata__" or repeated.
bool serializeSafetensors(const std::vector<TensorEntry> &entries,
                          const SafetensorsMetadata &metadata,
                          std::string &bytes, std::string &err);
/// Writes atomically (the rules of OutputFile). Without `metadata` it is
/// {"format": "pt"}, which Hugging Face loaders look for.
bool writeSafetensors(const std::string &path,
                      const std::vector<TensorEntry> &entries, std::string &err,
                      const SafetensorsMetadata *metadata = nullptr);

//===--- NumPy .npy (v1.0 written; v1/v2/v3 read) -------------------------===//

/// Reads '<f4', '<f2', '<i4', '<i8' arrays in C order. The entry's name is set
/// to the file's path.
bool readNpy(const std::string &path, TensorEntry &out, std::string &err);
bool parseNpy(const char *data, size_t size, const std::string &path,
              TensorEntry &out, std::string &err);
/// Writes atomically (same temp + rename scheme as writeTensorFileAtomic).
bool writeNpy(const std::string &path, const TensorEntry &t, std::string &err);

//===--- raw single tensor ("CNNT") ---------------------------------------===//

bool readRawTensor(const std::string &path, TensorEntry &out, std::string &err);
bool parseRawTensor(const char *data, size_t size, const std::string &path,
                    TensorEntry &out, std::string &err);
bool writeRawTensor(const std::string &path, const TensorEntry &t,
                    std::string &err);

//===--- output files
//------------------------------------------------------===//

/// One output file, written the way LLVM tools write theirs
/// (llvm::ToolOutputFile / llvm::writeToOutput):
///  - "-" is stdout;
///  - an existing file that is not a regular file (/dev/null, a fifo, a
///    character device) is written in place and never replaced or removed;
///  - a symlink is followed: its target is written (the link stays);
///  - a regular or new file is written to a temporary file in the same
///    directory, fsynced and renamed over the path, so readers see the old
///    or the new file and never a partial one.
/// The bytes are staged in a temporary file first (`stagingPath()`, which a
/// child process such as nvcc may also write); commit() publishes them.
/// Without commit() (an error, an exception, the destructor) the staging file
/// is removed and the path is left exactly as it was.
class OutputFile {
public:
  OutputFile() = default;
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile() { discard(); }

  /// Decides where the bytes go and creates the (empty) staging file, whose
  /// name ends in `suffix` (for tools that look at extensions, like nvcc).
  bool open(const std::string &path, std::string &err,
            const std::string &suffix = "");
  /// The file the bytes are written to until commit().
  const std::string &stagingPath() const { return staging_; }
  /// True when the output is not a regular file that is replaced (stdout, a
  /// device, a fifo): side files derived from its name are not written.
  bool isSpecial() const { return mode_ != Mode::Replace; }
  /// Publishes the staged bytes (rename, or copy into the special file).
  bool commit(std::string &err);
  /// Removes the staging file; the output is left untouched.
  void discard();

private:
  enum class Mode { Replace, InPlace, Stdout };
  Mode mode_ = Mode::Replace;
  std::string path_;    ///< as given
  std::string target_;  ///< after following symlinks
  std::string staging_; ///< temporary file ("" when none)
};

/// Writes bytes to `path` with the rules of OutputFile.
bool writeFileAtomic(const std::string &path, const std::string &bytes,
                     std::string &err);

} // namespace cnnrt

#endif // CNNRT_TENSORFILE_H
