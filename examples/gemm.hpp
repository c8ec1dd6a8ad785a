// `gemm`: a persistent warp-specialized GEMM, D = A * B^T, written once
// against the Backend with the seed API of core/ (HARDWARE.md §5):
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
// Cluster shapes (GemmConfig): cta_group 1 with clusters of 1; cta_group 1
// with clusters of 2, the CTAs of a cluster computing 256 rows of one tile
// and sharing its B tile (each loads half and multicasts it to both); and
// cta_group 2, the CTA pair's even CTA issuing 256-row MMAs over both CTAs'
// operands. The broken variants each plant one real bug of HARDWARE.md §6.
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

inline constexpr std::uint32_t kGemmBlockM = 128;       // D rows per CTA
inline constexpr std::uint32_t kGemmBlockN = 64;        // D columns per output tile
inline constexpr std::uint32_t kGemmBlockKBytes = 128;  // K bytes per stage: one 128B-swizzled row
inline constexpr std::uint32_t kGemmMmaKBytes = 32;     // K bytes per tcgen05.mma
inline constexpr std::uint32_t kGemmEpilogueWarps = 4;
inline constexpr std::uint32_t kGemmLoadWarp = 4;
inline constexpr std::uint32_t kGemmMmaWarp = 5;
inline constexpr std::uint32_t kGemmWarps = 6;

template <int CtaGroup, int ClusterSize, int Stages, int AccumStages, ElemType In>
struct GemmConfig {
  static_assert(CtaGroup == 1 || CtaGroup == 2, "GemmConfig: CtaGroup must be 1 or 2");
  static_assert(ClusterSize == 1 || ClusterSize == 2, "GemmConfig: ClusterSize must be 1 or 2");
  static_assert(CtaGroup == 1 || ClusterSize == 2, "GemmConfig: CtaGroup 2 needs a cluster of 2 (the CTA pair)");
  static_assert(In == ElemType::bf16 || In == ElemType::e4m3, "GemmConfig: In must be bf16 or e4m3");
  static_assert(Stages >= 1 && Stages <= 4, "GemmConfig: Stages must be in [1, 4] (shared memory)");

  static constexpr int kCtaGroup = CtaGroup;
  static constexpr int kClusterSize = ClusterSize;
  static constexpr int kStages = Stages;
  static constexpr int kAccumStages = AccumStages;
  static constexpr ElemType kIn = In;
  static constexpr MmaKind kKind = In == ElemType::bf16 ? MmaKind::f16 : MmaKind::f8f6f4;
  static constexpr std::uint32_t kElemBytes = elem_bytes(In);
  static constexpr std::uint32_t kBlockK = kGemmBlockKBytes / kElemBytes;  // elements
  static constexpr std::uint32_t kClusterM = kGemmBlockM * ClusterSize;    // D rows per cluster tile
  // B rows each CTA loads: the pair splits B for cta_group 2; a cluster of
  // two cta_group-1 CTAs shares B, each loading half for both.
  static constexpr std::uint32_t kBRowsLoaded = ClusterSize == 2 ? kGemmBlockN / 2 : kGemmBlockN;
  // B rows each CTA's MMA reads from its own shared memory.
  static constexpr std::uint32_t kBRowsRead = CtaGroup == 2 ? kGemmBlockN / 2 : kGemmBlockN;
  static constexpr std::uint32_t kABytes = kGemmBlockM * kGemmBlockKBytes;
  static constexpr std::uint32_t kBBytesLoaded = kBRowsLoaded * kGemmBlockKBytes;
  // What one stage's full barrier expects (on the even CTA only, for
  // cta_group 2, whose barrier both CTAs' loads signal).
  static constexpr std::uint32_t kStageBytes =
      CtaGroup == 2 ? 2 * (kABytes + kBBytesLoaded) : kABytes + kGemmBlockN * kGemmBlockKBytes;
  // The commits that free an input slot: each CTA's MMA commits to both
  // CTAs of a shared-B cluster; the pair's one MMA warp commits once.
  static constexpr std::uint32_t kInputConsumers = (CtaGroup == 1 && ClusterSize == 2) ? 2 : 1;
  static constexpr std::uint16_t kInputCommitMask = ClusterSize == 2 ? 0b11 : 0;
  static constexpr OutputPipelineConfig kOpc{AccumStages, kTmemColumns / AccumStages, CtaGroup};
  static_assert(kTmemColumns / AccumStages >= kGemmBlockN,
                "GemmConfig: AccumStages must leave each accumulator stage at least 64 columns");
};

template <class Cfg>
struct GemmStorage {
  alignas(1024) std::uint8_t a[Cfg::kStages][kGemmBlockM * kGemmBlockKBytes];
  alignas(1024) std::uint8_t b[Cfg::kStages][kGemmBlockN * kGemmBlockKBytes];
  SharedMemBarrier input[2 * Cfg::kStages];
  SharedMemBarrier accum[2 * Cfg::kAccumStages];
  SharedMemBarrier tmem_dealloc;
  std::uint32_t tmem_addr;
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

// The shared-memory descriptor of a K-major 128B-swizzled tile: 8-row
// groups 1024 bytes apart; the K offset of each MMA moves the start within
// the swizzled row.
template <Backend B>
WSPIPE_HD std::uint64_t gemm_smem_desc(const void* tile, std::uint32_t k_bytes) {
  return SmemDescriptor{.start = B::smem_addr(tile) + k_bytes, .lbo = 16, .sbo = 1024, .swizzle = SmemSwizzle::b128}
      .encode();
}

// The persistent schedule: output tiles of cluster_m x kGemmBlockN, in
// row-major order, taken by the clusters round-robin. Every warp of a
// cluster walks the same sequence.
struct GemmTileSchedule {
  std::uint32_t tiles_n = 0, num_tiles = 0, first = 0, step = 1;
  std::uint32_t cluster_m = 0, cta_row = 0;  // this CTA's first row within a cluster tile

  template <Backend B>
  WSPIPE_HD static GemmTileSchedule make(std::uint32_t m, std::uint32_t n, std::uint32_t cluster_m) {
    GemmTileSchedule s;
    s.tiles_n = n / kGemmBlockN;
    s.num_tiles = (m / cluster_m) * s.tiles_n;
    s.first = B::cluster_idx();
    s.step = B::num_clusters();
    s.cluster_m = cluster_m;
    s.cta_row = B::cta_rank() * kGemmBlockM;
    return s;
  }
  // Tile t's first row of D in this CTA, and its first column.
  WSPIPE_HD std::uint32_t row0(std::uint32_t t) const { return (t / tiles_n) * cluster_m + cta_row; }
  WSPIPE_HD std::uint32_t col0(std::uint32_t t) const { return (t % tiles_n) * kGemmBlockN; }
};

template <Backend B, class Cfg>
WSPIPE_HD void gemm_kernel(const GemmArgs<B>& args) {
  using Storage = GemmStorage<Cfg>;
  struct Tiles {
    Storage* s;
  };
  using Input = InputTilePipeline<B, Tiles, Cfg::kStages, 1>;
  using MmaCtx = MmaWarpContext<B, Cfg::kOpc, 32, 128>;
  using EpiCtx = EpilogueWarpContext<B, Cfg::kOpc, 32, 128>;
  constexpr int G = Cfg::kCtaGroup;

  Storage& s = B::template shared_storage<Storage>();
  const std::uint32_t warp = B::warp_idx();
  const std::uint32_t rank = B::cta_rank();
  const bool leader = (rank & 1u) == 0;  // the pair's even CTA issues its MMAs
  const GemmBug bug = args.bug;
  const std::uint16_t mma_complete_mask = G == 2 ? 0b11 : static_cast<std::uint16_t>(1u << rank);

  const auto tiles = GemmTileSchedule::make<B>(args.m, args.n, Cfg::kClusterM);
  const std::uint32_t k_blocks = args.k / Cfg::kBlockK;

  if (warp == kGemmMmaWarp) {
    Input::init_barriers(s.input, Cfg::kInputConsumers);
    OutputTilePipeline<B, Cfg::kOpc>::init_barriers(s.accum);
    if (bug == GemmBug::early_dealloc) {
      B::elect_one([&] { B::init(s.tmem_dealloc, 128, BarrierName{"tmem_dealloc"}); });  // the bug: own CTA only
    } else {
      TmemDeallocBarrier<B, G>(&s.tmem_dealloc).init();
    }
    B::fence_init();
  }
  if (!(warp == kGemmMmaWarp && bug == GemmBug::no_cluster_sync_before_alloc)) B::cluster_sync();

  Input input(s.input, Tiles{&s});

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
          SmemView<B, std::uint8_t> tile(s.a[i], sizeof s.a[i]);
          B::for_each_lane([&](std::uint32_t lane) {
            for (std::uint32_t r = lane; r < kGemmBlockM; r += 32) {
              const std::uint8_t* src = args.a + (std::size_t{row0 + r} * args.k + kb * Cfg::kBlockK) * Cfg::kElemBytes;
              for (std::uint32_t c = 0; c < kGemmBlockKBytes; c += 16) {
                const std::uint32_t at =
                    swizzle_address(SmemSwizzle::b128, B::smem_addr(s.a[i]) + r * 128 + c) - B::smem_addr(s.a[i]);
                std::uint8_t* dst = tile.write_range(at, 16);
                for (std::uint32_t x = 0; x < 16; ++x) dst[x] = src[c + x];
              }
            }
          });
          if (bug != GemmBug::no_proxy_fence) B::fence_proxy_async();
        }
        B::elect_one([&] {
          if (G == 1 || leader) {
            std::uint32_t bytes = Cfg::kStageBytes - (args.manual_a ? Cfg::kABytes : 0);
            if (bug == GemmBug::expect_tx_mismatch) bytes += 16;
            stage.expect_bytes(bytes);
          }
          const TmaCoords ca{{kc, static_cast<std::int32_t>(row0)}};
          if (!args.manual_a) B::template tma_load<G>(args.a_map, s.a[i], stage.full_mbar(), ca);
          if constexpr (Cfg::kClusterSize == 2 && G == 1) {
            // Half of the shared B tile, into both CTAs at this half's offset.
            const TmaCoords cb{{kc, static_cast<std::int32_t>(col0 + rank * Cfg::kBRowsLoaded)}};
            B::template tma_load_multicast<1>(args.b_map, s.b[i] + rank * Cfg::kBBytesLoaded, stage.full_mbar(), cb,
                                              0b11);
          } else {
            const TmaCoords cb{{kc, static_cast<std::int32_t>(col0 + (G == 2 ? rank * Cfg::kBRowsLoaded : 0))}};
            B::template tma_load<G>(args.b_map, s.b[i], stage.full_mbar(), cb);
          }
        });
      }
    }
    // No commit or peer multicast may still target this CTA when it exits.
    if (bug != GemmBug::exit_before_drain) input.drain();
  } else if (warp == kGemmMmaWarp) {
    MmaCtx ctx = MmaCtx::create(&s.tmem_addr, s.accum, &s.tmem_dealloc, mma_complete_mask);
    if (bug == GemmBug::no_cluster_sync_before_alloc) B::cluster_sync();
    if (bug == GemmBug::alloc_after_relinquish) {
      ctx.tmem().release_lock();
      TmemAllocation<B, G, 32>::allocate(&s.tmem_addr);  // the bug: the permit is gone
    }
    auto mainloop = [&] {
      if (G == 2 && !leader) return;  // the pair's MMAs are the even CTA's
      const std::uint32_t idesc =
          InstrDescriptor{.a = Cfg::kIn, .b = Cfg::kIn, .m = kGemmBlockM * G, .n = kGemmBlockN}.encode();
      for (std::uint32_t t = tiles.first; t < tiles.num_tiles; t += tiles.step) {
        auto out = ctx.output_pipeline().acquire_for_mma();
        for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
          auto in = input.consumer();
          const bool fresh_tile_bug = bug == GemmBug::stale_accumulator;
          auto issue = [&] {
            if (bug == GemmBug::missing_k_block && kb == k_blocks - 1) return;
            for (std::uint32_t kk = 0; kk < kGemmBlockKBytes; kk += kGemmMmaKBytes) {
              B::template mma<Cfg::kKind, G>(out.tmem.offset(), gemm_smem_desc<B>(s.a[in.index()], kk),
                                             gemm_smem_desc<B>(s.b[in.index()], kk), idesc,
                                             kb > 0 || kk > 0 || fresh_tile_bug);
            }
          };
          if (bug == GemmBug::unelected_mma) {
            issue();
          } else {
            B::elect_one(issue);
          }
          if (bug == GemmBug::slot_release_on_issue) {
            B::elect_one([&] { B::arrive(in.empty_mbar()); });  // the bug: the MMAs may still be reading
          } else {
            in.template commit<G>(Cfg::kInputCommitMask);
          }
        }
        if (bug == GemmBug::unelected_commit) {
          B::template mma_commit<G>(ctx.output_pipeline().get_pipeline().producer_mbar(out.index));
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
    EpiCtx ctx = EpiCtx::create(&s.tmem_addr, s.accum, &s.tmem_dealloc, mma_complete_mask);
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
        B::for_each_lane([&](std::uint32_t lane) {
          for (std::uint32_t r = 0; r < tmem_regs(TmemShape::s16x256b, kRepeat); ++r) {
            const TmemCell c = tmem_frag_cell(TmemShape::s16x256b, kRepeat, lane, r);
            const std::uint32_t row = row0 + 32 * (warp % 4) + c.lane;
            const std::size_t at = std::size_t{row} * args.n + col0 + c.col;
            args.d[at] = detail::float_from_bits(upper.reg(r));
            args.d[at + std::size_t{kTmemLowerRowLanes} * args.n] = detail::float_from_bits(lower.reg(r));
          }
        });
      }
    };
    if (bug == GemmBug::early_dealloc) {
      epilogue();
      B::arrive(s.tmem_dealloc);  // the bug: the peer CTA's dealloc does not wait for this warp
    } else {
      auto scope = ctx.enter();  // its end signals the dealloc barrier (both CTAs' for cta_group 2)
      epilogue();
    }
  }
}

}  // namespace wspipe::examples
