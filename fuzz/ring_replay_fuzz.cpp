// Replays arbitrary schedules against the correct `ring` kernel: every
// schedule either drives it to a clean finish (it has no bug to find) or is
// refused as not fitting; the emulator never crashes or reports a finding.
#include <cstdint>
#include <cstdlib>

#include "backends/emu/emu.hpp"
#include "examples/ring.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace wspipe;
  std::vector<std::uint32_t> choices;
  for (std::size_t i = 0; i < size && i < 4096; ++i) choices.push_back(data[i] % 3);  // 2 warps, plus out-of-range
  emu::RunOptions o;
  o.strategy.kind = emu::StrategyKind::replay;
  o.strategy.replay = emu::Schedule(choices);
  o.trace = false;
  emu::LaunchConfig launch;
  launch.warps_per_cta = examples::kRingWarps;
  launch.smem_bytes = sizeof(examples::RingStorage<2>);
  try {
    const auto r = emu::run(
        launch, [] { examples::ring_kernel<emu::EmuBackend, 2>(16, examples::RingBug::none); }, o);
    if (r.status != emu::Status::ok) std::abort();
  } catch (const emu::ScheduleMismatch&) {
  }
  return 0;
}
