// Tensor Memory's state (internal; tmem.cpp): live allocations, the
// cta_group::2 collectives, and the race checker's tiling of TMEM cells.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/config.hpp"
#include "core/tcgen05.hpp"

namespace wspipe::emu::detail {

// A live Tensor Memory allocation.
struct TmemBlock {
  std::uint32_t col = 0;
  std::uint32_t cols = 0;
  std::uint32_t warp = 0;
  std::uint64_t step = 0;
  SourceLoc loc{};
};

// A cta_group::2 alloc or dealloc: one warp of each CTA of the pair takes
// part; the first to arrive waits for the second, which performs it.
struct PairOp {
  bool active = false;
  bool dealloc = false;
  std::uint64_t gen = 0;  // collectives completed; the first warp waits for it to pass
  std::uint32_t first_warp = 0;
  std::uint32_t cols = 0;
  std::uint32_t operand = 0;  // alloc: dst offset in shared memory; dealloc: the TMEM address
  SourceLoc loc{};
};

// Race-checker shadow blocks (ShadowTable): tiles of 16 TMEM lanes x 16
// columns, 8 words of shared memory. Both are the largest units the usual
// accesses cover whole: an MMA writes D as a rectangle of 16-lane groups
// (M = 64 uses 16 lanes per quarter) and of columns in multiples of 16, a
// tcgen05.ld/st covers 16 or 32 lanes and, in the kernels here, 16 or more
// columns; TMA writes whole tiles, and an MMA reads 32 bytes of K per
// operand row, which a swizzled layout keeps together.
constexpr std::uint32_t kTmemShadowLanes = 16;
constexpr std::uint32_t kTmemShadowCols = 16;
constexpr std::uint32_t kTmemShadowBlock = kTmemShadowLanes * kTmemShadowCols;
constexpr std::uint32_t kSmemShadowBlock = 8;

// The TMEM shadow's index of cell (lane, col): tile by tile (16-lane groups
// ascending, then 16-column groups ascending), each tile's cells contiguous
// and lane-major, so that a ShadowTable block is one tile.
constexpr std::uint32_t tmem_shadow_index(std::uint32_t lane, std::uint32_t col) {
  const std::uint32_t tile = lane / kTmemShadowLanes * (kTmemColumns / kTmemShadowCols) + col / kTmemShadowCols;
  return tile * kTmemShadowBlock + lane % kTmemShadowLanes * kTmemShadowCols + col % kTmemShadowCols;
}
constexpr std::uint32_t tmem_shadow_lane(std::uint32_t index) {
  const std::uint32_t tile = index / kTmemShadowBlock;
  return tile / (kTmemColumns / kTmemShadowCols) * kTmemShadowLanes + index % kTmemShadowBlock / kTmemShadowCols;
}
constexpr std::uint32_t tmem_shadow_col(std::uint32_t index) {
  const std::uint32_t tile = index / kTmemShadowBlock;
  return tile % (kTmemColumns / kTmemShadowCols) * kTmemShadowCols + index % kTmemShadowCols;
}

// The TMEM shadow's index ranges [first, last) of the cells lanes
// [lane0, lane0 + lanes) x columns [col0, col0 + cols), ascending: a tile
// the rectangle covers whole is one range (one visit while it is uniform),
// a tile it covers in part is a range per lane. f(first, last) returns
// false to stop; so does the call.
template <class F>
bool for_each_tmem_shadow_range(std::uint32_t lane0, std::uint32_t lanes, std::uint32_t col0, std::uint32_t cols,
                                F&& f) {
  const std::uint32_t lane_end = lane0 + lanes, col_end = col0 + cols;
  for (std::uint32_t tl = lane0 / kTmemShadowLanes * kTmemShadowLanes; tl < lane_end; tl += kTmemShadowLanes) {
    const std::uint32_t l0 = std::max(tl, lane0), l1 = std::min(tl + kTmemShadowLanes, lane_end);
    for (std::uint32_t tc = col0 / kTmemShadowCols * kTmemShadowCols; tc < col_end; tc += kTmemShadowCols) {
      const std::uint32_t c0 = std::max(tc, col0), c1 = std::min(tc + kTmemShadowCols, col_end);
      if (l1 - l0 == kTmemShadowLanes && c1 - c0 == kTmemShadowCols) {
        const std::uint32_t first = tmem_shadow_index(tl, tc);
        if (!f(first, first + kTmemShadowBlock)) return false;
        continue;
      }
      for (std::uint32_t lane = l0; lane < l1; ++lane) {
        const std::uint32_t first = tmem_shadow_index(lane, c0);
        if (!f(first, first + (c1 - c0))) return false;
      }
    }
  }
  return true;
}

}  // namespace wspipe::emu::detail
