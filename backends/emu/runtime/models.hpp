// Functional models of the tensor core (tcgen05.mma, dense .kind::f16 and
// .kind::f8f6f4, K-major operands in shared memory, f32 D in Tensor Memory)
// and of TMA tiled loads. Pure functions over byte arrays: the emulator
// decides when they run and checks the synchronization around them; these
// say what they read and write.
//
// Sources: PTX ISA §9.7.16 "TensorCore 5th Generation Family Instructions"
// (section numbers of PTX 9.0-9.2): 9.7.16.3 strides and canonical layouts,
// 9.7.16.4 matrix descriptors, 9.7.16.10.5 data path layouts; CUTLASS
// include/cute/atom/mma_traits_sm100{,_frag}.hpp for the CTA-pair split and
// the layouts the PTX gives only as figures.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tcgen05.hpp"
#include "core/tma.hpp"

namespace wspipe::emu::model {

// The byte offset in a CTA's shared-memory window of byte `kbyte` (0..31) of
// row `row` of a K-major operand (A: rows are M, B: rows are N) as
// tcgen05.mma reads it through descriptor `d`.
std::uint32_t operand_offset(const SmemDescriptor& d, std::uint32_t row, std::uint32_t kbyte);

// One tcgen05.mma as issued: kind, .cta_group, D's TMEM address, the two
// shared-memory descriptors, the instruction descriptor, enable-input-d.
struct MmaJob {
  MmaKind kind = MmaKind::f16;
  int cta_group = 1;
  std::uint32_t d_tmem = 0;
  std::uint64_t a_desc = 0, b_desc = 0;
  std::uint32_t idesc = 0;
  bool accumulate = false;
};

// The memory of one CTA an MMA touches.
struct CtaMem {
  const std::byte* smem;
  std::size_t smem_bytes;
  std::uint32_t* tmem;  // kTmemLanes * kTmemColumns cells, index lane * kTmemColumns + col
};

// Why `job` is not an MMA this model runs, or "" when it is: descriptor bits,
// an idesc invalid for the kind, the shape, MN-major operands, operand bytes
// outside [0, smem_bytes), D cells outside TMEM or misaligned in lanes.
std::string mma_check(const MmaJob& job, std::size_t smem_bytes);

// What a valid job touches in each CTA of its pair (cta = rank in the pair,
// 0 .. cta_group-1): the shared-memory bytes of A and B it reads (whole
// 16-byte chunks, adjacent ones merged, sorted by offset), and the TMEM
// rectangles of D it writes, which it also reads when job.accumulate.
struct MmaFootprint {
  struct Range {
    int cta;
    std::uint32_t offset, bytes;
  };
  std::vector<Range> smem_reads;
  struct Cells {
    int cta;
    std::uint32_t lane0, lanes, col0, cols;
  };
  std::vector<Cells> tmem;
};
MmaFootprint mma_footprint(const MmaJob& job);
// The same, remembered per thread and shared: the MMAs of every run issue
// the same few descriptor and D combinations.
std::shared_ptr<const MmaFootprint> shared_mma_footprint(const MmaJob& job);

// The values an accumulator D holds after a chain of MMAs that started
// with enable-input-d false: D as M x N floats, row-major in the MMA's own
// row and column order (not yet placed in TMEM cells), and the identity of
// the chain. The emulator keeps an MMA's D in this form (World's deferred
// accumulators) until something else touches its cells, and MmaMemo keeps
// each chain it has seen, so that a run repeating an earlier run's MMAs
// costs a lookup per MMA, not an update per cell of D.
struct Accum {
  std::uint64_t id = 0;        // unique while the process lives: the memo's key for this node's successors
  std::vector<std::byte> key;  // the last MMA's instruction and operand rows (gather)
  std::vector<float> d;        // M * N
};
using AccumRef = std::shared_ptr<const Accum>;

// The products of MMAs already computed, for reuse: every run of an
// exploration of a correct kernel issues the same MMAs on the same operand
// bytes. An entry is keyed by the instruction (kind, cta_group, idesc) and
// the exact bytes of every operand row the MMA reads, compared in full on
// a hit, and holds sum_k A[i][k] * B[j][k] in double for each element of D:
// a hit gives bit for bit what computing the MMA again would. It also keeps
// the accumulator chains (Accum) it has seen, under the same budget.
//
// Its size follows what it saves: it may hold kFloorBytes, plus
// kEarnFactor times the bytes of the entries that were asked for again, up
// to the budget. A single run, whose MMAs all differ, keeps no more than
// the floor; an exploration, whose runs repeat the MMAs, earns room for
// 16 times its first run's 32 MiB in its second run, which covers the
// working set of the largest catalogue kernels. A memo that refused
// entries during a whole run without finding one it kept from the runs
// before starts over at the next run (begin_run), so that a thread moving
// on to another kernel is not stuck with the last one's MMAs.
class MmaMemo {
 public:
  static constexpr std::size_t kFloorBytes = std::size_t{32} << 20;
  static constexpr std::size_t kEarnFactor = 16;

  explicit MmaMemo(std::size_t budget_bytes = 0) : budget_(budget_bytes) {}
  MmaMemo(const MmaMemo&) = delete;
  MmaMemo& operator=(const MmaMemo&) = delete;
  ~MmaMemo();
  void set_budget(std::size_t bytes);
  // The process's memory budget (RunOptions::max_memory_bytes, 0: none):
  // its entries are charged to it, and refused where they would take the
  // process past half of it (the rest is the runs').
  void set_memory_limit(std::size_t bytes) { memory_limit_ = bytes; }
  std::size_t budget() const { return budget_; }
  // A run begins: start over if the last run was refused entries and
  // found none of those kept before it.
  void begin_run();
  // What it may hold now: min(budget, kFloorBytes + kEarnFactor * earned()).
  std::size_t allowance() const { return std::min(budget_, kFloorBytes + kEarnFactor * earned_); }
  std::size_t earned() const { return earned_; }  // bytes of the entries found again
  std::size_t bytes() const { return bytes_; }
  std::size_t entries() const { return entries_; }
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

  // The products for `key`: doubles, or floats when every one
  // was exactly a float (half the memory; widened, the same values), or
  // both null.
  struct Products {
    const double* wide = nullptr;
    const float* narrow = nullptr;
  };
  Products find(const std::vector<std::byte>& key);
  // Keeps `products` for `key` if the allowance has room.
  void insert(const std::vector<std::byte>& key, const std::vector<double>& products);

  // The accumulator that follows `parent` (0: none, enable-input-d false)
  // by the MMA whose gathered rows are `key`, or null.
  AccumRef find_next(std::uint64_t parent, const std::vector<std::byte>& key);
  // Whether a link of `key_bytes` and `values` floats would be kept.
  bool has_room_for_link(std::size_t key_bytes, std::size_t values);
  // Keeps `acc` as that successor if the allowance has room.
  void insert_next(std::uint64_t parent, const AccumRef& acc);
  std::uint64_t chain_hits() const { return chain_hits_; }

 private:
  struct Entry {
    std::vector<std::byte> key;
    std::vector<double> wide;    // empty when narrow holds them
    std::vector<float> narrow;
    std::size_t size = 0;        // what it counts against the allowance
    bool found_again = false;
  };
  struct Link {
    AccumRef acc;
    std::size_t size = 0;
    bool found_again = false;
  };
  static std::size_t link_size(std::size_t key_bytes, std::size_t values) {
    return sizeof(Accum) + key_bytes + values * sizeof(float);
  }
  void clear();
  void earn(std::size_t size, bool& found_again);
  std::size_t memory_cap() const;     // what the memos may take the process to (0: no cap)
  bool fits(std::size_t size) const;  // the allowance and the memory budget have room for `size` more bytes
  bool admit(std::size_t size);       // fits, and charged to the memory budget
  std::size_t budget_ = 0, memory_limit_ = 0, bytes_ = 0, entries_ = 0, earned_ = 0;
  std::uint64_t hits_ = 0, misses_ = 0, chain_hits_ = 0, run_hits_ = 0, run_refused_ = 0;
  bool kept_before_run_ = false;
  std::unordered_map<std::uint64_t, std::vector<std::unique_ptr<Entry>>> map_;
  // Successors by (parent id, hash of the key).
  struct PairHash {
    std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& p) const {
      return p.first * 0x9e3779b97f4a7c15ull ^ p.second;
    }
  };
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, std::vector<Link>, PairHash> next_;
};

// Performs a job that passed mma_check against every CTA's smem_bytes:
// D = A * B^T (+ D), D[i][j] = sum_k A[i][k] * B[j][k], with the idesc's
// negations. `ctas` has cta_group entries, the pair in rank order. With
// cta_group 2, CTA r holds rows [r*M/2, (r+1)*M/2) of A and [r*N/2, (r+1)*N/2)
// of B, at the same descriptor addresses in its own shared memory, and
// receives D's rows [r*M/2, (r+1)*M/2), all N columns, in its own TMEM.
//
// Precision: per MMA, the K products and the old D of each element are summed
// in double and rounded to f32 once. The products of these inputs are exact in
// double; the PTX leaves the tensor core's internal order and width
// unspecified, so this is one faithful choice, accurate to f32 rounding.
//
// With a `memo` (budget above zero), the products of an MMA it has seen
// are reused rather than computed; the result is the same.
void mma_execute(const MmaJob& job, const CtaMem* ctas, MmaMemo* memo = nullptr);

// mma_execute without touching D's cells: the accumulator `job` leaves
// when D holds `parent`'s values (null when job.accumulate is false),
// found in `memo` or computed (and kept there if its allowance has room).
// accum_write(job, *result, ctas) then gives D's cells exactly what
// mma_execute would have: the same sums, rounded once per MMA. With
// `only_if_kept`, a link the memo neither has nor can keep is not
// computed: the result is null, and the caller updates D's cells instead.
AccumRef mma_accumulate(const MmaJob& job, const CtaMem* ctas, const Accum* parent, MmaMemo& memo,
                        bool only_if_kept = false);
// Writes `acc`'s values into the D cells of `job` (whose M, N, cta_group
// and d_tmem place them), the pair in rank order in `ctas`.
void accum_write(const MmaJob& job, const Accum& acc, const CtaMem* ctas);
// D's geometry: two jobs whose D covers the same cells in the same layout.
bool same_d(const MmaJob& a, const MmaJob& b);

// Why a TMA load of map `m` into shared memory at `dst_offset` cannot be
// issued, or "" when it can: the map itself (tensor_map_error), the
// destination's alignment (128 bytes; the swizzle's repeat, 256/512/1024
// bytes, when swizzled) and the box not fitting in [0, smem_bytes).
// `what` names the shared-memory operand in the message: a TMA store checks
// its source with the same rules.
std::string tma_check(const TensorMap& m, std::uint32_t dst_offset, std::size_t smem_bytes,
                      const char* what = "destination");

// Why the TMA unit would reject the box origin `c` of a load (store =
// false) or store of map `m`, as the H100 does (docs/silicon.md, "Which box
// origins the TMA accepts"; the PTX ISA states neither requirement, and the
// GPU traps with "an illegal instruction"): the innermost coordinate must
// be a multiple of 16 bytes (`rule` tma.coord-misaligned), and a store's
// coordinates must not be negative (tma.store-negative-coord; a load's may,
// and reads zeros there). Empty `rule` when the origin is accepted.
struct TmaCoordError {
  const char* rule = nullptr;
  std::string message;
};
TmaCoordError tma_coord_error(const TensorMap& m, const TmaCoords& c, bool store);

// Performs a checked TMA tiled load: the box at `c` (innermost dimension
// first) lands row-major in shared memory, innermost dimension contiguous,
// over [dst_offset, dst_offset + tma_box_bytes(m)), each 16-byte chunk moved by
// the swizzle of its absolute shared-memory address. Elements with any
// coordinate outside [0, dims) are written as zero bytes.
void tma_copy(const TensorMap& m, const TmaCoords& c, std::byte* smem, std::uint32_t dst_offset);

// A checked TMA tensor store (shared::cta -> global), the inverse of
// tma_copy with the same layout and swizzle, in its two steps (PTX
// "cp.async.bulk.wait_group": .read waits for the first only).
// tma_store_gather reads the box at [src_offset, src_offset +
// tma_box_bytes(m)) of shared memory into `box` (row-major, unswizzled);
// tma_store_scatter writes `box` to the tensor at `c`, skipping every
// element with a coordinate outside [0, dims) (PTX "Tensor Access Modes",
// tile mode: out-of-bound elements are not written to global memory),
// except along the innermost dimension at 16-byte granularity, as the H100
// does (docs/silicon.md): a 16-byte chunk that starts inside a row is
// written whole, so up to 15 bytes past the row's end (inside its stride,
// or past the tensor's last row) take the box's values. The tensor is the
// map's `global`, which a store writes through.
void tma_store_gather(const TensorMap& m, const std::byte* smem, std::uint32_t src_offset, std::byte* box);
void tma_store_scatter(const TensorMap& m, const TmaCoords& c, const std::byte* box);

}  // namespace wspipe::emu::model
