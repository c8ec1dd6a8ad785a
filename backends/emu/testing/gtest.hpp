// GoogleTest helpers: explore a kernel from a test, and fail with a report
// and a command that replays the failure. Part of wspipe::testing, which a
// project links from its own test suite:
//
//   TEST(MyPipeline, Clean) { WSPIPE_EXPECT_CLEAN(make_my_kernel); }
//   TEST(MyPipeline, PlantedBugIsFound) { WSPIPE_EXPECT_FINDS("deadlock", make_broken_kernel); }
//
// Environment, read by options() (the helpers' default options) when the
// test runs: every setting of backends/emu/settings.hpp, the same as the
// wspipe program's flag of that name, with the same rules and messages:
//   WSPIPE_RUNS=N        explore run numbers 0..N-1 (N >= 1); alone, no time limit
//   WSPIPE_SECONDS=T     explore for T seconds; alone, no run limit (T = 0:
//                        none, which needs WSPIPE_RUNS or exhaustive)
//   WSPIPE_JOBS=N        threads, 1..1024
//   WSPIPE_SEED=N        first seed (run i uses seed N + i)
//   WSPIPE_STRATEGY=P    portfolio: "random,pct:3,stall", "pct:5", "exhaustive", ...
//   WSPIPE_PCT_DEPTH=D   the depth of a plain "pct"
//   WSPIPE_SHARD=I/N     only the run numbers i with i mod N = I
//   WSPIPE_PREEMPTIONS=K exhaustive: at most K preemptions
//   WSPIPE_NO_REDUCTION=1, WSPIPE_NO_SHRINK=1, WSPIPE_SHRINK_SECONDS=T,
//   WSPIPE_MAX_STEPS=N, WSPIPE_SPURIOUS_TRY_WAIT=1, WSPIPE_MMA_MEMO_MIB=N
//   WSPIPE_LANE_DIVERGENCE=1|0  the emulator's lane-divergence mode on or off
//                        (ExploreOptions::run.lane_divergence)
//   WSPIPE_ASYNC_REORDER=1|0  TMA loads out of issue order and in pieces
//                        (ExploreOptions::run.async_reorder; default 1)
//   WSPIPE_NO_SPURIOUS_TRY_WAIT=1, WSPIPE_NO_ASYNC_REORDER=1  the modes off
// A switch takes 1 (as its flag) or 0. A bad value is a test failure naming
// the variable and the value; the rest still applies. Options passed
// explicitly skip the environment unless they go through options(base).
//
// Read by every helper, whatever its options:
//   WSPIPE_REPLAY=S      do not explore: replay schedule S strictly (the
//                        token a failure prints) and judge that one run
//   WSPIPE_TRACE=FILE    with WSPIPE_REPLAY: write the replayed run's trace,
//                        Chrome/Perfetto JSON (https://ui.perfetto.dev), or
//                        a text log when FILE ends in ".txt"
// A schedule replays only the kernel and configuration it was recorded
// from: in a test that explores several kernels, the others report that it
// does not fit them.
//
// Read by every run of a kernel, the helpers' included:
//   WSPIPE_SOURCE_ROOT=DIR  reports and traces name files relative to DIR
//                        (empty: absolute), instead of the project's root
//                        its build gave (emu::default_source_root())
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "backends/emu/explore.hpp"

namespace wspipe::testing {

// The helpers' default options: `base`, with a budget of 2 seconds when
// `base` keeps ExploreOptions' default budget, progress on stderr once an
// exploration has run a few seconds (unless `base` has on_progress), then
// the environment above. A bad variable is reported with ADD_FAILURE.
emu::ExploreOptions options(emu::ExploreOptions base = {});

// The environment part of options(), without GoogleTest: applies each
// WSPIPE_* variable that parses; false, with every bad one named in
// *error, when some do not.
bool apply_environment(emu::ExploreOptions& options, std::string* error);

// Success when exploring finds nothing (or, under WSPIPE_REPLAY, when the
// replayed run ends ok); a clean exploration prints what it covered, one
// line on stdout ("[wspipe] Suite.Test: explored 1234 runs (56789 steps)
// in 2.0 s, strategy random,pct:3,stall, first seed 1: nothing found"). On
// failure the message holds the exploration's report (the failure, the
// shrunk schedule, the shrink figures) and a command line that replays
// just that schedule with a trace.
::testing::AssertionResult explores_clean(const emu::KernelFactory& make, emu::ExploreOptions opts = options());
// The same for one instance used by every run: on one thread unless the
// options ask for jobs (see emu::explore(const Kernel&, ...)).
::testing::AssertionResult explores_clean(const emu::Kernel& kernel, emu::ExploreOptions opts = options());

// What explores_verified accepts besides a complete search: a verdict
// that assumes what emu::assumptions() lists (the default; the log line
// and the message name them), or one that assumes nothing beyond the
// configuration (Assumptions::none: any assumption fails the test, naming
// it).
enum class Assumptions { allowed, none };

// Success only when an exhaustive search (options with the exhaustive
// strategy alone) completes and finds nothing: the verdict "verified", no
// schedule of this configuration within the preemption bound fails. A
// search whose budget ran out ("incomplete") fails, saying so.
// explores_clean also fails on an incomplete search, but passes a sampled
// exploration. E.g.
//   WSPIPE_EXPECT_VERIFIED(make_ring, opts, wspipe::testing::Assumptions::none);
::testing::AssertionResult explores_verified(const emu::KernelFactory& make, emu::ExploreOptions opts,
                                             Assumptions allowed = Assumptions::allowed);
::testing::AssertionResult explores_verified(const emu::Kernel& kernel, emu::ExploreOptions opts,
                                             Assumptions allowed = Assumptions::allowed);

// Success when exploring finds a failure whose outcome (emu::outcome():
// "deadlock", "livelock" or a violation rule such as
// "mbarrier.over-arrival") is `expected`, or one of its comma-separated
// outcomes: one bug may deadlock under one schedule and break a rule under
// another ("deadlock,mbarrier.parity-alias"). On failure the message says
// what was found instead: nothing in N runs, or another outcome with its
// report.
::testing::AssertionResult finds(std::string_view expected, const emu::KernelFactory& make,
                                 emu::ExploreOptions opts = options());
::testing::AssertionResult finds(std::string_view expected, const emu::Kernel& kernel,
                                 emu::ExploreOptions opts = options());

// Sharding one exploration across GoogleTest shards.
//
// GoogleTest shards tests, not work inside them (GTEST_TOTAL_SHARDS=N,
// GTEST_SHARD_INDEX=K): the K-th runnable test, counted in registration
// order, runs in shard K mod N. One exploration test would therefore run in
// a single shard. register_exploration() instead registers, before
// RUN_ALL_TESTS, N = max(1, GTEST_TOTAL_SHARDS) consecutive tests
// "suite.name/shard_K_of_N", K = 0..N-1; test K explores the run numbers i
// with i mod N = K (shard_slice). N consecutive tests fall into N different
// shards, so the shards together explore exactly the run numbers of the
// unsharded exploration, each once, and each shard finds the lowest failing
// run of its slice. Under a --gtest_filter that selects only some of these
// tests the count no longer lines up; run the suite whole. The exhaustive
// search is sharded by parts (docs/exploration.md, "The exhaustive search
// in shards"): test K explores the parts j with j mod N = K, each split
// among its jobs (WSPIPE_JOBS); every test passes only if its parts are
// complete, so the N tests together verify the configuration. With N = 1,
// the one test runs the whole search.
//
// Each test explores with shard_slice(options(base), K, N): the
// environment applies when the test runs (so `base` should not itself come
// from options()), and WSPIPE_SHARD composes with the GoogleTest shards.
// Returns N. Must be called before RUN_ALL_TESTS (at namespace scope through
// WSPIPE_EXPLORATION_TEST, or from main).
std::uint32_t register_exploration(const char* suite, const char* name, emu::KernelFactory make,
                                   emu::ExploreOptions base, const char* file, int line);

// Slice k of n of `opts`: the run numbers (exhaustive: the parts) of opts'
// own shard (shard_index of shard_count) with (i / shard_count) mod n = k.
// n slices partition it.
emu::ExploreOptions shard_slice(emu::ExploreOptions opts, std::uint32_t k, std::uint32_t n);

namespace detail {
inline emu::ExploreOptions options_arg() { return {}; }
inline emu::ExploreOptions options_arg(emu::ExploreOptions o) { return o; }
}  // namespace detail

}  // namespace wspipe::testing

// WSPIPE_EXPECT_CLEAN(factory_or_kernel [, options]) and the other three:
// EXPECT_TRUE / ASSERT_TRUE over the helpers above.
#define WSPIPE_EXPECT_CLEAN(...) EXPECT_TRUE(::wspipe::testing::explores_clean(__VA_ARGS__))
#define WSPIPE_ASSERT_CLEAN(...) ASSERT_TRUE(::wspipe::testing::explores_clean(__VA_ARGS__))
#define WSPIPE_EXPECT_VERIFIED(...) EXPECT_TRUE(::wspipe::testing::explores_verified(__VA_ARGS__))
#define WSPIPE_ASSERT_VERIFIED(...) ASSERT_TRUE(::wspipe::testing::explores_verified(__VA_ARGS__))
#define WSPIPE_EXPECT_FINDS(outcome, ...) EXPECT_TRUE(::wspipe::testing::finds(outcome, __VA_ARGS__))
#define WSPIPE_ASSERT_FINDS(outcome, ...) ASSERT_TRUE(::wspipe::testing::finds(outcome, __VA_ARGS__))

// At namespace scope: registers the tests "suite.name/shard_K_of_N" that
// explore `factory` (a KernelFactory) split over GoogleTest's shards. The
// optional last argument is the base ExploreOptions (an expression, or a
// braced initializer), e.g.
//   WSPIPE_EXPLORATION_TEST(Ring, Clean, make_ring, two_thousand_runs());
#define WSPIPE_EXPLORATION_TEST(suite, name, factory, ...)                                        \
  [[maybe_unused]] static const std::uint32_t wspipe_exploration_##suite##_##name##_ =            \
      ::wspipe::testing::register_exploration(#suite, #name, factory,                            \
                                              ::wspipe::testing::detail::options_arg(__VA_ARGS__), \
                                              __FILE__, __LINE__)
