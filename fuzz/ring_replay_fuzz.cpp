// Replays arbitrary schedules against the correct `ring` kernel: every
// schedule either drives it to a clean finish (it has no bug to find) or is
// refused as not fitting; the emulator never crashes or reports a finding.
// The bytes are read in pairs: a gap (choice points taking the default)
// and an actor (2 warps, plus one out of range).
#include <cstdint>
#include <cstdlib>

#include "backends/emu/emu.hpp"
#include "examples/ring.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace wspipe;
  std::vector<emu::Schedule::Deviation> devs;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i + 1 < size && i < 4096; i += 2) {
    at += data[i] % 8;
    devs.push_back({at++, data[i + 1] % 3u});
  }
  emu::RunOptions o;
  o.strategy.kind = emu::StrategyKind::replay;
  o.strategy.replay = emu::Schedule(devs);
  o.strategy.strict = size % 2 == 0;  // odd sizes: lenient, as the shrinker replays
  o.trace = false;
  emu::LaunchConfig launch;
  launch.warps_per_cta = examples::kRingWarps;
  launch.smem_bytes = sizeof(examples::RingStorage<2>);
  try {
    const auto r = emu::run(
        launch, [] { examples::ring_kernel<emu::EmuBackend, 2>(16, examples::RingBug::none); }, o);
    if (r.status != emu::Status::ok) std::abort();
  } catch (const emu::ScheduleMismatch&) {
    if (!o.strategy.strict) std::abort();  // lenient replay always fits
  }
  return 0;
}
