// The TMA -> MMA ring of shared-memory tiles, after Modular MAX's
// InputTilePipeline (structured_kernels/tile_pipeline.mojo;
// docs/pipeline-api.md "InputTilePipeline").
//
// NumGroupStages barrier pairs (full, empty); each group stage holds
// KGroupSize tiles of the Payload (tile index stage * KGroupSize + j). The
// load warp acquires a stage (waits empty), arms full with one elected
// arrive.expect_tx(bytes) and issues the TMA loads, whose complete_tx
// completes the phase. The MMA warp acquires it (waits full), issues its
// MMAs and frees the slot with an elected tcgen05.commit on empty: never
// with a thread arrive, which would free it while the MMAs still read it
// (docs/hardware.md bug 2). Before exiting, the load warp drains the ring, so
// that no commit or multicast still targets its CTA (bug 15).
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "pipeline.hpp"

namespace wspipe {

template <Backend B, class Payload, int NumGroupStages, int KGroupSize>
class InputTilePipeline;

// The load warp's hold on a stage.
template <Backend B, class Payload, int NumGroupStages, int KGroupSize>
class InputProducerStage {
 public:
  using Pipe = InputTilePipeline<B, Payload, NumGroupStages, KGroupSize>;
  WSPIPE_HD std::uint32_t index() const { return index_; }
  WSPIPE_HD std::uint32_t tile(std::uint32_t j) const { return index_ * KGroupSize + j; }
  WSPIPE_HD const Payload& payload() const { return pipe_->payload(); }
  WSPIPE_HD SharedMemBarrier& full_mbar() const { return pipe_->pipeline().full_mbar(index_); }
  // The stage's one arrival, with the bytes its loads will deliver (call it
  // inside elect_one, on the CTA whose barrier the loads signal).
  WSPIPE_HD void expect_bytes(std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) const {
    B::arrive_expect_tx(full_mbar(), bytes, loc);
  }
  // Steps only (the TMA's bytes complete the slot).
  WSPIPE_HD void release(SourceLoc loc = SourceLoc::current()) const { pipe_->pipeline().producer_step(loc); }

 private:
  friend Pipe;
  WSPIPE_HD InputProducerStage(Pipe* pipe, std::uint32_t index) : pipe_(pipe), index_(index) {}
  Pipe* pipe_;
  std::uint32_t index_;
};

// The MMA warp's hold on a stage.
template <Backend B, class Payload, int NumGroupStages, int KGroupSize>
class InputConsumerStage {
 public:
  using Pipe = InputTilePipeline<B, Payload, NumGroupStages, KGroupSize>;
  WSPIPE_HD std::uint32_t index() const { return index_; }
  WSPIPE_HD std::uint32_t tile(std::uint32_t j) const { return index_ * KGroupSize + j; }
  WSPIPE_HD const Payload& payload() const { return pipe_->payload(); }
  WSPIPE_HD SharedMemBarrier& empty_mbar() const { return pipe_->pipeline().empty_mbar(index_); }
  // Free the slot once the MMAs issued so far have read it: an elected
  // tcgen05.commit on empty, multicast to the CTAs of `mask` when it is not 0.
  // A multicast commit is right only when the CTAs' slots are filled in
  // lockstep (their loads multicast to each other, or one CTA pair's MMA
  // reads both): otherwise a faster CTA's commit can land in a peer's next
  // phase before the peer's load warp waited for the previous one.
  template <int CtaGroup>
  WSPIPE_HD void commit(std::uint16_t mask = 0, SourceLoc loc = SourceLoc::current()) const {
    B::elect_one([&] {
      if (mask == 0) {
        B::template mma_commit<CtaGroup>(empty_mbar(), loc);
      } else {
        B::template mma_commit_multicast<CtaGroup>(empty_mbar(), mask, loc);
      }
    });
  }
  // Steps only (the commit frees the slot).
  WSPIPE_HD void release(SourceLoc loc = SourceLoc::current()) const { pipe_->pipeline().consumer_step(loc); }

 private:
  friend Pipe;
  WSPIPE_HD InputConsumerStage(Pipe* pipe, std::uint32_t index) : pipe_(pipe), index_(index) {}
  Pipe* pipe_;
  std::uint32_t index_;
};

// Scoped forms: leaving steps the cursor (reported at the line that opened
// the scope).
template <class Stage>
class ScopedInputStage : public Stage {
 public:
  WSPIPE_HD ScopedInputStage(Stage s, SourceLoc loc) : Stage(s), loc_(loc) {}
  ScopedInputStage(const ScopedInputStage&) = delete;
  ScopedInputStage& operator=(const ScopedInputStage&) = delete;
  WSPIPE_HD ~ScopedInputStage() noexcept(false) { Stage::release(loc_); }

 private:
  SourceLoc loc_;
};

template <Backend B, class Payload, int NumGroupStages, int KGroupSize>
class InputTilePipeline {
  static_assert(NumGroupStages >= 1 && NumGroupStages <= 64,
                "InputTilePipeline<B, Payload, NumGroupStages, KGroupSize>: NumGroupStages must be in [1, 64]");
  static_assert(KGroupSize >= 1, "InputTilePipeline<B, Payload, NumGroupStages, KGroupSize>: KGroupSize must be >= 1");

 public:
  using Pipeline = ProducerConsumerPipeline<B, NumGroupStages>;
  using ProducerStage = InputProducerStage<B, Payload, NumGroupStages, KGroupSize>;
  using ConsumerStage = InputConsumerStage<B, Payload, NumGroupStages, KGroupSize>;
  static constexpr int kNumGroupStages = NumGroupStages;
  static constexpr int kKGroupSize = KGroupSize;
  static constexpr int kNumTiles = NumGroupStages * KGroupSize;
  static constexpr int kNumBarriers = Pipeline::kNumBarriers;

  WSPIPE_HD InputTilePipeline(SharedMemBarrier* barriers, Payload payload) : pipeline_(barriers), payload_(payload) {}

  // By one warp before fence_init and the cluster barrier. full: the one
  // expect_tx arrival; empty: `consumer_count` (commits, plus any other
  // readers' arrivals, e.g. the epilogue's for A-scales).
  WSPIPE_HD static void init_barriers(SharedMemBarrier* barriers, std::uint32_t consumer_count,
                                      SourceLoc loc = SourceLoc::current()) {
    Pipeline(barriers).init_mbars(1, consumer_count, "input_full", "input_empty", loc);
  }

  // ---- load warp
  WSPIPE_HD ProducerStage acquire_producer(SourceLoc loc = SourceLoc::current()) {
    const std::uint32_t idx = pipeline_.producer_stage();
    pipeline_.wait_consumer(loc);
    return ProducerStage(this, idx);
  }
  WSPIPE_HD ScopedInputStage<ProducerStage> producer(SourceLoc loc = SourceLoc::current()) {
    return ScopedInputStage<ProducerStage>(acquire_producer(loc), loc);
  }
  // Wait until every stage has been freed: no commit (or peer multicast)
  // still targets this CTA's slots when the load warp, and then the CTA,
  // exits.
  WSPIPE_HD void drain(SourceLoc loc = SourceLoc::current()) {
    for (int i = 0; i < NumGroupStages; ++i) {
      pipeline_.wait_consumer(loc);
      pipeline_.producer_step(loc);
    }
  }

  // ---- MMA warp
  WSPIPE_HD ConsumerStage acquire_consumer(SourceLoc loc = SourceLoc::current()) {
    const std::uint32_t idx = pipeline_.consumer_stage();
    pipeline_.wait_producer(loc);
    return ConsumerStage(this, idx);
  }
  WSPIPE_HD ScopedInputStage<ConsumerStage> consumer(SourceLoc loc = SourceLoc::current()) {
    return ScopedInputStage<ConsumerStage>(acquire_consumer(loc), loc);
  }

  // ---- a reader that follows the consumer cursor without waiting on full
  // (the blockwise-FP8 epilogue's A-scales, EpilogueKContext)
  WSPIPE_HD std::uint32_t consumer_stage() const { return pipeline_.consumer_stage(); }
  WSPIPE_HD void consumer_step(SourceLoc loc = SourceLoc::current()) { pipeline_.consumer_step(loc); }

  WSPIPE_HD Pipeline& pipeline() { return pipeline_; }
  WSPIPE_HD const Payload& payload() const { return payload_; }

 private:
  Pipeline pipeline_;
  Payload payload_;
};

}  // namespace wspipe
