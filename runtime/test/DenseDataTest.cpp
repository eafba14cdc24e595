// Unit tests of dense prediction's host side (no GPU): per-pixel .npy labels,
// the SegFolder reader (images/ + PNG masks, joint crop/flip), the loader's
// label batches and the mean-IoU accumulation of validation.
#include "cnnrt/Dataset.h"
#include "cnnrt/Image.h"
#include "cnnrt/TrainLoop.h"

#include "DataFixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sys/stat.h>

using namespace cnnrt;
using namespace cnnrt::datafixture;

namespace {

/// Images N x 1 x 4 x 4 (uint8) and labels N x 4 x 4 whose pixel (n, y, x)
/// is (n + y + x) % 3, or 255 on the diagonal.
void writeDenseNpy(const std::string &dir, const std::string &descr, int n) {
  std::vector<uint8_t> img(static_cast<size_t>(n) * 16);
  for (size_t k = 0; k < img.size(); ++k)
    img[k] = static_cast<uint8_t>(k);
  writeNpy(dir + "/x.npy", "|u1", {n, 1, 4, 4}, img.data(), img.size());
  std::vector<int64_t> lab(static_cast<size_t>(n) * 16);
  for (int i = 0; i < n; ++i)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        lab[(i * 4 + y) * 4 + x] = y == x ? 255 : (i + y + x) % 3;
  if (descr == "<i8") {
    writeNpy(dir + "/y.npy", descr, {n, 4, 4}, lab.data(), lab.size() * 8);
  } else if (descr == "<i4") {
    std::vector<int32_t> l(lab.begin(), lab.end());
    writeNpy(dir + "/y.npy", descr, {n, 4, 4}, l.data(), l.size() * 4);
  } else {
    std::vector<uint8_t> l(lab.begin(), lab.end());
    writeNpy(dir + "/y.npy", descr, {n, 4, 4}, l.data(), l.size());
  }
}

} // namespace

TEST(DenseNpy, PerPixelLabelsReachTheBatchInEveryDtype) {
  for (const char *descr : {"<i8", "<i4", "|u1"}) {
    std::string dir = tempDir(), err;
    writeDenseNpy(dir, descr, 3);
    SourceOptions o = denseModel(1, 4, 4, 3);
    o.labels = dir + "/y.npy";
    std::unique_ptr<SampleSource> src;
    ASSERT_TRUE(openSource(dir + "/x.npy", Split::Train, o, src, err))
        << descr << ": " << err;
    EXPECT_EQ(src->labelsPerSample(), 16u);
    LoaderOptions lo;
    lo.batch = 2;
    lo.shuffle = false;
    lo.workers = 2; // rows written by two threads: each its own slice
    StreamLoader loader(*src, lo);
    ASSERT_EQ(loader.batchLabels(), 32u);
    std::vector<uint8_t> img(2 * 16);
    std::vector<int32_t> lab(32, -1);
    ASSERT_TRUE(loader.next(img.data(), lab.data(), err)) << err;
    for (int i = 0; i < 2; ++i)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x)
          EXPECT_EQ(lab[(i * 4 + y) * 4 + x], y == x ? 255 : (i + y + x) % 3)
              << descr << " " << i << " " << y << " " << x;
    EXPECT_EQ(img[16 + 5], 16 + 5); // the images as before
    // The batch that crosses the epoch: sample 2, then sample 0 again.
    ASSERT_TRUE(loader.next(img.data(), lab.data(), err)) << err;
    EXPECT_EQ(lab[1], (2 + 0 + 1) % 3);
    EXPECT_EQ(lab[16 + 1], (0 + 0 + 1) % 3);
  }
}

TEST(DenseNpy, LabelsResizedWithTheImagesByNearestNeighbour) {
  std::string dir = tempDir(), err;
  writeDenseNpy(dir, "<i8", 1);
  SourceOptions o = denseModel(1, 2, 2, 3);
  o.labels = dir + "/y.npy";
  std::unique_ptr<SampleSource> src;
  ASSERT_TRUE(openSource(dir + "/x.npy", Split::Train, o, src, err)) << err;
  std::vector<uint8_t> img(4);
  std::vector<int32_t> lab(4);
  ASSERT_TRUE(src->getSample(0, 0, img.data(), lab.data(), err)) << err;
  // Output (y, x) reads source (2y, 2x), for the image and for the labels.
  EXPECT_EQ(img[3], 2 * 4 + 2);
  EXPECT_EQ(lab[0], 255);
  EXPECT_EQ(lab[1], (0 + 0 + 2) % 3);
  EXPECT_EQ(lab[2], (0 + 2 + 0) % 3);
  EXPECT_EQ(lab[3], 255);
}

TEST(DenseNpy, BadLabelsAreOneClearError) {
  std::string dir = tempDir(), err;
  writeDenseNpy(dir, "<i8", 2);
  std::unique_ptr<SampleSource> src;
  // A class id beyond the classes that is not the ignore_index.
  SourceOptions o = denseModel(1, 4, 4, 2);
  o.labels = dir + "/y.npy";
  EXPECT_FALSE(openSource(dir + "/x.npy", Split::Train, o, src, err));
  EXPECT_NE(err.find("label 2 is not a class in [0, 2) nor the ignore_index "
                     "255: " +
                     dir + "/y.npy at (0, 0, 2)"),
            std::string::npos)
      << err;
  // 255 is no class when the ignore_index is another value.
  o = denseModel(1, 4, 4, 3, -100);
  o.labels = dir + "/y.npy";
  EXPECT_FALSE(openSource(dir + "/x.npy", Split::Train, o, src, err));
  EXPECT_NE(err.find("label 255 is not a class in [0, 3) nor the "
                     "ignore_index -100"),
            std::string::npos)
      << err;
  // Labels of the wrong rank (one per image) or size.
  std::vector<int64_t> one = {0, 1};
  writeNpy(dir + "/y1.npy", "<i8", {2}, one.data(), 16);
  o = denseModel(1, 4, 4, 3);
  o.labels = dir + "/y1.npy";
  EXPECT_FALSE(openSource(dir + "/x.npy", Split::Train, o, src, err));
  EXPECT_NE(err.find("have shape (2,) but the step expects per-pixel labels "
                     "(2, 4, 4)"),
            std::string::npos)
      << err;
  std::vector<int64_t> small(2 * 3 * 4, 0);
  writeNpy(dir + "/y2.npy", "<i8", {2, 3, 4}, small.data(), small.size() * 8);
  o.labels = dir + "/y2.npy";
  EXPECT_FALSE(openSource(dir + "/x.npy", Split::Train, o, src, err));
  EXPECT_NE(err.find("have shape (2, 3, 4) but the step expects per-pixel "
                     "labels (2, 4, 4)"),
            std::string::npos)
      << err;
  // A classifier given per-pixel labels: the old 1-D error.
  SourceOptions c = o;
  c.labelH = c.labelW = 0;
  c.labels = dir + "/y.npy";
  EXPECT_FALSE(openSource(dir + "/x.npy", Split::Train, c, src, err));
  EXPECT_NE(err.find("expected a 1-D array"), std::string::npos) << err;
}

namespace {

/// A W x H RGB image whose red is x * 8, and its mask: class x / (W / 3)
/// (0, 1, 2 in vertical bands), 255 in row 0.
void writeSegPair(const std::string &dir, const std::string &stem, int W, int H,
                  bool palette, int maskW = -1) {
  Image img;
  img.W = W;
  img.H = H;
  img.C = 3;
  img.pixels.resize(static_cast<size_t>(W) * H * 3);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      uint8_t *p = &img.pixels[(static_cast<size_t>(y) * W + x) * 3];
      p[0] = static_cast<uint8_t>(x * 8);
      p[1] = static_cast<uint8_t>(y * 8);
      p[2] = 7;
    }
  std::vector<uint8_t> b;
  std::string err;
  ASSERT_TRUE(encodePNG(img, b, err)) << err;
  writeBytes(dir + "/images/" + stem + ".png", b);
  Image mask;
  mask.W = maskW > 0 ? maskW : W;
  mask.H = H;
  mask.C = 1;
  mask.pixels.resize(static_cast<size_t>(mask.W) * H);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < mask.W; ++x)
      mask.pixels[static_cast<size_t>(y) * mask.W + x] =
          static_cast<uint8_t>(y == 0 ? 255 : x / (W / 3));
  ASSERT_TRUE(encodeMaskPNG(mask, palette, b, err)) << err;
  writeBytes(dir + "/masks/" + stem + ".png", b);
}

void makeSegDir(const std::string &dir) {
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/images").c_str(), 0755);
  mkdir((dir + "/masks").c_str(), 0755);
}

} // namespace

TEST(SegFolder, OneFolderHasNoValidationSplit) {
  if (!haveImageDecoders())
    GTEST_SKIP() << "built without libpng";
  std::string root = tempDir(), err;
  makeSegDir(root);
  writeSegPair(root, "a", 12, 6, true);
  EXPECT_EQ(detectFormat(root), DataFormat::SegFolder);
  EXPECT_FALSE(hasTestSplit(root));
  std::unique_ptr<SampleSource> src;
  SourceOptions o = denseModel(3, 6, 12, 3);
  EXPECT_FALSE(openSource(root, Split::Test, o, src, err));
  EXPECT_NE(err.find("no validation split in " + root), std::string::npos)
      << err;
}

TEST(SegFolder, MasksFollowTheImageThroughResizeCropAndFlip) {
  if (!haveImageDecoders())
    GTEST_SKIP() << "built without libpng";
  for (bool palette : {true, false}) {
    std::string root = tempDir(), err;
    makeSegDir(root);
    writeSegPair(root, "a", 12, 6, palette);
    std::unique_ptr<SampleSource> src;
    SourceOptions o = denseModel(3, 6, 12, 3);
    o.augment = false;
    ASSERT_TRUE(openSource(root, Split::Train, o, src, err)) << err;
    std::vector<uint8_t> img(3 * 6 * 12);
    std::vector<int32_t> lab(6 * 12);
    ASSERT_TRUE(src->getSample(0, 1, img.data(), lab.data(), err)) << err;
    // Same size, no augmentation: the mask as written (indices, not the
    // palette's colours).
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 12; ++x)
        EXPECT_EQ(lab[y * 12 + x], y == 0 ? 255 : x / 4)
            << palette << " " << y << " " << x;

    // Training: for every seed, each mask pixel is the class of the image
    // pixel it lands on (red = x * 8 tells the source column), so crop and
    // flip were the same for both.
    o.augment = true;
    o.H = o.labelH = 3;
    o.W = o.labelW = 6;
    ASSERT_TRUE(openSource(root, Split::Train, o, src, err)) << err;
    int flipped = 0;
    for (uint64_t seed = 0; seed < 40; ++seed) {
      std::vector<uint8_t> im(3 * 3 * 6);
      std::vector<int32_t> lb(3 * 6);
      ASSERT_TRUE(src->getSample(0, seed, im.data(), lb.data(), err)) << err;
      int left = -1, right = -1;
      for (int x = 0; x < 6; ++x) {
        int v = lb[2 * 6 + x]; // row 2: never the void row after a crop
        if (v == 255)
          continue;
        int srcX = (im[2 * 6 + x] + 4) / 8; // red channel
        // Bilinear filtering blurs the colour by up to a pixel: only the
        // columns inside a band (not at its edges) are compared.
        if (srcX % 4 == 1 || srcX % 4 == 2) {
          EXPECT_EQ(srcX / 4, v)
              << "seed " << seed << " x " << x << " red " << int(im[2 * 6 + x]);
        }
        if (left < 0)
          left = v;
        right = v;
      }
      flipped += left > right;
    }
    EXPECT_GT(flipped, 0) << "no flip in 40 seeds";
  }
}

TEST(SegFolder, LayoutAndMaskErrorsNameTheFile) {
  if (!haveImageDecoders())
    GTEST_SKIP() << "built without libpng";
  std::string root = tempDir(), err;
  mkdir(root.c_str(), 0755);
  makeSegDir(root + "/train");
  makeSegDir(root + "/val");
  writeSegPair(root + "/train", "a", 12, 6, true);
  writeSegPair(root + "/train", "b", 12, 6, true, /*maskW=*/10);
  writeSegPair(root + "/val", "c", 12, 6, false);
  EXPECT_EQ(detectFormat(root), DataFormat::SegFolder);
  EXPECT_TRUE(hasTestSplit(root));
  std::unique_ptr<SampleSource> train, val;
  SourceOptions o = denseModel(3, 6, 12, 3);
  ASSERT_TRUE(openSource(root, Split::Train, o, train, err)) << err;
  ASSERT_TRUE(openSource(root, Split::Test, o, val, err)) << err;
  EXPECT_EQ(train->size(), 2);
  EXPECT_EQ(val->size(), 1);
  std::vector<uint8_t> img(3 * 6 * 12);
  std::vector<int32_t> lab(6 * 12);
  EXPECT_TRUE(val->getSample(0, 0, img.data(), lab.data(), err)) << err;
  // A mask of another size than its image.
  EXPECT_FALSE(train->getSample(1, 0, img.data(), lab.data(), err));
  EXPECT_EQ(err, "mask " + root + "/train/masks/b.png is 10x6 but its image " +
                     root + "/train/images/b.png is 12x6 (width x height)");
  // A class beyond the model's (3 bands, 2 classes).
  o.numClasses = 2;
  ASSERT_TRUE(openSource(root, Split::Train, o, train, err)) << err;
  EXPECT_FALSE(train->getSample(0, 0, img.data(), lab.data(), err));
  EXPECT_NE(err.find("mask " + root +
                     "/train/masks/a.png: label 2 at (y 1, x 8) is not a "
                     "class in [0, 2) nor the ignore_index 255"),
            std::string::npos)
      << err;
  // An image without its mask; a classifier given masks.
  writeSegPair(root + "/train", "d", 12, 6, true);
  std::remove((root + "/train/masks/d.png").c_str());
  o.numClasses = 3;
  EXPECT_FALSE(openSource(root, Split::Train, o, train, err));
  EXPECT_EQ(err, "image " + root + "/train/images/d.png has no mask " + root +
                     "/train/masks/d.png");
  SourceOptions c = o;
  c.labelH = c.labelW = 0;
  EXPECT_FALSE(openSource(root, Split::Test, c, val, err));
  EXPECT_NE(err.find("holds masks (per-pixel labels) but the model takes one "
                     "label per image"),
            std::string::npos)
      << err;
  // An RGB PNG is no mask.
  Image rgb;
  rgb.W = 12;
  rgb.H = 6;
  rgb.C = 3;
  rgb.pixels.assign(12 * 6 * 3, 1);
  std::vector<uint8_t> b;
  ASSERT_TRUE(encodePNG(rgb, b, err)) << err;
  writeBytes(root + "/val/masks/c.png", b);
  EXPECT_FALSE(val->getSample(0, 0, img.data(), lab.data(), err));
  EXPECT_NE(err.find("mask " + root + "/val/masks/c.png is an RGB PNG"),
            std::string::npos)
      << err;
}

TEST(MeanIoU, ConfusionMatrixAsCnncMiou) {
  // 3 classes, one 2 x 3 image, NCHW logits and the same in NHWC.
  const int C = 3, H = 2, W = 3;
  // Predictions per pixel: 0 1 2 / 1 1 0 (ties resolve to the first).
  int pred[H * W] = {0, 1, 2, 1, 1, 0};
  int32_t target[H * W] = {0, 1, 1, 255, 1, 2};
  std::vector<float> nchw(C * H * W, 0.f), nhwc(C * H * W, 0.f);
  for (int p = 0; p < H * W; ++p)
    for (int c = 0; c < C; ++c) {
      // Pixel 4 ties classes 1 and 2: the first (1) is the prediction.
      float v = c == pred[p] || (p == 4 && c == 2) ? 2.f : 0.f;
      nchw[c * H * W + p] = v;
      nhwc[p * C + c] = v;
    }
  EvalResult a, b;
  beginDenseEval(C, a);
  beginDenseEval(C, b);
  accumulateConfusion(nchw.data(), false, H, W, target, 255, a);
  accumulateConfusion(nhwc.data(), true, H, W, target, 255, b);
  EXPECT_EQ(a.confusion, b.confusion);
  // [target][prediction]: (0,0) (1,1) (1,2) (1,1) (2,0); the 255 pixel out.
  std::vector<int64_t> want = {1, 0, 0, 0, 2, 1, 1, 0, 0};
  EXPECT_EQ(a.confusion, want);
  EXPECT_EQ(a.total, 1);
  std::vector<double> iou;
  // IoU: class 0: 1 / (1 + 1 + 0) = 0.5; class 1: 2 / (3 + 2 - 2) = 2/3;
  // class 2: 0 / (1 + 1 - 0) = 0.
  EXPECT_NEAR(meanIoU(a, &iou), (0.5 + 2.0 / 3 + 0) / 3, 1e-12);
  EXPECT_NEAR(iou[1], 2.0 / 3, 1e-12);
  EXPECT_NEAR(pixelAccuracy(a), 3.0 / 5, 1e-12);
  // A class absent from target and prediction is NaN and out of the mean.
  EvalResult four;
  beginDenseEval(4, four);
  std::vector<float> l4(4 * H * W, 0.f);
  for (int p = 0; p < H * W; ++p)
    l4[pred[p] * H * W + p] = 3.f;
  accumulateConfusion(l4.data(), false, H, W, target, 255, four);
  EXPECT_NEAR(meanIoU(four, &iou), (0.5 + 2.0 / 3 + 0) / 3, 1e-12);
  EXPECT_TRUE(std::isnan(iou[3]));
  EvalResult none;
  beginDenseEval(2, none);
  EXPECT_TRUE(std::isnan(meanIoU(none)));
  // The lines and the JSON.
  a.step = 20;
  a.epoch = 1.25;
  EXPECT_EQ(evalLine(a), "eval step 20 epoch 1.25: mIoU 38.89% pixel acc "
                         "60.00% (5 pixels, 1 images)");
  std::string j = evalJson(a);
  EXPECT_NE(j.find("\"miou\": 0.388888889"), std::string::npos) << j;
  EXPECT_NE(j.find("\"pixel_acc\": 0.6"), std::string::npos) << j;
  EXPECT_NE(j.find("\"iou\": [0.5, 0.666666667, 0]"), std::string::npos) << j;
  RunSummary s;
  s.steps = 3;
  EXPECT_EQ(doneLine(s).find("mIoU"), std::string::npos);
  s.miou = meanIoU(a);
  s.pixelAcc = pixelAccuracy(a);
  EXPECT_NE(doneLine(s).find(", mIoU 38.89% pixel acc 60.00%"),
            std::string::npos)
      << doneLine(s);
  EXPECT_NE(doneJson(s).find("\"miou\": 0.388888889, \"pixel_acc\": 0.6"),
            std::string::npos)
      << doneJson(s);
}

TEST(MeanIoU, EvalBatchCountsItsRealImagesOnly) {
  // A batch of 3 images of 2 classes, 1 x 2 pixels, NCHW logits; the last
  // batch of the split holds 2 real images (the third is the loader's
  // padding and must not count).
  const int C = 2, H = 1, W = 2;
  // Image b, pixel p predicts class (b + p) % 2.
  std::vector<float> logits(3 * C * H * W, 0.f);
  for (int b = 0; b < 3; ++b)
    for (int p = 0; p < H * W; ++p)
      logits[(b * C + (b + p) % 2) * H * W + p] = 1.f;
  // Targets: image 0 (0, 1): both right; image 1 (1, 255): pixel 0
  // right, pixel 1 ignored; image 2 (the padding) all wrong.
  std::vector<int32_t> labels = {0, 1, 1, 255, 1, 0};
  EvalResult batch, single;
  beginDenseEval(C, batch);
  beginDenseEval(C, single);
  accumulateConfusionBatch(logits.data(), 2, false, H, W, labels.data(), 255,
                           batch);
  for (int b = 0; b < 2; ++b)
    accumulateConfusion(logits.data() + b * C * H * W, false, H, W,
                        labels.data() + b * H * W, 255, single);
  EXPECT_EQ(batch.confusion, single.confusion);
  EXPECT_EQ(batch.confusion, (std::vector<int64_t>{1, 0, 0, 2}));
  EXPECT_EQ(batch.total, 2);
  EXPECT_DOUBLE_EQ(meanIoU(batch), 1.0);
  // With the padding counted, class 1's pixel of image 2 predicted 0 and
  // its class 0 pixel predicted 1 would lower both IoUs.
  EvalResult all;
  beginDenseEval(C, all);
  accumulateConfusionBatch(logits.data(), 3, false, H, W, labels.data(), 255,
                           all);
  EXPECT_EQ(all.confusion, (std::vector<int64_t>{1, 1, 1, 2}));
  EXPECT_NEAR(meanIoU(all), (1.0 / 3 + 2.0 / 4) / 2, 1e-12);
}

// `--data synthetic` for a dense model: every sample has labelH x labelW
// labels (a 4 x 4 grid of classes from the image's label), all classes;
// before, the source gave one label per image and the step read a batch x 1
// buffer as batch x H x W.
TEST(SyntheticDense, EveryPixelHasAClassLabel) {
  SourceOptions o = model(3, 8, 8, 21);
  o.batch = 4;
  o.labelH = 8;
  o.labelW = 8;
  std::unique_ptr<SampleSource> src;
  std::string err;
  ASSERT_TRUE(openSource("synthetic", Split::Train, o, src, err)) << err;
  ASSERT_EQ(src->labelsPerSample(), 64u);
  std::vector<uint8_t> x(src->sampleBytes());
  std::vector<int32_t> labels(64, -1);
  ASSERT_TRUE(src->getSample(2, 0, x.data(), labels.data(), err)) << err;
  int32_t image = -1;
  ImageSet s = makeSynthetic(4, 3, 8, 8, 21, o.seed);
  image = s.labels[2];
  EXPECT_EQ(labels[0], image);
  EXPECT_EQ(labels[7 * 8 + 7], (image + 15) % 21);
  for (int32_t l : labels)
    EXPECT_TRUE(l >= 0 && l < 21) << l;
  // The single-label read is refused, not half-filled.
  int32_t one = -1;
  EXPECT_FALSE(src->get(0, 0, x.data(), one, err));
  EXPECT_NE(err.find("per-pixel"), std::string::npos) << err;
}
