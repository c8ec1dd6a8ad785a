// CudaBackendFor<Arch>: the Backend operations on an NVIDIA GPU.
//  - CudaBackend = CudaBackendFor<CudaArch::sm_100a> (Blackwell): everything.
//  - HopperBackend = CudaBackendFor<CudaArch::sm_90a> (Hopper): the
//    arch-neutral half (mbarriers, named and cluster barriers, TMA loads and
//    multicast, fences, elect). Tensor Memory, tcgen05 and .cta_group::2 do
//    not exist there: kTensorMemory is false, and a kernel that calls one of
//    those operations on it fails to compile with a static_assert naming the
//    operation and sm_90a (never a ptxas error or a stub that runs).
// The arch-neutral instructions are the same PTX on both, so a kernel
// written for HopperBackend also runs on sm_100a.
//
// Every operation is a
// force-inlined static __device__ function with the same parameter list as
// EmuBackend's, the caller's SourceLoc included (unused here, except that
// check() prints it: it folds away, std::source_location::current() is
// consteval).
//
// Warp-level code (docs/programming-model.md): every lane of the warp
// executes each call. A call therefore acts once per executing thread,
// which is exactly the emulator's "one action per active lane": a
// warp-level arrive is 32 mbarrier.arrive instructions, one per thread,
// i.e. 32 arrivals.
//
// Instructions come from CCCL's cuda::ptx wrappers. Inline PTX is used only
// where CCCL 3.0 (nvcc 13.0) has no wrapper, one small function per
// instruction in `detail`, named after it.
//
// PTX section numbers below are those of PTX ISA 9.2 (the tcgen05 ones are
// the same in 9.0, CUDA 13.0's; 9.4 renumbers them). Names are stable.
#pragma once

#if !defined(__CUDACC__)
#error "backends/cuda/cuda_backend.hpp is CUDA code: compile it with nvcc"
#endif

// <cuda.h> for the CUtensorMap type only: nothing here calls the driver API,
// so nothing links libcuda (the host encodes maps through the runtime's
// driver entry point, backends/cuda/tensor_map.hpp).
#include <cuda.h>
#include <cuda/ptx>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "core/backend.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"

// WSPIPE_CUDA_EVENT_LOG=<events per warp> (a compile definition; 0 or
// undefined: off) compiles the event log into the operations below: each
// synchronisation operation appends a record to its warp's ring in an
// EventLog (event_log_device.hpp, docs/event-log.md). Off, WSPIPE_CUDA_LOG
// expands to nothing and the SASS is that of a build without the
// definition (tools/gpu/sass_identical_check.sh).
#ifndef WSPIPE_CUDA_EVENT_LOG
#define WSPIPE_CUDA_EVENT_LOG 0
#endif
#if WSPIPE_CUDA_EVENT_LOG > 0
#include "backends/cuda/event_log_device.hpp"
// A record of EventOp::op with a barrier (or id), an argument and flags; the
// operation's `loc` gives the line and file.
#define WSPIPE_CUDA_LOG(op, bar, arg, flags) \
  ::wspipe::cuda::detail::log_event(::wspipe::cuda::EventOp::op, (bar), (arg), (flags), loc)
#else
#define WSPIPE_CUDA_LOG(op, bar, arg, flags) ((void)0)
#endif

// WSPIPE_CUDA_DELAYS=1 (a compile definition; 0 or undefined: off) compiles
// the seeded delays into the operations below: waits, arrivals and the
// issue of TMA, MMA and CLC work first sleep as the configuration attached
// from the host says (delays_device.hpp, docs/delays.md). Off,
// WSPIPE_CUDA_DELAY expands to nothing and the SASS is that of a build
// without the definition (tools/gpu/sass_identical_check.sh).
#ifndef WSPIPE_CUDA_DELAYS
#define WSPIPE_CUDA_DELAYS 0
#endif
#if WSPIPE_CUDA_DELAYS
#include "backends/cuda/delays_device.hpp"
// The sleep before EventOp::op; the operation's `loc` names its site.
#define WSPIPE_CUDA_DELAY(op) ::wspipe::cuda::detail::delay_before(::wspipe::cuda::EventOp::op, loc)
#else
#define WSPIPE_CUDA_DELAY(op) ((void)0)
#endif

#define WSPIPE_CUDA_OP static __device__ __forceinline__

namespace wspipe::cuda {

enum class CudaArch { sm_90a, sm_100a };

namespace detail {

// 32-bit .shared::cta address of a generic pointer into this CTA's smem.
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// `v`, through a move that the front end cannot see into: it can no longer
// derive facts about the value (such as the alignment of the address it
// came from) and fold tests of them away.
__device__ __forceinline__ std::uint32_t opaque(std::uint32_t v) {
  std::uint32_t r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
  return r;
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
// (docs/hardware.md "Mbarrier memory ordering"; Dao-AILab/quack#63).
__device__ __forceinline__ void mbarrier_arrive_release_cluster_shared_cluster(std::uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}
// The same with expect_tx(bytes) first (PTX "mbarrier.arrive": .expect_tx
// on a .shared::cluster address). CCCL's wrapper of the .shared::cluster
// form takes a generic pointer; the mapa result is a 32-bit shared::cluster
// address, so inline PTX as above.
__device__ __forceinline__ void mbarrier_arrive_expect_tx_release_cluster_shared_cluster(std::uint32_t remote_bar,
                                                                                       std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], %1;" ::"r"(remote_bar),
               "r"(bytes)
               : "memory");
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

#if WSPIPE_CUDA_EVENT_LOG > 0
// EventRecord::flags of a remote operation on CTA `cta`, and of a wait.
__device__ __forceinline__ std::uint32_t remote_flags(std::uint32_t cta) {
  return kEventRemote | ((cta & 0xfu) << kEventRemoteShift);
}
__device__ __forceinline__ std::uint32_t wait_flags(std::uint32_t parity, bool passed) {
  return kEventHasParity | ((parity & 1u) != 0 ? kEventParity : 0u) | (passed ? kEventAnswer : 0u);
}
#endif

// The .shared::cluster address of shared-memory address `addr`'s offset in
// this CTA's pair's even CTA (cluster ranks 2k and 2k+1 form a pair).
__device__ __forceinline__ std::uint32_t pair_even_cta_addr(std::uint32_t addr) {
  return mapa_shared_cluster(addr, ::cuda::ptx::get_sreg_cluster_ctarank() & ~1u);
}

// The CCCL tag of a .cta_group. Every tcgen05 operation and the TMA loads
// take CtaGroup through here, so that one assertion guards them all.
template <int CtaGroup>
__device__ __forceinline__ constexpr auto cta_group() {
  static_assert(CtaGroup == 1 || CtaGroup == 2, "CtaGroup must be 1 (.cta_group::1) or 2 (.cta_group::2)");
  if constexpr (CtaGroup == 1) {
    return ::cuda::ptx::cta_group_1;
  } else {
    return ::cuda::ptx::cta_group_2;
  }
}

// The CCCL tag of a tcgen05.mma .kind.
template <MmaKind Kind>
__device__ __forceinline__ constexpr auto mma_kind() {
  if constexpr (Kind == MmaKind::f16) {
    return ::cuda::ptx::kind_f16;
  } else {
    return ::cuda::ptx::kind_f8f6f4;
  }
}

// The first Rank coordinates, as the array the .Rank-d instruction takes.
template <std::uint32_t Rank>
struct TmaCoordArray {
  static_assert(Rank >= 1 && Rank <= kTmaMaxRank, "Rank (of the tensor map) must be in [1, 5]");
  std::int32_t c[Rank];
};
template <std::uint32_t Rank>
__device__ __forceinline__ TmaCoordArray<Rank> tma_coords(const TmaCoords& coords) {
  TmaCoordArray<Rank> a;
  for (std::uint32_t i = 0; i < Rank; ++i) a.c[i] = coords.c[i];
  return a;
}

// cp.async.bulk.tensor.{1-5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2
// [dst], [map, {c}], [bar] (PTX 9.7.9.25.5.2 "cp.async.bulk.tensor"): the
// load of one CTA of a pair whose complete_tx lands on `bar`, a
// .shared::cluster address in either CTA of the pair. CCCL 3.0 has this
// form only with a generic barrier pointer, which it converts with
// cvta.to.shared (this CTA's window): it cannot name the peer's barrier.
template <std::uint32_t Rank>
__device__ __forceinline__ void cp_async_bulk_tensor_cta_group_2(std::uint32_t dst, const void* map,
                                                                 const TmaCoordArray<Rank>& a, std::uint32_t bar) {
#define WSPIPE_TMA_2SM(DIM, COORDS, ...)                                                               \
  asm volatile("cp.async.bulk.tensor." DIM ".shared::cluster.global.tile.mbarrier::complete_tx::bytes" \
               ".cta_group::2 [%0], [%1, " COORDS "], [%2];"                                           \
               :                                                                                       \
               : "r"(dst), "l"(map), "r"(bar), __VA_ARGS__                                             \
               : "memory")
  const std::int32_t* c = a.c;
  if constexpr (Rank == 1) {
    WSPIPE_TMA_2SM("1d", "{%3}", "r"(c[0]));
  } else if constexpr (Rank == 2) {
    WSPIPE_TMA_2SM("2d", "{%3, %4}", "r"(c[0]), "r"(c[1]));
  } else if constexpr (Rank == 3) {
    WSPIPE_TMA_2SM("3d", "{%3, %4, %5}", "r"(c[0]), "r"(c[1]), "r"(c[2]));
  } else if constexpr (Rank == 4) {
    WSPIPE_TMA_2SM("4d", "{%3, %4, %5, %6}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  } else {
    WSPIPE_TMA_2SM("5d", "{%3, %4, %5, %6, %7}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]));
  }
#undef WSPIPE_TMA_2SM
}

// The same with .multicast::cluster: the box lands at `dst`'s offset in each
// CTA of the 16-bit `mask`. ".cta_group is used to signal either the odd
// numbered CTA or the even numbered CTA among the CTA-Pair" (ibid.): `bar`'s
// address selects which. Inline PTX for the same reason as above.
template <std::uint32_t Rank>
__device__ __forceinline__ void cp_async_bulk_tensor_multicast_cta_group_2(std::uint32_t dst, const void* map,
                                                                           const TmaCoordArray<Rank>& a,
                                                                           std::uint32_t bar, std::uint16_t mask) {
#define WSPIPE_TMA_2SM_MULTICAST(DIM, COORDS, ...)                                                     \
  asm volatile("cp.async.bulk.tensor." DIM ".shared::cluster.global.tile.mbarrier::complete_tx::bytes" \
               ".multicast::cluster.cta_group::2 [%0], [%1, " COORDS "], [%2], %3;"                    \
               :                                                                                       \
               : "r"(dst), "l"(map), "r"(bar), "h"(mask), __VA_ARGS__                                  \
               : "memory")
  const std::int32_t* c = a.c;
  if constexpr (Rank == 1) {
    WSPIPE_TMA_2SM_MULTICAST("1d", "{%4}", "r"(c[0]));
  } else if constexpr (Rank == 2) {
    WSPIPE_TMA_2SM_MULTICAST("2d", "{%4, %5}", "r"(c[0]), "r"(c[1]));
  } else if constexpr (Rank == 3) {
    WSPIPE_TMA_2SM_MULTICAST("3d", "{%4, %5, %6}", "r"(c[0]), "r"(c[1]), "r"(c[2]));
  } else if constexpr (Rank == 4) {
    WSPIPE_TMA_2SM_MULTICAST("4d", "{%4, %5, %6, %7}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  } else {
    WSPIPE_TMA_2SM_MULTICAST("5d", "{%4, %5, %6, %7, %8}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]));
  }
#undef WSPIPE_TMA_2SM_MULTICAST
}

}  // namespace detail

// WSPIPE_CUDA_WATCHDOG_SPINS (a compile definition; 0 or undefined: off)
// bounds every wait(): after that many failed try_wait the thread prints the
// barrier's shared-memory address and parity and traps, so that a hung
// pipeline becomes a launch failure the host can report (the silicon tests'
// watchdog, tools/gpu/silicon.cu). Production builds leave it off.
#ifndef WSPIPE_CUDA_WATCHDOG_SPINS
#define WSPIPE_CUDA_WATCHDOG_SPINS 0
#endif

// Tensor Memory, tcgen05 and .cta_group::2 exist on sm_100a only. Each such
// operation starts with this: on HopperBackend it names itself and the
// architecture; on CudaBackend compiled in a device pass for another
// architecture (a -gencode other than compute_100a) it says so, where ptxas
// would otherwise reject the instruction with no hint of the cause.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM100_ALL) && !defined(__CUDA_ARCH_FEAT_SM101_ALL) && \
    !defined(__CUDA_ARCH_FEAT_SM103_ALL)
#define WSPIPE_CUDA_PASS_HAS_TCGEN05 false
#else
#define WSPIPE_CUDA_PASS_HAS_TCGEN05 true
#endif
#define WSPIPE_CUDA_SM100_ONLY(op)                                                                                 \
  static_assert(kTensorMemory, "wspipe::cuda::HopperBackend (sm_90a) has no " op                                   \
                               ": Tensor Memory and tcgen05 exist on sm_100a only (use CudaBackend, built with " \
                               "-gencode arch=compute_100a,code=sm_100a)");                                        \
  static_assert(!kTensorMemory || WSPIPE_CUDA_PASS_HAS_TCGEN05,                                                   \
                "wspipe::cuda::CudaBackend: " op " is compiled in a device pass that is not sm_100a: build the "   \
                "kernels that use it with -gencode arch=compute_100a,code=sm_100a only")

// Cluster launch control exists on sm_100 only (PTX ISA 8.6); the same two
// checks, with its own message.
#define WSPIPE_CUDA_CLC_ONLY(op)                                                                                   \
  static_assert(kClusterLaunchControl, "wspipe::cuda::HopperBackend (sm_90a) has no " op                           \
                                       ": cluster launch control exists on sm_100a only (use CudaBackend, built "  \
                                       "with -gencode arch=compute_100a,code=sm_100a)");                           \
  static_assert(!kClusterLaunchControl || WSPIPE_CUDA_PASS_HAS_TCGEN05,                                           \
                "wspipe::cuda::CudaBackend: " op " is compiled in a device pass that is not sm_100a: build the "   \
                "kernels that use it with -gencode arch=compute_100a,code=sm_100a only")

template <CudaArch Arch>
struct CudaBackendFor {
  static constexpr CudaArch kArch = Arch;
  // The capability the Backend concept asks every backend to state.
  static constexpr bool kTensorMemory = Arch == CudaArch::sm_100a;

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
  // PTX "Special Registers: %cluster_nctaid": the cluster's CTAs per dimension.
  WSPIPE_CUDA_OP ClusterShape cluster_shape() {
    return {::cuda::ptx::get_sreg_cluster_nctaid_x(), ::cuda::ptx::get_sreg_cluster_nctaid_y(),
            ::cuda::ptx::get_sreg_cluster_nctaid_z()};
  }
  // Grids are 1-D (backends/cuda/launch.hpp): clusters along x.
  WSPIPE_CUDA_OP std::uint32_t cluster_idx() { return ::cuda::ptx::get_sreg_clusterid_x(); }
  WSPIPE_CUDA_OP std::uint32_t num_clusters() { return ::cuda::ptx::get_sreg_nclusterid_x(); }
  // elect.sync over the lanes that are active here: one of them runs f. The
  // mask is __activemask(), not ~0, so that elect_one inside a partial warp
  // (as the emulator allows) is still defined. The lanes leave together
  // (__syncwarp over the same mask): with independent thread scheduling
  // nothing else makes the others wait for the elected lane, and those that
  // run ahead into the next elect_one elect a second lane there, so that f
  // runs twice (the delays' longer bodies showed it on an H200, docs/delays.md).
  template <class F>
  WSPIPE_CUDA_OP void elect_one(F&& f) {
    const std::uint32_t lanes = __activemask();
    if (detail::elect_sync(lanes)) f();
    __syncwarp(lanes);
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
  // Each lane steps its own copy of the state; the emulator checks that the
  // whole warp does (Backend concept), the GPU has nothing to do.
  WSPIPE_CUDA_OP void warp_state_step(const char*, SourceLoc = SourceLoc::current()) {}

  // ---- mbarrier; `bar` is in this CTA's shared memory
  WSPIPE_CUDA_OP void init(SharedMemBarrier& bar, std::uint32_t count, BarrierName name = {},
                           SourceLoc loc = SourceLoc::current()) {
    (void)name;
    (void)loc;
    ::cuda::ptx::mbarrier_init(&bar.raw, count);
    WSPIPE_CUDA_LOG(init, detail::smem_addr(&bar), count, 0u);
  }
  WSPIPE_CUDA_OP void inval(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    detail::mbarrier_inval(detail::smem_addr(&bar));
    WSPIPE_CUDA_LOG(inval, detail::smem_addr(&bar), 0u, 0u);
  }
  // Makes this thread's inits visible to the cluster (remote arrivals); a
  // cluster (or CTA) barrier must follow before anyone uses the barriers.
  WSPIPE_CUDA_OP void fence_init(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
  }
  WSPIPE_CUDA_OP void arrive(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(arrive);
    (void)::cuda::ptx::mbarrier_arrive(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta, ::cuda::ptx::space_shared,
                                       &bar.raw);
    WSPIPE_CUDA_LOG(arrive, detail::smem_addr(&bar), 0u, 0u);
  }
  // Arrive on the barrier at the same offset in CTA `cta` of the cluster.
  WSPIPE_CUDA_OP void arrive_remote(SharedMemBarrier& bar, std::uint32_t cta, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(arrive);
    detail::mbarrier_arrive_release_cluster_shared_cluster(
        detail::mapa_shared_cluster(detail::smem_addr(&bar), cta));
    WSPIPE_CUDA_LOG(arrive, detail::smem_addr(&bar), 0u, detail::remote_flags(cta));
  }
  // expect_tx(bytes) then arrive(1), per executing thread.
  WSPIPE_CUDA_OP void arrive_expect_tx(SharedMemBarrier& bar, std::uint32_t bytes,
                                       SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(arrive_expect_tx);
    (void)::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                                 ::cuda::ptx::space_shared, &bar.raw, bytes);
    WSPIPE_CUDA_LOG(arrive_expect_tx, detail::smem_addr(&bar), bytes, 0u);
  }
  // expect_tx(bytes) then arrive(1) on the barrier at the same offset in
  // CTA `cta` of the cluster, per executing thread.
  WSPIPE_CUDA_OP void arrive_expect_tx_remote(SharedMemBarrier& bar, std::uint32_t bytes, std::uint32_t cta,
                                              SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(arrive_expect_tx);
    detail::mbarrier_arrive_expect_tx_release_cluster_shared_cluster(
        detail::mapa_shared_cluster(detail::smem_addr(&bar), cta), bytes);
    WSPIPE_CUDA_LOG(arrive_expect_tx, detail::smem_addr(&bar), bytes, detail::remote_flags(cta));
  }
  WSPIPE_CUDA_OP void expect_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    ::cuda::ptx::mbarrier_expect_tx(::cuda::ptx::sem_relaxed, ::cuda::ptx::scope_cta, ::cuda::ptx::space_shared,
                                    &bar.raw, bytes);
    WSPIPE_CUDA_LOG(expect_tx, detail::smem_addr(&bar), bytes, 0u);
  }
  WSPIPE_CUDA_OP void complete_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(complete_tx);
    detail::mbarrier_complete_tx(detail::smem_addr(&bar), bytes);
    WSPIPE_CUDA_LOG(complete_tx, detail::smem_addr(&bar), bytes, 0u);
  }
  // try_wait.parity with the default .acquire.cta: it orders what CTA-scope
  // releases (local arrives, TMA complete_tx, tcgen05.commit) published.
  // Generic-memory data handed over by a *remote* arrive would formally need
  // .acquire.cluster (an L1 invalidate, CCTL.IVALL, on every success); no
  // kernel here passes generic data that way, as in CUTLASS's sm100 pipelines.
  WSPIPE_CUDA_OP bool try_wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(try_wait);
#if WSPIPE_CUDA_EVENT_LOG > 0
    const bool passed = ::cuda::ptx::mbarrier_try_wait_parity(&bar.raw, parity);
    WSPIPE_CUDA_LOG(try_wait, detail::smem_addr(&bar), 0u, detail::wait_flags(parity, passed));
    return passed;
#else
    return ::cuda::ptx::mbarrier_try_wait_parity(&bar.raw, parity);
#endif
  }
  // test_wait.parity: the same test as try_wait, without its potentially
  // blocking wait (PTX "mbarrier.test_wait"), .acquire.cta as above.
  WSPIPE_CUDA_OP bool test_wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(test_wait);
#if WSPIPE_CUDA_EVENT_LOG > 0
    const bool passed = ::cuda::ptx::mbarrier_test_wait_parity(&bar.raw, parity);
    WSPIPE_CUDA_LOG(test_wait, detail::smem_addr(&bar), 0u, detail::wait_flags(parity, passed));
    return passed;
#else
    return ::cuda::ptx::mbarrier_test_wait_parity(&bar.raw, parity);
#endif
  }
  // try_wait may fail spuriously (a system-dependent time limit): loop.
  WSPIPE_CUDA_OP void wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(wait);
#if WSPIPE_CUDA_EVENT_LOG > 0
    // With the log: the failed tries counted, the wait logged once it
    // passes; a watchdog that fires logs the wait (answer 0) and its trap
    // first, so that the host finds them in the log after the trap.
    std::uint32_t failed = 0;
    while (!::cuda::ptx::mbarrier_try_wait_parity(&bar.raw, parity)) {
      ++failed;
      if constexpr (WSPIPE_CUDA_WATCHDOG_SPINS > 0) {
        if (failed == static_cast<std::uint32_t>(WSPIPE_CUDA_WATCHDOG_SPINS)) {
          WSPIPE_CUDA_LOG(wait, detail::smem_addr(&bar), failed, detail::wait_flags(parity, false));
          detail::log_trap(TrapReason::watchdog, detail::smem_addr(&bar), parity, failed, loc);
          printf("wspipe watchdog: mbarrier wait (smem 0x%x, parity %u) still failing after %u tries (block %u, "
                 "thread %u)\n",
                 detail::smem_addr(&bar), parity, failed, blockIdx.x, threadIdx.x);
          __trap();
        }
      }
    }
    WSPIPE_CUDA_LOG(wait, detail::smem_addr(&bar), failed, detail::wait_flags(parity, true));
#else
    if constexpr (WSPIPE_CUDA_WATCHDOG_SPINS > 0) {
      for (unsigned long long tries = 0; !::cuda::ptx::mbarrier_try_wait_parity(&bar.raw, parity);) {
        if (++tries == static_cast<unsigned long long>(WSPIPE_CUDA_WATCHDOG_SPINS)) {
          printf("wspipe watchdog: mbarrier wait (smem 0x%x, parity %u) still failing after %llu tries (block %u, "
                 "thread %u)\n",
                 detail::smem_addr(&bar), parity, tries, blockIdx.x, threadIdx.x);
          __trap();
        }
      }
    } else {
      while (!::cuda::ptx::mbarrier_try_wait_parity(&bar.raw, parity)) {
      }
    }
#endif
  }
  // The phase number a caller states is the emulator's to check: the
  // hardware knows parities only.
  WSPIPE_CUDA_OP bool try_wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber,
                               SourceLoc loc = SourceLoc::current()) {
    return try_wait(bar, parity, loc);
  }
  WSPIPE_CUDA_OP bool test_wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber,
                                SourceLoc loc = SourceLoc::current()) {
    return test_wait(bar, parity, loc);
  }
  WSPIPE_CUDA_OP void wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber,
                           SourceLoc loc = SourceLoc::current()) {
    wait(bar, parity, loc);
  }

  // ---- named and cluster barriers
  WSPIPE_CUDA_OP void named_sync(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(named_sync);
    detail::bar_sync(id, threads);
    WSPIPE_CUDA_LOG(named_sync, id, threads, 0u);
  }
  WSPIPE_CUDA_OP void named_arrive(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(named_arrive);
    detail::bar_arrive(id, threads);
    WSPIPE_CUDA_LOG(named_arrive, id, threads, 0u);
  }
  // All threads of all CTAs of the cluster; release/acquire so that it also
  // publishes the barrier inits made before fence_init.
  WSPIPE_CUDA_OP void cluster_sync(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(cluster_arrive);
    ::cuda::ptx::barrier_cluster_arrive(::cuda::ptx::sem_release);
    WSPIPE_CUDA_LOG(cluster_arrive, 0u, 0u, 0u);
    WSPIPE_CUDA_DELAY(cluster_wait);
    ::cuda::ptx::barrier_cluster_wait(::cuda::ptx::sem_acquire);
    WSPIPE_CUDA_LOG(cluster_wait, 0u, 0u, 0u);
  }

  // ---- Tensor Memory (PTX 9.7.16.7-9.7.16.8). alloc, relinquish, dealloc,
  // ld, st and the waits are .sync.aligned: all 32 lanes of the warp, same
  // operands, which warp-level code gives.

  // tcgen05.alloc: `cols` (a power of 2 in [32, 512]) columns; the base
  // address lands in shared memory at `dst_smem` as a weak store, so readers
  // in other warps need a barrier after it. Blocks until the columns are
  // free. With CtaGroup 2 one warp of each CTA of the pair calls it with the
  // same `dst_smem` offset.
  template <int CtaGroup>
  WSPIPE_CUDA_OP void tmem_alloc(std::uint32_t* dst_smem, std::uint32_t cols, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_alloc (tcgen05.alloc)");
    (void)loc;
    ::cuda::ptx::tcgen05_alloc(detail::cta_group<CtaGroup>(), dst_smem, cols);
    WSPIPE_CUDA_LOG(tmem_alloc, detail::smem_addr(dst_smem), cols, 0u);
  }
  // tcgen05.relinquish_alloc_permit: this CTA gives up the right to
  // allocate; an alloc after it is illegal (ptxas inserts a trap).
  template <int CtaGroup>
  WSPIPE_CUDA_OP void tmem_relinquish(SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_relinquish (tcgen05.relinquish_alloc_permit)");
    (void)loc;
    ::cuda::ptx::tcgen05_relinquish_alloc_permit(detail::cta_group<CtaGroup>());
    WSPIPE_CUDA_LOG(tmem_relinquish, 0u, 0u, 0u);
  }
  // tcgen05.dealloc of an allocation's base address and size.
  template <int CtaGroup>
  WSPIPE_CUDA_OP void tmem_dealloc(std::uint32_t taddr, std::uint32_t cols, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_dealloc (tcgen05.dealloc)");
    (void)loc;
    ::cuda::ptx::tcgen05_dealloc(detail::cta_group<CtaGroup>(), taddr, cols);
    WSPIPE_CUDA_LOG(tmem_dealloc, taddr, cols, 0u);
  }

  // A tcgen05.ld/st fragment: this thread's N 32-bit registers. Index it
  // with compile-time constants (unrolled loops): a run-time index sends the
  // array to local memory. N is a std::uint32_t, the type of tmem_regs(), as
  // in EmuBackend, so that kernel templates deduce it on both backends.
  template <std::uint32_t N>
  struct Frag {
    std::uint32_t r[N];

    __device__ __forceinline__ std::uint32_t reg(std::uint32_t i, SourceLoc loc = SourceLoc::current()) const {
      (void)loc;
      return r[i];
    }
    __device__ __forceinline__ void set(std::uint32_t i, std::uint32_t v, SourceLoc loc = SourceLoc::current()) {
      (void)loc;
      r[i] = v;
    }
    // reg(i) as the f32 it holds (an accumulator's element).
    __device__ __forceinline__ float f32(std::uint32_t i, SourceLoc loc = SourceLoc::current()) const {
      (void)loc;
      return __uint_as_float(r[i]);
    }
  };

  // tcgen05.ld.sync.aligned.<S>.x<Num>.b32 (PTX 9.7.16.8.3): asynchronous;
  // the registers are valid after tmem_wait_load(). HalfSplit is the
  // immHalfSplitoff of .16x32bx2: the column offset of its second half from
  // taddr. CCCL overloads each shape on the register count, which selects
  // .x<Num>.
  template <TmemShape S, std::uint32_t Num, std::uint32_t HalfSplit = 0>
  WSPIPE_CUDA_OP Frag<tmem_regs(S, Num)> tmem_load(std::uint32_t taddr, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_load (tcgen05.ld)");
    (void)loc;
    static_assert(tmem_num_valid(S, Num),
                  "tmem_load<S, Num>: Num must be a power of 2 in [1, 128] and the shape S must fit in 128 "
                  "registers (.16x128b stops at .x64, .16x256b at .x32)");
    static_assert(HalfSplit == 0 || S == TmemShape::s16x32bx2,
                  "tmem_load<S, Num, HalfSplit>: only the .16x32bx2 shape takes HalfSplit");
    Frag<tmem_regs(S, Num)> f;
    if constexpr (S == TmemShape::s32x32b) {
      ::cuda::ptx::tcgen05_ld_32x32b(f.r, taddr);
    } else if constexpr (S == TmemShape::s16x64b) {
      ::cuda::ptx::tcgen05_ld_16x64b(f.r, taddr);
    } else if constexpr (S == TmemShape::s16x128b) {
      ::cuda::ptx::tcgen05_ld_16x128b(f.r, taddr);
    } else if constexpr (S == TmemShape::s16x256b) {
      ::cuda::ptx::tcgen05_ld_16x256b(f.r, taddr);
    } else {
      ::cuda::ptx::tcgen05_ld_16x32bx2(f.r, taddr, ::cuda::ptx::n32_t<static_cast<int>(HalfSplit)>{});
    }
    return f;
  }
  // tcgen05.st.sync.aligned.<S>.x<Num>.b32 (PTX 9.7.16.8.4): asynchronous;
  // the TMEM cells hold the values after tmem_wait_store().
  template <TmemShape S, std::uint32_t Num, std::uint32_t HalfSplit = 0>
  WSPIPE_CUDA_OP void tmem_store(std::uint32_t taddr, const Frag<tmem_regs(S, Num)>& frag,
                                 SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_store (tcgen05.st)");
    (void)loc;
    static_assert(tmem_num_valid(S, Num),
                  "tmem_store<S, Num>: Num must be a power of 2 in [1, 128] and the shape S must fit in 128 "
                  "registers (.16x128b stops at .x64, .16x256b at .x32)");
    static_assert(HalfSplit == 0 || S == TmemShape::s16x32bx2,
                  "tmem_store<S, Num, HalfSplit>: only the .16x32bx2 shape takes HalfSplit");
    if constexpr (S == TmemShape::s32x32b) {
      ::cuda::ptx::tcgen05_st_32x32b(taddr, frag.r);
    } else if constexpr (S == TmemShape::s16x64b) {
      ::cuda::ptx::tcgen05_st_16x64b(taddr, frag.r);
    } else if constexpr (S == TmemShape::s16x128b) {
      ::cuda::ptx::tcgen05_st_16x128b(taddr, frag.r);
    } else if constexpr (S == TmemShape::s16x256b) {
      ::cuda::ptx::tcgen05_st_16x256b(taddr, frag.r);
    } else {
      ::cuda::ptx::tcgen05_st_16x32bx2(taddr, ::cuda::ptx::n32_t<static_cast<int>(HalfSplit)>{}, frag.r);
    }
  }
  // tcgen05.wait::ld / ::st (PTX 9.7.16.8.5): block until this thread's
  // earlier tcgen05.ld / tcgen05.st have completed.
  WSPIPE_CUDA_OP void tmem_wait_load(SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_wait_load (tcgen05.wait::ld)");
    (void)loc;
    ::cuda::ptx::tcgen05_wait_ld();
  }
  WSPIPE_CUDA_OP void tmem_wait_store(SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_wait_store (tcgen05.wait::st)");
    (void)loc;
    ::cuda::ptx::tcgen05_wait_st();
  }
  // tcgen05.fence::before_thread_sync / ::after_thread_sync (PTX 9.7.16.11.1):
  // order this thread's asynchronous tcgen05 operations before / after the
  // thread synchronisation (barrier, mbarrier) that they bracket.
  WSPIPE_CUDA_OP void tmem_fence_before(SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_fence_before (tcgen05.fence::before_thread_sync)");
    (void)loc;
    ::cuda::ptx::tcgen05_fence_before_thread_sync();
  }
  WSPIPE_CUDA_OP void tmem_fence_after(SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("tmem_fence_after (tcgen05.fence::after_thread_sync)");
    (void)loc;
    ::cuda::ptx::tcgen05_fence_after_thread_sync();
  }

  // ---- tensor core. Single-thread semantics: every executing thread issues
  // its own MMA or commit, so call these inside elect_one.

  // tcgen05.mma.cta_group::<CtaGroup>.kind::<Kind> [d_tmem], a_desc, b_desc,
  // idesc, accumulate (PTX 9.7.16.10.9.1): D = A*B (+ D when `accumulate`),
  // A and B from shared memory through 64-bit matrix descriptors.
  template <MmaKind Kind, int CtaGroup>
  WSPIPE_CUDA_OP void mma(std::uint32_t d_tmem, std::uint64_t a_desc, std::uint64_t b_desc, std::uint32_t idesc,
                          bool accumulate, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("mma (tcgen05.mma)");
    (void)loc;
    WSPIPE_CUDA_DELAY(mma);
    ::cuda::ptx::tcgen05_mma(detail::mma_kind<Kind>(), detail::cta_group<CtaGroup>(), d_tmem, a_desc, b_desc, idesc,
                             accumulate);
    WSPIPE_CUDA_LOG(mma, d_tmem, accumulate ? 1u : 0u, 0u);
  }
  // tcgen05.commit.cta_group::<CtaGroup>.mbarrier::arrive::one (PTX
  // 9.7.16.12.1): one arrive on `bar` once this thread's earlier MMAs of the
  // same CtaGroup have completed. It implies tcgen05.fence::before_thread_sync.
  template <int CtaGroup>
  WSPIPE_CUDA_OP void mma_commit(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("mma_commit (tcgen05.commit)");
    (void)loc;
    WSPIPE_CUDA_DELAY(mma_commit);
    ::cuda::ptx::tcgen05_commit(detail::cta_group<CtaGroup>(), &bar.raw);
    WSPIPE_CUDA_LOG(mma_commit, detail::smem_addr(&bar), 0u, 0u);
  }
  // ... .multicast::cluster: the arrive lands on the barrier at `bar`'s
  // offset in each CTA whose bit is set in the 16-bit `mask` (cluster ranks).
  template <int CtaGroup>
  WSPIPE_CUDA_OP void mma_commit_multicast(SharedMemBarrier& bar, std::uint16_t mask,
                                           SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_SM100_ONLY("mma_commit_multicast (tcgen05.commit.multicast::cluster)");
    (void)loc;
    WSPIPE_CUDA_DELAY(mma_commit);
    ::cuda::ptx::tcgen05_commit_multicast(detail::cta_group<CtaGroup>(), &bar.raw, mask);
    WSPIPE_CUDA_LOG(mma_commit, detail::smem_addr(&bar), mask, 0u);
  }

  // ---- TMA (PTX 9.7.9.25.5.2 cp.async.bulk.tensor, global -> shared):
  // single-thread issue, inside elect_one. The box at `coords` lands at
  // `smem_dst`, then complete_tx(box bytes) on the barrier.
  //
  // A CUtensorMap does not tell the device its rank, and the instruction
  // names it (.1d-.5d), so the kernel states it: Rank, 2 by default (GEMM
  // tiles). It must equal the map's rank. `map` must live in kernel
  // parameter (__grid_constant__), constant or global memory.
  using TmaMap = CUtensorMap;

  // With CtaGroup 2 the complete_tx goes to the barrier at `bar`'s offset in
  // the pair's even CTA (cluster ranks that differ in bit 0): both CTAs of a
  // pair load their halves of the operands, and the even one's MMA waits for
  // both. The peer's address comes from mapa, the documented mapping, rather
  // than from the window's address encoding.
  template <int CtaGroup = 1, std::uint32_t Rank = 2>
  WSPIPE_CUDA_OP void tma_load(const TmaMap& map, void* smem_dst, SharedMemBarrier& bar, TmaCoords coords,
                               SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || kTensorMemory,
                  "wspipe::cuda::HopperBackend (sm_90a) has no .cta_group::2 TMA loads: CTA pairs exist on sm_100a only");
    (void)loc;
    WSPIPE_CUDA_DELAY(tma_load);
    const auto c = detail::tma_coords<Rank>(coords);
    if constexpr (detail::cta_group<CtaGroup>() == ::cuda::ptx::cta_group_1) {
      ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, smem_dst, &map, c.c,
                                        &bar.raw);
    } else {
      detail::cp_async_bulk_tensor_cta_group_2<Rank>(detail::smem_addr(smem_dst), &map, c,
                                                     detail::pair_even_cta_addr(detail::smem_addr(&bar)));
    }
    WSPIPE_CUDA_LOG(tma_load, detail::smem_addr(&bar), 0u, 0u);
  }
  // .multicast::cluster: the box lands at `smem_dst`'s offset in each CTA of
  // the 16-bit `mask`, and each of them gets complete_tx on its barrier at
  // `bar`'s offset (CtaGroup 2: on its pair's even CTA's barrier).
  template <int CtaGroup = 1, std::uint32_t Rank = 2>
  WSPIPE_CUDA_OP void tma_load_multicast(const TmaMap& map, void* smem_dst, SharedMemBarrier& bar, TmaCoords coords,
                                         std::uint16_t mask, SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || kTensorMemory,
                  "wspipe::cuda::HopperBackend (sm_90a) has no .cta_group::2 TMA loads: CTA pairs exist on sm_100a only");
    (void)loc;
    WSPIPE_CUDA_DELAY(tma_load);
    const auto c = detail::tma_coords<Rank>(coords);
    if constexpr (detail::cta_group<CtaGroup>() == ::cuda::ptx::cta_group_1) {
      ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, smem_dst, &map, c.c,
                                        &bar.raw, mask);
    } else {
      detail::cp_async_bulk_tensor_multicast_cta_group_2<Rank>(
          detail::smem_addr(smem_dst), &map, c, detail::pair_even_cta_addr(detail::smem_addr(&bar)), mask);
    }
    WSPIPE_CUDA_LOG(tma_load, detail::smem_addr(&bar), mask, 0u);
  }

  // ---- TMA stores and bulk async-groups (PTX "cp.async.bulk.tensor",
  // shared::cta -> global; "cp.async.bulk.commit_group";
  // "cp.async.bulk.wait_group"). sm_90 and later: both backends. Single-
  // thread issue, inside elect_one; the groups are the issuing thread's, so
  // that thread commits and waits. The tile must be written by ordinary
  // stores, then fence_proxy_async, then a barrier among the writers,
  // before the store is issued. Elements outside the tensor are not written.
  template <std::uint32_t Rank = 2>
  WSPIPE_CUDA_OP void tma_store(const TmaMap& map, const void* smem_src, TmaCoords coords,
                                SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    WSPIPE_CUDA_DELAY(tma_store);
    const auto c = detail::tma_coords<Rank>(coords);
    ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, &map, c.c, smem_src);
    WSPIPE_CUDA_LOG(tma_store, detail::smem_addr(smem_src), 0u, 0u);
  }
  WSPIPE_CUDA_OP void bulk_commit_group(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    ::cuda::ptx::cp_async_bulk_commit_group();
    WSPIPE_CUDA_LOG(bulk_commit, 0u, 0u, 0u);
  }
  // Until at most the N most recent committed groups are pending: their
  // writes to global memory are done and visible to this thread.
  template <int N>
  WSPIPE_CUDA_OP void bulk_wait_group(SourceLoc loc = SourceLoc::current()) {
    static_assert(N >= 0, "bulk_wait_group<N>: N (groups left pending) must be >= 0");
    (void)loc;
    ::cuda::ptx::cp_async_bulk_wait_group(::cuda::ptx::n32_t<N>{});
    WSPIPE_CUDA_LOG(bulk_wait, 0u, static_cast<std::uint32_t>(N), 0u);
  }
  // .read: until those groups have finished reading their shared-memory
  // sources (the tiles may be reused; their global writes may still be in flight).
  template <int N>
  WSPIPE_CUDA_OP void bulk_wait_group_read(SourceLoc loc = SourceLoc::current()) {
    static_assert(N >= 0, "bulk_wait_group_read<N>: N (groups left pending) must be >= 0");
    (void)loc;
    ::cuda::ptx::cp_async_bulk_wait_group_read(::cuda::ptx::n32_t<N>{});
    WSPIPE_CUDA_LOG(bulk_wait, 0u, static_cast<std::uint32_t>(N), 0u);
  }

  // fence.proxy.async.shared::cta (PTX 9.7.13.4 "membar/fence"): this
  // thread's generic-proxy shared-memory writes become visible to later
  // async-proxy reads (tensor core, TMA store); needed before the barrier
  // that hands an ordinarily written tile to them.
  WSPIPE_CUDA_OP void fence_proxy_async(SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
  }

  // ---- shared-memory tiles. smem_addr: the 32-bit .shared::cta address
  // that matrix descriptors and the hardware use. The access hooks exist for
  // the emulator's race checker; here they are empty.
  WSPIPE_CUDA_OP std::uint32_t smem_addr(const void* p) { return detail::smem_addr(p); }
  WSPIPE_CUDA_OP void smem_read(const void* p, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    (void)p;
    (void)bytes;
    (void)loc;
  }
  WSPIPE_CUDA_OP void smem_write(const void* p, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    (void)p;
    (void)bytes;
    (void)loc;
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
    // 1024: swizzled TMA/MMA tiles repeat every 1024 bytes and must start
    // at a multiple of it (the emulator checks the same).
    static_assert(alignof(T) <= 1024, "shared_storage<T>: dynamic shared memory is aligned to 1024 bytes only");
    extern __shared__ __align__(1024) unsigned char wspipe_smem[];
    // The alignment is the toolchain's to keep: ptxas puts dynamic shared
    // memory at the end of the kernel's shared section (the 1 KiB the system
    // reserves, then static shared memory), aligned as declared, and
    // compiles its address as a constant (docs/sass-check.md). A misaligned
    // swizzled tile would be read in the wrong pattern, silently; so a
    // misaligned base traps (cudaErrorLaunchFailure at synchronisation).
    // The address goes through an opaque move: the front end would fold the
    // test from the declaration alone. Cost: a few uniform instructions.
    if (detail::opaque(detail::smem_addr(wspipe_smem)) % alignof(T) != 0) __trap();
    return *reinterpret_cast<T*>(wspipe_smem);
  }

  // A failed check with values: as check()'s failure, then the values, one a
  // line. Out of line: the printf calls stay out of the kernel's hot path.
  static __device__ __noinline__ void check_failed(const char* what, const CheckValues* values) {
    const std::uint32_t failing = __activemask();
    if (::cuda::ptx::get_sreg_laneid() == static_cast<std::uint32_t>(__ffs(static_cast<int>(failing)) - 1)) {
      printf("wspipe check failed: %s (block %u,%u,%u, cluster rank %u, warp %u)\n", what, blockIdx.x, blockIdx.y,
             blockIdx.z, cta_rank(), threadIdx.x / 32u);
      for (std::uint32_t k = 0; values != nullptr && k < values->count && k < CheckValues::kMax; ++k) {
        const CheckValue& v = values->at[k];
        switch (v.kind) {
          case CheckValue::Kind::signed_int: printf("  %s = %lld\n", v.name, static_cast<long long>(v.i)); break;
          case CheckValue::Kind::unsigned_int:
            printf("  %s = %llu\n", v.name, static_cast<unsigned long long>(v.u));
            break;
          case CheckValue::Kind::boolean: printf("  %s = %s\n", v.name, v.u ? "true" : "false"); break;
          case CheckValue::Kind::floating: printf("  %s = %.9g\n", v.name, v.f); break;
          case CheckValue::Kind::none: break;
        }
      }
    }
    __trap();
  }

  // A kernel's data check: the lowest failing lane of the warp prints, then
  // every failing thread traps (the launch fails with cudaErrorLaunchFailure).
  // `loc` is not printed: std::source_location's accessors are constexpr
  // __host__ functions, which device code may call only under
  // --expt-relaxed-constexpr, and its data lives in host memory.
  WSPIPE_CUDA_OP void check(bool cond, const char* what, SourceLoc loc = SourceLoc::current()) {
    (void)loc;
    if (!cond) {
#if WSPIPE_CUDA_EVENT_LOG > 0
      WSPIPE_CUDA_LOG(check_failed, 0u, 0u, 0u);
      detail::log_trap(TrapReason::check, 0u, 0u, 0u, loc);
#endif
      const std::uint32_t failing = __activemask();
      if (::cuda::ptx::get_sreg_laneid() == static_cast<std::uint32_t>(__ffs(static_cast<int>(failing)) - 1)) {
        printf("wspipe check failed: %s (block %u,%u,%u, cluster rank %u, warp %u)\n", what, blockIdx.x, blockIdx.y,
               blockIdx.z, cta_rank(), threadIdx.x / 32u);
      }
      __trap();
    }
  }
  // The same, printing the values compared (core/check.hpp), one a line.
  WSPIPE_CUDA_OP void check(bool cond, const char* what, const CheckValues& values,
                            SourceLoc loc = SourceLoc::current()) {
    (void)loc;
#if WSPIPE_CUDA_EVENT_LOG > 0
    if (!cond) {
      WSPIPE_CUDA_LOG(check_failed, 0u, 0u, 0u);
      detail::log_trap(TrapReason::check, 0u, 0u, 0u, loc);
    }
#endif
    if (!cond) check_failed(what, &values);
  }

  // ---- cluster launch control (PTX "clusterlaunchcontrol.try_cancel",
  // "clusterlaunchcontrol.query_cancel"; PTX ISA 8.6, sm_100, the multicast
  // form sm_100a). try_cancel is single-thread issue (inside elect_one): the
  // request is asynchronous, writes the 16-byte response to `resp` and
  // performs complete_tx(16) on `bar` (arm it with expect_tx(16) first);
  // both must be in this CTA's shared memory, `resp` 16-byte aligned (the
  // type guarantees it). The multicast form writes the response and signals
  // the barrier at the same offsets in every CTA of the cluster, none of
  // which may have exited. If the CTA has observed a failed response, a
  // further try_cancel is undefined. Read the response only after a wait on
  // `bar` observed the phase; get_first_ctaid of a failed one is undefined.
  static constexpr bool kClusterLaunchControl = Arch == CudaArch::sm_100a;
  WSPIPE_CUDA_OP void clc_try_cancel(ClcResponse& resp, SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_CLC_ONLY("clc_try_cancel (clusterlaunchcontrol.try_cancel)");
    (void)loc;
    WSPIPE_CUDA_DELAY(clc_try_cancel);
    ::cuda::ptx::clusterlaunchcontrol_try_cancel(&resp, &bar.raw);
    WSPIPE_CUDA_LOG(clc_try_cancel, detail::smem_addr(&bar), 0u, 0u);
  }
  WSPIPE_CUDA_OP void clc_try_cancel_multicast(ClcResponse& resp, SharedMemBarrier& bar,
                                               SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_CLC_ONLY("clc_try_cancel_multicast (clusterlaunchcontrol.try_cancel.multicast::cluster::all)");
    (void)loc;
    WSPIPE_CUDA_DELAY(clc_try_cancel);
    ::cuda::ptx::clusterlaunchcontrol_try_cancel_multicast(&resp, &bar.raw);
    WSPIPE_CUDA_LOG(clc_try_cancel, detail::smem_addr(&bar), 1u, 0u);
  }
  // query_cancel takes the response in registers: one 16-byte load from
  // shared memory (after the wait, whose asm clobbers memory), then decode.
  WSPIPE_CUDA_OP bool clc_is_canceled(const ClcResponse& resp, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_CLC_ONLY("clc_is_canceled (clusterlaunchcontrol.query_cancel.is_canceled)");
    (void)loc;
    const ClcResponse r = resp;
    return ::cuda::ptx::clusterlaunchcontrol_query_cancel_is_canceled(r);
  }
  WSPIPE_CUDA_OP ClcCtaId clc_first_ctaid(const ClcResponse& resp, SourceLoc loc = SourceLoc::current()) {
    WSPIPE_CUDA_CLC_ONLY("clc_first_ctaid (clusterlaunchcontrol.query_cancel.get_first_ctaid)");
    (void)loc;
    const ClcResponse r = resp;
    std::uint32_t v[4];
    ::cuda::ptx::clusterlaunchcontrol_query_cancel_get_first_ctaid(v, r);
    return ClcCtaId{v[0], v[1], v[2]};  // the fourth element is unspecified (PTX)
  }
};

using CudaBackend = CudaBackendFor<CudaArch::sm_100a>;
using HopperBackend = CudaBackendFor<CudaArch::sm_90a>;

}  // namespace wspipe::cuda

#undef WSPIPE_CUDA_OP
#undef WSPIPE_CUDA_LOG
#undef WSPIPE_CUDA_DELAY
#undef WSPIPE_CUDA_SM100_ONLY
#undef WSPIPE_CUDA_CLC_ONLY
#undef WSPIPE_CUDA_PASS_HAS_TCGEN05

// The concept's requires-expression names the operations only in unevaluated
// operands, which nvcc accepts for __device__ functions in the host pass too;
// so the concept is checked in both passes, without a __CUDA_ARCH__ guard.
static_assert(wspipe::Backend<wspipe::cuda::CudaBackend>, "CudaBackend must model wspipe::Backend");
static_assert(wspipe::Backend<wspipe::cuda::HopperBackend>, "HopperBackend must model wspipe::Backend");
static_assert(wspipe::cuda::CudaBackend::kTensorMemory && !wspipe::cuda::HopperBackend::kTensorMemory);
static_assert(wspipe::cuda::CudaBackend::kClusterLaunchControl && !wspipe::cuda::HopperBackend::kClusterLaunchControl);
