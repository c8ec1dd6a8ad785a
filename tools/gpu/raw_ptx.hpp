// Hand-written PTX for the baselines that the GPU benchmarks compare core/
// against (ring_cost.cu, tma_bandwidth.cu): each operation as one inline
// asm statement, with neither core/ nor CCCL in between, so that the
// baseline is what a programmer would write without wspipe. Device code
// only; a barrier is named by its 32-bit shared-memory address (addr()),
// and the mbarrier instructions are the .shared::cta forms.
//
// Only the single operations live here; each baseline writes its own
// control flow (the ring's set-up, the stage and phase counters).
// ring_cost_check.sh counts the hand-written ring's SASS against core/'s,
// and wrapping that control flow in helpers, even inlined, moved ptxas's
// register allocation and the counts by one instruction on several
// kernels; these leaf wrappers leave the PTX as it was when the asm stood
// in the kernels.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace wspipe::gpu::raw {

// The shared-memory address of `p`.
__device__ __forceinline__ std::uint32_t addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// mbarrier.init of the barrier at `bar` for `count` arrivals (one thread).
__device__ __forceinline__ void init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Makes the barrier initialisations visible (release, cluster scope).
__device__ __forceinline__ void fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// The cluster barrier, arrive (release) then wait (acquire); every thread.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// One probe: whether the phase of parity `parity` of the barrier at `bar`
// has completed.
__device__ __forceinline__ bool try_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t ok;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// Spins on try_wait until that phase has completed.
__device__ __forceinline__ void wait(std::uint32_t bar, std::uint32_t parity) {
  while (!try_wait(bar, parity)) {
  }
}

// One arrival on the barrier at `bar`.
__device__ __forceinline__ void arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// One arrival that also expects `bytes` of transactions on the barrier.
__device__ __forceinline__ void arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// A 2-D TMA load of `map`'s box at (x, y) into shared memory at `dst`,
// completing its bytes on the barrier at `bar`.
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, std::int32_t x, std::int32_t y,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// elect.sync over the full warp: true in exactly one lane.
__device__ __forceinline__ bool elect() {
  std::uint32_t leader;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "elect.sync _|p, %1;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(leader)
      : "r"(0xffffffffu));
  return leader != 0;
}

}  // namespace wspipe::gpu::raw
