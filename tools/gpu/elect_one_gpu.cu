// wspipe_elect_one_gpu: CudaBackendFor::elect_one runs its body once per
// call per warp on a Hopper (sm_90a) or later GPU, also when the body is
// long. Each warp of a full grid calls elect_one kIterations times in a
// loop; the body chases a chain of global loads (a few microseconds, as the
// seeded delays' bookkeeping does, docs/delays.md) and counts itself. With
// independent thread scheduling the other lanes need not wait for the
// elected one: an elect_one that did not make them leave together let them
// run into the next call and elect a second lane there, and the body ran
// twice per call (the correct tile-reduce under the delays on an H200).
//
//   wspipe_elect_one_gpu
//
// Exit: 0 every warp counted kIterations; 1 not; 77 no sm_90+ GPU (CTest skips).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"

namespace {

using B = wspipe::cuda::HopperBackend;

constexpr std::uint32_t kIterations = 64;
constexpr std::uint32_t kChain = 16;     // dependent loads per body
constexpr std::uint32_t kWarpsPerCta = 4;

__global__ void elect_loop(const std::uint32_t* chain, std::uint32_t* counts) {
  const std::uint32_t warp = blockIdx.x * kWarpsPerCta + threadIdx.x / 32;
  for (std::uint32_t i = 0; i < kIterations; ++i) {
    B::elect_one([&] {
      std::uint32_t at = (warp + i) % 1024;
      for (std::uint32_t k = 0; k < kChain; ++k) at = __ldcg(chain + at);
      atomicAdd(&counts[warp], 1u + (at >> 31));  // at < 1024: adds 1
    });
  }
}

int check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 0;
  std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  if (check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties") != 0) return 1;
  if (prop.major < 9) {
    std::printf("SKIP: %s is sm_%d%d; elect.sync needs sm_90 or later\n", prop.name, prop.major, prop.minor);
    return 77;
  }
  const std::uint32_t ctas = 2 * static_cast<std::uint32_t>(prop.multiProcessorCount);
  const std::uint32_t warps = ctas * kWarpsPerCta;
  std::vector<std::uint32_t> chain(1024);
  for (std::uint32_t i = 0; i < chain.size(); ++i) chain[i] = (i * 389u + 7u) % 1024u;
  std::uint32_t* d_chain = nullptr;
  std::uint32_t* d_counts = nullptr;
  if (check(cudaMalloc(&d_chain, chain.size() * 4), "cudaMalloc") + check(cudaMalloc(&d_counts, warps * 4), "cudaMalloc"))
    return 1;
  if (check(cudaMemcpy(d_chain, chain.data(), chain.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy")) return 1;
  int failures = 0;
  for (int launch = 0; launch < 10; ++launch) {
    if (check(cudaMemset(d_counts, 0, warps * 4), "cudaMemset")) return 1;
    elect_loop<<<ctas, 32 * kWarpsPerCta>>>(d_chain, d_counts);
    if (check(cudaDeviceSynchronize(), "elect_loop")) return 1;
    std::vector<std::uint32_t> counts(warps);
    if (check(cudaMemcpy(counts.data(), d_counts, warps * 4, cudaMemcpyDeviceToHost), "cudaMemcpy")) return 1;
    std::uint32_t wrong = 0, first = 0;
    for (std::uint32_t w = 0; w < warps; ++w) {
      if (counts[w] != kIterations && wrong++ == 0) first = w;
    }
    if (wrong != 0) {
      std::printf("launch %d: %u of %u warps ran the body other than %u times (warp %u: %u)\n", launch, wrong, warps,
                  kIterations, first, counts[first]);
      ++failures;
    }
  }
  cudaFree(d_chain);
  cudaFree(d_counts);
  std::printf("%s: elect_one's body once per call in every warp, 10 launches of %u warps x %u calls\n",
              failures == 0 ? "ok" : "FAIL", warps, kIterations);
  return failures == 0 ? 0 : 1;
}
