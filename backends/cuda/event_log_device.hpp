// The event log's device side (docs/event-log.md): what cuda_backend.hpp's
// operations call when the translation unit is compiled with
// WSPIPE_CUDA_EVENT_LOG=<events per warp> (0 or undefined: off, and none of
// this is compiled into the operations). Also the host's
// attach_event_log(log), which points this translation unit's kernels at an
// EventLog (event_log.hpp).
//
// Who writes: the lowest active lane of the warp that made the call, one
// record per call, into its warp's ring in device memory (one writer per
// ring, no atomics, no synchronisation added). A warp's next slot is the
// head in its ring's header, which only that lane touches. A warp that
// traps (watchdog, failed check) first copies every ring into the log's
// host-mapped mirror, which the host reads after the trap.
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

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>

#include "backends/cuda/device_where.hpp"
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

__device__ __forceinline__ void source_parts(const SourceLoc& loc, std::uint32_t& file, std::uint32_t& line) {
  const char* name = source_name(loc, line);
  file = name != nullptr ? event_log_file_id(name) : 0;
}

__device__ __forceinline__ std::uint32_t event_log_lane() { return ::cuda::ptx::get_sreg_laneid(); }
// This warp's number across the grid (event_log_format.hpp).
__device__ __forceinline__ std::uint32_t event_log_warp() { return grid_warp(); }
__device__ __forceinline__ std::uint32_t event_log_thread() { return grid_thread_in_cta(); }
__device__ __forceinline__ std::uint64_t event_log_clock() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// WarpHeader::head and the name cache after it, as words of the header.
inline constexpr std::uint32_t kHeadWord = offsetof(WarpHeader, head) / sizeof(std::uint32_t);
inline constexpr std::uint32_t kNameKeyWord = offsetof(WarpHeader, name_key) / sizeof(std::uint32_t);
inline constexpr std::uint32_t kNameIdWord = offsetof(WarpHeader, name_id) / sizeof(std::uint32_t);
__device__ __forceinline__ std::size_t event_log_part_offset(std::uint32_t warp) {
  return sizeof(LogHeader) + std::size_t{warp} * event_log_warp_bytes(kEventLogCapacity);
}

// The warp's header, `h`: the magic and where the warp is (with its first
// event, or its trap if that comes first).
__device__ __forceinline__ void log_where(std::uint32_t* h) {
  h[0] = kWarpMagic;
  h[1] = blockIdx.x;
  h[2] = blockIdx.y;
  h[3] = blockIdx.z;
  h[4] = event_log_thread() / 32u;
  h[5] = ::cuda::ptx::get_sreg_cluster_ctarank();
}

// What a record costs, part by part, for tools/gpu/ring_cost.cu's
// measurement (docs/silicon.md, "The event log"): 1, the record's two
// stores only, always into slot 0 (file id 0, time 0); 2, also the header's
// load and stores (the head, the name cache); 3 (the default, the log), also
// %globaltimer. Below 3 the log is not a log.
#ifndef WSPIPE_CUDA_EVENT_LOG_COST_PARTS
#define WSPIPE_CUDA_EVENT_LOG_COST_PARTS 3
#endif

// One record of `op` in this warp's ring, by the lowest active lane. The
// header's last 16 bytes (trap_thread, head, name_key, name_id) are one
// plain load, and stores of what changed; only this lane touches them. The
// file's id is hashed only when the name differs from the last event's. The
// record goes with st.global.cg (to L2, not L1: the ring does not crowd the
// kernel's L1). What dominates the cost is the record's stores: the warp's
// next release (an arrive) waits for them (docs/silicon.md).
__device__ __forceinline__ void log_event(EventOp op, std::uint32_t bar, std::uint32_t arg, std::uint32_t flags,
                                          const SourceLoc& loc) {
  const EventLogView v = event_log_view;
  if (v.base == nullptr) return;
  const std::uint32_t lanes = __activemask();
  if (event_log_lane() != static_cast<std::uint32_t>(__ffs(static_cast<int>(lanes)) - 1)) return;
  const std::uint32_t warp = event_log_warp();
  if (warp >= v.warps) return;
  unsigned char* part = v.base + event_log_part_offset(warp);
  std::uint32_t line;
  const char* name = source_name(loc, line);
#if WSPIPE_CUDA_EVENT_LOG_COST_PARTS >= 2
  auto* h = reinterpret_cast<std::uint32_t*>(part);
  static_assert(kHeadWord == 13 && kNameKeyWord == 14 && kNameIdWord == 15);
  const uint4 tail = reinterpret_cast<const uint4*>(part)[3];
  const std::uint32_t n = tail.y;
  h[kHeadWord] = n + 1;
  const auto key = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(name));
  std::uint32_t file = tail.w;
  if (key != tail.z) {  // after reset both are 0, the key and id of no name
    file = name != nullptr ? event_log_file_id(name) : 0;
    h[kNameKeyWord] = key;
    h[kNameIdWord] = file;
  }
  if (n == 0) log_where(h);
#else
  const std::uint32_t n = 0;
  const std::uint32_t file = 0;
  (void)name;
#endif
#if WSPIPE_CUDA_EVENT_LOG_COST_PARTS >= 3
  const std::uint64_t t = event_log_clock();
#else
  const std::uint64_t t = 0;
#endif
  auto* r = reinterpret_cast<uint4*>(part + sizeof(WarpHeader) + (n % kEventLogCapacity) * sizeof(EventRecord));
  __stcg(r, make_uint4(n + 1, static_cast<std::uint32_t>(op) | (flags << 8) | ((line < 65535u ? line : 65535u) << 16),
                       file, bar));
  __stcg(r + 1, make_uint4(arg, lanes, static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(t >> 32)));
}

// The trap's copy: `lanes` (the calling lanes, each with its share of
// 16-byte pieces) copy warp `own`'s part of the block into the mirror, then
// write the trap (the log header's fields: reason, warp, line, file;
// barrier, parity) into the mirror's header, then copy every other warp's
// part, then __threadfence_system() so that the host sees all of it after
// the trap. The block is read with ld.global.cg: from
// L2, where every warp's stores go, not from this SM's L1. Out of line: it
// runs once, before a trap.
__device__ __noinline__ void log_trap_copy(const EventLogView v, std::uint32_t own, std::uint32_t lanes, uint4 trap_at,
                                           uint4 trap_bar) {
  const std::uint32_t lane = event_log_lane();
  const std::uint32_t step = static_cast<std::uint32_t>(__popc(static_cast<int>(lanes)));
  const std::uint32_t first = static_cast<std::uint32_t>(__popc(static_cast<int>(lanes & ((1u << lane) - 1u))));
  constexpr std::size_t kPieces = event_log_warp_bytes(kEventLogCapacity) / sizeof(uint4);
  const auto copy = [&](std::uint32_t warp) {
    const std::size_t at = event_log_part_offset(warp);
    const auto* src = reinterpret_cast<const uint4*>(v.base + at);
    auto* dst = reinterpret_cast<uint4*>(v.mirror + at);
    for (std::size_t i = first; i < kPieces; i += step) dst[i] = __ldcg(src + i);
  };
  if (own < v.warps) copy(own);
  if (first == 0) {
    auto* g = reinterpret_cast<uint4*>(v.mirror);
    g[1] = trap_at;
    g[2] = trap_bar;
  }
  for (std::uint32_t w = 0; w < v.warps; ++w) {
    if (w != own) copy(w);
  }
  __threadfence_system();
}

// Before a trap: the trap in this warp's header (device memory), then the
// whole block copied into the host-mapped mirror with the trap in its
// header (log_trap_copy), so that the host, which can make no CUDA call
// after the trap, reads the mirror. The warp's active lanes copy together
// and meet again before they go on to trap.
__device__ __forceinline__ void log_trap(TrapReason reason, std::uint32_t bar, std::uint32_t parity,
                                         std::uint32_t tries, const SourceLoc& loc) {
  const EventLogView v = event_log_view;
  if (v.base == nullptr) return;
  const std::uint32_t lanes = __activemask();
  const std::uint32_t warp = event_log_warp();
  std::uint32_t file, line;
  source_parts(loc, file, line);
  if (event_log_lane() == static_cast<std::uint32_t>(__ffs(static_cast<int>(lanes)) - 1) && warp < v.warps) {
    auto* h = reinterpret_cast<std::uint32_t*>(v.base + event_log_part_offset(warp));
    if (h[kHeadWord] == 0) log_where(h);  // no event yet
    h[6] = static_cast<std::uint32_t>(reason);
    h[7] = line;
    h[8] = file;
    h[9] = bar;
    h[10] = parity;
    h[11] = tries;
    h[12] = event_log_thread();
  }
  __syncwarp(lanes);  // the header's stores before the lanes read it
  log_trap_copy(v, warp, lanes, make_uint4(static_cast<std::uint32_t>(reason), warp, line, file),
                make_uint4(bar, parity, 0u, 0u));
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
