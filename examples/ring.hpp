// `ring`: one producer warp hands `items` numbered items to one consumer
// warp through a ProducerConsumerPipeline of `Stages` shared-memory slots.
// The consumer checks every item's sequence number and payload. Written once
// against the Backend; the broken variants each plant one real bug.
#pragma once

#include <cstdint>

#include "core/backend.hpp"
#include "core/pipeline.hpp"

namespace wspipe::examples {

enum class RingBug : std::uint8_t {
  none,
  no_release,        // the consumer never frees a slot: the producer waits forever
  over_arrive,       // the producer signals full with all 32 lanes on a count-1 barrier
  producer_phase_0,  // the producer starts at phase 0: its first wait never passes
};

inline constexpr std::uint32_t kRingWords = 4;  // payload words per slot

template <int Stages>
struct RingStorage {
  SharedMemBarrier barriers[2 * Stages];  // full[Stages] then empty[Stages]
  std::uint32_t slot[Stages][kRingWords];
};

WSPIPE_HD constexpr std::uint32_t ring_word(std::uint32_t item, std::uint32_t k) {
  return item * 2654435761u + k * 40503u;
}

inline constexpr std::uint32_t kRingProducerWarp = 0;
inline constexpr std::uint32_t kRingConsumerWarp = 1;
inline constexpr std::uint32_t kRingWarps = 2;

template <Backend B, int Stages>
WSPIPE_HD void ring_kernel(std::uint32_t items, RingBug bug) {
  using Pipe = ProducerConsumerPipeline<B, Stages>;
  auto& smem = B::template shared_storage<RingStorage<Stages>>();
  const std::uint32_t warp = B::warp_idx();

  // full: one elected producer arrival; empty: the whole consumer warp.
  if (warp == kRingProducerWarp) {
    Pipe(smem.barriers).init_mbars(1, 32);
    B::fence_init();
  }
  B::cluster_sync();

  if (warp == kRingProducerWarp) {
    Pipe pipe = bug == RingBug::producer_phase_0
                    ? Pipe(smem.barriers, typename Pipe::State(0, 0, 0))  // the bug: should start at phase 1
                    : Pipe(smem.barriers);
    for (std::uint32_t i = 0; i < items; ++i) {
      auto slot = pipe.produce();
      for (std::uint32_t k = 0; k < kRingWords; ++k) smem.slot[slot.index()][k] = ring_word(i, k);
      if (bug == RingBug::over_arrive) {
        slot.arrive();  // the bug: 32 arrivals on a barrier that expects 1
      } else {
        B::elect_one([&] { slot.arrive(); });
      }
    }
  } else if (warp == kRingConsumerWarp) {
    Pipe pipe(smem.barriers);
    for (std::uint32_t i = 0; i < items; ++i) {
      if (bug == RingBug::no_release) {
        auto slot = pipe.consume_explicit();  // the bug: steps without freeing the slot
        B::check(smem.slot[slot.index()][0] == ring_word(i, 0), "ring: item out of sequence");
      } else {
        auto slot = pipe.consume();
        bool intact = true;
        for (std::uint32_t k = 0; k < kRingWords; ++k) intact &= smem.slot[slot.index()][k] == ring_word(i, k);
        B::check(intact, "ring: item out of sequence or torn");
      }
    }
  }
}

}  // namespace wspipe::examples
