// compile_fail_check.sh compiles this for sm_90a once per WSPIPE_REJECT_CASE
// and expects each to fail with a message naming the operation and the
// architecture. Not part of any build.
#include <cstdint>

#include "backends/cuda/cuda_backend.hpp"
#include "core/tmem.hpp"

using H = wspipe::cuda::HopperBackend;
using C = wspipe::cuda::CudaBackend;

struct Storage {
  wspipe::SharedMemBarrier bar;
  std::uint32_t word;
  alignas(128) std::uint8_t tile[1024];
};

extern "C" __global__ void reject(std::uint32_t cols, const __grid_constant__ CUtensorMap map) {
  auto& s = H::shared_storage<Storage>();
  (void)cols;
  (void)map;
  (void)s;
#if WSPIPE_REJECT_CASE == 1
  H::tmem_alloc<1>(&s.word, cols);  // Tensor Memory on Hopper
#elif WSPIPE_REJECT_CASE == 2
  H::elect_one([&] { H::mma<wspipe::MmaKind::f16, 1>(0, 0, 0, 0, false); });  // the tensor core on Hopper
#elif WSPIPE_REJECT_CASE == 3
  H::tma_load<2, 2>(map, s.tile, s.bar, wspipe::TmaCoords{});  // a CTA-pair TMA load on Hopper
#elif WSPIPE_REJECT_CASE == 4
  wspipe::TmemAllocation<H, 1> alloc;  // core's Tensor Memory types refuse the backend
  (void)alloc;
#elif WSPIPE_REJECT_CASE == 5
  C::tmem_wait_load();  // CudaBackend compiled in an sm_90a pass
#elif WSPIPE_REJECT_CASE == 6
  H::clc_try_cancel(*reinterpret_cast<wspipe::ClcResponse*>(s.tile), s.bar);  // cluster launch control on Hopper
#elif WSPIPE_REJECT_CASE == 7
  (void)H::clc_is_canceled(*reinterpret_cast<wspipe::ClcResponse*>(s.tile));
#endif
}
