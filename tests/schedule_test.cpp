#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "backends/emu/schedule.hpp"

using wspipe::emu::Schedule;

TEST(Schedule, EncodesRunsCompactly) {
  EXPECT_EQ(Schedule({0, 0, 0, 1, 0}).encode(), "1:a3ba");
  EXPECT_EQ(Schedule({25, 26, 51, 52, 52}).encode(), "1:zAZ{52}2");
  EXPECT_EQ(Schedule().encode(), "1:");
}

TEST(Schedule, RejectsMalformedText) {
  std::string why;
  EXPECT_FALSE(Schedule::decode("abc", &why));
  EXPECT_NE(why.find("version"), std::string::npos);
  EXPECT_FALSE(Schedule::decode("2:ab", &why));
  EXPECT_NE(why.find("unsupported version"), std::string::npos);
  EXPECT_FALSE(Schedule::decode("1:a!", &why));
  EXPECT_NE(why.find("character 3"), std::string::npos);
  EXPECT_FALSE(Schedule::decode("1:{12", &why));
  EXPECT_FALSE(Schedule::decode("1:{x}", &why));
  EXPECT_FALSE(Schedule::decode("1:a1", &why));  // a count of 1 is never written
  EXPECT_FALSE(Schedule::decode("1:a99999999999", &why));            // more than any run
  EXPECT_FALSE(Schedule::decode("1:a18446744073709551615b2", &why));  // would overflow the total
  EXPECT_FALSE(Schedule::decode("1:a02", &why));                     // not canonical
}

RC_GTEST_PROP(Schedule, RoundTrips, (std::vector<std::uint32_t> choices)) {
  for (auto& c : choices) c %= 200;  // mostly letters, some braces
  const Schedule s(choices);
  std::string why;
  const auto back = Schedule::decode(s.encode(), &why);
  RC_ASSERT(back.has_value());
  RC_ASSERT(*back == s);
}
