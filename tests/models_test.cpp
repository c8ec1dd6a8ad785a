// The functional models of tcgen05 and TMA (backends/emu/runtime/models.hpp) and the
// value types they rest on (core/numeric.hpp, core/tcgen05.hpp), checked
// against references written from the format and layout definitions rather
// than from the code under test.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/emu/emulator.hpp"
#include "backends/emu/runtime/models.hpp"

namespace {

using namespace wspipe;
using namespace wspipe::emu::model;

constexpr ElemType kFloatTypes[] = {ElemType::f16, ElemType::bf16, ElemType::e4m3, ElemType::e5m2};

float decode(ElemType t, std::uint32_t bits) {
  switch (t) {
    case ElemType::f16: return f16_to_float(static_cast<std::uint16_t>(bits));
    case ElemType::bf16: return bf16_to_float(static_cast<std::uint16_t>(bits));
    case ElemType::e4m3: return e4m3_to_float(static_cast<std::uint8_t>(bits));
    default: return e5m2_to_float(static_cast<std::uint8_t>(bits));
  }
}

std::uint32_t encode(ElemType t, float f) {
  switch (t) {
    case ElemType::f16: return float_to_f16(f);
    case ElemType::bf16: return float_to_bf16(f);
    case ElemType::e4m3: return float_to_e4m3(f);
    default: return float_to_e5m2(f);
  }
}

// ---------------------------------------------------------------- numeric
// The formats from their definitions: IEEE 754 binary16 and bfloat16, OCP
// FP8 E5M2 (IEEE-like) and E4M3FN (no infinities; S.1111.111 is NaN).
struct Format {
  int e, m;
  bool ieee;
  int bias() const { return (1 << (e - 1)) - 1; }
  std::uint32_t inf() const { return ((1u << e) - 1) << m; }
  std::uint32_t max_finite() const { return ieee ? inf() - 1 : inf() | ((1u << m) - 2); }
  std::uint32_t sign() const { return 1u << (e + m); }
};

Format format_of(ElemType t) {
  switch (t) {
    case ElemType::f16: return {5, 10, true};
    case ElemType::bf16: return {8, 7, true};
    case ElemType::e4m3: return {4, 3, false};
    default: return {5, 2, true};
  }
}

double field_value(Format f, std::uint32_t bits) {
  const bool neg = (bits & f.sign()) != 0;
  const std::uint32_t exp = (bits >> f.m) & ((1u << f.e) - 1);
  const std::uint32_t man = bits & ((1u << f.m) - 1);
  const bool top_exp = exp == (1u << f.e) - 1;
  if (f.ieee && top_exp) return man ? NAN : (neg ? -INFINITY : INFINITY);
  if (!f.ieee && top_exp && man == (1u << f.m) - 1) return NAN;
  const double v = exp == 0 ? std::ldexp(man, 1 - f.bias() - f.m)
                            : std::ldexp(man + (1u << f.m), static_cast<int>(exp) - f.bias() - f.m);
  return neg ? -v : v;
}

// Round to nearest, ties to even, by search over the format's values. Past
// the largest finite value: IEEE formats round to infinity from the midpoint
// to 2^(emax+1) on; E4M3FN saturates.
std::uint32_t reference_encode(Format f, float x) {
  const std::uint32_t sign = std::signbit(x) ? f.sign() : 0u;
  const double ax = std::fabs(static_cast<double>(x));
  const std::uint32_t top = f.max_finite();
  if (ax >= field_value(f, top)) {
    if (!f.ieee || ax == field_value(f, top)) return sign | top;
    const double beyond = std::ldexp(1.0, f.bias() + 1);
    return sign | (ax >= (field_value(f, top) + beyond) / 2 ? f.inf() : top);
  }
  std::uint32_t lo = 0, hi = top;  // value(lo) <= ax < value(hi)
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    (field_value(f, mid) <= ax ? lo : hi) = mid;
  }
  const double mid = (field_value(f, lo) + field_value(f, hi)) / 2;  // exact in double
  if (ax < mid) return sign | lo;
  if (ax > mid) return sign | hi;
  return sign | (lo % 2 == 0 ? lo : hi);
}

TEST(models_numeric, DecodingMatchesTheFormatDefinitions) {
  for (ElemType t : kFloatTypes) {
    const Format f = format_of(t);
    for (std::uint32_t bits = 0; bits < (2u << (f.e + f.m)); ++bits) {
      const double want = field_value(f, bits);
      const float got = decode(t, bits);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << to_string(t) << " " << bits;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << to_string(t) << " " << bits;
        EXPECT_EQ(std::signbit(got), (bits & f.sign()) != 0) << to_string(t) << " " << bits;
      }
    }
  }
}

TEST(models_numeric, EveryPatternRoundTripsThroughFloat) {
  for (ElemType t : kFloatTypes) {
    const Format f = format_of(t);
    for (std::uint32_t bits = 0; bits < (2u << (f.e + f.m)); ++bits) {
      const float v = decode(t, bits);
      if (std::isnan(v))
        EXPECT_TRUE(std::isnan(decode(t, encode(t, v)))) << to_string(t) << " " << bits;
      else
        EXPECT_EQ(encode(t, v), bits) << to_string(t) << " " << bits;
    }
  }
}

TEST(models_numeric, KnownValues) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
  EXPECT_EQ(e5m2_to_float(0x3c), 1.0f);
  EXPECT_EQ(e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e5m2_to_float(0x7c), INFINITY);

  const std::uint16_t h = 0xbc00;  // -1 in f16
  const std::uint8_t q = 0x7e;     // 448 in e4m3
  const float x = 2.5f;
  EXPECT_EQ(elem_to_double(ElemType::f16, &h), -1.0);
  EXPECT_EQ(elem_to_double(ElemType::e4m3, &q), 448.0);
  EXPECT_EQ(elem_to_double(ElemType::f32, &x), 2.5);
  EXPECT_EQ(elem_to_double(ElemType::u16, &h), 0xbc00);
}

TEST(models_numeric, RoundsTiesToEvenAndSaturatesE4m3) {
  // Ties between neighbours go to the even mantissa.
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // 1 | 1+2^-10
  EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // 1+2^-10 | 1+2^-9
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);             // half the least subnormal
  EXPECT_EQ(float_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);      // 0 | 2^-9
  EXPECT_EQ(float_to_e4m3(3 * std::ldexp(1.0f, -10)), 0x02);  // 2^-9 | 2^-8
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);                    // 1 | 1.125
  EXPECT_EQ(float_to_e5m2(1.125f), 0x3c);                     // 1 | 1.25
  // Overflow: e4m3 saturates (it has no infinity); f16 and e5m2 round to
  // infinity from the midpoint to 2^(emax+1) on.
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3(1e9f), 0x7e);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_e4m3(NAN), 0x7f);
  EXPECT_EQ(float_to_e5m2(61439.0f), 0x7b);
  EXPECT_EQ(float_to_e5m2(61440.0f), 0x7c);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);
}

RC_GTEST_PROP(models_numeric, EncodingRoundsToNearestEven, ()) {
  float x;
  if (*rc::gen::arbitrary<bool>()) {
    x = std::bit_cast<float>(*rc::gen::arbitrary<std::uint32_t>());
  } else {  // mostly within the narrow formats' ranges
    const auto man = *rc::gen::inRange<std::uint32_t>(0, 1u << 24);
    const auto exp = *rc::gen::inRange(-40, 20);
    x = std::ldexp(static_cast<float>(man), exp - 24) * (*rc::gen::arbitrary<bool>() ? -1.0f : 1.0f);
  }
  RC_PRE(!std::isnan(x));
  for (ElemType t : kFloatTypes) RC_ASSERT(encode(t, x) == reference_encode(format_of(t), x));
}

// ------------------------------------------------------------ descriptors
RC_GTEST_PROP(models_descriptors, SmemDescriptorRoundTrips, ()) {
  SmemDescriptor d;
  d.start = *rc::gen::inRange<std::uint32_t>(0, 1u << 14) << 4;
  d.lbo = *rc::gen::inRange<std::uint32_t>(0, 1u << 14) << 4;
  d.sbo = *rc::gen::inRange<std::uint32_t>(0, 1u << 14) << 4;
  d.swizzle = *rc::gen::element(SmemSwizzle::none, SmemSwizzle::b32, SmemSwizzle::b64, SmemSwizzle::b128);
  d.base_offset = *rc::gen::inRange<std::uint8_t>(0, 8);
  d.lbo_mode = *rc::gen::arbitrary<bool>();
  const auto back = SmemDescriptor::decode(d.encode());
  RC_ASSERT(back.valid);
  RC_ASSERT(back.desc == d);
}

TEST(models_descriptors, SmemDescriptorKnownValueAndBadBits) {
  // 128B-swizzled K-major tile at 1024, SBO = 8 rows of 128 bytes, LBO
  // "assumed 1" (PTX 9.7.16.4.1, Table 40).
  const SmemDescriptor d{.start = 1024, .lbo = 16, .sbo = 1024, .swizzle = SmemSwizzle::b128};
  EXPECT_EQ(d.encode(), 0x4000404000010040ull);
  const std::uint64_t bits = d.encode();
  for (std::uint64_t version = 0; version < 8; ++version)
    EXPECT_EQ(SmemDescriptor::decode((bits & ~(std::uint64_t{7} << 46)) | version << 46).valid, version == 1);
  for (std::uint64_t layout = 0; layout < 8; ++layout)
    EXPECT_EQ(SmemDescriptor::decode((bits & ~(std::uint64_t{7} << 61)) | layout << 61).valid,
              layout == 0 || layout == 2 || layout == 4 || layout == 6);
}

RC_GTEST_PROP(models_descriptors, InstrDescriptorRoundTrips, ()) {
  const MmaKind kind = *rc::gen::element(MmaKind::f16, MmaKind::f8f6f4);
  const auto type = [&] {
    return kind == MmaKind::f16 ? *rc::gen::element(ElemType::f16, ElemType::bf16)
                                : *rc::gen::element(ElemType::e4m3, ElemType::e5m2);
  };
  InstrDescriptor d;
  d.a = type();
  d.b = type();
  d.m = *rc::gen::inRange<std::uint32_t>(1, 32) * 16;
  d.n = *rc::gen::inRange<std::uint32_t>(1, 64) * 8;
  d.negate_a = *rc::gen::arbitrary<bool>();
  d.negate_b = *rc::gen::arbitrary<bool>();
  d.a_mn_major = *rc::gen::arbitrary<bool>();
  d.b_mn_major = *rc::gen::arbitrary<bool>();
  const auto back = InstrDescriptor::decode(d.encode(), kind);
  RC_ASSERT(back.valid);
  RC_ASSERT(back.desc == d);
}

TEST(models_descriptors, InstrDescriptorKnownValuesAndBadBits) {
  // From PTX Table 42 (CUTLASS UMMA::InstrDescriptor): D f32 (bit 4), A and B
  // bf16 (bits 7, 10), N >> 3 = 32 at bit 17, M >> 4 = 8 at bit 24.
  const InstrDescriptor bf16{.a = ElemType::bf16, .b = ElemType::bf16, .m = 128, .n = 256};
  EXPECT_EQ(bf16.encode(), 0x08400490u);
  const InstrDescriptor e4m3{.a = ElemType::e4m3, .b = ElemType::e5m2, .m = 64, .n = 8, .negate_b = true};
  EXPECT_EQ(e4m3.encode(), 0x04024410u);
  EXPECT_TRUE(InstrDescriptor::decode(e4m3.encode(), MmaKind::f8f6f4).valid);

  const std::uint32_t good = bf16.encode();
  for (int bit : {0, 1, 2, 3, 6, 23, 29, 30, 31})
    EXPECT_FALSE(InstrDescriptor::decode(good | 1u << bit, MmaKind::f16).valid) << bit;
  for (std::uint32_t dfmt : {0u, 2u, 3u})
    EXPECT_FALSE(InstrDescriptor::decode((good & ~(3u << 4)) | dfmt << 4, MmaKind::f16).valid) << dfmt;
  for (int shift : {7, 10})
    for (std::uint32_t fmt = 2; fmt < 8; ++fmt)
      EXPECT_FALSE(InstrDescriptor::decode((good & ~(7u << shift)) | fmt << shift, MmaKind::f8f6f4).valid);
}

// -------------------------------------------------------------- fragments
constexpr TmemShape kShapes[] = {TmemShape::s32x32b, TmemShape::s16x64b, TmemShape::s16x128b, TmemShape::s16x256b,
                                 TmemShape::s16x32bx2};

TEST(models_fragments, EachAccessCoversItsCellsOnce) {
  for (TmemShape s : kShapes) {
    for (std::uint32_t num = 1; num <= 128; num *= 2) {
      if (!tmem_num_valid(s, num)) continue;
      // 16x32bx2 with its halves adjacent (immHalfSplitoff = num) covers a
      // rectangle like the other shapes.
      const std::uint32_t width = s == TmemShape::s16x32bx2 ? 2 * num : num * tmem_shape_cols(s);
      std::set<std::pair<std::uint32_t, std::uint32_t>> cells;
      for (std::uint32_t t = 0; t < 32; ++t)
        for (std::uint32_t r = 0; r < tmem_regs(s, num); ++r) {
          const TmemCell c = tmem_frag_cell(s, num, t, r, num);
          EXPECT_LT(c.lane, tmem_shape_lanes(s)) << to_string(s) << ".x" << num;
          EXPECT_LT(c.col, width) << to_string(s) << ".x" << num;
          cells.insert({c.lane, c.col});
        }
      EXPECT_EQ(cells.size(), 32 * tmem_regs(s, num)) << to_string(s) << ".x" << num << ": not injective";
      EXPECT_EQ(cells.size(), tmem_shape_lanes(s) * width) << to_string(s) << ".x" << num;
    }
  }
  EXPECT_FALSE(tmem_num_valid(TmemShape::s16x256b, 64));
  EXPECT_FALSE(tmem_num_valid(TmemShape::s16x128b, 128));
  EXPECT_FALSE(tmem_num_valid(TmemShape::s32x32b, 3));
}

TEST(models_fragments, MatchesCutlassCopyTraits) {
  // Cells read off copy_traits_sm100.hpp's DstLayouts by hand.
  const auto cell = [](TmemShape s, std::uint32_t num, std::uint32_t t, std::uint32_t r, std::uint32_t split = 0) {
    const TmemCell c = tmem_frag_cell(s, num, t, r, split);
    return std::pair{c.lane, c.col};
  };
  using P = std::pair<std::uint32_t, std::uint32_t>;
  EXPECT_EQ(cell(TmemShape::s32x32b, 4, 7, 3), P(7, 3));
  // 16dp64b1x: ((2,2,8),32):((512,32,64),1) over 64-bit lanes.
  EXPECT_EQ(cell(TmemShape::s16x64b, 1, 0, 0), P(0, 0));
  EXPECT_EQ(cell(TmemShape::s16x64b, 1, 1, 0), P(8, 0));
  EXPECT_EQ(cell(TmemShape::s16x64b, 1, 2, 0), P(0, 1));
  EXPECT_EQ(cell(TmemShape::s16x64b, 1, 3, 0), P(8, 1));
  EXPECT_EQ(cell(TmemShape::s16x64b, 1, 4, 0), P(1, 0));
  EXPECT_EQ(cell(TmemShape::s16x64b, 2, 1, 1), P(8, 2));
  // 16dp128b1x: ((4,8),(32,2)):((32,128),(1,1024)) over 128-bit lanes.
  EXPECT_EQ(cell(TmemShape::s16x128b, 1, 5, 1), P(9, 1));
  EXPECT_EQ(cell(TmemShape::s16x128b, 2, 5, 2), P(1, 5));
  // 16dp256b1x: ((4,8),(64,2)):((64,256),(1,2048)) over 256-bit lanes.
  EXPECT_EQ(cell(TmemShape::s16x256b, 1, 6, 3), P(9, 5));
  EXPECT_EQ(cell(TmemShape::s16x256b, 2, 6, 4), P(1, 12));
  // 16x32bx2: the upper half-warp reads immHalfSplitoff columns further.
  EXPECT_EQ(cell(TmemShape::s16x32bx2, 4, 17, 2, 64), P(1, 66));
  EXPECT_EQ(cell(TmemShape::s16x32bx2, 4, 15, 2, 64), P(15, 2));
}

// -------------------------------------------------------------------- TMA
struct alignas(16) Chunk {
  std::byte b[16];
};

// A global buffer of `bytes`, 16-byte aligned as TMA requires.
struct Global {
  std::vector<Chunk> chunks;
  explicit Global(std::size_t bytes) : chunks((bytes + 15) / 16) {}
  std::byte* data() { return chunks.data()->b; }
  const std::byte* data() const { return chunks.data()->b; }
};

TEST(models_tma, FillsOutOfBoundsElementsWithZeros) {
  // A 10 x 20 u16 tensor with rows padded to 48 bytes, element (r, c) = 100r + c + 1.
  // Box origins on 16-byte boundaries of the row, as the TMA unit requires
  // (tma_coord_error; the World reports others).
  Global g(10 * 48);
  for (std::uint16_t r = 0; r < 10; ++r)
    for (std::uint16_t c = 0; c < 20; ++c) {
      const std::uint16_t v = static_cast<std::uint16_t>(100 * r + c + 1);
      std::memcpy(g.data() + r * 48 + c * 2, &v, 2);
    }
  TensorMap m{.global = g.data(), .dtype = ElemType::u16, .rank = 2, .dims = {20, 10}, .strides = {2, 48},
              .box = {16, 8}};
  std::vector<std::byte> smem(2048, std::byte{0xab});
  const std::uint32_t dst = 256;
  ASSERT_EQ(tma_check(m, dst, smem.size()), "");
  for (const TmaCoords at : {TmaCoords{{-8, -3}}, TmaCoords{{8, 6}}, TmaCoords{{0, 1}}}) {
    std::fill(smem.begin(), smem.end(), std::byte{0xab});
    tma_copy(m, at, smem.data(), dst);
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 16; ++c) {
        const int gr = at.c[1] + r, gc = at.c[0] + c;
        const bool inside = gr >= 0 && gr < 10 && gc >= 0 && gc < 20;
        std::uint16_t got;
        std::memcpy(&got, smem.data() + dst + (r * 16 + c) * 2, 2);
        EXPECT_EQ(got, inside ? 100 * gr + gc + 1 : 0) << r << "," << c;
      }
    for (std::size_t i = 0; i < smem.size(); ++i)
      if (i < dst || i >= dst + tma_box_bytes(m)) {
        ASSERT_EQ(smem[i], std::byte{0xab}) << i;
      }
  }

  // Rank 3: a box hanging off the outer dimension at both ends.
  Global g3(2 * 3 * 16);
  for (int i = 0; i < 2 * 3 * 16; ++i) g3.data()[i] = std::byte(i + 1);
  TensorMap m3{.global = g3.data(), .dtype = ElemType::u8, .rank = 3, .dims = {16, 3, 2}, .strides = {1, 16, 48},
               .box = {16, 2, 3}};
  ASSERT_EQ(tma_check(m3, 0, smem.size()), "");
  tma_copy(m3, TmaCoords{{0, 2, -1}}, smem.data(), 0);
  for (int z = 0; z < 3; ++z)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 16; ++x) {
        const int gz = z - 1, gy = y + 2;
        const bool inside = gz >= 0 && gz < 2 && gy < 3;
        EXPECT_EQ(smem[(z * 2 + y) * 16 + x], inside ? std::byte(gz * 48 + gy * 16 + x + 1) : std::byte{0});
      }
}

TEST(models_tma, SwizzlesEachChunkByItsAbsoluteAddress) {
  for (SmemSwizzle s : {SmemSwizzle::b32, SmemSwizzle::b64, SmemSwizzle::b128}) {
    const std::uint32_t w = swizzle_bytes(s);
    Global g(64 * w);
    for (std::uint32_t i = 0; i < 64 * w; ++i) g.data()[i] = std::byte(i * 7 + i / 251);
    const TensorMap m{.global = g.data(), .dtype = ElemType::u8, .rank = 2, .dims = {w, 64}, .strides = {1, w},
                      .box = {w, 64}, .swizzle = s};
    std::vector<std::byte> smem(64 * w + 2048);
    const std::uint32_t dst = 8 * w * 2;  // two swizzle repeats in
    ASSERT_EQ(tma_check(m, dst, smem.size()), "") << to_string(s);
    tma_copy(m, TmaCoords{}, smem.data(), dst);
    for (std::uint32_t row = 0; row < 64; ++row)
      for (std::uint32_t col = 0; col < w; ++col)
        ASSERT_EQ(smem[swizzle_address(s, dst + row * w + col)], g.data()[row * w + col])
            << to_string(s) << " " << row << "," << col;
  }
  // By hand: 128B swizzle, row 1's first chunk moves to chunk 1 of its row.
  EXPECT_EQ(swizzle_address(SmemSwizzle::b128, 1024 + 128), 1024u + 128 + 16);
  EXPECT_EQ(swizzle_address(SmemSwizzle::b32, 256 + 128 + 5), 256u + 128 + 16 + 5);
}

TEST(models_tma, CheckRejectsBadMapsAndDestinations) {
  Global g(4096);
  const TensorMap good{.global = g.data(), .dtype = ElemType::bf16, .rank = 2, .dims = {64, 32},
                       .strides = {2, 128}, .box = {64, 16}, .swizzle = SmemSwizzle::b128};
  EXPECT_EQ(tma_check(good, 1024, 4096), "");
  EXPECT_NE(tma_check(good, 512, 8192).find("1024-byte aligned"), std::string::npos);
  EXPECT_NE(tma_check(good, 2048, 4095).find("does not fit"), std::string::npos);

  TensorMap m = good;
  m.global = nullptr;
  EXPECT_NE(tma_check(m, 0, 4096), "");
  m = good;
  m.box[0] = 128;  // 256 bytes, wider than the 128-byte swizzle
  EXPECT_NE(tma_check(m, 0, 65536).find("swizzle width"), std::string::npos);
  m = good;
  m.swizzle = SmemSwizzle::none;
  EXPECT_EQ(tma_check(m, 128, 4096), "");
  EXPECT_NE(tma_check(m, 64, 4096).find("128-byte aligned"), std::string::npos);
  m.rank = 0;
  EXPECT_NE(tma_check(m, 0, 4096), "");
  // 256^4 bytes: more than 32 bits can count.
  const TensorMap huge{.global = g.data(), .dtype = ElemType::u8, .rank = 4, .dims = {256, 256, 256, 256},
                       .strides = {1, 256, 65536, 16777216}, .box = {256, 256, 256, 256}};
  EXPECT_NE(tma_check(huge, 0, 1u << 20).find("does not fit"), std::string::npos);
}

// -------------------------------------------------------------------- MMA
TEST(models_mma, OperandOffsetFollowsTheCanonicalLayouts) {
  // No swizzle: 8-row x 16-byte core matrices, LBO along K, SBO along rows.
  const SmemDescriptor plain{.start = 1024, .lbo = 128, .sbo = 512};
  EXPECT_EQ(operand_offset(plain, 9, 17), 1024u + 512 + 128 + 16 + 1);
  // 128B swizzle, start advanced 32 bytes into the row: row 3 byte 5 is
  // logical 1024 + 32 + 3*128 + 5 = 0x5a5, whose chunk (2) is XOR-ed with
  // row bits 7-9 (3): 0x595.
  const SmemDescriptor sw{.start = 1024 + 32, .lbo = 16, .sbo = 1024, .swizzle = SmemSwizzle::b128};
  EXPECT_EQ(operand_offset(sw, 3, 5), 0x595u);
  EXPECT_EQ(operand_offset(sw, 11, 5), 0x595u + 1024);
}

// A tcgen05.mma problem set up the way a kernel sets it up: A (M x K) and B
// (N x K) row-major in global memory, their K-major tiles in each CTA's
// shared memory (TMA with swizzle, boxes one swizzle row wide; the
// core-matrix layout written by hand without), and the descriptors of the
// successive K / 32-byte MMAs.
struct Problem {
  static constexpr std::uint32_t kBytesK = 256;  // bytes of K per row: 8 MMAs

  ElemType ta, tb;
  int g;
  std::uint32_t m, n;
  SmemSwizzle sw;
  bool negate_a, negate_b;
  Global ga, gb;
  std::uint32_t a_base = 0, b_base = 0;
  std::vector<std::vector<std::byte>> smem;

  Problem(ElemType a_type, ElemType b_type, int cta_group, std::uint32_t rows_m, std::uint32_t rows_n, SmemSwizzle s,
          std::uint32_t seed)
      : ta(a_type), tb(b_type), g(cta_group), m(rows_m), n(rows_n), sw(s), negate_a(seed % 3 == 1),
        negate_b(seed % 5 == 2), ga(rows_m * kBytesK), gb(rows_n * kBytesK) {
    std::mt19937 rng(seed);
    fill(ga, ta, m, rng);
    fill(gb, tb, n, rng);
    b_base = (rows_a() * kBytesK + 1023) / 1024 * 1024;
    smem.assign(static_cast<std::size_t>(g), std::vector<std::byte>(b_base + rows_b() * kBytesK));
    for (int r = 0; r < g; ++r) {
      place(ga, ta, rows_a(), static_cast<std::uint32_t>(r) * rows_a(), a_base, /*k_outer=*/false, smem[r]);
      place(gb, tb, rows_b(), static_cast<std::uint32_t>(r) * rows_b(), b_base, /*k_outer=*/true, smem[r]);
    }
  }

  std::uint32_t rows_a() const { return m / static_cast<std::uint32_t>(g); }
  std::uint32_t rows_b() const { return n / static_cast<std::uint32_t>(g); }
  std::uint32_t mmas() const { return kBytesK / 32; }

  // Values of moderate magnitude (or zero), so that every element of D
  // matters to the norm the comparison takes.
  static void fill(Global& gl, ElemType t, std::uint32_t rows, std::mt19937& rng) {
    const std::uint32_t eb = elem_bytes(t);
    for (std::uint32_t i = 0; i < rows * kBytesK; i += eb) {
      std::uint32_t bits;
      double v;
      do {
        bits = rng() & (eb == 1 ? 0xffu : 0xffffu);
        v = decode(t, bits);
      } while (!(v == 0 || (std::fabs(v) >= 1.0 / 64 && std::fabs(v) <= 64)));
      std::memcpy(gl.data() + i, &bits, eb);
    }
  }

  // No swizzle: k_outer stacks all row groups of one 16-byte K slice before
  // the next (LBO = rows * 16, SBO = 128); otherwise a row group's K slices
  // are adjacent (LBO = 128, SBO = K bytes * 8).
  static SmemDescriptor plain_desc(std::uint32_t base, std::uint32_t rows, bool k_outer) {
    return k_outer ? SmemDescriptor{.start = base, .lbo = rows * 16, .sbo = 128}
                   : SmemDescriptor{.start = base, .lbo = 128, .sbo = kBytesK * 8};
  }

  void place(const Global& gl, ElemType t, std::uint32_t rows, std::uint32_t first_row, std::uint32_t base, bool k_outer,
             std::vector<std::byte>& s) const {
    if (sw == SmemSwizzle::none) {
      const SmemDescriptor d = plain_desc(base, rows, k_outer);
      for (std::uint32_t row = 0; row < rows; ++row)
        for (std::uint32_t kb = 0; kb < kBytesK; ++kb)
          s[base + (row / 8) * d.sbo + (kb / 16) * d.lbo + (row % 8) * 16 + kb % 16] =
              gl.data()[(first_row + row) * kBytesK + kb];
      return;
    }
    const std::uint32_t w = swizzle_bytes(sw), eb = elem_bytes(t);
    const TensorMap map{.global = gl.data(), .dtype = t, .rank = 2, .dims = {kBytesK / eb, rows * g},
                        .strides = {eb, kBytesK}, .box = {w / eb, rows}, .swizzle = sw};
    for (std::uint32_t block = 0; block < kBytesK / w; ++block) {
      const std::uint32_t dst = base + block * rows * w;
      ASSERT_EQ(tma_check(map, dst, s.size()), "");
      tma_copy(map, TmaCoords{{static_cast<std::int32_t>(block * w / eb), static_cast<std::int32_t>(first_row)}},
               s.data(), dst);
    }
  }

  // The descriptor of MMA j: 32 bytes further along K, inside a swizzled
  // row (the next TMA box every W / 32 MMAs) or two core matrices on.
  std::uint64_t desc(std::uint32_t base, std::uint32_t rows, bool k_outer, std::uint32_t j) const {
    const std::uint32_t kb = j * 32;
    if (sw == SmemSwizzle::none) {
      SmemDescriptor d = plain_desc(base, rows, k_outer);
      d.start += (kb / 16) * d.lbo;
      return d.encode();
    }
    const std::uint32_t w = swizzle_bytes(sw);
    return SmemDescriptor{.start = base + kb / w * rows * w + kb % w, .lbo = 16, .sbo = 8 * w, .swizzle = sw}
        .encode();
  }

  MmaJob job(std::uint32_t j, std::uint32_t d_tmem) const {
    const InstrDescriptor i{.a = ta, .b = tb, .m = m, .n = n, .negate_a = negate_a, .negate_b = negate_b};
    return {.kind = ta == ElemType::f16 || ta == ElemType::bf16 ? MmaKind::f16 : MmaKind::f8f6f4,
            .cta_group = g,
            .d_tmem = d_tmem,
            .a_desc = desc(a_base, rows_a(), false, j),
            .b_desc = desc(b_base, rows_b(), true, j),
            .idesc = i.encode(),
            .accumulate = j > 0};
  }

  double reference(std::uint32_t row, std::uint32_t col) const {
    const std::uint32_t ea = elem_bytes(ta), eb = elem_bytes(tb);
    double sum = 0;
    for (std::uint32_t k = 0; k < kBytesK / ea; ++k)
      sum += elem_to_double(ta, ga.data() + row * kBytesK + k * ea) *
             elem_to_double(tb, gb.data() + col * kBytesK + k * eb);
    return (negate_a != negate_b) ? -sum : sum;
  }
};

// D's element (row, col) in the pair's TMEM, per PTX 9.7.16.10.5 "Data Path
// Layout Organization" (written here independently of the model).
float read_d(const Problem& p, const std::vector<std::vector<std::uint32_t>>& tmem, std::uint32_t d_tmem,
             std::uint32_t row, std::uint32_t col) {
  const std::uint32_t lane0 = tmem_lane(d_tmem), col0 = tmem_col(d_tmem);
  std::size_t cta = 0;
  std::uint32_t lane = row, c = col0 + col;
  if (p.g == 1 && p.m == 64) {  // Layout F
    lane = (row / 16) * 32 + row % 16 + lane0;
  } else if (p.g == 2 && p.m == 256) {  // Layout A
    cta = row / 128;
    lane = row % 128;
  } else if (p.g == 2) {  // Layout B: 64 rows per CTA, column halves in lane halves
    cta = row / 64;
    lane = row % 64 + 64 * (col / (p.n / 2));
    c = col0 + col % (p.n / 2);
  }
  return std::bit_cast<float>(tmem[cta][lane * kTmemColumns + c]);
}

constexpr std::uint32_t kPoison = 0x7fbadbadu;  // a NaN

struct MmaCase {
  ElemType a, b;
  int cta_group;
  std::uint32_t m, n;
  SmemSwizzle swizzle;
};

std::string describe(const MmaCase& c) {
  return std::string(to_string(c.a)) + "_" + to_string(c.b) + "_cta" + std::to_string(c.cta_group) + "_m" +
         std::to_string(c.m) + "_n" + std::to_string(c.n) + "_sw" + std::to_string(swizzle_bytes(c.swizzle));
}
std::string case_name(const testing::TestParamInfo<MmaCase>& info) { return describe(info.param); }
void PrintTo(const MmaCase& c, std::ostream* os) { *os << describe(c); }

std::vector<MmaCase> all_cases() {
  std::vector<MmaCase> cases;
  const std::pair<ElemType, ElemType> types[] = {{ElemType::f16, ElemType::f16},
                                                 {ElemType::bf16, ElemType::bf16},
                                                 {ElemType::e4m3, ElemType::e4m3},
                                                 {ElemType::e5m2, ElemType::e5m2},
                                                 {ElemType::e5m2, ElemType::e4m3}};
  for (const auto& [a, b] : types)
    for (SmemSwizzle s : {SmemSwizzle::none, SmemSwizzle::b32, SmemSwizzle::b64, SmemSwizzle::b128}) {
      for (std::uint32_t m : {64u, 128u})
        for (std::uint32_t n : {8u, 120u, 256u}) cases.push_back({a, b, 1, m, n, s});
      for (std::uint32_t m : {128u, 256u})
        for (std::uint32_t n : {16u, 112u, 256u}) cases.push_back({a, b, 2, m, n, s});
    }
  return cases;
}

class models_mma_reference : public testing::TestWithParam<MmaCase> {};

TEST_P(models_mma_reference, MatchesDoublePrecision) {
  const MmaCase& c = GetParam();
  const Problem p(c.a, c.b, c.cta_group, c.m, c.n, c.swizzle, c.m * 1000 + c.n + swizzle_bytes(c.swizzle));
  // M = 64 uses either lane alignment of Layout F.
  const std::uint32_t d_tmem = tmem_addr(c.cta_group == 1 && c.m == 64 && c.n != 8 ? 16 : 0, 32);
  std::vector<std::vector<std::uint32_t>> tmem(static_cast<std::size_t>(c.cta_group),
                                               std::vector<std::uint32_t>(kTmemLanes * kTmemColumns, kPoison));
  std::vector<CtaMem> ctas;
  for (int r = 0; r < c.cta_group; ++r) ctas.push_back({p.smem[r].data(), p.smem[r].size(), tmem[r].data()});

  for (std::uint32_t j = 0; j < p.mmas(); ++j) {
    const MmaJob job = p.job(j, d_tmem);
    ASSERT_EQ(mma_check(job, p.smem[0].size()), "") << "MMA " << j;
    mma_execute(job, ctas.data());
  }

  double err = 0, norm = 0;
  for (std::uint32_t row = 0; row < c.m; ++row)
    for (std::uint32_t col = 0; col < c.n; ++col) {
      const double want = p.reference(row, col);
      const double got = read_d(p, tmem, d_tmem, row, col);
      ASSERT_TRUE(std::isfinite(got)) << row << "," << col;
      err += (got - want) * (got - want);
      norm += want * want;
    }
  ASSERT_GT(norm, 0);
  EXPECT_LT(std::sqrt(err / norm), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(models, models_mma_reference, testing::ValuesIn(all_cases()), case_name);

// Bit for bit what the model promises (runtime/models.hpp): per MMA, each element's
// K products of the negated, decoded operands summed in double in k order
// from zero, plus the old D when accumulating, rounded to f32 once. The
// same with a memo, on its first pass (misses) and its second (hits), and
// a changed operand byte is a miss, not a stale hit.
TEST_P(models_mma_reference, IsBitExactWithAndWithoutTheMemo) {
  const MmaCase& c = GetParam();
  Problem p(c.a, c.b, c.cta_group, c.m, c.n, c.swizzle, c.m * 7 + c.n + swizzle_bytes(c.swizzle));
  const std::uint32_t d_tmem = tmem_addr(c.cta_group == 1 && c.m == 64 && c.n != 8 ? 16 : 0, 32);
  const std::uint32_t ea = elem_bytes(c.a), eb = elem_bytes(c.b);
  const auto value = [](ElemType t, const std::uint8_t* at, bool negate) {
    const double v = elem_to_double(t, at);
    return negate ? -v : v;
  };
  // want[row * N + col] after MMAs 0 .. j.
  const auto expected = [&](std::uint32_t mmas) {
    std::vector<float> want(std::size_t{c.m} * c.n, 0.0f);
    for (std::uint32_t j = 0; j < mmas; ++j)
      for (std::uint32_t row = 0; row < c.m; ++row)
        for (std::uint32_t col = 0; col < c.n; ++col) {
          double sum = 0;
          for (std::uint32_t kb = 0; kb < 32; kb += ea) {
            const std::uint32_t kk = kb / ea;  // element kk of this MMA's K slice
            sum += value(c.a, reinterpret_cast<const std::uint8_t*>(p.ga.data()) + row * Problem::kBytesK + j * 32 + kb,
                         p.negate_a) *
                   value(c.b, reinterpret_cast<const std::uint8_t*>(p.gb.data()) + col * Problem::kBytesK + j * 32 +
                                  kk * eb,
                         p.negate_b);
          }
          float& d = want[std::size_t{row} * c.n + col];
          if (j > 0) sum += d;
          d = static_cast<float>(sum);
        }
    return want;
  };
  const auto run = [&](MmaMemo* memo) {
    std::vector<std::vector<std::uint32_t>> tmem(static_cast<std::size_t>(c.cta_group),
                                                 std::vector<std::uint32_t>(kTmemLanes * kTmemColumns, kPoison));
    std::vector<CtaMem> ctas;
    for (int r = 0; r < c.cta_group; ++r) ctas.push_back({p.smem[r].data(), p.smem[r].size(), tmem[r].data()});
    for (std::uint32_t j = 0; j < p.mmas(); ++j) mma_execute(p.job(j, d_tmem), ctas.data(), memo);
    std::vector<float> got(std::size_t{c.m} * c.n);
    for (std::uint32_t row = 0; row < c.m; ++row)
      for (std::uint32_t col = 0; col < c.n; ++col) got[std::size_t{row} * c.n + col] = read_d(p, tmem, d_tmem, row, col);
    return got;
  };
  const auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  const std::vector<float> want = expected(p.mmas());
  EXPECT_TRUE(same_bits(run(nullptr), want));
  MmaMemo memo(std::size_t{64} << 20);
  EXPECT_TRUE(same_bits(run(&memo), want));
  EXPECT_EQ(memo.hits(), 0u);
  EXPECT_TRUE(same_bits(run(&memo), want));
  EXPECT_EQ(memo.hits(), p.mmas());

  // One byte of A's first row, in the last MMA's K slice, changes, in
  // shared memory (where the model reads it) and in the global copy (where
  // `expected` does).
  const std::uint32_t last = p.mmas() - 1;
  std::byte* gbyte = p.ga.data() + last * 32;
  const std::byte old = *gbyte;
  const SmemDescriptor a_desc = SmemDescriptor::decode(p.job(last, d_tmem).a_desc).desc;
  p.smem[0][operand_offset(a_desc, 0, 0)] = old ^ std::byte{0x01};
  *gbyte = old ^ std::byte{0x01};
  const std::vector<float> changed = expected(p.mmas());
  const std::uint64_t hits = memo.hits();
  EXPECT_TRUE(same_bits(run(&memo), changed));
  EXPECT_EQ(memo.hits(), hits + last);  // all but the last MMA hit
}

// The emulator's deferred accumulators: the same MMAs as a chain
// (mma_accumulate from enable-input-d false, then accum_write) leave TMEM
// exactly as mma_execute does, every cell outside D untouched; a second
// pass finds every link in the memo, and a changed operand byte in the
// last MMA is a new link, not a stale one.
TEST_P(models_mma_reference, ChainsAreBitExactAndFoundAgain) {
  const MmaCase& c = GetParam();
  Problem p(c.a, c.b, c.cta_group, c.m, c.n, c.swizzle, c.m * 5 + c.n + swizzle_bytes(c.swizzle));
  const std::uint32_t d_tmem = tmem_addr(c.cta_group == 1 && c.m == 64 && c.n != 8 ? 16 : 0, 32);
  using Tmem = std::vector<std::vector<std::uint32_t>>;
  const auto fresh = [&] {
    return Tmem(static_cast<std::size_t>(c.cta_group), std::vector<std::uint32_t>(kTmemLanes * kTmemColumns, kPoison));
  };
  const auto mem = [&](Tmem& tmem) {
    std::vector<CtaMem> ctas;
    for (int r = 0; r < c.cta_group; ++r) ctas.push_back({p.smem[r].data(), p.smem[r].size(), tmem[r].data()});
    return ctas;
  };
  const auto eager = [&] {
    Tmem tmem = fresh();
    const auto ctas = mem(tmem);
    for (std::uint32_t j = 0; j < p.mmas(); ++j) mma_execute(p.job(j, d_tmem), ctas.data(), nullptr);
    return tmem;
  };
  const auto chained = [&](MmaMemo& memo) {
    Tmem tmem = fresh();
    const auto ctas = mem(tmem);
    AccumRef acc;
    for (std::uint32_t j = 0; j < p.mmas(); ++j) {
      const MmaJob job = p.job(j, d_tmem);
      EXPECT_EQ(job.accumulate, j > 0);
      acc = mma_accumulate(job, ctas.data(), job.accumulate ? acc.get() : nullptr, memo);
    }
    accum_write(p.job(0, d_tmem), *acc, ctas.data());
    return tmem;
  };
  MmaMemo memo(std::size_t{64} << 20);
  EXPECT_TRUE(chained(memo) == eager());
  EXPECT_EQ(memo.chain_hits(), 0u);
  EXPECT_TRUE(chained(memo) == eager());
  EXPECT_EQ(memo.chain_hits(), p.mmas());

  const std::uint32_t last = p.mmas() - 1;
  const SmemDescriptor a_desc = SmemDescriptor::decode(p.job(last, d_tmem).a_desc).desc;
  p.smem[0][operand_offset(a_desc, 0, 0)] ^= std::byte{0x01};
  EXPECT_TRUE(chained(memo) == eager());
  EXPECT_EQ(memo.chain_hits(), 2 * p.mmas() - 1);  // all but the last link found
}

// The memo's size follows what it saves: entries never asked for again
// stop at the floor (a single run's MMAs all differ), entries found again
// earn kEarnFactor times their bytes of room, and a memo whose kept entries went a
// whole run without a hit, while it refused new ones, starts over.
TEST(models_mma, MemoGrowsByWhatItSaves) {
  constexpr std::size_t kValues = std::size_t{1} << 17;  // 1 MiB of doubles, not exact floats
  const std::vector<double> products(kValues, 1.0 / 3.0);
  const auto key = [](std::uint32_t i) {
    std::vector<std::byte> k(64);
    std::memcpy(k.data(), &i, sizeof i);
    return k;
  };
  const auto found = [&](MmaMemo& memo, std::uint32_t i) { return memo.find(key(i)).wide != nullptr; };
  MmaMemo memo(std::size_t{512} << 20);
  memo.begin_run();
  for (std::uint32_t i = 0; i < 100; ++i) memo.insert(key(i), products);
  EXPECT_LE(memo.bytes(), MmaMemo::kFloorBytes);
  const std::size_t kept = memo.entries();
  EXPECT_GE(kept, 30u);
  EXPECT_LT(kept, 32u);
  EXPECT_TRUE(found(memo, 0));
  EXPECT_FALSE(found(memo, 99));

  // The next run finds what was kept: it earns kEarnFactor times its bytes
  // of room, here more than the 100 entries need.
  MmaMemo probe(std::size_t{4} << 30);  // (the allowance under a budget that does not cap it)
  probe.begin_run();
  probe.insert(key(0), products);
  probe.begin_run();
  ASSERT_TRUE(found(probe, 0));
  EXPECT_EQ(probe.allowance(), MmaMemo::kFloorBytes + MmaMemo::kEarnFactor * probe.bytes());
  memo.begin_run();
  std::uint32_t hits = 0;
  for (std::uint32_t i = 0; i < 100; ++i) hits += found(memo, i) ? 1 : 0;
  EXPECT_EQ(hits, kept);
  EXPECT_EQ(memo.earned(), memo.bytes());
  EXPECT_EQ(memo.allowance(), std::min(memo.budget(), MmaMemo::kFloorBytes + MmaMemo::kEarnFactor * memo.bytes()));
  for (std::uint32_t i = 0; i < 100; ++i)
    if (!found(memo, i)) memo.insert(key(i), products);
  EXPECT_EQ(memo.entries(), 100u);
  EXPECT_LE(memo.bytes(), memo.allowance());
  // The budget caps what it earns.
  MmaMemo small(std::size_t{48} << 20);
  small.begin_run();
  for (std::uint32_t i = 0; i < 100; ++i) small.insert(key(i), products);
  small.begin_run();
  for (std::uint32_t i = 0; i < 100; ++i)
    if (!found(small, i)) small.insert(key(i), products);
  EXPECT_EQ(small.allowance(), small.budget());
  EXPECT_LE(small.bytes(), small.budget());
  EXPECT_GT(small.entries(), kept);

  // Another kernel: its MMAs miss and are refused for a whole run; the
  // memo starts over at the next, and the new MMAs get the floor.
  MmaMemo other(std::size_t{40} << 20);
  other.begin_run();
  for (std::uint32_t i = 0; i < 60; ++i) other.insert(key(i), products);
  other.begin_run();  // first run: nothing was kept before it, nothing to start over
  EXPECT_GT(other.entries(), 0u);
  for (std::uint32_t i = 1000; i < 1060; ++i)
    if (!found(other, i)) other.insert(key(i), products);
  EXPECT_FALSE(found(other, 1000));  // refused: the floor is full of the old kernel's
  other.begin_run();
  EXPECT_EQ(other.entries(), 0u);
  EXPECT_EQ(other.earned(), 0u);
  for (std::uint32_t i = 1000; i < 1060; ++i) other.insert(key(i), products);
  EXPECT_TRUE(found(other, 1000));

  // A run that finds some of what was kept, even while refusing more, keeps it.
  other.begin_run();
  EXPECT_TRUE(found(other, 1001));
  other.insert(key(5000), products);
  other.begin_run();
  EXPECT_TRUE(found(other, 1002));

  // Under a memory budget (--max-memory) the memos stop at half of it,
  // counting what the process holds besides.
  MmaMemo capped(std::size_t{512} << 20);
  const std::size_t held = wspipe::emu::memory_charged();
  capped.set_memory_limit(2 * (held + (std::size_t{8} << 20)));
  capped.begin_run();
  for (std::uint32_t i = 0; i < 100; ++i) capped.insert(key(i), products);
  EXPECT_LE(wspipe::emu::memory_charged(), held + (std::size_t{8} << 20));
  EXPECT_GE(capped.entries(), 6u);
  EXPECT_EQ(wspipe::emu::memory_charged(), held + capped.bytes());
}

TEST(models_mma, CheckRejectsWhatTheModelDoesNotRun) {
  const Problem p(ElemType::bf16, ElemType::bf16, 1, 128, 64, SmemSwizzle::b128, 7);
  const std::size_t bytes = p.smem[0].size();
  const MmaJob good = p.job(0, tmem_addr(0, 0));
  ASSERT_EQ(mma_check(good, bytes), "");
  const auto rejects = [&](MmaJob job, std::size_t smem, const char* why) {
    const std::string msg = mma_check(job, smem);
    EXPECT_NE(msg.find(why), std::string::npos) << "expected \"" << why << "\", got \"" << msg << "\"";
  };
  MmaJob j = good;
  j.a_desc &= ~(std::uint64_t{7} << 46);
  rejects(j, bytes, "A descriptor: bits 46-48");
  j = good;
  j.b_desc |= std::uint64_t{1} << 61;  // 128B with 32B atoms
  rejects(j, bytes, "B descriptor");
  j = good;
  j.a_desc |= std::uint64_t{1} << 55;
  rejects(j, bytes, "must be 0");
  j = good;
  j.a_desc |= std::uint64_t{1} << 49;
  rejects(j, bytes, "base offset");
  j = good;
  j.b_desc |= std::uint64_t{1} << 52;
  rejects(j, bytes, "sm_103a");
  j = good;
  j.idesc |= 1u << 2;  // sparse
  rejects(j, bytes, "instruction descriptor");
  j = good;
  j.idesc |= 1u << 15;
  rejects(j, bytes, "MN-major");
  j = good;
  j.cta_group = 2;
  j.idesc = InstrDescriptor{.m = 64, .n = 64}.encode();
  rejects(j, bytes, "M must be 128 or 256");
  j = good;
  j.d_tmem = tmem_addr(16, 0);
  rejects(j, bytes, "lane must be 0");
  j = good;
  j.d_tmem = tmem_addr(0, 480);
  rejects(j, bytes, "exceed the 512");
  rejects(good, p.b_base, "outside shared memory");

  const Problem p64(ElemType::f16, ElemType::f16, 1, 64, 64, SmemSwizzle::none, 8);
  EXPECT_EQ(mma_check(p64.job(0, tmem_addr(16, 0)), p64.smem[0].size()), "");
  rejects(p64.job(0, tmem_addr(8, 0)), p64.smem[0].size(), "lane must be 0 or 16");
  // Layout B uses N/2 columns per CTA.
  const Problem pb(ElemType::f16, ElemType::f16, 2, 128, 256, SmemSwizzle::b64, 9);
  EXPECT_EQ(mma_check(pb.job(0, tmem_addr(0, 384)), pb.smem[0].size()), "");
  rejects(pb.job(0, tmem_addr(0, 385)), pb.smem[0].size(), "exceed the 512");
}

// -------------------------------------------------------------- footprint
TEST(models_footprint, IsExactlyWhatExecuteReadsAndWrites) {
  struct Shape {
    int g;
    std::uint32_t m, n, lane0;
  };
  for (const Shape s : {Shape{1, 64, 64, 16}, Shape{1, 64, 40, 0}, Shape{1, 128, 64, 0}, Shape{2, 128, 96, 0},
                        Shape{2, 256, 64, 0}})
    for (SmemSwizzle sw : {SmemSwizzle::none, SmemSwizzle::b32, SmemSwizzle::b64, SmemSwizzle::b128}) {
      SCOPED_TRACE("cta_group " + std::to_string(s.g) + " M " + std::to_string(s.m) + " N " + std::to_string(s.n) +
                   " swizzle " + to_string(sw));
      Problem p(ElemType::bf16, ElemType::bf16, s.g, s.m, s.n, sw, s.m + s.n);
      const MmaJob job = p.job(3, tmem_addr(s.lane0, 100));  // mid-row for 64B/128B swizzles
      ASSERT_EQ(mma_check(job, p.smem[0].size()), "");
      const MmaFootprint f = mma_footprint(job);

      // Shared memory: sorted, merged 16-byte ranges; M/g + N/g rows of 32
      // bytes each per CTA.
      std::vector<std::vector<bool>> read(static_cast<std::size_t>(s.g));
      for (int r = 0; r < s.g; ++r) read[r].assign(p.smem[r].size(), false);
      std::vector<std::uint32_t> total(static_cast<std::size_t>(s.g), 0);
      for (std::size_t i = 0; i < f.smem_reads.size(); ++i) {
        const auto& r = f.smem_reads[i];
        ASSERT_TRUE(r.cta >= 0 && r.cta < s.g);
        EXPECT_EQ(r.offset % 16, 0u);
        EXPECT_EQ(r.bytes % 16, 0u);
        if (i > 0 && f.smem_reads[i - 1].cta == r.cta) {
          EXPECT_GT(r.offset, f.smem_reads[i - 1].offset + f.smem_reads[i - 1].bytes) << "not merged or sorted";
        }
        for (std::uint32_t b = r.offset; b < r.offset + r.bytes; ++b) read[r.cta][b] = true;
        total[r.cta] += r.bytes;
      }
      for (int r = 0; r < s.g; ++r) EXPECT_EQ(total[r], (p.rows_a() + p.rows_b()) * 32);

      // TMEM: (M/g) x N cells per CTA.
      std::vector<std::vector<bool>> in(static_cast<std::size_t>(s.g), std::vector<bool>(kTmemLanes * kTmemColumns));
      std::vector<std::uint32_t> cells(static_cast<std::size_t>(s.g), 0);
      for (const auto& c : f.tmem) {
        ASSERT_TRUE(c.cta >= 0 && c.cta < s.g);
        ASSERT_LE(c.lane0 + c.lanes, kTmemLanes);
        ASSERT_LE(c.col0 + c.cols, kTmemColumns);
        for (std::uint32_t lane = c.lane0; lane < c.lane0 + c.lanes; ++lane)
          for (std::uint32_t col = c.col0; col < c.col0 + c.cols; ++col) in[c.cta][lane * kTmemColumns + col] = true;
        cells[c.cta] += c.lanes * c.cols;
      }
      for (int r = 0; r < s.g; ++r) EXPECT_EQ(cells[r], p.rows_a() * s.n);

      // Runs the job on TMEM poisoned with NaN, except, when it accumulates,
      // D's rectangles, which hold 1.0.
      const auto run = [&](bool accumulate) {
        std::vector<std::vector<std::uint32_t>> tmem(static_cast<std::size_t>(s.g),
                                                     std::vector<std::uint32_t>(kTmemLanes * kTmemColumns, kPoison));
        std::vector<CtaMem> ctas;
        for (int r = 0; r < s.g; ++r) {
          if (accumulate)
            for (std::size_t i = 0; i < tmem[r].size(); ++i)
              if (in[r][i]) tmem[r][i] = std::bit_cast<std::uint32_t>(1.0f);
          ctas.push_back({p.smem[r].data(), p.smem[r].size(), tmem[r].data()});
        }
        MmaJob j = job;
        j.accumulate = accumulate;
        mma_execute(j, ctas.data());
        return tmem;
      };
      const auto clean = run(false);
      const auto clean_acc = run(true);
      // The rectangles are exactly the cells written, and the cells read.
      for (const auto* result : {&clean, &clean_acc})
        for (int r = 0; r < s.g; ++r)
          for (std::size_t i = 0; i < (*result)[r].size(); ++i) {
            const bool inside = in[r][i];
            const std::uint32_t cell = (*result)[r][i];
            ASSERT_EQ(inside, !std::isnan(std::bit_cast<float>(cell)))
                << "CTA " << r << " lane " << i / kTmemColumns << " column " << i % kTmemColumns;
            if (!inside) {
              ASSERT_EQ(cell, kPoison);
            }
          }
      // Every shared-memory byte outside the footprint poisoned (0xff is NaN
      // in all four input types): the same results.
      for (int r = 0; r < s.g; ++r)
        for (std::size_t b = 0; b < p.smem[r].size(); ++b)
          if (!read[r][b]) p.smem[r][b] = std::byte{0xff};
      EXPECT_TRUE(run(false) == clean);
      EXPECT_TRUE(run(true) == clean_acc);
    }
}

}  // namespace
