// Helpers for tests that run small kernels on the emulator.
#pragma once

#include <functional>
#include <string>

#include "backends/emu/emu.hpp"

namespace wspipe::test {

using B = emu::EmuBackend;

// Runs `body` on one cluster of `ctas` CTAs with `warps` warps each and
// `smem` bytes of shared memory per CTA.
inline emu::RunResult run_kernel(std::uint32_t warps, const std::function<void()>& body,
                                 emu::RunOptions opts = {}, std::size_t smem = 1024, std::uint32_t ctas = 1) {
  emu::LaunchConfig launch;
  launch.warps_per_cta = warps;
  launch.cluster_size = ctas;
  launch.smem_bytes = smem;
  return emu::run(launch, body, opts);
}

inline emu::RunOptions with_strategy(emu::StrategyKind k, std::uint64_t seed = 1) {
  emu::RunOptions o;
  o.strategy.kind = k;
  o.strategy.seed = seed;
  return o;
}

// The rule of the first violation, or the status word.
inline std::string outcome(const emu::RunResult& r) {
  if (r.status == emu::Status::violation && !r.violations.empty()) return r.violations.front().rule;
  return emu::to_string(r.status);
}

}  // namespace wspipe::test
