// A reference model of the mbarriers of one CTA, for the model fuzzers.
// Written from docs/hardware.md (PTX "Parallel Synchronization: mbarrier")
// and the emulator's documented rules (the rule names of docs/hardware.md
// and docs/emulator-models.md), not from backends/emu/runtime/mbarrier.cpp:
//  - state: phase, pending arrivals, expected arrivals, tx-count;
//  - init(count): count in [1, 2^20-1], not on a live barrier, one lane;
//  - arrive.expect_tx(n) by L lanes: tx += n*L, then L arrivals; an arrive
//    of more than the pending count traps (over-arrival); a phase completes
//    when pending and tx are both 0; tx stays within +-(2^20-1);
//  - the usage rule: after a phase completes, a wait must observe it before
//    an arrive lands in the next one;
//  - a parity wait answers for the phase its parity names now: the current
//    one (it blocks) or the previous one (it passes), however many phases
//    the warp skipped; a warp blocked while its phase completed and the
//    next one did too waits on for the phase its parity names then;
//  - a wait may state the absolute phase it means: one that is neither the
//    current nor the previous phase, or not of the wait's parity, or a
//    stated waiter still blocked when its phase completed and the next one
//    did too, is parity aliasing.
// A barrier is identified, as by the emulator, by its 8 bytes in the CTA's
// shared-memory image: init writes a tag and the instance number there;
// bytes that do not decode to a live instance are an uninitialised barrier.
//
// This is wspipe's one mbarrier reference: RefMbarrier, one barrier's state
// and transitions, is also what the conformance programs are drawn with and
// predicted by (tools/gpu/mbar_program.hpp); RefMbarriers adds the CTA's
// barriers, its warps' waits and the rules. The emulator's model is written
// apart from it, so that the two can be run against each other; the limits
// both check are in core/mbarrier_limits.hpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/mbarrier_limits.hpp"

namespace wspipe::fuzz {

// One barrier as the PTX ISA defines it: its transitions, and no rule. The
// caller decides what an over-arrival or a tx-count out of range means (a
// violation for the fuzzers, a trap or an undefined step for the
// conformance programs).
struct RefMbarrier {
  std::uint32_t expected = 0, pending = 0;  // arrivals per phase, arrivals the current phase still needs
  std::int64_t tx = 0;                      // bytes expected less bytes delivered
  std::int64_t phase = 0;                   // phases completed
  bool observed = true;                     // a wait has seen the last completed phase

  void init(std::uint32_t count) {
    expected = pending = count;
    tx = 0;
    phase = 0;
    observed = true;
  }
  // expect_tx (delta > 0) or complete_tx (delta < 0); the phase is not
  // completed here (complete_if_done).
  void add_tx(std::int64_t delta) { tx += delta; }
  bool tx_in_range() const { return tx <= kMbarrierMaxTx && tx >= -kMbarrierMaxTx; }
  bool over_arrives(std::uint32_t count) const { return count > pending; }
  // `count` arrivals, at most the pending ones; true when they complete the phase.
  bool arrive(std::uint32_t count) {
    pending -= count;
    return complete_if_done();
  }
  // Completes the phase when no arrival and no byte is outstanding; true
  // when it did.
  bool complete_if_done() {
    if (pending != 0 || tx != 0) return false;
    ++phase;
    pending = expected;
    observed = false;
    return true;
  }
  // Whether a wait for `parity` passes: the phase of that parity has
  // completed, the current one has the other parity.
  bool passes(std::uint32_t parity) const { return static_cast<std::uint32_t>(phase & 1) != (parity & 1); }
  // The parity of the last completed phase (phase > 0).
  std::uint32_t completed_parity() const { return static_cast<std::uint32_t>((phase - 1) & 1); }
};

class RefMbarriers {
 public:
  static constexpr std::uint32_t kOutside = ~0u;  // an operand outside shared memory

  struct Bar : RefMbarrier {
    std::uint32_t offset = 0;
    bool live = false;
  };
  // A warp blocked in a wait: which instance, its parity, and the phase it
  // stated it means (if it did).
  struct Waiter {
    bool blocked = false;
    std::uint32_t id = 0, parity = 0;
    bool stated = false;
    std::int64_t phase = 0;
  };

  RefMbarriers(std::vector<std::uint8_t>& smem, std::uint32_t warps) : waiters(warps), smem_(smem) {}

  std::vector<Bar> bars;  // every init, in order: the emulator's barrier ids
  std::vector<Waiter> waiters;

  // The live instance whose bytes are at `offset`, or -1.
  std::int64_t at(std::uint32_t offset) const {
    if (offset == kOutside || offset + 8 > smem_.size()) return -1;
    std::uint64_t raw = 0;
    std::memcpy(&raw, smem_.data() + offset, 8);
    const std::uint64_t idx = (raw & 0xffffffffull) - 1;
    if ((raw >> 32) != kTag || idx >= bars.size() || bars[idx].offset != offset || !bars[idx].live) return -1;
    return static_cast<std::int64_t>(idx);
  }

  // Each returns the rule broken, or nullptr.
  const char* init(std::uint32_t offset, std::uint32_t count, std::uint32_t lanes) {
    if (offset == kOutside) return "mbarrier.not-shared";
    if (at(offset) >= 0) return "mbarrier.init-live";
    if (count < 1 || count > kMbarrierMaxCount) return "mbarrier.count-range";
    const auto id = static_cast<std::uint32_t>(bars.size());
    Bar& b = bars.emplace_back();
    b.init(count);
    b.offset = offset;
    b.live = true;
    const std::uint64_t raw = (std::uint64_t{kTag} << 32) | (id + 1);
    std::memcpy(smem_.data() + offset, &raw, 8);
    return lanes > 1 ? "mbarrier.init-live" : nullptr;  // the second lane re-inits it
  }
  const char* inval(std::uint32_t offset) {
    std::int64_t id = 0;
    if (const char* r = resolve(offset, &id)) return r;
    bars[static_cast<std::size_t>(id)].live = false;
    std::memset(smem_.data() + offset, 0, 8);
    return nullptr;
  }
  const char* arrive(std::uint32_t offset, std::uint32_t lanes, std::uint32_t tx_per_lane) {
    std::int64_t id = 0;
    if (const char* r = resolve(offset, &id)) return r;
    return arrive_on(static_cast<std::uint32_t>(id), lanes, tx_per_lane);
  }
  // Arrivals on a resolved barrier (also a tcgen05.commit's).
  const char* arrive_on(std::uint32_t id, std::uint32_t lanes, std::uint32_t tx_per_lane) {
    Bar& b = bars[id];
    b.add_tx(std::int64_t{tx_per_lane} * lanes);
    if (tx_per_lane != 0 && !b.tx_in_range()) return "mbarrier.tx-range";
    if (b.over_arrives(lanes)) return "mbarrier.over-arrival";
    if (!b.observed) return "mbarrier.arrive-before-wait";
    return b.arrive(lanes) ? completed(id) : nullptr;
  }
  // expect_tx (delta > 0) or complete_tx (delta < 0), by `lanes` lanes.
  const char* tx(std::uint32_t offset, std::int64_t delta_per_lane, std::uint32_t lanes) {
    std::int64_t id = 0;
    if (const char* r = resolve(offset, &id)) return r;
    return tx_on(static_cast<std::uint32_t>(id), delta_per_lane * lanes);
  }
  const char* tx_on(std::uint32_t id, std::int64_t delta) {
    Bar& b = bars[id];
    b.add_tx(delta);
    if (!b.tx_in_range()) return "mbarrier.tx-range";
    return b.complete_if_done() ? completed(id) : nullptr;
  }
  // A wait of warp `w` reaching its scheduling point: the checks made
  // before it blocks (`stated`: the phase it means, or nullptr where it
  // gives its parity alone). Registers the waiter.
  const char* wait_begin(std::uint32_t w, std::uint32_t offset, std::uint32_t parity, const std::int64_t* stated) {
    std::int64_t id = 0;
    if (const char* r = resolve(offset, &id)) return r;
    const auto i = static_cast<std::uint32_t>(id);
    const std::int64_t cur = bars[i].phase;
    if (stated != nullptr && ((*stated & 1) != parity || *stated < cur - 1 || *stated > cur))
      return "mbarrier.parity-alias";
    waiters[w] = {.blocked = true, .id = i, .parity = parity, .stated = stated != nullptr,
                  .phase = stated != nullptr ? *stated : 0};
    return nullptr;
  }
  // Whether the phase warp `w` waits for has completed.
  bool done(std::uint32_t w) const {
    const Waiter& x = waiters[w];
    const Bar& b = bars[x.id];
    return b.live && b.passes(x.parity);
  }
  // The wait of warp `w` returns: true when its phase completed.
  bool wait_end(std::uint32_t w) {
    const bool ok = done(w);
    Waiter& x = waiters[w];
    if (ok) bars[x.id].observed = true;
    x.blocked = false;
    return ok;
  }
  // The CTA exits: bytes still expected or delivered unmatched.
  const char* exit_check() const {
    for (const Bar& b : bars)
      if (b.live && b.tx != 0) return "mbarrier.tx-pending-at-exit";
    return nullptr;
  }
  std::string state() const {
    std::string s;
    for (std::size_t i = 0; i < bars.size(); ++i) {
      const Bar& b = bars[i];
      s += "  bar#" + std::to_string(i) + " @" + std::to_string(b.offset) + (b.live ? "" : " (dead)") +
           " phase " + std::to_string(b.phase) + " pending " + std::to_string(b.pending) + "/" +
           std::to_string(b.expected) + " tx " + std::to_string(b.tx) + (b.observed ? "" : " unobserved") + "\n";
    }
    return s;
  }

 private:
  static constexpr std::uint32_t kTag = 0x57535042u;  // the emulator's tag, "WSPB"

  const char* resolve(std::uint32_t offset, std::int64_t* id) const {
    if (offset == kOutside) return "mbarrier.not-shared";
    *id = at(offset);
    return *id < 0 ? "mbarrier.uninitialized" : nullptr;
  }
  // Barrier `id` has completed a phase: a waiter still blocked on an older
  // phase it stated has missed it.
  const char* completed(std::uint32_t id) const {
    for (const Waiter& x : waiters)
      if (x.blocked && x.stated && x.id == id && x.phase + 1 < bars[id].phase) return "mbarrier.parity-alias";
    return nullptr;
  }

  std::vector<std::uint8_t>& smem_;
};

}  // namespace wspipe::fuzz
