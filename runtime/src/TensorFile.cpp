//===- TensorFile.cpp - .cnnw / .npy / CNNT tensor files ------------------===//

#include "cnnrt/TensorFile.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
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
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}

bool checkShape(const std::vector<int64_t> &shape, DType dt, uint64_t &nbytes,
                std::string &why) {
  if (shape.size() > kMaxRank) {
    why = "rank " + std::to_string(shape.size()) + " exceeds the maximum " +
          std::to_string(kMaxRank);
    return false;
  }
  auto dims = [&] {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
      s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
  };
  // The product of the non-zero dimensions must fit too: a [0, 2^62] shape
  // holds no data but is no more sensible than [2^62] (NumPy rejects both).
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) {
      why = "shape " + dims() + " has a negative dimension";
      return false;
    }
    if (d == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(n, d, &n)) {
      why = "shape " + dims() + " has more elements than fit in 64 bits";
      return false;
    }
  }
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtypeSize(dt)), &bytes)) {
    why = "shape " + dims() + " needs more bytes than fit in 64 bits";
    return false;
  }
  if (empty)
    bytes = 0;
  nbytes = static_cast<uint64_t>(bytes);
  return true;
}

TensorEntry TensorEntry::zeros(std::string name, DType dt,
                               std::vector<int64_t> shape) {
  TensorEntry e;
  e.name = std::move(name);
  e.dtype = dt;
  e.shape = std::move(shape);
  int64_t n = e.numel();
  e.data.assign(n > 0 ? static_cast<size_t>(n) * dtypeSize(dt) : 0, 0);
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

/// Reads a whole regular file into memory.
bool readAll(const std::string &path, std::vector<char> &buf,
             std::string &err) {
  int fd = openRegularFile(path, err);
  if (fd < 0)
    return false;
  struct stat st;
  FILE *f = fstat(fd, &st) == 0 ? fdopen(fd, "rb") : nullptr;
  if (!f) {
    err = "cannot read " + path + ": " + sysErr();
    ::close(fd);
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
  const char *data;
  size_t size;
  size_t pos;
  const std::string &path;
  std::string &err;
  size_t left() const { return size - pos; }
  bool take(void *dst, size_t n, const char *what) {
    if (size - pos < n) {
      err = "truncated file " + path + ": expected " + std::to_string(n) +
            " more bytes for " + what + " at offset " + std::to_string(pos) +
            ", file has " + std::to_string(size) + " bytes";
      return false;
    }
    if (n)
      std::memcpy(dst, data + pos, n);
    pos += n;
    return true;
  }
  template <typename T> bool get(T &v, const char *what) {
    return take(&v, sizeof(T), what);
  }
};

/// Calls `body` with the staging file of an OutputFile for `path`, then
/// commits it.
bool writeAtomicWith(const std::string &path,
                     const std::function<bool(FILE *)> &body,
                     std::string &err) {
  OutputFile out;
  if (!out.open(path, err))
    return false;
  FILE *f = std::fopen(out.stagingPath().c_str(), "wb");
  if (!f) {
    err = "cannot write " + out.stagingPath() + ": " + sysErr();
    return false;
  }
  bool ok = body(f) && std::fflush(f) == 0;
  if (!ok)
    err = "write error on " + out.stagingPath() + ": " + sysErr();
  if (std::fclose(f) != 0 && ok) {
    err = "close failed on " + out.stagingPath() + ": " + sysErr();
    ok = false;
  }
  return ok && out.commit(err);
}

bool isUtf8(const std::string &s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len)
      return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = s[i + k];
      if ((cc & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid
    // (Python's strict UTF-8 decoder rejects them too).
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
        (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
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
  uint64_t want;
  std::string why;
  if (!checkShape(e.shape, e.dtype, want, why)) {
    err = "tensor '" + e.name + "': " + why;
    return false;
  }
  if (e.data.size() != want) {
    err = "tensor '" + e.name + "' holds " + std::to_string(e.data.size()) +
          " bytes but its shape and dtype need " + std::to_string(want);
    return false;
  }
  return true;
}

const char kMagic[8] = {'C', 'N', 'N', 'W', '0', '0', '0', '1'};

} // namespace

//===--- OutputFile
//--------------------------------------------------------===//

namespace {
std::string dirOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Follows symlinks (also dangling ones, whose target is then created).
bool followLinks(const std::string &path, std::string &target,
                 std::string &err) {
  target = path;
  for (int depth = 0; depth < 40; ++depth) {
    struct stat st;
    if (lstat(target.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return true;
    char buf[PATH_MAX];
    ssize_t n = readlink(target.c_str(), buf, sizeof(buf) - 1);
    if (n < 0) {
      err = "cannot read the symlink " + target + ": " + sysErr();
      return false;
    }
    std::string link(buf, static_cast<size_t>(n));
    target = link[0] == '/' ? link : dirOf(target) + "/" + link;
  }
  err = "too many levels of symbolic links: " + path;
  return false;
}

/// Creates an empty temporary file from a mkstemp template.
bool makeTemp(std::string &templ, mode_t mode, std::string &err,
              const std::string &suffix = "") {
  templ += suffix;
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  int fd = mkstemps(name.data(), static_cast<int>(suffix.size()));
  if (fd < 0) {
    err = "cannot create a temporary file " + templ + ": " + sysErr();
    return false;
  }
  fchmod(fd, mode);
  close(fd);
  templ = name.data();
  return true;
}

/// Copies the file `from` into the open descriptor `fd`.
bool copyInto(const std::string &from, int fd, const std::string &to,
              std::string &err) {
  int in = open(from.c_str(), O_RDONLY);
  if (in < 0) {
    err = "cannot read " + from + ": " + sysErr();
    return false;
  }
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(in, buf, sizeof(buf));
    if (n == 0)
      break;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = "cannot read " + from + ": " + sysErr();
      close(in);
      return false;
    }
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(fd, buf + done, static_cast<size_t>(n - done));
      if (w < 0) {
        if (errno == EINTR)
          continue;
        err = "write error on " + to + ": " + sysErr();
        close(in);
        return false;
      }
      done += w;
    }
  }
  close(in);
  return true;
}

/// Removes `base`.tmp-PID-XXXXXX[suffix] files beside `target` whose writer
/// PID no longer runs: the staging files of a cnnc or an executable that was
/// killed (SIGKILL, a power cut) before it could remove them, which nothing
/// else would ever remove. Only files this user owns, of this output name,
/// with the name pattern this class makes; a PID that runs (or belongs to
/// another user: EPERM) keeps its file. Best effort: errors are ignored.
void removeStaleStaging(const std::string &target) {
  std::string dir = dirOf(target);
  size_t slash = target.find_last_of('/');
  std::string prefix =
      (slash == std::string::npos ? target : target.substr(slash + 1)) +
      ".tmp-";
  DIR *d = opendir(dir.c_str());
  if (!d)
    return;
  while (struct dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    size_t i = prefix.size(), digits = 0;
    long long pid = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' &&
           digits < 10) {
      pid = pid * 10 + (name[i] - '0');
      ++i;
      ++digits;
    }
    // PID, '-', then mkstemp's six characters (and maybe a suffix).
    if (digits == 0 || pid <= 0 || pid > INT32_MAX || i >= name.size() ||
        name[i] != '-' || name.size() < i + 7)
      continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_uid == geteuid())
      unlink(path.c_str());
  }
  closedir(d);
}

mode_t creationMode() {
  mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}
} // namespace

bool OutputFile::open(const std::string &path, std::string &err,
                      const std::string &suffix) {
  discard();
  path_ = path;
  const char *tmpdir = std::getenv("TMPDIR");
  std::string tmpTemplate =
      std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/cnnc-out-XXXXXX";
  if (path.empty()) {
    err = "empty output file name";
    return false;
  }
  if (path == "-") {
    mode_ = Mode::Stdout;
    target_ = path;
    staging_ = tmpTemplate;
    if (!makeTemp(staging_, 0600, err, suffix))
      return staging_.clear(), false;
    return true;
  }
  if (!followLinks(path, target_, err))
    return false;
  struct stat st;
  mode_t mode = creationMode();
  if (stat(target_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      err = "cannot write " + path + ": it is a directory";
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      // /dev/null, a fifo, a character device: written in place.
      mode_ = Mode::InPlace;
      staging_ = tmpTemplate;
      if (!makeTemp(staging_, 0600, err, suffix))
        return staging_.clear(), false;
      return true;
    }
    mode = st.st_mode & 07777;
  }
  mode_ = Mode::Replace;
  // The writer's PID in the name lets a later run tell a killed writer's
  // leftover from a live one's (removeStaleStaging).
  removeStaleStaging(target_);
  staging_ = target_ + ".tmp-" + std::to_string(getpid()) + "-XXXXXX";
  if (!makeTemp(staging_, mode, err, suffix)) {
    staging_.clear();
    err = "cannot write " + path + ": " + err;
    return false;
  }
  return true;
}

bool OutputFile::commit(std::string &err) {
  if (staging_.empty()) {
    err = "no output file is open";
    return false;
  }
  bool ok = true;
  if (mode_ == Mode::Replace) {
    int fd = ::open(staging_.c_str(), O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
      err = "fsync failed on " + staging_ + ": " + sysErr();
      ok = false;
    }
    if (fd >= 0)
      close(fd);
    if (ok && std::rename(staging_.c_str(), target_.c_str()) != 0) {
      err = "cannot rename " + staging_ + " to " + target_ + ": " + sysErr();
      ok = false;
    }
    if (ok) {
      staging_.clear();
      // Make the rename durable.
      int dfd = ::open(dirOf(target_).c_str(), O_RDONLY | O_DIRECTORY);
      if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
      }
      return true;
    }
  } else {
    int fd = mode_ == Mode::Stdout ? 1 : ::open(target_.c_str(), O_WRONLY);
    if (fd < 0) {
      err = "cannot open " + path_ + " for writing: " + sysErr();
      ok = false;
    } else {
      if (mode_ == Mode::Stdout)
        std::fflush(stdout);
      ok = copyInto(staging_, fd, path_ == "-" ? "<stdout>" : path_, err);
      if (fd != 1)
        close(fd);
    }
  }
  discard();
  return ok;
}

void OutputFile::discard() {
  if (!staging_.empty())
    std::remove(staging_.c_str());
  staging_.clear();
}

bool writeFileAtomic(const std::string &path, const std::string &bytes,
                     std::string &err) {
  return writeAtomicWith(
      path, [&](FILE *f) { return put(f, bytes.data(), bytes.size()); }, err);
}

int openRegularFile(const std::string &path, std::string &err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    err = "cannot open " + path + ": " + sysErr();
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    err = "cannot stat " + path + ": " + sysErr();
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a special file";
    err = "not a regular file (" + std::string(kind) + "): " + path;
    ::close(fd);
    return -1;
  }
  // Regular files never block; clear the flag so reads behave as usual.
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    err = "cannot read " + path + ": " + sysErr();
    ::close(fd);
    return -1;
  }
  return fd;
}

bool readFileBytes(const std::string &path, std::vector<char> &buf,
                   std::string &err) {
  return readAll(path, buf, err);
}

bool isValidUtf8(const std::string &s) { return isUtf8(s); }

bool readTensorFile(const std::string &path, std::vector<TensorEntry> &out,
                    std::string &err) {
  out.clear();
  if (isSafetensorsPath(path))
    return readSafetensors(path, out, err);
  std::vector<char> buf;
  if (!readAll(path, buf, err))
    return false;
  return parseTensorFile(buf.data(), buf.size(), path, out, err);
}

bool parseTensorFile(const char *data, size_t size, const std::string &path,
                     std::vector<TensorEntry> &out, std::string &err) {
  out.clear();
  Cursor c{data, size, 0, path, err};
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
  // Each entry takes at least 24 bytes: no reserve() beyond what the file
  // can hold.
  out.reserve(std::min<size_t>(count, c.left() / 24));
  for (uint32_t i = 0; i < count; ++i) {
    TensorEntry e;
    uint32_t nameLen, dt, rank;
    if (!c.get(nameLen, "name length"))
      return false;
    if (nameLen > c.left()) {
      err = "truncated file " + path + ": entry " + std::to_string(i) +
            " name length " + std::to_string(nameLen) + " exceeds file size";
      return false;
    }
    e.name.assign(data + c.pos, nameLen);
    c.pos += nameLen;
    if (e.name.empty() || !isUtf8(e.name)) {
      err = "entry " + std::to_string(i) + " in " + path +
            (e.name.empty() ? " has an empty name"
                            : " has a name that is not UTF-8");
      return false;
    }
    if (findEntry(out, e.name)) {
      err = "duplicate tensor name '" + e.name + "' in " + path;
      return false;
    }
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
    uint64_t nbytes, want;
    if (!c.get(nbytes, "nbytes"))
      return false;
    std::string why;
    if (!checkShape(e.shape, e.dtype, want, why)) {
      err = "tensor '" + e.name + "' in " + path + ": " + why;
      return false;
    }
    if (nbytes != want) {
      err = "tensor '" + e.name + "' in " + path + " has nbytes " +
            std::to_string(nbytes) + " but shape/dtype need " +
            std::to_string(want);
      return false;
    }
    if (nbytes > c.left()) {
      err = "truncated file " + path + ": tensor '" + e.name + "' needs " +
            std::to_string(nbytes) + " bytes, only " +
            std::to_string(c.left()) + " remain";
      return false;
    }
    e.data.assign(data + c.pos, data + c.pos + nbytes);
    c.pos += nbytes;
    out.push_back(std::move(e));
  }
  if (c.pos != size) {
    err = "trailing garbage in " + path + ": " + std::to_string(c.left()) +
          " bytes after the last entry";
    return false;
  }
  return true;
}

bool writeTensorFileAtomic(const std::string &path,
                           const std::vector<TensorEntry> &entries,
                           std::string &err) {
  if (isSafetensorsPath(path))
    return writeSafetensors(path, entries, err);
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

/// Parses a Python tuple of non-negative integers, "()", "(3,)", "(2, 3)".
bool parseShapeTuple(const std::string &text, std::vector<int64_t> &shape,
                     std::string &why) {
  shape.clear();
  size_t i = 0, n = text.size();
  auto skip = [&] {
    while (i < n && (text[i] == ' ' || text[i] == '\t'))
      ++i;
  };
  skip();
  if (i >= n || text[i] != '(') {
    why = "shape is not a tuple: " + text;
    return false;
  }
  ++i;
  for (;;) {
    skip();
    if (i < n && text[i] == ')')
      break;
    bool negative = i < n && text[i] == '-';
    if (negative)
      ++i;
    if (i >= n || text[i] < '0' || text[i] > '9') {
      why = "bad shape " + text;
      return false;
    }
    int64_t v = 0;
    while (i < n && text[i] >= '0' && text[i] <= '9') {
      if (__builtin_mul_overflow(v, int64_t(10), &v) ||
          __builtin_add_overflow(v, int64_t(text[i] - '0'), &v)) {
        why = "shape " + text + " has a dimension that does not fit in 64 bits";
        return false;
      }
      ++i;
    }
    if (negative) {
      why = "shape " + text + " has a negative dimension";
      return false;
    }
    shape.push_back(v);
    skip();
    if (i < n && text[i] == ',') {
      ++i;
      continue;
    }
    skip();
    if (i < n && text[i] == ')')
      break;
    why = "bad shape " + text;
    return false;
  }
  return true;
}
} // namespace

bool readNpy(const std::string &path, TensorEntry &out, std::string &err) {
  std::vector<char> buf;
  if (!readAll(path, buf, err))
    return false;
  return parseNpy(buf.data(), buf.size(), path, out, err);
}

bool parseNpy(const char *data, size_t size, const std::string &path,
              TensorEntry &out, std::string &err) {
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0) {
    err = "not a .npy file: " + path;
    return false;
  }
  uint8_t major = static_cast<uint8_t>(data[6]);
  size_t hlen, hstart;
  if (major == 1) {
    uint16_t l;
    std::memcpy(&l, data + 8, 2);
    hlen = l;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      err = "truncated file " + path;
      return false;
    }
    uint32_t l;
    std::memcpy(&l, data + 8, 4);
    hlen = l;
    hstart = 12;
  } else {
    err = "unsupported .npy version " + std::to_string(major) + " in " + path;
    return false;
  }
  if (size - hstart < hlen) {
    err = "truncated file " + path + ": header runs past the end";
    return false;
  }
  std::string h(data + hstart, hlen);
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
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"') ||
      descr.back() != descr.front()) {
    err = "malformed .npy header in " + path + ": descr " + descr +
          " is not a quoted string";
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
  out.name = path;
  std::string why;
  uint64_t want;
  if (!parseShapeTuple(shape, out.shape, why) ||
      !checkShape(out.shape, out.dtype, want, why)) {
    err = "malformed .npy header in " + path + ": " + why;
    return false;
  }
  size_t have = size - (hstart + hlen);
  if (have != want) {
    err = (have < want ? "truncated file " : "size mismatch in ") + path +
          ": data has " + std::to_string(have) + " bytes, shape/dtype need " +
          std::to_string(want);
    return false;
  }
  out.data.assign(data + hstart + hlen, data + size);
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

//===--- CNNT raw tensor -------------------------------------------------===//

bool readRawTensor(const std::string &path, TensorEntry &out,
                   std::string &err) {
  std::vector<char> buf;
  if (!readAll(path, buf, err))
    return false;
  return parseRawTensor(buf.data(), buf.size(), path, out, err);
}

bool parseRawTensor(const char *data, size_t size, const std::string &path,
                    TensorEntry &out, std::string &err) {
  Cursor c{data, size, 0, path, err};
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
    err = "bad dtype " + std::to_string(dt) + " or rank " +
          std::to_string(rank) + " in " + path;
    return false;
  }
  out.name = path;
  out.dtype = static_cast<DType>(dt);
  out.shape.resize(rank);
  for (uint32_t r = 0; r < rank; ++r)
    if (!c.get(out.shape[r], "dims"))
      return false;
  uint64_t want;
  std::string why;
  if (!checkShape(out.shape, out.dtype, want, why)) {
    err = path + ": " + why;
    return false;
  }
  if (c.left() != want) {
    err = (c.left() < want ? "truncated file " : "size mismatch in ") + path +
          ": data has " + std::to_string(c.left()) +
          " bytes, shape/dtype need " + std::to_string(want);
    return false;
  }
  out.data.assign(data + c.pos, data + size);
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
