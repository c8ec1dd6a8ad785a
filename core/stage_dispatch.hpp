// From a run-time stage count to a template argument (host code).
//
// Pipelines take their stage counts as template parameters
// (ProducerConsumerPipeline<B, Stages>, the storage sized by them), while a
// test, a CLI or a launcher gets the count at run time. This picks the
// instantiation:
//
//   const std::size_t smem = wspipe::dispatch_stage_count<4>(stages, [&]<int S>() {
//     body = run_stages<S>;
//     return sizeof(Storage<S>);
//   });
//
// Each count in [1, Max] instantiates `make` once. Host-only: it throws.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace wspipe {

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
// std::out_of_range naming the count and the range otherwise.
template <int Max, class Make>
decltype(auto) dispatch_stage_count(std::uint32_t stages, Make&& make) {
  static_assert(Max >= 1);
  if (stages < 1 || stages > Max) {
    throw std::out_of_range("stage count " + std::to_string(stages) + " outside [1, " + std::to_string(Max) + "]");
  }
  return detail::dispatch_stage_count_from<1, Max>(stages, make);
}

}  // namespace wspipe
