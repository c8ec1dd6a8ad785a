// What the three GEMM examples (gemm.hpp, blockwise_fp8.hpp,
// persistent_gemm.hpp) share: the tile shape, the shared memory of the
// input ring and of the accumulator pipeline, the operands' shared-memory
// descriptors and loads, and the prologue every CTA runs before its warps
// go their ways:
//
//   the MMA warp      initialises the input ring's barriers, the accumulator
//                     pipeline's and the TMEM dealloc barrier, then
//                     fence.mbarrier_init
//   every warp        cluster barrier: each CTA's barriers exist before a
//                     peer multicasts or arrives into them, and (cta_group 2)
//                     the peer CTA runs before the pair's tcgen05.alloc
//   the MMA warp      allocates Tensor Memory and publishes its address
//                     (MmaWarpContext::create, then enter())
//   the epilogue      waits on the named barrier that publishes the address,
//   warps             then reads it (EpilogueWarpContext)
//
// Each step is one call of GemmCta, and takes its caller's source location,
// so that the emulator's reports name the kernel's line. A kernel whose
// variant plants a bug in the prologue calls the steps it keeps and spells
// out the one it breaks, in the same order as the correct kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/backend.hpp"
#include "core/cluster.hpp"
#include "core/input_pipeline.hpp"
#include "core/output_pipeline.hpp"
#include "core/smem.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"
#include "core/tmem.hpp"
#include "core/warp_context.hpp"

namespace wspipe::examples {

inline constexpr std::uint32_t kGemmBlockM = 128;       // D rows per CTA
inline constexpr std::uint32_t kGemmBlockN = 64;        // D columns per output tile
inline constexpr std::uint32_t kGemmBlockKBytes = 128;  // K bytes per stage: one 128B-swizzled row
inline constexpr std::uint32_t kGemmMmaKBytes = 32;     // K bytes per tcgen05.mma

// The warp roles of gemm and blockwise-fp8 (persistent-gemm adds a
// scheduler warp and has its own).
inline constexpr std::uint32_t kGemmEpilogueWarps = 4;
inline constexpr std::uint32_t kGemmLoadWarp = 4;
inline constexpr std::uint32_t kGemmMmaWarp = 5;
inline constexpr std::uint32_t kGemmWarps = 6;

// The input ring's operand tiles: per stage, A's 128 rows and BRows rows of
// B, each row 128 K-bytes, 1024-byte aligned for the 128-byte swizzle (its
// pattern repeats every 8 rows). A stage's tiles are whole multiples of
// 1024 bytes, so what an example puts after them starts where it would
// without this struct around them.
template <int Stages, std::uint32_t BRows = kGemmBlockN>
struct GemmOperandTiles {
  alignas(1024) std::uint8_t a[Stages][kGemmBlockM * kGemmBlockKBytes];
  alignas(1024) std::uint8_t b[Stages][BRows * kGemmBlockKBytes];
};

// The barriers of the input ring (full and empty per stage) and of the
// accumulator pipeline, the TMEM dealloc barrier, and the word the
// allocation writes Tensor Memory's address to.
template <int Stages, int AccumStages>
struct GemmPipelineStorage {
  SharedMemBarrier input[2 * Stages];
  SharedMemBarrier accum[2 * AccumStages];
  SharedMemBarrier tmem_dealloc;
  std::uint32_t tmem_addr;
};

// The shared-memory descriptor of a K-major 128B-swizzled tile: 8-row
// groups 1024 bytes apart; the K offset of each MMA moves the start within
// the swizzled row.
template <Backend B>
WSPIPE_HD std::uint64_t gemm_smem_desc(const void* tile, std::uint32_t k_bytes) {
  return SmemDescriptor{.start = B::smem_addr(tile) + k_bytes, .lbo = 16, .sbo = 1024, .swizzle = SmemSwizzle::b128}
      .encode();
}

// A TMA load of this CTA's share of a tile: multicast into the CTAs of
// `mask` where other CTAs share the tile, a plain load where none does.
// Decided at compile time, so that a kernel whose tiles nobody shares holds
// no multicast instruction in its SASS.
template <Backend B, int CtaGroup, bool Multicast>
WSPIPE_HD void gemm_load_share(const typename B::TmaMap& map, void* dst, SharedMemBarrier& full,
                               const TmaCoords& at, std::uint16_t mask, SourceLoc loc = SourceLoc::current()) {
  if constexpr (Multicast) {
    B::template tma_load_multicast<CtaGroup>(map, dst, full, at, mask, loc);
  } else {
    B::template tma_load<CtaGroup>(map, dst, full, at, loc);
  }
}

// The persistent schedule: cluster tiles of cluster_m x cluster_n, in
// row-major order, taken by the clusters round-robin; CTA (x, y) of the
// cluster (B::cluster_shape()) computes the 128 x 64 block at row block x,
// column block y of each. Every warp of a cluster walks the same sequence.
struct GemmTileSchedule {
  std::uint32_t tiles_n = 0, num_tiles = 0, first = 0, step = 1;
  std::uint32_t cluster_m = 0, cluster_n = 0;
  std::uint32_t cta_row = 0, cta_col = 0;  // this CTA's first row and column within a cluster tile

  template <Backend B>
  WSPIPE_HD static GemmTileSchedule make(std::uint32_t m, std::uint32_t n, std::uint32_t cluster_m,
                                         std::uint32_t cluster_n = kGemmBlockN) {
    GemmTileSchedule s;
    const ClusterShape shape = B::cluster_shape();
    const std::uint32_t rank = B::cta_rank();
    s.tiles_n = n / cluster_n;
    s.num_tiles = (m / cluster_m) * s.tiles_n;
    s.first = B::cluster_idx();
    s.step = B::num_clusters();
    s.cluster_m = cluster_m;
    s.cluster_n = cluster_n;
    s.cta_row = shape.x_of(rank) * kGemmBlockM;
    s.cta_col = shape.y_of(rank) * kGemmBlockN;
    return s;
  }
  // Tile t's first row of D in this CTA, and its first column.
  WSPIPE_HD std::uint32_t row0(std::uint32_t t) const { return (t / tiles_n) * cluster_m + cta_row; }
  WSPIPE_HD std::uint32_t col0(std::uint32_t t) const { return (t % tiles_n) * cluster_n + cta_col; }
};

// An epilogue warp's share of a 128 x 64 accumulator tile, its lane
// quarter's rows 0-15 (`upper`) and 16-31 (`lower`) as tcgen05.ld.16x256b.x8
// fragments, stored to D (M x n f32, row-major) from row `row0` (the
// quarter's first row) and column `col0`.
template <Backend B, class Frag>
WSPIPE_HD void gemm_store_quarter(float* d, std::uint32_t n, std::uint32_t row0, std::uint32_t col0, const Frag& upper,
                                  const Frag& lower) {
  constexpr std::uint32_t kRepeat = kGemmBlockN / tmem_shape_cols(TmemShape::s16x256b);
  B::for_each_lane([&](std::uint32_t lane) {
    for (std::uint32_t r = 0; r < tmem_regs(TmemShape::s16x256b, kRepeat); ++r) {
      const TmemCell c = tmem_frag_cell(TmemShape::s16x256b, kRepeat, lane, r);
      const std::size_t at = std::size_t{row0 + c.lane} * n + col0 + c.col;
      d[at] = detail::float_from_bits(upper.reg(r));
      d[at + std::size_t{kTmemLowerRowLanes} * n] = detail::float_from_bits(lower.reg(r));
    }
  });
}

// One CTA of a GEMM example, as each of its warps sees it: the shared
// memory (Storage: `tiles`, a GemmOperandTiles, and `pipes`, a
// GemmPipelineStorage, with whatever the example keeps between them), which
// warp and CTA this is, and the prologue's steps. Cfg gives kStages,
// kAccumStages, kCtaGroup, kIn (bf16 or e4m3) and kOpc.
template <Backend B, class Cfg, class Storage>
class GemmCta {
 public:
  using Tiles = decltype(Storage::tiles);
  using Input = InputTilePipeline<B, Tiles*, Cfg::kStages, 1>;
  using Output = OutputTilePipeline<B, Cfg::kOpc>;
  using MmaCtx = MmaWarpContext<B, Cfg::kOpc, 32, 128>;
  using EpiCtx = EpilogueWarpContext<B, Cfg::kOpc, 32, 128>;
  static constexpr int kCtaGroup = Cfg::kCtaGroup;
  static constexpr MmaKind kKind = Cfg::kIn == ElemType::bf16 ? MmaKind::f16 : MmaKind::f8f6f4;

  Storage& s;
  const std::uint32_t warp;
  const std::uint32_t rank;
  const bool leader;  // the pair's even CTA, which issues the pair's MMAs (cta_group 2)

  WSPIPE_HD GemmCta()
      : s(B::template shared_storage<Storage>()),
        warp(B::warp_idx()),
        rank(B::cta_rank()),
        leader((rank & 1u) == 0) {}

  // Where the MMA warp's commit on accum-full goes: this CTA, or both CTAs
  // of its pair (ranks 2k and 2k+1), whose epilogues each wait on their own
  // accum-full.
  WSPIPE_HD std::uint16_t mma_complete_mask() const {
    return static_cast<std::uint16_t>(kCtaGroup == 1 ? 1u << rank : 0x3u << (rank & ~1u));
  }
  // The instruction descriptor of every MMA: 128 rows per CTA by 64 columns.
  WSPIPE_HD static constexpr std::uint32_t instr_desc() {
    return InstrDescriptor{.a = Cfg::kIn, .b = Cfg::kIn, .m = kGemmBlockM * kCtaGroup, .n = kGemmBlockN}.encode();
  }

  // ---- the MMA warp, before the cluster barrier
  // The input ring's barriers (an empty barrier counts `input_consumers`
  // arrivals: the commits, and whatever else reads a slot) and the
  // accumulator pipeline's.
  WSPIPE_HD void init_pipeline_barriers(std::uint32_t input_consumers, SourceLoc loc = SourceLoc::current()) const {
    Input::init_barriers(s.pipes.input, input_consumers, loc);
    Output::init_barriers(s.pipes.accum, loc);
  }
  // Those, the dealloc barrier (its count: the epilogue threads of the CTA,
  // or of both CTAs of the pair) and fence.mbarrier_init.
  WSPIPE_HD void init_barriers(std::uint32_t input_consumers, SourceLoc loc = SourceLoc::current()) const {
    init_pipeline_barriers(input_consumers, loc);
    TmemDeallocBarrier<B, kCtaGroup>(&s.pipes.tmem_dealloc).init(loc);
    B::fence_init(loc);
  }

  // ---- every warp, after the cluster barrier: its own cursors of the input ring
  WSPIPE_HD Input input() const { return Input(s.pipes.input, &s.tiles); }

  // ---- the MMA warp (both CTAs' for cta_group 2: the pair allocates
  // together): allocates Tensor Memory. Its enter() publishes the address.
  WSPIPE_HD MmaCtx mma_context(std::uint16_t complete_mask, SourceLoc loc = SourceLoc::current()) const {
    return MmaCtx::create(&s.pipes.tmem_addr, s.pipes.accum, &s.pipes.tmem_dealloc, complete_mask, loc);
  }
  // One K block's MMAs from input slot `slot` into the accumulator at TMEM
  // address `d_tmem`: the first adds to what the accumulator holds if
  // `accumulate`, the others always do. In one elected lane.
  WSPIPE_HD void mma_k_block(std::uint32_t d_tmem, std::uint32_t slot, bool accumulate,
                             SourceLoc loc = SourceLoc::current()) const {
    for (std::uint32_t kk = 0; kk < kGemmBlockKBytes; kk += kGemmMmaKBytes) {
      const std::uint64_t a_desc = gemm_smem_desc<B>(s.tiles.a[slot], kk);
      const std::uint64_t b_desc = gemm_smem_desc<B>(s.tiles.b[slot], kk);
      B::template mma<kKind, kCtaGroup>(d_tmem, a_desc, b_desc, instr_desc(), accumulate || kk > 0, loc);
    }
  }

  // ---- an epilogue warp: waits until the MMA warp has published the
  // address (EpiCtx::Sync), then reads it.
  WSPIPE_HD EpiCtx epilogue_context(std::uint16_t complete_mask, SourceLoc loc = SourceLoc::current()) const {
    EpiCtx::Sync::wait(loc);
    return read_epilogue_context(complete_mask, loc);
  }
  // The read alone: after EpiCtx::Sync::wait(), which orders the
  // allocation's store of the address before it.
  WSPIPE_HD EpiCtx read_epilogue_context(std::uint16_t complete_mask, SourceLoc loc = SourceLoc::current()) const {
    return EpiCtx::create(&s.pipes.tmem_addr, s.pipes.accum, &s.pipes.tmem_dealloc, complete_mask, loc);
  }
};

}  // namespace wspipe::examples
