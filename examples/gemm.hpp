// `gemm`: a persistent warp-specialized GEMM, D = A * B^T, written once
// against the Backend with the seed API of core/ (docs/pipeline-api.md):
//
//   warps 0-3  epilogue: one TMEM lane quarter each; load the accumulator
//              stage, release it early, store D (f32) to global memory
//   warp 4     load: TMA of the A and B tiles into an InputTilePipeline
//   warp 5     MMA: tcgen05.mma into an OutputTilePipeline stage, the input
//              slot freed by tcgen05.commit, the stage by a commit on accum-full
//
// A is M x K and B is N x K, both K-major (row-major with K contiguous),
// bf16 (kind::f16) or e4m3 (kind::f8f6f4), in 128-byte-swizzled tiles of
// 128 K-bytes. D is M x N f32, row-major. Each CTA computes 128 rows of a
// 64-column output tile per accumulator stage. Output tiles are spread over
// the clusters round-robin, several per CTA, so accumulator stages wrap.
//
// Cluster shapes (GemmConfig, core/cluster.hpp): dim.x by dim.y CTAs, 1x1,
// 2x1, 4x1 or 2x2. The cluster computes a block of dim.x * 128 rows by
// dim.y * 64 columns of D, CTA (x, y) the 128 x 64 tile at row block x and
// column block y. The CTAs of one row of the cluster (same x) need the same
// A tile: each loads 128 / dim.y of its rows and multicasts them along y.
// The CTAs of one column (same y) need the same B tile: each loads
// 64 / dim.x of its rows and multicasts them along x. With cta_group 2 the
// CTA pair (ranks 2k, 2k+1, adjacent in x) is one 256-row MMA issued by its
// even CTA over both CTAs' operands, each CTA holding half of B: the B half
// is shared by the dim.x / 2 CTAs of the column with the same x parity.
// Every CTA whose multicast writes into a CTA's slot must learn that the
// slot is free: the MMA's commit on input-empty goes to the whole cross
// (its row along x and its column along y, for both CTAs of a pair). The
// broken variants each plant one real bug of docs/hardware.md.
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
#include "examples/gemm_common.hpp"

namespace wspipe::examples {

enum class GemmBug : std::uint8_t {
  none,
  slot_release_on_issue,         // 2: a thread arrive frees the input slot right after the MMA is issued
  no_accum_release,              // 3: the epilogue never arrives on accum-empty
  release_before_wait_ld,        // 4: accum-empty arrive before tcgen05.wait::ld
  unelected_commit,              // 5: the whole warp commits on a count-1 barrier
  unelected_mma,                 // 6: the whole warp issues tcgen05.mma
  wrong_quarter,                 // 7: an epilogue warp loads a lane quarter it does not own
  read_addr_before_sync,         // 8: the epilogue reads the TMEM address before the named barrier
  early_dealloc,                 // 9: cta_group 2: each CTA deallocates after only its own epilogue
  no_cluster_sync_before_alloc,  // 10: cta_group 2 alloc before the cluster barrier
  alloc_after_relinquish,        // 11: a second tcgen05.alloc after relinquish_alloc_permit
  no_dealloc,                    // 12: TMEM never deallocated
  expect_tx_mismatch,            // 13: 16 bytes more expected than the loads deliver
  exit_before_drain,             // 15: the load warp exits without draining the input ring
  no_proxy_fence,                // 17: A written by ordinary stores, no fence.proxy.async
  pair_mask_unshifted,           // 16: cta_group 2, clusters of 4+: accum-full commit to 0x3, not the own pair
  // The epilogue computes its accumulator stage's TMEM column in the elected
  // lane only; the other lanes keep the allocation's base, so tcgen05.ld
  // (.sync.aligned) gets a different address in different lanes once a
  // tile lands in stage 1. Seen only in lane-divergence mode.
  non_uniform_tmem_addr,
  // Numeric bugs: no synchronization rule breaks, D is wrong, and only the
  // check after the run (result.mismatch) can tell.
  stale_accumulator,  // the first MMA of a tile accumulates onto the stage's previous tile
  missing_k_block,    // the MMA warp skips the last K block's MMAs (and still frees its slot)
  wrong_lane_half,    // the epilogue loads the upper 16 lanes of its quarter for the lower half too
};

// ClusterX by ClusterY CTAs per cluster (the old ClusterSize is ClusterX).
template <int CtaGroup, int ClusterX, int Stages, int AccumStages, ElemType In, int ClusterY = 1>
struct GemmConfig {
  static_assert(CtaGroup == 1 || CtaGroup == 2, "GemmConfig: CtaGroup must be 1 or 2");
  static_assert(ClusterX == 1 || ClusterX == 2 || ClusterX == 4, "GemmConfig: ClusterX must be 1, 2 or 4");
  static_assert(ClusterY == 1 || ClusterY == 2, "GemmConfig: ClusterY must be 1 or 2");
  static_assert(CtaGroup == 1 || ClusterX % 2 == 0,
                "GemmConfig: CtaGroup 2 needs an even ClusterX (the CTA pair is two CTAs adjacent in x)");
  static_assert(In == ElemType::bf16 || In == ElemType::e4m3, "GemmConfig: In must be bf16 or e4m3");
  static_assert(Stages >= 1 && Stages <= 4, "GemmConfig: Stages must be in [1, 4] (shared memory)");

  static constexpr int kCtaGroup = CtaGroup;
  static constexpr ClusterShape kShape{ClusterX, ClusterY, 1};  // host code
  // The same for device code, which cannot odr-use a static data member.
  WSPIPE_HD static constexpr ClusterShape shape() { return ClusterShape{ClusterX, ClusterY, 1}; }
  static constexpr int kClusterSize = ClusterX * ClusterY;
  static constexpr int kStages = Stages;
  static constexpr int kAccumStages = AccumStages;
  static constexpr ElemType kIn = In;
  static constexpr MmaKind kKind = In == ElemType::bf16 ? MmaKind::f16 : MmaKind::f8f6f4;
  static constexpr std::uint32_t kElemBytes = elem_bytes(In);
  static constexpr std::uint32_t kBlockK = kGemmBlockKBytes / kElemBytes;  // elements
  static constexpr std::uint32_t kClusterM = kGemmBlockM * ClusterX;       // D rows per cluster tile
  static constexpr std::uint32_t kClusterN = kGemmBlockN * ClusterY;       // D columns per cluster tile
  // A rows each CTA loads: its share among the CTAs of its row (along y),
  // which need the same A tile.
  static constexpr std::uint32_t kASharers = ClusterY;
  static constexpr std::uint32_t kARowsLoaded = kGemmBlockM / kASharers;
  // B rows each CTA's MMA reads from its own shared memory: the pair splits B.
  static constexpr std::uint32_t kBRowsRead = CtaGroup == 2 ? kGemmBlockN / 2 : kGemmBlockN;
  // B rows each CTA loads: its share of the B rows it reads, among the CTAs
  // of its column that read the same ones (ClusterX of them, or ClusterX / 2
  // for cta_group 2).
  static constexpr std::uint32_t kBSharers = CtaGroup == 2 ? ClusterX / 2 : ClusterX;
  static constexpr std::uint32_t kBRowsLoaded = kBRowsRead / kBSharers;
  static constexpr std::uint32_t kABytes = kGemmBlockM * kGemmBlockKBytes;
  static constexpr std::uint32_t kABytesLoaded = kARowsLoaded * kGemmBlockKBytes;
  static constexpr std::uint32_t kBBytesLoaded = kBRowsLoaded * kGemmBlockKBytes;
  // What one stage's full barrier expects: every byte of the CTA's A and B
  // tiles, whoever loaded them (on the even CTA only, for cta_group 2,
  // whose barrier both CTAs' bytes signal).
  static constexpr std::uint32_t kStageBytes = CtaGroup * (kABytes + kBRowsRead * kGemmBlockKBytes);
  // The commits that free an input slot: one from each MMA whose operands a
  // multicast of this CTA's load warp writes (the CTAs of its row along x
  // and of its column along y; for cta_group 2, the pairs' issuing CTAs).
  static constexpr std::uint32_t kInputConsumers =
      CtaGroup == 1 ? ClusterX + ClusterY - 1 : ClusterX / 2 + ClusterY - 1;
  // Where the MMA warp of `rank` commits to free a slot: every CTA whose
  // load warp wrote into the slots it read (0: its own CTA only, unicast).
  WSPIPE_HD static constexpr std::uint16_t input_commit_mask(std::uint32_t rank) {
    if (kClusterSize == 1) return 0;
    std::uint16_t mask = shape().mask_along_x(rank) | shape().mask_along_y(rank);
    if (CtaGroup == 2) mask |= shape().mask_along_y(rank ^ 1u);
    return mask;
  }
  // The multicast mask of this CTA's share of A (its row along y) and of B
  // (its column along x, the CTAs of its x parity for cta_group 2).
  WSPIPE_HD static constexpr std::uint16_t a_mask(std::uint32_t rank) { return shape().mask_along_y(rank); }
  WSPIPE_HD static constexpr std::uint16_t b_mask(std::uint32_t rank) {
    const std::uint16_t column = shape().mask_along_x(rank);
    if (CtaGroup == 1) return column;
    std::uint16_t same_parity = 0;
    for (std::uint32_t r = rank & 1u; r < 16; r += 2) same_parity |= static_cast<std::uint16_t>(1u << r);
    return column & same_parity;
  }
  // This CTA's slice of the A rows it needs (among its row's CTAs), and of
  // the B rows it reads (among their sharers).
  WSPIPE_HD static constexpr std::uint32_t a_slice(std::uint32_t rank) { return shape().y_of(rank); }
  WSPIPE_HD static constexpr std::uint32_t b_slice(std::uint32_t rank) {
    return CtaGroup == 2 ? shape().x_of(rank) / 2 : shape().x_of(rank);
  }
  static constexpr OutputPipelineConfig kOpc{AccumStages, kTmemColumns / AccumStages, CtaGroup};
  static_assert(kTmemColumns / AccumStages >= kGemmBlockN,
                "GemmConfig: AccumStages must leave each accumulator stage at least 64 columns");
};

static_assert(GemmConfig<1, 2, 1, 1, ElemType::bf16, 2>::input_commit_mask(3) == 0b1110);
static_assert(GemmConfig<2, 4, 1, 1, ElemType::bf16>::input_commit_mask(0) == 0b1111);
static_assert(GemmConfig<2, 4, 1, 1, ElemType::bf16>::b_mask(1) == 0b1010);
static_assert(GemmConfig<2, 2, 1, 1, ElemType::bf16, 2>::input_commit_mask(0) == 0b1111);

// A CTA's shared memory: the operand tiles and the pipelines' barriers that
// all three GEMM examples have (gemm_common.hpp), nothing else.
template <class Cfg>
struct GemmStorage {
  GemmOperandTiles<Cfg::kStages> tiles;
  GemmPipelineStorage<Cfg::kStages, Cfg::kAccumStages> pipes;
};

// What the kernel is given: tensor maps of A (box kBlockK x 128) and B (box
// kBlockK x kBRowsLoaded), A's global address for the ordinary-store path,
// and D.
template <Backend B>
struct GemmArgs {
  typename B::TmaMap a_map;
  typename B::TmaMap b_map;
  const std::uint8_t* a = nullptr;  // M x K elements, row-major
  float* d = nullptr;               // M x N, row-major
  std::uint32_t m = 0, n = 0, k = 0;
  GemmBug bug = GemmBug::none;
  // Load A with ordinary stores by the load warp (then fence.proxy.async)
  // instead of TMA: cta_group 1, clusters of 1 only.
  bool manual_a = false;
};

template <Backend B, class Cfg>
WSPIPE_HD void gemm_kernel(const GemmArgs<B>& args) {
  using Cta = GemmCta<B, Cfg, GemmStorage<Cfg>>;
  using MmaCtx = typename Cta::MmaCtx;
  using EpiCtx = typename Cta::EpiCtx;
  constexpr int G = Cfg::kCtaGroup;

  const Cta cta;
  auto& s = cta.s;
  const std::uint32_t warp = cta.warp, rank = cta.rank;
  const GemmBug bug = args.bug;
  // Bug 16 sends the accumulator's commit to the first pair, not its own.
  const std::uint16_t mma_complete_mask =
      G == 2 && bug == GemmBug::pair_mask_unshifted ? std::uint16_t{0b11} : cta.mma_complete_mask();

  const auto tiles = GemmTileSchedule::make<B>(args.m, args.n, Cfg::kClusterM, Cfg::kClusterN);
  const std::uint32_t k_blocks = args.k / Cfg::kBlockK;

  if (warp == kGemmMmaWarp) {
    if (bug == GemmBug::early_dealloc) {
      cta.init_pipeline_barriers(Cfg::kInputConsumers);
      B::elect_one([&] { B::init(s.pipes.tmem_dealloc, 128, BarrierName{"tmem_dealloc"}); });  // the bug: own CTA only
      B::fence_init();
    } else {
      cta.init_barriers(Cfg::kInputConsumers);
    }
  }
  if (!(warp == kGemmMmaWarp && bug == GemmBug::no_cluster_sync_before_alloc)) B::cluster_sync();

  auto input = cta.input();

  if (warp == kGemmLoadWarp) {
    for (std::uint32_t t = tiles.first; t < tiles.num_tiles; t += tiles.step) {
      const std::uint32_t row0 = tiles.row0(t), col0 = tiles.col0(t);
      for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
        auto stage = input.producer();
        const std::uint32_t i = stage.index();
        const std::int32_t kc = static_cast<std::int32_t>(kb * Cfg::kBlockK);
        if (args.manual_a) {
          // Ordinary stores into the swizzled layout the MMA reads; the
          // async proxy sees them only after fence.proxy.async.
          std::uint8_t* a = s.tiles.a[i];
          SmemView<B, std::uint8_t> tile(a, sizeof s.tiles.a[i]);
          B::for_each_lane([&](std::uint32_t lane) {
            for (std::uint32_t r = lane; r < kGemmBlockM; r += 32) {
              const std::uint8_t* src = args.a + (std::size_t{row0 + r} * args.k + kb * Cfg::kBlockK) * Cfg::kElemBytes;
              for (std::uint32_t c = 0; c < kGemmBlockKBytes; c += 16) {
                const std::uint32_t at =
                    swizzle_address(SmemSwizzle::b128, B::smem_addr(a) + r * 128 + c) - B::smem_addr(a);
                std::uint8_t* dst = tile.write_range(at, 16);
                for (std::uint32_t x = 0; x < 16; ++x) dst[x] = src[c + x];
              }
            }
          });
          if (bug != GemmBug::no_proxy_fence) B::fence_proxy_async();
          // Every lane's stores (and fence) before the elected lane's arrive
          // below publishes the stage: an arrive orders its own lane's only.
          B::syncwarp();
        }
        B::elect_one([&] {
          if (G == 1 || cta.leader) {
            std::uint32_t bytes = Cfg::kStageBytes - (args.manual_a ? Cfg::kABytes : 0);
            if (bug == GemmBug::expect_tx_mismatch) bytes += 16;
            stage.expect_bytes(bytes);
          }
          // This CTA's slice of A, into every CTA of its row along y at the
          // slice's offset; then its slice of the B rows it reads (the pair's
          // odd CTA reads the upper half for cta_group 2), into the CTAs of
          // its column that read them.
          if (!args.manual_a) {
            const std::uint32_t slice = Cfg::a_slice(rank);
            const TmaCoords ca{{kc, static_cast<std::int32_t>(row0 + slice * Cfg::kARowsLoaded)}};
            gemm_load_share<B, G, (Cfg::kASharers > 1)>(args.a_map, s.tiles.a[i] + slice * Cfg::kABytesLoaded,
                                                        stage.full_mbar(), ca, Cfg::a_mask(rank));
          }
          const std::uint32_t slice = Cfg::b_slice(rank);
          const std::uint32_t b_row0 = col0 + (G == 2 ? (rank & 1u) * Cfg::kBRowsRead : 0);
          const TmaCoords cb{{kc, static_cast<std::int32_t>(b_row0 + slice * Cfg::kBRowsLoaded)}};
          gemm_load_share<B, G, (Cfg::kBSharers > 1)>(args.b_map, s.tiles.b[i] + slice * Cfg::kBBytesLoaded,
                                                      stage.full_mbar(), cb, Cfg::b_mask(rank));
        });
      }
    }
    // No commit or peer multicast may still target this CTA when it exits.
    if (bug != GemmBug::exit_before_drain) input.drain();
  } else if (warp == kGemmMmaWarp) {
    MmaCtx ctx = cta.mma_context(mma_complete_mask);
    if (bug == GemmBug::no_cluster_sync_before_alloc) B::cluster_sync();
    if (bug == GemmBug::alloc_after_relinquish) {
      ctx.tmem().release_lock();
      TmemAllocation<B, G, 32>::allocate(&s.pipes.tmem_addr);  // the bug: the permit is gone
    }
    auto mainloop = [&] {
      if (G == 2 && !cta.leader) return;  // the pair's MMAs are the even CTA's
      for (std::uint32_t t = tiles.first; t < tiles.num_tiles; t += tiles.step) {
        auto out = ctx.output_pipeline().acquire_for_mma();
        for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
          auto in = input.consumer();
          const bool fresh_tile_bug = bug == GemmBug::stale_accumulator;
          auto issue = [&] {
            if (bug == GemmBug::missing_k_block && kb == k_blocks - 1) return;
            cta.mma_k_block(out.tmem.offset(), in.index(), kb > 0 || fresh_tile_bug);
          };
          if (bug == GemmBug::unelected_mma) {
            issue();
          } else {
            B::elect_one(issue);
          }
          if (bug == GemmBug::slot_release_on_issue) {
            B::elect_one([&] { B::arrive(in.empty_mbar()); });  // the bug: the MMAs may still be reading
          } else {
            in.template commit<G>(Cfg::input_commit_mask(rank));
          }
        }
        if (bug == GemmBug::unelected_commit) {
          B::template mma_commit<G>(ctx.output_pipeline().get_pipeline().full_mbar(out.index));
          ctx.output_pipeline().get_pipeline().producer_step();
        } else {
          ctx.output_pipeline().release_from_mma(out);
        }
      }
    };
    if (bug == GemmBug::no_dealloc) {
      MmaCtx::Sync::arrive();  // publishes the address, and then never deallocates
      mainloop();
    } else {
      auto scope = ctx.enter();  // its end: relinquish, wait for the epilogues, deallocate
      mainloop();
    }
  } else if (warp < kGemmEpilogueWarps) {
    if (bug != GemmBug::read_addr_before_sync) EpiCtx::Sync::wait();
    EpiCtx ctx = cta.read_epilogue_context(mma_complete_mask);
    if (bug == GemmBug::read_addr_before_sync) EpiCtx::Sync::wait();
    auto epilogue = [&] {
      for (std::uint32_t t = tiles.first; t < tiles.num_tiles; t += tiles.step) {
        const std::uint32_t row0 = tiles.row0(t), col0 = tiles.col0(t);
        auto stage = ctx.output_pipeline().consumer();
        const std::uint32_t quarter = bug == GemmBug::wrong_quarter ? (warp + 1) % 4 : warp % 4;
        auto base = stage.tmem().address().offset(32 * quarter, 0);
        if (bug == GemmBug::non_uniform_tmem_addr) {
          TmemAddress lane_base = ctx.tmem().address().offset(32 * quarter, 0);
          B::elect_one([&] { lane_base = base; });  // the bug: only the elected lane has the stage's column
          base = lane_base;
        }
        constexpr std::uint32_t kRepeat = kGemmBlockN / 8;  // 16x256b: 8 columns per repetition
        auto upper = B::template tmem_load<TmemShape::s16x256b, kRepeat>(base.raw());
        const std::uint32_t lower_lanes = bug == GemmBug::wrong_lane_half ? 0 : kTmemLowerRowLanes;
        auto lower = B::template tmem_load<TmemShape::s16x256b, kRepeat>(base.offset(lower_lanes, 0).raw());
        if (bug == GemmBug::release_before_wait_ld) stage.arrive_empty();
        B::tmem_wait_load();
        // Early release: the stage's cells are in registers; the MMA warp may
        // start the next tile in it while this warp stores D.
        if (bug != GemmBug::no_accum_release && bug != GemmBug::release_before_wait_ld) stage.arrive_empty();
        gemm_store_quarter<B>(args.d, args.n, row0 + 32 * (warp % 4), col0, upper, lower);
      }
    };
    if (bug == GemmBug::early_dealloc) {
      epilogue();
      B::arrive(s.pipes.tmem_dealloc);  // the bug: the peer CTA's dealloc does not wait for this warp
    } else {
      auto scope = ctx.enter();  // its end signals the dealloc barrier (both CTAs' for cta_group 2)
      epilogue();
    }
  }
}

}  // namespace wspipe::examples
