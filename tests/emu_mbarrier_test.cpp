// The emulator's mbarrier model: every rule it checks fires on the bug and
// stays quiet on correct use (docs/hardware.md), and the phase / parity /
// tx-count semantics hold. Each kernel is tiny; where a rule depends on the
// schedule, the test sweeps seeds and asserts both outcomes occur.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::BarrierName;
using wspipe::SharedMemBarrier;
using wspipe::test::B;
using wspipe::test::outcome;
using wspipe::test::run_kernel;

struct Bars {
  SharedMemBarrier b[8];
};
constexpr std::size_t kSmem = sizeof(Bars);
constexpr std::uint32_t kMaxCount = (1u << 20) - 1;

using wspipe::test::contains;
using wspipe::test::elected_arrive;
using wspipe::test::init_bar;

const emu::Event* find_event(const emu::RunResult& r, emu::EventKind k) {
  for (const auto& e : r.trace.events)
    if (e.kind == k) return &e;
  return nullptr;
}

// ------------------------------------------------------------ over-arrival

TEST(emu_MbarOverArrival, WarpLevelArriveOnCountOneFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        line = __LINE__; B::arrive(s.b[0]);  // 32 arrivals, 1 pending
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.over-arrival", line);
  EXPECT_EQ(r.violations[0].warp, "cta0/w0");
  EXPECT_EQ(r.violations[0].object, "bar (cta0)");
  EXPECT_TRUE(contains(r.violations[0].message, "arrive of 32")) << r.violations[0].message;
}

TEST(emu_MbarOverArrival, WarpLevelArriveWith22PendingFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 22);
        line = __LINE__; B::arrive(s.b[0]);
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.over-arrival", line);
  EXPECT_TRUE(contains(r.violations[0].message, "only 22 of 22")) << r.violations[0].message;
}

TEST(emu_MbarOverArrival, ElectedArriveIsQuietAndCompletesThePhase) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        elected_arrive(s.b[0]);
        B::wait(s.b[0], 0);  // deadlocks unless the single arrival completed phase 0
      },
      {}, kSmem);
  EXPECT_OK(r);
}

TEST(emu_MbarOverArrival, WarpLevelArriveWithExactly32PendingCompletesThePhase) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 64);
        B::arrive(s.b[0]);  // 32 of 64
        line = __LINE__; B::arrive(s.b[0]);  // exactly 32 pending: completes
        B::wait(s.b[0], 0);
      },
      {}, kSmem);
  EXPECT_OK(r);
  const emu::Event* ph = find_event(r, emu::EventKind::phase);
  ASSERT_NE(ph, nullptr);
  EXPECT_EQ(ph->a, 1);
  EXPECT_EQ(ph->line, line);  // the second arrive completed it, not the first
}

TEST(emu_MbarOverArrival, ForEachLaneArrivesCountOneEach) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 32);
        B::for_each_lane([&](std::uint32_t) { B::arrive(s.b[0]); });
        B::wait(s.b[0], 0);
      },
      {}, kSmem);
  EXPECT_OK(r);
  // With count 31 the 32nd single arrival lands in phase 1 before anyone
  // observed phase 0: not an over-arrival (it fits phase 1), but the usage rule.
  std::uint32_t line = 0;
  auto r31 = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 31);
        B::for_each_lane([&](std::uint32_t) { line = __LINE__; B::arrive(s.b[0]); });
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r31, "mbarrier.arrive-before-wait", line);
}

// ------------------------------------------------------------ init-live

TEST(emu_MbarInitLive, ReinitWithoutInvalFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        B::elect_one([&] {
          B::init(s.b[0], 1, BarrierName{"bar"});
          line = __LINE__; B::init(s.b[0], 1, BarrierName{"bar"});
        });
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.init-live", line);
  EXPECT_EQ(r.violations[0].object, "bar (cta0)");
}

TEST(emu_MbarInitLive, InitInvalInitIsQuietAndTakesTheNewCount) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        B::elect_one([&] {
          B::init(s.b[0], 1, BarrierName{"bar"});
          B::inval(s.b[0]);
          B::init(s.b[0], 2, BarrierName{"bar"});
        });
        // Count 2 now: the first arrival must not complete the phase (with
        // count 1 still in force, the second would be arrive-before-wait).
        elected_arrive(s.b[0]);
        elected_arrive(s.b[0]);
        B::wait(s.b[0], 0);
      },
      {}, kSmem);
  EXPECT_OK(r);
}

TEST(emu_MbarInitLive, WarpLevelInitFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        line = __LINE__; B::init(s.b[0], 1, BarrierName{"bar"});  // 32 lanes each init
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.init-live", line);
  EXPECT_TRUE(contains(r.violations[0].message, "32 lanes")) << r.violations[0].message;
}

// ------------------------------------------------------------ count-range

emu::RunResult init_with_count(std::uint32_t count, std::uint32_t* line) {
  return run_kernel(
      1,
      [=] {
        auto& s = B::shared_storage<Bars>();
        B::elect_one([&] { *line = __LINE__; B::init(s.b[0], count, BarrierName{"bar"}); });
      },
      {}, kSmem);
}

TEST(emu_MbarCountRange, ZeroAndTwoToTheTwentyFire) {
  for (std::uint32_t count : {0u, 1u << 20, ~0u}) {
    SCOPED_TRACE(count);
    std::uint32_t line = 0;
    auto r = init_with_count(count, &line);
    EXPECT_VIOLATION_AT(r, "mbarrier.count-range", line);
    EXPECT_EQ(r.violations[0].object, "bar (cta0)");
  }
}

TEST(emu_MbarCountRange, OneAndTwoToTheTwentyMinusOneAreQuiet) {
  for (std::uint32_t count : {1u, kMaxCount}) {
    SCOPED_TRACE(count);
    std::uint32_t line = 0;
    auto r = init_with_count(count, &line);
    EXPECT_OK(r);
  }
}

// ------------------------------------------------------------ uninitialized

TEST(emu_MbarUninitialized, ArriveOnNeverInitialisedBarrierFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        B::elect_one([&] { line = __LINE__; B::arrive(s.b[1]); });
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.uninitialized", line);
  EXPECT_EQ(r.violations[0].object, "mbarrier at smem+0x8 (cta0)");
}

TEST(emu_MbarUninitialized, WaitOnNeverInitialisedBarrierFires) {
  // Parity 1 would pass at once on a fresh barrier: the check must not rely
  // on the wait blocking.
  for (bool is_try : {false, true}) {
    std::uint32_t line = 0;
    auto r = run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<Bars>();
          if (is_try) {
            line = __LINE__; (void)B::try_wait(s.b[0], 1);
          } else {
            line = __LINE__; B::wait(s.b[0], 1);
          }
        },
        {}, kSmem);
    EXPECT_VIOLATION_AT(r, "mbarrier.uninitialized", line);
  }
}

TEST(emu_MbarUninitialized, ExpectTxOnNeverInitialisedBarrierFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        B::elect_one([&] { line = __LINE__; B::expect_tx(s.b[0], 64); });
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.uninitialized", line);
}

TEST(emu_MbarUninitialized, ArriveAndWaitAfterInvalFire) {
  for (bool wait : {false, true}) {
    SCOPED_TRACE(wait ? "wait" : "arrive");
    std::uint32_t line = 0;
    auto r = run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<Bars>();
          init_bar(s.b[0], 1);
          B::elect_one([&] { B::inval(s.b[0]); });
          if (wait) {
            line = __LINE__; B::wait(s.b[0], 1);
          } else {
            B::elect_one([&] { line = __LINE__; B::arrive(s.b[0]); });
          }
        },
        {}, kSmem);
    EXPECT_VIOLATION_AT(r, "mbarrier.uninitialized", line);
  }
}

TEST(emu_MbarUninitialized, OverwrittenBytesFire) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        s.b[0].raw = 0;  // an ordinary store over the barrier
        B::elect_one([&] { line = __LINE__; B::arrive(s.b[0]); });
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.uninitialized", line);
}

// ------------------------------------------------------------ not-shared

TEST(emu_MbarNotShared, BarrierOnTheFiberStackFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        SharedMemBarrier local{};
        B::elect_one([&] { line = __LINE__; B::init(local, 1, BarrierName{"local"}); });
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.not-shared", line);
  EXPECT_EQ(r.violations[0].object, "mbarrier outside shared memory");
}

TEST(emu_MbarNotShared, BarrierOnTheHeapFires) {
  for (int op = 0; op < 3; ++op) {
    SCOPED_TRACE(op);
    std::uint32_t line = 0;
    auto r = run_kernel(
        1,
        [&] {
          auto heap = std::make_unique<SharedMemBarrier>();
          heap->raw = 0;
          if (op == 0) B::elect_one([&] { line = __LINE__; B::arrive(*heap); });
          if (op == 1) { line = __LINE__; B::wait(*heap, 1); }
          if (op == 2) B::elect_one([&] { line = __LINE__; B::expect_tx(*heap, 8); });
        },
        {}, kSmem);
    EXPECT_VIOLATION_AT(r, "mbarrier.not-shared", line);
  }
}

TEST(emu_MbarNotShared, LocalArriveOnAnotherCtasSharedMemoryFires) {
  // A local arrive must name this CTA's shared memory; the peer's barrier is
  // reached only through arrive_remote.
  SharedMemBarrier* cta0_bar = nullptr;
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        if (B::cta_rank() == 0) {
          cta0_bar = &s.b[0];
          init_bar(s.b[0], 1);
          B::fence_init();
        }
        B::cluster_sync();
        if (B::cta_rank() == 1) {
          B::elect_one([&] { line = __LINE__; B::arrive(*cta0_bar); });
        } else {
          B::wait(s.b[0], 0);
        }
      },
      {}, kSmem, 2);
  EXPECT_VIOLATION_AT(r, "mbarrier.not-shared", line);
  EXPECT_EQ(r.violations[0].warp, "cta1/w0");
}

// ------------------------------------------------------------ tx-range

TEST(emu_MbarTxRange, ExpectTxBeyondLimitFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        B::elect_one([&] { line = __LINE__; B::expect_tx(s.b[0], 1u << 20); });
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.tx-range", line);
  EXPECT_EQ(r.violations[0].object, "bar (cta0)");
  EXPECT_TRUE(contains(r.violations[0].message, "1048576")) << r.violations[0].message;
}

TEST(emu_MbarTxRange, WarpLevelExpectTxCountsEveryLane) {
  // 40000 bytes is in range for one lane; 32 lanes expect 1,280,000.
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        line = __LINE__; B::expect_tx(s.b[0], 40000);
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.tx-range", line);
  EXPECT_TRUE(contains(r.violations[0].message, "1280000")) << r.violations[0].message;
}

TEST(emu_MbarTxRange, ArriveExpectTxAndCompleteTxBeyondLimitFire) {
  for (bool complete : {false, true}) {
    SCOPED_TRACE(complete ? "complete_tx" : "arrive_expect_tx");
    std::uint32_t line = 0;
    auto r = run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<Bars>();
          init_bar(s.b[0], 1);
          B::elect_one([&] {
            if (complete) {
              line = __LINE__; B::complete_tx(s.b[0], 1u << 20);
            } else {
              line = __LINE__; B::arrive_expect_tx(s.b[0], 1u << 20);
            }
          });
        },
        {}, kSmem);
    EXPECT_VIOLATION_AT(r, "mbarrier.tx-range", line);
  }
}

TEST(emu_MbarTxRange, LimitItselfIsQuietBothWays) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        init_bar(s.b[1], 1, "neg");
        B::elect_one([&] {
          B::expect_tx(s.b[0], kMaxCount);
          B::complete_tx(s.b[0], kMaxCount);
          B::complete_tx(s.b[1], kMaxCount);
          B::expect_tx(s.b[1], kMaxCount);
        });
      },
      {}, kSmem);
  EXPECT_OK(r);
}

// ------------------------------------------------------------ arrive-before-wait

TEST(emu_MbarArriveBeforeWait, ArriveIntoNextPhaseWithoutWaitFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        elected_arrive(s.b[0]);  // completes phase 0
        B::elect_one([&] { line = __LINE__; B::arrive(s.b[0]); });  // lands in phase 1 unseen
      },
      {}, kSmem);
  EXPECT_VIOLATION_AT(r, "mbarrier.arrive-before-wait", line);
  EXPECT_EQ(r.violations[0].object, "bar (cta0)");
  EXPECT_TRUE(contains(r.violations[0].message, "phase 1")) << r.violations[0].message;
}

TEST(emu_MbarArriveBeforeWait, WaitInBetweenIsQuiet) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        for (std::uint32_t k = 0; k < 5; ++k) {
          elected_arrive(s.b[0]);
          B::wait(s.b[0], k & 1u);
        }
      },
      {}, kSmem);
  EXPECT_OK(r);
}

TEST(emu_MbarArriveBeforeWait, SuccessfulTryWaitCountsAsTheWait) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        elected_arrive(s.b[0]);
        B::check(B::try_wait(s.b[0], 0), "phase 0 completed");
        elected_arrive(s.b[0]);
      },
      {}, kSmem);
  EXPECT_OK(r);
}

TEST(emu_MbarArriveBeforeWait, AnotherWarpsWaitCounts) {
  // The rule is "some wait observed the phase", not "the arriving warp's".
  auto r = run_kernel(
      2,
      [&] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) {
          init_bar(s.b[0], 1, "b");
          init_bar(s.b[1], 1, "c");
        }
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          elected_arrive(s.b[0]);
          B::wait(s.b[1], 0);  // warp 1 observed phase 0 of b
          elected_arrive(s.b[0]);
        } else {
          B::wait(s.b[0], 0);
          elected_arrive(s.b[1]);
        }
      },
      {}, kSmem);
  EXPECT_OK(r);
}

// ------------------------------------------------------------ parity-alias

// A wait answers as PTX defines it, from the barrier's parity alone; it is
// checked against a phase only where the kernel states the one it means
// (PhaseNumber, as PipelineState passes it). `stated`: warp 0's waits say
// which phase they mean.

// A deadlock in which warp 0 alone is blocked, at `line`, in state `state`.
void expect_waiter_hangs(const emu::RunResult& r, std::uint32_t line, const std::string& state) {
  ASSERT_EQ(outcome(r), "deadlock") << r.report();
  ASSERT_EQ(r.blocked.size(), 1u) << r.report();
  EXPECT_EQ(r.blocked[0].warp, "cta0/w0");
  EXPECT_EQ(r.blocked[0].line, line);
  EXPECT_TRUE(contains(r.blocked[0].state, state)) << r.blocked[0].state;
}

// Warp 0 observes phase 0 of b, then falls behind while warp 1 drives b
// through `phases` completions (observing each itself); then warp 0 waits
// for parity 1, meaning phase 1.
emu::RunResult behind_kernel(std::uint32_t phases, bool stated, std::uint32_t* line) {
  return run_kernel(
      2,
      [=] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) init_bar(s.b[0], 1, "b");
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          B::wait(s.b[0], 0);          // observes phase 0
          B::named_sync(2, 64);        // releases warp 1
          B::named_sync(1, 64);        // warp 1 is done
          *line = __LINE__; stated ? B::wait(s.b[0], 1, wspipe::PhaseNumber{1}) : B::wait(s.b[0], 1);
        } else {
          elected_arrive(s.b[0]);      // phase 0 completes
          B::named_sync(2, 64);        // warp 0 has observed it
          B::wait(s.b[0], 0);
          for (std::uint32_t k = 1; k < phases; ++k) {
            elected_arrive(s.b[0]);
            B::wait(s.b[0], k & 1u);
          }
          B::named_sync(1, 64);
        }
      },
      {}, kSmem);
}

TEST(emu_MbarParityAlias, StatedPhaseTwoBehindFires) {
  // b has completed phases 0, 1 and 2 (it is in phase 3, parity 1): parity 1
  // now names the current, incomplete phase 3, not phase 1.
  std::uint32_t line = 0;
  auto r = behind_kernel(3, true, &line);
  EXPECT_VIOLATION_AT(r, "mbarrier.parity-alias", line);
  EXPECT_EQ(r.violations[0].warp, "cta0/w0");
  EXPECT_EQ(r.violations[0].object, "b (cta0)");
  EXPECT_TRUE(contains(r.violations[0].message, "wait for phase 1 (parity 1): the barrier is already in phase 3"))
      << r.violations[0].message;
}

TEST(emu_MbarParityAlias, ParityAloneTwoBehindWaitsForTheCurrentPhase) {
  // The same wait without a stated phase is what silicon runs: parity 1
  // names phase 3, which nothing completes. The bug shows as the deadlock
  // it is on hardware, at the wait, with the phase its parity names.
  std::uint32_t line = 0;
  const auto r = behind_kernel(3, false, &line);
  expect_waiter_hangs(r, line, "waits for parity 1 (phase 3); the barrier is in phase 3");
}

TEST(emu_MbarParityAlias, WaiterOnePhaseBehindIsQuiet) {
  // b is in phase 2: parity 1 still names the previous phase 1, which completed.
  for (const bool stated : {false, true}) {
    std::uint32_t line = 0;
    auto r = behind_kernel(2, stated, &line);
    EXPECT_OK(r);
  }
}

// Ping-pong in miniature: warp 0 consumes phase 0 of b, skips phases 1 and
// 2 (warp 1's), and then waits for phase `want`, which is the barrier's
// previous (2: it passes at once) or current phase (3: it blocks until
// warp 1 completes it). Skipping phases is legal PTX as long as the phase
// waited for is one of those two.
emu::Kernel skip_kernel(std::int64_t want, bool stated) {
  emu::Kernel k;
  k.launch.warps_per_cta = 2;
  k.launch.smem_bytes = kSmem;
  k.body = [=] {
    auto& s = B::shared_storage<Bars>();
    if (B::warp_idx() == 0) init_bar(s.b[0], 1, "b");
    B::cluster_sync();
    const auto parity = static_cast<std::uint32_t>(want & 1);
    if (B::warp_idx() == 0) {
      B::wait(s.b[0], 0, wspipe::PhaseNumber{0});
      B::named_sync(2, 64);  // releases warp 1
      B::named_sync(1, 64);  // b is in phase 3
      stated ? B::wait(s.b[0], parity, wspipe::PhaseNumber{want}) : B::wait(s.b[0], parity);
    } else {
      elected_arrive(s.b[0]);  // phase 0
      B::named_sync(2, 64);
      for (std::int64_t p = 1; p <= 2; ++p) {
        B::wait(s.b[0], static_cast<std::uint32_t>(p - 1) & 1u, wspipe::PhaseNumber{p - 1});
        elected_arrive(s.b[0]);  // phase p
      }
      B::wait(s.b[0], 0, wspipe::PhaseNumber{2});
      B::named_sync(1, 64);
      if (want == 3) elected_arrive(s.b[0]);  // phase 3
    }
  };
  return k;
}

TEST(emu_MbarParityAlias, SkippingPhasesToThePreviousOrCurrentOneIsQuiet) {
  for (const bool stated : {false, true}) {
    for (const std::int64_t want : {2, 3}) {
      SCOPED_TRACE(std::to_string(want) + (stated ? " stated" : " parity alone"));
      // Every schedule within 3 preemptions.
      emu::ExploreOptions o;
      o.portfolio = {{emu::StrategyKind::exhaustive}};
      o.preemptions = 3;
      o.seconds = 0;
      const auto r = emu::explore([=] { return skip_kernel(want, stated); }, o);
      EXPECT_TRUE(r.ok()) << r.report();
      EXPECT_TRUE(r.complete);
    }
  }
}

TEST(emu_MbarParityAlias, StatedPhaseNotYetBegunOrOfTheOtherParityFires) {
  // A fresh barrier is in phase 0. Phase 2 (parity 0) has not begun, and
  // parity 0 names the current phase 0; phase 0 is not a parity-1 phase.
  struct Case {
    std::int64_t phase;
    std::uint32_t parity;
    bool blocking;
    const char* says;
  };
  for (const Case c : {Case{2, 0, true, "wait for phase 2 (parity 0): that phase has not begun (the barrier is in "
                                        "phase 0): parity 0 names phase 0, the current one"},
                       Case{0, 1, false, "wait for phase 0 (parity 1): parity 1 is not that phase's"}}) {
    std::uint32_t line = 0;
    auto r = run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<Bars>();
          init_bar(s.b[0], 1, "b");
          const wspipe::PhaseNumber phase{c.phase};
          line = __LINE__; c.blocking ? B::wait(s.b[0], c.parity, phase) : (void)B::test_wait(s.b[0], c.parity, phase);
        },
        {}, kSmem);
    EXPECT_VIOLATION_AT(r, "mbarrier.parity-alias", line);
    EXPECT_TRUE(contains(r.violations[0].message, c.says)) << r.violations[0].message;
  }
}

TEST(emu_MbarParityAlias, ThePhaseBeforeTheFirstIsCompleteFromTheStart) {
  // A producer's first lap: phase -1, parity 1, passes on a fresh barrier.
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1, "b");
        B::wait(s.b[0], 1, wspipe::PhaseNumber{-1});
        B::check(B::try_wait(s.b[0], 1, wspipe::PhaseNumber{-1}), "phase -1 is complete");
      },
      {}, kSmem);
  EXPECT_OK(r);
}

// Warp 0 blocks on phase 0 of b. Warp 1 completes phase 0, waits until
// warp 2 has observed it (through barrier c), and completes phase 1. If
// the scheduler did not run warp 0 in between, its parity now names the
// current phase 2: it would sleep through the phase it meant.
emu::RunResult blocked_behind_kernel(const emu::RunOptions& opts, bool stated, std::uint32_t* line) {
  return run_kernel(
      3,
      [=] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) {
          init_bar(s.b[0], 1, "b");
          init_bar(s.b[1], 1, "c");
        }
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          B::named_arrive(1, 64);  // the wait below resolves before warp 1 can move on
          *line = __LINE__; stated ? B::wait(s.b[0], 0, wspipe::PhaseNumber{0}) : B::wait(s.b[0], 0);
        } else if (B::warp_idx() == 1) {
          B::named_sync(1, 64);
          elected_arrive(s.b[0]);
          B::wait(s.b[1], 0);
          elected_arrive(s.b[0]);
        } else {
          B::wait(s.b[0], 0);
          elected_arrive(s.b[1]);
        }
      },
      opts, kSmem);
}

// Runs blocked_behind_kernel under random seeds 1-64 and hands each run
// that does not end ok to `check` (with the waiter's line); expects some
// runs of each kind.
void sweep_blocked_behind(bool stated, const std::function<void(const emu::RunResult&, std::uint32_t)>& check) {
  int failed = 0, ok = 0;
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    std::uint32_t line = 0;
    auto r = blocked_behind_kernel(wspipe::test::with_strategy(emu::StrategyKind::random, seed), stated, &line);
    SCOPED_TRACE(seed);
    if (r.status == emu::Status::ok) {
      ++ok;
    } else {
      ++failed;
      check(r, line);
    }
  }
  EXPECT_GT(failed, 0) << "no schedule let warp 1 overtake the waiter";
  EXPECT_GT(ok, 0) << "no schedule ran the waiter in time";
}

TEST(emu_MbarParityAlias, BlockedWaiterOvertakenByTwoPhasesFiresWhereItsPhaseIsStated) {
  sweep_blocked_behind(true, [](const emu::RunResult& r, std::uint32_t line) {
    EXPECT_VIOLATION_AT(r, "mbarrier.parity-alias", line);
    EXPECT_EQ(r.violations[0].warp, "cta0/w0");  // the waiter, not the arriving warp
    EXPECT_EQ(r.violations[0].object, "b (cta0)");
  });
}

TEST(emu_MbarParityAlias, BlockedWaiterOvertakenWithParityAloneSleepsThroughIt) {
  // Without a stated phase the emulator does what silicon may: the waiter
  // missed its phase, its parity names the current one, and it waits on.
  // Nothing completes phase 2 here: the schedules that overtake it deadlock.
  sweep_blocked_behind(false, [](const emu::RunResult& r, std::uint32_t line) {
    expect_waiter_hangs(r, line, "waits for parity 0 (phase 2); the barrier is in phase 2");
  });
}

// ------------------------------------------------------------ tx-pending-at-exit

TEST(emu_MbarTxPendingAtExit, ExpectedBytesNeverDeliveredFires) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        B::elect_one([&] { B::arrive_expect_tx(s.b[0], 128); });
      },
      {}, kSmem);
  ASSERT_EQ(outcome(r), "mbarrier.tx-pending-at-exit") << r.report();
  EXPECT_EQ(r.violations[0].object, "bar (cta0)");
  EXPECT_TRUE(contains(r.violations[0].message, "tx-count 128")) << r.violations[0].message;
}

TEST(emu_MbarTxPendingAtExit, UnexpectedBytesDeliveredFires) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        B::elect_one([&] { B::complete_tx(s.b[0], 64); });
      },
      {}, kSmem);
  ASSERT_EQ(outcome(r), "mbarrier.tx-pending-at-exit") << r.report();
  EXPECT_TRUE(contains(r.violations[0].message, "tx-count -64")) << r.violations[0].message;
}

TEST(emu_MbarTxPendingAtExit, MatchedBytesAreQuiet) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        B::elect_one([&] {
          B::arrive_expect_tx(s.b[0], 128);
          B::complete_tx(s.b[0], 128);
        });
        B::wait(s.b[0], 0);
      },
      {}, kSmem);
  EXPECT_OK(r);
}

TEST(emu_MbarTxPendingAtExit, CheckedWhenTheLastWarpOfTheCtaExits) {
  // Warp 0 arms the barrier and exits; warp 1 delivers the bytes later. The
  // CTA exits with tx 0: nothing to report.
  auto r = run_kernel(
      2,
      [&] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) {
          init_bar(s.b[0], 1);
          B::elect_one([&] { B::arrive_expect_tx(s.b[0], 128); });
          B::named_arrive(1, 64);
        } else {
          B::named_sync(1, 64);
          B::elect_one([&] { B::complete_tx(s.b[0], 128); });
          B::wait(s.b[0], 0);
        }
      },
      {}, kSmem);
  EXPECT_OK(r);
}

// ------------------------------------------------------------ remote (2-CTA cluster)

TEST(emu_MbarRemote, ArriveWithoutFenceInitFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        if (B::cta_rank() == 0) init_bar(s.b[0], 1, "b");  // no fence_init
        B::cluster_sync();
        if (B::cta_rank() == 1) {
          B::elect_one([&] { line = __LINE__; B::arrive_remote(s.b[0], 0); });
        } else {
          B::wait(s.b[0], 0);
        }
      },
      {}, kSmem, 2);
  EXPECT_VIOLATION_AT(r, "mbarrier.remote-init-not-visible", line);
  EXPECT_EQ(r.violations[0].warp, "cta1/w0");
  EXPECT_EQ(r.violations[0].object, "b (cta0)");
  EXPECT_TRUE(contains(r.violations[0].message, "fence_init")) << r.violations[0].message;
}

TEST(emu_MbarRemote, ArriveAfterFenceButBeforeAClusterBarrierFires) {
  // Rank 0 initialises and fences b only after the cluster barrier, then
  // tells rank 1 through rank 1's (properly published) barrier a. No
  // cluster barrier completes after rank 0's fence.
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[1], 1, "a");
        B::fence_init();
        B::cluster_sync();
        if (B::cta_rank() == 0) {
          init_bar(s.b[0], 1, "b");
          B::fence_init();
          B::elect_one([&] { B::arrive_remote(s.b[1], 1); });
          B::wait(s.b[0], 0);
        } else {
          B::wait(s.b[1], 0);
          B::elect_one([&] { line = __LINE__; B::arrive_remote(s.b[0], 0); });
        }
      },
      {}, kSmem, 2);
  EXPECT_VIOLATION_AT(r, "mbarrier.remote-init-not-visible", line);
  EXPECT_TRUE(contains(r.violations[0].message, "no cluster barrier completed")) << r.violations[0].message;
}

TEST(emu_MbarRemote, ArriveAfterFenceInitAndClusterSyncIsQuietAndLandsOnThePeer) {
  // Each CTA arrives on the other's b and waits on its own: a deadlock if
  // the remote arrive landed anywhere but the peer's barrier.
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto r = run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<Bars>();
          init_bar(s.b[0], 1, "b");
          B::fence_init();
          B::cluster_sync();
          const std::uint32_t peer = B::cta_rank() ^ 1u;
          B::elect_one([&] { B::arrive_remote(s.b[0], peer); });
          B::wait(s.b[0], 0);
          B::cluster_sync();  // neither CTA exits while the other may still arrive
        },
        wspipe::test::with_strategy(emu::StrategyKind::random, seed), kSmem, 2);
    EXPECT_OK(r);
    const emu::Event* arrive = find_event(r, emu::EventKind::arrive);
    ASSERT_NE(arrive, nullptr);
    EXPECT_TRUE(arrive->remote);
  }
}

TEST(emu_MbarRemote, ArriveToOwnRankIsALocalArrive) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1, "b");  // no fence needed for the CTA's own use
        B::elect_one([&] { B::arrive_remote(s.b[0], B::cta_rank()); });
        B::wait(s.b[0], 0);
      },
      {}, kSmem, 2);
  EXPECT_OK(r);
}

TEST(emu_MbarRemote, ArriveToAnExitedCtaFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1, "b");
        B::fence_init();
        B::cluster_sync();
        if (B::cta_rank() == 1) {
          B::cluster_sync();  // passes once rank 0 has exited (exited threads do not count)
          B::elect_one([&] { line = __LINE__; B::arrive_remote(s.b[0], 0); });
        }
      },
      {}, kSmem, 2);
  EXPECT_VIOLATION_AT(r, "mbarrier.remote-exited-cta", line);
  EXPECT_EQ(r.violations[0].warp, "cta1/w0");
  EXPECT_TRUE(contains(r.violations[0].object, "cta0")) << r.violations[0].object;
}

TEST(emu_MbarRemote, BadRankFires) {
  for (std::uint32_t ctas : {1u, 2u}) {
    SCOPED_TRACE(ctas);
    std::uint32_t line = 0;
    auto r = run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<Bars>();
          init_bar(s.b[0], 1, "b");
          B::fence_init();
          B::cluster_sync();
          B::elect_one([&] { line = __LINE__; B::arrive_remote(s.b[0], ctas); });
          B::cluster_sync();
        },
        {}, kSmem, ctas);
    EXPECT_VIOLATION_AT(r, "cluster.bad-rank", line);
  }
}

TEST(emu_MbarRemote, RemoteArriveToUninitialisedPeerBarrierFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        B::cluster_sync();
        if (B::cta_rank() == 1) B::elect_one([&] { line = __LINE__; B::arrive_remote(s.b[2], 0); });
        B::cluster_sync();
      },
      {}, kSmem, 2);
  EXPECT_VIOLATION_AT(r, "mbarrier.uninitialized", line);
  EXPECT_EQ(r.violations[0].object, "mbarrier at smem+0x10 (cta0)");
}

// ------------------------------------------------------------ parity semantics

TEST(emu_MbarParity, FreshBarrierPassesParityOneAtOnce) {
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        B::wait(s.b[0], 1);
        B::check(B::try_wait(s.b[0], 1), "try_wait(1) on a fresh barrier");
      },
      {}, kSmem);
  EXPECT_OK(r);
}

TEST(emu_MbarParity, FreshBarrierBlocksParityZero) {
  std::uint32_t line = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        line = __LINE__; B::wait(s.b[0], 0);
      },
      {}, kSmem);
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  ASSERT_EQ(r.blocked.size(), 1u);
  const auto& b = r.blocked[0];
  EXPECT_EQ(b.warp, "cta0/w0");
  EXPECT_EQ(b.op, "wait");
  EXPECT_EQ(b.object, "bar (cta0)");
  EXPECT_EQ(b.line, line);
  EXPECT_TRUE(contains(b.state, "parity 0 (phase 0)")) << b.state;
  EXPECT_TRUE(contains(b.state, "in phase 0 (parity 0)")) << b.state;
  EXPECT_TRUE(contains(b.state, "1 of 1 arrivals pending")) << b.state;
  EXPECT_TRUE(contains(b.state, "tx-count 0")) << b.state;
}

// try_wait is a potentially blocking test (PTX): when nothing else can
// complete the phase, its time limit runs out and it returns false, as on
// silicon; it is not a deadlock while the warp can go on.
TEST(emu_MbarTryWait, NothingElseCanCompleteThePhaseSoTryWaitReturnsFalse) {
  int falses = 0;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        if (!B::try_wait(s.b[0], 0)) ++falses;
        B::elect_one([&] { B::inval(s.b[0]); });
      },
      {}, kSmem);
  EXPECT_EQ(r.status, emu::Status::ok) << r.report();
  EXPECT_EQ(falses, 1);
}

// A warp polls a barrier whose phase only it can complete, then completes
// it (the transaction bytes) and waits: it runs to the end.
TEST(emu_MbarTryWait, AWarpThatPollsThenCompletesTheTransactionItselfGoesOn) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    int polls = 0;
    auto r = run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<Bars>();
          init_bar(s.b[0], 1);
          B::elect_one([&] { B::arrive_expect_tx(s.b[0], 64); });
          while (!B::try_wait(s.b[0], 0)) {
            if (++polls == 3) B::elect_one([&] { B::complete_tx(s.b[0], 64); });
          }
        },
        wspipe::test::with_strategy(emu::StrategyKind::random, seed), kSmem);
    EXPECT_EQ(r.status, emu::Status::ok) << "seed " << seed << "\n" << r.report();
    EXPECT_EQ(polls, 3) << "seed " << seed;
  }
}

// A warp polls two barriers alternately; another warp completes them, B
// first, then A, after some work. Every strategy runs it to the end.
TEST(emu_MbarTryWait, AWarpPollingTwoBarriersAlternatelyGoesOn) {
  for (auto kind : {emu::StrategyKind::round_robin, emu::StrategyKind::random, emu::StrategyKind::pct}) {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      bool seen[2] = {false, false};
      auto r = run_kernel(
          2,
          [&] {
            auto& s = B::shared_storage<Bars>();
            if (B::warp_idx() == 0) {
              init_bar(s.b[0], 1);
              init_bar(s.b[1], 1);
            }
            B::named_sync(1, 64);
            if (B::warp_idx() == 0) {
              while (!(seen[0] && seen[1])) {
                for (int i = 0; i < 2; ++i) seen[i] = seen[i] || B::try_wait(s.b[i], 0);
              }
            } else {
              for (int i = 0; i < 3; ++i) B::syncwarp();
              elected_arrive(s.b[1]);
              B::syncwarp();
              elected_arrive(s.b[0]);
            }
          },
          wspipe::test::with_strategy(kind, seed), kSmem);
      EXPECT_EQ(r.status, emu::Status::ok) << "seed " << seed << "\n" << r.report();
    }
  }
}

// A correct spin loop (try_wait until true) with spurious time-outs on:
// every strategy runs it to the end in a few steps. PCT ran the spinning
// warp alone, the peer that completes the phase never got its turn, and
// the step budget reported a livelock (5 MB of schedule, 26 s a run).
TEST(emu_MbarTryWait, ASpinLoopWithSpuriousTimeOutsIsCleanUnderEveryStrategy) {
  for (auto kind : {emu::StrategyKind::round_robin, emu::StrategyKind::random, emu::StrategyKind::pct}) {
    for (std::uint64_t seed = 1; seed <= 16; ++seed) {
      int polls = 0;
      emu::RunOptions o = wspipe::test::with_strategy(kind, seed);
      o.spurious_try_wait = true;
      o.max_steps = 100'000;
      auto r = run_kernel(
          2,
          [&] {
            auto& s = B::shared_storage<Bars>();
            if (B::warp_idx() == 0) init_bar(s.b[0], 1);
            B::named_sync(1, 64);
            if (B::warp_idx() == 0) {
              while (!B::try_wait(s.b[0], 0)) ++polls;
            } else {
              for (int i = 0; i < 4; ++i) B::syncwarp();
              elected_arrive(s.b[0]);
            }
          },
          o, kSmem);
      EXPECT_EQ(r.status, emu::Status::ok) << emu::to_string(kind) << " seed " << seed << "\n" << r.report();
      EXPECT_LT(r.steps, 200u) << emu::to_string(kind) << " seed " << seed;
    }
  }
}

// test_wait never blocks, not even while another warp could still complete
// the phase: it answers for now.
TEST(emu_MbarTestWait, AnswersForNowAndNeverBlocks) {
  std::vector<int> answers;
  auto r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        answers.push_back(B::test_wait(s.b[0], 1));  // a fresh barrier: the phase before 0 reads complete
        answers.push_back(B::test_wait(s.b[0], 0));
        elected_arrive(s.b[0]);
        answers.push_back(B::test_wait(s.b[0], 0));
        answers.push_back(B::test_wait(s.b[0], 1));
      },
      {}, kSmem);
  EXPECT_EQ(r.status, emu::Status::ok) << r.report();
  EXPECT_EQ(answers, (std::vector<int>{1, 0, 1, 0}));
  bool traced = false;
  for (const auto& e : r.trace.events) traced |= e.kind == emu::EventKind::test_wait;
  EXPECT_TRUE(traced);
}

// Runs: init(count 1); the elected lane does `ops`; then wait(parity 0).
template <class Ops>
emu::RunResult tx_kernel(Ops ops) {
  return run_kernel(
      1,
      [=] {
        auto& s = B::shared_storage<Bars>();
        init_bar(s.b[0], 1);
        B::elect_one([&] { ops(s.b[0]); });
        B::wait(s.b[0], 0);
      },
      {}, kSmem);
}

TEST(emu_MbarParity, PhaseNeedsBothPendingAndTxAtZero) {
  // The arrival alone does not complete the phase while bytes are expected.
  auto r = tx_kernel([](SharedMemBarrier& b) { B::arrive_expect_tx(b, 256); });
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  ASSERT_EQ(r.blocked.size(), 1u);
  EXPECT_TRUE(contains(r.blocked[0].state, "0 of 1 arrivals pending, tx-count 256")) << r.blocked[0].state;

  auto partial = tx_kernel([](SharedMemBarrier& b) {
    B::arrive_expect_tx(b, 256);
    B::complete_tx(b, 128);
  });
  ASSERT_EQ(partial.status, emu::Status::deadlock) << partial.report();
  EXPECT_TRUE(contains(partial.blocked[0].state, "tx-count 128")) << partial.blocked[0].state;

  // Bytes delivered but the arrival missing: not complete either.
  auto no_arrive = tx_kernel([](SharedMemBarrier& b) {
    B::expect_tx(b, 256);
    B::complete_tx(b, 256);
  });
  ASSERT_EQ(no_arrive.status, emu::Status::deadlock) << no_arrive.report();
  EXPECT_TRUE(contains(no_arrive.blocked[0].state, "1 of 1 arrivals pending, tx-count 0"))
      << no_arrive.blocked[0].state;
}

TEST(emu_MbarParity, CompleteTxDeliveringTheBytesCompletesThePhase) {
  std::uint32_t line = 0;
  auto r = tx_kernel([&line](SharedMemBarrier& b) {
    B::arrive_expect_tx(b, 256);
    B::complete_tx(b, 100);
    line = __LINE__; B::complete_tx(b, 156);
  });
  EXPECT_OK(r);
  const emu::Event* ph = find_event(r, emu::EventKind::phase);
  ASSERT_NE(ph, nullptr);
  EXPECT_EQ(ph->line, line);
}

TEST(emu_MbarParity, CompleteTxBeforeExpectTxIsFine) {
  // tx goes to -64 and the arrival leaves pending 0: not complete (tx != 0)...
  auto early = tx_kernel([](SharedMemBarrier& b) {
    B::complete_tx(b, 64);
    B::arrive(b);
  });
  ASSERT_EQ(early.status, emu::Status::deadlock) << early.report();
  EXPECT_TRUE(contains(early.blocked[0].state, "0 of 1 arrivals pending, tx-count -64")) << early.blocked[0].state;

  // ...until an expect_tx brings tx back to 0 with nothing pending: that completes it.
  std::uint32_t line = 0;
  auto r = tx_kernel([&line](SharedMemBarrier& b) {
    B::complete_tx(b, 64);
    B::arrive(b);
    line = __LINE__; B::expect_tx(b, 64);
  });
  EXPECT_OK(r);
  const emu::Event* ph = find_event(r, emu::EventKind::phase);
  ASSERT_NE(ph, nullptr);
  EXPECT_EQ(ph->line, line);
}

// ------------------------------------------------------------ spurious try_wait

// Warp 0 spins on try_wait for phase 0; warp 1 does a few steps of work,
// then completes it.
emu::RunResult spin_kernel(emu::RunOptions opts, int* falses) {
  return run_kernel(
      2,
      [=] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) init_bar(s.b[0], 1);
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          while (!B::try_wait(s.b[0], 0)) ++*falses;
        } else {
          for (int i = 0; i < 4; ++i) B::syncwarp();
          elected_arrive(s.b[0]);
        }
      },
      opts, kSmem);
}

TEST(emu_MbarTryWait, SpuriousFailuresHappenAndTheRetryLoopFinishes) {
  int total = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    auto opts = wspipe::test::with_strategy(emu::StrategyKind::random, seed);
    opts.spurious_try_wait = true;
    int falses = 0;
    auto r = spin_kernel(opts, &falses);
    EXPECT_OK(r) << "seed " << seed;
    total += falses;
  }
  EXPECT_GT(total, 0) << "try_wait never timed out with spurious_try_wait on";
}

TEST(emu_MbarTryWait, WithTimeOutsOffTryWaitWaitsWhileAnotherWarpCanCompleteThePhase) {
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    int falses = 0;
    auto opts = wspipe::test::with_strategy(emu::StrategyKind::random, seed);
    opts.spurious_try_wait = false;
    auto r = spin_kernel(opts, &falses);
    EXPECT_OK(r) << "seed " << seed;
    EXPECT_EQ(falses, 0) << "seed " << seed;
  }
}

// A consumer whose try_wait-false branch reads the slot anyway: PTX lets
// try_wait time out whenever its time limit runs out, so that read can come
// before the producer's store is released to it. Time-outs are on by
// default (RunOptions::spurious_try_wait), so every strategy explores them.
// With `correct`, the consumer spins until the wait passes.
emu::KernelFactory false_branch_kernel(bool correct) {
  return [correct] {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.smem_bytes = 256;
    k.body = [correct] {
      struct Slot {
        SharedMemBarrier full;
        int data;
      };
      auto& s = B::shared_storage<Slot>();
      if (B::warp_idx() == 0) init_bar(s.full, 1);
      B::cluster_sync();
      if (B::warp_idx() == 0) {
        B::elect_one([&] { s.data = 42; });
        elected_arrive(s.full);
      } else if (correct) {
        while (!B::try_wait(s.full, 0)) {
        }
        B::check(s.data == 42, "the slot holds the producer's value");
      } else {
        const bool ready = B::try_wait(s.full, 0);
        (void)ready;  // the bug: the false branch reads the slot too
        B::check(s.data == 42, "the slot holds the producer's value");
      }
    };
    return k;
  };
}

TEST(emu_MbarTryWait, AWrongFalseBranchIsFoundByTheDefaultExploration) {
  emu::ExploreOptions o;  // the default portfolio, time-outs on by default
  o.runs = 100;
  o.jobs = 1;
  o.shrink_seconds = 2;
  const auto r = emu::explore(false_branch_kernel(false), o);
  ASSERT_FALSE(r.ok()) << "the read on try_wait's false branch was not found in 100 runs";
  EXPECT_LT(r.failure->run, 20u);
  const std::string what = outcome(r.failure->result);
  EXPECT_TRUE(what == "race.smem" || what == "kernel.check") << r.failure->result.report();
  // The time-out is the one preemption the bug needs.
  EXPECT_EQ(r.failure->result.preemptions(), 1u) << r.failure->result.report();
  EXPECT_TRUE(r.failure->result.spurious_try_wait);
}

TEST(emu_MbarTryWait, WithoutTimeOutsTheWrongFalseBranchIsNeverTaken) {
  emu::ExploreOptions o;
  o.runs = 100;
  o.jobs = 1;
  o.spurious_try_wait = false;  // time-outs off: the blind spot
  EXPECT_TRUE(emu::explore(false_branch_kernel(false), o).ok());
}

TEST(emu_MbarTryWait, TheExhaustiveSearchBranchesOnTimeOuts) {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.seconds = 0;
  o.shrink = false;
  o.preemptions = 0;  // a time-out is a preemption: bound 0 takes none
  auto r = emu::explore(false_branch_kernel(false), o);
  EXPECT_TRUE(r.ok() && r.complete);
  o.preemptions = 1;
  r = emu::explore(false_branch_kernel(false), o);
  ASSERT_FALSE(r.ok()) << "bound 1 did not branch on the time-out";
  // The correct spin loop: every schedule within three preemptions (three
  // time-outs, or switches) is clean, and the search completes.
  o.preemptions = 3;
  r = emu::explore(false_branch_kernel(true), o);
  EXPECT_TRUE(r.ok()) << r.failure->result.report();
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.verdict(), emu::Verdict::verified);
}

TEST(emu_MbarTryWait, TheCorrectSpinLoopExploresCleanByDefault) {
  emu::ExploreOptions o;
  o.runs = 200;
  o.jobs = 1;
  const auto r = emu::explore(false_branch_kernel(true), o);
  EXPECT_TRUE(r.ok()) << r.failure->result.report();
  EXPECT_EQ(r.runs, 200u);
}

// A schedule printed before time-outs were on by default (version 3, no
// --spurious-try-wait on its line) replays as it was recorded: without them.
TEST(emu_MbarTryWait, AVersion3ScheduleReplaysWithoutTimeOuts) {
  emu::RunOptions off;
  off.spurious_try_wait = false;
  int checked = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    off.strategy = wspipe::test::with_strategy(emu::StrategyKind::random, seed).strategy;
    const auto recorded = emu::run(false_branch_kernel(true)(), off);
    ASSERT_EQ(recorded.status, emu::Status::ok) << recorded.report();
    // The same deviations as a version 4 token replay with time-outs on:
    // where the consumer waited in try_wait, that run takes other steps
    // (the waiter could time out there), and the replay is refused.
    const emu::Schedule v4(recorded.schedule.deviations(), recorded.schedule.check());
    try {
      (void)emu::replay(false_branch_kernel(true)(), v4, emu::RunOptions{});
      continue;  // the consumer never waited: both modes take the same steps
    } catch (const emu::ScheduleMismatch&) {
    }
    EXPECT_NO_THROW((void)emu::replay(false_branch_kernel(true)(), v4, off)) << "seed " << seed;
    const emu::Schedule v3(recorded.schedule.deviations(), recorded.schedule.check(), 3);
    ASSERT_EQ(v3.encode().rfind("3:", 0), 0u);
    const auto again = emu::replay(false_branch_kernel(true)(), v3, emu::RunOptions{});  // time-outs on
    EXPECT_FALSE(again.spurious_try_wait) << "seed " << seed;
    EXPECT_EQ(again.steps, recorded.steps) << "seed " << seed;
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no seed made the consumer wait in try_wait";
}

TEST(emu_MbarTryWait, SpinningOnAPhaseThatNeverCompletesIsADeadlock) {
  std::uint32_t line = 0;
  auto opts = wspipe::test::with_strategy(emu::StrategyKind::random, 3);
  opts.spurious_try_wait = true;
  opts.max_steps = 100'000;
  auto r = run_kernel(
      2,
      [&] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) {
          init_bar(s.b[0], 1);
          B::named_arrive(1, 64);
          while (true) {
            line = __LINE__; if (B::try_wait(s.b[0], 0)) break;
          }
        } else {
          B::named_sync(1, 64);
          for (int i = 0; i < 3; ++i) B::syncwarp();  // other work, then exit
        }
      },
      opts, kSmem);
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  // Detected once the other warp finished and the poll had timed out
  // 1024 times in a row with nothing else able to move, not at the budget.
  EXPECT_LT(r.steps, 2000u);
  ASSERT_EQ(r.blocked.size(), 1u);
  EXPECT_EQ(r.blocked[0].op, "try_wait");
  EXPECT_EQ(r.blocked[0].line, line);
}

// ------------------------------------------------------------ robustness

// A wait that blocked keeps working when other warps initialise more
// barriers while it sleeps.
//
// Regression test for an EMULATOR BUG found with this test at commit 58693ce:
// World::mbar_wait kept `Mbar* m = resolve(...)` across its scheduling point
// and then read `phase_done(*m, parity)` / wrote `m->observed` through it.
// An mbar_init by another warp meanwhile (mbars_.emplace_back()) may
// reallocate mbars_, so the woken wait used freed memory (AddressSanitizer:
// heap-use-after-free in mbar_wait). In the RelWithDebInfo build the stale
// copy said phase 0 was incomplete, the wait returned without marking the
// live barrier observed, and warp 1's second arrive was reported as a false
// mbarrier.arrive-before-wait: `EXPECT_OK(r)` below failed.
TEST(emu_MbarRobustness, BlockedWaitSurvivesBarrierTableGrowth) {
  struct Many {
    SharedMemBarrier a, c;
    SharedMemBarrier more[200];
  };
  auto r = run_kernel(
      2,
      [&] {
        auto& s = B::shared_storage<Many>();
        if (B::warp_idx() == 0) {
          init_bar(s.a, 1, "a");
          init_bar(s.c, 1, "c");
        }
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          B::named_arrive(1, 64);
          B::wait(s.a, 0);  // resolves a while the table holds 2 entries, then blocks
          elected_arrive(s.c);
        } else {
          B::named_sync(1, 64);
          B::elect_one([&] {
            for (int i = 0; i < 200; ++i) B::init(s.more[i], 1, BarrierName{"more", i});
          });
          elected_arrive(s.a);
          B::wait(s.c, 0);        // warp 0's wait on a has returned
          elected_arrive(s.a);    // fine: that wait observed phase 0 of a
        }
      },
      {}, sizeof(Many));
  EXPECT_OK(r);
}

}  // namespace
