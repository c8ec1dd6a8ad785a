// The event log's device side (docs/event-log.md): what cuda_backend.hpp's
// operations call when the translation unit is compiled with
// WSPIPE_CUDA_EVENT_LOG=<events per warp> (0 or undefined: off, and none of
// this is compiled into the operations). Also the host's
// attach_event_log(log), which points this translation unit's kernels at an
// EventLog (event_log.hpp).
//
// Who writes: the lowest active lane of the warp that made the call, one
// record per call, into its warp's ring (one writer per ring, no atomics,
// no synchronisation added). A warp's next slot is a counter in device
// memory that only that warp touches.
//
// Where the log is: a `static __constant__` view, one per translation unit
// (internal linkage: no -rdc needed), set by attach_event_log in the same
// translation unit. A kernel of a unit that attached nothing logs nothing
// (one constant load and a branch per operation).
#pragma once

#if !defined(__CUDACC__)
#error "backends/cuda/event_log_device.hpp is CUDA code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>

#include "backends/cuda/event_log.hpp"
#include "backends/cuda/event_log_format.hpp"
#include "core/config.hpp"

#ifndef WSPIPE_CUDA_EVENT_LOG
#define WSPIPE_CUDA_EVENT_LOG 0
#endif
static_assert(WSPIPE_CUDA_EVENT_LOG >= 0, "WSPIPE_CUDA_EVENT_LOG: events per warp, 0 (or undefined) for off");

namespace wspipe::cuda {

inline constexpr std::uint32_t kEventLogCapacity = WSPIPE_CUDA_EVENT_LOG;
inline constexpr bool kEventLogOn = kEventLogCapacity > 0;

#if WSPIPE_CUDA_EVENT_LOG > 0
namespace detail {

// This translation unit's log (attach_event_log); base == nullptr: none.
static __constant__ EventLogView event_log_view;

// std::source_location's data: a pointer to {file, function, line, column}
// (libstdc++ and libc++ alike). Its accessors are constexpr __host__
// functions, which device code may not call without
// --expt-relaxed-constexpr; reading the pointer's target is ordinary device
// code, and at a call site, where the location is a constant, the line and
// the file id (a hash of the name) fold to constants.
struct SourceLocData {
  const char* file;
  const char* function;
  std::uint32_t line;
  std::uint32_t column;
};
__device__ __forceinline__ void source_parts(const SourceLoc& loc, std::uint32_t& file, std::uint32_t& line) {
#if defined(__cpp_lib_source_location)
  static_assert(sizeof(SourceLoc) == sizeof(const void*), "std::source_location: expected one pointer");
  const SourceLocData* d = *reinterpret_cast<const SourceLocData* const*>(&loc);
  file = d != nullptr ? event_log_file_id(d->file) : 0;
  line = d != nullptr ? d->line : 0;
#else
  (void)loc;
  file = 0;
  line = 0;
#endif
}

__device__ __forceinline__ std::uint32_t event_log_lane() { return ::cuda::ptx::get_sreg_laneid(); }
// This warp's number across the grid (event_log_format.hpp).
__device__ __forceinline__ std::uint32_t event_log_warp() {
  const std::uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const std::uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  const std::uint32_t tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return cta * ((threads + 31u) / 32u) + tid / 32u;
}
__device__ __forceinline__ std::uint32_t event_log_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ std::uint64_t event_log_clock() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned char* event_log_part(const EventLogView& v, std::uint32_t warp) {
  return v.base + sizeof(LogHeader) + std::size_t{warp} * event_log_warp_bytes(kEventLogCapacity);
}

// One record of `op` in this warp's ring, by the lowest active lane.
__device__ __forceinline__ void log_event(EventOp op, std::uint32_t bar, std::uint32_t arg, std::uint32_t flags,
                                          const SourceLoc& loc) {
  const EventLogView v = event_log_view;
  if (v.base == nullptr) return;
  const std::uint32_t lanes = __activemask();
  if (event_log_lane() != static_cast<std::uint32_t>(__ffs(static_cast<int>(lanes)) - 1)) return;
  const std::uint32_t warp = event_log_warp();
  if (warp >= v.warps) return;
  unsigned char* part = event_log_part(v, warp);
  const std::uint32_t n = v.heads[warp];
  v.heads[warp] = n + 1;
  if (n == 0) {
    auto* h = reinterpret_cast<uint4*>(part);
    h[0] = make_uint4(kWarpMagic, blockIdx.x, blockIdx.y, blockIdx.z);
    h[1] = make_uint4(event_log_thread() / 32u, ::cuda::ptx::get_sreg_cluster_ctarank(), 0u, 0u);
  }
  std::uint32_t file, line;
  source_parts(loc, file, line);
  const std::uint64_t t = event_log_clock();
  auto* r = reinterpret_cast<uint4*>(part + sizeof(WarpHeader) + (n % kEventLogCapacity) * sizeof(EventRecord));
  r[0] = make_uint4(n + 1, static_cast<std::uint32_t>(op) | (flags << 8) | ((line < 65535u ? line : 65535u) << 16),
                    file, bar);
  r[1] = make_uint4(arg, lanes, static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(t >> 32));
}

// Before a trap: the trap in this warp's header and the log's, then
// __threadfence_system() so that the host sees them and every record before
// them. The warp's active lanes meet again before they go on to trap.
__device__ __forceinline__ void log_trap(TrapReason reason, std::uint32_t bar, std::uint32_t parity,
                                         std::uint32_t tries, const SourceLoc& loc) {
  const EventLogView v = event_log_view;
  if (v.base == nullptr) return;
  const std::uint32_t lanes = __activemask();
  if (event_log_lane() == static_cast<std::uint32_t>(__ffs(static_cast<int>(lanes)) - 1)) {
    const std::uint32_t warp = event_log_warp();
    std::uint32_t file, line;
    source_parts(loc, file, line);
    if (warp < v.warps) {
      auto* h = reinterpret_cast<uint4*>(event_log_part(v, warp));
      if (v.heads[warp] == 0) {
        h[0] = make_uint4(kWarpMagic, blockIdx.x, blockIdx.y, blockIdx.z);
      }
      h[1] = make_uint4(event_log_thread() / 32u, ::cuda::ptx::get_sreg_cluster_ctarank(),
                        static_cast<std::uint32_t>(reason), line);
      h[2] = make_uint4(file, bar, parity, tries);
      h[3] = make_uint4(event_log_thread(), 0u, 0u, 0u);
    }
    auto* g = reinterpret_cast<uint4*>(v.base);
    g[1] = make_uint4(static_cast<std::uint32_t>(reason), warp, line, file);
    g[2] = make_uint4(bar, parity, 0u, 0u);
    __threadfence_system();
  }
  __syncwarp(lanes);
}

}  // namespace detail
#endif  // WSPIPE_CUDA_EVENT_LOG > 0

// Points this translation unit's kernels at `log` (its capacity must be
// WSPIPE_CUDA_EVENT_LOG). With the log off: nothing. Throws
// std::runtime_error where the capacity differs or the copy fails.
[[maybe_unused]] static inline void attach_event_log(const EventLog& log) {
#if WSPIPE_CUDA_EVENT_LOG > 0
  if (log.capacity() != kEventLogCapacity) {
    throw std::runtime_error("attach_event_log: the log holds " + std::to_string(log.capacity()) +
                             " events per warp, the kernels were built with WSPIPE_CUDA_EVENT_LOG=" +
                             std::to_string(kEventLogCapacity));
  }
  const EventLogView v = log.view();
  if (const cudaError_t e = cudaMemcpyToSymbol(detail::event_log_view, &v, sizeof v); e != cudaSuccess) {
    throw std::runtime_error(std::string("attach_event_log: cudaMemcpyToSymbol: ") + cudaGetErrorString(e));
  }
#else
  (void)log;
#endif
}

}  // namespace wspipe::cuda
