// Lane-divergence mode (RunOptions::lane_divergence): lane 31 runs the
// warp's body in lockstep with lane 0 and the two are compared at every
// collective instruction, elect and barrier wait. Each rule fires on the bug
// (and, where it matters, stays silent without the mode: the blind spot it
// closes) and is quiet on the fix; lane 31 sees the results of what the
// warp performed (try_wait answers, tcgen05.ld registers); schedules do not
// change.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/pipeline_state.hpp"
#include "core/tcgen05.hpp"
#include "emu_test_util.hpp"
#include "examples/ring.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::PipelineState;
using wspipe::SharedMemBarrier;
using wspipe::TmemShape;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::init_bar;
using wspipe::test::outcome;
using wspipe::test::run_kernel;

struct Smem {
  SharedMemBarrier bar[4];
  std::uint32_t tmem_base;
  std::uint32_t data;
};
constexpr std::size_t kSmem = sizeof(Smem);
Smem& smem() { return B::shared_storage<Smem>(); }

emu::RunOptions lanes(bool on = true) {
  emu::RunOptions o;
  o.lane_divergence = on;
  return o;
}

// Warp 0 publishes a value through bar[0]; warp 1 waits with lane 0 only
// (`guarded`) or with the whole warp, then every lane reads it.
void publish_then_read(bool guarded, std::uint32_t* wait_line) {
  if (B::warp_idx() == 0) {
    init_bar(smem().bar[0], 1, "ready");
    B::fence_init();
  }
  B::cluster_sync();
  if (B::warp_idx() == 0) {
    smem().data = 42;
    wspipe::test::elected_arrive(smem().bar[0]);
  } else if (guarded) {
    B::for_each_lane([&](std::uint32_t lane) {
      *wait_line = __LINE__ + 1;
      if (lane == 0) B::wait(smem().bar[0], 0);
    });
    B::check(smem().data == 42, "read after the wait");
  } else {
    B::wait(smem().bar[0], 0);
    B::check(smem().data == 42, "read after the wait");
  }
}

TEST(LaneDivergence, LaneGuardedWaitIsADivergentBranch) {
  std::uint32_t line = 0;
  const auto r = run_kernel(2, [&line] { publish_then_read(true, &line); }, lanes(), kSmem);
  EXPECT_VIOLATION_AT(r, "warp.divergent-branch", line);
  const auto& v = r.violations[0];
  EXPECT_TRUE(contains(v.message, "lane 0 reaches wait on ready (cta0) for parity 0 with 1 lane active")) << v.message;
  EXPECT_TRUE(contains(v.message, "lane 31 reaches the end of the kernel body")) << v.message;
  EXPECT_EQ(v.other, "lane 31: the end of the kernel body");
  // the warp-level model alone cannot see it: its one fiber waited
  EXPECT_OK(run_kernel(2, [&line] { publish_then_read(true, &line); }, lanes(false), kSmem));
  // the fix: the whole warp waits
  EXPECT_OK(run_kernel(2, [&line] { publish_then_read(false, &line); }, lanes(), kSmem));
}

TEST(LaneDivergence, WaitInsideElectOneIsADivergentBranch) {
  std::uint32_t line = 0;
  const auto r = run_kernel(
      1,
      [&line] {
        init_bar(smem().bar[0], 1);
        wspipe::test::elected_arrive(smem().bar[0]);
        B::elect_one([&] {
          line = __LINE__ + 1;
          B::wait(smem().bar[0], 0);
        });
        B::syncwarp();
      },
      lanes(), kSmem);
  EXPECT_VIOLATION_AT(r, "warp.divergent-branch", line);
  // lane 31 went on to the syncwarp
  EXPECT_TRUE(contains(r.violations[0].other, "lane 31: bar.warp.sync (syncwarp) with 32 lanes active")) << r.report();
}

// A cursor of the kernel's own, stepped by the elected lane only: the next
// wait names another barrier and parity in lane 31. (core/'s cursors report
// warp.divergent-state at the step itself, in either mode.)
TEST(LaneDivergence, StaleCursorIsANonUniformWaitOperand) {
  for (bool bug : {true, false}) {
    std::uint32_t line = 0;
    const auto r = run_kernel(
        1,
        [&line, bug] {
          for (int i = 0; i < 2; ++i) init_bar(smem().bar[i], 1, i == 0 ? "slot0" : "slot1");
          PipelineState<2> cursor = PipelineState<2>::consumer_start();
          for (int i = 0; i < 2; ++i) {
            wspipe::test::elected_arrive(smem().bar[cursor.index()]);
            line = __LINE__ + 1;
            B::wait(smem().bar[cursor.index()], cursor.phase());
            if (bug) {
              B::elect_one([&] { ++cursor; });
            } else {
              ++cursor;
            }
          }
        },
        lanes(), kSmem);
    if (!bug) {
      EXPECT_OK(r);
      continue;
    }
    EXPECT_VIOLATION_AT(r, "warp.non-uniform-operand", line);
    const auto& v = r.violations[0];
    // the run stops at lane 0's second wait (its own elected arrive went to
    // slot1); lane 31 still waits on slot0
    EXPECT_TRUE(contains(v.message, "lane 0: wait on slot1 (cta0) for parity 0")) << v.message;
    EXPECT_TRUE(contains(v.message, "lane 31: wait on slot0 (cta0) for parity 0")) << v.message;
  }
}

// The operand of a .sync.aligned instruction computed by one lane.
TEST(LaneDivergence, TmemLoadAddressFromOneLaneIsNonUniform) {
  for (bool bug : {true, false}) {
    std::uint32_t line = 0;
    const auto r = run_kernel(
        1,
        [&line, bug] {
          B::tmem_alloc<1>(&smem().tmem_base, 64);
          B::syncwarp();
          const std::uint32_t base = smem().tmem_base;
          std::uint32_t col = bug ? 0 : 32;
          if (bug) B::elect_one([&] { col = 32; });
          line = __LINE__ + 1;
          B::tmem_load<TmemShape::s32x32b, 1>(wspipe::tmem_addr(0, wspipe::tmem_col(base) + col));
          B::tmem_wait_load();
          B::tmem_relinquish<1>();
          B::tmem_dealloc<1>(base, 64);
        },
        lanes(), kSmem);
    if (!bug) {
      EXPECT_OK(r);
      continue;
    }
    EXPECT_VIOLATION_AT(r, "warp.non-uniform-operand", line);
    const auto& v = r.violations[0];
    EXPECT_TRUE(contains(v.message, "lane 0: tcgen05.ld.32x32b.x1 at TMEM address 0x20 (lane 0, column 32)"))
        << v.message;
    EXPECT_TRUE(contains(v.message, "lane 31: tcgen05.ld.32x32b.x1 at TMEM address 0x0 (lane 0, column 0)"))
        << v.message;
  }
}

// A branch on a value only the elected lane computed, around bar.sync.
TEST(LaneDivergence, CollectiveInABranchOfOneLaneIsADivergentBranch) {
  std::uint32_t line = 0;
  const auto r = run_kernel(
      2,
      [&line] {
        bool ready = false;
        B::elect_one([&] { ready = true; });
        line = __LINE__ + 1;
        if (ready) B::named_sync(1, 64);
        B::syncwarp();
      },
      lanes(), kSmem);
  EXPECT_VIOLATION_AT(r, "warp.divergent-branch", line);
  EXPECT_TRUE(contains(r.violations[0].message, "lane 0 reaches bar.sync 1, 64")) << r.report();
}

// Lane 31 follows the warp's answers: a try_wait loop with spurious
// failures takes the same path in both lanes, and the registers of a
// tcgen05.ld reach lane 31 (a branch on lane 31's own register agrees).
TEST(LaneDivergence, SecondLaneSeesTheResultsTheWarpGot) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto o = wspipe::test::with_strategy(emu::StrategyKind::random, seed);
    o.lane_divergence = true;
    o.spurious_try_wait = true;
    const auto r = run_kernel(
        2,
        [] {
          if (B::warp_idx() == 0) init_bar(smem().bar[0], 1);
          B::cluster_sync();
          if (B::warp_idx() == 0) {
            wspipe::test::elected_arrive(smem().bar[0]);
            return;
          }
          int tries = 0;
          while (!B::try_wait(smem().bar[0], 0)) ++tries;
          if (tries > 0) B::syncwarp();  // lane 31 must have seen as many failures
        },
        o, kSmem);
    EXPECT_OK(r) << "seed " << seed;
  }
  const auto r = run_kernel(
      2,
      [] {
        if (B::warp_idx() != 1) return;
        B::tmem_alloc<1>(&smem().tmem_base, 32);
        B::syncwarp();
        const std::uint32_t base = smem().tmem_base;
        B::Frag<1> mine;
        B::for_each_lane([&](std::uint32_t lane) { mine.set(0, 1000 + lane); });
        B::tmem_store<TmemShape::s32x32b, 1>(wspipe::tmem_addr(32, wspipe::tmem_col(base)), mine);
        B::tmem_wait_store();
        auto frag = B::tmem_load<TmemShape::s32x32b, 1>(wspipe::tmem_addr(32, wspipe::tmem_col(base)));
        B::tmem_wait_load();
        std::uint32_t v31 = 0;
        B::for_each_lane([&](std::uint32_t lane) {
          if (lane == 31) v31 = frag.reg(0);
        });
        if (v31 == 1031) B::syncwarp();  // lane 31 holds its own loaded register
        B::tmem_relinquish<1>();
        B::tmem_dealloc<1>(base, 32);
      },
      lanes(), kSmem);
  EXPECT_OK(r);
}

// The mode adds no scheduling point: the same strategy and seed give the
// same schedule and steps with it and without.
TEST(LaneDivergence, SchedulesAreTheSameWithAndWithout) {
  using wspipe::examples::RingBug;
  using wspipe::examples::RingStorage;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto o = wspipe::test::with_strategy(emu::StrategyKind::random, seed);
    auto body = [] { wspipe::examples::ring_kernel<B, 2>(24, RingBug::none); };
    const auto off = run_kernel(2, body, o, sizeof(RingStorage<2>));
    o.lane_divergence = true;
    const auto on = run_kernel(2, body, o, sizeof(RingStorage<2>));
    EXPECT_OK(on);
    EXPECT_EQ(on.steps, off.steps) << "seed " << seed;
    EXPECT_EQ(on.schedule.encode(), off.schedule.encode()) << "seed " << seed;
  }
}

#if defined(WSPIPE_INSTRUMENTED_ACCESSES)
// A warp-level read-modify-write of shared memory (`sum += i` by the whole
// warp, not inside elect_one) is one access of the warp: lane 31's fiber,
// which runs the same code after lane 0's, leaves memory as lane 0 left
// it, so the sum is the warp's, clean in the mode as without it. (The
// stores are seen through the access instrumentation.)
TEST(LaneDivergence, AWarpLevelReadModifyWriteOfSharedMemoryHappensOncePerWarp) {
  for (const bool on : {false, true}) {
    const auto r = run_kernel(
        1,
        [] {
          Smem& s = smem();
          s.data = 0;
          B::syncwarp();
          for (std::uint32_t i = 1; i <= 10; ++i) {
            s.data += i;
            B::syncwarp();
          }
          B::check(s.data == 55, "the warp's sum", {{"sum", s.data}});
        },
        lanes(on), kSmem);
    EXPECT_EQ(outcome(r), "ok") << "lane divergence " << on << "\n" << r.report();
  }
}

// The same in global memory, named to the emulator as the kernel's
// (LaunchConfig::global_memory): each warp sums into its own word, one with
// plain `+=` and one with an atomic add, both at warp level; lane 31's
// stores there are undone as in shared memory. Host-side state the
// emulator is not told of (a plain counter) is updated by lane 31's fiber
// too, unless the update is elected (elect_one), as on a GPU.
TEST(LaneDivergence, AWarpLevelReadModifyWriteOfGlobalMemoryHappensOncePerWarp) {
  for (const bool on : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "lane divergence " << on);
    std::vector<std::uint32_t> sums(4, 0);  // per warp: the plain sum, the atomic sum
    std::uint32_t host_updates = 0, elected_updates = 0;
    emu::LaunchConfig launch;
    launch.warps_per_cta = 2;
    launch.smem_bytes = kSmem;
    launch.global_memory = {std::as_writable_bytes(std::span(sums))};
    const auto r = emu::run(
        launch,
        [&] {
          std::uint32_t& sum = sums[2 * B::warp_idx()];
          std::uint32_t& atomic_sum = sums[2 * B::warp_idx() + 1];
          for (std::uint32_t i = 1; i <= 10; ++i) {
            sum += i;
            __atomic_fetch_add(&atomic_sum, i, __ATOMIC_RELAXED);
            B::syncwarp();
          }
          B::check(sum == 55 && atomic_sum == 55, "the warp's sums", {{"sum", sum}, {"atomic", atomic_sum}});
          ++host_updates;
          B::elect_one([&] { ++elected_updates; });
        },
        lanes(on));
    EXPECT_EQ(outcome(r), "ok") << r.report();
    EXPECT_EQ(sums, std::vector<std::uint32_t>(4, 55));
    EXPECT_EQ(elected_updates, 2u);
    EXPECT_EQ(host_updates, on ? 4u : 2u);  // lane 31's fiber replays what memory is not named
  }
}
#endif

}  // namespace
