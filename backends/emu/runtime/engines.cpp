// The asynchronous engines: each CTA's TMA engine and tensor core. A warp
// issues an operation (tensor_core.cpp, tma_load.cpp, tma_store.cpp); it
// waits in its engine's queue until the scheduler picks the engine, which
// completes the oldest one (engine_step). This room keeps the queues, the
// issue stamps and the rule that no operation may reach a CTA after its
// exit (async.*). docs/hardware.md "TMA", "Tensor core"; PTX
// "tcgen05.mma", "cp.async.bulk.tensor".
#include <bit>
#include <cstdio>
#include <cstring>

#include "backends/emu/runtime/clc.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

void World::enqueue(std::uint32_t cta, bool tensor, AsyncOp op) {
  touch(Res::engine, 2 * cta + (tensor ? 1 : 0));
  mark(num_warps() + 2 * cta + (tensor ? 1 : 0));  // the engine can move
  engines_[2 * cta + (tensor ? 1 : 0)].queue.push_back(std::move(op));
}

// Whether an operation still queued will write into CTA `cta` or arrive on
// one of its barriers.
bool World::cta_has_async_in_flight(std::uint32_t cta, std::string* what) const {
  const std::uint32_t rank = ctas_[cta].rank;
  for (const Engine& e : engines_) {
    if (ctas_[e.cta].cluster != ctas_[cta].cluster) continue;
    for (const AsyncOp& op : e.queue) {
      // A TMA store touches its CTA only while it reads shared memory, which
      // store_reading_at_exit reports; its global writes may outlive the CTA.
      if (op.kind == AsyncOp::Kind::tma_store) continue;
      bool hits = e.cta == cta || ((op.mask >> rank) & 1u) != 0;
      if (op.cta_group == 2 && pair_cta(e.cta, 0) == pair_cta(cta, 0)) hits = true;
      if (!hits) continue;
      const char* kind = op.kind == AsyncOp::Kind::tma ? "a TMA load" : op.kind == AsyncOp::Kind::mma
                                                                             ? "a tcgen05.mma"
                                                                             : "a tcgen05.commit";
      *what = std::string(kind) + " issued by " + warps_[op.issuer].name + " at " + where(op.loc) + " (step " +
              std::to_string(op.step) + ")";
      return true;
    }
  }
  return false;
}

// ------------------------------------------------------------ issue

void World::stamp_issue(Warp& w, Issued& op, const SourceLoc& loc) {
  op.issuer = w.id;
  op.step = step_;
  op.loc = loc;
  if (options_.race_check) {
    op.clock = clocks_[w.id];
    tick(w.id);
  }
}

// An operation that signals `bar` (in the issuing CTA's shared memory; the
// same offset in each CTA of `mask`, or in the issuing CTA when 0).
AsyncOp World::issue_op(Warp& w, AsyncOp::Kind kind, int cta_group, SharedMemBarrier& bar, std::uint16_t mask,
                        const SourceLoc& loc) {
  const Cta& c = ctas_[w.cta];
  AsyncOp op;
  op.kind = kind;
  op.cta_group = cta_group;
  stamp_issue(w, op, loc);
  op.mask = mask != 0 ? mask : static_cast<std::uint16_t>(1u << c.rank);
  op.bar_offset = static_cast<std::uint32_t>(reinterpret_cast<std::byte*>(&bar) - c.smem);
  return op;
}

// ------------------------------------------------------------ completion

bool World::engine_step(std::uint32_t e) {
  touch(Res::engine, e);
  Engine& eng = engines_[e];
  AsyncOp op = std::move(eng.queue.front());
  eng.queue.pop_front();
  const std::uint32_t comp = comp_engine(e);
  if (options_.race_check) join(clocks_[comp], op.clock);
  switch (op.kind) {
    case AsyncOp::Kind::tma: engine_tma(op, e); break;
    case AsyncOp::Kind::mma: engine_mma(op, e); break;
    case AsyncOp::Kind::commit: engine_commit(op, e); break;
    case AsyncOp::Kind::tma_store:
      // Its write step comes next, still ahead of the later operations.
      if (engine_tma_store(op, e)) eng.queue.push_front(std::move(op));
      break;
  }
  if (options_.race_check) tick(comp);  // the next operation is a new access epoch
  return !stopping_;
}

// An asynchronous operation `op` reaches CTA `cta` after its exit
// (docs/hardware.md bug 15: exit before the pipeline drained).
void World::report_target_exited(std::uint32_t cta, const Issued& op, std::string message) {
  fail(*current_, "async.target-exited", cta_label(cta), std::move(message), op.loc, &warps_[op.issuer]);
}

// An async operation that still writes into this CTA's shared memory or
// TMEM, or arrives on its barriers, would do so after it is gone (on
// hardware: a launch failure, docs/hardware.md bug 15). The same rule as an
// operation reaching the CTA after its exit.
bool World::async_check_exit(Warp& w) {
  std::string what;
  if (cta_has_async_in_flight(w.cta, &what) || clc_->pending_for(w.cta, &what)) {
    fail(w, "async.target-exited", cta_label(w.cta),
         "the CTA exited while " + what + " was still in flight into it (drain the pipeline before exiting)", w.loc);
    return false;
  }
  return true;
}

}  // namespace wspipe::emu::detail
