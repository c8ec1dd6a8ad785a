// The mbarrier object as the kernel's shared-memory struct holds it.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace wspipe {

// An mbarrier: an opaque 8-byte, 8-byte aligned object in shared memory
// (PTX "mbarrier: Size and alignment"). Kernels embed it in their storage
// struct; only backend operations touch its bytes. The CUDA backend hands
// its address to the mbarrier instructions; the emulator keeps the model
// state aside and stores a handle here.
struct alignas(8) SharedMemBarrier {
  std::uint64_t raw;
};
static_assert(sizeof(SharedMemBarrier) == 8 && alignof(SharedMemBarrier) == 8);

// A name for a barrier, for the emulator's reports and traces ("full", 3)
// prints as full[3]. Ignored by the CUDA backend.
struct BarrierName {
  const char* base = nullptr;
  int index = -1;
};

// The absolute number of an mbarrier phase: init starts phase 0, each
// completion moves the barrier to the next number, and -1 names the phase
// before the first, which a wait counts as complete. PTX waits name a phase
// by its parity alone, which is only meaningful for the current phase or
// the one immediately before it (docs/hardware.md, "Mbarrier phases"). A
// caller that knows the number it means (PipelineState::phase_number())
// may state it next to the parity: the emulator then reports a wait whose
// phase is neither of those two, or that a blocked waiter's phase went by
// unseen (mbarrier.parity-alias). The CUDA backend ignores it.
struct PhaseNumber {
  std::int64_t value = 0;
};

}  // namespace wspipe
