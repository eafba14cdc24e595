// Unit tests of the CIFAR reader, synthetic data and batching (no GPU).
#include "cnnrt/Dataset.h"
#include "cnnrt/TensorFile.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace cnnrt;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/cnnrt_ds_XXXXXX";
  const char *d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

/// Writes n records; record i has label labelOf(i) and pixels (i + k) & 255.
void writeCifar(const std::string &path, int n, int C = 3, int H = 32,
                int W = 32, int badIndex = -1, int first = 0) {
  std::string bytes;
  for (int i = 0; i < n; ++i) {
    bytes += static_cast<char>(i == badIndex ? 10 : (first + i) % 10);
    for (int k = 0; k < C * H * W; ++k)
      bytes += static_cast<char>((first + i + k) & 255);
  }
  std::string err;
  ASSERT_TRUE(writeFileAtomic(path, bytes, err)) << err;
}

} // namespace

TEST(Cifar, ReadsFileAndDirectory) {
  std::string dir = tempDir(), err;
  writeCifar(dir + "/data_batch_1.bin", 5, 3, 32, 32, -1, 0);
  writeCifar(dir + "/data_batch_2.bin", 4, 3, 32, 32, -1, 5);
  writeCifar(dir + "/test_batch.bin", 3, 3, 32, 32, -1, 100);
  ImageSet train, test, one;
  ASSERT_TRUE(loadCifar(dir, Split::Train, CifarFormat(), train, err)) << err;
  EXPECT_EQ(train.count, 9);
  EXPECT_EQ(train.files.size(), 2u);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(train.labels[i], i % 10);
    EXPECT_EQ(train.images[i * 3072 + 17], (i + 17) & 255);
  }
  ASSERT_TRUE(loadCifar(dir, Split::Test, CifarFormat(), test, err)) << err;
  EXPECT_EQ(test.count, 3);
  EXPECT_EQ(test.labels[0], 0); // (100 + 0) % 10
  ASSERT_TRUE(loadCifar(dir + "/data_batch_2.bin", Split::Train, CifarFormat(),
                        one, err))
      << err;
  EXPECT_EQ(one.count, 4);
  EXPECT_EQ(one.labels[0], 5);
}

TEST(Cifar, ShortFileError) {
  std::string dir = tempDir(), err, path = dir + "/data_batch_1.bin";
  writeCifar(path, 2);
  std::string bytes(3073 * 2 - 100, 'x');
  ASSERT_TRUE(writeFileAtomic(path, bytes, err));
  ImageSet s;
  EXPECT_FALSE(loadCifar(dir, Split::Train, CifarFormat(), s, err));
  EXPECT_EQ(err, "short/truncated file " + path +
                     ": 6046 bytes is not a multiple of record size 3073");
}

TEST(Cifar, BadLabelError) {
  std::string dir = tempDir(), err, path = dir + "/data_batch_1.bin";
  writeCifar(path, 4, 3, 32, 32, /*badIndex=*/2);
  ImageSet s;
  EXPECT_FALSE(loadCifar(dir, Split::Train, CifarFormat(), s, err));
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("record 2"), std::string::npos) << err;
  EXPECT_NE(err.find("bad label 10"), std::string::npos) << err;
}

TEST(Cifar, MissingFiles) {
  std::string dir = tempDir(), err;
  ImageSet s;
  EXPECT_FALSE(loadCifar(dir, Split::Test, CifarFormat(), s, err));
  EXPECT_NE(err.find("test_batch.bin"), std::string::npos) << err;
  EXPECT_FALSE(loadCifar(dir + "/nope", Split::Train, CifarFormat(), s, err));
}

TEST(Cifar, CustomGeometry) {
  std::string dir = tempDir(), err, path = dir + "/g.bin";
  writeCifar(path, 3, 1, 28, 28);
  CifarFormat fmt;
  fmt.C = 1;
  fmt.H = fmt.W = 28;
  ImageSet s;
  ASSERT_TRUE(loadCifar(path, Split::Train, fmt, s, err)) << err;
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.imageBytes(), 784u);
}

TEST(Adapt, ResizeAndChannels) {
  ImageSet in;
  in.C = 1;
  in.H = in.W = 2;
  in.count = 1;
  in.images = {10, 20, 30, 40};
  in.labels = {3};
  ImageSet out;
  std::string err;
  ASSERT_TRUE(adaptImages(in, 3, 4, 4, out, err)) << err;
  ASSERT_EQ(out.images.size(), 48u);
  // nearest neighbour: dst (y, x) <- src (y * 2 / 4, x * 2 / 4)
  EXPECT_EQ(out.images[0], 10);
  EXPECT_EQ(out.images[1], 10);
  EXPECT_EQ(out.images[2], 20);
  EXPECT_EQ(out.images[15], 40);
  EXPECT_EQ(out.images[16 + 15], 40); // replicated channel
  ImageSet rgb;
  rgb.C = 3;
  rgb.H = rgb.W = 1;
  rgb.count = 1;
  rgb.images = {1, 2, 4};
  rgb.labels = {0};
  ASSERT_TRUE(adaptImages(rgb, 1, 1, 1, out, err)) << err;
  EXPECT_EQ(out.images[0], (1 + 2 + 4 + 1) / 3);
  EXPECT_FALSE(adaptImages(rgb, 2, 1, 1, out, err));
}

TEST(Batching, DeterministicShuffleAndResume) {
  ImageSet s = makeSynthetic(50, 3, 4, 4, 10, 9);
  BatchLoader a(s, 8, 42, true), b(s, 8, 42, true), c(s, 8, 43, true);
  std::vector<uint8_t> ia(8 * 48), ib(8 * 48), ic(8 * 48);
  std::vector<int32_t> la(8), lb(8), lc(8);
  bool differs = false;
  std::multiset<int64_t> epoch0;
  LoaderState mid;
  std::vector<std::vector<uint8_t>> afterMid;
  for (int step = 0; step < 20; ++step) { // 160 samples: crosses 3 epochs
    if (step < 7)
      for (int64_t i : a.peekIndices())
        if (epoch0.size() < 50)
          epoch0.insert(i);
    if (step == 9)
      mid = a.state();
    a.nextBatchU8(ia.data(), la.data());
    b.nextBatchU8(ib.data(), lb.data());
    c.nextBatchU8(ic.data(), lc.data());
    EXPECT_EQ(ia, ib);
    EXPECT_EQ(la, lb);
    differs |= ia != ic;
    if (step >= 9)
      afterMid.push_back(ia);
  }
  EXPECT_TRUE(differs) << "different seeds should give different orders";
  // The first epoch visits every sample exactly once.
  EXPECT_EQ(epoch0.size(), 50u);
  EXPECT_EQ(std::set<int64_t>(epoch0.begin(), epoch0.end()).size(), 50u);
  // Restoring a state reproduces the stream.
  BatchLoader r(s, 8, 0, true);
  r.setState(mid);
  for (auto &expect : afterMid) {
    r.nextBatchU8(ia.data(), la.data());
    EXPECT_EQ(ia, expect);
  }
}

TEST(Batching, FloatScaling) {
  ImageSet s = makeSynthetic(4, 3, 2, 2, 10, 1);
  BatchLoader a(s, 4, 0, false);
  std::vector<float> x(4 * 12);
  std::vector<int32_t> y(4);
  a.nextBatchF32(x.data(), y.data());
  for (int i = 0; i < 48; ++i)
    EXPECT_EQ(x[i], s.images[i] / 255.0f);
  EXPECT_EQ(y[0], s.labels[0]);
}

TEST(Synthetic, DeterministicAndValid) {
  ImageSet a = makeSynthetic(20, 3, 8, 8, 10, 5),
           b = makeSynthetic(20, 3, 8, 8, 10, 5),
           c = makeSynthetic(20, 3, 8, 8, 10, 6);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, c.images);
  for (int32_t l : a.labels)
    EXPECT_TRUE(l >= 0 && l < 10);
  DatasetOptions o;
  o.batch = 16;
  ImageSet d;
  std::string err;
  ASSERT_TRUE(openDataset("synthetic", Split::Train, o, d, err)) << err;
  EXPECT_EQ(d.count, 16);
  EXPECT_EQ(d.imageBytes(), 3072u);
}
