// Tensor Memory's room (internal; tmem.cpp): cells, live allocations, the
// allocation permit, the cta_group::2 collectives, each warp's tcgen05.ld
// and st in flight, the deferred accumulators of the tensor core's D, and
// the race checker's tiling of TMEM cells. The rules named tmem.*.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/memory.hpp"
#include "backends/emu/runtime/models.hpp"
#include "backends/emu/runtime/room.hpp"
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

// Race-checker shadow blocks (ShadowTable) of TMEM: tiles of 16 lanes x 16
// columns, the largest unit the usual accesses cover whole: an MMA writes D
// as a rectangle of 16-lane groups (M = 64 uses 16 lanes per quarter) and
// of columns in multiples of 16, and a tcgen05.ld/st covers 16 or 32 lanes
// and, in the kernels here, 16 or more columns. (Shared memory's:
// kSmemShadowBlock, clock.hpp.)
constexpr std::uint32_t kTmemShadowLanes = 16;
constexpr std::uint32_t kTmemShadowCols = 16;
constexpr std::uint32_t kTmemShadowBlock = kTmemShadowLanes * kTmemShadowCols;

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

struct AsyncOp;

// A CTA's Tensor Memory: cell values (index lane * 512 + column) and
// shadows (tmem_shadow_index), created on first use; live allocations; the
// allocation permit; the pair's collective (used in the pair's even CTA).
struct TmemCta {
  std::unique_ptr<std::uint32_t[]> cells;  // kTmemLanes * kTmemColumns once created
  ShadowTable<kTmemShadowBlock> shadow;
  std::vector<TmemBlock> live;
  bool relinquished = false;
  std::uint32_t last_alloc_cols = 0;
  PairOp pair;
};

// A warp's tcgen05.ld / st issued and waited for (its loads waited for are
// WarpLanes::ld_waited, which the inline fragment path reads), the columns
// of those not waited for, and where the latest load was issued; the
// source fragments of its stores not yet waited for, with their registers
// at issue (WarpLanes::st_sources counts them).
struct TmemWarp {
  std::uint64_t ld_issued = 0, st_issued = 0, st_waited = 0;
  std::uint32_t pending_col0 = 0, pending_col1 = 0;
  SourceLoc ld_loc{};
  struct StSource {
    std::uint64_t st;           // the store's number (st_issued after it)
    const std::uint32_t* regs;  // the fragment's, thread-major
    std::uint32_t per;          // registers per thread
    std::size_t copy;           // where st_copies holds its 32 * per registers at issue
    SourceLoc loc;
  };
  std::vector<StSource> st_sources;
  std::vector<std::uint32_t> st_copies;
};

// A CTA's TMEM cells (kTmemLanes * kTmemColumns, zeroed) and shadow table
// (empty) from this thread's spares, and back to them for the next run,
// leaving them empty (buffers.cpp; world.hpp says why buffers are kept).
std::unique_ptr<std::uint32_t[]> take_tmem_cells();
ShadowTable<kTmemShadowBlock> take_tmem_shadow();
void keep_tmem_buffers(std::unique_ptr<std::uint32_t[]>& cells, ShadowTable<kTmemShadowBlock>& shadow);

class TmemRoom : Room {
 public:
  explicit TmemRoom(World& world);
  ~TmemRoom();  // the CTAs' buffers go back to the thread's spares

  // The operations (ops.cpp routes them here). ld: into
  // out[thread * regs + reg]; returns the load's sequence number in the
  // warp (the fragment's token).
  void alloc(int cta_group, std::uint32_t* dst, std::uint32_t cols, const SourceLoc& loc);
  void relinquish(int cta_group, const SourceLoc& loc);
  void dealloc(int cta_group, std::uint32_t taddr, std::uint32_t cols, const SourceLoc& loc);
  std::uint64_t ld(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                   std::uint32_t* out, const SourceLoc& loc);
  // st: returns the store's sequence number in the warp (0: not issued).
  std::uint64_t st(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                   const std::uint32_t* in, const SourceLoc& loc);
  void wait(bool loads, const SourceLoc& loc);
  // The source fragment of the warp's tcgen05.st number `st` goes away
  // (EmuFrag's destructor): if that store is not yet waited for, its
  // registers are checked once more and no longer watched.
  void st_source_gone(std::uint64_t st);
  // A fragment register `reg` read before the tcgen05.ld that fills it was
  // waited for (World::frag_lane_report found it).
  void report_ld_without_wait(Warp& w, std::uint32_t reg, const SourceLoc& loc);

  // The scheduler's questions: can warp `w`'s blocked tcgen05.alloc take
  // its columns now; has the collective of CTA `cta`'s pair passed `gen`?
  bool can_alloc(const Warp& w) const;
  bool pair_passed(std::uint32_t cta, std::uint64_t gen) const;
  // What warp `w`, blocked in tcgen05.alloc or a collective, waits for.
  std::string blocked_state(const Warp& w) const;

  // Tensor Memory's rules at other rooms' operations and its part in them:
  // - an MMA's D (footprint `fp`) lies in live allocations (false: reported);
  bool check_mma_d(Warp& w, const model::MmaFootprint& fp, int cta_group, const SourceLoc& loc);
  // - an arrive on barrier `id` releases no TMEM a tcgen05.ld of the warp
  //   still reads (false: reported);
  bool check_release(Warp& w, std::uint32_t id, const SourceLoc& loc);
  // - the race check of an MMA's writes of D by component `comp` (false:
  //   reported; with the checker off, only their footprint: touch_tmem),
  //   and its effect on D's cells (ctas: D's CTAs, rank order);
  bool mma_d_access(const AsyncOp& op, const std::uint32_t* ctas, std::uint32_t comp, std::uint32_t info,
                    const Warp& issuer);
  void mma(const AsyncOp& op, const std::uint32_t* ctas);
  // A CTA's exit: allocations still live (reported).
  void check_exit(Warp& w);
  // f(Access&) for every access its shadows hold (World::collect_access_infos).
  template <class F>
  void for_each_access(F&& f) {
    for (TmemCta& c : ctas_) c.shadow.for_each_access(f);
  }

 private:
  // The deferred accumulators: the D of an MMA kept as its chain's values
  // (model::Accum) rather than in cells, until the next MMA of the chain
  // replaces it or something else touches its cells. Entries never overlap.
  struct DeferredD {
    model::MmaJob job;                                     // places D's cells
    std::uint32_t cta[2];                                  // the CTAs that hold D, in rank order (one for cta_group 1)
    std::shared_ptr<const model::MmaFootprint> footprint;  // its tmem: D's cells; Cells::cta indexes cta[]
    model::AccumRef acc;
  };
  void ensure(TmemCta& c);
  const TmemBlock* block_covering(std::uint32_t cta, std::uint32_t col, std::uint32_t cols) const;
  // The step's footprint: the allocations of `cta`'s SM (co-resident CTAs
  // share its columns). Never from the scheduler's movable().
  void touch_alloc(std::uint32_t cta, Touch a) const;
  std::int64_t first_fit(std::uint32_t cta, std::uint32_t cols, int cta_group) const;
  std::string coresident_owner(std::uint32_t cta, std::uint32_t col, std::uint32_t cols) const;
  bool check_whole_warp(Warp& w, const char* op, const SourceLoc& loc);
  void do_alloc(Warp& w, std::uint32_t cta, std::uint32_t col, std::uint32_t cols, std::uint32_t dst_offset,
                const SourceLoc& loc);
  bool check_dealloc(Warp& w, std::uint32_t cta, std::uint32_t col, std::uint32_t cols, const SourceLoc& loc);
  bool dealloc_ordered(Warp& w, std::uint32_t cta, std::uint32_t col, std::uint32_t cols, const SourceLoc& loc);
  bool access(Warp& w, TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr, bool store,
              const SourceLoc& loc);
  // tcgen05.ld (store false: copies cells to regs) or st (copies regs to
  // cells) after access() passed; false on a race.
  bool move(Warp& w, TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr, bool store,
            std::uint32_t* regs, const SourceLoc& loc);
  // A tcgen05.st's source registers are still those it was issued with
  // (false: tmem.st-source-changed reported at `loc`, `when` saying when).
  bool check_st_source(Warp& w, const TmemWarp::StSource& s, const SourceLoc& loc, const char* when);
  // Writes into their cells, and forgets, the deferred accumulators with a
  // cell of CTA `cta` in lanes [lane0, lane0 + lanes) x columns [col0, col0 + cols).
  void settle(std::uint32_t cta, std::uint32_t lane0, std::uint32_t lanes, std::uint32_t col0, std::uint32_t cols);

  MemoryCharge memory_;          // the cells and shadows of the CTAs that use TMEM
  std::vector<TmemCta> ctas_;    // per CTA
  std::vector<TmemWarp> warps_;  // per warp
  std::vector<DeferredD> deferred_;
};

}  // namespace wspipe::emu::detail
