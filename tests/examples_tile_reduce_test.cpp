// The tile-reduce example on the emulator: every stage count and cluster
// shape gives exactly the host reference's sums (which the H100 also
// matched bit for bit: docs/silicon.md), a wrong sum is reported by the
// check, and the scenario refuses rows that are not whole tiles.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "backends/emu/emu.hpp"
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

TEST(examples_TileReduce, ScenarioRefusesRowsThatAreNotWholeTiles) {
  const auto* s = ex::find_scenario("tile-reduce");
  ASSERT_NE(s, nullptr);
  EXPECT_THROW(s->prepare("", {{"rows", 40}, {"stages", 2}, {"cluster", 1}, {"clusters", 1}}), std::invalid_argument);
}

}  // namespace
