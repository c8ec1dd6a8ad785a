// mbarrier programs for the emulator-against-silicon conformance suite
// (docs/silicon.md): one barrier, one thread issuing a fixed sequence of
// mbarrier operations, every wait's result observed. Silicon runs them in
// tools/gpu/silicon.cu; the emulator's mbarrier model runs the same
// programs in tests/silicon_conformance_test.cpp and must observe the same.
//
// Programs are reproducible from (seed, index): program(seed, i) is the
// same everywhere. The first kNamedPrograms indices are fixed cases worth
// naming (named_program); the rest are drawn at random, mostly within what
// the PTX ISA defines, with a few undefined steps on purpose (an
// over-arrival, an arrive before the previous phase was observed, a re-init
// without inval, a wait two phases behind) whose silicon outcome is recorded.
//
// Plain host C++: the device side gets the operations as a flat array.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fuzz/ref_mbarrier.hpp"

namespace wspipe::silicon {

enum class MbarOpKind : std::uint8_t {
  init,              // mbarrier.init(arg = count)
  inval,             // mbarrier.inval
  arrive,            // mbarrier.arrive with count arg (1..32)
  arrive_expect_tx,  // mbarrier.arrive.expect_tx(arg bytes): expect_tx then arrive(1)
  expect_tx,         // mbarrier.expect_tx(arg)
  complete_tx,       // mbarrier.complete_tx(arg), by the thread
  bulk_copy,         // cp.async.bulk global -> shared of arg bytes (multiple of 16), complete_tx on delivery
  tma_copy,          // cp.async.bulk.tensor.1d of one 64-byte box (the backend's tma_load), complete_tx(64)
  try_wait,          // mbarrier.try_wait.parity(arg): observed
  test_wait,         // mbarrier.test_wait.parity(arg): observed
};

struct MbarOp {
  MbarOpKind kind;
  std::uint32_t arg;
};

inline constexpr std::uint32_t kTmaCopyBytes = 64;   // the tma_copy box
inline constexpr std::uint32_t kMaxCopyBytes = 256;  // the copies' source and destination size
inline constexpr std::uint32_t kMaxOps = 48;         // ops per program, the trailing inval included

inline const char* op_name(MbarOpKind k) {
  switch (k) {
    case MbarOpKind::init: return "init";
    case MbarOpKind::inval: return "inval";
    case MbarOpKind::arrive: return "arrive";
    case MbarOpKind::arrive_expect_tx: return "arrive_expect_tx";
    case MbarOpKind::expect_tx: return "expect_tx";
    case MbarOpKind::complete_tx: return "complete_tx";
    case MbarOpKind::bulk_copy: return "bulk_copy";
    case MbarOpKind::tma_copy: return "tma_copy";
    case MbarOpKind::try_wait: return "try_wait";
    case MbarOpKind::test_wait: return "test_wait";
  }
  return "?";
}

inline bool is_wait(MbarOpKind k) { return k == MbarOpKind::try_wait || k == MbarOpKind::test_wait; }

// "init(1); arrive_expect_tx(64); ...": how a program is printed in reports.
inline std::string to_string(const std::vector<MbarOp>& p) {
  std::string s;
  for (const MbarOp& op : p) {
    if (!s.empty()) s += "; ";
    s += op_name(op.kind);
    if (op.kind != MbarOpKind::inval) {
      s += '(';
      s += std::to_string(op.arg);
      s += ')';
    }
  }
  return s;
}

// The fixed cases, first in every run. Case 0 is the sequence an earlier
// report said passed try_wait before its bytes arrived; 1 and 2
// deliver the bytes with a real bulk copy and a real TMA tensor copy.
inline constexpr std::uint32_t kNamedPrograms = 6;
inline std::vector<MbarOp> named_program(std::uint32_t i) {
  using K = MbarOpKind;
  switch (i) {
    case 0:  // arrive_expect_tx(64); complete_tx(24); expect_tx(8); try_wait(0); complete_tx(48)
      return {{K::init, 1},        {K::arrive_expect_tx, 64}, {K::complete_tx, 24}, {K::expect_tx, 8},
              {K::try_wait, 0},    {K::test_wait, 0},         {K::complete_tx, 48}, {K::try_wait, 0},
              {K::inval, 0}};
    case 1:  // the same shape with bulk copies: 64 - 16 + 16 outstanding, then the last 64
      return {{K::init, 1},     {K::arrive_expect_tx, 64}, {K::bulk_copy, 16}, {K::expect_tx, 16},
              {K::try_wait, 0}, {K::test_wait, 0},         {K::bulk_copy, 64}, {K::try_wait, 0},
              {K::inval, 0}};
    case 2:  // and with TMA tensor copies of 64 bytes
      return {{K::init, 1},     {K::arrive_expect_tx, 128}, {K::tma_copy, 64}, {K::expect_tx, 8},
              {K::try_wait, 0}, {K::test_wait, 0},          {K::complete_tx, 8}, {K::tma_copy, 64},
              {K::try_wait, 0}, {K::inval, 0}};
    case 3:  // count 2: expect_tx before the arrivals, the phase waits for the last bytes
      return {{K::init, 2},      {K::expect_tx, 64}, {K::arrive, 1},     {K::complete_tx, 24},
              {K::expect_tx, 8}, {K::arrive, 1},     {K::try_wait, 0},   {K::complete_tx, 48},
              {K::try_wait, 0},  {K::inval, 0}};
    case 4:  // tx negative first: complete_tx before expect_tx
      return {{K::init, 1},      {K::complete_tx, 32}, {K::arrive, 1}, {K::try_wait, 0},
              {K::expect_tx, 32}, {K::try_wait, 0},    {K::try_wait, 1}, {K::inval, 0}};
    default:  // a fresh barrier: parity 1 (the phase before 0) reads complete, 0 not
      return {{K::init, 3}, {K::try_wait, 1}, {K::test_wait, 0}, {K::arrive, 2}, {K::test_wait, 0},
              {K::arrive, 1}, {K::try_wait, 0}, {K::test_wait, 1}, {K::inval, 0}};
  }
}

// A random program. The reference model of the barrier (fuzz/ref_mbarrier.hpp:
// phase, pending arrivals, tx-count, whether the last phase was observed)
// steers the draw so that most programs stay within the PTX ISA's defined
// behaviour; the rest take one undefined step on purpose. The draw is part
// of the recorded data's meaning (tests/data/: program(seed, i) must stay
// the program silicon ran): changing it means recording again.
inline std::vector<MbarOp> random_program(std::uint64_t seed, std::uint32_t index) {
  using K = MbarOpKind;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
  auto pick = [&](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
  auto chance = [&](std::uint32_t percent) { return pick(100) < percent; };

  std::vector<MbarOp> p;
  fuzz::RefMbarrier bar;
  auto init = [&] {
    const std::uint32_t count = chance(70) ? 1 + pick(4) : 1 + pick(32);
    bar.init(count);
    p.push_back({K::init, count});
  };
  auto bytes16 = [&] { return 16 * (1 + pick(kMaxCopyBytes / 16)); };

  init();
  const bool undefined_step = chance(6);  // this program takes one undefined step somewhere
  bool took_undefined = false;
  const std::uint32_t length = 4 + pick(kMaxOps - 8);
  while (p.size() < length) {
    // A completed phase nobody has observed: observe it first (the usage
    // rule), unless this is the program's undefined step.
    if (!bar.observed && !(undefined_step && !took_undefined && chance(30))) {
      p.push_back({chance(50) ? K::try_wait : K::test_wait, bar.completed_parity()});
      bar.observed = true;
      continue;
    }
    if (!bar.observed) took_undefined = true;  // the next arrival lands unobserved
    std::uint32_t r = pick(100);
    // All arrivals in (pending 0, bytes outstanding): another arrival would
    // over-arrive, which only the undefined step may do.
    if (bar.pending == 0 && r < 32 && !(undefined_step && !took_undefined && chance(4))) r = 32 + pick(68);
    if (r < 22) {  // arrive(c): within what is pending, or an over-arrival as the undefined step
      std::uint32_t c = bar.pending == 0 ? 1 : 1 + pick(bar.pending);
      if (undefined_step && !took_undefined && (bar.pending == 0 || chance(5))) {
        c = bar.pending + 1 + pick(3);
        took_undefined = true;
      }
      if (c > 32) c = 32;
      p.push_back({K::arrive, c});
      if (bar.over_arrives(c)) break;  // silicon traps here: nothing after it is observable
      bar.arrive(c);
    } else if (r < 32) {
      const std::uint32_t b = bytes16();
      p.push_back({K::arrive_expect_tx, b});
      if (bar.over_arrives(1)) {  // the undefined step: an over-arrival
        took_undefined = true;
        break;
      }
      bar.add_tx(b);
      bar.arrive(1);
    } else if (r < 42) {
      const std::uint32_t b = chance(50) ? bytes16() : 1 + pick(64);
      p.push_back({K::expect_tx, b});
      bar.add_tx(b);
      bar.complete_if_done();
    } else if (r < 52) {
      const std::uint32_t b = chance(50) ? bytes16() : 1 + pick(64);
      p.push_back({K::complete_tx, b});
      bar.add_tx(-std::int64_t{b});
      bar.complete_if_done();
    } else if (r < 65) {
      // A copy. With every arrival in and bytes still expected, one that
      // delivers more than expected completes the phase partway through on
      // silicon, as its bytes land in pieces (docs/silicon.md): only the
      // undefined step does that; otherwise the copy fits, or the bytes
      // come from the thread.
      std::uint32_t b = r < 60 ? bytes16() : kTmaCopyBytes;
      const bool overshoots = bar.pending == 0 && bar.tx > 0 && b > bar.tx;
      if (overshoots && undefined_step && !took_undefined && chance(20)) {
        took_undefined = true;
      } else if (overshoots && bar.tx >= 16) {
        b = 16 * (1 + pick(static_cast<std::uint32_t>(bar.tx / 16)));
        r = 55;  // a bulk copy: the TMA box is 64 bytes
      } else if (overshoots) {
        b = static_cast<std::uint32_t>(bar.tx);
        r = 45;  // the thread's complete_tx
      }
      p.push_back({r < 50 ? K::complete_tx : r < 60 ? K::bulk_copy : K::tma_copy, b});
      bar.add_tx(-std::int64_t{b});
      bar.complete_if_done();
    } else if (r < 94) {  // a wait: mostly for the current or the previous phase
      std::uint32_t parity = static_cast<std::uint32_t>(pick(2));
      p.push_back({chance(50) ? K::try_wait : K::test_wait, parity});
      // Success observes the completed phase it names.
      if (bar.passes(parity)) bar.observed = true;
    } else if (r < 97) {  // inval and init again
      p.push_back({K::inval, 0});
      init();
    } else if (undefined_step && !took_undefined) {  // re-init of a live barrier, without inval
      took_undefined = true;
      init();
    }
  }
  p.push_back({K::inval, 0});
  return p;
}

// What docs/hardware.md says silicon does with a program, as a third opinion
// beside silicon and the emulator, and to find the programs that will trap
// (an arrive whose count exceeds the pending arrivals), which silicon.cu
// runs apart. `observations`: one '1' / '0' per wait up to the trap;
// `trap_at`: the index of the trapping operation, or -1.
struct Reference {
  std::string observations;
  int trap_at = -1;
};
inline Reference reference(const std::vector<MbarOp>& p) {
  Reference r;
  fuzz::RefMbarrier bar;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const MbarOp& op = p[i];
    switch (op.kind) {
      case MbarOpKind::init: bar.init(op.arg); break;
      case MbarOpKind::inval: break;
      case MbarOpKind::arrive:
      case MbarOpKind::arrive_expect_tx: {
        const std::uint32_t count = op.kind == MbarOpKind::arrive ? op.arg : 1;
        if (op.kind == MbarOpKind::arrive_expect_tx) bar.add_tx(op.arg);
        if (bar.over_arrives(count)) {
          r.trap_at = static_cast<int>(i);
          return r;
        }
        bar.arrive(count);
        break;
      }
      case MbarOpKind::expect_tx:
        bar.add_tx(op.arg);
        bar.complete_if_done();
        break;
      case MbarOpKind::complete_tx:
      case MbarOpKind::bulk_copy:
      case MbarOpKind::tma_copy:
        bar.add_tx(-std::int64_t{op.arg});
        bar.complete_if_done();
        break;
      case MbarOpKind::try_wait:
      case MbarOpKind::test_wait: r.observations += bar.passes(op.arg) ? '1' : '0'; break;
    }
  }
  return r;
}

inline std::vector<MbarOp> program(std::uint64_t seed, std::uint32_t index) {
  return index < kNamedPrograms ? named_program(index) : random_program(seed, index);
}

}  // namespace wspipe::silicon
