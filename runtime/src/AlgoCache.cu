//===- AlgoCache.cu - the algorithm-cache file ----------------------------===//
//
// One "key value" line per choice (cuDNN algorithm, graph plan, fused form,
// by GPU, cuDNN version and shape), shared by every run of this user
// (CNNRT_ALGO_CACHE, default ~/.cache/cnnc/algos.txt).
//
//===----------------------------------------------------------------------===//

#include "ContextImpl.h"

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sys/stat.h>

namespace cnnrt {

namespace {

bool mkdirs(const std::string &dir) {
  if (dir.empty())
    return true;
  struct stat st;
  if (stat(dir.c_str(), &st) == 0)
    return S_ISDIR(st.st_mode);
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !mkdirs(dir.substr(0, slash)))
    return false;
  return mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST;
}

void readEntries(const std::string &path,
                 std::map<std::string, std::string> &into) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    if (!line.empty() && line[0] != '#' && sp != std::string::npos)
      into[line.substr(0, sp)] = line.substr(sp + 1);
  }
}

} // namespace

void AlgoCache::load(const std::string &path) {
  if (!path.empty())
    readEntries(path, entries_);
}

const std::string *AlgoCache::find(const std::string &key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void AlgoCache::put(const std::string &key, const std::string &value) {
  entries_[key] = value;
  dirty_ = true;
}

void AlgoCache::save(const std::string &path) {
  if (!dirty_ || path.empty())
    return;
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos)
    mkdirs(path.substr(0, slash));
  // Re-read so that concurrent runs' entries are kept, then merge ours.
  std::map<std::string, std::string> merged;
  readEntries(path, merged);
  for (auto &kv : entries_)
    merged[kv.first] = kv.second;
  std::string text = "# cnnrt algorithm cache: key algo mathType "
                     "workspaceBytes\n";
  for (auto &kv : merged)
    text += kv.first + " " + kv.second + "\n";
  std::string err;
  if (!writeFileAtomic(path, text, err))
    std::fprintf(stderr, "cnnrt: warning: cannot save algorithm cache: %s\n",
                 err.c_str());
  dirty_ = false;
}

} // namespace cnnrt
