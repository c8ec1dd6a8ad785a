// The mbarrier room's state (internal): one model object per initialised
// barrier (mbarrier.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "backends/emu/runtime/clock.hpp"
#include "core/barrier.hpp"

namespace wspipe::emu::detail {

struct Mbar {
  SharedMemBarrier* addr = nullptr;
  std::uint32_t cta = 0;
  std::string name;
  bool live = false;
  std::uint32_t expected = 0;  // arrivals per phase
  std::uint32_t pending = 0;   // arrivals still missing in the current phase
  std::int64_t tx = 0;         // tx-count of the current phase
  std::uint64_t phase = 0;     // absolute phase number; its low bit is the parity
  // PTX usage rule: a wait must observe each completed phase before an
  // arrive lands in the next. True while the latest completion was seen.
  bool observed = true;
  std::int32_t init_warp = -1;
  // fence.mbarrier_init: made visible to the cluster by the initialising
  // warp's fence; remote CTAs may use it once a cluster barrier that
  // started after the fence has completed.
  bool fenced = false;
  std::uint64_t fenced_gen = 0;
  // Happens-before: the releases of the current phase, and those of the
  // phase that completed last (what a successful wait acquires).
  Clock acc, done;
};

}  // namespace wspipe::emu::detail
