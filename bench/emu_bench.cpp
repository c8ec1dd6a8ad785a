// How fast the emulator schedules, against the floor it is built on.
//
//   BM_FiberYield:  two Boost.Fiber fibers (default round_robin scheduler)
//                   yielding to each other; items = yields.
//   BM_EmuRing:     the `ring` scenario (4 stages, 4096 items) on the
//                   emulator; items = scheduling steps. Arguments:
//                   strategy, trace on/off, race checker on/off.
//   BM_EmuGemm:     the `gemm` scenario at its defaults (256 x 256 x 256
//                   bf16, cta_group 1 or 2), random strategy, trace off;
//                   items = scheduling steps; argument: race checker
//                   on/off. Tile-heavy: every TMA copy and MMA updates the
//                   checker's shadows of shared memory and TMEM.
//   BM_EmuLanes:    `ring` (4 stages, 4096 items) and `gemm` (defaults,
//                   cta_group 1), random strategy, trace off, race checker
//                   on, with the lane-divergence mode off and on; items =
//                   scheduling steps (the same steps either way).
//   BM_EmuGrid:     examples/idle_grid.hpp: a grid of 1, 4, 16 or 64 CTAs
//                   (4 warps each) in which CTAs 0-3 run `ring` (4 stages,
//                   4096 items) and every other CTA's warps wait on an
//                   mbarrier that completes only once the rings are done;
//                   random strategy, trace off; arguments: CTAs, race
//                   checker on/off; items = scheduling steps. The
//                   scheduler's cost per step must not grow with the idle
//                   warps and engines.
//   BM_Explore:     emu::explore() as `wspipe explore` runs it (random
//                   strategy, trace off, race checker on, D checked after
//                   every run), after one exploration of warm-up: `ring` and `gemm`
//                   (defaults) with 1 and 2 jobs; gemm cta_group 2,
//                   blockwise-fp8 (defaults) and gemm 1024x1024x1024 on 4
//                   clusters with 1; items = schedules (runs).
//   BM_ExploreExhaustive: complete exhaustive searches (no bound) of
//                   tile-reduce (rows 64, 1 stage, clusters of 2), gemm
//                   (128x64x256, 1 stage, 1 accumulator stage) and
//                   persistent-gemm (256x64x64, 1 cluster, 1 CLC stage),
//                   with 1 and 2 jobs; items = classes of schedules.
//   BM_ExploreModesOff: ring, gemm and blockwise-fp8 as BM_Explore with
//                   try_wait time-outs and loads out of order off (the
//                   narrower exploration): what the modes cost.
//   BM_EmuTrace:    `ring` (4 stages, 4096 items) and `gemm` (defaults,
//                   cta_group 1), random strategy, race checker on, with
//                   the trace off and on; items = schedules (runs).
//
// After the table, prints one line per emulator configuration, the
// speed-up of 2 jobs over 1 (`jobs2_speedup ring=... gemm=...`, and
// `exhaustive_jobs2_speedup <case>=...` per exhaustive search), the
// tensor-heavy explorations' schedules/s over ring's (`gemm_ratio=...
// gemm_cta2_ratio=... blockwise_fp8_ratio=...`), the large GEMM's seconds
// per schedule (`gemm_1024_seconds_per_schedule=...`), the
// lane-divergence mode's slowdown (`lane_divergence_cost ring=... gemm=...`,
// time with the mode over time without), the trace's
// (`trace_ratio ring=... gemm=...`: schedules/s with the trace on over
// schedules/s with it off), the cost per step of a grid of 16 or 64 mostly
// idle CTAs over that of 4 busy ones (`grid_step_cost 16/4=... 64/4=...`,
// race checker off, then on) and, last,
// `ratio=<steps per second / yields per second>` for the configuration
// `wspipe explore` uses (random strategy, trace off, race checker on). Each scheduling step
// may switch fibers once, so the ratio says how much of a step is the
// emulator's own work: 1.0 would be a step that costs exactly one yield.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <boost/fiber/all.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/emu/emu.hpp"
#include "examples/idle_grid.hpp"
#include "examples/ring.hpp"
#include "examples/scenarios.hpp"

namespace {

constexpr int kYieldsPerFiber = 200'000;
constexpr std::uint32_t kItems = 4096;

void BM_FiberYield(benchmark::State& state) {
  std::int64_t yields = 0;
  for (auto _ : state) {
    // A fresh thread, so that the thread's scheduler is Boost's default.
    std::thread t([] {
      auto spin = [] {
        for (int i = 0; i < kYieldsPerFiber; ++i) boost::this_fiber::yield();
      };
      boost::fibers::fiber a(spin);
      boost::fibers::fiber b(spin);
      a.join();
      b.join();
    });
    t.join();
    yields += 2 * kYieldsPerFiber;
  }
  state.SetItemsProcessed(yields);
}
BENCHMARK(BM_FiberYield)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_EmuRing(benchmark::State& state) {
  wspipe::emu::RunOptions opts;
  opts.strategy.kind = static_cast<wspipe::emu::StrategyKind>(state.range(0));
  opts.trace = state.range(1) != 0;
  opts.race_check = state.range(2) != 0;
  opts.strategy.pct_steps = 6 * kItems;
  wspipe::emu::LaunchConfig launch;
  launch.warps_per_cta = wspipe::examples::kRingWarps;
  launch.smem_bytes = sizeof(wspipe::examples::RingStorage<4>);
  auto body = [] {
    wspipe::examples::ring_kernel<wspipe::emu::EmuBackend, 4>(kItems, wspipe::examples::RingBug::none);
  };
  std::int64_t steps = 0;
  std::uint64_t seed = 1;
  for (auto _ : state) {
    opts.strategy.seed = seed++;
    auto r = wspipe::emu::run(launch, body, opts);
    if (r.status != wspipe::emu::Status::ok) state.SkipWithError("ring failed");
    steps += static_cast<std::int64_t>(r.steps);
  }
  state.SetItemsProcessed(steps);
  state.SetLabel(std::string(wspipe::emu::to_string(opts.strategy.kind)) + (opts.trace ? " trace" : " no-trace") +
                 (opts.race_check ? "" : " no-race-check"));
}
BENCHMARK(BM_EmuRing)
    ->ArgsProduct({{static_cast<int>(wspipe::emu::StrategyKind::round_robin),
                    static_cast<int>(wspipe::emu::StrategyKind::random),
                    static_cast<int>(wspipe::emu::StrategyKind::pct)},
                   {0, 1},
                   {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

wspipe::examples::OptionValues defaults(const wspipe::examples::Scenario& sc) {
  wspipe::examples::OptionValues values;
  for (const auto& o : sc.options) values[o.name] = o.def;
  return values;
}

// Runs the scenario's correct kernel once per iteration (seeds 1, 2, ...);
// items = scheduling steps, or schedules (runs) with `per_run`.
void run_correct(benchmark::State& state, const wspipe::examples::Scenario& sc,
                 const wspipe::examples::OptionValues& values, wspipe::emu::RunOptions opts, bool per_run = false) {
  std::int64_t items = 0;
  std::uint64_t seed = 1;
  for (auto _ : state) {
    opts.strategy.seed = seed++;
    auto r = wspipe::emu::run(sc.prepare("", values), opts);
    if (r.status != wspipe::emu::Status::ok) state.SkipWithError((sc.name + " failed").c_str());
    items += per_run ? 1 : static_cast<std::int64_t>(r.steps);
  }
  state.SetItemsProcessed(items);
}

void BM_EmuGemm(benchmark::State& state) {
  const wspipe::examples::Scenario* gemm = wspipe::examples::find_scenario("gemm");
  wspipe::examples::OptionValues values = defaults(*gemm);
  values["cta-group"] = static_cast<std::uint64_t>(state.range(0));
  gemm->resolve(values);  // cta_group 2: clusters of 2 (Scenario::prepare takes resolved values)
  wspipe::emu::RunOptions opts;
  opts.trace = false;
  opts.race_check = state.range(1) != 0;
  opts.spurious_try_wait = false;  // the idle CTAs stay idle until the rings end (examples/idle_grid.hpp)
  run_correct(state, *gemm, values, opts);
  state.SetLabel("gemm cta_group " + std::to_string(state.range(0)) + (opts.race_check ? "" : " no-race-check"));
}
BENCHMARK(BM_EmuGemm)->ArgsProduct({{1, 2}, {1, 0}})->Unit(benchmark::kMillisecond)->UseRealTime();

// `ring` (4 stages, kItems items) or `gemm` (defaults, cta_group 1), and
// its option values.
const wspipe::examples::Scenario* ring_or_gemm(bool gemm, wspipe::examples::OptionValues& values) {
  const wspipe::examples::Scenario* sc = wspipe::examples::find_scenario(gemm ? "gemm" : "ring");
  values = defaults(*sc);
  if (!gemm) values["items"] = kItems;
  return sc;
}

// The lane-divergence mode's cost: the same runs with lane 31 on a second
// fiber per warp, compared at every wait and collective.
void BM_EmuLanes(benchmark::State& state) {
  wspipe::examples::OptionValues values;
  const wspipe::examples::Scenario* sc = ring_or_gemm(state.range(0) != 0, values);
  wspipe::emu::RunOptions opts;
  opts.trace = false;
  opts.lane_divergence = state.range(1) != 0;
  run_correct(state, *sc, values, opts);
  state.SetLabel(sc->name + (opts.lane_divergence ? " lanes" : " warp"));
}
BENCHMARK(BM_EmuLanes)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

// RunOptions::async_reorder's cost on `gemm` (defaults, cta_group 1, random
// strategy): the TMA engine's alternative actors in the enabled set, and
// the loads they complete out of order or in pieces (each piece a step).
void BM_EmuAsyncReorder(benchmark::State& state) {
  wspipe::examples::OptionValues values;
  const wspipe::examples::Scenario* sc = ring_or_gemm(true, values);
  wspipe::emu::RunOptions opts;
  opts.trace = false;
  opts.async_reorder = state.range(0) != 0;
  run_correct(state, *sc, values, opts);
  state.SetLabel(sc->name + (opts.async_reorder ? " async-reorder" : " in-order"));
}
BENCHMARK(BM_EmuAsyncReorder)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

constexpr std::uint32_t kGridBusyCtas = 4;
constexpr std::uint32_t kGridWarps = 4;

void BM_EmuGrid(benchmark::State& state) {
  wspipe::emu::RunOptions opts;
  opts.strategy.kind = wspipe::emu::StrategyKind::random;
  opts.trace = false;
  opts.race_check = state.range(1) != 0;
  wspipe::emu::LaunchConfig launch;
  launch.num_clusters = static_cast<std::uint32_t>(state.range(0));
  launch.warps_per_cta = kGridWarps;
  launch.smem_bytes = wspipe::examples::kIdleGridSmem;
  std::int64_t steps = 0;
  std::uint64_t seed = 1;
  for (auto _ : state) {
    opts.strategy.seed = seed++;
    auto r = wspipe::emu::run(
        launch, [] { wspipe::examples::idle_grid_kernel<wspipe::emu::EmuBackend>(kGridBusyCtas, kItems); }, opts);
    if (r.status != wspipe::emu::Status::ok) state.SkipWithError(("grid failed: " + r.report()).c_str());
    steps += static_cast<std::int64_t>(r.steps);
  }
  state.SetItemsProcessed(steps);
  state.counters["steps_per_run"] =
      benchmark::Counter(static_cast<double>(steps) / static_cast<double>(std::max<std::int64_t>(state.iterations(), 1)));
  state.SetLabel("grid " + std::to_string(state.range(0)) + (opts.race_check ? "" : " no-race-check"));
}
BENCHMARK(BM_EmuGrid)->ArgsProduct({{1, 4, 16, 64}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

// The trace's cost: `ring` (4 stages, 4096 items) and `gemm` (defaults,
// cta_group 1), random strategy, race checker on, with RunOptions::trace
// off and on; items = schedules (runs, seeds 1, 2, ...), so the per-run
// work of the trace counts as well as its per-event work.
void BM_EmuTrace(benchmark::State& state) {
  wspipe::examples::OptionValues values;
  const wspipe::examples::Scenario* sc = ring_or_gemm(state.range(0) != 0, values);
  wspipe::emu::RunOptions opts;
  opts.trace = state.range(1) != 0;
  run_correct(state, *sc, values, opts, /*per_run=*/true);
  state.SetLabel(sc->name + (opts.trace ? " trace" : " no-trace"));
}
BENCHMARK(BM_EmuTrace)->Args({0, 0})->Args({0, 1})->Args({1, 0})->Args({1, 1})->Unit(benchmark::kMillisecond)->UseRealTime();

// Whole explorations: schedules per second with 1 or 2 threads, the way
// `wspipe explore` runs them (random strategy, trace off, race checker on,
// each run's D checked against the reference).
struct ExploreCase {
  const char* label;
  const char* scenario;
  std::vector<std::pair<std::string, std::uint64_t>> options;  // over the defaults
  std::uint64_t runs;                                          // per iteration
};
const ExploreCase kExploreCases[] = {
    {"ring", "ring", {}, 2000},
    {"gemm", "gemm", {}, 200},
    {"gemm cta_group 2", "gemm", {{"cta-group", 2}, {"cluster", 2}}, 200},
    {"blockwise-fp8", "blockwise-fp8", {}, 100},
    {"gemm 1024x1024x1024 4 clusters", "gemm", {{"m", 1024}, {"n", 1024}, {"k", 1024}, {"clusters", 4}}, 4},
};

// `modes`: try_wait time-outs and loads out of order (RunOptions'
// spurious_try_wait and async_reorder, on by default), or
// neither, as explored before.
void explore_bench(benchmark::State& state, bool modes) {
  const ExploreCase& c = kExploreCases[state.range(0)];
  const wspipe::examples::Scenario* sc = wspipe::examples::find_scenario(c.scenario);
  wspipe::examples::OptionValues values = defaults(*sc);
  for (const auto& [k, v] : c.options) values[k] = v;
  wspipe::emu::ExploreOptions o;
  o.runs = c.runs;
  o.seconds = 0;
  o.jobs = static_cast<unsigned>(state.range(1));
  o.portfolio = {{wspipe::emu::StrategyKind::random}};
  o.spurious_try_wait = o.async_reorder = modes;
  const wspipe::emu::KernelFactory make = [&] { return sc->prepare("", values); };
  // Warm-up, not timed: an exploration builds its problem's reference once
  // and fills the MMA memo in its first runs, which a long exploration
  // amortises. (MinWarmUpTime does not do it: Google Benchmark 1.7.1, as
  // Debian ships it, ignores the per-benchmark setting.)
  if (!wspipe::emu::explore(make, o).ok()) state.SkipWithError("exploration found a failure");
  std::int64_t runs = 0;
  for (auto _ : state) {
    const auto r = wspipe::emu::explore(make, o);
    if (!r.ok()) state.SkipWithError("exploration found a failure");
    runs += static_cast<std::int64_t>(r.runs);
  }
  state.SetItemsProcessed(runs);
  state.SetLabel(std::string(c.label) + " explore jobs " + std::to_string(o.jobs) + (modes ? "" : " modes off"));
}
void BM_Explore(benchmark::State& state) { explore_bench(state, true); }
void BM_ExploreModesOff(benchmark::State& state) { explore_bench(state, false); }
// ring and gemm with 1 and 2 jobs; the rest with 1, each after one
// exploration of warm-up.
BENCHMARK(BM_Explore)
    ->Args({0, 1})
    ->Args({0, 2})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Args({2, 1})
    ->Args({3, 1})
    ->Args({4, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// The same explorations with time-outs and loads out of order off: what
// the two modes cost (docs/performance.md).
BENCHMARK(BM_ExploreModesOff)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({3, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Complete exhaustive searches (no bound, source sets) with 1 and 2 jobs:
// the whole search per iteration, items = classes of schedules (the same
// classes, and 2 jobs at least 1.8x one).
struct SearchCase {
  const char* label;
  const char* scenario;
  std::vector<std::pair<std::string, std::uint64_t>> options;  // over the defaults
};
const SearchCase kSearchCases[] = {
    {"tile-reduce rows 64 cluster 2", "tile-reduce", {{"rows", 64}, {"stages", 1}, {"cluster", 2}}},
    {"gemm k 256", "gemm", {{"m", 128}, {"n", 64}, {"k", 256}, {"stages", 1}, {"accum-stages", 1}}},
    {"persistent-gemm", "persistent-gemm", {{"m", 256}, {"n", 64}, {"k", 64}, {"clusters", 1}, {"clc-stages", 1}}},
};
void BM_ExploreExhaustive(benchmark::State& state) {
  const SearchCase& c = kSearchCases[state.range(0)];
  const wspipe::examples::Scenario* sc = wspipe::examples::find_scenario(c.scenario);
  wspipe::examples::OptionValues values = defaults(*sc);
  for (const auto& [k, v] : c.options) values[k] = v;
  if (sc->resolve) sc->resolve(values);
  wspipe::emu::ExploreOptions o;
  o.portfolio = {{wspipe::emu::StrategyKind::exhaustive}};
  o.seconds = 0;
  o.jobs = static_cast<unsigned>(state.range(1));
  const wspipe::emu::KernelFactory make = [&] { return sc->prepare("", values); };
#ifndef NDEBUG
  // Seconds per search optimised, minutes in the sanitizer presets' Debug
  // builds, whose smoke run only checks that the program works.
  state.SkipWithError("optimised builds only");
  return;
#endif
  std::int64_t classes = 0;
  for (auto _ : state) {
    const auto r = wspipe::emu::explore(make, o);
    if (!r.ok() || !r.complete) state.SkipWithError("the search failed or did not complete");
    classes += static_cast<std::int64_t>(r.runs);
  }
  state.SetItemsProcessed(classes);
  state.SetLabel(std::string(c.label) + " exhaustive jobs " + std::to_string(o.jobs));
}
BENCHMARK(BM_ExploreExhaustive)
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Collects items/second per benchmark while printing the usual table.
// With --benchmark_repetitions=N the median of the repetitions is used,
// and their coefficient of variation is printed beside it.
class Collect : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      std::string name = r.benchmark_name();
      if (r.run_type == Run::RT_Aggregate) {
        const std::string suffix = "_" + r.aggregate_name;
        name.resize(name.size() - suffix.size());
        if (r.aggregate_name == "median") rate[name] = it->second.value;
        if (r.aggregate_name == "cv") cv[name] = it->second.value;
      } else if (!rate.count(name)) {
        rate[name] = it->second.value;
      }
      label[name] = r.report_label;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> rate;
  std::map<std::string, double> cv;
  std::map<std::string, std::string> label;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collect reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  const auto y = reporter.rate.find("BM_FiberYield/real_time");
  if (y == reporter.rate.end() || y->second <= 0) {
    std::puts("ratio=unavailable (BM_FiberYield did not run)");
    return 1;
  }
  std::printf("\nboost.fiber yields/s: %.3e\n", y->second);
  double main_ratio = -1;
  std::map<std::string, double> explore;  // label -> schedules/s
  std::map<std::string, double> lanes;    // label -> steps/s
  std::map<std::string, double> grid;     // label -> steps/s
  std::map<std::string, double> traced;   // label -> schedules/s
  for (const auto& [name, r] : reporter.rate) {
    if (name.rfind("BM_EmuLanes", 0) == 0) lanes[reporter.label[name]] = r;
    if (name.rfind("BM_EmuGrid", 0) == 0) grid[reporter.label[name]] = r;
    if (name.rfind("BM_EmuTrace", 0) == 0) {
      traced[reporter.label[name]] = r;
      std::printf("schedules/s: %.3e  (%s)\n", r, reporter.label[name].c_str());
      continue;
    }
    if (name.rfind("BM_Explore", 0) == 0) {
      explore[reporter.label[name]] = r;
      std::printf("schedules/s: %.3e  (%s)\n", r, reporter.label[name].c_str());
      continue;
    }
    if (name.rfind("BM_Emu", 0) != 0) continue;
    std::printf("emulator steps/s: %.3e  ratio %.3f  (%s)", r, r / y->second, reporter.label[name].c_str());
    if (auto c = reporter.cv.find(name); c != reporter.cv.end()) std::printf("  cv %.0f%%", 100 * c->second);
    std::printf("\n");
    if (reporter.label[name] == "random no-trace") main_ratio = r / y->second;
  }
  for (const SearchCase& c : kSearchCases) {
    const std::string one = std::string(c.label) + " exhaustive jobs 1", two = std::string(c.label) + " exhaustive jobs 2";
    if (explore.count(one) && explore.count(two) && explore[one] > 0)
      std::printf("exhaustive_jobs2_speedup %s=%.2f\n", c.label, explore[two] / explore[one]);
  }
  if (explore.count("ring explore jobs 2") && explore.count("gemm explore jobs 2")) {
    std::printf("jobs2_speedup ring=%.2f gemm=%.2f\n", explore["ring explore jobs 2"] / explore["ring explore jobs 1"],
                explore["gemm explore jobs 2"] / explore["gemm explore jobs 1"]);
  }
  // Tensor-heavy exploration against ring's, one job each, in this run
  // (gemm at least 0.025 of ring), and the large GEMM's seconds
  // per schedule.
  if (const double ring = explore["ring explore jobs 1"]; ring > 0) {
    std::printf("gemm_ratio=%.4f gemm_cta2_ratio=%.4f blockwise_fp8_ratio=%.4f\n", explore["gemm explore jobs 1"] / ring,
                explore["gemm cta_group 2 explore jobs 1"] / ring, explore["blockwise-fp8 explore jobs 1"] / ring);
  }
  if (const double big = explore["gemm 1024x1024x1024 4 clusters explore jobs 1"]; big > 0)
    std::printf("gemm_1024_seconds_per_schedule=%.3f\n", 1 / big);
  if (lanes.size() == 4) {
    std::printf("lane_divergence_cost ring=%.2f gemm=%.2f\n", lanes["ring warp"] / lanes["ring lanes"],
                lanes["gemm warp"] / lanes["gemm lanes"]);
  }
  if (traced.size() == 4) {
    std::printf("trace_ratio ring=%.2f gemm=%.2f\n", traced["ring trace"] / traced["ring no-trace"],
                traced["gemm trace"] / traced["gemm no-trace"]);
  }
  // Cost per step (1 / steps per second) with 16 and 64 CTAs over 4.
  for (const char* rc : {" no-race-check", ""}) {
    const std::string g = "grid ";
    if (grid.count(g + "4" + rc) && grid.count(g + "16" + rc) && grid.count(g + "64" + rc)) {
      std::printf("grid_step_cost%s 16/4=%.2f 64/4=%.2f\n", *rc != 0 ? "" : "_race_check",
                  grid[g + "4" + rc] / grid[g + "16" + rc], grid[g + "4" + rc] / grid[g + "64" + rc]);
    }
  }
  if (main_ratio < 0) {
    std::puts("ratio=unavailable (BM_EmuRing random no-trace did not run)");
    return 1;
  }
  std::printf("ratio=%.3f\n", main_ratio);
  return 0;
}
