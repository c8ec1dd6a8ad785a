// Tensor Memory and tcgen05 facts shared by both backends: TMEM addresses,
// the tcgen05.ld/st shapes and their register counts, and the two MMA
// descriptors (the 64-bit shared-memory matrix descriptor and the 32-bit
// instruction descriptor) as value types that encode to and decode from the
// bits the hardware reads. Host and device code; everything is constexpr.
//
// Sources: PTX ISA "Tensor Memory", "tcgen05.ld", "Matrix Descriptors",
// "Instruction descriptor"; docs/hardware.md "Tensor core".
#pragma once

#include <cstdint>

#include "config.hpp"
#include "numeric.hpp"

namespace wspipe {

// ---------------------------------------------------------------- TMEM
// Per CTA: 128 lanes x 512 columns of 32-bit cells (sm_100a).
inline constexpr std::uint32_t kTmemLanes = 128;
inline constexpr std::uint32_t kTmemColumns = 512;

// A TMEM address: lane in bits 31-16, column in bits 15-0.
WSPIPE_HD constexpr std::uint32_t tmem_addr(std::uint32_t lane, std::uint32_t col) { return lane << 16 | col; }
WSPIPE_HD constexpr std::uint32_t tmem_lane(std::uint32_t addr) { return addr >> 16; }
WSPIPE_HD constexpr std::uint32_t tmem_col(std::uint32_t addr) { return addr & 0xffffu; }

// The lanes warp `warp_idx` (index in the CTA) may touch with tcgen05.ld/st:
// the quarter warp_idx % 4 (PTX "Access restrictions").
WSPIPE_HD constexpr std::uint32_t tmem_quarter_first_lane(std::uint32_t warp_idx) { return 32u * (warp_idx % 4u); }

// tcgen05.alloc sizes: a power of 2 in [32, 512].
WSPIPE_HD constexpr bool tmem_alloc_size_valid(std::uint32_t cols) {
  return cols >= 32 && cols <= 512 && (cols & (cols - 1)) == 0;
}

// tcgen05.ld/st shapes, lanes x bits per repetition.
enum class TmemShape : std::uint8_t { s32x32b, s16x64b, s16x128b, s16x256b, s16x32bx2 };

constexpr const char* to_string(TmemShape s) {
  switch (s) {
    case TmemShape::s32x32b: return "32x32b";
    case TmemShape::s16x64b: return "16x64b";
    case TmemShape::s16x128b: return "16x128b";
    case TmemShape::s16x256b: return "16x256b";
    case TmemShape::s16x32bx2: return "16x32bx2";
  }
  return "?";
}

// TMEM lanes one access covers.
WSPIPE_HD constexpr std::uint32_t tmem_shape_lanes(TmemShape s) { return s == TmemShape::s32x32b ? 32u : 16u; }

// Registers per thread for one repetition (.x1), PTX Table "tcgen05-num-shapes".
WSPIPE_HD constexpr std::uint32_t tmem_regs_per_rep(TmemShape s) {
  switch (s) {
    case TmemShape::s16x128b: return 2;
    case TmemShape::s16x256b: return 4;
    default: return 1;
  }
}

// .num is a power of 2 in [1, 128] and a thread holds at most 128 registers:
// 16x128b stops at .x64, 16x256b at .x32.
WSPIPE_HD constexpr bool tmem_num_valid(TmemShape s, std::uint32_t num) {
  return num >= 1 && num <= 128 && (num & (num - 1)) == 0 && num * tmem_regs_per_rep(s) <= 128;
}

// Registers per thread of a .num access.
WSPIPE_HD constexpr std::uint32_t tmem_regs(TmemShape s, std::uint32_t num) { return num * tmem_regs_per_rep(s); }

// Where register `reg` of thread `thread` (0..31) of a warp's tcgen05.ld/st
// lives, relative to the access's base address: lane offset (added to the
// address's lane) and column offset. `half_split` is 16x32bx2's immHalfSplitoff
// (columns between its two halves). Every (thread, reg) maps to a distinct
// cell. Defined in tcgen05_fragments.hpp's implementation below.
struct TmemCell {
  std::uint32_t lane;
  std::uint32_t col;
};
WSPIPE_HD constexpr TmemCell tmem_frag_cell(TmemShape s, std::uint32_t num, std::uint32_t thread, std::uint32_t reg,
                                            std::uint32_t half_split = 0);

// ------------------------------------------------ shared-memory descriptor
// The swizzle of a shared-memory tile, as TMA writes it and as the MMA
// descriptor names it: 16-byte chunk bits [4, 4+b) of the byte address are
// XOR-ed with bits [7, 7+b), b = 1, 2, 3 for 32, 64, 128 bytes, repeating
// every 256, 512, 1024 bytes (so tiles start 1024-byte aligned).
enum class SmemSwizzle : std::uint8_t { none, b32, b64, b128 };

constexpr const char* to_string(SmemSwizzle s) {
  switch (s) {
    case SmemSwizzle::none: return "none";
    case SmemSwizzle::b32: return "32B";
    case SmemSwizzle::b64: return "64B";
    case SmemSwizzle::b128: return "128B";
  }
  return "?";
}

// Width of a swizzled row in bytes (0 for none).
WSPIPE_HD constexpr std::uint32_t swizzle_bytes(SmemSwizzle s) {
  switch (s) {
    case SmemSwizzle::b32: return 32;
    case SmemSwizzle::b64: return 64;
    case SmemSwizzle::b128: return 128;
    default: return 0;
  }
}

// The physical byte address of logical byte address `addr` in a tile laid out
// with swizzle `s` (an involution: applying it twice gives `addr`).
WSPIPE_HD constexpr std::uint32_t swizzle_address(SmemSwizzle s, std::uint32_t addr) {
  switch (s) {
    case SmemSwizzle::b32: return addr ^ ((addr >> 3) & 0x10u);
    case SmemSwizzle::b64: return addr ^ ((addr >> 3) & 0x30u);
    case SmemSwizzle::b128: return addr ^ ((addr >> 3) & 0x70u);
    default: return addr;
  }
}

// The 64-bit matrix descriptor of tcgen05.mma (PTX "Shared memory descriptor"):
//   bits  0-13  start address >> 4        bits 16-29  leading byte offset >> 4
//   bits 32-45  stride byte offset >> 4   bits 46-48  fixed 0b001 (sm_100)
//   bits 49-51  base offset               bit  52     LBO mode
//   bits 61-63  swizzle: 0 none, 1 128B with 32B atom, 2 128B, 4 64B, 6 32B
// For a K-major operand: rows of the tile are M (or N), a "core matrix" is
// 8 rows x 16 bytes. SBO = bytes between consecutive 8-row groups; LBO =
// bytes between core matrices adjacent in K (no swizzle only; a swizzled
// K-major operand's K extent per MMA, 32 bytes, lies within one swizzled row).
struct SmemDescriptor {
  std::uint32_t start = 0;  // byte address in the shared window, 16-byte aligned
  std::uint32_t lbo = 0;    // bytes, multiple of 16, < 2^18
  std::uint32_t sbo = 0;    // bytes, multiple of 16, < 2^18
  SmemSwizzle swizzle = SmemSwizzle::none;
  std::uint8_t base_offset = 0;  // 0..7
  bool lbo_mode = false;

  WSPIPE_HD constexpr std::uint64_t encode() const {
    std::uint64_t layout = 0;
    switch (swizzle) {
      case SmemSwizzle::none: layout = 0; break;
      case SmemSwizzle::b128: layout = 2; break;
      case SmemSwizzle::b64: layout = 4; break;
      case SmemSwizzle::b32: layout = 6; break;
    }
    return (std::uint64_t{(start >> 4) & 0x3fffu}) | (std::uint64_t{(lbo >> 4) & 0x3fffu} << 16) |
           (std::uint64_t{(sbo >> 4) & 0x3fffu} << 32) | (std::uint64_t{1} << 46) |
           (std::uint64_t{base_offset & 7u} << 49) | (std::uint64_t{lbo_mode} << 52) | (layout << 61);
  }
  // Decodes the fields; `valid` is false for bit patterns this model does not
  // accept (version bits not 0b001, the 128B-with-32B-atom layout, or an
  // undefined layout code).
  struct Decoded;
  WSPIPE_HD static constexpr Decoded decode(std::uint64_t bits);

  friend constexpr bool operator==(const SmemDescriptor&, const SmemDescriptor&) = default;
};

struct SmemDescriptor::Decoded {
  SmemDescriptor desc;
  bool valid;
};

WSPIPE_HD constexpr SmemDescriptor::Decoded SmemDescriptor::decode(std::uint64_t bits) {
  SmemDescriptor d;
  d.start = static_cast<std::uint32_t>(bits & 0x3fffu) << 4;
  d.lbo = static_cast<std::uint32_t>((bits >> 16) & 0x3fffu) << 4;
  d.sbo = static_cast<std::uint32_t>((bits >> 32) & 0x3fffu) << 4;
  d.base_offset = static_cast<std::uint8_t>((bits >> 49) & 7u);
  d.lbo_mode = ((bits >> 52) & 1u) != 0;
  // Bits 14-15, 30-31 and 53-60 are reserved (PTX Table "Shared memory
  // descriptor"): a descriptor that sets them is not one this model reads.
  bool valid = ((bits >> 46) & 7u) == 1u && (bits & 0x1fe00000c000c000ull) == 0;
  switch ((bits >> 61) & 7u) {
    case 0: d.swizzle = SmemSwizzle::none; break;
    case 2: d.swizzle = SmemSwizzle::b128; break;
    case 4: d.swizzle = SmemSwizzle::b64; break;
    case 6: d.swizzle = SmemSwizzle::b32; break;
    default: valid = false; break;
  }
  return {d, valid};
}

// ------------------------------------------------ instruction descriptor
// tcgen05.mma kinds modelled: .kind::f16 (f16/bf16 in, f32 out) and
// .kind::f8f6f4 (e4m3/e5m2 in, f32 out).
enum class MmaKind : std::uint8_t { f16, f8f6f4 };

constexpr const char* to_string(MmaKind k) { return k == MmaKind::f16 ? "f16" : "f8f6f4"; }

// Whether `t` is an input type of `k` (f16/bf16 for f16, e4m3/e5m2 for f8f6f4).
WSPIPE_HD constexpr bool mma_input_type(MmaKind k, ElemType t) {
  return k == MmaKind::f16 ? (t == ElemType::f16 || t == ElemType::bf16)
                           : (t == ElemType::e4m3 || t == ElemType::e5m2);
}

// K of one MMA: 32 bytes of each input row.
WSPIPE_HD constexpr std::uint32_t mma_k(MmaKind k) { return k == MmaKind::f16 ? 16u : 32u; }

// The 32-bit instruction descriptor for .kind::f16 / .kind::f8f6f4 (PTX
// "Instruction descriptor"; CUTLASS UMMA::InstrDescriptor):
//   bits 0-1 sparsity selector, 2 sparsity, 3 saturate, 4-5 D format
//   (1 = f32), 7-9 A format, 10-12 B format (kind::f16: 0 f16, 1 bf16;
//   kind::f8f6f4: 0 e4m3, 1 e5m2), 13/14 negate A/B, 15/16 A/B major
//   (0 = K-major), 17-22 N >> 3, 24-28 M >> 4, 30-31 max shift (.ws only).
struct InstrDescriptor {
  ElemType a = ElemType::bf16;
  ElemType b = ElemType::bf16;
  std::uint32_t m = 128;
  std::uint32_t n = 128;
  bool negate_a = false;
  bool negate_b = false;
  bool a_mn_major = false;  // false: K-major (the layout modelled)
  bool b_mn_major = false;

  WSPIPE_HD constexpr std::uint32_t encode() const {
    return (1u << 4) | (format(a) << 7) | (format(b) << 10) | (std::uint32_t{negate_a} << 13) |
           (std::uint32_t{negate_b} << 14) | (std::uint32_t{a_mn_major} << 15) | (std::uint32_t{b_mn_major} << 16) |
           (((n >> 3) & 0x3fu) << 17) | (((m >> 4) & 0x1fu) << 24);
  }
  struct Decoded;
  // Decodes for the given kind; `valid` is false when a field has a value
  // the model does not accept (sparsity, saturate, a D format other than
  // f32, an input format outside the kind, a max shift).
  WSPIPE_HD static constexpr Decoded decode(std::uint32_t bits, MmaKind kind);

  friend constexpr bool operator==(const InstrDescriptor&, const InstrDescriptor&) = default;

 private:
  WSPIPE_HD static constexpr std::uint32_t format(ElemType t) {
    return (t == ElemType::bf16 || t == ElemType::e5m2) ? 1u : 0u;
  }
};

struct InstrDescriptor::Decoded {
  InstrDescriptor desc;
  bool valid;
};

WSPIPE_HD constexpr InstrDescriptor::Decoded InstrDescriptor::decode(std::uint32_t bits, MmaKind kind) {
  InstrDescriptor d;
  bool valid = (bits & 0xfu) == 0 && ((bits >> 4) & 3u) == 1u && ((bits >> 30) & 3u) == 0 &&
               ((bits >> 6) & 1u) == 0 && ((bits >> 23) & 1u) == 0 && ((bits >> 29) & 1u) == 0;
  const std::uint32_t fa = (bits >> 7) & 7u;
  const std::uint32_t fb = (bits >> 10) & 7u;
  valid = valid && fa <= 1 && fb <= 1;
  if (kind == MmaKind::f16) {
    d.a = fa == 1 ? ElemType::bf16 : ElemType::f16;
    d.b = fb == 1 ? ElemType::bf16 : ElemType::f16;
  } else {
    d.a = fa == 1 ? ElemType::e5m2 : ElemType::e4m3;
    d.b = fb == 1 ? ElemType::e5m2 : ElemType::e4m3;
  }
  d.negate_a = ((bits >> 13) & 1u) != 0;
  d.negate_b = ((bits >> 14) & 1u) != 0;
  d.a_mn_major = ((bits >> 15) & 1u) != 0;
  d.b_mn_major = ((bits >> 16) & 1u) != 0;
  d.n = ((bits >> 17) & 0x3fu) << 3;
  d.m = ((bits >> 24) & 0x1fu) << 4;
  return {d, valid};
}

// Dense MMA shapes (PTX "tcgen05.mma" shape table, .kind::f16 and
// .kind::f8f6f4): cta_group 1: M 64 or 128, N 8..256 step 8; cta_group 2:
// M 128 or 256, N 16..256 step 16. Returns nullptr when valid.
WSPIPE_HD constexpr const char* mma_shape_error(int cta_group, std::uint32_t m, std::uint32_t n) {
  if (cta_group == 1) {
    if (m != 64 && m != 128) return "M must be 64 or 128 for cta_group 1";
    if (n < 8 || n > 256 || n % 8 != 0) return "N must be a multiple of 8 in [8, 256] for cta_group 1";
  } else if (cta_group == 2) {
    if (m != 128 && m != 256) return "M must be 128 or 256 for cta_group 2";
    if (n < 16 || n > 256 || n % 16 != 0) return "N must be a multiple of 16 in [16, 256] for cta_group 2";
  } else {
    return "cta_group must be 1 or 2";
  }
  return nullptr;
}

}  // namespace wspipe

#include "tcgen05_fragments.hpp"
