#include "backends/emu/runtime/models.hpp"
#include "backends/emu/runtime/memory.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>
#include <unordered_map>
#include <utility>

namespace wspipe::emu::model {
namespace {

// Bytes of each operand row one MMA reads: K = 16 elements of 16 bits
// (.kind::f16) or 32 of 8 bits (.kind::f8f6f4).
constexpr std::uint32_t kRowBytes = 32;

// Shared-memory descriptor bits PTX Table 40 reserves (14-15, 30-31) or
// fixes to zero (53-60).
constexpr std::uint64_t kSmemDescZeroBits =
    (std::uint64_t{3} << 14) | (std::uint64_t{3} << 30) | (std::uint64_t{0xff} << 53);

struct Decoded {
  SmemDescriptor a, b;
  InstrDescriptor i;
};

Decoded decode(const MmaJob& job) {
  return {SmemDescriptor::decode(job.a_desc).desc, SmemDescriptor::decode(job.b_desc).desc,
          InstrDescriptor::decode(job.idesc, job.kind).desc};
}

// M = 128 with cta_group::2 is the one layout that folds D's columns.
bool layout_b(const MmaJob& job, const InstrDescriptor& i) { return job.cta_group == 2 && i.m == 128; }

// Where element (row, col) of D lives, row in [0, M) of the whole MMA. PTX
// "Data Path Layout Organization" (9.7.16.10.5) gives the layouts as figures;
// this follows CUTLASS's encoding of them, UMMA::tmem_frg in
// include/cute/atom/mma_traits_sm100_frag.hpp:
//   M = 128, cta_group::1, Layout D: row i -> lane i.
//   M = 64,  cta_group::1, Layout F: half of each 32-lane quarter, at the lane
//            offset (0 or 16) of d_tmem: row r -> lane (r/16)*32 + r%16.
//   M = 256, cta_group::2, Layout A: each CTA's 128 rows -> lanes 0..127.
//   M = 128, cta_group::2, Layout B: each CTA's 64 rows -> lanes 0..63 for
//            D's first N/2 columns and lanes 64..127 for the rest, so a CTA
//            uses N/2 columns.
// The lane offset of d_tmem is 0 in all but Layout F (mma_check).
struct DPlace {
  int cta;
  std::uint32_t lane, col;
};
DPlace d_place(const MmaJob& job, const InstrDescriptor& i, std::uint32_t row, std::uint32_t col) {
  const std::uint32_t lane0 = tmem_lane(job.d_tmem);
  const std::uint32_t col0 = tmem_col(job.d_tmem);
  if (job.cta_group == 1)
    return {0, i.m == 64 ? (row / 16) * 32 + row % 16 + lane0 : row + lane0, col0 + col};
  const std::uint32_t rows = i.m / 2;
  const int cta = static_cast<int>(row / rows);
  if (!layout_b(job, i)) return {cta, row % rows + lane0, col0 + col};
  const std::uint32_t half = i.n / 2;
  return {cta, row % rows + 64 * (col / half) + lane0, col0 + col % half};
}

// operand_offset (its layouts are described there), inlined into the loops
// that ask it for every row of every MMA.
inline std::uint32_t offset_of(const SmemDescriptor& d, std::uint32_t row, std::uint32_t kbyte) {
  const std::uint32_t group = d.start + (row / 8) * d.sbo;
  if (d.swizzle == SmemSwizzle::none) return group + (kbyte / 16) * d.lbo + (row % 8) * 16 + kbyte % 16;
  return swizzle_address(d.swizzle, group + (row % 8) * swizzle_bytes(d.swizzle) + kbyte);
}

// Offsets of the 16-byte chunks of A and B one CTA reads, merged into ranges.
std::vector<std::pair<std::uint32_t, std::uint32_t>> compute_operand_ranges(const MmaJob& job, const Decoded& d) {
  std::vector<std::uint32_t> chunks;
  const auto add = [&](const SmemDescriptor& desc, std::uint32_t rows) {
    for (std::uint32_t row = 0; row < rows; ++row)
      for (std::uint32_t kbyte = 0; kbyte < kRowBytes; kbyte += 16) chunks.push_back(offset_of(desc, row, kbyte));
  };
  const auto g = static_cast<std::uint32_t>(job.cta_group);
  add(d.a, d.i.m / g);
  add(d.b, d.i.n / g);
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
  for (std::uint32_t c : chunks) {
    if (!ranges.empty() && ranges.back().first + ranges.back().second == c)
      ranges.back().second += 16;
    else
      ranges.emplace_back(c, 16);
  }
  return ranges;
}

// An MMA's geometry, as the per-thread caches below key it: its
// descriptors, shape and D address (0 where the cached value does not
// depend on D).
struct Geometry {
  std::uint64_t a, b;
  std::uint32_t idesc, d_tmem;
  int cta_group;
  MmaKind kind;
  bool operator==(const Geometry&) const = default;
  struct Hash {
    std::size_t operator()(const Geometry& k) const {
      return std::hash<std::uint64_t>{}(k.a * 0x9e3779b97f4a7c15ull ^ k.b ^ (std::uint64_t{k.idesc} << 3) ^
                                        (std::uint64_t{k.d_tmem} << 21) ^ static_cast<std::uint64_t>(k.cta_group) ^
                                        (static_cast<std::uint64_t>(k.kind) << 40));
    }
  };
};

// operand_ranges, remembered per thread: mma_check and mma_footprint ask
// for the same few descriptor combinations at every MMA of every run.
const std::vector<std::pair<std::uint32_t, std::uint32_t>>& operand_ranges(const MmaJob& job, const Decoded& d) {
  thread_local std::unordered_map<Geometry, std::vector<std::pair<std::uint32_t, std::uint32_t>>, Geometry::Hash>
      known;
  const Geometry key{job.a_desc, job.b_desc, job.idesc, 0, job.cta_group, job.kind};
  if (auto it = known.find(key); it != known.end()) return it->second;
  if (known.size() >= 4096) known.clear();
  return known.emplace(key, compute_operand_ranges(job, d)).first->second;
}

}  // namespace

// PTX "Canonical Layouts" (9.7.16.3.3), K-major, in bytes (T elements = 16
// bytes; one MMA reads 2 such core-matrix columns, 32 bytes, per row):
//   no swizzle     ((8,m),(T,2k)):((1T,SBO),(1,LBO)): core matrices of 8 rows
//                  x 16 bytes, rows 16 bytes apart; SBO steps 8-row groups,
//                  LBO steps core matrices along K.
//   W-byte swizzle ((8,m),(T,2k)):((W/16 T,SBO),(1,T)): rows W bytes apart,
//                  K contiguous within a row; SBO steps 8-row groups; LBO is
//                  unused (9.7.16.3.1.1). Then Swizzle<log2(W/16),4,3>.
// The swizzle acts on absolute address bits, as TMA's does: with the pattern
// starting at its repeat (base offset 0), a start advanced by 32 bytes within
// a row reads the next K slice of a TMA-written tile.
std::uint32_t operand_offset(const SmemDescriptor& d, std::uint32_t row, std::uint32_t kbyte) {
  return offset_of(d, row, kbyte);
}

std::string mma_check(const MmaJob& job, std::size_t smem_bytes) {
  for (const auto& [name, bits] : {std::pair{"A", job.a_desc}, std::pair{"B", job.b_desc}}) {
    const auto d = SmemDescriptor::decode(bits);
    const std::string what = std::string(name) + " descriptor: ";
    if (!d.valid)
      return what + "bits 46-48 must be 0b001 and the swizzle 0, 2, 4 or 6 (1, 128B with 32B atoms, is not modelled)";
    if (bits & kSmemDescZeroBits) return what + "bits 14-15, 30-31 and 53-60 must be 0";
    if (d.desc.lbo_mode) return what + "the absolute leading-dimension mode (bit 52) is sm_103a only";
    if (d.desc.base_offset != 0)
      return what + "a non-zero base offset (a swizzle pattern not starting at its repeat) is not modelled";
  }
  const auto idesc = InstrDescriptor::decode(job.idesc, job.kind);
  if (!idesc.valid)
    return std::string("instruction descriptor: not a dense .kind::") + to_string(job.kind) +
           " MMA with f32 D (sparsity, saturate, D format, input formats, reserved bits or .ws shift)";
  const InstrDescriptor& i = idesc.desc;
  if (i.a_mn_major || i.b_mn_major) return "MN-major operands are not modelled";
  if (const char* e = mma_shape_error(job.cta_group, i.m, i.n)) return e;

  const std::uint32_t lane0 = tmem_lane(job.d_tmem);
  if (job.cta_group == 1 && i.m == 64) {
    if (lane0 != 0 && lane0 != 16) return "D's lane must be 0 or 16 for M = 64 (data path Layout F)";
  } else if (lane0 != 0) {
    return "D's lane must be 0 for M = " + std::to_string(i.m) + " with cta_group " + std::to_string(job.cta_group);
  }
  const std::uint32_t cols = layout_b(job, i) ? i.n / 2 : i.n;
  if (tmem_col(job.d_tmem) + cols > kTmemColumns)
    return "D's columns [" + std::to_string(tmem_col(job.d_tmem)) + ", " +
           std::to_string(tmem_col(job.d_tmem) + cols) + ") exceed the 512 of Tensor Memory";

  for (const auto& [offset, bytes] : operand_ranges(job, decode(job)))
    if (std::size_t{offset} + bytes > smem_bytes)
      return "operand bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
             ") lie outside shared memory (" + std::to_string(smem_bytes) + " bytes)";
  return {};
}

MmaFootprint mma_footprint(const MmaJob& job) {
  const Decoded d = decode(job);
  MmaFootprint f;
  const auto ranges = operand_ranges(job, d);
  for (int cta = 0; cta < job.cta_group; ++cta)
    for (const auto& [offset, bytes] : ranges) f.smem_reads.push_back({cta, offset, bytes});

  const std::uint32_t lane0 = tmem_lane(job.d_tmem);
  const std::uint32_t col0 = tmem_col(job.d_tmem);
  if (job.cta_group == 1 && d.i.m == 64) {
    for (std::uint32_t quarter = 0; quarter < 4; ++quarter) f.tmem.push_back({0, 32 * quarter + lane0, 16, col0, d.i.n});
  } else {
    const std::uint32_t cols = layout_b(job, d.i) ? d.i.n / 2 : d.i.n;
    for (int cta = 0; cta < job.cta_group; ++cta) f.tmem.push_back({cta, lane0, kTmemLanes, col0, cols});
  }
  return f;
}

std::shared_ptr<const MmaFootprint> shared_mma_footprint(const MmaJob& job) {
  thread_local std::unordered_map<Geometry, std::shared_ptr<const MmaFootprint>, Geometry::Hash> known;
  const Geometry key{job.a_desc, job.b_desc, job.idesc, job.d_tmem, job.cta_group, job.kind};
  if (auto it = known.find(key); it != known.end()) return it->second;
  if (known.size() >= 4096) known.clear();  // the pointers handed out stay valid
  return known.emplace(key, std::make_shared<const MmaFootprint>(mma_footprint(job))).first->second;
}

namespace {

using V4f = float __attribute__((vector_size(16)));
using V4d = double __attribute__((vector_size(32)));

// A decoder from an operand's bit patterns to floats (exact for every
// tcgen05.mma input type): a table for the 8-bit formats, the bf16 shift,
// the f16 decoder.
struct Decoder {
  ElemType t;
  float table[256];
  explicit Decoder(ElemType type) : t(type), table{} {
    if (elem_bytes(t) != 1) return;
    for (std::uint32_t v = 0; v < 256; ++v) {
      const auto byte = static_cast<std::uint8_t>(v);
      table[v] = t == ElemType::e4m3 ? e4m3_to_float(byte) : e5m2_to_float(byte);
    }
  }
  // The `count` elements at `p` into `out`, negated if asked.
  void decode(const std::byte* p, std::uint32_t count, bool negate, float* out) const {
    if (elem_bytes(t) == 1) {
      for (std::uint32_t i = 0; i < count; ++i) out[i] = table[static_cast<std::uint8_t>(p[i])];
    } else {
      for (std::uint32_t i = 0; i < count; ++i) {
        std::uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = t == ElemType::bf16 ? bf16_to_float(v) : f16_to_float(v);
      }
    }
    if (negate)
      for (std::uint32_t i = 0; i < count; ++i) out[i] = -out[i];
  }
};

const Decoder& decoder(ElemType t) {
  static const Decoder f16(ElemType::f16), bf16(ElemType::bf16), e4m3(ElemType::e4m3), e5m2(ElemType::e5m2);
  switch (t) {
    case ElemType::bf16: return bf16;
    case ElemType::e4m3: return e4m3;
    case ElemType::e5m2: return e5m2;
    default: return f16;  // mma_check admits f16, bf16, e4m3 and e5m2 only
  }
}

// FNV-style over 8-byte words, four independent lanes.
std::uint64_t hash_bytes(const std::byte* p, std::size_t n) {
  std::uint64_t h[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull, 0x27d4eb2f165667c5ull};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) {
      std::uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * 0x100000001b3ull;
      h[l] ^= h[l] >> 29;
    }
  std::uint64_t r = h[0] ^ (h[1] * 3) ^ (h[2] * 5) ^ (h[3] * 7) ^ n;
  for (; i < n; ++i) r = (r ^ static_cast<std::uint8_t>(p[i])) * 0x100000001b3ull;
  return r ^ (r >> 31);
}

// The operand rows one MMA reads, in the order the model consumes them: a
// 16-byte header (kind, cta_group, idesc), then A's M rows and B's N rows,
// each the 32 bytes of its K slice, from the CTA of the pair that holds it.
void gather(const MmaJob& job, const SmemDescriptor& a, const SmemDescriptor& b, const InstrDescriptor& i,
            const CtaMem* ctas, std::vector<std::byte>& out) {
  const auto g = static_cast<std::uint32_t>(job.cta_group);
  out.resize(16 + std::size_t{i.m + i.n} * kRowBytes);
  const std::uint32_t header[4] = {static_cast<std::uint32_t>(job.kind), g, job.idesc, 0};
  std::memcpy(out.data(), header, sizeof header);
  std::byte* dst = out.data() + 16;
  const auto rows = [&](SmemDescriptor desc, std::uint32_t count) {  // (desc a copy: the byte copies could alias it)
    const std::uint32_t per_cta = count / g;
    for (std::uint32_t cta = 0; cta < g; ++cta) {
      const std::byte* smem = ctas[cta].smem;
      for (std::uint32_t row = 0; row < per_cta; ++row, dst += kRowBytes) {
        std::memcpy(dst, smem + offset_of(desc, row, 0), 16);
        std::memcpy(dst + 16, smem + offset_of(desc, row, 16), 16);
      }
    }
  };
  rows(a, i.m);
  rows(b, i.n);
}

// products[row * N + col] = sum over kk of A[row][kk] * B[col][kk], in
// double in kk order from 0 (the products are exact in double). Eight
// columns at a time, each its own sum: vectorisable without reordering any.
void compute_products(const std::vector<std::byte>& rows, const InstrDescriptor& i, std::uint32_t k,
                      std::vector<double>& products) {
  const std::uint32_t m = i.m, n = i.n;
  std::vector<float> a(std::size_t{m} * k), b(std::size_t{n} * k);
  const std::byte* p = rows.data() + 16;
  for (std::uint32_t r = 0; r < m; ++r, p += kRowBytes) decoder(i.a).decode(p, k, i.negate_a, &a[std::size_t{r} * k]);
  for (std::uint32_t r = 0; r < n; ++r, p += kRowBytes) decoder(i.b).decode(p, k, i.negate_b, &b[std::size_t{r} * k]);
  std::vector<double> bt(std::size_t{k} * n);  // B transposed: bt[kk * N + col]
  for (std::uint32_t col = 0; col < n; ++col)
    for (std::uint32_t kk = 0; kk < k; ++kk) bt[std::size_t{kk} * n + col] = b[std::size_t{col} * k + kk];
  products.assign(std::size_t{m} * n, 0.0);
  for (std::uint32_t row = 0; row < m; ++row) {
    double* out = &products[std::size_t{row} * n];
    const float* ar = &a[std::size_t{row} * k];
    for (std::uint32_t col = 0; col < n; col += 8) {  // N is a multiple of 8 (mma_shape_error)
      double acc[8] = {};
      for (std::uint32_t kk = 0; kk < k; ++kk) {
        const double av = ar[kk];
        const double* bk = &bt[std::size_t{kk} * n + col];
        for (int c = 0; c < 8; ++c) acc[c] += av * bk[c];
      }
      for (int c = 0; c < 8; ++c) out[col + c] = acc[c];
    }
  }
}

}  // namespace

void MmaMemo::set_budget(std::size_t bytes) {
  budget_ = bytes;
  if (bytes_ > budget_) clear();
}

MmaMemo::~MmaMemo() { detail::release_memory(bytes_); }

void MmaMemo::clear() {
  map_.clear();
  next_.clear();
  detail::release_memory(bytes_);
  bytes_ = entries_ = earned_ = 0;
}

void MmaMemo::begin_run() {
  if (run_refused_ > 0 && run_hits_ == 0 && kept_before_run_) clear();
  run_hits_ = run_refused_ = 0;
  kept_before_run_ = entries_ > 0;
}

// The first time an entry is found again, its bytes count as earned.
void MmaMemo::earn(std::size_t size, bool& found_again) {
  ++run_hits_;
  if (found_again) return;
  found_again = true;
  earned_ += size;
}

MmaMemo::Products MmaMemo::find(const std::vector<std::byte>& key) {
  const auto it = map_.find(hash_bytes(key.data(), key.size()));
  if (it != map_.end())
    for (const auto& e : it->second)
      if (e->key.size() == key.size() && std::memcmp(e->key.data(), key.data(), key.size()) == 0) {
        ++hits_;
        earn(e->size, e->found_again);
        if (e->wide.empty()) return {.narrow = e->narrow.data()};
        return {.wide = e->wide.data()};
      }
  ++misses_;
  return {};
}

// A cache must not starve the runs it serves: the memos stop at half the
// memory budget, with the runs' own charges counted.
std::size_t MmaMemo::memory_cap() const {
  return memory_limit_ == 0 ? 0 : std::max<std::size_t>(memory_limit_ / 2, 1);
}

bool MmaMemo::fits(std::size_t size) const {
  return bytes_ + size <= allowance() && (memory_cap() == 0 || memory_charged() + size <= memory_cap());
}

bool MmaMemo::admit(std::size_t size) {
  if (bytes_ + size <= allowance() && detail::try_charge_memory(size, memory_cap())) return true;
  ++run_refused_;
  return false;
}

void MmaMemo::insert(const std::vector<std::byte>& key, const std::vector<double>& products) {
  const bool narrow = std::all_of(products.begin(), products.end(),
                                  [](double x) { return static_cast<double>(static_cast<float>(x)) == x; });
  const std::size_t size =
      sizeof(Entry) + key.size() + products.size() * (narrow ? sizeof(float) : sizeof(double));
  if (!admit(size)) return;
  auto e = std::make_unique<Entry>();
  e->key = key;
  e->size = size;
  if (narrow)
    e->narrow.assign(products.begin(), products.end());
  else
    e->wide = products;
  map_[hash_bytes(key.data(), key.size())].push_back(std::move(e));
  bytes_ += size;
  ++entries_;
}

AccumRef MmaMemo::find_next(std::uint64_t parent, const std::vector<std::byte>& key) {
  const auto it = next_.find({parent, hash_bytes(key.data(), key.size())});
  if (it != next_.end())
    for (Link& l : it->second)
      if (l.acc->key.size() == key.size() && std::memcmp(l.acc->key.data(), key.data(), key.size()) == 0) {
        ++chain_hits_;
        earn(l.size, l.found_again);
        return l.acc;
      }
  return nullptr;
}

bool MmaMemo::has_room_for_link(std::size_t key_bytes, std::size_t values) {
  if (fits(link_size(key_bytes, values))) return true;
  ++run_refused_;
  return false;
}

void MmaMemo::insert_next(std::uint64_t parent, const AccumRef& acc) {
  const std::size_t size = link_size(acc->key.size(), acc->d.size());
  if (!admit(size)) return;
  next_[{parent, hash_bytes(acc->key.data(), acc->key.size())}].push_back({.acc = acc, .size = size});
  bytes_ += size;
  ++entries_;
}

namespace {

// D's cells for `job`, row by row: `row_op(cells, at, count)` gets each run
// of `count` consecutive cells in one TMEM lane and the index in MMA
// row-major order (row * N + col) of its first element. A row is one run,
// or two in Layout B (its first N/2 columns in one lane, the rest 64 lanes
// down).
template <class RowOp>
void for_each_d_run(const MmaJob& job, const InstrDescriptor& i, const CtaMem* ctas, RowOp&& row_op) {
  const std::uint32_t m = i.m, n = i.n;
  const std::uint32_t segment = layout_b(job, i) ? n / 2 : n;
  for (std::uint32_t row = 0; row < m; ++row)
    for (std::uint32_t col0 = 0; col0 < n; col0 += segment) {
      const DPlace p = d_place(job, i, row, col0);
      row_op(ctas[p.cta].tmem + std::size_t{p.lane} * kTmemColumns + p.col, std::size_t{row} * n + col0, segment);
    }
}

std::atomic<std::uint64_t> next_accum_id{1};

}  // namespace

void mma_execute(const MmaJob& job, const CtaMem* ctas, MmaMemo* memo) {
  const Decoded d = decode(job);
  const std::uint32_t k = mma_k(job.kind);

  thread_local std::vector<std::byte> rows;
  thread_local std::vector<double> computed;
  gather(job, d.a, d.b, d.i, ctas, rows);
  if (memo != nullptr && memo->budget() == 0) memo = nullptr;
  MmaMemo::Products products;
  if (memo != nullptr) products = memo->find(rows);
  if (products.wide == nullptr && products.narrow == nullptr) {
    compute_products(rows, d.i, k, computed);
    if (memo != nullptr) memo->insert(rows, computed);  // a miss hashes the rows again: rare
    products.wide = computed.data();
  }

  for_each_d_run(job, d.i, ctas, [&](std::uint32_t* cells, std::size_t at, std::uint32_t count) {
    // Four cells at a time (a run is a multiple of 8 columns), with the
    // compilers' portable vector types: the same conversions and additions
    // as one cell at a time.
    for (std::uint32_t c = 0; c < count; c += 4) {
      V4d sum;
      if (products.wide != nullptr) {
        std::memcpy(&sum, products.wide + at + c, sizeof sum);
      } else {
        V4f narrow;
        std::memcpy(&narrow, products.narrow + at + c, sizeof narrow);
        sum = __builtin_convertvector(narrow, V4d);
      }
      if (job.accumulate) {
        V4f old;
        std::memcpy(&old, cells + c, sizeof old);
        sum += __builtin_convertvector(old, V4d);
      }
      const V4f out = __builtin_convertvector(sum, V4f);
      std::memcpy(cells + c, &out, sizeof out);
    }
  });
}

AccumRef mma_accumulate(const MmaJob& job, const CtaMem* ctas, const Accum* parent, MmaMemo& memo,
                        bool only_if_kept) {
  const Decoded d = decode(job);
  thread_local std::vector<std::byte> rows;
  gather(job, d.a, d.b, d.i, ctas, rows);
  const std::uint64_t parent_id = parent != nullptr ? parent->id : 0;
  if (AccumRef known = memo.find_next(parent_id, rows)) return known;
  if (only_if_kept && !memo.has_room_for_link(rows.size(), std::size_t{d.i.m} * d.i.n)) return nullptr;

  // A new link: the products (from the memo when this MMA ran before on
  // another chain), plus the parent's values, rounded once, as
  // mma_execute sums them.
  thread_local std::vector<double> computed;
  MmaMemo::Products products = memo.find(rows);
  if (products.wide == nullptr && products.narrow == nullptr) {
    compute_products(rows, d.i, mma_k(job.kind), computed);
    products.wide = computed.data();
  }
  auto acc = std::make_shared<Accum>();
  acc->id = next_accum_id.fetch_add(1, std::memory_order_relaxed);
  acc->key = rows;
  acc->d.resize(std::size_t{d.i.m} * d.i.n);
  for (std::size_t at = 0; at < acc->d.size(); ++at) {
    double sum = products.wide != nullptr ? products.wide[at] : double{products.narrow[at]};
    if (parent != nullptr) sum += double{parent->d[at]};
    acc->d[at] = static_cast<float>(sum);
  }
  memo.insert_next(parent_id, acc);
  return acc;
}

void accum_write(const MmaJob& job, const Accum& acc, const CtaMem* ctas) {
  for_each_d_run(job, decode(job).i, ctas, [&](std::uint32_t* cells, std::size_t at, std::uint32_t count) {
    std::memcpy(cells, acc.d.data() + at, std::size_t{count} * sizeof(float));
  });
}

bool same_d(const MmaJob& a, const MmaJob& b) {
  if (a.cta_group != b.cta_group || a.d_tmem != b.d_tmem) return false;
  if (a.idesc == b.idesc && a.kind == b.kind) return true;
  const InstrDescriptor x = InstrDescriptor::decode(a.idesc, a.kind).desc;
  const InstrDescriptor y = InstrDescriptor::decode(b.idesc, b.kind).desc;
  return x.m == y.m && x.n == y.n;
}

std::string tma_check(const TensorMap& m, std::uint32_t dst_offset, std::size_t smem_bytes, const char* what) {
  if (const char* e = tensor_map_error(m)) return e;
  // 128-byte aligned always; a swizzled box starts its pattern at the repeat
  // (8 rows of the swizzle width), as the MMA descriptor's base offset 0 assumes.
  const std::uint32_t align = m.swizzle == SmemSwizzle::none ? 128 : 8 * swizzle_bytes(m.swizzle);
  if (dst_offset % align != 0)
    return std::string("the shared-memory ")
        .append(what).append(" ").append(std::to_string(dst_offset)).append(" must be ").append(std::to_string(align))
        .append("-byte aligned");
  const std::uint64_t box_bytes = tma_box_bytes(m);
  if (dst_offset + box_bytes > smem_bytes)
    return "the box [" + std::to_string(dst_offset) + ", " + std::to_string(dst_offset + box_bytes) +
           ") does not fit in shared memory (" + std::to_string(smem_bytes) + " bytes)";
  return {};
}

TmaCoordError tma_coord_error(const TensorMap& m, const TmaCoords& c, bool store) {
  const char* op = store ? "TMA store" : "TMA load";
  const std::int64_t inner_bytes = std::int64_t{c.c[0]} * elem_bytes(m.dtype);
  if (inner_bytes % 16 != 0) {
    std::string msg = op;
    msg.append(" at innermost coordinate ")
        .append(std::to_string(c.c[0])).append(" (").append(std::to_string(inner_bytes))
        .append(" bytes): the box must start on a 16-byte boundary of the row (the H100 traps: illegal instruction)");
    return {"tma.coord-misaligned", std::move(msg)};
  }
  if (store)
    for (std::uint32_t dim = 0; dim < m.rank; ++dim)
      if (c.c[dim] < 0) {
        std::string msg = "TMA store at coordinate ";
        msg.append(std::to_string(c.c[dim]))
            .append(" of dimension ").append(std::to_string(dim))
            .append(": a store's box may hang past the tensor's end but not before its start (the H100 traps: "
                    "illegal instruction; loads may start before it)");
        return {"tma.store-negative-coord", std::move(msg)};
      }
  return {};
}

// Box row `r` (rows numbered over the outer dimensions, dimension 1
// fastest): the byte offset of its element x = 0 in the tensor, or nothing
// when an outer coordinate is out of bounds (loads fill the row with zeros,
// stores skip it).
static std::optional<std::uint64_t> box_row_offset(const TensorMap& m, const TmaCoords& c, std::uint32_t r) {
  std::uint64_t offset = 0;
  for (std::uint32_t dim = 1; dim < m.rank; ++dim) {
    const std::int64_t x = std::int64_t{c.c[dim]} + r % m.box[dim];
    r /= m.box[dim];
    if (x < 0 || static_cast<std::uint64_t>(x) >= m.dims[dim]) return std::nullopt;
    offset += static_cast<std::uint64_t>(x) * m.strides[dim];
  }
  return offset;
}

void tma_copy(const TensorMap& m, const TmaCoords& c, std::byte* smem, std::uint32_t dst_offset) {
  const std::uint32_t eb = elem_bytes(m.dtype);
  const auto* global = static_cast<const std::byte*>(m.global);
  // The box row by row: a row is box[0] elements along the innermost
  // dimension, a multiple of 16 bytes (tensor_map_error) and so whole
  // 16-byte chunks, each moved by the swizzle as a unit.
  const std::uint32_t row_bytes = m.box[0] * eb;
  const auto rows = static_cast<std::uint32_t>(tma_box_bytes(m) / row_bytes);
  const std::int64_t x0 = c.c[0];
  const bool row_inside = x0 >= 0 && static_cast<std::uint64_t>(x0) + m.box[0] <= m.dims[0];
  for (std::uint32_t r = 0; r < rows; ++r) {
    const std::uint32_t row_dst = dst_offset + r * row_bytes;
    const std::optional<std::uint64_t> row = box_row_offset(m, c, r);
    if (!row) {
      for (std::uint32_t b = 0; b < row_bytes; b += 16) std::memset(smem + swizzle_address(m.swizzle, row_dst + b), 0, 16);
      continue;
    }
    if (row_inside) {
      const std::byte* from = global + *row + static_cast<std::uint64_t>(x0) * eb;
      // (The swizzle in a local: the byte copies could alias m's.)
      const SmemSwizzle swizzle = m.swizzle;
      for (std::uint32_t b = 0; b < row_bytes; b += 16)
        std::memcpy(smem + swizzle_address(swizzle, row_dst + b), from + b, 16);
      continue;
    }
    // The row crosses the innermost dimension's bounds: element by element.
    for (std::uint32_t e = 0; e < m.box[0]; ++e) {
      const std::int64_t x = x0 + e;
      std::byte* dst = smem + swizzle_address(m.swizzle, row_dst + e * eb);
      if (x < 0 || static_cast<std::uint64_t>(x) >= m.dims[0])
        std::memset(dst, 0, eb);
      else
        std::memcpy(dst, global + *row + static_cast<std::uint64_t>(x) * eb, eb);
    }
  }
}

void tma_store_gather(const TensorMap& m, const std::byte* smem, std::uint32_t src_offset, std::byte* box) {
  // Whole 16-byte chunks, each where the swizzle put it (as tma_copy writes them).
  const auto bytes = static_cast<std::uint32_t>(tma_box_bytes(m));
  for (std::uint32_t b = 0; b < bytes; b += 16)
    std::memcpy(box + b, smem + swizzle_address(m.swizzle, src_offset + b), 16);
}

void tma_store_scatter(const TensorMap& m, const TmaCoords& c, const std::byte* box) {
  const std::uint32_t eb = elem_bytes(m.dtype);
  // The store writes the tensor that the map describes; the map holds a
  // const pointer because loads share it.
  auto* global = static_cast<std::byte*>(const_cast<void*>(m.global));
  const std::uint32_t row_bytes = m.box[0] * eb;
  const auto rows = static_cast<std::uint32_t>(tma_box_bytes(m) / row_bytes);
  for (std::uint32_t r = 0; r < rows; ++r) {
    const std::optional<std::uint64_t> dst = box_row_offset(m, c, r);
    if (!dst) continue;  // not written
    // Whole 16-byte chunks that start inside the row (the box starts on a
    // 16-byte boundary: tma_coord_error), the last one past the row's end
    // when the row is not a multiple of 16 bytes.
    const std::uint64_t row_end = m.dims[0] * eb;
    for (std::uint32_t b = 0; b < row_bytes; b += 16) {
      const std::int64_t at = std::int64_t{c.c[0]} * eb + b;
      if (at < 0 || static_cast<std::uint64_t>(at) >= row_end) continue;
      std::memcpy(global + *dst + static_cast<std::uint64_t>(at), box + r * row_bytes + b, 16);
    }
  }
}

}  // namespace wspipe::emu::model
