// pipeline3: a loader warp, a transformer warp and a writer warp, chained by
// two ProducerConsumerPipelines (rings of `Stages` slots in shared memory).
// The loader also publishes a key through a named barrier; the transformer
// maps each item with it and the writer checks every output against the
// same map before storing it. Written once against the Backend concept
// (core/), so the same code runs on the GPU and on wspipe's emulator.
//
// A kernel of this project, not of wspipe: it is explored through wspipe's
// installed package (wspipe::emu, wspipe::testing, wspipe::cli).
#pragma once

#include <cstdint>

#include "core/backend.hpp"
#include "core/pipeline.hpp"

namespace pipeline3 {

using wspipe::ProducerConsumerPipeline;
using wspipe::SharedMemBarrier;

// Planted bugs, for checking that exploration finds them.
enum class Bug : std::uint8_t {
  none,
  // The transformer frees its input slot, then waits for an output slot,
  // then reads the input: a loader that runs ahead refills the slot first.
  early_release,
  // The transformer signals its output slot with the whole warp (32
  // arrivals) on a barrier that expects one.
  unelected_arrive,
};

inline constexpr std::uint32_t kLoaderWarp = 0;
inline constexpr std::uint32_t kTransformerWarp = 1;
inline constexpr std::uint32_t kWriterWarp = 2;
inline constexpr std::uint32_t kWarps = 3;
// Named barrier 1, all three warps: the loader arrives once the key is in
// shared memory, the others sync on it before reading the key.
inline constexpr std::uint32_t kKeyBarrier = 1;
inline constexpr std::uint32_t kKeyThreads = kWarps * 32;

template <int Stages>
struct Storage {
  SharedMemBarrier in_barriers[2 * Stages];   // loader -> transformer: full[Stages] then empty[Stages]
  SharedMemBarrier out_barriers[2 * Stages];  // transformer -> writer
  std::uint32_t in_slot[Stages];
  std::uint32_t out_slot[Stages];
  std::uint32_t key;
};

WSPIPE_HD constexpr std::uint32_t transform(std::uint32_t x, std::uint32_t key) {
  return (x ^ key) * 2654435761u + 1u;
}

struct Params {
  const std::uint32_t* input;  // items words, read by the loader
  std::uint32_t* output;       // items words, written by the writer
  std::uint32_t items;
  std::uint32_t key;
  Bug bug;
  bool check = true;  // the writer checks every output; false: the race checker alone looks at the data
};

template <wspipe::Backend B, int Stages>
WSPIPE_HD void kernel(const Params& p) {
  using Pipe = ProducerConsumerPipeline<B, Stages>;
  auto& smem = B::template shared_storage<Storage<Stages>>();
  const std::uint32_t warp = B::warp_idx();

  // full: one elected arrival; empty: in, one elected arrival (release_elected); out, the writer's 32 lanes.
  if (warp == kLoaderWarp) {
    Pipe(smem.in_barriers).init_mbars(1, 1, "in_full", "in_empty");
    Pipe(smem.out_barriers).init_mbars(1, 32, "out_full", "out_empty");
    B::fence_init();
  }
  B::cluster_sync();

  if (warp == kLoaderWarp) {
    smem.key = p.key;
    B::named_arrive(kKeyBarrier, kKeyThreads);  // publish the key without waiting for the readers
    Pipe in(smem.in_barriers);
    for (std::uint32_t i = 0; i < p.items; ++i) {
      auto slot = in.produce();
      smem.in_slot[slot.index()] = p.input[i];
      slot.arrive_elected();
    }
  } else if (warp == kTransformerWarp) {
    B::named_sync(kKeyBarrier, kKeyThreads);
    const std::uint32_t key = smem.key;
    Pipe in(smem.in_barriers);
    Pipe out(smem.out_barriers);
    for (std::uint32_t i = 0; i < p.items; ++i) {
      auto src = in.acquire_consumer();
      std::uint32_t x = 0;
      if (p.bug != Bug::early_release) x = smem.in_slot[src.index()];
      src.release_elected();  // one arrival; the whole warp steps its cursor
      auto dst = out.produce();
      if (p.bug == Bug::early_release) x = smem.in_slot[src.index()];  // the bug: freed two lines up
      smem.out_slot[dst.index()] = transform(x, key);
      if (p.bug == Bug::unelected_arrive) {
        dst.arrive();  // the bug: 32 arrivals
      } else {
        dst.arrive_elected();
      }
    }
  } else if (warp == kWriterWarp) {
    B::named_sync(kKeyBarrier, kKeyThreads);
    const std::uint32_t key = smem.key;
    Pipe out(smem.out_barriers);
    for (std::uint32_t i = 0; i < p.items; ++i) {
      auto slot = out.consume();
      const std::uint32_t v = smem.out_slot[slot.index()];
      const std::uint32_t want = transform(p.input[i], key);
      if (p.check) B::check(v == want, "pipeline3: output out of sequence", {{"item", i}, {"got", v}, {"want", want}});
      p.output[i] = v;
    }
  }
}

}  // namespace pipeline3
