// Lane-divergence mode (RunOptions::lane_divergence). The warp-level model
// runs one fiber per warp with one copy of every variable, so it cannot see
// what differs between the lanes of a GPU warp: a cursor stepped by the
// elected lane only, an address computed in one lane, a wait that one lane
// makes while the others go on. In this mode each warp also runs as lane 31,
// on a second fiber that executes the same body; the warp's own fiber is
// lane 0 (the elected lane) as well as the warp.
//
// The two meet at every operation whose lanes must agree on a GPU: the
// warp-collective and .sync.aligned instructions (tcgen05.alloc, dealloc,
// relinquish_alloc_permit, ld, st, wait; bar.sync / bar.arrive;
// barrier.cluster; elect.sync; bar.warp.sync) and mbarrier waits, and at the
// end of the body. At each, lane 31 must have reached the same instruction
// (same kind and source line: else warp.divergent-branch) with the same
// operands and as many active lanes (else warp.non-uniform-operand). A wait
// is a meeting point although PTX lets a lone thread wait: the emulator does
// not track which lanes read what a wait orders, so a wait that lane 0
// makes and lane 31 skips (inside elect_one, or `if (lane == 0)`) is
// reported, not trusted.
//
// Lane 31 performs nothing: every operation the warp's fiber makes already
// acts for all active lanes. Its per-lane operations (arrive, TMA, MMA,
// checks) are no-ops; at a meeting point it parks, the warp's fiber
// compares, performs the operation once, and leaves its results (a
// try_wait's answer, a tcgen05.ld's registers) for lane 31 to take when it
// resumes. Lane 31 runs only inside a meeting of the warp's fiber, so it
// adds no scheduling point: schedules are the same with the mode and
// without. Its plain and atomic stores to shared memory and to the launch's
// global memory are undone when it parks (keep_lane_store): the warp's
// fiber made them for the warp, and a read-modify-write (`sum += x`) must
// not be applied twice.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <span>

#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {
namespace {

constexpr std::uint32_t kElectedLaneBit = 1u;  // lane 0, the warp's fiber


bool same_place(const LaneOp& x, const LaneOp& y) {
  return x.kind == y.kind && x.loc.line() == y.loc.line() && std::strcmp(x.loc.file_name(), y.loc.file_name()) == 0;
}

bool same_operands(const LaneOp& x, const LaneOp& y) {
  return x.object == y.object && x.a == y.a && x.b == y.b && x.c == y.c && x.lanes == y.lanes;
}

// Instructions that need the whole warp: with fewer lanes the operation
// reports its own rule (tmem.partial-warp, named-barrier.partial-warp).
bool whole_warp_only(LaneOp::Kind k) {
  switch (k) {
    case LaneOp::Kind::named_sync:
    case LaneOp::Kind::named_arrive:
    case LaneOp::Kind::tmem_alloc:
    case LaneOp::Kind::tmem_relinquish:
    case LaneOp::Kind::tmem_dealloc:
    case LaneOp::Kind::tmem_ld:
    case LaneOp::Kind::tmem_st:
    case LaneOp::Kind::tmem_wait_ld:
    case LaneOp::Kind::tmem_wait_st: return true;
    default: return false;
  }
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string tmem_at(std::uint64_t taddr) {
  const auto t = static_cast<std::uint32_t>(taddr);
  std::string s = "TMEM address ";
  return s.append(hex(t))
      .append(" (lane ").append(std::to_string(tmem_lane(t))).append(", column ").append(std::to_string(tmem_col(t)))
      .append(")");
}

}  // namespace

std::string World::describe(const LaneOp& op) const {
  std::string d;
  switch (op.kind) {
    case LaneOp::Kind::elect: d = "elect.sync"; break;
    case LaneOp::Kind::syncwarp: d = "bar.warp.sync (syncwarp)"; break;
    case LaneOp::Kind::wait:
    case LaneOp::Kind::try_wait:
    case LaneOp::Kind::test_wait:
      d = op.kind == LaneOp::Kind::wait ? "wait on " : op.kind == LaneOp::Kind::try_wait ? "try_wait on " : "test_wait on ";
      d.append(mbar_->label_of(*static_cast<const SharedMemBarrier*>(op.object), *current_))
          .append(" for parity ").append(std::to_string(op.a));
      break;
    case LaneOp::Kind::named_sync:
    case LaneOp::Kind::named_arrive:
      d = op.kind == LaneOp::Kind::named_sync ? "bar.sync " : "bar.arrive ";
      d.append(std::to_string(op.a)).append(", ").append(std::to_string(op.b));
      break;
    case LaneOp::Kind::cluster_sync: d = "barrier.cluster.arrive + wait"; break;
    case LaneOp::Kind::tmem_alloc:
      d = "tcgen05.alloc.cta_group::";
      d.append(std::to_string(op.b))
          .append(" of ").append(std::to_string(op.a)).append(" columns, destination smem+")
          .append(hex(static_cast<std::uint64_t>(static_cast<const std::byte*>(op.object) -
                                                 ctas_[current_->cta].smem)));
      break;
    case LaneOp::Kind::tmem_relinquish:
      d = "tcgen05.relinquish_alloc_permit.cta_group::";
      d.append(std::to_string(op.b));
      break;
    case LaneOp::Kind::tmem_dealloc:
      d = "tcgen05.dealloc.cta_group::";
      d.append(std::to_string(op.c)).append(" of ").append(std::to_string(op.b)).append(" columns at ").append(
          tmem_at(op.a));
      break;
    case LaneOp::Kind::tmem_ld:
    case LaneOp::Kind::tmem_st:
      d = op.kind == LaneOp::Kind::tmem_ld ? "tcgen05.ld." : "tcgen05.st.";
      d.append(to_string(static_cast<TmemShape>(op.b)))
          .append(".x").append(std::to_string(op.c & 0xffffffffu)).append(" at ").append(tmem_at(op.a));
      break;
    case LaneOp::Kind::tmem_wait_ld: d = "tcgen05.wait::ld"; break;
    case LaneOp::Kind::tmem_wait_st: d = "tcgen05.wait::st"; break;
    case LaneOp::Kind::exit: return "the end of the kernel body";
  }
  d.append(" with ").append(std::to_string(op.lanes)).append(op.lanes == 1 ? " lane" : " lanes").append(" active");
  return d.append(" at ").append(where(op.loc));
}

bool World::lanes_meet(Warp& w, LaneOp op) {
  SecondLane& lane = w.lane;
  op.lanes = lanes(active_lanes());
  if (in_lane_) {
    if (killing_) {  // teardown: lane 31 unwinds from its next meeting, as the warp's fiber does
      lane.ok = true;
      teardown_op(w, lane.unwinds, op.loc);
      return false;
    }
    lane.at = op;
    undo_lane_stores(w);
    in_lane_ = false;
    switch_to(w.ctx, w.stack);
    // Resumed by the warp's fiber at its next meeting (it set in_lane_), or
    // by the teardown.
    return false;
  }
  lane.publish = false;
  if (killing_ || stopping_) return true;
  // Lane 0 does not take part (another lane's turn in for_each_lane), or a
  // whole-warp instruction issued by a partial warp, which its own check
  // reports.
  if ((w.active & kElectedLaneBit) == 0 || (whole_warp_only(op.kind) && lanes(w.active) != 32)) return true;
  if (lane.finished) {
    lane.at = LaneOp{.kind = LaneOp::Kind::exit, .lanes = 32};
  } else {
    if (lane.ctx == nullptr) start_second_lane(w);
    in_lane_ = true;
    switch_to(lane.ctx, lane.stack);
    in_lane_ = false;
  }
  const LaneOp& other = lane.at;
  if (same_place(op, other) && same_operands(op, other)) {
    lane.publish = true;
    return true;
  }
  // Built with append: g++ 12 -O2 reports a false -Wrestrict in operator+
  // chains that start with a literal.
  auto is_wait = [](LaneOp::Kind k) {
    return k == LaneOp::Kind::wait || k == LaneOp::Kind::try_wait || k == LaneOp::Kind::test_wait;
  };
  const bool waits = is_wait(op.kind) || is_wait(other.kind);
  const bool branch = !same_place(op, other);
  std::string msg = "lanes 0 and 31 of the warp ";
  if (branch) {
    msg.append("took different paths: lane 0 reaches ")
        .append(describe(op)).append(", lane 31 ").append(other.kind == LaneOp::Kind::exit ? "reaches " : "is at ")
        .append(describe(other))
        .append(waits ? " (a lane-guarded wait: the lanes that skip it read what it orders without it, or wait "
                      "out of step)"
                    : " (the lanes of a warp must reach each warp-collective instruction together)");
  } else {
    msg.append("reach the same instruction with different operands: lane 0: ")
        .append(describe(op)).append("; lane 31: ").append(describe(other))
        .append(waits ? " (one lane waits on a stale barrier or phase: state stepped by some lanes only)"
                    : " (a .sync.aligned instruction needs the same operands in every lane: a value computed "
                      "by some lanes only)");
  }
  const SourceLoc& at = op.kind == LaneOp::Kind::exit ? other.loc : op.loc;
  std::string other_side = "lane 31: ";
  other_side.append(describe(other));
  lane.ok = true;  // a try_wait loop of the teardown ends
  fail(w, branch ? "warp.divergent-branch" : "warp.non-uniform-operand", "", std::move(msg), at, nullptr,
       std::move(other_side));
  return false;
}

// Lane 31 runs the code lane 0 ran, after it: a store of the warp's that
// reads what it overwrites (`sum += x` at warp level) would be applied
// twice. Its stores to shared memory and to the launch's global memory
// (LaunchConfig::global_memory) are undone when it parks, in reverse order,
// so that memory is as the warp's fiber left it. Seen through the access
// instrumentation (plain_access.cpp), before each store. Other memory (its
// stack, the heap, host-side state) is left: a lane's own variables are
// its own, and memory that is not known to outlive the run may be freed
// and used again before lane 31 parks.
void World::keep_lane_store(std::uint32_t offset, std::size_t bytes) {
  const Cta& cta = ctas_[current_->cta];
  keep_lane_bytes(cta.smem + offset, std::min<std::size_t>(bytes, cta.smem_bytes - offset));
}

void World::keep_lane_global_store(std::uintptr_t p, std::size_t bytes) {
  for (const std::span<std::byte> g : launch_.global_memory) {
    const auto begin = reinterpret_cast<std::uintptr_t>(g.data());
    const std::uintptr_t lo = std::max(p, begin), hi = std::min(p + bytes, begin + g.size());
    if (lo < hi) keep_lane_bytes(reinterpret_cast<std::byte*>(lo), hi - lo);
  }
}

void World::keep_lane_bytes(std::byte* p, std::size_t bytes) {
  SecondLane& lane = current_->lane;
  lane.stores.push_back({.p = p, .size = bytes, .at = lane.overwritten.size()});
  lane.overwritten.insert(lane.overwritten.end(), p, p + bytes);
}

void World::undo_lane_stores(Warp& w) {
  SecondLane& lane = w.lane;
  for (auto it = lane.stores.rbegin(); it != lane.stores.rend(); ++it)
    std::memcpy(it->p, lane.overwritten.data() + it->at, it->size);
  lane.stores.clear();
  lane.overwritten.clear();
}

void World::elect(const SourceLoc& loc) {
  if (!options_.lane_divergence) return;
  lanes_meet(*current_, LaneOp{.kind = LaneOp::Kind::elect, .loc = loc});
}

}  // namespace wspipe::emu::detail
