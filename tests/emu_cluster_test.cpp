// Clusters of up to 16 CTAs in 1-D and 2-D shapes (LaunchConfig::
// cluster_shape): the launch's checks (the portable 8, the opt-in for 16,
// the 16 that nothing exceeds), rank order, cluster barriers and remote
// arrives over every rank, multicast masks over any subset of the cluster,
// CTA pairs inside larger clusters, and the CLC's first CTA id of a 2-D
// cluster. Every rule is shown firing on the bug and quiet on the fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/cluster.hpp"
#include "core/tma.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::ClusterShape;
using wspipe::ElemType;
using wspipe::SharedMemBarrier;
using wspipe::SmemView;
using wspipe::TensorMap;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::init_bar;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

emu::LaunchConfig shape_launch(ClusterShape shape, std::uint32_t warps, std::size_t smem, bool opt_in = false,
                               std::uint32_t clusters = 1) {
  emu::LaunchConfig l;
  l.num_clusters = clusters;
  l.cluster_shape = shape;
  l.non_portable_cluster_size = opt_in;
  l.warps_per_cta = warps;
  l.smem_bytes = smem;
  return l;
}

std::string bad_launch(const emu::LaunchConfig& l) {
  try {
    emu::run(l, [] {}, {});
  } catch (const emu::BadLaunch& e) {
    return e.what();
  }
  return "(launched)";
}

// ------------------------------------------------------------ launch

// Every shape of the issue: the CTAs see their shape, their ranks are
// 0..size-1 once each, a cluster barrier joins them all, and a remote arrive
// reaches rank 0's barrier from every rank.
TEST(emu_Cluster, ShapesRunWithEveryRankOnceAndEveryRankArrives) {
  struct S {
    SharedMemBarrier all;
  };
  const ClusterShape shapes[] = {{4, 1, 1}, {2, 2, 1}, {4, 2, 1}, {8, 1, 1}, {4, 4, 1}, {2, 2, 2}, {16, 1, 1}};
  for (const ClusterShape shape : shapes) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      std::vector<std::uint32_t> seen(shape.size(), 0);
      bool shape_ok = true;
      auto r = emu::run(shape_launch(shape, 1, sizeof(S), !shape.portable()), [&] {
        auto& s = B::shared_storage<S>();
        const std::uint32_t rank = B::cta_rank();
        shape_ok = shape_ok && B::cluster_shape() == shape && B::cluster_size() == shape.size();
        ++seen[rank];
        if (rank == 0) init_bar(s.all, shape.size(), "all");
        B::fence_init();
        B::cluster_sync();
        B::elect_one([&] { B::arrive_remote(s.all, 0); });
        if (rank == 0) B::wait(s.all, 0);
        B::cluster_sync();  // rank 0 outlives every remote arrive
      }, with_strategy(emu::StrategyKind::random, seed));
      EXPECT_OK(r);
      EXPECT_TRUE(shape_ok);
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](std::uint32_t n) { return n == 1; }))
          << shape.x << "x" << shape.y << "x" << shape.z;
    }
  }
}

TEST(emu_Cluster, ShapesTheHardwareCannotLaunchAreRejected) {
  // 9..16 only with the opt-in, as cudaFuncAttributeNonPortableClusterSizeAllowed.
  EXPECT_TRUE(contains(bad_launch(shape_launch({4, 4, 1}, 1, 64)), "non_portable_cluster_size")) << bad_launch(
      shape_launch({4, 4, 1}, 1, 64));
  emu::LaunchConfig sixteen;
  sixteen.cluster_size = 16;
  EXPECT_TRUE(contains(bad_launch(sixteen), "beyond the portable 8")) << bad_launch(sixteen);
  sixteen.non_portable_cluster_size = true;
  EXPECT_EQ(bad_launch(sixteen), "(launched)");
  EXPECT_EQ(bad_launch(shape_launch({3, 3, 1}, 1, 64, true)), "(launched)");
  // More than 16, or a zero dimension: never.
  emu::LaunchConfig seventeen;
  seventeen.cluster_size = 17;
  seventeen.non_portable_cluster_size = true;
  EXPECT_TRUE(contains(bad_launch(seventeen), "cluster_size 17: a cluster has every dimension at least 1 and at most 16"))
      << bad_launch(seventeen);
  EXPECT_TRUE(contains(bad_launch(shape_launch({17, 1, 1}, 1, 64, true)), "cluster_shape 17x1x1"));
  EXPECT_TRUE(contains(bad_launch(shape_launch({4, 0, 1}, 1, 64, true)), "cluster_shape 4x0x1"));
  emu::LaunchConfig zero;
  zero.cluster_size = 0;
  EXPECT_TRUE(contains(bad_launch(zero), "cluster_size 0"));
  // A shape and a different 1-D size.
  auto both = shape_launch({2, 2, 1}, 1, 64);
  both.cluster_size = 2;
  EXPECT_TRUE(contains(bad_launch(both), "cluster_size 2 disagrees with cluster_shape 2x2x1 (4 CTAs)"))
      << bad_launch(both);
  both.cluster_size = 4;
  EXPECT_EQ(bad_launch(both), "(launched)");
}

// ------------------------------------------------------------ multicast masks

struct TileSmem {
  alignas(1024) std::uint8_t tile[64 * 16];
  SharedMemBarrier full;
};

// A TMA multicast along y of a 2x2 cluster reaches exactly the CTAs of its
// mask; ranks outside it get nothing (their barrier expects nothing).
TEST(emu_Cluster, TmaMulticastReachesExactlyItsSubset) {
  std::vector<std::uint8_t> g(64 * 64);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const TensorMap m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);
  const ClusterShape shape{2, 2, 1};
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<std::vector<std::uint8_t>> got(4);
    auto r = emu::run(shape_launch(shape, 1, sizeof(TileSmem)), [&] {
      auto& s = B::shared_storage<TileSmem>();
      const std::uint32_t rank = B::cta_rank();
      const bool receives = ((shape.mask_along_y(1) >> rank) & 1u) != 0;  // ranks 1 and 3
      init_bar(s.full, 1, "full");
      B::fence_init();
      B::cluster_sync();
      B::elect_one([&] {
        B::arrive_expect_tx(s.full, receives ? 64 * 16 : 0);
        if (rank == 3) B::tma_load_multicast(m, s.tile, s.full, {{0, 16}}, shape.mask_along_y(3));
      });
      B::wait(s.full, 0);
      SmemView<B, std::uint8_t> tile(s.tile, sizeof s.tile);
      got[rank].assign(tile.read_range(0, tile.size()), tile.read_range(0, tile.size()) + tile.size());
    }, with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    for (std::uint32_t c = 0; c < 4; ++c) {
      const bool receives = c == 1 || c == 3;
      EXPECT_EQ(std::equal(got[c].begin(), got[c].end(), g.begin() + 16 * 64), receives) << "cta " << c;
    }
  }
}

// A mask bit at or above the cluster's size names no CTA: reported at the
// issue, for TMA loads and tcgen05.commit, in a 4x2 cluster (rank 8 is the
// first outside it) and a 4x4 one (every bit is inside; mask 0 is not).
TEST(emu_Cluster, MaskNamingACtaOutsideTheClusterFires) {
  std::vector<std::uint8_t> g(64 * 64);
  const TensorMap m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);
  auto run = [&](ClusterShape shape, std::uint16_t mask, bool commit, std::uint32_t* line) {
    return emu::run(shape_launch(shape, 1, sizeof(TileSmem), !shape.portable()), [&] {
      auto& s = B::shared_storage<TileSmem>();
      init_bar(s.full, 1, "full");
      B::fence_init();
      B::cluster_sync();
      const std::uint32_t rank = B::cta_rank();
      if (rank == 0) {
        B::elect_one([&] {
          if (commit) {
            *line = __LINE__; B::mma_commit_multicast<1>(s.full, mask);
          } else {
            *line = __LINE__; B::tma_load_multicast(m, s.tile, s.full, {{0, 0}}, mask);
          }
        });
      }
      // The quiet runs: each CTA of the mask receives what was sent to it.
      if (((mask >> rank) & 1u) != 0) {
        if (!commit) B::elect_one([&] { B::arrive_expect_tx(s.full, sizeof s.tile); });
        B::wait(s.full, 0);
      }
    }, {});
  };
  for (const bool commit : {false, true}) {
    std::uint32_t line = 0;
    auto bad = run({4, 2, 1}, 0x0101, commit, &line);
    EXPECT_VIOLATION_AT(bad, "cluster.bad-rank", line);
    EXPECT_TRUE(contains(bad.violations[0].message, "mask 0x101 in a cluster of 8: rank 8 is outside the cluster"))
        << bad.violations[0].message;
    auto none = run({4, 4, 1}, 0, commit, &line);
    EXPECT_VIOLATION_AT(none, "cluster.bad-rank", line);
    EXPECT_OK(run({4, 2, 1}, 0x00ff, commit, &line));
    EXPECT_OK(run({4, 4, 1}, 0x8001, commit, &line));
  }
}

// tcgen05.commit multicast over any subset: each CTA of the mask gets one
// arrival at the same offset, the others none.
TEST(emu_Cluster, CommitMulticastArrivesOnEveryCtaOfItsMask) {
  struct S {
    SharedMemBarrier done;
  };
  const ClusterShape shape{4, 2, 1};
  const std::uint16_t mask = shape.mask_along_x(5) | shape.mask_along_y(5);  // row y=1 and column x=1
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto r = emu::run(shape_launch(shape, 1, sizeof(S)), [&] {
      auto& s = B::shared_storage<S>();
      const std::uint32_t rank = B::cta_rank();
      init_bar(s.done, 1, "done");
      B::fence_init();
      B::cluster_sync();
      if (rank == 5) B::elect_one([&] { B::mma_commit_multicast<1>(s.done, mask); });
      if (((mask >> rank) & 1u) != 0) B::wait(s.done, 0);
      B::cluster_sync();
    }, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
  }
  EXPECT_EQ(mask, 0b1111'0010);
}

// ------------------------------------------------------------ CTA pairs

// A cta_group::2 operation by a rank whose peer r ^ 1 is outside the
// cluster (odd cluster size) fires; every rank that has its peer is quiet,
// whatever the shape.
TEST(emu_Cluster, CtaPairWithoutPeerFires) {
  struct S {
    SharedMemBarrier done;
  };
  auto run = [&](ClusterShape shape, std::uint32_t issuer, std::uint32_t* line) {
    return emu::run(shape_launch(shape, 1, sizeof(S)), [&] {
      auto& s = B::shared_storage<S>();
      init_bar(s.done, 1, "done");
      B::fence_init();
      B::cluster_sync();
      if (B::cta_rank() == issuer) {
        B::elect_one([&] {
          *line = __LINE__; B::mma_commit_multicast<2>(s.done, shape.pair_mask(issuer));
        });
      }
      // The pair waits for the commit's arrival before anyone exits.
      if (((shape.pair_mask(issuer) >> B::cta_rank()) & 1u) != 0) B::wait(s.done, 0);
      B::cluster_sync();
    }, {});
  };
  std::uint32_t line = 0;
  auto no_peer = run({3, 1, 1}, 2, &line);  // rank 2's peer would be rank 3
  EXPECT_VIOLATION_AT(no_peer, "cluster.no-peer", line);
  EXPECT_TRUE(contains(no_peer.violations[0].message, "rank 2 has no peer (rank 3 is outside the cluster)"))
      << no_peer.violations[0].message;
  // Ranks 0 and 1 of the 3 x 1 cluster do have their pair.
  EXPECT_OK(run({3, 1, 1}, 0, &line));
  // An even cluster size: every rank has its peer r ^ 1, also where the
  // pair is a column (1 x 2) or sits in two rows (3 x 2: ranks 2 = (2, 0)
  // and 3 = (0, 1)). PTX defines the pair by rank alone, and the hardware
  // runs these: quiet.
  EXPECT_OK(run({3, 2, 1}, 2, &line));
  EXPECT_OK(run({1, 2, 1}, 0, &line));
  EXPECT_OK(run({4, 1, 1}, 2, &line));
  EXPECT_OK(run({2, 2, 1}, 2, &line));
  EXPECT_OK(run({4, 2, 1}, 6, &line));
  // A TMA load with .cta_group::2 is checked the same way.
  std::vector<std::uint8_t> g(64 * 64);
  const TensorMap m = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);
  auto tma = emu::run(shape_launch({3, 1, 1}, 1, sizeof(TileSmem)), [&] {
    auto& s = B::shared_storage<TileSmem>();
    init_bar(s.full, 1, "full");
    if (B::cta_rank() == 2) B::elect_one([&] { line = __LINE__; B::tma_load<2>(m, s.tile, s.full, {{0, 0}}); });
  }, {});
  EXPECT_VIOLATION_AT(tma, "cluster.no-peer", line);
}

// A cta_group::2 commit whose mask names CTAs outside the issuing pair is
// legal (PTX "tcgen05.commit": any ctaMask of the cluster): the emulator
// delivers it and reports nothing. The pair's leader of a 4x1 cluster
// signals all four CTAs.
TEST(emu_Cluster, CtaGroupTwoCommitBeyondThePairIsLegal) {
  struct S {
    SharedMemBarrier done;
  };
  const ClusterShape shape{4, 1, 1};
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto r = emu::run(shape_launch(shape, 1, sizeof(S)), [&] {
      auto& s = B::shared_storage<S>();
      init_bar(s.done, 1, "done");
      B::fence_init();
      B::cluster_sync();
      if (B::cta_rank() == 2) B::elect_one([&] { B::mma_commit_multicast<2>(s.done, shape.all_mask()); });
      B::wait(s.done, 0);
      B::cluster_sync();
    }, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
  }
}

// ------------------------------------------------------------ co-residency

// Two 2x2 clusters with two CTAs per SM: the rank-r CTAs of both clusters
// share SM r and its 512 columns. Each CTA holds all 512 until its cluster
// barrier, so once cluster 0's rank 0 and cluster 1's rank 1 have allocated,
// each cluster waits for a CTA that waits for the other: the crosswise
// deadlock that the CUDA examples avoid with one CTA per SM. One CTA per SM
// never deadlocks.
TEST(emu_Cluster, CoresidentClustersShareSmsByRankAndCanDeadlockCrosswise) {
  struct S {
    std::uint32_t addr;
  };
  auto kernel = [](std::uint32_t per_sm) {
    emu::Kernel k;
    k.launch = shape_launch({2, 2, 1}, 1, sizeof(S), false, 2);
    k.launch.ctas_per_sm = per_sm;
    k.body = [] {
      auto& s = B::shared_storage<S>();
      B::tmem_alloc<1>(&s.addr, 512);
      B::syncwarp();
      B::tmem_relinquish<1>();
      B::cluster_sync();
      B::tmem_dealloc<1>(s.addr, 512);
    };
    return k;
  };
  const auto shared = emu::explore(kernel(2), wspipe::test::fixed_runs(200));
  ASSERT_TRUE(shared.failure.has_value()) << shared.report();
  EXPECT_EQ(shared.failure->outcome, "deadlock") << shared.report();
  // Every CTA waits at the cluster barrier or in tcgen05.alloc, at least
  // one of each cluster in the alloc; CTA c (rank c % 4 of cluster c / 4)
  // waits for SM c % 4, whose columns the same rank of the other cluster
  // holds.
  std::uint32_t in_alloc[2] = {0, 0};
  for (const emu::BlockedWarp& b : shared.failure->result.blocked) {
    if (b.op == "cluster_sync") continue;
    ASSERT_EQ(b.op, "tcgen05.alloc") << shared.report();
    const std::uint32_t cta = static_cast<std::uint32_t>(std::stoul(b.warp.substr(3)));
    ++in_alloc[cta / 4];
    EXPECT_TRUE(contains(b.state, "of SM " + std::to_string(cta % 4) + ";")) << b.state;
    EXPECT_TRUE(contains(b.state, "held by cta" + std::to_string(cta ^ 4u) + "/w0")) << b.state;
  }
  EXPECT_GE(in_alloc[0], 1u);
  EXPECT_GE(in_alloc[1], 1u);
  const auto alone = emu::explore(kernel(1), wspipe::test::fixed_runs(50));
  EXPECT_TRUE(alone.ok()) << alone.report();
}

// ------------------------------------------------------------ the grid

// Clusters sit side by side along x: a canceled cluster k of a 2x2 shape
// starts at CTA (2k, 0, 0).
TEST(emu_Cluster, ClcFirstCtaIdOfATwoDimensionalCluster) {
  struct S {
    alignas(16) wspipe::ClcResponse resp;
    SharedMemBarrier full;
  };
  auto launch = shape_launch({2, 2, 1}, 1, sizeof(S), false, 3);
  launch.max_active_clusters = 1;
  std::vector<wspipe::ClcCtaId> ids;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto r = emu::run(launch, [&] {
      auto& s = B::shared_storage<S>();
      init_bar(s.full, 1, "clc_full");
      B::fence_init();
      B::cluster_sync();
      for (std::uint32_t round = 0;; ++round) {
        B::elect_one([&] { B::arrive_expect_tx(s.full, sizeof(wspipe::ClcResponse)); });
        B::cluster_sync();  // every CTA's barrier is armed before the response lands
        if (B::cta_rank() == 0) B::elect_one([&] { B::clc_try_cancel_multicast(s.resp, s.full); });
        B::wait(s.full, round & 1u);
        const bool canceled = B::clc_is_canceled(s.resp);
        if (canceled && B::cta_rank() == 0) ids.push_back(B::clc_first_ctaid(s.resp));
        B::cluster_sync();  // every CTA read the response before the next request overwrites it
        if (!canceled) break;
      }
    }, with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  }
  ASSERT_FALSE(ids.empty());
  for (const wspipe::ClcCtaId& id : ids) {
    EXPECT_TRUE(id.x == 2 || id.x == 4) << id.x;  // clusters 1 and 2 (cluster 0 runs first)
    EXPECT_EQ(id.y, 0u);
    EXPECT_EQ(id.z, 0u);
  }
}

}  // namespace
