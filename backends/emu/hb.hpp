// The happens-before race checker's data (internal): vector clocks and the
// shadow state of each checked location (a TMEM cell, a 4-byte word of
// shared memory). DESIGN.md "Races".
//
// Clock components are the emulator's agents: each warp, each warp's
// tcgen05.ld and tcgen05.st agents (their accesses join the warp only at
// tcgen05.wait::ld / wait::st), and each CTA's TMA engine and tensor core
// (an async op carries its issuer's clock and completes on the engine's).
// Synchronisation builds the edges: an arrive releases its clock into the
// barrier's phase, a successful wait acquires the completed phase's clock;
// named and cluster barriers join all participants.
//
// Each location keeps its last write and its latest reads, one per
// component, up to kReads of them (FastTrack's epochs, without the full
// read vector: a fourth concurrent reader of one location replaces the
// oldest, which can hide a race with that reader; no kernel modelled here
// has more than two readers of a location between writes).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace wspipe::emu::detail {

using Clock = std::vector<std::uint32_t>;

inline void join(Clock& into, const Clock& from) {
  if (from.empty()) return;
  for (std::size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
}

// One access: the component that made it, that component's time then, and
// an index into the World's access descriptions (for the report). time 0
// means "none".
struct Access {
  std::uint32_t comp = 0;
  std::uint32_t time = 0;
  std::uint32_t info = 0;
};

// True when access `a` happens before an agent whose clock is `c`.
inline bool happens_before(const Access& a, const Clock& c) { return a.time == 0 || c[a.comp] >= a.time; }

struct Shadow {
  static constexpr std::size_t kReads = 3;
  Access write;
  std::array<Access, kReads> reads{};
  // shared memory: the last write was an ordinary store of a warp (generic
  // proxy), not TMA; the async proxy may read it only after that warp's
  // fence.proxy.async (checked by the World).
  bool write_generic = false;
};

// A write by `a` (with clock `c`): the earlier access it conflicts with, or
// nullptr after recording it.
inline const Access* shadow_write(Shadow& s, const Clock& c, const Access& a) {
  if (!happens_before(s.write, c)) return &s.write;
  for (const Access& r : s.reads)
    if (!happens_before(r, c)) return &r;
  s.write = a;
  s.reads = {};
  return nullptr;
}

// A read by `a`: the earlier write it conflicts with, or nullptr after
// recording it.
inline const Access* shadow_read(Shadow& s, const Clock& c, const Access& a) {
  if (!happens_before(s.write, c)) return &s.write;
  Access* slot = nullptr;
  for (Access& r : s.reads) {
    if (r.time != 0 && r.comp == a.comp) {
      slot = &r;
      break;
    }
    if (slot == nullptr && (r.time == 0 || happens_before(r, c))) slot = &r;  // free, or subsumed by this read
  }
  if (slot == nullptr) {
    std::rotate(s.reads.begin(), s.reads.begin() + 1, s.reads.end());
    slot = &s.reads.back();
  }
  *slot = a;
  return nullptr;
}

}  // namespace wspipe::emu::detail
