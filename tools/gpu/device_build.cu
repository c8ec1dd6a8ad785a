// A build of the CUDA backend, core/ and the examples as sm_100a device code,
// so that none of them stops compiling for the GPU unnoticed. It is part of
// the default build when CUDA is enabled, and sass_check.sh reads its SASS.
// Built a second time for sm_90a with WSPIPE_DEVICE_BUILD_HOPPER defined:
// HopperBackend, the arch-neutral operations and the ring only (Tensor
// Memory, tcgen05 and .cta_group::2 do not exist there).
//
// One extern "C" kernel per backend operation (unmangled names, so that the
// SASS check can find each operation's instructions in its own function),
// then the ring example for every stage count. The op kernels are not
// meaningful programs; their operands are kernel arguments so that nothing
// folds away. Suffixes: _cgN for CtaGroup N (ptxas allows one .cta_group
// per kernel), _<shape>_x<num> for tcgen05.ld/st, _rankN for TMA.
#include <cstdint>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/tensor_map.hpp"
#include "core/tile_scheduler.hpp"
#include "examples/ring.hpp"

namespace {

#ifdef WSPIPE_DEVICE_BUILD_HOPPER
using B = wspipe::cuda::HopperBackend;
#else
using B = wspipe::cuda::CudaBackend;
#endif
using wspipe::MmaKind;
using wspipe::SharedMemBarrier;
using wspipe::TmaCoords;
using wspipe::TmemShape;

struct OpsStorage {
  SharedMemBarrier bar[2];
  std::uint32_t word;
  alignas(128) std::uint8_t tile[1024];
};

__device__ __forceinline__ OpsStorage& ops() { return B::shared_storage<OpsStorage>(); }
__device__ __forceinline__ SharedMemBarrier& ops_bar() { return ops().bar[0]; }

#ifndef WSPIPE_DEVICE_BUILD_HOPPER
// tcgen05.ld then wait::ld, every register to global memory so that the
// load is live; tcgen05.st of registers read from global memory, then
// wait::st. .16x32bx2 puts its second half right after the first.
template <TmemShape S, std::uint32_t Num>
__device__ __forceinline__ void tmem_load_op(std::uint32_t taddr, std::uint32_t* out) {
  constexpr std::uint32_t kSplit = S == TmemShape::s16x32bx2 ? Num : 0;
  const auto frag = B::tmem_load<S, Num, kSplit>(taddr);
  B::tmem_wait_load();
#pragma unroll
  for (std::uint32_t i = 0; i < wspipe::tmem_regs(S, Num); ++i) out[i * 32 + threadIdx.x % 32] = frag.reg(i);
}
template <TmemShape S, std::uint32_t Num>
__device__ __forceinline__ void tmem_store_op(std::uint32_t taddr, const std::uint32_t* in) {
  constexpr std::uint32_t kSplit = S == TmemShape::s16x32bx2 ? Num : 0;
  B::Frag<wspipe::tmem_regs(S, Num)> frag;
#pragma unroll
  for (std::uint32_t i = 0; i < wspipe::tmem_regs(S, Num); ++i) frag.set(i, in[i * 32 + threadIdx.x % 32]);
  B::tmem_store<S, Num, kSplit>(taddr, frag);
  B::tmem_wait_store();
}

#endif  // WSPIPE_DEVICE_BUILD_HOPPER

}  // namespace

// ---- identity
extern "C" __global__ void wspipe_op_warp_idx(std::uint32_t* out) { out[threadIdx.x] = B::warp_idx(); }
extern "C" __global__ void wspipe_op_lane_idx(std::uint32_t* out) { out[threadIdx.x] = B::lane_idx(); }
extern "C" __global__ void wspipe_op_cta_rank(std::uint32_t* out) { out[threadIdx.x] = B::cta_rank(); }
extern "C" __global__ void wspipe_op_cluster_size(std::uint32_t* out) { out[threadIdx.x] = B::cluster_size(); }
extern "C" __global__ void wspipe_op_cluster_shape(std::uint32_t* out) {
  const wspipe::ClusterShape shape = B::cluster_shape();
  out[3 * threadIdx.x] = shape.x;
  out[3 * threadIdx.x + 1] = shape.y;
  out[3 * threadIdx.x + 2] = shape.z;
}
extern "C" __global__ void wspipe_op_elect_one(std::uint32_t* out) {
  B::elect_one([&] { out[threadIdx.x] = 1; });
}
extern "C" __global__ void wspipe_op_for_each_lane(std::uint32_t* out) {
  B::for_each_lane([&](std::uint32_t lane) { out[threadIdx.x] = lane; });
}
extern "C" __global__ void wspipe_op_syncwarp(std::uint32_t* out) {
  out[threadIdx.x] = 1;
  B::syncwarp();
  out[threadIdx.x ^ 1u] += 1;
}

// ---- mbarrier
extern "C" __global__ void wspipe_op_init(std::uint32_t count) { B::init(ops_bar(), count, {"op", 0}); }
extern "C" __global__ void wspipe_op_inval() { B::inval(ops_bar()); }
extern "C" __global__ void wspipe_op_fence_init() { B::fence_init(); }
extern "C" __global__ void wspipe_op_arrive() { B::arrive(ops_bar()); }
extern "C" __global__ void wspipe_op_arrive_remote(std::uint32_t cta) { B::arrive_remote(ops_bar(), cta); }
extern "C" __global__ void wspipe_op_arrive_expect_tx(std::uint32_t bytes) { B::arrive_expect_tx(ops_bar(), bytes); }
extern "C" __global__ void wspipe_op_arrive_expect_tx_remote(std::uint32_t bytes, std::uint32_t cta) {
  B::arrive_expect_tx_remote(ops_bar(), bytes, cta);
}
extern "C" __global__ void wspipe_op_expect_tx(std::uint32_t bytes) { B::expect_tx(ops_bar(), bytes); }
extern "C" __global__ void wspipe_op_complete_tx(std::uint32_t bytes) { B::complete_tx(ops_bar(), bytes); }
extern "C" __global__ void wspipe_op_try_wait(std::uint32_t* out, std::uint32_t parity) {
  out[threadIdx.x] = B::try_wait(ops_bar(), parity) ? 1u : 0u;
}
extern "C" __global__ void wspipe_op_test_wait(std::uint32_t* out, std::uint32_t parity) {
  out[threadIdx.x] = B::test_wait(ops_bar(), parity);
}
extern "C" __global__ void wspipe_op_wait(std::uint32_t* out, std::uint32_t parity) {
  B::wait(ops_bar(), parity);
  out[threadIdx.x] = B::shared_storage<OpsStorage>().word;
}

// ---- named and cluster barriers: a compile-time id (the usual case, MAX's
// id 1 over MMA + epilogue threads) and a run-time one.
extern "C" __global__ void wspipe_op_named_sync() { B::named_sync(1, 160); }
extern "C" __global__ void wspipe_op_named_arrive() { B::named_arrive(1, 160); }
extern "C" __global__ void wspipe_op_named_sync_runtime(std::uint32_t id, std::uint32_t threads) {
  B::named_sync(id, threads);
}
extern "C" __global__ void wspipe_op_named_arrive_runtime(std::uint32_t id, std::uint32_t threads) {
  B::named_arrive(id, threads);
}
extern "C" __global__ void wspipe_op_cluster_sync() { B::cluster_sync(); }

#ifndef WSPIPE_DEVICE_BUILD_HOPPER
// ---- Tensor Memory: allocation, both CtaGroups
extern "C" __global__ void wspipe_op_tmem_alloc_cg1(std::uint32_t cols) { B::tmem_alloc<1>(&ops().word, cols); }
extern "C" __global__ void wspipe_op_tmem_alloc_cg2(std::uint32_t cols) { B::tmem_alloc<2>(&ops().word, cols); }
extern "C" __global__ void wspipe_op_tmem_relinquish_cg1() { B::tmem_relinquish<1>(); }
extern "C" __global__ void wspipe_op_tmem_relinquish_cg2() { B::tmem_relinquish<2>(); }
extern "C" __global__ void wspipe_op_tmem_dealloc_cg1(std::uint32_t taddr, std::uint32_t cols) {
  B::tmem_dealloc<1>(taddr, cols);
}
extern "C" __global__ void wspipe_op_tmem_dealloc_cg2(std::uint32_t taddr, std::uint32_t cols) {
  B::tmem_dealloc<2>(taddr, cols);
}

// ---- tcgen05.ld/st: every shape, .x1, .x8 and its largest .num
#define WSPIPE_TMEM_LD_ST_KERNELS(SHAPE, NUM)                                                                    \
  extern "C" __global__ void wspipe_op_tmem_load_##SHAPE##_x##NUM(std::uint32_t taddr, std::uint32_t* out) {    \
    tmem_load_op<TmemShape::s##SHAPE, NUM>(taddr, out);                                                          \
  }                                                                                                              \
  extern "C" __global__ void wspipe_op_tmem_store_##SHAPE##_x##NUM(std::uint32_t taddr, const std::uint32_t* in) { \
    tmem_store_op<TmemShape::s##SHAPE, NUM>(taddr, in);                                                          \
  }
WSPIPE_TMEM_LD_ST_KERNELS(32x32b, 1)
WSPIPE_TMEM_LD_ST_KERNELS(32x32b, 8)
WSPIPE_TMEM_LD_ST_KERNELS(32x32b, 128)
WSPIPE_TMEM_LD_ST_KERNELS(16x64b, 1)
WSPIPE_TMEM_LD_ST_KERNELS(16x64b, 8)
WSPIPE_TMEM_LD_ST_KERNELS(16x64b, 128)
WSPIPE_TMEM_LD_ST_KERNELS(16x128b, 1)
WSPIPE_TMEM_LD_ST_KERNELS(16x128b, 8)
WSPIPE_TMEM_LD_ST_KERNELS(16x128b, 64)
WSPIPE_TMEM_LD_ST_KERNELS(16x256b, 1)
WSPIPE_TMEM_LD_ST_KERNELS(16x256b, 8)
WSPIPE_TMEM_LD_ST_KERNELS(16x256b, 32)
WSPIPE_TMEM_LD_ST_KERNELS(16x32bx2, 1)
WSPIPE_TMEM_LD_ST_KERNELS(16x32bx2, 8)
WSPIPE_TMEM_LD_ST_KERNELS(16x32bx2, 128)
#undef WSPIPE_TMEM_LD_ST_KERNELS

// ---- tcgen05 waits and fences, alone
extern "C" __global__ void wspipe_op_tmem_wait_load() { B::tmem_wait_load(); }
extern "C" __global__ void wspipe_op_tmem_wait_store() { B::tmem_wait_store(); }
extern "C" __global__ void wspipe_op_tmem_fence_before() { B::tmem_fence_before(); }
extern "C" __global__ void wspipe_op_tmem_fence_after() { B::tmem_fence_after(); }

// ---- tensor core: both kinds, both CtaGroups; commit and multicast commit
#define WSPIPE_MMA_KERNEL(KIND, G)                                                                              \
  extern "C" __global__ void wspipe_op_mma_##KIND##_cg##G(std::uint32_t d_tmem, std::uint64_t a_desc,           \
                                                          std::uint64_t b_desc, std::uint32_t idesc, bool acc) { \
    B::mma<MmaKind::KIND, G>(d_tmem, a_desc, b_desc, idesc, acc);                                               \
  }
WSPIPE_MMA_KERNEL(f16, 1)
WSPIPE_MMA_KERNEL(f16, 2)
WSPIPE_MMA_KERNEL(f8f6f4, 1)
WSPIPE_MMA_KERNEL(f8f6f4, 2)
#undef WSPIPE_MMA_KERNEL
extern "C" __global__ void wspipe_op_mma_commit_cg1() { B::mma_commit<1>(ops_bar()); }
extern "C" __global__ void wspipe_op_mma_commit_cg2() { B::mma_commit<2>(ops_bar()); }
extern "C" __global__ void wspipe_op_mma_commit_multicast_cg1(std::uint16_t mask) {
  B::mma_commit_multicast<1>(ops_bar(), mask);
}
extern "C" __global__ void wspipe_op_mma_commit_multicast_cg2(std::uint16_t mask) {
  B::mma_commit_multicast<2>(ops_bar(), mask);
}
// cluster launch control (sm_100 only)
__device__ __forceinline__ wspipe::ClcResponse& ops_clc() {
  return *reinterpret_cast<wspipe::ClcResponse*>(ops().tile);
}
extern "C" __global__ void wspipe_op_clc_try_cancel() { B::clc_try_cancel(ops_clc(), ops_bar()); }
extern "C" __global__ void wspipe_op_clc_try_cancel_multicast() { B::clc_try_cancel_multicast(ops_clc(), ops_bar()); }
extern "C" __global__ void wspipe_op_clc_query_cancel(std::uint32_t* out) {
  const bool canceled = B::clc_is_canceled(ops_clc());
  const wspipe::ClcCtaId id = canceled ? B::clc_first_ctaid(ops_clc()) : wspipe::ClcCtaId{};
  out[threadIdx.x] = canceled ? id.x + id.y + id.z : ~0u;
}
#endif  // WSPIPE_DEVICE_BUILD_HOPPER

// ---- TMA: every rank, both CtaGroups (cta_group 1 only on sm_90a), unicast
// and multicast; the map is a
// __grid_constant__ parameter, as in a real kernel
#define WSPIPE_TMA_KERNELS(G, R)                                                                              \
  extern "C" __global__ void wspipe_op_tma_load_cg##G##_rank##R(const __grid_constant__ CUtensorMap map,      \
                                                                TmaCoords coords) {                           \
    B::tma_load<G, R>(map, ops().tile, ops_bar(), coords);                                                    \
  }                                                                                                           \
  extern "C" __global__ void wspipe_op_tma_load_multicast_cg##G##_rank##R(                                    \
      const __grid_constant__ CUtensorMap map, TmaCoords coords, std::uint16_t mask) {                        \
    B::tma_load_multicast<G, R>(map, ops().tile, ops_bar(), coords, mask);                                    \
  }
WSPIPE_TMA_KERNELS(1, 1)
WSPIPE_TMA_KERNELS(1, 2)
WSPIPE_TMA_KERNELS(1, 3)
WSPIPE_TMA_KERNELS(1, 4)
WSPIPE_TMA_KERNELS(1, 5)
#ifndef WSPIPE_DEVICE_BUILD_HOPPER
WSPIPE_TMA_KERNELS(2, 1)
WSPIPE_TMA_KERNELS(2, 2)
WSPIPE_TMA_KERNELS(2, 3)
WSPIPE_TMA_KERNELS(2, 4)
WSPIPE_TMA_KERNELS(2, 5)
#endif
#undef WSPIPE_TMA_KERNELS

// ---- TMA stores (every rank; sm_90a and sm_100a) and bulk async-groups
#define WSPIPE_TMA_STORE_KERNEL(R)                                                                              \
  extern "C" __global__ void wspipe_op_tma_store_rank##R(const __grid_constant__ CUtensorMap map,               \
                                                         TmaCoords coords) {                                    \
    B::tma_store<R>(map, ops().tile, coords);                                                                   \
  }
WSPIPE_TMA_STORE_KERNEL(1)
WSPIPE_TMA_STORE_KERNEL(2)
WSPIPE_TMA_STORE_KERNEL(3)
WSPIPE_TMA_STORE_KERNEL(4)
WSPIPE_TMA_STORE_KERNEL(5)
#undef WSPIPE_TMA_STORE_KERNEL
extern "C" __global__ void wspipe_op_bulk_commit_group() { B::bulk_commit_group(); }
extern "C" __global__ void wspipe_op_bulk_wait_group_0() { B::bulk_wait_group<0>(); }
extern "C" __global__ void wspipe_op_bulk_wait_group_3() { B::bulk_wait_group<3>(); }
extern "C" __global__ void wspipe_op_bulk_wait_group_read_0() { B::bulk_wait_group_read<0>(); }
extern "C" __global__ void wspipe_op_bulk_wait_group_read_3() { B::bulk_wait_group_read<3>(); }

// ---- proxy fence and shared-memory tiles
extern "C" __global__ void wspipe_op_fence_proxy_async() { B::fence_proxy_async(); }
extern "C" __global__ void wspipe_op_smem_addr(std::uint32_t* out) { out[threadIdx.x] = B::smem_addr(ops().tile); }
// The access hooks around ordinary shared-memory accesses: they add nothing.
extern "C" __global__ void wspipe_op_smem_access(std::uint32_t* out) {
  std::uint8_t* p = ops().tile + threadIdx.x;
  B::smem_write(p, 1);
  *p = static_cast<std::uint8_t>(threadIdx.x);
  B::smem_read(p, 1);
  out[threadIdx.x] = *p;
}

// ---- storage and checks
extern "C" __global__ void wspipe_op_shared_storage(std::uint32_t* out) {
  auto& s = B::shared_storage<OpsStorage>();
  s.word = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s.word;
}
extern "C" __global__ void wspipe_op_check(const std::uint32_t* in) { B::check(in[threadIdx.x] == 0, "op_check"); }

// ---- the ring example, every stage count; the broken variants are chosen by
// the run-time `bug` argument.
#define WSPIPE_RING_KERNEL(S)                                                                          \
  extern "C" __global__ void __launch_bounds__(32 * wspipe::examples::kRingWarps)                     \
      wspipe_ring_##S(std::uint32_t items, wspipe::examples::RingBug bug) {                            \
    wspipe::examples::ring_kernel<B, S>(items, bug);                                                   \
  }
WSPIPE_RING_KERNEL(1)
WSPIPE_RING_KERNEL(2)
WSPIPE_RING_KERNEL(4)
WSPIPE_RING_KERNEL(8)
#undef WSPIPE_RING_KERNEL

// ---- core/tile_scheduler.hpp: warp 0 the scheduler, warps 1 (the throttle's
// signaller) and 2 walk the tiles and write them out. Two CLC stages: on
// sm_100a the CLC protocol, on sm_90a (no CLC) the same source compiles to
// the static grid stride.
extern "C" __global__ void __launch_bounds__(96) wspipe_tile_scheduler_walk(std::uint32_t num_tiles,
                                                                             std::uint32_t* out) {
  using Sched = wspipe::TileScheduler<B, 2>;
  auto& s = B::shared_storage<Sched::Storage>();
  Sched sched(s, num_tiles);
  const std::uint32_t warp = B::warp_idx();
  if (warp == 0) {
    Sched::init_barriers(s, 2);
    B::fence_init();
  }
  B::cluster_sync();
  if (warp == 0) {
    sched.run_scheduler();
    return;
  }
  for (wspipe::TileWork w = sched.initial(); w.valid; w = sched.next(w)) {
    if (warp == 1) sched.throttle_signal();
    B::elect_one([&] { out[w.tile * 2 + warp - 1] = B::cluster_idx(); });
  }
}

// ---- host side: launch.hpp and tensor_map.hpp instantiated against the
// real kernels, so that they keep compiling too. A ring is one CTA of
// kRingWarps warps; `cluster` CTAs run independent rings side by side.

namespace wspipe::cuda {

#ifndef WSPIPE_DEVICE_BUILD_HOPPER
cudaError_t launch_ring(int stages, std::uint32_t items, examples::RingBug bug, unsigned cluster,
                        cudaStream_t stream) {
  const ClusterLaunch cfg{dim3(cluster), dim3(32 * examples::kRingWarps), dim3(cluster), stream};
  switch (stages) {
    case 1: return launch_cluster<examples::RingStorage<1>>(wspipe_ring_1, cfg, items, bug);
    case 2: return launch_cluster<examples::RingStorage<2>>(wspipe_ring_2, cfg, items, bug);
    case 4: return launch_cluster<examples::RingStorage<4>>(wspipe_ring_4, cfg, items, bug);
    case 8: return launch_cluster<examples::RingStorage<8>>(wspipe_ring_8, cfg, items, bug);
    default: return cudaErrorInvalidValue;
  }
}

// A rank-2 TMA load of `m`'s box at `coords`: the CUtensorMap from
// make_tma_map travels by value into the kernel's __grid_constant__
// parameter.
cudaError_t launch_tma_load(const TensorMap& m, TmaCoords coords, cudaStream_t stream) {
  const CUtensorMap map = make_tma_map(m);
  const ClusterLaunch cfg{dim3(1), dim3(32), dim3(1), stream};
  return launch_cluster<OpsStorage>(wspipe_op_tma_load_cg1_rank2, cfg, map, coords);
}
#endif  // WSPIPE_DEVICE_BUILD_HOPPER (the silicon program, silicon.cu, launches these on sm_90a)

}  // namespace wspipe::cuda
