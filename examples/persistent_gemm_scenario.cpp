// The `persistent-gemm` scenario: options, variants, and the instantiation
// of examples/persistent_gemm.hpp each run uses.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/emu/emu_backend.hpp"
#include "persistent_gemm.hpp"
#include "persistent_gemm_host.hpp"
#include "problem_cache.hpp"
#include "host_checks.hpp"
#include "scenarios.hpp"

namespace wspipe::examples {
namespace {

using emu::EmuBackend;

using PgInputs = SharedProblem<GemmProblem>;

// One run: the shared inputs, this run's D (written by the TMA stores) and
// the kernel's arguments.
struct PgRun {
  std::shared_ptr<const PgInputs> in;
  std::vector<float> d;
  PersistentGemmArgs<EmuBackend> args;
};

// `active`: clusters the GPU runs at once. With CLC the grid has one cluster
// per tile and the others are launched as running ones exit, or cancelled
// and taken over; without, the grid is min(active, tiles) clusters striding
// over the tiles.
template <class Cfg>
emu::Kernel prepare_config(const std::shared_ptr<PgRun>& run, std::uint32_t active) {
  const GemmProblem& p = run->in->problem;
  if (const std::string e = persistent_gemm_shape_error<Cfg>(p); !e.empty())
    throw std::invalid_argument("persistent-gemm: " + e);
  run->d.assign(std::size_t{p.m} * p.n, __builtin_nanf(""));
  run->args.a_map = persistent_gemm_a_map<Cfg>(p, p.a.data());
  run->args.b_map = persistent_gemm_b_map<Cfg>(p, p.b.data());
  run->args.d_map = persistent_gemm_d_map(run->d.data(), p.m, p.n);
  run->args.m = p.m;
  run->args.n = p.n;
  run->args.k = p.k;
  const std::uint32_t tiles = persistent_gemm_tiles<Cfg>(p);
  emu::Kernel prep;
  prep.launch.cluster_size = Cfg::kShape.size();
  prep.launch.warps_per_cta = kPgWarps;
  prep.launch.smem_bytes = sizeof(PersistentGemmStorage<Cfg>);
  prep.launch.warp_roles = {"epilogue", "epilogue", "epilogue", "epilogue", "scheduler", "load", "mma"};
  if (Cfg::kClcStages > 0) {
    prep.launch.num_clusters = tiles;
    prep.launch.max_active_clusters = active < tiles ? active : 0;
  } else {
    prep.launch.num_clusters = active < tiles ? active : tiles;
  }
  prep.body = [run] { persistent_gemm_kernel<EmuBackend, Cfg>(run->args); };
  prep.verify = [run] { return check_exact(run->d, run->in->problem.m, run->in->problem.n, run->in->reference()); };
  return prep;
}

template <int G, std::uint32_t X, std::uint32_t Y>
emu::Kernel with_clc(std::uint32_t clc, const std::shared_ptr<PgRun>& run, std::uint32_t active) {
  if (clc == 0) return prepare_config<PersistentGemmConfig<G, X, Y, 2, 2, 0>>(run, active);
  if (clc == 1) return prepare_config<PersistentGemmConfig<G, X, Y, 2, 2, 1>>(run, active);
  return prepare_config<PersistentGemmConfig<G, X, Y, 2, 2, 2>>(run, active);
}

struct PgVariant {
  const char* name;
  PersistentGemmBug bug;
  const char* expect;
  const char* help;
  OptionValues pinned = {};
};

const PgVariant kVariants[] = {
    {"", PersistentGemmBug::none, "ok", "correct kernel"},
    {"throttle-not-signalled", PersistentGemmBug::throttle_not_signalled, "deadlock",
     "the load warp never signals the CLC throttle: the scheduler warp never issues a request and every warp "
     "waits for a response",
     {{"clc-stages", 2}}},
    {"response-read-early", PersistentGemmBug::response_read_early, "race.smem,clc.response-before-completion",
     "the MMA warp decodes the CLC response before waiting on its full barrier: the read is not ordered after the "
     "response's write (clc.response-before-completion when the try_cancel is still in flight)",
     {{"clc-stages", 1}}},
    {"store-source-reused", PersistentGemmBug::store_source_reused, "race.smem",
     "the epilogue rewrites a staging buffer without cp.async.bulk.wait_group.read: the TMA store may still read it"},
    {"undrained-clc-ring", PersistentGemmBug::undrained_clc_ring, "mbarrier.remote-exited-cta",
     "bug 15: CTA 0's scheduler warp exits without draining the CLC ring; CTA 1's warps arrive on CTA 0's empty "
     "barrier after CTA 0 exited",
     {{"clc-stages", 2}, {"cluster", 2}}},
    {"unshifted-pair-mask", PersistentGemmBug::pair_mask_unshifted, "race.tmem,deadlock,mbarrier.parity-alias",
     "bug 16: cta_group 2 in a 4x1 cluster commits accum-full with mask 0x3, not 0x3 << the pair's first rank: "
     "the pair (2, 3) signals CTAs 0 and 1, whose epilogue reads a stage the next MMA writes, or whose barrier "
     "skips a phase, while CTAs 2 and 3 wait forever (needs clusters of 4)",
     {{"cta-group", 2}, {"cluster", 4}, {"m", 512}}},
    {"accum-released-early", PersistentGemmBug::accum_released_early, "race.tmem",
     "the epilogue arrives on accum-empty before it loads the stage's last fragment: the next tile's MMA may "
     "overwrite the cells that tcgen05.ld still reads",
     {{"clc-stages", 0}, {"clusters", 1}}},
};

}  // namespace

Scenario make_persistent_gemm_scenario() {
  Scenario s;
  s.name = "persistent-gemm";
  s.help =
      "persistent GEMM in the MAX layout: epilogue warps 0-3 (TMA stores), CLC scheduler warp 4, TMA warp 5, MMA "
      "warp 6; D checked after each run";
  s.options = {
      {"m", 256, 128, 4096, "rows of A and D (a multiple of 128 per CTA along the cluster's x)"},
      {"n", 128, 64, 4096, "rows of B, columns of D (a multiple of 64 per CTA along the cluster's y)"},
      {"k", 128, 64, 8192, "the reduction (a multiple of 64)"},
      {"cta-group", 1, 1, 2, "tcgen05 cta_group: 2 issues each MMA over a CTA pair (adjacent in x)"},
      {"cluster", 1, 1, 4, "cluster shape: CTAs along x (1, 2 or 4; even for cta_group 2, whose pairs are "
                           "adjacent in x); the CTAs of a column share B by multicast"},
      {"cluster-y", 1, 1, 2, "cluster shape: CTAs along y (1 or 2; 2x2 is the 2-D shape); the CTAs of a row share A "
                             "by multicast"},
      {"clc-stages", 2, 0, 2, "CLC response ring stages; 0: static schedule, no cluster launch control"},
      {"clusters", 2, 1, 64, "clusters the GPU runs at once; with CLC the grid has one cluster per cluster tile"},
  };
  for (const PgVariant& v : kVariants) s.variants.push_back({v.name, v.expect, v.help, v.pinned});
  // cta_group 2 pairs CTAs along x: a 1x1 cluster becomes 2x1.
  s.resolve = [](OptionValues& o) {
    if (o.at("cta-group") == 2 && o.at("cluster") == 1) o["cluster"] = 2;
  };
  s.prepare = [](const std::string& variant, const OptionValues& o) {
    const PgVariant* v = nullptr;
    for (const PgVariant& x : kVariants)
      if (variant == x.name) v = &x;
    if (v == nullptr) throw std::invalid_argument("persistent-gemm: no variant '" + variant + "'");
    const auto m = static_cast<std::uint32_t>(o.at("m")), n = static_cast<std::uint32_t>(o.at("n")),
               k = static_cast<std::uint32_t>(o.at("k"));
    auto run = std::make_shared<PgRun>();
    run->in = cached_problem<PgInputs>(
        "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " dtype=bf16",
        [&] { return GemmProblem::random(m, n, k, ElemType::bf16, 1); });
    run->args.bug = v->bug;
    const auto clc = static_cast<std::uint32_t>(o.at("clc-stages"));
    const auto active = static_cast<std::uint32_t>(o.at("clusters"));
    const bool pair = o.at("cta-group") == 2;
    if (clc == 0 && (v->bug == PersistentGemmBug::throttle_not_signalled ||
                     v->bug == PersistentGemmBug::response_read_early ||
                     v->bug == PersistentGemmBug::undrained_clc_ring))
      throw std::invalid_argument("persistent-gemm: variant '" + variant + "' needs --clc-stages 1 or 2");
    const std::uint64_t x = o.at("cluster"), y = o.at("cluster-y");
    if (pair && x % 2 != 0)
      throw std::invalid_argument("persistent-gemm: --cta-group 2 needs an even --cluster (the pair is adjacent in x)");
    if (x == 1 && y == 1) return with_clc<1, 1, 1>(clc, run, active);
    if (x == 2 && y == 1) return pair ? with_clc<2, 2, 1>(clc, run, active) : with_clc<1, 2, 1>(clc, run, active);
    if (x == 4 && y == 1) return pair ? with_clc<2, 4, 1>(clc, run, active) : with_clc<1, 4, 1>(clc, run, active);
    if (x == 2 && y == 2) return pair ? with_clc<2, 2, 2>(clc, run, active) : with_clc<1, 2, 2>(clc, run, active);
    std::string e = "persistent-gemm: cluster shape ";
    e += std::to_string(x);
    e += 'x';
    e += std::to_string(y);
    e += " is not one of 1x1, 2x1, 4x1, 2x2 (--cluster X --cluster-y Y)";
    throw std::invalid_argument(e);
  };
  return s;
}

}  // namespace wspipe::examples
