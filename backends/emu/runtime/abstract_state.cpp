// The abstract state of a scheduling point, for RunOptions::observer
// (emulator.hpp: StateObserver): what the protocol is doing, with every
// count that grows with the items handled left out, so that a ring's state
// can repeat (docs/exploration.md, "Parametric verdicts").
#include <string>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {
namespace {

const char* block_name(Block b) {
  switch (b) {
    case Block::none: return "op";
    case Block::not_started: return "start";
    case Block::mbar: return "wait";
    case Block::mbar_try: return "try_wait";
    case Block::named: return "bar.sync";
    case Block::cluster: return "cluster.wait";
    case Block::tmem_alloc: return "alloc";
    case Block::tmem_pair: return "pair";
    case Block::bulk_wait: return "bulk.wait";
    case Block::finished: return "done";
  }
  return "?";
}

char op_kind(AsyncOp::Kind k) {
  switch (k) {
    case AsyncOp::Kind::tma: return 't';
    case AsyncOp::Kind::mma: return 'm';
    case AsyncOp::Kind::commit: return 'c';
    case AsyncOp::Kind::tma_store: return 's';
  }
  return '?';
}

}  // namespace

// Each warp's program point (`w<id>:<what>[ b<barrier> p<parity> s<phase>]@
// <file>:<line>` and whether it can move: `+`, `~` only by a time-out, `.`
// not), then the mbarriers, the named and cluster barriers, and each engine
// with work queued (`e<engine>:` and per operation its kind, its mbarrier's
// offset, `p` once a piece of it is delivered, `r` once a store's source
// is read). Left out: phase, generation and issue numbers, steps, clocks,
// data, Tensor Memory and cluster launch control.
void World::observe() {
  std::string& s = abstract_;
  s.clear();
  for (const Warp& w : warps_) {
    s.append(w.id == 0 ? "w" : " w").append(std::to_string(w.id)).push_back(':');
    s.append(block_name(w.block));
    if (w.block == Block::mbar || w.block == Block::mbar_try) {
      s.append(" b").append(std::to_string(w.obj)).append(" p").append(std::to_string(w.parity));
      mbar_->abstract_wait(w, s);
    } else if (w.block == Block::named) {
      s.append(" n").append(std::to_string(w.obj));
    }
    if (w.block != Block::not_started && w.block != Block::finished)
      s.append("@").append(rel(w.loc.file_name())).append(":").append(std::to_string(w.loc.line()));
    const auto m = static_cast<Move>(moves_[w.id]);
    s.push_back(m == Move::progress ? '+' : m == Move::spin ? '~' : '.');
  }
  s.append(" |");
  mbar_->abstract_state(s);
  barriers_->abstract_state(s);
  for (std::uint32_t e = 0; e < engines_->count(); ++e) {
    const Engine& en = engines_->engine(e);
    if (en.queue.empty()) continue;
    s.append(" e").append(std::to_string(e)).push_back(':');
    for (const AsyncOp& op : en.queue) {
      s.push_back(op_kind(op.kind));
      s.append(std::to_string(op.bar_offset));
      if (op.delivered != 0) s.push_back('p');
      if (op.read_done) s.push_back('r');
      s.push_back(',');
    }
  }
  options_.observer->point(step_, s);
}

}  // namespace wspipe::emu::detail
