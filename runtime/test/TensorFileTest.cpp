// Unit tests of the .cnnw / .npy / CNNT formats (no GPU needed).
#include "cnnrt/TensorFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cnnrt;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/cnnrt_test_XXXXXX";
  const char *d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..")
        out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

std::vector<TensorEntry> sample() {
  std::vector<TensorEntry> v;
  TensorEntry a = TensorEntry::zeros("conv1.weight", DType::F32, {2, 3, 1, 1});
  for (int i = 0; i < 6; ++i)
    a.as<float>()[i] = 0.5f * i - 1.f;
  v.push_back(a);
  TensorEntry b = TensorEntry::zeros("__step__", DType::I64, {1});
  b.as<int64_t>()[0] = 123456789012345;
  v.push_back(b);
  TensorEntry c = TensorEntry::zeros("half", DType::F16, {3});
  c.as<uint16_t>()[0] = 0x3c00;
  v.push_back(c);
  v.push_back(TensorEntry::zeros("scalar", DType::I32, {}));
  v.push_back(TensorEntry::zeros("empty", DType::F32, {0, 4}));
  return v;
}

} // namespace

TEST(TensorFile, RoundTrip) {
  std::string dir = tempDir(), path = dir + "/w.cnnw", err;
  auto in = sample();
  ASSERT_TRUE(writeTensorFileAtomic(path, in, err)) << err;
  std::vector<TensorEntry> out;
  ASSERT_TRUE(readTensorFile(path, out, err)) << err;
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].name, in[i].name);
    EXPECT_EQ(out[i].dtype, in[i].dtype);
    EXPECT_EQ(out[i].shape, in[i].shape);
    EXPECT_EQ(out[i].data, in[i].data);
  }
  const TensorEntry *s = findEntry(out, "__step__");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->as<int64_t>()[0], 123456789012345);
  EXPECT_EQ(findEntry(out, "nope"), nullptr);
}

TEST(TensorFile, ExactLayout) {
  std::string dir = tempDir(), path = dir + "/one.cnnw", err;
  TensorEntry t = TensorEntry::zeros("ab", DType::I32, {2});
  t.as<int32_t>()[0] = 7;
  t.as<int32_t>()[1] = -1;
  ASSERT_TRUE(writeTensorFileAtomic(path, {t}, err)) << err;
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  // magic 8 + count 4 + namelen 4 + name 2 + dtype 4 + rank 4 + dims 8 +
  // nbytes 8 + data 8
  ASSERT_EQ(bytes.size(), 8u + 4 + 4 + 2 + 4 + 4 + 8 + 8 + 8);
  EXPECT_EQ(bytes.substr(0, 8), "CNNW0001");
  EXPECT_EQ(bytes[8], 1);
  EXPECT_EQ(bytes[12], 2);
  EXPECT_EQ(bytes.substr(16, 2), "ab");
  EXPECT_EQ(bytes[18], 2); // dtype i32
  EXPECT_EQ(bytes[22], 1); // rank
  EXPECT_EQ(bytes[26], 2); // dims[0]
  EXPECT_EQ(bytes[34], 8); // nbytes
  EXPECT_EQ(bytes[42], 7);
}

TEST(TensorFile, AtomicWriteLeavesNoTempFile) {
  std::string dir = tempDir(), path = dir + "/ck.cnnw", err;
  ASSERT_TRUE(writeTensorFileAtomic(path, sample(), err)) << err;
  ASSERT_TRUE(writeTensorFileAtomic(path, sample(), err)) << err; // overwrite
  auto files = listDir(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], "ck.cnnw");
}

TEST(TensorFile, FailedWriteKeepsOldFile) {
  std::string dir = tempDir(), path = dir + "/ck.cnnw", err;
  ASSERT_TRUE(writeTensorFileAtomic(path, sample(), err)) << err;
  auto bad = sample();
  bad[0].data.pop_back(); // inconsistent size -> rejected before writing
  EXPECT_FALSE(writeTensorFileAtomic(path, bad, err));
  EXPECT_NE(err.find("conv1.weight"), std::string::npos) << err;
  std::vector<TensorEntry> out;
  EXPECT_TRUE(readTensorFile(path, out, err)) << err;
  EXPECT_EQ(listDir(dir).size(), 1u);
  EXPECT_FALSE(
      writeTensorFileAtomic(dir + "/no/such/dir/x.cnnw", sample(), err));
}

TEST(TensorFile, TruncatedFileError) {
  std::string dir = tempDir(), path = dir + "/w.cnnw", err;
  ASSERT_TRUE(writeTensorFileAtomic(path, sample(), err)) << err;
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  for (size_t cut : {size_t(3), size_t(10), size_t(30), bytes.size() - 1}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        << bytes.substr(0, cut);
    std::vector<TensorEntry> out;
    EXPECT_FALSE(readTensorFile(path, out, err)) << "cut " << cut;
    EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "NOTMAGIC1234";
  std::vector<TensorEntry> out;
  EXPECT_FALSE(readTensorFile(path, out, err));
  EXPECT_NE(err.find("magic"), std::string::npos) << err;
  EXPECT_FALSE(readTensorFile(dir + "/missing.cnnw", out, err));
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

TEST(Npy, RoundTrip) {
  std::string dir = tempDir(), err;
  for (DType dt : {DType::F32, DType::I64, DType::I32, DType::F16}) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{2, 3, 4}, {5}, {}, {1, 0}}) {
      TensorEntry t = TensorEntry::zeros("x", dt, shape);
      for (size_t i = 0; i < t.data.size(); ++i)
        t.data[i] = static_cast<char>(i * 7 + 1);
      std::string path = dir + "/x.npy";
      ASSERT_TRUE(writeNpy(path, t, err)) << err;
      TensorEntry r;
      ASSERT_TRUE(readNpy(path, r, err)) << err;
      EXPECT_EQ(r.dtype, dt);
      EXPECT_EQ(r.shape, shape);
      EXPECT_EQ(r.data, t.data);
      // Header is padded so the data starts at a multiple of 64.
      std::ifstream f(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(f)),
                        std::istreambuf_iterator<char>());
      EXPECT_EQ((bytes.size() - t.data.size()) % 64, 0u);
      EXPECT_EQ(bytes.substr(1, 5), "NUMPY");
    }
  }
}

TEST(Npy, ReadsNumpyWrittenHeader) {
  // Header exactly as numpy 1.x writes np.arange(6, dtype='<i8').reshape(2,3).
  std::string dir = tempDir(), path = dir + "/np.npy", err;
  std::string h = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }";
  h.append(128 - 10 - h.size() - 1, ' ');
  h += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(h.size());
  bytes += '\0';
  bytes += h;
  for (int64_t i = 0; i < 6; ++i)
    bytes.append(reinterpret_cast<const char *>(&i), 8);
  std::ofstream(path, std::ios::binary) << bytes;
  TensorEntry r;
  ASSERT_TRUE(readNpy(path, r, err)) << err;
  EXPECT_EQ(r.dtype, DType::I64);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.as<int64_t>()[5], 5);
  // Truncated data.
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() - 3);
  EXPECT_FALSE(readNpy(path, r, err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  // Unsupported dtype.
  std::string u = bytes;
  u.replace(u.find("<i8"), 3, "<u2");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << u;
  EXPECT_FALSE(readNpy(path, r, err));
  EXPECT_NE(err.find("unsupported"), std::string::npos) << err;
}

TEST(RawTensor, RoundTrip) {
  std::string dir = tempDir(), path = dir + "/t.bin", err;
  TensorEntry t = TensorEntry::zeros("t", DType::F32, {3, 2});
  for (int i = 0; i < 6; ++i)
    t.as<float>()[i] = i * 1.5f;
  ASSERT_TRUE(writeRawTensor(path, t, err)) << err;
  TensorEntry r;
  ASSERT_TRUE(readRawTensor(path, r, err)) << err;
  EXPECT_EQ(r.shape, t.shape);
  EXPECT_EQ(r.data, t.data);
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(0, 4), "CNNT");
  EXPECT_EQ(bytes.size(), 4u + 4 + 4 + 16 + 24);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << bytes.substr(0, 30);
  EXPECT_FALSE(readRawTensor(path, r, err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

namespace {
bool isCharDevice(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}
} // namespace

// Checkpoints and weights to /dev/null: written in place, the device node
// stays (as root, rename() used to replace it with a regular file).
TEST(OutputFile, DevNullStaysADevice) {
  ASSERT_TRUE(isCharDevice("/dev/null"));
  std::string err;
  EXPECT_TRUE(writeTensorFileAtomic("/dev/null", sample(), err)) << err;
  EXPECT_TRUE(isCharDevice("/dev/null"));
  OutputFile out;
  ASSERT_TRUE(out.open("/dev/null", err)) << err;
  EXPECT_TRUE(out.isSpecial());
  EXPECT_EQ(out.stagingPath().rfind("/dev/", 0), std::string::npos);
  EXPECT_TRUE(out.commit(err)) << err;
  EXPECT_TRUE(isCharDevice("/dev/null"));
}

TEST(OutputFile, SymlinkTargetIsWritten) {
  std::string dir = tempDir(), err;
  ASSERT_EQ(symlink("real.cnnw", (dir + "/link.cnnw").c_str()), 0);
  ASSERT_TRUE(writeTensorFileAtomic(dir + "/link.cnnw", sample(), err)) << err;
  struct stat st;
  ASSERT_EQ(lstat((dir + "/link.cnnw").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  std::vector<TensorEntry> out;
  EXPECT_TRUE(readTensorFile(dir + "/real.cnnw", out, err)) << err;
  EXPECT_EQ(out.size(), sample().size());
  EXPECT_EQ(listDir(dir).size(), 2u);
}

TEST(OutputFile, DiscardLeavesTheOldFile) {
  std::string dir = tempDir(), path = dir + "/a.txt", err;
  ASSERT_TRUE(writeFileAtomic(path, "old", err)) << err;
  {
    OutputFile out;
    ASSERT_TRUE(out.open(path, err)) << err;
    EXPECT_FALSE(out.isSpecial());
    std::ofstream(out.stagingPath()) << "new, never committed";
    EXPECT_EQ(listDir(dir).size(), 2u); // a.txt + its staging file
  }
  EXPECT_EQ(listDir(dir).size(), 1u);
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)),
                   std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old");
  EXPECT_FALSE(writeFileAtomic(dir, "x", err)); // a directory
  EXPECT_NE(err.find("directory"), std::string::npos) << err;
}

// A writer killed before it could remove its staging file (SIGKILL) leaves
// X.tmp-PID-XXXXXX; the next write of X removes it once PID no longer runs,
// and keeps a live writer's and other outputs' staging files.
TEST(OutputFile, StaleStagingOfAKilledWriterIsRemoved) {
  std::string dir = tempDir(), path = dir + "/w.cnnw", err;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0)
    _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child); // its PID runs no more
  std::string dead = std::to_string(child), live = std::to_string(getpid());
  for (const std::string &name :
       {"w.cnnw.tmp-" + dead + "-a1B2c3", "w.cnnw.tmp-" + dead + "-x9y8z7.cu",
        "w.cnnw.tmp-" + live + "-keep01", "v.cnnw.tmp-" + dead + "-other1",
        std::string("w.cnnw.tmp-notapid")})
    std::ofstream(dir + "/" + name) << "partial";
  ASSERT_TRUE(writeFileAtomic(path, "new", err)) << err;
  std::vector<std::string> left = listDir(dir);
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{
                      "v.cnnw.tmp-" + dead + "-other1", "w.cnnw",
                      "w.cnnw.tmp-" + live + "-keep01", "w.cnnw.tmp-notapid"}));
}

// The shape rule all readers share.
TEST(TensorFile, CheckShapeRejectsOverflowAndNegativeDims) {
  uint64_t nbytes = 0;
  std::string why;
  EXPECT_TRUE(checkShape({2, 3}, DType::F16, nbytes, why));
  EXPECT_EQ(nbytes, 12u);
  EXPECT_FALSE(checkShape({int64_t(1) << 32, int64_t(1) << 32}, DType::F32,
                          nbytes, why));
  EXPECT_NE(why.find("64 bits"), std::string::npos) << why;
  EXPECT_FALSE(checkShape({int64_t(1) << 62}, DType::F32, nbytes, why));
  // Empty, but the other dimensions still have to make sense (found by the
  // cnnw fuzzer: NumPy cannot represent it, python/cnnc/cnnw.py rejects it).
  EXPECT_FALSE(checkShape({0, int64_t(1) << 62}, DType::F32, nbytes, why));
  EXPECT_TRUE(checkShape({0, int64_t(1) << 40}, DType::F32, nbytes, why));
  EXPECT_EQ(nbytes, 0u);
  EXPECT_FALSE(checkShape({-1, 0}, DType::F32, nbytes, why));
  EXPECT_NE(why.find("negative"), std::string::npos) << why;
  EXPECT_FALSE(checkShape(std::vector<int64_t>(9, 1), DType::F32, nbytes, why));
  TensorEntry e;
  e.shape = {int64_t(1) << 32, int64_t(1) << 32};
  EXPECT_EQ(e.numel(), -1);
}

// Issue 34 (N5): a FIFO with no writer blocked readTensorFile forever in
// open(); now the open does not block and the type check refuses it.
TEST(TensorFile, FifoIsRefusedWithoutBlocking) {
  std::string dir = ::testing::TempDir() + "/cnnrt_fifo_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::string fifo = dir + "/w.cnnw";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::vector<TensorEntry> entries;
  std::string err;
  EXPECT_FALSE(readTensorFile(fifo, entries, err));
  EXPECT_NE(err.find("not a regular file (a FIFO)"), std::string::npos) << err;
  EXPECT_EQ(openRegularFile(dir, err), -1);
  EXPECT_NE(err.find("(a directory)"), std::string::npos) << err;
  EXPECT_EQ(openRegularFile("/dev/null", err), -1);
  EXPECT_NE(err.find("(a character device)"), std::string::npos) << err;
  unlink(fifo.c_str());
  rmdir(dir.c_str());
}
