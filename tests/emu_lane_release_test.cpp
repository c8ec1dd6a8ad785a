// Per-lane release (docs/emulator-models.md, "Per-lane release"): an
// arrive, a fence.proxy.async or an issue orders the executing lane's own
// accesses only, so the stores of the other lanes reach its consumer only
// after a syncwarp. "All lanes store, one elected lane arrives, no
// __syncwarp" is race.smem at the consumer's read, naming the lanes' store;
// with B::syncwarp() before the arrive it is clean. The same for plain C++
// per-lane stores and for a TMA store of a tile the lanes wrote. An arrive
// by the lane that stored, by every lane, or after warp-level stores, and a
// named barrier (the whole warp), stay clean.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/smem.hpp"
#include "core/tma.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::SharedMemBarrier;
using wspipe::SmemView;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::elected_arrive;
using wspipe::test::init_bar;
using wspipe::test::outcome;
using wspipe::test::run_kernel;
using wspipe::test::with_strategy;

struct Smem {
  SharedMemBarrier full;
  std::uint32_t data[32];
};

// How the producer (warp 0) writes data[] before it arrives on `full`.
enum class Store : std::uint8_t {
  view_lanes,   // each lane its word, through SmemView, in for_each_lane
  plain_lanes,  // the same with plain C++ stores (instrumented accesses)
  warp_level,   // warp-level SmemView stores: every lane's, the elected lane's too
};

// The lines a report must name, filled by the kernel.
struct Lines {
  std::uint32_t store = 0, read = 0;
};

// The shared storage, `full` initialised with `count` arrivals.
Smem& setup(std::uint32_t count) {
  auto& s = B::shared_storage<Smem>();
  if (B::warp_idx() == 0) {
    init_bar(s.full, count, "full");
    B::fence_init();
  }
  B::cluster_sync();
  return s;
}

// Warp 0 writes data[] (`how`), optionally syncs the warp, and one elected
// lane arrives on `full` (count 1); warp 1 waits and reads every word.
void handoff(Store how, bool sync, Lines* at) {
  Smem& s = setup(1);
  const SmemView<B, std::uint32_t> view(s.data, 32);
  if (B::warp_idx() == 0) {
    switch (how) {
      case Store::view_lanes:
        B::for_each_lane([&](std::uint32_t lane) {
          at->store = __LINE__ + 1;
          view.store(lane, lane + 1);
        });
        break;
      case Store::plain_lanes:
        B::for_each_lane([&](std::uint32_t lane) {
          at->store = __LINE__ + 1;
          s.data[lane] = lane + 1;
        });
        break;
      case Store::warp_level:
        at->store = __LINE__ + 1;
        for (std::uint32_t i = 0; i < 32; ++i) view.store(i, i + 1);
        break;
    }
    if (sync) B::syncwarp();
    elected_arrive(s.full);
  } else {
    B::wait(s.full, 0);
    for (std::uint32_t i = 0; i < 32; ++i) {
      at->read = __LINE__ + 1;
      const std::uint32_t v = view.load(i);
      B::check(v == i + 1, "the consumer reads what the producer stored");
    }
  }
}

emu::RunResult run_handoff(Store how, bool sync, Lines* at, emu::RunOptions o = {}) {
  return run_kernel(2, [=] { handoff(how, sync, at); }, o);
}

// race.smem at the consumer's read, naming the producer's store as the
// earlier access, and saying what orders a lane's store.
void expect_race_at_read(const emu::RunResult& r, const Lines& at) {
  ASSERT_EQ(outcome(r), "race.smem") << r.report();
  const emu::Violation& v = r.violations[0];
  EXPECT_EQ(v.line, at.read) << r.report();
  EXPECT_TRUE(wspipe::test::ends_with(v.file, "emu_lane_release_test.cpp")) << v.file;
  EXPECT_TRUE(contains(v.other, "emu_lane_release_test.cpp:" + std::to_string(at.store))) << r.report();
  EXPECT_TRUE(contains(v.other, "ordinary store")) << r.report();
  EXPECT_TRUE(contains(v.message, "syncwarp")) << r.report();
}

std::vector<emu::RunOptions> schedules() {
  std::vector<emu::RunOptions> o{emu::RunOptions{}};
  for (std::uint64_t seed = 1; seed <= 5; ++seed) o.push_back(with_strategy(emu::StrategyKind::random, seed));
  return o;
}

TEST(LaneRelease, LanesStoreOneLaneArrivesNoSyncwarpIsARace) {
  for (const emu::RunOptions& o : schedules()) {
    Lines at;
    expect_race_at_read(run_handoff(Store::view_lanes, false, &at, o), at);
  }
}

TEST(LaneRelease, SyncwarpBeforeTheElectedArriveIsClean) {
  for (const emu::RunOptions& o : schedules()) {
    Lines at;
    EXPECT_OK(run_handoff(Store::view_lanes, true, &at, o));
  }
}

#if defined(WSPIPE_INSTRUMENTED_ACCESSES)
TEST(LaneRelease, PlainPerLaneStoresAreReleasedOnlyAfterSyncwarp) {
  for (const emu::RunOptions& o : schedules()) {
    Lines at;
    expect_race_at_read(run_handoff(Store::plain_lanes, false, &at, o), at);
    EXPECT_OK(run_handoff(Store::plain_lanes, true, &at, o));
  }
}
#endif

// Warp-level code is every lane's: the elected lane stored the same values
// to the same words, and its arrive releases its own stores.
TEST(LaneRelease, WarpLevelStoresAreReleasedByTheElectedArrive) {
  for (const emu::RunOptions& o : schedules()) {
    Lines at;
    EXPECT_OK(run_handoff(Store::warp_level, false, &at, o));
  }
}

// The lane that arrives releases its own stores, with no syncwarp: lane 0
// alone, or every lane arriving after its own store (count 32).
TEST(LaneRelease, ALaneReleasesItsOwnStores) {
  for (const bool every_lane : {false, true}) {
    const emu::RunResult r = run_kernel(2, [every_lane] {
      Smem& s = setup(every_lane ? 32 : 1);
      const SmemView<B, std::uint32_t> view(s.data, 32);
      if (B::warp_idx() == 0) {
        B::for_each_lane([&](std::uint32_t lane) {
          if (!every_lane && lane != 0) return;
          view.store(lane, 5);
          B::arrive(s.full);
        });
      } else {
        B::wait(s.full, 0);
        if (every_lane) {
          for (std::uint32_t i = 0; i < 32; ++i) B::check(view.load(i) == 5, "every lane's word");
        } else {
          B::check(view.load(0) == 5, "lane 0's word");
        }
      }
    });
    EXPECT_OK(r) << (every_lane ? "every lane" : "lane 0");
  }
}

// A syncwarp after the elected arrive is too late: the arrive has
// published the phase without the other lanes' stores.
TEST(LaneRelease, SyncwarpAfterTheArriveIsTooLate) {
  std::uint32_t store_line = 0, read_line = 0;
  const emu::RunResult r = run_kernel(2, [&] {
    Smem& s = setup(1);
    const SmemView<B, std::uint32_t> view(s.data, 32);
    if (B::warp_idx() == 0) {
      B::for_each_lane([&](std::uint32_t lane) {
        store_line = __LINE__ + 1;
        view.store(lane, 1);
      });
      elected_arrive(s.full);
      B::syncwarp();
    } else {
      B::wait(s.full, 0);
      read_line = __LINE__ + 1;
      B::check(view.load(31) == 1, "lane 31's word");
    }
  });
  ASSERT_EQ(outcome(r), "race.smem") << r.report();
  EXPECT_EQ(r.violations[0].line, read_line) << r.report();
  EXPECT_TRUE(contains(r.violations[0].other, ':' + std::to_string(store_line))) << r.report();
}

// A named barrier is warp-collective (the whole warp arrives): it orders
// every lane's stores, with no syncwarp.
TEST(LaneRelease, NamedBarrierReleasesEveryLane) {
  const emu::RunResult r = run_kernel(2, [] {
    auto& s = B::shared_storage<Smem>();
    const SmemView<B, std::uint32_t> view(s.data, 32);
    if (B::warp_idx() == 0) {
      B::for_each_lane([&](std::uint32_t lane) { view.store(lane, lane); });
      B::named_arrive(1, 64);
    } else {
      B::named_sync(1, 64);
      for (std::uint32_t i = 0; i < 32; ++i) B::check(view.load(i) == i, "every lane's word");
    }
  });
  EXPECT_OK(r);
}

// ------------------------------------------------------------ TMA store

struct TileSmem {
  alignas(1024) std::uint8_t tile[64 * 16];
};

enum class Fence : std::uint8_t { elected, warp_level, syncwarp_then_elected };

// One warp's lanes write a 64 x 16 byte tile, then one lane (fences and)
// stores it with TMA: `fence` says who fences and whether a syncwarp comes
// first.
emu::RunResult tma_store_of_lanes(Fence fence, std::vector<std::uint8_t>& g, std::uint32_t* store_line,
                                  std::uint32_t* tma_line) {
  const wspipe::TensorMap map = wspipe::test::tensor_map_2d(g.data(), wspipe::ElemType::u8, 64, 16, 64, 16);
  return run_kernel(
      1,
      [&, fence] {
        auto& s = B::shared_storage<TileSmem>();
        const SmemView<B, std::uint8_t> v(s.tile, sizeof s.tile);
        B::for_each_lane([&](std::uint32_t lane) {
          *store_line = __LINE__ + 1;
          for (std::uint32_t i = lane; i < v.size(); i += 32) v.store(i, static_cast<std::uint8_t>(i));
        });
        if (fence == Fence::syncwarp_then_elected) B::syncwarp();
        if (fence == Fence::warp_level) B::fence_proxy_async();
        B::elect_one([&] {
          if (fence != Fence::warp_level) B::fence_proxy_async();
          *tma_line = __LINE__ + 1;
          B::tma_store(map, s.tile, wspipe::TmaCoords{{0, 0}});
          B::bulk_commit_group();
          B::bulk_wait_group<0>();
        });
      },
      {}, sizeof(TileSmem));
}

// fence.proxy.async orders the fencing lane's stores for the async proxy,
// and the TMA store's issue the issuing lane's: the other lanes' stores
// need a syncwarp (or a named barrier) before the issue, whoever fenced.
TEST(LaneRelease, TmaStoreOfTheLanesTileNeedsASyncwarp) {
  for (const Fence f : {Fence::elected, Fence::warp_level}) {
    std::vector<std::uint8_t> g(64 * 16, 0);
    std::uint32_t store_line = 0, tma_line = 0;
    const emu::RunResult r = tma_store_of_lanes(f, g, &store_line, &tma_line);
    ASSERT_EQ(outcome(r), "race.smem") << r.report();
    EXPECT_EQ(r.violations[0].line, tma_line) << r.report();
    EXPECT_TRUE(contains(r.violations[0].other, ':' + std::to_string(store_line))) << r.report();
  }
  std::vector<std::uint8_t> g(64 * 16, 0);
  std::uint32_t store_line = 0, tma_line = 0;
  EXPECT_OK(tma_store_of_lanes(Fence::syncwarp_then_elected, g, &store_line, &tma_line));
  for (std::uint32_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], static_cast<std::uint8_t>(i)) << i;
}

// A syncwarp orders the lanes' stores into the elected lane, but only the
// elected lane's fence.proxy.async after it makes them visible to the
// async proxy: the syncwarp alone is not a proxy fence.
TEST(LaneRelease, SyncwarpIsNotAProxyFence) {
  std::vector<std::uint8_t> g(64 * 16, 0);
  const wspipe::TensorMap map = wspipe::test::tensor_map_2d(g.data(), wspipe::ElemType::u8, 64, 16, 64, 16);
  const emu::RunResult r = run_kernel(
      1,
      [&] {
        auto& s = B::shared_storage<TileSmem>();
        const SmemView<B, std::uint8_t> v(s.tile, sizeof s.tile);
        B::for_each_lane([&](std::uint32_t lane) {
          for (std::uint32_t i = lane; i < v.size(); i += 32) v.store(i, 1);
        });
        B::syncwarp();
        B::elect_one([&] {
          B::tma_store(map, s.tile, wspipe::TmaCoords{{0, 0}});
          B::bulk_commit_group();
          B::bulk_wait_group<0>();
        });
      },
      {}, sizeof(TileSmem));
  EXPECT_EQ(outcome(r), "smem.missing-proxy-fence") << r.report();
}

// Lane-divergence mode changes nothing here: lane 31 performs no accesses
// of its own, and the warp's fiber makes them for every lane.
TEST(LaneRelease, TheSameWithLaneDivergenceMode) {
  emu::RunOptions o;
  o.lane_divergence = true;
  Lines at;
  expect_race_at_read(run_handoff(Store::view_lanes, false, &at, o), at);
  EXPECT_OK(run_handoff(Store::view_lanes, true, &at, o));
  EXPECT_OK(run_handoff(Store::warp_level, false, &at, o));
}

}  // namespace
