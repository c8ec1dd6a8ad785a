// The race checker's block-compressed shadows (ShadowTable, runtime/clock.hpp) against
// the plain model, one Shadow per location: any sequence of accesses by any
// agents, over any ranges of locations, finds the same
// first conflict (the location and the earlier access) and leaves every
// location in the same state.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <vector>

#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/world.hpp"

namespace {

using namespace wspipe::emu::detail;

constexpr std::uint32_t kComps = 4;

// The first conflict of one access: the location and the access it
// conflicts with.
struct Conflict {
  std::uint32_t at;
  Access other;
  bool operator==(const Conflict&) const = default;
};

// One access to `at` (in that order) by `comp` with clock `c`: per location,
// as the World's callbacks do it.
std::optional<Conflict> plain_access(std::vector<Shadow>& shadows, ReadSets& sets, const std::vector<std::uint32_t>& at,
                                     bool write, const Clock& c, const Access& a) {
  for (std::uint32_t i : at) {
    Shadow& s = shadows[i];
    if (const Access* other = write ? shadow_write(s, sets, c, a) : shadow_read(s, sets, c, a))
      return Conflict{i, *other};
  }
  return std::nullopt;
}

// A location's state: its write and its reads (the read epoch, or the read
// set's reads in their order), whatever handles name them.
struct State {
  Access write;
  std::vector<Access> reads;
  bool write_generic;
  bool operator==(const State&) const = default;
};
State state(const Shadow& s, const ReadSets& sets) {
  State st{.write = s.write, .reads = {}, .write_generic = s.write_generic};
  if (s.readers != 0) {
    const auto r = sets.reads(s.readers);
    st.reads.assign(r.begin(), r.end());
  } else if (s.read.time != 0) {
    st.reads.push_back(s.read);
  }
  return st;
}

template <std::uint32_t kBlock>
std::optional<Conflict> table_access(ShadowTable<kBlock>& table, const std::vector<std::uint32_t>& at, bool write,
                                     const Clock& c, const Access& a) {
  std::optional<Conflict> found;
  ReadSets& sets = table.read_sets();
  auto visit = [&](Shadow& s, std::uint32_t i) {
    if (const Access* other = write ? shadow_write(s, sets, c, a) : shadow_read(s, sets, c, a)) {
      found = Conflict{i, *other};
      return false;
    }
    return true;
  };
  const bool ok = table.access_range(at.front(), at.back() + 1, visit);
  EXPECT_EQ(ok, !found.has_value());
  return found;
}

template <std::uint32_t kBlock>
void agrees_with_plain_model(std::uint32_t size) {
  ShadowTable<kBlock> table;
  table.reset(size);
  std::vector<Shadow> plain(size);
  ReadSets plain_sets;
  std::vector<Clock> clocks(kComps, Clock(kComps, 0));
  for (std::uint32_t k = 0; k < kComps; ++k) clocks[k][k] = 1;

  const auto steps = *rc::gen::inRange(1, 60);
  for (int step = 0; step < steps; ++step) {
    const auto comp = *rc::gen::inRange<std::uint32_t>(0, kComps);
    // Synchronisation: sometimes this agent first acquires another's clock.
    if (*rc::gen::inRange(0, 3) == 0) {
      const auto from = *rc::gen::inRange<std::uint32_t>(0, kComps);
      join(clocks[comp], clocks[from]);
    }
    const bool write = *rc::gen::arbitrary<bool>();
    // A range, biased to block boundaries, as tiles are.
    const auto aligned = *rc::gen::arbitrary<bool>();
    auto first = *rc::gen::inRange<std::uint32_t>(0, size);
    auto last = *rc::gen::inRange<std::uint32_t>(first + 1, size + 1);
    if (aligned) {
      first = first / kBlock * kBlock;
      last = std::min(size, (last + kBlock - 1) / kBlock * kBlock);
    }
    std::vector<std::uint32_t> at(last - first);
    std::iota(at.begin(), at.end(), first);
    const Access a{.comp = comp, .slot = comp, .time = clocks[comp][comp], .info = static_cast<std::uint32_t>(step)};
    const auto want = plain_access(plain, plain_sets, at, write, clocks[comp], a);
    const auto got = table_access(table, at, write, clocks[comp], a);
    RC_ASSERT(got == want);
    if (want) return;  // the run stops at its first conflict
    for (std::uint32_t i = 0; i < size; ++i)
      RC_ASSERT(state(table.at(i), table.read_sets()) == state(plain[i], plain_sets));
    ++clocks[comp][comp];  // the agent's next access is a new epoch
  }
}

RC_GTEST_PROP(emu_ShadowTable, AgreesWithOneShadowPerLocationBlocksOf4, ()) { agrees_with_plain_model<4>(48); }
RC_GTEST_PROP(emu_ShadowTable, AgreesWithOneShadowPerLocationBlocksOf8, ()) { agrees_with_plain_model<8>(96); }
RC_GTEST_PROP(emu_ShadowTable, AgreesWithOneShadowPerLocationBlocksOf32, ()) { agrees_with_plain_model<32>(256); }

// The compression is what makes it cheap: whole-block accesses keep a
// block as one shadow, so the same first conflict is found after one
// check per block.
TEST(emu_ShadowTable, WholeBlockAccessesStayUniform) {
  ShadowTable<4> table;
  table.reset(64);
  Clock engine{1, 0}, warp{0, 1};
  int visits = 0;
  ReadSets& sets = table.read_sets();
  auto count = [&](const Clock& c, const Access& a, bool write) {
    return [&visits, &sets, &c, a, write](Shadow& s, std::uint32_t) {
      ++visits;
      return (write ? shadow_write(s, sets, c, a) : shadow_read(s, sets, c, a)) == nullptr;
    };
  };
  ASSERT_TRUE(table.access_range(0, 64, count(engine, {.comp = 0, .slot = 0, .time = 1}, true)));  // a tile written
  EXPECT_EQ(visits, 16);
  visits = 0;
  ASSERT_TRUE(table.access_range(8, 10, count(engine, {.comp = 0, .slot = 0, .time = 2}, false)));  // part of a block read
  EXPECT_EQ(visits, 2);
  visits = 0;
  // The warp, unordered with the engine, writes the whole tile: the first
  // conflict is at location 0 (the engine's write), found at the first visit.
  std::uint32_t where = 99;
  EXPECT_FALSE(table.access_range(0, 64, [&](Shadow& s, std::uint32_t i) {
    ++visits;
    where = i;
    return shadow_write(s, sets, warp, {.comp = 1, .slot = 1, .time = 1}) == nullptr;
  }));
  EXPECT_EQ(visits, 1);
  EXPECT_EQ(where, 0u);
}

// Every reader is kept: any number of concurrent reads of a location, and a
// write conflicts with exactly those not ordered before it (the oldest of
// them first). A read ordered after earlier ones replaces them, and reads
// totally ordered again take no read set.
TEST(emu_ShadowTable, EveryConcurrentReaderIsKept) {
  constexpr std::uint32_t kAgents = 6;
  ReadSets sets;
  Shadow s;
  std::vector<Clock> clocks(kAgents, Clock(kAgents, 0));
  for (std::uint32_t k = 0; k < kAgents; ++k) clocks[k][k] = 1;
  // `from` releases into `to` (and goes on in a new epoch).
  auto sync = [&](std::uint32_t to, std::uint32_t from) {
    join(clocks[to], clocks[from]);
    ++clocks[from][from];
  };
  std::uint32_t info = 0;
  auto read = [&](std::uint32_t k) {
    return shadow_read(s, sets, clocks[k], {.comp = k, .slot = k, .time = clocks[k][k], .info = info++});
  };
  auto write = [&](std::uint32_t k) {
    return shadow_write(s, sets, clocks[k], {.comp = k, .slot = k, .time = clocks[k][k], .info = info++});
  };
  for (std::uint32_t k = 0; k < 5; ++k) ASSERT_EQ(read(k), nullptr);
  ASSERT_NE(s.readers, 0u);
  EXPECT_EQ(sets.reads(s.readers).size(), 5u);
  // Agent 5 has acquired agents 1-4 after their reads: its write races
  // with agent 0's read alone.
  for (std::uint32_t k = 1; k < 5; ++k) sync(5, k);
  const Access* other = write(5);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->comp, 0u);
  EXPECT_EQ(other->info, 0u);
  // Ordered after agent 0 too, it writes; reads ordered one after the
  // other are one epoch.
  sync(5, 0);
  ASSERT_EQ(write(5), nullptr);
  EXPECT_EQ(s.readers, 0u);
  EXPECT_EQ(s.write.comp, 5u);
  // Agent `k`, after acquiring each of `after`, reads: no race; whether
  // the location then holds one read epoch (agent k's) or a read set.
  auto read_after = [&](std::uint32_t k, std::initializer_list<std::uint32_t> after) {
    for (const std::uint32_t from : after) sync(k, from);
    EXPECT_EQ(read(k), nullptr);
    return s.readers == 0 && s.read.comp == k;
  };
  EXPECT_TRUE(read_after(2, {5}));
  EXPECT_TRUE(read_after(3, {2}));
  // A concurrent read makes a set again; a read ordered after both ends it.
  EXPECT_FALSE(read_after(4, {5}));
  EXPECT_TRUE(read_after(1, {3, 4}));
}

// A block split while its reads are a set shares that set among its
// locations; a read of one location changes its own copy only.
TEST(emu_ShadowTable, ASplitBlockSharesItsReadSetUntilOneLocationChanges) {
  ShadowTable<4> table;
  table.reset(8);
  ReadSets& sets = table.read_sets();
  std::vector<Clock> clocks(3, Clock(3, 0));
  for (std::uint32_t k = 0; k < 3; ++k) clocks[k][k] = 1;
  auto read = [&](std::uint32_t k, std::uint32_t first, std::uint32_t last) {
    const Access a{.comp = k, .slot = k, .time = 1, .info = k};
    return table.access_range(first, last, [&](Shadow& s, std::uint32_t) {
      return shadow_read(s, sets, clocks[k], a) == nullptr;
    });
  };
  ASSERT_TRUE(read(0, 0, 4));
  ASSERT_TRUE(read(1, 0, 4));  // the whole block: one set
  ASSERT_TRUE(read(2, 1, 2));  // location 1 only
  EXPECT_EQ(sets.reads(table.at(0).readers).size(), 2u);
  EXPECT_EQ(sets.reads(table.at(1).readers).size(), 3u);
  EXPECT_EQ(sets.reads(table.at(3).readers).size(), 2u);
  // A write to the whole block by an agent ordered after agents 0 and 1
  // finds agent 2's read at location 1.
  join(clocks[0], clocks[1]);
  std::uint32_t where = 99;
  EXPECT_FALSE(table.access_range(0, 4, [&](Shadow& s, std::uint32_t i) {
    where = i;
    return shadow_write(s, sets, clocks[0], {.comp = 0, .slot = 0, .time = 1}) == nullptr;
  }));
  EXPECT_EQ(where, 1u);
}

// The TMEM shadow's tiling (runtime/tmem.hpp): every cell has its own index, which
// tmem_shadow_lane/col invert.
TEST(emu_TmemShadowIndex, IsABijectionThatItsInverseUndoes) {
  std::vector<bool> seen(std::size_t{wspipe::kTmemLanes} * wspipe::kTmemColumns);
  for (std::uint32_t lane = 0; lane < wspipe::kTmemLanes; ++lane)
    for (std::uint32_t col = 0; col < wspipe::kTmemColumns; ++col) {
      const std::uint32_t i = tmem_shadow_index(lane, col);
      ASSERT_LT(i, seen.size());
      ASSERT_FALSE(seen[i]) << lane << ", " << col;
      seen[i] = true;
      ASSERT_EQ(tmem_shadow_lane(i), lane);
      ASSERT_EQ(tmem_shadow_col(i), col);
    }
}

// A rectangle's index ranges are ascending and disjoint, hold exactly its
// cells, and are one range per tile it covers whole (one visit of a uniform
// block) and a range within one lane of a tile otherwise.
RC_GTEST_PROP(emu_TmemShadowIndex, RangesAreExactlyTheRectangle, ()) {
  const auto lane0 = *rc::gen::inRange<std::uint32_t>(0, wspipe::kTmemLanes);
  const auto lanes = *rc::gen::inRange<std::uint32_t>(1, wspipe::kTmemLanes - lane0 + 1);
  const auto col0 = *rc::gen::inRange<std::uint32_t>(0, wspipe::kTmemColumns);
  const auto cols = *rc::gen::inRange<std::uint32_t>(1, wspipe::kTmemColumns - col0 + 1);
  std::vector<std::uint32_t> got;
  std::uint32_t whole = 0;
  const bool all = for_each_tmem_shadow_range(lane0, lanes, col0, cols, [&](std::uint32_t first, std::uint32_t last) {
    RC_ASSERT(first < last);
    const bool ascending = got.empty() || first > got.back();  // (RC_ASSERT would not short-circuit ||)
    RC_ASSERT(ascending);
    if (last - first == kTmemShadowBlock) {
      RC_ASSERT(first % kTmemShadowBlock == 0);
      ++whole;
    } else {
      RC_ASSERT(last - first <= kTmemShadowCols);
      RC_ASSERT(tmem_shadow_lane(first) == tmem_shadow_lane(last - 1));
    }
    for (std::uint32_t i = first; i < last; ++i) got.push_back(i);
    return true;
  });
  RC_ASSERT(all);
  std::vector<std::uint32_t> want;
  std::uint32_t tiles = 0;
  for (std::uint32_t lane = lane0; lane < lane0 + lanes; ++lane)
    for (std::uint32_t col = col0; col < col0 + cols; ++col) {
      want.push_back(tmem_shadow_index(lane, col));
      if (lane % kTmemShadowLanes == 0 && col % kTmemShadowCols == 0 && lane + kTmemShadowLanes <= lane0 + lanes &&
          col + kTmemShadowCols <= col0 + cols && lane >= lane0 && col >= col0)
        ++tiles;
    }
  std::sort(want.begin(), want.end());
  RC_ASSERT(got == want);
  RC_ASSERT(whole == tiles);
}

}  // namespace

// The shadow tables a thread keeps for its next runs (runtime/buffers.cpp):
// one budget of 16 MiB for all of them, not a limit per table. A single
// large table (a CTA whose accesses split most blocks: persistent-gemm's
// grows past 2 MiB) is kept whole and handed back with its storage, which
// a limit of 1 MiB per table freed after every run; tables that would
// pass the budget together are freed.
TEST(emu_KeptBuffers, ALargeTableIsKeptAndTheTablesStayWithinTheBudget) {
  constexpr std::size_t kBudget = std::size_t{16} << 20;
  auto drain = [] {
    for (int i = 0; i < 8; ++i) {
      (void)take_smem_shadow();
      (void)take_tmem_shadow();
    }
  };
  drain();  // (also makes the thread's spares, which keep_cta_buffers needs)
  ASSERT_EQ(kept_table_bytes(), 0u);
  auto large_cta = [] {
    Cta c;
    c.smem_shadow.reset(std::uint32_t{1} << 21);  // 2 Mi locations: 64 Ki blocks
    return c;
  };
  Cta c = large_cta();
  const std::size_t bytes = c.smem_shadow.storage_bytes();
  ASSERT_GT(bytes, std::size_t{1} << 20);
  keep_cta_buffers(c);
  EXPECT_EQ(kept_table_bytes(), bytes);
  const ShadowTable<kSmemShadowBlock> back = take_smem_shadow();
  EXPECT_TRUE(back.empty());
  EXPECT_EQ(back.storage_bytes(), bytes);  // the same storage
  EXPECT_EQ(kept_table_bytes(), 0u);
  std::size_t kept = 0;
  for (int i = 0; i < 8; ++i) {
    Cta more = large_cta();
    keep_cta_buffers(more);
    kept = kept_table_bytes();
    EXPECT_LE(kept, kBudget);
  }
  EXPECT_EQ(kept, kBudget / bytes * bytes);  // as many as fit
  drain();
  EXPECT_EQ(kept_table_bytes(), 0u);
}
