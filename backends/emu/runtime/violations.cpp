// Violations as the World records them: fail() (the first stops the run),
// what a blocked warp waits on, the labels of objects and actors.
#include <sstream>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/clc.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/tma_store.hpp"

namespace wspipe::emu {

const char* to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::violation: return "violation";
    case Status::deadlock: return "deadlock";
    case Status::livelock: return "livelock";
  }
  return "?";
}

}  // namespace wspipe::emu

namespace wspipe::emu::detail {

// ------------------------------------------------------------ reporting

void World::fail(Warp& w, std::string rule, std::string object, std::string message, const SourceLoc& loc,
                 const Warp* culprit, std::string other) {
  fail(w, std::move(rule), std::move(object), std::move(message), CodeLine{loc.file_name(), loc.line()}, culprit,
       std::move(other));
}

void World::fail(Warp& w, std::string rule, std::string object, std::string message, const CodeLine& at,
                 const Warp* culprit, std::string other) {
  if (stopping_ || killing_) return;
  const Warp& who = culprit != nullptr ? *culprit : w;
  Violation v;
  v.rule = std::move(rule);
  v.message = std::move(message);
  v.warp = who.name;
  v.object = std::move(object);
  v.step = step_;
  v.file = rel(at.file);
  v.line = at.line;
  v.other = std::move(other);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(who.id), .kind = EventKind::violation,
            .file = at.file, .line = at.line});
  result_.violations.push_back(std::move(v));
  result_.status = Status::violation;
  end(Status::violation, &w);
}

BlockedWarp World::describe_blocked(const Warp& w) const {
  BlockedWarp b;
  b.warp = w.name;
  b.since = w.since;
  b.file = rel(w.loc.file_name());
  b.line = w.loc.line();
  std::int32_t object = -1;
  std::vector<const Event*> history;  // a named barrier's, which has no object id
  switch (w.block) {
    case Block::not_started:
      b.op =
          clc_->launched(ctas_[w.cta].cluster) ? "not started" : "not launched (its cluster waits for a launch slot)";
      break;
    case Block::none: b.op = "running"; break;
    case Block::finished: b.op = "finished"; break;
    case Block::mbar:
    case Block::mbar_try: {
      object = w.obj;
      b.op = w.block == Block::mbar ? "wait" : "try_wait";
      b.object = mbar_->label(static_cast<std::uint32_t>(w.obj));
      b.state = mbar_->blocked_state(w);
      b.barrier = w.obj;
      b.parity = static_cast<std::int32_t>(w.parity);
      break;
    }
    case Block::named: {
      b.op = "bar.sync";
      b.object = "named barrier " + std::to_string(w.obj) + " (" + cta_label(w.cta) + ")";
      b.state = barriers_->named_state(w.cta, static_cast<std::uint32_t>(w.obj));
      if (options_.trace) history = result_.trace.last_on_named(w.cta, w.obj, 6);
      break;
    }
    case Block::cluster: {
      b.op = "cluster_sync";
      b.object = "cluster barrier (cluster " + std::to_string(ctas_[w.cta].cluster) + ")";
      b.state = barriers_->cluster_state(ctas_[w.cta].cluster);
      break;
    }
    case Block::tmem_alloc:
    case Block::tmem_pair:
      b.op = w.block == Block::tmem_alloc ? "tcgen05.alloc" : "tcgen05 cta_group::2 collective";
      b.object = "Tensor Memory (" + cta_label(w.cta) + ")";
      b.state = tmem_->blocked_state(w);
      break;
    case Block::bulk_wait:
      b.op = w.parity != 0 ? "cp.async.bulk.wait_group.read" : "cp.async.bulk.wait_group";
      b.object = "bulk async-groups of " + w.name;
      b.state = tma_store_->blocked_state(w);
      break;
  }
  if (object >= 0 && options_.trace) history = result_.trace.last_on(object, 6);
  for (const Event* e : history) {
    b.last_events.push_back("step " + std::to_string(e->step) + "  " + result_.trace.warps[e->warp].name + "  " +
                            result_.trace.describe(*e) + "  " + result_.trace.location(*e));
  }
  return b;
}

}  // namespace wspipe::emu::detail
