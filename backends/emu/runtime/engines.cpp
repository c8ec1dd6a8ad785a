// The asynchronous engines: each CTA's TMA engine and tensor core. A warp
// issues an operation (tensor_core.cpp, tma_load.cpp, tma_store.cpp); it
// waits in its engine's queue until the scheduler picks the engine, which
// completes the oldest one (EngineRoom::step), or, for a TMA load, one of
// the engine's alternative actors, which completes it out of issue order or
// delivers a piece of it (RunOptions::async_reorder). This room keeps the queues, the
// issue stamps and the rule that no operation may reach a CTA after its
// exit (async.*). docs/hardware.md "TMA", "Tensor core"; PTX
// "tcgen05.mma", "cp.async.bulk.tensor".
#include "backends/emu/runtime/engines.hpp"

#include <algorithm>
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
  const std::uint32_t e = 2 * cta + (tensor ? 1 : 0);
  // An issue commutes with the completion of older operations: it writes
  // only its own operation (which its completion awaits) and counts into
  // the engine's load (which a CTA's exit reads). Yet a load queued before
  // an older operation completes may overtake it, and queued after, cannot:
  // the mark tells the exhaustive search to explore that order too
  // (Touch::issue). Two issues commute for whole completions (either order,
  // the other completion order is an alternative), but only the oldest
  // operation is split: queued behind another, a load that can land in
  // pieces (alternative_move) cannot land part of itself before that one
  // completes. So it writes the queue's order, which the other loads'
  // issues read. A TMA store's issue reads it only with the race checker
  // off: what tells a load's piece landing before a store's steps from
  // after is the store reading bytes the piece writes, which the checker
  // reports as a race in whichever order the two run (and reading it
  // always would make persistent-gemm's complete search a hundred times
  // longer: its epilogue's stores and its producer's loads).
  op.seq = engines_[e].issued++;
  w_.touch(World::Res::async_op, World::key(e, op.seq));
  w_.touch(World::Res::engine_load, e, Touch::commute);
  if (alt_count_ != 0 && op.kind == AsyncOp::Kind::tma) {
    const bool pieces = tma_box_bytes(op.map) >= 2 * kPieceGrain;
    w_.touch(World::Res::engine_queue, e, pieces ? Touch::write : Touch::read);
    w_.touch(World::Res::engine, e, Touch::issue);
  } else if (alt_count_ != 0 && op.kind == AsyncOp::Kind::tma_store && !w_.options().race_check) {
    w_.touch(World::Res::engine_queue, e, Touch::read);
  }
  changed(e);  // the engine can move
  const bool load = op.kind == AsyncOp::Kind::tma;
  engines_[e].queue.push_back(std::move(op));
  // Behind more older operations than the window reaches: it cannot go
  // before all of them (a narrowing the verdict names).
  if (alt_count_ != 0 && load && engines_[e].queue.size() > per_cta_) w_.count_load_past_window();
}

void EngineRoom::changed(std::uint32_t e) {
  w_.mark(base_ + e);
  if (alt_count_ == 0 || engines_[e].tensor) return;
  for (std::uint32_t j = 0; j < per_cta_; ++j) w_.mark(alt_base_ + per_cta_ * engines_[e].cta + j);
}

void EngineRoom::tx_changed(std::uint32_t cta) {
  if (alt_count_ == 0 || w_.options().legacy_pieces) return;
  const Cluster& cl = w_.cluster(w_.cta(cta).cluster);
  for (std::uint32_t c = cl.first_cta; c < cl.first_cta + w_.launch().cluster_size; ++c)
    w_.mark(alt_base_ + per_cta_ * c + per_cta_ - 1);
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

bool EngineRoom::complete(std::uint32_t e, std::size_t k) {
  changed(e);
  Engine& eng = engines_[e];
  // The engine's order (its completions, in order or not, never commute),
  // the operation, and the engine's load.
  w_.touch(World::Res::engine, e);
  w_.touch(World::Res::async_op, World::key(e, eng.queue[k].seq), Touch::await);
  w_.touch(World::Res::engine_load, e, Touch::commute);
  AsyncOp op = std::move(eng.queue[k]);
  eng.queue.erase(eng.queue.begin() + static_cast<std::ptrdiff_t>(k));
  const bool tensor = op.kind == AsyncOp::Kind::mma || op.kind == AsyncOp::Kind::commit;
  const std::uint32_t comp = tensor ? w_.comp_mma(op.issuer) : w_.comp_tma(op.issuer);
  if (w_.options().race_check) w_.async_start(comp, op.clock);
  switch (op.kind) {
    case AsyncOp::Kind::tma:
      w_.tma_load().complete(op, e, static_cast<std::uint32_t>(tma_box_bytes(op.map)));
      break;
    case AsyncOp::Kind::mma:
      w_.tensor_core().complete_mma(op, e);
      break;
    case AsyncOp::Kind::commit:
      w_.tensor_core().complete_commit(op, e);
      break;
    case AsyncOp::Kind::tma_store:
      // Its write step comes next, still ahead of the later operations (an
      // alternative actor completes loads only: k is 0).
      if (w_.tma_store().complete(op, e)) eng.queue.push_front(std::move(op));
      break;
  }
  if (w_.options().race_check) w_.tick(comp);  // the next operation is a new access epoch
  return !w_.stopping();
}

// ------------------------------------------------------------ alternatives

void EngineRoom::place_alternatives(std::uint32_t first) {
  alt_base_ = first;
  per_cta_ = (w_.options().legacy_pieces ? 3 : std::max(w_.options().reorder_window, 1u)) + 1;
  alt_count_ = w_.options().async_reorder ? per_cta_ * w_.num_ctas() : 0;
}

// The next piece of engine `e`'s oldest operation, a TMA load: where one of
// its barriers' tx-count would reach zero, if that is short of the load's
// end (each piece is counted on every barrier of its destinations: a
// multicast's, or a CTA pair's even CTA's twice); else, the first time,
// about half of the load, in whole lines; else none. Only those cuts can
// change what a barrier shows: between them its tx-count stays above zero
// (docs/emulator-models.md, "Completion order").
std::uint32_t EngineRoom::next_piece(std::uint32_t e, bool touch) const {
  const std::deque<AsyncOp>& q = engines_[e].queue;
  if (q.empty() || q.front().kind != AsyncOp::Kind::tma) return 0;
  const AsyncOp& op = q.front();
  const auto box = static_cast<std::uint32_t>(tma_box_bytes(op.map));
  const std::uint32_t left = box - op.delivered;
  const std::uint32_t half = box >= 2 * kPieceGrain ? left / 2 / kPieceGrain * kPieceGrain : 0;
  if (w_.options().legacy_pieces) return op.delivered == 0 ? half : 0;
  std::uint32_t cut = 0;
  const std::uint32_t first = w_.cluster(w_.cta(engines_[e].cta).cluster).first_cta;
  for (std::uint32_t r = 0; r < w_.launch().cluster_size; ++r) {
    if (((op.mask >> r) & 1u) == 0) continue;
    const std::uint32_t bar_cta = op.cta_group == 2 ? w_.pair_cta(first + r, 0) : first + r;
    const std::int64_t id = w_.mbar().at(bar_cta, op.bar_offset);
    if (id < 0) continue;
    // The destinations that count on this barrier.
    std::uint32_t counted = 0;
    for (std::uint32_t s = 0; s < w_.launch().cluster_size; ++s)
      if (((op.mask >> s) & 1u) != 0 && (op.cta_group == 2 ? w_.pair_cta(first + s, 0) : first + s) == bar_cta)
        ++counted;
    const std::int64_t tx = touch ? w_.mbar().read_tx(static_cast<std::uint32_t>(id)) : w_.mbar().tx_of(static_cast<std::uint32_t>(id));
    if (tx <= 0 || tx % counted != 0) continue;
    const auto bytes = static_cast<std::uint64_t>(tx / counted);
    if (bytes < left && bytes % kChunk == 0 && (cut == 0 || bytes < cut)) cut = static_cast<std::uint32_t>(bytes);
  }
  if (cut != 0) return cut;
  return op.delivered == 0 ? half : 0;
}

// Alternative j of CTA c: j < per_cta() - 1 completes the load at queue
// position j + 1 of c's TMA engine, ahead of every older operation (PTX
// orders no bulk copy's completion after another's); the last delivers a
// piece of the oldest load (next_piece: the bytes of one copy may land and
// be counted in several steps; the H100 showed both).
Move EngineRoom::alternative_move(std::uint32_t actor) const {
  const std::uint32_t a = actor - alt_base_;
  const std::uint32_t e = 2 * (a / per_cta_);
  const std::deque<AsyncOp>& q = engines_[e].queue;
  const std::uint32_t j = a % per_cta_;
  if (j + 1 < per_cta_) return q.size() > j + 1 && q[j + 1].kind == AsyncOp::Kind::tma ? Move::progress : Move::no;
  return next_piece(e, false) != 0 ? Move::progress : Move::no;
}

std::string EngineRoom::alternative_name(std::uint32_t actor) const {
  const std::uint32_t a = actor - alt_base_;
  const std::uint32_t j = a % per_cta_;
  const std::string& tma = engines_[2 * (a / per_cta_)].name;
  return j + 1 < per_cta_ ? tma + "[" + std::to_string(j + 1) + "]" : tma + "[piece]";
}

bool EngineRoom::alternative_step(std::uint32_t actor) {
  const std::uint32_t a = actor - alt_base_;
  const std::uint32_t e = 2 * (a / per_cta_);
  const std::uint32_t j = a % per_cta_;
  if (j + 1 < per_cta_) return complete(e, j + 1);
  // A piece: the load stays the oldest, with the rest to deliver.
  changed(e);
  AsyncOp& op = engines_[e].queue.front();
  w_.touch(World::Res::engine, e);
  w_.touch(World::Res::async_op, World::key(e, op.seq), Touch::await);
  const std::uint32_t piece = next_piece(e, true);
  const std::uint32_t comp = w_.comp_tma(op.issuer);
  if (w_.options().race_check) w_.async_start(comp, op.clock);
  w_.tma_load().complete(op, e, op.delivered + piece);
  if (w_.options().race_check) w_.tick(comp);
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
  for (std::uint32_t e = 0; e < engines_.size(); ++e)
    if (w_.cta(engines_[e].cta).cluster == w_.cta(w.cta).cluster) w_.touch(World::Res::engine_load, e, Touch::read);
  std::string what;
  if (in_flight_for(w.cta, &what) || w_.clc().pending_for(w.cta, &what)) {
    w_.fail(w, "async.target-exited", cta_label(w.cta),
            "the CTA exited while " + what + " was still in flight into it (drain the pipeline before exiting)", w.loc);
    return false;
  }
  return true;
}

}  // namespace wspipe::emu::detail
