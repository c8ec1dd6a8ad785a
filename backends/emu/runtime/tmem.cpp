// The Tensor Memory model: tcgen05.alloc / dealloc / relinquish_alloc_permit
// (cta_group::1 and the cta_group::2 collective of a CTA pair), and
// tcgen05.ld / st / wait. Rules: docs/hardware.md "Tensor Memory"; PTX
// "Tensor Memory", "tcgen05.alloc", "tcgen05.ld" and its "Access restrictions".
#include "backends/emu/runtime/tmem.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/tensor_core.hpp"

namespace wspipe::emu::detail {
namespace {

// One MMA memo per thread, kept across runs: the runs of an exploration (on
// one thread each with --jobs) issue the same MMAs on the same operands, in
// the same chains.
model::MmaMemo& thread_memo() {
  thread_local model::MmaMemo memo;
  return memo;
}

std::string cols_label(std::uint32_t col, std::uint32_t cols, std::uint32_t cta) {
  return "TMEM columns [" + std::to_string(col) + ", " + std::to_string(col + cols) + ") (" + cta_label(cta) + ")";
}
constexpr std::size_t cell(std::uint32_t lane, std::uint32_t col) { return std::size_t{lane} * kTmemColumns + col; }
// A tcgen05.ld/st as lane-divergence mode compares it (lanes.cpp).
LaneOp tmem_op(LaneOp::Kind kind, TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
               const SourceLoc& loc) {
  return {.kind = kind, .a = taddr, .b = static_cast<std::uint64_t>(shape),
          .c = num | (std::uint64_t{half_split} << 32), .loc = loc};
}

// The cells of one tcgen05.ld/st shape, relative to its address: each
// fragment entry's (thread * regs + reg) offset lane * kTmemColumns + col,
// and the rectangles of cells it covers, lanes ascending (what the race
// checker visits: consecutive lanes with the same run of columns are one).
// Computed once per shape, count and split per thread.
struct TmemPattern {
  struct Rect {
    std::uint32_t lane, lanes, col, cols;
  };
  std::vector<std::uint32_t> rel;
  std::vector<Rect> rects;
  std::uint32_t lanes = 0, cols = 0;  // the extent: lanes [0, lanes) x columns [0, cols)
};
const TmemPattern& tmem_pattern(TmemShape shape, std::uint32_t num, std::uint32_t half_split) {
  thread_local std::unordered_map<std::uint64_t, TmemPattern> known;
  const std::uint64_t key = static_cast<std::uint64_t>(shape) | std::uint64_t{num} << 8 | std::uint64_t{half_split} << 24;
  if (const auto it = known.find(key); it != known.end()) return it->second;
  TmemPattern p;
  const std::uint32_t per = tmem_regs(shape, num);
  p.rel.resize(std::size_t{32} * per);
  for (std::uint32_t t = 0; t < 32; ++t)
    for (std::uint32_t r = 0; r < per; ++r) {
      const TmemCell k = tmem_frag_cell(shape, num, t, r, half_split);
      p.rel[t * per + r] = static_cast<std::uint32_t>(cell(k.lane, k.col));
    }
  std::vector<std::uint32_t> sorted = p.rel;
  std::sort(sorted.begin(), sorted.end());
  std::vector<TmemPattern::Rect> runs;  // one lane each
  for (const std::uint32_t c : sorted) {
    const std::uint32_t lane = c / kTmemColumns, col = c % kTmemColumns;
    if (!runs.empty() && runs.back().lane == lane && runs.back().col + runs.back().cols == col)
      ++runs.back().cols;
    else
      runs.push_back({lane, 1, col, 1});
    p.lanes = std::max(p.lanes, lane + 1);
    p.cols = std::max(p.cols, col + 1);
  }
  for (const TmemPattern::Rect& r : runs) {
    TmemPattern::Rect* last = p.rects.empty() ? nullptr : &p.rects.back();
    if (last != nullptr && last->lane + last->lanes == r.lane && last->col == r.col && last->cols == r.cols)
      ++last->lanes;
    else
      p.rects.push_back(r);
  }
  return known.emplace(key, std::move(p)).first->second;
}

}  // namespace

TmemRoom::TmemRoom(World& world) : Room(world), ctas_(world.num_ctas()), warps_(world.num_warps()) {
  for (TmemCta& c : ctas_) c.shadow = take_tmem_shadow();
  thread_memo().begin_run();
}

TmemRoom::~TmemRoom() {
  for (TmemCta& c : ctas_) keep_tmem_buffers(c.cells, c.shadow);
}

bool TmemRoom::can_alloc(const Warp& w) const {
  return first_fit(w.cta, static_cast<std::uint32_t>(w.target), static_cast<int>(w.parity)) >= 0;
}

bool TmemRoom::pair_passed(std::uint32_t cta, std::uint64_t gen) const {
  return ctas_[w_.pair_cta(cta, 0)].pair.gen > gen;
}

std::string TmemRoom::coresident_owner(std::uint32_t cta, std::uint32_t col, std::uint32_t cols) const {
  std::string note;
  w_.for_each_on_sm(cta, [&](std::uint32_t peer) {
    if (peer == cta || !note.empty()) return;
    for (const TmemBlock& b : ctas_[peer].live) {
      if (!(col < b.col + b.cols && b.col < col + cols)) continue;
      note.append("; ")
          .append(cols_label(b.col, b.cols, peer)).append(" are allocated by ").append(w_.warp_at(b.warp).name)
          .append(" at ").append(w_.where(b.loc)).append(
              ", a CTA on the same SM: an allocation is its CTA's alone (PTX: \"ownership ... is held by a "
              "single CTA\")");
      return;
    }
  });
  return note;
}

void TmemRoom::ensure(TmemCta& c) {
  if (c.cells) return;
  const std::size_t cells = std::size_t{kTmemLanes} * kTmemColumns;
  memory_.add(cells * sizeof(std::uint32_t) + (w_.options().race_check ? cells / kTmemShadowBlock * sizeof(Shadow) : 0),
              w_.options().max_memory_bytes, "the Tensor Memory of a CTA");
  // Zeroed with one memset. (A vector's fill was a per-cell loop in the
  // coverage-instrumented fuzz build, half the time of a TMEM run.)
  c.cells = take_tmem_cells();
  if (w_.options().race_check) c.shadow.reset(kTmemLanes * kTmemColumns);
}

void TmemRoom::touch_alloc(std::uint32_t cta, Touch a) const { w_.touch(World::Res::tmem, w_.sm_of(cta), a); }

const TmemBlock* TmemRoom::block_covering(std::uint32_t cta, std::uint32_t col, std::uint32_t cols) const {
  touch_alloc(cta, Touch::read);
  for (const TmemBlock& b : ctas_[cta].live)
    if (col >= b.col && col + cols <= b.col + b.cols) return &b;
  return nullptr;
}

// Aligned first fit: the lowest multiple of `cols` whose columns are free
// (on the SMs of both CTAs of the pair for cta_group::2), or -1. The 512
// columns are the SM's: PTX "Tensor Memory" gives each CTA a view of 512
// columns x 128 lanes, but tcgen05.alloc "blocks if the requested amount of
// Tensor Memory is not available and unblocks as soon as [it] becomes
// available", relinquish_alloc_permit gives up "the right to allocate", and
// .exclusive allocations bar "other CTA[s]" from allocating (PTX 9.4, as
// quoted by third parties): the CTAs on one SM allocate from one pool. Each allocation is owned by the CTA
// that made it (TmemCta::live), which alone may access and deallocate it.
std::int64_t TmemRoom::first_fit(std::uint32_t cta, std::uint32_t cols, int cta_group) const {
  auto overlaps = [&](const TmemCta& c, std::uint32_t col) {
    return std::any_of(c.live.begin(), c.live.end(),
                       [&](const TmemBlock& b) { return col < b.col + b.cols && b.col < col + cols; });
  };
  auto taken_on_sm = [&](std::uint32_t on, std::uint32_t col) {
    bool taken = false;
    w_.for_each_on_sm(on, [&](std::uint32_t peer) { taken = taken || overlaps(ctas_[peer], col); });
    return taken;
  };
  for (std::uint32_t col = 0; col + cols <= kTmemColumns; col += cols) {
    bool taken = taken_on_sm(cta, col);
    if (cta_group == 2) taken = taken || taken_on_sm(w_.pair_cta(cta, 0), col) || taken_on_sm(w_.pair_cta(cta, 1), col);
    if (!taken) return col;
  }
  return -1;
}

bool TmemRoom::check_whole_warp(Warp& w, const char* op, const SourceLoc& loc) {
  if (lanes(w.active) == 32) return true;
  w_.fail(w, "tmem.partial-warp", "",
          std::string(op) + " issued with " + std::to_string(lanes(w.active)) +
              " of 32 lanes active: it is .sync.aligned, warp-collective (call it at warp level, not inside "
              "elect_one or for_each_lane)",
          loc);
  return false;
}

void TmemRoom::do_alloc(Warp& w, std::uint32_t cta, std::uint32_t col, std::uint32_t cols, std::uint32_t dst_offset,
                        const SourceLoc& loc) {
  touch_alloc(cta, Touch::write);
  TmemCta& c = ctas_[cta];
  ensure(c);
  c.live.push_back({.col = col, .cols = cols, .warp = w.id, .step = w_.step(), .loc = loc});
  w_.tmem_changed(cta);
  c.last_alloc_cols = cols;
  // The address store is a weak shared-memory write by the allocating warp
  // (PTX "tcgen05.alloc"): a reader needs a barrier after it (bug 8).
  const std::uint32_t addr = tmem_addr(0, col);
  std::memcpy(w_.cta(cta).smem + dst_offset, &addr, sizeof addr);
  const std::uint32_t info =
      w_.options().race_check ? w_.access_info(static_cast<std::int32_t>(w.id), static_cast<std::int32_t>(w.id),
                                               "tcgen05.alloc's store of the TMEM address", loc)
                              : 0;
  if (!w_.smem_range_access(cta, dst_offset, sizeof addr, true, true, w.id, info, loc, &w)) return;
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::tmem_alloc, .a = col,
               .b = cols, .c = cta, .file = loc.file_name(), .line = loc.line()});
}

void TmemRoom::alloc(int cta_group, std::uint32_t* dst, std::uint32_t cols, const SourceLoc& loc) {
  Warp& w = w_.warp();
  const LaneOp op{.kind = LaneOp::Kind::tmem_alloc, .object = dst, .a = cols,
                  .b = static_cast<std::uint64_t>(cta_group), .loc = loc};
  if (!w_.lanes_agree(w, op) || !w_.point(w, loc)) return;
  touch_alloc(w.cta, Touch::write);
  if (!check_whole_warp(w, "tcgen05.alloc", loc) || !w_.tensor_core().check_cta_group(w, cta_group, "tcgen05.alloc", loc)) return;
  TmemCta& c = ctas_[w.cta];
  const Cta& x = w_.cta(w.cta);
  const std::string obj = "Tensor Memory (" + cta_label(w.cta) + ")";
  if (!tmem_alloc_size_valid(cols)) {
    w_.fail(w, "tmem.alloc-size", obj,
            "tcgen05.alloc of " + std::to_string(cols) + " columns: nCols must be a power of 2 in [32, 512]", loc);
    return;
  }
  const auto* p = reinterpret_cast<const std::byte*>(dst);
  if (p < x.smem || p + sizeof(std::uint32_t) > x.smem + x.smem_bytes ||
      reinterpret_cast<std::uintptr_t>(p) % alignof(std::uint32_t) != 0) {
    w_.fail(w, "tmem.alloc-dst", obj,
            "tcgen05.alloc's destination is not an aligned 32-bit word of this CTA's shared memory", loc);
    return;
  }
  const auto dst_offset = static_cast<std::uint32_t>(p - x.smem);
  w_.touch(World::Res::tmem_permit, w.cta, Touch::read);
  if (cta_group == 2) w_.touch(World::Res::tmem_permit, w_.pair_cta(w.cta, (x.rank & 1u) ^ 1u), Touch::read);
  const bool relinquished =
      c.relinquished || (cta_group == 2 && ctas_[w_.pair_cta(w.cta, (x.rank & 1u) ^ 1u)].relinquished);
  if (relinquished) {
    w_.fail(w, "tmem.alloc-after-relinquish", obj,
            "tcgen05.alloc after tcgen05.relinquish_alloc_permit in this CTA" +
                std::string(cta_group == 2 ? " pair" : "") + " (PTX: illegal; ptxas inserts a trap)",
            loc);
    return;
  }
  if (c.last_alloc_cols != 0 && cols > c.last_alloc_cols) {
    w_.fail(w, "tmem.alloc-size-increase", obj,
            "tcgen05.alloc of " + std::to_string(cols) + " columns after an allocation of " +
                std::to_string(c.last_alloc_cols) + " (PTX: sizes must not increase between allocations of a CTA)",
            loc);
    return;
  }
  if (cta_group == 1) {
    if (first_fit(w.cta, cols, 1) < 0 && !w_.point(w, Block::tmem_alloc, -1, 1, cols, loc)) return;
    do_alloc(w, w.cta, static_cast<std::uint32_t>(first_fit(w.cta, cols, 1)), cols, dst_offset, loc);
    return;
  }
  // cta_group::2: one warp of each CTA of the pair; the peer must be running
  // (a cluster barrier first: CUTLASS PR #3316, docs/hardware.md bug 10).
  if (w_.barriers().cluster_syncs(w.id) == 0) {
    w_.fail(w, "tmem.pair-unsynced", obj,
            "tcgen05.alloc.cta_group::2 before this warp passed any cluster barrier: the peer CTA may not be running, "
            "and its shared memory receives the address",
            loc);
    return;
  }
  PairOp& pair = ctas_[w_.pair_cta(w.cta, 0)].pair;
  touch_alloc(w_.pair_cta(w.cta, 0), Touch::write);  // the pair's collective, and the peer's columns
  touch_alloc(w_.pair_cta(w.cta, 1), Touch::write);
  if (!pair.active) {
    pair = {.active = true, .dealloc = false, .gen = pair.gen, .first_warp = w.id, .cols = cols,
            .operand = dst_offset, .loc = loc};
    w_.point(w, Block::tmem_pair, -1, 0, pair.gen, loc);  // until the peer's warp has joined and allocated
    return;
  }
  const Warp& first = w_.warp_at(pair.first_warp);
  if (pair.dealloc || first.cta == w.cta || pair.cols != cols || pair.operand != dst_offset) {
    w_.fail(w, "tmem.pair-mismatch", obj,
            "tcgen05.alloc.cta_group::2 of " + std::to_string(cols) + " columns to smem+" + std::to_string(dst_offset) +
                " meets " + first.name + "'s " +
                (pair.dealloc
                     ? "dealloc"
                     : "alloc of " + std::to_string(pair.cols) + " columns to smem+" + std::to_string(pair.operand)) +
                " at " + w_.where(pair.loc) +
                ": the pair's two warps (one per CTA) must issue the same instruction with the same operands",
            loc, nullptr);
    return;
  }
  if (first_fit(w.cta, cols, 2) < 0 && !w_.point(w, Block::tmem_alloc, -1, 2, cols, loc)) return;
  const auto col = static_cast<std::uint32_t>(first_fit(w.cta, cols, 2));
  do_alloc(w_.warp_at(pair.first_warp), first.cta, col, cols, dst_offset, pair.loc);
  if (w_.stopping()) return;
  do_alloc(w, w.cta, col, cols, dst_offset, loc);
  pair.active = false;
  ++pair.gen;
  w_.tmem_changed(w.cta);
}

void TmemRoom::relinquish(int cta_group, const SourceLoc& loc) {
  Warp& w = w_.warp();
  const LaneOp op{.kind = LaneOp::Kind::tmem_relinquish, .b = static_cast<std::uint64_t>(cta_group), .loc = loc};
  if (!w_.lanes_agree(w, op) || !w_.point(w, loc)) return;
  w_.touch(World::Res::tmem_permit, w.cta);
  if (!check_whole_warp(w, "tcgen05.relinquish_alloc_permit", loc) ||
      !w_.tensor_core().check_cta_group(w, cta_group, "tcgen05.relinquish_alloc_permit", loc))
    return;
  ctas_[w.cta].relinquished = true;
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::tmem_relinquish,
               .file = loc.file_name(), .line = loc.line()});
}

bool TmemRoom::check_dealloc(Warp& w, std::uint32_t cta, std::uint32_t col, std::uint32_t cols, const SourceLoc& loc) {
  const TmemCta& c = ctas_[cta];
  for (const TmemBlock& b : c.live)
    if (b.col == col && b.cols == cols) return true;
  // Built with append: g++ 12 -O2 reports a false -Wrestrict in the
  // operator+ chains this replaced.
  std::string live;
  for (const TmemBlock& b : c.live) {
    if (!live.empty()) live.append(", ");
    live.append("[").append(std::to_string(b.col)).append(", ").append(std::to_string(b.col + b.cols)).append(")");
  }
  std::string msg = "tcgen05.dealloc of ";
  msg.append(std::to_string(cols))
      .append(" columns at column ").append(std::to_string(col)).append(" names no live allocation (live: ")
      .append(live.empty() ? "none" : live)
      .append("); PTX: taddr and nCols must be those of a previous tcgen05.alloc (ptxas traps)")
      .append(coresident_owner(cta, col, cols));
  w_.fail(w, "tmem.dealloc-unallocated", cols_label(col, cols, cta), std::move(msg), loc);
  return false;
}

// Every access to the columns must be complete and ordered before the
// dealloc (PTX "tcgen05.dealloc"; docs/hardware.md "Deallocation"): no MMA writing them
// still queued, no tcgen05.ld/st of them not yet waited for, and every
// recorded access happens before the deallocating warp.
bool TmemRoom::dealloc_ordered(Warp& w, std::uint32_t cta, std::uint32_t col, std::uint32_t cols,
                               const SourceLoc& loc) {
  const std::string obj = cols_label(col, cols, cta);
  for (const Engine& e : w_.engines().all()) {
    if (!e.tensor) continue;
    for (const AsyncOp& op : e.queue) {
      if (op.kind != AsyncOp::Kind::mma) continue;
      for (const auto& r : op.footprint->tmem) {
        const std::uint32_t target = op.cta_group == 2 ? w_.pair_cta(e.cta, static_cast<std::uint32_t>(r.cta)) : e.cta;
        if (target == cta && r.col0 < col + cols && col < r.col0 + r.cols) {
          w_.fail(w, "tmem.dealloc-in-flight", obj,
                  "tcgen05.dealloc while a tcgen05.mma issued by " + w_.warp_at(op.issuer).name + " at " +
                      w_.where(op.loc) + " (step " + std::to_string(op.step) +
                      ") that writes these columns has not completed",
                  loc);
          return false;
        }
      }
    }
  }
  for (std::uint32_t id = 0; id < w_.num_warps(); ++id) {
    const Warp& x = w_.warp_at(id);
    if (x.cta != cta) continue;
    const bool ld = x.ld_waited < warps_[x.id].ld_issued, st = warps_[x.id].st_waited < warps_[x.id].st_issued;
    if ((ld || st) && warps_[x.id].pending_col0 < col + cols && col < warps_[x.id].pending_col1) {
      w_.fail(w, "tmem.dealloc-in-flight", obj,
              "tcgen05.dealloc while " + x.name + " has a tcgen05." + (ld ? "ld" : "st") +
                  " of these columns not yet waited for (tcgen05.wait::" + (ld ? "ld" : "st") + ")",
              loc);
      return false;
    }
  }
  if (!w_.options().race_check) return true;
  const TmemCta& c = ctas_[cta];
  if (c.shadow.empty()) return true;
  const Clock& mine = w_.clock(w.id);
  // The first access to these cells not ordered before this warp's clock.
  auto unordered = [&mine, &c](const Shadow& s) { return first_unordered(s, c.shadow.read_sets(), mine); };
  std::uint32_t at = 0;
  auto all_ordered = [&](std::uint32_t first, std::uint32_t last) {  // (`at`: the first that is not)
    at = c.shadow.find_first(first, last, [&](const Shadow& s) { return unordered(s) != nullptr; });
    return at == last;
  };
  const bool ordered = for_each_tmem_shadow_range(0, kTmemLanes, col, cols, all_ordered);
  if (ordered) return true;
  const Access* other = unordered(c.shadow.at(at));
  const AccessInfo& i = w_.access_info_of(other->info);
  w_.fail(w, "tmem.dealloc-unordered", obj,
          "tcgen05.dealloc by " + w.name + " is not ordered after " + w_.actor_name(i.actor) + "'s " + i.what +
              " of TMEM lane " + std::to_string(tmem_shadow_lane(at)) + ", column " +
              std::to_string(tmem_shadow_col(at)) +
              ": nothing (a barrier wait, or the commit of the MMA) orders that access before the dealloc",
          loc, nullptr, w_.describe_access(*other));
  return false;
}

void TmemRoom::dealloc(int cta_group, std::uint32_t taddr, std::uint32_t cols, const SourceLoc& loc) {
  Warp& w = w_.warp();
  const LaneOp op{.kind = LaneOp::Kind::tmem_dealloc, .a = taddr, .b = cols,
                  .c = static_cast<std::uint64_t>(cta_group), .loc = loc};
  if (!w_.lanes_agree(w, op) || !w_.point(w, loc)) return;
  // The allocations, and what dealloc_ordered reads: the tensor cores'
  // queues (an MMA still to write the columns) and the warps' tcgen05.ld/st
  // not yet waited for (their issue and wait read the allocations).
  touch_alloc(w.cta, Touch::write);
  for (std::uint32_t c = 0; c < w_.num_ctas(); ++c) w_.touch(World::Res::engine, 2 * c + 1, Touch::read);
  if (!check_whole_warp(w, "tcgen05.dealloc", loc) || !w_.tensor_core().check_cta_group(w, cta_group, "tcgen05.dealloc", loc)) return;
  const std::uint32_t col = tmem_col(taddr);
  auto free_block = [&](std::uint32_t cta) {
    touch_alloc(cta, Touch::write);
    auto& live = ctas_[cta].live;
    live.erase(std::find_if(live.begin(), live.end(), [&](const TmemBlock& b) { return b.col == col; }));
    w_.tmem_changed(cta);
  };
  if (tmem_lane(taddr) != 0) {
    w_.fail(w, "tmem.dealloc-unallocated", cols_label(col, cols, w.cta),
            "tcgen05.dealloc of an address with lane " + std::to_string(tmem_lane(taddr)) +
                ": an allocation's address has lane 0",
            loc);
    return;
  }
  if (cta_group == 1) {
    if (!check_dealloc(w, w.cta, col, cols, loc) || !dealloc_ordered(w, w.cta, col, cols, loc)) return;
    free_block(w.cta);
    if (w_.options().trace)
      w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::tmem_dealloc, .a = col,
                 .b = cols, .c = w.cta, .file = loc.file_name(), .line = loc.line()});
    return;
  }
  // cta_group::2: a collective of one warp per CTA of the pair; it frees the
  // columns in both CTAs, so each warp must be ordered after both CTAs'
  // accesses (the peer's epilogue included: docs/hardware.md bug 9).
  PairOp& pair = ctas_[w_.pair_cta(w.cta, 0)].pair;
  touch_alloc(w_.pair_cta(w.cta, 0), Touch::write);  // the pair's collective, and the peer's columns
  touch_alloc(w_.pair_cta(w.cta, 1), Touch::write);
  if (!pair.active) {
    pair = {.active = true, .dealloc = true, .gen = pair.gen, .first_warp = w.id, .cols = cols, .operand = taddr,
            .loc = loc};
    w_.point(w, Block::tmem_pair, -1, 0, pair.gen, loc);
    return;
  }
  Warp& first = w_.warp_at(pair.first_warp);
  if (!pair.dealloc || first.cta == w.cta || pair.cols != cols || pair.operand != taddr) {
    w_.fail(w, "tmem.pair-mismatch", cols_label(col, cols, w.cta),
            "tcgen05.dealloc.cta_group::2 meets " + first.name + "'s " +
                (pair.dealloc ? "dealloc of different operands" : std::string("alloc")) + " at " + w_.where(pair.loc) +
                ": the pair's two warps (one per CTA) must issue the same instruction with the same operands",
            loc);
    return;
  }
  for (std::uint32_t r = 0; r < 2; ++r)
    if (!check_dealloc(w, w_.pair_cta(w.cta, r), col, cols, loc)) return;
  for (Warp* x : {&first, &w}) {
    for (std::uint32_t r = 0; r < 2; ++r)
      if (!dealloc_ordered(*x, w_.pair_cta(w.cta, r), col, cols, x == &w ? loc : pair.loc)) return;
  }
  for (std::uint32_t r = 0; r < 2; ++r) free_block(w_.pair_cta(w.cta, r));
  pair.active = false;
  ++pair.gen;
  w_.tmem_changed(w.cta);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::tmem_dealloc, .a = col,
               .b = cols, .c = w.cta, .file = loc.file_name(), .line = loc.line()});
}

// Rules every tcgen05.ld/st checks before it touches a cell.
bool TmemRoom::access(Warp& w, TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                      bool store, const SourceLoc& loc) {
  const char* op = store ? "tcgen05.st" : "tcgen05.ld";
  if (!check_whole_warp(w, op, loc)) return false;
  const std::uint32_t lane = tmem_lane(taddr), col = tmem_col(taddr);
  const std::uint32_t quarter = tmem_quarter_first_lane(w.widx), n = tmem_shape_lanes(shape);
  const std::uint32_t cols = num * tmem_shape_cols(shape) + (shape == TmemShape::s16x32bx2 ? half_split : 0);
  if (lane < quarter || lane + n > quarter + 32) {
    w_.fail(w, "tmem.lane-quarter",
            "TMEM lanes [" + std::to_string(lane) + ", " + std::to_string(lane + n) + ") (" + cta_label(w.cta) + ")",
            std::string(op) + "." + to_string(shape) + " by CTA warp " + std::to_string(w.widx) + " touches lanes [" +
                std::to_string(lane) + ", " + std::to_string(lane + n) + "); warp " + std::to_string(w.widx) +
                " may access only its quarter, lanes [" + std::to_string(quarter) + ", " +
                std::to_string(quarter + 32) + ") (PTX tcgen05 access restrictions: warp index % 4)",
            loc);
    return false;
  }
  if (col + cols > kTmemColumns || block_covering(w.cta, col, cols) == nullptr) {
    w_.fail(w, "tmem.unallocated-access", cols_label(col, cols, w.cta),
            std::string(op) + " of columns [" + std::to_string(col) + ", " + std::to_string(col + cols) +
                ") outside every live allocation of this CTA" + coresident_owner(w.cta, col, cols),
            loc);
    return false;
  }
  return true;
}

// The cells of one tcgen05.ld/st, moved between TMEM and the fragment
// (regs[thread * regs_per_thread + reg]). The access runs on the warp's ld
// or st agent: ordered after what the warp did so far, joined back into the
// warp only by tcgen05.wait::ld / wait::st.
bool TmemRoom::move(Warp& w, TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                    bool store, std::uint32_t* regs, const SourceLoc& loc) {
  TmemCta& c = ctas_[w.cta];
  ensure(c);
  const std::uint32_t lane0 = tmem_lane(taddr), col0 = tmem_col(taddr), per = tmem_regs(shape, num);
  const std::uint32_t comp = store ? w_.comp_st(w) : w_.comp_ld(w);
  std::uint32_t info = 0;
  if (w_.options().race_check) {
    w_.release(w.id, w_.clock(comp));
    info = w_.access_info(static_cast<std::int32_t>(w.id), static_cast<std::int32_t>(w.id),
                          store ? "tcgen05.st" : "tcgen05.ld", loc);
  }
  // The cells: checked lane by lane, then moved in fragment order.
  const TmemPattern& pattern = tmem_pattern(shape, num, half_split);
  const std::size_t base = cell(lane0, col0);
  if (w_.options().race_check) {
    const Access a = w_.access_now(comp, info);
    const Clock& clock = w_.clock(comp);
    auto visit = [&](Shadow& s, std::uint32_t idx) {
      const Access* other =
          store ? shadow_write(s, c.shadow.read_sets(), clock, a) : shadow_read(s, c.shadow.read_sets(), clock, a);
      if (other == nullptr) return true;
      w_.report_race(s, other, store, info, comp,
                     "TMEM lane " + std::to_string(tmem_shadow_lane(idx)) + ", column " +
                         std::to_string(tmem_shadow_col(idx)) + " (" + cta_label(w.cta) + ")",
                     loc, nullptr);
      return false;
    };
    auto range = [&](std::uint32_t first, std::uint32_t last) { return c.shadow.access_range(first, last, visit); };
    for (const TmemPattern::Rect& r : pattern.rects)
      if (!for_each_tmem_shadow_range(lane0 + r.lane, r.lanes, col0 + r.col, r.cols, range)) return false;
  }
  if (!w_.options().race_check) w_.touch_tmem(w.cta, col0, pattern.cols, store);
  settle(w.cta, lane0, pattern.lanes, col0, pattern.cols);
  std::uint32_t* const cells = c.cells.get() + base;
  const std::size_t n = pattern.rel.size();
  if (store)
    for (std::size_t i = 0; i < n; ++i) cells[pattern.rel[i]] = regs[i];
  else
    for (std::size_t i = 0; i < n; ++i) regs[i] = cells[pattern.rel[i]];
  if (w_.options().race_check) w_.tick(comp);
  // Columns with an ld or st not yet waited for (for dealloc's check).
  if (w.ld_waited == warps_[w.id].ld_issued && warps_[w.id].st_waited == warps_[w.id].st_issued)
    warps_[w.id].pending_col0 = warps_[w.id].pending_col1 = col0;
  warps_[w.id].pending_col0 = std::min(warps_[w.id].pending_col0, col0);
  warps_[w.id].pending_col1 = std::max(warps_[w.id].pending_col1, col0 + num * tmem_shape_cols(shape) + half_split);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id),
               .kind = store ? EventKind::tmem_st : EventKind::tmem_ld, .a = lane0, .b = col0, .c = per,
               .file = loc.file_name(), .line = loc.line()});
  return true;
}

std::uint64_t TmemRoom::ld(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                           std::uint32_t* out, const SourceLoc& loc) {
  Warp& w = w_.warp();
  const std::size_t regs = std::size_t{32} * tmem_regs(shape, num);
  if (!w_.lanes_agree(w, tmem_op(LaneOp::Kind::tmem_ld, shape, num, half_split, taddr, loc))) {
    // lane 31 takes the registers the warp's fiber loaded
    if (w_.in_lane() && w.lane.regs.size() == regs) std::copy(w.lane.regs.begin(), w.lane.regs.end(), out);
    return w.lane.token;
  }
  if (!w_.point(w, loc) || !access(w, shape, num, half_split, taddr, false, loc) ||
      !move(w, shape, num, half_split, taddr, false, out, loc))
    return 0;
  warps_[w.id].ld_loc = loc;
  ++warps_[w.id].ld_issued;
  if (w.lane.publish) {
    w.lane.regs.assign(out, out + regs);
    w.lane.token = warps_[w.id].ld_issued;
  }
  return warps_[w.id].ld_issued;
}

std::uint64_t TmemRoom::st(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                           const std::uint32_t* in, const SourceLoc& loc) {
  Warp& w = w_.warp();
  if (!w_.lanes_agree(w, tmem_op(LaneOp::Kind::tmem_st, shape, num, half_split, taddr, loc))) return 0;
  if (!w_.point(w, loc) || !access(w, shape, num, half_split, taddr, true, loc) ||
      !move(w, shape, num, half_split, taddr, true, const_cast<std::uint32_t*>(in), loc))
    return 0;
  TmemWarp& t = warps_[w.id];
  ++t.st_issued;
  // PTX: tcgen05.st is asynchronous, complete only at tcgen05.wait::st. The
  // cells were written from the registers as they are now; the registers
  // must stay so until the wait, which compares them.
  const std::uint32_t per = tmem_regs(shape, num);
  t.st_sources.push_back({.st = t.st_issued, .regs = in, .per = per, .copy = t.st_copies.size(), .loc = loc});
  t.st_copies.insert(t.st_copies.end(), in, in + std::size_t{32} * per);
  ++w.st_sources;
  return t.st_issued;
}

bool TmemRoom::check_st_source(Warp& w, const TmemWarp::StSource& s, const SourceLoc& loc, const char* when) {
  const std::uint32_t* at_issue = warps_[w.id].st_copies.data() + s.copy;
  const std::size_t n = std::size_t{32} * s.per;
  const auto [was, now] = std::mismatch(at_issue, at_issue + n, s.regs);
  if (was == at_issue + n) return true;
  const auto i = static_cast<std::uint32_t>(was - at_issue);
  w_.fail(w, "tmem.st-source-changed", "",
          "register " + std::to_string(i % s.per) + " of thread " + std::to_string(i / s.per) +
              " of the fragment stored by the tcgen05.st at " + w_.where(s.loc) + " changed from " +
              std::to_string(*was) + " to " + std::to_string(*now) + " " + when +
              ": the store is asynchronous and may read its source registers until tcgen05.wait::st",
          loc);
  return false;
}

void TmemRoom::st_source_gone(std::uint64_t st) {
  if (w_.killing() || w_.stopping() || w_.in_lane()) return;
  Warp& w = w_.warp();
  TmemWarp& t = warps_[w.id];
  const auto it = std::find_if(t.st_sources.begin(), t.st_sources.end(),
                               [st](const TmemWarp::StSource& s) { return s.st == st; });
  if (it == t.st_sources.end()) return;  // waited for
  // This store's entry and those of the fragment's earlier stores: checked
  // and, the fragment gone, no longer watched (their copies stay until the
  // wait).
  const std::uint32_t* const regs = it->regs;
  for (const TmemWarp::StSource& s : t.st_sources)
    if (s.regs == regs &&
        !check_st_source(w, s, s.loc, "before the fragment went out of scope, with the store not yet waited for"))
      return;
  w.st_sources -= static_cast<std::uint32_t>(
      std::erase_if(t.st_sources, [regs](const TmemWarp::StSource& s) { return s.regs == regs; }));
}

void TmemRoom::wait(bool loads, const SourceLoc& loc) {
  Warp& w = w_.warp();
  if (!w_.lanes_agree(w, {.kind = loads ? LaneOp::Kind::tmem_wait_ld : LaneOp::Kind::tmem_wait_st, .loc = loc})) return;
  if (w_.killing() || w_.stopping()) return;
  if (!check_whole_warp(w, loads ? "tcgen05.wait::ld" : "tcgen05.wait::st", loc)) return;
  touch_alloc(w.cta, Touch::read);  // a dealloc reads what this wait settles
  // The agent's accesses so far happen before what the warp does next: a
  // release by the agent into the warp, which also starts the agent's next
  // epoch, so that a load or store issued after the warp's next arrive is
  // not covered by that arrive.
  if (loads) {
    w.ld_waited = warps_[w.id].ld_issued;
    if (w_.options().race_check) w_.release(w_.comp_ld(w), w_.clock(w.id));
  } else {
    TmemWarp& t = warps_[w.id];
    for (const TmemWarp::StSource& s : t.st_sources)
      if (!check_st_source(w, s, loc, "before this tcgen05.wait::st")) return;
    t.st_sources.clear();
    t.st_copies.clear();
    w.st_sources = 0;
    t.st_waited = t.st_issued;
    if (w_.options().race_check) w_.release(w_.comp_st(w), w_.clock(w.id));
  }
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::tmem_wait,
               .a = loads ? 1 : 0, .file = loc.file_name(), .line = loc.line()});
}

std::string TmemRoom::blocked_state(const Warp& w) const {
  // The live allocations on the SM(s) it allocates from; those of other CTAs
  // (co-resident ones) are what an alloc waits for that its own CTA cannot free.
  std::string live;
  bool others = false;
  for (std::uint32_t r = 0; r < (w.block == Block::tmem_alloc && w.parity == 2 ? 2u : 1u); ++r) {
    const std::uint32_t on = w.parity == 2 ? w_.pair_cta(w.cta, r) : w.cta;
    w_.for_each_on_sm(on, [&](std::uint32_t cta) {
      const bool own =
          cta == w.cta || (w.parity == 2 && (cta == w_.pair_cta(w.cta, 0) || cta == w_.pair_cta(w.cta, 1)));
      for (const TmemBlock& b : ctas_[cta].live) {
        if (!live.empty()) live.append(", ");
        live.append(cols_label(b.col, b.cols, cta)).append(" held by ").append(w_.warp_at(b.warp).name);
        if (!own) live.append(" (another CTA on this SM)");
        live.append(" since step ").append(std::to_string(b.step));
        others = others || !own;
      }
    });
  }
  if (w.block == Block::tmem_alloc) {
    std::string msg = "needs ";
    msg.append(std::to_string(w.target)).append(" free aligned columns");
    if (w_.launch().ctas_per_sm > 1) msg.append(" of SM ").append(std::to_string(w_.sm_of(w.cta)));
    msg.append("; live allocations: ").append(live.empty() ? "none" : live);
    if (others)
      msg.append("; columns held by a co-resident CTA are freed only by its own tcgen05.dealloc (the 512 columns "
                 "are the SM's, shared by its CTAs)");
    return msg;
  }
  const PairOp& p = ctas_[w_.pair_cta(w.cta, 0)].pair;
  return std::string("waits for the peer CTA's warp to join its cta_group::2 ") + (p.dealloc ? "dealloc" : "alloc") +
         " (one warp of each CTA of the pair must issue it)";
}

void TmemRoom::settle(std::uint32_t cta, std::uint32_t lane0, std::uint32_t lanes, std::uint32_t col0,
                      std::uint32_t cols) {
  for (std::size_t i = deferred_.size(); i-- > 0;) {
    const DeferredD& d = deferred_[i];
    const auto& rects = d.footprint->tmem;
    const bool touched = std::any_of(rects.begin(), rects.end(), [&](const model::MmaFootprint::Cells& r) {
      return d.cta[r.cta] == cta && r.lane0 < lane0 + lanes && lane0 < r.lane0 + r.lanes && r.col0 < col0 + cols &&
             col0 < r.col0 + r.cols;
    });
    if (!touched) continue;
    model::CtaMem mem[2]{};
    for (int r = 0; r < d.job.cta_group; ++r) mem[r].tmem = ctas_[d.cta[r]].cells.get();
    model::accum_write(d.job, *d.acc, mem);
    deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// D: a write per cell (it subsumes the read of an accumulating MMA).
bool TmemRoom::mma_d_access(const AsyncOp& op, const std::uint32_t* ctas, std::uint32_t comp, std::uint32_t info,
                            const Warp& issuer) {
  if (!w_.options().race_check) {  // only a resource of the step (touch_tmem)
    for (const auto& rect : op.footprint->tmem) w_.touch_tmem(ctas[rect.cta], rect.col0, rect.cols, true);
    return true;
  }
  const Clock& clock = w_.clock(comp);
  for (const auto& rect : op.footprint->tmem) {
    const std::uint32_t cta = ctas[rect.cta];
    TmemCta& c = ctas_[cta];
    ensure(c);
    auto visit = [&, a = w_.access_now(comp, info)](Shadow& s, std::uint32_t idx) {
      const Access* other = shadow_write(s, c.shadow.read_sets(), clock, a);
      if (other == nullptr) return true;
      w_.report_race(s, other, true, info, comp,
                     "TMEM lane " + std::to_string(tmem_shadow_lane(idx)) + ", column " +
                         std::to_string(tmem_shadow_col(idx)) + " (" + cta_label(cta) + ")",
                     op.loc, &issuer);
      return false;
    };
    const bool ok = for_each_tmem_shadow_range(
        rect.lane0, rect.lanes, rect.col0, rect.cols,
        [&](std::uint32_t first, std::uint32_t last) { return c.shadow.access_range(first, last, visit); });
    if (!ok) return false;
  }
  return true;
}

void TmemRoom::mma(const AsyncOp& op, const std::uint32_t* ctas) {
  model::CtaMem mem[2]{};
  for (int r = 0; r < op.cta_group; ++r) {
    TmemCta& c = ctas_[ctas[r]];
    ensure(c);
    const Cta& x = w_.cta(ctas[r]);
    mem[r] = {.smem = x.smem, .smem_bytes = x.smem_bytes, .tmem = c.cells.get()};
  }
  model::MmaMemo& memo = thread_memo();
  if (memo.budget() != w_.options().mma_memo_bytes) memo.set_budget(w_.options().mma_memo_bytes);
  memo.set_memory_limit(w_.options().max_memory_bytes);
  const auto settle_d = [&] {
    for (const auto& r : op.footprint->tmem) settle(ctas[r.cta], r.lane0, r.lanes, r.col0, r.cols);
  };
  if (memo.budget() == 0) {  // no memo: every MMA updates its cells
    settle_d();
    model::mma_execute(op.job, mem, &memo);
    return;
  }
  // Deferred: the chain continues in the accumulator that holds exactly
  // this D, or starts afresh (enable-input-d false). An MMA accumulating on
  // cells that hold no chain updates them as without a memo, and so does a
  // link the memo neither has nor has room for (a chain it cannot keep
  // would cost an accumulator per MMA and save nothing).
  const auto same = std::find_if(deferred_.begin(), deferred_.end(), [&](const DeferredD& d) {
    return d.cta[0] == ctas[0] && model::same_d(d.job, op.job);
  });
  if (same != deferred_.end()) {
    if (model::AccumRef next = model::mma_accumulate(op.job, mem, op.job.accumulate ? same->acc.get() : nullptr, memo,
                                                     /*only_if_kept=*/true)) {
      same->acc = std::move(next);
      return;
    }
  }
  settle_d();
  if (!op.job.accumulate) {
    if (model::AccumRef first = model::mma_accumulate(op.job, mem, nullptr, memo, /*only_if_kept=*/true)) {
      deferred_.push_back({.job = op.job, .cta = {ctas[0], ctas[1]}, .footprint = op.footprint, .acc = std::move(first)});
      return;
    }
  }
  model::mma_execute(op.job, mem, &memo);
}

// PTX "tcgen05 memory consistency": a warp hands TMEM back (an arrive that
// releases the accumulator stage) only after tcgen05.wait::ld, or the MMA
// that reuses the stage may overwrite cells the load still reads.
bool TmemRoom::check_release(Warp& w, std::uint32_t id, const SourceLoc& loc) {
  const TmemWarp& t = warps_[w.id];
  if (w.ld_waited >= t.ld_issued) return true;
  w_.fail(w, "tmem.release-before-wait-ld", w_.mbar().label(id),
          "arrive while " + std::to_string(t.ld_issued - w.ld_waited) +
              " tcgen05.ld of this warp are still in flight (the latest at " + w_.where(t.ld_loc) +
              "): tcgen05.wait::ld must come first",
          loc);
  return false;
}

// A fragment register read before the tcgen05.ld that fills it was waited for.
void TmemRoom::report_ld_without_wait(Warp& w, std::uint32_t reg, const SourceLoc& loc) {
  w_.fail(w, "tmem.ld-without-wait", "",
          "register " + std::to_string(reg) + " of the tcgen05.ld at " + w_.where(warps_[w.id].ld_loc) +
              " read before tcgen05.wait::ld: the load is asynchronous and its registers are not yet written",
          loc);
}

// An MMA's D (footprint `fp`) must lie in live allocations of its CTAs.
bool TmemRoom::check_mma_d(Warp& w, const model::MmaFootprint& fp, int cta_group, const SourceLoc& loc) {
  for (const auto& r : fp.tmem) {
    const std::uint32_t cta = cta_group == 2 ? w_.pair_cta(w.cta, static_cast<std::uint32_t>(r.cta)) : w.cta;
    if (block_covering(cta, r.col0, r.cols) == nullptr) {
      w_.fail(w, "tmem.unallocated-access",
              "TMEM columns [" + std::to_string(r.col0) + ", " + std::to_string(r.col0 + r.cols) + ") (" +
                  cta_label(cta) + ")",
              "tcgen05.mma writes D into columns outside every live allocation of " + cta_label(cta) +
                  coresident_owner(cta, r.col0, r.cols),
              loc);
      return false;
    }
  }
  return true;
}

// PTX "tcgen05.alloc": all Tensor Memory allocated must be deallocated
// before the kernel exits; a leaked block stays taken for the next CTA on
// the SM, whose tcgen05.alloc then blocks.
void TmemRoom::check_exit(Warp& w) {
  touch_alloc(w.cta, Touch::read);
  const TmemCta& cta = ctas_[w.cta];
  if (cta.live.empty()) return;
  const TmemBlock& b = cta.live.front();
  w_.fail(
      w, "tmem.leak",
      "TMEM columns [" + std::to_string(b.col) + ", " + std::to_string(b.col + b.cols) + ") (" + cta_label(w.cta) + ")",
      "the CTA exited with " + std::to_string(cta.live.size()) + " Tensor Memory allocation(s) live; " +
          std::to_string(b.cols) + " columns allocated by " + w_.warp_at(b.warp).name + " at " + w_.where(b.loc) +
          " (step " + std::to_string(b.step) + ") were never deallocated",
      b.loc, &w_.warp_at(b.warp));
}

}  // namespace wspipe::emu::detail
