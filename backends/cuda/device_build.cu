// A build of the CUDA backend, core/ and the examples as sm_100a device code,
// so that none of them stops compiling for the GPU unnoticed. It is part of
// the default build when CUDA is enabled, and sass_check.sh reads its SASS.
//
// One extern "C" kernel per backend operation (unmangled names, so that the
// SASS check can find each operation's instructions in its own function),
// then the ring example for every stage count. The op kernels are not
// meaningful programs; their operands are kernel arguments so that nothing
// folds away.
#include <cstdint>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/launch.hpp"
#include "examples/ring.hpp"

namespace {

using B = wspipe::cuda::CudaBackend;
using wspipe::SharedMemBarrier;

struct OpsStorage {
  SharedMemBarrier bar[2];
  std::uint32_t word;
};

__device__ __forceinline__ SharedMemBarrier& ops_bar() { return B::shared_storage<OpsStorage>().bar[0]; }

}  // namespace

// ---- identity
extern "C" __global__ void wspipe_op_warp_idx(std::uint32_t* out) { out[threadIdx.x] = B::warp_idx(); }
extern "C" __global__ void wspipe_op_lane_idx(std::uint32_t* out) { out[threadIdx.x] = B::lane_idx(); }
extern "C" __global__ void wspipe_op_cta_rank(std::uint32_t* out) { out[threadIdx.x] = B::cta_rank(); }
extern "C" __global__ void wspipe_op_cluster_size(std::uint32_t* out) { out[threadIdx.x] = B::cluster_size(); }
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
extern "C" __global__ void wspipe_op_expect_tx(std::uint32_t bytes) { B::expect_tx(ops_bar(), bytes); }
extern "C" __global__ void wspipe_op_complete_tx(std::uint32_t bytes) { B::complete_tx(ops_bar(), bytes); }
extern "C" __global__ void wspipe_op_try_wait(std::uint32_t* out, std::uint32_t parity) {
  out[threadIdx.x] = B::try_wait(ops_bar(), parity) ? 1u : 0u;
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

// ---- host side: launch.hpp instantiated against the real kernels, so that
// it keeps compiling too. A ring is one CTA of kRingWarps warps; `cluster`
// CTAs run independent rings side by side.

namespace wspipe::cuda {

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

}  // namespace wspipe::cuda
