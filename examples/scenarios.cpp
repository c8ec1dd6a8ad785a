#include "scenarios.hpp"

#include <stdexcept>
#include <utility>

#include "backends/emu/emu_backend.hpp"
#include "ring.hpp"

namespace wspipe::examples {
namespace {

using emu::EmuBackend;

// Pipelines take their stage count as a template parameter; the run-time
// option picks one of these instantiations.
template <int... S>
std::function<void()> ring_body(std::uint32_t stages, std::uint32_t items, RingBug bug, RingRelease release,
                                std::size_t* smem, std::integer_sequence<int, S...>) {
  std::function<void()> body;
  ((stages == static_cast<std::uint32_t>(S + 1)
        ? (body = [items, bug, release] { ring_kernel<EmuBackend, S + 1>(items, bug, release); },
           *smem = sizeof(RingStorage<S + 1>), 0)
        : 0),
   ...);
  return body;
}

Scenario make_ring() {
  Scenario s;
  s.name = "ring";
  s.help = "producer warp -> ProducerConsumerPipeline -> consumer warp, sequence-checked";
  s.options = {
      {"stages", 4, 1, 8, "pipeline stages (slots)"},
      {"items", 64, 0, 1'000'000, "items carried from producer to consumer"},
      {"release", 0, 0, 1, "how the consumer frees a slot: one arrival per lane or one elected arrival",
       {"lanes", "elected"}},
  };
  s.variants = {
      {"", "ok", "correct pipeline"},
      {"no-release", "deadlock", "the consumer never releases a slot"},
      {"over-arrive", "mbarrier.over-arrival", "warp-level arrive where one elected arrive belongs"},
      {"producer-phase-0", "deadlock", "the producer starts at phase 0 instead of 1"},
      {"release-in-elect-one", "warp.divergent-state",
       "elect_one([&] { slot.release(); }): one arrival, but only the elected lane's cursor steps",
       {{"release", 1}}},
      {.name = "lane-guarded-wait",
       .expect = "warp.divergent-branch",
       .help = "only lane 0 waits for the slot, then every lane reads it",
       .lane_divergence = true},
  };
#if defined(WSPIPE_INSTRUMENTED_ACCESSES)
  // Found only where the race checker sees plain accesses: a catalogue
  // compiled with the access instrumentation (not in the asan, tsan and
  // fuzz presets).
  s.variants.push_back({"early-release", "race.smem", "the consumer frees its slot before reading it, and checks nothing"});
#endif
  s.prepare = [](const std::string& variant, const OptionValues& v) {
    RingBug bug = RingBug::none;
    if (variant == "no-release") bug = RingBug::no_release;
    if (variant == "over-arrive") bug = RingBug::over_arrive;
    if (variant == "producer-phase-0") bug = RingBug::producer_phase_0;
    if (variant == "release-in-elect-one") bug = RingBug::release_in_elect_one;
    if (variant == "lane-guarded-wait") bug = RingBug::lane_guarded_wait;
    if (variant == "early-release") bug = RingBug::early_release;
    const auto release = v.at("release") == 1 ? RingRelease::elected : RingRelease::per_lane;
    emu::Kernel p;
    p.launch.warps_per_cta = kRingWarps;
    p.launch.warp_roles = {"producer", "consumer"};
    p.body = ring_body(static_cast<std::uint32_t>(v.at("stages")), static_cast<std::uint32_t>(v.at("items")), bug,
                       release, &p.launch.smem_bytes, std::make_integer_sequence<int, 8>{});
    if (!p.body) throw std::invalid_argument("ring: --stages must be in [1, 8]");
    return p;
  };
  return s;
}

}  // namespace

const Catalogue& catalogue() {
  static const Catalogue all = {make_ring(),
                                 make_pingpong_scenario(),
                                 make_tile_reduce_scenario(),
                                 make_gemm_scenario(),
                                 make_blockwise_fp8_scenario(),
                                 make_tmem_coresident_scenario(),
                                 make_persistent_gemm_scenario()};
  return all;
}

const Scenario* find_scenario(const std::string& name) {
  for (const Scenario& s : catalogue())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace wspipe::examples
