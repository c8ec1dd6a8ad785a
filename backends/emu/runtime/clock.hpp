// The happens-before race checker's data (internal): vector clocks and the
// shadow state of each checked location (a TMEM cell, a 4-byte word of
// shared memory). docs/emulator-models.md, "The happens-before race checker".
//
// Clock components are the emulator's agents, numbered within their
// cluster (nothing synchronises across clusters, so a clock needs only its
// cluster's agents, and a step's cost does not grow with the grid): each
// warp, and each warp's asynchronous agents: its tcgen05.ld and tcgen05.st
// (their accesses join the warp only at tcgen05.wait::ld / wait::st, which
// release the agent into the warp and start its next epoch), and its
// operations on the TMA engine, on the tensor core and on the CLC unit (an
// operation carries its issuer's clock at issue and is performed on its
// issuer's agent: the engines are shared by the CTA's warps, and one clock
// per engine would order one warp's operations after another warp's
// history). Synchronisation builds the edges: an arrive releases its clock
// into the barrier's phase, a successful wait acquires the completed
// phase's clock; named and cluster barriers join all participants.
//
// Each location keeps its last write and every read since that no later
// read is ordered after, as FastTrack does: one read epoch while the reads
// are totally ordered (the common case, and the cheap one), and a read set
// (FastTrack's read vector clock, kept as the concurrent reads themselves,
// for the report) once two of them are concurrent, until the next write.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <vector>

namespace wspipe::emu::detail {

using Clock = std::vector<std::uint32_t>;

// Clocks are per cluster (a cluster's agents synchronise only among
// themselves): every clock joined into another is of the same cluster, and
// of the same size.
inline void join(Clock& into, const Clock& from) {
  const std::size_t n = std::min(into.size(), from.size());
  for (std::size_t i = 0; i < n; ++i) into[i] = std::max(into[i], from[i]);
}

// One access: the component that made it, that component's time then, and
// an index into the World's access descriptions (for the report). time 0
// means "none".
struct Access {
  std::uint32_t comp = 0;
  std::uint32_t slot = 0;  // the component's index in its cluster's clocks
  std::uint32_t time = 0;
  std::uint32_t info = 0;
  bool operator==(const Access&) const = default;
};

// True when access `a` happens before an agent whose clock is `c`.
inline bool happens_before(const Access& a, const Clock& c) { return a.time == 0 || c[a.slot] >= a.time; }

struct Shadow {
  Access write;
  // The last read, while the reads since the write are totally ordered
  // (time 0: none, or `readers` holds them).
  Access read;
  // 0, or the handle of the set of concurrent reads in the table's
  // ReadSets (then `read` is unused).
  std::uint32_t readers = 0;
  // shared memory: the last write was an ordinary store of a warp (generic
  // proxy), not TMA; the async proxy may read it only after that warp's
  // fence.proxy.async (checked by the World).
  bool write_generic = false;
  bool operator==(const Shadow&) const = default;
};

// The read sets of a table's shadows: each an antichain of reads (no read
// of it ordered after another, so at most one per component), referenced
// by the shadows that hold its handle (a uniform block's shadow, and each
// of the copies a split makes). A set is changed in place while one shadow
// holds it and copied on change otherwise.
class ReadSets {
 public:
  std::span<const Access> reads(std::uint32_t h) const { return sets_[h].reads; }
  // A new set of the concurrent reads `a` and `b`, held once.
  std::uint32_t make(const Access& a, const Access& b) {
    const std::uint32_t h = alloc();
    sets_[h].reads.assign({a, b});
    return h;
  }
  void retain(std::uint32_t h, std::uint32_t n) { sets_[h].refs += n; }
  void release(std::uint32_t h, std::uint32_t n = 1) {
    if ((sets_[h].refs -= n) == 0) {
      sets_[h].reads.clear();
      free_.push_back(h);
    }
  }
  // Read `a` (clock `c`) added to set `h`, which drops the reads `a` is
  // ordered after: the set's new handle (`h` itself unless it was shared),
  // or 0 when `a` alone is left (the set released: the caller keeps `a` as
  // its read epoch).
  std::uint32_t add(std::uint32_t h, const Clock& c, const Access& a);
  // Every set released; their storage kept.
  void clear() {
    free_.clear();
    for (std::uint32_t h = static_cast<std::uint32_t>(sets_.size()); h-- > 1;) {
      sets_[h].reads.clear();
      sets_[h].refs = 0;
      free_.push_back(h);
    }
  }
  // f(Access&) for every read of every set, released ones too.
  template <class F>
  void for_each_access(F&& f) {
    for (Set& x : sets_)
      for (Access& a : x.reads) f(a);
  }
  std::size_t storage_bytes() const {
    std::size_t n = sets_.capacity() * sizeof(Set) + free_.capacity() * sizeof(std::uint32_t);
    for (const Set& x : sets_) n += x.reads.capacity() * sizeof(Access);
    return n;
  }

 private:
  struct Set {
    std::vector<Access> reads;
    std::uint32_t refs = 0;
  };
  std::uint32_t alloc() {
    std::uint32_t h;
    if (!free_.empty()) {
      h = free_.back();
      free_.pop_back();
    } else {
      h = static_cast<std::uint32_t>(sets_.size());
      sets_.emplace_back();
    }
    sets_[h].refs = 1;
    return h;
  }
  std::vector<Set> sets_ = std::vector<Set>(1);  // [0]: no set
  std::vector<std::uint32_t> free_;
};

inline std::uint32_t ReadSets::add(std::uint32_t h, const Clock& c, const Access& a) {
  const auto kept = [&c](const Access& r) { return !happens_before(r, c); };
  Set* set = &sets_[h];
  if (std::none_of(set->reads.begin(), set->reads.end(), kept)) {
    release(h);
    return 0;
  }
  if (set->refs > 1) {
    const std::uint32_t copy = alloc();  // (may move the sets)
    set = &sets_[h];
    --set->refs;
    std::copy_if(set->reads.begin(), set->reads.end(), std::back_inserter(sets_[copy].reads), kept);
    sets_[copy].reads.push_back(a);
    return copy;
  }
  std::erase_if(set->reads, [&](const Access& r) { return !kept(r); });
  set->reads.push_back(a);
  return h;
}

// The first access in `s` that is not ordered before an agent with clock
// `c` (the write first, then the reads), or nullptr.
inline const Access* first_unordered(const Shadow& s, const ReadSets& sets, const Clock& c) {
  if (!happens_before(s.write, c)) return &s.write;
  if (s.readers == 0) return happens_before(s.read, c) ? nullptr : &s.read;
  for (const Access& r : sets.reads(s.readers))
    if (!happens_before(r, c)) return &r;
  return nullptr;
}

// A write by `a` (with clock `c`): the earlier access it conflicts with, or
// nullptr after recording it.
inline const Access* shadow_write(Shadow& s, ReadSets& sets, const Clock& c, const Access& a) {
  if (const Access* other = first_unordered(s, sets, c)) return other;
  s.write = a;
  s.read = {};
  if (s.readers != 0) {
    sets.release(s.readers);
    s.readers = 0;
  }
  return nullptr;
}

// A read by `a`: the earlier write it conflicts with, or nullptr after
// recording it.
inline const Access* shadow_read(Shadow& s, ReadSets& sets, const Clock& c, const Access& a) {
  if (!happens_before(s.write, c)) return &s.write;
  if (s.readers == 0) {
    if (happens_before(s.read, c)) {  // none, or ordered before this one (the same agent's included)
      s.read = a;
      return nullptr;
    }
    s.readers = sets.make(s.read, a);
    s.read = {};
    return nullptr;
  }
  s.readers = sets.add(s.readers, c, a);
  if (s.readers == 0) s.read = a;
  return nullptr;
}

// The shadows of `size` locations (TMEM cells, shared-memory words), kept
// in blocks of kBlock consecutive locations. A block is one Shadow while
// all its locations are in the same state, and kBlock of them once an
// access covers part of it; an access that covers a whole block of one
// state is checked and recorded once. The usual accesses cover whole
// blocks (a TMA tile, the 16-byte chunks an MMA reads, the columns an MMA
// writes in each lane), so a tile costs a few checks, not one per word.
//
// Exactly the per-location semantics: an access visits its locations in
// ascending order, and `visit(shadow, location)` (check, record, or report
// and return false to stop) runs once for each location, except that for a
// uniform block it covers wholly it runs once, at the block's first
// location, for all of them: they are in the same state, so each would get
// the same answer and end in the same state. An access of several ranges
// (an MMA's D, a tcgen05.ld's cells: a run of columns per lane) is one
// access_range per range.
template <std::uint32_t kBlock>
class ShadowTable {
 public:
  void reset(std::uint32_t size) {
    clear();
    const std::uint32_t blocks = (size + kBlock - 1) / kBlock;
    uniform_.assign(blocks, Shadow{});
    split_.assign(blocks, -1);
  }
  bool empty() const { return uniform_.empty(); }
  // The bytes its storage holds (kept by clear()).
  std::size_t storage_bytes() const {
    return uniform_.capacity() * sizeof(Shadow) + split_.capacity() * sizeof(std::int32_t) +
           cells_.capacity() * sizeof(Shadow) + free_.capacity() * sizeof(std::size_t) + read_sets_.storage_bytes();
  }
  // Back to empty(), keeping the storage for the next reset.
  void clear() {
    uniform_.clear();
    split_.clear();
    cells_.clear();
    free_.clear();
    read_sets_.clear();
  }
  // f(Access&) for every access the table holds, in shadows no longer in
  // use too (the race checker renumbers its access records: World::
  // collect_access_infos).
  template <class F>
  void for_each_access(F&& f) {
    for (Shadow& s : uniform_) {
      f(s.write);
      f(s.read);
    }
    for (Shadow& s : cells_) {
      f(s.write);
      f(s.read);
    }
    read_sets_.for_each_access(f);
  }
  // The read sets its shadows' handles name (shadow_read, shadow_write).
  ReadSets& read_sets() { return read_sets_; }
  const ReadSets& read_sets() const { return read_sets_; }

  const Shadow& at(std::uint32_t i) const {
    const std::int32_t sp = split_[i / kBlock];
    return sp < 0 ? uniform_[i / kBlock] : cells_[static_cast<std::size_t>(sp) + i % kBlock];
  }

  // The first location in [first, last) whose shadow satisfies `pred`, or
  // `last`: read only, a uniform block asked once.
  template <class Pred>
  std::uint32_t find_first(std::uint32_t first, std::uint32_t last, Pred&& pred) const {
    for (std::uint32_t i = first; i < last;) {
      const std::uint32_t b = i / kBlock;
      const std::uint32_t block_end = std::min(last, (b + 1) * kBlock);
      if (split_[b] < 0) {
        if (pred(uniform_[b])) return i;
      } else {
        for (std::uint32_t j = i; j < block_end; ++j)
          if (pred(cells_[static_cast<std::size_t>(split_[b]) + j % kBlock])) return j;
      }
      i = block_end;
    }
    return last;
  }

  // An access to [first, last), in ascending order. False when a visit
  // returned false.
  template <class Visit>
  bool access_range(std::uint32_t first, std::uint32_t last, Visit&& visit) {
    for (std::uint32_t i = first; i < last;) {
      const std::uint32_t b = i / kBlock;
      const std::uint32_t block_end = std::min(last, (b + 1) * kBlock);
      if (split_[b] < 0 && i % kBlock == 0 && block_end == (b + 1) * kBlock) {
        if (!visit(uniform_[b], i)) return false;
      } else {
        split(b);
        for (std::uint32_t j = i; j < block_end; ++j)
          if (!visit(cells_[static_cast<std::size_t>(split_[b]) + j % kBlock], j)) return false;
        if (block_end - i == kBlock) try_merge(b);
      }
      i = block_end;
    }
    return true;
  }

 private:
  // A uniform block becomes kBlock copies of its shadow.
  void split(std::uint32_t b) {
    if (split_[b] >= 0) return;
    std::size_t at;
    if (!free_.empty()) {
      at = free_.back();
      free_.pop_back();
    } else {
      at = cells_.size();
      cells_.resize(cells_.size() + kBlock);
    }
    std::fill_n(cells_.begin() + static_cast<std::ptrdiff_t>(at), kBlock, uniform_[b]);
    if (uniform_[b].readers != 0) read_sets_.retain(uniform_[b].readers, kBlock - 1);  // kBlock holders, not one
    split_[b] = static_cast<std::int32_t>(at);
  }
  // A split block whose shadows are all equal again becomes uniform.
  void try_merge(std::uint32_t b) {
    const auto at = static_cast<std::size_t>(split_[b]);
    for (std::uint32_t j = 1; j < kBlock; ++j)
      if (!(cells_[at + j] == cells_[at])) return;
    uniform_[b] = cells_[at];
    if (uniform_[b].readers != 0) read_sets_.release(uniform_[b].readers, kBlock - 1);  // one holder again
    free_.push_back(at);
    split_[b] = -1;
  }
  std::vector<Shadow> uniform_;     // per block: its shadow while uniform
  std::vector<std::int32_t> split_; // per block: -1, or where its kBlock shadows start in cells_
  std::vector<Shadow> cells_;
  std::vector<std::size_t> free_;   // blocks of cells_ no longer used
  ReadSets read_sets_;
};

// Shared memory's shadow blocks: 32 bytes. TMA writes whole tiles, and an MMA
// reads 32 bytes of K per operand row, which a swizzled layout keeps
// together. (TMEM's: kTmemShadowBlock, tmem.hpp.)
constexpr std::uint32_t kSmemShadowBlock = 32;

}  // namespace wspipe::emu::detail
