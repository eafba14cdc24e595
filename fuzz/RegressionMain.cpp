//===- RegressionMain.cpp - replays fuzz inputs through a target ----------===//
//
// cnnc-fuzz-<target>-replay FILE|DIR...: feeds every file (directories are
// walked, sorted) to LLVMFuzzerTestOneInput once. Built with the normal
// compiler, so CI replays the corpora and the regressions without clang or
// libFuzzer; a crash, a sanitizer report or a hang fails the ctest test.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <dirent.h>
#include <string>
#include <sys/stat.h>
#include <vector>

static void collect(const std::string &path, std::vector<std::string> &out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    out.push_back(path);
    return;
  }
  std::vector<std::string> names;
  if (DIR *d = opendir(path.c_str())) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.')
        names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string &n : names)
    collect(path + "/" + n, out);
}

int main(int argc, char **argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i)
    collect(argv[i], files);
  // External-data files of ONNX regressions (*.data) are read by the model
  // that names them, not fed on their own.
  files.erase(std::remove_if(files.begin(), files.end(),
                             [](const std::string &f) {
                               return f.size() > 5 &&
                                      f.compare(f.size() - 5, 5, ".data") == 0;
                             }),
              files.end());
  double slowest = 0;
  std::string slowestFile;
  for (const std::string &f : files) {
    FILE *in = std::fopen(f.c_str(), "rb");
    if (!in) {
      std::fprintf(stderr, "replay: cannot open %s\n", f.c_str());
      return 2;
    }
    std::vector<uint8_t> bytes;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), in)) > 0)
      bytes.insert(bytes.end(), buf, buf + n);
    std::fclose(in);
    auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (s > slowest) {
      slowest = s;
      slowestFile = f;
    }
  }
  // stderr: the train-step target sends stdout (progress lines) to
  // /dev/null.
  std::fprintf(stderr, "replay: %zu inputs, slowest %.3f s (%s)\n",
               files.size(), slowest, slowestFile.c_str());
  return 0;
}
