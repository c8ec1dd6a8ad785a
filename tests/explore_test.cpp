// The exploration API: budgets, portfolios, jobs and shards, shrinking, the
// bounded exhaustive search and its reduction, and bad options.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <sstream>
#include <string>

#include "backends/emu/report.hpp"
#include "backends/emu/settings.hpp"
#include "emu_test_util.hpp"
#include "examples/ring.hpp"
#include "examples/scenarios.hpp"

namespace {

using namespace wspipe;
using test::B;
using test::contains;
using examples::RingBug;

emu::Kernel ring_kernel(std::uint32_t stages, std::uint32_t items, RingBug bug) {
  emu::Kernel k;
  k.launch.warps_per_cta = examples::kRingWarps;
  k.launch.warp_roles = {"producer", "consumer"};
  switch (stages) {
    case 2:
      k.launch.smem_bytes = sizeof(examples::RingStorage<2>);
      k.body = [=] { examples::ring_kernel<B, 2>(items, bug); };
      break;
    default:
      k.launch.smem_bytes = sizeof(examples::RingStorage<4>);
      k.body = [=] { examples::ring_kernel<B, 4>(items, bug); };
      break;
  }
  return k;
}

emu::KernelFactory ring(std::uint32_t stages, std::uint32_t items, RingBug bug) {
  return [=] { return ring_kernel(stages, items, bug); };
}

// A launch that does not fit the kernel is a failure that names the
// problem, never an abort of the test binary (docs/reliability.md): shared
// memory smaller than the kernel's storage is a violation with both sizes;
// fewer warps than the kernel's roles leave barriers that never complete (a
// deadlock naming them); more warps than the hardware allows is BadLaunch.
TEST(explore_LaunchThatDoesNotFit, SharedMemorySmallerThanTheStorageIsAViolationWithTheSizes) {
  emu::Kernel k = ring_kernel(4, 4, RingBug::none);
  k.launch.smem_bytes = 64;  // RingStorage<4> is 128
  const emu::RunResult r = emu::run(k, {});
  ASSERT_EQ(emu::outcome(r), "launch.smem-too-small") << r.report();
  const std::string& m = r.violations[0].message;
  EXPECT_TRUE(contains(m, std::to_string(sizeof(examples::RingStorage<4>)) + " bytes")) << m;
  EXPECT_TRUE(contains(m, "gives each CTA 64 bytes")) << m;
  EXPECT_TRUE(contains(r.violations[0].file, "examples/ring.hpp")) << r.violations[0].file;
  // And explore() reports it as any failure, at the first run.
  const emu::ExploreResult e = emu::explore([] {
    emu::Kernel k2 = ring_kernel(4, 4, RingBug::none);
    k2.launch.smem_bytes = 64;
    return k2;
  }, test::fixed_runs(5));
  ASSERT_TRUE(e.failure.has_value());
  EXPECT_EQ(e.failure->outcome, "launch.smem-too-small");
}

TEST(explore_LaunchThatDoesNotFit, TooFewWarpsIsADeadlockAndTooManyIsBadLaunch) {
  emu::Kernel k = ring_kernel(2, 4, RingBug::none);
  k.launch.warps_per_cta = 1;  // the producer alone: nobody consumes
  k.launch.warp_roles = {"producer"};
  const emu::RunResult r = emu::run(k, {});
  EXPECT_EQ(emu::outcome(r), "deadlock") << r.report();
  k.launch.warps_per_cta = 33;
  EXPECT_THROW(emu::run(k, {}), emu::BadLaunch);
}

// A streamed trace (RunOptions::trace_sink) is the same trace, written as
// the run goes: the sink gets every event once, in order, the run keeps only
// its last ones, and the text the sink writes is the text of the whole trace.
TEST(explore_Resources, AStreamedTraceIsTheWholeTraceHeldInPart) {
  struct Collect final : emu::TraceSink {
    std::ostringstream text;
    emu::TraceWriter writer{text, emu::TraceFormat::text};
    std::uint64_t events = 0, next_step = 0;
    bool in_order = true, finished = false;
    void take(const emu::Trace& t, std::span<const emu::Event> batch) override {
      for (const emu::Event& e : batch) {
        in_order = in_order && e.step >= next_step;
        next_step = e.step;
      }
      events += batch.size();
      writer.write(t, batch);
    }
    void finish(const emu::Trace& t) override {
      take(t, std::span<const emu::Event>(t.events).subspan(t.streamed));
      writer.finish(t);
      finished = true;
    }
  };
  for (const RingBug bug : {RingBug::none, RingBug::no_release}) {
    SCOPED_TRACE(bug == RingBug::none ? "clean" : "deadlock");
    const emu::RunResult whole = emu::run(ring_kernel(4, 40000, bug), {});
    Collect sink;
    emu::RunOptions o;
    o.trace_sink = &sink;
    const emu::RunResult streamed = emu::run(ring_kernel(4, 40000, bug), o);
    ASSERT_TRUE(sink.finished);
    EXPECT_TRUE(sink.in_order);
    EXPECT_EQ(emu::outcome(streamed), emu::outcome(whole));
    std::ostringstream want;
    whole.trace.write_text(want);
    EXPECT_EQ(sink.events, whole.trace.events.size());
    EXPECT_TRUE(sink.text.str() == want.str()) << "the streamed text differs";
    if (bug == RingBug::none) {
      ASSERT_GT(whole.trace.events.size(), std::size_t{200000});  // several batches
      EXPECT_LE(streamed.trace.events.size(), std::size_t{1} << 17);
      EXPECT_EQ(streamed.trace.dropped + streamed.trace.events.size(), whole.trace.events.size());
    }
  }
}

// --max-memory: a launch whose buffers would pass the budget ends with an
// OutOfResources naming what needed the memory and the option; the budget
// is the process's, so what other runs hold counts; within it, the run is
// the same.
TEST(explore_Resources, AMemoryBudgetRefusesALaunchThatDoesNotFit) {
  const std::size_t before = emu::memory_charged();  // the MMA memos of earlier tests on this thread
  emu::RunOptions o;
  o.max_memory_bytes = before + (std::size_t{1} << 20);  // 1 MiB more
  emu::Kernel big = ring_kernel(4, 8, RingBug::none);
  big.launch.num_clusters = 64;
  big.launch.smem_bytes = 200 << 10;  // 64 x 200 KiB
  try {
    (void)emu::run(big, o);
    FAIL() << "no exception";
  } catch (const emu::OutOfResources& e) {
    EXPECT_TRUE(contains(e.what(), "the shared memory of the launch's 64 CTAs")) << e.what();
    EXPECT_TRUE(contains(e.what(), "--max-memory")) << e.what();
  }
  EXPECT_EQ(emu::outcome(emu::run(ring_kernel(4, 8, RingBug::none), o)), "ok");  // one CTA fits
  // What is charged is given back: the same budget serves the next runs.
  EXPECT_EQ(emu::memory_charged(), before);
  for (unsigned jobs : {1u, 2u}) {
    emu::ExploreOptions x = test::fixed_runs(8, jobs);
    x.max_memory_bytes = before + (std::size_t{1} << 20);
    EXPECT_EQ(emu::explore(ring(4, 8, RingBug::none), x).runs, 8u);
    x.max_memory_bytes = 1;
    EXPECT_THROW((void)emu::explore(ring(4, 8, RingBug::none), x), emu::OutOfResources);
  }
  EXPECT_EQ(emu::memory_charged(), before);
}

// An exception out of a kernel's body (a buffer that could not be
// allocated, the kernel's own host code) cannot leave its fiber: it ends the
// run, and run() throws it on the caller's thread after the teardown (it
// terminated the program). Out of memory, explore() says what would help.
TEST(explore_Resources, AnExceptionOutOfTheKernelIsThrownByRunAfterTheTeardown) {
  auto throwing = [](int which) {
    emu::Kernel k = ring_kernel(2, 8, RingBug::none);
    auto body = k.body;
    k.body = [body, which] {
      if (B::warp_idx() == 1) {
        if (which == 0) throw std::runtime_error("the kernel's own error");
        throw std::bad_alloc();
      }
      body();
    };
    return k;
  };
  try {
    (void)emu::run(throwing(0), {});
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the kernel's own error");
  }
  EXPECT_THROW((void)emu::run(throwing(1), {}), std::bad_alloc);
  for (unsigned jobs : {1u, 2u}) {
    try {
      (void)emu::explore([&] { return throwing(1); }, test::fixed_runs(4, jobs));
      FAIL() << "no exception";
    } catch (const emu::OutOfResources& e) {
      EXPECT_TRUE(contains(e.what(), "out of memory exploring with " + std::to_string(jobs) + " job(s)")) << e.what();
      EXPECT_TRUE(contains(e.what(), "--mma-memo-mib 0")) << e.what();
    }
  }
  // The thread that ran them can run again.
  EXPECT_EQ(emu::outcome(emu::run(ring_kernel(2, 8, RingBug::none), {})), "ok");
}

TEST(explore_Budget, RunsStopsAtTheCountAndFindsNothingInACorrectKernel) {
  const auto r = emu::explore(ring(4, 16, RingBug::none), test::fixed_runs(300));
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_EQ(r.runs, 300u);
  EXPECT_GT(r.steps, 300u * 16);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(contains(r.report(), "nothing found"));
}

TEST(explore_Budget, TimeAloneEndsAnExploration) {
  emu::ExploreOptions o;
  o.seconds = 0.3;
  o.jobs = 1;
  const auto r = emu::explore(ring(4, 16, RingBug::none), o);
  EXPECT_TRUE(r.ok());
  EXPECT_GT(r.runs, 10u);
  EXPECT_LT(r.seconds, 5.0);
}

TEST(explore_Portfolio, RunIUsesStrategyIModSizeAndItsMixedSeed) {
  auto o = test::fixed_runs(6);
  o.portfolio = {{emu::StrategyKind::random}, {emu::StrategyKind::pct, 2}};
  o.first_seed = 40;
  std::vector<std::string> seen(6);
  o.on_run = [&](std::uint64_t i, const emu::RunResult& r) { seen[i] = r.schedule.encode(); };
  emu::explore(ring(4, 16, RingBug::none), o);
  for (std::uint64_t i = 0; i < 6; ++i) {
    emu::RunOptions ro;
    ro.trace = false;
    ro.strategy.kind = i % 2 == 0 ? emu::StrategyKind::random : emu::StrategyKind::pct;
    ro.strategy.pct_depth = 2;
    ro.strategy.seed = emu::run_seed(40, i);
    if (i % 2 == 1) {
      emu::RunOptions rr = ro;
      rr.strategy.kind = emu::StrategyKind::round_robin;
      ro.strategy.pct_steps = emu::run(ring_kernel(4, 16, RingBug::none), rr).steps;
    }
    EXPECT_EQ(emu::run(ring_kernel(4, 16, RingBug::none), ro).schedule.encode(), seen[i]) << "run " << i;
  }
}

// An exploration never reports on nothing.
TEST(explore_Budget, TheTimeBudgetStartsOnceTheFirstRunHasRun) {
  for (unsigned jobs : {1u, 2u}) {
    emu::ExploreOptions o;
    o.seconds = 1e-9;
    o.jobs = jobs;
    const auto clean = emu::explore(ring(4, 16, RingBug::none), o);
    EXPECT_GE(clean.runs, 1u) << clean.report();
    // A bug on every schedule is found however small the budget.
    const auto r = emu::explore(ring(2, 4, RingBug::no_release), o);
    ASSERT_FALSE(r.ok()) << r.report();
    EXPECT_EQ(r.failure->outcome, "deadlock");
  }
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.seconds = 1e-9;
  EXPECT_GE(emu::explore(ring(2, 4, RingBug::none), o).runs, 1u);
}

TEST(explore_Budget, AShardThatHoldsNoRunIsRefused) {
  auto o = test::fixed_runs(1);
  o.shard_index = 1;
  o.shard_count = 2;
  try {
    emu::explore(ring(2, 4, RingBug::none), o);
    ADD_FAILURE() << "a shard with no run number below runs was explored";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "shard 1/2: this shard holds no run")) << e.what();
    EXPECT_TRUE(contains(e.what(), "runs = 1")) << e.what();
  }
  o.runs = 2;
  EXPECT_EQ(emu::explore(ring(2, 4, RingBug::none), o).runs, 1u);
}

// PCT measures a run's length with one round-robin run first; a failure
// there is reported (when none of the first runs of the portfolio fails).
TEST(explore_Budget, AFailureInPCTsMeasuringRunIsReported) {
  auto made = std::make_shared<int>(0);
  const emu::KernelFactory make = [made] {
    emu::Kernel k = ring_kernel(2, 4, RingBug::none);
    if ((*made)++ == 0) k.verify = [] { return std::string("wrong only in the first instance"); };
    return k;
  };
  auto o = test::fixed_runs(10);
  o.shrink = false;
  const auto r = emu::explore(make, o);
  ASSERT_FALSE(r.ok()) << "the measuring run's failure was thrown away";
  EXPECT_TRUE(r.failure->measuring_run);
  EXPECT_EQ(r.failure->outcome, "result.mismatch");
  EXPECT_EQ(r.failure->strategy.kind, emu::StrategyKind::round_robin);
  EXPECT_TRUE(contains(r.report(), "failure in the run that measures PCT's run length (rr)")) << r.report();
  EXPECT_EQ(r.runs, 4u) << "one run of each strategy, then the measuring run";
  // A kernel that fails on every schedule is reported as a numbered run.
  const auto every = emu::explore(ring(2, 4, RingBug::no_release), test::fixed_runs(10));
  ASSERT_FALSE(every.ok());
  EXPECT_FALSE(every.failure->measuring_run);
  EXPECT_EQ(every.failure->run, 0u);
}

emu::Kernel racy();

// Run i's seed is mixed from (seed, i), so explorations with
// consecutive seeds do not repeat each other's runs shifted by one (with
// first_seed + i, seed 2's run i was seed 1's run i + 1).
TEST(explore_Seeds, ConsecutiveSeedsExploreDifferentSchedules) {
  auto schedules = [](std::uint64_t seed) {
    auto o = test::fixed_runs(40);
    o.portfolio = {{emu::StrategyKind::random}};
    o.first_seed = seed;
    std::vector<std::string> seen(40);
    o.on_run = [&](std::uint64_t i, const emu::RunResult& r) { seen[i] = r.schedule.encode(); };
    emu::explore(ring(4, 16, RingBug::none), o);
    return seen;
  };
  const auto one = schedules(1), two = schedules(2);
  int shifted = 0, same = 0;
  for (std::size_t i = 0; i + 1 < one.size(); ++i) {
    shifted += two[i] == one[i + 1];
    same += two[i] == one[i];
  }
  EXPECT_LE(shifted, 2) << "seed 2 repeats seed 1 shifted by one run";
  EXPECT_LE(same, 2);
  EXPECT_EQ(emu::run_seed(5, 0), 5u) << "run 0 keeps the seed: `wspipe run --seed 5` is explore's run 0";
  // The first failing run of a bug that needs a particular interleaving,
  // by seed: with first_seed + i it moved down by exactly one per seed.
  auto first_failure = [](std::uint64_t seed) {
    auto o = test::fixed_runs(200);
    o.portfolio = {{emu::StrategyKind::random}};
    o.first_seed = seed;
    o.shrink = false;
    const auto r = emu::explore([] { return racy(); }, o);
    EXPECT_FALSE(r.ok()) << "seed " << seed;
    return r.ok() ? std::uint64_t{0} : r.failure->run;
  };
  std::vector<std::uint64_t> first;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) first.push_back(first_failure(seed));
  bool shift_of_one = true;
  for (std::size_t s = 0; s + 1 < first.size(); ++s)
    if (first[s] >= 1 && first[s + 1] != first[s] - 1) shift_of_one = false;
  EXPECT_FALSE(shift_of_one) << "first failing runs for seeds 1-4: " << first[0] << " " << first[1] << " "
                             << first[2] << " " << first[3];
}

// ---- jobs and shards

TEST(explore_Parallel, ShardsTogetherRunExactlyTheUnshardedRunNumbers) {
  auto collect = [](emu::ExploreOptions o) {
    std::mutex mu;
    std::multiset<std::uint64_t> seen;
    o.on_run = [&](std::uint64_t i, const emu::RunResult&) {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(i);
    };
    emu::explore(ring(2, 8, RingBug::none), o);
    return seen;
  };
  const auto all = collect(test::fixed_runs(97, 2));
  ASSERT_EQ(all.size(), 97u);
  EXPECT_EQ(*all.rbegin(), 96u);
  std::multiset<std::uint64_t> joined;
  for (std::uint32_t s = 0; s < 3; ++s) {
    auto o = test::fixed_runs(97, 2);
    o.shard_index = s;
    o.shard_count = 3;
    const auto part = collect(o);
    for (std::uint64_t i : part) EXPECT_EQ(i % 3, s);
    joined.insert(part.begin(), part.end());
  }
  EXPECT_EQ(joined, all);  // disjoint (a multiset would show repeats) and complete
}

TEST(explore_Parallel, TheSameFailureWhateverTheJobs) {
  // ring/over-arrive fails on many but not all runs of pct:5 with 1 item
  // per phase; the reported run is the lowest that fails.
  for (RingBug bug : {RingBug::over_arrive, RingBug::no_release}) {
    auto o = test::fixed_runs(200, 1);
    o.portfolio = {{emu::StrategyKind::random}, {emu::StrategyKind::pct, 5}};
    o.first_seed = 7;
    const auto one = emu::explore(ring(2, 8, bug), o);
    o.jobs = 2;
    const auto two = emu::explore(ring(2, 8, bug), o);
    ASSERT_FALSE(one.ok());
    ASSERT_FALSE(two.ok());
    EXPECT_EQ(one.failure->run, two.failure->run);
    EXPECT_EQ(one.failure->original, two.failure->original);
    EXPECT_EQ(one.failure->replay_token(), two.failure->replay_token());
    EXPECT_EQ(one.failure->outcome, two.failure->outcome);
  }
}

// A failure that needs a particular interleaving, not found on every run:
// a racy kernel whose second arrive is legal only after warp 1's wait.
emu::Kernel racy() {
  emu::Kernel k;
  k.launch.warps_per_cta = 2;
  k.launch.smem_bytes = 64;
  k.body = [] {
    struct Bars {
      SharedMemBarrier b[1];
    };
    auto& s = B::shared_storage<Bars>();
    if (B::warp_idx() == 0) test::init_bar(s.b[0], 1);
    B::cluster_sync();
    if (B::warp_idx() == 0) {
      B::syncwarp();
      test::elected_arrive(s.b[0]);
      B::syncwarp();
      test::elected_arrive(s.b[0]);
    } else {
      B::syncwarp();
      B::wait(s.b[0], 0);
    }
  };
  return k;
}

TEST(explore_Parallel, LowestFailingRunIsReportedWithJobs) {
  // Which of runs 0..63 fail, each on its own: shard i of i+1 with a budget
  // of i+1 runs is run number i alone.
  std::set<std::uint64_t> failing;
  for (std::uint64_t i = 0; i < 64; ++i) {
    auto one = test::fixed_runs(i + 1, 1);
    one.shard_index = static_cast<std::uint32_t>(i);
    one.shard_count = static_cast<std::uint32_t>(i + 1);
    one.shrink = false;
    const auto r = emu::explore([] { return racy(); }, one);
    if (!r.ok()) failing.insert(i);
  }
  ASSERT_FALSE(failing.empty());
  ASSERT_NE(*failing.begin(), 0u) << "the test wants a kernel whose first run passes";
  for (unsigned jobs : {1u, 2u, 3u}) {
    auto p = test::fixed_runs(64, jobs);
    p.shrink = false;
    const auto r = emu::explore([] { return racy(); }, p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure->run, *failing.begin()) << jobs << " jobs";
  }
}

// ---- shrinking

TEST(explore_Shrink, ShrunkScheduleReplaysToTheSameOutcomeWithNoMorePreemptions) {
  auto o = test::fixed_runs(64, 1);
  const auto r = emu::explore([] { return racy(); }, o);
  ASSERT_FALSE(r.ok());
  const emu::Failure& f = *r.failure;
  EXPECT_EQ(f.outcome, "mbarrier.arrive-before-wait");
  EXPECT_LE(f.shrink.preemptions_after, f.shrink.preemptions_before);
  EXPECT_LE(f.shrink.choices_after, f.shrink.choices_before);
  EXPECT_EQ(f.result.schedule.size(), f.shrink.choices_after);
  EXPECT_EQ(f.result.preemptions(), f.shrink.preemptions_after);
  // The bug needs warp 0 to arrive twice before warp 1 waits: with the
  // default policy running warp 0 on, one deviation at most is needed.
  EXPECT_LE(f.shrink.choices_after, 1u);
  std::string why;
  const auto s = emu::Schedule::decode(f.replay_token(), &why);
  ASSERT_TRUE(s) << why;
  const auto again = emu::replay(racy(), *s, o.run_options());
  EXPECT_EQ(emu::outcome(again), f.outcome);
  EXPECT_EQ(again.steps, f.result.steps);
  EXPECT_FALSE(again.trace.events.empty());
}

TEST(explore_Shrink, NoShrinkReportsTheScheduleAsFound) {
  auto o = test::fixed_runs(64, 1);
  o.shrink = false;
  const auto r = emu::explore([] { return racy(); }, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->result.schedule.unchecked(), r.failure->original.unchecked());
  EXPECT_EQ(r.failure->shrink.choices_before, r.failure->shrink.choices_after);
}

TEST(explore_Shrink, TraceDirGetsTheShrunkRunsTrace) {
  auto o = test::fixed_runs(10, 1);
  o.trace_dir = ::testing::TempDir() + "wspipe-explore-trace";
  const auto r = emu::explore(ring(2, 8, RingBug::no_release), o);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.failure->trace_files.size(), 2u);
  for (const auto& f : r.failure->trace_files) {
    std::FILE* fp = std::fopen(f.c_str(), "rb");
    ASSERT_NE(fp, nullptr) << f;
    std::fseek(fp, 0, SEEK_END);
    EXPECT_GT(std::ftell(fp), 100) << f;
    std::fclose(fp);
  }
}

// Every catalogued broken variant: the exploration finds it, the shrunk
// schedule replays (strictly) to the same outcome, and is no larger.
TEST(explore_Shrink, EveryCatalogueVariantShrinksToAReplayableSchedule) {
  for (const auto& sc : examples::catalogue()) {
    for (const auto& v : sc.variants) {
      if (v.name.empty()) continue;
      SCOPED_TRACE(sc.name + "/" + v.name);
      emu::OptionValues values;
      for (const auto& o : sc.options) values[o.name] = o.def;
      for (const auto& [k, x] : v.pinned) values[k] = x;
      if (sc.resolve) sc.resolve(values);
      const emu::KernelFactory make = [&] { return sc.prepare(v.name, values); };
      auto o = test::fixed_runs(500, 2);
      o.shrink_seconds = 10;
      o.lane_divergence = v.lane_divergence;
      o.async_reorder = v.async_reorder;
      const auto r = emu::explore(make, o);
      ASSERT_FALSE(r.ok());
      const emu::Failure& f = *r.failure;
      EXPECT_TRUE(emu::expected_outcome(v.expect, f.outcome)) << f.outcome << " is not " << v.expect;
      EXPECT_LE(f.shrink.preemptions_after, f.shrink.preemptions_before);
      std::string why;
      const auto s = emu::Schedule::decode(f.replay_token(), &why);
      ASSERT_TRUE(s) << why;
      EXPECT_EQ(emu::outcome(emu::replay(make(), *s, o.run_options())), f.outcome);
    }
  }
}

// ---- bounded exhaustive search

emu::ExploreOptions exhaustive(std::uint32_t k, bool reduce = true) {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.preemptions = k;
  o.reduce = reduce;
  o.seconds = 0;
  return o;
}

TEST(explore_Exhaustive, CoversRingTwoStagesFourItemsWithTwoPreemptions) {
  const auto r = emu::explore(ring(2, 4, RingBug::none), exhaustive(2));
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_TRUE(r.complete);
  EXPECT_GT(r.runs + r.pruned, 1u);  // it branched
  // Every schedule within each bound, unreduced: the bound limits the
  // search (more schedules at each bound); asked for the reduction, a
  // bounded search runs the same schedules (none is sound under a bound).
  std::uint64_t below = 0;
  for (std::uint32_t k = 0; k <= 2; ++k) {
    const auto every = emu::explore(ring(2, 4, RingBug::none), exhaustive(k, false));
    EXPECT_TRUE(every.ok() && every.complete) << every.report();
    EXPECT_GT(every.runs, below) << "bound " << k;
    EXPECT_EQ(every.pruned, 0u) << "bound " << k;
    below = every.runs;
  }
  EXPECT_EQ(r.runs, below);
  EXPECT_EQ(r.pruned, 0u);
  // Unbounded, source sets: the producer and the consumer only wait for
  // each other's phases, so every schedule is equivalent to the first.
  auto o = exhaustive(0);
  o.preemptions.reset();
  const auto all = emu::explore(ring(2, 4, RingBug::none), o);
  EXPECT_TRUE(all.ok() && all.complete) << all.report();
  EXPECT_EQ(all.runs, 1u);
}

TEST(explore_Exhaustive, FindsEveryBrokenRingVariant) {
  for (auto [bug, want] : {std::pair{RingBug::no_release, "deadlock"}, {RingBug::over_arrive, "mbarrier.over-arrival"},
                           {RingBug::producer_phase_0, "deadlock"}}) {
    const auto r = emu::explore(ring(2, 4, bug), exhaustive(2));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure->outcome, want);
    EXPECT_FALSE(r.complete);
  }
  // The racy kernel fails only under some interleavings: exhaustive search
  // finds one with no preemption at all (warp 0 runs on and arrives twice).
  const auto r = emu::explore([] { return racy(); }, exhaustive(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->outcome, "mbarrier.arrive-before-wait");
}

// --jobs: the search split among threads explores the
// same tree as one job: the same classes, pruned runs and verdict, for the
// source sets and the bounded search. A failure is found whatever the jobs.
emu::OptionValues scenario_values(const emu::Scenario& sc, std::vector<std::pair<const char*, std::uint64_t>> set) {
  emu::OptionValues values;
  for (const auto& opt : sc.options) values[opt.name] = opt.def;
  for (const auto& [k, x] : set) values.at(k) = x;
  if (sc.resolve) sc.resolve(values);
  return values;
}

// The four configurations of docs/exploration.md's cost table.
const std::vector<std::pair<const char*, std::vector<std::pair<const char*, std::uint64_t>>>>& table_sizes() {
  static const std::vector<std::pair<const char*, std::vector<std::pair<const char*, std::uint64_t>>>> sizes = {
      {"ring", {{"stages", 4}, {"items", 8}}},
      {"tile-reduce", {{"rows", 32}, {"stages", 1}}},
      {"gemm", {{"m", 128}, {"n", 64}, {"k", 128}, {"stages", 1}, {"accum-stages", 1}}},
      {"persistent-gemm", {{"m", 256}, {"n", 64}, {"k", 64}, {"clusters", 1}, {"clc-stages", 1}}}};
  return sizes;
}

// A broken variant's options at one of those sizes, as the program builds
// them: the defaults, the variant's pins, the configuration's values; none
// where a pin or what the scenario derives contradicts those, or the
// scenario rejects the result.
std::optional<emu::OptionValues> variant_at(const emu::Scenario& sc, const emu::VariantSpec& v,
                                            const std::vector<std::pair<const char*, std::uint64_t>>& set) {
  emu::OptionValues values;
  for (const auto& opt : sc.options) values[opt.name] = opt.def;
  for (const auto& [k, x] : v.pinned) values[k] = x;
  for (const auto& [k, x] : set) {
    if (v.pinned.count(k) != 0 && v.pinned.at(k) != x) return std::nullopt;
    values.at(k) = x;
  }
  if (sc.resolve) sc.resolve(values);
  for (const auto& [k, x] : set)
    if (values.at(k) != x) return std::nullopt;
  try {
    (void)sc.prepare(v.name, values);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return values;
}

// The unbounded search finds every broken variant of their scenarios that
// shows at that size, with an outcome the catalogue promises, and verifies
// clean the five that need a larger one. A variant that pins an option to
// another value than the configuration's is refused there (the program
// says so) and skipped.
TEST(explore_Exhaustive, TheIssueConfigurationsFindEveryVariantThatShowsThere) {
  const std::set<std::string> clean_here = {"tile-reduce/local-release", "tile-reduce/release-before-read",
                                            "gemm/no-accum-release", "gemm/stale-accumulator",
                                            "gemm/non-uniform-tmem-addr"};
  std::size_t found = 0, verified = 0, skipped = 0;
  for (const auto& [name, set] : table_sizes()) {
    const emu::Scenario& sc = *wspipe::examples::find_scenario(name);
    for (const auto& v : sc.variants) {
      if (v.name.empty()) continue;
      const std::string id = sc.name + "/" + v.name;
      SCOPED_TRACE(id);
      const std::optional<emu::OptionValues> values = variant_at(sc, v, set);
      if (!values) {
        ++skipped;
        continue;
      }
      const emu::KernelFactory make = [&] { return sc.prepare(v.name, *values); };
      auto o = exhaustive(0);
      o.preemptions.reset();
      o.seconds = 120;  // a bound on a broken search, not the expected time (about a second in all, optimised)
      o.jobs = 2;
      o.shrink = false;
      o.lane_divergence = v.lane_divergence;
      o.async_reorder = v.async_reorder;
      const auto r = emu::explore(make, o);
      if (clean_here.count(id) != 0) {
        EXPECT_EQ(r.verdict(), emu::Verdict::verified) << r.report();
        ++verified;
      } else {
        ASSERT_FALSE(r.ok()) << r.report();
        EXPECT_TRUE(emu::expected_outcome(v.expect, r.failure->outcome)) << r.failure->outcome << " is not " << v.expect;
        ++found;
      }
    }
  }
  EXPECT_EQ(verified, clean_here.size());
  // ring/early-release is catalogued only where the catalogue was compiled
  // with the access instrumentation (not in the asan, tsan and fuzz presets).
  const auto& ring_variants = wspipe::examples::find_scenario("ring")->variants;
  const bool early_release = std::any_of(ring_variants.begin(), ring_variants.end(),
                                         [](const auto& v) { return v.name == "early-release"; });
  EXPECT_EQ(found, early_release ? 23u : 22u);
  EXPECT_EQ(skipped, 8u);
}

// "minimal" and "at least N needed" are claims: no schedule with fewer
// preemptions has the outcome. Each broken variant of those configurations
// is found and shrunk (the default portfolio, 2 s of shrinking); where the
// shrinker proved a count, the search of every schedule one preemption
// below it must not meet the outcome. (Under a bound, a reduction left out
// schedules whose only equivalents needed more preemptions, and the
// shrinker called a run minimal that a search without it undercut.)
TEST(explore_Exhaustive, AShrunkRunCalledMinimalHasNoRunWithFewerPreemptions) {
  std::size_t proved = 0, checked = 0;
  for (const auto& [name, set] : table_sizes()) {
    const emu::Scenario& sc = *wspipe::examples::find_scenario(name);
    for (const auto& v : sc.variants) {
      if (v.name.empty() || v.expect == "ok") continue;
      const std::string id = sc.name + "/" + v.name;
      SCOPED_TRACE(id);
      const std::optional<emu::OptionValues> values = variant_at(sc, v, set);
      if (!values) continue;
      const emu::KernelFactory make = [&] { return sc.prepare(v.name, *values); };
      emu::ExploreOptions o;
      o.runs = 200;
      o.seconds = 0;
      o.jobs = 1;
      o.shrink_seconds = 2;
      o.lane_divergence = v.lane_divergence;
      o.async_reorder = v.async_reorder;
      const auto r = emu::explore(make, o);
      if (r.ok()) continue;  // clean at this size, or not met in 200 runs
      const emu::ShrinkStats& st = r.failure->shrink;
      if (st.preemptions_needed == 0) continue;  // nothing proved
      ++proved;
      auto below = exhaustive(static_cast<std::uint32_t>(st.preemptions_needed - 1), false);
      below.runs = 200'000;
      below.jobs = 1;
      below.shrink = false;
      below.lane_divergence = v.lane_divergence;
      below.async_reorder = v.async_reorder;
      const auto b = emu::explore(make, below);
      if (!b.ok() && b.failure->outcome != r.failure->outcome) continue;  // another failure first: undecided
      ++checked;
      EXPECT_TRUE(b.ok()) << "shrunk to " << st.preemptions_after << " preemptions, " << st.preemptions_needed
                          << " proved needed; with " << st.preemptions_needed - 1 << ":\n"
                          << b.report();
      EXPECT_TRUE(b.complete) << b.report();
    }
  }
  std::printf("[ minimal ] %zu shrunk runs with a count proved, %zu checked against every schedule below it\n",
              proved, checked);
  EXPECT_GT(checked, 0u);
}

// In the explore_Parallel suite: the tsan preset runs it.
// A ring the exhaustive search finds broken at once, and the outcome: the
// plain accesses' race where they are instrumented; else a deadlock.
std::pair<emu::KernelFactory, std::string> broken_ring_for_searches() {
  const emu::Scenario& sc = *wspipe::examples::find_scenario("ring");
  const emu::OptionValues values = scenario_values(sc, {{"stages", 2}, {"items", 4}});
#if defined(WSPIPE_INSTRUMENTED_ACCESSES)
  const char *variant = "early-release", *outcome = "race.smem";
#else
  const char *variant = "no-release", *outcome = "deadlock";
#endif
  return {[&sc, values, variant] { return sc.prepare(variant, values); }, outcome};
}

TEST(explore_Parallel, TheExhaustiveSearchSplitAmongJobsHasTheSameCounts) {
  const emu::Scenario& gemm = *wspipe::examples::find_scenario("gemm");
  const emu::Scenario& tile = *wspipe::examples::find_scenario("tile-reduce");
  const emu::OptionValues gv =
      scenario_values(gemm, {{"m", 128}, {"n", 64}, {"k", 128}, {"stages", 1}, {"accum-stages", 1}});
  const emu::OptionValues tv = scenario_values(tile, {{"rows", 32}, {"stages", 1}});
  struct Case {
    const emu::Scenario* sc;
    const emu::OptionValues* values;
    std::optional<std::uint32_t> bound;
  };
#if defined(__SANITIZE_THREAD__) || !defined(NDEBUG)
  // ThreadSanitizer and the Debug builds: the source sets on gemm only.
  const std::vector<Case> cases = {{&gemm, &gv, std::nullopt}};
  const std::vector<unsigned> job_counts = {1, 2};
#else
  const std::vector<Case> cases = {{&gemm, &gv, std::nullopt}, {&tile, &tv, std::nullopt}, {&gemm, &gv, 1u}};
  const std::vector<unsigned> job_counts = {1, 2, 3};
#endif
  for (const Case& c : cases) {
    std::optional<emu::ExploreResult> first;
    for (const unsigned jobs : job_counts) {
      auto o = exhaustive(0);
      o.preemptions = c.bound;
      o.jobs = jobs;
      const auto r = emu::explore([&] { return c.sc->prepare("", *c.values); }, o);
      SCOPED_TRACE(c.sc->name + ", " + std::to_string(jobs) + " jobs");
      EXPECT_TRUE(r.ok() && r.complete) << r.report();
      if (!first) {
        first = r;
        EXPECT_GT(r.runs, 1u);
        continue;
      }
      EXPECT_EQ(r.runs, first->runs);
      EXPECT_EQ(r.pruned, first->pruned);
      EXPECT_EQ(r.steps, first->steps);
    }
  }
  // A failure: found with any number of jobs.
  const auto [broken, outcome] = broken_ring_for_searches();
  for (const unsigned jobs : {1u, 2u}) {
    auto o = exhaustive(0);
    o.preemptions.reset();
    o.jobs = jobs;
    o.shrink = false;
    const auto r = emu::explore(broken, o);
    ASSERT_FALSE(r.ok()) << jobs << " jobs";
    EXPECT_EQ(r.failure->outcome, outcome);
    EXPECT_FALSE(r.complete);
  }
}

// The complete search on one job takes the subtrees below the branches
// nearest its first schedule in turn with the one it is in (SearchTree):
// a bug one branch near the root needs is met within a few runs, not after
// the first subtree is explored. tile-reduce's unwaited weights on 8 tiles
// and 4 stages: one depth-first search ran 29,085 schedules in 40 s without
// meeting it (its first subtree holds every order of the tiles' loads).
TEST(explore_Exhaustive, TheCompleteSearchMeetsABugNearItsFirstScheduleOnOneJob) {
  const emu::Scenario& tile = *wspipe::examples::find_scenario("tile-reduce");
  const emu::OptionValues v = scenario_values(tile, {{"rows", 256}, {"stages", 4}, {"weights", 1}});
  auto o = exhaustive(0);
  o.preemptions.reset();
  o.jobs = 1;
  o.runs = 200;
  o.shrink = false;
  const auto r = emu::explore([&] { return tile.prepare("unwaited-weights", v); }, o);
  ASSERT_FALSE(r.ok()) << r.report();
  EXPECT_EQ(r.failure->outcome, "race.smem");
  // And on two jobs: the same order, the searches in hand shared out.
  o.jobs = 2;
  const auto r2 = emu::explore([&] { return tile.prepare("unwaited-weights", v); }, o);
  ASSERT_FALSE(r2.ok()) << r2.report();
}

// --shard with the exhaustive search (docs/exploration.md, "The exhaustive
// search in shards"): its parts do not depend on N, so the shards' runs,
// pruned runs and steps add up to the same totals for every N, --shard 0/1
// (ExploreOptions::sharded) included; the jobs within a shard change
// nothing; every shard is verified on its own parts; and a failure is
// found by a shard, the others finding it too or verifying their parts.
TEST(explore_Parallel, TheShardedExhaustiveSearchHasTheSameTotalsForEveryN) {
  const emu::Scenario& gemm = *wspipe::examples::find_scenario("gemm");
  const emu::Scenario& tile = *wspipe::examples::find_scenario("tile-reduce");
  const emu::OptionValues gv =
      scenario_values(gemm, {{"m", 128}, {"n", 64}, {"k", 128}, {"stages", 1}, {"accum-stages", 1}});
  const emu::OptionValues tv = scenario_values(tile, {{"rows", 64}, {"stages", 1}, {"cluster", 2}});
  struct Case {
    const emu::Scenario* sc;
    const emu::OptionValues* values;
  };
#if defined(__SANITIZE_THREAD__) || !defined(NDEBUG)
  const std::vector<Case> cases = {{&gemm, &gv}};
#else
  const std::vector<Case> cases = {{&gemm, &gv}, {&tile, &tv}};
#endif
  for (const Case& c : cases) {
    const auto make = [&] { return c.sc->prepare("", *c.values); };
    auto o = exhaustive(0);
    o.preemptions.reset();
    o.jobs = 1;
    const auto whole = emu::explore(make, o);
    ASSERT_TRUE(whole.ok() && whole.complete) << whole.report();
    EXPECT_FALSE(whole.sharded);
    struct Totals {
      std::uint64_t runs = 0, pruned = 0, steps = 0, parts = 0;
      bool operator==(const Totals&) const = default;
    };
    std::optional<Totals> first;
    std::uint64_t parts_total = 0;
    for (const std::uint32_t n : {1u, 2u, 3u}) {
      Totals t;
      for (std::uint32_t i = 0; i < n; ++i) {
        o.shard_index = i;
        o.shard_count = n;
        o.sharded = true;
        const auto r = emu::explore(make, o);
        SCOPED_TRACE(c.sc->name + ", shard " + std::to_string(i) + "/" + std::to_string(n));
        EXPECT_TRUE(r.ok() && r.complete && r.sharded) << r.report();
        EXPECT_EQ(r.verdict(), emu::Verdict::verified);
        EXPECT_EQ(r.shard_index, i);
        EXPECT_NE(r.report().find("of the sharded search"), std::string::npos) << r.report();
        if (parts_total == 0) parts_total = r.parts_total;
        EXPECT_EQ(r.parts_total, parts_total);
        t.runs += r.runs;
        t.pruned += r.pruned;
        t.steps += r.steps;
        t.parts += r.parts;
      }
      EXPECT_EQ(t.parts, parts_total) << n << " shards";
      if (!first) first = t;
      EXPECT_TRUE(t == *first) << n << " shards: " << t.runs << " runs (+" << t.pruned << "), against "
                               << first->runs << " (+" << first->pruned << ")";
    }
    EXPECT_GT(parts_total, 2u) << c.sc->name;
    // Every class is explored at least once, as by the whole search.
    EXPECT_GE(first->runs, whole.runs);
    // The jobs within a shard split its parts as they split one search.
    o.shard_index = 1;
    o.shard_count = 2;
    o.jobs = 1;
    const auto one_job = emu::explore(make, o);
    o.jobs = 2;
    const auto two_jobs = emu::explore(make, o);
    EXPECT_EQ(one_job.runs, two_jobs.runs);
    EXPECT_EQ(one_job.pruned, two_jobs.pruned);
    EXPECT_EQ(one_job.steps, two_jobs.steps);
  }
  // A failure: some shard finds it; each of the others finds it too or
  // verifies its parts.
  const auto [broken, outcome] = broken_ring_for_searches();
  unsigned found = 0;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto o = exhaustive(0);
    o.preemptions.reset();
    o.jobs = 1;
    o.shrink = false;
    o.shard_index = i;
    o.shard_count = 2;
    const auto r = emu::explore(broken, o);
    if (r.ok()) {
      EXPECT_EQ(r.verdict(), emu::Verdict::verified) << r.report();
    } else {
      ++found;
      EXPECT_EQ(r.failure->outcome, outcome);
    }
  }
  EXPECT_GE(found, 1u);
}

TEST(explore_Exhaustive, ARunBudgetLeavesItIncomplete) {
  auto o = exhaustive(3);
  o.runs = 5;
  const auto r = emu::explore(ring(2, 4, RingBug::none), o);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.complete);
  EXPECT_LE(r.runs + r.pruned, 5u);
}

// Three warps, two barriers; what each try_wait returned (spurious try_wait:
// it may time out) depends on the order of the arrives and the waits. The
// final states reached are the interleavings that matter; the other steps
// (syncwarp, the fibers' starts) commute with everything.
struct Observed {
  std::mutex mu;
  std::set<std::string> states;
};

// A kernel of three warps whose final state (each try_wait's answer) goes
// to `seen`; with `fail_on`, that state fails its verify.
emu::KernelFactory observer(std::shared_ptr<Observed> seen, std::string fail_on = {}) {
  return [seen, fail_on] {
    auto r = std::make_shared<std::array<int, 3>>();
    emu::Kernel k;
    k.launch.warps_per_cta = 3;
    k.launch.smem_bytes = 64;
    k.body = [r] {
      struct Bars {
        SharedMemBarrier b[2];
      };
      auto& s = B::shared_storage<Bars>();
      if (B::warp_idx() == 0) {
        test::init_bar(s.b[0], 1);
        test::init_bar(s.b[1], 1);
        B::fence_init();
      }
      B::cluster_sync();
      switch (B::warp_idx()) {
        case 0:
          B::syncwarp();
          test::elected_arrive(s.b[0]);
          B::syncwarp();
          test::elected_arrive(s.b[1]);
          break;
        case 1:
          B::syncwarp();
          (*r)[0] = B::try_wait(s.b[0], 0);
          B::syncwarp();
          break;
        default:
          (*r)[1] = B::try_wait(s.b[1], 0);
          B::syncwarp();
          (*r)[2] = B::try_wait(s.b[0], 0);
          break;
      }
    };
    k.verify = [r, seen, fail_on] {
      const std::string state = std::to_string((*r)[0]) + std::to_string((*r)[1]) + std::to_string((*r)[2]);
      std::lock_guard<std::mutex> lock(seen->mu);
      seen->states.insert(state);
      return state == fail_on ? "the state " + state : std::string();
    };
    return k;
  };
}

TEST(explore_Exhaustive, ReductionReachesTheSameFinalStatesWithFewerSchedules) {
  // Every state: the unreduced search at bound 3 reaches all six (an
  // unbounded unreduced one, 68 million schedules, reaches no more).
  auto every = std::make_shared<Observed>();
  auto o = exhaustive(3, false);
  o.spurious_try_wait = true;
  const auto all = emu::explore(observer(every), o);
  ASSERT_TRUE(all.ok() && all.complete);
  EXPECT_EQ(every->states.size(), 6u);
  // Unbounded, source sets: the same states, in one schedule each.
  auto dpor = std::make_shared<Observed>();
  o.preemptions.reset();
  o.reduce = true;
  const auto d = emu::explore(observer(dpor), o);
  ASSERT_TRUE(d.ok() && d.complete);
  EXPECT_EQ(dpor->states, every->states);
  EXPECT_EQ(d.runs, every->states.size());
  std::printf("[ reduction ] unbounded: %zu final states in %llu schedules (+%llu pruned)\n", dpor->states.size(),
              static_cast<unsigned long long>(d.runs), static_cast<unsigned long long>(d.pruned));
  for (std::uint32_t k : {1u, 2u, 3u}) {
    auto full = std::make_shared<Observed>();
    auto reduced = std::make_shared<Observed>();
    o = exhaustive(k, false);
    o.spurious_try_wait = true;
    const auto a = emu::explore(observer(full), o);
    o.reduce = true;
    const auto b = emu::explore(observer(reduced), o);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a.complete && b.complete);
    // Under a bound, a reduction may leave out a schedule whose only
    // equivalent explored one needs more preemptions (sleep sets reached 1
    // of the 3 states at bound 1 here): a bounded search runs every
    // schedule within it, reduction asked for or not.
    EXPECT_EQ(reduced->states, full->states) << "bound " << k;
    EXPECT_GT(full->states.size(), 1u);
    EXPECT_EQ(b.runs, a.runs) << "bound " << k;
    std::printf("[ reduction ] bound %u: %zu final states, %zu reduced; %llu schedules unreduced, %llu reduced "
                "(+%llu pruned)\n",
                k, full->states.size(), reduced->states.size(), static_cast<unsigned long long>(a.runs),
                static_cast<unsigned long long>(b.runs), static_cast<unsigned long long>(b.pruned));
  }
}

// The shrinker's proofs on the kernel above, failing on each of its final
// states in turn: where it calls a run minimal with N preemptions, or says
// N are needed, no schedule within N - 1 has the state. (Sleep sets under a
// bound reached 1 of its 3 states at bound 1: a proof that used them could
// call a state unreachable there that is.)
TEST(explore_Exhaustive, TheShrinkersProofsHoldOnEachFinalState) {
  auto every = std::make_shared<Observed>();
  auto o = exhaustive(3, false);
  ASSERT_TRUE(emu::explore(observer(every), o).complete);
  std::size_t proved = 0;
  for (const std::string& state : every->states) {
    SCOPED_TRACE(state);
    auto seen = std::make_shared<Observed>();
    emu::ExploreOptions find;
    find.runs = 400;
    find.seconds = 0;
    find.jobs = 1;
    find.shrink_seconds = 5;
    const auto r = emu::explore(observer(seen, state), find);
    ASSERT_FALSE(r.ok()) << r.report();
    const emu::ShrinkStats& st = r.failure->shrink;
    if (st.preemptions_needed == 0) continue;
    ++proved;
    auto below = std::make_shared<Observed>();
    const auto b = emu::explore(observer(below), exhaustive(static_cast<std::uint32_t>(st.preemptions_needed - 1), false));
    ASSERT_TRUE(b.complete);
    EXPECT_EQ(below->states.count(state), 0u)
        << emu::shrunk_line(st) << "but a schedule within " << st.preemptions_needed - 1 << " preemption(s) has it";
  }
  EXPECT_GT(proved, 0u);
}

// (Plain accesses are seen only where the test is compiled for the checker:
// not in the asan, tsan and fuzz presets.)
#if defined(WSPIPE_INSTRUMENTED_ACCESSES)
// Two warps, one plain int and a barrier: warp 1 loads the int, checks it
// is still 0 and arrives; warp 0 stores 1 and waits for that arrival.
// Nothing orders the store after the load. With the race checker on, the
// pair is a race.smem in either order; off, only the store-first order
// shows (kernel.check). The default runs the load first; in the branch
// where warp 0 stores first, warp 0 then blocks, and unless the two steps'
// footprints hold the int, warp 1's load commutes with the store: asleep,
// the branch is cut, and the failing order is lost.
emu::KernelFactory plain_pair() {
  return [] {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.smem_bytes = 64;
    k.body = [] {
      struct S {
        SharedMemBarrier bar;
        int flag;
      };
      auto& s = B::shared_storage<S>();
      if (B::warp_idx() == 0) test::init_bar(s.bar, 1);
      B::cluster_sync();
      B::syncwarp();  // a step of no footprint: the cluster barrier's release orders both warps
      if (B::warp_idx() == 0) {
        B::elect_one([&] { s.flag = 1; });
        B::wait(s.bar, 0);
      } else {
        const int v = s.flag;
        B::check(v == 0, "the flag is still clear");
        test::elected_arrive(s.bar);
      }
    };
    return k;
  };
}

TEST(explore_Exhaustive, WithoutTheRaceCheckerPlainAccessesAreInTheFootprints) {
  for (const bool reduce : {false, true}) {
    auto o = exhaustive(1, reduce);  // warp 0 first is a preemption
    o.shrink = false;
    o.race_check = false;
    const auto r = emu::explore(plain_pair(), o);
    ASSERT_FALSE(r.ok()) << (reduce ? "reduced" : "unreduced") << ": the order that loads the 1 was not explored";
    EXPECT_EQ(r.failure->outcome, "kernel.check");
  }
  auto o = exhaustive(0);
  o.shrink = false;
  const auto r = emu::explore(plain_pair(), o);  // race checker on: reported in the default order
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->outcome, "race.smem");

  // The footprints themselves: a step's plain shared-memory access is a
  // resource (kind 5, the CTA, the 16-byte chunk) with the checker off, and
  // none with it on.
  struct Recorder final : emu::Strategy {
    std::vector<emu::Footprint> steps;
    std::optional<std::uint32_t> pick(const emu::Choice& c) override { return c.preferred; }
    bool wants_footprints() const override { return true; }
    void stepped(std::uint32_t, const emu::Footprint& fp) override { steps.push_back(fp); }
  };
  auto smem_resources = [](bool race_check) {
    Recorder rec;
    emu::RunOptions ro;
    ro.trace = false;
    ro.race_check = race_check;
    ro.strategy.kind = emu::StrategyKind::custom;
    ro.strategy.shared = &rec;
    (void)emu::run(plain_pair()(), ro);
    std::set<std::uint64_t> ids;
    for (const auto& fp : rec.steps)
      for (const std::uint64_t id : fp)
        if (id != emu::kGlobalResource && emu::footprint_kind(id) == 5) ids.insert(id);
    return ids;
  };
  const auto off = smem_resources(false);
  const std::uint64_t flag_chunk = sizeof(SharedMemBarrier) / 16;  // CTA 0
  EXPECT_EQ(off, (std::set<std::uint64_t>{emu::footprint_entry(5, flag_chunk, emu::Touch::read),
                                          emu::footprint_entry(5, flag_chunk, emu::Touch::write)}))
      << "the int's chunk, written by the store and read by the load";
  EXPECT_TRUE(smem_resources(true).empty());
}
#endif

// ---- bad options

TEST(explore_Options, NonsenseIsRejectedNamingTheValue) {
  auto expect_bad = [](emu::ExploreOptions o, const std::string& part) {
    try {
      emu::explore(ring(2, 4, RingBug::none), o);
      ADD_FAILURE() << "accepted; wanted an error naming " << part;
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(contains(e.what(), part)) << e.what();
    }
  };
  auto o = test::fixed_runs(10);
  o.shard_index = 3;
  o.shard_count = 2;
  expect_bad(o, "shard 3/2");
  o = test::fixed_runs(10);
  o.preemptions = 2;
  expect_bad(o, "preemption bound needs the exhaustive");
  o = test::fixed_runs(10);
  o.portfolio.clear();
  expect_bad(o, "portfolio is empty");
  o = test::fixed_runs(10);
  o.jobs = 5000;
  expect_bad(o, "5000");
  o = test::fixed_runs(0);
  expect_bad(o, "no budget");
  o = exhaustive(2);
  o.portfolio.push_back({emu::StrategyKind::random});
  expect_bad(o, "cannot share a portfolio");
  std::string why;
  EXPECT_FALSE(emu::parse_portfolio("random,pct:0", &why));
  EXPECT_TRUE(contains(why, "depth")) << why;
  EXPECT_FALSE(emu::parse_portfolio("random,fifo", &why));
  EXPECT_TRUE(contains(why, "fifo")) << why;
  const auto p = emu::parse_portfolio("random,pct:5,rr", &why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(emu::to_string(*p), "random,pct:5,rr");
  EXPECT_EQ(emu::to_string(emu::ExploreOptions{}.portfolio), "random,pct:3,stall");
  const auto q = emu::parse_portfolio("stall,random", &why);
  ASSERT_TRUE(q) << why;
  EXPECT_EQ(emu::to_string(*q), "stall,random");
}

// The stalled warp: one warp, drawn per run, does not move for a stretch
// while another actor can progress (it moves when it alone can, or, now
// and then, when its peers can only time out), and the runs of a seed are
// the same. Three warps that can always progress, over 300 steps of a run
// measured at 100: the stretch's length is drawn up to 100 steps, so in
// most runs some warp sits out 30 steps or more in a row, which uniform
// picks (2/3 a step) do about once in 190,000 windows.
TEST(explore_Strategy, AStalledWarpSitsOutAStretchWhileOthersProgress) {
  const std::uint32_t all[3] = {0, 1, 2};
  const std::uint8_t progress[3] = {0, 0, 0};
  const std::uint8_t spinning[3] = {1, 1, 0};  // warps 0 and 1 can only time out
  auto picks = [&](std::uint64_t seed, const std::uint8_t* spin, std::uint64_t steps,
                   emu::StrategyKind kind = emu::StrategyKind::stall) {
    emu::StrategyParams params;
    params.kind = kind;
    params.seed = seed;
    params.pct_steps = 100;
    const auto s = emu::make_strategy(params, 3);
    std::vector<std::uint32_t> out;
    for (std::uint64_t step = 1; step <= steps; ++step) {
      const auto a = s->pick({.enabled = all, .spin = spin, .n = 3, .step = step, .index = step - 1});
      EXPECT_TRUE(a && *a < 3);
      out.push_back(a.value_or(0));
    }
    return out;
  };
  auto sits_out = [](const std::vector<std::uint32_t>& run) {
    std::uint32_t longest = 0;
    for (std::uint32_t a = 0; a < 3; ++a)
      for (std::uint32_t k = 0, gap = 0; k < run.size(); ++k) {
        gap = run[k] == a ? 0 : gap + 1;
        longest = std::max(longest, gap);
      }
    return longest >= 30;
  };
  std::uint32_t stalled = 0, random = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const auto run = picks(seed, progress, 300);
    EXPECT_EQ(run, picks(seed, progress, 300)) << "seed " << seed;
    stalled += sits_out(run) ? 1 : 0;
    random += sits_out(picks(seed, progress, 300, emu::StrategyKind::random)) ? 1 : 0;
  }
  EXPECT_GE(stalled, 20u);
  EXPECT_EQ(random, 0u);
  // Only warp 2 can progress: it is picked at every step where it is not
  // the held one, and the spinning warps get the steps it sits out.
  std::uint32_t held_out = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const auto run = picks(seed, spinning, 300);
    held_out += static_cast<std::uint32_t>(std::count_if(run.begin(), run.end(), [](std::uint32_t a) { return a != 2; }));
  }
  EXPECT_GT(held_out, 0u) << "warp 2 is held in some runs";
}

// ExploreOptions is its runs' RunOptions: what it sets is what each run
// gets, nothing copied, with the strategy and the trace explore()'s own.
TEST(explore_Options, RunOptionsAreItsOwn) {
  emu::ExploreOptions o;
  o.max_steps = 900;
  o.lane_divergence = true;
  o.race_check = false;
  o.mma_memo_bytes = 0;
  o.trace = true;
  o.strategy.kind = emu::StrategyKind::round_robin;
  const emu::RunOptions r = o.run_options();
  EXPECT_EQ(r.max_steps, 900u);
  EXPECT_TRUE(r.lane_divergence);
  EXPECT_FALSE(r.race_check);
  EXPECT_EQ(r.mma_memo_bytes, 0u);
  EXPECT_FALSE(r.trace) << "explore() traces only the replay of a failure";
  EXPECT_EQ(r.strategy.kind, emu::RunOptions{}.strategy.kind) << "the strategy is explore()'s";
  // A budget of 20 steps makes the ring a livelock.
  o = test::fixed_runs(1);
  o.max_steps = 20;
  EXPECT_EQ(emu::explore(ring(2, 4, RingBug::none), o).failure->outcome, "livelock");
}

// A kernel that livelocks: two warps polling, with test_wait (each poll a
// step that makes progress), a phase nobody completes.
emu::KernelFactory spinning_forever() {
  return [] {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.smem_bytes = sizeof(SharedMemBarrier);
    k.body = [] {
      auto& bar = B::shared_storage<SharedMemBarrier>();
      if (B::warp_idx() == 0) test::init_bar(bar, 1);
      B::cluster_sync();
      while (!B::test_wait(bar, 0)) {
      }
    };
    return k;
  };
}

// Each candidate run of a livelock goes to the step budget; the shrinker
// stops it at the end of its own time instead (RunOptions::deadline), so a
// budget of a billion steps cannot hold it up for minutes.
TEST(explore_Shrink, ALivelockCannotMakeShrinkingOverrunItsTime) {
  emu::RunOptions found;
  found.trace = false;
  found.max_steps = 2'000;
  found.strategy = test::with_strategy(emu::StrategyKind::random, 3).strategy;
  const auto failing = emu::run(spinning_forever()(), found);
  ASSERT_EQ(failing.status, emu::Status::livelock);
  ASSERT_FALSE(failing.schedule.empty());
  emu::RunOptions base;
  base.max_steps = 1'000'000'000;
  emu::ShrinkStats st;
  const auto t0 = std::chrono::steady_clock::now();
  const auto small = emu::shrink(spinning_forever(), base, failing, 0.5, &st);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 3.0) << "shrinking took " << took << " s with a budget of 0.5 s";
  EXPECT_FALSE(st.finished);
  EXPECT_EQ(small.status, emu::Status::livelock);

  // A run's own deadline: it stops where it is, as pruned.
  base.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  base.trace = false;
  const auto r = emu::run(spinning_forever()(), base);
  EXPECT_TRUE(r.stopped && r.pruned);
  EXPECT_LT(r.steps, base.max_steps);
}

// ---- the search for the fewest preemptions

// Three CTAs share one SM's 512 Tensor Memory columns; each takes a first
// region (CTA 0 256 columns, the others 128), then 128 more while holding
// it. Once all three hold their first region the 512 are taken and each
// waits: a deadlock, which needs all three first allocations before any
// second one, so a switch away from each of two CTAs after its first:
// exactly two preemptions. (Any two holders leave 128 free for a second
// allocation, so no fewer will do.)
void take_two_regions(std::uint32_t* base) {  // tcgen05.alloc's destinations
  const std::uint32_t first = B::cluster_idx() == 0 ? 256 : 128;
  B::tmem_alloc<1>(&base[0], first);
  B::tmem_alloc<1>(&base[1], 128);  // holding the first
  B::syncwarp();
  B::tmem_relinquish<1>();
  B::tmem_dealloc<1>(base[1], 128);
  B::tmem_dealloc<1>(base[0], first);
}

emu::Kernel three_holders() {
  emu::Kernel k;
  k.launch.num_clusters = 3;
  k.launch.ctas_per_sm = 3;
  k.launch.warps_per_cta = 1;
  struct Columns {
    std::uint32_t base[2];
  };
  k.launch.smem_bytes = sizeof(Columns);
  k.body = [] { take_two_regions(B::shared_storage<Columns>().base); };
  return k;
}

// The round-robin run deadlocks with a preemption at nearly every choice
// point; delta debugging alone keeps more than two (no single deviation's
// removal moves a switch to after the next CTA's first allocation). The
// search for the minimum proves bounds 0 and 1 clean, finds a two-preemption
// schedule at bound 2, and says the result is minimal.
TEST(explore_Minimal, TheSearchReachesTheFewestPreemptionsTheBugNeedsAndSaysSo) {
  const emu::RunResult rr = emu::run(three_holders(), test::with_strategy(emu::StrategyKind::round_robin));
  ASSERT_EQ(rr.status, emu::Status::deadlock) << rr.report();
  ASSERT_GT(rr.preemptions(), 2u);
  // Two is the minimum: a complete search within one preemption passes.
  emu::ExploreOptions one;
  one.portfolio = {{emu::StrategyKind::exhaustive}};
  one.preemptions = 1;
  one.seconds = 0;
  const emu::ExploreResult within_one = emu::explore(three_holders(), one);
  ASSERT_TRUE(within_one.ok()) << within_one.report();
  ASSERT_EQ(within_one.verdict(), emu::Verdict::verified);

  emu::ShrinkStats st;
  const emu::RunResult small = emu::shrink(three_holders, {}, rr, 60, &st);
  EXPECT_EQ(small.status, emu::Status::deadlock);
  EXPECT_EQ(small.preemptions(), 2u);
  EXPECT_EQ(st.preemptions_after, 2u);
  EXPECT_TRUE(st.minimal);
  EXPECT_EQ(st.preemptions_needed, 2u);
  EXPECT_TRUE(st.finished);
  EXPECT_EQ(emu::replay(three_holders(), small.schedule, {}).status, emu::Status::deadlock);
}

// Without time to search the bounds below, the result is not called
// minimal, and the report and the JSON say so; with the time, it is.
TEST(explore_Minimal, NotProvedWhereTheTimeRanOutFirst) {
  const emu::RunResult rr = emu::run(three_holders(), test::with_strategy(emu::StrategyKind::round_robin));
  ASSERT_EQ(rr.status, emu::Status::deadlock);
  emu::ShrinkStats st;
  const emu::RunResult small = emu::shrink(three_holders, {}, rr, 0, &st);
  EXPECT_GT(small.preemptions(), 0u);
  EXPECT_FALSE(st.minimal);
  EXPECT_FALSE(st.finished);

  auto explored = [](double shrink_seconds, bool minimal, const std::string& line) {
    auto o = test::fixed_runs(1);
    o.portfolio = {{emu::StrategyKind::round_robin}};
    o.shrink_seconds = shrink_seconds;
    const emu::ExploreResult e = emu::explore(three_holders(), o);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.failure->shrink.minimal, minimal);
    EXPECT_TRUE(contains(e.report(), line)) << e.report();
    const std::string json = emu::to_json(e);
    EXPECT_TRUE(contains(json, minimal ? "\"minimal\":true" : "\"minimal\":false")) << json;
  };
  explored(0, false, " preemptions, not proved minimal (shrinking ran out of time)\n");
  explored(20, true, " -> 2 preemptions, minimal\n");
}

// Stopped anywhere in its course (the interrupt flag, raised when the
// shrinker asks for its n-th instance), the shrinker never claims more than
// it proved: the bound it reports as needed is at most the true two, and
// "minimal" only ever comes with two preemptions. Stopped while it
// searches bound 2, it reports bounds 0 and 1 as proved.
TEST(explore_Minimal, StoppedAnywhereItClaimsNoMoreThanItProved) {
  const emu::RunResult rr = emu::run(three_holders(), test::with_strategy(emu::StrategyKind::round_robin));
  ASSERT_EQ(rr.status, emu::Status::deadlock);
  emu::ShrinkStats whole;
  emu::shrink(three_holders, {}, rr, 60, &whole);
  ASSERT_TRUE(whole.minimal);
  bool partly_proved = false;
  for (std::uint64_t stop = 1; stop <= whole.replays; stop += whole.replays / 8) {
    SCOPED_TRACE("stopped at instance " + std::to_string(stop));
    std::atomic<int> flag{0};
    std::uint64_t made = 0;
    const emu::KernelFactory counting = [&] {
      if (++made >= stop) flag = 1;
      return three_holders();
    };
    emu::ShrinkStats st;
    const emu::RunResult small = emu::shrink(counting, {}, rr, 60, &st, &flag);
    EXPECT_EQ(small.status, emu::Status::deadlock);
    EXPECT_LE(st.preemptions_needed, 2u);
    EXPECT_EQ(st.minimal, small.preemptions() == 2 && st.preemptions_needed == 2);
    if (st.minimal) continue;
    EXPECT_TRUE(st.interrupted && !st.finished);
    if (st.preemptions_needed > 0) {
      partly_proved = true;
      EXPECT_TRUE(contains(emu::shrunk_line(st), "preemptions, not proved minimal: at least " +
                                                     std::to_string(st.preemptions_needed) +
                                                     " needed (shrinking interrupted)\n"))
          << emu::shrunk_line(st);
    }
  }
  EXPECT_TRUE(partly_proved) << "no stop fell in the search of a bound above 0";
}

// three_holders with two more warps in each CTA that hand a token back and
// forth through two mbarriers: each hand-over blocks one of them, a free
// choice among every warp that can move, so that even bound 0 of the
// exhaustive search has more schedules than a test can run. The deadlock
// still needs exactly two preemptions (a warp that allocates never blocks
// between its two allocations).
emu::Kernel three_holders_and_a_ping_pong() {
  emu::Kernel k = three_holders();
  struct Storage {
    std::uint32_t base[2];
    SharedMemBarrier ping, pong;
  };
  k.launch.warps_per_cta = 3;
  k.launch.smem_bytes = sizeof(Storage);
  k.body = [] {
    auto& s = B::shared_storage<Storage>();
    if (B::warp_idx() == 0) {
      test::init_bar(s.ping, 1, "ping");
      test::init_bar(s.pong, 1, "pong");
    }
    B::cluster_sync();
    if (B::warp_idx() == 0) return take_two_regions(s.base);
    for (std::uint32_t i = 0; i < 6; ++i) {
      if (B::warp_idx() == 1) {
        test::elected_arrive(s.ping);
        B::wait(s.pong, i & 1);
      } else {
        B::wait(s.ping, i & 1);
        test::elected_arrive(s.pong);
      }
    }
  };
  return k;
}

// Delta debugging of the round-robin run keeps ten preemptions here, and the
// bounded search does not end bound 0 within the time: the restarts (other
// failing runs, shrunk in turn) reach the two the deadlock needs. Without
// them the result stays at ten. (In the default build the first restart
// gets there within a tenth of a second.)
TEST(explore_Minimal, RestartsReachFewerPreemptionsWhereTheSearchCannotEnd) {
  const emu::RunResult rr =
      emu::run(three_holders_and_a_ping_pong(), test::with_strategy(emu::StrategyKind::round_robin));
  ASSERT_EQ(rr.status, emu::Status::deadlock) << rr.report();
  emu::ShrinkStats st;
  // The restarts need about 2 s of an optimised build; the Debug builds of
  // the sanitizer presets run the emulator about 30 times slower.
#ifdef NDEBUG
  constexpr double kSeconds = 2;
#else
  constexpr double kSeconds = 60;
#endif
  const emu::RunResult small = emu::shrink(three_holders_and_a_ping_pong, {}, rr, kSeconds, &st);
  EXPECT_EQ(small.preemptions(), 2u) << "from " << rr.preemptions();
  EXPECT_EQ(emu::replay(three_holders_and_a_ping_pong(), small.schedule, {}).status, emu::Status::deadlock);
}

// persistent-gemm/undrained-clc-ring at its defaults needs no preemption,
// but its first failing run has hundreds, the bounded search's bound 0
// (every free choice, with sleep sets) does not end within the shrink
// time, and delta debugging with the restarts stopped at one preemption,
// not proved minimal. The finder, source sets within the bound
// (exhaustive.hpp), branches only where two steps race and meets a
// schedule without preemptions within a few dozen runs: then the result
// is minimal, since none can have fewer.
TEST(explore_Minimal, TheFinderReachesNoPreemptionWhereBoundZeroCannotEnd) {
#ifndef NDEBUG
  GTEST_SKIP() << "an optimised build's 3 s: a Debug build runs the emulator about 30 times slower";
#endif
  const emu::Scenario& sc = *wspipe::examples::find_scenario("persistent-gemm");
  const auto v = std::find_if(sc.variants.begin(), sc.variants.end(),
                              [](const auto& x) { return x.name == "undrained-clc-ring"; });
  ASSERT_NE(v, sc.variants.end());
  std::vector<std::pair<const char*, std::uint64_t>> pins;  // as the program builds it: the defaults and the pins
  for (const auto& [k, x] : v->pinned) pins.emplace_back(k.c_str(), x);
  const emu::OptionValues values = scenario_values(sc, pins);
  const emu::KernelFactory make = [&] { return sc.prepare(v->name, values); };
  auto o = test::fixed_runs(500);
  o.jobs = 1;
  o.shrink_seconds = 20;
  const emu::ExploreResult r = emu::explore(make, o);
  ASSERT_FALSE(r.ok()) << r.report();
  EXPECT_EQ(r.failure->outcome, "mbarrier.remote-exited-cta");
  EXPECT_GT(r.failure->shrink.preemptions_before, 50u);
  EXPECT_EQ(r.failure->shrink.preemptions_after, 0u) << r.report();
  EXPECT_TRUE(r.failure->shrink.minimal);
  EXPECT_TRUE(r.failure->shrink.finished) << "the default 20 s ran out";
  EXPECT_EQ(emu::replay(make(), r.failure->result.schedule, {}).status, emu::Status::violation);
}

// No preemption left: minimal, with nothing to search and nothing said in
// the report. Not shrunk, a run with preemptions is not called minimal.
TEST(explore_Minimal, NoPreemptionIsMinimalAndAnUnshrunkRunIsNot) {
  const emu::ExploreResult stuck = emu::explore(ring(2, 8, RingBug::no_release), test::fixed_runs(10));
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.failure->shrink.preemptions_after, 0u);
  EXPECT_TRUE(stuck.failure->shrink.minimal);
  EXPECT_TRUE(contains(stuck.report(), " -> 0 preemptions\n")) << stuck.report();
  auto o = test::fixed_runs(1);
  o.portfolio = {{emu::StrategyKind::round_robin}};
  o.shrink = false;
  const emu::ExploreResult unshrunk = emu::explore(three_holders(), o);
  ASSERT_FALSE(unshrunk.ok());
  EXPECT_GT(unshrunk.failure->shrink.preemptions_after, 0u);
  EXPECT_FALSE(unshrunk.failure->shrink.minimal);
  EXPECT_TRUE(contains(unshrunk.report(), " preemptions, not proved minimal\n")) << unshrunk.report();
}

// The settings table's rules between settings, whichever front gives them.
TEST(explore_Settings, RulesBetweenSettings) {
  auto apply = [](emu::ExploreOptions& o, std::vector<std::pair<const char*, const char*>> given) {
    std::vector<emu::GivenSetting> g;
    for (const auto& [flag, value] : given) g.push_back({emu::find_setting_flag(flag), value});
    return emu::apply_settings(o, g, emu::SettingsFront::flags);
  };
  emu::ExploreOptions o;
  EXPECT_TRUE(apply(o, {{"strategy", "random,pct,pct:2"}, {"pct-depth", "7"}}).empty());
  EXPECT_EQ(emu::to_string(o.portfolio), "random,pct:7,pct:2") << "the depth goes to a plain pct only";
  o = {};
  EXPECT_TRUE(apply(o, {{"runs", "9"}}).empty());
  EXPECT_EQ(o.seconds, 0.0) << "runs alone is the whole budget";
  o = {};
  o.preemptions = 3;
  EXPECT_TRUE(apply(o, {{"strategy", "pct"}}).empty());
  EXPECT_FALSE(o.preemptions) << "a bound not given with a sampled strategy is dropped";
  o = {};
  o.jobs = 8;
  EXPECT_TRUE(apply(o, {{"strategy", "exhaustive"}}).empty());
  EXPECT_EQ(o.jobs, 8u) << "the exhaustive search takes jobs as the sampled strategies do";
  o = {};
  EXPECT_TRUE(apply(o, {{"strategy", "exhaustive"}, {"jobs", "2"}}).empty());
  EXPECT_EQ(o.jobs, 2u);
  o = {};
  EXPECT_TRUE(apply(o, {{"max-steps", "77"}, {"mma-memo-mib", "3"}, {"lane-divergence", "1"}}).empty());
  EXPECT_EQ(o.max_steps, 77u);
  EXPECT_EQ(o.mma_memo_bytes, std::size_t{3} << 20);
  EXPECT_TRUE(o.lane_divergence);
  // The exhaustive search in shards: --shard deals out the parts of its
  // sharded form, --shard 0/1 included.
  o = {};
  EXPECT_TRUE(apply(o, {{"strategy", "exhaustive"}, {"shard", "1/3"}}).empty());
  EXPECT_EQ(o.shard_index, 1u);
  EXPECT_EQ(o.shard_count, 3u);
  EXPECT_TRUE(o.sharded);
  o = {};
  EXPECT_TRUE(apply(o, {{"strategy", "exhaustive"}, {"shard", "0/1"}}).empty());
  EXPECT_TRUE(o.sharded);
  EXPECT_NO_THROW(emu::validate_settings(o, emu::SettingsFront::code));
}

// The reports every front prints come from the results: the JSON of a run
// and of an exploration, and the one replay command, spelled per front.
TEST(explore_Report, JsonAndReplayCommandComeFromTheResult) {
  const auto e = emu::explore(ring(2, 8, RingBug::no_release), test::fixed_runs(5));
  ASSERT_FALSE(e.ok());
  const std::string j = emu::to_json(e);
  const std::string token = e.failure->replay_token();
  EXPECT_EQ(j.rfind("{\"runs\":", 0), 0u) << j;
  for (const char* part : {"\"outcome\":\"deadlock\"", "\"status\":\"deadlock\"", "\"blocked\":[{\"warp\":",
                           "\"shrink\":{\"choices_before\":"})
    EXPECT_TRUE(contains(j, part)) << part << " in " << j;
  EXPECT_TRUE(contains(j, "\"schedule\":\"" + token + "\"")) << j;
  EXPECT_EQ(emu::to_json(e.failure->result), emu::to_json(emu::json_fields(e.failure->result)));
  const std::string clean = emu::to_json(emu::explore(ring(2, 8, RingBug::none), test::fixed_runs(3)));
  EXPECT_TRUE(contains(clean, "\"outcome\":\"ok\",\"steps\":")) << clean;
  EXPECT_TRUE(contains(clean, "\"schedule\":null,\"shrink\":null}")) << clean;

  emu::RunOptions run;
  run.max_steps = 99;
  run.lane_divergence = true;
  const auto& s = e.failure->result.schedule;
  EXPECT_EQ(emu::replay_command(emu::SettingsFront::flags, run, s, "wspipe", {"replay", "ring/x"}, {"--ctas-per-sm", "2"}),
            "wspipe replay ring/x --max-steps 99 --lane-divergence --ctas-per-sm 2 --schedule " +
                emu::shell_quote(token));
  EXPECT_EQ(emu::replay_command(emu::SettingsFront::environment, run, s, "./my test", {"--gtest_filter=A.B"}, {},
                                "t.json"),
            "WSPIPE_REPLAY=" + emu::shell_quote(token) +
                " WSPIPE_TRACE=t.json WSPIPE_MAX_STEPS=99 WSPIPE_LANE_DIVERGENCE=1 './my test' --gtest_filter=A.B");
  // try_wait time-outs are on by default: only their absence is named.
  run = {};
  run.spurious_try_wait = false;
  EXPECT_EQ(emu::replay_command(emu::SettingsFront::flags, run, s, "wspipe", {"replay", "ring/x"}, {}),
            "wspipe replay ring/x --no-spurious-try-wait --schedule " + emu::shell_quote(token));
  EXPECT_EQ(emu::replay_command(emu::SettingsFront::environment, run, s, "t", {}, {}),
            "WSPIPE_REPLAY=" + emu::shell_quote(token) + " WSPIPE_NO_SPURIOUS_TRY_WAIT=1 t");
  emu::ExploreOptions o;
  EXPECT_TRUE(o.spurious_try_wait);
  const emu::GivenSetting off[] = {{emu::find_setting_flag("no-spurious-try-wait"), "1"}};
  EXPECT_TRUE(emu::apply_settings(o, off, emu::SettingsFront::flags).empty());
  EXPECT_FALSE(o.spurious_try_wait);
  const emu::GivenSetting on[] = {{emu::find_setting_env("WSPIPE_SPURIOUS_TRY_WAIT"), "1"}};
  EXPECT_TRUE(emu::apply_settings(o, on, emu::SettingsFront::environment).empty());
  EXPECT_TRUE(o.spurious_try_wait);
}

TEST(explore_Replay, AScheduleOfAnotherConfigurationIsRefused) {
  const auto r = emu::explore(ring(2, 8, RingBug::no_release), test::fixed_runs(5));
  ASSERT_FALSE(r.ok());
  const auto& s = r.failure->result.schedule;
  ASSERT_NE(s.check(), 0u);
  try {
    emu::replay(ring_kernel(4, 8, RingBug::no_release), s, {});
    ADD_FAILURE() << "replayed a schedule of another configuration";
  } catch (const emu::ScheduleMismatch& e) {
    EXPECT_TRUE(contains(e.what(), "another kernel, configuration")) << e.what();
  }
  // Without the check, the same deviations replay wherever they fit.
  EXPECT_NO_THROW(emu::replay(ring_kernel(2, 8, RingBug::no_release), s.unchecked(), {}));
}

// The check covers every step, so a schedule is refused
// on a configuration whose run differs only at steps where one actor alone
// can move. ring/no-release with 64 items and the correct ring with 4 meet
// the same choice points under the default schedule (the first steps, while
// both warps can start; then one runs at a time): the choice-point check of
// version 2 tokens accepted the one's schedule on the other (both read
// 2:033817b3:).
TEST(explore_Replay, AScheduleIsRefusedWhereOnlyStepsOfOneActorDiffer) {
  const auto recorded = emu::replay(ring_kernel(4, 64, RingBug::no_release), emu::Schedule(), {});
  ASSERT_EQ(recorded.status, emu::Status::deadlock);
  const emu::Schedule& s = recorded.schedule;
  EXPECT_EQ(s.version(), emu::Schedule::kVersion);
  EXPECT_EQ(s.encode().rfind("6:", 0), 0u) << s.encode();
  try {
    emu::replay(ring_kernel(4, 4, RingBug::none), s, {});
    ADD_FAILURE() << "replayed " << s.encode() << " of ring/no-release, 64 items, on ring with 4";
  } catch (const emu::ScheduleMismatch& e) {
    EXPECT_TRUE(contains(e.what(), "the steps of this run differ from those of the run it was recorded from"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "another kernel, configuration or wspipe version")) << e.what();
    EXPECT_TRUE(contains(e.what(), "Replay it with the kernel and options it was recorded with")) << e.what();
  }
  // The same program replays its schedule, to the same step.
  const auto again = emu::replay(ring_kernel(4, 64, RingBug::no_release), s, {});
  EXPECT_EQ(again.status, emu::Status::deadlock);
  EXPECT_EQ(again.steps, recorded.steps);
  EXPECT_EQ(again.schedule, s);
}

// A version 5 token (printed when a load was cut once, in halves, with a
// window of 3) replays under those rules, and its run prints a version 5
// token, which replays so again.
TEST(explore_Replay, AVersion5TokenReplaysUnderItsOwnRules) {
  std::string why;
  const auto old = emu::Schedule::decode("5:4653d61e:", &why);
  ASSERT_TRUE(old) << why;
  const auto r = emu::replay(ring_kernel(4, 64, RingBug::no_release), *old, {});
  EXPECT_EQ(r.status, emu::Status::deadlock);
  EXPECT_TRUE(r.legacy_pieces);
  EXPECT_EQ(r.schedule.encode(), "5:4653d61e:");
  const auto now = emu::replay(ring_kernel(4, 64, RingBug::no_release), *emu::Schedule::decode("6:4653d61e:", &why), {});
  EXPECT_FALSE(now.legacy_pieces);
  EXPECT_EQ(now.schedule.encode(), "6:4653d61e:");
}

// A version 2 token (printed before the check covered every step: this one
// is the README's) still replays on the program it was recorded from,
// checked against the choice points as before; its run prints a current
// token.
TEST(explore_Replay, AVersion2TokenStillReplays) {
  std::string why;
  const auto old = emu::Schedule::decode("2:033817b3:", &why);
  ASSERT_TRUE(old) << why;
  const auto r = emu::replay(ring_kernel(4, 64, RingBug::no_release), *old, {});
  EXPECT_EQ(r.status, emu::Status::deadlock);
  EXPECT_EQ(r.schedule.encode().rfind("6:", 0), 0u) << r.schedule.encode();
  try {
    emu::replay(ring_kernel(2, 8, RingBug::no_release), *old, {});
    ADD_FAILURE() << "a version 2 token replayed where its choice points differ";
  } catch (const emu::ScheduleMismatch& e) {
    EXPECT_TRUE(contains(e.what(), "the choice points of this run differ")) << e.what();
  }
}

// An interrupt (a signal handler's flag) ends the exploration
// with what it found, its failure shrunk as far as it got.
TEST(explore_Interrupt, TheFlagEndsItWithWhatWasExplored) {
  std::atomic<int> flag{0};
  auto o = test::fixed_runs(1000000);
  o.interrupt = &flag;
  o.on_run = [&](std::uint64_t i, const emu::RunResult&) {
    if (i == 20) flag.store(2);
  };
  const auto clean = emu::explore(ring(2, 4, RingBug::none), o);
  EXPECT_TRUE(clean.interrupted);
  EXPECT_TRUE(clean.ok());
  EXPECT_EQ(clean.runs, 21u);
  EXPECT_TRUE(contains(clean.report(), "interrupted: nothing found")) << clean.report();
  // Interrupted while shrinking: the failure is reported, shrunk no further,
  // and its schedule replays to the same outcome.
  flag.store(0);
  o = test::fixed_runs(10);
  o.interrupt = &flag;
  o.on_progress = [&](const emu::ExploreProgress& p) {
    if (p.shrinking) flag.store(15);
  };
  const auto r = emu::explore([] { return racy(); }, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.interrupted);
  EXPECT_TRUE(r.failure->shrink.interrupted);
  EXPECT_FALSE(r.failure->shrink.finished);
  EXPECT_EQ(r.failure->shrink.replays, 0u);
  EXPECT_TRUE(contains(r.report(), "(shrinking interrupted)")) << r.report();
  EXPECT_EQ(emu::outcome(emu::replay(racy(), r.failure->result.schedule, o.run_options())), r.failure->outcome);
}

// A trace is written whole or not at all, and where it cannot be
// written is known before anything runs.
TEST(explore_Trace, WrittenWholeOrNotAtAllAndCheckedBeforehand) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("wspipe-trace-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto r = emu::run(ring_kernel(2, 4, RingBug::none), [] {
    emu::RunOptions o;
    o.trace = true;
    return o;
  }());
  const std::string file = (dir / "t.txt").string();
  { std::ofstream(file) << "an older trace"; }
  EXPECT_NO_THROW(emu::check_trace_file(file));
  emu::write_trace(file, r.trace);
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(text, "arrive full")) << "replaced whole";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "no temporary file left";
  for (const std::string& bad : {std::string("-"), std::string(""), dir.string(), (dir / "no" / "t.json").string()})
    EXPECT_THROW(emu::check_trace_file(bad), std::invalid_argument) << bad;
  EXPECT_THROW(emu::write_trace((dir / "no" / "t.json").string(), r.trace), std::runtime_error);
  // A device is written in place, never replaced by a rename.
  EXPECT_NO_THROW(emu::check_trace_file("/dev/null"));
  EXPECT_NO_THROW(emu::write_trace("/dev/null", r.trace));
  if (fs::exists("/dev/full")) {
    EXPECT_THROW(emu::write_trace("/dev/full", r.trace), std::runtime_error) << "a write error is an error";
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
  // An exploration's trace_dir is checked before any run.
  auto o = test::fixed_runs(5);
  o.trace_dir = (dir / "t.txt" / "sub").string();  // under a file
  int runs = 0;
  o.on_run = [&](std::uint64_t, const emu::RunResult&) { ++runs; };
  EXPECT_THROW(emu::explore(ring(2, 4, RingBug::no_release), o), std::invalid_argument);
  EXPECT_EQ(runs, 0);
  fs::remove_all(dir);
}

}  // namespace

// A strategy that lives across runs (StrategyParams::shared), as the
// exhaustive search does: each run announces itself with new_execution,
// and what the strategy learnt in one run is there in the next.
TEST(explore_Strategy, SharedStrategyLivesAcrossRuns) {
  struct Counting final : emu::Strategy {
    int executions = 0;
    std::uint32_t actors = 0;
    std::uint64_t picks = 0;
    void new_execution(std::uint32_t num_actors) override {
      ++executions;
      actors = num_actors;
    }
    std::optional<std::uint32_t> pick(const emu::Choice& c) override {
      ++picks;
      return c.enabled[c.n - 1];  // the highest id: not the default policy
    }
  } counting;
  emu::RunOptions o;
  o.trace = false;
  o.strategy.kind = emu::StrategyKind::custom;
  o.strategy.shared = &counting;
  const emu::Kernel k = ring_kernel(2, 4, RingBug::none);
  const emu::RunResult first = emu::run(k, o);
  ASSERT_EQ(first.status, emu::Status::ok) << first.report();
  EXPECT_EQ(counting.executions, 1);
  EXPECT_EQ(counting.actors, 2u + 2u + 4u) << "two warps, the CTA's two engines, the TMA engine's four alternatives";
  const std::uint64_t picks = counting.picks;
  EXPECT_GT(picks, 0u);
  EXPECT_FALSE(first.schedule.empty()) << "it deviated from the default policy";
  const emu::RunResult second = emu::run(k, o);
  EXPECT_EQ(counting.executions, 2);
  EXPECT_EQ(counting.picks, 2 * picks) << "the same choices again, counted on the same object";
  EXPECT_EQ(second.schedule.encode(), first.schedule.encode());
  // A shared strategy with a kind that makes its own is refused, not ignored.
  o.strategy.kind = emu::StrategyKind::random;
  EXPECT_THROW(emu::run(k, o), std::invalid_argument);
  EXPECT_EQ(counting.executions, 2) << "refused before the run started";
}
