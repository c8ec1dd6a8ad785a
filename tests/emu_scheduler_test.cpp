// The scheduler's incremental enabled set: it equals the
// full recomputation from movable() at every step, across the catalogue's
// kernels (correct and broken), strategies and modes; and its work per step
// does not grow with idle warps and engines.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "backends/emu/runtime/world.hpp"
#include "emu_test_util.hpp"
#include "examples/idle_grid.hpp"
#include "examples/scenarios.hpp"

namespace {

using namespace wspipe;
using test::B;

// Turns the scheduler's cross-check on for the test's Worlds: a step whose
// kept enabled set differs from the recomputed one aborts the test program
// with both sets printed.
class SchedCheck {
 public:
  SchedCheck() { emu::detail::set_sched_check(true); }
  ~SchedCheck() { emu::detail::set_sched_check(false); }
};

emu::OptionValues defaults(const emu::Scenario& sc, const emu::VariantSpec& v) {
  emu::OptionValues values;
  for (const auto& o : sc.options) values[o.name] = o.def;
  for (const auto& [k, x] : v.pinned) values[k] = x;
  if (sc.resolve) sc.resolve(values);
  return values;
}

// Small sizes of a scenario, so that each variant runs a few schedules of
// each strategy in seconds; its defaults where the variant's pins rule the
// small sizes out. `pairs`: gemm with cta_group 2 on two clusters.
emu::OptionValues small(const emu::Scenario& sc, const emu::VariantSpec& v, bool pairs) {
  emu::OptionValues values;
  for (const auto& o : sc.options) values[o.name] = o.def;
  auto set = [&](const char* k, std::uint64_t x) {
    if (values.count(k) != 0) values[k] = x;
  };
  set("items", 24);
  set("n", 64);
  set("k", 128);
  set("rows", 128);
  if (pairs) {
    set("cta-group", 2);
    set("clusters", 2);
  }
  for (const auto& [k, x] : v.pinned) values[k] = x;
  if (sc.resolve) sc.resolve(values);
  try {
    sc.prepare(v.name, values);
  } catch (const std::invalid_argument&) {
    return defaults(sc, v);
  }
  return values;
}

TEST(scheduler_CrossCheck, EnabledSetEqualsMovableAtEveryStepAcrossScenariosAndStrategies) {
  const SchedCheck on;
  const std::uint64_t before = emu::detail::sched_checks();
  std::uint64_t runs = 0;
  for (const auto& sc : examples::catalogue()) {
    for (const bool pairs : {false, true}) {
      if (pairs && sc.name != "gemm") continue;
      for (const auto& v : sc.variants) {
        SCOPED_TRACE(sc.name + "/" + (v.name.empty() ? "correct" : v.name) + (pairs ? " cta_group 2" : ""));
        const emu::OptionValues values = small(sc, v, pairs);
        const emu::KernelFactory make = [&] { return sc.prepare(v.name, values); };
        for (const bool spurious : {false, true}) {
          emu::ExploreOptions o = test::fixed_runs(3);
          o.portfolio = {{emu::StrategyKind::random}, {emu::StrategyKind::pct, 3}, {emu::StrategyKind::round_robin}};
          o.shrink = false;
          o.spurious_try_wait = spurious;
          o.lane_divergence = v.lane_divergence;
          o.async_reorder = v.async_reorder;
          const auto r = emu::explore(make, o);
          runs += r.runs;
          // A correct kernel stays correct with the check on (a broken one
          // may go unfound in so few runs).
          if (v.expect == "ok") {
            EXPECT_TRUE(r.ok()) << r.report();
          }
        }
      }
    }
  }
  // Exhaustive search (with its footprints and sleep sets) over ring.
  const emu::Scenario* ring = examples::find_scenario("ring");
  emu::OptionValues values;
  for (const auto& o : ring->options) values[o.name] = o.def;
  values["items"] = 4;
  values["stages"] = 2;
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.preemptions = 2;
  o.seconds = 0;
  const auto r = emu::explore([&] { return ring->prepare("", values); }, o);
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_TRUE(r.complete);
  EXPECT_GT(runs, 100u);
  EXPECT_GT(emu::detail::sched_checks() - before, 10'000u);  // the check ran
}

// With loads completing out of issue order and in pieces: the TMA engines'
// alternative actors join and leave the enabled set as their queues change,
// on the catalogue's TMA kernels (correct variants, small sizes), under
// every strategy and the exhaustive search.
TEST(scheduler_CrossCheck, EnabledSetEqualsMovableWithLoadsOutOfIssueOrder) {
  const SchedCheck on;
  const std::uint64_t before = emu::detail::sched_checks();
  for (const char* name : {"tile-reduce", "gemm", "blockwise-fp8", "persistent-gemm"}) {
    const emu::Scenario* sc = examples::find_scenario(name);
    ASSERT_NE(sc, nullptr) << name;
    const emu::VariantSpec& correct = sc->variants.front();
    emu::OptionValues values = small(*sc, correct, false);
    if (values.count("weights") != 0) values["weights"] = 1;
    SCOPED_TRACE(name);
    emu::ExploreOptions o = test::fixed_runs(6);
    o.portfolio = {{emu::StrategyKind::random}, {emu::StrategyKind::pct, 3}, {emu::StrategyKind::round_robin}};
    o.async_reorder = true;
    const auto r = emu::explore([&] { return sc->prepare("", values); }, o);
    EXPECT_TRUE(r.ok()) << r.report();
  }
  const emu::Scenario* tr = examples::find_scenario("tile-reduce");
  emu::OptionValues values = small(*tr, tr->variants.front(), false);
  values["weights"] = 1;
  values["rows"] = 64;
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.preemptions = 1;
  o.seconds = 0;
  o.async_reorder = true;
  const auto r = emu::explore([&] { return tr->prepare("", values); }, o);
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_TRUE(r.complete);
  EXPECT_GT(emu::detail::sched_checks() - before, 1'000u);  // the check ran
}

// Warps that block and unblock on every kind of object: an mbarrier waited
// with wait and with try_wait (which here times out only when nothing else
// can move: the polling warp completes the barrier itself), named
// barriers, the cluster barrier, and the TMEM allocator (two warps take all
// 512 columns in turn: one blocks until the other deallocates).
TEST(scheduler_CrossCheck, EveryKindOfBlock) {
  const SchedCheck on;
  struct Smem {
    SharedMemBarrier bar;
    std::uint32_t addr[2];
  };
  for (const bool spurious : {false, true}) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      emu::RunOptions opts = test::with_strategy(emu::StrategyKind::random, seed);
      opts.spurious_try_wait = spurious;
      const auto r = test::run_kernel(
          4,
          [] {
            auto& s = B::shared_storage<Smem>();
            const std::uint32_t w = B::warp_idx();
            if (w == 0) B::elect_one([&] { B::init(s.bar, 32); });
            B::cluster_sync();
            if (w == 0) {
              while (!B::try_wait(s.bar, 0)) B::arrive(s.bar);
            } else {
              B::wait(s.bar, 0);
            }
            B::named_sync(1, 4 * 32);
            if (w < 2) B::named_sync(2, 2 * 32);
            if (w >= 2) {
              B::tmem_alloc<1>(&s.addr[w - 2], 512);
              B::syncwarp();
              B::tmem_dealloc<1>(s.addr[w - 2], 512);
            }
            B::cluster_sync();
          },
          opts, sizeof(Smem), 2);
      EXPECT_EQ(r.status, emu::Status::ok) << r.report();
    }
  }
}

// Re-evaluations of movability per step: the scheduler's own work, counted
// rather than timed, on examples/idle_grid.hpp. With 64 CTAs of which 60
// are idle it stays what it is with the 4 busy ones (before the change it grew with every warp and
// engine: 384 evaluations per step at 64 CTAs).
TEST(scheduler_Scale, IdleCtasAddNoWorkPerStep) {
  auto per_step = [](std::uint32_t ctas) {
    emu::LaunchConfig launch;
    launch.num_clusters = ctas;
    launch.warps_per_cta = 4;
    launch.smem_bytes = examples::kIdleGridSmem;
    emu::RunOptions opts = test::with_strategy(emu::StrategyKind::random, 7);
    opts.trace = false;
    opts.spurious_try_wait = false;  // the idle CTAs stay idle until the rings end
    const std::uint64_t before = emu::detail::sched_evaluations();
    const auto r = emu::run(launch, [] { examples::idle_grid_kernel<B>(4, 1024); }, opts);
    EXPECT_EQ(r.status, emu::Status::ok) << r.report();
    return static_cast<double>(emu::detail::sched_evaluations() - before) / static_cast<double>(r.steps);
  };
  const double busy = per_step(4);
  const double idle = per_step(64);
  RecordProperty("evaluations_per_step_4", std::to_string(busy));
  RecordProperty("evaluations_per_step_64", std::to_string(idle));
  EXPECT_LT(busy, 4.0);
  EXPECT_LT(idle, 1.25 * busy) << "4 CTAs: " << busy << " per step, 64 CTAs: " << idle;
}

}  // namespace
