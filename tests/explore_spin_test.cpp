// Time-outs in a row (RunOptions::spin_out_limit): a warp let time out again
// at the try_wait it just timed out at spins out, until it leaves the loop
// or the limit runs out. A counted spin's fallback is then reached by the
// complete search and the sampled strategies whatever its count of tries,
// and a loop that spins forever keeps the search finite.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/emu/emu.hpp"
#include "core/smem.hpp"
#include "backends/emu/testing/gtest.hpp"
#include "emu_test_util.hpp"

namespace wspipe {
namespace {

using test::B;
using test::contains;
using test::elected_arrive;
using test::init_bar;

struct SlotSmem {
  SharedMemBarrier full;
  std::int32_t slot;
};

// The producer writes the slot and arrives on `full`. The consumer polls
// `full` `tries` times and, if every try timed out, takes a fallback that
// reads the slot anyway: on a GPU the producer can be late by any amount,
// so the fallback reads a slot being written (race.smem). tries 0: a pure
// spin, polling until the phase completes (correct).
void fallback_kernel(std::uint32_t tries) {
  auto& s = B::shared_storage<SlotSmem>();
  if (B::warp_idx() == 0) {
    init_bar(s.full, 1, "full");
    B::fence_init();
  }
  B::cluster_sync();
  // Through a view: its accesses are checked in every build, the sanitizer
  // presets' (whose plain accesses are not instrumented) included.
  const SmemView<B, std::int32_t> slot(&s.slot, 1);
  if (B::warp_idx() == 1) {
    slot.store(0, 42);
    elected_arrive(s.full);
    return;
  }
  bool got = false;
  if (tries == 0) {
    while (!B::try_wait(s.full, 0)) {
    }
    got = true;
  } else {
    for (std::uint32_t t = 0; t < tries && !got; ++t) got = B::try_wait(s.full, 0);
  }
  const std::int32_t v = slot.load(0);  // the fallback reads it whether or not the wait passed
  B::check(!got || v == 42, "the slot holds the item once the wait passed");
}

emu::KernelFactory fallback(std::uint32_t tries) {
  return [=] {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.warp_roles = {"consumer", "producer"};
    k.launch.smem_bytes = sizeof(SlotSmem);
    k.body = [=] { fallback_kernel(tries); };
    return k;
  };
}

emu::ExploreOptions complete_search() {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.seconds = 0;
  o.jobs = 1;
  return o;
}

// The complete search finds the fallback's race whatever the count of
// tries, up to the limit; with one more try than the limit, it verifies,
// saying what it assumed; a higher limit finds it again.
TEST(explore_Spin, TheCompleteSearchReachesACountedSpinsFallbackForAnyCount) {
  for (const std::uint32_t tries : {1u, 2u, 4u, 100u, 1024u}) {
    SCOPED_TRACE(std::to_string(tries) + " tries");
    const emu::ExploreResult r = emu::explore(fallback(tries), complete_search());
    ASSERT_TRUE(r.failure.has_value()) << r.runs << " runs";
    EXPECT_EQ(r.failure->outcome, "race.smem");
    EXPECT_LE(r.runs, emu::kSingleTimeOuts + 3);  // a run per time-out in a row, and the spin
    // Its replay reproduces it.
    const emu::RunResult again = emu::replay(fallback(tries)(), r.failure->result.schedule, complete_search());
    ASSERT_FALSE(again.violations.empty());
    EXPECT_EQ(again.violations.front().rule, "race.smem");
  }
  emu::ExploreOptions o = complete_search();
  const emu::ExploreResult beyond = emu::explore(fallback(1025), o);
  EXPECT_EQ(beyond.verdict(), emu::Verdict::verified);
  bool named = false;
  for (const std::string& a : beyond.assumptions)
    named = named || contains(a, "a try_wait loop still spinning after 1024 time-outs in a row");
  EXPECT_TRUE(named);
  o.spin_out_limit = 2048;
  const emu::ExploreResult found = emu::explore(fallback(1025), o);
  ASSERT_TRUE(found.failure.has_value());
  EXPECT_EQ(found.failure->outcome, "race.smem");
  // Its replay line carries the limit.
  EXPECT_EQ(found.failure->result.spin_out_limit, 2048u);
}

// Every time-out a step of its own (what schedules of version 4 replay
// with) is refused for an exploration: a search would branch on a pure
// spin's time-outs forever.
TEST(explore_Spin, EveryTimeOutAStepOfItsOwnIsRefusedForAnExploration) {
  emu::ExploreOptions o = complete_search();
  o.spin_out_limit = 0;
  EXPECT_THROW((void)emu::explore(fallback(2), o), std::invalid_argument);
}

// A loop that polls until its phase completes is correct, and its search
// ends: the spin that runs out is taken to go on until the phase
// completes, and its time-outs change nothing.
TEST(explore_Spin, APureSpinIsVerifiedAndItsSearchEnds) {
  const emu::ExploreResult r = emu::explore(fallback(0), complete_search());
  EXPECT_EQ(r.verdict(), emu::Verdict::verified) << (r.failure ? r.failure->outcome : "");
  EXPECT_TRUE(r.complete);
  EXPECT_LE(r.runs + r.pruned, 8u);
  // Without the reduction, every schedule: still finite.
  emu::ExploreOptions every = complete_search();
  every.reduce = false;
  const emu::ExploreResult all = emu::explore(fallback(0), every);
  EXPECT_EQ(all.verdict(), emu::Verdict::verified);
  EXPECT_LE(all.runs, 512u);
}

// The sampled strategies reach the fallback too: a warp let time out
// kSingleTimeOuts + 1 times in a row spins out there.
TEST(explore_Spin, TheDefaultPortfolioReachesACountedSpinsFallback) {
  emu::ExploreOptions o;
  o.runs = 2000;
  o.seconds = 0;
  o.jobs = 1;
  const emu::ExploreResult r = emu::explore(fallback(100), o);
  ASSERT_TRUE(r.failure.has_value());
  EXPECT_EQ(r.failure->outcome, "race.smem");
}

// A spin is one step: its trace shows the single time-outs before it and
// the one that began it, not each of the 96 after (a spin that runs out
// records its last one too).
TEST(explore_Spin, ASpinOutIsOneStep) {
  emu::RunOptions o;
  o.strategy.kind = emu::StrategyKind::custom;
  struct SpinTwice final : emu::Strategy {
    // The consumer (warp 0) whenever it can move, timing out at most
    // kSingleTimeOuts + 1 times.
    std::uint32_t timeouts = 0;
    std::optional<std::uint32_t> pick(const emu::Choice& c) override {
      if (c.n > 0 && c.enabled[0] == 0 && (c.spin == nullptr || c.spin[0] == 0)) return 0u;
      if (c.n > 0 && c.enabled[0] == 0 && timeouts < emu::kSingleTimeOuts + 1) {
        ++timeouts;
        return 0u;
      }
      return c.preferred;
    }
  };
  SpinTwice strategy;
  o.strategy.shared = &strategy;
  const emu::RunResult r = emu::run(fallback(100)(), o);
  ASSERT_FALSE(r.violations.empty());
  EXPECT_EQ(r.violations.front().rule, "race.smem");
  std::uint32_t try_waits = 0;
  for (const auto& e : r.trace.events) try_waits += e.kind == emu::EventKind::try_wait ? 1 : 0;
  EXPECT_EQ(try_waits, emu::kSingleTimeOuts + 1);
  EXPECT_LT(r.steps, 20u);
}

}  // namespace
}  // namespace wspipe
