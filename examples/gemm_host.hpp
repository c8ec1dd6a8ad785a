// The host side of `gemm`: a problem's inputs, its tensor maps, and the CPU
// reference every run's D is checked against. Host code (the emulator's
// scenarios, the tests, and the GPU test for the CUDA build).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/numeric.hpp"
#include "core/tma.hpp"
#include "examples/gemm.hpp"

namespace wspipe::examples {

// "" when every element of the M x N row-major `d` equals ref(i, j) rounded
// to f32 (the examples' inputs make every sum exact); else the first
// difference and how many elements differ.
template <class Ref>
std::string compare_exact(const std::vector<float>& d, std::uint32_t m, std::uint32_t n, Ref&& ref) {
  std::size_t bad = 0;
  std::string first;
  for (std::uint32_t i = 0; i < m; ++i) {
    for (std::uint32_t j = 0; j < n; ++j) {
      const float got = d[std::size_t{i} * n + j];
      const auto want = static_cast<float>(ref(i, j));
      if (got == want) continue;
      if (bad++ == 0)
        first = "D[" + std::to_string(i) + "][" + std::to_string(j) + "] = " + std::to_string(got) + ", reference " +
                std::to_string(want);
    }
  }
  if (bad == 0) return {};
  return first + " (" + std::to_string(bad) + " of " + std::to_string(std::size_t{m} * n) + " elements differ)";
}

// compare_exact against a reference computed beforehand (M x N, row-major).
// Every run of an exploration ends here, and nearly all match: a pass with
// no branch per element (eight at a time, which compilers vectorise) says
// so, and only a mismatch builds the report.
inline std::string compare_exact(const std::vector<float>& d, std::uint32_t m, std::uint32_t n,
                                 const std::vector<float>& want) {
  const std::size_t size = std::size_t{m} * n;
  const float* got = d.data();
  const float* ref = want.data();
  // (All ones for a mismatch: g++ -O2 vectorises this form, not a bool's.)
  const auto mismatch = [&](std::size_t e) {
    return static_cast<std::uint32_t>(-static_cast<std::int32_t>(!(got[e] == ref[e])));
  };
  std::uint32_t differ = 0;
  std::size_t k = 0;
  for (; k + 8 <= size; k += 8) {
    std::uint32_t x = 0;
    for (std::size_t e = k; e < k + 8; ++e) x |= mismatch(e);
    differ |= x;
  }
  for (; k < size; ++k) differ |= mismatch(k);
  if (differ == 0) return {};
  return compare_exact(d, m, n, [&want, n](std::uint32_t i, std::uint32_t j) { return want[std::size_t{i} * n + j]; });
}

// Each element of `bytes` (elements of type `t`) as a float: exact for
// every type but u32.
inline std::vector<float> decode_elems(ElemType t, const std::vector<std::uint8_t>& bytes) {
  const std::uint32_t eb = elem_bytes(t);
  std::vector<float> out(bytes.size() / eb);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(elem_to_double(t, &bytes[i * eb]));
  return out;
}

// out[r] = sum over kk < len of x[kk] * rows[r * stride + kk], for r < nrows:
// products and sums in double, in index order, exactly as one loop per
// row computes them; four rows at a time, so that the four sums' additions
// overlap.
inline void row_dots(const float* x, const float* rows, std::size_t stride, std::uint32_t nrows, std::uint32_t len,
                     double* out) {
  std::uint32_t r = 0;
  for (; r + 4 <= nrows; r += 4) {
    const float* b0 = rows + r * stride;
    const float* b1 = b0 + stride;
    const float* b2 = b1 + stride;
    const float* b3 = b2 + stride;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::uint32_t kk = 0; kk < len; ++kk) {
      const double xv = x[kk];
      s0 += xv * b0[kk];
      s1 += xv * b1[kk];
      s2 += xv * b2[kk];
      s3 += xv * b3[kk];
    }
    out[r] = s0;
    out[r + 1] = s1;
    out[r + 2] = s2;
    out[r + 3] = s3;
  }
  for (; r < nrows; ++r) {
    const float* b0 = rows + r * stride;
    double s = 0;
    for (std::uint32_t kk = 0; kk < len; ++kk) s += double{x[kk]} * b0[kk];
    out[r] = s;
  }
}

// The GEMM examples' inputs: integers in [-range, range] from a 64-bit
// linear congruential generator seeded with `seed`.
class SmallInts {
 public:
  explicit SmallInts(std::uint64_t seed) : x_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  int next(int range) {
    x_ = x_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((x_ >> 33) % static_cast<std::uint64_t>(2 * range + 1)) - range;
  }

 private:
  std::uint64_t x_;
};

struct GemmProblem {
  std::uint32_t m = 0, n = 0, k = 0;
  ElemType in = ElemType::bf16;
  std::vector<std::uint8_t> a;  // M x K elements, row-major
  std::vector<std::uint8_t> b;  // N x K elements, row-major
  std::vector<float> d;         // M x N, row-major; NaN until written

  // Small integers (A in [-2, 2], B in [-3, 3]) from `seed`: exact in bf16
  // and e4m3, and every sum of K <= 2^20 products is exact in f32, so the
  // result must equal the reference bit for bit.
  static GemmProblem random(std::uint32_t m, std::uint32_t n, std::uint32_t k, ElemType in, std::uint64_t seed) {
    GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.in = in;
    const std::uint32_t eb = elem_bytes(in);
    p.a.resize(std::size_t{m} * k * eb);
    p.b.resize(std::size_t{n} * k * eb);
    p.d.assign(std::size_t{m} * n, __builtin_nanf(""));
    SmallInts ints(seed);
    auto next = [&ints](int range) { return static_cast<float>(ints.next(range)); };
    auto put = [&](std::vector<std::uint8_t>& v, std::size_t i, float f) {
      if (in == ElemType::bf16) {
        const std::uint16_t h = float_to_bf16(f);
        v[2 * i] = static_cast<std::uint8_t>(h & 0xff);
        v[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
      } else {
        v[i] = float_to_e4m3(f);
      }
    };
    for (std::size_t i = 0; i < std::size_t{m} * k; ++i) put(p.a, i, next(2));
    for (std::size_t i = 0; i < std::size_t{n} * k; ++i) put(p.b, i, next(3));
    return p;
  }

  // The CPU reference, M x N row-major: D[i][j] = sum over k of
  // A[i][k] * B[j][k], in double in k order, rounded to f32.
  std::vector<float> reference() const {
    const std::vector<float> fa = decode_elems(in, a), fb = decode_elems(in, b);
    std::vector<float> want(std::size_t{m} * n);
    std::vector<double> row(n);
    for (std::uint32_t i = 0; i < m; ++i) {
      row_dots(&fa[std::size_t{i} * k], fb.data(), k, n, k, row.data());
      for (std::uint32_t j = 0; j < n; ++j) want[std::size_t{i} * n + j] = static_cast<float>(row[j]);
    }
    return want;
  }

  // "" when D equals the reference everywhere; else the first difference
  // and how many elements differ. `want`: reference(), computed once for
  // any number of runs over these inputs.
  std::string check(const std::vector<float>& want) const { return compare_exact(d, m, n, want); }
  std::string check() const { return check(reference()); }

  // Tensor maps over `a_base` / `b_base` (the host copies for the
  // emulator; device copies for the GPU), boxes as the kernel loads them.
  template <class Cfg>
  TensorMap a_map(const void* a_base) const {
    return operand_map(a_base, m, Cfg::kARowsLoaded);
  }
  template <class Cfg>
  TensorMap b_map(const void* b_base) const {
    return operand_map(b_base, n, Cfg::kBRowsLoaded);
  }

  // Why the shape does not fit configuration Cfg, or "".
  template <class Cfg>
  std::string shape_error() const {
    if (m == 0 || m % Cfg::kClusterM != 0)
      return "--m must be a positive multiple of " + std::to_string(Cfg::kClusterM) + " (128 rows per CTA)";
    if (n == 0 || n % Cfg::kClusterN != 0) {
      std::string e = "--n must be a positive multiple of ";
      e += std::to_string(Cfg::kClusterN);
      e += " (64 columns per CTA of a cluster row)";
      return e;
    }
    if (k == 0 || k % Cfg::kBlockK != 0)
      return "--k must be a positive multiple of " + std::to_string(Cfg::kBlockK) + " (128 bytes of " +
             to_string(in) + ")";
    return {};
  }

  // A map over A (rows = m) or B (rows = n) at `base`: K-major, boxes of
  // 128 K-bytes by `box_rows` rows, 128B-swizzled (the layout the MMA's
  // shared-memory descriptors describe).
  TensorMap operand_map(const void* base, std::uint32_t rows, std::uint32_t box_rows) const {
    // e4m3 moves as bytes (TMA has no 8-bit float type); k elements a row.
    return row_major_tensor_map(base, in == ElemType::bf16 ? ElemType::bf16 : ElemType::u8, k, rows,
                                kGemmBlockKBytes / elem_bytes(in), box_rows, SmemSwizzle::b128);
  }
};

}  // namespace wspipe::examples
