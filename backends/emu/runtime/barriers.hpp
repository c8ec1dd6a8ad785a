// Named barriers and the cluster barrier: their state (internal;
// barriers.cpp).
#pragma once

#include <cstdint>

#include "backends/emu/runtime/clock.hpp"

namespace wspipe::emu::detail {

struct NamedBarrier {
  std::uint32_t expected = 0;  // thread count of the barrier instance in progress
  std::uint32_t arrived = 0;
  std::uint64_t gen = 0;
  Clock acc, done;  // releases of the instance in progress; of the last completed one
};


struct Cluster {
  std::uint32_t first_cta = 0;
  std::uint32_t live_threads = 0;  // threads that have not exited
  std::uint32_t arrived = 0;
  std::uint64_t gen = 0;
  Clock acc, done;
};

}  // namespace wspipe::emu::detail
