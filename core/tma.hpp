// The TMA tensor map as a value: what cuTensorMapEncodeTiled is told. The
// emulator's TMA reads it directly; the CUDA backend encodes it into a
// CUtensorMap on the host (backends/cuda/tensor_map.hpp). Host code; the
// coordinate type is also used on the device.
#pragma once

#include <cstdint>
#include <cstddef>

#include "config.hpp"
#include "numeric.hpp"
#include "tcgen05.hpp"

namespace wspipe {

inline constexpr std::uint32_t kTmaMaxRank = 5;

// A tiled tensor map over a global (row-major, innermost dimension first)
// tensor. dims[0] is the contiguous dimension.
struct TensorMap {
  const void* global = nullptr;     // 16-byte aligned
  ElemType dtype = ElemType::bf16;
  std::uint32_t rank = 2;           // 1..5
  std::uint64_t dims[kTmaMaxRank] = {};     // elements per dimension, each in [1, 2^32]
  std::uint64_t strides[kTmaMaxRank] = {};  // bytes between consecutive indices of dimension i (i >= 1;
                                            // strides[0] is the element size and ignored); multiples of 16
  std::uint32_t box[kTmaMaxRank] = {};      // box extent per dimension, each in [1, 256]
  SmemSwizzle swizzle = SmemSwizzle::none;  // box[0] * element bytes <= the swizzle width when swizzled
};

// A 2-D map over the row-major `cols` x `rows` matrix at `global` (rows
// packed: a row's stride is cols elements), in boxes of `box_cols` x
// `box_rows`.
inline TensorMap row_major_tensor_map(const void* global, ElemType type, std::uint64_t cols, std::uint64_t rows,
                                      std::uint32_t box_cols, std::uint32_t box_rows,
                                      SmemSwizzle swizzle = SmemSwizzle::none) {
  TensorMap t;
  t.global = global;
  t.dtype = type;
  t.rank = 2;
  t.dims[0] = cols;
  t.dims[1] = rows;
  t.strides[1] = cols * elem_bytes(type);
  t.box[0] = box_cols;
  t.box[1] = box_rows;
  t.swizzle = swizzle;
  return t;
}

// Bytes one box fills in shared memory (out-of-bounds elements included:
// TMA fills them with zeros and counts them in complete_tx). 64-bit: five
// extents of 256 overflow 32 bits; a box that large never fits in shared
// memory, and tma checks reject it.
constexpr std::uint64_t tma_box_bytes(const TensorMap& m) {
  std::uint64_t n = elem_bytes(m.dtype);
  for (std::uint32_t i = 0; i < m.rank && i < kTmaMaxRank; ++i) n *= m.box[i];
  return n;
}

// Why `m` cannot be encoded, or nullptr when it can. The limits are those of
// cuTensorMapEncodeTiled (CUDA driver API) that a kernel can get wrong.
inline const char* tensor_map_error(const TensorMap& m) {
  if (m.global == nullptr) return "global address is null";
  if (reinterpret_cast<std::uintptr_t>(m.global) % 16 != 0) return "global address must be 16-byte aligned";
  if (m.rank < 1 || m.rank > kTmaMaxRank) return "rank must be in [1, 5]";
  const std::uint32_t eb = elem_bytes(m.dtype);
  for (std::uint32_t i = 0; i < m.rank; ++i) {
    if (m.dims[i] < 1 || m.dims[i] > (std::uint64_t{1} << 32)) return "every dimension must be in [1, 2^32]";
    if (m.box[i] < 1 || m.box[i] > 256) return "every box extent must be in [1, 256]";
    if (i >= 1 && (m.strides[i] % 16 != 0 || m.strides[i] == 0 || m.strides[i] >= (std::uint64_t{1} << 40)))
      return "strides must be non-zero multiples of 16 below 2^40";
  }
  if ((m.box[0] * eb) % 16 != 0) return "the box's inner extent must be a multiple of 16 bytes";
  if (m.swizzle != SmemSwizzle::none && m.box[0] * eb > swizzle_bytes(m.swizzle))
    return "the box's inner extent must not exceed the swizzle width";
  return nullptr;
}

// Tensor coordinates of a box's first element, innermost dimension first
// (elements; may be negative or past the end: those elements read as 0).
struct TmaCoords {
  std::int32_t c[kTmaMaxRank] = {};
};

}  // namespace wspipe
