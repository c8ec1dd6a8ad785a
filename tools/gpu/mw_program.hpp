// Multi-warp mbarrier programs for the emulator-against-silicon
// conformance suite (docs/silicon.md, "Multi-warp conformance"): 2 to 4
// warps, each with lane 0 issuing its own straight-line list of operations
// on 1 to 3 mbarriers, a few shared-memory slots and one copy destination
// per barrier. Silicon runs each program thousands of times with varied
// delays (tools/gpu/silicon.cu, `conformance-mw`) and records the set of
// outcomes it saw; the emulator searches the same program's schedules
// (tests/silicon_mw_conformance_test.cpp) and must reach every one of them.
//
// An outcome is every observation of every warp, as text:
// "w0:1 s2 v1003 | w1:0 | w2:" (outcome_text). Observations are the answer
// of try_wait and test_wait ("0" / "1"), the try on which a bounded spin
// passed ("s1".."sK", "s0" never), and the value a load read ("v<value>").
// A blocking wait adds nothing when it passes; "X" when it never did
// (silicon gives up after a time limit, the emulator reports a deadlock),
// and the warp stops there.
//
// Programs are reproducible from (seed, index) and stay within defined
// behaviour on every schedule, by construction: the generator plays one
// sequential execution (one fuzz::RefMbarrier per barrier) and gives each
// warp its part of it, under a protocol that holds whatever the order.
//  - Each barrier has a fixed set of arriving warps, one arrival each per
//    phase (count = their number). A warp arrives in phase k+1 only after
//    its own blocking wait saw phase k complete, so no arrival lands in the
//    wrong phase, no arrival is over, and every phase is observed before the
//    next one's arrivals (the usage rule). Only arriving warps wait
//    blocking: they cannot fall two phases behind, so no wait aliases.
//  - Bytes: a warp expects them (expect_tx, or arrive.expect_tx) before
//    its arrival and delivers exactly those bytes after it (complete_tx,
//    bulk copies, a TMA box): the phase cannot complete before they land,
//    and none lands in another phase.
//  - Every other operation only observes: try_wait, test_wait and bounded
//    spins on any barrier with any parity, loads of any slot or copy
//    destination word, stores of a value to a slot (racy where nothing
//    orders them: the point is what silicon shows).
//  - At the end every arrival a started phase still needs is made, every
//    byte delivered, and every arriving warp waits for its last phase, so no
//    copy is in flight and no byte expected when the CTA exits.
// So a blocking wait that never passes ("X") is a finding, not a design.
//
// Plain host C++: the device side gets the operations as a flat array.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fuzz/ref_mbarrier.hpp"

namespace wspipe::silicon {

enum class MwOpKind : std::uint8_t {
  arrive,            // mbarrier.arrive (one thread: count 1)
  arrive_expect_tx,  // mbarrier.arrive.expect_tx(arg bytes)
  expect_tx,         // mbarrier.expect_tx(arg bytes)
  complete_tx,       // mbarrier.complete_tx(arg bytes), by the thread
  bulk_copy,         // cp.async.bulk of arg bytes (16..64, a multiple of 16) from source byte `value`
                     // to the barrier's destination at byte 16 * dst (0 or 128: the emulator copies
                     // through its TMA model, which wants 128-byte aligned boxes); complete_tx on delivery
  tma_copy,          // a 1-D TMA box of kMwTmaBytes from source byte `value` to the destination's start
  try_wait,          // mbarrier.try_wait.parity(arg): observed
  test_wait,         // mbarrier.test_wait.parity(arg): observed
  spin,              // up to `tries` try_wait.parity(arg): the try that passed observed (0: none)
  wait,              // blocking: try_wait.parity(arg) until it passes ("X" if it never does)
  store,             // slot[arg] = value (a plain 32-bit store)
  load,              // slot[arg]: observed
  load_copy,         // word arg of the barrier's copy destination: observed
  // Generator 2 on (mw_program's `generator`):
  spin_or_load,      // up to `tries` try_wait.parity(arg), the try that passed observed; if none
                     // did, the fallback loads word `value` of the barrier's copy destination,
                     // observed too (a bounded wait that reads its slot anyway)
};

struct MwOp {
  MwOpKind kind;
  std::uint8_t bar = 0;    // the barrier (0..bars-1); unused by store and load
  std::uint8_t tries = 0;  // spin: the most try_waits
  std::uint8_t dst = 0;    // bulk_copy: the destination offset in 16-byte units
  std::uint32_t arg = 0;   // bytes, parity, slot or word, as the kind says
  std::uint32_t value = 0; // store: the value; copies: the source byte offset
};

inline constexpr std::uint32_t kMwMaxWarps = 4;
inline constexpr std::uint32_t kMwMaxBars = 3;
inline constexpr std::uint32_t kMwSlots = 4;
inline constexpr std::uint32_t kMwCopyBytes = 256;  // each barrier's copy destination: two halves
inline constexpr std::uint32_t kMwTmaBytes = 64;    // the TMA box: 16 f32
inline constexpr std::uint32_t kMwSourceBytes = 4096;
inline constexpr std::uint32_t kMwMaxOps = 24;      // per warp, the final waits included (generator 1)
inline constexpr std::uint32_t kMwMaxOps2 = 32;     // per warp, generator 2
inline constexpr std::uint32_t kMwMaxObs = 2 * kMwMaxOps2;  // observations per warp, at most (the device's slots)
inline constexpr std::uint32_t kMwGenerators = 2;   // the generators mw_program knows: 1, 2
inline constexpr std::uint32_t kMwNoPass = ~0u;     // a blocking wait's observation when it never passed

// Source word i holds kMwSourceBase + i, so a loaded copy word names the
// bytes it came from; stored values are small (1, 2, ...) and the slots and
// destinations start at 0.
inline constexpr std::uint32_t kMwSourceBase = 1000;

struct MwProgram {
  std::uint32_t generator = 1;  // which draw made it (mw_program)
  std::uint32_t warps = 2;
  std::uint32_t bars = 1;
  std::array<std::uint32_t, kMwMaxBars> count{};  // arrivals per phase
  std::array<std::vector<MwOp>, kMwMaxWarps> ops;
};

inline const char* op_name(MwOpKind k) {
  switch (k) {
    case MwOpKind::arrive: return "arrive";
    case MwOpKind::arrive_expect_tx: return "arrive_expect_tx";
    case MwOpKind::expect_tx: return "expect_tx";
    case MwOpKind::complete_tx: return "complete_tx";
    case MwOpKind::bulk_copy: return "bulk_copy";
    case MwOpKind::tma_copy: return "tma_copy";
    case MwOpKind::try_wait: return "try_wait";
    case MwOpKind::test_wait: return "test_wait";
    case MwOpKind::spin: return "spin";
    case MwOpKind::wait: return "wait";
    case MwOpKind::store: return "store";
    case MwOpKind::load: return "load";
    case MwOpKind::load_copy: return "load_copy";
    case MwOpKind::spin_or_load: return "spin_or_load";
  }
  return "?";
}

// Whether the operation records an observation.
inline bool observes(MwOpKind k) {
  return k == MwOpKind::try_wait || k == MwOpKind::test_wait || k == MwOpKind::spin || k == MwOpKind::load ||
         k == MwOpKind::load_copy || k == MwOpKind::spin_or_load;
}

// "b0(2) b1(1) | w0: arrive_expect_tx(b0,64); bulk_copy(b0,64@0<-128); wait(b0,0) | w1: ...":
// how a program is printed in reports.
inline std::string to_string(const MwProgram& p) {
  std::string s;
  for (std::uint32_t b = 0; b < p.bars; ++b) {
    s += (b ? " b" : "b") + std::to_string(b) + "(" + std::to_string(p.count[b]) + ")";
  }
  for (std::uint32_t w = 0; w < p.warps; ++w) {
    s += " | w" + std::to_string(w) + ":";
    const char* sep = " ";
    for (const MwOp& op : p.ops[w]) {
      s += sep;
      sep = "; ";
      s += op_name(op.kind);
      const std::string b = 'b' + std::to_string(op.bar);
      switch (op.kind) {
        case MwOpKind::arrive: s += "(" + b + ")"; break;
        case MwOpKind::bulk_copy:
          s += "(" + b + "," + std::to_string(op.arg) + "@" + std::to_string(16 * op.dst) + "<-" +
               std::to_string(op.value) + ")";
          break;
        case MwOpKind::tma_copy: s += "(" + b + "," + std::to_string(op.arg) + "<-" + std::to_string(op.value) + ")"; break;
        case MwOpKind::spin: s += "(" + b + "," + std::to_string(op.arg) + ",x" + std::to_string(op.tries) + ")"; break;
        case MwOpKind::spin_or_load:
          s += "(" + b + "," + std::to_string(op.arg) + ",x" + std::to_string(op.tries) + ",w" +
               std::to_string(op.value) + ")";
          break;
        case MwOpKind::store: s += "(s" + std::to_string(op.arg) + "=" + std::to_string(op.value) + ")"; break;
        case MwOpKind::load: s += "(s" + std::to_string(op.arg) + ")"; break;
        default: s += "(" + b + "," + std::to_string(op.arg) + ")"; break;
      }
    }
  }
  return s;
}

// The outcome's text from each warp's observations in program order (a
// blocking wait that never passed: kMwNoPass, and nothing after it).
inline std::string outcome_text(const MwProgram& p, const std::array<std::vector<std::uint32_t>, kMwMaxWarps>& obs) {
  std::string s;
  for (std::uint32_t w = 0; w < p.warps; ++w) {
    if (w) s += " | ";
    s += 'w';  // appended: g++ 12 -O3 warns falsely (-Wrestrict) on "w" + std::string
    s += std::to_string(w);
    s += ':';
    const char* sep = "";
    std::size_t next = 0;
    for (const MwOp& op : p.ops[w]) {
      if (op.kind != MwOpKind::wait && !observes(op.kind)) continue;
      if (next >= obs[w].size()) break;
      const std::uint32_t v = obs[w][next];
      if (op.kind == MwOpKind::wait) {
        if (v != kMwNoPass) {
          ++next;
          continue;
        }
        s += sep;
        s += 'X';
        break;
      }
      ++next;
      s += sep;
      sep = " ";
      if (op.kind == MwOpKind::spin_or_load) {  // the try that passed; none: the fallback's load too
        s += 's' + std::to_string(v);
        if (v != 0) continue;
        if (next >= obs[w].size()) break;
        s += " f" + std::to_string(obs[w][next++]);
        continue;
      }
      if (op.kind == MwOpKind::spin) s += 's';
      if (op.kind == MwOpKind::load || op.kind == MwOpKind::load_copy) s += 'v';
      s += std::to_string(v);
    }
  }
  return s;
}

// The program: drawn with the protocol above (the header comment). The draw
// is part of the recorded data's meaning: program(seed, i, generator) must
// stay the program silicon ran, so changing a generator means recording
// again; a new shape goes into a new generator.
//  - Generator 1: the shapes above.
//  - Generator 2 adds what generator 1 lacks and kernels do: counted spins
//    whose fallback loads the barrier's copy destination anyway
//    (spin_or_load, from one try up), straight-line runs of 2 to 4
//    try_wait/test_wait on one barrier, and bursts of 3 to 8 bulk copies
//    in flight to one barrier (an arrival expecting 80 to 128 bytes,
//    then its copies at once);
//    bytes come more often from every arriving warp. Up to kMwMaxOps2
//    operations per warp. Its silicon runs also hold one warp back for a
//    long stretch in some repetitions (tools/gpu/silicon.cu, mw_delay).
inline MwProgram mw_program(std::uint64_t seed, std::uint32_t index, std::uint32_t generator = 1) {
  using K = MwOpKind;
  std::mt19937_64 rng(seed * 0xD1B54A32D192ED03ull + index);
  auto pick = [&](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
  auto chance = [&](std::uint32_t percent) { return pick(100) < percent; };

  const bool v2 = generator >= 2;
  MwProgram p;
  p.generator = generator;
  p.warps = 2 + pick(kMwMaxWarps - 1);
  p.bars = 1 + pick(kMwMaxBars);
  std::array<std::uint32_t, kMwMaxBars> arrivers{};  // bit w: warp w arrives on the barrier
  std::array<fuzz::RefMbarrier, kMwMaxBars> ref;
  for (std::uint32_t b = 0; b < p.bars; ++b) {
    // Mostly one or two arriving warps: a producer, or a producer and a consumer.
    while (arrivers[b] == 0) {
      for (std::uint32_t w = 0; w < p.warps; ++w) {
        if (chance(45)) arrivers[b] |= 1u << w;
      }
    }
    p.count[b] = static_cast<std::uint32_t>(std::popcount(arrivers[b]));
    ref[b].init(p.count[b]);
  }
  // Per warp and barrier: arrived in the phase `phase` and not yet seen it
  // complete; the bytes it expected and has not delivered.
  struct Part {
    bool arrived = false;
    std::uint32_t phase = 0;
    std::uint32_t owed = 0;
  };
  std::array<std::array<Part, kMwMaxBars>, kMwMaxWarps> part{};
  std::uint32_t stored = 0;  // values stored so far: the next is stored + 1

  auto emit = [&](std::uint32_t w, MwOp op) { p.ops[w].push_back(op); };
  auto deliver = [&](std::uint32_t w, std::uint32_t b, std::uint32_t bytes) {
    Part& pt = part[w][b];
    pt.owed -= bytes;
    ref[b].add_tx(-std::int64_t{bytes});
    ref[b].complete_if_done();
  };
  auto deliver_some = [&](std::uint32_t w, std::uint32_t b) {
    const std::uint32_t owed = part[w][b].owed;
    const auto u8 = [](std::uint32_t v) { return static_cast<std::uint8_t>(v); };
    if (v2 && owed >= 80) {  // a burst: every byte in copies of 16 or 32, all in flight at once
      while (part[w][b].owed >= 16) {
        const std::uint32_t bytes = part[w][b].owed >= 32 && chance(25) ? 32 : 16;
        emit(w, {K::bulk_copy, u8(b), 0, u8(pick(kMwCopyBytes / 128) * 8), bytes,
                 16 * pick((kMwSourceBytes - bytes) / 16)});
        deliver(w, b, bytes);
      }
    } else if (owed >= kMwTmaBytes && chance(30)) {
      emit(w, {K::tma_copy, u8(b), 0, 0, kMwTmaBytes, 16 * pick((kMwSourceBytes - kMwTmaBytes) / 16)});
      deliver(w, b, kMwTmaBytes);
    } else if (owed >= 16 && chance(70)) {
      const std::uint32_t bytes = 16 * (1 + pick(std::min<std::uint32_t>(owed, 64) / 16));
      emit(w, {K::bulk_copy, u8(b), 0, u8(pick(kMwCopyBytes / 128) * 8), bytes,
               16 * pick((kMwSourceBytes - bytes) / 16)});
      deliver(w, b, bytes);
    } else {
      const std::uint32_t bytes = chance(50) ? owed : 1 + pick(owed);
      emit(w, {K::complete_tx, u8(b), 0, 0, bytes, 0});
      deliver(w, b, bytes);
    }
  };
  auto arrive = [&](std::uint32_t w, std::uint32_t b, bool with_bytes) {
    Part& pt = part[w][b];
    const auto bar = static_cast<std::uint8_t>(b);
    bool burst = false;
    if (with_bytes) {
      burst = v2 && chance(25);
      const std::uint32_t bytes = burst         ? 16 * (5 + pick(4))
                                  : chance(30) ? kMwTmaBytes
                                               : 16 * (1 + pick(4)) - (chance(15) ? 8 : 0);
      emit(w, {K::arrive_expect_tx, bar, 0, 0, bytes, 0});
      pt.owed += bytes;
      ref[b].add_tx(bytes);
    } else {
      emit(w, {K::arrive, bar, 0, 0, 0, 0});
    }
    pt.arrived = true;
    ref[b].arrive(1);
    if (burst) deliver_some(w, b);  // the copies at once, all in flight together
  };
  // The phase `w` arrived in has completed (in the sequential execution).
  auto completed = [&](std::uint32_t w, std::uint32_t b) { return ref[b].phase > part[w][b].phase; };
  auto finish_phase = [&](std::uint32_t w, std::uint32_t b) {
    Part& pt = part[w][b];
    emit(w, {K::wait, static_cast<std::uint8_t>(b), 0, 0, pt.phase & 1, 0});
    pt.arrived = false;
    ++pt.phase;
  };

  // Room for the end: at most 3 operations per barrier (a wait for a
  // completed phase, then an arrival and a wait; or an arrival, the owed
  // bytes and a wait). A step of the walk adds at most 2 (a spin and a
  // wait); in generator 2, 9 (an arrival and a burst of copies).
  const std::uint32_t walk_cap = (v2 ? kMwMaxOps2 : kMwMaxOps) - 3 * kMwMaxBars;
  const std::uint32_t step_max = v2 ? 9 : 2;
  const std::uint32_t target = p.warps * (3 + pick(7));
  std::uint32_t total = 0;
  for (std::uint32_t guard = 0; total < target && guard < 1000; ++guard) {
    const std::uint32_t w = pick(p.warps);
    if (p.ops[w].size() + step_max > walk_cap) continue;
    const std::size_t before = p.ops[w].size();
    const std::uint32_t b = pick(p.bars);
    const auto bar = static_cast<std::uint8_t>(b);
    const std::uint32_t r = pick(100);
    Part& pt = part[w][b];
    if (r < 40 && (arrivers[b] >> w & 1)) {  // the warp's next step on the barrier it arrives on
      if (!pt.arrived && pt.owed == 0 && chance(15)) {
        const std::uint32_t bytes = 16 * (1 + pick(4));
        emit(w, {K::expect_tx, bar, 0, 0, bytes, 0});
        pt.owed += bytes;
        ref[b].add_tx(bytes);
      } else if (!pt.arrived) {
        arrive(w, b, chance(v2 ? 65 : 55));
      } else if (pt.owed > 0) {
        deliver_some(w, b);
      } else if (completed(w, b)) {
        if (chance(25)) emit(w, {K::spin, bar, static_cast<std::uint8_t>(2 + pick(3)), 0, pt.phase & 1, 0});
        finish_phase(w, b);
      }
    } else if (r < 65) {  // observe a barrier
      const std::uint32_t parity = pick(2);
      const std::uint32_t k = pick(v2 ? 5 : 3);
      if (k == 3) {  // a counted spin whose fallback reads the copy destination anyway
        emit(w, {K::spin_or_load, bar, static_cast<std::uint8_t>(1 + pick(4)), 0, parity,
                 32 * pick(2) + pick(chance(70) ? 4 : 16)});
      } else if (k == 4) {  // straight-line try_wait/test_wait, mostly on one parity
        const std::uint32_t n = 2 + pick(3);
        for (std::uint32_t i = 0; i < n; ++i)
          emit(w, {chance(60) ? K::try_wait : K::test_wait, bar, 0, 0, chance(75) ? parity : parity ^ 1, 0});
      } else {
        emit(w, {k == 0 ? K::try_wait : k == 1 ? K::test_wait : K::spin, bar,
                 static_cast<std::uint8_t>(k == 2 ? 2 + pick(3) : 0), 0, parity, 0});
      }
    } else if (r < 78) {
      emit(w, {K::store, 0, 0, 0, pick(kMwSlots), ++stored});
    } else if (r < 90) {
      emit(w, {K::load, 0, 0, 0, pick(kMwSlots), 0});
    } else {
      // A word the copies can write: mostly in the first 16 bytes of either
      // half (every copy writes them), else in its first 64.
      emit(w, {K::load_copy, bar, 0, 0, 32 * pick(2) + pick(chance(70) ? 4 : 16), 0});
    }
    total += static_cast<std::uint32_t>(p.ops[w].size() - before);
  }

  // The end: every arrival a started phase needs, every byte owed, then the
  // waits of its arriving warps (in this order, so that the sequential
  // execution passes every wait). A phase nobody arrived in stays open.
  for (std::uint32_t b = 0; b < p.bars; ++b) {
    // First the waits for phases that completed (their bytes all in).
    for (std::uint32_t w = 0; w < p.warps; ++w) {
      if (part[w][b].arrived && completed(w, b)) finish_phase(w, b);
    }
    // Started: some warp has arrived in the current phase (not only in one
    // that completed and that it has not waited for yet) or expects bytes
    // in it, which a kernel must not leave pending when it exits.
    bool started = false;
    for (std::uint32_t w = 0; w < p.warps; ++w) {
      started = started || (part[w][b].arrived && part[w][b].phase == ref[b].phase) || part[w][b].owed > 0;
    }
    for (std::uint32_t w = 0; w < p.warps; ++w) {
      if (!(arrivers[b] >> w & 1)) continue;
      Part& pt = part[w][b];
      if (started && !pt.arrived) {
        if (pt.owed == 0) {
          arrive(w, b, false);
        } else {  // expected bytes before its arrival: arrive, and deliver them next
          emit(w, {K::arrive, static_cast<std::uint8_t>(b), 0, 0, 0, 0});
          pt.arrived = true;
          ref[b].arrive(1);
        }
      }
      if (pt.arrived && pt.owed > 0) {
        emit(w, {K::complete_tx, static_cast<std::uint8_t>(b), 0, 0, pt.owed, 0});
        deliver(w, b, pt.owed);
      }
    }
    for (std::uint32_t w = 0; w < p.warps; ++w) {
      if ((arrivers[b] >> w & 1) && part[w][b].arrived) finish_phase(w, b);
    }
  }
  return p;
}

// The number of observations (blocking waits included) of warp w: the
// device runner's slots per warp.
inline std::uint32_t observation_count(const MwProgram& p, std::uint32_t w) {
  std::uint32_t n = 0;
  for (const MwOp& op : p.ops[w]) n += (op.kind == MwOpKind::wait || observes(op.kind)) + (op.kind == MwOpKind::spin_or_load);
  return n;
}

}  // namespace wspipe::silicon
