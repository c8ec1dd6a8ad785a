#include "backends/emu/models.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <initializer_list>
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

// Offsets of the 16-byte chunks of A and B one CTA reads, merged into ranges.
std::vector<std::pair<std::uint32_t, std::uint32_t>> operand_ranges(const MmaJob& job, const Decoded& d) {
  std::vector<std::uint32_t> chunks;
  const auto add = [&](const SmemDescriptor& desc, std::uint32_t rows) {
    for (std::uint32_t row = 0; row < rows; ++row)
      for (std::uint32_t kbyte = 0; kbyte < kRowBytes; kbyte += 16) chunks.push_back(operand_offset(desc, row, kbyte));
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
  const std::uint32_t group = d.start + (row / 8) * d.sbo;
  if (d.swizzle == SmemSwizzle::none) return group + (kbyte / 16) * d.lbo + (row % 8) * 16 + kbyte % 16;
  return swizzle_address(d.swizzle, group + (row % 8) * swizzle_bytes(d.swizzle) + kbyte);
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

void mma_execute(const MmaJob& job, const CtaMem* ctas) {
  const Decoded d = decode(job);
  const std::uint32_t m = d.i.m, n = d.i.n, k = mma_k(job.kind);
  const auto g = static_cast<std::uint32_t>(job.cta_group);

  // Gather A (M x K) and B (N x K) from the pair, decoded and negated.
  const auto gather = [&](const SmemDescriptor& desc, ElemType t, std::uint32_t rows, bool negate) {
    std::vector<double> out(std::size_t{rows} * k);
    const std::uint32_t per_cta = rows / g;
    const std::uint32_t eb = elem_bytes(t);
    for (std::uint32_t row = 0; row < rows; ++row)
      for (std::uint32_t kk = 0; kk < k; ++kk) {
        const std::byte* p = ctas[row / per_cta].smem + operand_offset(desc, row % per_cta, kk * eb);
        out[std::size_t{row} * k + kk] = negate ? -elem_to_double(t, p) : elem_to_double(t, p);
      }
    return out;
  };
  const std::vector<double> a = gather(d.a, d.i.a, m, d.i.negate_a);
  const std::vector<double> b = gather(d.b, d.i.b, n, d.i.negate_b);

  for (std::uint32_t row = 0; row < m; ++row)
    for (std::uint32_t col = 0; col < n; ++col) {
      double sum = 0;
      for (std::uint32_t kk = 0; kk < k; ++kk) sum += a[std::size_t{row} * k + kk] * b[std::size_t{col} * k + kk];
      const DPlace p = d_place(job, d.i, row, col);
      std::uint32_t& cell = ctas[p.cta].tmem[std::size_t{p.lane} * kTmemColumns + p.col];
      if (job.accumulate) sum += std::bit_cast<float>(cell);
      cell = std::bit_cast<std::uint32_t>(static_cast<float>(sum));
    }
}

std::string tma_check(const TensorMap& m, std::uint32_t dst_offset, std::size_t smem_bytes) {
  if (const char* e = tensor_map_error(m)) return e;
  // 128-byte aligned always; a swizzled box starts its pattern at the repeat
  // (8 rows of the swizzle width), as the MMA descriptor's base offset 0 assumes.
  const std::uint32_t align = m.swizzle == SmemSwizzle::none ? 128 : 8 * swizzle_bytes(m.swizzle);
  if (dst_offset % align != 0)
    return "the shared-memory destination " + std::to_string(dst_offset) + " must be " + std::to_string(align) +
           "-byte aligned";
  const std::uint64_t box_bytes = tma_box_bytes(m);
  if (dst_offset + box_bytes > smem_bytes)
    return "the box [" + std::to_string(dst_offset) + ", " + std::to_string(dst_offset + box_bytes) +
           ") does not fit in shared memory (" + std::to_string(smem_bytes) + " bytes)";
  return {};
}

void tma_copy(const TensorMap& m, const TmaCoords& c, std::byte* smem, std::uint32_t dst_offset) {
  const std::uint32_t eb = elem_bytes(m.dtype);
  const auto* global = static_cast<const std::byte*>(m.global);
  const auto elems = static_cast<std::uint32_t>(tma_box_bytes(m) / eb);
  for (std::uint32_t e = 0; e < elems; ++e) {
    bool inside = true;
    std::uint64_t src = 0;
    std::uint32_t rest = e;  // the box position, innermost dimension first
    for (std::uint32_t dim = 0; dim < m.rank; ++dim) {
      const std::int64_t x = std::int64_t{c.c[dim]} + rest % m.box[dim];
      rest /= m.box[dim];
      if (x < 0 || static_cast<std::uint64_t>(x) >= m.dims[dim])
        inside = false;
      else
        src += static_cast<std::uint64_t>(x) * (dim == 0 ? eb : m.strides[dim]);
    }
    std::byte* dst = smem + swizzle_address(m.swizzle, dst_offset + e * eb);
    if (inside)
      std::memcpy(dst, global + src, eb);
    else
      std::memset(dst, 0, eb);
  }
}

}  // namespace wspipe::emu::model
