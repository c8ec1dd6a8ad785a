// Element types of TMA boxes and tcgen05.mma operands, and their bit-exact
// conversions to and from float. Host and device code.
#pragma once

#include <cstdint>
#include <cstring>

#include "config.hpp"

namespace wspipe {

// The element types wspipe moves and multiplies. f16/bf16 are the inputs of
// tcgen05.mma .kind::f16; e4m3/e5m2 those of .kind::f8f6f4; f32 is the
// accumulator; u8/u16/u32 are raw bytes for TMA copies of anything else.
enum class ElemType : std::uint8_t { u8, u16, u32, f16, bf16, e4m3, e5m2, f32 };

WSPIPE_HD constexpr std::uint32_t elem_bytes(ElemType t) {
  switch (t) {
    case ElemType::u8:
    case ElemType::e4m3:
    case ElemType::e5m2: return 1;
    case ElemType::u16:
    case ElemType::f16:
    case ElemType::bf16: return 2;
    case ElemType::u32:
    case ElemType::f32: return 4;
  }
  return 0;
}

constexpr const char* to_string(ElemType t) {
  switch (t) {
    case ElemType::u8: return "u8";
    case ElemType::u16: return "u16";
    case ElemType::u32: return "u32";
    case ElemType::f16: return "f16";
    case ElemType::bf16: return "bf16";
    case ElemType::e4m3: return "e4m3";
    case ElemType::e5m2: return "e5m2";
    case ElemType::f32: return "f32";
  }
  return "?";
}

// ---- conversions (bit patterns <-> float). Round to nearest even; e4m3
// saturates to +-448 (its "fn" variant has no infinities), e5m2 follows
// IEEE with infinities.
//
// Every f16, bf16, e4m3 and e5m2 value is exactly a float, so decoding is
// exact. Encoding rounds once, to nearest even, subnormals included. NaN
// encodes as the format's canonical quiet NaN with the input's sign.

namespace detail {

// memcpy rather than std::bit_cast: it is also callable from device code.
template <class T>
WSPIPE_HD inline T load_unaligned(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
WSPIPE_HD inline std::uint32_t float_bits(float f) { return load_unaligned<std::uint32_t>(&f); }
WSPIPE_HD inline float float_from_bits(std::uint32_t u) { return load_unaligned<float>(&u); }

// A binary format narrower than f32 with `E` exponent and `M` mantissa bits,
// exponent bias 2^(E-1) - 1. `ieee`: the all-ones exponent holds inf and NaN
// (f16, e5m2). Otherwise it is e4m3fn (OCP FP8): only S.1111.111 is NaN, the
// rest of that exponent are normal numbers, and there is no infinity.
template <int E, int M, bool ieee>
struct MiniFloat {
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr std::uint32_t kSign = 1u << (E + M);
  static constexpr std::uint32_t kInf = ((1u << E) - 1) << M;
  static constexpr std::uint32_t kMaxFinite = ieee ? kInf - 1 : kInf | ((1u << M) - 2);
  static constexpr std::uint32_t kNaN = ieee ? kInf | (1u << (M - 1)) : kInf | ((1u << M) - 1);

  WSPIPE_HD static float decode(std::uint32_t v) {
    const std::uint32_t sign = (v & kSign) ? 0x80000000u : 0u;
    const std::uint32_t exp = (v >> M) & ((1u << E) - 1);
    const std::uint32_t man = v & ((1u << M) - 1);
    if (ieee && exp == (1u << E) - 1) return float_from_bits(sign | 0x7f800000u | (man ? 0x00400000u : 0u));
    if (!ieee && (v & ~kSign) == kNaN) return float_from_bits(sign | 0x7fc00000u);
    if (exp == 0) {
      // Subnormal: man * 2^(1 - bias - M); the scale is a normal float.
      const float scale = float_from_bits(static_cast<std::uint32_t>(127 + 1 - kBias - M) << 23);
      return float_from_bits(sign | float_bits(static_cast<float>(man) * scale));
    }
    return float_from_bits(sign | (static_cast<std::uint32_t>(static_cast<int>(exp) - kBias + 127) << 23) |
                           (man << (23 - M)));
  }

  WSPIPE_HD static std::uint32_t encode(float f) {
    const std::uint32_t u = float_bits(f);
    const std::uint32_t sign = (u & 0x80000000u) ? kSign : 0u;
    const std::uint32_t magnitude = u & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | kNaN;
    // Express |f| as sig * 2^(fexp - 150) with a 24-bit significand, then
    // count it in units of the target's spacing at that magnitude, 2^q:
    // 2^(e - M) for normals, 2^(1 - bias - M) for subnormals.
    const int fexp = magnitude >> 23 ? static_cast<int>(magnitude >> 23) : 1;
    const std::uint32_t sig = (magnitude & 0x7fffffu) | (magnitude >> 23 ? 0x800000u : 0u);
    const int e = fexp - 127;
    const bool subnormal = e < 1 - kBias;
    const int q = subnormal ? 1 - kBias - M : e - M;
    const int shift = q - (fexp - 150);  // >= 23 - M > 0
    std::uint32_t units = 0;
    if (shift < 32) {
      units = sig >> shift;
      const std::uint32_t rest = sig & ((1u << shift) - 1);
      const std::uint32_t half = 1u << (shift - 1);
      if (rest > half || (rest == half && (units & 1u))) ++units;
    }
    // A normal's `units` lies in [2^M, 2^(M+1)]: added to the biased exponent
    // less one, its implicit bit completes the exponent field, and a rounding
    // carry to 2^(M+1) bumps it (a subnormal's carry makes the least normal).
    const std::uint32_t bits = subnormal ? units : (static_cast<std::uint32_t>(e + kBias - 1) << M) + units;
    if (bits > kMaxFinite) return sign | (ieee ? kInf : kMaxFinite);
    return sign | bits;
  }
};

using F16 = MiniFloat<5, 10, true>;
using E4M3 = MiniFloat<4, 3, false>;
using E5M2 = MiniFloat<5, 2, true>;

}  // namespace detail

// An f32's bit pattern (a fragment register, an accumulator element) as the
// float it holds, and back. Fragments also read it directly: frag.f32(i).
WSPIPE_HD inline float f32_from_bits(std::uint32_t bits) { return detail::float_from_bits(bits); }
WSPIPE_HD inline std::uint32_t f32_to_bits(float f) { return detail::float_bits(f); }

WSPIPE_HD inline float f16_to_float(std::uint16_t v) { return detail::F16::decode(v); }
WSPIPE_HD inline std::uint16_t float_to_f16(float f) { return static_cast<std::uint16_t>(detail::F16::encode(f)); }

// bf16 is the top half of an f32: decoding is a shift, and encoding rounds
// the low half away (to nearest even; a carry out of the mantissa bumps the
// exponent, up to infinity).
WSPIPE_HD inline float bf16_to_float(std::uint16_t v) { return detail::float_from_bits(std::uint32_t{v} << 16); }
WSPIPE_HD inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = detail::float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

WSPIPE_HD inline float e4m3_to_float(std::uint8_t v) { return detail::E4M3::decode(v); }
WSPIPE_HD inline std::uint8_t float_to_e4m3(float f) { return static_cast<std::uint8_t>(detail::E4M3::encode(f)); }
WSPIPE_HD inline float e5m2_to_float(std::uint8_t v) { return detail::E5M2::decode(v); }
WSPIPE_HD inline std::uint8_t float_to_e5m2(float f) { return static_cast<std::uint8_t>(detail::E5M2::encode(f)); }

// The value of the element of type `t` stored at `p` (any alignment).
WSPIPE_HD inline double elem_to_double(ElemType t, const void* p) {
  using detail::load_unaligned;
  switch (t) {
    case ElemType::u8: return load_unaligned<std::uint8_t>(p);
    case ElemType::u16: return load_unaligned<std::uint16_t>(p);
    case ElemType::u32: return load_unaligned<std::uint32_t>(p);
    case ElemType::f16: return f16_to_float(load_unaligned<std::uint16_t>(p));
    case ElemType::bf16: return bf16_to_float(load_unaligned<std::uint16_t>(p));
    case ElemType::e4m3: return e4m3_to_float(load_unaligned<std::uint8_t>(p));
    case ElemType::e5m2: return e5m2_to_float(load_unaligned<std::uint8_t>(p));
    case ElemType::f32: return load_unaligned<float>(p);
  }
  return 0;
}

}  // namespace wspipe
