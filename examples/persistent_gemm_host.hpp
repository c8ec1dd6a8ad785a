// The host side of `persistent-gemm`: its tensor maps and shape checks over
// gemm's problem and reference (gemm_host.hpp). Host code.
#pragma once

#include <cstdint>
#include <string>

#include "core/tma.hpp"
#include "examples/gemm_host.hpp"
#include "examples/persistent_gemm.hpp"

namespace wspipe::examples {

// Why problem `p` does not fit configuration Cfg, or "".
template <class Cfg>
std::string persistent_gemm_shape_error(const GemmProblem& p) {
  std::string e;
  if (p.in != Cfg::kIn) {
    e = "the inputs must be bf16";
  } else if (p.m == 0 || p.m % Cfg::kClusterM != 0) {
    e = "--m must be a positive multiple of ";
    e += std::to_string(Cfg::kClusterM);
    e += " (128 rows per CTA along the cluster's x)";
  } else if (p.n == 0 || p.n % Cfg::kClusterN != 0) {
    e = "--n must be a positive multiple of ";
    e += std::to_string(Cfg::kClusterN);
    e += " (64 columns per CTA along the cluster's y)";
  } else if (p.k == 0 || p.k % Cfg::kBlockK != 0) {
    e = "--k must be a positive multiple of ";
    e += std::to_string(Cfg::kBlockK);
  }
  return e;
}

// The cluster tiles of problem `p` under Cfg: the work items.
template <class Cfg>
std::uint32_t persistent_gemm_tiles(const GemmProblem& p) {
  return (p.m / Cfg::kClusterM) * (p.n / Cfg::kClusterN);
}

// The maps the kernel loads with: A in boxes of kARowsLoaded rows, B of
// kBRowsLoaded (each CTA's share of a shared tile).
template <class Cfg>
TensorMap persistent_gemm_a_map(const GemmProblem& p, const void* a_base) {
  return p.operand_map(a_base, p.m, Cfg::kARowsLoaded);
}
template <class Cfg>
TensorMap persistent_gemm_b_map(const GemmProblem& p, const void* b_base) {
  return p.operand_map(b_base, p.n, Cfg::kBRowsLoaded);
}

// D (M x N f32, row-major) as the epilogue's TMA stores write it: boxes of
// 32 rows (an epilogue warp's lane quarter) by kPgStoreCols columns, not
// swizzled (the staging buffers are row-major).
inline TensorMap persistent_gemm_d_map(void* d_base, std::uint32_t m, std::uint32_t n) {
  return row_major_tensor_map(d_base, ElemType::f32, n, m, kPgStoreCols, 32);
}

}  // namespace wspipe::examples
