//===- ProfileJsonTest.cpp - CNNRT_PROFILE_JSON's text and its errors -----===//
#include "ProfileJson.h"

#include "cnnrt/Error.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace cnnrt;

TEST(ProfileJson, SumsLaunchesByLocationInFirstLaunchOrder) {
  // A convolution's forward, its BatchNorm, then the convolution's two
  // backward launches and the optimizer: the node's time is all of its own.
  std::string j = locationProfileJson(
      "step 2", {{"/conv1/Conv", 1.5},
                 {"/bn1/BatchNormalization", 0.25},
                 {"/conv1/Conv", 2.0},
                 {"optimizer.conv1.weight", 0.125},
                 {"/conv1/Conv", 0.5}});
  EXPECT_NE(j.find("\"format\": \"cnnrt-profile\", \"version\": 1"),
            std::string::npos);
  EXPECT_NE(j.find("\"total_ms\": 4.375000, \"launches\": 5"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"/conv1/Conv\": {\"ms\": 4.000000, \"launches\": 3}"),
            std::string::npos)
      << j;
  EXPECT_LT(j.find("/conv1/Conv"), j.find("/bn1/BatchNormalization"));
  EXPECT_LT(j.find("/bn1/BatchNormalization"),
            j.find("optimizer.conv1.weight"));
}

TEST(ProfileJson, LocationsAreJsonStrings) {
  std::string j =
      locationProfileJson("t", {{"a\"b\\c\nd", 1.0}, {"<unknown>", 0.0}});
  EXPECT_NE(j.find("\"a\\\"b\\\\c\\u000ad\": {"), std::string::npos) << j;
  EXPECT_NE(j.find("\"<unknown>\": {\"ms\": 0.000000"), std::string::npos);
}

TEST(ProfileJson, EmptyProfileIsAnEmptyObject) {
  std::string j = locationProfileJson("t", {});
  EXPECT_NE(j.find("\"launches\": 0"), std::string::npos);
  EXPECT_NE(j.find("\"by_location\": {}}"), std::string::npos) << j;
}

TEST(ProfileJson, WritesTheFileItIsGiven) {
  std::string path = ::testing::TempDir() + "cnnrt_profile_test.json";
  writeLocationProfile(path, "t", {{"/fc/Gemm", 0.5}});
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), locationProfileJson("t", {{"/fc/Gemm", 0.5}}));
  std::remove(path.c_str());
}

TEST(ProfileJson, AnUnwritablePathIsAConfigErrorNamingIt) {
  std::string dir = ::testing::TempDir(); // a directory: fopen fails
  try {
    writeLocationProfile(dir, "t", {{"x", 1.0}});
    FAIL() << "no error for a directory";
  } catch (const Error &e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("CNNRT_PROFILE_JSON"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

TEST(ProfileJson, EachRankOfAMultiProcessRunWritesItsOwnFile) {
  EXPECT_EQ(profileJsonPathForProcess("p.json", nullptr, nullptr), "p.json");
  EXPECT_EQ(profileJsonPathForProcess("p.json", "1", "0"), "p.json");
  EXPECT_EQ(profileJsonPathForProcess("p.json", "4", "2"), "p.json.rank2");
  EXPECT_EQ(profileJsonPathForProcess("p.json", "2", nullptr), "p.json");
  EXPECT_EQ(profileJsonPathForProcess("", "2", "1"), "");
}
