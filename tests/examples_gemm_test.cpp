// The gemm example on the emulator: the result against the CPU reference
// for every cluster shape and dtype, the check itself, the scenario's
// option handling and the verify step.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "emu_test_util.hpp"
#include "examples/gemm.hpp"
#include "examples/gemm_host.hpp"
#include "examples/scenarios.hpp"

namespace {

namespace emu = wspipe::emu;
namespace ex = wspipe::examples;
using wspipe::ElemType;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::with_strategy;

template <class Cfg>
emu::RunResult run_gemm(ex::GemmProblem& p, std::uint32_t clusters, std::uint64_t seed, bool manual_a = false) {
  ex::GemmArgs<B> args;
  args.a_map = p.a_map<Cfg>(p.a.data());
  args.b_map = p.b_map<Cfg>(p.b.data());
  args.a = p.a.data();
  args.d = p.d.data();
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.manual_a = manual_a;
  const auto launch = ex::warp_specialized_launch(clusters, Cfg::kShape, sizeof(ex::GemmStorage<Cfg>));
  return emu::run(launch, [&] { ex::gemm_kernel<B, Cfg>(args); }, with_strategy(emu::StrategyKind::random, seed));
}

template <class Cfg>
void expect_correct(std::uint32_t m, std::uint32_t n, std::uint32_t k, std::uint32_t clusters) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    ex::GemmProblem p = ex::GemmProblem::random(m, n, k, Cfg::kIn, seed);
    ASSERT_EQ(p.shape_error<Cfg>(), "");
    auto r = run_gemm<Cfg>(p, clusters, seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_EQ(p.check(), "") << "seed " << seed;
  }
}

TEST(examples_Gemm, CtaGroup1MatchesTheReference) {
  expect_correct<ex::GemmConfig<1, 1, 2, 2, ElemType::bf16>>(256, 192, 256, 1);
  expect_correct<ex::GemmConfig<1, 1, 3, 4, ElemType::e4m3>>(128, 256, 512, 2);
}

TEST(examples_Gemm, SharedBClusterMatchesTheReference) {
  expect_correct<ex::GemmConfig<1, 2, 2, 2, ElemType::bf16>>(512, 128, 128, 1);
}

TEST(examples_Gemm, CtaPairMatchesTheReference) {
  expect_correct<ex::GemmConfig<2, 2, 4, 1, ElemType::bf16>>(256, 256, 256, 1);
  expect_correct<ex::GemmConfig<2, 2, 1, 2, ElemType::e4m3>>(512, 64, 256, 2);
}

// Cluster shapes 4x1 and 2x2 (examples/gemm.hpp's layout: A multicast along
// y, B along x), for cta_group 1 and CTA pairs, two clusters each so that
// the tiles wrap the accumulator stages.
TEST(examples_Gemm, ClusterShapesMatchTheReference) {
  expect_correct<ex::GemmConfig<1, 4, 2, 2, ElemType::bf16>>(1024, 128, 256, 2);
  expect_correct<ex::GemmConfig<1, 2, 2, 2, ElemType::e4m3, 2>>(512, 256, 256, 2);
  expect_correct<ex::GemmConfig<2, 4, 2, 2, ElemType::bf16>>(1024, 128, 256, 2);
  expect_correct<ex::GemmConfig<2, 2, 1, 2, ElemType::bf16, 2>>(256, 256, 256, 2);
}

TEST(examples_Gemm, OrdinaryStoresOfAWithTheFenceMatchTheReference) {
  using Cfg = ex::GemmConfig<1, 1, 2, 2, ElemType::bf16>;
  auto p = ex::GemmProblem::random(128, 128, 256, ElemType::bf16, 5);
  auto r = run_gemm<Cfg>(p, 1, 5, true);
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  EXPECT_EQ(p.check(), "");
}

TEST(examples_Gemm, CheckNamesTheFirstWrongElement) {
  using Cfg = ex::GemmConfig<1, 1, 2, 2, ElemType::bf16>;
  auto p = ex::GemmProblem::random(128, 64, 128, ElemType::bf16, 2);
  EXPECT_TRUE(contains(p.check(), "D[0][0] = nan")) << p.check();  // nothing written yet
  ASSERT_EQ(run_gemm<Cfg>(p, 1, 1).status, emu::Status::ok);
  ASSERT_EQ(p.check(), "");
  p.d[3 * 64 + 5] += 1.0f;
  EXPECT_TRUE(contains(p.check(), "D[3][5] =")) << p.check();
  EXPECT_TRUE(contains(p.check(), "(1 of 8192 elements differ)")) << p.check();
}

// reference() (decoded once, four sums at a time) is the definition: the
// sum of A[i][k] * B[j][k] in double in k order, rounded to f32.
TEST(examples_Gemm, ReferenceIsTheDefinition) {
  for (const ElemType t : {ElemType::bf16, ElemType::e4m3}) {
    const auto p = ex::GemmProblem::random(128, 192, 256, t, 9);
    const std::vector<float> want = p.reference();
    const std::uint32_t eb = wspipe::elem_bytes(t);
    for (std::uint32_t i = 0; i < p.m; ++i)
      for (std::uint32_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (std::uint32_t kk = 0; kk < p.k; ++kk)
          s += wspipe::elem_to_double(t, &p.a[(std::size_t{i} * p.k + kk) * eb]) *
               wspipe::elem_to_double(t, &p.b[(std::size_t{j} * p.k + kk) * eb]);
        ASSERT_EQ(want[std::size_t{i} * p.n + j], static_cast<float>(s)) << wspipe::to_string(t) << " " << i << "," << j;
      }
  }
}

TEST(examples_Gemm, ShapesThatDoNotTileAreRejected) {
  using Pair = ex::GemmConfig<2, 2, 2, 2, ElemType::e4m3>;
  EXPECT_TRUE(contains(ex::GemmProblem::random(128, 64, 128, ElemType::e4m3, 1).shape_error<Pair>(), "--m"));
  EXPECT_TRUE(contains(ex::GemmProblem::random(256, 96, 128, ElemType::e4m3, 1).shape_error<Pair>(), "--n"));
  EXPECT_TRUE(contains(ex::GemmProblem::random(256, 64, 64, ElemType::e4m3, 1).shape_error<Pair>(), "--k"));
}

// The scenario: verify turns a wrong result into result.mismatch, and a
// shape the configuration cannot tile is bad input, not a finding.
TEST(examples_Gemm, ScenarioVerifiesEveryRunAndRejectsBadShapes) {
  const ex::Scenario* s = ex::find_scenario("gemm");
  ASSERT_NE(s, nullptr);
  ex::OptionValues v;
  for (const auto& o : s->options) v[o.name] = o.def;
  emu::Kernel prep = s->prepare("", v);
  auto ok = emu::run(prep, {});
  EXPECT_EQ(ok.status, emu::Status::ok) << ok.report();

  emu::Kernel broken = s->prepare("", v);
  broken.verify = [] { return std::string("D[1][2] = 3, reference 4"); };
  auto bad = emu::run(broken, {});
  ASSERT_EQ(bad.status, emu::Status::violation);
  EXPECT_EQ(bad.violations[0].rule, "result.mismatch");
  EXPECT_TRUE(contains(bad.violations[0].message, "D[1][2] = 3")) << bad.report();

  v["n"] = 96;
  EXPECT_THROW(s->prepare("", v), std::invalid_argument);
  v["n"] = 64;
  v["cluster-y"] = 2;  // a 1x2 cluster: not instantiated; and n is one 64-column block for two
  EXPECT_THROW(s->prepare("", v), std::invalid_argument);
  v["cluster"] = 2;
  EXPECT_THROW(s->prepare("", v), std::invalid_argument);  // 2x2 needs n a multiple of 128
  v["n"] = 128;
  EXPECT_NO_THROW(s->prepare("", v));
  v["cluster"] = 3;
  v["cluster-y"] = 1;
  try {
    s->prepare("", v);
    ADD_FAILURE() << "a 3x1 cluster was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "cluster shape 3x1 is not one of 1x1, 2x1, 4x1, 2x2")) << e.what();
  }
  v["cluster"] = 1;
  v["cluster-y"] = 1;
  v["n"] = 64;
  v["manual-a"] = 1;
  v["cta-group"] = 2;
  EXPECT_THROW(s->prepare("", v), std::invalid_argument);
}

// Each kind of numeric bug is a result mismatch, also when the MMA memo
// (RunOptions::mma_memo_bytes) is warm with the correct kernel's MMAs and
// when it is off: a stale accumulator, a missing K block, the wrong lane
// half (and blockwise-fp8's wrong scale, in its own test).
TEST(examples_Gemm, NumericBugsAreResultMismatchesWithTheMemoWarmOrOff) {
  const ex::Scenario* s = ex::find_scenario("gemm");
  ASSERT_NE(s, nullptr);
  for (const std::uint64_t cta_group : {1u, 2u}) {
    ex::OptionValues v;
    for (const auto& o : s->options) v[o.name] = o.def;
    v["cta-group"] = cta_group;
    if (s->resolve) s->resolve(v);
    ASSERT_EQ(emu::run(s->prepare("", v), {}).status, emu::Status::ok);  // the memo now holds the right MMAs
    for (const char* bug : {"stale-accumulator", "missing-k-block", "wrong-lane-half"})
      for (const std::size_t memo : {emu::RunOptions{}.mma_memo_bytes, std::size_t{0}}) {
        SCOPED_TRACE(std::string(bug) + " cta_group " + std::to_string(cta_group) + " memo " + std::to_string(memo));
        emu::RunOptions o;
        o.mma_memo_bytes = memo;
        const auto r = emu::run(s->prepare(bug, v), o);
        ASSERT_EQ(r.status, emu::Status::violation) << r.report();
        EXPECT_EQ(r.violations[0].rule, "result.mismatch") << r.report();
      }
  }
}

// docs/hardware.md bug 16: in a 4x1 cluster of CTA pairs, the second pair's
// accum-full commit multicasts to 0x3 (the first pair) instead of 0xc. The
// commit itself is legal PTX; its consequence is caught, as the catalogue
// promises, and the same kernel with pair_mask(rank) explores clean.
TEST(examples_Gemm, UnshiftedPairMaskIsCaught) {
  const ex::Scenario* s = ex::find_scenario("gemm");
  ASSERT_NE(s, nullptr);
  const wspipe::emu::VariantSpec* bug = nullptr;
  for (const auto& v : s->variants)
    if (v.name == "unshifted-pair-mask") bug = &v;
  ASSERT_NE(bug, nullptr);
  ex::OptionValues v;
  for (const auto& o : s->options) v[o.name] = o.def;
  for (const auto& [name, value] : bug->pinned) v[name] = value;
  if (s->resolve) s->resolve(v);
  EXPECT_EQ(v.at("cta-group"), 2u);
  EXPECT_EQ(v.at("cluster"), 4u);
  EXPECT_EQ(v.at("m"), 512u);  // one cluster tile
  const auto found = emu::explore([&] { return s->prepare(bug->name, v); }, wspipe::test::fixed_runs(100));
  ASSERT_TRUE(found.failure.has_value()) << found.report();
  EXPECT_EQ(found.failure->outcome, bug->expect) << found.report();
  const auto clean = emu::explore([&] { return s->prepare("", v); }, wspipe::test::fixed_runs(30));
  EXPECT_TRUE(clean.ok()) << clean.report();
}

}  // namespace
