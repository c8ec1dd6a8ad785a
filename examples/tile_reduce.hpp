// `tile-reduce`: the input side of the seed API without a tensor core, so
// that it runs on Hopper as well as in the emulator (docs/silicon.md).
//
// A load warp brings 32 x 64 tiles of a u32 matrix X into shared memory
// with TMA through an InputTilePipeline; two consumer warps reduce each of
// the tile's rows to a weighted sum and write it to global memory:
//   out[rank][row] = sum over c of X[row][c] * (c + 1 + rank)   (mod 2^32)
// Clusters of 2 share every tile: each CTA loads half of its rows and
// multicasts them into both CTAs, and each CTA's consumers release the slot
// in both CTAs (a remote arrive), since the peer's next load writes into
// it. Tiles go to the clusters round-robin. With `weights`, the column
// weights (c + 1 + rank) are not computed but loaded: one more TMA load, of
// a 64-word table into shared memory on an mbarrier of its own, issued
// before the first tile's. Wrapping u32 arithmetic makes
// the result exact on every backend, so the emulator's output and the
// GPU's agree bit for bit (both equal tile_reduce_reference()).
//
// The broken variants each plant one real bug; docs/silicon.md shows what
// each does on an H100.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/input_pipeline.hpp"
#include "core/smem.hpp"
#include "core/tma.hpp"

namespace wspipe::examples {

enum class TileReduceBug : std::uint8_t {
  none,
  local_release,        // clusters of 2: the consumers free the slot in their own CTA only
  expect_own_half,      // clusters of 2: full is armed with the bytes of this CTA's own load only
  no_drain,             // clusters of 2: the load warp exits without draining the ring
  release_before_read,  // the consumers free the slot before they read it
  // weights: the consumers wait for each tile but not for the weights'
  // own barrier, as if the weights, loaded first, had landed first. PTX
  // orders no bulk copy's completion after another's: only an out-of-order
  // completion shows it (RunOptions::async_reorder).
  unwaited_weights,
};

inline constexpr std::uint32_t kTileRows = 32;
inline constexpr std::uint32_t kTileCols = 64;
inline constexpr std::uint32_t kTileBytes = kTileRows * kTileCols * 4;
inline constexpr std::uint32_t kTileReduceConsumers = 2;  // consumer warps, after the load warp
inline constexpr std::uint32_t kTileReduceWarps = 1 + kTileReduceConsumers;

template <int Stages>
struct TileReduceStorage {
  alignas(1024) std::uint32_t tile[Stages][kTileRows * kTileCols];
  SharedMemBarrier barriers[2 * Stages];  // InputTilePipeline: full[Stages] then empty[Stages]
  // TileReduceArgs::weights: the column weights and their barrier (last, so
  // that the ring's layout is the same either way).
  alignas(128) std::uint32_t weights[kTileCols];
  SharedMemBarrier weights_full;
};

// The TMA map's box: the rows one CTA loads, all 64 columns.
WSPIPE_HD constexpr std::uint32_t tile_reduce_box_rows(std::uint32_t cluster_size) {
  return kTileRows / cluster_size;
}

template <Backend B>
struct TileReduceArgs {
  typename B::TmaMap x_map;  // X: rows x 64 u32, box 64 x tile_reduce_box_rows(cluster size)
  std::uint32_t* out = nullptr;  // cluster_size x rows, out[rank * rows + row]
  std::uint32_t rows = 0;        // a multiple of kTileRows
  TileReduceBug bug = TileReduceBug::none;
  // The column weights come from w_map (cluster_size x 64 u32, row `rank`
  // holding c + 1 + rank, box 64 x 1) instead of being computed.
  bool weights = false;
  typename B::TmaMap w_map{};
};

template <Backend B, int Stages>
WSPIPE_HD void tile_reduce_kernel(const TileReduceArgs<B>& args) {
  struct NoPayload {};
  using Pipe = InputTilePipeline<B, NoPayload, Stages, 1>;
  auto& s = B::template shared_storage<TileReduceStorage<Stages>>();
  const std::uint32_t warp = B::warp_idx();
  const std::uint32_t rank = B::cta_rank();
  const std::uint32_t ctas = B::cluster_size();
  const std::uint32_t tiles = args.rows / kTileRows;
  const bool shared_release = ctas == 2 && args.bug != TileReduceBug::local_release;

  // empty: one elected arrival per consumer warp of every CTA that reads the slot.
  if (warp == 0) {
    Pipe::init_barriers(s.barriers, kTileReduceConsumers * (shared_release ? ctas : 1));
    if (args.weights) B::elect_one([&] { B::init(s.weights_full, 1); });
    B::fence_init();
  }
  B::cluster_sync();
  Pipe pipe(s.barriers, NoPayload{});

  if (warp == 0) {
    if (args.weights) {
      B::elect_one([&] {
        B::arrive_expect_tx(s.weights_full, kTileCols * 4);
        B::tma_load(args.w_map, s.weights, s.weights_full, TmaCoords{{0, static_cast<std::int32_t>(rank)}});
      });
    }
    const std::uint32_t box_rows = tile_reduce_box_rows(ctas);
    for (std::uint32_t t = B::cluster_idx(); t < tiles; t += B::num_clusters()) {
      auto stage = pipe.producer();
      B::elect_one([&] {
        stage.expect_bytes(args.bug == TileReduceBug::expect_own_half ? kTileBytes / ctas : kTileBytes);
        std::uint32_t* dst = s.tile[stage.index()] + rank * box_rows * kTileCols;
        const TmaCoords at{{0, static_cast<std::int32_t>(t * kTileRows + rank * box_rows)}};
        if (ctas == 1) {
          B::tma_load(args.x_map, dst, stage.full_mbar(), at);
        } else {
          B::tma_load_multicast(args.x_map, dst, stage.full_mbar(), at, static_cast<std::uint16_t>((1u << ctas) - 1));
        }
      });
    }
    // No peer's multicast or remote arrive may target this CTA once it has
    // exited: wait until every slot has been freed by both CTAs.
    if (args.bug != TileReduceBug::no_drain) pipe.drain();
    // The weights' load has landed before the CTA exits.
    if (args.weights) B::wait(s.weights_full, 0);
  } else if (warp <= kTileReduceConsumers) {
    const std::uint32_t first_row = (warp - 1) * (kTileRows / kTileReduceConsumers);
    auto release = [&](SharedMemBarrier& empty) {
      B::elect_one([&] {
        if (shared_release) {
          for (std::uint32_t c = 0; c < ctas; ++c) B::arrive_remote(empty, c);
        } else {
          B::arrive(empty);
        }
      });
    };
    bool weighed = false;  // the weights' phase 0 waited for
    for (std::uint32_t t = B::cluster_idx(); t < tiles; t += B::num_clusters()) {
      auto stage = pipe.consumer();
      if (args.bug == TileReduceBug::release_before_read) release(stage.empty_mbar());
      // The bug: the tile's full barrier does not order the weights' copy,
      // though it was issued first.
      if (args.weights && !weighed && args.bug != TileReduceBug::unwaited_weights) B::wait(s.weights_full, 0);
      weighed = true;
      const SmemView<B, std::uint32_t> tile(s.tile[stage.index()], kTileRows * kTileCols);
      const std::uint32_t* weights =
          args.weights ? SmemView<B, std::uint32_t>(s.weights, kTileCols).read_range(0, kTileCols) : nullptr;
      for (std::uint32_t r = first_row; r < first_row + kTileRows / kTileReduceConsumers; ++r) {
        const std::uint32_t* row = tile.read_range(r * kTileCols, kTileCols);
        std::uint32_t sum = 0;
        for (std::uint32_t c = 0; c < kTileCols; ++c) sum += row[c] * (weights != nullptr ? weights[c] : c + 1 + rank);
        B::elect_one([&] { args.out[rank * args.rows + t * kTileRows + r] = sum; });
      }
      if (args.bug != TileReduceBug::release_before_read) release(stage.empty_mbar());
    }
  }
}

// The host side: the input and the expected output.
struct TileReduceProblem {
  std::uint32_t rows = 0;
  std::uint32_t cluster_size = 1;
  std::vector<std::uint32_t> x;    // rows x kTileCols
  std::vector<std::uint32_t> out;  // cluster_size x rows
  std::vector<std::uint32_t> w;    // cluster_size x kTileCols: w[rank][c] = c + 1 + rank

  TileReduceProblem(std::uint32_t rows_, std::uint32_t cluster_size_)
      : rows(rows_), cluster_size(cluster_size_), x(std::size_t{rows_} * kTileCols), out(std::size_t{cluster_size_} * rows_),
        w(std::size_t{cluster_size_} * kTileCols) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::uint32_t>(i * 2654435761u + 12345u);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::uint32_t>(i % kTileCols + 1 + i / kTileCols);
  }

  // X as TMA sees it: 64 columns wide, each CTA's box its share of a tile's rows.
  TensorMap x_map(const void* global) const { return map(global, rows, tile_reduce_box_rows(cluster_size)); }
  // The weights as TMA sees them: one row of 64 per rank, a row per box.
  TensorMap w_map(const void* global) const { return map(global, cluster_size, 1); }

  // A map of `height` rows of 64 u32, boxes of `box_rows` whole rows.
  static TensorMap map(const void* global, std::uint32_t height, std::uint32_t box_rows) {
    TensorMap m;
    m.global = global;
    m.dtype = ElemType::u32;
    m.rank = 2;
    m.dims[0] = kTileCols;
    m.dims[1] = height;
    m.strides[1] = kTileCols * 4;
    m.box[0] = kTileCols;
    m.box[1] = box_rows;
    return m;
  }

  std::vector<std::uint32_t> reference() const {
    std::vector<std::uint32_t> want(out.size());
    for (std::uint32_t rank = 0; rank < cluster_size; ++rank) {
      for (std::uint32_t r = 0; r < rows; ++r) {
        std::uint32_t sum = 0;
        for (std::uint32_t c = 0; c < kTileCols; ++c) sum += x[std::size_t{r} * kTileCols + c] * (c + 1 + rank);
        want[std::size_t{rank} * rows + r] = sum;
      }
    }
    return want;
  }

  // "" when `got` is the reference, else where the first difference is.
  std::string check(const std::vector<std::uint32_t>& got) const {
    const std::vector<std::uint32_t> want = reference();
    std::size_t wrong = 0, first = want.size();
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i]) {
        if (wrong++ == 0) first = i;
      }
    }
    if (wrong == 0) return "";
    return std::to_string(wrong) + " of " + std::to_string(want.size()) + " sums wrong, the first at rank " +
           std::to_string(first / rows) + " row " + std::to_string(first % rows) + ": " + std::to_string(got[first]) +
           " instead of " + std::to_string(want[first]);
  }
  std::string check() const { return check(out); }
};

}  // namespace wspipe::examples
