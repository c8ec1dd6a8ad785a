// The `tile-reduce` scenario: options, variants, and the instantiation of
// examples/tile_reduce.hpp each run uses.
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/emu/emu_backend.hpp"
#include "host_checks.hpp"
#include "problem_cache.hpp"
#include "scenarios.hpp"
#include "tile_reduce.hpp"

namespace wspipe::examples {
namespace {

using emu::EmuBackend;

// A problem's inputs and expected sums, built once per process for each
// size and shared, read-only, by every run over them (problem.out unused).
struct TileReduceInputs {
  explicit TileReduceInputs(TileReduceProblem p) : problem(std::move(p)), want(problem.reference()) {}
  const TileReduceProblem problem;
  const std::vector<std::uint32_t> want;
};

// One run: the shared inputs, this run's sums and the kernel's arguments,
// shared by the warps' fibers and by the check after the run.
struct TileReduceRun {
  std::shared_ptr<const TileReduceInputs> in;
  std::vector<std::uint32_t> out;
  TileReduceArgs<EmuBackend> args;
};

struct TileReduceVariant {
  const char* name;
  TileReduceBug bug;
  const char* expect;
  const char* help;
  bool cluster_of_2;  // the bug needs clusters of 2 (pinned)
  bool weights = false;        // the bug needs the loaded weights (pinned)
  bool async_reorder = false;  // the bug needs a load to complete out of issue order
};

const TileReduceVariant kVariants[] = {
    {"", TileReduceBug::none, "ok", "correct kernel", false},
    {"local-release", TileReduceBug::local_release, "race.smem",
     "the consumers free a multicast slot in their own CTA only: the peer's next load overwrites it while it is read",
     true},
    {"expect-own-half", TileReduceBug::expect_own_half, "race.smem",
     "full is armed with this CTA's own half of the tile: the phase can complete before the peer's half lands", true},
    {"no-drain", TileReduceBug::no_drain, "mbarrier.remote-exited-cta",
     "the load warp exits without draining the ring: the peer's consumers still arrive on this CTA's barriers", true},
    {"release-before-read", TileReduceBug::release_before_read, "race.smem",
     "the consumers free the slot before reading it: the next load overwrites the tile they read", false},
    {"unwaited-weights", TileReduceBug::unwaited_weights, "race.smem",
     "the consumers wait for each tile but not for the weights' barrier: the weights' load, issued first, may "
     "complete last",
     false, true, true},
};

template <int Stages>
emu::Kernel prepare(const std::shared_ptr<TileReduceRun>& run, std::uint32_t clusters) {
  emu::Kernel k;
  k.launch.num_clusters = clusters;
  k.launch.cluster_size = run->in->problem.cluster_size;
  k.launch.warps_per_cta = kTileReduceWarps;
  k.launch.smem_bytes = sizeof(TileReduceStorage<Stages>);
  k.launch.warp_roles = {"load", "consumer", "consumer"};
  k.body = [run] { tile_reduce_kernel<EmuBackend, Stages>(run->args); };
  k.verify = [run] { return same_words(run->out, run->in->want) ? std::string() : run->in->problem.check(run->out); };
  return k;
}

}  // namespace

Scenario make_tile_reduce_scenario() {
  Scenario s;
  s.name = "tile-reduce";
  s.help = "TMA tiles (multicast across a cluster of 2) -> InputTilePipeline -> 2 consumer warps reducing rows; "
           "sums checked after each run (no tensor core: runs on Hopper too)";
  s.options = {
      {"rows", 128, kTileRows, 65536, "rows of X (a multiple of 32); each tile is 32 x 64 u32"},
      {"stages", 2, 1, 4, "input pipeline stages"},
      {"cluster", 1, 1, 2, "CTAs per cluster: 2 shares each tile by multicast"},
      {"clusters", 1, 1, 64, "clusters in the grid; tiles are spread over them round-robin"},
      {"weights", 0, 0, 1, "the column weights: computed, or loaded by TMA on an mbarrier of their own",
       {"computed", "loaded"}},
  };
  for (const TileReduceVariant& v : kVariants) {
    OptionValues pinned;
    if (v.cluster_of_2) pinned["cluster"] = 2;
    if (v.weights) pinned["weights"] = 1;
    s.variants.push_back({.name = v.name, .expect = v.expect, .help = v.help, .pinned = pinned,
                          .async_reorder = v.async_reorder});
  }
  s.prepare = [](const std::string& variant, const OptionValues& o) {
    const TileReduceVariant* v = nullptr;
    for (const TileReduceVariant& x : kVariants)
      if (variant == x.name) v = &x;
    if (v == nullptr) throw std::invalid_argument("tile-reduce: no variant '" + variant + "'");
    const auto rows = static_cast<std::uint32_t>(o.at("rows"));
    if (rows % kTileRows != 0) throw std::invalid_argument("tile-reduce: --rows must be a multiple of 32");
    const auto cluster = static_cast<std::uint32_t>(o.at("cluster"));
    auto run = std::make_shared<TileReduceRun>();
    run->in = cached_problem<TileReduceInputs>(
        "rows=" + std::to_string(rows) + " cluster=" + std::to_string(cluster),
        [&] { return TileReduceInputs(TileReduceProblem(rows, cluster)); });
    const TileReduceProblem& p = run->in->problem;
    run->out.assign(p.out.size(), 0);
    run->args.x_map = p.x_map(p.x.data());
    run->args.out = run->out.data();
    run->args.rows = rows;
    run->args.bug = v->bug;
    run->args.weights = o.at("weights") != 0;
    run->args.w_map = p.w_map(p.w.data());
    const auto clusters = static_cast<std::uint32_t>(o.at("clusters"));
    switch (o.at("stages")) {
      case 1: return prepare<1>(run, clusters);
      case 2: return prepare<2>(run, clusters);
      case 3: return prepare<3>(run, clusters);
      case 4: return prepare<4>(run, clusters);
      default: throw std::invalid_argument("tile-reduce: --stages must be in [1, 4]");
    }
  };
  return s;
}

}  // namespace wspipe::examples
