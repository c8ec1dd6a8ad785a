// The mbarrier object as the kernel's shared-memory struct holds it.
#pragma once

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

}  // namespace wspipe
