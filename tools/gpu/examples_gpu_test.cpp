// The GPU test of the examples' sm_100a builds (examples_build.cu): every
// gemm and blockwise-fp8 instantiation runs on a problem with exact inputs
// (examples/*_host.hpp), and its D must equal the CPU reference bit for bit,
// and, for gemm, cuBLAS's D where the build found cuBLASLt.
//
// sm_100a code runs on compute capability 10.0 only: on any other machine
// (no GPU, a Hopper) these tests skip and name the device they found. The
// check of cuBLAS itself against the CPU reference needs only a GPU that
// cuBLAS supports, and the launchers' input checks no GPU at all: they run
// wherever they can.
#include "tools/gpu/examples_launch.hpp"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#if WSPIPE_HAVE_CUBLASLT
#include <cublasLt.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tools/gpu/device_buffer.hpp"

namespace {

using wspipe::ElemType;
using wspipe::cuda::BlockwiseFp8Kernel;
using wspipe::cuda::GemmKernel;
using wspipe::examples::BlockwiseFp8Problem;
using wspipe::examples::GemmProblem;
using wspipe::gpu::DeviceBuffer;

// Several output tiles per cluster, so that the accumulator stages wrap, and
// several K blocks per tile, so that the input ring wraps: with 5 clusters,
// 1024 x 192 is 24 tiles (12 for clusters of 2), 512 is 8 bf16 or 4 e4m3 K
// blocks. 192 columns cross a blockwise-fp8 B-scale boundary (128).
constexpr std::uint32_t kM = 1024, kN = 192, kK = 512, kClusters = 5;
// A kernel whose pipeline deadlocks never finishes; it is given this long.
constexpr std::chrono::seconds kKernelTimeLimit{20};

std::string error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + error_text(e));
}

// Why this process cannot run sm_100a code, or "" when it can.
const std::string& why_no_sm100() {
  static const std::string why = [] {
    int n = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
      return "no CUDA device: cudaGetDeviceCount says " + error_text(e);
    }
    if (n == 0) return std::string("no CUDA device");
    cudaDeviceProp prop{};
    if (const cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
      return "cannot read CUDA device 0: " + error_text(e);
    }
    if (prop.major == 10 && prop.minor == 0) return std::string();
    return "the kernels are sm_100a code, which runs on compute capability 10.0 only; device 0 is " +
           std::string(prop.name) + ", compute capability " + std::to_string(prop.major) + "." +
           std::to_string(prop.minor);
  }();
  return why;
}

#define WSPIPE_SKIP_UNLESS_SM100()                               \
  do {                                                           \
    if (const std::string& why = why_no_sm100(); !why.empty()) { \
      GTEST_SKIP() << why;                                       \
    }                                                            \
  } while (false)

// D's device copy, every element NaN (all bits set) until the kernel writes
// it, as the host copies start.
DeviceBuffer<float> device_output(std::size_t count) {
  DeviceBuffer<float> d(count);
  d.fill_bytes(0xff);
  return d;
}

// Waits for the device, at most kKernelTimeLimit. Nothing stops a kernel
// that never finishes but the end of the process, so it ends here, with a
// message, rather than at CTest's timeout.
void finish(const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + kKernelTimeLimit;
  cudaError_t e;
  while ((e = cudaStreamQuery(nullptr)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "%s did not finish within %lld s (a deadlock?): ending the test program\n", what.c_str(),
                   static_cast<long long>(kKernelTimeLimit.count()));
      std::fflush(stderr);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A trap in the kernel (CudaBackend::shared_storage's alignment check, a
  // tcgen05 guardrail of ptxas) comes back as cudaErrorLaunchFailure.
  check_cuda(e, what);
}

// "" when equal everywhere, else the first difference and how many differ.
std::string compare(const std::vector<float>& got, const std::vector<float>& want, std::uint32_t n) {
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (bad++ == 0) {
      first = "D[" + std::to_string(i / n) + "][" + std::to_string(i % n) + "] = " + std::to_string(got[i]) + ", not " +
              std::to_string(want[i]);
    }
  }
  if (bad == 0) return {};
  return first + " (" + std::to_string(bad) + " of " + std::to_string(got.size()) + " elements differ)";
}

std::uint64_t seed_of(ElemType t) { return t == ElemType::bf16 ? 1 : 2; }

// Runs `k` on p's device copies and reads D back into p.d.
void run_gemm(const GemmKernel& k, GemmProblem& p, bool manual_a) {
  const auto a = DeviceBuffer<std::uint8_t>::copy_of(p.a), b = DeviceBuffer<std::uint8_t>::copy_of(p.b);
  const DeviceBuffer<float> d = device_output(p.d.size());
  check_cuda(k.launch(p, {a.get(), b.get(), d.get()}, {kClusters, manual_a, nullptr}),
             std::string("launching ") + k.name);
  finish(k.name);
  d.download(p.d);
}

#if WSPIPE_HAVE_CUBLASLT

// D = A * B^T by cuBLASLt, f32 accumulation and output. cuBLAS is
// column-major: the row-major M x N D is its N x M D^T = B * A^T, where the
// row-major B (N x K) and A (M x K) read as column-major K x N and K x M,
// B transposed: "TN", the only layout cuBLASLt takes for fp8 inputs.
// Returns cuBLAS's status; p.d holds D on success.
cublasStatus_t cublas_gemm(GemmProblem& p) {
  struct Resources {
    cublasLtHandle_t handle = nullptr;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    ~Resources() {
      if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
      if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
      if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
      if (op != nullptr) cublasLtMatmulDescDestroy(op);
      if (handle != nullptr) cublasLtDestroy(handle);
    }
  } r;
  const cudaDataType in = p.in == ElemType::bf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;  // what cuBLAS recommends for Hopper and later

  const auto a = DeviceBuffer<std::uint8_t>::copy_of(p.a), b = DeviceBuffer<std::uint8_t>::copy_of(p.b);
  const DeviceBuffer<float> d = device_output(p.d.size());
  const DeviceBuffer<std::uint8_t> workspace(kWorkspace);
  const float alpha = 1, beta = 0;
  cublasStatus_t s = cublasLtCreate(&r.handle);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescCreate(&r.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose);
  }
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none);
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&r.a, in, p.k, p.n, p.k);  // cuBLAS's A: our B
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&r.b, in, p.k, p.m, p.k);  // cuBLAS's B: our A
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&r.d, CUDA_R_32F, p.n, p.m, p.n);
  // No algorithm given: cuBLASLt runs its own heuristic's first choice.
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmul(r.handle, r.op, &alpha, b.get(), r.a, a.get(), r.b, &beta, d.get(), r.d, d.get(), r.d, nullptr,
                       workspace.get(), kWorkspace, nullptr);
  }
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  finish("cublasLtMatmul");
  d.download(p.d);
  return CUBLAS_STATUS_SUCCESS;
}

std::string status_text(cublasStatus_t s) {
  return std::string(cublasLtGetStatusName(s)) + " (" + cublasLtGetStatusString(s) + ")";
}

#endif  // WSPIPE_HAVE_CUBLASLT

// cuBLAS's D for the problem every gemm test runs, or GTEST_SKIP with why
// not: no cuBLASLt in the build, no device, or no such GEMM on this device.
#define WSPIPE_CUBLAS_GEMM_OR_SKIP(problem)                                                         \
  do {                                                                                              \
    if (const std::string why = cublas_gemm_or_why_not(problem); !why.empty()) GTEST_SKIP() << why; \
  } while (false)

std::string cublas_gemm_or_why_not(GemmProblem& p) {
#if WSPIPE_HAVE_CUBLASLT
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "no CUDA device for cuBLAS";
  if (const cublasStatus_t s = cublas_gemm(p); s != CUBLAS_STATUS_SUCCESS) {
    return std::string("cuBLASLt cannot run the ") + to_string(p.in) + " GEMM with f32 output here: " + status_text(s);
  }
  return {};
#else
  (void)p;
  return "cuBLAS: the build found no CUDA::cublasLt";
#endif
}

// ---- the launchers refuse what their kernel cannot run, before any CUDA
// call (the operands are never read).

// The std::invalid_argument message of `launch()`, or "accepted".
template <class F>
std::string rejection(F&& launch) {
  try {
    (void)launch();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GemmLauncher, RejectsWhatTheKernelCannotRun) {
  for (const GemmKernel& k : wspipe::cuda::gemm_kernels()) {
    SCOPED_TRACE(k.name);
    GemmProblem p;
    p.m = kM;
    p.n = kN;
    p.k = kK;
    p.in = k.in == ElemType::bf16 ? ElemType::e4m3 : ElemType::bf16;
    EXPECT_PRED2(contains, rejection([&] { return k.launch(p, {}, {}); }), "the problem is");
    p.in = k.in;
    p.m = kM + 64;
    EXPECT_PRED2(contains, rejection([&] { return k.launch(p, {}, {}); }), "--m must be a positive multiple");
    p.m = kM;
    EXPECT_PRED2(contains, rejection([&] { return k.launch(p, {}, {0, false, nullptr}); }), "clusters");
    if (k.cluster_size == 2) {
      EXPECT_PRED2(contains, rejection([&] { return k.launch(p, {}, {1, true, nullptr}); }), "manual_a");
    }
  }
}

TEST(BlockwiseFp8Launcher, RejectsWhatTheKernelCannotRun) {
  for (const BlockwiseFp8Kernel& k : wspipe::cuda::blockwise_fp8_kernels()) {
    SCOPED_TRACE(k.name);
    BlockwiseFp8Problem p;
    p.m = kM;
    p.n = kN;
    p.k = kK + 64;
    EXPECT_PRED2(contains, rejection([&] { return k.launch(p, {}, {}); }), "--k must be a positive multiple");
    p.k = kK;
    EXPECT_PRED2(contains, rejection([&] { return k.launch(p, {}, {0, nullptr}); }), "clusters");
  }
}

// ---- cuBLAS as a reference: checked against the CPU reference itself, on
// any GPU that has the GEMM, so that a disagreement on sm_100 is the kernel's.

class CublasReference : public ::testing::TestWithParam<ElemType> {};

TEST_P(CublasReference, MatchesTheCpuReference) {
  GemmProblem p = GemmProblem::random(kM, kN, kK, GetParam(), seed_of(GetParam()));
  WSPIPE_CUBLAS_GEMM_OR_SKIP(p);
  EXPECT_EQ(p.check(), "");
}

INSTANTIATE_TEST_SUITE_P(Gemm, CublasReference, ::testing::Values(ElemType::bf16, ElemType::e4m3),
                         [](const ::testing::TestParamInfo<ElemType>& p) { return to_string(p.param); });

// ---- gemm

struct GemmCase {
  const GemmKernel* kernel;
  bool manual_a;
};

// Every instantiation; those that can also load A by ordinary stores
// (cta_group 1, clusters of 1) once more that way.
std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  for (const GemmKernel& k : wspipe::cuda::gemm_kernels()) {
    cases.push_back({&k, false});
    if (k.cta_group == 1 && k.cluster_size == 1) cases.push_back({&k, true});
  }
  return cases;
}

class GemmOnDevice : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmOnDevice, MatchesTheReference) {
  WSPIPE_SKIP_UNLESS_SM100();
  const GemmCase& c = GetParam();
  GemmProblem p = GemmProblem::random(kM, kN, kK, c.kernel->in, seed_of(c.kernel->in));
  run_gemm(*c.kernel, p, c.manual_a);
  EXPECT_EQ(p.check(), "");
}

TEST_P(GemmOnDevice, MatchesCublas) {
  WSPIPE_SKIP_UNLESS_SM100();
  const GemmCase& c = GetParam();
  GemmProblem cublas = GemmProblem::random(kM, kN, kK, c.kernel->in, seed_of(c.kernel->in));
  WSPIPE_CUBLAS_GEMM_OR_SKIP(cublas);
  GemmProblem p = GemmProblem::random(kM, kN, kK, c.kernel->in, seed_of(c.kernel->in));
  run_gemm(*c.kernel, p, c.manual_a);
  EXPECT_EQ(compare(p.d, cublas.d, p.n), "");
}

INSTANTIATE_TEST_SUITE_P(Sm100a, GemmOnDevice, ::testing::ValuesIn(gemm_cases()),
                         [](const ::testing::TestParamInfo<GemmCase>& p) {
                           return std::string(p.param.kernel->name) + (p.param.manual_a ? "_manual_a" : "");
                         });

// ---- blockwise-fp8: the CPU reference only (cuBLAS's block-scaled modes
// are not this kernel's scale layout on every architecture).

class BlockwiseFp8OnDevice : public ::testing::TestWithParam<const BlockwiseFp8Kernel*> {};

TEST_P(BlockwiseFp8OnDevice, MatchesTheReference) {
  WSPIPE_SKIP_UNLESS_SM100();
  const BlockwiseFp8Kernel& k = *GetParam();
  BlockwiseFp8Problem p = BlockwiseFp8Problem::random(kM, kN, kK, 3);
  const auto a = DeviceBuffer<std::uint8_t>::copy_of(p.a), b = DeviceBuffer<std::uint8_t>::copy_of(p.b);
  const auto a_scales = DeviceBuffer<float>::copy_of(p.a_scales), b_scales = DeviceBuffer<float>::copy_of(p.b_scales);
  const DeviceBuffer<float> d = device_output(p.d.size());
  check_cuda(k.launch(p, {a.get(), b.get(), a_scales.get(), b_scales.get(), d.get()}, {kClusters, nullptr}),
             std::string("launching ") + k.name);
  finish(k.name);
  d.download(p.d);
  EXPECT_EQ(p.check(), "");
}

std::vector<const BlockwiseFp8Kernel*> blockwise_fp8_cases() {
  std::vector<const BlockwiseFp8Kernel*> cases;
  for (const BlockwiseFp8Kernel& k : wspipe::cuda::blockwise_fp8_kernels()) cases.push_back(&k);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sm100a, BlockwiseFp8OnDevice, ::testing::ValuesIn(blockwise_fp8_cases()),
                         [](const ::testing::TestParamInfo<const BlockwiseFp8Kernel*>& p) {
                           return std::string(p.param->name);
                         });

}  // namespace
