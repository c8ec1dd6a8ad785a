// `ring`: one producer warp hands `items` numbered items to one consumer
// warp through a ProducerConsumerPipeline of `Stages` shared-memory slots.
// The consumer checks every item's sequence number and payload. Written once
// against the Backend; the broken variants each plant one real bug.
// The consumer frees a slot with one arrival per lane (empty barriers of
// count 32) or with one elected arrival (count 1): the two conventions of
// docs/arrival-conventions.md.
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
  // The consumer (elected release) frees its slot with elect_one([&] {
  // slot.release(); }): one arrival, right, but the cursor steps in the
  // elected lane only; the other lanes wait on a stale stage and phase.
  release_in_elect_one,
  // Only lane 0 waits for the slot (`if (lane == 0) wait`), then every lane
  // reads it: the other lanes read before the producer's data is ordered.
  lane_guarded_wait,
  // The consumer frees its slot, then reads it, and checks nothing: the
  // producer may refill the slot first. Only the race checker can see it,
  // on the plain accesses to the slot.
  early_release,
};

enum class RingRelease : std::uint8_t { per_lane, elected };

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
WSPIPE_HD void ring_kernel(std::uint32_t items, RingBug bug, RingRelease release = RingRelease::per_lane) {
  using Pipe = ProducerConsumerPipeline<B, Stages>;
  auto& smem = B::template shared_storage<RingStorage<Stages>>();
  const std::uint32_t warp = B::warp_idx();
  const bool elected = release == RingRelease::elected;

  // full: one elected producer arrival; empty: the whole consumer warp, or
  // its one elected arrival.
  if (warp == kRingProducerWarp) {
    Pipe(smem.barriers).init_mbars(1, elected ? 1 : 32);
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
        slot.arrive_elected();
      }
    }
  } else if (warp == kRingConsumerWarp) {
    Pipe pipe(smem.barriers);
    for (std::uint32_t i = 0; i < items; ++i) {
      if (bug == RingBug::no_release) {
        auto slot = pipe.consume_explicit();  // the bug: steps without freeing the slot
        B::check(smem.slot[slot.index()][0] == ring_word(i, 0), "ring: item out of sequence");
      } else if (bug == RingBug::release_in_elect_one) {
        auto slot = pipe.acquire_consumer();
        B::check(smem.slot[slot.index()][0] == ring_word(i, 0), "ring: item out of sequence");
        B::elect_one([&] { slot.release(); });  // the bug: one arrival, but one lane's cursor steps
      } else if (bug == RingBug::lane_guarded_wait) {
        B::for_each_lane([&](std::uint32_t lane) {
          if (lane == 0) pipe.wait_producer();  // the bug: the other lanes do not wait
        });
        const std::uint32_t index = pipe.consumer_stage();
        B::check(smem.slot[index][0] == ring_word(i, 0), "ring: item out of sequence");
        if (elected) {
          B::elect_one([&] { B::arrive(pipe.empty_mbar(index)); });
        } else {
          B::arrive(pipe.empty_mbar(index));
        }
        pipe.consumer_step();
      } else if (bug == RingBug::early_release) {
        auto slot = pipe.acquire_consumer();
        const std::uint32_t index = slot.index();
        if (elected) {
          slot.release_elected();
        } else {
          slot.release();
        }
        [[maybe_unused]] volatile std::uint32_t taken = 0;  // the item goes on (a kernel would use it); unchecked
        for (std::uint32_t k = 0; k < kRingWords; ++k) taken = smem.slot[index][k];  // the bug: freed above
      } else if (elected) {
        auto slot = pipe.consume_elected();
        bool intact = true;
        for (std::uint32_t k = 0; k < kRingWords; ++k) intact &= smem.slot[slot.index()][k] == ring_word(i, k);
        B::check(intact, "ring: item out of sequence or torn");
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
