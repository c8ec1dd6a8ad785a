// core/tmem.hpp on the emulator: TmemAddress arithmetic, TmemStage offsets
// and its per-warp fragment loads, TmemAllocation's allocate / from_shared /
// release_lock / deallocate, and TmemDeallocBarrier for cta_group 1 and 2
// (docs/pipeline-api.md; bugs 8, 9, 11, 12 of docs/hardware.md).
//
// TmemStage's and TmemAllocation's static_asserts (NumStages >= 1, the stages
// fit in 512 columns, CtaGroup 1 or 2, MaxCols a power of 2 in [32, 512]) are
// compile-time checks: a wrong instantiation does not build, so there is
// nothing to run here.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/tcgen05.hpp"
#include "core/tmem.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::kTmemLowerRowLanes;
using wspipe::SharedMemBarrier;
using wspipe::tmem_addr;
using wspipe::TmemAddress;
using wspipe::TmemShape;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

template <int CtaGroup, std::uint32_t MaxCols = 512>
using Alloc = wspipe::TmemAllocation<B, CtaGroup, MaxCols>;
template <int CtaGroup>
using DeallocBar = wspipe::TmemDeallocBarrier<B, CtaGroup>;

constexpr std::uint64_t kSeeds = 10;

// The kernels below use 6 warps per CTA: four epilogue warps (each reads
// its TMEM lane quarter, warp % 4), a load warp (idle here) and the MMA warp.
// `epilogue_first` picks which warps are the epilogue: 0 (warps 0-3, quarters
// 0-3, the MAX layout) or 2 (warps 2-5, quarters 2, 3, 0, 1, the layout of
// emu_async_test's GEMM), which catches code that uses warp_idx instead of
// warp_idx % 4 for the quarter.
struct Roles {
  std::uint32_t epilogue_first = 0;
  bool epilogue(std::uint32_t w) const { return w >= epilogue_first && w < epilogue_first + 4; }
  std::uint32_t mma() const { return epilogue_first == 0 ? 5 : 1; }
};

emu::RunResult run6(const std::function<void()>& body, std::size_t smem, emu::RunOptions opts = {},
                    std::uint32_t ctas = 1, Roles roles = {}) {
  emu::LaunchConfig launch;
  launch.warps_per_cta = 6;
  launch.cluster_size = ctas;
  launch.smem_bytes = smem;
  launch.warp_roles.assign(6, "");
  for (std::uint32_t w = 0; w < 6; ++w) launch.warp_roles[w] = roles.epilogue(w) ? "epilogue" : "";
  launch.warp_roles[roles.mma()] = "mma";
  return emu::run(launch, body, opts);
}

// The trace's events of one kind. An event's `warp` is its actor: warps
// first (CTA-major, 6 per CTA here), then each CTA's TMA engine and tensor core.
std::vector<emu::Event> events(const emu::RunResult& r, emu::EventKind kind) {
  std::vector<emu::Event> out;
  for (const auto& e : r.trace.events)
    if (e.kind == kind) out.push_back(e);
  return out;
}

// ------------------------------------------------------------ TmemAddress

TEST(core_TmemAddress, FieldsAreLaneHighColumnLow) {
  constexpr TmemAddress a(tmem_addr(37, 300));
  static_assert(a.lane() == 37 && a.col() == 300 && a.raw() == (37u << 16 | 300u));
  static_assert(TmemAddress().raw() == 0);
  EXPECT_EQ(TmemAddress(0x00400080u).lane(), 0x40u);
  EXPECT_EQ(TmemAddress(0x00400080u).col(), 0x80u);
}

// Rows 16-31 of a fragment are 16 lanes down: one lane is 1 << 16 in the raw
// address, not 1 (MAX's TMEM_LOWER_ROW_OFFSET is added as 16 << 16).
TEST(core_TmemAddress, LowerRowOffsetIsSixteenLanes) {
  static_assert(kTmemLowerRowLanes == 16);
  constexpr TmemAddress upper(tmem_addr(32, 8));
  constexpr TmemAddress lower = upper.offset(kTmemLowerRowLanes, 0);
  static_assert(lower == TmemAddress(tmem_addr(48, 8)));
  EXPECT_EQ(lower.raw() - upper.raw(), 16u << 16);
}

RC_GTEST_PROP(core_TmemAddress, OffsetAddsLanesAndColumnsIndependently, ()) {
  const auto lane = *rc::gen::inRange<std::uint32_t>(0, 128);
  const auto col = *rc::gen::inRange<std::uint32_t>(0, 512);
  const auto dl = *rc::gen::inRange<std::uint32_t>(0, 128 - lane);
  const auto dc = *rc::gen::inRange<std::uint32_t>(0, 512 - col);
  const TmemAddress a(tmem_addr(lane, col));
  const TmemAddress b = a.offset(dl, dc);
  RC_ASSERT(b.lane() == lane + dl);
  RC_ASSERT(b.col() == col + dc);
  RC_ASSERT(b == TmemAddress(tmem_addr(lane + dl, col + dc)));
  // Offsets compose: lanes first then columns is the same as both at once.
  RC_ASSERT(a.offset(dl, 0).offset(0, dc) == b);
}

// ------------------------------------------------------------ TmemStage (values)

template <int S, std::uint32_t Stride>
void check_every_index(std::uint32_t base) {
  using Stage = wspipe::TmemStage<S, Stride, 1>;
  static_assert(Stage::kNumStages == S && Stage::kStride == Stride);
  for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(S); ++i) {
    const Stage st(base, i);
    EXPECT_EQ(st.index(), i);
    EXPECT_EQ(st.base(), base);
    EXPECT_EQ(st.offset(), base + i * Stride) << "stage " << i << " of " << S << ", stride " << Stride;
    EXPECT_EQ(st.address(), TmemAddress(base + i * Stride));
    // The typed view: element (lane, col) of the stage.
    EXPECT_EQ(st.cell(5, 7), TmemAddress(base + i * Stride).offset(5, 7));
    // The TmemAddress constructor is the same stage.
    EXPECT_EQ(Stage(TmemAddress(base), i).offset(), st.offset());
  }
}

TEST(core_TmemStage, OffsetIsBasePlusIndexTimesStrideForEveryIndex) {
  for (std::uint32_t base : {tmem_addr(0, 0), tmem_addr(0, 32), tmem_addr(0, 128)}) {
    check_every_index<1, 512>(base);
    check_every_index<2, 256>(base);
    check_every_index<3, 128>(base);
    check_every_index<4, 96>(base);
    check_every_index<8, 32>(base);
  }
  static_assert(wspipe::TmemStage<2, 256, 2>(tmem_addr(0, 0), 1).offset() == 256);
}

template <int S, std::uint32_t Stride>
void check_round_trip(std::uint32_t base, std::uint32_t index) {
  using Stage = wspipe::TmemStage<S, Stride, 1>;
  const Stage st(base, index);
  const Stage back = Stage::from_offset(st.offset(), index);
  RC_ASSERT(back.base() == base);
  RC_ASSERT(back.index() == index);
  RC_ASSERT(back.offset() == st.offset());
}

// from_offset(offset, index) computes the base back: the round trip gives
// the stage it came from, for every base, index and stride.
RC_GTEST_PROP(core_TmemStage, FromOffsetRoundTrips, ()) {
  const std::uint32_t base = tmem_addr(*rc::gen::inRange<std::uint32_t>(0, 128),
                                       *rc::gen::inRange<std::uint32_t>(0, 512));
  const int cfg = *rc::gen::inRange(0, 5);
  const std::uint32_t stages[] = {1, 2, 3, 4, 8};
  const auto index = *rc::gen::inRange<std::uint32_t>(0, stages[cfg]);
  switch (cfg) {
    case 0: check_round_trip<1, 512>(base, index); break;
    case 1: check_round_trip<2, 256>(base, index); break;
    case 2: check_round_trip<3, 160>(base, index); break;
    case 3: check_round_trip<4, 128>(base, index); break;
    default: check_round_trip<8, 64>(base, index); break;
  }
}

TEST(core_TmemStage, ConstructsFromAnAllocation) {
  const Alloc<1> alloc1(tmem_addr(0, 128));
  const wspipe::TmemStage<2, 128, 1> s1(alloc1, 1);
  EXPECT_EQ(s1.base(), tmem_addr(0, 128));
  EXPECT_EQ(s1.offset(), tmem_addr(0, 256));
  const Alloc<2, 256> alloc2(tmem_addr(0, 256));
  const wspipe::TmemStage<4, 64, 2> s2(alloc2, 3);
  EXPECT_EQ(s2.base(), tmem_addr(0, 256));
  EXPECT_EQ(s2.offset(), tmem_addr(0, 256 + 3 * 64));
}

TEST(core_TmemStage, TensorViewAddressesRowsByLaneAndColumnsByColumn) {
  constexpr wspipe::TmemStage<2, 256, 1> stage(tmem_addr(0, 0), 1);
  constexpr auto t = stage.tensor<float, 128, 64>();
  static_assert(decltype(t)::kRows == 128 && decltype(t)::kCols == 64);
  EXPECT_EQ(t.base(), wspipe::TmemAddress(tmem_addr(0, 256)));
  EXPECT_EQ(t.at(0, 0).raw(), tmem_addr(0, 256));
  EXPECT_EQ(t.at(37, 5).raw(), tmem_addr(37, 261));
  // A warp's quarter: warp index 6 owns lanes 64-95.
  EXPECT_EQ(t.quarter(6).raw(), tmem_addr(64, 256));
  EXPECT_EQ(t.quarter(3).raw(), tmem_addr(96, 256));
}

// ------------------------------------------------------------ TmemStage loads

// A unique value per TMEM cell.
constexpr std::uint32_t pattern(std::uint32_t lane, std::uint32_t col) { return lane * 1000 + col + 1; }

struct LoadSmem {
  std::uint32_t tmem_addr;
};

// Each epilogue warp writes `pattern` over 64 columns of its lane quarter in
// stage 1 of a TmemStage<2, 256, 1> with tcgen05.st.32x32b, then reads it
// back with load_upper / load_lower at column 8 of the stage. Every register
// must hold the cell tmem_frag_cell names for 16x256b.x4: rows 0-15 of the
// warp's quarter for load_upper, rows 16-31 for load_lower.
void stage_load_kernel(Roles roles) {
  using Stage = wspipe::TmemStage<2, 256, 1>;
  constexpr std::uint32_t kIndex = 1, kCol = 8, kStored = 64;
  auto& s = B::shared_storage<LoadSmem>();
  const std::uint32_t w = B::warp_idx();
  if (w == roles.mma()) {
    const auto alloc = Alloc<1>::allocate(&s.tmem_addr);
    B::named_arrive(1, 160);  // publishes the address
    B::named_sync(2, 160);    // the epilogue is done with TMEM
    alloc.release_lock();
    alloc.deallocate();
  } else if (roles.epilogue(w)) {
    B::named_sync(1, 160);
    const Stage st(Alloc<1>::from_shared(&s.tmem_addr), kIndex);
    const std::uint32_t q = wspipe::tmem_quarter_first_lane(w);
    const std::uint32_t col0 = wspipe::tmem_col(st.offset());
    B::Frag<kStored> src;
    B::for_each_lane([&](std::uint32_t lane) {
      for (std::uint32_t i = 0; i < kStored; ++i) src.set(i, pattern(q + lane, col0 + i));
    });
    B::tmem_store<TmemShape::s32x32b, kStored>(st.cell(q, 0).raw(), src);
    B::tmem_wait_store();
    const auto upper = st.load_upper<B>(kCol);  // default .x4: 16 registers
    const auto lower = st.load_lower<B>(kCol);
    Stage::wait_load<B>();
    B::for_each_lane([&](std::uint32_t t) {
      for (std::uint32_t r = 0; r < 16; ++r) {
        const wspipe::TmemCell c = wspipe::tmem_frag_cell(TmemShape::s16x256b, 4, t, r);
        B::check(upper.reg(r) == pattern(q + c.lane, col0 + kCol + c.col), "load_upper: rows 0-15 of the quarter");
        B::check(lower.reg(r) == pattern(q + kTmemLowerRowLanes + c.lane, col0 + kCol + c.col),
                 "load_lower: rows 16-31 of the quarter");
      }
    });
    B::named_arrive(2, 160);
  }
}

TEST(core_TmemStage, LoadUpperAndLowerReadTheWarpsQuarterHalves) {
  for (std::uint32_t first : {0u, 2u}) {
    const Roles roles{first};
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      auto r = run6([roles] { stage_load_kernel(roles); }, sizeof(LoadSmem),
                    with_strategy(emu::StrategyKind::random, seed), 1, roles);
      EXPECT_OK(r) << "epilogue warps " << first << "-" << first + 3;
    }
    // The loads are 16x256b.x4 at lanes quarter and quarter + 16, column
    // 256 + 8, in each epilogue warp.
    auto r = run6([roles] { stage_load_kernel(roles); }, sizeof(LoadSmem), {}, 1, roles);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    std::vector<std::pair<std::int64_t, std::int64_t>> loads;
    for (const auto& e : events(r, emu::EventKind::tmem_ld)) {
      EXPECT_EQ(e.b, 264) << r.trace.describe(e);
      EXPECT_EQ(e.c, 16) << r.trace.describe(e);
      loads.emplace_back(e.warp, e.a);
    }
    std::sort(loads.begin(), loads.end());
    std::vector<std::pair<std::int64_t, std::int64_t>> want;
    for (std::uint32_t w = first; w < first + 4; ++w) {
      want.emplace_back(w, 32 * (w % 4));
      want.emplace_back(w, 32 * (w % 4) + 16);
    }
    EXPECT_EQ(loads, want);
  }
}

// ------------------------------------------------------------ TmemAllocation

struct AllocSmem {
  std::uint32_t pad_addr;
  std::uint32_t tmem_addr;
};

// The MMA warp first takes columns [0, 256) with a raw alloc, so that the
// allocation under test lands at column 256: an address of 0 read from the
// wrong place would not pass for the right one.
TEST(core_TmemAllocation, AllocateAndFromSharedAfterTheBarrierAgree) {
  static_assert(Alloc<1, 256>::kCols == 256 && Alloc<1, 256>::kCtaGroup == 1);
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::array<std::uint32_t, 6> got{};
    got.fill(0xdead);
    auto r = run6([&got] {
      auto& s = B::shared_storage<AllocSmem>();
      const std::uint32_t w = B::warp_idx();
      if (w == 5) {
        B::tmem_alloc<1>(&s.pad_addr, 256);
        const auto alloc = Alloc<1, 256>::allocate(&s.tmem_addr);
        got[w] = alloc.addr();
        B::check(alloc.address() == TmemAddress(alloc.addr()), "address() is addr() as a TmemAddress");
        B::named_arrive(1, 160);
        B::named_sync(2, 160);
        alloc.release_lock();
        alloc.deallocate();
        B::tmem_dealloc<1>(tmem_addr(0, 0), 256);
      } else if (w < 4) {
        B::named_sync(1, 160);
        got[w] = Alloc<1, 256>::from_shared(&s.tmem_addr).addr();
        B::named_arrive(2, 160);
      }
    }, sizeof(AllocSmem), with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
    for (std::uint32_t w : {0u, 1u, 2u, 3u, 5u}) EXPECT_EQ(got[w], tmem_addr(0, 256)) << "warp " << w;
  }
}

// from_shared reads through SmemView, so the race checker sees a read made
// before the barrier that publishes the address (docs/hardware.md bug 8). A
// plain pointer read would be invisible to it and this would pass silently.
TEST(core_TmemAllocation, FromSharedBeforeThePublishingBarrierRaces) {
  bool fired = false;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    auto r = run6([] {
      auto& s = B::shared_storage<AllocSmem>();
      const std::uint32_t w = B::warp_idx();
      if (w == 5) {
        const auto alloc = Alloc<1>::allocate(&s.tmem_addr);
        B::named_arrive(1, 160);
        B::named_sync(2, 160);
        alloc.deallocate();
      } else if (w < 4) {
        (void)Alloc<1>::from_shared(&s.tmem_addr);  // bug: before the barrier
        B::named_sync(1, 160);
        B::named_arrive(2, 160);
      }
    }, sizeof(AllocSmem), with_strategy(emu::StrategyKind::random, seed));
    if (r.status == emu::Status::ok) continue;
    ASSERT_EQ(outcome(r), "race.smem") << r.report();
    const auto& v = r.violations[0];
    EXPECT_TRUE(contains(v.message + v.other, "tcgen05.alloc's store of the TMEM address")) << r.report();
    fired = true;
  }
  EXPECT_TRUE(fired);
}

// release_lock is tcgen05.relinquish_alloc_permit: a later allocate in the
// CTA is reported at the caller's line (docs/hardware.md bug 11).
TEST(core_TmemAllocation, AllocateAfterReleaseLockFires) {
  std::uint32_t line = 0;
  auto r = wspipe::test::run_kernel(1, [&line] {
    auto& s = B::shared_storage<AllocSmem>();
    const auto first = Alloc<1, 128>::allocate(&s.tmem_addr);
    first.release_lock();
    first.deallocate();
    line = __LINE__; (void)Alloc<1, 128>::allocate(&s.tmem_addr);
  }, {}, sizeof(AllocSmem));
  EXPECT_VIOLATION_AT(r, "tmem.alloc-after-relinquish", line);
}

// deallocate frees the allocation's columns: a second 512-column allocate
// in the same CTA succeeds. Without the deallocate it can never get them
// (alloc blocks until columns are free: a deadlock), so the check has teeth.
TEST(core_TmemAllocation, DeallocateFreesTheColumns) {
  auto kernel = [](bool dealloc_first) {
    return [dealloc_first] {
      auto& s = B::shared_storage<AllocSmem>();
      const auto first = Alloc<1>::allocate(&s.tmem_addr);
      if (dealloc_first) first.deallocate();
      const auto second = Alloc<1>::allocate(&s.pad_addr);
      B::check(second.addr() == tmem_addr(0, 0), "the freed columns are reused");
      second.deallocate();
    };
  };
  EXPECT_OK(wspipe::test::run_kernel(1, kernel(true), {}, sizeof(AllocSmem)));
  auto leak = wspipe::test::run_kernel(1, kernel(false), {}, sizeof(AllocSmem));
  ASSERT_EQ(leak.status, emu::Status::deadlock) << leak.report();
  EXPECT_EQ(leak.blocked[0].op, "tcgen05.alloc");

  // Two warps each take all 512 columns: whoever comes second waits for the
  // other's deallocate, in every schedule.
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    auto r = wspipe::test::run_kernel(2, [] {
      auto& s = B::shared_storage<AllocSmem>();
      const auto a = Alloc<1>::allocate(B::warp_idx() == 0 ? &s.tmem_addr : &s.pad_addr);
      a.deallocate();
    }, with_strategy(emu::StrategyKind::random, seed), sizeof(AllocSmem));
    EXPECT_OK(r);
  }
  // Without deallocate the CTA leaks.
  auto r = wspipe::test::run_kernel(1, [] { (void)Alloc<1>::allocate(&B::shared_storage<AllocSmem>().tmem_addr); },
                                    {}, sizeof(AllocSmem));
  EXPECT_EQ(outcome(r), "tmem.leak");
}

// cta_group 2: the MMA warp of each CTA of the pair allocates (after a
// cluster barrier); both get the same columns (256 here, after a raw pad).
TEST(core_TmemAllocation, PairAllocateGivesBothCtasTheSameAddress) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::uint32_t got[2] = {0xdead, 0xdead};
    auto r = wspipe::test::run_kernel(1, [&got] {
      auto& s = B::shared_storage<AllocSmem>();
      B::cluster_sync();
      B::tmem_alloc<2>(&s.pad_addr, 256);
      const auto alloc = Alloc<2, 128>::allocate(&s.tmem_addr);
      got[B::cta_rank()] = alloc.addr();
      B::cluster_sync();
      alloc.release_lock();
      alloc.deallocate();
      B::tmem_dealloc<2>(tmem_addr(0, 0), 256);
    }, with_strategy(emu::StrategyKind::random, seed), sizeof(AllocSmem), 2);
    EXPECT_OK(r);
    EXPECT_EQ(got[0], tmem_addr(0, 256));
    EXPECT_EQ(got[1], tmem_addr(0, 256));
  }
}

// ------------------------------------------------------------ TmemDeallocBarrier

struct DeallocSmem {
  SharedMemBarrier dealloc;
  std::uint32_t tmem_addr;
};

enum class Signal {
  core,        // TmemDeallocBarrier::signal_complete
  local_only,  // bug (docs/hardware.md bug 9): a hand-written signal that skips the peer CTA
  three_warps, // bug: one epilogue warp never signals
};

// Warps 0-3 epilogue, 5 MMA. Each epilogue warp reads its lane quarter of
// the allocation (so that the dealloc has accesses to be ordered after),
// then signals; the MMA warp runs complete_dealloc. `init_count` 0 uses
// TmemDeallocBarrier::init; otherwise a hand-written init with that count.
template <int CtaGroup>
void dealloc_kernel(Signal signal, std::uint32_t init_count) {
  auto& s = B::shared_storage<DeallocSmem>();
  const DeallocBar<CtaGroup> bar(&s.dealloc);
  const std::uint32_t w = B::warp_idx();
  if (w == 5) {
    if (init_count == 0) {
      bar.init();
    } else {
      B::elect_one([&] { B::init(s.dealloc, init_count, wspipe::BarrierName{"tmem_dealloc"}); });
    }
    B::fence_init();
  }
  B::cluster_sync();
  if (w == 5) {
    const auto alloc = Alloc<CtaGroup>::allocate(&s.tmem_addr);
    B::named_arrive(1, 160);
    bar.complete_dealloc(alloc);
  } else if (w < 4) {
    B::named_sync(1, 160);
    const auto alloc = Alloc<CtaGroup>::from_shared(&s.tmem_addr);
    auto f = B::tmem_load<TmemShape::s32x32b, 8>(alloc.address().offset(32 * w, 0).raw());
    B::tmem_wait_load();
    (void)f;
    if (signal == Signal::core) {
      bar.signal_complete();
    } else if (signal == Signal::local_only) {
      B::arrive(s.dealloc);
    } else if (w != 3) {
      bar.signal_complete();
    }
  }
}

template <int CtaGroup>
emu::RunResult run_dealloc(Signal signal, std::uint64_t seed, std::uint32_t init_count = 0) {
  return run6([=] { dealloc_kernel<CtaGroup>(signal, init_count); }, sizeof(DeallocSmem),
              with_strategy(emu::StrategyKind::random, seed), CtaGroup);
}

TEST(core_TmemDeallocBarrier, CountIsOneHundredTwentyEightEpilogueThreadsPerCta) {
  static_assert(DeallocBar<1>::kCount == 128);
  static_assert(DeallocBar<2>::kCount == 256);
  for (int group : {1, 2}) {
    auto r = group == 1 ? run_dealloc<1>(Signal::core, 1) : run_dealloc<2>(Signal::core, 1);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    const auto inits = events(r, emu::EventKind::init);
    ASSERT_EQ(inits.size(), static_cast<std::size_t>(group));
    for (const auto& e : inits) {
      EXPECT_EQ(r.trace.objects[e.object].name, "tmem_dealloc");
      EXPECT_EQ(e.a, 128 * group);
    }
  }
}

// complete_dealloc = relinquish, wait for every epilogue thread, dealloc: in
// that order in the MMA warp, and the wait returns only after the last of
// the four epilogue warps' arrivals.
TEST(core_TmemDeallocBarrier, CompleteDeallocRelinquishesWaitsForEveryEpilogueThreadThenFrees) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    auto r = run_dealloc<1>(Signal::core, seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    std::vector<std::string> mma_ops;
    std::uint64_t last_signal = 0, wait_step = 0;
    int signals = 0;
    for (const auto& e : r.trace.events) {
      if (e.warp == 5 && (e.kind == emu::EventKind::tmem_relinquish || e.kind == emu::EventKind::wait ||
                          e.kind == emu::EventKind::tmem_dealloc)) {
        mma_ops.push_back(emu::to_string(e.kind));
        if (e.kind == emu::EventKind::wait) wait_step = e.step;
      }
      if (e.kind == emu::EventKind::arrive && e.warp < 4) {
        EXPECT_EQ(e.a, 32);  // warp level: one arrival per thread
        last_signal = std::max(last_signal, e.step);
        ++signals;
      }
    }
    EXPECT_EQ(mma_ops, (std::vector<std::string>{"tcgen05.relinquish_alloc_permit", "wait", "tcgen05.dealloc"}));
    EXPECT_EQ(signals, 4);
    EXPECT_GE(wait_step, last_signal) << "seed " << seed;
  }
  // One epilogue warp that never signals leaves 32 of 128 arrivals pending.
  auto r = run_dealloc<1>(Signal::three_warps, 1);
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  ASSERT_EQ(r.blocked.size(), 1u) << r.report();
  EXPECT_EQ(r.blocked[0].object, "tmem_dealloc (cta0)");
  EXPECT_TRUE(contains(r.blocked[0].state, "32 of 128 arrivals pending")) << r.report();
}

// cta_group 2: each epilogue thread arrives on both CTAs' barriers, so each
// MMA warp's wait covers both CTAs' four epilogue warps, and the pair's
// dealloc is ordered after every TMEM load of the pair. Quiet in every
// schedule.
TEST(core_TmemDeallocBarrier, PairDeallocWaitsForBothCtasEpilogues) {
  for (std::uint64_t seed = 1; seed <= 4 * kSeeds; ++seed) {
    auto r = run_dealloc<2>(Signal::core, seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    // Per CTA barrier: four local and four remote warp arrivals of 32.
    int local[2] = {0, 0}, remote[2] = {0, 0};
    for (const auto& e : events(r, emu::EventKind::arrive)) {
      EXPECT_EQ(e.a, 32);
      const std::uint32_t cta = r.trace.objects[e.object].cta;
      const std::uint32_t from = static_cast<std::uint32_t>(e.warp) / 6;
      EXPECT_EQ(e.remote, cta != from);
      (e.remote ? remote : local)[cta]++;
    }
    EXPECT_EQ(local[0], 4);
    EXPECT_EQ(local[1], 4);
    EXPECT_EQ(remote[0], 4);
    EXPECT_EQ(remote[1], 4);
    EXPECT_EQ(events(r, emu::EventKind::tmem_dealloc).size(), 1u);  // one collective for the pair
    EXPECT_EQ(events(r, emu::EventKind::tmem_relinquish).size(), 2u);
  }
}

// The bug the peer signal prevents, written by hand with raw arrives.
// With TmemDeallocBarrier's count (256), local-only arrivals bring each
// barrier to 128 of 256: neither MMA warp's wait ever returns.
TEST(core_TmemDeallocBarrier, OmittingThePeerSignalLeavesHalfTheCountPending) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto r = run_dealloc<2>(Signal::local_only, seed);
    ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
    ASSERT_EQ(r.blocked.size(), 2u) << r.report();
    for (const auto& b : r.blocked) {
      EXPECT_TRUE(contains(b.warp, "/w5 mma")) << r.report();
      EXPECT_EQ(b.op, "wait");
      EXPECT_TRUE(contains(b.state, "128 of 256 arrivals pending")) << r.report();
    }
    EXPECT_NE(r.blocked[0].object, r.blocked[1].object);  // one per CTA
  }
}

// With a count of 128 (what cta_group 1 would use), the local arrivals do
// complete each barrier, and each MMA warp deallocates having waited only
// for its own CTA's epilogue: the pair dealloc is not ordered after the
// peer's tcgen05.ld, in every schedule (docs/hardware.md bug 9).
TEST(core_TmemDeallocBarrier, OmittingThePeerSignalWithACountOf128IsUnordered) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto r = run_dealloc<2>(Signal::local_only, seed, 128);
    ASSERT_EQ(outcome(r), "tmem.dealloc-unordered") << r.report();
    EXPECT_TRUE(contains(r.violations[0].other, "tcgen05.ld")) << r.report();
  }
  for (std::uint64_t seed = 1; seed <= 5; ++seed) EXPECT_OK(run_dealloc<2>(Signal::core, seed));
}

}  // namespace
