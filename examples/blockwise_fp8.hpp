// `blockwise-fp8`: a persistent warp-specialized GEMM with blockwise FP8
// scaling, written once against the Backend with the seed API's per-K path
// (MmaKStage, EpilogueKContext; docs/pipeline-api.md
// "The per-K path"):
//
//   D[i][j] = sum over K blocks kb of a_scale[kb][i] * b_scale[kb][j / 128] *
//             (A[i, kb*128 .. kb*128+127] . B[j, kb*128 .. kb*128+127])
//
// A (M x K) and B (N x K) are e4m3, K-major, in gemm's 128B-swizzled tiles
// of one K block (128 elements). The A-scales, f32 [K/128][M], travel with
// A and B through the input pipeline: each stage's TMA loads also bring the
// CTA's 128 scales of that K block. The B-scales, f32 [K/128][ceil(N/128)],
// are read by the epilogue from global memory. D is M x N f32, row-major.
//
// Warp roles, tiles (128 x 64 of D per CTA), the round-robin schedule over
// clusters and the prologue are gemm's (examples/gemm_common.hpp). What
// differs is that the tensor core cannot apply a per-row, per-K-block scale,
// so the accumulator pipeline turns over once per K block, not once per tile:
//
//   warp 5     MMA: per K block takes an accumulator stage (per_k_stage),
//              writes a fresh partial product into it (accumulate = false on
//              the block's first MMA), frees the input slot with a commit,
//              and commits the stage to accum-full
//   warps 0-3  epilogue: per K block waits for the partial, reads its rows'
//              A-scales from the input slot, then frees the slot for its part
//              (arrive_input), loads the partial from TMEM and accumulates
//              partial * a_scale * b_scale in registers; D is stored once
//              per tile
//   warp 4     load: TMA of A, B and the A-scales per K block
//
// The epilogue never waits on input-full: the scales are visible to it
// because the MMA warp waited on input-full before the commit that completes
// accum-full. An input slot is refilled only after both the MMAs (commit)
// and every epilogue warp (arrive) are done with it: its empty barrier
// counts one commit plus cluster_size arrivals from each of the 4 epilogue
// warps (the count convention of MAX's kernel, docs/pipeline-api.md).
//
// Cluster shapes: cta_group 1 with clusters of 1, and cta_group 2 with CTA
// pairs: the even CTA's MMA warp issues 256-row MMAs over both CTAs' A and
// B halves; each CTA loads its own A-scales, the peer's loads signalling
// the even CTA's full barrier; the commits reach both CTAs' input-empty and
// accum-full, and each CTA's epilogue reads the scales in its own shared
// memory.
#pragma once

#include <cstdint>

#include "core/backend.hpp"
#include "core/input_pipeline.hpp"
#include "core/output_pipeline.hpp"
#include "core/smem.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"
#include "core/tmem.hpp"
#include "core/warp_context.hpp"
#include "examples/gemm_common.hpp"

namespace wspipe::examples {

enum class BlockwiseFp8Bug : std::uint8_t {
  none,
  early_scale_release,  // 14: the epilogue frees the input slot before reading its A-scales
  // Numeric (result.mismatch only): B's scale of K block 0 for every K block.
  wrong_scale,
};

inline constexpr std::uint32_t kFp8ScaleBlock = 128;  // K elements (and B columns) per scale

template <int CtaGroup, int Stages, int AccumStages>
struct BlockwiseFp8Config {
  static_assert(CtaGroup == 1 || CtaGroup == 2, "BlockwiseFp8Config: CtaGroup must be 1 or 2");
  static_assert(Stages >= 1 && Stages <= 4, "BlockwiseFp8Config: Stages must be in [1, 4] (shared memory)");

  static constexpr int kCtaGroup = CtaGroup;
  static constexpr int kClusterSize = CtaGroup;  // a cluster is one CTA, or one CTA pair
  static constexpr int kStages = Stages;
  static constexpr int kAccumStages = AccumStages;
  static constexpr ElemType kIn = ElemType::e4m3;
  static constexpr std::uint32_t kBlockK = kGemmBlockKBytes;  // e4m3: one K block is one 128-byte row
  static_assert(kBlockK == kFp8ScaleBlock, "BlockwiseFp8Config: one input stage must be one scale block of K");
  static constexpr std::uint32_t kClusterM = kGemmBlockM * CtaGroup;
  // B rows each CTA loads and its MMA operand holds: the pair splits B.
  static constexpr std::uint32_t kBRowsLoaded = kGemmBlockN / CtaGroup;
  static constexpr std::uint32_t kABytes = kGemmBlockM * kGemmBlockKBytes;
  static constexpr std::uint32_t kBBytesLoaded = kBRowsLoaded * kGemmBlockKBytes;
  static constexpr std::uint32_t kScaleBytes = kGemmBlockM * sizeof(float);
  // What one stage's full barrier expects: every CTA's loads of the stage,
  // on the even CTA's barrier for cta_group 2.
  static constexpr std::uint32_t kStageBytes = CtaGroup * (kABytes + kBBytesLoaded + kScaleBytes);
  // Who frees an input slot: the MMA warp's one commit (multicast to both
  // CTAs of the pair), and lanes 0 .. cluster_size-1 of each epilogue warp
  // of this CTA, once they hold their A-scales.
  static constexpr std::uint32_t kInputEmptyCount = 1 + CtaGroup * kGemmEpilogueWarps;
  static constexpr std::uint16_t kInputCommitMask = CtaGroup == 2 ? 0b11 : 0;
  static constexpr OutputPipelineConfig kOpc{AccumStages, kTmemColumns / AccumStages, CtaGroup};
  static_assert(kTmemColumns / AccumStages >= kGemmBlockN,
                "BlockwiseFp8Config: AccumStages must leave each accumulator stage at least 64 columns");
};

// gemm's shared memory (gemm_common.hpp) plus each input stage's A-scales,
// between the tiles and the barriers.
template <class Cfg>
struct BlockwiseFp8Storage {
  GemmOperandTiles<Cfg::kStages> tiles;
  alignas(128) float a_scales[Cfg::kStages][kGemmBlockM];  // this CTA's rows; TMA needs 128-byte alignment
  GemmPipelineStorage<Cfg::kStages, Cfg::kAccumStages> pipes;
};

// What the kernel is given: tensor maps of A (box 128 x 128), B (box 128 x
// kBRowsLoaded) and the A-scales (box 128 rows x 1 K block), the B-scales,
// and D.
template <Backend B>
struct BlockwiseFp8Args {
  typename B::TmaMap a_map;
  typename B::TmaMap b_map;
  typename B::TmaMap a_scale_map;
  const float* b_scales = nullptr;  // [K/128][ceil(N/128)], row-major
  float* d = nullptr;               // M x N, row-major
  std::uint32_t m = 0, n = 0, k = 0;
  BlockwiseFp8Bug bug = BlockwiseFp8Bug::none;
};

template <Backend B, class Cfg>
WSPIPE_HD void blockwise_fp8_kernel(const BlockwiseFp8Args<B>& args) {
  using Cta = GemmCta<B, Cfg, BlockwiseFp8Storage<Cfg>>;
  constexpr int G = Cfg::kCtaGroup;

  const Cta cta;
  auto& s = cta.s;
  const std::uint32_t warp = cta.warp, rank = cta.rank;
  const std::uint16_t mma_complete_mask = cta.mma_complete_mask();

  const auto tiles = GemmTileSchedule::make<B>(args.m, args.n, Cfg::kClusterM);
  const std::uint32_t k_blocks = args.k / Cfg::kBlockK;
  const std::uint32_t b_scale_cols = (args.n + kFp8ScaleBlock - 1) / kFp8ScaleBlock;

  if (warp == kGemmMmaWarp) cta.init_barriers(Cfg::kInputEmptyCount);
  B::cluster_sync();

  // Every warp's own cursors: the load warp's producer side, the MMA warp's
  // consumer side, and the epilogue's copy of the consumer cursor, which
  // follows the MMA warp's one K block at a time to find the A-scales.
  auto input = cta.input();

  if (warp == kGemmLoadWarp) {
    for (std::uint32_t t = tiles.first; t < tiles.num_tiles; t += tiles.step) {
      const std::uint32_t row0 = tiles.row0(t), col0 = tiles.col0(t);
      for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
        auto stage = input.producer();
        const std::uint32_t i = stage.index();
        const auto kc = static_cast<std::int32_t>(kb * Cfg::kBlockK);
        B::elect_one([&] {
          if (G == 1 || cta.leader) stage.expect_bytes(Cfg::kStageBytes);
          const TmaCoords ca{{kc, static_cast<std::int32_t>(row0)}};
          // This CTA's half of B for the pair (rank is 0 for cta_group 1).
          const TmaCoords cb{{kc, static_cast<std::int32_t>(col0 + rank * Cfg::kBRowsLoaded)}};
          const TmaCoords cs{{static_cast<std::int32_t>(row0), static_cast<std::int32_t>(kb)}};
          B::template tma_load<G>(args.a_map, s.tiles.a[i], stage.full_mbar(), ca);
          B::template tma_load<G>(args.b_map, s.tiles.b[i], stage.full_mbar(), cb);
          B::template tma_load<G>(args.a_scale_map, s.a_scales[i], stage.full_mbar(), cs);
        });
      }
    }
    // No commit may still target this CTA when it exits.
    input.drain();
  } else if (warp == kGemmMmaWarp) {
    auto ctx = cta.mma_context(mma_complete_mask);
    auto scope = ctx.enter();           // its end: relinquish, wait for the epilogues, deallocate
    if (G == 2 && !cta.leader) return;  // the pair's MMAs are the even CTA's
    for (std::uint32_t t = tiles.first; t < tiles.num_tiles; t += tiles.step) {
      for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
        auto out = ctx.per_k_stage();  // its end commits the stage to accum-full
        auto in = input.consumer();
        // A fresh partial product per K block: the epilogue scales and sums them.
        B::elect_one([&] { cta.mma_k_block(out.tmem().offset(), in.index(), false); });
        in.template commit<G>(Cfg::kInputCommitMask);
      }
    }
  } else if (warp < kGemmEpilogueWarps) {
    auto ctx = cta.epilogue_context(mma_complete_mask);
    auto scope = ctx.enter();  // its end signals the dealloc barrier (both CTAs' for cta_group 2)
    // This warp's fragment of a 128 x 64 tile: rows 0-15 and 16-31 of its
    // lane quarter as two tcgen05.ld.16x256b.x8, 32 registers per thread each.
    constexpr std::uint32_t kRepeat = kGemmBlockN / tmem_shape_cols(TmemShape::s16x256b);
    constexpr std::uint32_t kRegs = tmem_regs(TmemShape::s16x256b, kRepeat);
    const std::uint32_t quarter = warp % 4;
    for (std::uint32_t t = tiles.first; t < tiles.num_tiles; t += tiles.step) {
      const std::uint32_t row0 = tiles.row0(t) + 32 * quarter, col0 = tiles.col0(t);
      typename B::template Frag<kRegs> acc_upper{}, acc_lower{};  // f32 bits; +0.0f
      for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
        auto k = ctx.per_k_stage(input);  // its end: step the input cursor, arrive on accum-empty, step
        // A thread's 16x256b registers cover rows lane/4 + 8j of the quarter
        // (j = 0, 1 in rows 0-15, j = 2, 3 in rows 16-31): one A-scale each.
        typename B::template Frag<4> a_scale;
        auto read_a_scales = [&] {
          const float* sa =
              SmemView<B, const float>(s.a_scales[k.input_stage_index()], kGemmBlockM).read_range(32 * quarter, 32);
          B::for_each_lane([&](std::uint32_t lane) {
            for (std::uint32_t j = 0; j < 4; ++j) a_scale.set(j, detail::float_bits(sa[lane / 4 + 8 * j]));
          });
        };
        if (args.bug == BlockwiseFp8Bug::early_scale_release) {
          k.arrive_input();  // the bug: the next TMA load into the slot may overwrite the scales being read
          read_a_scales();
        } else {
          read_a_scales();
          k.arrive_input();  // (its syncwarp orders every lane's reads before the lanes that arrive)
        }
        const std::uint32_t scale_kb = args.bug == BlockwiseFp8Bug::wrong_scale ? 0 : kb;
        const float b_scale = args.b_scales[std::size_t{scale_kb} * b_scale_cols + col0 / kFp8ScaleBlock];
        const auto upper = k.tmem().template load_upper<B, kRepeat>();
        const auto lower = k.tmem().template load_lower<B, kRepeat>();
        B::tmem_wait_load();
        B::for_each_lane([&](std::uint32_t) {
          for (std::uint32_t r = 0; r < kRegs; ++r) {
            // Register r's row is lane/4 plus thread 0's row of r, so its
            // scale's index is known at compile time and a_scale stays in
            // registers.
            const std::uint32_t j = tmem_frag_cell(TmemShape::s16x256b, kRepeat, 0, r).lane / 8;
            auto fma = [&](auto& acc, const auto& part, std::uint32_t scale_reg) {
              const float scale = detail::float_from_bits(a_scale.reg(scale_reg)) * b_scale;
              const float sum = detail::float_from_bits(acc.reg(r)) + detail::float_from_bits(part.reg(r)) * scale;
              acc.set(r, detail::float_bits(sum));
            };
            fma(acc_upper, upper, j);
            fma(acc_lower, lower, 2 + j);
          }
        });
      }
      gemm_store_quarter<B>(args.d, args.n, row0, col0, acc_upper, acc_lower);
    }
  }
}

}  // namespace wspipe::examples
