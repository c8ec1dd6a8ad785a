// `pingpong`: one producer warp and two consumer warp groups that take
// turns on whole tiles of one ProducerConsumerPipeline ring, the shape of a
// ping-pong GEMM's mainloop (each warp group computes every other tile, and
// their mainloops alternate so that one group's epilogue overlaps the
// other's mainloop).
//
// The producer writes `tiles` tiles of `k_blocks` items each into the ring,
// in order: item i = tile * k_blocks + k. Group g consumes the tiles
// t = g, g + 2, ...: it waits for its turn (a named barrier the other group
// arrives on after its mainloop), waits for and reads the tile's items,
// frees each slot, hands the turn over, and stores the tile's checksum
// (the epilogue). Between its tiles a group steps its cursor past the other
// group's k_blocks slots without waiting on them
// (ProducerConsumerPipeline::consumer_skip): its next wait names a phase
// several completions after the last one it observed, which PTX allows as
// long as the phase is the barrier's current or previous one
// (docs/hardware.md, "Mbarrier phases"). The turns make sure it is: a
// group starts a tile only after the other group has waited for every item
// of the tile before.
//
// Written once against the Backend; the broken variants each plant one bug.
#pragma once

#include <cstdint>

#include "core/backend.hpp"
#include "core/pipeline.hpp"
#include "core/smem.hpp"

namespace wspipe::examples {

enum class PingPongBug : std::uint8_t {
  none,
  // The groups do not take turns: a group waits for its next tile's items
  // while the other group's tile is still in the ring, a phase that has
  // not begun (its parity names an earlier, completed phase: stale data).
  no_turns,
  // A group never steps past the other group's tiles: its cursor lags by
  // k_blocks slots, and its next wait names a phase laps behind (with
  // k_blocks an odd multiple of the stages, the wrong parity too).
  no_skip,
  // The consumers free each slot before reading it: the producer's next
  // item overwrites what they read.
  release_early,
};

inline constexpr std::uint32_t kPingPongWords = 4;  // payload words per slot
inline constexpr std::uint32_t kPingPongProducerWarp = 0;
inline constexpr std::uint32_t kPingPongMaxGroupWarps = 4;
// The named barrier that hands the turn to group g (0 or 1).
WSPIPE_HD constexpr std::uint32_t pingpong_turn_barrier(std::uint32_t group) { return 1 + group; }

template <int Stages>
struct PingPongStorage {
  SharedMemBarrier barriers[2 * Stages];  // full[Stages] then empty[Stages]
  std::uint32_t slot[Stages][kPingPongWords];
};

WSPIPE_HD constexpr std::uint32_t pingpong_word(std::uint32_t item, std::uint32_t k) {
  return item * 2246822519u + k * 3266489917u + 1u;
}

// What group warps store for tile t: the sum of its items' words (mod 2^32).
WSPIPE_HD constexpr std::uint32_t pingpong_checksum(std::uint32_t tile, std::uint32_t k_blocks) {
  std::uint32_t sum = 0;
  for (std::uint32_t k = 0; k < k_blocks; ++k)
    for (std::uint32_t w = 0; w < kPingPongWords; ++w) sum += pingpong_word(tile * k_blocks + k, w);
  return sum;
}

struct PingPongArgs {
  std::uint32_t tiles = 0;
  std::uint32_t k_blocks = 1;     // items per tile
  std::uint32_t group_warps = 1;  // warps per consumer group, in [1, kPingPongMaxGroupWarps]
  std::uint32_t* out = nullptr;   // out[tile]: the tile's checksum, stored by its group
  PingPongBug bug = PingPongBug::none;
  // The consumers check every item they read (B::check). Off, a wrong read
  // shows only to the race checker and in the checksums.
  bool check_items = true;
};

WSPIPE_HD constexpr std::uint32_t pingpong_warps(std::uint32_t group_warps) { return 1 + 2 * group_warps; }

template <Backend B, int Stages>
WSPIPE_HD void pingpong_kernel(const PingPongArgs& args) {
  using Pipe = ProducerConsumerPipeline<B, Stages>;
  auto& smem = B::template shared_storage<PingPongStorage<Stages>>();
  const std::uint32_t warp = B::warp_idx();
  const std::uint32_t k_blocks = args.k_blocks;

  // full: one elected producer arrival; empty: one elected arrival per warp
  // of the group that consumes the slot.
  if (warp == kPingPongProducerWarp) {
    Pipe(smem.barriers).init_mbars(1, args.group_warps);
    B::fence_init();
  }
  B::cluster_sync();

  if (warp == kPingPongProducerWarp) {
    Pipe pipe(smem.barriers);
    for (std::uint32_t i = 0; i < args.tiles * k_blocks; ++i) {
      auto slot = pipe.produce();
      const SmemView<B, std::uint32_t> words(smem.slot[slot.index()], kPingPongWords);
      // One lane writes the item and signals it, so its arrive releases
      // its own stores.
      B::elect_one([&] {
        for (std::uint32_t k = 0; k < kPingPongWords; ++k) words.store(k, pingpong_word(i, k));
        slot.arrive();  // one arrival: one lane is active
      });
    }
    return;
  }

  const std::uint32_t group = (warp - 1) / args.group_warps;
  const std::uint32_t turn_threads = 2 * args.group_warps * 32;  // both groups meet at a turn barrier
  const bool take_turns = args.bug != PingPongBug::no_turns;
  Pipe pipe(smem.barriers);
  if (group == 1) pipe.consumer_skip(k_blocks);  // group 0's first tile
  for (std::uint32_t t = group; t < args.tiles; t += 2) {
    if (take_turns && t > 0) B::named_sync(pingpong_turn_barrier(group), turn_threads);  // the other group is done
    std::uint32_t sum = 0;
    for (std::uint32_t k = 0; k < k_blocks; ++k) {
      const std::uint32_t item = t * k_blocks + k;
      auto slot = pipe.acquire_consumer();
      if (args.bug == PingPongBug::release_early) slot.arrive_elected();  // the bug: freed before it is read
      const SmemView<B, std::uint32_t> words(smem.slot[slot.index()], kPingPongWords);
      bool intact = true;
      for (std::uint32_t w = 0; w < kPingPongWords; ++w) {
        const std::uint32_t v = words.load(w);
        intact &= v == pingpong_word(item, w);
        sum += v;
      }
      if (args.check_items) B::check(intact, "pingpong: item out of sequence or torn");
      if (args.bug == PingPongBug::release_early) {
        slot.release_without_signal();
      } else {
        slot.release_elected();
      }
    }
    // The other group's turn: its next tile follows this one.
    if (take_turns && t + 1 < args.tiles) B::named_arrive(pingpong_turn_barrier(group ^ 1u), turn_threads);
    if (args.bug != PingPongBug::no_skip) pipe.consumer_skip(k_blocks);  // the other group's tile
    // The epilogue, which overlaps the other group's mainloop.
    if (warp == 1 + group * args.group_warps) B::elect_one([&] { args.out[t] = sum; });
  }
}

}  // namespace wspipe::examples
