// The mbarrier room (internal; mbarrier.cpp): one model object per
// initialised barrier, the phases each warp has observed, and the rules
// named mbarrier.*. Other rooms reach a barrier through this room: the
// engines' and CLC's completions (arrive_on, complete_tx), the operand
// checks of the operations that signal one.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/barrier.hpp"
#include "core/config.hpp"

namespace wspipe::emu::detail {

struct Issued;

struct Mbar {
  SharedMemBarrier* addr = nullptr;
  std::uint32_t cta = 0;
  std::string name;
  bool live = false;
  std::uint32_t expected = 0;  // arrivals per phase
  std::uint32_t pending = 0;   // arrivals still missing in the current phase
  std::int64_t tx = 0;         // tx-count of the current phase
  std::uint64_t phase = 0;     // absolute phase number; its low bit is the parity
  // PTX usage rule: a wait must observe each completed phase before an
  // arrive lands in the next. True while the latest completion was seen.
  bool observed = true;
  std::int32_t init_warp = -1;
  // fence.mbarrier_init: made visible to the cluster by the initialising
  // warp's fence; remote CTAs may use it once a cluster barrier that
  // started after the fence has completed.
  bool fenced = false;
  std::uint64_t fenced_gen = 0;
  // Happens-before: the releases of the current phase, and those of the
  // phase that completed last (what a successful wait acquires).
  Clock acc, done;
};

class MbarrierRoom : Room {
 public:
  explicit MbarrierRoom(World& world);

  // The operations (ops.cpp routes them here). arrive: cta_rank < 0 for
  // the own CTA, else a remote arrive (mapa) to that rank.
  void init(SharedMemBarrier& bar, std::uint32_t count, const char* base, int index, const SourceLoc& loc);
  void inval(SharedMemBarrier& bar, const SourceLoc& loc);
  void fence_init(const SourceLoc& loc);
  void arrive(SharedMemBarrier& bar, std::int64_t cta_rank, std::uint32_t tx_bytes, const SourceLoc& loc);
  void tx(SharedMemBarrier& bar, std::int64_t delta_per_lane, const SourceLoc& loc);
  // The parity waits, as PTX answers them: true when the phase of parity
  // `parity` before the current one has completed. `phase`: the absolute
  // phase the caller states it means (PhaseNumber), checked when given.
  bool wait(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, bool is_try,
            const SourceLoc& loc);
  // mbarrier.test_wait.parity: whether the phase has completed, now; never blocks.
  bool test(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, const SourceLoc& loc);

  // The scheduler's question: has barrier `id` completed the phase of
  // parity `parity` that a waiter blocked on?
  bool passed(std::uint32_t id, std::uint32_t parity) const {
    const Mbar& m = mbars_[id];
    return m.live && (m.phase & 1u) != parity;
  }
  // What warp `w`, blocked on barrier w.obj, waits for (reports).
  std::string blocked_state(const Warp& w) const;

  // For the rooms whose operations signal a barrier:
  // - whether `bar` is an initialised barrier of the warp's CTA (reported
  //   when not);
  bool check(SharedMemBarrier& bar, Warp& w, const SourceLoc& loc);
  // - the barrier at `offset` of CTA `cta`'s shared memory, or -1;
  std::int64_t at(std::uint32_t cta, std::uint32_t offset) const;
  // - whether `p` is a barrier's place in CTA `c`'s shared memory;
  static bool in_smem(const void* p, const Cta& c);
  // - an arrive of `count` (with tx `tx_bytes` per arrival) on barrier
  //   `id` by race-checker component `comp`; `culprit`: the warp reported
  //   (the issuer, for an engine's arrive). False on a violation.
  bool arrive_on(std::uint32_t id, std::uint32_t count, std::uint32_t tx_bytes, bool remote, std::uint32_t comp,
                 std::int32_t actor, const SourceLoc& loc, const Warp* culprit);
  // - complete_tx(bytes) on barrier `id` by component `comp` for the
  //   asynchronous operation `op` (a TMA load's, a try_cancel's); `begin`:
  //   the trace event's start step (0: none). False on a violation or when
  //   the run ended.
  bool complete_tx(std::uint32_t id, std::uint32_t bytes, std::uint32_t comp, std::int32_t actor, const Issued& op,
                   std::uint64_t begin);
  // - the tx-count of barrier `id`'s current phase; read_tx also touches
  //   it as read (a footprint: what a TMA load's piece is cut at);
  std::int64_t tx_of(std::uint32_t id) const { return mbars_[id].tx; }
  std::int64_t read_tx(std::uint32_t id);
  // - a TMA load's `bytes` overshoot the phase of barrier `id` (reported: true);
  bool tx_overshoot(std::uint32_t id, std::uint32_t bytes, const Issued& op);
  // - an operation's completion finds no barrier at `offset` of CTA `cta`
  //   (what: "tcgen05.commit arrives on"); an operation's barrier (whose:
  //   "the TMA load's mbarrier") outside shared memory.
  void report_uninitialized(std::uint32_t cta, std::uint32_t offset, const Issued& op, const char* what);
  void report_not_shared(Warp& w, const char* whose, const SourceLoc& loc);
  // The name of barrier `id` in reports, and of the barrier at `bar` as
  // warp `w` names it (initialised or not).
  std::string label(std::uint32_t id) const;
  std::string label_of(const SharedMemBarrier& bar, const Warp& w) const;
  // A CTA's exit: bytes still pending on its barriers (false: reported).
  bool check_exit(Warp& w);

  // The abstract state (RunOptions::observer, abstract_state.cpp): every
  // barrier's phase parity, arrivals pending of expected, tx-count and
  // whether its last completion was observed, appended to `out`; and what
  // warp `w`, blocked on one, states it waits for, relative to the
  // barrier's current phase. Absolute phase numbers are left out.
  void abstract_state(std::string& out) const;
  void abstract_wait(const Warp& w, std::string& out) const;

 private:
  enum class WaitKind { wait, try_wait, test_wait };
  bool wait_kind(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, WaitKind kind,
                 const SourceLoc& loc);
  // The phase that parity `parity` names on barrier `m` now: the current
  // one or the one before it.
  static std::int64_t named_phase(const Mbar& m, std::uint32_t parity);
  // A wait of warp `w` on barrier `id` that states the phase it means:
  // false, after reporting, where its parity names another phase.
  bool check_stated(std::uint32_t id, std::uint32_t parity, std::int64_t stated, Warp& w, const SourceLoc& loc);
  Mbar* resolve(SharedMemBarrier& bar, Warp& w, const SourceLoc& loc);
  Mbar* resolve_remote(SharedMemBarrier& bar, std::uint32_t rank, Warp& w, const SourceLoc& loc);
  static std::string anon_name(const void* p, const Cta& c);
  bool check_tx_range(std::uint32_t id, Warp& w, const SourceLoc& loc);
  void maybe_complete(std::uint32_t id, std::int32_t actor, const SourceLoc& loc);
  std::vector<Mbar> mbars_;
  // Per warp: the phase its wait in progress states it means (-1: the one
  // before the first), or kUnstated where it gave the parity alone.
  static constexpr std::int64_t kUnstated = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> stated_;
};

}  // namespace wspipe::emu::detail
