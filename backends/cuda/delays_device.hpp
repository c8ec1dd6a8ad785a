// The seeded delays' device side (docs/delays.md): what cuda_backend.hpp's
// operations call first when the translation unit is compiled with
// WSPIPE_CUDA_DELAYS=1 (0 or undefined: off, and none of this is compiled
// into the operations). Also the host's attach_delays and detach_delays,
// which set this translation unit's configuration before a launch.
//
// Where the configuration is: a `static __constant__` view, one per
// translation unit (internal linkage: no -rdc needed), as the event log's.
// A constant rather than a kernel parameter, because the operations are
// static functions that see no kernel argument, and a parameter would have
// to pass through every kernel and every core/ call; a constant is read
// through the constant cache with no argument, the same value in every
// lane, and the host sets it per launch with cudaMemcpyToSymbol, ordered
// with the launches of the default stream. A kernel of a unit that attached
// nothing sleeps nowhere (one constant load and a branch per operation).
//
// Who counts: the lowest active lane of the warp, per site, in the warp's
// counts in device memory (DelayState, delays.hpp; only that lane touches
// them); the sites met go into a table there (keys claimed by atomicCAS),
// with how often each was met, for the host to read after the launch.
// Every active lane then sleeps the same time (__nanosleep), the lowest
// lane's answer broadcast with a shuffle.
#pragma once

#if !defined(__CUDACC__)
#error "backends/cuda/delays_device.hpp is CUDA code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "backends/cuda/delays.hpp"
#include "backends/cuda/delays_format.hpp"
#include "backends/cuda/device_where.hpp"
#include "backends/cuda/event_log_format.hpp"
#include "core/config.hpp"

#ifndef WSPIPE_CUDA_DELAYS
#define WSPIPE_CUDA_DELAYS 0
#endif
static_assert(WSPIPE_CUDA_DELAYS == 0 || WSPIPE_CUDA_DELAYS == 1, "WSPIPE_CUDA_DELAYS: 1 for on, 0 (or undefined) for off");

namespace wspipe::cuda {

inline constexpr bool kDelaysOn = WSPIPE_CUDA_DELAYS == 1;

#if WSPIPE_CUDA_DELAYS
namespace detail {

// This translation unit's configuration (attach_delays); base == nullptr: none.
static __constant__ DelayView delay_view;

// The slot of `site` in the table, claimed if new (the claimer writes what
// and where); kDelaySlots when the table is full.
__device__ __forceinline__ std::uint32_t delay_slot(DelaySiteSlot* table, std::uint32_t site, EventOp op,
                                                    std::uint32_t line, std::uint32_t file) {
#pragma unroll 1
  for (std::uint32_t i = 0; i < kDelaySlots; ++i) {
    const std::uint32_t s = (site + i) % kDelaySlots;
    std::uint32_t key = __ldcg(&table[s].key);
    if (key == 0) {
      key = atomicCAS(&table[s].key, 0u, site);
      if (key == 0) {
        table[s].what = static_cast<std::uint32_t>(op) | (line << 8);
        table[s].file = file;
        return s;
      }
    }
    if (key == site) return s;
  }
  return kDelaySlots;
}

// The occurrence's sleep (0: none), by the lowest active lane. Inline, as
// the event log's record: a build whose slow path was a call (CALL.REL with
// ptxas's own convention, and a 64-bit modulo's helper inside it) hung the
// correct ring and trapped tile-reduce on an H200 whenever the table was used.
__device__ __forceinline__ std::uint32_t delay_leader(EventOp op, std::uint32_t line, const char* name) {
  unsigned char* base = delay_view.base;
  const std::uint32_t warp = grid_warp();
  if (warp >= delay_view.warps) return 0;
  auto* table = reinterpret_cast<DelaySiteSlot*>(base);
  auto* w = reinterpret_cast<DelayWarp*>(base + kDelaySlots * sizeof(DelaySiteSlot)) + warp;
  // The file's id, hashed only when the name differs from the last one's.
  const auto name_key = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(name));
  std::uint32_t file = w->name_id;
  if (name_key != w->name_key) {  // both 0 at first, the key and id of no name
    file = name != nullptr ? event_log_file_id(name) : 0;
    w->name_key = name_key;
    w->name_id = file;
  }
  const std::uint32_t site = delay_site_key(op, file, line);
  if (delay_view.params.all == 0) {
    bool listed = false;
    for (std::uint32_t i = 0; i < delay_view.params.count && !listed; ++i) listed = delay_view.params.keys[i] == site;
    if (!listed) return 0;
  }
  const std::uint32_t slot = delay_slot(table, site, op, line, file);
  if (slot == kDelaySlots) return 0;
  atomicAdd(&table[slot].hits, 1u);
  const std::uint32_t n = w->count[slot];
  w->count[slot] = n + 1;
  return delay_ns(delay_view.params, site, warp, n);
}

// Before operation `op` called at `loc`: the sleep its configuration gives
// this occurrence, in every active lane.
__device__ __forceinline__ void delay_before(EventOp op, const SourceLoc& loc) {
  if (delay_view.base == nullptr) return;
  const std::uint32_t lanes = __activemask();
  const auto leader = static_cast<std::uint32_t>(__ffs(static_cast<int>(lanes)) - 1);
  std::uint32_t line;
  const char* name = source_name(loc, line);
  std::uint32_t ns = 0;
  if (::cuda::ptx::get_sreg_laneid() == leader) ns = delay_leader(op, line, name);
  ns = __shfl_sync(lanes, ns, static_cast<int>(leader));
  if (ns != 0) __nanosleep(ns);
}

}  // namespace detail
#endif  // WSPIPE_CUDA_DELAYS

// Points this translation unit's kernels at `state` with `config`: their
// next launches sleep as it says (empty the state with state.reset() before
// each). With the delays off: nothing. Throws std::invalid_argument where
// the configuration lists more than kDelayMaxSites sites, std::runtime_error
// where the copy fails.
[[maybe_unused]] static inline void attach_delays(const DelayState& state, const DelayConfig& config) {
  if (!config.all && config.sites.size() > kDelayMaxSites) {
    throw std::invalid_argument("attach_delays: " + std::to_string(config.sites.size()) + " sites, more than " +
                                std::to_string(kDelayMaxSites));
  }
#if WSPIPE_CUDA_DELAYS
  const DelayView v = state.view(config.params());
  if (const cudaError_t e = cudaMemcpyToSymbol(detail::delay_view, &v, sizeof v); e != cudaSuccess) {
    throw std::runtime_error(std::string("attach_delays: cudaMemcpyToSymbol: ") + cudaGetErrorString(e));
  }
#else
  (void)state;
#endif
}
// No sleeps from the next launch on.
[[maybe_unused]] static inline void detach_delays() {
#if WSPIPE_CUDA_DELAYS
  const DelayView v{};
  if (const cudaError_t e = cudaMemcpyToSymbol(detail::delay_view, &v, sizeof v); e != cudaSuccess) {
    throw std::runtime_error(std::string("detach_delays: cudaMemcpyToSymbol: ") + cudaGetErrorString(e));
  }
#endif
}

}  // namespace wspipe::cuda
