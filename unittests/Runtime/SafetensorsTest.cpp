//===- SafetensorsTest.cpp - cnnrt's safetensors reader and writer --------===//
//
// The exact bytes the writer produces (the layout safetensors.torch.load_file
// reads), the round trip through readTensorFile/writeTensorFileAtomic chosen
// by the extension, and one clear error for each kind of corrupt file.
//
//===----------------------------------------------------------------------===//
#include "cnnrt/TensorFile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace cnnrt;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/cnnc_safetensors_XXXXXX";
  const char *d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

std::vector<TensorEntry> sample() {
  std::vector<TensorEntry> v;
  TensorEntry a = TensorEntry::zeros("conv1.weight", DType::F32, {2, 3, 1, 1});
  for (int i = 0; i < 6; ++i)
    a.as<float>()[i] = 0.5f * i - 1.f;
  v.push_back(a);
  TensorEntry h = TensorEntry::zeros("bn1.weight", DType::F16, {3});
  h.as<uint16_t>()[0] = 0x3c00;
  v.push_back(h);
  TensorEntry s = TensorEntry::zeros("__step__", DType::I64, {1});
  s.as<int64_t>()[0] = 123456789012345;
  v.push_back(s);
  v.push_back(TensorEntry::zeros("scalar", DType::I32, {}));
  v.push_back(TensorEntry::zeros("empty", DType::F32, {0, 4}));
  // A name JSON must escape.
  v.push_back(TensorEntry::zeros("we\"ird\\name\n", DType::F32, {1}));
  return v;
}

/// A file from its header text and data bytes (length prefix added).
std::string file(const std::string &header, const std::string &data) {
  uint64_t n = header.size();
  std::string b(reinterpret_cast<const char *>(&n), 8);
  return b + header + data;
}

/// The error parsing `bytes` gives (empty when it parses).
std::string parseError(const std::string &bytes) {
  std::vector<TensorEntry> out;
  std::string err;
  if (parseSafetensors(bytes.data(), bytes.size(), "f.safetensors", out, err))
    return "";
  return err;
}

} // namespace

TEST(Safetensors, ExactBytes) {
  TensorEntry t = TensorEntry::zeros("ab", DType::I32, {2});
  t.as<int32_t>()[0] = 7;
  t.as<int32_t>()[1] = -1;
  std::string bytes, err;
  ASSERT_TRUE(serializeSafetensors({t}, {{"format", "pt"}}, bytes, err)) << err;
  std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},\"ab\":{\"dtype\":"
      "\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  // Spaces pad the header to a multiple of 8 bytes (the data is aligned).
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data("\x07\0\0\0\xff\xff\xff\xff", 8);
  EXPECT_EQ(bytes, file(header, data));
  EXPECT_EQ(bytes.size() % 8, 0u);
  // Names escaped as Python's json.dumps(ensure_ascii=False) does, so that
  // python/cnnc/safetensors.py writes the same bytes.
  TensorEntry odd = TensorEntry::zeros("a\n\x01\"\\\xc3\xa9", DType::F32, {});
  ASSERT_TRUE(serializeSafetensors({odd}, {}, bytes, err)) << err;
  const std::string want = "{\"a\\n\\u0001\\\"\\\\\xc3\xa9\":{";
  EXPECT_EQ(bytes.substr(8, want.size()), want);
}

TEST(Safetensors, RoundTripByExtension) {
  std::string dir = tempDir(), path = dir + "/w.safetensors", err;
  auto in = sample();
  ASSERT_TRUE(writeTensorFileAtomic(path, in, err)) << err;
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes[8], '{'); // not the CNNW magic
  std::vector<TensorEntry> out;
  SafetensorsMetadata meta;
  ASSERT_TRUE(readSafetensors(path, out, err, &meta)) << err;
  ASSERT_EQ(meta.size(), 1u);
  EXPECT_EQ(meta[0].first, "format");
  EXPECT_EQ(meta[0].second, "pt");
  ASSERT_TRUE(readTensorFile(path, out, err)) << err;
  ASSERT_EQ(out.size(), in.size());
  // Written in order, read back in the order of the offsets: the same order.
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].name, in[i].name);
    EXPECT_EQ(out[i].dtype, in[i].dtype);
    EXPECT_EQ(out[i].shape, in[i].shape);
    EXPECT_EQ(out[i].data, in[i].data);
  }
  EXPECT_EQ(findEntry(out, "__step__")->as<int64_t>()[0], 123456789012345);
  // A .cnnw path still gets the .cnnw format.
  ASSERT_TRUE(writeTensorFileAtomic(dir + "/w.cnnw", in, err)) << err;
  std::ifstream g(dir + "/w.cnnw", std::ios::binary);
  char magic[8] = {};
  g.read(magic, 8);
  EXPECT_EQ(std::string(magic, 8), "CNNW0001");
  EXPECT_TRUE(isSafetensorsPath("A.SafeTensors"));
  EXPECT_FALSE(isSafetensorsPath("a.safetensors.cnnw"));
}

TEST(Safetensors, ReadsOffsetsInAnyOrderAndEscapes) {
  // The reference writer orders tensors by dtype then name; the header's key
  // order and the data order need not agree.
  std::string h = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
                  "[4,8]},\"\\u00e9\\n\":{\"dtype\":\"F32\",\"shape\":[1],"
                  "\"data_offsets\":[0,4]}, \"__metadata__\": {}}   ";
  float v[2] = {1.5f, -2.f};
  std::string bytes = file(h, std::string(reinterpret_cast<char *>(v), 8));
  std::vector<TensorEntry> out;
  std::string err;
  ASSERT_TRUE(parseSafetensors(bytes.data(), bytes.size(), "x", out, err))
      << err;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "\xc3\xa9\n");
  EXPECT_EQ(out[0].as<float>()[0], 1.5f);
  EXPECT_EQ(out[1].name, "b");
  EXPECT_EQ(out[1].as<float>()[0], -2.f);
}

TEST(Safetensors, CorruptFilesGetOneClearError) {
  const std::string ok =
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const std::string data(8, '\0');
  ASSERT_EQ(parseError(file(ok, data)), "");
  struct Case {
    std::string bytes;
    const char *expect;
  };
  uint64_t huge = 200000000;
  std::string hugeLen(reinterpret_cast<const char *>(&huge), 8);
  const Case cases[] = {
      {"abc", "less than the 8-byte header length"},
      {hugeLen + "{}", "exceeds the format's limit"},
      {file(ok, data).substr(0, 20), "runs past the end of the file"},
      {file(ok, data).substr(0, file(ok, data).size() - 1),
       "run past the end of the data"},
      {file(ok, data) + "x", "1 bytes after the last tensor"},
      {file("[1]", ""), "does not start with '{'"},
      {file("{\"w\":", ""), "not valid JSON"},
      {file("{\"w\":{\"dtype\":\"F32\",}}", ""), "not valid JSON"},
      {file("{\"a\":{},\"a\":{}}", ""), "duplicate key \"a\""},
      {file(std::string("{\"\xff\":1}"), ""), "header is not UTF-8"},
      {file("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
            "1234"),
       "unsupported dtype 'BF16'"},
      {file("{\"w\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,4]}}",
            "1234"),
       "unknown dtype 'Q7'"},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
            data),
       "need 12 bytes but data_offsets [0, 8] hold 8"},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
            data),
       "not a non-negative 64-bit integer (-2)"},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}"
            "}",
            data),
       "not a non-negative 64-bit integer (2.0)"},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
            "\"data_offsets\":[0,8]}}",
            data),
       "more elements than fit in 64 bits"},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
            data),
       "end before they begin"},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}",
            data),
       "data_offsets is not a pair"},
      {file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
            data),
       "overlap tensor 'a'"},
      {file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
            data),
       "leave a gap after the start of the data"},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", data),
       "missing \"data_offsets\""},
      {file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],"
            "\"x\":1}}",
            data),
       "unknown key \"x\""},
      {file("{\"__metadata__\":{\"k\":1}}", ""), "not a string"},
      {file("{\"w\":[]}", ""), "is an array, not an object"},
      {file("{\"\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
            ""),
       "empty name"},
      {file(std::string(40, '[') + std::string(40, ']'), ""),
       "does not start with '{'"},
      {file("{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}", ""),
       "nested deeper than"},
      {file("{\"a\":\"\\ud800\"}", ""), "unpaired surrogate"},
  };
  for (const Case &c : cases) {
    std::string err = parseError(c.bytes);
    EXPECT_NE(err.find(c.expect), std::string::npos)
        << "expected '" << c.expect << "', got '" << err << "'";
    // Every message names the file.
    EXPECT_NE(err.find("f.safetensors"), std::string::npos) << err;
  }
}

TEST(Safetensors, WriterRejectsWhatTheFormatCannotHold) {
  std::string bytes, err;
  auto dup = sample();
  dup.push_back(dup[0]);
  EXPECT_FALSE(serializeSafetensors(dup, {}, bytes, err));
  EXPECT_NE(err.find("duplicate tensor name 'conv1.weight'"), std::string::npos)
      << err;
  auto bad = sample();
  bad[0].data.pop_back();
  EXPECT_FALSE(serializeSafetensors(bad, {}, bytes, err));
  EXPECT_NE(err.find("'conv1.weight' holds 23 bytes"), std::string::npos)
      << err;
  std::vector<TensorEntry> reserved = {
      TensorEntry::zeros("__metadata__", DType::F32, {1})};
  EXPECT_FALSE(serializeSafetensors(reserved, {}, bytes, err));
  EXPECT_NE(err.find("reserved"), std::string::npos) << err;
  // Nothing is left behind by a failed write.
  std::string dir = tempDir();
  EXPECT_FALSE(writeTensorFileAtomic(dir + "/x.safetensors", bad, err));
  EXPECT_NE(access((dir + "/x.safetensors").c_str(), F_OK), 0);
}
