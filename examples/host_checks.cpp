// Compiled without the access instrumentation: see host_checks.hpp.
#include "examples/host_checks.hpp"

#include <algorithm>

#include "examples/gemm_host.hpp"

namespace wspipe::examples {

std::string check_exact(const std::vector<float>& d, std::uint32_t m, std::uint32_t n, const std::vector<float>& want) {
  return compare_exact(d, m, n, want);
}

bool same_words(const std::vector<std::uint32_t>& got, const std::vector<std::uint32_t>& want) {
  return got.size() == want.size() && std::equal(got.begin(), got.end(), want.begin());
}

}  // namespace wspipe::examples
