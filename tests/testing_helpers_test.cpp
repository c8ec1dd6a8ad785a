// wspipe::testing: the GoogleTest helpers (explores_clean, finds, options,
// WSPIPE_REPLAY, the shard registration) and the rapidcheck helper, on the
// ring example and on a small hand-off whose bug needs a preemption.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backends/emu/emu.hpp"
#include "backends/emu/settings.hpp"
#include "backends/emu/testing/gtest.hpp"
#include "backends/emu/testing/rapidcheck.hpp"
#include "emu_test_util.hpp"
#include "examples/ring.hpp"
#include "examples/scenarios.hpp"
#include "tools/cli.hpp"

namespace wspipe::helpers_test {
namespace {

using emu::EmuBackend;
using examples::RingBug;

// ---------------------------------------------------------------- kernels

template <int S>
emu::Kernel ring_with(std::uint32_t items, RingBug bug) {
  emu::Kernel k;
  k.launch.warps_per_cta = examples::kRingWarps;
  k.launch.warp_roles = {"producer", "consumer"};
  k.launch.smem_bytes = sizeof(examples::RingStorage<S>);
  k.body = [items, bug] { examples::ring_kernel<EmuBackend, S>(items, bug); };
  return k;
}

emu::Kernel ring(int stages, std::uint32_t items, RingBug bug = RingBug::none) {
  switch (stages) {
    case 1: return ring_with<1>(items, bug);
    case 2: return ring_with<2>(items, bug);
    case 3: return ring_with<3>(items, bug);
    case 4: return ring_with<4>(items, bug);
    default: throw std::invalid_argument("ring: stages must be in [1, 4]");
  }
}

emu::KernelFactory ring_factory(int stages, std::uint32_t items, RingBug bug = RingBug::none) {
  return [=] { return ring(stages, items, bug); };
}

// One slot between two warps. With `early_release` the consumer frees the
// slot and then reads it, with a scheduling point in between: only a
// schedule that preempts the consumer there lets the producer overwrite the
// item first, so the default schedule is clean and a failure's schedule has
// deviations to replay.
struct HandoffStorage {
  SharedMemBarrier barriers[2];
  std::uint32_t slot;
};

template <Backend B>
void handoff(std::uint32_t items, bool early_release) {
  using Pipe = ProducerConsumerPipeline<B, 1>;
  auto& smem = B::template shared_storage<HandoffStorage>();
  if (B::warp_idx() == 0) {
    Pipe(smem.barriers).init_mbars(1, 32);
    B::fence_init();
  }
  B::cluster_sync();
  Pipe pipe(smem.barriers);
  if (B::warp_idx() == 0) {
    for (std::uint32_t i = 0; i < items; ++i) {
      auto slot = pipe.acquire_producer();
      smem.slot = i;
      B::elect_one([&] { slot.arrive(); });
      slot.release();
    }
  } else {
    for (std::uint32_t i = 0; i < items; ++i) {
      auto slot = pipe.acquire_consumer();
      std::uint32_t v = 0;
      if (early_release) {
        slot.release();
        B::syncwarp();
        v = smem.slot;
      } else {
        v = smem.slot;
        slot.release();
      }
      B::check(v == i, "handoff: item out of sequence");
    }
  }
}

emu::KernelFactory handoff_factory(std::uint32_t items, bool early_release) {
  return [=] {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.smem_bytes = sizeof(HandoffStorage);
    k.body = [=] { handoff<EmuBackend>(items, early_release); };
    return k;
  };
}

// ---------------------------------------------------------------- helpers

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The environment that options() and the helpers read, cleared for tests
// that need exact budgets whatever the person running them has set.
struct CleanEnv {
  CleanEnv() {
    for (const emu::Setting& s : emu::settings_table())
      vars.push_back(std::make_unique<ScopedEnv>(s.env.data(), std::nullopt));
  }
  ScopedEnv replay{"WSPIPE_REPLAY", std::nullopt}, trace{"WSPIPE_TRACE", std::nullopt};
  std::vector<std::unique_ptr<ScopedEnv>> vars;  // every setting's variable
};

using test::contains;
using test::ends_with;

// A fixed number of runs, no time limit, on 2 threads unless told.
emu::ExploreOptions runs(std::uint64_t n, unsigned jobs = 2) { return test::fixed_runs(n, jobs); }

// The schedule token of a failure message's replay line.
std::string replay_token(const std::string& message) {
  static const std::regex re("WSPIPE_REPLAY='?([3-6]:[0-9a-fA-F]{8}:[A-Za-z0-9{}]*)'?");
  std::smatch m;
  if (!std::regex_search(message, m, re)) return {};
  return m[1];
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("wspipe-helpers-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The run numbers an exploration with `o` runs.
std::set<std::uint64_t> run_numbers(const emu::KernelFactory& make, emu::ExploreOptions o) {
  std::mutex mu;
  std::set<std::uint64_t> seen;
  o.on_run = [&](std::uint64_t i, const emu::RunResult&) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(seen.insert(i).second) << "run " << i << " ran twice";
  };
  const emu::ExploreResult r = emu::explore(make, o);
  EXPECT_TRUE(r.ok()) << r.report();
  return seen;
}

// ------------------------------------------------------- clean and finds

TEST(TestingHelpers, CorrectRingIsClean) {
  CleanEnv env;
  WSPIPE_EXPECT_CLEAN(ring_factory(4, 32));  // options(): the test default, 2 seconds
  WSPIPE_EXPECT_CLEAN(ring(1, 9), runs(100));
  WSPIPE_ASSERT_CLEAN(ring_factory(2, 16), runs(50, 1));
  const auto r = testing::explores_clean(ring_factory(3, 8), runs(20));
  ASSERT_TRUE(r);
  EXPECT_TRUE(contains(r.message(), "explored 20 runs")) << r.message();
}

TEST(TestingHelpers, EachBrokenRingIsFoundWithItsOutcome) {
  CleanEnv env;
  WSPIPE_EXPECT_FINDS("deadlock", ring_factory(4, 32, RingBug::no_release));
  WSPIPE_EXPECT_FINDS("mbarrier.over-arrival", ring_factory(4, 32, RingBug::over_arrive), runs(20));
  WSPIPE_EXPECT_FINDS("deadlock", ring(4, 32, RingBug::producer_phase_0), runs(20));
  WSPIPE_ASSERT_FINDS("kernel.check", handoff_factory(4, true), runs(200));
}

TEST(TestingHelpers, FindsSaysWhatItFoundInstead) {
  CleanEnv env;
  const auto nothing = testing::finds("deadlock", ring_factory(2, 8), runs(10));
  ASSERT_FALSE(nothing);
  EXPECT_TRUE(contains(nothing.message(), "expected deadlock, but nothing found in 10 runs")) << nothing.message();

  const auto other = testing::finds("livelock", ring_factory(2, 8, RingBug::over_arrive), runs(10));
  ASSERT_FALSE(other);
  EXPECT_TRUE(contains(other.message(), "expected livelock, found mbarrier.over-arrival")) << other.message();
  EXPECT_TRUE(contains(other.message(), "WSPIPE_REPLAY=")) << other.message();

  EXPECT_FALSE(testing::finds("ok", ring_factory(2, 8), runs(1)));

  // A complete search says what it covered: every schedule within its
  // bound, or, with none, every class.
  emu::ExploreOptions ex;
  ex.portfolio = {{emu::StrategyKind::exhaustive}};
  ex.seconds = 60;
  for (const auto& [bound, says] :
       {std::pair<std::optional<std::uint32_t>, const char*>{
            std::nullopt, "every class of equivalent schedules): the search is complete (every class of equivalent "
                          "schedules)"},
        {1, "at most 1 preemption): every schedule within the preemption bound was explored"}}) {
    ex.preemptions = bound;
    const auto complete = testing::finds("deadlock", ring_factory(1, 2), ex);
    ASSERT_FALSE(complete);
    EXPECT_TRUE(contains(complete.message(), says)) << complete.message();
  }
}

// A clean exploration prints one line of what it covered: runs, time,
// strategy, seed and shard.
TEST(TestingHelpers, CleanExplorationPrintsWhatItCovered) {
  CleanEnv env;
  emu::ExploreOptions o = runs(20);
  o.shard_index = 1;
  o.shard_count = 2;
  o.first_seed = 7;
  ::testing::internal::CaptureStdout();
  const auto r = testing::explores_clean(ring_factory(2, 4), o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_TRUE(contains(out, "[wspipe] TestingHelpers.CleanExplorationPrintsWhatItCovered: explored 10 runs (")) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(steps\) in [0-9]+\.[0-9] s, strategy random,pct:3,stall, first seed 7, )"
                                                R"(shard 1/2: nothing found\n$)")))
      << out;
  // The exhaustive search says its bound, and that it covered it.
  emu::ExploreOptions ex;
  ex.portfolio = {{emu::StrategyKind::exhaustive}};
  ex.preemptions = 1;
  ex.seconds = 60;
  ::testing::internal::CaptureStdout();
  EXPECT_TRUE(testing::explores_clean(ring_factory(1, 2), ex));
  const std::string exhaustive = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(contains(exhaustive, "strategy exhaustive, at most 1 preemption: nothing found (verified: every schedule within "
                                   "the bound)"))
      << exhaustive;
  // Without a bound it covered every class of equivalent schedules, and
  // says no bound.
  ex.preemptions.reset();
  ::testing::internal::CaptureStdout();
  EXPECT_TRUE(testing::explores_clean(ring_factory(1, 2), ex));
  const std::string unbounded = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(contains(unbounded, "strategy exhaustive, every class of equivalent schedules: nothing found (verified: "
                                  "the search is complete); assuming: a try_wait loop still spinning after 1024 "
                                  "time-outs in a row"))
      << unbounded;
}

// A verdict names what it assumed beyond the configuration; a test that
// allows no assumption fails on any, naming it, and passes once none is
// left (an options set that narrows nothing the search assumes).
TEST(TestingHelpers, AVerifiedVerdictNamesItsAssumptions) {
  CleanEnv env;
  emu::ExploreOptions ex;
  ex.portfolio = {{emu::StrategyKind::exhaustive}};
  ex.seconds = 0;
  const auto allowed = testing::explores_verified(ring_factory(1, 2), ex);
  EXPECT_TRUE(allowed);
  EXPECT_TRUE(contains(allowed.message(), "assuming: a try_wait loop still spinning after 1024 time-outs in a row"))
      << allowed.message();
  const auto none = testing::explores_verified(ring_factory(1, 2), ex, testing::Assumptions::none);
  ASSERT_FALSE(none);
  EXPECT_TRUE(contains(none.message(), "verified, but with assumptions, and the test allows none"))
      << none.message();
  EXPECT_TRUE(contains(none.message(), "only the oldest TMA load of its engine's queue lands in pieces")) << none.message();
  // Each option that narrows what runs or what is checked is named.
  ex.spurious_try_wait = false;
  ex.async_reorder = false;
  ex.race_check = false;
  const std::vector<std::string> a = emu::assumptions(ex);
  const std::string all = [&] {
    std::string s;
    for (const std::string& x : a) s += x + "\n";
    return s;
  }();
  EXPECT_TRUE(contains(all, "--no-spurious-try-wait")) << all;
  EXPECT_TRUE(contains(all, "--no-async-reorder")) << all;
  EXPECT_TRUE(contains(all, "the race checker is off")) << all;
  // A bounded search runs every schedule within its bound, reduction asked
  // for or not: the bound is all it assumes.
  ex.preemptions = 2;
  EXPECT_EQ(emu::assumptions(ex).front(), "at most 2 preemption(s) per schedule (--preemptions)");
  ex.reduce = false;
  EXPECT_EQ(emu::assumptions(ex).front(), "at most 2 preemption(s) per schedule (--preemptions)");
  // This test's target opts out of the access instrumentation: its kernel
  // code is among the files named (the first four are, then a count; in
  // the asan and tsan presets nothing is instrumented).
  EXPECT_TRUE(contains(all, "kernel code compiled without the access instrumentation (")) << all;
  const std::vector<std::string> files = emu::uninstrumented_translation_units();
  EXPECT_TRUE(std::any_of(files.begin(), files.end(),
                          [](const std::string& f) { return ends_with(f, "tests/testing_helpers_test.cpp"); }))
      << all;
}

// One bug may show as a deadlock under one schedule and as a rule under
// another: finds() accepts several outcomes, separated by commas.
TEST(TestingHelpers, FindsAcceptsSeveralOutcomes) {
  CleanEnv env;
  EXPECT_TRUE(testing::finds("livelock, deadlock", ring_factory(4, 32, RingBug::no_release), runs(20)));
  WSPIPE_EXPECT_FINDS("deadlock,mbarrier.over-arrival", ring_factory(2, 8, RingBug::over_arrive), runs(10));
  const auto other =
      testing::finds("livelock,kernel.check,deadlock", ring_factory(2, 8, RingBug::over_arrive), runs(10));
  ASSERT_FALSE(other);
  EXPECT_TRUE(contains(other.message(), "expected livelock, kernel.check or deadlock, found mbarrier.over-arrival"))
      << other.message();
  const auto nothing = testing::finds("deadlock,livelock", ring_factory(2, 8), runs(10));
  ASSERT_FALSE(nothing);
  EXPECT_TRUE(contains(nothing.message(), "expected deadlock or livelock, but nothing found in 10 runs"))
      << nothing.message();
  EXPECT_FALSE(testing::finds("deadlock,ok", ring_factory(2, 8, RingBug::no_release), runs(1)));
  EXPECT_FALSE(testing::finds("deadlock,", ring_factory(2, 8, RingBug::no_release), runs(1)));
}

// A result.mismatch (the kernel's verify, after the run) has no warp and no
// source line: its report prints neither.
TEST(TestingHelpers, ResultMismatchReportHasNoEmptyFields) {
  CleanEnv env;
  emu::Kernel k = ring(2, 4);
  k.verify = [] { return std::string("output[0] = 1, expected 2"); };
  const emu::RunResult r = emu::run(k, emu::RunOptions{});
  ASSERT_EQ(emu::outcome(r), "result.mismatch");
  const std::string report = r.report();
  EXPECT_TRUE(contains(report, "violation result.mismatch at step")) << report;
  EXPECT_TRUE(contains(report, "output[0] = 1, expected 2")) << report;
  EXPECT_FALSE(contains(report, "warp:")) << report;
  EXPECT_FALSE(contains(report, "where:")) << report;
}

// A data check with values says what it compared; fragments read f32 by name.
TEST(TestingHelpers, CheckWithValuesReportsThem) {
  CleanEnv env;
  emu::Kernel k;
  k.launch.warps_per_cta = 1;
  k.body = [] {
    EmuBackend::Frag<2> f;
    EmuBackend::elect_one([&] { f.set(1, f32_to_bits(-2.5f)); });
    float x = 0;
    EmuBackend::elect_one([&] { x = f.f32(1); });
    EmuBackend::check(x == -2.5f, "f32 round trip", {"x", x});
    const std::uint32_t got = 17, want = 12;
    EmuBackend::check(true, "a check that holds", {{"got", got}, {"want", want}});
    EmuBackend::check(got == want, "output out of sequence",
                      {{"item", std::int64_t{-3}}, {"got", got}, {"want", want}, {"last", x < 0}});
  };
  const emu::RunResult r = emu::run(k, emu::RunOptions{});
  ASSERT_EQ(emu::outcome(r), "kernel.check") << r.report();
  EXPECT_EQ(r.violations.front().message,
            "kernel check failed: output out of sequence (item = -3, got = 17, want = 12, last = true)");
  EXPECT_TRUE(ends_with(r.violations.front().file, "testing_helpers_test.cpp")) << r.violations.front().file;
  k.body = [] { EmuBackend::check(false, "halves", {"x", 0.1}); };
  EXPECT_EQ(emu::run(k, emu::RunOptions{}).violations.front().message, "kernel check failed: halves (x = 0.1)");
}

// Reports name files relative to the project's root: the one its CMake
// build notes (WSPIPE_PROJECT_SOURCE_DIR, this tree's top directory here),
// or WSPIPE_SOURCE_ROOT from the environment, or RunOptions::source_root.
TEST(TestingHelpers, ReportsNameFilesRelativeToTheProjectRoot) {
  CleanEnv env;
  ScopedEnv unset("WSPIPE_SOURCE_ROOT", std::nullopt);
  EXPECT_EQ(emu::default_source_root(), WSPIPE_PROJECT_SOURCE_DIR);
  emu::Kernel k;
  k.launch.warps_per_cta = 1;
  k.body = [] { EmuBackend::check(false, "where am I"); };
  emu::RunOptions elsewhere;
  elsewhere.source_root = "/no/such/root";
  // The path as compiled: absolute, or relative to the build directory
  // where a compiler cache rewrites it.
  const std::string compiled = emu::run(k, elsewhere).violations.front().file;
  const std::size_t tests = compiled.rfind("tests/testing_helpers_test.cpp");
  ASSERT_NE(tests, std::string::npos) << compiled;
  {
    ScopedEnv root("WSPIPE_SOURCE_ROOT", compiled.substr(0, tests));
    const emu::RunResult r = emu::run(k, emu::RunOptions{});
    EXPECT_EQ(r.violations.front().file, "tests/testing_helpers_test.cpp");
    const auto v = std::find_if(r.trace.events.begin(), r.trace.events.end(),
                                [](const emu::Event& e) { return e.kind == emu::EventKind::violation; });
    ASSERT_NE(v, r.trace.events.end());
    EXPECT_EQ(r.trace.location(*v).rfind("tests/testing_helpers_test.cpp:", 0), 0u) << r.trace.location(*v);
    EXPECT_EQ(emu::run(k, elsewhere).violations.front().file, compiled) << "the options' own root wins";
  }
  {
    ScopedEnv root("WSPIPE_SOURCE_ROOT", "");  // set and empty: paths as compiled
    EXPECT_EQ(emu::run(k, emu::RunOptions{}).violations.front().file, compiled);
  }
}

// A user's own program over its own catalogue names itself, not "wspipe".
TEST(TestingHelpers, AUsersCliNamesItself) {
  std::ostringstream out, err;
  EXPECT_EQ(cli::main({"/home/me/build/mytool", "help"}, examples::catalogue(), out, err), 0);
  EXPECT_EQ(out.str().rfind("mytool: run warp-specialized kernels", 0), 0u) << out.str();
  EXPECT_TRUE(contains(out.str(), "\n  mytool explore SCENARIO")) << out.str();
  EXPECT_FALSE(contains(out.str(), "wspipe list")) << out.str();
  EXPECT_EQ(cli::main({"mytool", "explore"}, examples::catalogue(), out, err), 2);
  EXPECT_TRUE(contains(err.str(), "mytool: missing SCENARIO[/VARIANT]; `mytool list` shows them")) << err.str();
  std::ostringstream run_out;
  EXPECT_EQ(cli::main({"./mytool", "run", "ring", "--items", "2"}, examples::catalogue(), run_out, err), 0);
  EXPECT_EQ(run_out.str().rfind("mytool run ring ", 0), 0u) << run_out.str();
}

TEST(TestingHelpers, ExploresCleanOnBrokenRingReportsAReplayThatReproduces) {
  CleanEnv env;
  const auto found = testing::explores_clean(ring_factory(4, 32, RingBug::no_release), runs(20));
  ASSERT_FALSE(found);
  const std::string msg = found.message();
  EXPECT_TRUE(contains(msg, "deadlock")) << msg;
  EXPECT_TRUE(contains(msg, "shrunk:")) << msg;
  EXPECT_TRUE(contains(msg, "WSPIPE_TRACE=wspipe-trace.json")) << msg;
  EXPECT_TRUE(
      contains(msg, "--gtest_filter=TestingHelpers.ExploresCleanOnBrokenRingReportsAReplayThatReproduces"))
      << msg;
  EXPECT_TRUE(contains(msg, "https://ui.perfetto.dev")) << msg;
  const std::string token = replay_token(msg);
  ASSERT_EQ(token.rfind("6:", 0), 0u) << msg;

  const auto dir = temp_dir("ring-replay");
  ScopedEnv replay("WSPIPE_REPLAY", token);
  ScopedEnv trace("WSPIPE_TRACE", (dir / "t.txt").string());
  const auto again = testing::explores_clean(ring_factory(4, 32, RingBug::no_release), runs(20));
  ASSERT_FALSE(again);
  EXPECT_TRUE(contains(again.message(), "replayed WSPIPE_REPLAY=" + token + " (outcome: deadlock)")) << again.message();
  EXPECT_TRUE(contains(slurp(dir / "t.txt"), "wait")) << "the text trace of the replayed run";
  // finds() replays too, and accepts the same outcome.
  EXPECT_TRUE(testing::finds("deadlock", ring_factory(4, 32, RingBug::no_release)));
  std::filesystem::remove_all(dir);
}

// The hand-off's failure needs a preemption: the token carries deviations,
// and replaying it reproduces the failure where the default schedule is
// clean.
TEST(TestingHelpers, ReplayFollowsTheScheduleItIsGiven) {
  CleanEnv env;
  const auto make = handoff_factory(4, true);
  const auto found = testing::explores_clean(make, runs(200));
  ASSERT_FALSE(found);
  const std::string token = replay_token(found.message());
  ASSERT_EQ(token.rfind("6:", 0), 0u) << found.message();
  ASSERT_GT(token.size(), std::string("6:12345678:").size()) << "a schedule with deviations: " << token;

  const auto dir = temp_dir("handoff-replay");
  {
    ScopedEnv replay("WSPIPE_REPLAY", token);
    ScopedEnv trace("WSPIPE_TRACE", (dir / "t.json").string());
    const auto again = testing::explores_clean(make);
    ASSERT_FALSE(again);
    EXPECT_TRUE(contains(again.message(), "kernel.check")) << again.message();
    EXPECT_TRUE(contains(slurp(dir / "t.json"), "traceEvents"));
    EXPECT_TRUE(testing::finds("kernel.check", make));
  }
  {
    // The same kernel under the default schedule (no deviations, no check) is clean.
    ScopedEnv replay("WSPIPE_REPLAY", "2:");
    EXPECT_TRUE(testing::explores_clean(make));
  }
  std::filesystem::remove_all(dir);
}

TEST(TestingHelpers, BadReplayValuesFailNamingTheValue) {
  CleanEnv env;
  {
    ScopedEnv replay("WSPIPE_REPLAY", "2:zz!");
    const auto r = testing::explores_clean(ring_factory(2, 4));
    ASSERT_FALSE(r);
    EXPECT_TRUE(contains(r.message(), "WSPIPE_REPLAY='2:zz!' is not a schedule")) << r.message();
    EXPECT_FALSE(testing::finds("deadlock", ring_factory(2, 4, RingBug::no_release)));
  }
  {
    ScopedEnv replay("WSPIPE_REPLAY", "banana");
    const auto r = testing::finds("deadlock", ring_factory(2, 4, RingBug::no_release));
    ASSERT_FALSE(r);
    EXPECT_TRUE(contains(r.message(), "WSPIPE_REPLAY=banana is not a schedule")) << r.message();
  }
  {
    // A trace that cannot be written fails the test, and the replay is still reported.
    ScopedEnv replay("WSPIPE_REPLAY", "2:");
    ScopedEnv trace("WSPIPE_TRACE", "/nonexistent-dir/t.json");
    const auto r = testing::explores_clean(ring_factory(2, 4));
    ASSERT_FALSE(r);
    EXPECT_TRUE(contains(r.message(), "WSPIPE_TRACE=/nonexistent-dir/t.json: cannot write")) << r.message();
    EXPECT_TRUE(contains(r.message(), "replayed WSPIPE_REPLAY=2: (outcome: ok)")) << r.message();
  }
  // A schedule recorded for another kernel does not fit. (Another
  // configuration of the same kernel may: a run that meets the same choice
  // points up to its failure fits, and fails the same way.)
  const auto found = testing::explores_clean(handoff_factory(4, true), runs(200));
  ASSERT_FALSE(found);
  const std::string token = replay_token(found.message());
  ASSERT_FALSE(token.empty()) << found.message();
  ScopedEnv replay("WSPIPE_REPLAY", token);
  for (const auto& make : {ring_factory(1, 2), ring_factory(4, 32, RingBug::no_release)}) {
    const auto r = testing::explores_clean(make);
    ASSERT_FALSE(r);
    EXPECT_TRUE(contains(r.message(), "WSPIPE_REPLAY=" + token + " does not fit this kernel")) << r.message();
    EXPECT_TRUE(contains(r.message(), "recorded from")) << r.message();
    EXPECT_TRUE(contains(r.message(), "the schedule is stale: unset WSPIPE_REPLAY")) << r.message();
  }
}

// --------------------------------------------------------------- options

TEST(TestingHelpers, OptionsTakeTheEnvironment) {
  CleanEnv env;
  {
    const emu::ExploreOptions o = testing::options();
    EXPECT_EQ(o.runs, 0u);
    EXPECT_EQ(o.seconds, 2.0);
    EXPECT_TRUE(static_cast<bool>(o.on_progress));
    emu::ExploreOptions base;
    base.runs = 50;
    EXPECT_EQ(testing::options(base).seconds, emu::ExploreOptions{}.seconds) << "the base's budget stays";
  }
  ScopedEnv runs_("WSPIPE_RUNS", "7"), jobs("WSPIPE_JOBS", "3"), seed("WSPIPE_SEED", "99"),
      strategy("WSPIPE_STRATEGY", "pct:5,rr"), shard("WSPIPE_SHARD", "1/3"), lanes("WSPIPE_LANE_DIVERGENCE", "1");
  const emu::ExploreOptions o = testing::options();
  EXPECT_TRUE(o.lane_divergence);
  EXPECT_TRUE(o.run_options().lane_divergence);
  EXPECT_EQ(o.runs, 7u);
  EXPECT_EQ(o.seconds, 0.0) << "WSPIPE_RUNS alone is the whole budget";
  EXPECT_EQ(o.jobs, 3u);
  EXPECT_EQ(o.first_seed, 99u);
  EXPECT_EQ(emu::to_string(o.portfolio), "pct:5,rr");
  EXPECT_EQ(o.shard_index, 1u);
  EXPECT_EQ(o.shard_count, 3u);
  ScopedEnv seconds("WSPIPE_SECONDS", "1.5");
  EXPECT_EQ(testing::options().seconds, 1.5);
  EXPECT_EQ(testing::options().runs, 7u);
}

TEST(TestingHelpers, BadEnvironmentFailsNamingTheVariableAndValue) {
  CleanEnv env;
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"WSPIPE_JOBS", "0"},       {"WSPIPE_JOBS", "x"},         {"WSPIPE_RUNS", "0"},
      {"WSPIPE_RUNS", "-3"},      {"WSPIPE_SECONDS", "soon"},   {"WSPIPE_SECONDS", "0"},
      {"WSPIPE_SEED", "1e3"},     {"WSPIPE_STRATEGY", "fast"},  {"WSPIPE_STRATEGY", "pct:99"},
      {"WSPIPE_SHARD", "3/2"},    {"WSPIPE_SHARD", "1"},        {"WSPIPE_LANE_DIVERGENCE", "yes"},
  };
  for (const auto& [name, value] : bad) {
    ScopedEnv set(name, value);
    const std::string expected = std::string(name) + "=" + value;
    EXPECT_NONFATAL_FAILURE(testing::options(), expected);
    std::string error;
    emu::ExploreOptions o;
    EXPECT_FALSE(testing::apply_environment(o, &error));
    EXPECT_TRUE(contains(error, expected)) << error;
  }
  // Through the helpers' default options: the test fails, and says why.
  ScopedEnv jobs("WSPIPE_JOBS", "x"), runs_("WSPIPE_RUNS", "3");
  EXPECT_NONFATAL_FAILURE(WSPIPE_EXPECT_CLEAN(ring_factory(2, 4)), "WSPIPE_JOBS=x");
}

// An exploration that ran no schedule is never a pass. A shard
// with no run number within the budget is refused, naming the variable; a
// time budget however small explores at least one schedule.
TEST(TestingHelpers, AnExplorationThatRunsNothingFailsSayingWhy) {
  CleanEnv env;
  {
    ScopedEnv shard("WSPIPE_SHARD", "50/100");
    emu::ExploreOptions o = runs(20);
    std::string error;
    EXPECT_FALSE(testing::apply_environment(o, &error));
    EXPECT_TRUE(contains(error, "WSPIPE_SHARD=50/100: this shard holds no run")) << error;
    const auto r = testing::explores_clean(ring_factory(2, 4), o);
    EXPECT_FALSE(r);
    EXPECT_TRUE(contains(r.message(), "shard 50/100: this shard holds no run")) << r.message();
  }
  ScopedEnv seconds("WSPIPE_SECONDS", "0.0001");
  const auto clean = testing::explores_clean(ring_factory(2, 4), testing::options());
  EXPECT_TRUE(clean);
  EXPECT_FALSE(contains(clean.message(), "explored 0 runs")) << clean.message();
  EXPECT_TRUE(testing::finds("deadlock", ring_factory(2, 4, RingBug::no_release), testing::options()))
      << "a bug on every schedule is found whatever the budget";
}

// Verdicts: a complete exhaustive search verifies; one whose budget ran out
// is incomplete, and neither explores_clean nor explores_verified passes
// it; a sampled exploration passes explores_clean only.
TEST(TestingHelpers, AnIncompleteSearchIsNeverAPassAndOnlyACompleteOneVerifies) {
  CleanEnv env;
  const auto exhaustive = [](std::uint64_t runs) {
    emu::ExploreOptions o;
    o.portfolio = {{.kind = emu::StrategyKind::exhaustive}};
    o.preemptions = 2;
    o.runs = runs;
    o.seconds = 0;
    return o;
  };
  const auto full = emu::explore(ring_factory(2, 4), exhaustive(0));
  ASSERT_EQ(full.verdict(), emu::Verdict::verified) << full.report();
  EXPECT_TRUE(contains(full.report(), "verdict:  verified: no schedule of this configuration within 2 preemption(s)"))
      << full.report();
  WSPIPE_EXPECT_VERIFIED(ring_factory(2, 4), exhaustive(0));
  WSPIPE_EXPECT_CLEAN(ring_factory(2, 4), exhaustive(0));

  const auto cut = emu::explore(ring_factory(2, 4), exhaustive(3));
  ASSERT_EQ(cut.verdict(), emu::Verdict::incomplete) << cut.report();
  EXPECT_FALSE(cut.passed());
  const auto clean = testing::explores_clean(ring_factory(2, 4), exhaustive(3));
  EXPECT_FALSE(clean);
  EXPECT_TRUE(contains(clean.message(), "verdict:  incomplete")) << clean.message();
  EXPECT_FALSE(testing::explores_verified(ring_factory(2, 4), exhaustive(3)));

  const auto sampled = testing::explores_verified(ring_factory(2, 4), runs(20));
  EXPECT_FALSE(sampled);
  EXPECT_TRUE(contains(sampled.message(), "needs the exhaustive strategy")) << sampled.message();
  EXPECT_EQ(emu::explore(ring_factory(2, 4), runs(20)).verdict(), emu::Verdict::explored);
  EXPECT_EQ(emu::explore(ring_factory(2, 4, RingBug::no_release), runs(20)).verdict(), emu::Verdict::found);
}

// One settings parser serves both fronts: the same bad value is refused by
// `wspipe explore` and by WSPIPE_* with the same reason, each naming the
// setting as it was given.
TEST(TestingHelpers, FlagsAndEnvironmentRefuseTheSameValuesInTheSameWords) {
  CleanEnv env;
  struct Case {
    std::vector<std::pair<const char*, const char*>> settings;  // flag, value ("1" for a switch)
  };
  const std::vector<Case> cases = {
      {{{"jobs", "0"}}},
      {{{"jobs", "x"}}},
      {{{"runs", "0"}}},
      {{{"seconds", "soon"}}},
      {{{"seconds", "0"}}},
      {{{"seed", "1e3"}}},
      {{{"strategy", "fast"}}},
      {{{"strategy", "pct:99"}}},
      {{{"shard", "3/2"}}},
      {{{"max-steps", "0"}}},
      {{{"mma-memo-mib", "lots"}}},
      {{{"preemptions", "2"}}},
      {{{"no-reduction", "1"}}},
      // Refused, not ignored or misread.
      {{{"runs", "1"}, {"shard", "1/2"}}},
      {{{"seconds", "0x10"}}},
      {{{"seconds", "+1"}}},
      {{{"seed", "0x1"}}},
      {{{"strategy", "pct:3"}, {"pct-depth", "5"}}},
      {{{"no-shrink", "1"}, {"shrink-seconds", "3"}}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"wspipe", "explore", "ring", "--runs", "1"};
    std::vector<std::unique_ptr<ScopedEnv>> vars;
    std::vector<emu::GivenSetting> given;
    bool budget = false;
    for (const auto& [flag, value] : c.settings) {
      const emu::Setting* s = emu::find_setting_flag(flag);
      ASSERT_NE(s, nullptr) << flag;
      args.push_back(std::string("--") + flag);
      if (!s->arg.empty()) args.push_back(value);
      vars.push_back(std::make_unique<ScopedEnv>(s->env.data(), value));
      given.push_back({s, value});
      budget = budget || s->flag == "runs" || s->flag == "seconds";
    }
    if (budget)
      args.erase(args.begin() + 3, args.begin() + 5);
    else
      vars.push_back(std::make_unique<ScopedEnv>("WSPIPE_RUNS", "1"));
    std::ostringstream out, err;
    EXPECT_EQ(cli::main(args, examples::catalogue(), out, err), 2) << args.back();
    std::string from_flags = err.str();
    from_flags = from_flags.substr(0, from_flags.find('\n'));
    std::string from_env;
    emu::ExploreOptions o;
    EXPECT_FALSE(testing::apply_environment(o, &from_env)) << args.back();
    // The same words once the settings the environment names (those given,
    // and those suggested) are spelled as flags.
    for (const emu::Setting& s : emu::settings_table()) {
      std::vector<std::string> values = {"N", "exhaustive"};
      for (const auto& g : given)
        if (g.setting == &s) values.push_back(g.value);
      for (const std::string& v : values) {
        const std::string var = emu::spell_setting(s, v, emu::SettingsFront::environment);
        const std::string flag = emu::spell_setting(s, v, emu::SettingsFront::flags);
        for (auto at = from_env.find(var); at != std::string::npos; at = from_env.find(var, at + flag.size()))
          from_env.replace(at, var.size(), flag);
      }
    }
    EXPECT_EQ(from_flags, "wspipe: " + from_env);
  }
}

TEST(TestingHelpers, OptionsTheEngineRejectsAreAFailureNotACrash) {
  CleanEnv env;
  emu::ExploreOptions o = runs(5);
  o.preemptions = 1;  // without the exhaustive strategy
  const auto r = testing::explores_clean(ring_factory(2, 4), o);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "exploration did not run")) << r.message();
}

// ---------------------------------------------------------------- shards

TEST(TestingHelpers, ShardSlicesPartitionTheRuns) {
  CleanEnv env;
  const auto make = ring_factory(2, 4);
  for (const std::uint32_t base_count : {1u, 2u}) {
    emu::ExploreOptions base = runs(30);
    base.shard_count = base_count;
    base.shard_index = base_count - 1;
    const auto all = run_numbers(make, base);
    ASSERT_EQ(all.size(), 30u / base_count);
    for (std::uint32_t n = 1; n <= 4; ++n) {
      std::set<std::uint64_t> joined;
      std::size_t total = 0;
      for (std::uint32_t k = 0; k < n; ++k) {
        const auto part = run_numbers(make, testing::shard_slice(base, k, n));
        total += part.size();
        joined.insert(part.begin(), part.end());
      }
      EXPECT_EQ(total, joined.size()) << "slices overlap, n = " << n;
      EXPECT_EQ(joined, all) << "n = " << n;
    }
  }
  EXPECT_THROW(testing::shard_slice(runs(1), 2, 2), std::invalid_argument);
}

// Registered exploration, split by GoogleTest's own sharding: run this
// binary as GoogleTest shards and compare the run numbers each explored.
void log_run(std::uint64_t i, const emu::RunResult&) {
  static std::mutex mu;
  if (const char* file = std::getenv("WSPIPE_HELPERS_RUN_LOG")) {
    std::lock_guard<std::mutex> lock(mu);
    std::ofstream(file, std::ios::app) << i << "\n";
  }
}

emu::ExploreOptions sharded_options() {
  emu::ExploreOptions o = runs(40, 1);
  o.on_run = log_run;
  return o;
}

WSPIPE_EXPLORATION_TEST(ShardedExploration, Ring, ring_factory(3, 8), sharded_options());

TEST(TestingHelpers, RegisteredExplorationSplitsAcrossGoogleTestShards) {
  CleanEnv env;
  if (std::getenv("GTEST_TOTAL_SHARDS") == nullptr) {
    // Unsharded, there is one test.
    const ::testing::UnitTest& ut = *::testing::UnitTest::GetInstance();
    std::vector<std::string> names;
    for (int s = 0; s < ut.total_test_suite_count(); ++s) {
      const ::testing::TestSuite& suite = *ut.GetTestSuite(s);
      if (std::string(suite.name()) != "ShardedExploration") continue;
      for (int t = 0; t < suite.total_test_count(); ++t) names.push_back(suite.GetTestInfo(t)->name());
    }
    EXPECT_EQ(names, std::vector<std::string>{"Ring/shard_0_of_1"});
  }

  const std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  const auto dir = temp_dir("shards");
  constexpr int kShards = 3;
  std::set<std::uint64_t> joined;
  std::size_t total = 0;
  for (int k = 0; k < kShards; ++k) {
    const auto log = dir / ("runs" + std::to_string(k));
    const auto out = dir / ("out" + std::to_string(k));
    const std::string cmd =
        "env -u GTEST_OUTPUT -u GTEST_FILTER -u WSPIPE_RUNS -u WSPIPE_SECONDS -u WSPIPE_JOBS -u WSPIPE_SEED "
        "-u WSPIPE_STRATEGY -u WSPIPE_SHARD -u WSPIPE_REPLAY -u WSPIPE_TRACE -u WSPIPE_LANE_DIVERGENCE "
        "GTEST_TOTAL_SHARDS=" +
        std::to_string(kShards) + " GTEST_SHARD_INDEX=" + std::to_string(k) + " WSPIPE_HELPERS_RUN_LOG='" +
        log.string() + "' '" + exe + "' --gtest_filter='ShardedExploration.*' > '" + out.string() + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << slurp(out);
    const std::string printed = slurp(out);
    EXPECT_TRUE(contains(printed, "ShardedExploration.Ring/shard_" + std::to_string(k) + "_of_3")) << printed;
    EXPECT_TRUE(contains(printed, "[  PASSED  ] 1 test.")) << printed;
    std::istringstream in(slurp(log));
    for (std::uint64_t i; in >> i;) {
      joined.insert(i);
      ++total;
    }
  }
  std::set<std::uint64_t> unsharded;
  for (std::uint64_t i = 0; i < 40; ++i) unsharded.insert(i);
  EXPECT_EQ(total, joined.size()) << "shards overlap";
  EXPECT_EQ(joined, unsharded);
  EXPECT_EQ(run_numbers(ring_factory(3, 8), runs(40, 1)), unsharded);
  std::filesystem::remove_all(dir);
}

// The exhaustive search over GoogleTest's shards (docs/exploration.md, "The
// exhaustive search in shards"): test K of N explores the parts j of the
// sharded search with j mod N = K (each split among its jobs), and passes
// only once its parts are complete; the N tests' runs add up to the runs of
// the sharded search in one process. A search of one part (the ring at this
// size): the first test holds it, the others hold none and say so.
emu::ExploreOptions every_class() {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.seconds = 0;
  o.jobs = 2;
  return o;
}

// The catalogue's gemm at its smallest (looked up when it runs: the
// registration runs during static initialisation).
emu::KernelFactory small_gemm() {
  return [] {
    const emu::Scenario& sc = *wspipe::examples::find_scenario("gemm");
    emu::OptionValues v;
    for (const auto& spec : sc.options) v[spec.name] = spec.def;
    for (const auto& [name, value] : std::vector<std::pair<const char*, std::uint64_t>>{
             {"m", 128}, {"n", 64}, {"k", 128}, {"stages", 1}, {"accum-stages", 1}})
      v.at(name) = value;
    if (sc.resolve) sc.resolve(v);
    return sc.prepare("", v);
  };
}

WSPIPE_EXPLORATION_TEST(ShardedExhaustive, Ring, ring_factory(2, 4), every_class());
WSPIPE_EXPLORATION_TEST(ShardedExhaustive, Gemm, small_gemm(), every_class());

TEST(TestingHelpers, RegisteredExhaustiveSearchIsDealtOutOverTheShards) {
  CleanEnv env;
  const std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  const auto dir = temp_dir("exhaustive-shards");
  // "[wspipe] ShardedExhaustive.Gemm/shard_1_of_3: explored 13 runs (..."
  auto runs_of = [](const std::string& printed, const std::string& test) -> std::optional<std::uint64_t> {
    const std::string head = "[wspipe] ShardedExhaustive." + test + ": explored ";
    const auto at = printed.find(head);
    if (at == std::string::npos) return std::nullopt;
    return std::strtoull(printed.c_str() + at + head.size(), nullptr, 10);
  };
  std::uint64_t gemm_runs = 0;
  for (int k = 0; k < 3; ++k) {
    const auto out = dir / ("out" + std::to_string(k));
    const std::string shard = "shard_" + std::to_string(k) + "_of_3";
    const std::string cmd =
        "env -u GTEST_OUTPUT -u GTEST_FILTER -u WSPIPE_RUNS -u WSPIPE_SECONDS -u WSPIPE_JOBS -u WSPIPE_SEED "
        "-u WSPIPE_STRATEGY -u WSPIPE_SHARD -u WSPIPE_REPLAY -u WSPIPE_TRACE -u WSPIPE_LANE_DIVERGENCE "
        "GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=" +
        std::to_string(k) + " '" + exe + "' --gtest_filter='ShardedExhaustive.*' > '" + out.string() + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << slurp(out);
    const std::string printed = slurp(out);
    EXPECT_TRUE(contains(printed, "[  PASSED  ] 2 tests.")) << printed;
    EXPECT_TRUE(contains(printed, "of the sharded search; the configuration is verified when every shard's are"))
        << printed;
    EXPECT_TRUE(contains(printed, k == 0 ? "in this shard's 1 of the 1 part" : "in this shard's 0 of the 1 part"))
        << printed;
    const auto ring = runs_of(printed, "Ring/" + shard);
    const auto gemm = runs_of(printed, "Gemm/" + shard);
    ASSERT_TRUE(ring && gemm) << printed;
    EXPECT_EQ(*ring, k == 0 ? 1u : 0u) << printed;
    EXPECT_GT(*gemm, 0u) << printed;
    gemm_runs += *gemm;
  }
  emu::ExploreOptions whole = every_class();
  whole.sharded = true;
  const emu::ExploreResult r = emu::explore(small_gemm(), whole);
  ASSERT_TRUE(r.ok() && r.complete) << r.report();
  EXPECT_GE(r.parts_total, 3u);
  EXPECT_EQ(gemm_runs, r.runs);
  std::filesystem::remove_all(dir);
}

// A registered exploration that fails in one of GoogleTest's shards prints
// a replay line that runs again without the sharding: its filter names the
// registered test in any sharding ("suite.name/*"), not the shard's test,
// which only exists under the same GTEST_TOTAL_SHARDS. (DISABLED_: it fails
// on purpose, run only here.)
WSPIPE_EXPLORATION_TEST(DISABLED_ShardedBroken, Ring, ring_factory(2, 4, RingBug::no_release), every_class());

TEST(TestingHelpers, AFailingShardsReplayLineRunsWithoutTheSharding) {
  CleanEnv env;
  const std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  const auto dir = temp_dir("sharded-replay");
  const std::string clean_env =
      "env -u GTEST_OUTPUT -u GTEST_FILTER -u WSPIPE_RUNS -u WSPIPE_SECONDS -u WSPIPE_JOBS -u WSPIPE_SEED "
      "-u WSPIPE_STRATEGY -u WSPIPE_SHARD -u WSPIPE_REPLAY -u WSPIPE_TRACE -u WSPIPE_LANE_DIVERGENCE "
      "-u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX ";
  const auto out = dir / "out";
  const std::string cmd = clean_env + "GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=0 '" + exe +
                          "' --gtest_also_run_disabled_tests --gtest_filter='DISABLED_ShardedBroken.*' > '" +
                          out.string() + "' 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0) << cmd;
  const std::string printed = slurp(out);
  EXPECT_TRUE(contains(printed, "DISABLED_ShardedBroken.Ring/shard_0_of_2")) << printed;
  EXPECT_TRUE(contains(printed, "'--gtest_filter=DISABLED_ShardedBroken.Ring/*'")) << printed;
  // The replay line, run as printed (plus the flag that runs a DISABLED_
  // test, and the trace in the temporary directory), reproduces it.
  const auto at = printed.find("replay: ");
  ASSERT_NE(at, std::string::npos) << printed;
  std::string line = printed.substr(at + 8, printed.find('\n', at) - at - 8);
  const std::string trace = "WSPIPE_TRACE=wspipe-trace.json";
  ASSERT_NE(line.find(trace), std::string::npos) << line;
  line.replace(line.find(trace), trace.size(), "WSPIPE_TRACE='" + (dir / "t.txt").string() + "'");
  const auto again = dir / "again";
  const std::string replay = clean_env + line + " --gtest_also_run_disabled_tests > '" + again.string() + "' 2>&1";
  EXPECT_NE(std::system(replay.c_str()), 0) << replay;
  const std::string replayed = slurp(again);
  EXPECT_TRUE(contains(replayed, "DISABLED_ShardedBroken.Ring/shard_0_of_1")) << replayed;
  EXPECT_TRUE(contains(replayed, "replayed WSPIPE_REPLAY=")) << replayed;
  EXPECT_TRUE(contains(replayed, "(outcome: deadlock)")) << replayed;
  EXPECT_TRUE(contains(slurp(dir / "t.txt"), "wait")) << "the text trace of the replayed run";
  std::filesystem::remove_all(dir);
}

// ------------------------------------------------------------ rapidcheck

TEST(TestingHelpers, RapidcheckPropertyOverACorrectRingPasses) {
  EXPECT_TRUE(rc::check("the ring is clean for any stages and items", [] {
    const int stages = *rc::gen::inRange(1, 5);
    const auto items = *rc::gen::inRange<std::uint32_t>(0, 17);
    testing::rc_explore_clean(ring_factory(stages, items));
  }));
}

TEST(TestingHelpers, RapidcheckPropertyOverABrokenKernelFails) {
  // Deterministic: every run over-arrives once there is an item.
  EXPECT_FALSE(rc::check("an over-arriving ring (expected to fail)", [] {
    const int stages = *rc::gen::inRange(1, 5);
    const auto items = *rc::gen::inRange<std::uint32_t>(0, 17);
    testing::rc_explore_clean(ring_factory(stages, items, RingBug::over_arrive));
  }));
  // Schedule-dependent: the strategy and seed that rapidcheck draws find it.
  EXPECT_FALSE(rc::check("an early-releasing hand-off (expected to fail)", [] {
    const auto items = *rc::gen::inRange<std::uint32_t>(1, 9);
    testing::rc_explore_clean(handoff_factory(items, true));
  }));
}

// What rapidcheck prints for a property: its result message, counterexample
// included (as RC_GTEST_PROP's failure does).
template <class Property>
std::string rapidcheck_message(Property property) {
  rc::detail::TestMetadata metadata;
  metadata.id = metadata.description = "wspipe helpers test";
  std::ostringstream out;
  rc::detail::printResultMessage(rc::detail::checkTestable(property, metadata), out);
  return out.str();
}

// A failure reads as the GoogleTest helpers' do: wspipe's report and a
// replay line, not rapidcheck's RC_FAIL expression and this library's
// path; the counterexample names the strategy and seed it drew.
TEST(TestingHelpers, RapidcheckFailureIsTheReportAndAReplayLine) {
  CleanEnv env;
  const std::string msg = rapidcheck_message([] {
    const auto items = *rc::gen::inRange<std::uint32_t>(1, 9).as("items");
    testing::rc_explore_clean(handoff_factory(items, true));
  });
  for (const char* part : {"Falsifiable", "\nitems:\n", "\nwspipe strategy:\n\"", "\nwspipe seed:\n",
                           "wspipe found kernel.check\nfailure in ", "replay: RC_PARAMS=\"reproduce=",
                           " WSPIPE_REPLAY=", "WSPIPE_TRACE=wspipe-trace.json"})
    EXPECT_TRUE(contains(msg, part)) << part << " in:\n" << msg;
  for (const char* noise : {"RC_FAIL", "rapidcheck.cpp"}) EXPECT_FALSE(contains(msg, noise)) << msg;
}

// WSPIPE_REPLAY and WSPIPE_TRACE work in a property as in a GoogleTest
// helper: the property replays the schedule, writes its trace, and fails
// unless the replayed run ends ok.
TEST(TestingHelpers, RapidcheckPropertyReplaysWithATrace) {
  CleanEnv env;
  const auto property = [] { testing::rc_explore_clean(handoff_factory(4, true)); };
  const std::string token = replay_token(rapidcheck_message(property));
  ASSERT_EQ(token.rfind("6:", 0), 0u);
  const auto dir = temp_dir("rc-replay");
  {
    ScopedEnv replay("WSPIPE_REPLAY", token);
    ScopedEnv trace("WSPIPE_TRACE", (dir / "t.json").string());
    const std::string msg = rapidcheck_message(property);
    EXPECT_TRUE(contains(msg, "replayed WSPIPE_REPLAY=" + token + " (outcome: kernel.check)")) << msg;
    EXPECT_TRUE(contains(slurp(dir / "t.json"), "\"rule\":\"kernel.check\"")) << "the replayed run's trace";
  }
  {
    ScopedEnv replay("WSPIPE_REPLAY", "2:");  // the default schedule: clean
    EXPECT_TRUE(rc::check("the hand-off under its default schedule", property));
  }
  {
    ScopedEnv replay("WSPIPE_REPLAY", "2:zz!");
    EXPECT_TRUE(contains(rapidcheck_message(property), "WSPIPE_REPLAY='2:zz!' is not a schedule"));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wspipe::helpers_test
