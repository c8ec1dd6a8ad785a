// The soundness of the exhaustive search's partial-order reduction, tested
// differentially (docs/exploration.md, "Soundness, tested
// differentially"): tiny random kernels, each searched twice, without the
// reduction and with it, and the two sets of final states compared. Shared
// by tests/explore_soundness_test.cpp (thousands of seeded programs in CI)
// and fuzz/dpor_soundness_fuzz.cpp (a program decoded from the input).
//
// A program: one CTA of 2 to 4 warps, 1 to 3 mbarriers and one named
// barrier; each warp's elected lane runs a short straight-line list of
// operations: arrivals (with or without expect_tx), expect_tx, TMA loads
// completing on a barrier (the CTA's TMA engine is an actor of its own, and
// with RunOptions::async_reorder its loads complete out of issue order and
// in pieces), blocking waits, single try_waits and bounded try_wait spins,
// stores and loads of shared words through SmemView, loads of the TMA
// tiles, and bar.sync / bar.arrive on the named barrier. Or a cluster of
// two CTAs of 1 or 2 warps, whose handoffs may cross from one CTA to the
// other (remote arrivals, TMA loads multicast to both) and whose warps may
// meet at the cluster barrier. Nothing keeps a program well-behaved:
// deadlocks, rule violations and races are outcomes like any other, and
// compared as such.
//
// A final state (Run::state()): how the run ended (emu::outcome: ok,
// deadlock, livelock, the rule of the violation), then per warp the number
// of operations it completed and every value it observed (a try_wait's
// answer, the try on which a spin passed, a loaded word), then the shared
// words as the warps' stores left them and the tiles as the TMA loads left
// them (Run::note_tiles). Three refinements follow from what
// a reduction promises:
//  - a run that ends in a violation stops there: the steps of other warps
//    that commute with the one that broke the rule may have run before it
//    or not, and a reduction explores one of those orders. Its state is the
//    rule, the actor of that step, and that warp's own operations and
//    observations (the violation and its causal past).
//  - race checker on: data accesses are no footprints (a racing pair is
//    reported whichever order runs, so one order is enough); a run that
//    ends in a race keeps only "race" as its state. Which race is reported
//    first, and what was read before it, is what the reduction may
//    legitimately see in one order only.
//  - race checker off: every shared-memory access is a footprint (its
//    16-byte chunks), a warp's SmemView access and the TMA engine's writes
//    into a tile alike, so the values a warp reads from a tile without
//    waiting for its barrier are part of the state in both modes.
//
// Runs are observed without trusting the kernel's code after the run has
// ended: the emulator tears a stopped run down by running every unfinished
// fiber to its end with each operation a no-op (a wait passes, a load reads
// whatever is there). Watch, the strategy every run goes through, knows
// whether a step is in progress (between the pick that starts it and the
// footprint that ends it); kernel code that runs outside a step is the
// teardown, and records nothing.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/emu/emu.hpp"
#include "backends/emu/exhaustive.hpp"
#include "core/smem.hpp"

namespace wspipe::fuzz::soundness {

inline constexpr std::uint32_t kMaxWarps = 4;  // in all: a cluster of two CTAs has up to 2 each
inline constexpr std::uint32_t kMaxCtas = 2;
inline constexpr std::uint32_t kMaxBars = 3;
inline constexpr std::uint32_t kMaxOps = 5;  // per warp
inline constexpr std::uint32_t kTiles = 2;
inline constexpr std::uint32_t kTileBytes = 256;  // two 128-byte lines: a load of all of it lands in pieces
inline constexpr std::uint32_t kTileWords = kTileBytes / 4;
inline constexpr std::uint32_t kWords = 8;        // the shared words; slots 0, 4 and 5 are used
inline constexpr std::uint32_t kSlots = 3;
inline constexpr std::uint32_t kSlotWord[kSlots] = {0, 4, 5};  // slots 1 and 2 share a 16-byte chunk
inline constexpr std::uint32_t kSourceWords = 1024;           // the tensor TMA loads from: word i holds 1000 + i
inline constexpr std::uint32_t kNamedId = 1;                  // id 0 is the start's bar.sync

enum class OpKind : std::uint8_t {
  arrive,       // mbarrier.arrive
  arrive_tx,    // mbarrier.arrive.expect_tx(bytes)
  expect_tx,    // mbarrier.expect_tx(bytes)
  tma_load,     // a 1-D TMA load of `bytes` from source word 4 * value into tile `tile`, completing on `bar`
  wait,         // blocking wait(parity)
  try_wait,     // one try_wait(parity): observed 0 / 1
  test_wait,    // one test_wait(parity), which never blocks: observed 0 / 1
  spin,         // up to `tries` try_wait(parity): observed the try that passed, 0 for none
  store,        // shared word slot = value
  load,         // shared word slot: observed
  load_tile,    // word `word` of tile `tile`: observed
  named_sync,    // bar.sync kNamedId, `threads`
  named_arrive,  // bar.arrive kNamedId, `threads`
  cluster_sync   // barrier.cluster.arrive + wait (a cluster of two CTAs; every warp has one)
};

struct Op {
  OpKind kind = OpKind::arrive;
  std::uint8_t bar = 0;     // the mbarrier
  std::uint8_t parity = 0;  // waits
  std::uint8_t tries = 1;   // spin
  std::uint8_t slot = 0;    // store, load
  std::uint8_t tile = 0;    // tma_load, load_tile
  std::uint8_t word = 0;    // load_tile: the word of the tile
  std::uint16_t bytes = 0;  // tx operations and loads; named barriers: threads
  std::uint32_t value = 0;  // store: the value; tma_load: the source's 16-byte row
  // A cluster of two CTAs: arrive and arrive_tx on the other CTA's barrier
  // `bar`; tma_load multicast to both CTAs (each CTA's tile `tile`, each
  // CTA's barrier `bar`).
  bool peer = false;
};

struct Program {
  std::uint32_t ctas = 1;   // 1, or a cluster of 2
  std::uint32_t warps = 2;  // per CTA
  std::uint32_t bars = 1;   // per CTA
  std::array<std::uint32_t, kMaxBars> count{};  // arrivals per phase
  std::array<std::vector<Op>, kMaxWarps> ops;   // by warp of the cluster: CTA c's warp w is c * warps + w

  std::uint32_t all_warps() const { return ctas * warps; }
  std::uint32_t size() const {
    std::uint32_t n = 0;
    for (std::uint32_t w = 0; w < all_warps(); ++w) n += static_cast<std::uint32_t>(ops[w].size());
    return n;
  }
};

// "b0(1) b1(2) | w0: arrive_tx(b0,16); wait(b0,0); load(s1) | w1: ...": how
// a program is printed in a report.
inline std::string to_string(const Program& p) {
  std::string s = p.ctas == 1 ? "" : "2 CTAs of " + std::to_string(p.warps) + " warps, ";
  for (std::uint32_t b = 0; b < p.bars; ++b)
    s += (b != 0 ? " b" : "b") + std::to_string(b) + "(" + std::to_string(p.count[b]) + ")";
  for (std::uint32_t w = 0; w < p.all_warps(); ++w) {
    s += " | w" + std::to_string(w) + ":";
    const char* sep = " ";
    for (const Op& op : p.ops[w]) {
      std::string b = 'b' + std::to_string(op.bar);
      if (op.peer && op.kind != OpKind::tma_load) b += "@peer";
      const std::string t = 't' + std::to_string(op.tile);
      s += sep;
      sep = "; ";
      switch (op.kind) {
        case OpKind::arrive: s += "arrive(" + b + ")"; break;
        case OpKind::arrive_tx: s += "arrive_tx(" + b + "," + std::to_string(op.bytes) + ")"; break;
        case OpKind::expect_tx: s += "expect_tx(" + b + "," + std::to_string(op.bytes) + ")"; break;
        case OpKind::tma_load:
          s += "tma_load(" + t + "<-row" + std::to_string(op.value) + "," + std::to_string(op.bytes) + "," + b +
               (op.peer ? ",multicast)" : ")");
          break;
        case OpKind::wait: s += "wait(" + b + "," + std::to_string(op.parity) + ")"; break;
        case OpKind::try_wait: s += "try_wait(" + b + "," + std::to_string(op.parity) + ")"; break;
        case OpKind::test_wait: s += "test_wait(" + b + "," + std::to_string(op.parity) + ")"; break;
        case OpKind::spin:
          s += "spin(" + b + "," + std::to_string(op.parity) + ",x" + std::to_string(op.tries) + ")";
          break;
        case OpKind::store: s += "store(s" + std::to_string(op.slot) + "=" + std::to_string(op.value) + ")"; break;
        case OpKind::load: s += "load(s" + std::to_string(op.slot) + ")"; break;
        case OpKind::load_tile: s += "load(" + t + "[" + std::to_string(op.word) + "])"; break;
        case OpKind::named_sync: s += "bar.sync(" + std::to_string(op.bytes) + ")"; break;
        case OpKind::named_arrive: s += "bar.arrive(" + std::to_string(op.bytes) + ")"; break;
        case OpKind::cluster_sync: s += "cluster_sync"; break;
      }
    }
  }
  return s;
}

// ------------------------------------------------------------- generation

// The operations a generator adds to a program, within a budget for the
// whole program (the unreduced search must stay small) and kMaxOps a warp.
struct Ops {
  Ops(Program& program, std::uint32_t ops_budget) : p(program), budget(ops_budget) {}
  bool room(std::uint32_t w, std::uint32_t ops) const {
    return p.ops[w].size() + ops <= kMaxOps && total + ops <= budget;
  }
  void emit(std::uint32_t w, Op op) {
    p.ops[w].push_back(op);
    ++total;
  }
  Program& p;
  std::uint32_t budget;
  std::uint32_t total = 0;
};

// A program from a source of choices: `below(n)` returns a number in
// [0, n) (n >= 1 always). Seeded (emu::Rng) in the test, the input's bytes in the fuzzer.
// Most programs have a producer/consumer shape that completes on some
// schedule (the arrivals a barrier counts, the bytes it expects then
// delivered by a TMA load, waits for the phase), with the rest random
// around it; any of it may be off (a missing arrival, a wrong byte count,
// a wait for the wrong parity), which is as interesting to compare.
// ctas = 2: a cluster of two CTAs of 1 or 2 warps each, whose handoffs may
// cross from one CTA to the other (a remote arrival, a multicast load) and
// whose warps may all meet at a cluster barrier. (The draws of a one-CTA
// program do not depend on the cluster's: a seed's program stays the same.)
template <class Below>
Program make_program(Below&& below, std::uint32_t ctas = 1) {
  auto chance = [&](std::uint32_t percent) { return below(100) < percent; };
  Program p;
  p.ctas = ctas;
  p.warps = ctas == 1 ? (chance(65) ? 2 : chance(70) ? 3 : 4) : (chance(85) ? 1 : 2);
  const std::uint32_t n = p.all_warps();
  p.bars = 1 + (chance(60) ? 0 : 1 + below(2));
  for (std::uint32_t b = 0; b < p.bars; ++b) p.count[b] = chance(70) ? 1 : 2;
  // Keep programs tiny: the unreduced search must finish in milliseconds.
  // Each warp's start and the bar.sync after the barriers' init are steps
  // too, so more warps get fewer operations.
  Ops ops(p, 2 + below(n == 2 ? 5 : n == 3 ? 3 : 2));
  std::uint32_t& total = ops.total;
  const std::uint32_t budget = ops.budget;
  auto room = [&](std::uint32_t w, std::uint32_t k) { return ops.room(w, k); };
  auto emit = [&](std::uint32_t w, Op op) { ops.emit(w, op); };
  auto byte_count = [&] { return static_cast<std::uint16_t>(chance(75) ? 16 : chance(50) ? kTileBytes : 32); };
  auto some_bar = [&] { return static_cast<std::uint8_t>(below(p.bars)); };
  auto some_tile = [&] { return static_cast<std::uint8_t>(below(kTiles)); };
  auto some_slot = [&] { return static_cast<std::uint8_t>(below(kSlots)); };
  auto tile_word = [&] { return static_cast<std::uint8_t>(chance(70) ? 0 : 32 + below(4)); };  // line 0 or 1
  auto same_cta = [&](std::uint32_t v, std::uint32_t w) { return v / p.warps == w / p.warps; };
  auto remote = [&] { return p.ctas == 2 && chance(30); };
  std::uint32_t stored = 0;

  for (std::uint32_t tries = 0; total < budget && tries < 64; ++tries) {
    const std::uint32_t r = below(100);
    const std::uint32_t w = below(n);
    if (r < 30) {
      // A handoff: a producer arrives (with the bytes of its load, or
      // after a store) on a barrier, a consumer waits for the phase, then
      // reads what came; or reads first, racing with the producer. Gated:
      // both first meet on another barrier, so that the read and the
      // producer's write are the two steps that can go next. Across the
      // cluster, the barriers are the consumer's: the producer arrives on
      // them remotely, and its load is a multicast, which its own CTA's
      // barrier expects too.
      const std::uint32_t c = (w + 1 + below(n - 1)) % n;
      const bool across = !same_cta(w, c);
      const std::uint8_t b = some_bar();
      const bool load = chance(50);
      const bool store = !load && chance(50);
      const bool gated = p.bars >= 2 && chance(40);
      const auto g = gated ? static_cast<std::uint8_t>((b + 1 + below(p.bars - 1)) % p.bars) : b;
      if (!room(w, (load || store ? 2 : 1) + (gated ? 1 : 0) + (load && across ? 1 : 0)) || !room(c, gated ? 3 : 2))
        continue;
      const std::uint16_t bytes = byte_count();
      const std::uint8_t t = some_tile();
      const std::uint8_t slot = some_slot();
      if (gated) {
        emit(w, {.kind = OpKind::arrive, .bar = g, .peer = across});
        emit(c, {.kind = OpKind::wait, .bar = g});
      }
      if (load) {
        if (across) emit(w, {.kind = OpKind::expect_tx, .bar = b, .bytes = bytes});
        emit(w, {.kind = OpKind::arrive_tx, .bar = b, .bytes = bytes, .peer = across});
        emit(w, {.kind = OpKind::tma_load, .bar = b, .tile = t, .bytes = chance(85) ? bytes : byte_count(),
                 .value = below(16), .peer = across});
      } else {
        if (store) emit(w, {.kind = OpKind::store, .slot = slot, .value = ++stored});
        emit(w, {.kind = OpKind::arrive, .bar = b, .peer = across});
      }
      const Op wait = chance(70)
                          ? Op{.kind = OpKind::wait, .bar = b, .parity = static_cast<std::uint8_t>(chance(90) ? 0 : 1)}
                          : Op{.kind = OpKind::spin, .bar = b, .tries = static_cast<std::uint8_t>(1 + below(3))};
      const Op read = load ? Op{.kind = OpKind::load_tile, .tile = t, .word = tile_word()}
                           : Op{.kind = OpKind::load, .slot = chance(80) ? slot : some_slot()};
      const bool early = gated || chance(25);
      emit(c, early ? read : wait);
      emit(c, early ? wait : read);
      continue;
    }
    if (r < 36 && p.ctas == 2 && chance(40)) {
      // The cluster barrier: every warp of the cluster.
      bool fits = true;
      for (std::uint32_t v = 0; v < n; ++v) fits = fits && room(v, 1) && total + n <= budget;
      if (!fits) continue;
      for (std::uint32_t v = 0; v < n; ++v) emit(v, {.kind = OpKind::cluster_sync});
      continue;
    }
    if (r < 36) {
      // The named barrier: a group of warps of one CTA, each syncing or
      // arriving.
      std::uint32_t group = 0, members = 0;
      for (std::uint32_t v = 0; v < n; ++v)
        if (same_cta(v, w) && (v == w || chance(60)) && room(v, 1)) group |= 1u << v;
      for (std::uint32_t v = 0; v < n; ++v) members += (group >> v) & 1u;
      if (members < 2) continue;
      const auto threads = static_cast<std::uint16_t>(32 * (chance(90) ? members : members + 1));
      bool synced = false;
      for (std::uint32_t v = 0; v < n; ++v) {
        if (((group >> v) & 1u) == 0) continue;
        const bool sync = !synced || chance(60);
        synced = synced || sync;
        emit(v, {.kind = sync ? OpKind::named_sync : OpKind::named_arrive, .bytes = threads});
      }
      continue;
    }
    if (!room(w, 1)) continue;
    const std::uint8_t b = some_bar();
    switch (below(10)) {
      case 0: emit(w, {.kind = OpKind::arrive, .bar = b, .peer = remote()}); break;
      case 1: emit(w, {.kind = OpKind::expect_tx, .bar = b, .bytes = byte_count()}); break;
      case 2:
        emit(w, {.kind = OpKind::tma_load, .bar = b, .tile = some_tile(), .bytes = byte_count(), .value = below(16),
                 .peer = remote()});
        break;
      case 3: emit(w, {.kind = OpKind::try_wait, .bar = b, .parity = static_cast<std::uint8_t>(below(2))}); break;
      case 4:
        emit(w, {.kind = OpKind::spin, .bar = b, .parity = static_cast<std::uint8_t>(below(2)),
                 .tries = static_cast<std::uint8_t>(1 + below(3))});
        break;
      case 5: emit(w, {.kind = OpKind::wait, .bar = b, .parity = static_cast<std::uint8_t>(chance(80) ? 0 : 1)}); break;
      case 6:
      case 7: emit(w, {.kind = OpKind::store, .slot = some_slot(), .value = ++stored}); break;
      case 8: emit(w, {.kind = OpKind::load, .slot = some_slot()}); break;
      default: emit(w, {.kind = OpKind::load_tile, .tile = some_tile(), .word = tile_word()}); break;
    }
  }
  return p;
}

// A program around counted phases, from a source of choices as
// make_program's: one CTA of 2 or 3 warps whose arrivals on a barrier of
// count 2 or 3 come from several warps, with single try_waits and
// test_waits on either parity around them (the parity of the phase before
// the current one answers true until the current one completes, the
// current one's false), counted spins, named barriers between warps, and,
// at the end, drains: waits for the phase. Every answer is kept in the
// final state, as a kernel keeps one for its verify after the run. The
// arrivals usually add up to the count; one may be missing or extra.
template <class Below>
Program make_counted_program(Below&& below) {
  auto chance = [&](std::uint32_t percent) { return below(100) < percent; };
  Program p;
  p.warps = chance(70) ? 2 : 3;
  p.bars = chance(75) ? 1 : 2;
  p.count[0] = 2 + below(2);
  p.count[1] = 1 + below(2);
  const std::uint32_t n = p.warps;
  // The unreduced search must finish within a few thousand runs.
  Ops ops(p, n == 2 ? 4 + below(3) : 3 + below(3));
  std::uint32_t& total = ops.total;
  const std::uint32_t budget = ops.budget;
  auto room = [&](std::uint32_t w, std::uint32_t k) { return ops.room(w, k); };
  auto emit = [&](std::uint32_t w, Op op) { ops.emit(w, op); };
  auto some_bar = [&] { return static_cast<std::uint8_t>(p.bars == 1 || chance(75) ? 0 : 1); };
  auto some_parity = [&] { return static_cast<std::uint8_t>(below(2)); };
  std::array<std::uint32_t, kMaxBars> arrivals{};
  // Room kept for the drains and the arrivals still missing at the end.
  const std::uint32_t keep = 1;
  for (std::uint32_t tries = 0; total + keep < budget && tries < 64; ++tries) {
    const std::uint32_t r = below(100);
    const std::uint32_t w = below(n);
    if (r < 35) {
      const std::uint8_t b = some_bar();
      if (!room(w, 1) || arrivals[b] >= p.count[b] + (chance(10) ? 1 : 0)) continue;
      emit(w, {.kind = OpKind::arrive, .bar = b});
      ++arrivals[b];
    } else if (r < 75) {
      if (!room(w, 1)) continue;
      emit(w, {.kind = chance(50) ? OpKind::test_wait : OpKind::try_wait, .bar = some_bar(), .parity = some_parity()});
    } else if (r < 85) {
      if (!room(w, 1)) continue;
      emit(w, {.kind = OpKind::spin, .bar = some_bar(), .parity = some_parity(),
               .tries = static_cast<std::uint8_t>(1 + below(3))});
    } else {
      // A named barrier between two warps (or all three), each syncing or
      // one arriving.
      const std::uint32_t v = (w + 1 + below(n - 1)) % n;
      if (!room(w, 1) || !room(v, 1) || total + 2 > budget) continue;
      const bool all = n == 3 && chance(40);
      const std::uint32_t u = 3 - w - v;  // the third warp, when n == 3
      if (all && !room(u, 1)) continue;
      const auto threads = static_cast<std::uint16_t>(32 * (all ? 3 : 2));
      emit(w, {.kind = OpKind::named_sync, .bytes = threads});
      emit(v, {.kind = chance(70) ? OpKind::named_sync : OpKind::named_arrive, .bytes = threads});
      if (all) emit(u, {.kind = OpKind::named_sync, .bytes = threads});
    }
  }
  // The arrivals still missing (most of the time), then the drains.
  for (std::uint32_t b = 0; b < p.bars; ++b)
    for (std::uint32_t tries = 0; arrivals[b] < p.count[b] && tries < 8 && chance(85); ++tries) {
      const std::uint32_t w = below(n);
      if (p.ops[w].size() < kMaxOps) {
        p.ops[w].push_back({.kind = OpKind::arrive, .bar = static_cast<std::uint8_t>(b)});
        ++arrivals[b];
      }
    }
  for (std::uint32_t w = 0; w < n; ++w)
    if (p.ops[w].size() < kMaxOps && chance(35)) p.ops[w].push_back({.kind = OpKind::wait, .bar = some_bar()});
  return p;
}

// A program around one TMA engine's order, from a source of choices as
// make_program's: one CTA of 2 or 3 warps and 2 or 3 barriers of count 1,
// in which several warps queue TMA loads into the CTA's one engine, each
// completing on a barrier of its own (arrive.expect_tx, then the load). A
// warp may be held back before its load: by a blocking wait for another
// load's phase, a single try_wait, or a spin of 1 or 2 tries on a barrier
// that may complete late or never. Warps observe the order in which the
// loads landed: a wait for one load's phase (or a test_wait of it) then a
// test_wait or try_wait of another's, either parity, or a read of a tile
// without waiting; at the end, drains. The shapes where a load queued late
// by one warp overtakes another warp's load queued earlier: whether the
// late load may overtake depends on whether the early one was still queued
// when it was issued.
template <class Below>
Program make_engine_program(Below&& below) {
  auto chance = [&](std::uint32_t percent) { return below(100) < percent; };
  Program p;
  p.warps = chance(60) ? 2 : 3;
  p.bars = chance(60) ? 2 : 3;
  for (std::uint32_t b = 0; b < p.bars; ++b) p.count[b] = 1;
  const std::uint32_t n = p.warps;
  Ops ops(p, n == 2 ? 6 + below(3) : 5 + below(3));
  auto room = [&](std::uint32_t w, std::uint32_t k) { return ops.room(w, k); };
  auto emit = [&](std::uint32_t w, const Op& op) { ops.emit(w, op); };
  auto some_bar = [&] { return static_cast<std::uint8_t>(below(p.bars)); };
  auto other_bar = [&](std::uint8_t b) { return static_cast<std::uint8_t>((b + 1 + below(p.bars - 1)) % p.bars); };
  auto some_parity = [&] { return static_cast<std::uint8_t>(chance(70) ? 0 : 1); };
  std::array<bool, kMaxBars> loaded{};
  // A barrier some load completes on, most of the time, for the waits.
  auto watched_bar = [&] {
    std::uint8_t b = some_bar();
    for (std::uint32_t k = 0; k < p.bars && !loaded[b] && chance(80); ++k) b = static_cast<std::uint8_t>((b + 1) % p.bars);
    return b;
  };
  for (std::uint32_t tries = 0; ops.total < ops.budget && tries < 64; ++tries) {
    const std::uint32_t r = below(100);
    const std::uint32_t w = below(n);
    if (r < 45) {
      // A load on a barrier no other load completes on, perhaps held back.
      std::uint8_t b = some_bar();
      for (std::uint32_t k = 0; k < p.bars && loaded[b]; ++k) b = static_cast<std::uint8_t>((b + 1) % p.bars);
      if (loaded[b]) continue;
      const std::uint32_t gate = chance(40) ? 0 : 1 + below(3);
      if (!room(w, gate != 0 ? 3 : 2)) continue;
      const std::uint8_t g = other_bar(b);
      if (gate == 1) emit(w, {.kind = OpKind::spin, .bar = g, .tries = static_cast<std::uint8_t>(1 + below(2))});
      if (gate == 2) emit(w, {.kind = OpKind::try_wait, .bar = g, .parity = some_parity()});
      if (gate == 3) emit(w, {.kind = OpKind::wait, .bar = g});
      const auto bytes = static_cast<std::uint16_t>(chance(85) ? 16 : kTileBytes);
      emit(w, {.kind = OpKind::arrive_tx, .bar = b, .bytes = bytes});
      emit(w, {.kind = OpKind::tma_load, .bar = b, .tile = static_cast<std::uint8_t>(below(kTiles)), .bytes = bytes,
               .value = below(16)});
      loaded[b] = true;
    } else if (r < 80) {
      // The order two loads landed in, as one warp sees it.
      if (!room(w, 2)) continue;
      const std::uint8_t x = watched_bar();
      const std::uint8_t y = other_bar(x);
      emit(w, chance(75) ? Op{.kind = OpKind::wait, .bar = x} : Op{.kind = OpKind::test_wait, .bar = x});
      emit(w, {.kind = chance(50) ? OpKind::test_wait : OpKind::try_wait, .bar = y, .parity = some_parity()});
    } else if (r < 90) {
      if (!room(w, 1)) continue;
      emit(w, {.kind = chance(50) ? OpKind::test_wait : OpKind::try_wait, .bar = some_bar(), .parity = some_parity()});
    } else {
      if (!room(w, 1)) continue;
      emit(w, {.kind = OpKind::load_tile, .tile = static_cast<std::uint8_t>(below(kTiles)),
               .word = static_cast<std::uint8_t>(chance(70) ? 0 : 32 + below(4))});
    }
  }
  // Drains: a warp waits for a load's phase before it exits.
  for (std::uint32_t w = 0; w < n; ++w)
    if (p.ops[w].size() < kMaxOps && chance(40)) p.ops[w].push_back({.kind = OpKind::wait, .bar = watched_bar()});
  return p;
}

// The program of a seed (the test's); ctas = 2: a cluster's.
inline Program seeded_program(std::uint64_t seed, std::uint32_t ctas = 1) {
  emu::Rng rng(seed * 0x9E3779B97F4A7C15ull + 0x5EED);
  return make_program([&](std::uint32_t n) { return rng.below(n); }, ctas);
}

// The counted program of a seed (make_counted_program).
inline Program seeded_counted_program(std::uint64_t seed) {
  emu::Rng rng(seed * 0xD1B54A32D192ED03ull + 0xC0117ED);
  return make_counted_program([&](std::uint32_t n) { return rng.below(n); });
}

// The engine program of a seed (make_engine_program).
inline Program seeded_engine_program(std::uint64_t seed) {
  emu::Rng rng(seed * 0xA0761D6478BD642Full + 0xE4617E);
  return make_engine_program([&](std::uint32_t n) { return rng.below(n); });
}

// ---------------------------------------------------------------- running

// The strategy of every run: forwards to the search, and knows whether a
// step is in progress (Watch::in_step). `footprints`, when set, replaces
// what the search is told of each step (a test's deliberately broken
// reduction); empty: the footprints as they are.
class Watch final : public emu::Strategy {
 public:
  Watch(emu::Strategy& inner, std::function<emu::Footprint(const emu::Footprint&)> footprints)
      : inner_(inner), footprints_(std::move(footprints)) {}
  void new_execution(std::uint32_t num_actors) override {
    in_step_ = false;
    inner_.new_execution(num_actors);
  }
  std::optional<std::uint32_t> pick(const emu::Choice& c) override {
    // A strategy that does not reason about footprints is asked at choice
    // points only, as the scheduler would.
    const auto p = c.n == 1 && !inner_.wants_footprints() ? std::optional<std::uint32_t>(c.enabled[0]) : inner_.pick(c);
    in_step_ = p.has_value();
    if (p) actor_ = *p;
    return p;
  }
  bool pruned() const override { return inner_.pruned(); }
  bool wants_footprints() const override { return true; }  // a pick at every step: in_step stays exact
  void ended(bool failed) override { inner_.ended(failed); }
  void stepped(std::uint32_t actor, const emu::Footprint& fp) override {
    in_step_ = false;
    if (after_step) after_step(actor);
    if (inner_.wants_footprints()) inner_.stepped(actor, footprints_ ? footprints_(fp) : fp);
  }
  // Called after each step, while the run's memory is still there (the
  // last step's too, before the teardown).
  std::function<void(std::uint32_t actor)> after_step;
  bool in_step() const { return in_step_; }
  // The actor of the step in progress, or of the last one.
  std::uint32_t actor() const { return actor_; }

 private:
  emu::Strategy& inner_;
  std::function<emu::Footprint(const emu::Footprint&)> footprints_;
  bool in_step_ = false;
  std::uint32_t actor_ = 0;
};

// The global tensor the TMA loads read: word i is 1000 + i, so a loaded
// tile word names its source.
inline const std::vector<std::uint32_t>& source_words() {
  static const std::vector<std::uint32_t> words = [] {
    std::vector<std::uint32_t> v(kSourceWords);
    for (std::uint32_t i = 0; i < kSourceWords; ++i) v[i] = 1000 + i;
    return v;
  }();
  return words;
}

struct Storage {
  SharedMemBarrier bar[kMaxBars];
  alignas(16) std::uint32_t word[kWords];
  alignas(128) std::uint32_t tile[kTiles][kTileWords];
};

// One run's observations, and the kernel that makes them.
class Run {
 public:
  // Observes the run through `watch` (which it hooks: one Run per run).
  Run(const Program& p, Watch& watch, bool race_check) : p_(p), watch_(watch), race_check_(race_check) {
    watch.after_step = [this](std::uint32_t actor) {
      if (actor >= p_.all_warps()) note_tiles();
    };
  }
  ~Run() { watch_.after_step = nullptr; }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  emu::Kernel kernel() {
    emu::Kernel k;
    k.launch.cluster_size = p_.ctas;
    k.launch.warps_per_cta = p_.warps;
    k.launch.smem_bytes = sizeof(Storage);
    k.body = [this] { body(); };
    return k;
  }

  // The final state of the run that ended as `r` (see the header comment).
  std::string state(const emu::RunResult& r) const {
    std::string s = emu::outcome(r);
    if (r.status == emu::Status::violation) {
      if (race_check_ && s.rfind("race.", 0) == 0) return "race";
      // Found by a CTA's exit checks: whichever warp exits last runs them,
      // and the order of exits is not an observable (they commute).
      if (r.violations.front().message.find("the CTA exited") != std::string::npos) return s + " at the CTA's exit";
      const std::uint32_t a = watch_.actor();
      if (a >= p_.all_warps()) return s + " by an engine";
      return s + " by" + warp(a);
    }
    for (std::uint32_t w = 0; w < p_.all_warps(); ++w) s += " |" + warp(w);
    for (std::uint32_t c = 0; c < p_.ctas; ++c) {
      s += c == 0 ? " | s:" : " / s:";  // a second CTA's words and tiles after a slash
      for (const std::uint32_t k : kSlotWord) {
        s += ' ';  // appended: g++ 12 -O3 warns falsely (-Wrestrict) on " " + std::string
        s += std::to_string(words_[c][k]);
      }
      s += " | t:";
      for (const auto& t : tiles_[c])
        for (std::size_t k = 0; k < 3; ++k) {  // appended: g++ 12 -O3 warns falsely (-Wrestrict) on " " + std::string
          s += k == 0 ? ' ' : ',';
          s += std::to_string(t[k]);
        }
    }
    return s;
  }

 private:
  using B = emu::EmuBackend;

  void body() {
    auto& st = B::shared_storage<Storage>();
    const std::uint32_t cta = B::cta_rank();
    const std::uint32_t w = cta * p_.warps + B::warp_idx();
    const SmemView<B, std::uint32_t> words(st.word, kWords);
    if (B::warp_idx() == 0) {
      storage_[cta] = &st;
      B::elect_one([&] {
        for (std::uint32_t b = 0; b < p_.bars; ++b) B::init(st.bar[b], p_.count[b], {"bar", static_cast<int>(b)});
        B::fence_init();
        std::fill_n(words.write_range(0, kWords), kWords, 0u);
        for (auto& t : st.tile)
          std::fill_n(SmemView<B, std::uint32_t>(t, kTileWords).write_range(0, kTileWords), kTileWords, 0u);
        B::fence_proxy_async();
      });
    }
    // Every barrier initialised before any warp uses one, its own CTA's or,
    // in a cluster, the other's.
    if (p_.ctas == 1)
      B::named_sync(0, 32 * p_.warps);
    else
      B::cluster_sync();
    for (const Op& op : p_.ops[w]) {
      if (!perform(st, cta, w, op)) return;  // the run has ended
      ++done_[w];
    }
    // The warp's exit touches everything (kGlobalResource): a step of its
    // own, so that the last operation's footprint is its own too. (A warp
    // without operations goes without: that step would only multiply the
    // unreduced interleavings.) In a cluster, a CTA must not exit while the
    // other may still arrive on its barriers or multicast into it: the
    // warps meet at the cluster barrier first.
    if (p_.ctas == 2)
      B::cluster_sync();
    else if (!p_.ops[w].empty())
      B::syncwarp();
  }

  // Performs one operation; false when the run has ended (teardown).
  bool perform(Storage& st, std::uint32_t cta, std::uint32_t w, const Op& op) {
    auto note = [&](std::string v) {
      if (watch_.in_step()) seen_[w].push_back(std::move(v));
    };
    SharedMemBarrier& bar = st.bar[op.bar];
    switch (op.kind) {
      case OpKind::named_sync: B::named_sync(kNamedId, op.bytes); return watch_.in_step();
      case OpKind::named_arrive: B::named_arrive(kNamedId, op.bytes); return watch_.in_step();
      case OpKind::cluster_sync: B::cluster_sync(); return watch_.in_step();
      case OpKind::store:
      case OpKind::load:
      case OpKind::load_tile:
        // Not a scheduling point by itself: a syncwarp before it lets any
        // step of the other warps fall between it and the operation before.
        B::syncwarp();
        break;
      default: break;
    }
    B::elect_one([&] {
      switch (op.kind) {
        case OpKind::arrive:
          if (op.peer)
            B::arrive_remote(bar, 1 - cta);
          else
            B::arrive(bar);
          break;
        case OpKind::arrive_tx:
          if (op.peer)
            B::arrive_expect_tx_remote(bar, op.bytes, 1 - cta);
          else
            B::arrive_expect_tx(bar, op.bytes);
          break;
        case OpKind::expect_tx: B::expect_tx(bar, op.bytes); break;
        case OpKind::tma_load: {
          TensorMap m;
          m.global = source_words().data();
          m.dtype = ElemType::u8;
          m.rank = 1;
          m.dims[0] = kSourceWords * 4;
          m.box[0] = op.bytes;
          TmaCoords at;
          at.c[0] = static_cast<std::int32_t>(16 * op.value);
          if (op.peer)
            B::tma_load_multicast<1, 1>(m, st.tile[op.tile], bar, at, 0b11);
          else
            B::tma_load<1, 1>(m, st.tile[op.tile], bar, at);
          break;
        }
        case OpKind::wait: B::wait(bar, op.parity); break;
        case OpKind::try_wait:
        case OpKind::test_wait: {
          const bool passed =
              op.kind == OpKind::try_wait ? B::try_wait(bar, op.parity) : B::test_wait(bar, op.parity);
          note(passed ? "1" : "0");
          break;
        }
        case OpKind::spin: {
          std::uint32_t passed = 0;
          for (std::uint32_t t = 1; t <= op.tries && passed == 0 && watch_.in_step(); ++t)
            passed = B::try_wait(bar, op.parity) ? t : 0;
          note("s" + std::to_string(passed));
          break;
        }
        case OpKind::store:
          if (!watch_.in_step()) break;
          SmemView<B, std::uint32_t>(st.word, kWords).store(kSlotWord[op.slot], op.value);
          if (watch_.in_step()) words_[cta][kSlotWord[op.slot]] = op.value;
          break;
        case OpKind::load: {
          if (!watch_.in_step()) break;
          const std::uint32_t v = SmemView<B, std::uint32_t>(st.word, kWords).load(kSlotWord[op.slot]);
          note("v" + std::to_string(v));
          break;
        }
        case OpKind::load_tile: {
          if (!watch_.in_step()) break;
          const std::uint32_t v =
              SmemView<B, std::uint32_t>(st.tile[op.tile], kTileWords).load(op.word);
          note("t" + std::to_string(v));
          break;
        }
        case OpKind::named_sync:
        case OpKind::named_arrive:
        case OpKind::cluster_sync: break;
      }
    });
    return watch_.in_step();
  }

  // What the TMA engine left in the tiles, after each of its steps: words
  // 0, 4 and 8 of each, which name the load that wrote them last (loads of
  // 16, 32 and 256 bytes, all to a tile's start, each word naming its
  // source). Read behind the race checker's back: the run's own memory,
  // not an access of a warp.
  void note_tiles() {
    for (std::uint32_t c = 0; c < p_.ctas; ++c)
      if (storage_[c] != nullptr)
        for (std::uint32_t t = 0; t < kTiles; ++t)
          for (std::uint32_t i = 0; i < 3; ++i) tiles_[c][t][i] = storage_[c]->tile[t][4 * i];
  }

  // " w1@2: 0 v3": warp w's operations completed and what it observed.
  std::string warp(std::uint32_t w) const {
    std::string s = " w" + std::to_string(w) + "@" + std::to_string(done_[w]) + ":";
    for (const std::string& v : seen_[w]) s += " " + v;
    return s;
  }

  const Program& p_;
  Watch& watch_;
  std::array<const Storage*, kMaxCtas> storage_{};
  bool race_check_;
  std::array<std::uint32_t, kMaxWarps> done_{};
  std::array<std::vector<std::string>, kMaxWarps> seen_;
  // Per CTA: the words as the warps' stores left them, the tiles as
  // note_tiles() saw them last.
  std::array<std::array<std::uint32_t, kWords>, kMaxCtas> words_{};
  std::array<std::array<std::array<std::uint32_t, 3>, kTiles>, kMaxCtas> tiles_{};
};

// ------------------------------------------------------------- searching

// How one search is made. The comparisons take it as a parameter, so that
// another search (dynamic partial-order reduction, unbounded) is one more entry.
// `footprints` is Watch's (a test's deliberately broken reduction); empty
// for every real search.
struct SearchSpec {
  std::string name;  // "bound 2, reduced"
  std::function<std::unique_ptr<emu::detail::ExhaustiveSearch>()> make;
  std::function<emu::Footprint(const emu::Footprint&)> footprints;
  // The sharded form of the search `make` makes (--shard;
  // emu::detail::ShardedSearch), its parts run here in turn. drop_part: a
  // part left out (the test of the check's own teeth).
  bool sharded = false;
  std::size_t drop_part = ~std::size_t{0};
};

// "Unbounded": more preemptions than any of these programs has choice points.
inline constexpr std::uint32_t kNoBound = 1000;

inline SearchSpec bounded(std::uint32_t bound, bool reduce) {
  const std::string b = bound >= kNoBound ? "unbounded" : "bound " + std::to_string(bound);
  return {b + (reduce ? ", reduced" : ", unreduced"),
          [=] { return std::make_unique<emu::detail::ExhaustiveSearch>(bound, reduce); },
          {}};
}

// Every final state one search reached, each with the replay token of the
// first run that reached it.
struct Reached {
  std::map<std::string, std::string> states;
  std::uint64_t runs = 0, pruned = 0;
  std::uint64_t races = 0;   // branches added by races (source sets)
  std::uint64_t splits = 0;  // search_split: children split off; sharded: parts
  bool complete = true;      // false: stopped at its budget of runs
};

// The options of every run: the defaults (try_wait time-outs and loads out
// of issue order included), no trace.
inline emu::RunOptions run_options(bool race_check, bool spurious_try_wait = true, bool async_reorder = true) {
  emu::RunOptions o;
  o.trace = false;
  o.race_check = race_check;
  o.spurious_try_wait = spurious_try_wait;
  o.async_reorder = async_reorder;
  o.max_steps = 100'000;  // programs are short and straight-line: never reached
  return o;
}

// One run of `strategy` (an exhaustive search, watched), tallied in `got`.
inline void run_once(const Program& p, emu::Strategy& strategy, const SearchSpec& spec, const emu::RunOptions& base,
                     Reached& got) {
  Watch watch(strategy, spec.footprints);
  Run run(p, watch, base.race_check);
  emu::RunOptions o = base;
  o.strategy = {};
  o.strategy.kind = emu::StrategyKind::exhaustive;
  o.strategy.shared = &watch;
  const emu::RunResult r = emu::run(run.kernel(), o);
  if (r.pruned) {
    ++got.pruned;
    return;
  }
  ++got.runs;
  got.states.emplace(run.state(r), r.schedule.encode());
}

// Runs one search to its end, or until it has made `max_runs` runs
// (pruned ones included).
inline Reached search(const Program& p, const SearchSpec& spec, const emu::RunOptions& base,
                      std::uint64_t max_runs = ~std::uint64_t{0}) {
  using emu::detail::ExhaustiveSearch;
  Reached got;
  auto budget = [&] {
    if (got.runs + got.pruned < max_runs) return true;
    got.complete = false;
    return false;
  };
  auto to_end = [&](ExhaustiveSearch& s) {
    do {
      if (!budget()) return;
      run_once(p, s, spec, base, got);
    } while (s.advance() == ExhaustiveSearch::Advance::next);
    got.races += s.races();
  };
  if (!spec.sharded) {
    to_end(*spec.make());
    return got;
  }
  emu::detail::ShardedSearch sharded(spec.make());
  while (const auto j = sharded.deciding()) {
    if (!budget()) return got;
    Reached dropped;  // every shard makes the deciding runs; the part's own shard counts them
    run_once(p, sharded.part(*j), spec, base, *j == spec.drop_part ? dropped : got);
    sharded.decided();
  }
  got.splits = sharded.parts();
  for (std::size_t j = 0; j < sharded.parts() && got.complete; ++j)
    if (const auto s = sharded.take(j); s && j != spec.drop_part) to_end(*s);  // its next run set up, or its first
  return got;
}

// The same search split among `workers` simulated workers, on this thread
// (emu::detail::SearchTree, as explore() uses it with --jobs): up to
// `workers` searches are taken at a time, and the one that runs next is
// drawn at random, so that children are split off, finish and are joined
// in ever other orders. The reached states, the runs and the pruned ones
// must be those of search() (same tree, whatever the order).
inline Reached search_split(const Program& p, const SearchSpec& spec, const emu::RunOptions& base,
                            unsigned workers, std::uint64_t seed) {
  Reached got;
  emu::detail::SearchTree tree(spec.make());
  emu::Rng rng(seed);
  std::vector<emu::detail::SearchTree::Task*> taken;
  for (;;) {
    while (taken.size() < workers)
      if (auto* t = tree.take()) taken.push_back(t);
      else break;
    if (taken.empty()) break;
    const std::size_t i = rng.below(static_cast<std::uint32_t>(taken.size()));
    auto* t = taken[i];
    taken.erase(taken.begin() + static_cast<std::ptrdiff_t>(i));
    run_once(p, emu::detail::SearchTree::search(t), spec, base, got);
    tree.ran(t, workers);
  }
  if (!tree.done()) throw std::logic_error("search_split: no search ready, none running, and the tree not done");
  got.races = tree.races();
  got.splits = tree.splits();
  return got;
}

// The search without a bound: source sets (reduce) or every schedule, both
// with a try_wait timing out at most once in a row.
inline SearchSpec unbounded(bool reduce) {
  return {std::string("unbounded, ") + (reduce ? "source sets" : "unreduced"),
          [=] { return std::make_unique<emu::detail::ExhaustiveSearch>(std::nullopt, reduce); },
          {}};
}

// The source-set search with every TMA load's issue ordered with the
// completions of its engine (the issue mark, Touch::issue, read as a read of
// the engine's order): both orders of an issue and an older operation's
// completion are then distinct classes, explored each, which is plainly
// sound and costly on real kernels. The reference for the mark's cheaper
// rule on programs whose unreduced search is too large (three warps).
inline SearchSpec issues_ordered() {
  SearchSpec s = unbounded(true);
  s.name = "unbounded, source sets, every load issue ordered with its engine's completions";
  s.footprints = [](const emu::Footprint& fp) {
    emu::Footprint out;
    for (const std::uint64_t id : fp)
      out.push_back(id != emu::kGlobalResource && emu::footprint_touch(id) == emu::Touch::issue
                        ? (id & ~std::uint64_t{7}) | static_cast<std::uint64_t>(emu::Touch::read)
                        : id);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
  return s;
}

// One differential comparison: the reference search (unreduced) and the
// one under test must reach the same final states; or, with `at_least`
// (a reference within a preemption bound, the tested one without), the
// tested search must reach every state the reference reaches.
struct Comparison {
  SearchSpec reference;
  SearchSpec tested;
  bool at_least = false;
};

// The source-set search dealt out in parts as --shard deals it (the parts
// run in turn here; their runs add up to the same totals for every N).
inline SearchSpec sharded(SearchSpec whole = unbounded(true)) {
  whole.name = "sharded, " + whole.name;
  whole.sharded = true;
  return whole;
}

// Source-DPOR against every schedule within preemption bounds 0, 1 and 2
// (it must reach each of their states: programs whose unbounded search
// without the reduction is too large are compared there), then against
// every schedule, unbounded: the same states. (A bounded search has no
// reduction to test: none is sound under a bound, so it runs every
// schedule within it.)
inline std::vector<Comparison> reduction_comparisons() {
  std::vector<Comparison> c;
  for (std::uint32_t k = 0; k <= 2; ++k) c.push_back({bounded(k, false), unbounded(true), true});
  c.push_back({unbounded(false), unbounded(true)});
  return c;
}

// The comparisons of the engine programs (make_engine_program), most of
// which have three warps, whose unreduced search is too large (an empty
// three-warp program alone has 2,520 schedules): the source-set search
// against issues_ordered(), plainly sound and affordable on programs this
// small; then, where it fits the budget, against the unreduced search.
inline std::vector<Comparison> engine_comparisons() {
  return {{issues_ordered(), unbounded(true)}, {unbounded(false), unbounded(true)}};
}

// One comparison's counts over the programs it ran on.
struct Tally {
  std::uint64_t comparisons = 0;
  std::uint64_t reference_runs = 0, tested_runs = 0, tested_pruned = 0, states = 0;
  std::uint64_t too_large = 0;  // comparisons skipped: a search passed its budget of runs
  // Comparisons where the program fails under some schedule and the tested
  // search found a failure too, but not every failure state: the search
  // stops a run at its first failure, so what other schedules past it
  // reach is not claimed (docs/exploration.md, "Soundness, tested
  // differentially").
  std::uint64_t failures_only = 0;
};

// Whether a search reached a failure (a state other than "ok ...").
inline bool has_failure(const Reached& r) {
  return std::any_of(r.states.begin(), r.states.end(), [](const auto& s) { return s.first.rfind("ok", 0) != 0; });
}

inline std::string counts(const Reached& r) {
  return std::to_string(r.runs) + " runs (+" + std::to_string(r.pruned) + " pruned), " +
         std::to_string(r.states.size()) + " states";
}

inline std::string describe(const Program& p, const emu::RunOptions& o) {
  return "program: " + to_string(p) + "\noptions: race_check=" + (o.race_check ? "on" : "off") +
         " spurious_try_wait=" + (o.spurious_try_wait ? "on" : "off") +
         " async_reorder=" + (o.async_reorder ? "on" : "off") + "\n";
}

// The states of `a` that `b` lacks, each with a replay token of a run of
// `a` that reached it; empty when none.
inline std::string missing(const Reached& a, const Reached& b, const std::string& a_name, const std::string& b_name) {
  std::string out;
  for (const auto& [state, token] : a.states)
    if (b.states.count(state) == 0)
      out += "  reached by " + a_name + ", not by " + b_name + ": " + state + "\n    schedule: " + token + "\n";
  return out;
}

// The final state of one run of `p` under the schedule `token` (a state's
// token in a report): replay(p, o, token) reproduces it.
inline std::string replay(const Program& p, const emu::RunOptions& base, const std::string& token) {
  std::string error;
  const std::optional<emu::Schedule> schedule = emu::Schedule::decode(token, &error);
  if (!schedule) return "bad schedule token: " + error;
  emu::RunOptions o = base;
  o.strategy = {};
  o.strategy.kind = emu::StrategyKind::replay;
  o.strategy.replay = *schedule;
  const std::unique_ptr<emu::Strategy> inner = emu::make_strategy(o.strategy, 64);
  Watch watch(*inner, {});
  o.strategy.kind = emu::StrategyKind::custom;
  o.strategy.shared = &watch;
  Run run(p, watch, o.race_check);
  return run.state(emu::run(run.kernel(), o));
}

// Runs one comparison on one program; returns the difference for a person
// (the program, the options, the searches and their counts, each state
// reached by one and not the other with the schedule token of a run that
// reached it, for replay()); empty when they agree or a search ran past
// `max_runs` (then counted in tally.too_large).
inline std::string check(const Program& p, const emu::RunOptions& o, const Comparison& c, std::uint64_t max_runs,
                         Tally& tally) {
  ++tally.comparisons;
  const Reached ref = search(p, c.reference, o, max_runs);
  if (!ref.complete) {
    ++tally.too_large;
    return {};
  }
  const Reached got = search(p, c.tested, o, max_runs);
  if (!got.complete) {
    ++tally.too_large;
    return {};
  }
  tally.reference_runs += ref.runs;
  tally.tested_runs += got.runs;
  tally.tested_pruned += got.pruned;
  tally.states += ref.states.size();
  const std::string head = describe(p, o) + c.reference.name + ": " + counts(ref) + "; " + c.tested.name + ": " +
                           counts(got) + "\n";
  // Never right: the tested search runs a subset of the schedules (unless
  // the reference is the one bounded).
  const std::string extra = c.at_least ? std::string() : missing(got, ref, c.tested.name, c.reference.name);
  if (!extra.empty()) return head + extra;
  const std::string lacking = missing(ref, got, c.reference.name, c.tested.name);
  if (lacking.empty()) return {};
  // A failing program: the verdict must agree (a failure found), and every
  // state found be reachable (checked above); which failures is not.
  if (has_failure(ref) && has_failure(got)) {
    ++tally.failures_only;
    return {};
  }
  return head + lacking;
}

// Every comparison on one program, in order; the differences found, and
// each comparison's counts added to its tally (tallies[i] for
// comparisons[i]). The comparisons go from the cheapest reference search to
// the dearest: once one passes `max_runs` (or a quarter of it), the rest
// are counted as too large without being run.
inline std::vector<std::string> check_program(const Program& p, const emu::RunOptions& o,
                                              const std::vector<Comparison>& comparisons, std::uint64_t max_runs,
                                              std::vector<Tally>& tallies) {
  tallies.resize(comparisons.size());
  std::vector<std::string> differences;
  for (std::size_t i = 0; i < comparisons.size(); ++i) {
    const std::uint64_t large = tallies[i].too_large, runs = tallies[i].reference_runs;
    std::string d = check(p, o, comparisons[i], max_runs, tallies[i]);
    if (!d.empty()) differences.push_back(std::move(d));
    // A reference search grows several times over from one bound to the
    // next: one past a quarter of the budget predicts the next one past all
    // of it, which would cost the budget for nothing.
    if (tallies[i].too_large != large || (tallies[i].reference_runs - runs) * 4 > max_runs) {
      for (std::size_t j = i + 1; j < comparisons.size(); ++j) {
        ++tallies[j].comparisons;
        ++tallies[j].too_large;
      }
      break;
    }
  }
  return differences;
}

}  // namespace wspipe::fuzz::soundness
