// The emulator's Tensor Memory model: tcgen05.alloc / dealloc /
// relinquish (cta_group 1 and the cta_group 2 pair collective) and
// tcgen05.ld / st / wait. Every rule is shown firing on the bug and quiet
// on correct use.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/emu/emu.hpp"
#include "core/smem.hpp"
#include "core/tcgen05.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::SharedMemBarrier;
using wspipe::tmem_addr;
using wspipe::TmemShape;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::init_bar;
using wspipe::test::outcome;
using wspipe::test::run_kernel;
using wspipe::test::with_strategy;

struct Smem {
  SharedMemBarrier bar[4];
  std::uint32_t tmem_base;
  std::uint32_t pad;
};
constexpr std::size_t kSmem = sizeof(Smem);

Smem& smem() { return B::shared_storage<Smem>(); }

// Alloc `cols`, read the address back after syncwarp (the allocating warp
// may read its own store), as MAX's TmemAllocation::allocate does.
std::uint32_t alloc1(std::uint32_t cols) {
  B::tmem_alloc<1>(&smem().tmem_base, cols);
  B::syncwarp();
  return smem().tmem_base;
}

// ------------------------------------------------------------ allocation

TEST(emu_TmemAlloc, AllocDeallocIsQuiet) {
  auto r = run_kernel(1, [] {
    const std::uint32_t a = alloc1(128);
    B::tmem_relinquish<1>();
    B::tmem_dealloc<1>(a, 128);
  }, {}, kSmem);
  EXPECT_OK(r);
}

TEST(emu_TmemAlloc, PartialWarpFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    B::elect_one([&] { line = __LINE__; B::tmem_alloc<1>(&smem().tmem_base, 32); });
  }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.partial-warp", line);
}

TEST(emu_TmemAlloc, BadSizeFiresAndPowersOfTwoAreQuiet) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] { line = __LINE__; B::tmem_alloc<1>(&smem().tmem_base, 48); }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.alloc-size", line);
  for (std::uint32_t cols : {32u, 64u, 128u, 256u, 512u}) {
    auto ok = run_kernel(1, [&] { B::tmem_dealloc<1>(alloc1(cols), cols); }, {}, kSmem);
    EXPECT_OK(ok);
  }
  auto big = run_kernel(1, [&] { B::tmem_alloc<1>(&smem().tmem_base, 1024); }, {}, kSmem);
  EXPECT_EQ(outcome(big), "tmem.alloc-size");
}

TEST(emu_TmemAlloc, DestinationOutsideSharedMemoryFires) {
  std::uint32_t line = 0;
  std::uint32_t heap_word = 0;
  auto r = run_kernel(1, [&] { line = __LINE__; B::tmem_alloc<1>(&heap_word, 32); }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.alloc-dst", line);
  auto misaligned = run_kernel(1, [&] {
    auto* p = reinterpret_cast<std::uint32_t*>(reinterpret_cast<std::byte*>(&smem().tmem_base) + 2);
    B::tmem_alloc<1>(p, 32);
  }, {}, kSmem);
  EXPECT_EQ(outcome(misaligned), "tmem.alloc-dst");
}

TEST(emu_TmemAlloc, AllocAfterRelinquishFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    const std::uint32_t a = alloc1(64);
    B::tmem_relinquish<1>();
    B::tmem_dealloc<1>(a, 64);
    line = __LINE__; B::tmem_alloc<1>(&smem().tmem_base, 64);
  }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.alloc-after-relinquish", line);
}

TEST(emu_TmemAlloc, GrowingSizesFireShrinkingAreQuiet) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    B::tmem_dealloc<1>(alloc1(64), 64);
    line = __LINE__; B::tmem_alloc<1>(&smem().tmem_base, 128);
  }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.alloc-size-increase", line);
  auto ok = run_kernel(1, [&] {
    B::tmem_dealloc<1>(alloc1(128), 128);
    B::tmem_dealloc<1>(alloc1(64), 64);
  }, {}, kSmem);
  EXPECT_OK(ok);
}

TEST(emu_TmemAlloc, DeallocOfNoLiveAllocationFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    const std::uint32_t a = alloc1(128);
    line = __LINE__; B::tmem_dealloc<1>(a, 64);  // the allocation was 128 columns
  }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.dealloc-unallocated", line);
  EXPECT_TRUE(contains(r.violations[0].message, "live: [0, 128)")) << r.report();
  auto twice = run_kernel(1, [&] {
    const std::uint32_t a = alloc1(32);
    B::tmem_dealloc<1>(a, 32);
    B::tmem_dealloc<1>(a, 32);
  }, {}, kSmem);
  EXPECT_EQ(outcome(twice), "tmem.dealloc-unallocated");
}

TEST(emu_TmemAlloc, LeakAtExitFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] { line = __LINE__; B::tmem_alloc<1>(&smem().tmem_base, 64); }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.leak", line);
  EXPECT_EQ(r.violations[0].object, "TMEM columns [0, 64) (cta0)");
}

TEST(emu_TmemAlloc, AlignedFirstFitAndBlockingUntilFree) {
  // Two warps each take 512 columns: the second blocks until the first
  // deallocates; no schedule deadlocks, and the second always gets column 0.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::uint32_t got[2] = {99, 99};
    auto r2 = run_kernel(2, [&] {
      struct Two {
        std::uint32_t addr[2];
      };
      auto& s = B::shared_storage<Two>();
      const std::uint32_t w = B::warp_idx();
      B::tmem_alloc<1>(&s.addr[w], 512);
      B::syncwarp();
      got[w] = s.addr[w];
      B::tmem_dealloc<1>(s.addr[w], 512);
    }, with_strategy(emu::StrategyKind::random, seed), 64);
    EXPECT_OK(r2);
    EXPECT_EQ(got[0], 0u);
    EXPECT_EQ(got[1], 0u);
  }
  // 128 then 64 then 64: aligned first fit packs them at 0, 128, 192.
  auto r = run_kernel(1, [&] {
    struct Three {
      std::uint32_t addr[3];
    };
    auto& s = B::shared_storage<Three>();
    B::tmem_alloc<1>(&s.addr[0], 128);
    B::tmem_alloc<1>(&s.addr[1], 64);
    B::tmem_alloc<1>(&s.addr[2], 64);
    B::syncwarp();
    B::check(s.addr[0] == tmem_addr(0, 0) && s.addr[1] == tmem_addr(0, 128) && s.addr[2] == tmem_addr(0, 192),
             "aligned first fit");
    B::tmem_dealloc<1>(s.addr[2], 64);
    B::tmem_dealloc<1>(s.addr[1], 64);
    B::tmem_dealloc<1>(s.addr[0], 128);
  }, {}, 64);
  EXPECT_OK(r);
}

TEST(emu_TmemAlloc, AllocThatNeverGetsColumnsIsADeadlockWithItsState) {
  auto r = run_kernel(1, [&] {
    struct Two {
      std::uint32_t addr[2];
    };
    auto& s = B::shared_storage<Two>();
    B::tmem_alloc<1>(&s.addr[0], 512);
    B::tmem_alloc<1>(&s.addr[1], 256);  // never: the first holds every column
  }, {}, 64);
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  ASSERT_EQ(r.blocked.size(), 1u);
  EXPECT_EQ(r.blocked[0].op, "tcgen05.alloc");
  EXPECT_TRUE(contains(r.blocked[0].state, "needs 256 free aligned columns")) << r.report();
  EXPECT_TRUE(contains(r.blocked[0].state, "TMEM columns [0, 512) (cta0) held by cta0/w0")) << r.report();
}

TEST(emu_TmemAlloc, AddressReadBeforeThePublishingBarrierRaces) {
  // docs/hardware.md bug 8: the epilogue reads the address tcgen05.alloc
  // stored before the named barrier that publishes it.
  auto kernel = [](bool sync) {
    return [sync] {
      wspipe::SmemView<B, std::uint32_t> addr(&smem().tmem_base, 1);
      if (B::warp_idx() == 0) {
        B::tmem_alloc<1>(&smem().tmem_base, 64);
        B::named_arrive(1, 64);
        B::named_sync(2, 64);  // the epilogue is done with TMEM
        B::tmem_dealloc<1>(tmem_addr(0, 0), 64);
      } else {
        if (sync) B::named_sync(1, 64);
        (void)addr.load(0);
        if (!sync) B::named_sync(1, 64);
        B::named_arrive(2, 64);
      }
    };
  };
  bool fired = false;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto bad = run_kernel(2, kernel(false), with_strategy(emu::StrategyKind::random, seed), kSmem);
    if (bad.status == emu::Status::violation) {
      EXPECT_EQ(outcome(bad), "race.smem") << bad.report();
      // Whichever came first, the report names both sides.
      const auto& v = bad.violations[0];
      EXPECT_TRUE(contains(v.message + v.other, "tcgen05.alloc's store of the TMEM address")) << bad.report();
      EXPECT_TRUE(contains(v.message + v.other, "ordinary load")) << bad.report();
      fired = true;
    }
    auto good = run_kernel(2, kernel(true), with_strategy(emu::StrategyKind::random, seed), kSmem);
    EXPECT_OK(good);
  }
  EXPECT_TRUE(fired);
}

// ------------------------------------------------------------ cta_group 2

TEST(emu_TmemPair, CollectiveAllocAndDeallocAreQuiet) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::uint32_t got[2] = {99, 99};
    auto r = run_kernel(1, [&] {
      B::cluster_sync();
      B::tmem_alloc<2>(&smem().tmem_base, 128);
      B::syncwarp();
      got[B::cta_rank()] = smem().tmem_base;
      B::cluster_sync();
      B::tmem_relinquish<2>();
      B::tmem_dealloc<2>(smem().tmem_base, 128);
    }, with_strategy(emu::StrategyKind::random, seed), kSmem, 2);
    EXPECT_OK(r);
    EXPECT_EQ(got[0], 0u);
    EXPECT_EQ(got[1], 0u);
  }
}

TEST(emu_TmemPair, AllocBeforeAnyClusterBarrierFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] { line = __LINE__; B::tmem_alloc<2>(&smem().tmem_base, 128); }, {}, kSmem, 2);
  EXPECT_VIOLATION_AT(r, "tmem.pair-unsynced", line);
}

TEST(emu_TmemPair, DifferentOperandsFire) {
  auto r = run_kernel(1, [&] {
    B::cluster_sync();
    B::tmem_alloc<2>(&smem().tmem_base, B::cta_rank() == 0 ? 64 : 128);
  }, {}, kSmem, 2);
  EXPECT_EQ(outcome(r), "tmem.pair-mismatch") << r.report();
}

TEST(emu_TmemPair, PeerThatNeverJoinsIsADeadlock) {
  auto r = run_kernel(1, [&] {
    B::cluster_sync();
    if (B::cta_rank() == 0) B::tmem_alloc<2>(&smem().tmem_base, 64);
  }, {}, kSmem, 2);
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  EXPECT_EQ(r.blocked[0].op, "tcgen05 cta_group::2 collective");
  EXPECT_TRUE(contains(r.blocked[0].state, "peer CTA's warp")) << r.report();
}

TEST(emu_TmemPair, MixedCtaGroupFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    B::tmem_dealloc<1>(alloc1(64), 64);
    line = __LINE__; B::tmem_relinquish<2>();
  }, {}, kSmem, 2);
  ASSERT_EQ(outcome(r), "tcgen05.mixed-cta-group") << r.report();
  EXPECT_EQ(r.violations[0].line, line);
}

TEST(emu_TmemPair, CtaGroupTwoWithoutAPairFires) {
  auto r = run_kernel(1, [&] { B::tmem_relinquish<2>(); }, {}, kSmem, 1);
  EXPECT_EQ(outcome(r), "tcgen05.no-cta-pair");
}

// docs/hardware.md bug 9: a CTA deallocates the pair's columns while the
// peer's epilogue may still read them. Each CTA's warp 1 loads from its own
// TMEM; each warp 0 waits only for its own CTA's reader (bug), or for both
// (fix: the reader arrives on both CTAs' barriers, as MAX's
// TmemDeallocBarrier does).
void pair_dealloc_kernel(bool wait_for_both) {
  auto& s = smem();
  if (B::warp_idx() == 0) init_bar(s.bar[0], wait_for_both ? 64 : 32, "dealloc");
  B::fence_init();
  B::cluster_sync();
  if (B::warp_idx() == 0) B::tmem_alloc<2>(&s.tmem_base, 64);
  B::cluster_sync();  // publishes the address to both warps of each CTA
  if (B::warp_idx() == 1) {
    auto f = B::tmem_load<TmemShape::s32x32b, 4>(tmem_addr(32, 0));
    B::tmem_wait_load();
    (void)f;
    B::arrive(s.bar[0]);
    if (wait_for_both) B::arrive_remote(s.bar[0], B::cta_rank() ^ 1u);
  } else {
    B::wait(s.bar[0], 0);
    B::tmem_dealloc<2>(s.tmem_base, 64);
  }
}

TEST(emu_TmemPair, DeallocNotOrderedAfterThePeersReaderFires) {
  bool fired = false;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto bad = run_kernel(2, [] { pair_dealloc_kernel(false); }, with_strategy(emu::StrategyKind::random, seed),
                          kSmem, 2);
    ASSERT_EQ(outcome(bad), "tmem.dealloc-unordered") << bad.report();
    EXPECT_TRUE(contains(bad.violations[0].other, "tcgen05.ld")) << bad.report();
    fired = true;
    auto good = run_kernel(2, [] { pair_dealloc_kernel(true); }, with_strategy(emu::StrategyKind::random, seed),
                           kSmem, 2);
    EXPECT_OK(good);
  }
  EXPECT_TRUE(fired);
}

// ------------------------------------------------------------ ld / st

// Every shape stores a pattern with tcgen05.st and loads it back: each
// (thread, register) sees its own value, so the fragment maps agree between
// st and ld, and every cell of the access is written.
template <TmemShape S, std::uint32_t Num>
void roundtrip() {
  auto r = run_kernel(2, [] {
    if (B::warp_idx() != 1) return;
    const std::uint32_t a = alloc1(512);
    const std::uint32_t base = tmem_addr(32, 0);
    constexpr std::uint32_t kRegs = wspipe::tmem_regs(S, Num);
    B::Frag<kRegs> out;
    B::for_each_lane([&](std::uint32_t lane) {
      for (std::uint32_t i = 0; i < kRegs; ++i) out.set(i, lane * 1000 + i + 1);
    });
    B::template tmem_store<S, Num, 64>(base, out);
    B::tmem_wait_store();
    auto in = B::template tmem_load<S, Num, 64>(base);
    B::tmem_wait_load();
    B::for_each_lane([&](std::uint32_t lane) {
      for (std::uint32_t i = 0; i < kRegs; ++i) B::check(in.reg(i) == lane * 1000 + i + 1, "st/ld round trip");
    });
    B::tmem_dealloc<1>(a, 512);
  }, {}, kSmem);
  EXPECT_OK(r) << wspipe::to_string(S) << ".x" << Num;
}

TEST(emu_TmemLdSt, EveryShapeRoundTrips) {
  roundtrip<TmemShape::s32x32b, 1>();
  roundtrip<TmemShape::s32x32b, 128>();
  roundtrip<TmemShape::s16x64b, 1>();
  roundtrip<TmemShape::s16x64b, 64>();
  roundtrip<TmemShape::s16x128b, 2>();
  roundtrip<TmemShape::s16x128b, 64>();
  roundtrip<TmemShape::s16x256b, 1>();
  roundtrip<TmemShape::s16x256b, 32>();
  roundtrip<TmemShape::s16x32bx2, 4>();
}

TEST(emu_TmemLdSt, RegisterCountsFollowThePtxTable) {
  using wspipe::tmem_num_valid;
  using wspipe::tmem_regs;
  EXPECT_EQ(tmem_regs(TmemShape::s32x32b, 128), 128u);
  EXPECT_EQ(tmem_regs(TmemShape::s16x128b, 64), 128u);
  EXPECT_EQ(tmem_regs(TmemShape::s16x256b, 32), 128u);
  EXPECT_EQ(tmem_regs(TmemShape::s16x256b, 1), 4u);
  EXPECT_TRUE(tmem_num_valid(TmemShape::s16x64b, 128));
  EXPECT_FALSE(tmem_num_valid(TmemShape::s16x128b, 128));
  EXPECT_FALSE(tmem_num_valid(TmemShape::s16x256b, 64));
  EXPECT_FALSE(tmem_num_valid(TmemShape::s32x32b, 3));
  EXPECT_FALSE(tmem_num_valid(TmemShape::s32x32b, 256));
}

TEST(emu_TmemLdSt, WrongLaneQuarterFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(6, [&] {
    if (B::warp_idx() != 5) return;  // quarter 5 % 4 = 1: lanes 32-63
    const std::uint32_t a = alloc1(64);
    auto ok = B::tmem_load<TmemShape::s32x32b, 2>(tmem_addr(32, 0));
    auto ok16 = B::tmem_load<TmemShape::s16x256b, 1>(tmem_addr(48, 0));
    line = __LINE__; auto bad = B::tmem_load<TmemShape::s32x32b, 2>(tmem_addr(0, 0));
    B::tmem_wait_load();
    (void)ok, (void)ok16, (void)bad;
    B::tmem_dealloc<1>(a, 64);
  }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.lane-quarter", line);
  EXPECT_TRUE(contains(r.violations[0].message, "lanes [32, 64)")) << r.report();
}

TEST(emu_TmemLdSt, ColumnsOutsideTheAllocationFire) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    const std::uint32_t a = alloc1(64);
    auto ok = B::tmem_load<TmemShape::s32x32b, 64>(tmem_addr(0, 0));
    line = __LINE__; auto bad = B::tmem_load<TmemShape::s32x32b, 2>(tmem_addr(0, 63));
    B::tmem_wait_load();
    (void)ok, (void)bad;
    B::tmem_dealloc<1>(a, 64);
  }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.unallocated-access", line);
}

TEST(emu_TmemLdSt, ResultReadBeforeWaitFires) {
  auto kernel = [](bool wait, std::uint32_t& line) {
    return [wait, &line] {
      const std::uint32_t a = alloc1(32);
      auto f = B::tmem_load<TmemShape::s32x32b, 1>(a);
      if (wait) B::tmem_wait_load();
      B::for_each_lane([&](std::uint32_t) { line = __LINE__; (void)f.reg(0); });
      B::tmem_wait_load();
      B::tmem_dealloc<1>(a, 32);
    };
  };
  std::uint32_t line = 0;
  auto bad = run_kernel(1, kernel(false, line), {}, kSmem);
  EXPECT_VIOLATION_AT(bad, "tmem.ld-without-wait", line);
  auto good = run_kernel(1, kernel(true, line), {}, kSmem);
  EXPECT_OK(good);
}

TEST(emu_TmemLdSt, FragmentReadAtWarpLevelFires) {
  auto r = run_kernel(1, [&] {
    const std::uint32_t a = alloc1(32);
    auto f = B::tmem_load<TmemShape::s32x32b, 1>(a);
    B::tmem_wait_load();
    (void)f.reg(0);  // 32 lanes: which thread's register?
    B::tmem_dealloc<1>(a, 32);
  }, {}, kSmem);
  EXPECT_EQ(outcome(r), "warp.lane-idx-divergent");
}

// docs/hardware.md bug 4: the epilogue releases the accumulator stage (arrive
// on accum-empty) before tcgen05.wait::ld.
TEST(emu_TmemLdSt, ReleaseBeforeWaitLdFires) {
  auto kernel = [](bool wait_first, std::uint32_t& line) {
    return [wait_first, &line] {
      auto& s = smem();
      init_bar(s.bar[0], 32, "accum_empty");
      const std::uint32_t a = alloc1(32);
      auto f = B::tmem_load<TmemShape::s32x32b, 1>(a);
      if (wait_first) B::tmem_wait_load();
      line = __LINE__; B::arrive(s.bar[0]);
      B::tmem_wait_load();
      (void)f;
      B::tmem_dealloc<1>(a, 32);
    };
  };
  std::uint32_t line = 0;
  auto bad = run_kernel(1, kernel(false, line), {}, kSmem);
  EXPECT_VIOLATION_AT(bad, "tmem.release-before-wait-ld", line);
  auto good = run_kernel(1, kernel(true, line), {}, kSmem);
  EXPECT_OK(good);
}

// A tcgen05.ld or st issued after the warp's arrive is not ordered before
// what that arrive releases, though an earlier one of the same kind was
// waited for: tcgen05.wait::ld / wait::st release the load or store agent
// into the warp and start its next epoch. Warp 1 accesses lanes 32-63,
// arrives, and accesses them again ("late"); warp 5 (the same lane quarter)
// waits for the arrive and then accesses them the other way. Reported on
// every schedule (whichever of the two comes first), quiet when the arrive
// comes after both.
void expect_late_access_races(bool store_first) {
  auto kernel = [store_first](bool late) {
    return [store_first, late] {
      auto& s = smem();
      const std::uint32_t w = B::warp_idx();
      if (w == 0) {
        init_bar(s.bar[0], 1, "accum_empty");
        B::fence_init();
        B::tmem_alloc<1>(&s.tmem_base, 32);
      }
      B::cluster_sync();
      const std::uint32_t cells = tmem_addr(32, wspipe::tmem_col(s.tmem_base));
      auto access = [&](bool store) {
        if (store) {
          B::tmem_store<TmemShape::s32x32b, 1>(cells, B::Frag<1>{});
          B::tmem_wait_store();
        } else {
          auto f = B::tmem_load<TmemShape::s32x32b, 1>(cells);
          B::tmem_wait_load();
          (void)f;
        }
      };
      if (w == 1) {
        access(store_first);
        if (late) B::elect_one([&] { B::arrive(s.bar[0]); });
        access(store_first);
        if (!late) B::elect_one([&] { B::arrive(s.bar[0]); });
      } else if (w == 5) {
        B::wait(s.bar[0], 0);
        access(!store_first);
      }
      B::cluster_sync();
      if (w == 0) B::tmem_dealloc<1>(s.tmem_base, 32);
    };
  };
  for (std::uint64_t seed = 0; seed <= 10; ++seed) {
    const emu::RunOptions o = seed == 0 ? emu::RunOptions{} : with_strategy(emu::StrategyKind::random, seed);
    auto bad = run_kernel(6, kernel(true), o, kSmem);
    EXPECT_EQ(outcome(bad), "race.tmem") << "seed " << seed << "\n" << bad.report();
    auto good = run_kernel(6, kernel(false), o, kSmem);
    EXPECT_OK(good);
  }
}

TEST(emu_TmemLdSt, ALoadAfterTheReleasingArriveRacesWithTheNextWriter) { expect_late_access_races(false); }

TEST(emu_TmemLdSt, AStoreAfterTheReleasingArriveRacesWithTheNextReader) { expect_late_access_races(true); }

// tcgen05.st is asynchronous: its source registers must keep their values
// until tcgen05.wait::st. A change before the wait is reported there,
// naming the store; a change just before the source fragment goes out of
// scope, with the store not waited for, is reported at the store. Quiet: a
// change after the wait, and fragments that go out of scope unchanged
// (a loop's, one storage reused by the next iteration's).
enum class StSource { changed_before_wait, changed_after_wait, changed_in_scope, stored_twice, loop_unchanged };

TEST(emu_TmemLdSt, SourceRegistersChangedBeforeWaitStFire) {
  auto run = [](StSource mode, std::uint32_t& st_line, std::uint32_t& wait_line) {
    return run_kernel(1, [mode, &st_line, &wait_line] {
      const std::uint32_t a = alloc1(32);
      auto fill = [](B::Frag<1>& f, std::uint32_t v) {
        B::for_each_lane([&](std::uint32_t lane) { f.set(0, v + lane); });
      };
      B::Frag<1> f;
      fill(f, 1);
      if (mode == StSource::changed_in_scope || mode == StSource::stored_twice) {
        B::Frag<1> g;
        fill(g, 1);
        st_line = __LINE__; B::tmem_store<TmemShape::s32x32b, 1>(a, g);
        if (mode == StSource::stored_twice) B::tmem_store<TmemShape::s32x32b, 1>(a + 1, g);
        B::Frag<1> copy = g;  // a copy's end says nothing of g
        (void)copy;
        fill(g, 2);
      } else if (mode == StSource::loop_unchanged) {
        for (std::uint32_t col = 0; col < 2; ++col) {
          B::Frag<1> g;
          fill(g, col);
          B::tmem_store<TmemShape::s32x32b, 1>(a + col, g);
        }
      } else {
        st_line = __LINE__; B::tmem_store<TmemShape::s32x32b, 1>(a, f);
        if (mode == StSource::changed_before_wait) fill(f, 2);
      }
      wait_line = __LINE__; B::tmem_wait_store();
      if (mode == StSource::changed_after_wait) fill(f, 2);
      B::tmem_dealloc<1>(a, 32);
    }, {}, kSmem);
  };
  std::uint32_t st = 0, wait = 0;
  auto before = run(StSource::changed_before_wait, st, wait);
  EXPECT_VIOLATION_AT(before, "tmem.st-source-changed", wait);
  EXPECT_TRUE(contains(before.violations[0].message, "register 0 of thread 0 of the fragment stored by the tcgen05.st at ")) << before.report();
  EXPECT_TRUE(contains(before.violations[0].message, "emu_tmem_test.cpp:" + std::to_string(st) +
                                                      " changed from 1 to 2 before this tcgen05.wait::st"))
      << before.report();
  for (const StSource mode : {StSource::changed_in_scope, StSource::stored_twice}) {
    auto in_scope = run(mode, st, wait);
    EXPECT_VIOLATION_AT(in_scope, "tmem.st-source-changed", st);
    EXPECT_TRUE(contains(in_scope.violations[0].message, "before the fragment went out of scope")) << in_scope.report();
  }
  EXPECT_OK(run(StSource::changed_after_wait, st, wait));
  EXPECT_OK(run(StSource::loop_unchanged, st, wait));
}

TEST(emu_TmemLdSt, DeallocWithALoadInFlightFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    const std::uint32_t a = alloc1(32);
    auto f = B::tmem_load<TmemShape::s32x32b, 1>(a);
    (void)f;
    line = __LINE__; B::tmem_dealloc<1>(a, 32);
  }, {}, kSmem);
  EXPECT_VIOLATION_AT(r, "tmem.dealloc-in-flight", line);
}

// The reader (warp 1) and the deallocating warp (warp 0) of one CTA: the
// dealloc must be ordered after the reader's loads.
TEST(emu_TmemLdSt, DeallocUnorderedWithAnotherWarpsLoadFires) {
  auto kernel = [](bool sync) {
    return [sync] {
      auto& s = smem();
      if (B::warp_idx() == 0) {
        B::tmem_alloc<1>(&s.tmem_base, 64);
        B::named_arrive(1, 64);
        if (sync) B::named_sync(2, 64);
        B::tmem_dealloc<1>(tmem_addr(0, 0), 64);
      } else {
        B::named_sync(1, 64);
        auto f = B::tmem_load<TmemShape::s32x32b, 8>(tmem_addr(32, 0));
        B::tmem_wait_load();
        (void)f;
        if (sync) B::named_arrive(2, 64);
      }
    };
  };
  bool fired = false;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto bad = run_kernel(2, kernel(false), with_strategy(emu::StrategyKind::random, seed), kSmem);
    // Either the load comes first (the dealloc is unordered after it), or
    // the dealloc does (the load then reads unallocated columns), or it
    // comes while the load is not yet waited for.
    const std::string o = outcome(bad);
    EXPECT_TRUE(o == "tmem.dealloc-unordered" || o == "tmem.unallocated-access" || o == "tmem.dealloc-in-flight")
        << bad.report();
    fired |= o == "tmem.dealloc-unordered";
    auto good = run_kernel(2, kernel(true), with_strategy(emu::StrategyKind::random, seed), kSmem);
    EXPECT_OK(good);
  }
  EXPECT_TRUE(fired);
}

// ------------------------------------------------------------ buffers

// A run's shared memory, TMEM cells and shadow tables are kept for the next
// run on the thread (keep_cta_buffers, runtime/buffers.cpp). The next run must still
// start from zeroed memory and with no shadow of the earlier run's accesses:
// a stale shadow would report the earlier run's writes as unordered with
// this run's reads (race.smem, race.tmem), and stale cells would be read.
TEST(emu_Buffers, TheNextRunOnTheThreadStartsClean) {
  static constexpr std::uint32_t kMark = 0x5eed;
  auto kernel = [](bool first) {
    return [first] {
      const wspipe::SmemView<B, std::uint32_t> pad(&smem().pad, 1);
      if (B::warp_idx() == 0) {
        if (first) pad.store(0, kMark);  // an ordinary store by warp 0
        return;
      }
      if (!first) B::check(pad.load(0) == 0, "shared memory is zero at the start of a run");
      const std::uint32_t a = alloc1(32);
      const std::uint32_t base = tmem_addr(32, 0);
      if (first) {
        B::Frag<32> out;
        B::for_each_lane([&](std::uint32_t) {
          for (std::uint32_t i = 0; i < 32; ++i) out.set(i, kMark + i);
        });
        B::tmem_store<TmemShape::s32x32b, 32>(base, out);
        B::tmem_wait_store();
      } else {
        auto in = B::tmem_load<TmemShape::s32x32b, 32>(base);
        B::tmem_wait_load();
        B::for_each_lane([&](std::uint32_t) {
          for (std::uint32_t i = 0; i < 32; ++i) B::check(in.reg(i) == 0, "TMEM is zero at the start of a run");
        });
      }
      B::tmem_relinquish<1>();
      B::tmem_dealloc<1>(a, 32);
    };
  };
  EXPECT_OK(run_kernel(2, kernel(true), {}, kSmem));
  // (Warp 1 reads what warp 0 wrote, and its ld agent what its st agent
  // wrote: with the first run's shadows, both would be unordered.)
  auto again = run_kernel(2, kernel(false), {}, kSmem);
  EXPECT_OK(again);
}

}  // namespace
