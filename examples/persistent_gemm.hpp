// `persistent-gemm`: a persistent warp-specialized GEMM in the layout of
// Modular MAX's structured sm100 kernels (docs/pipeline-api.md and
// docs/tile-scheduler.md), D = A * B^T, written once against the
// Backend with the seed API of core/ and its TileScheduler:
//
//   warps 0-3  epilogue: TMEM -> registers (one lane quarter each), the
//              accumulator stage released early, registers -> a shared
//              staging buffer -> fence.proxy.async -> TMA store, one bulk
//              async-group per store; a staging buffer is rewritten only
//              after bulk_wait_group_read, and the warp exits after
//              bulk_wait_group (every store done)
//   warp 4     scheduler: CLC requests with the throttle (TileScheduler)
//   warp 5     TMA load: A and B tiles into an InputTilePipeline; signals
//              the throttle once per work item
//   warp 6     MMA: tcgen05.mma into an OutputTilePipeline stage
//
// Every warp walks the TileScheduler's sequence of cluster tiles. A cluster
// of ClusterX x ClusterY CTAs (core/cluster.hpp: rank = x + ClusterX * y)
// computes a cluster tile of ClusterX*128 rows by ClusterY*64 columns of D;
// CTA (x, y) its 128 x 64 block at row block x, column block y. The CTAs of
// one column block (same y) share the B tile, each loading its share and
// multicasting it along x; the CTAs of one row block (same x) share the A
// tile, multicast along y. With cta_group 2 the CTAs (2k, 2k+1) of a row
// are a pair (ClusterX even): the even CTA issues 256-row MMAs over both
// CTAs' A and each CTA holds half of B's 64 rows.
//
// A is M x K and B is N x K, both K-major bf16 in 128-byte-swizzled tiles of
// 64 K-elements (the problem and its reference are gemm's: gemm_host.hpp);
// D is M x N f32, row-major, written by TMA stores of 32-row x 16-column boxes.
#pragma once

#include <cstdint>

#include "core/backend.hpp"
#include "core/cluster.hpp"
#include "core/input_pipeline.hpp"
#include "core/output_pipeline.hpp"
#include "core/smem.hpp"
#include "core/tcgen05.hpp"
#include "core/tile_scheduler.hpp"
#include "core/tma.hpp"
#include "core/tmem.hpp"
#include "core/warp_context.hpp"
#include "examples/gemm_common.hpp"

namespace wspipe::examples {

enum class PersistentGemmBug : std::uint8_t {
  none,
  throttle_not_signalled,  // the load warp never signals the throttle: the scheduler never requests
  response_read_early,     // the MMA warp decodes a CLC response before waiting on its full barrier
  store_source_reused,     // the epilogue rewrites a staging buffer without bulk_wait_group_read
  undrained_clc_ring,      // the scheduler warp exits without draining the CLC ring (bug 15)
  pair_mask_unshifted,     // bug 16: accum-full commit mask 0x3, not 0x3 << the pair's first rank
  accum_released_early,    // the epilogue arrives on accum-empty before its last fragment's tcgen05.ld
};

inline constexpr std::uint32_t kPgEpilogueWarps = 4;  // warps 0-3
inline constexpr std::uint32_t kPgSchedulerWarp = 4;
inline constexpr std::uint32_t kPgLoadWarp = 5;
inline constexpr std::uint32_t kPgMmaWarp = 6;
inline constexpr std::uint32_t kPgWarps = 7;
// The warps that walk the tile sequence and release CLC responses.
inline constexpr std::uint32_t kPgWorkerWarps = kPgEpilogueWarps + 2;
inline constexpr std::uint32_t kPgStoreCols = 16;                       // D columns per TMA store box
inline constexpr std::uint32_t kPgStoresPerTile = kGemmBlockN / kPgStoreCols;
inline constexpr std::uint32_t kPgStagingBuffers = 2;                   // per epilogue warp

template <int CtaGroup, std::uint32_t ClusterX, std::uint32_t ClusterY, int Stages, int AccumStages, int ClcStages>
struct PersistentGemmConfig {
  static constexpr ClusterShape kShape{ClusterX, ClusterY, 1};
  static_assert(CtaGroup == 1 || CtaGroup == 2, "PersistentGemmConfig: CtaGroup must be 1 or 2");
  static_assert(kShape.valid() && kShape.portable(), "PersistentGemmConfig: at most 8 CTAs per cluster");
  static_assert(64 % ClusterX == 0 && 128 % ClusterY == 0 && ClusterX <= 8 && ClusterY <= 8,
                "PersistentGemmConfig: ClusterX must divide B's 64 rows and ClusterY A's 128 (1, 2, 4 or 8)");
  static_assert(CtaGroup == 1 || ClusterX % 2 == 0,
                "PersistentGemmConfig: cta_group 2 pairs CTAs along x: ClusterX must be even");
  static_assert(Stages >= 1 && Stages <= 4, "PersistentGemmConfig: Stages must be in [1, 4] (shared memory)");
  static_assert(ClcStages >= 0 && ClcStages <= 4, "PersistentGemmConfig: ClcStages must be in [0, 4]");

  static constexpr int kCtaGroup = CtaGroup;
  static constexpr int kStages = Stages;
  static constexpr int kAccumStages = AccumStages;
  static constexpr int kClcStages = ClcStages;
  static constexpr ElemType kIn = ElemType::bf16;
  static constexpr std::uint32_t kBlockK = kGemmBlockKBytes / elem_bytes(kIn);  // 64 elements
  static constexpr std::uint32_t kClusterM = kGemmBlockM * ClusterX;            // D rows per cluster tile
  static constexpr std::uint32_t kClusterN = kGemmBlockN * ClusterY;            // D columns per cluster tile
  // Each CTA loads its share of the tiles it shares: A's 128 rows split
  // over the ClusterY CTAs of its row, B's 64 rows over ClusterX.
  static constexpr std::uint32_t kARowsLoaded = kGemmBlockM / ClusterY;
  static constexpr std::uint32_t kBRowsLoaded = kGemmBlockN / ClusterX;
  // B rows each CTA's MMA reads from its own shared memory.
  static constexpr std::uint32_t kBRowsRead = CtaGroup == 2 ? kGemmBlockN / 2 : kGemmBlockN;
  // What one stage's full barrier expects: its CTA's A and B, or, for
  // cta_group 2, on the pair's even CTA, both CTAs' (the loads with
  // .cta_group::2 signal the even CTA's barrier).
  static constexpr std::uint32_t kStageBytes = CtaGroup * (kGemmBlockM + kBRowsRead) * kGemmBlockKBytes;
  // The commits that free a CTA's input slot: one per MMA issuer that reads
  // what this CTA loaded: the row's ClusterY issuers (A) and the column's
  // ClusterX / cta_group (B), the CTA's own counted once (MAX:
  // CLUSTER_M / cta_group + CLUSTER_N - 1).
  static constexpr std::uint32_t kInputConsumers = ClusterX / CtaGroup + ClusterY - 1;
  // Which loads and commits reach other CTAs, known at compile time so that
  // a 1x1 kernel holds no multicast instruction: A is shared along y; B
  // along x (cta_group 2: among the CTAs of the same x parity); a commit
  // multicasts when other CTAs' loads fed the MMA, and always for a pair.
  static constexpr bool kAMulticast = ClusterY > 1;
  static constexpr bool kBMulticast = ClusterX / CtaGroup > 1;
  static constexpr bool kCommitMulticast = CtaGroup == 2 || ClusterX > 1 || ClusterY > 1;
  static constexpr OutputPipelineConfig kOpc{AccumStages, kTmemColumns / AccumStages, CtaGroup};
  static_assert(kTmemColumns / AccumStages >= kGemmBlockN,
                "PersistentGemmConfig: AccumStages must leave each accumulator stage at least 64 columns");
};

// gemm's shared memory (gemm_common.hpp; each CTA's B tile holds the rows
// its MMA reads) plus the epilogue's staging buffers and the scheduler's
// CLC ring, between the tiles and the barriers.
template <class Cfg>
struct PersistentGemmStorage {
  GemmOperandTiles<Cfg::kStages, Cfg::kBRowsRead> tiles;
  // Per epilogue warp: its 32 rows x kPgStoreCols columns of D, row-major.
  alignas(128) float staging[kPgEpilogueWarps][kPgStagingBuffers][32 * kPgStoreCols];
  TileSchedulerStorage<Cfg::kClcStages> sched;
  GemmPipelineStorage<Cfg::kStages, Cfg::kAccumStages> pipes;
};

// What the kernel is given: tensor maps of A (box 64 x kARowsLoaded), B
// (box 64 x kBRowsLoaded) and D (f32, box kPgStoreCols x 32), and the shape.
template <Backend B>
struct PersistentGemmArgs {
  typename B::TmaMap a_map;
  typename B::TmaMap b_map;
  typename B::TmaMap d_map;
  std::uint32_t m = 0, n = 0, k = 0;
  PersistentGemmBug bug = PersistentGemmBug::none;
};

// Where a cluster tile puts this CTA: its first row and column of D.
template <class Cfg>
struct PgTileCoords {
  std::uint32_t row0 = 0, col0 = 0;

  template <Backend B>
  WSPIPE_HD static PgTileCoords of(std::uint32_t tile, std::uint32_t n) {
    constexpr ClusterShape shape = Cfg::kShape;  // a copy: device code cannot name the host constant
    const std::uint32_t tiles_n = n / Cfg::kClusterN, rank = B::cta_rank();
    return {(tile / tiles_n) * Cfg::kClusterM + shape.x_of(rank) * kGemmBlockM,
            (tile % tiles_n) * Cfg::kClusterN + shape.y_of(rank) * kGemmBlockN};
  }
};

// The CTAs of `rank`'s row along x whose x has the parity `parity`: those
// that hold the same half of B under cta_group 2.
template <class Cfg>
WSPIPE_HD constexpr std::uint16_t pg_same_parity_along_x(std::uint32_t rank, std::uint32_t parity) {
  constexpr ClusterShape shape = Cfg::kShape;  // a copy: device code cannot name the host constant
  std::uint32_t m = 0;
  for (std::uint32_t x = parity; x < shape.x; x += 2) m |= 1u << shape.rank(x, shape.y_of(rank));
  return static_cast<std::uint16_t>(m);
}

// The mask of the MMA issuer's input commit: every CTA whose loads wrote
// into the operands it read (those CTAs' empty barriers count it).
template <class Cfg>
WSPIPE_HD constexpr std::uint16_t pg_input_commit_mask(std::uint32_t rank) {
  constexpr ClusterShape s = Cfg::kShape;  // a copy: device code cannot name the host constant
  if constexpr (Cfg::kCtaGroup == 1) {
    return static_cast<std::uint16_t>(s.mask_along_x(rank) | s.mask_along_y(rank));
  } else {
    const std::uint32_t even = rank & ~1u;
    return static_cast<std::uint16_t>(s.mask_along_x(rank) | s.mask_along_y(even) | s.mask_along_y(even + 1));
  }
}

template <Backend B, class Cfg>
WSPIPE_HD void persistent_gemm_kernel(const PersistentGemmArgs<B>& args) {
  using Cta = GemmCta<B, Cfg, PersistentGemmStorage<Cfg>>;
  using Scheduler = TileScheduler<B, Cfg::kClcStages>;
  constexpr int G = Cfg::kCtaGroup;
  constexpr ClusterShape shape = Cfg::kShape;

  B::check(B::cluster_size() == shape.size(), "the launch's cluster size is the config's cluster shape");
  const Cta cta;
  auto& s = cta.s;
  const std::uint32_t warp = cta.warp, rank = cta.rank;
  const PersistentGemmBug bug = args.bug;
  // tcgen05.commit of accum-full reaches the pair's two CTAs: ranks
  // 2k, 2k+1, i.e. 0x3 shifted to the pair's first rank (docs/hardware.md
  // bug 16 forgets the shift: the pair (2, 3) of a 4-CTA cluster signals
  // CTAs 0 and 1, whose epilogues then see an accum-full phase that is not
  // theirs and read a stage their own MMA is about to overwrite).
  std::uint16_t mma_complete_mask = static_cast<std::uint16_t>(1u << rank);
  if constexpr (G == 2) mma_complete_mask = bug == PersistentGemmBug::pair_mask_unshifted ? 0x3 : shape.pair_mask(rank);

  const std::uint32_t num_tiles = (args.m / Cfg::kClusterM) * (args.n / Cfg::kClusterN);
  const std::uint32_t k_blocks = args.k / Cfg::kBlockK;
  Scheduler sched(s.sched, num_tiles);

  if (warp == kPgMmaWarp) {
    cta.init_barriers(Cfg::kInputConsumers);
  } else if (warp == kPgSchedulerWarp) {
    Scheduler::init_barriers(s.sched, kPgWorkerWarps);
    B::fence_init();
  }
  // Every CTA's barriers exist before any peer multicasts or arrives into
  // them, and (cta_group 2) the peer runs before the pair's alloc.
  B::cluster_sync();

  auto input = cta.input();

  if (warp == kPgSchedulerWarp) {
    if (bug == PersistentGemmBug::undrained_clc_ring) {
      sched.run_requests();  // the bug: exits without waiting for the readers' arrivals on CTA 0
    } else {
      sched.run_scheduler();
    }
  } else if (warp == kPgLoadWarp) {
    const std::uint32_t x = shape.x_of(rank), y = shape.y_of(rank);
    // A: this CTA's share of its row block's 128 rows, into every CTA of
    // the row (same x).
    const std::uint16_t a_mask = shape.mask_along_y(rank);
    // B: this CTA's share of the column block's rows, into the CTAs that
    // read the same rows: the whole column (cta_group 1), or the CTAs of
    // the column that hold the same half (cta_group 2).
    const std::uint32_t b_half = G == 2 ? x % 2 : 0;
    const std::uint32_t b_share = G == 2 ? x / 2 : x;
    const std::uint16_t b_mask = G == 2 ? pg_same_parity_along_x<Cfg>(rank, b_half) : shape.mask_along_x(rank);
    for (TileWork w = sched.initial(); w.valid; w = sched.next(w)) {
      if (bug != PersistentGemmBug::throttle_not_signalled) sched.throttle_signal();
      const auto at = PgTileCoords<Cfg>::template of<B>(w.tile, args.n);
      for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
        auto stage = input.producer();
        const std::uint32_t i = stage.index();
        const auto kc = static_cast<std::int32_t>(kb * Cfg::kBlockK);
        B::elect_one([&] {
          if (G == 1 || cta.leader) stage.expect_bytes(Cfg::kStageBytes);
          const std::uint32_t a_row = y * Cfg::kARowsLoaded;
          const TmaCoords ca{{kc, static_cast<std::int32_t>(at.row0 + a_row)}};
          gemm_load_share<B, G, Cfg::kAMulticast>(args.a_map, s.tiles.a[i] + a_row * kGemmBlockKBytes,
                                                  stage.full_mbar(), ca, a_mask);
          const std::uint32_t b_row = b_share * Cfg::kBRowsLoaded;
          const TmaCoords cb{{kc, static_cast<std::int32_t>(at.col0 + b_half * Cfg::kBRowsRead + b_row)}};
          gemm_load_share<B, G, Cfg::kBMulticast>(args.b_map, s.tiles.b[i] + b_row * kGemmBlockKBytes,
                                                  stage.full_mbar(), cb, b_mask);
        });
      }
    }
    // No commit or peer multicast may still target this CTA when it exits.
    input.drain();
  } else if (warp == kPgMmaWarp) {
    auto ctx = cta.mma_context(mma_complete_mask);
    auto scope = ctx.enter();  // its end: relinquish, wait for the epilogues, deallocate
    const std::uint16_t commit_mask = pg_input_commit_mask<Cfg>(rank);
    for (TileWork w = sched.initial(); w.valid;) {
      if (G == 1 || cta.leader) {  // the pair's MMAs are the even CTA's
        auto out = ctx.output_pipeline().acquire_for_mma();
        for (std::uint32_t kb = 0; kb < k_blocks; ++kb) {
          auto in = input.consumer();
          B::elect_one([&] { cta.mma_k_block(out.tmem.offset(), in.index(), kb > 0); });
          in.template commit<G>(Cfg::kCommitMulticast ? commit_mask : 0);
        }
        ctx.output_pipeline().release_from_mma(out);
      }
      if constexpr (Scheduler::kUsesClc) {
        if (bug == PersistentGemmBug::response_read_early) {
          const TileWork n = sched.decode_response();  // the bug: the request may still be in flight
          sched.wait_response();
          sched.release_response();
          w = n;
          continue;
        }
      }
      w = sched.next(w);
    }
  } else if (warp < kPgEpilogueWarps) {
    auto ctx = cta.epilogue_context(mma_complete_mask);
    auto scope = ctx.enter();  // its end signals the dealloc barrier (both CTAs' for cta_group 2)
    const std::uint32_t quarter = warp % 4;
    std::uint32_t buffer = 0;
    for (TileWork w = sched.initial(); w.valid; w = sched.next(w)) {
      const auto at = PgTileCoords<Cfg>::template of<B>(w.tile, args.n);
      auto stage = ctx.output_pipeline().consumer();
      const TmemAddress base = stage.tmem().address().offset(32 * quarter, 0);
      using Frag = typename B::template Frag<kPgStoreCols>;
      Frag frag[kPgStoresPerTile];
      // The bug loads the last fragment after releasing the stage.
      const std::uint32_t loaded =
          bug == PersistentGemmBug::accum_released_early ? kPgStoresPerTile - 1 : kPgStoresPerTile;
      for (std::uint32_t j = 0; j < loaded; ++j)
        frag[j] = B::template tmem_load<TmemShape::s32x32b, kPgStoreCols>(base.offset(0, j * kPgStoreCols).raw());
      B::tmem_wait_load();
      // Early release: the stage's cells are in registers; the MMA warp may
      // start the next tile in it while this warp stores D.
      stage.arrive_empty();
      for (std::uint32_t j = loaded; j < kPgStoresPerTile; ++j) {
        frag[j] = B::template tmem_load<TmemShape::s32x32b, kPgStoreCols>(base.offset(0, j * kPgStoreCols).raw());
        B::tmem_wait_load();
      }
      for (std::uint32_t j = 0; j < kPgStoresPerTile; ++j, buffer = (buffer + 1) % kPgStagingBuffers) {
        float* staged = s.staging[quarter][buffer];
        // The store issued from this buffer kPgStagingBuffers stores ago
        // must have read it (PTX cp.async.bulk.wait_group.read: the source
        // may be reused after it) before the lanes overwrite it.
        if (bug != PersistentGemmBug::store_source_reused)
          B::elect_one([] { B::template bulk_wait_group_read<kPgStagingBuffers - 1>(); });
        B::syncwarp();
        SmemView<B, float> view(staged, 32 * kPgStoreCols);
        B::for_each_lane([&](std::uint32_t lane) {
          for (std::uint32_t r = 0; r < kPgStoreCols; ++r) {
            const TmemCell c = tmem_frag_cell(TmemShape::s32x32b, kPgStoreCols, lane, r);
            view.store(c.lane * kPgStoreCols + c.col, detail::float_from_bits(frag[j].reg(r)));
          }
        });
        // The TMA store reads the buffer through the async proxy (PTX
        // "Proxies": fence.proxy.async orders each lane's ordinary stores
        // before it); the warp converges before one lane issues it.
        B::fence_proxy_async();
        B::syncwarp();
        B::elect_one([&] {
          const TmaCoords cd{{static_cast<std::int32_t>(at.col0 + j * kPgStoreCols),
                              static_cast<std::int32_t>(at.row0 + 32 * quarter)}};
          B::template tma_store<2>(args.d_map, staged, cd);
          B::bulk_commit_group();
        });
      }
    }
    // Every store done before the CTA exits (its shared memory is the source).
    B::elect_one([] { B::template bulk_wait_group<0>(); });
  }
}

}  // namespace wspipe::examples
