// TMA tensor stores (cp.async.bulk.tensor shared::cta -> global) and bulk
// async-groups (cp.async.bulk.commit_group, cp.async.bulk.wait_group[.read])
// in the emulator: what a store writes (the inverse of a load, swizzle and
// out-of-bounds elements included), and each rule firing on its bug and
// quiet on correct use: reuse of a tile a store still reads (race.smem),
// ordinary stores without fence.proxy.async (smem.missing-proxy-fence), a
// CTA exiting while a store reads its shared memory
// (tma.store-exit-before-read), bad operands (tma.invalid, tma.multi-lane),
// box origins the H100 rejects (tma.coord-misaligned,
// tma.store-negative-coord), and the 16-byte chunks a store writes past a
// row's end (docs/silicon.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/smem.hpp"
#include "core/tma.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::ElemType;
using wspipe::SharedMemBarrier;
using wspipe::SmemSwizzle;
using wspipe::SmemView;
using wspipe::TensorMap;
using wspipe::TmaCoords;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

constexpr std::uint8_t kUntouched = 0xee;

// Two 1 KiB tiles: a 64 x 16 box of bytes each.
struct StoreSmem {
  alignas(1024) std::uint8_t tile[2][64 * 16];
};

// The value a kernel writes at byte i of a tile, per fill round.
std::uint8_t pattern(std::uint32_t i, std::uint32_t round) { return static_cast<std::uint8_t>(i * 7 + round * 31 + 1); }

// Every lane of the warp writes its share of `tile` with ordinary stores,
// and the warp converges: the one lane that issues a TMA store of the tile
// orders the other lanes' stores only after a syncwarp (docs/emulator-models.md,
// "Per-lane release").
void fill(std::uint8_t* tile, std::uint32_t round) {
  SmemView<B, std::uint8_t> v(tile, 64 * 16);
  B::for_each_lane([&](std::uint32_t lane) {
    for (std::uint32_t i = lane; i < v.size(); i += 32) v.store(i, pattern(i, round));
  });
  B::syncwarp();
}

// A 64 x 64 byte tensor, every byte kUntouched, and its map (box 64 x 16).
struct Global {
  std::vector<std::uint8_t> g = std::vector<std::uint8_t>(64 * 64, kUntouched);
  TensorMap map = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 64, 64, 16);
  // Whether rows [row0, row0 + 16) hold round `round`'s pattern and every other byte is untouched.
  bool holds(std::uint32_t row0, std::uint32_t round) const {
    for (std::uint32_t r = 0; r < 64; ++r)
      for (std::uint32_t c = 0; c < 64; ++c) {
        const bool in = r >= row0 && r < row0 + 16;
        if (g[r * 64 + c] != (in ? pattern((r - row0) * 64 + c, round) : kUntouched)) return false;
      }
    return true;
  }
};

emu::RunResult run1(const std::function<void()>& body, emu::RunOptions opts = {}) {
  return wspipe::test::run_kernel(1, body, opts, sizeof(StoreSmem));
}

// One warp writes tile 0 with round 0's pattern and stores it to `map` at
// `at`, then waits for the store to complete.
emu::RunResult store_tile(const TensorMap& map, TmaCoords at, emu::RunOptions opts = {}) {
  return run1(
      [&map, at] {
        auto& s = B::shared_storage<StoreSmem>();
        fill(s.tile[0], 0);
        B::fence_proxy_async();
        B::elect_one([&] {
          B::tma_store(map, s.tile[0], at);
          B::bulk_commit_group();
          B::bulk_wait_group<0>();
        });
      },
      opts);
}

// ------------------------------------------------------------ what a store writes

TEST(emu_TmaStore, WritesTheBoxThroughTheMapUnderEveryStrategy) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    Global out;
    auto r = store_tile(out.map, TmaCoords{{0, 16}}, with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_TRUE(out.holds(16, 0)) << "seed " << seed;
  }
}

// Lane-divergence mode runs lane 31 beside the warp: the store, the commit
// and the waits are the elected lane's, performed once.
TEST(emu_TmaStore, LaneDivergenceModeStoresOnce) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    Global out;
    emu::RunOptions opts = with_strategy(emu::StrategyKind::random, seed);
    opts.lane_divergence = true;
    auto r = run1([&] {
      auto& s = B::shared_storage<StoreSmem>();
      fill(s.tile[0], 0);
      B::fence_proxy_async();
      B::elect_one([&] {
        B::tma_store(out.map, s.tile[0], {{0, 48}});
        B::bulk_commit_group();
        B::bulk_wait_group_read<0>();
      });
      fill(s.tile[0], 1);
      B::elect_one([] { B::bulk_wait_group<0>(); });
    }, opts);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_TRUE(out.holds(48, 0)) << "seed " << seed;
    std::size_t stores = 0;
    for (const auto& e : r.trace.events) stores += e.kind == emu::EventKind::tma_store_issue;
    EXPECT_EQ(stores, 1u);
  }
}

// A swizzled load then a store with the same swizzle: the store is the
// load's inverse, so the tile comes back unchanged, wherever the swizzle
// moved its 16-byte chunks in shared memory.
TEST(emu_TmaStore, IsTheInverseOfTheSwizzledLoad) {
  struct S {
    alignas(1024) std::uint8_t tile[128 * 8];
    SharedMemBarrier full;
  };
  for (const SmemSwizzle sw : {SmemSwizzle::none, SmemSwizzle::b32, SmemSwizzle::b64, SmemSwizzle::b128}) {
    const std::uint32_t width = sw == SmemSwizzle::none ? 128 : wspipe::swizzle_bytes(sw);
    std::vector<std::uint8_t> in(128 * 64), out(128 * 64, kUntouched);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 13 + 5);
    const TensorMap load = wspipe::test::tensor_map_2d(in.data(), ElemType::u8, 128, 64, width, 8, sw);
    const TensorMap store = wspipe::test::tensor_map_2d(out.data(), ElemType::u8, 128, 64, width, 8, sw);
    auto r = wspipe::test::run_kernel(1, [&] {
      auto& s = B::shared_storage<S>();
      wspipe::test::init_bar(s.full, 1, "full");
      B::elect_one([&] {
        B::arrive_expect_tx(s.full, width * 8);
        B::tma_load(load, s.tile, s.full, {{0, 8}});
      });
      B::wait(s.full, 0);
      // TMA wrote the tile (async proxy), TMA reads it: no proxy fence needed.
      B::elect_one([&] {
        B::tma_store(store, s.tile, {{0, 24}});
        B::bulk_commit_group();
        B::bulk_wait_group<0>();
      });
    }, {}, sizeof(S));
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    for (std::uint32_t row = 0; row < 64; ++row)
      for (std::uint32_t col = 0; col < 128; ++col) {
        const bool in_box = row >= 24 && row < 32 && col < width;
        const std::uint8_t want = in_box ? in[(row - 16) * 128 + col] : kUntouched;
        ASSERT_EQ(out[row * 128 + col], want) << "swizzle " << width << " row " << row << " col " << col;
      }
  }
}

// PTX "Tensor Access Modes": a store writes no element outside the tensor
// (where a load would fill zeros).
TEST(emu_TmaStore, OutOfBoundsElementsAreNotWritten) {
  // Past the right and bottom edges (a store may not start before the
  // tensor: StoreOriginRules).
  Global out;
  const std::int32_t x0 = 32, y0 = 56;
  auto r = store_tile(out.map, TmaCoords{{x0, y0}});
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  for (std::int32_t row = 0; row < 64; ++row)
    for (std::int32_t col = 0; col < 64; ++col) {
      const std::int32_t br = row - y0, bc = col - x0;
      const bool in_box = br >= 0 && br < 16 && bc >= 0 && bc < 64;
      const std::uint8_t want = in_box ? pattern(static_cast<std::uint32_t>(br * 64 + bc), 0) : kUntouched;
      ASSERT_EQ(out.g[static_cast<std::size_t>(row * 64 + col)], want) << "row " << row << " col " << col;
    }
}

// ------------------------------------------------------------ rule (a): reuse before wait_group.read

enum class Reuse {
  no_wait,        // rewrites the tile right after issuing the store
  wait_read,      // bulk_wait_group_read<0> first
  wait_all,       // bulk_wait_group<0> first
};

emu::RunResult run_reuse(Reuse how, Global& out, std::uint64_t seed, std::uint32_t* line = nullptr) {
  return run1([&, how, line] {
    auto& s = B::shared_storage<StoreSmem>();
    fill(s.tile[0], 0);
    B::fence_proxy_async();
    B::elect_one([&] {
      if (line != nullptr) *line = __LINE__ + 1;
      B::tma_store(out.map, s.tile[0], {{0, 0}});
      B::bulk_commit_group();
      if (how == Reuse::wait_read) B::bulk_wait_group_read<0>();
      if (how == Reuse::wait_all) B::bulk_wait_group<0>();
    });
    fill(s.tile[0], 1);  // the next tile's data
    B::fence_proxy_async();
    B::elect_one([&] {
      B::tma_store(out.map, s.tile[0], {{0, 32}});
      B::bulk_commit_group();
      B::bulk_wait_group<0>();
    });
  }, with_strategy(emu::StrategyKind::random, seed));
}

TEST(emu_TmaStore, ReusingATileBeforeWaitGroupReadRaces) {
  std::size_t fired = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Global out;
    std::uint32_t line = 0;
    auto r = run_reuse(Reuse::no_wait, out, seed, &line);
    // Whichever comes first, the engine's read or the rewrite, the two are
    // unordered: a race, named with both sides.
    ASSERT_EQ(outcome(r), "race.smem") << r.report();
    EXPECT_TRUE(contains(r.violations[0].message, "TMA store")) << r.report();
    EXPECT_TRUE(contains(r.violations[0].message, "ordinary store")) << r.report();
    EXPECT_TRUE(contains(r.violations[0].other, "step")) << r.report();
    const std::string both = r.violations[0].message + " " + r.violations[0].other;
    EXPECT_TRUE(contains(both, "tma")) << r.report();  // the engine's side
    EXPECT_TRUE(contains(both, "w0")) << r.report();   // the warp's side
    fired += r.violations[0].line == line;
  }
  EXPECT_GT(fired, 0u);  // in some schedules the report is at the store (the engine read second)
}

// After wait_group.read the tile may be rewritten although the first
// store's global writes may still be in flight: they write what the store
// read, never the new data.
TEST(emu_TmaStore, ReuseAfterWaitGroupReadIsQuietAndStoresWhatWasRead) {
  for (const Reuse how : {Reuse::wait_read, Reuse::wait_all}) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      Global out;
      auto r = run_reuse(how, out, seed);
      ASSERT_EQ(r.status, emu::Status::ok) << r.report();
      for (std::uint32_t i = 0; i < 16 * 64; ++i) ASSERT_EQ(out.g[i], pattern(i, 0)) << "seed " << seed;
      for (std::uint32_t i = 0; i < 16 * 64; ++i) ASSERT_EQ(out.g[32 * 64 + i], pattern(i, 1)) << "seed " << seed;
    }
  }
}

// wait_group.read N leaves the N most recent groups pending: with two
// tiles in flight, N = 1 frees the older tile, not the newer one.
TEST(emu_TmaStore, WaitGroupReadOneFreesOnlyTheOlderTile) {
  auto run = [](std::uint32_t reuse, std::uint64_t seed) {
    Global out;
    return run1([&out, reuse] {
      auto& s = B::shared_storage<StoreSmem>();
      fill(s.tile[0], 0);
      fill(s.tile[1], 1);
      B::fence_proxy_async();
      B::elect_one([&] {
        B::tma_store(out.map, s.tile[0], {{0, 0}});
        B::bulk_commit_group();
        B::tma_store(out.map, s.tile[1], {{0, 16}});
        B::bulk_commit_group();
        B::bulk_wait_group_read<1>();
      });
      fill(s.tile[reuse], 2);
      B::elect_one([] { B::bulk_wait_group<0>(); });
    }, with_strategy(emu::StrategyKind::random, seed));
  };
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    EXPECT_OK(run(0, seed));
    auto bad = run(1, seed);
    ASSERT_EQ(outcome(bad), "race.smem") << bad.report();
    EXPECT_TRUE(contains(bad.violations[0].object, "shared memory [0x4")) << bad.violations[0].object;  // tile[1]
  }
}

// Another warp may reuse the tile once the issuer's wait_group.read is
// ordered before it (here by a named barrier): the wait's acquire carries over.
TEST(emu_TmaStore, ReuseByAnotherWarpIsOrderedThroughTheIssuersWait) {
  auto run = [](bool wait, std::uint64_t seed) {
    Global out;
    return wspipe::test::run_kernel(2, [&out, wait] {
      auto& s = B::shared_storage<StoreSmem>();
      if (B::warp_idx() == 0) {
        fill(s.tile[0], 0);
        B::fence_proxy_async();
        B::elect_one([&] {
          B::tma_store(out.map, s.tile[0], {{0, 0}});
          B::bulk_commit_group();
          if (wait) B::bulk_wait_group_read<0>();
        });
        B::named_arrive(1, 64);
        B::elect_one([&] { B::bulk_wait_group<0>(); });
      } else {
        B::named_sync(1, 64);
        fill(s.tile[0], 1);
      }
    }, with_strategy(emu::StrategyKind::random, seed), sizeof(StoreSmem));
  };
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    EXPECT_OK(run(true, seed));
    EXPECT_EQ(outcome(run(false, seed)), "race.smem");
  }
}

// ------------------------------------------------------------ rule (b): proxy fence

TEST(emu_TmaStore, OrdinaryStoresNeedTheProxyFenceBeforeTheStore) {
  auto run = [](bool fence, std::uint64_t seed) {
    Global out;
    return wspipe::test::run_kernel(2, [&out, fence] {
      auto& s = B::shared_storage<StoreSmem>();
      // Warp 1 writes the tile (an epilogue warp), warp 0 stores it once a
      // named barrier says it is written.
      if (B::warp_idx() == 1) {
        fill(s.tile[0], 0);
        if (fence) B::fence_proxy_async();
        B::named_arrive(1, 64);
      } else {
        B::named_sync(1, 64);
        B::elect_one([&] {
          B::tma_store(out.map, s.tile[0], {{0, 0}});
          B::bulk_commit_group();
          B::bulk_wait_group<0>();
        });
      }
    }, with_strategy(emu::StrategyKind::random, seed), sizeof(StoreSmem));
  };
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto bad = run(false, seed);
    ASSERT_EQ(outcome(bad), "smem.missing-proxy-fence") << bad.report();
    EXPECT_TRUE(contains(bad.violations[0].message, "TMA store")) << bad.report();
    EXPECT_TRUE(contains(bad.violations[0].message, "that no fence.proxy.async followed")) << bad.report();
    EXPECT_OK(run(true, seed));
  }
}

// ------------------------------------------------------------ rule (c): exit and the run's end

// On hardware a CTA's shared memory is freed at exit: a store still reading
// it reads whatever comes next. The default policy keeps the warp running,
// so it exits before the engine has read.
TEST(emu_TmaStore, ExitWhileAStoreReadsSharedMemoryFires) {
  Global out;
  std::uint32_t line = 0;
  auto r = run1([&] {
    auto& s = B::shared_storage<StoreSmem>();
    fill(s.tile[0], 0);
    B::fence_proxy_async();
    B::elect_one([&] {
      line = __LINE__; B::tma_store(out.map, s.tile[0], {{0, 0}});
      B::bulk_commit_group();
    });
  }, with_strategy(emu::StrategyKind::round_robin));
  EXPECT_VIOLATION_AT(r, "tma.store-exit-before-read", line);
  EXPECT_EQ(r.violations[0].object, "shared memory [0x0, 0x400) (cta0)");
  EXPECT_TRUE(contains(r.violations[0].message, "bulk_wait_group_read<0>")) << r.report();
  // An uncommitted store is in no group and cannot be waited for: the same.
  auto uncommitted = run1([&] {
    auto& s = B::shared_storage<StoreSmem>();
    fill(s.tile[0], 0);
    B::fence_proxy_async();
    B::elect_one([&] {
      B::tma_store(out.map, s.tile[0], {{0, 0}});
      B::bulk_wait_group_read<0>();
    });
  }, with_strategy(emu::StrategyKind::round_robin));
  EXPECT_EQ(outcome(uncommitted), "tma.store-exit-before-read") << uncommitted.report();
}

// wait_group.read 0 before exit is enough: the writes still in flight are
// performed before the run ends (as before the grid completes on hardware),
// so host code that checks the tensor after a run whose status is ok reads
// complete results.
TEST(emu_TmaStore, WritesInFlightAtExitLandBeforeTheRunEnds) {
  std::size_t exited_first = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Global out;
    auto r = run1([&] {
      auto& s = B::shared_storage<StoreSmem>();
      fill(s.tile[0], 0);
      B::fence_proxy_async();
      B::elect_one([&] {
        B::tma_store(out.map, s.tile[0], {{0, 16}});
        B::bulk_commit_group();
        B::bulk_wait_group_read<0>();
      });
    }, with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_TRUE(out.holds(16, 0)) << "seed " << seed;
    // Some schedules perform the write after the warp exited.
    std::uint64_t exit_step = 0, done_step = 0;
    for (const auto& e : r.trace.events) {
      if (e.kind == emu::EventKind::exit) exit_step = e.step;
      if (e.kind == emu::EventKind::tma_store_done) done_step = e.step;
    }
    exited_first += done_step > exit_step;
  }
  EXPECT_GT(exited_first, 0u);
}

// ------------------------------------------------------------ rule (d): groups

// PTX: wait_group N waits only for the groups older than the N most recent;
// with no groups, or fewer than N, it returns at once. commit_group with no
// store since the last one makes an empty group, which counts as a group.
TEST(emu_TmaStore, EmptyGroupsAndWaitsWithNothingToWaitForAreFine) {
  Global out;
  auto r = run1([&] {
    auto& s = B::shared_storage<StoreSmem>();
    B::elect_one([] {
      B::bulk_wait_group<0>();
      B::bulk_wait_group_read<7>();
      B::bulk_commit_group();  // empty
      B::bulk_wait_group<0>();
    });
    fill(s.tile[0], 0);
    B::fence_proxy_async();
    B::elect_one([&] {
      B::tma_store(out.map, s.tile[0], {{0, 0}});
      B::bulk_commit_group();  // group with the store
      B::bulk_commit_group();  // empty, the most recent
      B::bulk_wait_group_read<1>();  // leaves the empty one pending: the store's group has read
    });
    fill(s.tile[0], 1);
    B::elect_one([] { B::bulk_wait_group<0>(); });
  });
  EXPECT_OK(r);
  for (std::uint32_t i = 0; i < 16 * 64; ++i) ASSERT_EQ(out.g[i], pattern(i, 0));
  // With the store in the most recent group, wait_group.read 1 waits for nothing.
  auto bad = run1([&] {
    auto& s = B::shared_storage<StoreSmem>();
    fill(s.tile[0], 0);
    B::fence_proxy_async();
    B::elect_one([&] {
      B::bulk_commit_group();  // empty, older
      B::tma_store(out.map, s.tile[0], {{0, 0}});
      B::bulk_commit_group();
      B::bulk_wait_group_read<1>();
    });
    fill(s.tile[0], 1);
    B::elect_one([] { B::bulk_wait_group<0>(); });
  }, with_strategy(emu::StrategyKind::round_robin));
  EXPECT_EQ(outcome(bad), "race.smem") << bad.report();
}

// A wait blocks its warp until the engine has done the steps it waits for;
// the trace shows the store's issue, read and write and the wait.
TEST(emu_TmaStore, TraceShowsTheStoresTwoStepsAndTheWait) {
  Global out;
  auto r = run1([&] {
    auto& s = B::shared_storage<StoreSmem>();
    fill(s.tile[0], 0);
    B::fence_proxy_async();
    B::elect_one([&] {
      B::tma_store(out.map, s.tile[0], {{0, 0}});
      B::bulk_commit_group();
      B::bulk_wait_group<0>();
    });
  }, with_strategy(emu::StrategyKind::round_robin));
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  std::uint64_t issue = 0, read = 0, done = 0, wait = 0;
  for (const auto& e : r.trace.events) {
    if (e.kind == emu::EventKind::tma_store_issue) issue = e.step;
    if (e.kind == emu::EventKind::tma_store_read) read = e.step;
    if (e.kind == emu::EventKind::tma_store_done) done = e.step;
    if (e.kind == emu::EventKind::bulk_wait) wait = e.step;
  }
  EXPECT_LT(issue, read);
  EXPECT_LT(read, done);
  EXPECT_LE(done, wait);
  std::ostringstream text;
  r.trace.write_text(text);
  EXPECT_TRUE(contains(text.str(), "tma store read 1024 bytes of shared memory")) << text.str();
  EXPECT_TRUE(contains(text.str(), "tma store wrote 1024 bytes to global memory")) << text.str();
  EXPECT_TRUE(contains(text.str(), "cp.async.bulk.wait_group 0")) << text.str();
}

// ------------------------------------------------------------ bad operands

TEST(emu_TmaStore, BadOperandsFireWithTheLoadsMessages) {
  Global out;
  auto store = [&](auto issue) {
    return run1([&, issue] {
      auto& s = B::shared_storage<StoreSmem>();
      issue(s);
    });
  };
  // Issued by the whole warp: 32 stores.
  auto multi = store([&](StoreSmem& s) { B::tma_store(out.map, s.tile[0], {{0, 0}}); });
  ASSERT_EQ(outcome(multi), "tma.multi-lane") << multi.report();
  EXPECT_TRUE(contains(multi.violations[0].message, "TMA store issued by 32 lanes")) << multi.report();
  // A source not aligned to 128 bytes.
  auto misaligned =
      store([&](StoreSmem& s) { B::elect_one([&] { B::tma_store(out.map, s.tile[0] + 16, {{0, 0}}); }); });
  ASSERT_EQ(outcome(misaligned), "tma.invalid") << misaligned.report();
  EXPECT_TRUE(contains(misaligned.violations[0].message, "the shared-memory source 16 must be 128-byte aligned"))
      << misaligned.report();
  // A box running past the end of shared memory.
  auto past = store([&](StoreSmem& s) { B::elect_one([&] { B::tma_store(out.map, s.tile[1] + 128, {{0, 0}}); }); });
  ASSERT_EQ(outcome(past), "tma.invalid") << past.report();
  EXPECT_TRUE(contains(past.violations[0].message, "does not fit in shared memory")) << past.report();
  // Not shared memory at all.
  static std::uint8_t heap[1024];
  auto outside = store([&](StoreSmem&) { B::elect_one([&] { B::tma_store(out.map, heap, {{0, 0}}); }); });
  ASSERT_EQ(outcome(outside), "tma.invalid") << outside.report();
  EXPECT_TRUE(contains(outside.violations[0].message, "not in this CTA's shared memory")) << outside.report();
  // A rank-3 instruction with a rank-2 map.
  auto rank = store([&](StoreSmem& s) { B::elect_one([&] { B::tma_store<3>(out.map, s.tile[0], {{0, 0, 0}}); }); });
  ASSERT_EQ(outcome(rank), "tma.invalid") << rank.report();
  EXPECT_TRUE(contains(rank.violations[0].message, "rank-3")) << rank.report();
  // An invalid map.
  TensorMap bad = out.map;
  bad.box[0] = 300;
  auto map = store([&](StoreSmem& s) { B::elect_one([&] { B::tma_store(bad, s.tile[0], {{0, 0}}); }); });
  EXPECT_EQ(outcome(map), "tma.invalid") << map.report();
  EXPECT_TRUE(std::all_of(out.g.begin(), out.g.end(), [](std::uint8_t b) { return b == kUntouched; }));
}

// ------------------------------------------------------------ what the H100 showed (docs/silicon.md)

// Box origins the TMA unit rejects on the H100 ("an illegal instruction"):
// an innermost coordinate that is not a multiple of 16 bytes (loads and
// stores), and a negative coordinate of a store. Each fires before anything
// is written; the accepted origins beside them are quiet.
TEST(emu_TmaStore, StoreOriginRules) {
  struct Case {
    TmaCoords at;
    const char* rule;  // nullptr: accepted
  };
  const Case cases[] = {
      {{{4, 0}}, "tma.coord-misaligned"},       // 4 bytes into the row
      {{{-16, 0}}, "tma.store-negative-coord"},  // aligned, but before the row's start
      {{{0, -8}}, "tma.store-negative-coord"},   // before the first row
      {{{16, 0}}, nullptr},
      {{{48, 56}}, nullptr},                      // past the right and bottom edges
  };
  for (const Case& k : cases) {
    Global out;
    auto r = store_tile(out.map, k.at);
    if (k.rule == nullptr) {
      EXPECT_EQ(r.status, emu::Status::ok) << k.at.c[0] << "," << k.at.c[1] << "\n" << r.report();
      continue;
    }
    ASSERT_EQ(outcome(r), k.rule) << k.at.c[0] << "," << k.at.c[1] << "\n" << r.report();
    EXPECT_TRUE(contains(r.violations[0].message, "the H100 traps")) << r.report();
    EXPECT_TRUE(std::all_of(out.g.begin(), out.g.end(), [](std::uint8_t b) { return b == kUntouched; }));
  }
}

TEST(emu_TmaStore, LoadOriginRules) {
  // A load may start before the tensor (it reads zeros there), but not
  // between the 16-byte chunks of a row.
  struct LoadSmem {
    alignas(1024) std::uint8_t tile[64 * 16];
    SharedMemBarrier full;
  };
  struct Case {
    TmaCoords at;
    const char* rule;  // nullptr: accepted
  };
  const Case cases[] = {{{{8, 0}}, "tma.coord-misaligned"}, {{{-16, -8}}, nullptr}, {{{16, 0}}, nullptr}};
  for (const Case& k : cases) {
    Global in;
    auto r = wspipe::test::run_kernel(
        1,
        [&] {
          auto& s = B::shared_storage<LoadSmem>();
          B::elect_one([&] {
            B::init(s.full, 1);
            B::arrive_expect_tx(s.full, sizeof s.tile);
            B::tma_load(in.map, s.tile, s.full, k.at);
          });
          B::wait(s.full, 0);
        },
        {}, sizeof(LoadSmem));
    if (k.rule == nullptr) {
      EXPECT_EQ(r.status, emu::Status::ok) << k.at.c[0] << "," << k.at.c[1] << "\n" << r.report();
      continue;
    }
    ASSERT_EQ(outcome(r), k.rule) << r.report();
    EXPECT_TRUE(contains(r.violations[0].message, "TMA load at innermost coordinate 8 (8 bytes)")) << r.report();
  }
}

// A row that is not a multiple of 16 bytes: the store writes the chunk that
// starts inside the row whole, so the bytes up to the next 16-byte boundary
// (here inside the row's stride) take the box's values, as on the H100.
TEST(emu_TmaStore, WritesTheLastChunkOfARowWhole) {
  Global out;
  TensorMap map = out.map;
  map.dims[0] = 60;  // 60 bytes of each 64-byte row belong to the tensor
  auto r = store_tile(map, TmaCoords{{0, 8}});
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  for (std::uint32_t row = 0; row < 64; ++row)
    for (std::uint32_t col = 0; col < 64; ++col) {
      const bool in_box = row >= 8 && row < 24;
      const std::uint8_t want = in_box ? pattern((row - 8) * 64 + col, 0) : kUntouched;
      ASSERT_EQ(out.g[row * 64 + col], want) << "row " << row << " col " << col;
    }
}

}  // namespace
