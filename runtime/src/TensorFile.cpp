//===- TensorFile.cpp - .cnnw / .npy / CNNT tensor files ------------------===//

#include "cnnrt/TensorFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cnnrt tensor files assume a little-endian host"
#endif

namespace cnnrt {

size_t dtypeSize(DType dt) {
  switch (dt) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
    return 2;
  case DType::I64:
    return 8;
  }
  return 0;
}

const char *dtypeName(DType dt) {
  switch (dt) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

bool isValidDType(uint32_t code) { return code <= 3; }

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

TensorEntry TensorEntry::zeros(std::string name, DType dt,
                               std::vector<int64_t> shape) {
  TensorEntry e;
  e.name = std::move(name);
  e.dtype = dt;
  e.shape = std::move(shape);
  e.data.assign(static_cast<size_t>(e.numel()) * dtypeSize(dt), 0);
  return e;
}

const TensorEntry *findEntry(const std::vector<TensorEntry> &entries,
                             const std::string &name) {
  for (const TensorEntry &e : entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

namespace {

std::string sysErr() { return std::strerror(errno); }

/// Reads a whole file into memory.
bool readAll(const std::string &path, std::vector<char> &buf,
             std::string &err) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = "cannot open " + path + ": " + sysErr();
    return false;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    err = "not a regular file: " + path;
    std::fclose(f);
    return false;
  }
  buf.resize(static_cast<size_t>(st.st_size));
  size_t got = buf.empty() ? 0 : std::fread(buf.data(), 1, buf.size(), f);
  std::fclose(f);
  if (got != buf.size()) {
    err = "read error on " + path;
    return false;
  }
  return true;
}

/// Bounds-checked little-endian reader over a byte buffer.
struct Cursor {
  const std::vector<char> &buf;
  size_t pos = 0;
  const std::string &path;
  std::string &err;
  bool take(void *dst, size_t n, const char *what) {
    if (buf.size() - pos < n) {
      err = "truncated file " + path + ": expected " + std::to_string(n) +
            " more bytes for " + what + " at offset " + std::to_string(pos) +
            ", file has " + std::to_string(buf.size()) + " bytes";
      return false;
    }
    std::memcpy(dst, buf.data() + pos, n);
    pos += n;
    return true;
  }
  template <typename T> bool get(T &v, const char *what) {
    return take(&v, sizeof(T), what);
  }
};

/// Writes via `body` to "<path>.tmp.<pid>", fsync, rename, fsync dir.
bool writeAtomicWith(const std::string &path,
                     const std::function<bool(FILE *)> &body,
                     std::string &err) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    err = "cannot create " + tmp + ": " + sysErr();
    return false;
  }
  bool ok = body(f);
  if (!ok)
    err = "write error on " + tmp + ": " + sysErr();
  if (ok && std::fflush(f) != 0) {
    err = "write error on " + tmp + ": " + sysErr();
    ok = false;
  }
  if (ok && fsync(fileno(f)) != 0) {
    err = "fsync failed on " + tmp + ": " + sysErr();
    ok = false;
  }
  if (std::fclose(f) != 0 && ok) {
    err = "close failed on " + tmp + ": " + sysErr();
    ok = false;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = "cannot rename " + tmp + " to " + path + ": " + sysErr();
    ok = false;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return false;
  }
  // Make the rename durable.
  std::string dir = ".";
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos)
    dir = slash == 0 ? "/" : path.substr(0, slash);
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return true;
}

bool put(FILE *f, const void *p, size_t n) {
  return n == 0 || std::fwrite(p, 1, n, f) == n;
}
template <typename T> bool putv(FILE *f, T v) { return put(f, &v, sizeof(T)); }

bool checkEntry(const TensorEntry &e, std::string &err) {
  if (!isValidDType(static_cast<uint32_t>(e.dtype))) {
    err = "tensor '" + e.name + "' has an invalid dtype";
    return false;
  }
  for (int64_t d : e.shape)
    if (d < 0) {
      err = "tensor '" + e.name + "' has a negative dimension";
      return false;
    }
  size_t want = static_cast<size_t>(e.numel()) * dtypeSize(e.dtype);
  if (e.data.size() != want) {
    err = "tensor '" + e.name + "' holds " + std::to_string(e.data.size()) +
          " bytes but its shape and dtype need " + std::to_string(want);
    return false;
  }
  return true;
}

const char kMagic[8] = {'C', 'N', 'N', 'W', '0', '0', '0', '1'};
constexpr uint32_t kMaxRank = 8;

} // namespace

bool writeFileAtomic(const std::string &path, const std::string &bytes,
                     std::string &err) {
  return writeAtomicWith(
      path, [&](FILE *f) { return put(f, bytes.data(), bytes.size()); }, err);
}

bool readTensorFile(const std::string &path, std::vector<TensorEntry> &out,
                    std::string &err) {
  out.clear();
  std::vector<char> buf;
  if (!readAll(path, buf, err))
    return false;
  Cursor c{buf, 0, path, err};
  char magic[8];
  if (!c.take(magic, 8, "magic"))
    return false;
  if (std::memcmp(magic, kMagic, 8) != 0) {
    err = "not a cnnw file (bad magic, expected CNNW0001): " + path;
    return false;
  }
  uint32_t count;
  if (!c.get(count, "entry count"))
    return false;
  for (uint32_t i = 0; i < count; ++i) {
    TensorEntry e;
    uint32_t nameLen, dt, rank;
    if (!c.get(nameLen, "name length"))
      return false;
    if (nameLen > buf.size() - c.pos) {
      err = "truncated file " + path + ": entry " + std::to_string(i) +
            " name length " + std::to_string(nameLen) + " exceeds file size";
      return false;
    }
    e.name.assign(buf.data() + c.pos, nameLen);
    c.pos += nameLen;
    if (!c.get(dt, "dtype"))
      return false;
    if (!isValidDType(dt)) {
      err = "bad dtype code " + std::to_string(dt) + " for tensor '" + e.name +
            "' in " + path;
      return false;
    }
    e.dtype = static_cast<DType>(dt);
    if (!c.get(rank, "rank"))
      return false;
    if (rank > kMaxRank) {
      err = "bad rank " + std::to_string(rank) + " for tensor '" + e.name +
            "' in " + path;
      return false;
    }
    e.shape.resize(rank);
    for (uint32_t r = 0; r < rank; ++r)
      if (!c.get(e.shape[r], "dims"))
        return false;
    uint64_t nbytes;
    if (!c.get(nbytes, "nbytes"))
      return false;
    for (int64_t d : e.shape)
      if (d < 0) {
        err = "negative dimension for tensor '" + e.name + "' in " + path;
        return false;
      }
    uint64_t want = static_cast<uint64_t>(e.numel()) * dtypeSize(e.dtype);
    if (nbytes != want) {
      err = "tensor '" + e.name + "' in " + path + " has nbytes " +
            std::to_string(nbytes) + " but shape/dtype need " +
            std::to_string(want);
      return false;
    }
    if (nbytes > buf.size() - c.pos) {
      err = "truncated file " + path + ": tensor '" + e.name + "' needs " +
            std::to_string(nbytes) + " bytes, only " +
            std::to_string(buf.size() - c.pos) + " remain";
      return false;
    }
    e.data.assign(buf.data() + c.pos, buf.data() + c.pos + nbytes);
    c.pos += nbytes;
    out.push_back(std::move(e));
  }
  if (c.pos != buf.size()) {
    err = "trailing garbage in " + path + ": " +
          std::to_string(buf.size() - c.pos) + " bytes after the last entry";
    return false;
  }
  return true;
}

bool writeTensorFileAtomic(const std::string &path,
                           const std::vector<TensorEntry> &entries,
                           std::string &err) {
  for (const TensorEntry &e : entries)
    if (!checkEntry(e, err))
      return false;
  return writeAtomicWith(
      path,
      [&](FILE *f) {
        bool ok = put(f, kMagic, 8) &&
                  putv<uint32_t>(f, static_cast<uint32_t>(entries.size()));
        for (const TensorEntry &e : entries) {
          ok = ok && putv<uint32_t>(f, static_cast<uint32_t>(e.name.size())) &&
               put(f, e.name.data(), e.name.size()) &&
               putv<uint32_t>(f, static_cast<uint32_t>(e.dtype)) &&
               putv<uint32_t>(f, static_cast<uint32_t>(e.shape.size()));
          for (int64_t d : e.shape)
            ok = ok && putv<int64_t>(f, d);
          ok = ok && putv<uint64_t>(f, e.data.size()) &&
               put(f, e.data.data(), e.data.size());
        }
        return ok;
      },
      err);
}

//===--- .npy -------------------------------------------------------------===//

namespace {
const char *npyDescr(DType dt) {
  switch (dt) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  }
  return nullptr;
}

/// Extracts the value text after 'key': in a Python dict literal.
bool dictValue(const std::string &h, const std::string &key, std::string &v) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    return false;
  size_t colon = h.find(':', k);
  if (colon == std::string::npos)
    return false;
  size_t s = colon + 1;
  while (s < h.size() && h[s] == ' ')
    ++s;
  size_t e = s;
  if (s < h.size() && h[s] == '(') {
    e = h.find(')', s);
    if (e == std::string::npos)
      return false;
    ++e;
  } else if (s < h.size() && (h[s] == '\'' || h[s] == '"')) {
    e = h.find(h[s], s + 1);
    if (e == std::string::npos)
      return false;
    ++e;
  } else {
    while (e < h.size() && h[e] != ',' && h[e] != '}')
      ++e;
  }
  v = h.substr(s, e - s);
  return true;
}
} // namespace

bool readNpy(const std::string &path, TensorEntry &out, std::string &err) {
  std::vector<char> buf;
  if (!readAll(path, buf, err))
    return false;
  if (buf.size() < 10 || std::memcmp(buf.data(), "\x93NUMPY", 6) != 0) {
    err = "not a .npy file: " + path;
    return false;
  }
  uint8_t major = static_cast<uint8_t>(buf[6]);
  size_t hlen, hstart;
  if (major == 1) {
    uint16_t l;
    std::memcpy(&l, buf.data() + 8, 2);
    hlen = l;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (buf.size() < 12) {
      err = "truncated file " + path;
      return false;
    }
    uint32_t l;
    std::memcpy(&l, buf.data() + 8, 4);
    hlen = l;
    hstart = 12;
  } else {
    err = "unsupported .npy version " + std::to_string(major) + " in " + path;
    return false;
  }
  if (buf.size() < hstart + hlen) {
    err = "truncated file " + path + ": header runs past the end";
    return false;
  }
  std::string h(buf.data() + hstart, hlen);
  std::string descr, fortran, shape;
  if (!dictValue(h, "descr", descr) || !dictValue(h, "shape", shape) ||
      !dictValue(h, "fortran_order", fortran)) {
    err = "malformed .npy header in " + path + ": " + h;
    return false;
  }
  if (fortran.find("True") != std::string::npos) {
    err = "Fortran-order .npy arrays are not supported: " + path;
    return false;
  }
  descr = descr.substr(1, descr.size() - 2);
  if (descr == "<f4" || descr == "f4")
    out.dtype = DType::F32;
  else if (descr == "<f2" || descr == "f2")
    out.dtype = DType::F16;
  else if (descr == "<i4" || descr == "i4")
    out.dtype = DType::I32;
  else if (descr == "<i8" || descr == "i8")
    out.dtype = DType::I64;
  else {
    err = "unsupported .npy dtype '" + descr + "' in " + path +
          " (supported: <f4 <f2 <i4 <i8)";
    return false;
  }
  out.shape.clear();
  out.name = path;
  std::string num;
  for (char ch : shape) {
    if (ch >= '0' && ch <= '9') {
      num += ch;
    } else if (!num.empty()) {
      out.shape.push_back(std::stoll(num));
      num.clear();
    }
  }
  size_t want = static_cast<size_t>(out.numel()) * dtypeSize(out.dtype);
  size_t dataStart = hstart + hlen;
  if (buf.size() - dataStart != want) {
    err = (buf.size() - dataStart < want ? "truncated file "
                                         : "size mismatch in ") +
          path + ": data has " + std::to_string(buf.size() - dataStart) +
          " bytes, shape/dtype need " + std::to_string(want);
    return false;
  }
  out.data.assign(buf.begin() + dataStart, buf.end());
  return true;
}

bool writeNpy(const std::string &path, const TensorEntry &t, std::string &err) {
  if (!checkEntry(t, err))
    return false;
  std::string h = "{'descr': '";
  h += npyDescr(t.dtype);
  h += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    h += std::to_string(t.shape[i]);
    if (t.shape.size() == 1 || i + 1 < t.shape.size())
      h += ",";
    if (i + 1 < t.shape.size())
      h += " ";
  }
  h += "), }";
  // Pad so that magic(6)+version(2)+len(2)+header is a multiple of 64.
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  uint16_t hl = static_cast<uint16_t>(h.size());
  bytes.append(reinterpret_cast<const char *>(&hl), 2);
  bytes += h;
  bytes.append(t.data.data(), t.data.size());
  return writeFileAtomic(path, bytes, err);
}

//===--- CNNT raw tensor
//----------------------------------------------------===//

bool readRawTensor(const std::string &path, TensorEntry &out,
                   std::string &err) {
  std::vector<char> buf;
  if (!readAll(path, buf, err))
    return false;
  Cursor c{buf, 0, path, err};
  char magic[4];
  if (!c.take(magic, 4, "magic"))
    return false;
  if (std::memcmp(magic, "CNNT", 4) != 0) {
    err = "not a CNNT raw tensor file (bad magic): " + path;
    return false;
  }
  uint32_t dt, rank;
  if (!c.get(dt, "dtype") || !c.get(rank, "rank"))
    return false;
  if (!isValidDType(dt) || rank > kMaxRank) {
    err = "bad dtype or rank in " + path;
    return false;
  }
  out.name = path;
  out.dtype = static_cast<DType>(dt);
  out.shape.resize(rank);
  for (uint32_t r = 0; r < rank; ++r)
    if (!c.get(out.shape[r], "dims"))
      return false;
  size_t want = static_cast<size_t>(out.numel()) * dtypeSize(out.dtype);
  if (buf.size() - c.pos != want) {
    err =
        (buf.size() - c.pos < want ? "truncated file " : "size mismatch in ") +
        path + ": data has " + std::to_string(buf.size() - c.pos) +
        " bytes, shape/dtype need " + std::to_string(want);
    return false;
  }
  out.data.assign(buf.begin() + c.pos, buf.end());
  return true;
}

bool writeRawTensor(const std::string &path, const TensorEntry &t,
                    std::string &err) {
  if (!checkEntry(t, err))
    return false;
  return writeAtomicWith(
      path,
      [&](FILE *f) {
        bool ok = put(f, "CNNT", 4) &&
                  putv<uint32_t>(f, static_cast<uint32_t>(t.dtype)) &&
                  putv<uint32_t>(f, static_cast<uint32_t>(t.shape.size()));
        for (int64_t d : t.shape)
          ok = ok && putv<int64_t>(f, d);
        return ok && put(f, t.data.data(), t.data.size());
      },
      err);
}

} // namespace cnnrt
