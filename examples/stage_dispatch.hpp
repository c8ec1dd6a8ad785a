// From run-time stage counts to template arguments: the examples take their
// input-ring and accumulator stage counts as template parameters, as the
// pipelines do, and a scenario's options (or a GPU harness's loop,
// tools/gpu) pick one instantiation.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace wspipe::examples {

namespace detail {
template <int N, int Max, class Make>
decltype(auto) dispatch_stage_count_from(std::uint32_t stages, Make& make) {
  if constexpr (N < Max) {
    if (stages != N) return dispatch_stage_count_from<N + 1, Max>(stages, make);
  }
  return make.template operator()<N>();
}
}  // namespace detail

// make.template operator()<Stages>() for Stages == stages, in [1, Max];
// std::out_of_range otherwise.
template <int Max, class Make>
decltype(auto) dispatch_stage_count(std::uint32_t stages, Make&& make) {
  static_assert(Max >= 1);
  if (stages < 1 || stages > Max) {
    throw std::out_of_range("stage count " + std::to_string(stages) + " outside [1, " + std::to_string(Max) + "]");
  }
  return detail::dispatch_stage_count_from<1, Max>(stages, make);
}

// make.template operator()<Stages, AccumStages>() for stages in [1, 4] and
// accum in {1, 2, 4}; std::invalid_argument naming the option otherwise.
template <class Make>
auto dispatch_stages(const std::string& scenario, std::uint32_t stages, std::uint32_t accum, Make&& make) {
  auto with_accum = [&]<int S>() {
    switch (accum) {
      case 1: return make.template operator()<S, 1>();
      case 2: return make.template operator()<S, 2>();
      case 4: return make.template operator()<S, 4>();
      default: throw std::invalid_argument(scenario + ": --accum-stages must be 1, 2 or 4");
    }
  };
  switch (stages) {
    case 1: return with_accum.template operator()<1>();
    case 2: return with_accum.template operator()<2>();
    case 3: return with_accum.template operator()<3>();
    case 4: return with_accum.template operator()<4>();
    default: throw std::invalid_argument(scenario + ": --stages must be in [1, 4]");
  }
}

}  // namespace wspipe::examples
