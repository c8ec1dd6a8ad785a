// Shared-memory tile views: how kernel code reads and writes tile data with
// ordinary (generic-proxy) loads and stores. Going through a view lets the
// emulator see every such access, so that it can order them against the
// async proxy (TMA writes, tensor-core reads) and against other warps; on
// the CUDA backend the hook is empty and a view is a plain pointer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.hpp"

// Where the emulator's users are compiled with access instrumentation
// (WSPIPE_INSTRUMENT_ACCESSES), a view's element access is left out of it:
// the Backend hook has seen it, with the kernel's line, and the plain
// access after it would be seen twice, at this file's line.
#if defined(WSPIPE_INSTRUMENTED_ACCESSES) && !defined(__CUDACC__)
#define WSPIPE_SEEN_BY_HOOK __attribute__((no_sanitize("thread")))
#else
#define WSPIPE_SEEN_BY_HOOK
#endif

namespace wspipe {

template <class B, class T>
class SmemView {
 public:
  WSPIPE_HD SmemView(T* data, std::size_t size) : data_(data), size_(size) {}

  WSPIPE_HD std::size_t size() const { return size_; }
  WSPIPE_HD T* data() const { return data_; }

  // One element, by the calling lanes (warp-level: the same element for all).
  WSPIPE_HD WSPIPE_SEEN_BY_HOOK T load(std::size_t i, SourceLoc loc = SourceLoc::current()) const {
    B::smem_read(data_ + i, sizeof(T), loc);
    return data_[i];
  }
  WSPIPE_HD WSPIPE_SEEN_BY_HOOK void store(std::size_t i, const T& v, SourceLoc loc = SourceLoc::current()) const {
    B::smem_write(data_ + i, sizeof(T), loc);
    data_[i] = v;
  }
  // Elements [first, first + n) as one access, e.g. a vectorised copy.
  WSPIPE_HD const T* read_range(std::size_t first, std::size_t n, SourceLoc loc = SourceLoc::current()) const {
    B::smem_read(data_ + first, static_cast<std::uint32_t>(n * sizeof(T)), loc);
    return data_ + first;
  }
  WSPIPE_HD T* write_range(std::size_t first, std::size_t n, SourceLoc loc = SourceLoc::current()) const {
    B::smem_write(data_ + first, static_cast<std::uint32_t>(n * sizeof(T)), loc);
    return data_ + first;
  }

 private:
  T* data_;
  std::size_t size_;
};

}  // namespace wspipe
