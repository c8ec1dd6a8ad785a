// make_tma_map: the host-side encoder of TMA tensor maps. Rejected input
// (a map, an L2 promotion) is reported before the driver is asked (no GPU
// needed); encoding itself needs a CUDA driver and is skipped without one.
#include "backends/cuda/tensor_map.hpp"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tools/gpu/device_buffer.hpp"

namespace {

using wspipe::ElemType;
using wspipe::SmemSwizzle;
using wspipe::TensorMap;
using wspipe::cuda::make_tma_map;
using wspipe::cuda::TmaL2Promotion;

// A 16-byte aligned address that is never dereferenced by the checks.
alignas(16) std::uint8_t g_host_bytes[16];

// A valid 2-D bf16 map: 256 x 512 elements, a 64 x 128 box, 128-byte swizzle.
TensorMap bf16_tile_map(const void* global) {
  TensorMap m;
  m.global = global;
  m.dtype = ElemType::bf16;
  m.rank = 2;
  m.dims[0] = 256;
  m.dims[1] = 512;
  m.strides[1] = 256 * 2;
  m.box[0] = 64;
  m.box[1] = 128;
  m.swizzle = SmemSwizzle::b128;
  return m;
}

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// make_tma_map(m) throws std::invalid_argument carrying tensor_map_error(m).
void expect_rejected(const TensorMap& m) {
  const char* why = wspipe::tensor_map_error(m);
  ASSERT_NE(why, nullptr);
  try {
    (void)make_tma_map(m);
    FAIL() << "make_tma_map accepted a map that tensor_map_error rejects: " << why;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), std::string("make_tma_map: ") + why);
  }
}

TEST(TensorMap, RejectsInvalidInputBeforeAskingTheDriver) {
  TensorMap m = bf16_tile_map(g_host_bytes);
  ASSERT_EQ(wspipe::tensor_map_error(m), nullptr);

  TensorMap null_global = m;
  null_global.global = nullptr;
  expect_rejected(null_global);

  TensorMap misaligned = m;
  misaligned.global = g_host_bytes + 8;
  expect_rejected(misaligned);

  TensorMap rank6 = m;
  rank6.rank = 6;
  expect_rejected(rank6);

  TensorMap big_box = m;
  big_box.box[1] = 257;
  expect_rejected(big_box);

  TensorMap odd_stride = m;
  odd_stride.strides[1] = 520;
  expect_rejected(odd_stride);

  TensorMap wide_swizzled_row = m;  // 128 bf16 = 256 bytes > 128-byte swizzle
  wide_swizzled_row.box[0] = 128;
  expect_rejected(wide_swizzled_row);
}

TEST(TensorMap, RejectsAnUnknownL2PromotionBeforeAskingTheDriver) {
  try {
    (void)make_tma_map(bf16_tile_map(g_host_bytes), static_cast<TmaL2Promotion>(7));
    FAIL() << "make_tma_map accepted an unknown L2 promotion";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "make_tma_map: unknown L2 promotion");
  }
}

TEST(TensorMap, WithoutADriverSaysSo) {
  if (have_device()) GTEST_SKIP() << "a CUDA device is present";
  try {
    (void)make_tma_map(bf16_tile_map(g_host_bytes));
    FAIL() << "make_tma_map encoded a map without a CUDA device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("make_tma_map: cannot reach the CUDA driver"), std::string::npos)
        << e.what();
  }
}

class TensorMapOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    buffer_ = wspipe::gpu::DeviceBuffer<std::uint8_t>(kBytes);
  }
  static constexpr std::size_t kBytes = 1 << 20;
  wspipe::gpu::DeviceBuffer<std::uint8_t> buffer_;
};

TEST_F(TensorMapOnDevice, EncodesEverySwizzleAndElementType) {
  for (SmemSwizzle s : {SmemSwizzle::none, SmemSwizzle::b32, SmemSwizzle::b64, SmemSwizzle::b128}) {
    for (ElemType t : {ElemType::u8, ElemType::u16, ElemType::u32, ElemType::f16, ElemType::bf16, ElemType::e4m3,
                       ElemType::e5m2, ElemType::f32}) {
      TensorMap m = bf16_tile_map(buffer_.get());
      m.dtype = t;
      m.strides[1] = 256 * wspipe::elem_bytes(t);
      m.swizzle = s;
      // The widest inner box the swizzle allows (16 bytes at least).
      const std::uint32_t row = s == SmemSwizzle::none ? 64 : wspipe::swizzle_bytes(s);
      m.box[0] = row / wspipe::elem_bytes(t);
      ASSERT_EQ(wspipe::tensor_map_error(m), nullptr) << to_string(t) << " " << to_string(s);
      EXPECT_NO_THROW((void)make_tma_map(m)) << to_string(t) << " " << to_string(s);
    }
  }
}

bool same_bytes(const CUtensorMap& a, const CUtensorMap& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The default is the 256-byte promotion every map had before the parameter,
// and the parameter reaches the encoding.
TEST_F(TensorMapOnDevice, DefaultL2PromotionIs256Bytes) {
  const TensorMap m = bf16_tile_map(buffer_.get());
  const CUtensorMap by_default = make_tma_map(m);
  EXPECT_TRUE(same_bytes(by_default, make_tma_map(m, TmaL2Promotion::b256)));
  EXPECT_FALSE(same_bytes(by_default, make_tma_map(m, TmaL2Promotion::none)));
  for (TmaL2Promotion p : {TmaL2Promotion::none, TmaL2Promotion::b64, TmaL2Promotion::b128}) {
    EXPECT_NO_THROW((void)make_tma_map(m, p)) << static_cast<int>(p);
  }
}

TEST_F(TensorMapOnDevice, EncodesEveryRank) {
  for (std::uint32_t rank = 1; rank <= wspipe::kTmaMaxRank; ++rank) {
    TensorMap m;
    m.global = buffer_.get();
    m.dtype = ElemType::f32;
    m.rank = rank;
    std::uint64_t stride = 4;
    for (std::uint32_t i = 0; i < rank; ++i) {
      m.dims[i] = 8;
      m.box[i] = 4;
      m.strides[i] = stride;
      stride *= 8;
    }
    ASSERT_EQ(wspipe::tensor_map_error(m), nullptr) << "rank " << rank;
    EXPECT_NO_THROW((void)make_tma_map(m)) << "rank " << rank;
  }
}

}  // namespace
