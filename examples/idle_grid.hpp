// `idle_grid`: a grid in which only the first `busy_ctas` CTAs (clusters of
// one) work, each running `ring` over `items` items, while every other
// CTA's warps stay blocked until the rings are done. It measures what idle
// warps and engines cost the emulator's scheduler (bench/emu_bench.cpp,
// BM_EmuGrid; tests/emu_scheduler_test.cpp).
//
// In an idle CTA, warp 0 polls an mbarrier with try_wait, which (run with
// RunOptions::spurious_try_wait off, as the benchmark and test do) times
// out only once nothing else can move, that is once the rings have
// finished; it then completes the barrier itself, and the CTA's other
// warps, which wait on it, go on and exit. (With time-outs on, the default,
// an idle CTA may finish at any time: correct, but not idle.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/backend.hpp"
#include "examples/ring.hpp"

namespace wspipe::examples {

template <Backend B>
WSPIPE_HD void idle_grid_kernel(std::uint32_t busy_ctas, std::uint32_t items) {
  if (B::cluster_idx() < busy_ctas) {
    ring_kernel<B, 4>(items, RingBug::none);
    return;
  }
  auto& go = B::template shared_storage<SharedMemBarrier>();
  if (B::warp_idx() == 0) {
    B::elect_one([&] {
      B::init(go, 32);
      B::fence_init();
    });
  }
  B::cluster_sync();
  if (B::warp_idx() == 0) {
    if (!B::try_wait(go, 0)) B::arrive(go);
  } else {
    B::wait(go, 0);
  }
}

// Shared memory per CTA: the ring's (the idle CTAs use less).
inline constexpr std::size_t kIdleGridSmem = sizeof(RingStorage<4>);

}  // namespace wspipe::examples
