// Cluster shapes: where a CTA sits in its cluster, and the multicast masks
// a kernel builds from that.
//
// A cluster is up to 16 CTAs in a 1-, 2- or 3-D shape (CUDA: 8 is the
// portable maximum; 16 needs the launch to opt in, which the backends
// check). A CTA's rank (%cluster_ctarank) numbers the cluster's CTAs with x
// fastest: rank = x + dim.x * (y + dim.y * z). Multicast masks (TMA loads'
// ctaMask, tcgen05.commit's ctaMask) are 16-bit sets of ranks.
//
// The usual GEMM layout: a cluster of dim.x by dim.y CTAs computes a block
// of output tiles, CTA (x, y) the tile at row block x and column block y.
// The CTAs of one column (same y) read the same B tile, the CTAs of one row
// (same x) the same A tile: A is multicast along y (mask_along_y), B along x
// (mask_along_x). A cta_group::2 pair is two CTAs adjacent in x (ranks 2k
// and 2k+1, dim.x even); pair_mask is the pair of a rank.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace wspipe {

struct ClusterShape {
  std::uint32_t x = 1, y = 1, z = 1;

  static constexpr std::uint32_t kMaxPortable = 8;  // CUDA's portable cluster size
  static constexpr std::uint32_t kMax = 16;         // with the non-portable opt-in

  WSPIPE_HD constexpr std::uint32_t size() const { return x * y * z; }
  WSPIPE_HD constexpr bool portable() const { return size() <= kMaxPortable; }
  // Every dimension at least 1 and at most kMax CTAs in all.
  WSPIPE_HD constexpr bool valid() const { return x >= 1 && y >= 1 && z >= 1 && size() <= kMax; }

  WSPIPE_HD constexpr std::uint32_t rank(std::uint32_t cx, std::uint32_t cy, std::uint32_t cz = 0) const {
    return cx + x * (cy + y * cz);
  }
  WSPIPE_HD constexpr std::uint32_t x_of(std::uint32_t rank) const { return rank % x; }
  WSPIPE_HD constexpr std::uint32_t y_of(std::uint32_t rank) const { return rank / x % y; }
  WSPIPE_HD constexpr std::uint32_t z_of(std::uint32_t rank) const { return rank / (x * y); }

  // Every CTA of the cluster.
  WSPIPE_HD constexpr std::uint16_t all_mask() const {
    return static_cast<std::uint16_t>((1u << size()) - 1u);
  }
  // The CTAs that differ from `rank` only in x (its row along x).
  WSPIPE_HD constexpr std::uint16_t mask_along_x(std::uint32_t rank) const {
    std::uint32_t m = 0;
    for (std::uint32_t cx = 0; cx < x; ++cx) m |= 1u << this->rank(cx, y_of(rank), z_of(rank));
    return static_cast<std::uint16_t>(m);
  }
  // The CTAs that differ from `rank` only in y (its column along y).
  WSPIPE_HD constexpr std::uint16_t mask_along_y(std::uint32_t rank) const {
    std::uint32_t m = 0;
    for (std::uint32_t cy = 0; cy < y; ++cy) m |= 1u << this->rank(x_of(rank), cy, z_of(rank));
    return static_cast<std::uint16_t>(m);
  }
  // The cta_group::2 pair of `rank`: ranks 2k and 2k+1 (dim.x must be even).
  WSPIPE_HD constexpr std::uint16_t pair_mask(std::uint32_t rank) const {
    return static_cast<std::uint16_t>(0x3u << (rank & ~1u));
  }

  friend constexpr bool operator==(const ClusterShape&, const ClusterShape&) = default;
};

static_assert(ClusterShape{2, 2, 1}.mask_along_x(3) == 0b1100);
static_assert(ClusterShape{2, 2, 1}.mask_along_y(3) == 0b1010);
static_assert(ClusterShape{4, 1, 1}.pair_mask(3) == 0b1100);
static_assert(ClusterShape{4, 4, 1}.all_mask() == 0xffff);

}  // namespace wspipe
