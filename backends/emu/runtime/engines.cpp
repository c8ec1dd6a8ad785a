// The asynchronous engines: each CTA's TMA engine and tensor core. A warp
// issues an operation (tensor_core.cpp, tma_load.cpp, tma_store.cpp); it
// waits in its engine's queue until the scheduler picks the engine, which
// completes the oldest one (EngineRoom::step). This room keeps the queues, the
// issue stamps and the rule that no operation may reach a CTA after its
// exit (async.*). docs/hardware.md "TMA", "Tensor core"; PTX
// "tcgen05.mma", "cp.async.bulk.tensor".
#include "backends/emu/runtime/engines.hpp"

#include <bit>
#include <cstdio>
#include <cstring>

#include "backends/emu/runtime/clc.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/tensor_core.hpp"
#include "backends/emu/runtime/tma_load.hpp"
#include "backends/emu/runtime/tma_store.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

void EngineRoom::enqueue(std::uint32_t cta, bool tensor, AsyncOp op) {
  w_.touch(World::Res::engine, 2 * cta + (tensor ? 1 : 0));
  w_.mark(base_ + 2 * cta + (tensor ? 1 : 0));  // the engine can move
  engines_[2 * cta + (tensor ? 1 : 0)].queue.push_back(std::move(op));
}

// Whether an operation still queued will write into CTA `cta` or arrive on
// one of its barriers.
bool EngineRoom::in_flight_for(std::uint32_t cta, std::string* what) const {
  const std::uint32_t rank = w_.cta(cta).rank;
  for (const Engine& e : engines_) {
    if (w_.cta(e.cta).cluster != w_.cta(cta).cluster) continue;
    for (const AsyncOp& op : e.queue) {
      // A TMA store touches its CTA only while it reads shared memory, which
      // TmaStoreRoom::reading_at_exit reports; its global writes may outlive the CTA.
      if (op.kind == AsyncOp::Kind::tma_store) continue;
      bool hits = e.cta == cta || ((op.mask >> rank) & 1u) != 0;
      if (op.cta_group == 2 && w_.pair_cta(e.cta, 0) == w_.pair_cta(cta, 0)) hits = true;
      if (!hits) continue;
      const char* kind = op.kind == AsyncOp::Kind::tma ? "a TMA load" : op.kind == AsyncOp::Kind::mma
                                                                             ? "a tcgen05.mma"
                                                                             : "a tcgen05.commit";
      *what = std::string(kind) + " issued by " + w_.warp_at(op.issuer).name + " at " + w_.where(op.loc) + " (step " +
              std::to_string(op.step) + ")";
      return true;
    }
  }
  return false;
}

EngineRoom::EngineRoom(World& world, std::uint32_t first_actor) : Room(world), base_(first_actor) {
  // Two per CTA: its TMA engine and its tensor core.
  engines_.resize(2 * std::size_t{w_.num_ctas()});
  for (std::uint32_t e = 0; e < engines_.size(); ++e) {
    engines_[e].cta = e / 2;
    engines_[e].tensor = (e % 2) != 0;
    engines_[e].name = cta_label(e / 2) + (engines_[e].tensor ? "/tensor-core" : "/tma");
  }
}

// ------------------------------------------------------------ issue

void EngineRoom::stamp_issue(Warp& w, Issued& op, const SourceLoc& loc) {
  op.issuer = w.id;
  op.step = w_.step();
  op.loc = loc;
  if (w_.options().race_check) w_.warp_issue(w, op.clock);
}

// An operation that signals `bar` (in the issuing CTA's shared memory; the
// same offset in each CTA of `mask`, or in the issuing CTA when 0).
AsyncOp EngineRoom::issue_op(Warp& w, AsyncOp::Kind kind, int cta_group, SharedMemBarrier& bar, std::uint16_t mask,
                             const SourceLoc& loc) {
  const Cta& c = w_.cta(w.cta);
  AsyncOp op;
  op.kind = kind;
  op.cta_group = cta_group;
  stamp_issue(w, op, loc);
  op.mask = mask != 0 ? mask : static_cast<std::uint16_t>(1u << c.rank);
  op.bar_offset = static_cast<std::uint32_t>(reinterpret_cast<std::byte*>(&bar) - c.smem);
  return op;
}

// ------------------------------------------------------------ completion

bool EngineRoom::step(std::uint32_t e) {
  w_.touch(World::Res::engine, e);
  Engine& eng = engines_[e];
  AsyncOp op = std::move(eng.queue.front());
  eng.queue.pop_front();
  const bool tensor = op.kind == AsyncOp::Kind::mma || op.kind == AsyncOp::Kind::commit;
  const std::uint32_t comp = tensor ? w_.comp_mma(op.issuer) : w_.comp_tma(op.issuer);
  if (w_.options().race_check) w_.async_start(comp, op.clock);
  switch (op.kind) {
    case AsyncOp::Kind::tma:
      w_.tma_load().complete(op, e);
      break;
    case AsyncOp::Kind::mma:
      w_.tensor_core().complete_mma(op, e);
      break;
    case AsyncOp::Kind::commit:
      w_.tensor_core().complete_commit(op, e);
      break;
    case AsyncOp::Kind::tma_store:
      // Its write step comes next, still ahead of the later operations.
      if (w_.tma_store().complete(op, e)) eng.queue.push_front(std::move(op));
      break;
  }
  if (w_.options().race_check) w_.tick(comp);  // the next operation is a new access epoch
  return !w_.stopping();
}

// An asynchronous operation `op` reaches CTA `cta` after its exit
// (docs/hardware.md bug 15: exit before the pipeline drained).
void EngineRoom::report_target_exited(std::uint32_t cta, const Issued& op, std::string message) {
  w_.fail(w_.running(), "async.target-exited", cta_label(cta), std::move(message), op.loc, &w_.warp_at(op.issuer));
}

// An async operation that still writes into this CTA's shared memory or
// TMEM, or arrives on its barriers, would do so after it is gone (on
// hardware: a launch failure, docs/hardware.md bug 15). The same rule as an
// operation reaching the CTA after its exit.
bool EngineRoom::check_exit(Warp& w) {
  std::string what;
  if (in_flight_for(w.cta, &what) || w_.clc().pending_for(w.cta, &what)) {
    w_.fail(w, "async.target-exited", cta_label(w.cta),
            "the CTA exited while " + what + " was still in flight into it (drain the pipeline before exiting)", w.loc);
    return false;
  }
  return true;
}

}  // namespace wspipe::emu::detail
