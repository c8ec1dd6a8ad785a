// From run-time stage counts to template arguments: the examples take their
// input-ring and accumulator stage counts as template parameters, as the
// pipelines do, and a scenario's options (or a GPU harness's loop,
// tools/gpu) pick one instantiation.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/stage_dispatch.hpp"

namespace wspipe::examples {

// The installed helper (core/stage_dispatch.hpp), by the name the examples
// have used.
using wspipe::dispatch_stage_count;

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
