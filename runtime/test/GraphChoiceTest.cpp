//===- GraphChoiceTest.cpp - the cached graph-or-split value --------------===//
//
// The algorithm cache is a text file a user can edit or a crash can
// truncate: each graph-or-split value either parses into exactly what was
// written or is reported (the runtime warns and chooses again), never read
// as something else.
//
//===----------------------------------------------------------------------===//
#include "GraphChoice.h"

#include <gtest/gtest.h>

using namespace cnnrt;

namespace {

GraphChoice parsed(const std::string &v) {
  GraphChoice c;
  c.index = 12345; // must be overwritten
  std::string why;
  EXPECT_TRUE(parseGraphChoice(v, c, why)) << why;
  EXPECT_TRUE(why.empty());
  return c;
}

std::string rejected(const std::string &v) {
  GraphChoice c;
  c.index = 7;
  c.reproduced = 3;
  std::string why;
  EXPECT_FALSE(parseGraphChoice(v, c, why)) << "'" << v << "' accepted";
  // A rejected value leaves the choice untouched and names the value.
  EXPECT_EQ(c.index, 7);
  EXPECT_EQ(c.reproduced, 3);
  EXPECT_NE(why.find("'" + v + "'"), std::string::npos) << why;
  return why;
}

} // namespace

TEST(GraphChoice, RoundTrips) {
  for (GraphChoice c :
       {GraphChoice{-1, 0, ""}, GraphChoice{0, 0, ""}, GraphChoice{3, 0, ""},
        GraphChoice{3, 5, ""}, GraphChoice{17, 1, "e9"},
        GraphChoice{2, 0, "e41.k3=1.k14=-1"},
        GraphChoice{2, 5, "e41.k3=1.k14=-1"}}) {
    std::string v = formatGraphChoice(c);
    GraphChoice back = parsed(v);
    EXPECT_EQ(back.index, c.index) << v;
    EXPECT_EQ(back.reproduced, c.reproduced) << v;
    EXPECT_EQ(back.engine, c.engine) << v;
  }
  EXPECT_EQ(formatGraphChoice({4, 5, "e7.k1=2"}),
            "4 reproduced=5 engine=e7.k1=2");
  EXPECT_EQ(formatGraphChoice({4, 0, ""}), "4");
  // The split form carries no verdict or engine even if they are set.
  EXPECT_EQ(formatGraphChoice({-1, 5, "e7"}), "-1");
  // The tokens after the index in either order.
  GraphChoice c = parsed("4 engine=e7 reproduced=5");
  EXPECT_EQ(c.reproduced, 5);
  EXPECT_EQ(c.engine, "e7");
}

TEST(GraphChoice, ReadsEntriesWrittenBeforeTheProbe) {
  // Caches written by earlier runtimes hold the bare index: a plan without
  // a verdict (reproduced = 0, which CNNRT_DETERMINISTIC probes again).
  GraphChoice c = parsed("2");
  EXPECT_EQ(c.index, 2);
  EXPECT_EQ(c.reproduced, 0);
  EXPECT_TRUE(c.engine.empty());
  EXPECT_EQ(parsed("-1").index, -1);
}

TEST(GraphChoice, RejectsMalformedValues) {
  EXPECT_NE(rejected("").find("plan index"), std::string::npos);
  EXPECT_NE(rejected("graph").find("plan index"), std::string::npos);
  rejected("-2");
  rejected("1.5");
  rejected("+3");
  rejected("99999999999");
  EXPECT_NE(rejected("3 reproduced").find("reproduced=<runs>"),
            std::string::npos);
  EXPECT_NE(rejected("3 reproduced=5 reproduced=5").find("twice"),
            std::string::npos);
  EXPECT_NE(rejected("3 engine=e1 engine=e1").find("twice"), std::string::npos);
  EXPECT_NE(rejected("3 engine=").find("without an engine"), std::string::npos);
  rejected("-1 engine=e4");
  EXPECT_NE(rejected("3 reproduced=").find("positive integer"),
            std::string::npos);
  rejected("3 reproduced=0");
  rejected("3 reproduced=-5");
  rejected("3 reproduced=2x");
  rejected("3 repro=5");
  EXPECT_NE(rejected("-1 reproduced=5").find("split form"), std::string::npos);
  EXPECT_NE(rejected("3 reproduced=5 extra").find("'extra'"),
            std::string::npos);
  rejected("3 reproduced=5 engine=e1 more");
}
