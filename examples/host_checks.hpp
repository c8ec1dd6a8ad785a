// The catalogue's checks of a run's output against its reference, in a
// translation unit of their own that is compiled without the access
// instrumentation (CMakeLists.txt, wspipe_examples_host). Every run of an
// exploration ends in one; instrumented, the comparison called an entry
// point per element and was not vectorised, which cost gemm's explorations
// about a third of their rate (docs/performance.md, "Host code out of the
// instrumentation"). A kernel's own project does the same with its host
// code (README, "What the emulator sees of your data").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wspipe::examples {

// "" when the M x N row-major `d` equals `want` element by element (as
// floats), else compare_exact's report of the first difference.
std::string check_exact(const std::vector<float>& d, std::uint32_t m, std::uint32_t n, const std::vector<float>& want);

// Whether `got` and `want` hold the same words.
bool same_words(const std::vector<std::uint32_t>& got, const std::vector<std::uint32_t>& want);

}  // namespace wspipe::examples
