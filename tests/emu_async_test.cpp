// The emulator's asynchronous engines (TMA, the tensor core, tcgen05.commit),
// shared-memory tile access through SmemView, fence.proxy.async, and the
// happens-before race checker, on a small warp-specialized GEMM
// (TMA warp, MMA warp, four epilogue warps) for cta_group 1 and 2 and on
// its broken variants. Every rule is shown firing on the bug and quiet on
// the fix; the GEMM's result is checked against a CPU reference.
#include <bit>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <sstream>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/pipeline_state.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::ElemType;
using wspipe::InstrDescriptor;
using wspipe::MmaKind;
using wspipe::SharedMemBarrier;
using wspipe::SmemDescriptor;
using wspipe::SmemSwizzle;
using wspipe::SmemView;
using wspipe::TensorMap;
using wspipe::tmem_addr;
using wspipe::TmemShape;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::init_bar;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

// ------------------------------------------------------------ the GEMM

// D (M x 64, f32) = A (M x K, bf16, K-major) * B^T (64 x K, bf16, K-major),
// K = 128 in two 64-wide K blocks through a one-stage ring, so that the
// slot is reused while MMAs may still read it. cta_group 2: M = 256, each
// CTA of the pair loads 128 rows of A and 32 rows of B and receives its 128
// rows of D; the even CTA's MMA warp issues for both.
constexpr std::uint32_t kN = 64, kK = 128, kBlockK = 64, kStages = 1;

enum class Bug {
  none,
  slot_release_on_issue,  // docs/hardware.md bug 2: a thread arrive frees the slot, not tcgen05.commit
  unelected_mma,          // bug 6
  unelected_commit,       // bug 5
  expect_tx_mismatch,     // bug 13: 16 bytes more expected than delivered
  epilogue_skips_wait,    // the epilogue loads D without waiting for accum-full
  exit_before_drain,      // the producer issues a load nobody waits for
};

struct GemmSmem {
  alignas(1024) std::uint16_t a[kStages][128 * kBlockK];
  alignas(1024) std::uint16_t b[kStages][kN * kBlockK];
  alignas(1024) std::uint16_t spare[128 * kBlockK];
  SharedMemBarrier full[kStages], empty[kStages], accum_full, dealloc;
  std::uint32_t tmem_base;
};

struct Gemm {
  int cta_group = 1;
  Bug bug = Bug::none;
  std::vector<std::uint16_t> a, b;  // row-major bf16, M x K and N x K
  std::vector<float> d;             // M x N, filled by the epilogue
  TensorMap map_a, map_b;

  std::uint32_t m() const { return 128u * static_cast<std::uint32_t>(cta_group); }

  explicit Gemm(int group, Bug b_ = Bug::none) : cta_group(group), bug(b_) {
    a.resize(m() * kK);
    b.resize(kN * kK);
    d.assign(m() * kN, -1.0f);
    // Small integers: every product and sum is exact in f32, so the
    // emulated MMA must match the reference exactly.
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = wspipe::float_to_bf16(static_cast<float>(int(i * 7 % 5) - 2));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = wspipe::float_to_bf16(static_cast<float>(int(i * 3 % 7) - 3));
    // Boxes of 64 bf16 = 128 bytes: one 128B-swizzled row.
    auto map = [](const std::vector<std::uint16_t>& g, std::uint32_t rows, std::uint32_t box_rows) {
      return wspipe::test::tensor_map_2d(g.data(), ElemType::bf16, kK, rows, kBlockK, box_rows, SmemSwizzle::b128);
    };
    map_a = map(a, m(), 128);
    map_b = map(b, kN, kN / static_cast<std::uint32_t>(cta_group));
  }

  double ref(std::uint32_t i, std::uint32_t j) const {
    double s = 0;
    for (std::uint32_t k = 0; k < kK; ++k)
      s += double(wspipe::bf16_to_float(a[i * kK + k])) * wspipe::bf16_to_float(b[j * kK + k]);
    return s;
  }

  static std::uint64_t desc(const void* tile, std::uint32_t k) {
    return SmemDescriptor{.start = B::smem_addr(tile) + k * 32, .lbo = 16, .sbo = 1024, .swizzle = SmemSwizzle::b128}
        .encode();
  }

  // Warps: 0 TMA, 1 MMA, 2-5 epilogue (lane quarters 2, 3, 0, 1).
  void kernel() {
    auto& s = B::shared_storage<GemmSmem>();
    const std::uint32_t warp = B::warp_idx(), rank = B::cta_rank();
    const bool leader = rank == 0;
    const std::uint32_t a_bytes = 128 * kBlockK * 2, b_bytes = kN / cta_group * kBlockK * 2;
    if (warp == 0) {
      B::elect_one([&] {
        for (std::uint32_t i = 0; i < kStages; ++i) {
          B::init(s.full[i], 1, {"full", int(i)});
          B::init(s.empty[i], 1, {"empty", int(i)});
        }
        B::init(s.accum_full, 1, {"accum_full"});
        B::init(s.dealloc, 128 * cta_group, {"dealloc"});
      });
      B::fence_init();
    }
    B::cluster_sync();

    if (warp == 0) {  // TMA producer
      auto st = wspipe::PipelineState<kStages>::producer_start();
      for (std::uint32_t kb = 0; kb < kK / kBlockK; ++kb, st.advance()) {
        B::wait(s.empty[st.index()], st.phase());
        B::elect_one([&] {
          if (leader) {
            const std::uint32_t expect = cta_group * (a_bytes + b_bytes) + (bug == Bug::expect_tx_mismatch ? 16 : 0);
            B::arrive_expect_tx(s.full[st.index()], expect);
          }
          const wspipe::TmaCoords ca{{std::int32_t(kb * kBlockK), std::int32_t(rank * 128)}};
          const wspipe::TmaCoords cb{{std::int32_t(kb * kBlockK), std::int32_t(rank * kN / cta_group)}};
          if (cta_group == 1) {
            B::tma_load<1>(map_a, s.a[st.index()], s.full[st.index()], ca);
            B::tma_load<1>(map_b, s.b[st.index()], s.full[st.index()], cb);
          } else {
            B::tma_load<2>(map_a, s.a[st.index()], s.full[st.index()], ca);
            B::tma_load<2>(map_b, s.b[st.index()], s.full[st.index()], cb);
          }
        });
      }
      if (bug == Bug::exit_before_drain)
        B::elect_one([&] { B::tma_load<1>(map_a, s.spare, s.full[0], {{0, 0}}); });
    } else if (warp == 1) {  // MMA
      if (cta_group == 1) {
        B::tmem_alloc<1>(&s.tmem_base, kN);
      } else {
        B::tmem_alloc<2>(&s.tmem_base, kN);
      }
      B::syncwarp();
      const std::uint32_t d_tmem = s.tmem_base;
      B::named_arrive(1, 160);  // publishes the TMEM address to the epilogue
      if (leader) {
        const std::uint32_t idesc =
            InstrDescriptor{.a = ElemType::bf16, .b = ElemType::bf16, .m = m(), .n = kN}.encode();
        const std::uint16_t both = cta_group == 2 ? 0b11 : 0b01;
        auto st = wspipe::PipelineState<kStages>::consumer_start();
        for (std::uint32_t kb = 0; kb < kK / kBlockK; ++kb, st.advance()) {
          B::wait(s.full[st.index()], st.phase());
          auto issue = [&] {
            for (std::uint32_t k = 0; k < kBlockK * 2 / 32; ++k) {
              const std::uint64_t da = desc(s.a[st.index()], k), db = desc(s.b[st.index()], k);
              if (cta_group == 1) {
                B::mma<MmaKind::f16, 1>(d_tmem, da, db, idesc, kb > 0 || k > 0);
              } else {
                B::mma<MmaKind::f16, 2>(d_tmem, da, db, idesc, kb > 0 || k > 0);
              }
            }
          };
          if (bug == Bug::unelected_mma) {
            issue();
          } else {
            B::elect_one(issue);
          }
          auto release = [&] {
            if (bug == Bug::slot_release_on_issue) {
              B::arrive(s.empty[st.index()]);
            } else if (cta_group == 1) {
              B::mma_commit<1>(s.empty[st.index()]);
            } else {
              B::mma_commit_multicast<2>(s.empty[st.index()], both);
            }
          };
          if (bug == Bug::unelected_commit) {
            release();
          } else {
            B::elect_one(release);
          }
        }
        B::elect_one([&] {
          if (cta_group == 1) {
            B::mma_commit<1>(s.accum_full);
          } else {
            B::mma_commit_multicast<2>(s.accum_full, both);
          }
        });
      }
      B::wait(s.dealloc, 0);  // every epilogue thread of the pair is done with TMEM
      if (cta_group == 1) {
        B::tmem_relinquish<1>();
        B::tmem_dealloc<1>(d_tmem, kN);
      } else {
        B::tmem_relinquish<2>();
        B::tmem_dealloc<2>(d_tmem, kN);
      }
    } else if (warp >= 2 && warp <= 5) {  // epilogue
      B::named_sync(1, 160);
      const std::uint32_t d_tmem = SmemView<B, std::uint32_t>(&s.tmem_base, 1).load(0);
      if (bug != Bug::epilogue_skips_wait) B::wait(s.accum_full, 0);
      const std::uint32_t quarter = warp % 4;
      auto frag = B::tmem_load<TmemShape::s32x32b, kN>(d_tmem + tmem_addr(32 * quarter, 0));
      B::tmem_wait_load();
      B::for_each_lane([&](std::uint32_t lane) {
        const std::uint32_t row = rank * 128 + 32 * quarter + lane;
        for (std::uint32_t j = 0; j < kN; ++j) d[row * kN + j] = wspipe::detail::float_from_bits(frag.reg(j));
      });
      B::arrive(s.dealloc);
      if (cta_group == 2) B::arrive_remote(s.dealloc, rank ^ 1u);
    }
  }

  emu::RunResult run(emu::RunOptions opts = {}) {
    emu::LaunchConfig launch;
    launch.cluster_size = static_cast<std::uint32_t>(cta_group);
    launch.warps_per_cta = 6;
    launch.smem_bytes = sizeof(GemmSmem);
    launch.warp_roles = {"tma", "mma", "epilogue", "epilogue", "epilogue", "epilogue"};
    return emu::run(launch, [this] { kernel(); }, opts);
  }

  std::size_t mismatches() const {
    std::size_t bad = 0;
    for (std::uint32_t i = 0; i < m(); ++i)
      for (std::uint32_t j = 0; j < kN; ++j) bad += d[i * kN + j] != static_cast<float>(ref(i, j));
    return bad;
  }
};

class emu_Gemm : public ::testing::TestWithParam<int> {};

TEST_P(emu_Gemm, MatchesTheReferenceUnderEveryStrategy) {
  for (auto kind : {emu::StrategyKind::round_robin, emu::StrategyKind::random, emu::StrategyKind::pct}) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      Gemm g(GetParam());
      auto r = g.run(with_strategy(kind, seed));
      ASSERT_EQ(r.status, emu::Status::ok) << r.report();
      ASSERT_EQ(g.mismatches(), 0u) << "strategy " << emu::to_string(kind) << " seed " << seed;
    }
  }
}

TEST_P(emu_Gemm, TraceShowsEveryAsyncOperation) {
  Gemm g(GetParam());
  // Whole loads: one tma_done each (a load in pieces has an event per
  // piece; emu_CompletionOrder covers those).
  emu::RunOptions o;
  o.async_reorder = false;
  auto r = g.run(o);
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  std::size_t mma_issued = 0, mma_done = 0, tma_done = 0;
  for (const auto& e : r.trace.events) {
    mma_issued += e.kind == emu::EventKind::mma_issue;
    mma_done += e.kind == emu::EventKind::mma_done;
    tma_done += e.kind == emu::EventKind::tma_done;
  }
  EXPECT_EQ(mma_issued, (kK / kBlockK) * (kBlockK * 2 / 32));
  EXPECT_EQ(mma_done, mma_issued);
  EXPECT_EQ(tma_done, 2u * (kK / kBlockK) * static_cast<std::size_t>(GetParam()));
}

TEST_P(emu_Gemm, SlotReleasedOnIssueRacesWithTheNextLoad) {
  // Whichever of the TMA overwrite and the MMA read happens first, the two
  // are unordered: reported on every schedule.
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    Gemm g(GetParam(), Bug::slot_release_on_issue);
    auto r = g.run(with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(outcome(r), "race.smem") << r.report();
    const auto& v = r.violations[0];
    EXPECT_TRUE(contains(v.message + v.other, "TMA load")) << r.report();
    EXPECT_TRUE(contains(v.message + v.other, "tcgen05.mma")) << r.report();
  }
}

TEST_P(emu_Gemm, UnelectedMmaAndCommitFire) {
  Gemm g1(GetParam(), Bug::unelected_mma);
  EXPECT_EQ(outcome(g1.run()), "tcgen05.mma-multi-lane");
  Gemm g2(GetParam(), Bug::unelected_commit);
  EXPECT_EQ(outcome(g2.run()), "tcgen05.commit-multi-lane");
}

TEST_P(emu_Gemm, ExpectTxMismatchDeadlocksOnTheFullBarrier) {
  Gemm g(GetParam(), Bug::expect_tx_mismatch);
  auto r = g.run();
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  bool mma_on_full = false;
  for (const auto& b : r.blocked)
    mma_on_full |= contains(b.warp, "mma") && contains(b.object, "full[0]") && contains(b.state, "tx-count 16");
  EXPECT_TRUE(mma_on_full) << r.report();
}

TEST_P(emu_Gemm, EpilogueLoadWithoutWaitingForTheAccumulatorRaces) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    Gemm g(GetParam(), Bug::epilogue_skips_wait);
    auto r = g.run(with_strategy(emu::StrategyKind::random, seed));
    EXPECT_EQ(outcome(r), "race.tmem") << r.report();
  }
}

TEST_P(emu_Gemm, ExitWithALoadInFlightFires) {
  Gemm g(GetParam(), Bug::exit_before_drain);
  auto r = g.run();
  const std::string o = outcome(r);
  // The stray load either is still queued when the CTA exits, or lands and
  // over-fills the full barrier's tx-count, or runs into the dealloc-free
  // columns' CTA after exit; or, completing before an older load to the
  // same barrier (as PTX allows), its bytes land in a phase that expects
  // fewer.
  EXPECT_TRUE(o == "async.target-exited" || o == "mbarrier.tx-pending-at-exit" || o == "mbarrier.over-arrival" ||
              o == "mbarrier.tx-overshoot")
      << r.report();
}

INSTANTIATE_TEST_SUITE_P(cta_group, emu_Gemm, ::testing::Values(1, 2));

// ------------------------------------------------------------ proxy fence

// One warp writes an A and a B tile with ordinary stores (SmemView) and
// hands them to the MMA warp through an mbarrier; the tensor core reads
// them through the async proxy. Without fence.proxy.async between the
// stores and the arrive, the tensor core may read stale data (bug 17).
enum class Fence { none, before_arrive, after_arrive };

struct ProxySmem {
  alignas(1024) std::uint16_t a[128 * 64];
  alignas(1024) std::uint16_t b[64 * 64];
  SharedMemBarrier ready, done;
  std::uint32_t tmem_base;
};

emu::RunResult run_proxy(Fence fence, std::uint64_t seed = 1) {
  emu::LaunchConfig launch;
  launch.warps_per_cta = 2;
  launch.smem_bytes = sizeof(ProxySmem);
  return emu::run(launch, [fence] {
    auto& s = B::shared_storage<ProxySmem>();
    if (B::warp_idx() == 0) {
      init_bar(s.ready, 1, "ready");
      init_bar(s.done, 1, "done");
    }
    B::cluster_sync();
    if (B::warp_idx() == 0) {
      SmemView<B, std::uint16_t> a(s.a, 128 * 64), b(s.b, 64 * 64);
      B::for_each_lane([&](std::uint32_t lane) {
        for (std::uint32_t i = lane; i < a.size(); i += 32) a.store(i, wspipe::float_to_bf16(1.0f));
        for (std::uint32_t i = lane; i < b.size(); i += 32) b.store(i, wspipe::float_to_bf16(1.0f));
      });
      B::syncwarp();  // every lane's stores before the elected lane's arrive publishes them
      if (fence == Fence::before_arrive) B::fence_proxy_async();
      B::elect_one([&] { B::arrive(s.ready); });
      if (fence == Fence::after_arrive) B::fence_proxy_async();
    } else {
      B::tmem_alloc<1>(&s.tmem_base, 64);
      B::syncwarp();
      B::wait(s.ready, 0);
      const std::uint32_t idesc = InstrDescriptor{.a = ElemType::bf16, .b = ElemType::bf16, .m = 128, .n = 64}.encode();
      B::elect_one([&] {
        B::mma<MmaKind::f16, 1>(s.tmem_base, Gemm::desc(s.a, 0), Gemm::desc(s.b, 0), idesc, false);
        B::mma_commit<1>(s.done);
      });
      B::wait(s.done, 0);
      B::tmem_relinquish<1>();
      B::tmem_dealloc<1>(s.tmem_base, 64);
    }
  }, with_strategy(emu::StrategyKind::random, seed));
}

TEST(emu_ProxyFence, OrdinaryStoresReadByTheTensorCoreNeedTheFence) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto none = run_proxy(Fence::none, seed);
    ASSERT_EQ(outcome(none), "smem.missing-proxy-fence") << none.report();
    EXPECT_TRUE(contains(none.violations[0].message, "that no fence.proxy.async followed")) << none.report();
    auto late = run_proxy(Fence::after_arrive, seed);
    ASSERT_EQ(outcome(late), "smem.missing-proxy-fence") << late.report();
    EXPECT_TRUE(contains(late.violations[0].message, "not ordered before the read")) << late.report();
    EXPECT_OK(run_proxy(Fence::before_arrive, seed));
  }
}

// ------------------------------------------------- deferred accumulators

// With the MMA memo on, the emulator keeps an accumulator's D as its
// chain's values until something else touches its cells
// (World::DeferredD). Every way of touching them must see what the plain
// model (memo off: each MMA updates its cells) leaves: a tcgen05.ld of
// part of D in the middle of a chain, a tcgen05.st over part of it
// followed by an accumulating MMA, two accumulators in flight at once,
// and a chain replaced by one that starts afresh.
std::vector<std::uint32_t> deferred_accumulator_run(std::size_t memo_bytes) {
  struct S {
    alignas(1024) std::uint16_t a[128 * 64];
    alignas(1024) std::uint16_t b[64 * 64];
    SharedMemBarrier done;
    std::uint32_t tmem_base;
  };
  std::vector<std::uint32_t> seen;  // every register the warp loaded, in order
  emu::RunOptions o = with_strategy(emu::StrategyKind::random, 3);
  o.mma_memo_bytes = memo_bytes;
  auto r = wspipe::test::run_kernel(1, [&] {
    auto& s = B::shared_storage<S>();
    init_bar(s.done, 1);
    SmemView<B, std::uint16_t> a(s.a, 128 * 64), b(s.b, 64 * 64);
    B::for_each_lane([&](std::uint32_t lane) {
      for (std::uint32_t i = lane; i < a.size(); i += 32) a.store(i, wspipe::float_to_bf16(float(int(i * 7 % 9) - 4)));
      for (std::uint32_t i = lane; i < b.size(); i += 32) b.store(i, wspipe::float_to_bf16(float(int(i * 5 % 7) - 3) / 8));
    });
    B::fence_proxy_async();
    B::tmem_alloc<1>(&s.tmem_base, 128);
    B::syncwarp();
    const std::uint32_t d0 = s.tmem_base, d1 = s.tmem_base + 64;
    const std::uint32_t idesc = InstrDescriptor{.a = ElemType::bf16, .b = ElemType::bf16, .m = 128, .n = 64}.encode();
    std::uint32_t phase = 0;
    auto mma = [&](std::uint32_t d, std::uint32_t k, bool acc) {
      B::elect_one([&] { B::mma<MmaKind::f16, 1>(d, Gemm::desc(s.a, k), Gemm::desc(s.b, k), idesc, acc); });
    };
    auto complete = [&] {
      B::elect_one([&] { B::mma_commit<1>(s.done); });
      B::wait(s.done, phase);
      phase ^= 1;
      B::tmem_fence_after();
    };
    auto load = [&](std::uint32_t taddr) {
      auto f = B::tmem_load<TmemShape::s32x32b, 16>(taddr);
      B::tmem_wait_load();
      B::for_each_lane([&](std::uint32_t) {
        for (std::uint32_t i = 0; i < 16; ++i) seen.push_back(f.reg(i));
      });
    };
    mma(d0, 0, false);
    mma(d1, 2, false);  // a second accumulator, its chain interleaved with the first's
    mma(d0, 1, true);
    mma(d1, 3, true);
    complete();
    load(d0 + 8);  // part of D in the middle of d0's chain
    B::Frag<16> mine;
    B::for_each_lane([&](std::uint32_t lane) {
      for (std::uint32_t i = 0; i < 16; ++i) mine.set(i, std::bit_cast<std::uint32_t>(float(lane * 16 + i)));
    });
    B::tmem_store<TmemShape::s32x32b, 16>(d1 + 40, mine);  // over part of d1's D
    B::tmem_wait_store();
    B::tmem_fence_before();
    mma(d0, 2, true);
    mma(d1, 0, true);  // accumulates on the stored cells and the chain's
    mma(d0, 3, true);
    complete();
    mma(d1, 1, false);  // a new chain in d1,
    mma(d1, 2, false);  // replaced by another,
    mma(d1, 3, true);   // which goes on
    complete();
    for (std::uint32_t col = 0; col < 128; col += 16) load(s.tmem_base + col);
    B::tmem_relinquish<1>();
    B::tmem_dealloc<1>(s.tmem_base, 128);
  }, o, sizeof(S));
  EXPECT_OK(r);
  return seen;
}

TEST(emu_Tensor, DeferredAccumulatorsMatchTheCellByCellModel) {
  const std::vector<std::uint32_t> cells = deferred_accumulator_run(0);
  ASSERT_EQ(cells.size(), std::size_t{32} * 16 * 9);
  // The loads saw sums, not zeros or the poison of an unwritten cell.
  EXPECT_GT(std::count_if(cells.begin(), cells.end(), [](std::uint32_t v) { return v != 0; }), 4000);
  EXPECT_TRUE(deferred_accumulator_run(emu::RunOptions{}.mma_memo_bytes) == cells);
  EXPECT_TRUE(deferred_accumulator_run(emu::RunOptions{}.mma_memo_bytes) == cells);  // the chains found in the memo
}

// ------------------------------------------------------------ generic races

TEST(emu_SmemRace, UnsynchronisedStoreAndLoadFireAndABarrierFixesThem) {
  struct S {
    float x[8];
  };
  auto kernel = [](bool sync) {
    return [sync] {
      auto& s = B::shared_storage<S>();
      SmemView<B, float> v(s.x, 8);
      if (B::warp_idx() == 0) {
        B::elect_one([&] { v.store(3, 1.0f); });
        if (sync) B::named_arrive(1, 64);
      } else {
        if (sync) B::named_sync(1, 64);
        B::elect_one([&] { (void)v.load(3); });
        (void)v.load(4);  // another word: never a race
      }
    };
  };
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto bad = wspipe::test::run_kernel(2, kernel(false), with_strategy(emu::StrategyKind::random, seed), sizeof(S));
    ASSERT_EQ(outcome(bad), "race.smem") << bad.report();
    EXPECT_EQ(bad.violations[0].object, "shared memory [0xc, 0x10) (cta0)");
    EXPECT_OK(wspipe::test::run_kernel(2, kernel(true), with_strategy(emu::StrategyKind::random, seed), sizeof(S)));
  }
}

// Every reader of a location is kept: warps 0-3 read one word, unordered
// with each other, and warps 1-3 then tell warp 4, which writes the word.
// The write races with warp 0's read, the one read not ordered before it,
// whichever of the four came first (a shadow that kept three readers lost
// the oldest one). Quiet when warp 0 tells warp 4 too.
TEST(emu_SmemRace, AWriteRacesWithTheOneUnorderedReaderOfFour) {
  struct S {
    SharedMemBarrier read;
    std::uint32_t x;
  };
  auto kernel = [](bool all) {
    return [all] {
      auto& s = B::shared_storage<S>();
      const std::uint32_t w = B::warp_idx();
      if (w == 4) init_bar(s.read, all ? 4 : 3, "read");
      B::cluster_sync();
      SmemView<B, std::uint32_t> x(&s.x, 1);
      if (w < 4) {
        B::elect_one([&] { (void)x.load(0); });
        if (w != 0 || all) B::elect_one([&] { B::arrive(s.read); });
      } else {
        B::wait(s.read, 0);
        B::elect_one([&] { x.store(0, 1); });
      }
    };
  };
  for (std::uint64_t seed = 0; seed <= 10; ++seed) {
    const emu::RunOptions o = seed == 0 ? emu::RunOptions{} : with_strategy(emu::StrategyKind::random, seed);
    auto bad = wspipe::test::run_kernel(5, kernel(false), o, sizeof(S));
    ASSERT_EQ(outcome(bad), "race.smem") << "seed " << seed << "\n" << bad.report();
    // Reported at the write, against warp 0's read, or at warp 0's read if
    // the write came first.
    const emu::Violation& v = bad.violations[0];
    EXPECT_TRUE(contains(v.warp, "cta0/w4") ? contains(v.other, "cta0/w0: ordinary load")
                                            : contains(v.warp, "cta0/w0") && contains(v.other, "cta0/w4"))
        << bad.report();
    EXPECT_OK(wspipe::test::run_kernel(5, kernel(true), o, sizeof(S)));
  }
}

// A race report names the release that let the later access go ahead:
// warp 0 stores `x`, arrives on `ready` and stores `x` again; warp 1 waits
// on `ready` and reads `x`. The read is ordered after warp 0's operations up
// to its arrive, and the second store is not among them. Where nothing of
// the other warp is ordered before an access, the report says that.
TEST(emu_SmemRace, TheReportNamesTheReleaseThatLetTheAccessGoAhead) {
  struct S {
    SharedMemBarrier ready;
    std::uint32_t x;
  };
  auto run = [](bool wait, std::uint32_t& arrive_line) {
    return wspipe::test::run_kernel(2, [wait, &arrive_line] {
      auto& s = B::shared_storage<S>();
      if (B::warp_idx() == 0) init_bar(s.ready, 1, "ready");
      if (wait) B::cluster_sync();  // (else the warps never synchronise)
      SmemView<B, std::uint32_t> x(&s.x, 1);
      if (B::warp_idx() == 0) {
        B::elect_one([&] {
          x.store(0, 1);
          arrive_line = __LINE__; B::arrive(s.ready);
          x.store(0, 2);
        });
      } else {
        if (wait) B::wait(s.ready, 0);
        B::elect_one([&] { (void)x.load(0); });
      }
    }, {}, sizeof(S));
  };
  std::uint32_t arrive_line = 0;
  auto r = run(true, arrive_line);
  ASSERT_EQ(outcome(r), "race.smem") << r.report();
  EXPECT_TRUE(contains(r.violations[0].message, "the ordinary load is ordered after cta0/w0's operations up to step "))
      << r.report();
  EXPECT_TRUE(contains(r.violations[0].message, "emu_async_test.cpp:" + std::to_string(arrive_line) +
                                                    "), and the ordinary store is not among them"))
      << r.report();
  auto unsynced = run(false, arrive_line);
  ASSERT_EQ(outcome(unsynced), "race.smem") << unsynced.report();
  EXPECT_TRUE(contains(unsynced.violations[0].message, "; nothing orders any operation of cta0/w")) << unsynced.report();
}

// A warp keeps where its latest epochs ended, not all of them: a report
// whose cause is an epoch older than those still names it, by number.
// Warp 0 stores `x`, arrives on `ready`, then ends 10 more epochs than are
// kept (16,384: EpochEnds in the runtime; each fence.proxy.async ends one)
// and stores `x` again;
// warp 1 waits on `ready` and reads `x`. Where the read comes last, its
// cause is warp 0's epoch that ended at the arrive, no longer kept.
TEST(emu_SmemRace, ACauseOlderThanTheKeptEpochsIsNamedByItsNumber) {
  struct S {
    SharedMemBarrier ready;
    std::uint32_t x;
  };
  const std::uint64_t epochs = 16384 + 10;
  std::size_t load_last = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    emu::RunOptions o = wspipe::test::with_strategy(emu::StrategyKind::pct, seed);
    const auto r = wspipe::test::run_kernel(2, [epochs] {
      auto& s = B::shared_storage<S>();
      if (B::warp_idx() == 0) init_bar(s.ready, 1, "ready");
      B::cluster_sync();
      SmemView<B, std::uint32_t> x(&s.x, 1);
      if (B::warp_idx() == 0) {
        B::elect_one([&] {
          x.store(0, 1);
          B::arrive(s.ready);
          for (std::uint64_t i = 0; i < epochs; ++i) B::fence_proxy_async();
          x.store(0, 2);
        });
      } else {
        B::wait(s.ready, 0);
        B::elect_one([&] { (void)x.load(0); });
      }
    }, o, sizeof(S));
    ASSERT_EQ(outcome(r), "race.smem") << r.report();
    if (!contains(r.violations[0].warp, "cta0/w1")) continue;
    ++load_last;
    EXPECT_TRUE(contains(r.violations[0].message, "the ordinary load is ordered after cta0/w0's operations up to its "
                                                   "epoch "))
        << r.report();
    EXPECT_TRUE(contains(r.violations[0].message, "(where that epoch ended is no longer kept: the last 16384 are)"))
        << r.report();
  }
  EXPECT_GT(load_last, 0u) << "no schedule had the load last";
}

// Shared memory is shadowed per byte: two warps writing different bytes of
// one word do not conflict; the same byte does, and the report names the
// bytes that race.
TEST(emu_SmemRace, SubWordDataOfTwoWarpsDoNotConflict) {
  struct S {
    std::uint8_t b[8];
  };
  auto kernel = [](std::uint32_t other_byte) {
    return [other_byte] {
      auto& s = B::shared_storage<S>();
      SmemView<B, std::uint8_t> v(s.b, 8);
      B::elect_one([&] { v.store(B::warp_idx() == 0 ? 5 : other_byte, 1); });
    };
  };
  for (std::uint64_t seed = 0; seed <= 10; ++seed) {
    const emu::RunOptions o = seed == 0 ? emu::RunOptions{} : with_strategy(emu::StrategyKind::random, seed);
    EXPECT_OK(wspipe::test::run_kernel(2, kernel(6), o, sizeof(S)));
    auto bad = wspipe::test::run_kernel(2, kernel(5), o, sizeof(S));
    ASSERT_EQ(outcome(bad), "race.smem") << bad.report();
    EXPECT_EQ(bad.violations[0].object, "shared memory [0x5, 0x6) (cta0)");
  }
}

TEST(emu_SmemRace, AViewOutsideSharedMemoryFires) {
  std::uint32_t line = 0;
  float heap[4] = {};
  auto r = wspipe::test::run_kernel(1, [&] {
    SmemView<B, float> v(heap, 4);
    line = __LINE__; v.store(0, 1.0f);
  }, {}, 64);
  EXPECT_VIOLATION_AT(r, "smem.not-shared", line);
}

TEST(emu_SmemRace, RaceCheckerOffReportsNothing) {
  struct S {
    float x[8];
  };
  emu::RunOptions opts;
  opts.race_check = false;
  auto r = wspipe::test::run_kernel(2, [] {
    SmemView<B, float> v(B::shared_storage<S>().x, 8);
    B::elect_one([&] { v.store(0, 1.0f); });
  }, opts, sizeof(S));
  EXPECT_OK(r);
}

// ------------------------------------------------------------ issue rules

TEST(emu_Tma, InvalidMapAndMultiLaneIssueFire) {
  struct S {
    alignas(1024) std::uint8_t tile[1024];
    SharedMemBarrier bar;
  };
  std::vector<std::uint8_t> g(64 * 64);
  const TensorMap m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 16, 64);
  auto issue = [&](TensorMap map, bool elect) {
    return wspipe::test::run_kernel(1, [map, elect] {
      auto& s = B::shared_storage<S>();
      init_bar(s.bar, 1);
      auto load = [&] {
        B::arrive_expect_tx(s.bar, static_cast<std::uint32_t>(wspipe::tma_box_bytes(map)));
        B::tma_load(map, s.tile, s.bar, {{0, 0}});
      };
      if (elect) {
        B::elect_one(load);
      } else {
        B::elect_one([&] { B::arrive_expect_tx(s.bar, static_cast<std::uint32_t>(wspipe::tma_box_bytes(map))); });
        B::tma_load(map, s.tile, s.bar, {{0, 0}});
      }
      B::wait(s.bar, 0);
    }, {}, sizeof(S));
  };
  EXPECT_OK(issue(m, true));
  EXPECT_EQ(outcome(issue(m, false)), "tma.multi-lane");
  TensorMap bad = m;
  bad.box[0] = 300;
  EXPECT_EQ(outcome(issue(bad, true)), "tma.invalid");
  // A rank-3 instruction with a rank-2 map.
  auto wrong_rank = wspipe::test::run_kernel(1, [m] {
    auto& s = B::shared_storage<S>();
    init_bar(s.bar, 1);
    B::elect_one([&] { B::tma_load<1, 3>(m, s.tile, s.bar, {{0, 0, 0}}); });
  }, {}, sizeof(S));
  ASSERT_EQ(outcome(wrong_rank), "tma.invalid") << wrong_rank.report();
  EXPECT_TRUE(contains(wrong_rank.violations[0].message, "rank-3")) << wrong_rank.report();
}

// A multicast load from CTA 0 lands in both CTAs of the cluster, at the
// same offset, and performs complete_tx on each one's barrier.
TEST(emu_Tma, MulticastDeliversToEveryCtaOfTheMask) {
  struct S {
    alignas(1024) std::uint8_t tile[64 * 32];
    SharedMemBarrier full;
  };
  std::vector<std::uint8_t> g(64 * 64);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<std::uint8_t>(i * 13 + 1);
  const TensorMap m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 32);
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    std::vector<std::uint8_t> got[2];
    auto r = wspipe::test::run_kernel(1, [&] {
      auto& s = B::shared_storage<S>();
      init_bar(s.full, 1, "full");
      B::fence_init();
      B::cluster_sync();
      B::elect_one([&] {
        B::arrive_expect_tx(s.full, 64 * 32);
        if (B::cta_rank() == 0) B::tma_load_multicast(m, s.tile, s.full, {{0, 16}}, 0b11);
      });
      B::wait(s.full, 0);
      SmemView<B, std::uint8_t> tile(s.tile, sizeof s.tile);
      got[B::cta_rank()].assign(tile.read_range(0, tile.size()), tile.read_range(0, tile.size()) + tile.size());
    }, with_strategy(emu::StrategyKind::random, seed), sizeof(S), 2);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    for (int c = 0; c < 2; ++c) {
      ASSERT_EQ(got[c].size(), 64u * 32u);
      EXPECT_TRUE(std::equal(got[c].begin(), got[c].end(), g.begin() + 16 * 64)) << "cta " << c;
    }
  }
  // A mask naming a CTA outside the cluster.
  auto bad = wspipe::test::run_kernel(1, [&] {
    auto& s = B::shared_storage<S>();
    init_bar(s.full, 1, "full");
    B::elect_one([&] { B::tma_load_multicast(m, s.tile, s.full, {{0, 0}}, 0b100); });
  }, {}, sizeof(S), 2);
  EXPECT_EQ(outcome(bad), "cluster.bad-rank");
}

// A copy delivering more bytes than its phase still expects, once every
// arrival is in: silicon completes the phase partway through it (its bytes
// land in pieces; docs/silicon.md). Quiet when the bytes fit, in one copy or
// in two, and when the copy lands before the arrival that arms it.
TEST(emu_Tma, CopyOvershootingTheExpectedBytesFires) {
  struct S {
    alignas(1024) std::uint8_t tile[64 * 32];
    SharedMemBarrier full;
  };
  std::vector<std::uint8_t> g(64 * 64);
  const TensorMap half = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);  // 1024 bytes
  const TensorMap whole = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 32);  // 2048 bytes
  auto kernel = [&](std::uint32_t expect, bool two_halves, bool arm_after) {
    std::uint32_t line = 0;
    auto r = wspipe::test::run_kernel(1, [&] {
      auto& s = B::shared_storage<S>();
      init_bar(s.full, 1, "full");
      B::elect_one([&] {
        if (!arm_after) B::arrive_expect_tx(s.full, expect);
        if (two_halves) {
          B::tma_load(half, s.tile, s.full, {{0, 0}});
          B::tma_load(half, s.tile + 1024, s.full, {{0, 16}});
        } else {
          line = __LINE__; B::tma_load(whole, s.tile, s.full, {{0, 0}});
        }
        if (arm_after) B::arrive_expect_tx(s.full, expect);
      });
      B::wait(s.full, 0);
    }, with_strategy(emu::StrategyKind::round_robin), sizeof(S));
    return std::make_pair(r, line);
  };
  auto [bug, line] = kernel(1024, false, false);
  EXPECT_VIOLATION_AT(bug, "mbarrier.tx-overshoot", line);
  EXPECT_TRUE(contains(bug.violations[0].message, "delivers 2048 bytes to a barrier that expects only 1024 more"))
      << bug.violations[0].message;
  EXPECT_EQ(kernel(2048, false, false).first.status, emu::Status::ok);
  EXPECT_EQ(kernel(2048, true, false).first.status, emu::Status::ok);
  EXPECT_EQ(kernel(2048, false, true).first.status, emu::Status::ok);
}

TEST(emu_Tma, CtaGroupTwoLoadWithoutAPairFires) {
  struct S {
    alignas(1024) std::uint8_t tile[1024];
    SharedMemBarrier bar;
  };
  std::vector<std::uint8_t> g(64 * 64);
  const TensorMap m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 16, 64);
  std::uint32_t line = 0;
  auto r = wspipe::test::run_kernel(1, [&] {
    auto& s = B::shared_storage<S>();
    init_bar(s.bar, 1);
    B::elect_one([&] { line = __LINE__; B::tma_load<2>(m, s.tile, s.bar, {{0, 0}}); });
  }, {}, sizeof(S), 1);
  EXPECT_VIOLATION_AT(r, "tma.no-cta-pair", line);
}

// An async operation whose barrier was never initialised: reported when the
// engine completes it, at the line that issued it.
TEST(emu_Tensor, CommitToAnUninitialisedBarrierFires) {
  struct S {
    SharedMemBarrier never_initialised, done;
  };
  std::uint32_t line = 0;
  auto r = wspipe::test::run_kernel(1, [&] {
    auto& s = B::shared_storage<S>();
    init_bar(s.done, 1);
    B::elect_one([&] {
      line = __LINE__; B::mma_commit<1>(s.never_initialised);
      B::mma_commit<1>(s.done);  // completes after the first: the warp is still there when it fails
    });
    B::wait(s.done, 0);
  }, {}, sizeof(S));
  EXPECT_VIOLATION_AT(r, "mbarrier.uninitialized", line);
}

TEST(emu_Tensor, CommitMulticastOutsideTheClusterFires) {
  struct S {
    SharedMemBarrier bar;
  };
  auto r = wspipe::test::run_kernel(1, [&] {
    auto& s = B::shared_storage<S>();
    init_bar(s.bar, 1);
    B::elect_one([&] { B::mma_commit_multicast<1>(s.bar, 0b10); });  // rank 1 of a cluster of 1
  }, {}, sizeof(S));
  EXPECT_EQ(outcome(r), "cluster.bad-rank") << r.report();
}

// The MMA's D must lie in a live allocation, and a dealloc may not free
// columns that a queued MMA will still write.
struct MmaSmem {
  alignas(1024) std::uint16_t a[128 * 64];
  SharedMemBarrier done;
  std::uint32_t tmem_base;
};

emu::RunResult run_mma_into_allocation(std::uint32_t d_col, bool wait_before_dealloc, std::uint32_t& line,
                                       std::uint64_t seed = 1) {
  return wspipe::test::run_kernel(1, [=, &line] {
    auto& s = B::shared_storage<MmaSmem>();
    init_bar(s.done, 1);
    B::tmem_alloc<1>(&s.tmem_base, 64);
    B::syncwarp();
    const std::uint32_t idesc = InstrDescriptor{.m = 128, .n = 64}.encode();
    B::elect_one([&] {
      line = __LINE__; B::mma<MmaKind::f16, 1>(s.tmem_base + d_col, Gemm::desc(s.a, 0), Gemm::desc(s.a, 0), idesc,
                                               false);
      B::mma_commit<1>(s.done);
    });
    if (wait_before_dealloc) B::wait(s.done, 0);
    line = wait_before_dealloc ? line : __LINE__; B::tmem_dealloc<1>(s.tmem_base, 64);
    if (!wait_before_dealloc) B::wait(s.done, 0);
  }, with_strategy(emu::StrategyKind::random, seed), sizeof(MmaSmem));
}

TEST(emu_Tensor, MmaOutsideTheAllocationFires) {
  std::uint32_t line = 0;
  auto r = run_mma_into_allocation(32, true, line);  // columns 32-95 of a 64-column allocation
  EXPECT_VIOLATION_AT(r, "tmem.unallocated-access", line);
  auto ok = run_mma_into_allocation(0, true, line);
  EXPECT_OK(ok);
}

TEST(emu_Tensor, DeallocWhileAnMmaIsQueuedFires) {
  // The dealloc comes before the commit's wait: if the tensor core has not
  // run the MMA yet it is in flight, otherwise its write is unordered with
  // the dealloc. Some schedules show each.
  bool in_flight = false;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::uint32_t line = 0;
    auto r = run_mma_into_allocation(0, false, line, seed);
    const std::string o = outcome(r);
    ASSERT_TRUE(o == "tmem.dealloc-in-flight" || o == "tmem.dealloc-unordered") << r.report();
    EXPECT_EQ(r.violations[0].line, line);
    EXPECT_TRUE(contains(r.violations[0].message + r.violations[0].other, "tcgen05.mma")) << r.report();
    in_flight |= o == "tmem.dealloc-in-flight";
  }
  EXPECT_TRUE(in_flight);
}

TEST(emu_Tensor, InvalidShapeFires) {
  struct S {
    alignas(1024) std::uint16_t a[128 * 64];
    std::uint32_t tmem_base;
  };
  auto r = wspipe::test::run_kernel(1, [] {
    auto& s = B::shared_storage<S>();
    B::tmem_alloc<1>(&s.tmem_base, 64);
    B::syncwarp();
    const std::uint32_t idesc = InstrDescriptor{.m = 96, .n = 64}.encode();
    B::elect_one([&] { B::mma<MmaKind::f16, 1>(s.tmem_base, Gemm::desc(s.a, 0), Gemm::desc(s.a, 0), idesc, false); });
  }, {}, sizeof(S));
  ASSERT_EQ(outcome(r), "tcgen05.mma-invalid") << r.report();
  EXPECT_TRUE(contains(r.violations[0].message, "M must be 64 or 128")) << r.report();
}

TEST(emu_Tensor, CommitArrivesOnlyAfterTheEarlierMmasCompleted) {
  Gemm g(1);
  auto r = g.run(with_strategy(emu::StrategyKind::random, 3));
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  // Every arrive made by the tensor core comes after the mma_done events
  // issued before it: find the last mma_done before each arrive.
  std::size_t done = 0, arrives = 0;
  for (const auto& e : r.trace.events) {
    if (e.kind == emu::EventKind::mma_done) ++done;
    if (e.kind == emu::EventKind::arrive && contains(r.trace.warps[e.warp].name, "tensor-core")) {
      ++arrives;
      EXPECT_EQ(done % 4, 0u) << "a commit arrived between the MMAs of one K block";
      EXPECT_GT(done, 0u);
    }
  }
  EXPECT_EQ(arrives, 3u);  // empty[0] twice, accum_full once
}

// ------------------------------------------------- one agent per issuer

// A CTA's warps share its TMA engine and tensor core, but nothing one warp
// did reaches another through them: each operation is performed on its
// issuer's agent, which carries the issuer's clock at issue and no other
// warp's (docs/emulator-models.md, "The happens-before race checker").
// Each test runs the default schedule and random seeds 1-10; the bug must
// be reported on every one and the fix on none.
void expect_race_on_every_schedule(const std::function<emu::RunResult(emu::RunOptions)>& bad,
                                   const std::function<emu::RunResult(emu::RunOptions)>& good, const char* rule) {
  for (std::uint64_t seed = 0; seed <= 10; ++seed) {
    const emu::RunOptions o = seed == 0 ? emu::RunOptions{} : with_strategy(emu::StrategyKind::random, seed);
    auto r = bad(o);
    EXPECT_EQ(outcome(r), rule) << "seed " << seed << "\n" << r.report();
    auto ok = good(o);
    EXPECT_EQ(ok.status, emu::Status::ok) << "seed " << seed << "\n" << ok.report();
  }
}

// Warp 0 inits full[0] and full[1] (count 1 each); every warp of the CTA
// then meets at the cluster barrier.
void init_full_pair(SharedMemBarrier (&full)[2]) {
  if (B::warp_idx() == 0) {
    init_bar(full[0], 1, "full0");
    init_bar(full[1], 1, "full1");
    B::fence_init();
  }
  B::cluster_sync();
}

// Warp 0 stores into `x`, then copies a tile into `y`; warp 1 copies a tile
// into `x`. The engine completes both, and warp 1's copy is not ordered
// after warp 0's store, whichever it completes first.
TEST(emu_EngineAgents, ACopyIsNotOrderedAfterAnotherIssuersStore) {
  struct S {
    alignas(1024) std::uint8_t x[1024];
    alignas(1024) std::uint8_t y[1024];
    SharedMemBarrier full[2];
  };
  std::vector<std::uint8_t> g(64 * 64);
  const TensorMap m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);
  auto run = [&](bool ordered) {
    return [&m, ordered](emu::RunOptions o) {
      return wspipe::test::run_kernel(2, [&m, ordered] {
        auto& s = B::shared_storage<S>();
        const std::uint32_t w = B::warp_idx();
        init_full_pair(s.full);
        if (w == 0) {
          SmemView<B, std::uint8_t> x(s.x, sizeof s.x);
          B::elect_one([&] { x.store(0, 1); });
          if (ordered) B::named_arrive(1, 64);  // the fix: warp 1 copies after the store
        } else if (ordered) {
          B::named_sync(1, 64);
        }
        B::elect_one([&] {
          B::arrive_expect_tx(s.full[w], 1024);
          B::tma_load(m, w == 0 ? s.y : s.x, s.full[w], {{0, 0}});
        });
        B::wait(s.full[w], 0);
      }, o, sizeof(S));
    };
  };
  expect_race_on_every_schedule(run(false), run(true), "race.smem");
}

// Warp 0's TMA store reads `y`; warp 2 waits for warp 1's copy into `x`
// and then writes `y`. The copy's completion orders nothing of warp 0's
// store: warp 2 must wait for the store's read itself.
TEST(emu_EngineAgents, ACopysCompletionReleasesNoOtherIssuersStore) {
  struct S {
    alignas(1024) std::uint8_t x[1024];
    alignas(1024) std::uint8_t y[1024];
    SharedMemBarrier full;
  };
  std::vector<std::uint8_t> g(64 * 64), out(64 * 64);
  const TensorMap in_map = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);
  const TensorMap out_map = wspipe::test::tensor_map_2d(out.data(), ElemType::u8, 64, 64, 64, 16);
  auto run = [&](bool ordered) {
    return [&, ordered](emu::RunOptions o) {
      return wspipe::test::run_kernel(3, [&, ordered] {
        auto& s = B::shared_storage<S>();
        const std::uint32_t w = B::warp_idx();
        if (w == 0) {
          init_bar(s.full, 1, "full");
          B::fence_init();
        }
        B::cluster_sync();
        if (w == 0) {
          B::elect_one([&] {
            B::tma_store<2>(out_map, s.y, {{0, 0}});
            B::bulk_commit_group();
            B::bulk_wait_group_read<0>();
          });
          if (ordered) B::named_arrive(1, 64);  // the fix: the store has read `y`
        } else if (w == 1) {
          B::elect_one([&] {
            B::arrive_expect_tx(s.full, 1024);
            B::tma_load(in_map, s.x, s.full, {{0, 0}});
          });
        } else {
          B::wait(s.full, 0);
          if (ordered) B::named_sync(1, 64);
          SmemView<B, std::uint8_t> y(s.y, sizeof s.y);
          B::elect_one([&] { y.store(0, 1); });
        }
      }, o, sizeof(S));
    };
  };
  expect_race_on_every_schedule(run(false), run(true), "race.smem");
}

// Warp 1 issues an MMA and tells warp 0, which commits: tcgen05.commit
// tracks the executing thread's own earlier MMAs (PTX "tcgen05.commit"),
// so warp 0's commit does not order warp 1's MMA before warp 0's load of D.
TEST(emu_EngineAgents, ACommitTracksOnlyItsIssuersMmas) {
  struct S {
    alignas(1024) std::uint16_t a[128 * 64];
    SharedMemBarrier issued, done;
    std::uint32_t tmem_base;
  };
  auto run = [](bool own_commit) {
    return [own_commit](emu::RunOptions o) {
      return wspipe::test::run_kernel(2, [own_commit] {
        auto& s = B::shared_storage<S>();
        if (B::warp_idx() == 0) {
          init_bar(s.issued, 1, "issued");
          init_bar(s.done, 1, "done");
          B::fence_init();
          B::tmem_alloc<1>(&s.tmem_base, 64);
        }
        B::cluster_sync();
        if (B::warp_idx() == 1) {
          const std::uint32_t idesc = InstrDescriptor{.m = 128, .n = 64}.encode();
          B::elect_one([&] {
            B::mma<MmaKind::f16, 1>(s.tmem_base, Gemm::desc(s.a, 0), Gemm::desc(s.a, 0), idesc, false);
            if (own_commit)
              B::mma_commit<1>(s.done);  // the fix: the MMA's issuer commits
            else
              B::arrive(s.issued);
          });
          return;
        }
        if (!own_commit) {
          B::wait(s.issued, 0);
          B::elect_one([&] { B::mma_commit<1>(s.done); });
        }
        B::wait(s.done, 0);
        auto d = B::tmem_load<TmemShape::s32x32b, 1>(s.tmem_base);
        B::tmem_wait_load();
        (void)d;
        B::tmem_dealloc<1>(s.tmem_base, 64);
      }, o, sizeof(S));
    };
  };
  expect_race_on_every_schedule(run(false), run(true), "race.tmem");
}

// ------------------------------------------------------------ completion order
//
// RunOptions::async_reorder: a TMA load may complete before an older one
// (they signal different barriers: PTX orders no bulk copy's completion
// after another's) and may deliver and count its bytes in pieces. The
// default policy keeps issue order and whole loads.

// Warp 0 loads `a` (signalling full[0]), then `b` (full[1]); warp 1 waits
// for full[1] only and then tests full[0]: `a_first` says whether `a` had
// completed, `a_bytes` which of its bytes it sees. `box_rows` x 64 bytes
// each.
struct TwoLoads {
  struct S {
    alignas(1024) std::uint8_t a[1024];
    alignas(1024) std::uint8_t b[1024];
    SharedMemBarrier full[2];
  };
  std::vector<std::uint8_t> g = std::vector<std::uint8_t>(64 * 64);
  TensorMap m;
  bool a_first = false;
  std::uint32_t a_line = 0, b_line = 0;

  TwoLoads() {
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<std::uint8_t>(i * 7 + 1);
    m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);
  }
  emu::Kernel kernel() {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.smem_bytes = sizeof(S);
    k.body = [this] {
      auto& s = B::shared_storage<S>();
      const std::uint32_t w = B::warp_idx();
      init_full_pair(s.full);
      if (w == 0) {
        B::elect_one([&] {
          B::arrive_expect_tx(s.full[0], 1024);
          a_line = __LINE__; B::tma_load(m, s.a, s.full[0], {{0, 0}});
          B::arrive_expect_tx(s.full[1], 1024);
          b_line = __LINE__; B::tma_load(m, s.b, s.full[1], {{0, 16}});
        });
        B::wait(s.full[0], 0);
      } else {
        B::wait(s.full[1], 0);
        a_first = B::test_wait(s.full[0], 0);
      }
    };
    k.verify = [this] { return a_first ? std::string() : "b completed before a"; };
    return k;
  }
};

// One warp: its elected lane arms `full` with `expect` bytes and loads the
// 1024-byte box at row `row` of `m` into `a`; the warp waits for phase 0.
struct OneTile {
  alignas(1024) std::uint8_t a[1024];
  SharedMemBarrier full;
};
OneTile& load_one_tile(const TensorMap& m, std::uint32_t expect, std::int32_t row = 0) {
  auto& s = B::shared_storage<OneTile>();
  init_bar(s.full, 1, "full");
  B::fence_init();
  B::elect_one([&] {
    B::arrive_expect_tx(s.full, expect);
    B::tma_load(m, s.a, s.full, {{0, row}});
  });
  B::wait(s.full, 0);
  return s;
}

// The copies each step of a run delivered, in order: (line, bytes).
std::vector<std::pair<std::uint32_t, std::int64_t>> deliveries(const emu::RunResult& r) {
  std::vector<std::pair<std::uint32_t, std::int64_t>> d;
  for (const emu::Event& e : r.trace.events)
    if (e.kind == emu::EventKind::tma_done) d.emplace_back(e.line, e.a);
  return d;
}

// What the load issued at `line` delivered: its bytes, in how many
// pieces, and the delivery (counted from 1 among all loads') that
// completed it, 0 if none did.
struct Landed {
  std::int64_t bytes = 0;
  std::size_t pieces = 0, done_at = 0;
};
Landed landed(const emu::RunResult& r, std::uint32_t line, std::int64_t box = 1024) {
  Landed l;
  std::size_t i = 0;
  for (const auto& [at, bytes] : deliveries(r)) {
    ++i;
    if (at != line) continue;
    l.bytes += bytes;
    ++l.pieces;
    if (l.bytes == box) l.done_at = i;
  }
  return l;
}

// Picks an engine's alternative where one can move, else the default:
// the first alternative (the load at queue position 1) or the last (a
// piece of the oldest load).
struct PickAlternative : emu::Strategy {
  explicit PickAlternative(bool last) : last_(last) {}
  std::optional<std::uint32_t> pick(const emu::Choice& c) override {
    const std::uint32_t* alt = std::lower_bound(c.enabled, c.enabled + c.n, c.first_alternative);
    if (alt == c.enabled + c.n) return c.preferred;
    return last_ ? c.enabled[c.n - 1] : *alt;
  }
  bool last_;
};

emu::RunOptions reorder(bool pieces) {
  emu::RunOptions o = with_strategy(emu::StrategyKind::custom);
  o.async_reorder = true;
  o.strategy.make = [pieces](std::uint32_t) { return std::make_unique<PickAlternative>(pieces); };
  return o;
}

TEST(emu_CompletionOrder, ByDefaultLoadsCompleteWholeInIssueOrder) {
  for (const bool reordering : {false, true}) {
    SCOPED_TRACE(reordering ? "async_reorder on" : "async_reorder off");
    TwoLoads t;
    emu::RunOptions o = with_strategy(emu::StrategyKind::replay);  // the default policy
    o.async_reorder = reordering;
    emu::Kernel k = t.kernel();
    const auto r = emu::run(k.launch, k.body, o);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_TRUE(t.a_first);
    using D = std::vector<std::pair<std::uint32_t, std::int64_t>>;
    EXPECT_EQ(deliveries(r), (D{{t.a_line, 1024}, {t.b_line, 1024}}));
    EXPECT_TRUE(r.schedule.empty()) << "the default policy picks no alternative";
  }
  // With it on, the default policy's run and round-robin's take the same
  // steps: the alternatives only widen the choices.
  for (const emu::StrategyKind kind : {emu::StrategyKind::replay, emu::StrategyKind::round_robin}) {
    TwoLoads off, on;
    emu::Kernel k_off = off.kernel(), k_on = on.kernel();
    emu::RunOptions o = with_strategy(kind);
    const auto r_off = emu::run(k_off.launch, k_off.body, o);
    o.async_reorder = true;
    const auto r_on = emu::run(k_on.launch, k_on.body, o);
    EXPECT_EQ(r_off.steps, r_on.steps);
    ASSERT_EQ(r_off.trace.events.size(), r_on.trace.events.size());
    for (std::size_t i = 0; i < r_off.trace.events.size(); ++i) {
      EXPECT_EQ(r_off.trace.events[i].step, r_on.trace.events[i].step) << "event " << i;
      EXPECT_EQ(r_off.trace.events[i].kind, r_on.trace.events[i].kind) << "event " << i;
    }
  }
}

TEST(emu_CompletionOrder, LoadsToDifferentBarriersCompleteOutOfIssueOrder) {
  TwoLoads t;
  emu::Kernel k = t.kernel();
  const auto r = emu::run(k.launch, k.body, reorder(false));
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  // The younger load's last bytes land before the older one's.
  EXPECT_GT(landed(r, t.b_line).done_at, 0u);
  EXPECT_LT(landed(r, t.b_line).done_at, landed(r, t.a_line).done_at);
  EXPECT_FALSE(t.a_first);
  // Every strategy reaches it: the exhaustive search within one preemption
  // (a reordering is one), random and PCT in a few runs.
  const emu::KernelFactory make = [&t] { return t.kernel(); };
  emu::ExploreOptions x;
  x.async_reorder = true;
  x.portfolio = {{emu::StrategyKind::exhaustive}};
  x.preemptions = 1;
  x.seconds = 0;
  x.shrink = false;
  const auto found = emu::explore(make, x);
  ASSERT_TRUE(found.failure) << found.report();
  EXPECT_EQ(found.failure->outcome, "result.mismatch");
  for (const emu::StrategySpec spec : {emu::StrategySpec{emu::StrategyKind::random},
                                       emu::StrategySpec{emu::StrategyKind::pct, 3}}) {
    auto o = wspipe::test::fixed_runs(200);
    o.async_reorder = true;
    o.portfolio = {spec};
    o.shrink = false;
    EXPECT_FALSE(emu::explore(make, o).ok()) << emu::to_string(std::vector{spec});
  }
  // Off, no strategy reaches it: the exhaustive search covers every schedule.
  x.async_reorder = false;
  x.preemptions = 3;
  const auto none = emu::explore(make, x);
  EXPECT_TRUE(none.ok()) << none.report();
  EXPECT_TRUE(none.complete);
}

TEST(emu_CompletionOrder, ALoadDeliversAndCountsItsBytesInPieces) {
  TwoLoads t;
  emu::Kernel k = t.kernel();
  const auto r = emu::run(k.launch, k.body, reorder(true));
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  // Half of it, in whole 128-byte lines: 512, then the other 512 (a load
  // is split once); the younger load first, in pieces too. Each load's
  // barrier completes with its last piece only.
  for (const auto& d : deliveries(r)) EXPECT_EQ(d.second % 128, 0);
  EXPECT_EQ(landed(r, t.a_line).bytes, 1024);
  EXPECT_EQ(landed(r, t.a_line).pieces, 2u);
  EXPECT_EQ(landed(r, t.b_line).bytes, 1024);
  // The bytes are the box's, whatever the pieces: checked by a consumer
  // that waits for the barrier.
  std::vector<std::uint8_t> seen(1024);
  const auto whole = wspipe::test::run_kernel(1, [&] {
    OneTile& s = load_one_tile(t.m, 1024, 8);
    const SmemView<B, std::uint8_t> v(s.a, sizeof s.a);
    std::copy_n(v.read_range(0, 1024), 1024, seen.begin());
  }, reorder(true), sizeof(OneTile));
  ASSERT_EQ(whole.status, emu::Status::ok) << whole.report();
  EXPECT_GT(deliveries(whole).size(), 1u);
  EXPECT_TRUE(std::equal(seen.begin(), seen.end(), t.g.begin() + 8 * 64));
}

// Every strategy reaches a load in pieces: a warp that loads 1024 bytes and
// waits takes one step more per piece, so the runs' step counts differ
// exactly when some run had pieces. Off, every run takes the same steps.
TEST(emu_CompletionOrder, EveryStrategyReachesALoadInPieces) {
  const TwoLoads t;  // its map
  const emu::KernelFactory make = [&t] {
    emu::Kernel k;
    k.launch.warps_per_cta = 1;
    k.launch.smem_bytes = sizeof(OneTile);
    k.body = [&t] { load_one_tile(t.m, 1024); };
    return k;
  };
  for (const emu::StrategySpec spec : {emu::StrategySpec{emu::StrategyKind::random},
                                       emu::StrategySpec{emu::StrategyKind::pct, 3},
                                       emu::StrategySpec{emu::StrategyKind::exhaustive}}) {
    for (const bool reordering : {false, true}) {
      SCOPED_TRACE(emu::to_string(std::vector{spec}) + (reordering ? ", async_reorder" : ""));
      auto o = wspipe::test::fixed_runs(50);
      o.portfolio = {spec};
      if (spec.kind == emu::StrategyKind::exhaustive) {
        o.preemptions = 3;
        o.runs = 0;  // every schedule within the bound
      }
      o.async_reorder = reordering;
      std::set<std::uint64_t> steps;
      o.on_run = [&steps](std::uint64_t, const emu::RunResult& r) { steps.insert(r.steps); };
      const auto r = emu::explore(make, o);
      ASSERT_TRUE(r.ok()) << r.report();
      EXPECT_EQ(steps.size() > 1, reordering) << steps.size() << " step counts";
    }
  }
}

// A barrier armed for part of a load completes its phase early only when
// the load comes in pieces: the reordering explores it, the default does not.
TEST(emu_CompletionOrder, APieceCanCompleteAPhaseArmedForPartOfTheLoad) {
  const TwoLoads t;  // its map
  const auto kernel = [&t](emu::RunOptions o) {
    return wspipe::test::run_kernel(1, [&t] {
      OneTile& s = load_one_tile(t.m, 512);  // the bug: half of the load's bytes
      B::wait(s.full, 1);
    }, o, sizeof(OneTile));
  };
  // Whole, the load overshoots the phase's 512 bytes at once; in pieces,
  // its first 512 bytes complete the phase.
  EXPECT_EQ(outcome(kernel(with_strategy(emu::StrategyKind::round_robin))), "mbarrier.tx-overshoot");
  EXPECT_EQ(outcome(kernel(reorder(true))), "deadlock") << "phase 0 completed; the rest counts against phase 1";
}

// A barrier armed for a quarter of a load, three times (256, 256, then
// 512 bytes, one phase each): the load's tx-count crosses zero twice on
// its way, so only a load cut into three pieces, each where the barrier's
// tx-count reaches zero, lets the kernel pass every wait (whole, the load
// overshoots phase 0, as with a load cut once, in halves: schedules of
// version 5). Pieces taken whenever they can, and random schedules, reach
// that run.
TEST(emu_CompletionOrder, ALoadIsCutWhereverItsBarriersTxCountCanReachZero) {
  const TwoLoads t;  // its map
  const auto kernel = [&t](emu::RunOptions o) {
    return wspipe::test::run_kernel(1, [&t] {
      OneTile& s = load_one_tile(t.m, 256);  // phase 0: its first 256 bytes
      B::elect_one([&] { B::arrive_expect_tx(s.full, 256); });
      B::wait(s.full, 1);
      B::elect_one([&] { B::arrive_expect_tx(s.full, 512); });
      B::wait(s.full, 0);
    }, o, sizeof(OneTile));
  };
  const auto pieces = [](const emu::RunResult& r) {
    std::vector<std::int64_t> d;
    for (const auto& [line, bytes] : deliveries(r)) d.push_back(bytes);
    return d;
  };
  const emu::RunResult cut = kernel(reorder(true));
  EXPECT_EQ(outcome(cut), "ok") << cut.report();
  EXPECT_EQ(pieces(cut), (std::vector<std::int64_t>{256, 256, 512}));
  emu::RunOptions legacy = reorder(true);
  legacy.legacy_pieces = true;
  EXPECT_EQ(outcome(kernel(legacy)), "mbarrier.tx-overshoot");
  EXPECT_EQ(outcome(kernel(with_strategy(emu::StrategyKind::round_robin))), "mbarrier.tx-overshoot");
  std::set<std::string> seen;
  for (std::uint64_t seed = 1; seed <= 200 && seen.count("ok") == 0; ++seed)
    seen.insert(outcome(kernel(with_strategy(emu::StrategyKind::random, seed))));
  EXPECT_EQ(seen.count("ok"), 1u) << ::testing::PrintToString(seen);
}

// Five loads queued at once, each to its own barrier; the warp waits for
// the last and then tests the others. The last completing first needs a
// window of 4: the complete search finds it there, and within the default
// window of 3 verifies the kernel, naming the runs whose fifth load could
// not go first among its assumptions.
TEST(emu_CompletionOrder, ALoadCompletesFirstFromAsFarBackAsTheWindowReaches) {
  struct S {
    alignas(1024) std::uint8_t tile[5][1024];
    SharedMemBarrier full[5];
  };
  const TwoLoads t;  // its map
  bool one_before = true;  // one of the first four completed before the last
  const emu::KernelFactory make = [&] {
    emu::Kernel k;
    k.launch.warps_per_cta = 1;
    k.launch.smem_bytes = sizeof(S);
    k.body = [&] {
      auto& s = B::shared_storage<S>();
      for (auto& f : s.full) init_bar(f, 1, "full");
      B::fence_init();
      B::elect_one([&] {
        for (int i = 0; i < 5; ++i) {
          B::arrive_expect_tx(s.full[i], 1024);
          B::tma_load(t.m, s.tile[i], s.full[i], {{0, 16 * (i % 4)}});
        }
      });
      B::wait(s.full[4], 0);
      one_before = false;
      for (int i = 0; i < 4; ++i) one_before = B::test_wait(s.full[i], 0) || one_before;
      for (int i = 0; i < 4; ++i) B::wait(s.full[i], 0);
    };
    k.verify = [&] { return one_before ? std::string() : "the fifth load completed before the other four"; };
    return k;
  };
  for (const std::uint32_t window : {3u, 4u}) {
    SCOPED_TRACE("window " + std::to_string(window));
    emu::ExploreOptions o;
    o.portfolio = {{emu::StrategyKind::exhaustive}};
    o.seconds = 0;
    o.runs = 0;
    o.shrink = false;
    o.jobs = 1;  // the runs share `one_before`
    o.reorder_window = window;
    const auto r = emu::explore(make, o);
    const std::string assumed = ::testing::PrintToString(r.assumptions);
    if (window == 3) {
      EXPECT_EQ(r.verdict(), emu::Verdict::verified) << r.report();
      EXPECT_GT(r.runs_past_window, 0u);
      EXPECT_NE(assumed.find("behind more than 3 older operations"), std::string::npos) << assumed;
    } else {
      ASSERT_EQ(r.verdict(), emu::Verdict::found) << r.report();
      EXPECT_EQ(r.failure->result.violations.at(0).rule, "result.mismatch") << r.report();
    }
  }
}

TEST(emu_Tensor, SameSeedSameTrace) {
  auto text = [] {
    Gemm g(2);
    auto r = g.run(with_strategy(emu::StrategyKind::random, 11));
    std::ostringstream out;
    r.trace.write_text(out);
    return out.str() + r.schedule.encode();
  };
  EXPECT_EQ(text(), text());
}

}  // namespace
