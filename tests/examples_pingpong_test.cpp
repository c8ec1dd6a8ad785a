// The pingpong example on the emulator: two consumer warp groups that take
// turns on whole tiles of one ring, each stepping past the other's, explore
// clean under every strategy (their waits skip phases, as PTX allows), with
// their waits stating the phase they mean or by parity alone; each broken
// variant is found, by the stated phase or, by parity alone, by the race
// checker on the slot the aliasing wait lets the group read.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "emu_test_util.hpp"
#include "examples/parity_alone.hpp"
#include "examples/pingpong.hpp"
#include "examples/scenarios.hpp"

namespace {

namespace emu = wspipe::emu;
namespace ex = wspipe::examples;
using wspipe::test::contains;
using wspipe::test::ends_with;

// The scenario's kernel for `variant`, its options the defaults but for `given`.
emu::KernelFactory pingpong(const std::string& variant, const std::map<std::string, std::uint64_t>& given = {}) {
  const emu::Scenario* s = ex::find_scenario("pingpong");
  emu::OptionValues values;
  for (const auto& o : s->options) values[o.name] = o.def;
  for (const auto& v : s->variants)
    if (v.name == variant)
      for (const auto& [k, x] : v.pinned) values[k] = x;
  for (const auto& [k, x] : given) values[k] = x;
  return [s, variant, values] { return s->prepare(variant, values); };
}

emu::ExploreOptions strategy(emu::StrategyKind kind, std::uint32_t pct_depth = 3) {
  emu::ExploreOptions o = wspipe::test::fixed_runs(150);
  o.portfolio = {{kind, pct_depth}};
  return o;
}

const std::map<std::string, std::uint64_t> kParityAlone = {{"waits", 1}};

TEST(examples_PingPong, CorrectKernelIsCleanUnderTheDefaultPortfolioRandomAndPct) {
  for (const auto& waits : {std::map<std::string, std::uint64_t>{}, kParityAlone}) {
    SCOPED_TRACE(waits.empty() ? "stated phases" : "parity alone");
    const auto make = pingpong("", waits);
    EXPECT_TRUE(emu::explore(make, wspipe::test::fixed_runs(150)).ok());
    EXPECT_TRUE(emu::explore(make, strategy(emu::StrategyKind::random)).ok());
    EXPECT_TRUE(emu::explore(make, strategy(emu::StrategyKind::pct, 5)).ok());
  }
}

TEST(examples_PingPong, CorrectKernelIsCleanUnderEveryShapeOfRing) {
  // Tiles shorter and longer than the ring, a ring of one slot, groups of
  // one and four warps: every skip lands on the current or previous phase.
  for (const std::map<std::string, std::uint64_t>& c :
       {std::map<std::string, std::uint64_t>{{"stages", 1}, {"k-blocks", 2}},
        {{"stages", 4}, {"k-blocks", 1}, {"tiles", 7}},
        {{"stages", 3}, {"k-blocks", 5}, {"group-warps", 1}},
        {{"stages", 2}, {"k-blocks", 6}, {"group-warps", 4}, {"tiles", 3}}}) {
    SCOPED_TRACE(std::to_string(c.at("stages")) + " stages, " + std::to_string(c.at("k-blocks")) + " items per tile");
    const auto r = emu::explore(pingpong("", c), wspipe::test::fixed_runs(60));
    EXPECT_TRUE(r.ok()) << r.report();
  }
}

TEST(examples_PingPong, CorrectKernelIsCleanInEveryScheduleWithinTwoPreemptions) {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.preemptions = 2;
  o.seconds = 0;
  const auto r = emu::explore(pingpong("", {{"tiles", 3}, {"k-blocks", 2}, {"group-warps", 1}}), o);
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_TRUE(r.complete);
}

// The variant's bug is found as mbarrier.parity-alias, at a wait of the
// kernel, with a message that says `why`.
void expect_alias_at_the_wait(const std::string& variant, const std::string& why) {
  const auto r = emu::explore(pingpong(variant), wspipe::test::fixed_runs(500));
  ASSERT_FALSE(r.ok());
  const emu::Violation& v = r.failure->result.violations.at(0);
  EXPECT_EQ(v.rule, "mbarrier.parity-alias");
  EXPECT_TRUE(ends_with(v.file, "examples/pingpong.hpp")) << v.file;
  EXPECT_TRUE(contains(v.message, why)) << v.message;
}

TEST(examples_PingPong, GroupsThatDoNotTakeTurnsAreFoundAtTheWait) {
  // A group waits for its next tile's phase before the other group's tile
  // went through the ring.
  expect_alias_at_the_wait("no-turns", "that phase has not begun");
}

TEST(examples_PingPong, WithParityAloneTheAliasingWaitIsFoundByWhatItReads) {
  // The same bug, the waits by parity alone: a group's wait passes on an
  // earlier phase and it reads a slot whose item is not there yet. The
  // kernel's own check of each item sees it first...
  const auto checked = emu::explore(pingpong("no-turns", kParityAlone), wspipe::test::fixed_runs(500));
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.failure->outcome, "kernel.check") << checked.report();
  // ... and without it the race checker does, where the producer writes
  // the slot after the group read it (its write is not ordered with that
  // read); under other schedules the group's release of the slot lands
  // before anyone observed the phase it completed, PTX's usage rule.
  std::map<std::string, int> outcomes;
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    std::vector<std::uint32_t> out(4);
    emu::LaunchConfig launch;
    launch.warps_per_cta = ex::pingpong_warps(2);
    launch.smem_bytes = sizeof(ex::PingPongStorage<2>);
    const auto r = emu::run(
        launch,
        [&out] {
          ex::pingpong_kernel<ex::ParityAloneBackend, 2>({.tiles = 4,
                                                          .k_blocks = 3,
                                                          .group_warps = 2,
                                                          .out = out.data(),
                                                          .bug = ex::PingPongBug::no_turns,
                                                          .check_items = false});
        },
        wspipe::test::with_strategy(emu::StrategyKind::random, seed));
    ++outcomes[emu::outcome(r)];
  }
  EXPECT_GT(outcomes["race.smem"], 0);
  EXPECT_EQ(outcomes["race.smem"] + outcomes["mbarrier.arrive-before-wait"], 64);
}

TEST(examples_PingPong, AGroupThatNeverSkipsIsFoundAtItsFirstWaitAfterTheOtherGroupsTile) {
  expect_alias_at_the_wait("no-skip", "the barrier is already in phase");
}

TEST(examples_PingPong, EarlyReleaseIsARace) {
  for (const auto& waits : {std::map<std::string, std::uint64_t>{}, kParityAlone}) {
    const auto r = emu::explore(pingpong("release-early", waits), wspipe::test::fixed_runs(20));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure->outcome, "race.smem") << r.report();
  }
}

TEST(examples_PingPong, TheChecksumsAreTheReference) {
  // A tile's checksum covers every word of its items, in any order.
  std::uint32_t sum = 0;
  for (std::uint32_t k = 0; k < 3; ++k)
    for (std::uint32_t w = 0; w < ex::kPingPongWords; ++w) sum += ex::pingpong_word(2 * 3 + k, w);
  EXPECT_EQ(ex::pingpong_checksum(2, 3), sum);
  EXPECT_NE(ex::pingpong_checksum(2, 3), ex::pingpong_checksum(3, 3));
}

}  // namespace
