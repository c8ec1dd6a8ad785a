// The cost of the abstraction: the same ring written
// twice in one file, once with core/ (ProducerConsumerPipeline over
// HopperBackend) and once by hand with raw PTX mbarrier instructions
// (tools/gpu/raw_ptx.hpp, shared with tma_bandwidth.cu), then
// measured against each other:
//  - on the GPU, items per second for several stage counts and payload
//    sizes (`wspipe_ring_cost`, this file's main; docs/performance.md);
//  - in the SASS, instructions per kernel for sm_90a and sm_100a
//    (ring_cost_check.sh, in CI: cuobjdump needs no GPU).
//
// Both rings are the same protocol as examples/ring.hpp's correct path: a
// producer warp fills `Words` words of a slot and one elected lane arrives
// on full (count 1); the consumer warp waits on full, checks every word, and
// all 32 lanes arrive on empty (count 32). Both report a torn or out of
// sequence item the same way, with __trap(), so that only the
// synchronisation differs. HopperBackend's operations are the arch-neutral
// ones, so the core ring compiles unchanged for sm_100a.
//
// Kernel names (extern "C", for the SASS check): wspipe_cost_{core,raw}_s<Stages>_w<Words>.
//
// Built with WSPIPE_CUDA_EVENT_LOG=<events per warp> (wspipe_ring_cost_event_log),
// the core ring logs every operation into an EventLog (docs/event-log.md)
// and the hand-written one does not: the ratio is then the log's cost, and
// the 0.98 target does not apply. WSPIPE_CUDA_EVENT_LOG_COST_PARTS=1 or 2
// (event_log_device.hpp) keeps only part of each record's work, to see
// which part costs what (docs/silicon.md, "The event log").
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/event_log_device.hpp"
#include "core/pipeline.hpp"
#include "tools/gpu/device_buffer.hpp"
#include "tools/gpu/raw_ptx.hpp"

namespace {

using B = wspipe::cuda::HopperBackend;
using wspipe::SharedMemBarrier;
namespace raw = wspipe::gpu::raw;

template <int Stages, int Words>
struct CostStorage {
  SharedMemBarrier barriers[2 * Stages];  // full[Stages] then empty[Stages]
  std::uint32_t slot[Stages][Words];
};

__device__ __forceinline__ std::uint32_t word(std::uint32_t item, std::uint32_t k) {
  return item * 2654435761u + k * 40503u;
}

// ------------------------------------------------------------ with core/

template <int Stages, int Words>
__device__ __forceinline__ void core_ring(std::uint32_t items) {
  using Pipe = wspipe::ProducerConsumerPipeline<B, Stages>;
  auto& s = B::shared_storage<CostStorage<Stages, Words>>();
  const std::uint32_t warp = B::warp_idx();
  if (warp == 0) {
    Pipe(s.barriers).init_mbars(1, 32);
    B::fence_init();
  }
  B::cluster_sync();
  if (warp == 0) {
    Pipe pipe(s.barriers);
    for (std::uint32_t i = 0; i < items; ++i) {
      auto slot = pipe.produce();
#pragma unroll
      for (std::uint32_t k = 0; k < Words; ++k) s.slot[slot.index()][k] = word(i, k);
      slot.arrive_elected();
    }
  } else if (warp == 1) {
    Pipe pipe(s.barriers);
    for (std::uint32_t i = 0; i < items; ++i) {
      auto slot = pipe.consume();
      bool intact = true;
#pragma unroll
      for (std::uint32_t k = 0; k < Words; ++k) intact &= s.slot[slot.index()][k] == word(i, k);
      if (!intact) __trap();
    }
  }
}

// ------------------------------------------------------------- by hand

template <int Stages, int Words>
__device__ __forceinline__ void raw_ring(std::uint32_t items) {
  extern __shared__ __align__(16) unsigned char raw_smem[];
  auto& s = *reinterpret_cast<CostStorage<Stages, Words>*>(raw_smem);
  const std::uint32_t warp = __shfl_sync(0xffffffffu, threadIdx.x / 32u, 0);
  const std::uint32_t full = raw::addr(&s.barriers[0]);
  const std::uint32_t empty = raw::addr(&s.barriers[Stages]);
  if (warp == 0) {
    if (raw::elect()) {
      for (int i = 0; i < Stages; ++i) {
        raw::init(full + 8 * i, 1);
        raw::init(empty + 8 * i, 32);
      }
    }
    raw::fence_init();
  }
  raw::cluster_sync();
  std::uint32_t stage = 0;
  if (warp == 0) {
    std::uint32_t phase = 1;
    for (std::uint32_t i = 0; i < items; ++i) {
      raw::wait(empty + 8 * stage, phase);
#pragma unroll
      for (std::uint32_t k = 0; k < Words; ++k) s.slot[stage][k] = word(i, k);
      if (raw::elect()) raw::arrive(full + 8 * stage);
      if (++stage == Stages) {
        stage = 0;
        phase ^= 1;
      }
    }
  } else if (warp == 1) {
    std::uint32_t phase = 0;
    for (std::uint32_t i = 0; i < items; ++i) {
      raw::wait(full + 8 * stage, phase);
      bool intact = true;
#pragma unroll
      for (std::uint32_t k = 0; k < Words; ++k) intact &= s.slot[stage][k] == word(i, k);
      if (!intact) __trap();
      raw::arrive(empty + 8 * stage);
      if (++stage == Stages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

}  // namespace

// (Stages, Words): one slot to a deep ring, a small to a 256-byte payload.
#define WSPIPE_COST_CONFIGS(X) \
  X(1, 4)                      \
  X(2, 4)                      \
  X(4, 4)                      \
  X(8, 4)                      \
  X(4, 16)                     \
  X(4, 64)

#define WSPIPE_COST_KERNELS(S, W)                                                         \
  extern "C" __global__ void __launch_bounds__(64) wspipe_cost_core_s##S##_w##W(std::uint32_t items) { \
    core_ring<S, W>(items);                                                               \
  }                                                                                       \
  extern "C" __global__ void __launch_bounds__(64) wspipe_cost_raw_s##S##_w##W(std::uint32_t items) {  \
    raw_ring<S, W>(items);                                                                \
  }
WSPIPE_COST_CONFIGS(WSPIPE_COST_KERNELS)
#undef WSPIPE_COST_KERNELS

namespace {

struct Config {
  int stages, words;
  void (*core)(std::uint32_t);
  void (*raw)(std::uint32_t);
  std::size_t smem;
};

#define WSPIPE_COST_ENTRY(S, W) \
  {S, W, wspipe_cost_core_s##S##_w##W, wspipe_cost_raw_s##S##_w##W, sizeof(CostStorage<S, W>)},
const Config kConfigs[] = {WSPIPE_COST_CONFIGS(WSPIPE_COST_ENTRY)};
#undef WSPIPE_COST_ENTRY

// The median of `reps` timed launches of `kernel` over `ctas` rings of `items` items, in ms.
float median_ms(void (*kernel)(std::uint32_t), std::size_t smem, std::uint32_t ctas, std::uint32_t items, int reps) {
  wspipe::gpu::DeviceEvent t0, t1;
  std::vector<float> ms;
  // Dynamic shared memory: the two rings share CostStorage's layout, whose
  // size the caller passes; clusters of 1, as the example's launch.
  WSPIPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t lc{};
  lc.gridDim = dim3(ctas);
  lc.blockDim = dim3(64);
  lc.dynamicSmemBytes = smem;
  lc.attrs = attr;
  lc.numAttrs = 1;
  for (int r = 0; r <= reps; ++r) {  // the first is a warm-up
    t0.record();
    WSPIPE_CUDA_CHECK(cudaLaunchKernelEx(&lc, kernel, items));
    t1.record();
    WSPIPE_CUDA_CHECK(cudaDeviceSynchronize());
    if (r > 0) ms.push_back(t1.ms_since(t0));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// wspipe_ring_cost [items] [reps]: for each configuration, one ring (one CTA)
// and a full grid of 4 rings per SM, core/ against by hand: items/s of each
// and their ratio (core / hand-written; >= 0.98 is the target).
int run(int argc, char** argv) {
  const std::uint32_t items = argc > 1 ? static_cast<std::uint32_t>(std::strtoul(argv[1], nullptr, 10)) : 200000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 11;
  const std::optional<cudaDeviceProp> device = wspipe::gpu::sm90_device_or_skip("the ring");
  if (!device) return 77;
  const cudaDeviceProp& prop = *device;
  std::printf("wspipe_ring_cost on %s (sm_%d%d, %d SMs): %u items per ring, median of %d launches\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, items, reps);
#if WSPIPE_CUDA_EVENT_LOG > 0
  // Every warp of the largest grid; the rings wrap, and nobody reads them.
  wspipe::cuda::EventLog log(2 * 4 * static_cast<std::uint32_t>(prop.multiProcessorCount), WSPIPE_CUDA_EVENT_LOG);
  wspipe::cuda::attach_event_log(log);
  std::printf("event log on: %d events per warp, cost parts %d, the core ring only (core / hand-written is the "
              "log's cost)\n",
              WSPIPE_CUDA_EVENT_LOG, WSPIPE_CUDA_EVENT_LOG_COST_PARTS);
#endif
  std::printf("%-6s %-5s %-6s %14s %14s %7s\n", "stages", "words", "rings", "core items/s", "raw items/s", "ratio");
  double worst = 1e9;
  for (const Config& c : kConfigs) {
    for (std::uint32_t ctas : {1u, 4u * static_cast<std::uint32_t>(prop.multiProcessorCount)}) {
      // Interleaved, twice each, so that clock drift favours neither.
      const float core1 = median_ms(c.core, c.smem, ctas, items, reps);
      const float raw1 = median_ms(c.raw, c.smem, ctas, items, reps);
      const float raw2 = median_ms(c.raw, c.smem, ctas, items, reps);
      const float core2 = median_ms(c.core, c.smem, ctas, items, reps);
      const double core_rate = 1e3 * items * ctas / std::min(core1, core2);
      const double raw_rate = 1e3 * items * ctas / std::min(raw1, raw2);
      const double ratio = core_rate / raw_rate;
      worst = std::min(worst, ratio);
      std::printf("%-6d %-5d %-6u %14.4g %14.4g %7.3f\n", c.stages, c.words, ctas, core_rate, raw_rate, ratio);
    }
  }
  std::printf("worst ratio (core / hand-written): %.3f (target >= 0.98)\n", worst);
  return worst >= 0.98 || wspipe::cuda::kEventLogOn ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a CudaError
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
