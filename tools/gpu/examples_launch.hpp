// Host side of examples_build.cu, the sm_100a builds of the examples'
// kernels: which instantiations it holds, and a launcher for each. Plain
// C++ for the host compiler: nothing here needs nvcc or a GPU to compile.
//
// A launcher takes the problem (examples/*_host.hpp: only its shape and
// element type are read) and the operands' device addresses; it encodes the
// tensor maps and launches the persistent kernel with one CTA per SM
// (ClusterLaunch::exclusive_sm: every CTA allocates all of Tensor Memory).
// Input that does not fit the instantiation is a std::invalid_argument
// naming the reason, a tensor map the driver refuses a std::runtime_error
// (tensor_map.hpp); the launch's own error is returned, and the kernel's
// faults surface at synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "core/numeric.hpp"
#include "examples/blockwise_fp8_host.hpp"
#include "examples/gemm_host.hpp"

namespace wspipe::cuda {

// Device addresses of a gemm's operands, laid out as GemmProblem's host
// copies: A (M x K), B (N x K), D (M x N, f32), all row-major.
struct GemmOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  float* d = nullptr;
};

struct GemmLaunch {
  // Output tiles go to the clusters round-robin, several to each when there
  // are fewer clusters than tiles.
  std::uint32_t clusters = 1;
  // A by ordinary stores and fence.proxy.async instead of TMA (cta_group 1,
  // clusters of 1 only).
  bool manual_a = false;
  cudaStream_t stream = nullptr;
};

// One instantiation examples::gemm_kernel<CudaBackend, GemmConfig<...>>:
// the extern "C" kernel `name` (the SASS check reads it by that name).
struct GemmKernel {
  const char* name;
  int cta_group;
  int cluster_size;
  int stages;
  int accum_stages;
  ElemType in;
  cudaError_t (*launch)(const examples::GemmProblem& problem, const GemmOperands& operands, const GemmLaunch& how);
};

// Every gemm instantiation of examples_build.cu.
std::span<const GemmKernel> gemm_kernels();

// Device addresses of a blockwise-fp8 problem's operands, laid out as
// BlockwiseFp8Problem's host copies.
struct BlockwiseFp8Operands {
  const void* a = nullptr;
  const void* b = nullptr;
  const float* a_scales = nullptr;
  const float* b_scales = nullptr;
  float* d = nullptr;
};

struct BlockwiseFp8Launch {
  std::uint32_t clusters = 1;  // as GemmLaunch::clusters
  cudaStream_t stream = nullptr;
};

// One instantiation examples::blockwise_fp8_kernel<CudaBackend,
// BlockwiseFp8Config<...>> (clusters of cta_group CTAs), named as above.
struct BlockwiseFp8Kernel {
  const char* name;
  int cta_group;
  int stages;
  int accum_stages;
  cudaError_t (*launch)(const examples::BlockwiseFp8Problem& problem, const BlockwiseFp8Operands& operands,
                        const BlockwiseFp8Launch& how);
};

// Every blockwise-fp8 instantiation of examples_build.cu.
std::span<const BlockwiseFp8Kernel> blockwise_fp8_kernels();

}  // namespace wspipe::cuda
