// Portability macros shared by everything in core/: the same header compiles
// as host C++20 (emulator, tests) and as sm_100a device code under nvcc.
#pragma once

#include <cstdint>
#include <source_location>

#if defined(__CUDACC__)
#define WSPIPE_HD __host__ __device__
#define WSPIPE_DEVICE __device__
#else
#define WSPIPE_HD
#define WSPIPE_DEVICE
#endif

#define WSPIPE_FORCEINLINE inline __attribute__((always_inline))

namespace wspipe {

// Every backend operation takes the kernel's source location as a defaulted
// last argument, so that the emulator can name the line that broke a rule.
// Core functions forward their own caller's location: a violation points at
// the kernel, not at core/. On the CUDA backend the argument is unused and
// folds away (std::source_location::current() is consteval).
#if defined(__cpp_lib_source_location)
using SourceLoc = std::source_location;
#else
// Compilers whose library lacks std::source_location (clang 14 with
// libstdc++ 12, used for the libFuzzer build): the same interface from the
// builtins, which also bind to the outermost caller in default arguments.
struct SourceLoc {
  static constexpr SourceLoc current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
    SourceLoc l;
    l.file_ = file;
    l.line_ = line;
    return l;
  }
  constexpr const char* file_name() const { return file_; }
  constexpr unsigned line() const { return line_; }

 private:
  const char* file_ = "";
  unsigned line_ = 0;
};
#endif

}  // namespace wspipe
