// The host side of `blockwise-fp8`: a problem's inputs and scales, its
// tensor maps, and the CPU reference every run's D is checked against. Host
// code (the emulator's scenarios, the tests, and a GPU test).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/numeric.hpp"
#include "core/tma.hpp"
#include "examples/blockwise_fp8.hpp"
#include "examples/gemm_host.hpp"

namespace wspipe::examples {

struct BlockwiseFp8Problem {
  std::uint32_t m = 0, n = 0, k = 0;
  std::vector<std::uint8_t> a;  // M x K e4m3, row-major
  std::vector<std::uint8_t> b;  // N x K e4m3, row-major
  std::vector<float> a_scales;  // [K/128][M]
  std::vector<float> b_scales;  // [K/128][ceil(N/128)]
  std::vector<float> d;         // M x N, row-major; NaN until written

  std::uint32_t k_blocks() const { return k / kFp8ScaleBlock; }
  std::uint32_t b_scale_cols() const { return (n + kFp8ScaleBlock - 1) / kFp8ScaleBlock; }

  // From `seed`: A in [-2, 2] and B in [-3, 3] (small integers, exact in
  // e4m3), scales 2^e with e in [-2, 2]. A K block's partial product is an
  // integer of magnitude <= 768, each scaled term a multiple of 2^-4 below
  // 2^14, and with K <= 8192 (64 blocks) every partial sum a multiple of
  // 2^-4 below 2^20: exact in f32 in any order, so D must equal the
  // reference bit for bit.
  static BlockwiseFp8Problem random(std::uint32_t m, std::uint32_t n, std::uint32_t k, std::uint64_t seed) {
    BlockwiseFp8Problem p;
    p.m = m;
    p.n = n;
    p.k = k;
    SmallInts ints(seed);
    auto next = [&ints](int range) { return ints.next(range); };
    p.a.resize(std::size_t{m} * k);
    p.b.resize(std::size_t{n} * k);
    for (auto& v : p.a) v = float_to_e4m3(static_cast<float>(next(2)));
    for (auto& v : p.b) v = float_to_e4m3(static_cast<float>(next(3)));
    p.a_scales.resize(std::size_t{p.k_blocks()} * m);
    p.b_scales.resize(std::size_t{p.k_blocks()} * p.b_scale_cols());
    for (auto& v : p.a_scales) v = std::ldexp(1.0f, next(2));
    for (auto& v : p.b_scales) v = std::ldexp(1.0f, next(2));
    p.d.assign(std::size_t{m} * n, __builtin_nanf(""));
    return p;
  }

  // The CPU reference, M x N row-major: per K block of 128, the partial
  // sum of A[i][k] * B[j][k] in double in k order, scaled by A's row scale
  // and B's block scale and added up in double in block order; rounded to
  // f32.
  std::vector<float> reference() const {
    const std::vector<float> fa = decode_elems(ElemType::e4m3, a), fb = decode_elems(ElemType::e4m3, b);
    std::vector<double> sum(n), partial(n);
    std::vector<float> want(std::size_t{m} * n);
    for (std::uint32_t i = 0; i < m; ++i) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (std::uint32_t kb = 0; kb < k_blocks(); ++kb) {
        const std::size_t k0 = std::size_t{kb} * kFp8ScaleBlock;
        row_dots(&fa[std::size_t{i} * k + k0], &fb[k0], k, n, kFp8ScaleBlock, partial.data());
        for (std::uint32_t j = 0; j < n; ++j)
          sum[j] += partial[j] * a_scales[std::size_t{kb} * m + i] *
                    b_scales[std::size_t{kb} * b_scale_cols() + j / kFp8ScaleBlock];
      }
      for (std::uint32_t j = 0; j < n; ++j) want[std::size_t{i} * n + j] = static_cast<float>(sum[j]);
    }
    return want;
  }

  // "" when D equals the reference everywhere; else the first difference
  // and how many elements differ. `want`: reference(), computed once for
  // any number of runs over these inputs.
  std::string check(const std::vector<float>& want) const { return compare_exact(d, m, n, want); }
  std::string check() const { return check(reference()); }

  // Tensor maps over the given base addresses (the host copies for the
  // emulator; device copies for the GPU), boxes as the kernel loads them.
  template <class Cfg>
  TensorMap a_map(const void* a_base) const {
    return operand_map(a_base, m, kGemmBlockM);
  }
  template <class Cfg>
  TensorMap b_map(const void* b_base) const {
    return operand_map(b_base, n, Cfg::kBRowsLoaded);
  }
  // [K/128][M] f32: one K block's scales of a CTA's 128 rows per box.
  template <class Cfg>
  TensorMap a_scale_map(const void* scales_base) const {
    return row_major_tensor_map(scales_base, ElemType::f32, m, k_blocks(), kGemmBlockM, 1);
  }

  // Why the shape does not fit configuration Cfg, or "".
  template <class Cfg>
  std::string shape_error() const {
    if (m == 0 || m % Cfg::kClusterM != 0)
      return "--m must be a positive multiple of " + std::to_string(Cfg::kClusterM) + " (128 rows per CTA)";
    if (n == 0 || n % kGemmBlockN != 0) return "--n must be a positive multiple of 64";
    if (k == 0 || k % kFp8ScaleBlock != 0) return "--k must be a positive multiple of 128 (one scale block)";
    return {};
  }

 private:
  // K-major e4m3 (as bytes: TMA has no 8-bit float type) in gemm's
  // 128B-swizzled boxes of one K block by `box_rows` rows.
  TensorMap operand_map(const void* base, std::uint32_t rows, std::uint32_t box_rows) const {
    return row_major_tensor_map(base, ElemType::u8, k, rows, kGemmBlockKBytes, box_rows, SmemSwizzle::b128);
  }
};

}  // namespace wspipe::examples
