// The catalogue in lane-divergence mode: every correct kernel (in each of
// its cluster shapes, tile-reduce's too) runs clean with lanes 0 and 31 compared; every broken
// variant keeps the outcome it promises; the variants whose bug lives
// between lanes are found only with the mode, which they turn on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/emu/explore.hpp"
#include "emu_test_util.hpp"
#include "examples/scenarios.hpp"

namespace {

namespace emu = wspipe::emu;
namespace examples = wspipe::examples;

emu::OptionValues values_of(const emu::Scenario& sc, const emu::VariantSpec& v, const emu::OptionValues& given = {}) {
  emu::OptionValues values;
  for (const auto& o : sc.options) values[o.name] = o.def;
  for (const auto& [k, x] : given) values[k] = x;
  for (const auto& [k, x] : v.pinned) values[k] = x;
  if (sc.resolve) sc.resolve(values);
  return values;
}

emu::ExploreResult explore(const emu::Scenario& sc, const emu::VariantSpec& v, const emu::OptionValues& values,
                           std::uint64_t runs, bool lanes) {
  auto o = wspipe::test::fixed_runs(runs, 2);
  o.lane_divergence = lanes;
  o.async_reorder = v.async_reorder;
  o.shrink = false;
  return emu::explore([&] { return sc.prepare(v.name, values); }, o);
}

const emu::VariantSpec& correct(const emu::Scenario& sc) {
  for (const auto& v : sc.variants)
    if (v.name.empty()) return v;
  throw std::logic_error(sc.name + " has no correct variant");
}

TEST(examples_LaneDivergence, CorrectKernelsRunClean) {
  // each scenario's defaults, and the settings that change its lanes' code
  const std::vector<std::pair<std::string, emu::OptionValues>> configs = {
      {"ring", {}},
      {"ring", {{"release", 1}}},
      {"tile-reduce", {}},
      {"tile-reduce", {{"cluster", 2}}},
      {"gemm", {}},
      {"gemm", {{"cta-group", 2}}},
      {"gemm", {{"cluster", 2}}},
      {"gemm", {{"manual-a", 1}}},
      {"blockwise-fp8", {}},
      {"blockwise-fp8", {{"cta-group", 2}}},
  };
  for (const auto& [name, given] : configs) {
    const emu::Scenario* sc = examples::find_scenario(name);
    ASSERT_NE(sc, nullptr) << name;
    const auto r = explore(*sc, correct(*sc), values_of(*sc, correct(*sc), given), 10, true);
    EXPECT_TRUE(r.ok()) << name << ": " << r.report();
  }
}

TEST(examples_LaneDivergence, BrokenVariantsKeepTheirOutcome) {
  int lane_variants = 0;
  for (const auto& sc : examples::catalogue()) {
    for (const auto& v : sc.variants) {
      if (v.name.empty()) continue;
      SCOPED_TRACE(sc.name + "/" + v.name);
      const auto values = values_of(sc, v);
      const auto r = explore(sc, v, values, 500, true);
      ASSERT_FALSE(r.ok());
      EXPECT_TRUE(emu::expected_outcome(v.expect, r.failure->outcome)) << r.failure->outcome << " is not " << v.expect;
      if (!v.lane_divergence) continue;
      // what the warp-level model alone cannot see
      ++lane_variants;
      EXPECT_TRUE(explore(sc, v, values, 20, false).ok());
    }
  }
  EXPECT_GE(lane_variants, 2);
}

}  // namespace
