// The `gemm` scenario: options, variants, and the instantiation of
// examples/gemm.hpp each run uses.
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/emu/emu_backend.hpp"
#include "gemm.hpp"
#include "gemm_host.hpp"
#include "problem_cache.hpp"
#include "host_checks.hpp"
#include "scenarios.hpp"
#include "stage_dispatch.hpp"

namespace wspipe::examples {
namespace {

using emu::EmuBackend;

// A problem's inputs and its reference, shared read-only by every run over
// them; problem.d is unused.
using GemmInputs = SharedProblem<GemmProblem>;

// One run: the shared inputs, this run's D and the kernel's arguments, shared
// by the warps' fibers and by the check after the run.
struct GemmRun {
  std::shared_ptr<const GemmInputs> in;
  std::vector<float> d;
  GemmArgs<EmuBackend> args;
};

template <class Cfg>
emu::Kernel prepare_config(const std::shared_ptr<GemmRun>& run, std::uint32_t clusters) {
  const GemmProblem& p = run->in->problem;
  if (const std::string e = p.shape_error<Cfg>(); !e.empty()) throw std::invalid_argument("gemm: " + e);
  run->args.a_map = p.a_map<Cfg>(p.a.data());
  run->args.b_map = p.b_map<Cfg>(p.b.data());
  run->args.a = p.a.data();
  run->d.assign(std::size_t{p.m} * p.n, __builtin_nanf(""));
  run->args.d = run->d.data();
  run->args.m = p.m;
  run->args.n = p.n;
  run->args.k = p.k;
  emu::Kernel prep;
  prep.launch = warp_specialized_launch(clusters, Cfg::kShape, sizeof(GemmStorage<Cfg>));
  prep.body = [run] { gemm_kernel<EmuBackend, Cfg>(run->args); };
  prep.verify = [run] { return check_exact(run->d, run->in->problem.m, run->in->problem.n, run->in->reference()); };
  return prep;
}

// The run-time options pick one instantiation: the cta_group and cluster
// shape (X by Y CTAs), the dtype, stages 1-4 and accumulator stages 1, 2 or 4.
template <int G, int X, int Y>
emu::Kernel with_dtype(ElemType t, std::uint32_t stages, std::uint32_t accum, const std::shared_ptr<GemmRun>& run,
                       std::uint32_t clusters) {
  return dispatch_stages("gemm", stages, accum, [&]<int S, int A>() {
    return t == ElemType::bf16 ? prepare_config<GemmConfig<G, X, S, A, ElemType::bf16, Y>>(run, clusters)
                               : prepare_config<GemmConfig<G, X, S, A, ElemType::e4m3, Y>>(run, clusters);
  });
}

// The cluster shapes the example instantiates: 1x1 (cta_group 1 only),
// 2x1, 4x1 and 2x2.
emu::Kernel with_shape(std::uint32_t cta_group, std::uint32_t x, std::uint32_t y, ElemType t, std::uint32_t stages,
                       std::uint32_t accum, const std::shared_ptr<GemmRun>& run, std::uint32_t clusters) {
  const std::uint32_t shape = x * 10 + y;
  if (cta_group == 1) {
    if (shape == 11) return with_dtype<1, 1, 1>(t, stages, accum, run, clusters);
    if (shape == 21) return with_dtype<1, 2, 1>(t, stages, accum, run, clusters);
    if (shape == 41) return with_dtype<1, 4, 1>(t, stages, accum, run, clusters);
    if (shape == 22) return with_dtype<1, 2, 2>(t, stages, accum, run, clusters);
  } else {
    if (shape == 21) return with_dtype<2, 2, 1>(t, stages, accum, run, clusters);
    if (shape == 41) return with_dtype<2, 4, 1>(t, stages, accum, run, clusters);
    if (shape == 22) return with_dtype<2, 2, 2>(t, stages, accum, run, clusters);
  }
  std::string e = "gemm: cluster shape ";
  e += std::to_string(x);
  e += "x";
  e += std::to_string(y);
  e += cta_group == 1 ? " is not one of 1x1, 2x1, 4x1, 2x2 (--cluster X --cluster-y Y)"
                      : " does not fit cta_group 2: 2x1, 4x1 or 2x2 (the CTA pair is two CTAs adjacent in x)";
  throw std::invalid_argument(e);
}

struct GemmVariant {
  const char* name;
  GemmBug bug;
  const char* expect;
  const char* help;
  int cta_group = 0;  // pinned option values (0: as given)
  int cluster = 0;
  int manual_a = -1;
  bool lane_divergence = false;  // caught in lane-divergence mode (emu::VariantSpec)
  int cluster_y = 0;
  int m = 0;  // rows of A and D: one cluster tile of a larger cluster
};

const GemmVariant kVariants[] = {
    {"", GemmBug::none, "ok", "correct kernel"},
    {"slot-release-on-issue", GemmBug::slot_release_on_issue, "race.smem",
     "bug 2: a thread arrive frees the input slot right after the MMA issue, not tcgen05.commit"},
    {"no-accum-release", GemmBug::no_accum_release, "deadlock",
     "bug 3: the epilogue never arrives on accum-empty: the MMA warp waits once the stages wrap"},
    {"release-before-wait-ld", GemmBug::release_before_wait_ld, "tmem.release-before-wait-ld",
     "bug 4: accum-empty arrive before tcgen05.wait::ld"},
    {"unelected-commit", GemmBug::unelected_commit, "tcgen05.commit-multi-lane",
     "bug 5: the whole MMA warp commits on the count-1 accum-full barrier"},
    {"unelected-mma", GemmBug::unelected_mma, "tcgen05.mma-multi-lane", "bug 6: the whole MMA warp issues tcgen05.mma"},
    {"wrong-quarter", GemmBug::wrong_quarter, "tmem.lane-quarter",
     "bug 7: an epilogue warp loads another warp's TMEM lane quarter"},
    {"read-addr-before-sync", GemmBug::read_addr_before_sync, "race.smem",
     "bug 8: the epilogue reads the TMEM address before the named barrier publishes it"},
    {"early-dealloc", GemmBug::early_dealloc, "tmem.dealloc-unordered",
     "bug 9: cta_group 2, each CTA deallocates after only its own epilogue", 2, 2},
    {"no-cluster-sync-before-alloc", GemmBug::no_cluster_sync_before_alloc, "tmem.pair-unsynced",
     "bug 10: cta_group 2 tcgen05.alloc before the cluster barrier", 2, 2},
    {"alloc-after-relinquish", GemmBug::alloc_after_relinquish, "tmem.alloc-after-relinquish",
     "bug 11: a second tcgen05.alloc after relinquish_alloc_permit"},
    {"no-dealloc", GemmBug::no_dealloc, "tmem.leak", "bug 12: TMEM never deallocated"},
    {"expect-tx-mismatch", GemmBug::expect_tx_mismatch, "deadlock",
     "bug 13: the full barrier expects 16 bytes more than the loads deliver"},
    {"exit-before-drain", GemmBug::exit_before_drain, "async.target-exited",
     "bug 15: the load warp exits without draining; a peer's commit reaches the exited CTA (cta_group 1, "
     "clusters of 2 sharing B)",
     1, 2},
    {"unshifted-pair-mask", GemmBug::pair_mask_unshifted, "race.tmem",
     "bug 16: cta_group 2 in a 4x1 cluster, the MMA warp's accum-full commit multicasts to 0x3 instead of its own "
     "pair's ranks (0x3 << pair base): the first pair gets the second pair's arrivals, the second pair's epilogue "
     "waits forever",
     2, 4, -1, false, 1, 512},
    {"no-proxy-fence", GemmBug::no_proxy_fence, "smem.missing-proxy-fence",
     "bug 17: A written by ordinary stores and read by the tensor core without fence.proxy.async", 1, 1, 1},
    {"non-uniform-tmem-addr", GemmBug::non_uniform_tmem_addr, "warp.non-uniform-operand",
     "the epilogue's tcgen05.ld address is computed in the elected lane only: the lanes pass different addresses",
     0, 0, -1, true},
    {"stale-accumulator", GemmBug::stale_accumulator, "result.mismatch",
     "numeric: the first MMA of a tile accumulates onto what the accumulator stage held from its previous tile"},
    {"missing-k-block", GemmBug::missing_k_block, "result.mismatch",
     "numeric: the MMA warp skips the last K block's MMAs and still frees the slot"},
    {"wrong-lane-half", GemmBug::wrong_lane_half, "result.mismatch",
     "numeric: the epilogue loads its quarter's upper 16 lanes for the lower 16 rows too"},
};

}  // namespace

emu::LaunchConfig warp_specialized_launch(std::uint32_t clusters, std::uint32_t cluster_size, std::size_t smem_bytes) {
  return warp_specialized_launch(clusters, ClusterShape{cluster_size, 1, 1}, smem_bytes);
}

emu::LaunchConfig warp_specialized_launch(std::uint32_t clusters, ClusterShape shape, std::size_t smem_bytes) {
  emu::LaunchConfig launch;
  launch.num_clusters = clusters;
  launch.cluster_shape = shape;
  launch.warps_per_cta = kGemmWarps;
  launch.smem_bytes = smem_bytes;
  launch.warp_roles = {"epilogue", "epilogue", "epilogue", "epilogue", "load", "mma"};
  return launch;
}

Scenario make_gemm_scenario() {
  Scenario s;
  s.name = "gemm";
  s.help = "persistent warp-specialized GEMM D = A*B^T: TMA warp, MMA warp, 4 epilogue warps; D checked after each run";
  s.options = {
      {"m", 256, 128, 4096, "rows of A and D (a multiple of 128 per CTA of a cluster)"},
      {"n", 256, 64, 4096, "rows of B, columns of D (a multiple of 64)"},
      {"k", 256, 64, 8192, "the reduction (a multiple of 128 bytes of the dtype)"},
      {"stages", 2, 1, 4, "input pipeline stages"},
      {"accum-stages", 2, 1, 4, "TMEM accumulator stages: 1, 2 or 4"},
      {"cta-group", 1, 1, 2, "tcgen05 cta_group: 2 issues each MMA over a CTA pair"},
      {"cluster", 1, 1, 4, "cluster shape: CTAs along x (1, 2 or 4; even for cta_group 2, whose pairs are "
                           "adjacent in x); the CTAs of a column share B by multicast"},
      {"cluster-y", 1, 1, 2, "cluster shape: CTAs along y (1 or 2; 2x2 is the 2-D shape); the CTAs of a row share A "
                             "by multicast"},
      {"clusters", 1, 1, 64, "clusters in the grid; output tiles are spread over them round-robin"},
      {"dtype", 0, 0, 1, "A and B element type", {"bf16", "fp8"}},
      {"manual-a", 0, 0, 1, "1: the load warp writes A with ordinary stores + fence.proxy.async (cta_group 1, "
                            "clusters of 1)"},
  };
  for (const GemmVariant& v : kVariants) {
    OptionValues pinned;
    if (v.cta_group != 0) pinned["cta-group"] = static_cast<std::uint64_t>(v.cta_group);
    if (v.cluster != 0) pinned["cluster"] = static_cast<std::uint64_t>(v.cluster);
    if (v.cluster_y != 0) pinned["cluster-y"] = static_cast<std::uint64_t>(v.cluster_y);
    if (v.m != 0) pinned["m"] = static_cast<std::uint64_t>(v.m);
    if (v.manual_a >= 0) pinned["manual-a"] = static_cast<std::uint64_t>(v.manual_a);
    s.variants.push_back({v.name, v.expect, v.help, pinned, v.lane_divergence});
  }
  // cta_group 2 issues each MMA over a CTA pair: at least 2 CTAs along x.
  s.resolve = [](OptionValues& o) {
    if (o.at("cta-group") == 2 && o.at("cluster") == 1) o["cluster"] = 2;
  };
  s.prepare = [](const std::string& variant, const OptionValues& o) {
    const GemmVariant* v = nullptr;
    for (const GemmVariant& x : kVariants)
      if (variant == x.name) v = &x;
    if (v == nullptr) throw std::invalid_argument("gemm: no variant '" + variant + "'");
    // Pinned and derived settings are in `o` already (emu::Scenario).
    const auto cta_group = static_cast<std::uint32_t>(o.at("cta-group"));
    const auto cluster = static_cast<std::uint32_t>(o.at("cluster"));
    const auto cluster_y = static_cast<std::uint32_t>(o.at("cluster-y"));
    const bool manual_a = o.at("manual-a") != 0;
    if (manual_a && (cta_group != 1 || cluster != 1 || cluster_y != 1))
      throw std::invalid_argument("gemm: --manual-a 1 needs --cta-group 1 --cluster 1 --cluster-y 1");
    const ElemType t = o.at("dtype") == 0 ? ElemType::bf16 : ElemType::e4m3;
    const auto m = static_cast<std::uint32_t>(o.at("m")), n = static_cast<std::uint32_t>(o.at("n")),
               k = static_cast<std::uint32_t>(o.at("k"));
    auto run = std::make_shared<GemmRun>();
    run->in = cached_problem<GemmInputs>(
        "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " dtype=" + to_string(t),
        [&] { return GemmProblem::random(m, n, k, t, 1); });
    run->args.bug = v->bug;
    run->args.manual_a = manual_a;
    const auto stages = static_cast<std::uint32_t>(o.at("stages"));
    const auto accum = static_cast<std::uint32_t>(o.at("accum-stages"));
    const auto clusters = static_cast<std::uint32_t>(o.at("clusters"));
    return with_shape(cta_group, cluster, cluster_y, t, stages, accum, run, clusters);
  };
  return s;
}

}  // namespace wspipe::examples
