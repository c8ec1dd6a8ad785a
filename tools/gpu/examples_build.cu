// The examples' kernels built for sm_100a: gemm for each cluster shape and
// element type and blockwise-fp8 for both cta_groups, with a few stage
// counts, as extern "C" kernels (unmangled, so that sass_check.sh finds each
// by name), and their host launchers (examples_launch.hpp), which the GPU
// test calls. Part of the default build when CUDA is enabled, as
// device_build.cu is.
//
// Names: wspipe_gemm_cg<CtaGroup>_c<ClusterSize>_s<Stages>_a<AccumStages>_<dtype>,
// wspipe_blockwise_fp8_cg<CtaGroup>_s<Stages>_a<AccumStages> and
// wspipe_persistent_gemm_cg<CtaGroup>_x<ClusterX>_y<ClusterY>_clc<ClcStages>.
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_backend.hpp"
#include "tools/gpu/examples_launch.hpp"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/tensor_map.hpp"
#include "examples/blockwise_fp8.hpp"
#include "examples/blockwise_fp8_host.hpp"
#include "examples/gemm.hpp"
#include "examples/gemm_host.hpp"
#include "examples/persistent_gemm.hpp"
#include "examples/tmem_coresident.hpp"

namespace {

using B = wspipe::cuda::CudaBackend;
using wspipe::ElemType;
using wspipe::examples::BlockwiseFp8Args;
using wspipe::examples::BlockwiseFp8Config;
using wspipe::examples::GemmArgs;
using wspipe::examples::GemmConfig;

}  // namespace

// tmem-coresident (examples/tmem_coresident.hpp): one warp per CTA, both
// variants, so that the emulator's co-residency scenario stays a kernel that
// compiles for the GPU.
extern "C" __global__ void __launch_bounds__(32) wspipe_tmem_coresident(std::uint32_t cols, bool two_step) {
  using wspipe::examples::CoresidentBug;
  wspipe::examples::tmem_coresident_kernel<B>(cols, two_step ? CoresidentBug::two_step_alloc : CoresidentBug::none);
}

// The instantiations: (CtaGroup, ClusterSize, Stages, AccumStages, dtype).
// Each shape and dtype with the usual double-buffered accumulator over four
// input stages, and three edge cases: a single input stage and accumulator
// stage (every step wraps the phase), an odd stage count, and four 128-column
// accumulator stages.
#define WSPIPE_GEMM_CONFIGS(X) \
  X(1, 1, 4, 2, bf16)          \
  X(1, 1, 4, 2, e4m3)          \
  X(1, 2, 4, 2, bf16)          \
  X(1, 2, 4, 2, e4m3)          \
  X(2, 2, 4, 2, bf16)          \
  X(2, 2, 4, 2, e4m3)          \
  X(1, 1, 1, 1, bf16)          \
  X(1, 2, 3, 4, e4m3)          \
  X(2, 2, 3, 4, bf16)

#define WSPIPE_STRINGIFY_(x) #x
#define WSPIPE_STRINGIFY(x) WSPIPE_STRINGIFY_(x)
#define WSPIPE_GEMM_NAME(G, C, S, A, T) wspipe_gemm_cg##G##_c##C##_s##S##_a##A##_##T
#define WSPIPE_GEMM_KERNEL(G, C, S, A, T)                                            \
  extern "C" __global__ void __launch_bounds__(32 * wspipe::examples::kGemmWarps, 1) \
      WSPIPE_GEMM_NAME(G, C, S, A, T)(const __grid_constant__ GemmArgs<B> args) {    \
    wspipe::examples::gemm_kernel<B, GemmConfig<G, C, S, A, ElemType::T>>(args);     \
  }
WSPIPE_GEMM_CONFIGS(WSPIPE_GEMM_KERNEL)
#undef WSPIPE_GEMM_KERNEL

// (CtaGroup, Stages, AccumStages): the accumulator turns over once per K
// block here, so a single accumulator stage is the interesting edge.
#define WSPIPE_BLOCKWISE_FP8_CONFIGS(X) \
  X(1, 4, 2)                            \
  X(2, 4, 2)                            \
  X(1, 2, 1)

#define WSPIPE_BLOCKWISE_FP8_NAME(G, S, A) wspipe_blockwise_fp8_cg##G##_s##S##_a##A
#define WSPIPE_BLOCKWISE_FP8_KERNEL(G, S, A)                                                 \
  extern "C" __global__ void __launch_bounds__(32 * wspipe::examples::kGemmWarps, 1)         \
      WSPIPE_BLOCKWISE_FP8_NAME(G, S, A)(const __grid_constant__ BlockwiseFp8Args<B> args) { \
    wspipe::examples::blockwise_fp8_kernel<B, BlockwiseFp8Config<G, S, A>>(args);            \
  }
WSPIPE_BLOCKWISE_FP8_CONFIGS(WSPIPE_BLOCKWISE_FP8_KERNEL)
#undef WSPIPE_BLOCKWISE_FP8_KERNEL

// persistent-gemm (examples/persistent_gemm.hpp): (CtaGroup, ClusterX,
// ClusterY, ClcStages), four input stages and two accumulator stages. Every
// cluster shape of the scenario with CLC, and the static schedule. Kernels
// only: no host launcher yet (a CLC launch needs one cluster per tile and
// the GPU test runs none of these).
#define WSPIPE_PERSISTENT_GEMM_CONFIGS(X) \
  X(1, 1, 1, 2)                           \
  X(1, 2, 1, 2)                           \
  X(2, 2, 1, 2)                           \
  X(1, 4, 1, 2)                           \
  X(2, 4, 1, 2)                           \
  X(1, 2, 2, 2)                           \
  X(2, 2, 2, 2)                           \
  X(1, 1, 1, 0)

#define WSPIPE_PERSISTENT_GEMM_NAME(G, X, Y, C) wspipe_persistent_gemm_cg##G##_x##X##_y##Y##_clc##C
#define WSPIPE_PERSISTENT_GEMM_KERNEL(G, X, Y, C)                                                              \
  extern "C" __global__ void __launch_bounds__(32 * wspipe::examples::kPgWarps, 1)                             \
      WSPIPE_PERSISTENT_GEMM_NAME(G, X, Y, C)(const __grid_constant__ wspipe::examples::PersistentGemmArgs<B> args) { \
    wspipe::examples::persistent_gemm_kernel<B, wspipe::examples::PersistentGemmConfig<G, X, Y, 4, 2, C>>(args); \
  }
WSPIPE_PERSISTENT_GEMM_CONFIGS(WSPIPE_PERSISTENT_GEMM_KERNEL)
#undef WSPIPE_PERSISTENT_GEMM_KERNEL

namespace wspipe::cuda {
namespace {

// Both examples' launch: `clusters` clusters of kGemmWarps-warp CTAs side
// by side along x (a grid of clusters * shape.x by shape.y by shape.z CTAs,
// as the emulator lays it out), one CTA per SM, since each allocates all of
// Tensor Memory.
template <class Storage, class Args>
cudaError_t launch_persistent(void (*kernel)(Args), const Args& args, std::uint32_t clusters, ClusterShape shape,
                              cudaStream_t stream) {
  const ClusterLaunch cfg{dim3(clusters * shape.x, shape.y, shape.z), dim3(32 * examples::kGemmWarps),
                          dim3(shape.x, shape.y, shape.z), stream, /*exclusive_sm=*/true};
  return launch_cluster<Storage>(kernel, cfg, args);
}

template <class Cfg, void (*Kernel)(GemmArgs<B>)>
cudaError_t launch_gemm(const examples::GemmProblem& p, const GemmOperands& ops, const GemmLaunch& how) {
  if (p.in != Cfg::kIn) {
    throw std::invalid_argument(std::string("gemm: the problem is ") + to_string(p.in) + ", the kernel " +
                                to_string(Cfg::kIn));
  }
  if (const std::string e = p.shape_error<Cfg>(); !e.empty()) throw std::invalid_argument("gemm: " + e);
  if (how.manual_a && (Cfg::kCtaGroup != 1 || Cfg::kClusterSize != 1)) {
    throw std::invalid_argument("gemm: manual_a needs cta_group 1 and clusters of 1");
  }
  if (how.clusters == 0) throw std::invalid_argument("gemm: clusters must be positive");

  GemmArgs<B> args;
  args.a_map = make_tma_map(p.a_map<Cfg>(ops.a));
  args.b_map = make_tma_map(p.b_map<Cfg>(ops.b));
  args.a = static_cast<const std::uint8_t*>(ops.a);
  args.d = ops.d;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.manual_a = how.manual_a;
  return launch_persistent<examples::GemmStorage<Cfg>>(Kernel, args, how.clusters, Cfg::kShape, how.stream);
}

#define WSPIPE_GEMM_ENTRY(G, C, S, A, T)                                                 \
  GemmKernel{WSPIPE_STRINGIFY(WSPIPE_GEMM_NAME(G, C, S, A, T)), G, C, S, A, ElemType::T, \
             &launch_gemm<GemmConfig<G, C, S, A, ElemType::T>, WSPIPE_GEMM_NAME(G, C, S, A, T)>},
constexpr GemmKernel kGemmKernels[] = {WSPIPE_GEMM_CONFIGS(WSPIPE_GEMM_ENTRY)};
#undef WSPIPE_GEMM_ENTRY

template <class Cfg, void (*Kernel)(BlockwiseFp8Args<B>)>
cudaError_t launch_blockwise_fp8(const examples::BlockwiseFp8Problem& p, const BlockwiseFp8Operands& ops,
                                 const BlockwiseFp8Launch& how) {
  if (const std::string e = p.shape_error<Cfg>(); !e.empty()) throw std::invalid_argument("blockwise-fp8: " + e);
  if (how.clusters == 0) throw std::invalid_argument("blockwise-fp8: clusters must be positive");

  BlockwiseFp8Args<B> args;
  args.a_map = make_tma_map(p.a_map<Cfg>(ops.a));
  args.b_map = make_tma_map(p.b_map<Cfg>(ops.b));
  args.a_scale_map = make_tma_map(p.a_scale_map<Cfg>(ops.a_scales));
  args.b_scales = ops.b_scales;
  args.d = ops.d;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  return launch_persistent<examples::BlockwiseFp8Storage<Cfg>>(
      Kernel, args, how.clusters, ClusterShape{static_cast<std::uint32_t>(Cfg::kClusterSize), 1, 1}, how.stream);
}

#define WSPIPE_BLOCKWISE_FP8_ENTRY(G, S, A)                                         \
  BlockwiseFp8Kernel{WSPIPE_STRINGIFY(WSPIPE_BLOCKWISE_FP8_NAME(G, S, A)), G, S, A, \
                     &launch_blockwise_fp8<BlockwiseFp8Config<G, S, A>, WSPIPE_BLOCKWISE_FP8_NAME(G, S, A)>},
constexpr BlockwiseFp8Kernel kBlockwiseFp8Kernels[] = {WSPIPE_BLOCKWISE_FP8_CONFIGS(WSPIPE_BLOCKWISE_FP8_ENTRY)};
#undef WSPIPE_BLOCKWISE_FP8_ENTRY

}  // namespace

std::span<const GemmKernel> gemm_kernels() { return kGemmKernels; }
std::span<const BlockwiseFp8Kernel> blockwise_fp8_kernels() { return kBlockwiseFp8Kernels; }

}  // namespace wspipe::cuda
