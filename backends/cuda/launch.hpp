// Host side: launch a kernel written against CudaBackend as a grid of
// thread-block clusters, with sizeof(Storage) bytes of dynamic shared memory
// (what CudaBackend::shared_storage<Storage>() hands out), or more for
// ClusterLaunch::exclusive_sm.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <utility>

namespace wspipe::cuda {

struct ClusterLaunch {
  dim3 grid;                  // in thread blocks; each extent a multiple of `cluster`'s
  dim3 block;                 // 1-D blocks: CudaBackend::warp_idx() is threadIdx.x / 32
  dim3 cluster{1, 1, 1};      // CTAs per cluster
  cudaStream_t stream = nullptr;
  // At most one CTA per SM, by asking for more than half of an SM's shared
  // memory when sizeof(Storage) is less. Kernels whose CTAs allocate all of
  // Tensor Memory (512 columns) need it once a cluster has several CTAs:
  // tcgen05.alloc waits until the columns are free, so two clusters sharing
  // two SMs crosswise could each hold one SM's TMEM and wait for the other's.
  bool exclusive_sm = false;
};

// Launches `kernel(args...)` with cudaLaunchKernelEx and the cluster
// dimension attribute. Returns the first error: an invalid configuration
// (grid not divisible by the cluster, block not whole warps) comes back as
// cudaErrorInvalidValue before anything is launched; the kernel's own faults
// (a CudaBackend::check trap) surface later, at synchronisation.
template <class Storage, class... Params, class... Args>
cudaError_t launch_cluster(void (*kernel)(Params...), const ClusterLaunch& cfg, Args&&... args) {
  const dim3& g = cfg.grid;
  const dim3& c = cfg.cluster;
  if (c.x == 0 || c.y == 0 || c.z == 0 || g.x % c.x != 0 || g.y % c.y != 0 || g.z % c.z != 0) {
    return cudaErrorInvalidValue;
  }
  if (cfg.block.y != 1 || cfg.block.z != 1 || cfg.block.x == 0 || cfg.block.x % 32 != 0) {
    return cudaErrorInvalidValue;
  }

  std::size_t smem = sizeof(Storage);
  if (cfg.exclusive_sm) {
    int device = 0, per_sm = 0;
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
        e != cudaSuccess) {
      return e;
    }
    smem = std::max(smem, static_cast<std::size_t>(per_sm) / 2 + 1);
  }
  // Dynamic shared memory above 48 KiB must be opted into per kernel; setting
  // it always keeps one code path.
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
      e != cudaSuccess) {
    return e;
  }
  // Clusters of more than 8 CTAs are "non-portable" and must be allowed.
  if (c.x * c.y * c.z > 8) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        e != cudaSuccess) {
      return e;
    }
  }

  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = c.x;
  attr[0].val.clusterDim.y = c.y;
  attr[0].val.clusterDim.z = c.z;

  cudaLaunchConfig_t config{};
  config.gridDim = g;
  config.blockDim = cfg.block;
  config.dynamicSmemBytes = smem;
  config.stream = cfg.stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace wspipe::cuda
