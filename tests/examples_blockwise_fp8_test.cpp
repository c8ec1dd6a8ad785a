// examples/blockwise_fp8.hpp on the emulator: the kernel against the CPU
// reference over data and schedule seeds, pipeline depths and both
// cta_groups; the per-K turnover of the accumulator pipeline; the scenario's
// registration and shape checks; and its broken variant
// early-scale-release (docs/hardware.md bug 14), a race on every schedule.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "emu_test_util.hpp"
#include "examples/blockwise_fp8.hpp"
#include "examples/blockwise_fp8_host.hpp"
#include "examples/scenarios.hpp"

namespace {

namespace emu = wspipe::emu;
namespace ex = wspipe::examples;
using ex::BlockwiseFp8Bug;
using ex::BlockwiseFp8Config;
using ex::BlockwiseFp8Problem;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

// One launch of the kernel for Cfg on `p` (its D is written).
template <class Cfg>
emu::RunResult run_fp8(BlockwiseFp8Problem& p, const emu::RunOptions& opts, std::uint32_t clusters = 1,
                       BlockwiseFp8Bug bug = BlockwiseFp8Bug::none) {
  EXPECT_EQ(p.shape_error<Cfg>(), "");
  ex::BlockwiseFp8Args<B> args;
  args.a_map = p.a_map<Cfg>(p.a.data());
  args.b_map = p.b_map<Cfg>(p.b.data());
  args.a_scale_map = p.a_scale_map<Cfg>(p.a_scales.data());
  args.b_scales = p.b_scales.data();
  args.d = p.d.data();
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.bug = bug;
  const auto launch = ex::warp_specialized_launch(clusters, Cfg::kClusterSize, sizeof(ex::BlockwiseFp8Storage<Cfg>));
  return emu::run(launch, [&] { ex::blockwise_fp8_kernel<B, Cfg>(args); }, opts);
}

// Runs Cfg over `seeds` data sets, each under the schedule of the same seed
// of every strategy, and demands D equal the reference.
template <class Cfg>
void expect_matches(std::uint32_t m, std::uint32_t n, std::uint32_t k, std::uint32_t clusters, std::uint64_t seeds) {
  for (auto kind : {emu::StrategyKind::round_robin, emu::StrategyKind::random, emu::StrategyKind::pct}) {
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
      auto p = BlockwiseFp8Problem::random(m, n, k, seed);
      const auto r = run_fp8<Cfg>(p, with_strategy(kind, seed), clusters);
      ASSERT_EQ(r.status, emu::Status::ok) << emu::to_string(kind) << " seed " << seed << "\n" << r.report();
      ASSERT_EQ(p.check(), "") << emu::to_string(kind) << " seed " << seed;
    }
  }
}

TEST(examples_BlockwiseFp8, CtaGroup1MatchesTheReferenceOverSeeds) {
  expect_matches<BlockwiseFp8Config<1, 2, 2>>(256, 128, 384, 1, 4);
}

TEST(examples_BlockwiseFp8, CtaGroup2MatchesTheReferenceOverSeeds) {
  expect_matches<BlockwiseFp8Config<2, 2, 2>>(256, 128, 384, 1, 4);
}

// Depths at both ends: one input stage and one accumulator stage hand every
// K block over in lockstep; four of each let the warps run apart. Several
// clusters, B-scale columns shared by two 64-column tiles (n = 192 ends on a
// half-used one), and more tiles than clusters.
TEST(examples_BlockwiseFp8, EveryPipelineDepthMatchesTheReference) {
  expect_matches<BlockwiseFp8Config<1, 1, 1>>(256, 192, 384, 2, 2);
  expect_matches<BlockwiseFp8Config<1, 4, 4>>(256, 192, 384, 2, 2);
  expect_matches<BlockwiseFp8Config<1, 3, 2>>(128, 128, 640, 1, 2);
  expect_matches<BlockwiseFp8Config<2, 1, 1>>(256, 192, 384, 2, 2);
  expect_matches<BlockwiseFp8Config<2, 4, 4>>(512, 128, 384, 2, 2);
  expect_matches<BlockwiseFp8Config<2, 3, 1>>(256, 64, 640, 1, 2);
}

// The check is not vacuous: the scales matter, and one wrong element is found.
TEST(examples_BlockwiseFp8, CheckFindsAWrongElement) {
  using Cfg = BlockwiseFp8Config<1, 2, 2>;
  auto p = BlockwiseFp8Problem::random(128, 128, 256, 7);
  ASSERT_EQ(run_fp8<Cfg>(p, {}).status, emu::Status::ok);
  ASSERT_EQ(p.check(), "");
  p.d[5 * 128 + 70] += 1;
  EXPECT_TRUE(contains(p.check(), "D[5][70]")) << p.check();
  EXPECT_TRUE(contains(p.check(), "(1 of 16384 elements differ)")) << p.check();

  auto unscaled = p;
  for (float& s : unscaled.a_scales) s = 1;
  for (float& s : unscaled.b_scales) s = 1;
  const std::vector<float> want = p.reference(), plain = unscaled.reference();
  std::size_t differ = 0;
  for (std::size_t i = 0; i < want.size(); ++i) differ += want[i] != plain[i];
  EXPECT_GT(differ, p.m * p.n / 2);
}

// reference() (decoded once, four sums at a time) is the definition: per K
// block, the partial sum in double in k order, scaled, summed in block order.
TEST(examples_BlockwiseFp8, ReferenceIsTheDefinition) {
  auto p = BlockwiseFp8Problem::random(128, 192, 384, 11);
  const std::vector<float> want = p.reference();
  for (std::uint32_t i = 0; i < p.m; ++i)
    for (std::uint32_t j = 0; j < p.n; ++j) {
      double s = 0;
      for (std::uint32_t kb = 0; kb < p.k_blocks(); ++kb) {
        double partial = 0;
        for (std::uint32_t kk = kb * 128; kk < (kb + 1) * 128; ++kk)
          partial += double{wspipe::e4m3_to_float(p.a[std::size_t{i} * p.k + kk])} *
                     wspipe::e4m3_to_float(p.b[std::size_t{j} * p.k + kk]);
        s += partial * p.a_scales[std::size_t{kb} * p.m + i] *
             p.b_scales[std::size_t{kb} * p.b_scale_cols() + j / 128];
      }
      ASSERT_EQ(want[std::size_t{i} * p.n + j], static_cast<float>(s)) << i << "," << j;
    }
}

// The accumulator pipeline turns over once per K block: per K block and
// tile, one commit to input-empty and one to accum-full, four MMAs of one
// 128-byte K block, and one TMA load each of A, B and the A-scales per CTA.
class examples_BlockwiseFp8Trace : public ::testing::TestWithParam<int> {};

template <int G>
void expect_per_k_turnover() {
  using Cfg = BlockwiseFp8Config<G, 2, 2>;
  auto p = BlockwiseFp8Problem::random(256, 128, 384, 3);
  const auto r = run_fp8<Cfg>(p, {});
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  const std::size_t tiles = (256 / Cfg::kClusterM) * (128 / ex::kGemmBlockN), k_blocks = 3;
  std::size_t mma = 0, commits = 0, tma = 0, tma_bytes = 0;
  for (const auto& e : r.trace.events) {
    mma += e.kind == emu::EventKind::mma_issue;
    commits += e.kind == emu::EventKind::commit_issue;
    if (e.kind == emu::EventKind::tma_issue) {
      ++tma;
      tma_bytes += static_cast<std::size_t>(e.a);
    }
  }
  EXPECT_EQ(mma, tiles * k_blocks * 4);
  EXPECT_EQ(commits, tiles * k_blocks * 2);
  EXPECT_EQ(tma, tiles * k_blocks * 3 * G);
  EXPECT_EQ(tma_bytes, tiles * k_blocks * Cfg::kStageBytes);
}

TEST_P(examples_BlockwiseFp8Trace, AccumulatorStagesTurnOverPerKBlock) {
  if (GetParam() == 1) {
    expect_per_k_turnover<1>();
  } else {
    expect_per_k_turnover<2>();
  }
}

INSTANTIATE_TEST_SUITE_P(cta_group, examples_BlockwiseFp8Trace, ::testing::Values(1, 2));

// ---- the scenario

const ex::Scenario& scenario() {
  const ex::Scenario* s = ex::find_scenario("blockwise-fp8");
  if (s == nullptr) throw std::logic_error("blockwise-fp8 is not in the catalogue");
  return *s;
}

ex::OptionValues defaults(std::uint64_t cta_group) {
  ex::OptionValues v;
  for (const auto& o : scenario().options) v[o.name] = o.def;
  v["cta-group"] = cta_group;
  return v;
}

TEST(examples_BlockwiseFp8Scenario, IsRegisteredWithItsVariants) {
  const auto& s = scenario();
  ASSERT_EQ(s.variants.size(), 3u);
  EXPECT_EQ(s.variants[0].name, "");
  EXPECT_EQ(s.variants[0].expect, "ok");
  EXPECT_EQ(s.variants[1].name, "early-scale-release");
  EXPECT_EQ(s.variants[1].expect, "race.smem");
  EXPECT_EQ(s.variants[2].name, "wrong-scale");
  EXPECT_EQ(s.variants[2].expect, "result.mismatch");
  for (const auto& o : s.options) EXPECT_NE(o.name, "dtype");
}

TEST(examples_BlockwiseFp8Scenario, RejectsShapesTheKernelCannotTake) {
  auto v = defaults(2);
  v["m"] = 128;  // one CTA's rows: a pair needs 256
  EXPECT_THROW(scenario().prepare("", v), std::invalid_argument);
  v = defaults(1);
  v["k"] = 192;
  EXPECT_THROW(scenario().prepare("", v), std::invalid_argument);
  v = defaults(1);
  v["accum-stages"] = 3;
  EXPECT_THROW(scenario().prepare("", v), std::invalid_argument);
  EXPECT_THROW(scenario().prepare("no-such-variant", defaults(1)), std::invalid_argument);
}

class examples_BlockwiseFp8Variant : public ::testing::TestWithParam<int> {};

TEST_P(examples_BlockwiseFp8Variant, CorrectKernelIsQuietAndVerified) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto r =
        emu::run(scenario().prepare("", defaults(GetParam())), with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(emu::outcome(r), "ok") << "seed " << seed << "\n" << r.report();
  }
}

// The epilogue's arrive releases nothing of the scale read that follows it,
// so the next TMA load into the slot is unordered with that read whichever
// happens first: every schedule of every strategy reports the race, between
// the TMA write and the epilogue's ordinary load.
TEST_P(examples_BlockwiseFp8Variant, EarlyScaleReleaseRacesOnEverySchedule) {
  for (auto kind : {emu::StrategyKind::round_robin, emu::StrategyKind::random, emu::StrategyKind::pct}) {
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      const auto r =
          emu::run(scenario().prepare("early-scale-release", defaults(GetParam())), with_strategy(kind, seed));
      ASSERT_EQ(emu::outcome(r), "race.smem") << emu::to_string(kind) << " seed " << seed << "\n" << r.report();
      const auto& v = r.violations[0];
      EXPECT_TRUE(contains(v.message + v.other, "TMA load")) << r.report();
      EXPECT_TRUE(contains(v.message + v.other, "ordinary load")) << r.report();
      EXPECT_TRUE(contains(v.message + v.other, "epilogue")) << r.report();
      EXPECT_TRUE(contains(v.file + v.other, "blockwise_fp8.hpp")) << r.report();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(cta_group, examples_BlockwiseFp8Variant, ::testing::Values(1, 2));

// A wrong scale is a result mismatch, with the MMA memo warm or off.
TEST(examples_BlockwiseFp8, WrongScaleIsAResultMismatch) {
  const ex::Scenario* s = ex::find_scenario("blockwise-fp8");
  ASSERT_NE(s, nullptr);
  ex::OptionValues v;
  for (const auto& o : s->options) v[o.name] = o.def;
  ASSERT_EQ(emu::run(s->prepare("", v), {}).status, emu::Status::ok);
  for (const std::size_t memo : {emu::RunOptions{}.mma_memo_bytes, std::size_t{0}}) {
    emu::RunOptions o;
    o.mma_memo_bytes = memo;
    const auto r = emu::run(s->prepare("wrong-scale", v), o);
    ASSERT_EQ(r.status, emu::Status::violation) << r.report();
    EXPECT_EQ(r.violations[0].rule, "result.mismatch") << r.report();
  }
}

}  // namespace
