// The mbarrier room: init, inval, fence.mbarrier_init, arrive (local and
// remote), expect_tx / complete_tx, wait, try_wait, test_wait, phase
// completion; the rules named mbarrier.*.
#include "backends/emu/runtime/mbarrier.hpp"

#include <algorithm>
#include <sstream>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

MbarrierRoom::MbarrierRoom(World& world) : Room(world), stated_(world.num_warps(), kUnstated) {}

namespace {

// The step's footprint (World::touch; inline here, their only callers'
// file: most runs track no footprints, and then the barrier's address is
// not worth computing): the barrier itself (its existence and fence), or
// one of its phases' resources.
std::uint64_t bar_key(World& w, const Mbar& m) {
  return (std::uint64_t{m.cta} << 32) |
         static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(m.addr) - w.cta(m.cta).smem);
}

[[gnu::always_inline]] inline void touch(World& w, const Mbar& m, Touch a) {
  if (w.tracks_footprints()) w.touch(World::Res::mbar, bar_key(w, m), a);
}

[[gnu::always_inline]] inline void touch(World& w, const Mbar& m, World::Res kind, std::uint64_t phase, Touch a) {
  if (w.tracks_footprints()) w.touch(kind, World::key(bar_key(w, m), phase), a);
}

// A step that sees phase k begun (k > 0) sees phase k-1 complete, which
// every arrival and tx update counted into k-1 made so, not only the one
// that completed it (the completion writes "k has begun" in that one's
// step). The counted updates commute with each other, so without reading
// their count such a step would be unordered with all of them but the
// last, and a schedule where one of them comes after it (and it sees k-1
// current, or counts into k-1 itself) would go unexplored. (A step that
// sees k not begun conflicts with the update that completes k-1, whichever
// that is: nothing more to read.)
[[gnu::always_inline]] inline void touch_begun(World& w, const Mbar& m, std::uint64_t k, Touch a) {
  touch(w, m, World::Res::mbar_phase, k, a);
  if (k > 0 && k <= m.phase) touch(w, m, World::Res::mbar_count, k - 1, a);
}

// An arrival or tx update counted into the current phase: it reads that
// the phase has begun and updates its count commutatively (completing it
// writes the next phase's beginning: maybe_complete).
[[gnu::always_inline]] inline void touch_count(World& w, const Mbar& m) {
  touch_begun(w, m, m.phase, Touch::read);
  touch(w, m, World::Res::mbar_count, m.phase, Touch::count);
}

}  // namespace

bool MbarrierRoom::check(SharedMemBarrier& bar, Warp& w, const SourceLoc& loc) {
  return resolve(bar, w, loc) != nullptr;
}

std::int64_t MbarrierRoom::at(std::uint32_t cta, std::uint32_t offset) const {
  const Cta& c = w_.cta(cta);
  if (offset + sizeof(SharedMemBarrier) > c.smem_bytes) return -1;
  const auto* bar = reinterpret_cast<const SharedMemBarrier*>(c.smem + offset);
  const std::uint64_t idx = (bar->raw & 0xffffffffull) - 1;
  if ((bar->raw & ~0xffffffffull) == kTag && idx < mbars_.size() && mbars_[idx].addr == bar && mbars_[idx].live)
    return static_cast<std::int64_t>(idx);
  return -1;
}

std::string MbarrierRoom::label_of(const SharedMemBarrier& bar, const Warp& w) const {
  const Cta& c = w_.cta(w.cta);
  if (!in_smem(&bar, c)) return "an mbarrier outside shared memory";
  for (std::uint32_t id = 0; id < mbars_.size(); ++id)
    if (mbars_[id].addr == &bar && mbars_[id].live) return label(id);
  return anon_name(&bar, c).append(" (cta").append(std::to_string(w.cta)).append(")");
}

std::int64_t MbarrierRoom::named_phase(const Mbar& m, std::uint32_t parity) {
  const auto cur = static_cast<std::int64_t>(m.phase);
  return (cur & 1) == parity ? cur : cur - 1;
}

std::string MbarrierRoom::blocked_state(const Warp& w) const {
  const Mbar& m = mbars_[static_cast<std::size_t>(w.obj)];
  const std::int64_t stated = stated_[w.id];
  return "waits for parity " + std::to_string(w.parity) + " (phase " +
         std::to_string(stated != kUnstated ? stated : named_phase(m, w.parity)) +
         "); the barrier is in phase " + std::to_string(m.phase) + " (parity " + std::to_string(m.phase & 1) +
         ") with " + std::to_string(m.pending) + " of " + std::to_string(m.expected) + " arrivals pending, tx-count " +
         std::to_string(m.tx);
}

// ------------------------------------------------------------ mbarrier

bool MbarrierRoom::in_smem(const void* p, const Cta& c) {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= c.smem && b + sizeof(SharedMemBarrier) <= c.smem + c.smem_bytes;
}

std::string MbarrierRoom::anon_name(const void* p, const Cta& c) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "mbarrier at smem+0x%zx",
                static_cast<std::size_t>(static_cast<const std::byte*>(p) - c.smem));
  return buf;
}

std::string MbarrierRoom::label(std::uint32_t id) const {
  const Mbar& m = mbars_[id];
  return m.name + " (" + cta_label(m.cta) + ")";
}

Mbar* MbarrierRoom::resolve(SharedMemBarrier& bar, Warp& w, const SourceLoc& loc) {
  const Cta& c = w_.cta(w.cta);
  if (!in_smem(&bar, c)) {
    w_.fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
            "mbarrier operand is not in this CTA's shared memory (PTX: undefined behaviour)", loc);
    return nullptr;
  }
  const std::uint64_t raw = bar.raw;
  const std::uint64_t idx = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) == kTag && idx < mbars_.size() && mbars_[idx].addr == &bar && mbars_[idx].live) {
    touch(w_, mbars_[idx], Touch::read);
    return &mbars_[idx];
  }
  w_.fail(w, "mbarrier.uninitialized", anon_name(&bar, c) + " (" + cta_label(w.cta) + ")",
          "operation on an mbarrier that is not initialised (never init-ed, inval-ed, or its bytes overwritten)", loc);
  return nullptr;
}

Mbar* MbarrierRoom::resolve_remote(SharedMemBarrier& bar, std::uint32_t rank, Warp& w, const SourceLoc& loc) {
  const Cta& own = w_.cta(w.cta);
  if (rank >= w_.launch().cluster_size) {
    w_.barriers().report_bad_rank(w, rank, loc);
    return nullptr;
  }
  if (!in_smem(&bar, own)) {
    w_.fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
            "remote arrive names an address outside this CTA's shared memory", loc);
    return nullptr;
  }
  const std::uint32_t peer = w_.cluster(own.cluster).first_cta + rank;
  if (peer == w.cta) return resolve(bar, w, loc);
  Cta& pc = w_.cta(peer);
  w_.touch(World::Res::cta_exit, peer, Touch::read);
  auto* peer_bar =
      reinterpret_cast<SharedMemBarrier*>(pc.smem + (reinterpret_cast<std::byte*>(&bar) - own.smem));
  if (pc.exited()) {
    w_.fail(w, "mbarrier.remote-exited-cta", anon_name(peer_bar, pc) + " (" + cta_label(peer) + ")",
            "remote arrive into " + cta_label(peer) +
                ", which has exited (illegal shared::cluster access: launch failure on hardware)",
            loc);
    return nullptr;
  }
  const std::uint64_t raw = peer_bar->raw;
  const std::uint64_t idx = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) != kTag || idx >= mbars_.size() || mbars_[idx].addr != peer_bar ||
      !mbars_[idx].live) {
    w_.fail(w, "mbarrier.uninitialized", anon_name(peer_bar, pc) + " (" + cta_label(peer) + ")",
            "remote arrive on an mbarrier of " + cta_label(peer) + " that is not initialised", loc);
    return nullptr;
  }
  Mbar& m = mbars_[idx];
  touch(w_, m, Touch::read);
  // Whether a cluster barrier completed after the fence: its visibility.
  if (m.fenced) w_.barriers().touch_begun(own.cluster, m.fenced_gen + 1);
  if (!m.fenced || w_.barriers().cluster_gen(own.cluster) <= m.fenced_gen) {
    w_.fail(w, "mbarrier.remote-init-not-visible", label(static_cast<std::uint32_t>(idx)),
            std::string("remote arrive before the barrier's init was made visible to the cluster: ") +
                (m.fenced ? "no cluster barrier completed after the initialising warp's fence_init"
                          : "the initialising warp has not executed fence_init (fence.mbarrier_init.release.cluster)"),
            loc);
    return nullptr;
  }
  return &m;
}

void MbarrierRoom::init(SharedMemBarrier& bar, std::uint32_t count, const char* base, int index, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  const Cta& c = w_.cta(w.cta);
  if (!in_smem(&bar, c)) {
    w_.fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
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
  w_.touch(World::Res::mbar, (std::uint64_t{w.cta} << 32) |
                                 static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(&bar) - c.smem));
  const std::uint64_t raw = bar.raw;
  const std::uint64_t old = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) == kTag && old < mbars_.size() && mbars_[old].addr == &bar && mbars_[old].live) {
    w_.fail(w, "mbarrier.init-live", label(static_cast<std::uint32_t>(old)),
            "mbarrier.init on a live barrier (needs mbarrier.inval first; hardware silently resets it)", loc);
    return;
  }
  if (count < 1 || count > kMbarrierMaxCount) {
    w_.fail(w, "mbarrier.count-range", name + " (" + cta_label(w.cta) + ")",
            "mbarrier.init count " + std::to_string(count) + " outside [1, 2^20-1]", loc);
    return;
  }
  const auto id = static_cast<std::uint32_t>(mbars_.size());
  Mbar& m = mbars_.emplace_back();
  w_.add_waiter_list();  // its waiters: mbar_list(id)
  m.addr = &bar;
  m.cta = w.cta;
  m.name = std::move(name);
  m.live = true;
  m.expected = m.pending = count;
  m.init_warp = static_cast<std::int32_t>(w.id);
  bar.raw = kTag | (id + 1);
  if (w_.options().trace) w_.trace_object(m.name, m.cta);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
               .kind = EventKind::init, .a = count, .file = loc.file_name(), .line = loc.line()});
  if (lanes(w.active) > 1)
    w_.fail(w, "mbarrier.init-live", label(id),
            "mbarrier.init executed by " + std::to_string(lanes(w.active)) +
                " lanes: every lane after the first re-initialises a live barrier (init belongs in elect_one)",
            loc);
}

void MbarrierRoom::inval(SharedMemBarrier& bar, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return;
  touch(w_, *m, Touch::write);
  m->live = false;
  w_.mark_list(w_.mbar_list(static_cast<std::uint32_t>(m - mbars_.data())));  // its waiters cannot pass now
  w_.engines().tx_changed(m->cta);  // no piece is cut at its tx-count now
  bar.raw = 0;
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id),
               .object = static_cast<std::int32_t>(m - mbars_.data()), .kind = EventKind::inval,
               .file = loc.file_name(), .line = loc.line()});
}

void MbarrierRoom::fence_init(const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  // fence.mbarrier_init.release.cluster orders the executing thread's prior
  // mbarrier.init operations for the cluster (PTX "membar/fence").
  std::int64_t n = 0;
  const std::uint64_t gen = w_.barriers().cluster_gen(w_.cta(w.cta).cluster);
  // It records which cluster barrier generation comes next.
  w_.touch(World::Res::cluster, World::key(w_.cta(w.cta).cluster, gen + 1), Touch::read);
  for (Mbar& m : mbars_) {
    if (m.live && !m.fenced && m.init_warp == static_cast<std::int32_t>(w.id)) {
      touch(w_, m, Touch::write);
      m.fenced = true;
      m.fenced_gen = gen;
      ++n;
    }
  }
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::fence_init, .a = n,
               .file = loc.file_name(), .line = loc.line()});
}

bool MbarrierRoom::check_tx_range(std::uint32_t id, Warp& w, const SourceLoc& loc) {
  const Mbar& m = mbars_[id];
  if (m.tx > kMbarrierMaxTx || m.tx < -kMbarrierMaxTx) {
    w_.fail(w, "mbarrier.tx-range", label(id), "tx-count " + std::to_string(m.tx) + " outside [-(2^20-1), 2^20-1]",
            loc);
    return false;
  }
  return true;
}

void MbarrierRoom::maybe_complete(std::uint32_t id, std::int32_t actor, const SourceLoc& loc) {
  Mbar& m = mbars_[id];
  if (m.pending != 0 || m.tx != 0) return;
  // PTX "Phase Completion": pending arrivals and tx-count both reached 0.
  // It begins the next phase, which every later arrival, wait, and the
  // aliasing check of warps waiting for a phase two behind, read.
  touch(w_, m, World::Res::mbar_phase, m.phase + 1, Touch::write);
  ++m.phase;
  m.pending = m.expected;
  m.observed = false;
  if (w_.options().race_check) {
    m.done.swap(m.acc);
    m.acc.assign(w_.clock_size(m.cta), 0);
  }
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = actor, .object = static_cast<std::int32_t>(id), .kind = EventKind::phase,
               .a = static_cast<std::int64_t>(m.phase), .file = loc.file_name(), .line = loc.line()});
  w_.mark_list(w_.mbar_list(id));
  // A waiter still blocked on a phase that is now two behind can no longer
  // see it: its parity names the current, incomplete phase (aliasing). A
  // waiter that gave its parity alone goes on waiting for that phase, as
  // silicon does (a deadlock, or a later phase's data, if it was wrong); one
  // that stated the phase it means is reported now. The waiters are the
  // barrier's list; the lowest warp id is reported.
  const Warp* alias = nullptr;
  for (const std::uint32_t a : w_.waiters(w_.mbar_list(id))) {
    const Warp& x = w_.warp_at(a);
    const std::int64_t stated = stated_[x.id];
    const bool missed = stated != kUnstated && stated + 1 < static_cast<std::int64_t>(m.phase);
    if (missed && (alias == nullptr || x.id < alias->id)) alias = &x;
  }
  if (alias != nullptr) {
    const Warp& x = *alias;
    w_.fail(w_.running(), "mbarrier.parity-alias", label(id),
            "phase " + std::to_string(stated_[x.id]) + ", which " + x.name + " waits for (parity " +
                std::to_string(x.parity) + "), completed and the barrier moved on to phase " + std::to_string(m.phase) +
                " before the waiter ran: its parity now names the current phase",
            x.loc, &x);
  }
}

bool MbarrierRoom::complete_tx(std::uint32_t id, std::uint32_t bytes, std::uint32_t comp, std::int32_t actor,
                               const Issued& op, std::uint64_t begin) {
  Mbar& m = mbars_[id];
  touch_count(w_, m);
  m.tx -= bytes;
  w_.engines().tx_changed(m.cta);
  if (!check_tx_range(id, w_.running(), op.loc)) return false;
  if (w_.options().race_check) {
    if (m.acc.empty()) m.acc.assign(w_.clock_size(m.cta), 0);
    w_.release(comp, m.acc);
  }
  if (w_.options().trace)
    w_.record({.step = w_.step(), .begin = begin, .warp = actor, .object = static_cast<std::int32_t>(id),
               .kind = EventKind::complete_tx, .a = bytes, .b = m.pending, .c = m.tx, .file = op.loc.file_name(),
               .line = op.loc.line()});
  maybe_complete(id, actor, op.loc);
  return !w_.stopping();
}

bool MbarrierRoom::arrive_on(std::uint32_t id, std::uint32_t count, std::uint32_t tx_bytes, bool remote,
                             std::uint32_t comp, std::int32_t actor, const SourceLoc& loc, const Warp* culprit) {
  Mbar* m = &mbars_[id];
  touch_count(w_, *m);
  // Decrements of the count (arrivals, complete_tx) commute: one that does
  // not complete the phase after another would not before it either. An
  // expect_tx raises the tx-count: moved later, it could let an earlier
  // decrement complete the phase, so it conflicts with them.
  if (tx_bytes != 0) touch(w_, *m, World::Res::mbar_count, m->phase, Touch::write);
  // The usage rule below reads whether a wait observed the last completion.
  if (m->phase > 0) touch(w_, *m, World::Res::mbar_seen, m->phase - 1, Touch::read);
  Warp& running = w_.running();
  // arrive.expect_tx is expect-tx(n) then arrive-on(1), per lane.
  m->tx += static_cast<std::int64_t>(tx_bytes) * count;
  if (tx_bytes != 0) w_.engines().tx_changed(m->cta);
  if (tx_bytes != 0 && !check_tx_range(id, running, loc)) return false;
  if (count > m->pending) {
    // Whether it over-arrives depends on the arrivals before it.
    touch(w_, *m, World::Res::mbar_count, m->phase, Touch::read);
    w_.fail(running, "mbarrier.over-arrival", label(id),
            "arrive of " + std::to_string(count) + (count > 1 ? " (one per active lane)" : "") + " with only " +
                std::to_string(m->pending) + " of " + std::to_string(m->expected) + " arrivals pending in phase " +
                std::to_string(m->phase) +
                ": traps on hardware; a warp-level arrive counts every active lane (use elect_one)",
            loc, culprit);
    return false;
  }
  if (!m->observed) {
    w_.fail(running, "mbarrier.arrive-before-wait", label(id),
            "arrive in phase " + std::to_string(m->phase) + " before any wait observed the completion of phase " +
                std::to_string(m->phase - 1) + " (PTX usage rule): the phase can be skipped unseen",
            loc, culprit);
    return false;
  }
  m->pending -= count;
  if (w_.options().race_check) {
    if (m->acc.empty()) m->acc.assign(w_.clock_size(m->cta), 0);
    if (comp < w_.num_warps())
      w_.warp_release(w_.warp_at(comp), m->acc);  // by its active lanes
    else
      w_.release(comp, m->acc);
  }
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = actor, .object = static_cast<std::int32_t>(id), .kind = EventKind::arrive,
               .remote = remote, .a = count, .b = m->pending, .c = m->tx, .file = loc.file_name(), .line = loc.line()});
  maybe_complete(id, actor, loc);
  return !w_.stopping();
}

void MbarrierRoom::arrive(SharedMemBarrier& bar, std::int64_t cta_rank, std::uint32_t tx_bytes, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  const bool remote = cta_rank >= 0;
  Mbar* m = remote ? resolve_remote(bar, static_cast<std::uint32_t>(cta_rank), w, loc) : resolve(bar, w, loc);
  if (m == nullptr) return;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  // An arrive that releases TMEM a tcgen05.ld still reads (tmem.*).
  if (!w_.tmem().check_release(w, id, loc)) return;
  arrive_on(id, lanes(w.active), tx_bytes, remote && m->cta != w.cta, w.id, static_cast<std::int32_t>(w.id), loc,
            nullptr);
}

void MbarrierRoom::tx(SharedMemBarrier& bar, std::int64_t delta_per_lane, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  const std::int64_t delta = delta_per_lane * lanes(w.active);
  touch_count(w_, *m);
  if (delta > 0) touch(w_, *m, World::Res::mbar_count, m->phase, Touch::write);  // an expect_tx (arrive_on)
  m->tx += delta;
  w_.engines().tx_changed(m->cta);
  if (!check_tx_range(id, w, loc)) return;
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
               .kind = delta >= 0 ? EventKind::expect_tx : EventKind::complete_tx, .a = delta >= 0 ? delta : -delta,
               .b = m->pending, .c = m->tx, .file = loc.file_name(), .line = loc.line()});
  // tx may return to 0 with no arrivals pending: that completes the phase
  // (observed on sm_90a: docs/hardware.md "Mbarrier phases").
  maybe_complete(id, static_cast<std::int32_t>(w.id), loc);
}

// The stated phase must have the wait's parity and be the barrier's current
// phase or the one before it: otherwise the parity names another phase
// than meant, and the wait answers for that one (PTX: waits are valid only
// for those two phases).
bool MbarrierRoom::check_stated(std::uint32_t id, std::uint32_t parity, std::int64_t stated, Warp& w,
                                const SourceLoc& loc) {
  const Mbar& m = mbars_[id];
  const auto cur = static_cast<std::int64_t>(m.phase);
  const std::int64_t named = named_phase(m, parity);
  // (No string is built on the way to `true`: every stated wait passes here.)
  const char* const what = named == cur ? "the current one, incomplete: the wait blocks for a later phase than meant"
                                        : "the one before, complete: the wait passes on another phase than meant";
  std::string why;
  if ((stated & 1) != static_cast<std::int64_t>(parity)) {
    why = "parity " + std::to_string(parity) + " is not that phase's";
  } else if (stated < cur - 1) {
    why = "the barrier is already in phase " + std::to_string(cur) + ": parity " + std::to_string(parity) +
          " names phase " + std::to_string(named) + ", " + what;
  } else if (stated > cur) {
    why = "that phase has not begun (the barrier is in phase " + std::to_string(cur) + "): parity " +
          std::to_string(parity) + " names phase " + std::to_string(named) + ", " + what;
  } else {
    return true;
  }
  w_.fail(w, "mbarrier.parity-alias", label(id),
          "wait for phase " + std::to_string(stated) + " (parity " + std::to_string(parity) + "): " + why, loc);
  return false;
}

bool MbarrierRoom::wait(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, bool is_try,
                        const SourceLoc& loc) {
  return wait_kind(bar, parity, phase, is_try ? WaitKind::try_wait : WaitKind::wait, loc);
}

bool MbarrierRoom::test(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase,
                        const SourceLoc& loc) {
  return wait_kind(bar, parity, phase, WaitKind::test_wait, loc);
}

bool MbarrierRoom::wait_kind(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase,
                             WaitKind kind, const SourceLoc& loc) {
  Warp& w = w_.warp();
  const LaneOp::Kind lane_kind = kind == WaitKind::wait       ? LaneOp::Kind::wait
                                 : kind == WaitKind::try_wait ? LaneOp::Kind::try_wait
                                                              : LaneOp::Kind::test_wait;
  if (!w_.lanes_agree(w, {.kind = lane_kind, .object = &bar, .a = parity & 1u, .loc = loc}))
    return w.lane.ok;  // lane 31 takes the answer the warp's fiber got
  if (w_.killing()) return w_.point(w, loc), true;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return true;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  parity &= 1u;
  // A parity names the current phase (incomplete: the wait blocks) or the
  // one before it (complete: the wait passes), whichever has that parity
  // (PTX mbarrier.test_wait/try_wait), however many phases the warp skipped
  // since its last wait: ping-pong consumers skip each other's. A caller
  // that states the phase it means must mean one of those two; any other
  // phase aliases onto them.
  // Before the scheduling point, the warp reads only what its own earlier
  // steps ordered: the barrier's existence (resolve), and, for a stated
  // phase, whether that phase has begun and whether the one after it has
  // completed (the check, and maybe_complete's aliasing check of waiters,
  // read nothing else). What the wait answers is read after the point.
  if (phase) {
    touch_begun(w_, *m, static_cast<std::uint64_t>(phase->value), Touch::read);
    touch_begun(w_, *m, static_cast<std::uint64_t>(phase->value + 2), Touch::read);
  }
  if (phase && !check_stated(id, parity, phase->value, w, loc)) return true;
  stated_[w.id] = phase ? phase->value : kUnstated;
  // test_wait never blocks: a plain scheduling point. A warp that spins
  // out (below) times out again at this try_wait without one.
  const SpinSite site{static_cast<std::int32_t>(id), parity, loc.file_name(), loc.line()};
  const bool spinning = kind == WaitKind::try_wait && w.spin_left > 0 && w.timeout_site == site;
  const bool go = spinning                      ? true
                  : kind == WaitKind::test_wait ? w_.point(w, loc)
                                                : w_.point(w, kind == WaitKind::try_wait ? Block::mbar_try : Block::mbar,
                                                           static_cast<std::int32_t>(id), parity, 0, loc);
  if (!go) return true;
  // Other warps ran meanwhile and may have grown the barrier table: look the
  // barrier up again by id rather than through the pointer.
  Mbar& after = mbars_[id];
  // What the answer depends on: which phase is current (begun, and not
  // completed). A pass records that a wait observed the last completion.
  // A blocking wait that passes awaits the completion that began the
  // current phase: it could not have run before it (a try_wait or
  // test_wait could, and answered false).
  const bool ok = passed(id, parity);
  const Touch pass = ok && kind == WaitKind::wait ? Touch::await : Touch::read;
  // Whatever the answer, it saw the current phase begun, and so every
  // arrival of the one before (touch_begun): a try_wait or test_wait on
  // that one's parity answers true only because it is complete.
  touch_begun(w_, after, after.phase, pass);
  touch(w_, after, World::Res::mbar_phase, after.phase + 1, Touch::read);
  if (ok && after.phase > 0) touch(w_, after, World::Res::mbar_seen, after.phase - 1, Touch::commute);
  if (ok) {
    after.observed = true;
    if (w_.options().race_check) w_.acquire(w.id, after.done);
  }
  // Time-outs in a row (RunOptions::spin_out_limit). A warp's first
  // kSingleTimeOuts time-outs in a row here (each right after the last,
  // its last scheduling point) are steps of their own; let time out once
  // more, it spins out: its next try_wait here times out without a
  // scheduling point, until it leaves the loop or the limit runs out. A
  // spin that runs out is taken to go on until the phase completes: it
  // changed nothing, so its step touched nothing, and the warp cannot time
  // out here again while another actor can move (World::movable). A
  // time-out taken because nothing could move is a step of its own (the
  // idle rule counts those).
  bool spin_ends = false;
  auto run_out = [&] {
    w.spun_pure = spin_ends = true;
    w_.forget_footprint();
  };
  if (ok || kind != WaitKind::try_wait) {
    w.spin_left = 0;
    w.spun_pure = false;
  } else if (spinning) {
    if (--w.spin_left == 0) run_out();
  } else {
    // A time-out of its own: the first in a row here, or the next.
    const bool again = w.timeout_point + 1 == w.points && w.timeout_site == site;
    w.timeouts_in_row = again ? w.timeouts_in_row + 1 : 1;
    const std::uint32_t limit = w_.options().spin_out_limit;
    if (limit > 0 && !w_.idle_step() && w.timeouts_in_row > kSingleTimeOuts) {
      // The limit counts those before the spin too.
      w.spin_left = limit > w.timeouts_in_row ? limit - w.timeouts_in_row : 0;
      if (w.spin_left == 0) run_out();
    }
  }
  if (kind == WaitKind::try_wait && !ok) {
    w.timeout_point = w.points;
    w.timeout_site = site;
  }
  // A spin records its first time-out and its last (the one that ran out,
  // or the answer that left the loop).
  if (w_.options().trace && (!spinning || ok || spin_ends))
    w_.record({.step = w_.step(),
               .begin = w.since + 1,
               .warp = static_cast<std::int32_t>(w.id),
               .object = static_cast<std::int32_t>(id),
               .kind = kind == WaitKind::wait       ? EventKind::wait
                       : kind == WaitKind::try_wait ? EventKind::try_wait
                                                    : EventKind::test_wait,
               .a = parity,
               .b = ok ? static_cast<std::int64_t>(after.phase) - 1 : -1,
               .c = ok,
               .file = loc.file_name(),
               .line = loc.line()});
  if (w.lane.publish) w.lane.ok = ok;
  return ok;
}

// An asynchronous operation `op` (issued by a warp, completed by an engine
// or a CLC unit) finds no initialised mbarrier at `offset` in CTA `cta`;
// `what` says how it met it ("tcgen05.commit arrives on").
void MbarrierRoom::report_uninitialized(std::uint32_t cta, std::uint32_t offset, const Issued& op, const char* what) {
  std::string m(what);
  m.append(" no initialised mbarrier at this offset in ").append(cta_label(cta));
  w_.fail(w_.running(), "mbarrier.uninitialized",
          "mbarrier at smem+" + std::to_string(offset) + " (" + cta_label(cta) + ")", std::move(m), op.loc,
          &w_.warp_at(op.issuer));
}

// An operation's mbarrier (`whose`: "the TMA load's mbarrier") is not in
// the issuing CTA's shared memory.
void MbarrierRoom::report_not_shared(Warp& w, const char* whose, const SourceLoc& loc) {
  w_.fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
          std::string(whose) + " is not in this CTA's shared memory", loc);
}

// A TMA load about to complete `bytes` of transaction count on barrier `m`
// (id `id`): true, after reporting, when they overshoot the phase.
std::int64_t MbarrierRoom::read_tx(std::uint32_t id) {
  const Mbar& m = mbars_[id];
  touch(w_, m, World::Res::mbar_count, m.phase, Touch::read);
  return m.tx;
}

bool MbarrierRoom::tx_overshoot(std::uint32_t id, std::uint32_t bytes, const Issued& op) {
  const Mbar& m = mbars_[id];
  touch(w_, m, World::Res::mbar_count, m.phase, Touch::read);  // the rule reads the arrivals and tx-count
  // Silicon delivers a copy's bytes in pieces (16 bytes at a time, as far
  // as an H100 shows: docs/silicon.md). More bytes than the phase still
  // expects, with every arrival in, complete the phase partway through
  // the copy, or not, depending on how the pieces fall, and the rest count
  // against the next phase: nondeterministic on hardware, a bug here.
  if (m.pending == 0 && m.tx > 0 && static_cast<std::int64_t>(bytes) > m.tx) {
    w_.fail(w_.running(), "mbarrier.tx-overshoot", label(id),
            "a TMA load delivers " + std::to_string(bytes) + " bytes to a barrier that expects only " +
                std::to_string(m.tx) + " more in phase " + std::to_string(m.phase) +
                " with no arrivals pending: on silicon the bytes land in pieces, the phase may complete partway "
                "through the copy, and the rest count against the next phase (expect_tx too small?)",
            op.loc, &w_.warp_at(op.issuer));
    return true;
  }
  return false;
}

// Bytes still expected or delivered unmatched on a barrier when its CTA
// exits: expect_tx and the bytes that arrived disagree (docs/hardware.md bug 13).
bool MbarrierRoom::check_exit(Warp& w) {
  for (std::uint32_t id = 0; id < mbars_.size(); ++id) {
    const Mbar& m = mbars_[id];
    if (m.live && m.cta == w.cta) touch(w_, m, World::Res::mbar_count, m.phase, Touch::read);
    if (m.live && m.cta == w.cta && m.tx != 0) {
      w_.fail(w, "mbarrier.tx-pending-at-exit", label(id),
              "the CTA exited with tx-count " + std::to_string(m.tx) + " in phase " + std::to_string(m.phase) +
                  ": bytes expected and bytes delivered disagree",
              w.loc);
      return false;
    }
  }
  return true;
}

// ------------------------------------------------------------ abstract state

// One barrier per entry, in the order of their inits: `m<id>:<parity>/
// <pending>/<expected>/<tx>`, `u` where the last completion is not observed
// yet, `-` for a barrier invalidated (its place may be inited again).
void MbarrierRoom::abstract_state(std::string& out) const {
  for (std::uint32_t id = 0; id < mbars_.size(); ++id) {
    const Mbar& m = mbars_[id];
    out.append(" m").append(std::to_string(id)).push_back(':');
    if (!m.live) {
      out.push_back('-');
      continue;
    }
    out.append(std::to_string(m.phase & 1)).push_back('/');
    out.append(std::to_string(m.pending)).push_back('/');
    out.append(std::to_string(m.expected)).push_back('/');
    out.append(std::to_string(m.tx));
    if (!m.observed) out.push_back('u');
  }
}

// The phase the wait states, as an offset from the barrier's current phase
// (`s-1`: the one before it); nothing where it gave the parity alone.
void MbarrierRoom::abstract_wait(const Warp& w, std::string& out) const {
  const std::int64_t stated = stated_[w.id];
  if (stated == kUnstated) return;
  const auto cur = static_cast<std::int64_t>(mbars_[static_cast<std::size_t>(w.obj)].phase);
  out.append(" s").append(std::to_string(stated - cur));
}

}  // namespace wspipe::emu::detail
