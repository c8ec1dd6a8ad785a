// CudaBackend: the Backend operations on sm_100a. Every operation is a
// force-inlined static __device__ function with the same parameter list as
// EmuBackend's, the caller's SourceLoc included (unused here, except that
// check() prints it: it folds away, std::source_location::current() is
// consteval).
//
// Warp-level code (DESIGN.md): every lane of the warp executes each call.
// A call therefore acts once per executing thread, which is exactly the
// emulator's "one action per active lane": a warp-level arrive is 32
// mbarrier.arrive instructions, one per thread, i.e. 32 arrivals.
//
// Instructions come from CCCL's cuda::ptx wrappers. Inline PTX is used only
// where CCCL 3.0 (nvcc 13.0) has no wrapper, one small function per
// instruction in `detail`, named after it.
#pragma once

#if !defined(__CUDACC__)
#error "backends/cuda/cuda_backend.hpp is CUDA code: compile it with nvcc"
#endif

#include <cuda/ptx>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "core/backend.hpp"

#define WSPIPE_CUDA_OP static __device__ __forceinline__

namespace wspipe::cuda {

namespace detail {

// 32-bit .shared::cta address of a generic pointer into this CTA's smem.
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// elect.sync: true in exactly one lane of `membermask` (PTX "elect.sync").
__device__ __forceinline__ bool elect_sync(std::uint32_t membermask) {
  std::uint32_t is_leader;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "elect.sync _|p, %1;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(is_leader)
      : "r"(membermask));
  return is_leader != 0;
}

// mbarrier.inval: required before the barrier's 8 bytes are reused, or
// re-initialised (PTX "mbarrier.inval"). No CCCL wrapper.
__device__ __forceinline__ void mbarrier_inval(std::uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// mbarrier.complete_tx: what a TMA delivery does, done by a thread. No CCCL
// wrapper in CCCL 3.0.
__device__ __forceinline__ void mbarrier_complete_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// mapa.shared::cluster: the address of the same shared-memory offset in CTA
// `rank` of the cluster (PTX "mapa"). CCCL has no mapa wrapper.
__device__ __forceinline__ std::uint32_t mapa_shared_cluster(std::uint32_t addr, std::uint32_t rank) {
  std::uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}

// mbarrier.arrive.release.cluster.shared::cluster on a mapa'd address. CCCL's
// overload of this instruction takes a generic pointer and converts it with
// cvta.to.shared (the .shared::cta window), which is not defined for another
// CTA's address; so the 32-bit .shared::cluster address from mapa goes in
// directly. .release.cluster: a remote arrive with the default .release.cta
// does not order the arriving thread's writes for a thread of another CTA
// (reference/ptx-mbarrier-tcgen05.md §1.5, Dao-AILab/quack#63).
__device__ __forceinline__ void mbarrier_arrive_release_cluster_shared_cluster(std::uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

// bar.sync / bar.arrive with a barrier id and a thread count (a multiple of
// 32). No CCCL wrapper. Both are .aligned: all threads of the warp execute
// the same instruction, which warp-level code guarantees.
__device__ __forceinline__ void bar_sync(std::uint32_t id, std::uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(std::uint32_t id, std::uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace detail

struct CudaBackend {
  // ---- identity
  // Warp index in the CTA (1-D blocks), broadcast from lane 0 so that the
  // compiler knows it is warp-uniform (CUTLASS canonical_warp_idx_sync) and
  // role dispatch on it does not diverge. Warp-level: all 32 lanes call it.
  WSPIPE_CUDA_OP std::uint32_t warp_idx() { return __shfl_sync(0xffffffffu, threadIdx.x / 32u, 0); }
  WSPIPE_CUDA_OP std::uint32_t lane_idx(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    return ::cuda::ptx::get_sreg_laneid();
  }
  WSPIPE_CUDA_OP std::uint32_t cta_rank() { return ::cuda::ptx::get_sreg_cluster_ctarank(); }
  WSPIPE_CUDA_OP std::uint32_t cluster_size() { return ::cuda::ptx::get_sreg_cluster_nctarank(); }
  // elect.sync over the lanes that are active here: one of them runs f. The
  // mask is __activemask(), not ~0, so that elect_one inside a partial warp
  // (as the emulator allows) is still defined.
  template <class F>
  WSPIPE_CUDA_OP void elect_one(F&& f) {
    if (detail::elect_sync(__activemask())) f();
  }
  // Each thread is its own lane: f(lane) once per active lane.
  template <class F>
  WSPIPE_CUDA_OP void for_each_lane(F&& f) {
    f(lane_idx());
  }
  WSPIPE_CUDA_OP void syncwarp(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    __syncwarp();
  }

  // ---- mbarrier; `bar` is in this CTA's shared memory
  WSPIPE_CUDA_OP void init(SharedMemBarrier& bar, std::uint32_t count, BarrierName name = {},
                           SourceLoc loc = SourceLoc::current()) {
    (void)name;
    (void)loc;
    ::cuda::ptx::mbarrier_init(&bar.raw, count);
  }
  WSPIPE_CUDA_OP void inval(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    detail::mbarrier_inval(detail::smem_addr(&bar));
  }
  // Makes this thread's inits visible to the cluster (remote arrivals); a
  // cluster (or CTA) barrier must follow before anyone uses the barriers.
  WSPIPE_CUDA_OP void fence_init(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
  }
  WSPIPE_CUDA_OP void arrive(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    (void)::cuda::ptx::mbarrier_arrive(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta, ::cuda::ptx::space_shared,
                                       &bar.raw);
  }
  // Arrive on the barrier at the same offset in CTA `cta` of the cluster.
  WSPIPE_CUDA_OP void arrive_remote(SharedMemBarrier& bar, std::uint32_t cta, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    detail::mbarrier_arrive_release_cluster_shared_cluster(
        detail::mapa_shared_cluster(detail::smem_addr(&bar), cta));
  }
  // expect_tx(bytes) then arrive(1), per executing thread.
  WSPIPE_CUDA_OP void arrive_expect_tx(SharedMemBarrier& bar, std::uint32_t bytes,
                                       SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    (void)::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                                 ::cuda::ptx::space_shared, &bar.raw, bytes);
  }
  WSPIPE_CUDA_OP void expect_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    ::cuda::ptx::mbarrier_expect_tx(::cuda::ptx::sem_relaxed, ::cuda::ptx::scope_cta, ::cuda::ptx::space_shared,
                                    &bar.raw, bytes);
  }
  WSPIPE_CUDA_OP void complete_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    detail::mbarrier_complete_tx(detail::smem_addr(&bar), bytes);
  }
  // try_wait.parity with the default .acquire.cta: it orders what CTA-scope
  // releases (local arrives, TMA complete_tx, tcgen05.commit) published.
  // Generic-memory data handed over by a *remote* arrive would formally need
  // .acquire.cluster (an L1 invalidate, CCTL.IVALL, on every success); no
  // kernel here passes generic data that way, as in CUTLASS's sm100 pipelines.
  WSPIPE_CUDA_OP bool try_wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    return ::cuda::ptx::mbarrier_try_wait_parity(&bar.raw, parity);
  }
  // try_wait may fail spuriously (a system-dependent time limit): loop.
  WSPIPE_CUDA_OP void wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    while (!::cuda::ptx::mbarrier_try_wait_parity(&bar.raw, parity)) {
    }
  }

  // ---- named and cluster barriers
  WSPIPE_CUDA_OP void named_sync(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    detail::bar_sync(id, threads);
  }
  WSPIPE_CUDA_OP void named_arrive(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    detail::bar_arrive(id, threads);
  }
  // All threads of all CTAs of the cluster; release/acquire so that it also
  // publishes the barrier inits made before fence_init.
  WSPIPE_CUDA_OP void cluster_sync(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    ::cuda::ptx::barrier_cluster_arrive(::cuda::ptx::sem_release);
    ::cuda::ptx::barrier_cluster_wait(::cuda::ptx::sem_acquire);
  }

  // ---- storage: the dynamic shared memory, laid out as T. The launch gives
  // it sizeof(T) bytes (backends/cuda/launch.hpp). The extern array is
  // declared inside the function: every kernel of a translation unit that
  // uses it sees the same start of its dynamic shared memory, and the name
  // cannot clash with another library's declaration at namespace scope.
  template <class T>
  WSPIPE_CUDA_OP T& shared_storage() {
    static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                  "shared_storage<T>: T must be trivial, as for extern __shared__ memory");
    static_assert(alignof(T) <= 128, "shared_storage<T>: dynamic shared memory is aligned to 128 bytes only");
    extern __shared__ __align__(128) unsigned char wspipe_smem[];
    return *reinterpret_cast<T*>(wspipe_smem);
  }

  // A kernel's data check: the lowest failing lane of the warp prints, then
  // every failing thread traps (the launch fails with cudaErrorLaunchFailure).
  // `loc` is not printed: std::source_location's accessors are constexpr
  // __host__ functions, which device code may call only under
  // --expt-relaxed-constexpr, and its data lives in host memory.
  WSPIPE_CUDA_OP void check(bool cond, const char* what, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    if (!cond) {
      const std::uint32_t failing = __activemask();
      if (::cuda::ptx::get_sreg_laneid() == static_cast<std::uint32_t>(__ffs(static_cast<int>(failing)) - 1)) {
        printf("wspipe check failed: %s (block %u,%u,%u, cluster rank %u, warp %u)\n", what, blockIdx.x, blockIdx.y,
               blockIdx.z, cta_rank(), threadIdx.x / 32u);
      }
      __trap();
    }
  }
};

}  // namespace wspipe::cuda

#undef WSPIPE_CUDA_OP

// The concept's requires-expression names the operations only in unevaluated
// operands, which nvcc accepts for __device__ functions in the host pass too;
// so the concept is checked in both passes, without a __CUDA_ARCH__ guard.
static_assert(wspipe::Backend<wspipe::cuda::CudaBackend>, "CudaBackend must model wspipe::Backend");
