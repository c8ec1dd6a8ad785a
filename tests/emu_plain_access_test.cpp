// Plain C++ accesses to shared memory, seen through the compiler's access
// instrumentation (backends/emu/runtime/plain_access.cpp): a kernel that
// reads a slot after freeing it, with no data check anywhere, is reported
// as race.smem at its lines; the fixed kernel is clean; the trace holds the
// accesses the report names; atomics through the hooks are performed.
//
// This file is built twice (tests/CMakeLists.txt): emu_plain_access_test,
// instrumented as every target that links wspipe::emu, and
// emu_plain_access_off_test, with the target property
// WSPIPE_INSTRUMENT_ACCESSES OFF, where the same kernel's plain accesses are
// not seen.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>

#include "backends/emu/emu.hpp"
#include "core/smem.hpp"
#include "examples/scenarios.hpp"
#include "tests/emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::SharedMemBarrier;
using wspipe::SmemView;
using wspipe::test::B;
using wspipe::test::contains;

// One slot handed from warp 0 to warp 1 `items` times. Warp 0 writes it
// through SmemView, warp 1 reads it with a plain load and checks nothing.
// early_release: warp 1 frees the slot before reading it.
struct Slot {
  SharedMemBarrier full, empty;
  std::uint32_t data[4];
};
// The slot's barriers, initialised by warp 0 and seen by every warp.
template <class S>
void init_handoff(S& s) {
  if (B::warp_idx() == 0) {
    wspipe::test::init_bar(s.full, 1, "full");
    wspipe::test::init_bar(s.empty, 1, "empty");
    B::fence_init();
  }
  B::cluster_sync();
}

void handoff(std::uint32_t items, bool early_release) {
  auto& s = B::shared_storage<Slot>();
  const std::uint32_t warp = B::warp_idx();
  init_handoff(s);
  const SmemView<B, std::uint32_t> view(s.data, 4);
  for (std::uint32_t i = 0; i < items; ++i) {
    if (warp == 0) {
      B::wait(s.empty, (i & 1) ^ 1);
      view.store(0, i);  // the producer's store
      wspipe::test::elected_arrive(s.full);
    } else {
      B::wait(s.full, i & 1);
      [[maybe_unused]] volatile std::uint32_t taken = 0;
      if (early_release) wspipe::test::elected_arrive(s.empty);
      taken = s.data[0];  // the consumer's plain load
      if (!early_release) wspipe::test::elected_arrive(s.empty);
    }
  }
}

emu::RunResult run_handoff(bool early_release, std::uint64_t seed) {
  return wspipe::test::run_kernel(
      2, [=] { handoff(4, early_release); }, wspipe::test::with_strategy(emu::StrategyKind::random, seed));
}

#if defined(WSPIPE_INSTRUMENTED_ACCESSES)

// The line of the wspipe source file `file` (relative to the tree) that
// holds `text`, as reports write it: "file:N".
std::string line_of(const std::string& file, const std::string& text) {
  std::ifstream in(std::string(WSPIPE_SOURCE_DIR) + "/" + file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (contains(line, text)) return file + ":" + std::to_string(n);
  return "(" + text + " is not in " + file + ")";
}

TEST(PlainAccess, EarlyReleaseIsARaceAtBothLines) {
  const std::string store = line_of("tests/emu_plain_access_test.cpp", "// the producer's store");
  const std::string load = line_of("tests/emu_plain_access_test.cpp", "// the consumer's plain load");
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const emu::RunResult r = run_handoff(true, seed);
    ASSERT_EQ(emu::outcome(r), "race.smem") << r.report();
    const emu::Violation& v = r.violations[0];
    const std::string where = v.file + ":" + std::to_string(v.line);
    // One side is the violation's line, the other the earlier access's.
    EXPECT_TRUE(wspipe::test::ends_with(where, load) || wspipe::test::ends_with(where, store)) << r.report();
    EXPECT_TRUE(contains(where + " " + v.other, load)) << r.report();
    EXPECT_TRUE(contains(where + " " + v.other, store)) << r.report();
    EXPECT_FALSE(contains(r.report(), "smem.hpp")) << "an SmemView access is seen once, at the kernel's line\n"
                                                   << r.report();
  }
}

TEST(PlainAccess, ReleaseAfterTheReadIsClean) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const emu::RunResult r = run_handoff(false, seed);
    EXPECT_EQ(r.status, emu::Status::ok) << r.report();
  }
}

// ring/early-release (examples/ring.hpp, compiled into the catalogue): the
// consumer frees its slot, reads it, and checks nothing. Found by every
// strategy, at the read and the producer's refill.
TEST(PlainAccess, RingEarlyReleaseIsFoundByEveryStrategy) {
  const emu::Scenario& sc = *wspipe::examples::find_scenario("ring");
  emu::OptionValues values;
  for (const auto& o : sc.options) values[o.name] = o.def;
  const emu::KernelFactory make = [&] { return sc.prepare("early-release", values); };
  const std::string read = line_of("examples/ring.hpp", "// the bug: freed above");
  const std::string refill = line_of("examples/ring.hpp", "smem.slot[slot.index()][k] = ring_word(i, k);");
  for (const char* portfolio : {"random", "pct:3", "exhaustive"}) {
    emu::ExploreOptions o = wspipe::test::fixed_runs(50);
    std::string error;
    o.portfolio = emu::parse_portfolio(portfolio, &error).value();
    const emu::ExploreResult r = emu::explore(make, o);
    ASSERT_FALSE(r.ok()) << portfolio;
    EXPECT_EQ(r.failure->outcome, "race.smem") << r.report();
    EXPECT_TRUE(contains(r.report(), read)) << r.report();
    EXPECT_TRUE(contains(r.report(), refill)) << r.report();
  }
  const emu::KernelFactory fixed = [&] { return sc.prepare("", values); };
  EXPECT_TRUE(emu::explore(fixed, wspipe::test::fixed_runs(200)).ok());
}

// The replayed failure's trace holds both accesses of the report: the
// violation's step and the earlier access's step are each an event of the
// accessing warp at the access's line.
TEST(PlainAccess, TheTraceHoldsTheAccessesTheReportNames) {
  const emu::RunResult r = run_handoff(true, 3);
  ASSERT_EQ(emu::outcome(r), "race.smem") << r.report();
  emu::RunOptions o;
  o.trace = true;
  const emu::RunResult t = wspipe::test::run_kernel(
      2, [] { handoff(4, true); }, [&] {
        emu::RunOptions p = o;
        p.strategy.kind = emu::StrategyKind::replay;
        p.strategy.replay = r.schedule;
        return p;
      }());
  ASSERT_EQ(emu::outcome(t), "race.smem") << t.report();
  const emu::Violation& v = t.violations[0];
  std::size_t accesses = 0;
  bool at_violation = false, at_other = false;
  for (const emu::Event& e : t.trace.events) {
    if (e.kind != emu::EventKind::smem_load && e.kind != emu::EventKind::smem_store) continue;
    ++accesses;
    const std::string where = t.trace.location(e);
    if (e.step == v.step && wspipe::test::ends_with(v.file + ":" + std::to_string(v.line), where)) at_violation = true;
    if (contains(v.other, "at step " + std::to_string(e.step) + ", " + where)) at_other = true;
  }
  EXPECT_TRUE(at_violation) << t.report();
  EXPECT_TRUE(at_other) << t.report();
  // Bounded: one event per warp, line and step (4 items: at most 4 stores and 4 loads).
  EXPECT_LE(accesses, 8u);
}

// A warp's plain accesses since its last operation are checked as ranges,
// one per line and kind (a loop over a tile), before its next operation or
// its exit. Warp 1 writes one word of a tile with no barrier at all and
// exits; warp 0 reads the whole tile in a loop and exits (no operation
// after either). In every order the word is a race, and the report names
// that word, not the range around it. `arrays`: the loop reads that many
// tiles side by side, one line, more ranges than are kept pending at once.
struct Tiles {
  std::uint32_t t[5][64];
};
constexpr std::uint32_t kRacingWord = 37;

emu::RunResult run_tile_race(std::uint32_t arrays, std::uint64_t seed, bool racing_write) {
  return wspipe::test::run_kernel(
      2,
      [=] {
        auto& s = B::shared_storage<Tiles>();
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          [[maybe_unused]] volatile std::uint32_t sum = 0;
          std::uint32_t acc = 0;
          for (std::uint32_t i = 0; i < 64; ++i)
            for (std::uint32_t a = 0; a < arrays; ++a) acc += s.t[a][i];  // the tile loop
          sum = acc;
        } else if (racing_write) {
          s.t[arrays - 1][kRacingWord] = 1;  // the racing store
        }
      },
      wspipe::test::with_strategy(emu::StrategyKind::random, seed), sizeof(Tiles));
}

TEST(PlainAccess, ATileLoopIsCheckedAsRangesAndTheRacingWordIsNamed) {
  const std::string loop = line_of("tests/emu_plain_access_test.cpp", "// the tile loop");
  const std::string store = line_of("tests/emu_plain_access_test.cpp", "// the racing store");
  for (const std::uint32_t arrays : {1u, 5u}) {
    const std::uint32_t at = static_cast<std::uint32_t>(offsetof(Tiles, t)) +
                             ((arrays - 1) * 64 + kRacingWord) * static_cast<std::uint32_t>(sizeof(std::uint32_t));
    char word[48];
    std::snprintf(word, sizeof word, "shared memory [0x%x, 0x%x)", at, at + 4);
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      const emu::RunResult r = run_tile_race(arrays, seed, true);
      ASSERT_EQ(emu::outcome(r), "race.smem") << arrays << " arrays, seed " << seed << "\n" << r.report();
      const emu::Violation& v = r.violations[0];
      EXPECT_TRUE(contains(v.object, word)) << word << "\n" << r.report();
      const std::string both = v.file + ":" + std::to_string(v.line) + " " + v.other;
      EXPECT_TRUE(contains(both, loop)) << r.report();
      EXPECT_TRUE(contains(both, store)) << r.report();
      // Without the store the same loop is clean.
      const emu::RunResult clean = run_tile_race(arrays, seed, false);
      EXPECT_EQ(clean.status, emu::Status::ok) << clean.report();
    }
  }
}

// The access records of a long run are collected as they grow (only those
// a shadow still names are kept, renumbered). Warp 2 waits for the first
// item, reads `x` and exits; warps 0 and 1 hand 40,000 items over (more records than are
// kept before a collection, several times over); then warp 0 stores `x`,
// unordered with warp 2's read. The report names both accesses at their
// lines, and warp 2's at its early step.
TEST(PlainAccess, ARaceAfterTheRecordsWereCollectedNamesBothAccesses) {
  constexpr std::uint32_t kItems = 40000;
  struct LongSlot {
    SharedMemBarrier full, empty;
    std::uint32_t data;
    std::uint32_t x;
  };
  // (The markers are split here so that this line does not hold them.)
  const std::string store = line_of("tests/emu_plain_access_test.cpp", std::string("// the late") + " store");
  const std::string load = line_of("tests/emu_plain_access_test.cpp", std::string("// the early") + " load");
  const emu::RunResult r = wspipe::test::run_kernel(
      3,
      [] {
        auto& s = B::shared_storage<LongSlot>();
        const std::uint32_t warp = B::warp_idx();
        init_handoff(s);
        if (warp == 2) {
          B::wait(s.full, 0);  // after the first item: its records die, this one's is renumbered
          [[maybe_unused]] volatile std::uint32_t seen = s.x;  // the early load
          return;
        }
        for (std::uint32_t i = 0; i < kItems; ++i) {
          if (warp == 0) {
            B::wait(s.empty, (i & 1) ^ 1);
            s.data = i;
            wspipe::test::elected_arrive(s.full);
          } else {
            B::wait(s.full, i & 1);
            [[maybe_unused]] volatile std::uint32_t taken = s.data;
            wspipe::test::elected_arrive(s.empty);
          }
        }
        if (warp == 0) s.x = 1;  // the late store
      },
      wspipe::test::with_strategy(emu::StrategyKind::round_robin), sizeof(LongSlot));
  ASSERT_EQ(emu::outcome(r), "race.smem") << r.report();
  const emu::Violation& v = r.violations[0];
  EXPECT_TRUE(wspipe::test::ends_with(v.file + ":" + std::to_string(v.line), store)) << r.report();
  EXPECT_TRUE(contains(v.other, "cta0/w2: ordinary load at step ")) << r.report();
  EXPECT_TRUE(contains(v.other, load)) << r.report();
  const auto at = v.other.find("at step ");
  ASSERT_NE(at, std::string::npos) << v.other;
  EXPECT_LT(std::stoull(v.other.substr(at + 8)), 20u) << r.report();
  EXPECT_GT(v.step, std::uint64_t{4} * kItems) << r.report();
}

#else  // the same kernel, compiled without the instrumentation

TEST(PlainAccess, UninstrumentedPlainAccessesAreNotSeen) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const emu::RunResult r = run_handoff(true, seed);
    EXPECT_EQ(r.status, emu::Status::ok) << r.report();
  }
}

#endif

// The atomics are performed through the hooks (instrumented code calls
// __tsan_atomic*), on the main thread and inside warps, on shared memory.
TEST(PlainAccess, AtomicsArePerformed) {
  std::atomic<std::uint32_t> a{1};
  EXPECT_EQ(a.fetch_add(2), 1u);
  std::uint32_t expected = 3;
  EXPECT_TRUE(a.compare_exchange_strong(expected, 10));
  EXPECT_EQ(a.exchange(7), 10u);
  a.store(a.load() | 8);
  EXPECT_EQ(a.load(), 15u);
  std::atomic<std::uint64_t> b{0};
  b.fetch_sub(1);
  EXPECT_EQ(b.load(), ~std::uint64_t{0});

  struct Counter {
    std::uint32_t n;
  };
  std::uint32_t seen = 0;
  const emu::RunResult r = wspipe::test::run_kernel(2, [&] {
    auto& c = B::shared_storage<Counter>();
    B::cluster_sync();
    std::atomic_ref<std::uint32_t> n(c.n);
    for (int i = 0; i < 5; ++i) n.fetch_add(1);
    B::cluster_sync();
    if (B::warp_idx() == 0) seen = n.load();
  });
  EXPECT_EQ(r.status, emu::Status::ok) << r.report();
  EXPECT_EQ(seen, 10u);
}

}  // namespace
