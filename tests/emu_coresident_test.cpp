// Co-resident CTAs (LaunchConfig::ctas_per_sm): the CTAs on one SM allocate
// Tensor Memory from the SM's 512 columns (PTX "tcgen05.alloc": it blocks
// until the columns are available), while ownership, access, dealloc, the
// size rule, the leak rule and relinquish_alloc_permit stay per CTA. A
// kernel whose co-resident CTAs allocate in two steps deadlocks only under
// some schedules, and exploration finds those.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/emu/emu.hpp"
#include "core/tcgen05.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::tmem_addr;
using wspipe::tmem_col;
using wspipe::TmemShape;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::fixed_runs;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

struct Smem {
  wspipe::SharedMemBarrier hold;
  std::uint32_t addr[2];
};
constexpr std::size_t kSmem = 64;

Smem& smem() { return B::shared_storage<Smem>(); }

// `clusters` one-warp clusters of `cluster_size` CTAs, `per_sm` CTAs per SM.
emu::LaunchConfig launch(std::uint32_t clusters, std::uint32_t per_sm, std::uint32_t cluster_size = 1) {
  emu::LaunchConfig l;
  l.num_clusters = clusters;
  l.cluster_size = cluster_size;
  l.warps_per_cta = 1;
  l.smem_bytes = kSmem;
  l.ctas_per_sm = per_sm;
  return l;
}

std::uint32_t alloc_col(std::uint32_t cols) {
  B::tmem_alloc<1>(&smem().addr[0], cols);
  B::syncwarp();
  return smem().addr[0];
}

// Each CTA (one per cluster) allocates `cols` in one step, records the column it got, then
// deallocates.
void alloc_once(std::uint32_t cols, std::uint32_t* got) {
  B::tmem_alloc<1>(&smem().addr[0], cols);
  B::syncwarp();
  got[B::cluster_idx()] = tmem_col(smem().addr[0]);
  B::tmem_relinquish<1>();
  B::tmem_dealloc<1>(smem().addr[0], cols);
}

// Each CTA allocates 256 columns, then 256 more, holding both: with two
// CTAs on one SM, once each holds its first half neither second alloc can
// ever be served.
void alloc_twice() {
  B::tmem_alloc<1>(&smem().addr[0], 256);
  B::tmem_alloc<1>(&smem().addr[1], 256);
  B::syncwarp();
  B::tmem_relinquish<1>();
  B::tmem_dealloc<1>(smem().addr[1], 256);
  B::tmem_dealloc<1>(smem().addr[0], 256);
}

// ------------------------------------------------------------ sharing

TEST(emu_Coresident, TwoCtasOf256ShareTheSmsColumns) {
  // One pool: whenever both CTAs hold their 256 columns, they hold the two
  // disjoint halves of the SM's 512 (under schedules where one CTA frees
  // before the other allocates, both get column 0).
  int both_live = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    bool live[2] = {false, false};
    std::uint32_t col[2] = {99, 99};
    auto r = emu::run(launch(2, 2), [&] {
      const std::uint32_t me = B::cluster_idx(), other = me ^ 1u;
      col[me] = tmem_col(alloc_col(256));
      live[me] = true;
      if (live[other]) {
        ++both_live;
        B::check(col[me] + col[other] == 256, "two live allocations of 256 columns on one SM: [0, 256) and [256, 512)");
      }
      B::tmem_relinquish<1>();  // a scheduling point: the other CTA may run while this one holds its columns
      live[me] = false;
      B::tmem_dealloc<1>(tmem_addr(0, col[me]), 256);
    }, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
  }
  EXPECT_GT(both_live, 0);
}

TEST(emu_Coresident, OneCtaPerSmKeepsAPoolPerCta) {
  // The default: each CTA on an SM of its own, so both get column 0.
  std::uint32_t got[2] = {99, 99};
  auto r = emu::run(launch(2, 1), [&] { alloc_once(512, got); }, {});
  EXPECT_OK(r);
  EXPECT_EQ(got[0], 0u);
  EXPECT_EQ(got[1], 0u);
}

TEST(emu_Coresident, TwoCtasOf512SerialiseOnTheFirstsDealloc) {
  // The second alloc blocks until the first CTA deallocates, under every
  // schedule tried: the two never hold columns at once, and both get
  // column 0.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    bool live[2] = {false, false};
    std::uint32_t col[2] = {99, 99};
    auto r = emu::run(launch(2, 2), [&] {
      const std::uint32_t me = B::cluster_idx();
      col[me] = tmem_col(alloc_col(512));
      live[me] = true;
      B::check(!live[me ^ 1u], "two CTAs on one SM both hold 512 columns");
      B::tmem_relinquish<1>();  // a scheduling point while this CTA holds the columns
      live[me] = false;
      B::tmem_dealloc<1>(tmem_addr(0, col[me]), 512);
    }, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
    EXPECT_EQ(col[0], 0u);
    EXPECT_EQ(col[1], 0u);
  }
}

TEST(emu_Coresident, SmsAreGroupsOfClustersByRank) {
  // 4 clusters of 2 CTAs, 2 CTAs per SM: SMs {cta0, cta2}, {cta1, cta3},
  // {cta4, cta6}, {cta5, cta7}. Each CTA takes 512 columns and holds them
  // until the cluster barrier: a CTA that shares an SM with one of the
  // other cluster waits; the same ranks of different groups do not.
  auto r = emu::run(launch(4, 2, 2), [&] {
    if (B::cluster_idx() % 2 == 0) {  // the first cluster of each group
      B::tmem_alloc<1>(&smem().addr[0], 512);
      B::cluster_sync();
      B::tmem_dealloc<1>(tmem_addr(0, 0), 512);
    } else {
      B::cluster_sync();
      B::tmem_alloc<1>(&smem().addr[0], 512);
      B::tmem_dealloc<1>(tmem_addr(0, 0), 512);
    }
  }, {});
  EXPECT_OK(r);
}

TEST(emu_Coresident, CtaPairsSpanTwoSmsAndWaitOnBoth) {
  // Two clusters of a CTA pair, two CTAs per SM: pair 0 (cta0, cta1) and
  // pair 1 (cta2, cta3) share SMs {cta0, cta2} and {cta1, cta3}; each pair
  // takes all 512 columns with cta_group::2, so one pair waits for the other.
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto r = emu::run(launch(2, 2, 2), [&] {
      B::cluster_sync();
      B::tmem_alloc<2>(&smem().addr[0], 512);
      B::syncwarp();
      B::tmem_relinquish<2>();
      B::cluster_sync();
      B::tmem_dealloc<2>(smem().addr[0], 512);
    }, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
  }
}

TEST(emu_Coresident, CtaPairAllocWaitsForTheColumnsOfBothSms) {
  // Each pair takes all 512 columns on both its SMs and keeps them (it
  // waits on a barrier no one completes): the pair that comes second waits
  // in tcgen05.alloc for columns held on each of its two SMs by a CTA of the
  // other pair, a deadlock whose report names both holders.
  auto r = emu::run(launch(2, 2, 2), [&] {
    B::cluster_sync();
    B::tmem_alloc<2>(&smem().addr[0], 512);
    wspipe::test::init_bar(smem().hold, 1, "hold");
    B::wait(smem().hold, 0);
  }, {});
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  const emu::BlockedWarp* alloc = nullptr;
  for (const emu::BlockedWarp& b : r.blocked)
    if (b.op == "tcgen05.alloc") alloc = &b;
  ASSERT_NE(alloc, nullptr) << r.report();
  const std::string& state = alloc->state;
  std::size_t others = 0;
  for (auto at = state.find("(another CTA on this SM)"); at != std::string::npos;
       at = state.find("(another CTA on this SM)", at + 1))
    ++others;
  EXPECT_EQ(others, 2u) << r.report();  // one holder on each SM of the pair
}

// ------------------------------------------------------------ per CTA

TEST(emu_Coresident, AnotherCtasColumnsAreNotThisCtasToAccessOrFree) {
  // cta0 takes 256 columns and holds them, waiting on a barrier no one
  // completes; cta1, on the same SM, takes the other 256, then loads from or
  // deallocates cta0's: it owns no such allocation, and the report names
  // the CTA that does.
  std::uint32_t line = 0;
  auto run_with = [&](bool dealloc) {
    return emu::run(launch(2, 2), [&, dealloc] {
      if (B::cluster_idx() == 0) {
        const std::uint32_t a = alloc_col(256);
        wspipe::test::init_bar(smem().hold, 1, "hold");
        B::wait(smem().hold, 0);  // never completes: the run ends on cta1's violation first
        B::tmem_dealloc<1>(a, 256);
        return;
      }
      B::tmem_alloc<1>(&smem().addr[0], 256);
      B::syncwarp();
      if (dealloc) {
        line = __LINE__; B::tmem_dealloc<1>(tmem_addr(0, tmem_col(smem().addr[0]) ^ 256u), 256);
      } else {
        line = __LINE__; (void)B::tmem_load<TmemShape::s32x32b, 1>(tmem_addr(0, tmem_col(smem().addr[0]) ^ 256u));
      }
      B::tmem_dealloc<1>(smem().addr[0], 256);
    }, {});
  };
  auto ld = run_with(false);
  EXPECT_VIOLATION_AT(ld, "tmem.unallocated-access", line);
  EXPECT_TRUE(contains(ld.violations[0].message, "are allocated by cta0/w0")) << ld.report();
  auto free = run_with(true);
  EXPECT_VIOLATION_AT(free, "tmem.dealloc-unallocated", line);
  EXPECT_TRUE(contains(free.violations[0].message, "(cta0) are allocated by cta0/w0"))
      << free.report();
}

TEST(emu_Coresident, RelinquishIsPerCtaAndSoIsTheSizeRule) {
  // cta0 relinquishes before cta1 allocates: cta1 keeps its permit. cta0's
  // 512 then cta1's 256 is no increase within either CTA.
  auto r = emu::run(launch(2, 2), [&] {
    if (B::cluster_idx() == 0) {
      B::tmem_relinquish<1>();
      B::tmem_alloc<1>(&smem().addr[0], 32);  // fires: this CTA gave up its permit
    }
  }, {});
  EXPECT_EQ(outcome(r), "tmem.alloc-after-relinquish");
  EXPECT_EQ(r.violations.at(0).warp, "cta0/w0");
  auto quiet = emu::run(launch(2, 2), [&] {
    if (B::cluster_idx() == 0) {
      B::tmem_alloc<1>(&smem().addr[0], 512);
      B::syncwarp();
      B::tmem_relinquish<1>();
      B::tmem_dealloc<1>(smem().addr[0], 512);
    } else {
      B::tmem_alloc<1>(&smem().addr[0], 256);
      B::tmem_alloc<1>(&smem().addr[1], 128);
      B::syncwarp();
      B::tmem_relinquish<1>();
      B::tmem_dealloc<1>(smem().addr[1], 128);
      B::tmem_dealloc<1>(smem().addr[0], 256);
    }
  }, {});
  EXPECT_OK(quiet);
}

TEST(emu_Coresident, LeakIsReportedForTheCtaThatLeaked) {
  std::uint32_t line = 0;
  auto r = emu::run(launch(2, 2), [&] {
    if (B::cluster_idx() == 1) {
      line = __LINE__; B::tmem_alloc<1>(&smem().addr[0], 64);
    }
  }, {});
  EXPECT_VIOLATION_AT(r, "tmem.leak", line);
  EXPECT_EQ(r.violations[0].warp, "cta1/w0");
}

// ------------------------------------------------------------ two-step deadlock

TEST(emu_Coresident, TwoStepAllocDeadlocksUnderSomeSchedulesOnly) {
  int ok = 0, deadlocks = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    auto r = emu::run(launch(2, 2), alloc_twice, with_strategy(emu::StrategyKind::random, seed));
    if (r.status == emu::Status::ok) ++ok;
    if (r.status == emu::Status::deadlock) {
      ++deadlocks;
      ASSERT_EQ(r.blocked.size(), 2u) << r.report();
      for (const emu::BlockedWarp& b : r.blocked) {
        EXPECT_EQ(b.op, "tcgen05.alloc") << r.report();
        EXPECT_TRUE(contains(b.state, "needs 256 free aligned columns of SM 0")) << r.report();
        EXPECT_TRUE(contains(b.state, "(another CTA on this SM)")) << r.report();
      }
    }
    EXPECT_TRUE(r.status == emu::Status::ok || r.status == emu::Status::deadlock) << r.report();
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(deadlocks, 0);
  // One CTA per SM: the same kernel never deadlocks.
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto r = emu::run(launch(2, 1), alloc_twice, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
  }
}

TEST(emu_Coresident, ExplorationFindsTheTwoStepDeadlockAndPassesTheOneStepKernel) {
  auto two_step = [] { return emu::Kernel{.launch = launch(2, 2), .body = alloc_twice, .verify = {}}; };
  const emu::ExploreResult found = emu::explore(two_step, fixed_runs(200));
  ASSERT_TRUE(found.failure.has_value()) << found.report();
  EXPECT_EQ(found.failure->outcome, "deadlock");
  const emu::RunResult& r = found.failure->result;
  ASSERT_EQ(r.blocked.size(), 2u) << r.report();
  EXPECT_EQ(r.blocked[0].op, "tcgen05.alloc");
  EXPECT_TRUE(contains(r.report(), "held by cta1/w0 (another CTA on this SM)")) << r.report();
  EXPECT_TRUE(contains(r.report(), "held by cta0/w0 (another CTA on this SM)")) << r.report();

  auto one_step = [] {
    return emu::Kernel{.launch = launch(2, 2), .body = [] {
      B::tmem_alloc<1>(&smem().addr[0], 256);
      B::syncwarp();
      B::tmem_relinquish<1>();
      B::tmem_dealloc<1>(smem().addr[0], 256);
    }, .verify = {}};
  };
  const emu::ExploreResult clean = emu::explore(one_step, fixed_runs(200));
  EXPECT_TRUE(clean.ok()) << clean.report();
}

// ------------------------------------------------------------ launch

TEST(emu_Coresident, BadLaunchOptionsAreRejected) {
  auto rejects = [](emu::LaunchConfig l, const std::string& part) {
    try {
      (void)emu::run(l, [] {}, {});
    } catch (const emu::BadLaunch& e) {
      EXPECT_TRUE(contains(e.what(), part)) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted a launch that should fail: " << part;
  };
  rejects(launch(1, 0), "ctas_per_sm must be in [1, 32]");
  rejects(launch(1, 33), "ctas_per_sm must be in [1, 32]");
  auto warps = launch(2, 3);
  warps.warps_per_cta = 22;  // 66 warps
  rejects(warps, "at most 64 resident warps per SM");
  auto smem = launch(2, 2);
  smem.smem_bytes = 114 * 1024;  // 2 x (114 + 1) KiB > 228 KiB
  rejects(smem, "an sm_100 SM has 228 KiB");
  auto one = launch(1, 1);
  one.smem_bytes = 228 * 1024;  // one CTA: at most 227 KiB
  rejects(one, "at most 227 KiB for one CTA");

  // At the limits: accepted.
  smem.smem_bytes = 113 * 1024;
  EXPECT_OK(emu::run(smem, [] {}, {}));
  one.smem_bytes = 227 * 1024;
  EXPECT_OK(emu::run(one, [] {}, {}));
  auto full = launch(32, 32);
  full.warps_per_cta = 2;
  full.smem_bytes = 0;
  EXPECT_OK(emu::run(full, [] {}, {}));
  // A partial last group: 3 clusters, 2 per SM.
  EXPECT_OK(emu::run(launch(3, 2), [] {}, {}));
}

}  // namespace
