// Tearing a run down: when a run ends (a violation, a deadlock, a deadline),
// every unfinished warp is unwound from its next operation, whatever its
// loops wait for; the failure found stays the run's outcome. And
// lane-divergence mode keeps a warp-level read-modify-write of memory one
// access per warp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "backends/emu/emu.hpp"
#include "backends/emu/testing/gtest.hpp"
#include "emu_test_util.hpp"

namespace wspipe {
namespace {

using test::B;
using test::contains;
using test::elected_arrive;
using test::init_bar;

// ------------------------------------------------------------ kernels

// One slot between a producer and a consumer whose work loop ends when the
// producer sends -1: the shape of a persistent kernel's loop, whose exit
// depends on data a wait publishes.
struct SlotSmem {
  SharedMemBarrier full, empty;
  std::int32_t slot;
};

enum class SlotBug : std::uint8_t {
  none,
  extra_arrive,   // the producer arrives on `full` twice for item 3
  no_sentinel,    // the producer never sends -1
};

void slot_producer(SlotSmem& s, std::int32_t items, SlotBug bug) {
  std::uint32_t ph = 0;
  const std::int32_t last = bug == SlotBug::no_sentinel ? items - 1 : items;
  for (std::int32_t i = 0; i <= last; ++i) {
    if (i > 0) {
      B::wait(s.empty, ph);
      ph ^= 1;
    }
    s.slot = i == items ? -1 : i;
    elected_arrive(s.full);
    if (bug == SlotBug::extra_arrive && i == 3) elected_arrive(s.full);
  }
}

// The consumer (warp 0, torn down before the producer): `wait` or a
// `try_wait` poll, then the item, then the slot back; -1 ends the loop.
void slot_kernel(std::int32_t items, SlotBug bug, bool poll) {
  auto& s = B::shared_storage<SlotSmem>();
  if (B::warp_idx() == 0) {
    init_bar(s.full, 1, "full");
    init_bar(s.empty, 1, "empty");
    B::fence_init();
  }
  B::cluster_sync();
  if (B::warp_idx() == 1) {
    slot_producer(s, items, bug);
    return;
  }
  std::uint32_t ph = 0;
  for (std::int32_t expect = 0;; ++expect) {
    if (poll) {
      while (!B::try_wait(s.full, ph)) {
      }
    } else {
      B::wait(s.full, ph);
    }
    ph ^= 1;
    const std::int32_t v = s.slot;
    elected_arrive(s.empty);
    if (v < 0) break;
    B::check(v == expect, "items arrive in order");
  }
}

emu::KernelFactory slot_factory(std::int32_t items, SlotBug bug, bool poll = false) {
  return [=] {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.warp_roles = {"consumer", "producer"};
    k.launch.smem_bytes = sizeof(SlotSmem);
    k.body = [=] { slot_kernel(items, bug, poll); };
    return k;
  };
}

// A persistent kernel over CLC responses: each cluster processes its own
// tile, then asks for another until a request fails. The planted bug is a
// check that fails on one tile while the other clusters are in their loops.
struct ClcSmem {
  ClcResponse resp;
  SharedMemBarrier full;
};

void clc_loop(std::uint32_t bad_tile) {
  auto& s = B::shared_storage<ClcSmem>();
  std::uint32_t tile = B::cluster_idx(), round = 0;
  init_bar(s.full, 1, "clc_full");
  B::fence_init();
  B::syncwarp();  // the CTA's one warp
  for (;; ++round) {
    B::check(tile != bad_tile, "planted: this tile fails");
    B::elect_one([&] {
      B::arrive_expect_tx(s.full, sizeof(ClcResponse));
      B::clc_try_cancel(s.resp, s.full);
    });
    B::wait(s.full, round & 1u);
    if (!B::clc_is_canceled(s.resp)) break;
    tile = B::clc_first_ctaid(s.resp).x;
  }
}

emu::KernelFactory clc_factory(std::uint32_t bad_tile) {
  return [=] {
    emu::Kernel k;
    k.launch.num_clusters = 8;
    k.launch.max_active_clusters = 3;
    k.launch.warps_per_cta = 1;
    k.launch.smem_bytes = sizeof(ClcSmem);
    k.body = [=] { clc_loop(bad_tile); };
    return k;
  };
}

// The work loop stopped from outside: the producer sends items far past
// any run's end, so the sentinel never comes. Warp 0 first sleeps until
// `until`, the run's deadline (set 200 ms ahead, so that the scheduler's
// first look, at step 0, comes before it), which the scheduler then finds
// passed the next time it looks (every 4,096 steps), with both warps in
// their loops.
// Each fiber's body holds a guard that counts the frames unwound.
struct CountsItsEnd {
  std::atomic<std::uint32_t>* ended;
  explicit CountsItsEnd(std::atomic<std::uint32_t>* e) : ended(e) {}
  CountsItsEnd(const CountsItsEnd&) = delete;
  CountsItsEnd& operator=(const CountsItsEnd&) = delete;
  ~CountsItsEnd() { ++*ended; }
};

emu::KernelFactory endless_slot_factory(std::atomic<std::uint32_t>* ended, std::chrono::steady_clock::time_point until,
                                        bool poll) {
  return [=] {
    emu::Kernel k = slot_factory(1'000'000'000, SlotBug::none, poll)();
    k.body = [=] {
      const CountsItsEnd guard{ended};
      if (B::warp_idx() == 0) std::this_thread::sleep_until(until);
      slot_kernel(1'000'000'000, SlotBug::none, poll);
    };
    return k;
  };
}

// ------------------------------------------------------------ options

emu::ExploreOptions with(emu::StrategyKind kind, std::uint64_t runs = 50) {
  emu::ExploreOptions o = test::fixed_runs(runs);
  o.portfolio = {{kind}};
  return o;
}

// Each planted bug is found by every strategy, shrunk, and by the complete
// (exhaustive) search; the process survives every teardown.
void found_everywhere(const char* expected, const emu::KernelFactory& make) {
  for (const emu::StrategyKind kind :
       {emu::StrategyKind::random, emu::StrategyKind::pct, emu::StrategyKind::round_robin, emu::StrategyKind::exhaustive}) {
    SCOPED_TRACE(::testing::Message() << "strategy " << emu::to_string(kind));
    EXPECT_TRUE(testing::finds(expected, make, with(kind)));
  }
  // Stopped in the middle of its loops (a step limit): the run ends with
  // the livelock it reports, or the bug when it comes first.
  for (const std::uint64_t steps : {8u, 12u, 25u, 60u}) {
    emu::RunOptions stop;
    stop.max_steps = steps;
    const emu::Kernel k = make();
    const emu::RunResult r = emu::run(k, stop);
    const std::string got = emu::outcome(r);
    EXPECT_TRUE(got == "livelock" || contains(expected, got)) << "max_steps " << steps << "\n" << r.report();
  }
}

// ------------------------------------------------------------ tests

TEST(Teardown, AWorkLoopEndedByASentinelIsUnwound) {
  WSPIPE_EXPECT_CLEAN(slot_factory(6, SlotBug::none), with(emu::StrategyKind::random));
  found_everywhere("mbarrier.arrive-before-wait,mbarrier.over-arrival,kernel.check", slot_factory(6, SlotBug::extra_arrive));
}

TEST(Teardown, APersistentLoopOverClcResponsesIsUnwound) {
  WSPIPE_EXPECT_CLEAN(clc_factory(100), with(emu::StrategyKind::random));
  found_everywhere("kernel.check", clc_factory(5));
}

TEST(Teardown, ALoopThatSpinsOnTryWaitIsUnwound) {
  WSPIPE_EXPECT_CLEAN(slot_factory(6, SlotBug::none, true), with(emu::StrategyKind::random));
  found_everywhere("deadlock", slot_factory(6, SlotBug::no_sentinel, true));
  found_everywhere("mbarrier.arrive-before-wait,mbarrier.over-arrival,race.smem,kernel.check",
                   slot_factory(6, SlotBug::extra_arrive, true));
}

TEST(Teardown, TheFailureIsReportedWithItsReplayLine) {
  // What a user's test that expects the kernel clean prints: the failure
  // found first, its shrunk schedule and the line that replays it.
  const auto r = testing::explores_clean(slot_factory(6, SlotBug::extra_arrive), with(emu::StrategyKind::random));
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "violation mbarrier.")) << r.message();
  EXPECT_TRUE(contains(r.message(), "replay: WSPIPE_REPLAY=")) << r.message();
}

// A run stopped at its deadline (RunOptions::deadline; the shrinker gives
// its runs the end of its time) while its warps are in a work loop ended by
// a sentinel: every fiber is unwound (lane 31's too in lane-divergence
// mode), the run says it stopped, and the next run works.
TEST(Teardown, ARunStoppedAtItsDeadlineInAWorkLoopIsUnwound) {
  for (const bool poll : {false, true}) {
    for (const bool lanes : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "poll " << poll << ", lane divergence " << lanes);
      std::atomic<std::uint32_t> ended{0};
      emu::RunOptions o;
      o.max_steps = std::numeric_limits<std::uint64_t>::max();
      o.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      o.lane_divergence = lanes;
      const emu::RunResult r = emu::run(endless_slot_factory(&ended, o.deadline, poll)(), o);
      EXPECT_TRUE(r.stopped) << r.report();
      EXPECT_TRUE(r.pruned);
      EXPECT_EQ(r.status, emu::Status::ok) << r.report();
      EXPECT_GE(r.steps, 4096u);
      EXPECT_EQ(ended.load(), lanes ? 4u : 2u);
    }
  }
  const emu::RunResult r = emu::run(slot_factory(6, SlotBug::none)(), emu::RunOptions{});
  EXPECT_EQ(emu::outcome(r), "ok") << r.report();
}

// The same loops in an exploration whose runs stop at their deadline and
// which an interrupt (ExploreOptions::interrupt, set after the first run)
// ends: reported as interrupted, nothing found. And an interrupt after the
// first failure: the failure is reported with its replay line, its
// shrinking cut short.
TEST(Teardown, AnExplorationStoppedByAnInterruptReportsWhatItExplored) {
  std::atomic<int> interrupt{0};
  std::atomic<std::uint32_t> ended{0};
  emu::ExploreOptions o = with(emu::StrategyKind::random, 100);
  o.max_steps = std::numeric_limits<std::uint64_t>::max();
  o.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  o.interrupt = &interrupt;
  o.on_run = [&](std::uint64_t, const emu::RunResult& r) {
    EXPECT_TRUE(r.stopped);
    interrupt = 1;
  };
  const emu::ExploreResult stopped = emu::explore(endless_slot_factory(&ended, o.deadline, false), o);
  EXPECT_TRUE(stopped.interrupted) << stopped.report();
  EXPECT_TRUE(stopped.ok()) << stopped.report();
  EXPECT_TRUE(contains(stopped.report(), "interrupted")) << stopped.report();
  EXPECT_EQ(ended.load(), 2u);

  interrupt = 0;
  emu::ExploreOptions f = with(emu::StrategyKind::random, 100);
  f.interrupt = &interrupt;
  f.on_run = [&](std::uint64_t, const emu::RunResult& r) {
    if (r.status != emu::Status::ok) interrupt = 1;
  };
  const emu::ExploreResult found = emu::explore(slot_factory(6, SlotBug::extra_arrive), f);
  ASSERT_FALSE(found.ok()) << found.report();
  EXPECT_TRUE(found.interrupted);
  EXPECT_TRUE(contains(found.report(), "violation mbarrier.")) << found.report();
  EXPECT_TRUE(contains(found.report(), "\nschedule: ")) << found.report();
  EXPECT_TRUE(contains(found.report(), "(shrinking interrupted)")) << found.report();
}

// A kernel whose catch (...) swallows the unwinding: the run ends with an
// error naming the warp and the line, not a crash.
TEST(Teardown, AKernelThatSwallowsTheUnwindingEndsTheRunWithAnError) {
  emu::Kernel k = slot_factory(6, SlotBug::extra_arrive)();
  k.body = [] {
    try {
      slot_kernel(6, SlotBug::extra_arrive, false);
    } catch (...) {  // swallows everything
    }
    B::syncwarp();
  };
  try {
    (void)emu::run(k, emu::RunOptions{});
    ADD_FAILURE() << "the run did not report the swallowed unwinding";
  } catch (const std::logic_error& e) {
    EXPECT_TRUE(contains(e.what(), "warp cta0/w0 consumer caught the unwinding")) << e.what();
    EXPECT_TRUE(contains(e.what(), "emu_teardown_test.cpp:")) << e.what();
  }
}

// A kernel that catches the unwinding at every operation, forever: the
// teardown gives up on its fibers (both warps', and lane 31's in
// lane-divergence mode) and the run ends with the error naming the warp and
// the line, without ending the process. The next runs work: the same kernel
// again (its abandoned fibers' stacks reused), then a clean one.
void swallows_forever(std::uint32_t* line) {
  auto& s = B::shared_storage<SlotSmem>();
  if (B::warp_idx() == 0) {
    init_bar(s.full, 1, "full");
    B::fence_init();
  }
  B::cluster_sync();
  for (;;) {
    try {
      *line = __LINE__ + 1;
      B::wait(s.full, 0);  // nobody arrives: a deadlock, then the teardown's unwinding
    } catch (...) {        // swallows everything
    }
  }
}

TEST(Teardown, AKernelThatSwallowsTheUnwindingForeverEndsTheRunWithAnError) {
  for (const bool lanes : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "lane divergence " << lanes);
    std::uint32_t line = 0;
    emu::Kernel k = slot_factory(6, SlotBug::none)();
    k.body = [&line] { swallows_forever(&line); };
    emu::RunOptions o;
    o.lane_divergence = lanes;
    for (int again = 0; again < 2; ++again) {
      EXPECT_THROW(
          {
            try {
              (void)emu::run(k, o);
            } catch (const std::logic_error& e) {
              EXPECT_TRUE(contains(e.what(), "wspipe: warp cta0/w0 consumer caught the unwinding")) << e.what();
              EXPECT_TRUE(contains(e.what(), "emu_teardown_test.cpp:" + std::to_string(line) + ":")) << e.what();
              throw;
            }
          },
          std::logic_error);
    }
  }
  // On a thread of its own, which then exits: its fiber scheduler, torn
  // down with it, neither waits for nor resumes the abandoned fibers.
  std::thread([] {
    std::uint32_t line = 0;
    emu::Kernel k = slot_factory(6, SlotBug::none)();
    k.body = [&line] { swallows_forever(&line); };
    EXPECT_THROW((void)emu::run(k, emu::RunOptions{}), std::logic_error);
  }).join();
  const emu::RunResult r = emu::run(slot_factory(6, SlotBug::none)(), emu::RunOptions{});
  EXPECT_EQ(emu::outcome(r), "ok") << r.report();
}

}  // namespace
}  // namespace wspipe
