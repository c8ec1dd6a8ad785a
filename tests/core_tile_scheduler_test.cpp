// core/tile_scheduler.hpp on the emulator, without a GEMM around it: every
// worker warp of every CTA walks the same sequence of cluster tiles, the
// clusters together cover every tile exactly once under explored schedules
// (CLC cancellations and launches included), the static fallback strides
// over the grid, and each piece of the protocol is needed: without the
// throttle signal, with the fetch not deferred, or without the drain, the
// kernel deadlocks or a remote arrive reaches an exited CTA.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/tile_scheduler.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::TileScheduler;
using wspipe::TileSchedulerStorage;
using wspipe::TileWork;
using wspipe::test::B;

// Warp 0: scheduler; warp 1: "load" (signals the throttle); warp 2: another
// worker. Each worker warp of each CTA records the tiles it was given.
constexpr std::uint32_t kWarps = 3;
constexpr std::uint32_t kWorkerWarps = 2;

enum class Bug { none, no_throttle_signal, fetch_before_signal, no_drain };

template <int ClcStages>
struct Walk {
  std::uint32_t tiles = 6, clusters = 6, active = 2, cluster_size = 1;
  Bug bug = Bug::none;
  // seen[(cluster * cluster_size + rank) * kWorkerWarps + worker]: the tiles in order
  std::vector<std::vector<std::uint32_t>> seen;

  emu::Kernel kernel() {
    seen.assign(std::size_t{clusters} * cluster_size * kWorkerWarps, {});
    emu::Kernel k;
    k.launch.num_clusters = clusters;
    k.launch.max_active_clusters = active;
    k.launch.cluster_size = cluster_size;
    k.launch.warps_per_cta = kWarps;
    k.launch.smem_bytes = sizeof(TileSchedulerStorage<ClcStages>);
    k.body = [this] { body(); };
    k.verify = [this] { return verify(); };
    return k;
  }

  void body() {
    auto& s = B::shared_storage<TileSchedulerStorage<ClcStages>>();
    TileScheduler<B, ClcStages> sched(s, tiles);
    const std::uint32_t warp = B::warp_idx();
    if (warp == 0) {
      TileScheduler<B, ClcStages>::init_barriers(s, kWorkerWarps);
      B::fence_init();
    }
    B::cluster_sync();
    if (warp == 0) {
      if (bug == Bug::no_drain) {
        sched.run_requests();
      } else {
        sched.run_scheduler();
      }
      return;
    }
    auto& mine = seen[(std::size_t{B::cluster_idx()} * cluster_size + B::cta_rank()) * kWorkerWarps + warp - 1];
    for (TileWork w = sched.initial(); w.valid;) {
      TileWork next{};
      if (warp == 1 && bug == Bug::fetch_before_signal) {
        next = sched.next(w);  // the bug: the next response before the throttle signal for this item
        sched.throttle_signal();
      } else if (warp == 1 && bug != Bug::no_throttle_signal) {
        sched.throttle_signal();
      }
      B::elect_one([&] { mine.push_back(w.tile); });
      w = bug == Bug::fetch_before_signal && warp == 1 ? next : sched.next(w);
    }
  }

  // Every warp of a cluster saw the same sequence; every tile was some
  // cluster's exactly once.
  std::string verify() const {
    std::vector<std::uint32_t> times(tiles, 0);
    for (std::uint32_t c = 0; c < clusters; ++c) {
      const auto& first = seen[std::size_t{c} * cluster_size * kWorkerWarps];
      for (std::uint32_t i = 1; i < cluster_size * kWorkerWarps; ++i)
        if (seen[std::size_t{c} * cluster_size * kWorkerWarps + i] != first)
          return "the warps of cluster " + std::to_string(c) + " walked different sequences";
      for (const std::uint32_t t : first) ++times[t];
    }
    for (std::uint32_t t = 0; t < tiles; ++t)
      if (times[t] != 1) return "tile " + std::to_string(t) + " walked " + std::to_string(times[t]) + " times";
    return "";
  }
};

template <int ClcStages>
emu::ExploreResult explore_walk(Walk<ClcStages> config, std::uint64_t runs) {
  return emu::explore(
      [config] {
        auto w = std::make_shared<Walk<ClcStages>>(config);
        emu::Kernel k = w->kernel();
        k.body = [w] { w->body(); };
        k.verify = [w] { return w->verify(); };
        return k;
      },
      wspipe::test::fixed_runs(runs));
}

// Exploration of `bug` (two CLC stages, clusters of `cluster_size`) finds
// `outcome`.
void expect_found(Bug bug, std::uint32_t cluster_size, const std::string& outcome) {
  Walk<2> w;
  w.cluster_size = cluster_size;
  w.tiles = w.clusters = cluster_size == 1 ? 6 : 4;
  w.bug = bug;
  const auto r = explore_walk(w, 500);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->outcome, outcome) << r.report();
}

TEST(core_TileScheduler, ClcCoversEveryTileOnceWithOneAndTwoStages) {
  Walk<1> one;
  const auto r1 = explore_walk(one, 200);
  EXPECT_TRUE(r1.ok()) << r1.report();
  EXPECT_EQ(r1.runs, 200u);
  Walk<2> two;
  const auto r2 = explore_walk(two, 200);
  EXPECT_TRUE(r2.ok()) << r2.report();
}

TEST(core_TileScheduler, ClcMulticastClusterOfTwoCoversEveryTileOnce) {
  Walk<2> w;
  w.cluster_size = 2;
  w.tiles = w.clusters = 4;
  const auto r = explore_walk(w, 200);
  EXPECT_TRUE(r.ok()) << r.report();
}

// The division of the tiles among the clusters is the scheduler's choice:
// different schedules give different divisions.
TEST(core_TileScheduler, ClcDivisionsDifferBetweenSchedules) {
  std::set<std::vector<std::vector<std::uint32_t>>> divisions;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Walk<2> w;
    const auto r = emu::run(w.kernel(), wspipe::test::with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    divisions.insert(w.seen);
  }
  EXPECT_GT(divisions.size(), 1u);
}

// All clusters running: every request fails at once, each cluster walks
// its own tile only.
TEST(core_TileScheduler, AllClustersRunningEachWalksItsOwnTile) {
  Walk<2> w;
  w.active = 0;
  const auto r = emu::run(w.kernel(), {});
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  for (std::uint32_t c = 0; c < w.clusters; ++c)
    EXPECT_EQ(w.seen[std::size_t{c} * kWorkerWarps], std::vector<std::uint32_t>{c});
}

// Static fallback: no CLC; cluster c walks c, c + clusters, ...
TEST(core_TileScheduler, StaticScheduleStridesOverTheGrid) {
  Walk<0> w;
  w.tiles = 7;
  w.clusters = 3;
  w.active = 0;
  const auto r = emu::run(w.kernel(), wspipe::test::with_strategy(emu::StrategyKind::random, 3));
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  EXPECT_EQ(w.seen[0], (std::vector<std::uint32_t>{0, 3, 6}));
  EXPECT_EQ(w.seen[1 * kWorkerWarps], (std::vector<std::uint32_t>{1, 4}));
  EXPECT_EQ(w.seen[2 * kWorkerWarps + 1], (std::vector<std::uint32_t>{2, 5}));
  static_assert(!TileScheduler<B, 0>::kUsesClc && TileScheduler<B, 2>::kUsesClc);
}

// Without the throttle signal the scheduler never requests: every worker
// waits on a response that never comes.
TEST(core_TileScheduler, NoThrottleSignalDeadlocks) { expect_found(Bug::no_throttle_signal, 1, "deadlock"); }

// Fetching the next item before signalling the throttle for the current
// one: the load warp waits on a response whose request waits on its
// signal (why next() is called when an item is done, MAX's deferred fetch).
TEST(core_TileScheduler, FetchBeforeTheThrottleSignalDeadlocks) {
  expect_found(Bug::fetch_before_signal, 1, "deadlock");
}

// Without the drain, CTA 0 may exit while CTA 1's warps still arrive on its
// empty barriers.
TEST(core_TileScheduler, NoDrainLetsAPeerArriveOnAnExitedCta) {
  expect_found(Bug::no_drain, 2, "mbarrier.remote-exited-cta");
}

}  // namespace
