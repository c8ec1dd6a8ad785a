// pipeline3's tests, through wspipe::testing: random and PCT exploration,
// a bounded exhaustive search, a rapidcheck property over the
// configuration, and the planted bugs found.
//
// The environment tunes every exploration that takes its options from
// wspipe::testing::options(): WSPIPE_SECONDS=60 for a longer soak,
// WSPIPE_STRATEGY=pct:5, and WSPIPE_REPLAY / WSPIPE_TRACE to replay the
// schedule a failure prints (see backends/emu/testing/gtest.hpp).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fstream>
#include <string>

#include "backends/emu/testing/gtest.hpp"
#include "backends/emu/testing/rapidcheck.hpp"
#include "pipeline3_emu.hpp"

namespace {

namespace emu = wspipe::emu;
using pipeline3::Bug;
using pipeline3::Config;
using pipeline3::make_factory;

emu::ExploreOptions with_portfolio(const char* portfolio) {
  emu::ExploreOptions o;
  std::string error;
  o.portfolio = emu::parse_portfolio(portfolio, &error).value();
  return wspipe::testing::options(o);  // then the environment, which may replace the portfolio
}

TEST(Pipeline3, CleanUnderRandomAndPct) {
  for (int stages : {1, 2, 4})
    WSPIPE_EXPECT_CLEAN(make_factory({.stages = stages, .items = 24}), with_portfolio("random,pct:2,pct:3,pct:5"))
        << "stages " << stages;
}

// Every schedule within two preemptions (up to commuting steps), on a
// configuration small enough to cover.
TEST(Pipeline3, CleanWithinTwoPreemptionsExhaustively) {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.preemptions = 2;
  o.seconds = 120;  // a safety net: the search ends well before
  for (int stages : {1, 2}) {
    const emu::ExploreResult r = emu::explore(make_factory({.stages = stages, .items = 3}), o);
    EXPECT_TRUE(r.ok()) << r.report();
    EXPECT_TRUE(r.complete) << "stages " << stages << ": " << r.report();
  }
}

// Every class of equivalent schedules (dynamic partial-order reduction, no
// bound): a verdict for the whole configuration, or a failing test.
TEST(Pipeline3, EverySchedule) {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};  // no bound: every class of schedules
  o.seconds = 60;                                    // incomplete after that: the test fails
  WSPIPE_EXPECT_VERIFIED(make_factory({.stages = 2, .items = 8}), o);
}

// rapidcheck draws the configuration, and rc_explore_clean the strategy and
// the seed: a counterexample shrinks to the smallest configuration and seed,
// each value under its label.
RC_GTEST_PROP(Pipeline3, CleanForAnyConfiguration, ()) {
  const Config c{.stages = *rc::gen::inRange(1, pipeline3::kMaxStages + 1).as("stages"),
                 .items = *rc::gen::inRange<std::uint32_t>(0, 33).as("items"),
                 .key = *rc::gen::arbitrary<std::uint32_t>().as("key")};
  wspipe::testing::rc_explore_clean(make_factory(c));
}

TEST(Pipeline3, PlantedBugsAreFound) {
  // The transformer's read of a freed slot races with the loader's refill:
  // the race checker sees both plain accesses, before a wrong value reaches
  // the writer's check.
  WSPIPE_EXPECT_FINDS("race.smem", make_factory({.stages = 2, .items = 16, .bug = Bug::early_release}));
  WSPIPE_EXPECT_FINDS("mbarrier.over-arrival", make_factory({.stages = 2, .items = 16, .bug = Bug::unelected_arrive}));
}

// Lanes 0 and 31 of every warp agree at each wait and collective: the
// transformer's elected release steps the cursor for the whole warp.
TEST(Pipeline3, LanesAgree) {
  emu::ExploreOptions o = wspipe::testing::options();
  o.lane_divergence = true;
  WSPIPE_EXPECT_CLEAN(make_factory({.stages = 2, .items = 16}), o);
}

// The early release is a race whatever the order of the two accesses, so
// the exhaustive search finds it on its first schedule.
TEST(Pipeline3, EarlyReleaseFoundWithinOnePreemption) {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.preemptions = 1;
  o.seconds = 120;
  WSPIPE_EXPECT_FINDS("race.smem", make_factory({.stages = 1, .items = 2, .bug = Bug::early_release}), o);
}

// The line of pipeline3.hpp that holds `text` ("pipeline3.hpp:N").
std::string line_of(const std::string& text) {
  std::ifstream in(std::string(PIPELINE3_SOURCE_DIR) + "/pipeline3.hpp");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(text) != std::string::npos) return "pipeline3.hpp:" + std::to_string(n);
  return "(" + text + " is not in pipeline3.hpp)";
}

// With no check of the data anywhere, in the kernel or after the run, the
// early release is still found: the race checker sees the plain accesses
// of the compiled kernel (wspipe::emu instruments them), and the report
// names both lines, the read of the freed slot and the loader's refill.
TEST(Pipeline3, EarlyReleaseIsARaceWithoutAnyDataCheck) {
  const emu::ExploreResult r =
      emu::explore(make_factory({.stages = 2, .items = 16, .bug = Bug::early_release, .check = false}),
                   wspipe::testing::options());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->outcome, "race.smem") << r.report();
  EXPECT_NE(r.report().find(line_of("the bug: freed two lines up")), std::string::npos) << r.report();
  EXPECT_NE(r.report().find(line_of("smem.in_slot[slot.index()] = p.input[i];")), std::string::npos) << r.report();
  WSPIPE_EXPECT_CLEAN(make_factory({.stages = 2, .items = 16, .check = false}));
}

// One exploration split over GoogleTest's shards (GTEST_TOTAL_SHARDS, as
// `ctest` or a CI matrix sets it): tests Pipeline3Sharded.Clean/shard_K_of_N.
emu::ExploreOptions three_hundred_runs() {
  emu::ExploreOptions o;
  o.runs = 300;
  o.seconds = 0;
  return o;
}
WSPIPE_EXPLORATION_TEST(Pipeline3Sharded, Clean, make_factory({.stages = 3, .items = 32}), three_hundred_runs());

}  // namespace

// wspipe::testing brings GoogleTest; the program's main is the usual one.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
