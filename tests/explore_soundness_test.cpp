// The exhaustive search's partial-order reduction, tested differentially
// (docs/exploration.md, "Soundness, tested
// differentially"): thousands of tiny random kernels
// (fuzz/soundness_program.hpp), each searched without the reduction and
// with it, with the race checker on and off; the reduced search must reach
// exactly the final states the unreduced one reaches. Then the check's own
// teeth: reductions broken on purpose are caught.
//
// WSPIPE_SOUNDNESS_PROGRAMS sets the number of programs (default: 2000, or
// WSPIPE_SOUNDNESS_CI_PROGRAMS where the build sets it: the sanitizer
// builds, about 30 times slower), WSPIPE_SOUNDNESS_FIRST the first seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/soundness_program.hpp"

#ifndef WSPIPE_SOUNDNESS_CI_PROGRAMS
#define WSPIPE_SOUNDNESS_CI_PROGRAMS 2000
#endif

namespace {

namespace emu = wspipe::emu;
namespace sd = wspipe::fuzz::soundness;
using sd::OpKind;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// A search's budget of runs: a program whose reference search passes it is
// counted as too large (the unbounded unreduced search of a four-warp
// program with spins can run to millions).
constexpr std::uint64_t kMaxRuns = 1000;

// The sweeps of the tests of the check itself.
constexpr std::uint64_t kTeethPrograms = WSPIPE_SOUNDNESS_CI_PROGRAMS >= 1000 ? 100 : 20;

struct Sweep {
  std::uint64_t programs = 0;
  std::vector<sd::Tally> tallies;        // per comparison
  std::vector<std::string> differences;  // each with its seed
  double seconds = 0;
};

// The programs of the sweeps, by seed.
using Programs = std::function<sd::Program(std::uint64_t seed)>;
sd::Program one_cta(std::uint64_t seed) { return sd::seeded_program(seed, 1); }
sd::Program cluster_of_two(std::uint64_t seed) { return sd::seeded_program(seed, 2); }

// The comparisons over programs [first, first + count), under each of the
// option sets; it stops after `stop_after` differences.
Sweep sweep(std::uint64_t first, std::uint64_t count, const std::vector<emu::RunOptions>& options,
            const std::vector<sd::Comparison>& comparisons, std::size_t stop_after = ~std::size_t{0},
            const Programs& programs = one_cta, std::uint64_t max_runs = kMaxRuns) {
  Sweep s;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t seed = first; seed < first + count && s.differences.size() < stop_after; ++seed) {
    const sd::Program p = programs(seed);
    ++s.programs;
    for (const emu::RunOptions& o : options)
      for (std::string& d : sd::check_program(p, o, comparisons, max_runs, s.tallies))
        s.differences.push_back("seed " + std::to_string(seed) + "\n" + d);
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

// One line per comparison: the reduction factor at each bound.
void print_summary(const char* what, const Sweep& s, const std::vector<sd::Comparison>& comparisons) {
  std::printf("[ soundness ] %s: %llu programs in %.1f s\n", what, static_cast<unsigned long long>(s.programs),
              s.seconds);
  for (std::size_t i = 0; i < s.tallies.size(); ++i) {
    const sd::Tally& t = s.tallies[i];
    const std::uint64_t reduced = t.tested_runs + t.tested_pruned;
    std::printf(
        "[ soundness ]   %-18s %s%6llu comparisons (%llu too large), %6llu states; %s %8llu runs, reduced %7llu "
        "(+%llu pruned): %.1fx; failing, a failure found (not every one): %llu\n",
        (comparisons[i].tested.name + ":").c_str(),
        comparisons[i].reference.footprints || comparisons[i].at_least
            ? ("against " + comparisons[i].reference.name + ": ").c_str()
            : "",
        static_cast<unsigned long long>(t.comparisons),
        static_cast<unsigned long long>(t.too_large), static_cast<unsigned long long>(t.states),
        comparisons[i].reference.footprints ? "reference" : "unreduced", static_cast<unsigned long long>(t.reference_runs), static_cast<unsigned long long>(t.tested_runs),
        static_cast<unsigned long long>(t.tested_pruned),
        static_cast<double>(t.reference_runs) / static_cast<double>(std::max<std::uint64_t>(reduced, 1)),
        static_cast<unsigned long long>(t.failures_only));
  }
}

sd::Tally total(const Sweep& s) {
  sd::Tally all;
  for (const sd::Tally& t : s.tallies) {
    all.comparisons += t.comparisons;
    all.too_large += t.too_large;
    all.states += t.states;
  }
  return all;
}

std::string first_differences(const Sweep& s, std::size_t n = 3) {
  std::string out;
  for (std::size_t i = 0; i < s.differences.size() && i < n; ++i) out += s.differences[i] + "\n";
  return out;
}

// The reductions under test. Another one (dynamic partial-order reduction,
// unbounded) is one more comparison here: {bounded(kNoBound, false), <its
// SearchSpec>, {}}.
std::vector<sd::Comparison> comparisons() { return sd::reduction_comparisons(); }

sd::Program two_warps(std::vector<sd::Op> w0, std::vector<sd::Op> w1) {
  sd::Program p;
  p.warps = 2;
  p.bars = 1;
  p.count[0] = 1;
  p.ops[0] = std::move(w0);
  p.ops[1] = std::move(w1);
  return p;
}

std::set<std::string> states(const sd::Program& p, bool race_check = true) {
  std::set<std::string> out;
  for (const auto& kv : sd::search(p, sd::bounded(sd::kNoBound, false), sd::run_options(race_check)).states)
    out.insert(kv.first);
  return out;
}

TEST(explore_Soundness, TheReducedSearchReachesTheUnreducedFinalStates) {
  const std::uint64_t count = env_or("WSPIPE_SOUNDNESS_PROGRAMS", WSPIPE_SOUNDNESS_CI_PROGRAMS);
  const auto c = comparisons();
  const Sweep s = sweep(env_or("WSPIPE_SOUNDNESS_FIRST", 1), count, {sd::run_options(true), sd::run_options(false)}, c);
  print_summary("race checker on and off", s, c);
  EXPECT_TRUE(s.differences.empty()) << s.differences.size() << " differences; the first:\n" << first_differences(s);
  // The sweep compares something: most comparisons fit the budget.
  const sd::Tally all = total(s);
  EXPECT_LT(all.too_large * 2, all.comparisons);
  EXPECT_GT(all.states, all.comparisons - all.too_large);
}

// Try_wait time-outs and loads out of issue order are choice points of
// their own; without them the search is another one, checked on a subset.
TEST(explore_Soundness, AndWithoutTimeOutsOrLoadsOutOfOrder) {
  const std::uint64_t count =
      std::max<std::uint64_t>(env_or("WSPIPE_SOUNDNESS_PROGRAMS", WSPIPE_SOUNDNESS_CI_PROGRAMS) / 4, 1);
  const auto c = comparisons();
  const Sweep s = sweep(env_or("WSPIPE_SOUNDNESS_FIRST", 1), count,
                        {sd::run_options(true, false, false), sd::run_options(false, false, true),
                         sd::run_options(false, true, false)},
                        c);
  print_summary("without time-outs or loads out of order", s, c);
  EXPECT_TRUE(s.differences.empty()) << s.differences.size() << " differences; the first:\n" << first_differences(s);
}

// A cluster of two CTAs: handoffs across it (remote arrivals, multicast
// loads into both CTAs) and the cluster barrier.
TEST(explore_Soundness, AndInAClusterOfTwoCtas) {
  const std::uint64_t count =
      std::max<std::uint64_t>(env_or("WSPIPE_SOUNDNESS_PROGRAMS", WSPIPE_SOUNDNESS_CI_PROGRAMS) / 4, 1);
  const auto c = comparisons();
  const Sweep s = sweep(env_or("WSPIPE_SOUNDNESS_FIRST", 1), count, {sd::run_options(true), sd::run_options(false)}, c,
                        ~std::size_t{0}, cluster_of_two);
  print_summary("a cluster of two CTAs", s, c);
  EXPECT_TRUE(s.differences.empty()) << s.differences.size() << " differences; the first:\n" << first_differences(s);
  const sd::Tally all = total(s);
  EXPECT_LT(all.too_large * 2, all.comparisons);
}

// Counted phases (make_counted_program): arrivals on one phase from several
// warps, try_waits and test_waits on either parity answered before and
// after it completes, named barriers between, drains. Their unreduced
// searches are larger: a budget of 20,000 runs, and a sixteenth as many
// programs. Before a wait or an arrival that sees a phase begun read every
// arrival of the one before, 22 of the first 400 programs differed.
TEST(explore_Soundness, AndWithPhasesCountedFromSeveralWarps) {
  const std::uint64_t count =
      std::max<std::uint64_t>(env_or("WSPIPE_SOUNDNESS_PROGRAMS", WSPIPE_SOUNDNESS_CI_PROGRAMS) / 16, 1);
  const auto c = comparisons();
  const Sweep s = sweep(env_or("WSPIPE_SOUNDNESS_FIRST", 1), count, {sd::run_options(true), sd::run_options(false)}, c,
                        ~std::size_t{0}, sd::seeded_counted_program, 20 * kMaxRuns);
  print_summary("phases counted from several warps", s, c);
  EXPECT_TRUE(s.differences.empty()) << s.differences.size() << " differences; the first:\n" << first_differences(s);
  const sd::Tally all = total(s);
  EXPECT_LT(all.too_large * 2, all.comparisons);
}

// Loads from several warps into one engine (make_engine_program): a warp
// held back before its load (a wait, a try_wait, a spin), the order the
// loads landed in observed by another warp (a wait, then a test_wait or
// try_wait of another load's barrier), tiles read without waiting, drains.
// Most have three warps, whose unreduced search is too large (an empty
// three-warp program alone has 2,520 schedules): sd::engine_comparisons.
TEST(explore_Soundness, AndWithLoadsFromSeveralWarpsIntoOneEngine) {
  const std::uint64_t count =
      std::max<std::uint64_t>(env_or("WSPIPE_SOUNDNESS_PROGRAMS", WSPIPE_SOUNDNESS_CI_PROGRAMS) / 8, 1);
  const auto c = sd::engine_comparisons();
  const Sweep s = sweep(env_or("WSPIPE_SOUNDNESS_FIRST", 1), count, {sd::run_options(true), sd::run_options(false)}, c,
                        ~std::size_t{0}, sd::seeded_engine_program, 5 * kMaxRuns);
  print_summary("loads from several warps into one engine", s, c);
  EXPECT_TRUE(s.differences.empty()) << s.differences.size() << " differences; the first:\n" << first_differences(s);
  EXPECT_LT(s.tallies[0].too_large * 10, s.tallies[0].comparisons);
}

// --jobs: the search split among workers makes the same
// tree as one search, whatever the order in which the children run, are
// split off and are joined: the same runs, pruned runs, races and final
// states, for the source sets and for the bounded sleep sets.
TEST(explore_Soundness, ASplitSearchMakesTheSameTreeAsOneSearch) {
  const std::uint64_t count =
      std::max<std::uint64_t>(env_or("WSPIPE_SOUNDNESS_PROGRAMS", WSPIPE_SOUNDNESS_CI_PROGRAMS) / 8, 10);
  const std::vector<sd::SearchSpec> specs = {sd::unbounded(true), sd::bounded(1, true), sd::bounded(0, false)};
  std::uint64_t compared = 0, split_runs = 0, splits = 0;
  for (std::uint64_t seed = 1; seed <= count; ++seed)
    for (const std::uint32_t ctas : {1u, 2u}) {
      const sd::Program p = sd::seeded_program(seed, ctas);
      for (const sd::SearchSpec& spec : specs) {
        const emu::RunOptions o = sd::run_options(seed % 2 == 0);
        const sd::Reached one = sd::search(p, spec, o, kMaxRuns);
        if (!one.complete) continue;
        ++compared;
        for (const unsigned workers : {2u, 3u}) {
          const sd::Reached split = sd::search_split(p, spec, o, workers, seed * 7 + workers);
          SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(ctas) + " CTA(s), " + spec.name + ", " +
                       std::to_string(workers) + " workers");
          EXPECT_EQ(split.runs, one.runs);
          EXPECT_EQ(split.pruned, one.pruned);
          EXPECT_EQ(split.races, one.races);
          std::set<std::string> a, b;
          for (const auto& kv : one.states) a.insert(kv.first);
          for (const auto& kv : split.states) b.insert(kv.first);
          EXPECT_EQ(split.states.size(), one.states.size());
          EXPECT_EQ(a, b);
          split_runs += split.runs + split.pruned;
          splits += split.splits;
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  std::printf("[ soundness ] split searches: %llu comparisons, %llu runs, %llu children split off\n",
              static_cast<unsigned long long>(compared), static_cast<unsigned long long>(split_runs),
              static_cast<unsigned long long>(splits));
  EXPECT_GT(compared, count);  // most fit the budget
  EXPECT_GT(splits, compared);  // and most were split
}

// A new subtree starts after runs 1, 4, 9, ...: the integer square root of
// the runs made.
TEST(explore_Soundness, TheSearchSplitsAsTheSquareRootOfItsRuns) {
  using emu::detail::SearchTree;
  EXPECT_EQ(SearchTree::splits_by(0), 0u);
  EXPECT_EQ(SearchTree::splits_by(1), 1u);
  EXPECT_EQ(SearchTree::splits_by(3), 1u);
  EXPECT_EQ(SearchTree::splits_by(4), 2u);
  EXPECT_EQ(SearchTree::splits_by(99), 9u);
  EXPECT_EQ(SearchTree::splits_by(100), 10u);
  EXPECT_EQ(SearchTree::splits_by(1'000'000), 1000u);
}

// A soundness bug of the sleep-set reduction, found by this check (seeds
// 2064 and 8482 of the sweep without time-outs, the first minimised), and
// closed: an idle time-out's footprint now holds kGlobalResource
// (ExhaustiveSearch::stepped). With spurious_try_wait off, a try_wait
// times out only when nothing else can move (an idle time-out). Both warps
// wait on b0, which nothing completes: the scheduler lets one time out.
// Warp 0 timing out (its step touches b0) lets warp 0 go on to arrive on
// b1, and then nothing can time out any more; warp 1 timing out (its step
// touches b0, then its spin's first try on b1 blocks) leaves both idle
// again. The footprints call the two time-outs independent, but warp 0's
// disables warp 1's next one. In the branch where warp 1 times out first,
// warp 0's time-out is asleep, and it stays asleep while warp 1's spin
// times out again (b1 only): the schedule where warp 1's first try times
// out and its second passes, "s2", is never run:
//   unbounded, unreduced: 336 runs, 3 states; reduced: 20 runs (+4 pruned),
//   2 states; missing "ok | w0@2: 0 | w1@2: 0 s2 | ...", schedule 4:092d4410:7b.
// An idle time-out's footprint holding kGlobalResource (it depends on
// whether any actor can move) makes the two searches agree on this program
// and on every two-warp program of up to six operations among the first
// 8000 seeds.
TEST(explore_Soundness, AnIdleTimeOutIsNotIndependentOfAStepThatLetsAnotherActorMove) {
  sd::Program p = two_warps({{.kind = OpKind::try_wait}, {.kind = OpKind::arrive, .bar = 1}},
                            {{.kind = OpKind::try_wait}, {.kind = OpKind::spin, .bar = 1, .tries = 2}});
  p.bars = 2;
  p.count[1] = 1;
  for (const bool race_check : {true, false}) {
    std::vector<sd::Tally> t;
    const auto d = sd::check_program(p, sd::run_options(race_check, false, false), comparisons(), 100 * kMaxRuns, t);
    EXPECT_TRUE(d.empty()) << d.front();
  }
}

// ---- the check's teeth

// The comparisons, with the reduced search told `footprints(fp)` of each
// step instead of its footprint.
std::vector<sd::Comparison> broken(std::function<emu::Footprint(const emu::Footprint&)> footprints,
                                   const std::string& what) {
  std::vector<sd::Comparison> c = comparisons();
  for (sd::Comparison& k : c) {
    k.tested.footprints = footprints;
    k.tested.name += ", " + what;
  }
  return c;
}

// The first difference's seed, first state and its schedule token.
struct Caught {
  std::uint64_t seed = 0;
  std::string state, token;
};
Caught parse(const std::string& d) {
  Caught c;
  c.seed = std::stoull(d.substr(5));
  const auto at = d.find("\n  reached by ");
  const auto state = d.find(": ", d.find(", not by ", at)) + 2;
  c.state = d.substr(state, d.find('\n', state) - state);
  const auto token = d.find("schedule: ", state) + 10;
  c.token = d.substr(token, d.find('\n', token) - token);
  return c;
}

// A reduction that takes every two steps for independent (each step's
// footprint is hidden from the search) is caught within the first programs,
// and the report's schedule token replays to the state it names.
TEST(explore_Soundness, AReductionThatCallsEveryStepIndependentIsCaught) {
  const auto c = broken([](const emu::Footprint&) { return emu::Footprint{}; }, "every step independent");
  for (const bool race_check : {true, false}) {
    const Sweep s = sweep(1, 100, {sd::run_options(race_check)}, c, 1);
    ASSERT_FALSE(s.differences.empty()) << "race_check " << race_check;
    std::printf("[ soundness ] caught (race checker %s):\n%s", race_check ? "on" : "off", s.differences[0].c_str());
    const Caught k = parse(s.differences[0]);
    EXPECT_EQ(sd::replay(sd::seeded_program(k.seed), sd::run_options(race_check), k.token), k.state);
  }
}

// Footprints without the resources of some kinds (emu::footprint_kind:
// World::Res in backends/emu/runtime/world.hpp: 1, 6, 7, 8 an mbarrier and
// its phases, counts and observations; 2 and 12 a named barrier's
// generations and counts; 5 shared-memory chunks).
std::function<emu::Footprint(const emu::Footprint&)> hiding(std::vector<std::uint64_t> kinds) {
  return [kinds](const emu::Footprint& fp) {
    emu::Footprint kept;
    for (const std::uint64_t id : fp)
      if (id == emu::kGlobalResource ||
          std::find(kinds.begin(), kinds.end(), emu::footprint_kind(id)) == kinds.end())
        kept.push_back(id);
    return kept;
  };
}

// A reduction blind to the mbarriers is caught on the generated programs,
// with the race checker on and off. (One blind to the named barriers is
// not, in 200 programs: a bar.sync that blocks is ordered after the
// arrival that released it as the step that enabled it, footprint or not;
// one blind to the engine queues neither: the TMA engine's steps also
// touch the barrier they complete on.)
TEST(explore_Soundness, HidingTheBarriersFromTheFootprintsIsCaught) {
  for (const auto& [kinds, what] : {std::pair{std::vector<std::uint64_t>{1, 6, 7, 8}, "mbarriers hidden"}}) {
    const auto c = broken(hiding(kinds), what);
    for (const bool race_check : {true, false}) {
      // Up to 200 programs, stopping at the first caught (seed 25).
      const Sweep s = sweep(1, 200, {sd::run_options(race_check)}, c, 1);
      ASSERT_FALSE(s.differences.empty()) << what << ", race_check " << race_check;
      std::printf("[ soundness ] %s (race checker %s): caught on %s\n", what, race_check ? "on" : "off",
                  s.differences[0].substr(0, s.differences[0].find('\n')).c_str());
    }
  }
}

// A load queued after the completion of an older operation of its engine
// is explored queued before it too, where it could then overtake it: the
// issue marks (Touch::issue on the engine's order) tell the search where.
// The program (cut down from one that silicon showed, docs/silicon.md): w2
// queues its load at once; w1 times out once, then queues its own. Silicon
// can land w1's load first, and w0 then sees b2 complete and times out on
// b1 ("w0@2: 1 s0"). In the first run w2's load lands before w1 queues its
// load, so the alternative that lands w1's first is never enabled, and no
// race names it: only the mark does. A search not told of the marks misses
// the state; on the engine programs it is caught.
std::function<emu::Footprint(const emu::Footprint&)> unmarked() {
  return [](const emu::Footprint& fp) {
    emu::Footprint kept;
    for (const std::uint64_t id : fp)
      if (id == emu::kGlobalResource || emu::footprint_touch(id) != emu::Touch::issue) kept.push_back(id);
    return kept;
  };
}

TEST(explore_Soundness, ALoadQueuedLateOvertakesOneThatAnotherWarpQueuedEarlier) {
  sd::Program p;
  p.warps = 3;
  p.bars = 3;
  p.count = {1, 1, 1};
  p.ops[0] = {{.kind = OpKind::test_wait, .bar = 2}, {.kind = OpKind::spin, .bar = 1, .tries = 1}};
  p.ops[1] = {{.kind = OpKind::arrive_tx, .bar = 2, .bytes = 16},
              {.kind = OpKind::spin, .bar = 0, .tries = 1},
              {.kind = OpKind::tma_load, .bar = 2, .tile = 0, .bytes = 16, .value = 1},
              {.kind = OpKind::wait, .bar = 2}};
  p.ops[2] = {{.kind = OpKind::arrive_tx, .bar = 1, .bytes = 16},
              {.kind = OpKind::tma_load, .bar = 1, .tile = 1, .bytes = 16, .value = 2},
              {.kind = OpKind::wait, .bar = 1}};
  const std::string overtaken = "ok | w0@2: 1 s0 | w1@4: s0 | w2@3: | s: 0 0 0 | t: 1004,0,0 1008,0,0";
  sd::SearchSpec blind = sd::unbounded(true);
  blind.footprints = unmarked();
  for (const bool race_check : {true, false}) {
    const auto o = sd::run_options(race_check);
    EXPECT_EQ(sd::search(p, sd::unbounded(true), o).states.count(overtaken), 1u) << race_check;
    EXPECT_EQ(sd::search(p, sd::issues_ordered(), o).states.count(overtaken), 1u) << race_check;
    EXPECT_EQ(sd::search(p, blind, o).states.count(overtaken), 0u) << race_check;
  }
}

// Only the oldest load in an engine's queue lands in pieces, so the order
// in which two warps queue their loads decides which one can land part of
// itself first: a load that can land in pieces writes the queue's order at
// its issue, and the other loads' issues read it (Res::engine_queue, kind
// 25). Engine program 5333 (found by the engine sweep): w1's 256-byte load
// lands its first line, w0's 16 bytes land over it, w2 sees b1 complete and
// b0 not ("w2@3: 0", tile words 1036, 1004, 1008). In the first run w0
// queues first; with the issues commuting, w1's load never came first.
TEST(explore_Soundness, TheOrderOfTwoWarpsLoadsDecidesWhichLandsAPieceFirst) {
  const sd::Program p = sd::seeded_engine_program(5333);
  ASSERT_EQ(sd::to_string(p),
            "b0(1) b1(1) | w0: arrive_tx(b1,16); tma_load(t1<-row9,16,b1); wait(b0,0) | w1: arrive_tx(b0,256); "
            "tma_load(t1<-row0,256,b0); test_wait(b1,0) | w2: wait(b1,0); try_wait(b0,0); wait(b0,0)");
  const std::string piece_first = "ok | w0@3: | w1@3: 0 | w2@3: 0 | s: 0 0 0 | t: 0,0,0 1036,1004,1008";
  sd::SearchSpec blind = sd::unbounded(true);
  blind.footprints = hiding({25});
  // (The two loads write one tile: with the race checker on, that is a race.)
  const auto o = sd::run_options(false);
  EXPECT_EQ(sd::search(p, sd::unbounded(true), o).states.count(piece_first), 1u);
  EXPECT_EQ(sd::search(p, blind, o).states.count(piece_first), 0u);
}

TEST(explore_Soundness, HidingTheIssueMarksIsCaughtOnLoadsFromSeveralWarps) {
  std::vector<sd::Comparison> c = sd::engine_comparisons();
  c.resize(1);
  c[0].tested.footprints = unmarked();
  c[0].tested.name += ", issue marks hidden";
  const Sweep s = sweep(1, 400, {sd::run_options(false)}, c, 1, sd::seeded_engine_program, 5 * kMaxRuns);
  ASSERT_FALSE(s.differences.empty());
  std::printf("[ soundness ] issue marks hidden: caught on %s after %llu programs\n",
              s.differences[0].substr(0, s.differences[0].find('\n')).c_str(),
              static_cast<unsigned long long>(s.programs));
  const Caught k = parse(s.differences[0]);
  EXPECT_EQ(sd::replay(sd::seeded_engine_program(k.seed), sd::run_options(false), k.token), k.state);
}

// With the race checker off, a warp's shared-memory accesses are resources
// of its steps; a search that is not told of them misses the values one
// order of a store and a load shows. With the checker on they are no
// resources (a racing pair is reported either way), so hiding them changes
// nothing.
TEST(explore_Soundness, HidingTheDataFromTheFootprintsIsCaughtOnlyWithoutTheRaceChecker) {
  const auto c = broken(hiding({5}), "data accesses hidden");
  // Race checker off, a warp's loads and stores are what orders them: with
  // them hidden, the source-set search misses the orders of a store and a
  // load of one word that nothing else orders.
  const Sweep off = sweep(1, 200, {sd::run_options(false)}, c, 1);
  ASSERT_FALSE(off.differences.empty());
  std::printf("[ soundness ] data accesses hidden (race checker off): caught on %s\n",
              off.differences[0].substr(0, off.differences[0].find('\n')).c_str());
  // Race checker on, data accesses are no footprints (a race is reported
  // whichever order runs): hiding them changes nothing.
  const Sweep on = sweep(1, kTeethPrograms, {sd::run_options(true)}, c);
  EXPECT_TRUE(on.differences.empty()) << first_differences(on);
}

// ---- what a final state is

// A handoff through a barrier: the load sees the store, whatever the order;
// and the tiles as the TMA loads left them.
TEST(explore_Soundness, AFinalStateHoldsWhatEachWarpObservedAndTheDataLeft) {
  const sd::Program p = two_warps({{.kind = OpKind::store, .slot = 1, .value = 7}, {.kind = OpKind::arrive}},
                                  {{.kind = OpKind::wait}, {.kind = OpKind::load, .slot = 1}});
  EXPECT_EQ(sd::to_string(p), "b0(1) | w0: store(s1=7); arrive(b0) | w1: wait(b0,0); load(s1)");
  EXPECT_EQ(states(p), (std::set<std::string>{"ok | w0@2: | w1@2: v7 | s: 0 7 0 | t: 0,0,0 0,0,0"}));
  // A TMA load of source row 3 (words 1012...) into tile 0, then one of
  // 256 bytes from row 5 over it: words 0, 4 and 8 of the tile name the
  // last writer of each part. With loads out of issue order, both orders
  // are reached; the warp reads the tile once both have landed.
  const sd::Program tma = two_warps(
      {{.kind = OpKind::arrive_tx, .bytes = 16 + sd::kTileBytes},
       {.kind = OpKind::tma_load, .bytes = 16, .value = 3},
       {.kind = OpKind::tma_load, .bytes = sd::kTileBytes, .value = 5}},
      {{.kind = OpKind::wait}, {.kind = OpKind::load_tile}});
  EXPECT_EQ(states(tma, false),
            (std::set<std::string>{"ok | w0@3: | w1@2: t1020 | s: 0 0 0 | t: 1020,1024,1028 0,0,0",
                                   "ok | w0@3: | w1@2: t1012 | s: 0 0 0 | t: 1012,1024,1028 0,0,0"}));
}

// A run that ends stops recording: the warps torn down after a deadlock or
// a violation pass their waits and read whatever is there, and none of that
// is the run's. A violation keeps the rule, the actor of the step that broke
// it, and that warp's own operations and observations.
TEST(explore_Soundness, TheTeardownAfterARunEndedIsNotObserved) {
  const sd::Program stuck = two_warps({{.kind = OpKind::try_wait}}, {{.kind = OpKind::wait}, {.kind = OpKind::load}});
  EXPECT_EQ(states(stuck), (std::set<std::string>{"deadlock | w0@1: 0 | w1@0: | s: 0 0 0 | t: 0,0,0 0,0,0"}));
  const sd::Program over = two_warps({{.kind = OpKind::try_wait}, {.kind = OpKind::named_sync, .bytes = 96}},
                                     {{.kind = OpKind::wait}, {.kind = OpKind::load}});
  EXPECT_EQ(states(over), (std::set<std::string>{"named-barrier.thread-count by w0@1: 0"}));
  // A racing store and load with the checker on: "race", whichever order.
  const sd::Program racy = two_warps({{.kind = OpKind::store, .value = 1}}, {{.kind = OpKind::load}});
  EXPECT_EQ(states(racy), (std::set<std::string>{"race"}));
  EXPECT_EQ(states(racy, false), (std::set<std::string>{"ok | w0@1: | w1@1: v0 | s: 1 0 0 | t: 0,0,0 0,0,0",
                                                         "ok | w0@1: | w1@1: v1 | s: 1 0 0 | t: 0,0,0 0,0,0"}));
}

// A difference of the sleep sets, found by the sweep (programs 1090 and
// 1093) when the bounded search had them too, and closed; the source-set
// search's sleep sets follow the same rule, compared on both programs. w0 arrives on b0 (count 2), spins
// (two tries), and w1 arrives later: at bounds 1 and 2 the unreduced search
// reaches w0's spin passing on its second try ("s2"), and no reduced bound
// did. Where w0 arrives first, w1's arrival is asleep with the footprint it
// had where it ran first: a first arrival, counted and commuting with w0's.
// After w0's arrival, though, w1's is the one that completes the phase, and
// conflicts with w0's try_wait; with the stale footprint, w1 stayed asleep
// through w0's time-out and never arrived. Two commuting updates of one
// resource commute, but what the second one does depends on the first, so
// a step that counts into a counter now wakes a sleeping step that counts
// into it too (Touch::count, stays_asleep, strategy.hpp).
TEST(explore_Soundness, ASpinThatPassesOnItsSecondTryUnderABound) {
  for (const std::uint64_t seed : {1090u, 1093u}) {
    const sd::Program p = sd::seeded_program(seed, 1);
    std::vector<sd::Tally> t;
    const auto d = sd::check_program(p, sd::run_options(true), comparisons(), kMaxRuns, t);
    EXPECT_TRUE(d.empty()) << "seed " << seed << ":\n" << d.front();
  }
  // The bounded searches, which run every schedule within their bound,
  // reach it from bound 1.
  const sd::Program p = sd::seeded_program(1090, 1);
  EXPECT_EQ(sd::to_string(p),
            "b0(2) | w0: arrive(b0); spin(b0,0,x2); load(s1) | w1: wait(b0,1); load(s2); store(s1=1); arrive(b0)");
  const auto bound1 = sd::search(p, sd::bounded(1, true), sd::run_options(true), kMaxRuns);
  EXPECT_EQ(bound1.states.count("ok | w0@3: s2 v1 | w1@4: v0 | s: 0 1 0 | t: 0,0,0 0,0,0"), 1u);
}

// A difference of the unbounded source-set search against every schedule,
// found by the sweep (program 1719) and closed. w1 must time out twice in
// its counted spin, give up and arrive before w0's try_wait runs (and
// passes). When a second time-out in a row was explored only where no
// other actor could move, w0's time-out ruled out w1's second one, and the
// race that would reverse them was hidden behind w0's exit, which every
// idle time-out depends on: source sets reached only "w0: 0". Now w1 spins
// out (RunOptions::spin_out_limit): its second time-out is a move of its
// own wherever it can time out, and the test checks the reduced search
// against every schedule on it (ExhaustiveSearch::pick still adds an actor
// that a step disabled at that step's choice point).

// The rule that test needs, on footprints: two counted updates of one
// counter (Touch::count: arrivals into one phase) commute, but a sleeping
// one wakes at the other, since either may be the last; two updates whose
// effect does not depend on their order (Touch::commute: an issue and a
// completion counted into one engine's load) leave it asleep. Woken there,
// persistent-gemm's smallest unbounded search ran 1,412 schedules instead
// of 616.
TEST(explore_Soundness, OnlyCountedUpdatesWakeASleepingStep) {
  using emu::Touch;
  // Any kinds would do; these are the emulator's (an mbarrier phase's count, an
  // engine's load, its order).
  constexpr std::uint64_t kCount = 7, kLoad = 10, kOrder = emu::kEngineOrderKind;
  const auto at = [](std::uint64_t kind, std::uint64_t key, Touch t) { return emu::footprint_entry(kind, key, t); };
  const emu::Footprint arrival{at(kCount, 5, Touch::count)};
  EXPECT_TRUE(emu::independent(arrival, arrival));
  EXPECT_FALSE(emu::stays_asleep(arrival, arrival));
  EXPECT_TRUE(emu::stays_asleep(arrival, {at(kCount, 6, Touch::count)}));  // another phase

  const emu::Footprint issue{at(kLoad, 3, Touch::commute)};
  const emu::Footprint completion{at(kOrder, 3, Touch::write), at(kLoad, 3, Touch::commute)};
  EXPECT_TRUE(emu::independent(issue, completion));
  EXPECT_TRUE(emu::stays_asleep(issue, completion));
  EXPECT_TRUE(emu::stays_asleep(completion, issue));
  // A counted update beside an order-free one of the same resource may be
  // the last too; a read beside either conflicts.
  EXPECT_FALSE(emu::stays_asleep({at(kLoad, 3, Touch::count)}, issue));
  EXPECT_FALSE(emu::stays_asleep(issue, {at(kLoad, 3, Touch::count)}));
  EXPECT_FALSE(emu::independent({at(kLoad, 3, Touch::read)}, issue));
  EXPECT_FALSE(emu::independent({at(kCount, 5, Touch::read)}, arrival));

  // The entry's parts come back out.
  const std::uint64_t entry = at(kCount, 5, Touch::count);
  EXPECT_EQ(emu::footprint_kind(entry), kCount);
  EXPECT_EQ(emu::footprint_touch(entry), Touch::count);
  EXPECT_EQ(emu::footprint_resource(entry), emu::footprint_resource(at(kCount, 5, Touch::read)));
  EXPECT_NE(emu::footprint_resource(entry), emu::footprint_resource(at(kCount, 6, Touch::count)));
}
// The unbounded source-set search reaches exactly the unreduced search's
// final states on `p`, both within `max_runs`; returns how many.
std::uint64_t expect_unbounded_agree(const sd::Program& p, bool race_check, std::uint64_t max_runs) {
  std::vector<sd::Tally> t;
  const std::vector<sd::Comparison> c = {{sd::unbounded(false), sd::unbounded(true)}};
  const auto d = sd::check_program(p, sd::run_options(race_check), c, max_runs, t);
  EXPECT_TRUE(d.empty()) << "race_check " << race_check << ": " << d.front();
  EXPECT_EQ(t.at(0).too_large, 0u) << "race_check " << race_check;
  return t.at(0).states;
}

// A wait that sees a phase complete comes after every arrival counted
// into it, not only after the one that completed it. Warp 1's last
// try_wait(parity 1) answers true while phase 0 (three arrivals) is still
// incomplete, which needs warp 0's second arrival after it. In the first
// run that arrival comes first and warp 1's own arrival completes the
// phase; the two arrivals commute (counted), so unless the try_wait that
// saw the phase complete also reads the phase's count, nothing races with
// warp 0's arrival and the other order is never run: the source-set
// search ran 2 schedules and missed the answer an H100 gives in about 12%
// of runs.
sd::Program counted_phase_seen_complete() {
  sd::Program p;
  p.warps = 2;
  p.bars = 1;
  p.count[0] = 3;
  p.ops[0] = {{.kind = OpKind::arrive},
              {.kind = OpKind::test_wait, .parity = 1},
              {.kind = OpKind::arrive},
              {.kind = OpKind::named_sync, .bytes = 64},
              {.kind = OpKind::wait}};
  p.ops[1] = {{.kind = OpKind::try_wait},
              {.kind = OpKind::arrive},
              {.kind = OpKind::try_wait, .parity = 1},
              {.kind = OpKind::named_sync, .bytes = 64}};
  return p;
}

TEST(explore_Soundness, AWaitThatSeesAPhaseCompleteComesAfterEveryArrivalOfIt) {
  const sd::Program p = counted_phase_seen_complete();
  EXPECT_EQ(sd::to_string(p),
            "b0(3) | w0: arrive(b0); test_wait(b0,1); arrive(b0); bar.sync(64); wait(b0,0) | w1: try_wait(b0,0); "
            "arrive(b0); try_wait(b0,1); bar.sync(64)");
  for (const bool race_check : {true, false}) {
    // The unreduced search runs 37,800 schedules.
    expect_unbounded_agree(p, race_check, 50 * kMaxRuns);
    // Warp 1's last answer is 1 (phase 0 still incomplete) on some schedule.
    bool open = false;
    for (const auto& kv : sd::search(p, sd::unbounded(true), sd::run_options(race_check)).states)
      open = open || kv.first.find("w1@4: 0 1 |") != std::string::npos;
    EXPECT_TRUE(open) << "race_check " << race_check;
  }
}

// The same kernel as a user writes it: the answer is kept for the kernel's
// verify, which fails when it was true; the complete search finds it.
TEST(explore_Soundness, TheCompleteSearchFindsAnAnswerKeptForTheVerify) {
  using B = emu::EmuBackend;
  const emu::KernelFactory factory = [] {
    auto open = std::make_shared<bool>(false);
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.smem_bytes = 64;
    k.body = [open] {
      auto& bar = B::shared_storage<wspipe::SharedMemBarrier>();
      if (B::warp_idx() == 0) {
        B::elect_one([&] { B::init(bar, 3); });
        B::fence_init();
      }
      B::named_sync(0, 64);
      if (B::warp_idx() == 0) {
        B::elect_one([&] { B::arrive(bar); });
        B::elect_one([&] { (void)B::test_wait(bar, 1); });
        B::elect_one([&] { B::arrive(bar); });
        B::named_sync(1, 64);
        B::wait(bar, 0);
      } else {
        B::elect_one([&] { (void)B::try_wait(bar, 0); });
        B::elect_one([&] { B::arrive(bar); });
        B::elect_one([&] { *open = B::try_wait(bar, 1); });
        B::named_sync(1, 64);
      }
    };
    k.verify = [open] { return *open ? std::string("phase 0 was still open") : std::string(); };
    return k;
  };
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.seconds = 0;
  o.shrink = false;
  const emu::ExploreResult r = emu::explore(factory, o);
  ASSERT_FALSE(r.ok()) << r.report();
  EXPECT_EQ(r.failure->outcome, "result.mismatch") << r.report();
}

// The same for a named barrier: which generation an arrival counts into
// depends on every arrival before it. w0's bar.arrive and bar.sync may
// both count into generation 0 (w0 passes; w1's two bar.syncs then wait
// for a third warp: a deadlock), or w1's first bar.sync may come between
// them. In the run where w1's comes first, w0's bar.sync counts into
// generation 1, begun by w0's own bar.arrive; unless it reads generation
// 0's count, nothing orders it after w1's arrival, and the deadlock went
// unexplored (1 run, +1 pruned).
TEST(explore_Soundness, AnArrivalIntoAGenerationComesAfterEveryArrivalOfTheOneBefore) {
  sd::Program p;
  p.warps = 2;
  p.bars = 1;
  p.count[0] = 2;
  p.ops[0] = {{.kind = OpKind::named_arrive, .bytes = 64}, {.kind = OpKind::named_sync, .bytes = 64},
              {.kind = OpKind::arrive}};
  p.ops[1] = {{.kind = OpKind::named_sync, .bytes = 64}, {.kind = OpKind::named_sync, .bytes = 64},
              {.kind = OpKind::arrive}};
  EXPECT_EQ(sd::to_string(p),
            "b0(2) | w0: bar.arrive(64); bar.sync(64); arrive(b0) | w1: bar.sync(64); bar.sync(64); arrive(b0)");
  for (const bool race_check : {true, false}) EXPECT_EQ(expect_unbounded_agree(p, race_check, 20 * kMaxRuns), 2u);
}

// An idle time-out depends on every step, so the newest one before it (a
// warp's exit) orders every earlier one before it, and the races of its
// own footprint were hidden. w1's try_wait(b0,0) times out first; its
// try_wait(b1,1), a second time-out in a row, waits until nothing else can
// move, after w0's exit, and then times out because w0's arrive(b1) began
// b1's phase 1. Reversed with that arrival it answers true: the schedule
// where w1 runs first. Found by the counted sweep (programs 1787, 23830,
// 29315, and, where the try_wait before it is an idle time-out too, so that
// its own clock already holds every earlier step: 32079, 3347, 41650); the
// source-set search ran 3 schedules and missed it. A run with idle
// time-outs is now analysed a second time with their own footprints.
TEST(explore_Soundness, AnIdleTimeOutRacesWithWhatItsOwnAnswerReadsToo) {
  const sd::Program p = sd::seeded_counted_program(1787);
  EXPECT_EQ(sd::to_string(p), "b0(3) b1(1) | w0: arrive(b1); arrive(b0); arrive(b0); arrive(b0); wait(b0,0) | w1: "
                              "try_wait(b0,0); try_wait(b1,1)");
  // Every schedule of these takes up to 26,334 runs (program 23830).
  for (const bool race_check : {true, false}) EXPECT_EQ(expect_unbounded_agree(p, race_check, 10 * kMaxRuns), 3u);
  for (const std::uint64_t seed : {23830u, 29315u, 32079u, 3347u, 41650u})
    for (const bool race_check : {true, false})
      expect_unbounded_agree(sd::seeded_counted_program(seed), race_check, 30 * kMaxRuns);
}

TEST(explore_Soundness, IdleTimeOutsOfABoundedRetryLoop) {
  const sd::Program p = sd::seeded_program(1719, 1);
  EXPECT_EQ(sd::to_string(p), "b0(1) | w0: try_wait(b0,0) | w1: wait(b0,1); spin(b0,0,x2); arrive(b0)");
  std::vector<sd::Tally> t;
  const std::vector<sd::Comparison> c = {{sd::unbounded(false), sd::unbounded(true)}};
  const auto d = sd::check_program(p, sd::run_options(true), c, 2 * kMaxRuns, t);
  EXPECT_TRUE(d.empty()) << d.front();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].too_large, 0u);
  EXPECT_EQ(t[0].states, 2u);
}

}  // namespace

namespace {

// The sharded search (--shard I/N; docs/exploration.md, "The exhaustive
// search in shards"), its parts run in turn: together they reach exactly
// the final states of the source-set search (which the sweeps above hold
// to the unreduced search's), on one CTA and on clusters of two, with the
// race checker on and off; where the unreduced search fits the budget,
// exactly its states too; at a preemption bound, those of one bounded
// search (at least), and without the reduction exactly its runs. Then the
// check's teeth: with one part left out (a shard that never ran), states
// are missed.
struct ShardedSweep {
  std::uint64_t compared = 0, too_large = 0, unreduced = 0, bounded = 0, differences = 0, missed_without_a_part = 0;
  std::uint64_t one_runs = 0, one_pruned = 0, sharded_runs = 0, sharded_pruned = 0, parts = 0, split = 0;
  std::string first;
};

ShardedSweep sweep_sharded(std::uint64_t first, std::uint64_t count) {
  ShardedSweep s;
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    const sd::Program p = sd::seeded_program(seed, seed % 4 == 0 ? 2 : 1);
    for (const bool race_check : {true, false}) {
      const emu::RunOptions o = sd::run_options(race_check);
      const sd::Reached one = sd::search(p, sd::unbounded(true), o, 20 * kMaxRuns);
      if (!one.complete) {
        ++s.too_large;
        continue;
      }
      ++s.compared;
      const sd::Reached sharded = sd::search(p, sd::sharded(), o);
      s.one_runs += one.runs;
      s.one_pruned += one.pruned;
      s.sharded_runs += sharded.runs;
      s.sharded_pruned += sharded.pruned;
      s.parts += sharded.splits;
      std::vector<std::pair<const char*, sd::Reached>> refs;
      refs.emplace_back("source sets", one);
      if (sd::Reached unreduced = sd::search(p, sd::unbounded(false), o, kMaxRuns); unreduced.complete) {
        ++s.unreduced;
        refs.emplace_back("unreduced", std::move(unreduced));
      }
      for (const auto& [name, ref] : refs) {
        // A failing program: each search stops a run at its first failure,
        // so only the verdict and the states reached must agree (as above).
        const bool failing = sd::has_failure(ref) && sd::has_failure(sharded);
        std::string d = sd::missing(sharded, ref, "sharded", name);
        if (!failing) d += sd::missing(ref, sharded, name, "sharded");
        if (!d.empty() && s.differences++ == 0) s.first = "seed " + std::to_string(seed) + "\n" + sd::describe(p, o) + d;
      }
      // Bounded (--shard with --preemptions 1): every schedule within the
      // bound, reduction asked for or not; the parts run exactly the
      // schedules of one bounded search and reach its states.
      if (const sd::Reached u = sd::search(p, sd::bounded(1, false), o, kMaxRuns); u.complete) {
        ++s.bounded;
        const sd::Reached b = sd::search(p, sd::bounded(1, true), o);
        const sd::Reached sb = sd::search(p, sd::sharded(sd::bounded(1, true)), o);
        const sd::Reached su = sd::search(p, sd::sharded(sd::bounded(1, false)), o);
        std::string d = sd::missing(sb, u, "sharded, bound 1", "bound 1, unreduced");
        if (!(sd::has_failure(b) && sd::has_failure(sb))) d += sd::missing(b, sb, "bound 1", "sharded, bound 1");
        if (su.runs != u.runs || su.pruned != u.pruned || !sd::missing(u, su, "a", "b").empty() ||
            !sd::missing(su, u, "a", "b").empty())
          d += "unreduced, bound 1: " + sd::counts(u) + "; sharded: " + sd::counts(su) + "\n";
        if (!d.empty() && s.differences++ == 0) s.first = "seed " + std::to_string(seed) + "\n" + sd::describe(p, o) + d;
      }
      if (sharded.splits < 2) continue;
      ++s.split;
      // Each part but the first (the whole search, which split): left out.
      for (std::size_t j = 1; j < sharded.splits; ++j) {
        sd::SearchSpec without = sd::sharded();
        without.drop_part = j;
        const sd::Reached less = sd::search(p, without, o);
        if (!sd::missing(one, less, "source sets", "without a part").empty()) {
          ++s.missed_without_a_part;
          break;
        }
      }
    }
  }
  return s;
}

// A bounded verdict is never contradicted by the search without the
// reduction: asked for the reduction or not, a search within a preemption
// bound runs the same schedules and reaches the same final states (with
// sleep sets it reached 1 of 3 states at bound 1 on a small kernel:
// explore_Exhaustive.ReductionReachesTheSameFinalStatesWithFewerSchedules).
TEST(explore_Soundness, ABoundedSearchRunsEveryScheduleWithinItsBound) {
  std::uint64_t compared = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const sd::Program p = sd::seeded_program(seed, seed % 4 == 0 ? 2 : 1);
    for (const std::uint32_t k : {0u, 1u}) {
      const emu::RunOptions o = sd::run_options(seed % 2 == 0);
      const sd::Reached unreduced = sd::search(p, sd::bounded(k, false), o, kMaxRuns);
      if (!unreduced.complete) continue;
      const sd::Reached asked = sd::search(p, sd::bounded(k, true), o, kMaxRuns);
      ++compared;
      EXPECT_EQ(asked.runs, unreduced.runs) << "seed " << seed << ", bound " << k;
      EXPECT_EQ(asked.pruned, 0u) << "seed " << seed << ", bound " << k;
      EXPECT_TRUE(sd::missing(unreduced, asked, "unreduced", "reduction asked").empty()) << "seed " << seed;
    }
  }
  EXPECT_GT(compared, 200u);
}

TEST(explore_Soundness, TheShardedSearchReachesTheUnreducedFinalStates) {
  const std::uint64_t count =
      std::max<std::uint64_t>(env_or("WSPIPE_SOUNDNESS_PROGRAMS", WSPIPE_SOUNDNESS_CI_PROGRAMS) / 4, 1);
  const auto t0 = std::chrono::steady_clock::now();
  const ShardedSweep s = sweep_sharded(env_or("WSPIPE_SOUNDNESS_FIRST", 1), count);
  std::printf(
      "[ soundness ] sharded: %llu programs in %.1f s: %llu comparisons (%llu too large; %llu with the unreduced "
      "search too), %llu split into parts (%llu parts in all); one search %llu runs (+%llu pruned), the parts "
      "together %llu (+%llu); a part left out missed states in %llu; bound 1 compared on %llu\n",
      static_cast<unsigned long long>(count),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
      static_cast<unsigned long long>(s.compared), static_cast<unsigned long long>(s.too_large),
      static_cast<unsigned long long>(s.unreduced),
      static_cast<unsigned long long>(s.split), static_cast<unsigned long long>(s.parts),
      static_cast<unsigned long long>(s.one_runs), static_cast<unsigned long long>(s.one_pruned),
      static_cast<unsigned long long>(s.sharded_runs), static_cast<unsigned long long>(s.sharded_pruned),
      static_cast<unsigned long long>(s.missed_without_a_part), static_cast<unsigned long long>(s.bounded));
  EXPECT_EQ(s.differences, 0u) << "the first:\n" << s.first;
  EXPECT_GT(s.compared, s.too_large);
  // The sweep splits programs, and its check has teeth.
  EXPECT_GT(s.split, s.compared / 4);
  EXPECT_GT(s.missed_without_a_part, 0u);
}

}  // namespace
