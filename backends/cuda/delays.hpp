// The seeded delays' host side (docs/delays.md): DelayState owns the device
// memory that a kernel built with WSPIPE_CUDA_DELAYS=1 counts its sites'
// occurrences in, and reads back which sites a launch met.
//
//   wspipe::cuda::DelayState delays(warps);       // every warp of the grid
//   wspipe::cuda::DelayConfig config;             // or parse_delay_config("seed:7,sites:all", error)
//   config.seed = 7;
//   wspipe::cuda::attach_delays(delays, config);  // delays_device.hpp: this translation unit's kernels
//   delays.reset();                               // before each launch
//   ... launch; synchronise ...
//   for (const auto& hit : delays.sites({"ring.hpp"})) ...
//
// Host C++ over the CUDA runtime API: usable from .cu and .cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/delays_format.hpp"

namespace wspipe::cuda {

// What the device sees: set into each kernel translation unit by
// attach_delays (delays_device.hpp). An aggregate, so that a __constant__
// variable may hold it.
struct DelayView {
  unsigned char* base;  // DelayState's memory (nullptr: no delays)
  std::uint32_t warps;
  std::uint32_t reserved;
  DelayParams params;
};

// A site a launch met, and how often (every warp's occurrences).
struct DelaySiteHit {
  DelaySite site;
  std::uint32_t hits = 0;
};

class DelayState {
 public:
  // `warps`: every warp of the grid the launches use. Throws
  // std::runtime_error naming the CUDA call that failed.
  explicit DelayState(std::uint32_t warps) : warps_(warps) {
    if (warps == 0) throw std::invalid_argument("DelayState: warps must be positive");
    void* p = nullptr;
    check(cudaMalloc(&p, delay_state_bytes(warps)), "cudaMalloc (delay state)");
    base_ = static_cast<unsigned char*>(p);
    reset();
  }
  DelayState(const DelayState&) = delete;
  DelayState& operator=(const DelayState&) = delete;
  ~DelayState() {
    if (base_ != nullptr) (void)cudaFree(base_);
  }

  std::uint32_t warps() const { return warps_; }
  DelayView view(const DelayParams& params) const { return {base_, warps_, 0, params}; }

  // Every count and the table of sites back to zero (cudaMemset, ordered
  // with the default stream's launches): before each launch, so that its
  // n-th occurrences are counted from 0.
  void reset() { check(cudaMemset(base_, 0, delay_state_bytes(warps_)), "cudaMemset (delay state)"); }

  // The sites the last launch met, in the table's order; a file's name is
  // the one of `sources` (paths or names) whose name has its id, else
  // `file-<id in hex>`. Throws std::runtime_error where the copy fails (a
  // launch that trapped leaves device memory unreadable).
  std::vector<DelaySiteHit> sites(const std::vector<std::string>& sources) const {
    std::vector<DelaySiteSlot> table(kDelaySlots);
    check(cudaMemcpy(table.data(), base_, kDelaySlots * sizeof(DelaySiteSlot), cudaMemcpyDeviceToHost),
          "cudaMemcpy (delay sites)");
    std::vector<DelaySiteHit> out;
    for (const DelaySiteSlot& s : table) {
      if (s.key == 0) continue;
      DelaySiteHit h;
      h.site.op = static_cast<EventOp>(s.what & 0xffu);
      h.site.line = s.what >> 8;
      char hex[16];
      std::snprintf(hex, sizeof hex, "file-%08x", s.file);
      h.site.file = hex;
      for (const std::string& src : sources) {
        if (event_log_file_id(src.c_str()) == s.file) h.site.file = src.substr(src.rfind('/') + 1);
      }
      h.hits = s.hits;
      out.push_back(h);
    }
    return out;
  }

 private:
  static void check(cudaError_t e, const char* call) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("DelayState: ") + call + ": " + cudaGetErrorString(e));
  }
  std::uint32_t warps_;
  unsigned char* base_ = nullptr;
};

}  // namespace wspipe::cuda
