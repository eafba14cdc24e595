//===- ObjectCache.cpp - parallel nvcc with a content-hashed cache --------===//

#include "cnnc/Driver/ObjectCache.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include <sys/stat.h>
#include <utime.h>

using namespace cnnc::driver;
using llvm::SmallString;
using llvm::StringRef;

namespace {

std::string hexKey(const cnnc::driver::ObjectBuild &b,
                   const cnnc::CUDATranslationUnit &u) {
  llvm::SHA256 h;
  // Lengths first: no two different (salt, flags, text) give one stream.
  auto add = [&](StringRef s) {
    h.update(std::to_string(s.size()) + ":");
    h.update(s);
  };
  add(b.keySalt);
  for (const std::string &f : b.flags)
    add(f);
  add(u.hostOnly ? "cpp" : "cu");
  add(u.text);
  std::array<uint8_t, 32> r = h.final();
  return llvm::toHex(r, /*LowerCase=*/true);
}

std::string cachePath(const std::string &dir, const std::string &key) {
  SmallString<256> p(dir);
  llvm::sys::path::append(p, key.substr(0, 2), key + ".o");
  return std::string(p);
}

bool writeFile(const std::string &path, StringRef text, std::string &err) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    os << text;
  os.close();
  if (ec || os.has_error()) {
    err = "cannot write '" + path + "': " + (ec ? ec : os.error()).message();
    return false;
  }
  return true;
}

/// Copies `obj` into the cache as `dst`, atomically (a temporary file in the
/// same directory, then a rename): a concurrent cnnc sees the whole object
/// or none. A cache that cannot be written is reported, not fatal.
void publish(const std::string &obj, const std::string &dst) {
  StringRef dir = llvm::sys::path::parent_path(dst);
  SmallString<256> tmp;
  std::error_code ec = llvm::sys::fs::create_directories(dir);
  int fd = -1;
  if (!ec)
    ec = llvm::sys::fs::createUniqueFile(dst + ".tmp-%%%%%%%%", fd, tmp);
  if (!ec) {
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    ec = llvm::sys::fs::copy_file(obj, tmp);
    if (!ec)
      ec = llvm::sys::fs::rename(tmp, dst);
    if (ec)
      llvm::sys::fs::remove(tmp);
  }
  if (ec)
    llvm::errs() << "cnnc: warning: the object cache '" << dir
                 << "' cannot be written (" << ec.message()
                 << "); this build is not cached\n";
}

/// Removes the least recently used objects (by modification time, which a
/// cache hit refreshes) of the cache under `dir` until they take at most
/// `maxBytes`, never one in `keep` (the build's own). Only files named as
/// this cache names them (<2 hex>/<64 hex>.o) and stale staging files of
/// publish are considered: nothing else in a shared directory is touched.
void trimCache(const std::string &dir, uint64_t maxBytes,
               const std::set<std::string> &keep) {
  struct Entry {
    std::string path;
    uint64_t size;
    int64_t mtime;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator sub(dir, ec), end; sub != end && !ec;
       sub.increment(ec)) {
    StringRef subName = llvm::sys::path::filename(sub->path());
    if (subName.size() != 2 || !llvm::all_of(subName, llvm::isHexDigit))
      continue;
    std::error_code ec2;
    for (llvm::sys::fs::directory_iterator f(sub->path(), ec2), fend;
         f != fend && !ec2; f.increment(ec2)) {
      StringRef name = llvm::sys::path::filename(f->path());
      bool object = name.size() == 66 && name.ends_with(".o") &&
                    name.starts_with(subName);
      bool staging = name.contains(".o.tmp-");
      struct stat st;
      if ((!object && !staging) || ::lstat(f->path().c_str(), &st) != 0 ||
          !S_ISREG(st.st_mode))
        continue;
      // A staging file a killed cnnc left behind (an hour old): garbage.
      if (staging) {
        if (std::time(nullptr) - st.st_mtime > 3600)
          llvm::sys::fs::remove(f->path());
        continue;
      }
      entries.push_back({f->path(), static_cast<uint64_t>(st.st_size),
                         static_cast<int64_t>(st.st_mtime)});
      total += st.st_size;
    }
  }
  if (total <= maxBytes)
    return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.mtime < b.mtime; });
  for (const Entry &e : entries) {
    if (total <= maxBytes)
      break;
    if (keep.count(e.path) || llvm::sys::fs::remove(e.path))
      continue;
    total -= e.size;
  }
}

} // namespace

bool cnnc::driver::compileUnits(const ObjectBuild &build,
                                llvm::ArrayRef<CUDATranslationUnit> units,
                                const std::string &workDir,
                                std::vector<CompiledUnit> &out,
                                std::string &err, mlir::TimingScope &timing) {
  out.assign(units.size(), CompiledUnit());
  std::vector<size_t> todo;
  for (size_t i = 0; i < units.size(); ++i) {
    CompiledUnit &c = out[i];
    c.name = units[i].name;
    c.key = hexKey(build, units[i]);
    if (!build.cacheDir.empty()) {
      std::string cached = cachePath(build.cacheDir, c.key);
      if (llvm::sys::fs::exists(cached)) {
        // Recently used: the cache's size cap removes the oldest first.
        ::utime(cached.c_str(), nullptr);
        c.object = cached;
        c.cached = true;
        timing.nest(c.name + " (cached)").stop();
        continue;
      }
    }
    SmallString<256> obj(workDir);
    llvm::sys::path::append(obj, c.name + ".o");
    c.object = std::string(obj);
    todo.push_back(i);
  }
  // The largest unit first (the host unit): it bounds the wall time.
  std::stable_sort(todo.begin(), todo.end(), [&](size_t a, size_t b) {
    return units[a].text.size() > units[b].text.size();
  });
  std::vector<int> rc(units.size(), 0);
  std::vector<std::string> logs(units.size()), msgs(units.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < todo.size();) {
      size_t i = todo[t];
      const CUDATranslationUnit &u = units[i];
      SmallString<256> src(workDir), log(workDir);
      llvm::sys::path::append(src, u.name + (u.hostOnly ? ".cpp" : ".cu"));
      llvm::sys::path::append(log, u.name + ".log");
      if (!writeFile(std::string(src), u.text, msgs[i])) {
        rc[i] = -1;
        continue;
      }
      std::vector<StringRef> args = {build.nvcc};
      for (const std::string &f : build.flags)
        args.push_back(f);
      std::string objPath = out[i].object;
      args.insert(args.end(), {"-c", src, "-o", objPath});
      std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                              StringRef(log)};
      mlir::TimingScope unitTiming = timing.nest(u.name);
      auto t0 = std::chrono::steady_clock::now();
      rc[i] = llvm::sys::ExecuteAndWait(build.nvcc, args, std::nullopt,
                                        redirects, 0, 0, &msgs[i]);
      out[i].seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      if (auto b = llvm::MemoryBuffer::getFile(log))
        logs[i] = (*b)->getBuffer().str();
    }
  };
  unsigned n = std::max(1u, std::min<unsigned>(build.jobs, todo.size()));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n; ++t)
    threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads)
    t.join();
  // nvcc's own output (warnings) as one nvcc would have printed it: in order.
  for (size_t i = 0; i < units.size(); ++i)
    llvm::errs() << logs[i];
  for (size_t i = 0; i < units.size(); ++i) {
    if (rc[i] == 0)
      continue;
    err = "nvcc failed (exit " + std::to_string(rc[i]) +
          (msgs[i].empty() ? "" : ": " + msgs[i]) + ")";
    out[i].failed = true;
    return false;
  }
  if (!build.cacheDir.empty()) {
    std::set<std::string> keep;
    for (size_t i = 0; i < out.size(); ++i)
      keep.insert(cachePath(build.cacheDir, out[i].key));
    for (size_t i : todo)
      publish(out[i].object, cachePath(build.cacheDir, out[i].key));
    trimCache(build.cacheDir, build.cacheMaxBytes, keep);
  }
  return true;
}

bool cnnc::driver::objectCacheMaxBytes(uint64_t &bytes, std::string &err) {
  bytes = uint64_t(1024) << 20;
  const char *e = std::getenv("CNNC_OBJECT_CACHE_MAX_MB");
  if (!e || !*e)
    return true;
  double mb = -1;
  if (StringRef(e).trim().getAsDouble(mb) || !(mb >= 0) || mb > 1e12) {
    err = std::string("CNNC_OBJECT_CACHE_MAX_MB must be a non-negative number "
                      "of MiB (0 keeps only the objects of the last build), "
                      "not '") +
          e + "'";
    return false;
  }
  bytes = static_cast<uint64_t>(mb * 1024 * 1024);
  return true;
}

std::string cnnc::driver::defaultObjectCacheDir() {
  if (const char *e = std::getenv("CNNC_OBJECT_CACHE"))
    return StringRef(e) == "off" ? std::string() : std::string(e);
  SmallString<256> p;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    p = x;
  } else if (const char *h = std::getenv("HOME"); h && *h) {
    p = h;
    llvm::sys::path::append(p, ".cache");
  } else {
    return "";
  }
  llvm::sys::path::append(p, "cnnc", "objects");
  return std::string(p);
}

unsigned cnnc::driver::nvccJobs(std::string &err) {
  if (const char *e = std::getenv("CNNC_NVCC_JOBS")) {
    unsigned v = 0;
    if (StringRef(e).getAsInteger(10, v) || v == 0) {
      err = std::string("CNNC_NVCC_JOBS must be a positive integer, not '") +
            e + "'";
      return 0;
    }
    return v;
  }
  // The CPUs this process may run on (its affinity mask: taskset, a
  // container's cpuset), not every CPU of the host as
  // std::thread::hardware_concurrency counts them: four pinned builds side
  // by side on a 64-core host would otherwise each start 64 nvcc jobs.
  return std::max(1u, llvm::hardware_concurrency().compute_thread_count());
}

std::string cnnc::driver::objectKeySalt(const std::string &nvcc,
                                        const std::string &runtimeInclude) {
  std::string salt;
  SmallString<128> out;
  if (!llvm::sys::fs::createTemporaryFile("cnnc-nvcc", "txt", out)) {
    std::optional<StringRef> redirects[] = {std::nullopt, StringRef(out),
                                            StringRef(out)};
    StringRef args[] = {nvcc, "--version"};
    if (llvm::sys::ExecuteAndWait(nvcc, args, std::nullopt, redirects) == 0)
      if (auto b = llvm::MemoryBuffer::getFile(out))
        salt = (*b)->getBuffer().str();
    llvm::sys::fs::remove(out);
  }
  // The headers the units include (cnnrt.h, Nccl.h, ...), in name order.
  SmallString<256> dir(runtimeInclude);
  llvm::sys::path::append(dir, "cnnrt");
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end;
       it != end && !ec; it.increment(ec))
    if (llvm::sys::fs::is_regular_file(it->path()))
      files.push_back(it->path());
  std::sort(files.begin(), files.end());
  // Relative names: the same runtime in another directory (a carried copy)
  // keys the same.
  for (const std::string &f : files)
    if (auto b = llvm::MemoryBuffer::getFile(f))
      salt += "\n" + f.substr(dir.size()) + "\n" + (*b)->getBuffer().str();
  return salt;
}
