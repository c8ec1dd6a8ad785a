// The `blockwise-fp8` scenario: options, variants, and the instantiation of
// examples/blockwise_fp8.hpp each run uses.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/emu/emu_backend.hpp"
#include "blockwise_fp8.hpp"
#include "blockwise_fp8_host.hpp"
#include "problem_cache.hpp"
#include "host_checks.hpp"
#include "scenarios.hpp"
#include "stage_dispatch.hpp"

namespace wspipe::examples {
namespace {

using emu::EmuBackend;

// A problem's inputs and its reference, shared read-only by every run over
// them; problem.d is unused.
using BlockwiseFp8Inputs = SharedProblem<BlockwiseFp8Problem>;

// One run: the shared inputs, this run's D and the kernel's arguments, shared
// by the warps' fibers and by the check after the run.
struct BlockwiseFp8Run {
  std::shared_ptr<const BlockwiseFp8Inputs> in;
  std::vector<float> d;
  BlockwiseFp8Args<EmuBackend> args;
};

template <class Cfg>
emu::Kernel prepare_config(const std::shared_ptr<BlockwiseFp8Run>& run, std::uint32_t clusters) {
  const BlockwiseFp8Problem& p = run->in->problem;
  if (const std::string e = p.shape_error<Cfg>(); !e.empty()) throw std::invalid_argument("blockwise-fp8: " + e);
  run->args.a_map = p.a_map<Cfg>(p.a.data());
  run->args.b_map = p.b_map<Cfg>(p.b.data());
  run->args.a_scale_map = p.a_scale_map<Cfg>(p.a_scales.data());
  run->args.b_scales = p.b_scales.data();
  run->d.assign(std::size_t{p.m} * p.n, __builtin_nanf(""));
  run->args.d = run->d.data();
  run->args.m = p.m;
  run->args.n = p.n;
  run->args.k = p.k;
  emu::Kernel prep;
  prep.launch = warp_specialized_launch(clusters, Cfg::kClusterSize, sizeof(BlockwiseFp8Storage<Cfg>));
  prep.body = [run] { blockwise_fp8_kernel<EmuBackend, Cfg>(run->args); };
  prep.verify = [run] { return check_exact(run->d, run->in->problem.m, run->in->problem.n, run->in->reference()); };
  return prep;
}

// The run-time options pick one instantiation: stages 1-4, accumulator
// stages 1, 2 or 4.
template <int G>
emu::Kernel with_stages(std::uint32_t stages, std::uint32_t accum, const std::shared_ptr<BlockwiseFp8Run>& run,
                     std::uint32_t clusters) {
  return dispatch_stages("blockwise-fp8", stages, accum, [&]<int S, int A>() {
    return prepare_config<BlockwiseFp8Config<G, S, A>>(run, clusters);
  });
}

struct BlockwiseFp8Variant {
  const char* name;
  BlockwiseFp8Bug bug;
  const char* expect;
  const char* help;
};

const BlockwiseFp8Variant kVariants[] = {
    {"", BlockwiseFp8Bug::none, "ok", "correct kernel"},
    // The arrive releases nothing of the read that follows it, so the next
    // TMA load into the slot is unordered with the read whichever comes
    // first: reported on every schedule, as long as the ring wraps (more K
    // blocks per CTA than stages, as with the defaults).
    {"early-scale-release", BlockwiseFp8Bug::early_scale_release, "race.smem",
     "bug 14: an epilogue warp frees the input slot before reading its A-scales; the next TMA load overwrites them"},
    {"wrong-scale", BlockwiseFp8Bug::wrong_scale, "result.mismatch",
     "numeric: the epilogue scales every K block's partial sum by B's scale of the first K block"},
};

}  // namespace

Scenario make_blockwise_fp8_scenario() {
  Scenario s;
  s.name = "blockwise-fp8";
  s.help =
      "persistent GEMM with blockwise FP8 scales: per-K accumulator stages, A-scales through the input pipeline; "
      "D checked after each run";
  s.options = {
      {"m", 256, 128, 4096, "rows of A and D (a multiple of 128 per CTA of a cluster)"},
      {"n", 256, 64, 4096, "rows of B, columns of D (a multiple of 64)"},
      {"k", 256, 128, 8192, "the reduction (a multiple of 128: one scale block)"},
      {"stages", 2, 1, 4, "input pipeline stages"},
      {"accum-stages", 2, 1, 4, "TMEM accumulator stages: 1, 2 or 4"},
      {"cta-group", 1, 1, 2, "tcgen05 cta_group: 2 issues each MMA over a CTA pair (clusters of 2)"},
      {"clusters", 1, 1, 64, "clusters in the grid; output tiles are spread over them round-robin"},
  };
  for (const BlockwiseFp8Variant& v : kVariants) s.variants.push_back({v.name, v.expect, v.help});
  s.prepare = [](const std::string& variant, const OptionValues& o) {
    const BlockwiseFp8Variant* v = nullptr;
    for (const BlockwiseFp8Variant& x : kVariants)
      if (variant == x.name) v = &x;
    if (v == nullptr) throw std::invalid_argument("blockwise-fp8: no variant '" + variant + "'");
    auto run = std::make_shared<BlockwiseFp8Run>();
    const auto m = static_cast<std::uint32_t>(o.at("m")), n = static_cast<std::uint32_t>(o.at("n")),
               k = static_cast<std::uint32_t>(o.at("k"));
    run->in = cached_problem<BlockwiseFp8Inputs>(
        "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k),
        [&] { return BlockwiseFp8Problem::random(m, n, k, 1); });
    run->args.bug = v->bug;
    const auto stages = static_cast<std::uint32_t>(o.at("stages"));
    const auto accum = static_cast<std::uint32_t>(o.at("accum-stages"));
    const auto clusters = static_cast<std::uint32_t>(o.at("clusters"));
    return o.at("cta-group") == 2 ? with_stages<2>(stages, accum, run, clusters)
                                  : with_stages<1>(stages, accum, run, clusters);
  };
  return s;
}

}  // namespace wspipe::examples
