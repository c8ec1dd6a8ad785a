// The tile-reduce example on the emulator: every stage count and cluster
// shape gives exactly the host reference's sums (which the H100 also
// matched bit for bit: docs/silicon.md), a wrong sum is reported by the
// check, and the scenario refuses rows that are not whole tiles. With the
// weights loaded by a TMA load of their own, the consumers that skip the
// weights' barrier are found only where loads complete out of issue order.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "backends/emu/emu.hpp"
#include "backends/emu/testing/gtest.hpp"
#include "emu_test_util.hpp"
#include "examples/scenarios.hpp"
#include "examples/tile_reduce.hpp"

namespace {

namespace emu = wspipe::emu;
namespace ex = wspipe::examples;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::with_strategy;

template <int Stages>
emu::RunResult run_tile_reduce(ex::TileReduceProblem& p, std::uint32_t clusters, std::uint64_t seed) {
  ex::TileReduceArgs<B> args;
  args.x_map = p.x_map(p.x.data());
  args.out = p.out.data();
  args.rows = p.rows;
  emu::LaunchConfig launch;
  launch.num_clusters = clusters;
  launch.cluster_size = p.cluster_size;
  launch.warps_per_cta = ex::kTileReduceWarps;
  launch.smem_bytes = sizeof(ex::TileReduceStorage<Stages>);
  return emu::run(launch, [&] { ex::tile_reduce_kernel<B, Stages>(args); },
                  with_strategy(emu::StrategyKind::random, seed));
}

template <int Stages>
void expect_reference(std::uint32_t cluster, std::uint32_t clusters) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    ex::TileReduceProblem p(7 * ex::kTileRows, cluster);
    const auto r = run_tile_reduce<Stages>(p, clusters, seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_EQ(p.check(), "") << "stages " << Stages << ", cluster " << cluster << ", clusters " << clusters;
  }
}

TEST(examples_TileReduce, EveryStageCountAndClusterShapeMatchesTheReference) {
  for (std::uint32_t cluster : {1u, 2u}) {
    for (std::uint32_t clusters : {1u, 3u}) {
      expect_reference<1>(cluster, clusters);
      expect_reference<2>(cluster, clusters);
      expect_reference<3>(cluster, clusters);
      expect_reference<4>(cluster, clusters);
    }
  }
}

TEST(examples_TileReduce, TheCheckReportsAWrongSum) {
  ex::TileReduceProblem p(2 * ex::kTileRows, 2);
  ASSERT_EQ(run_tile_reduce<2>(p, 1, 1).status, emu::Status::ok);
  ASSERT_EQ(p.check(), "");
  p.out[p.rows + 33] += 1;  // rank 1, row 33
  EXPECT_TRUE(contains(p.check(), "1 of 128 sums wrong, the first at rank 1 row 33")) << p.check();
}

// The scenario's kernel for `variant`, 2 tiles through 2 stages, the
// weights loaded (TMA, on their own barrier).
emu::KernelFactory weights_kernel(const std::string& variant) {
  const auto* s = ex::find_scenario("tile-reduce");
  const emu::OptionValues values = {{"rows", 2 * ex::kTileRows}, {"stages", 2}, {"cluster", 1}, {"clusters", 1},
                                    {"weights", 1}};
  return [s, variant, values] { return s->prepare(variant, values); };
}

emu::ExploreOptions exhaustive(std::uint32_t preemptions, bool reorder) {
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.preemptions = preemptions;
  o.seconds = 0;
  o.async_reorder = reorder;
  return o;
}

TEST(examples_TileReduce, UnwaitedWeightsAreFoundWhereTheWeightsLoadCompletesLast) {
  emu::ExploreOptions o = wspipe::testing::options();
  o.async_reorder = true;
  WSPIPE_EXPECT_FINDS("race.smem", weights_kernel("unwaited-weights"), o);
  // The exhaustive search within one preemption: the one reordering.
  WSPIPE_EXPECT_FINDS("race.smem", weights_kernel("unwaited-weights"), exhaustive(1, true));
  // In issue order the weights land before the first tile: no schedule
  // within the bound shows the bug.
  WSPIPE_EXPECT_VERIFIED(weights_kernel("unwaited-weights"), exhaustive(1, false));
}

TEST(examples_TileReduce, LoadedWeightsWaitedForExploreCleanInEveryOrder) {
  emu::ExploreOptions o = wspipe::testing::options();
  o.async_reorder = true;
  WSPIPE_EXPECT_CLEAN(weights_kernel(""), o);
  WSPIPE_EXPECT_VERIFIED(weights_kernel(""), exhaustive(1, true));
}

// The scenario's check (host code outside the instrumentation, shared
// inputs and sums): before the run no sum is there; after it every one is;
// two runs of one size share the inputs but not the sums.
TEST(examples_TileReduce, TheScenariosCheckSeesEachRunsOwnSums) {
  const auto* s = ex::find_scenario("tile-reduce");
  ASSERT_NE(s, nullptr);
  const emu::OptionValues values = {{"rows", 2 * ex::kTileRows}, {"stages", 2}, {"cluster", 2}, {"clusters", 1},
                                    {"weights", 0}};
  const emu::Kernel first = s->prepare("", values), second = s->prepare("", values);
  EXPECT_TRUE(contains(first.verify(), "128 of 128 sums wrong")) << first.verify();
  ASSERT_EQ(emu::run(first, {}).status, emu::Status::ok);
  EXPECT_EQ(first.verify(), "");
  EXPECT_TRUE(contains(second.verify(), "128 of 128 sums wrong")) << second.verify();
}

TEST(examples_TileReduce, ScenarioRefusesRowsThatAreNotWholeTiles) {
  const auto* s = ex::find_scenario("tile-reduce");
  ASSERT_NE(s, nullptr);
  EXPECT_THROW(s->prepare("", {{"rows", 40}, {"stages", 2}, {"cluster", 1}, {"clusters", 1}}), std::invalid_argument);
}

}  // namespace
