#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "backends/emu/schedule.hpp"

using wspipe::emu::Schedule;
using Dev = Schedule::Deviation;

TEST(Schedule, EncodesDeviationsWithGaps) {
  // Choice 3 picks actor 1, choice 16 actor 0, choice 17 actor 1.
  EXPECT_EQ(Schedule({{3, 1}, {16, 0}, {17, 1}}).encode(), "6:3b12ab");
  EXPECT_EQ(Schedule({{0, 25}, {1, 26}, {2, 51}, {10, 52}}).encode(), "6:zAZ7{52}");
  EXPECT_EQ(Schedule().encode(), "6:");
  EXPECT_EQ(Schedule({{0, 2}}, 0xdeadbeef).encode(), "6:deadbeef:c");
  EXPECT_EQ(Schedule({}, 0x1a).encode(), "6:0000001a:");
  // Older schedules keep their version: a version 2 check is of another
  // kind, a version 3 schedule was recorded without try_wait time-outs.
  EXPECT_EQ(Schedule({{0, 2}}, 0xdeadbeef, 2).encode(), "2:deadbeef:c");
  EXPECT_EQ(Schedule({{0, 2}}, 0xdeadbeef, 3).encode(), "3:deadbeef:c");
  // A version 5 schedule was recorded when a load was cut once, in halves.
  EXPECT_EQ(Schedule({{0, 2}}, 0xdeadbeef, 5).encode(), "5:deadbeef:c");
  // A version 4 schedule was recorded when every time-out was a step.
  EXPECT_EQ(Schedule({{0, 2}}, 0xdeadbeef, 4).encode(), "4:deadbeef:c");
  const auto four = Schedule::decode("4:deadbeef:c", nullptr);
  ASSERT_TRUE(four);
  EXPECT_EQ(four->version(), 4);
}

TEST(Schedule, DecodesWhatItEncodes) {
  std::string why;
  const auto s = Schedule::decode("6:0badf00d:3b12ab", &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->version(), 6);
  EXPECT_EQ(s->check(), 0x0badf00du);
  EXPECT_EQ(s->deviations(), (std::vector<Dev>{{3, 1}, {16, 0}, {17, 1}}));
  EXPECT_EQ(s->unchecked().encode(), "6:3b12ab");
  const auto five = Schedule::decode("5:0badf00d:3b12ab", &why);
  ASSERT_TRUE(five) << why;
  EXPECT_EQ(five->version(), 5);
  EXPECT_EQ(five->unchecked().encode(), "5:3b12ab");
}

// Tokens printed before try_wait time-outs were on by default (version 3)
// are read with their deviations and check, and remember their version:
// replay() runs them without time-outs where they fit so.
TEST(Schedule, ReadsVersion3Tokens) {
  std::string why;
  const auto s = Schedule::decode("3:0badf00d:3b12ab", &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->version(), 3);
  EXPECT_EQ(s->check(), 0x0badf00du);
  EXPECT_EQ(s->deviations(), Schedule::decode("5:0badf00d:3b12ab", &why)->deviations());
  EXPECT_NE(*s, *Schedule::decode("5:0badf00d:3b12ab", &why));
  EXPECT_EQ(s->encode(), "3:0badf00d:3b12ab");
  EXPECT_EQ(s->unchecked().encode(), "3:3b12ab");
}

// Tokens printed before the check covered every step (version 2) are read
// with the same deviations, and remember their version: the World checks a
// version 2 check against the choice points, as it was recorded.
TEST(Schedule, ReadsVersion2Tokens) {
  std::string why;
  const auto s = Schedule::decode("2:0badf00d:3b12ab", &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->version(), 2);
  EXPECT_EQ(s->check(), 0x0badf00du);
  EXPECT_EQ(s->deviations(), Schedule::decode("3:0badf00d:3b12ab", &why)->deviations());
  EXPECT_NE(*s, *Schedule::decode("3:0badf00d:3b12ab", &why));
  EXPECT_EQ(s->encode(), "2:0badf00d:3b12ab");
  EXPECT_EQ(s->unchecked().encode(), "2:3b12ab");
  const auto bare = Schedule::decode("2:", &why);
  ASSERT_TRUE(bare) << why;
  EXPECT_EQ(bare->version(), 2);
  EXPECT_TRUE(bare->empty());
  EXPECT_EQ(bare->check(), 0u);
}

TEST(Schedule, RejectsMalformedText) {
  std::string why;
  EXPECT_FALSE(Schedule::decode("abc", &why));
  EXPECT_NE(why.find("version"), std::string::npos);
  EXPECT_FALSE(Schedule::decode("7:ab", &why));
  EXPECT_NE(why.find("unsupported version \"7\" (this build reads versions 2 to 6)"), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("16:ab", &why));
  EXPECT_NE(why.find("unsupported version \"16\""), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("1:a3ba", &why));
  EXPECT_NE(why.find("version 1"), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("2:a!", &why));
  EXPECT_NE(why.find("character 3"), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("2:{12", &why));
  EXPECT_FALSE(Schedule::decode("2:{x}", &why));
  EXPECT_FALSE(Schedule::decode("2:{7}", &why));  // below 52: a letter
  EXPECT_FALSE(Schedule::decode("2:0a", &why));   // a gap of 0 is never written
  EXPECT_FALSE(Schedule::decode("2:05a", &why));  // nor a leading 0
  EXPECT_FALSE(Schedule::decode("2:5", &why));    // a gap needs an actor
  EXPECT_NE(why.find("followed by an actor"), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("2:99999999999999999999a", &why));  // overflow
  EXPECT_FALSE(Schedule::decode("2:1099511627777a", &why));         // beyond any run
  // A deviation at the last index allowed (2^40), then any other: the bound
  // check must not wrap around (it decoded to deviations out of order).
  EXPECT_TRUE(Schedule::decode("2:1099511627776a", &why)) << why;
  EXPECT_FALSE(Schedule::decode("2:1099511627776a18446742974197923844a", &why));
  EXPECT_NE(why.find("choice index too large"), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("2:1099511627776aa", &why));
  EXPECT_NE(why.find("choice index too large"), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("2:abc:a", &why));                  // a check has 8 digits
  EXPECT_NE(why.find("8 hex digits"), std::string::npos) << why;
  EXPECT_FALSE(Schedule::decode("2:0000000g:a", &why));
  EXPECT_FALSE(Schedule::decode("2:00000000:a", &why));  // 0 means unchecked: never written
  // Versions 3 and 4 share the syntax and its checks.
  for (const char* v : {"3", "4"}) {
    const std::string pre = std::string(v) + ":";
    EXPECT_FALSE(Schedule::decode(pre + "a!", &why));
    EXPECT_NE(why.find("character 3"), std::string::npos) << why;
    EXPECT_FALSE(Schedule::decode(pre + "abc:a", &why));
    EXPECT_FALSE(Schedule::decode(pre + "00000000:a", &why));
  }
}

RC_GTEST_PROP(Schedule, RoundTrips,
              (std::vector<std::pair<std::uint16_t, std::uint8_t>> steps, std::uint32_t check, bool version2)) {
  std::vector<Dev> devs;
  std::uint64_t at = 0;
  for (const auto& [gap, actor] : steps) {
    at += gap % 40;
    devs.push_back({at, actor % 200u});  // mostly letters, some braces
    ++at;
  }
  const Schedule s(devs, check, version2 ? 2 : Schedule::kVersion);
  std::string why;
  const auto back = Schedule::decode(s.encode(), &why);
  RC_ASSERT(back.has_value());
  RC_ASSERT(*back == s);
}

// A schedule of a version no build writes cannot be made.
TEST(Schedule, RefusesAVersionOutsideThoseItReads) {
  EXPECT_THROW(Schedule({}, 0, 1), std::invalid_argument);
  EXPECT_THROW(Schedule({}, 0, Schedule::kVersion + 1), std::invalid_argument);
  EXPECT_EQ(Schedule({}, 0, Schedule::kOldestVersion).version(), Schedule::kOldestVersion);
}
