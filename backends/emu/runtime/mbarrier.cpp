// The mbarrier room: init, inval, fence.mbarrier_init, arrive (local and
// remote), expect_tx / complete_tx, wait, try_wait, test_wait, phase
// completion; the rules named mbarrier.*.
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/util.hpp"

#include <algorithm>
#include <sstream>

namespace wspipe::emu::detail {

// ------------------------------------------------------------ mbarrier

bool World::in_smem(const void* p, const Cta& c) const {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= c.smem && b + sizeof(SharedMemBarrier) <= c.smem + c.smem_bytes;
}

std::string World::anon_name(const void* p, const Cta& c) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "mbarrier at smem+0x%zx",
                static_cast<std::size_t>(static_cast<const std::byte*>(p) - c.smem));
  return buf;
}

std::string World::object_label(std::uint32_t id) const {
  const Mbar& m = mbars_[id];
  return m.name + " (" + cta_label(m.cta) + ")";
}

Mbar* World::resolve(SharedMemBarrier& bar, Warp& w, const SourceLoc& loc) {
  const Cta& c = ctas_[w.cta];
  if (!in_smem(&bar, c)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "mbarrier operand is not in this CTA's shared memory (PTX: undefined behaviour)", loc);
    return nullptr;
  }
  const std::uint64_t raw = bar.raw;
  const std::uint64_t idx = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) == kTag && idx < mbars_.size() && mbars_[idx].addr == &bar && mbars_[idx].live) {
    touch_mbar(mbars_[idx]);
    return &mbars_[idx];
  }
  fail(w, "mbarrier.uninitialized", anon_name(&bar, c) + " (" + cta_label(w.cta) + ")",
       "operation on an mbarrier that is not initialised (never init-ed, inval-ed, or its bytes overwritten)", loc);
  return nullptr;
}

Mbar* World::resolve_remote(SharedMemBarrier& bar, std::uint32_t rank, Warp& w, const SourceLoc& loc) {
  const Cta& own = ctas_[w.cta];
  if (rank >= launch_.cluster_size) {
    barriers_->report_bad_rank(w, rank, loc);
    return nullptr;
  }
  if (!in_smem(&bar, own)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "remote arrive names an address outside this CTA's shared memory", loc);
    return nullptr;
  }
  const std::uint32_t peer = clusters_[own.cluster].first_cta + rank;
  if (peer == w.cta) return resolve(bar, w, loc);
  Cta& pc = ctas_[peer];
  auto* peer_bar =
      reinterpret_cast<SharedMemBarrier*>(pc.smem + (reinterpret_cast<std::byte*>(&bar) - own.smem));
  if (pc.exited()) {
    fail(w, "mbarrier.remote-exited-cta", anon_name(peer_bar, pc) + " (" + cta_label(peer) + ")",
         "remote arrive into " + cta_label(peer) +
             ", which has exited (illegal shared::cluster access: launch failure on hardware)",
         loc);
    return nullptr;
  }
  const std::uint64_t raw = peer_bar->raw;
  const std::uint64_t idx = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) != kTag || idx >= mbars_.size() || mbars_[idx].addr != peer_bar ||
      !mbars_[idx].live) {
    fail(w, "mbarrier.uninitialized", anon_name(peer_bar, pc) + " (" + cta_label(peer) + ")",
         "remote arrive on an mbarrier of " + cta_label(peer) + " that is not initialised", loc);
    return nullptr;
  }
  Mbar& m = mbars_[idx];
  touch_mbar(m);
  if (!m.fenced || barriers_->cluster_gen(own.cluster) <= m.fenced_gen) {
    fail(w, "mbarrier.remote-init-not-visible", object_label(static_cast<std::uint32_t>(idx)),
         std::string("remote arrive before the barrier's init was made visible to the cluster: ") +
             (m.fenced ? "no cluster barrier completed after the initialising warp's fence_init"
                       : "the initialising warp has not executed fence_init (fence.mbarrier_init.release.cluster)"),
         loc);
    return nullptr;
  }
  return &m;
}

void World::mbar_init(SharedMemBarrier& bar, std::uint32_t count, const char* base, int index,
                      const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  const Cta& c = ctas_[w.cta];
  if (!in_smem(&bar, c)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "mbarrier.init on an address outside this CTA's shared memory", loc);
    return;
  }
  std::string name;
  if (base != nullptr) {
    name = base;
    if (index >= 0) name += "[" + std::to_string(index) + "]";
  } else {
    name = anon_name(&bar, c);
  }
  touch(Res::mbar, (std::uint64_t{w.cta} << 32) |
                       static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(&bar) - c.smem));
  const std::uint64_t raw = bar.raw;
  const std::uint64_t old = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) == kTag && old < mbars_.size() && mbars_[old].addr == &bar && mbars_[old].live) {
    fail(w, "mbarrier.init-live", object_label(static_cast<std::uint32_t>(old)),
         "mbarrier.init on a live barrier (needs mbarrier.inval first; hardware silently resets it)", loc);
    return;
  }
  if (count < 1 || count > kMbarrierMaxCount) {
    fail(w, "mbarrier.count-range", name + " (" + cta_label(w.cta) + ")",
         "mbarrier.init count " + std::to_string(count) + " outside [1, 2^20-1]", loc);
    return;
  }
  const auto id = static_cast<std::uint32_t>(mbars_.size());
  Mbar& m = mbars_.emplace_back();
  lists_.emplace_back();  // its waiters: mbar_list(id)
  m.addr = &bar;
  m.cta = w.cta;
  m.name = std::move(name);
  m.live = true;
  m.expected = m.pending = count;
  m.init_warp = static_cast<std::int32_t>(w.id);
  bar.raw = kTag | (id + 1);
  if (options_.trace) result_.trace.objects.push_back({m.name, m.cta});
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
            .kind = EventKind::init, .a = count, .file = loc.file_name(), .line = loc.line()});
  if (lanes(w.active) > 1)
    fail(w, "mbarrier.init-live", object_label(id),
         "mbarrier.init executed by " + std::to_string(lanes(w.active)) +
             " lanes: every lane after the first re-initialises a live barrier (init belongs in elect_one)",
         loc);
}

void World::mbar_inval(SharedMemBarrier& bar, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return;
  m->live = false;
  mark_list(mbar_list(static_cast<std::uint32_t>(m - mbars_.data())));  // its waiters cannot pass now
  bar.raw = 0;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id),
            .object = static_cast<std::int32_t>(m - mbars_.data()), .kind = EventKind::inval, .file = loc.file_name(),
            .line = loc.line()});
}

void World::fence_init(const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  // fence.mbarrier_init.release.cluster orders the executing thread's prior
  // mbarrier.init operations for the cluster (PTX "membar/fence").
  std::int64_t n = 0;
  const std::uint64_t gen = barriers_->cluster_gen(ctas_[w.cta].cluster);
  touch(Res::cluster, ctas_[w.cta].cluster);
  for (Mbar& m : mbars_) {
    if (m.live && !m.fenced && m.init_warp == static_cast<std::int32_t>(w.id)) {
      touch_mbar(m);
      m.fenced = true;
      m.fenced_gen = gen;
      ++n;
    }
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::fence_init, .a = n,
            .file = loc.file_name(), .line = loc.line()});
}

bool World::check_tx_range(std::uint32_t id, Warp& w, const SourceLoc& loc) {
  const Mbar& m = mbars_[id];
  if (m.tx > kMbarrierMaxTx || m.tx < -kMbarrierMaxTx) {
    fail(w, "mbarrier.tx-range", object_label(id),
         "tx-count " + std::to_string(m.tx) + " outside [-(2^20-1), 2^20-1]", loc);
    return false;
  }
  return true;
}

void World::maybe_complete(std::uint32_t id, std::int32_t actor, const SourceLoc& loc) {
  Mbar& m = mbars_[id];
  touch_mbar(m);
  if (m.pending != 0 || m.tx != 0) return;
  // PTX "Phase Completion": pending arrivals and tx-count both reached 0.
  ++m.phase;
  m.pending = m.expected;
  m.observed = false;
  if (options_.race_check) {
    m.done.swap(m.acc);
    m.acc.assign(clock_size(m.cta), 0);
  }
  if (options_.trace)
    record({.step = step_, .warp = actor, .object = static_cast<std::int32_t>(id), .kind = EventKind::phase,
            .a = static_cast<std::int64_t>(m.phase), .file = loc.file_name(), .line = loc.line()});
  mark_list(mbar_list(id));
  // A waiter still blocked on a phase two behind can no longer see it: its
  // parity now names the current, incomplete phase (aliasing). The waiters
  // are the barrier's list; the lowest warp id is reported.
  const Warp* alias = nullptr;
  for (const std::uint32_t a : lists_[mbar_list(id)]) {
    const Warp& x = warps_[a];
    if (x.intended + 1 < static_cast<std::int64_t>(m.phase) && (alias == nullptr || x.id < alias->id)) alias = &x;
  }
  if (alias != nullptr) {
    const Warp& x = *alias;
    fail(*current_, "mbarrier.parity-alias", object_label(id),
         "phase " + std::to_string(x.intended) + ", which " + x.name + " waits for (parity " +
             std::to_string(x.parity) + "), completed and the barrier moved on to phase " +
             std::to_string(m.phase) + " before the waiter ran: its parity now names the current phase",
         x.loc, &x);
  }
}

bool World::complete_tx(std::uint32_t id, std::uint32_t bytes, std::uint32_t comp, std::int32_t actor,
                        const Issued& op, std::uint64_t begin) {
  Mbar& m = mbars_[id];
  touch_mbar(m);
  m.tx -= bytes;
  if (!check_tx_range(id, *current_, op.loc)) return false;
  if (options_.race_check) {
    if (m.acc.empty()) m.acc.assign(clock_size(m.cta), 0);
    release(comp, m.acc);
  }
  if (options_.trace)
    record({.step = step_, .begin = begin, .warp = actor, .object = static_cast<std::int32_t>(id),
            .kind = EventKind::complete_tx, .a = bytes, .b = m.pending, .c = m.tx, .file = op.loc.file_name(),
            .line = op.loc.line()});
  maybe_complete(id, actor, op.loc);
  return !stopping_;
}

bool World::arrive_on(std::uint32_t id, std::uint32_t count, std::uint32_t tx_bytes, bool remote, std::uint32_t comp,
                      std::int32_t actor, const SourceLoc& loc, const Warp* culprit) {
  Mbar* m = &mbars_[id];
  touch_mbar(*m);
  Warp& running = *current_;
  // arrive.expect_tx is expect-tx(n) then arrive-on(1), per lane.
  m->tx += static_cast<std::int64_t>(tx_bytes) * count;
  if (tx_bytes != 0 && !check_tx_range(id, running, loc)) return false;
  if (count > m->pending) {
    fail(running, "mbarrier.over-arrival", object_label(id),
         "arrive of " + std::to_string(count) + (count > 1 ? " (one per active lane)" : "") + " with only " +
             std::to_string(m->pending) + " of " + std::to_string(m->expected) +
             " arrivals pending in phase " + std::to_string(m->phase) +
             ": traps on hardware; a warp-level arrive counts every active lane (use elect_one)",
         loc, culprit);
    return false;
  }
  if (!m->observed) {
    fail(running, "mbarrier.arrive-before-wait", object_label(id),
         "arrive in phase " + std::to_string(m->phase) + " before any wait observed the completion of phase " +
             std::to_string(m->phase - 1) + " (PTX usage rule): the phase can be skipped unseen",
         loc, culprit);
    return false;
  }
  m->pending -= count;
  if (options_.race_check) {
    if (m->acc.empty()) m->acc.assign(clock_size(m->cta), 0);
    release(comp, m->acc);
  }
  if (options_.trace)
    record({.step = step_, .warp = actor, .object = static_cast<std::int32_t>(id), .kind = EventKind::arrive,
            .remote = remote, .a = count, .b = m->pending, .c = m->tx, .file = loc.file_name(), .line = loc.line()});
  maybe_complete(id, actor, loc);
  return !stopping_;
}

void World::mbar_arrive(SharedMemBarrier& bar, std::int64_t cta_rank, std::uint32_t tx_bytes, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  const bool remote = cta_rank >= 0;
  Mbar* m = remote ? resolve_remote(bar, static_cast<std::uint32_t>(cta_rank), w, loc) : resolve(bar, w, loc);
  if (m == nullptr) return;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  // PTX "tcgen05 memory consistency": a warp hands TMEM back (this arrive
  // releases the accumulator stage) only after tcgen05.wait::ld, or the MMA
  // that reuses the stage may overwrite cells the load still reads.
  if (w.ld_waited < w.ld_issued) {
    tmem_report_release_before_wait(w, id, loc);
    return;
  }
  arrive_on(id, lanes(w.active), tx_bytes, remote && m->cta != w.cta, w.id, static_cast<std::int32_t>(w.id), loc,
            nullptr);
}

void World::mbar_tx(SharedMemBarrier& bar, std::int64_t delta_per_lane, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  const std::int64_t delta = delta_per_lane * lanes(w.active);
  m->tx += delta;
  if (!check_tx_range(id, w, loc)) return;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
            .kind = delta >= 0 ? EventKind::expect_tx : EventKind::complete_tx, .a = delta >= 0 ? delta : -delta,
            .b = m->pending, .c = m->tx, .file = loc.file_name(), .line = loc.line()});
  // tx may return to 0 with no arrivals pending: that completes the phase
  // (observed on sm_90a: docs/hardware.md "Mbarrier phases").
  maybe_complete(id, static_cast<std::int32_t>(w.id), loc);
}

bool World::mbar_wait(SharedMemBarrier& bar, std::uint32_t parity, bool is_try, const SourceLoc& loc) {
  return mbar_wait_kind(bar, parity, is_try ? WaitKind::try_wait : WaitKind::wait, loc);
}

bool World::mbar_test(SharedMemBarrier& bar, std::uint32_t parity, const SourceLoc& loc) {
  return mbar_wait_kind(bar, parity, WaitKind::test_wait, loc);
}

bool World::mbar_wait_kind(SharedMemBarrier& bar, std::uint32_t parity, WaitKind kind, const SourceLoc& loc) {
  Warp& w = warp();
  const LaneOp::Kind lane_kind = kind == WaitKind::wait       ? LaneOp::Kind::wait
                                 : kind == WaitKind::try_wait ? LaneOp::Kind::try_wait
                                                              : LaneOp::Kind::test_wait;
  if (!lanes_agree(w, {.kind = lane_kind, .object = &bar, .a = parity & 1u, .loc = loc}))
    return w.lane.ok;  // lane 31 takes the answer the warp's fiber got
  if (killing_) return point(w, loc), true;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return true;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  parity &= 1u;
  // The phase this wait means: the next one with this parity after the
  // last phase this warp observed on the barrier. Waits are valid only for
  // the current phase and the one before (PTX mbarrier.test_wait).
  if (w.seen.size() <= id) w.seen.resize(id + 1, kNotSeen);
  const std::int64_t last = w.seen[id];
  const auto cur = static_cast<std::int64_t>(m->phase);
  std::int64_t intended;
  if (last == kNotSeen) {
    intended = ((cur & 1) == parity) ? cur : cur - 1;
  } else {
    intended = ((last & 1) == static_cast<std::int64_t>(parity)) ? last : last + 1;
  }
  if (intended < cur - 1) {
    fail(w, "mbarrier.parity-alias", object_label(id),
         "wait for parity " + std::to_string(parity) + ": this warp last observed phase " + std::to_string(last) +
             ", so it waits for phase " + std::to_string(intended) + ", but the barrier is at phase " +
             std::to_string(cur) + "; the parity names phase " + std::to_string(((cur & 1) == parity) ? cur : cur - 1) +
             " instead",
         loc);
    return true;
  }
  w.intended = intended;
  // test_wait never blocks: a plain scheduling point.
  const bool go = kind == WaitKind::test_wait
                      ? point(w, loc)
                      : point(w, kind == WaitKind::try_wait ? Block::mbar_try : Block::mbar,
                              static_cast<std::int32_t>(id), parity, 0, loc);
  if (!go) return true;
  // Other warps ran meanwhile and may have grown the barrier table: look the
  // barrier up again by id rather than through the pointer.
  Mbar& after = mbars_[id];
  touch_mbar(after);
  const bool ok = phase_done(after, parity);
  if (ok) {
    after.observed = true;
    w.seen[id] = static_cast<std::int64_t>(after.phase) - 1;
    if (options_.race_check) acquire(w.id, after.done);
  }
  if (options_.trace)
    record({.step = step_, .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
            .object = static_cast<std::int32_t>(id), .kind = kind == WaitKind::wait       ? EventKind::wait
                                              : kind == WaitKind::try_wait ? EventKind::try_wait
                                                                           : EventKind::test_wait,
            .a = parity, .b = ok ? static_cast<std::int64_t>(after.phase) - 1 : -1, .c = ok, .file = loc.file_name(),
            .line = loc.line()});
  if (w.lane.publish) w.lane.ok = ok;
  return ok;
}

// An asynchronous operation `op` (issued by a warp, completed by an engine
// or a CLC unit) finds no initialised mbarrier at `offset` in CTA `cta`;
// `what` says how it met it ("tcgen05.commit arrives on").
void World::report_uninitialized(std::uint32_t cta, std::uint32_t offset, const Issued& op, const char* what) {
  std::string m(what);
  m.append(" no initialised mbarrier at this offset in ").append(cta_label(cta));
  fail(*current_, "mbarrier.uninitialized", "mbarrier at smem+" + std::to_string(offset) + " (" + cta_label(cta) + ")",
       std::move(m), op.loc, &warps_[op.issuer]);
}

// An operation's mbarrier (`whose`: "the TMA load's mbarrier") is not in
// the issuing CTA's shared memory.
void World::report_not_shared(Warp& w, const char* whose, const SourceLoc& loc) {
  fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
       std::string(whose) + " is not in this CTA's shared memory", loc);
}

// A TMA load about to complete `bytes` of transaction count on barrier `m`
// (id `id`): true, after reporting, when they overshoot the phase.
bool World::tx_overshoot(const Mbar& m, std::uint32_t id, std::uint32_t bytes, const Issued& op) {
  // Silicon delivers a copy's bytes in pieces (16 bytes at a time, as far
  // as an H100 shows: docs/silicon.md). More bytes than the phase still
  // expects, with every arrival in, complete the phase partway through
  // the copy, or not, depending on how the pieces fall, and the rest count
  // against the next phase: nondeterministic on hardware, a bug here.
  if (m.pending == 0 && m.tx > 0 && static_cast<std::int64_t>(bytes) > m.tx) {
    fail(*current_, "mbarrier.tx-overshoot", object_label(id),
         "a TMA load delivers " + std::to_string(bytes) + " bytes to a barrier that expects only " +
             std::to_string(m.tx) + " more in phase " + std::to_string(m.phase) +
             " with no arrivals pending: on silicon the bytes land in pieces, the phase may complete partway "
             "through the copy, and the rest count against the next phase (expect_tx too small?)",
         op.loc, &warps_[op.issuer]);
    return true;
  }
  return false;
}

// Bytes still expected or delivered unmatched on a barrier when its CTA
// exits: expect_tx and the bytes that arrived disagree (docs/hardware.md bug 13).
bool World::mbar_check_exit(Warp& w) {
  for (std::uint32_t id = 0; id < mbars_.size(); ++id) {
    const Mbar& m = mbars_[id];
    if (m.live && m.cta == w.cta && m.tx != 0) {
      fail(w, "mbarrier.tx-pending-at-exit", object_label(id),
           "the CTA exited with tx-count " + std::to_string(m.tx) + " in phase " + std::to_string(m.phase) +
               ": bytes expected and bytes delivered disagree",
           w.loc);
      return false;
    }
  }
  return true;
}

}  // namespace wspipe::emu::detail
