// Host-side helpers of the GPU harnesses (tools/gpu): CUDA runtime errors
// as exceptions that say which call failed where, and RAII owners of device
// memory and events, so that no path out of a harness function, an error's
// included, leaks them.
//
// Plain host C++ over the CUDA runtime API: used from .cu and .cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace wspipe::gpu {

// A CUDA runtime call that failed: "CUDA error: <call>: <error> (<file>:<line>)".
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& call, const char* file, unsigned line)
      : std::runtime_error("CUDA error: " + call + ": " + cudaGetErrorString(code) + " (" + file + ":" +
                           std::to_string(line) + ")"),
        code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

inline void cuda_check(cudaError_t e, const char* call, const char* file, unsigned line) {
  if (e != cudaSuccess) throw CudaError(e, call, file, line);
}
// Where a helper below was called from: a default argument of
// CallSite::here() is evaluated at the call, as std::source_location's
// would be (which clang 14 with libstdc++ 12 lacks; g++, clang++ and nvcc
// all have these builtins).
struct CallSite {
  const char* file;
  unsigned line;
  static constexpr CallSite here(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
    return {file, line};
  }
};

inline void cuda_check(cudaError_t e, const char* call, CallSite at) { cuda_check(e, call, at.file, at.line); }

}  // namespace wspipe::gpu

// WSPIPE_CUDA_CHECK(call): throws CudaError naming the call, here, unless it
// returned cudaSuccess.
#define WSPIPE_CUDA_CHECK(call) ::wspipe::gpu::cuda_check((call), #call, __FILE__, __LINE__)

namespace wspipe::gpu {

// `count` elements of T in device memory, freed by the destructor. Move-only.
// Each operation that can fail throws CudaError with the caller's file and
// line. The destructor ignores cudaFree's result: after a kernel traps, the
// context's sticky error comes back from every call, and there is nothing
// left to do about it.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count, CallSite at = CallSite::here())
      : count_(count) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes()), "cudaMalloc", at);
    ptr_ = static_cast<T*>(p);
  }
  // A device copy of `host`.
  static DeviceBuffer copy_of(const std::vector<T>& host, CallSite at = CallSite::here()) {
    DeviceBuffer d(host.size(), at);
    d.upload(host, at);
    return d;
  }

  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

  // host.size() elements (at most size()) to the start of the buffer.
  void upload(const std::vector<T>& host, CallSite at = CallSite::here()) {
    check_fits(host.size());
    cuda_check(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device",
               at);
  }
  // The first host.size() elements (at most size()) into `host`.
  void download(std::vector<T>& host, CallSite at = CallSite::here()) const {
    check_fits(host.size());
    cuda_check(cudaMemcpy(host.data(), ptr_, host.size() * sizeof(T), cudaMemcpyDeviceToHost),
               "cudaMemcpy from device", at);
  }
  // Every byte of the buffer set to `byte`.
  void fill_bytes(int byte, CallSite at = CallSite::here()) {
    cuda_check(cudaMemset(ptr_, byte, bytes()), "cudaMemset", at);
  }

 private:
  void check_fits(std::size_t n) const {
    if (n > count_) {
      throw std::length_error("DeviceBuffer: " + std::to_string(n) + " elements do not fit in " +
                              std::to_string(count_));
    }
  }
  void release() noexcept {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }

  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

// A CUDA event, destroyed by the destructor. Move-only.
class DeviceEvent {
 public:
  explicit DeviceEvent(CallSite at = CallSite::here()) {
    cuda_check(cudaEventCreate(&event_), "cudaEventCreate", at);
  }
  DeviceEvent(DeviceEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  DeviceEvent& operator=(DeviceEvent&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  ~DeviceEvent() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }

  // Recorded on the default stream.
  void record(CallSite at = CallSite::here()) {
    cuda_check(cudaEventRecord(event_), "cudaEventRecord", at);
  }
  // Milliseconds from `start` to this event, both recorded and completed.
  float ms_since(const DeviceEvent& start, CallSite at = CallSite::here()) const {
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start.event_, event_), "cudaEventElapsedTime", at);
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// Device 0's properties where it is an sm_90 or later GPU; else nullopt,
// after printing why the program skips ("SKIP: ..."; `needs` names what
// needs sm_90, as in "the ring"): the caller then exits with 77, which
// CTest counts as a skip.
inline std::optional<cudaDeviceProp> sm90_device_or_skip(const char* needs) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIP: no CUDA device\n");
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  WSPIPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::printf("SKIP: device 0 is %s (sm_%d%d); %s needs sm_90 or later\n", prop.name, prop.major, prop.minor, needs);
    return std::nullopt;
  }
  return prop;
}

}  // namespace wspipe::gpu
