// Host side: encode a wspipe::TensorMap (core/tma.hpp, the value the
// emulator reads directly) into the CUtensorMap that CudaBackend::tma_load
// hands to cp.async.bulk.tensor. Pass the result to the kernel as a
// `const __grid_constant__ CUtensorMap` parameter.
//
// The encoder, cuTensorMapEncodeTiled, is a driver API function. It is
// obtained at run time through the CUDA runtime's driver entry point
// (cudaGetDriverEntryPointByVersion), so that nothing links libcuda at build
// time and a program without a GPU still builds and starts.
//
// Errors are exceptions, host code only: std::invalid_argument for a map
// that tensor_map_error() rejects (the message carries its reason) or an
// unknown TmaL2Promotion, before the driver is asked; std::runtime_error
// when the driver cannot be reached or refuses the map (the message names
// the CUresult).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/tma.hpp"

namespace wspipe::cuda {

// How far the TMA widens the L2 fetches of a load through the map
// (CUtensorMapL2promotion): not at all, or to 64, 128 or 256 bytes.
enum class TmaL2Promotion : std::uint8_t { none, b64, b128, b256 };

namespace detail {

// TMA moves bytes: only an element's size matters to a tile copy, so the
// 8-bit floats travel as UINT8 (the enum has no fp8 type).
inline CUtensorMapDataType tma_data_type(ElemType t) {
  switch (t) {
    case ElemType::u8:
    case ElemType::e4m3:
    case ElemType::e5m2: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case ElemType::u16: return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case ElemType::u32: return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case ElemType::f16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case ElemType::bf16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case ElemType::f32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
  throw std::invalid_argument("make_tma_map: unknown element type");
}

inline CUtensorMapSwizzle tma_swizzle(SmemSwizzle s) {
  switch (s) {
    case SmemSwizzle::none: return CU_TENSOR_MAP_SWIZZLE_NONE;
    case SmemSwizzle::b32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case SmemSwizzle::b64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case SmemSwizzle::b128: return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  throw std::invalid_argument("make_tma_map: unknown swizzle");
}

inline CUtensorMapL2promotion tma_l2_promotion(TmaL2Promotion p) {
  switch (p) {
    case TmaL2Promotion::none: return CU_TENSOR_MAP_L2_PROMOTION_NONE;
    case TmaL2Promotion::b64: return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
    case TmaL2Promotion::b128: return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    case TmaL2Promotion::b256: return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  }
  throw std::invalid_argument("make_tma_map: unknown L2 promotion");
}

// The driver function `symbol` as of driver API version `version` (e.g.
// 12000 for 12.0), or std::runtime_error.
template <class Fn>
Fn driver_entry_point(const char* symbol, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found);
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("make_tma_map: cannot reach the CUDA driver for ") + symbol + ": " +
                             cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    throw std::runtime_error(std::string("make_tma_map: the CUDA driver has no ") + symbol + " of version " +
                             std::to_string(version));
  }
  return reinterpret_cast<Fn>(fn);
}

// "CUDA_ERROR_INVALID_VALUE (1)", or just the number when the driver cannot
// name it.
inline std::string driver_error_name(CUresult r) {
  std::string code = "(";  // appended: g++ 12 -O3 warns falsely (-Wrestrict) on "(" + std::string
  code += std::to_string(static_cast<int>(r));
  code += ')';
  try {
    static const auto get_name = driver_entry_point<PFN_cuGetErrorName_v6000>("cuGetErrorName", 6000);
    const char* name = nullptr;
    if (get_name(r, &name) == CUDA_SUCCESS && name != nullptr) return name + (" " + code);
  } catch (const std::runtime_error&) {
  }
  return "CUresult " + code;
}

}  // namespace detail

// A tiled tensor map for `m`: box `m.box` of `m.dtype` elements, element
// strides 1, no interleave, out-of-bounds elements filled with zeros
// (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE; TMA still counts them in complete_tx,
// as tma_box_bytes() says), L2 fetches widened as `l2` says. The default,
// 256 bytes, is the common choice for GEMM operand tiles. A read streamed
// once from HBM can do better without promotion: through
// InputTilePipeline on an H200, TmaL2Promotion::none was about 10% faster
// and steadier (tools/gpu/tma_bandwidth.cu). The kernel's tma_load names
// the same rank: CudaBackend::tma_load<CtaGroup, Rank>.
inline CUtensorMap make_tma_map(const TensorMap& m, TmaL2Promotion l2 = TmaL2Promotion::b256) {
  if (const char* why = tensor_map_error(m)) throw std::invalid_argument(std::string("make_tma_map: ") + why);
  const CUtensorMapL2promotion promotion = detail::tma_l2_promotion(l2);

  static const auto encode =
      detail::driver_entry_point<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);

  // The driver takes the strides of dimensions 1..rank-1 only: dimension 0
  // is contiguous.
  cuuint64_t dims[kTmaMaxRank] = {};
  cuuint64_t strides[kTmaMaxRank - 1] = {};
  cuuint32_t box[kTmaMaxRank] = {};
  cuuint32_t elem_strides[kTmaMaxRank] = {};
  for (std::uint32_t i = 0; i < m.rank; ++i) {
    dims[i] = m.dims[i];
    box[i] = m.box[i];
    elem_strides[i] = 1;
    if (i >= 1) strides[i - 1] = m.strides[i];
  }

  CUtensorMap map{};  // zeroed: bytes the driver leaves alone compare equal
  const CUresult r =
      encode(&map, detail::tma_data_type(m.dtype), m.rank, const_cast<void*>(m.global), dims, strides, box,
             elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, detail::tma_swizzle(m.swizzle), promotion,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("make_tma_map: cuTensorMapEncodeTiled refused the map: " + detail::driver_error_name(r));
  }
  return map;
}

}  // namespace wspipe::cuda
