// The persistent-gemm example on the emulator: every configuration explores
// clean with D checked against the CPU reference after each run (CLC with
// unlaunched clusters, so cancellations are explored, and the static
// schedule), every broken variant is caught with its rule, and the
// scenario rejects what it cannot run.
//
// Clusters of 4 CTAs (4x1, 2x2, and bug 16, which needs a CTA pair that is
// not ranks 0 and 1) need the emulator's cluster support beyond 2 CTAs; on
// an emulator without it these tests skip, saying so.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "backends/emu/emu.hpp"
#include "emu_test_util.hpp"
#include "examples/persistent_gemm.hpp"
#include "examples/persistent_gemm_host.hpp"
#include "examples/scenarios.hpp"

namespace {

namespace emu = wspipe::emu;
namespace ex = wspipe::examples;
using wspipe::test::contains;

const ex::Scenario& scenario() {
  const ex::Scenario* s = ex::find_scenario("persistent-gemm");
  if (s == nullptr) throw std::logic_error("no persistent-gemm scenario");
  return *s;
}

// The scenario's defaults with `set` applied, pins and resolve as the CLI does.
ex::OptionValues options(const ex::OptionValues& set, const std::string& variant = "") {
  const ex::Scenario& s = scenario();
  ex::OptionValues v;
  for (const auto& o : s.options) v[o.name] = o.def;
  for (const auto& [k, x] : set) v[k] = x;
  for (const auto& var : s.variants)
    if (var.name == variant)
      for (const auto& [k, x] : var.pinned) v[k] = x;
  if (s.resolve) s.resolve(v);
  return v;
}

emu::ExploreResult explore(const std::string& variant, const ex::OptionValues& v, std::uint64_t runs) {
  return emu::explore([variant, v] { return scenario().prepare(variant, v); }, wspipe::test::fixed_runs(runs));
}

void expect_clean(const ex::OptionValues& set, std::uint64_t runs = 40) {
  const ex::OptionValues v = options(set);
  const auto r = explore("", v, runs);
  EXPECT_TRUE(r.ok()) << r.report();
}

TEST(examples_PersistentGemm, CtaGroup1SingleCtaClustersExploreClean) {
  expect_clean({{"cta-group", 1}, {"cluster", 1}, {"clc-stages", 2}});
  expect_clean({{"cta-group", 1}, {"cluster", 1}, {"clc-stages", 1}, {"m", 384}, {"clusters", 3}});
  expect_clean({{"cta-group", 1}, {"cluster", 1}, {"clc-stages", 0}});
}

TEST(examples_PersistentGemm, CtaGroup1ClusterOf2ExploresClean) {
  expect_clean({{"cta-group", 1}, {"cluster", 2}, {"m", 512}});
  expect_clean({{"cta-group", 1}, {"cluster", 2}, {"m", 512}, {"clc-stages", 0}});
}

TEST(examples_PersistentGemm, CtaPairExploresClean) {
  expect_clean({{"cta-group", 2}, {"cluster", 2}, {"m", 512}});
  expect_clean({{"cta-group", 2}, {"cluster", 2}, {"m", 256}, {"clc-stages", 1}, {"clusters", 1}});
}

// Every cluster running (no cluster left to cancel: each request fails at
// once), and more clusters than tiles in the static schedule.
TEST(examples_PersistentGemm, EdgeGridsMatchTheReference) {
  expect_clean({{"clusters", 64}}, 10);
  expect_clean({{"clusters", 64}, {"clc-stages", 0}}, 10);
}

TEST(examples_PersistentGemm, ClustersOf4ExploreClean) {
  expect_clean({{"cta-group", 1}, {"cluster", 4}, {"m", 512}});
  expect_clean({{"cta-group", 2}, {"cluster", 4}, {"m", 1024}});
  expect_clean({{"cta-group", 1}, {"cluster", 2}, {"cluster-y", 2}, {"m", 512}, {"n", 256}});
  expect_clean({{"cta-group", 2}, {"cluster", 2}, {"cluster-y", 2}, {"m", 256}, {"n", 256}});
}

// Each broken variant is found within the runs the catalogue promises,
// with its rule.
void expect_caught(const std::string& variant, const std::string& rule) {
  SCOPED_TRACE(variant);
  const ex::Scenario& s = scenario();
  std::string expect;
  for (const auto& v : s.variants)
    if (v.name == variant) expect = v.expect;
  EXPECT_EQ(expect, rule) << "the catalogue's promise";
  const auto r = explore(variant, options({}, variant), 500);
  ASSERT_FALSE(r.ok()) << variant << " explored clean";
  EXPECT_TRUE(emu::expected_outcome(rule, r.failure->outcome)) << r.report();
}

TEST(examples_PersistentGemm, ThrottleNotSignalledDeadlocks) { expect_caught("throttle-not-signalled", "deadlock"); }

TEST(examples_PersistentGemm, ResponseReadEarlyIsCaught) {
  expect_caught("response-read-early", "race.smem,clc.response-before-completion");
}

TEST(examples_PersistentGemm, StoreSourceReusedEarlyRaces) { expect_caught("store-source-reused", "race.smem"); }

TEST(examples_PersistentGemm, UndrainedClcRingIsCaught) {
  expect_caught("undrained-clc-ring", "mbarrier.remote-exited-cta");
}

TEST(examples_PersistentGemm, UnshiftedPairMaskIsCaught) {
  expect_caught("unshifted-pair-mask", "race.tmem,deadlock,mbarrier.parity-alias");
}

TEST(examples_PersistentGemm, AccumReleasedEarlyIsCaught) { expect_caught("accum-released-early", "race.tmem"); }

// The late tcgen05.ld comes after the arrive that frees its stage: on the
// default schedule and every seed the next tile's MMA overwrites the cells
// it read, unordered, whichever of the two comes first (the race checker
// once counted such a load as ordered before the arrive).
TEST(examples_PersistentGemm, AccumReleasedEarlyRacesOnEverySchedule) {
  const ex::OptionValues v = options({}, "accum-released-early");
  for (std::uint64_t seed = 0; seed <= 8; ++seed) {
    emu::RunOptions o;
    if (seed > 0) o = wspipe::test::with_strategy(emu::StrategyKind::random, seed);
    const auto r = emu::run(scenario().prepare("accum-released-early", v), o);
    EXPECT_EQ(emu::outcome(r), "race.tmem") << "seed " << seed << "\n" << r.report();
  }
}

TEST(examples_PersistentGemm, ScenarioRejectsWhatItCannotRun) {
  const ex::Scenario& s = scenario();
  EXPECT_THROW(s.prepare("", options({{"n", 96}})), std::invalid_argument);
  EXPECT_THROW(s.prepare("", options({{"cluster", 2}, {"m", 384}})), std::invalid_argument);
  EXPECT_THROW(s.prepare("", options({{"cluster", 2}, {"cluster-y", 2}, {"n", 192}})), std::invalid_argument);
  EXPECT_THROW(s.prepare("throttle-not-signalled", options({{"clc-stages", 0}})), std::invalid_argument);
  EXPECT_THROW(s.prepare("nonexistent", options({})), std::invalid_argument);
  try {
    (void)s.prepare("", options({{"cluster", 4}, {"cluster-y", 2}}));
    ADD_FAILURE() << "a 4x2 cluster accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "cluster shape 4x2 is not one of 1x1, 2x1, 4x1, 2x2")) << e.what();
  }
  // cta_group 2 on a 1x1 cluster is resolved to the 2x1 pair.
  EXPECT_EQ(options({{"cta-group", 2}}).at("cluster"), 2u);
  try {
    (void)s.prepare("", options({{"k", 96}}));
    ADD_FAILURE() << "k = 96 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "--k")) << e.what();
  }
}

// The cluster-tile coordinates and the masks of the loads and commits.
TEST(examples_PersistentGemm, MasksFollowTheClusterShape) {
  using G1x2x2 = ex::PersistentGemmConfig<1, 2, 2, 2, 2, 2>;
  using G2x4 = ex::PersistentGemmConfig<2, 4, 1, 2, 2, 2>;
  using G2x2x2 = ex::PersistentGemmConfig<2, 2, 2, 2, 2, 2>;
  static_assert(G1x2x2::kInputConsumers == 3 && G2x4::kInputConsumers == 2 && G2x2x2::kInputConsumers == 2);
  // cta_group 1, 2x2: rank 3 = (1, 1) shares A with rank 1 and B with rank 2.
  static_assert(ex::pg_input_commit_mask<G1x2x2>(3) == 0b1110);
  // cta_group 2, 4x1: the pair (2, 3) read A of 2 and 3 and B halves from
  // the whole row.
  static_assert(ex::pg_input_commit_mask<G2x4>(2) == 0b1111);
  static_assert(ex::pg_same_parity_along_x<G2x4>(3, 1) == 0b1010);
  // cta_group 2, 2x2: the pair (0, 1) at y = 0 gets A from column y = 1 too.
  static_assert(ex::pg_input_commit_mask<G2x2x2>(0) == 0b1111);
  static_assert(G2x2x2::kStageBytes == 2 * (128 + 32) * 128);
  SUCCEED();
}

}  // namespace
