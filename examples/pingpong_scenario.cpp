// The `pingpong` scenario: options, variants, and the instantiation of
// examples/pingpong.hpp each run uses.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/emu/emu_backend.hpp"
#include "parity_alone.hpp"
#include "pingpong.hpp"
#include "scenarios.hpp"
#include "stage_dispatch.hpp"

namespace wspipe::examples {
namespace {

using emu::EmuBackend;


// One run's checksums, written by the groups' epilogues and checked after
// the run.
struct PingPongRun {
  std::vector<std::uint32_t> out;
  PingPongArgs args;
};

struct PingPongVariant {
  const char* name;
  PingPongBug bug;
  const char* expect;
  const char* help;
};

const PingPongVariant kVariants[] = {
    {"", PingPongBug::none, "ok", "correct kernel: the groups take turns and each steps past the other's tiles"},
    {"no-turns", PingPongBug::no_turns, "mbarrier.parity-alias",
     "the groups do not take turns: a group waits for a phase of its next tile while the other group's tile is "
     "still in the ring"},
    {"no-skip", PingPongBug::no_skip, "mbarrier.parity-alias",
     "a group never steps past the other group's tiles: its next wait names a phase laps behind, of the wrong "
     "parity (pinned: 6 items per tile on 2 stages)"},
    {"release-early", PingPongBug::release_early, "race.smem",
     "the consumers free each slot before they read it: the producer's next item overwrites it"},
};

}  // namespace

Scenario make_pingpong_scenario() {
  Scenario s;
  s.name = "pingpong";
  s.help = "producer warp -> one ProducerConsumerPipeline ring -> two consumer warp groups taking turns on whole "
           "tiles, each stepping past the other's (a ping-pong mainloop); checksums checked after each run";
  s.options = {
      {"stages", 2, 1, 8, "pipeline stages (slots)"},
      {"k-blocks", 3, 1, 64, "items per tile"},
      {"tiles", 4, 0, 10'000, "tiles; group 0 takes the even ones, group 1 the odd ones"},
      {"group-warps", 2, 1, kPingPongMaxGroupWarps, "warps per consumer group"},
      {"waits", 0, 0, 1,
       "how the waits name their phase: parity and the phase number the pipeline states (checked), or parity alone "
       "(as the hardware sees it: an aliasing wait shows by the data it lets through)",
       {"stated", "parity"}},
  };
  for (const PingPongVariant& v : kVariants) {
    OptionValues pinned;
    if (v.bug == PingPongBug::no_skip) pinned = {{"stages", 2}, {"k-blocks", 6}};
    s.variants.push_back({v.name, v.expect, v.help, pinned});
  }
  s.prepare = [](const std::string& variant, const OptionValues& o) {
    const PingPongVariant* v = nullptr;
    for (const PingPongVariant& x : kVariants)
      if (variant == x.name) v = &x;
    if (v == nullptr) throw std::invalid_argument("pingpong: no variant '" + variant + "'");
    auto run = std::make_shared<PingPongRun>();
    run->args.tiles = static_cast<std::uint32_t>(o.at("tiles"));
    run->args.k_blocks = static_cast<std::uint32_t>(o.at("k-blocks"));
    run->args.group_warps = static_cast<std::uint32_t>(o.at("group-warps"));
    run->args.bug = v->bug;
    run->out.assign(run->args.tiles, 0);
    run->args.out = run->out.data();
    emu::Kernel k;
    k.launch.warps_per_cta = pingpong_warps(run->args.group_warps);
    k.launch.warp_roles = {"producer"};
    for (std::uint32_t g = 0; g < 2; ++g)
      k.launch.warp_roles.insert(k.launch.warp_roles.end(), run->args.group_warps, g == 0 ? "group0" : "group1");
    const bool parity_alone = o.at("waits") == 1;
    k.launch.smem_bytes = dispatch_stage_count<8>(static_cast<std::uint32_t>(o.at("stages")), [&]<int S>() {
      if (parity_alone) {
        k.body = [run] { pingpong_kernel<ParityAloneBackend, S>(run->args); };
      } else {
        k.body = [run] { pingpong_kernel<EmuBackend, S>(run->args); };
      }
      return sizeof(PingPongStorage<S>);
    });
    k.verify = [run]() -> std::string {
      for (std::uint32_t t = 0; t < run->args.tiles; ++t) {
        const std::uint32_t want = pingpong_checksum(t, run->args.k_blocks);
        if (run->out[t] != want)
          return "tile " + std::to_string(t) + ": checksum " + std::to_string(run->out[t]) + ", expected " +
                 std::to_string(want);
      }
      return "";
    };
    return k;
  };
  return s;
}

}  // namespace wspipe::examples
