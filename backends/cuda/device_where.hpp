// Where a backend operation runs, for the instrumentation that the CUDA
// backend compiles in only when asked: the event log (event_log_device.hpp)
// and the seeded delays (delays_device.hpp). The source location of the
// kernel's call, and the warp's number across the grid.
#pragma once

#if !defined(__CUDACC__)
#error "backends/cuda/device_where.hpp is CUDA code: compile it with nvcc"
#endif

#include <cstdint>
#include <source_location>

#include "core/config.hpp"

namespace wspipe::cuda::detail {

// std::source_location's data: a pointer to {file, function, line, column}
// (libstdc++ and libc++ alike). Its accessors are constexpr __host__
// functions, which device code may not call without
// --expt-relaxed-constexpr; reading the pointer's target is ordinary device
// code, and at a call site, where the location is a constant, the line and
// the name's address fold to constants. The name's id does not (a loop over
// its bytes): each user keeps the last one per warp.
struct SourceLocData {
  const char* file;
  const char* function;
  std::uint32_t line;
  std::uint32_t column;
};
// The file's name (nullptr: none) and the line of `loc`.
__device__ __forceinline__ const char* source_name(const SourceLoc& loc, std::uint32_t& line) {
#if defined(__cpp_lib_source_location)
  static_assert(sizeof(SourceLoc) == sizeof(const void*), "std::source_location: expected one pointer");
  const SourceLocData* d = *reinterpret_cast<const SourceLocData* const*>(&loc);
  line = d != nullptr ? d->line : 0;
  return d != nullptr ? d->file : nullptr;
#else
  (void)loc;
  line = 0;
  return nullptr;
#endif
}

// The thread's number in its CTA, and this warp's number across the grid:
// its CTA's linear index (x fastest) times the warps per CTA, plus its warp
// in the CTA (event_log_format.hpp).
__device__ __forceinline__ std::uint32_t grid_thread_in_cta() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ std::uint32_t grid_warp() {
  const std::uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const std::uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  return cta * ((threads + 31u) / 32u) + grid_thread_in_cta() / 32u;
}

}  // namespace wspipe::cuda::detail
