// The MMA -> epilogue pipeline over TMEM accumulator stages, after Modular
// MAX's OutputTilePipeline (formerly OutputRingBuffer; structured_kernels/
// tile_pipeline.mojo; docs/pipeline-api.md "OutputTilePipeline").
//
// Barriers: accum-full[S] then accum-empty[S] (a ProducerConsumerPipeline).
// The MMA warp acquires a stage (waits accum-empty), issues its MMAs into
// the stage's TMEM columns, and releases it with an elected tcgen05.commit
// on accum-full (multicast to both CTAs of the pair for cta_group 2). The
// epilogue acquires it (waits accum-full), loads it, and every epilogue
// thread arrives on accum-empty right after its last tcgen05.ld and
// tcgen05.wait::ld ("early release", to the leader CTA's barrier for
// cta_group 2); release_from_epilogue then only steps the cursor.
// Counts: accum-full 1 (one commit), accum-empty 128 * cta_group.
//
// With cta_group 2 the peer CTA's epilogue arrives on the leader CTA's
// accum-empty, remotely: the leader must not exit before those arrivals
// land. The kernels here get that from TmemDeallocBarrier (each CTA's
// dealloc waits for both CTAs' epilogues); a kernel without it needs a
// final cluster barrier.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "pipeline.hpp"
#include "tmem.hpp"

namespace wspipe {

struct OutputPipelineConfig {
  int num_stages = 2;
  std::uint32_t stage_stride_cols = 256;
  int cta_group = 1;
};

template <Backend B, OutputPipelineConfig Opc>
class OutputTilePipeline;

// A stage as the MMA warp or the epilogue holds it: its index and TMEM.
template <OutputPipelineConfig Opc>
struct OutputStage {
  using Tmem = TmemStage<Opc.num_stages, Opc.stage_stride_cols, Opc.cta_group>;
  std::uint32_t index;
  Tmem tmem;
};

// Scoped forms: the MMA warp's stage (exit: release_from_mma) and the
// epilogue's (exit: release_from_epilogue). Not copyable, so each scope
// releases once; the epilogue still makes its early accum-empty arrive.
template <Backend B, OutputPipelineConfig Opc>
class OutputProducer {
 public:
  OutputProducer(const OutputProducer&) = delete;
  OutputProducer& operator=(const OutputProducer&) = delete;
  WSPIPE_HD ~OutputProducer() noexcept(false) { pipe_->release_from_mma(stage_, loc_); }
  WSPIPE_HD const OutputStage<Opc>& stage() const { return stage_; }
  WSPIPE_HD std::uint32_t index() const { return stage_.index; }
  WSPIPE_HD const typename OutputStage<Opc>::Tmem& tmem() const { return stage_.tmem; }

 private:
  friend class OutputTilePipeline<B, Opc>;
  WSPIPE_HD OutputProducer(OutputTilePipeline<B, Opc>* pipe, OutputStage<Opc> stage, SourceLoc loc)
      : pipe_(pipe), stage_(stage), loc_(loc) {}
  OutputTilePipeline<B, Opc>* pipe_;
  OutputStage<Opc> stage_;
  SourceLoc loc_;
};

template <Backend B, OutputPipelineConfig Opc>
class OutputConsumer {
 public:
  OutputConsumer(const OutputConsumer&) = delete;
  OutputConsumer& operator=(const OutputConsumer&) = delete;
  WSPIPE_HD ~OutputConsumer() noexcept(false) { pipe_->release_from_epilogue(loc_); }
  WSPIPE_HD const OutputStage<Opc>& stage() const { return stage_; }
  WSPIPE_HD std::uint32_t index() const { return stage_.index; }
  WSPIPE_HD const typename OutputStage<Opc>::Tmem& tmem() const { return stage_.tmem; }
  // The early release: after the warp's last tcgen05.ld and wait::ld.
  WSPIPE_HD void arrive_empty(SourceLoc loc = SourceLoc::current()) const { pipe_->arrive_empty(stage_, loc); }

 private:
  friend class OutputTilePipeline<B, Opc>;
  WSPIPE_HD OutputConsumer(OutputTilePipeline<B, Opc>* pipe, OutputStage<Opc> stage, SourceLoc loc)
      : pipe_(pipe), stage_(stage), loc_(loc) {}
  OutputTilePipeline<B, Opc>* pipe_;
  OutputStage<Opc> stage_;
  SourceLoc loc_;
};

template <Backend B, OutputPipelineConfig Opc>
class OutputTilePipeline {
  static_assert(Opc.num_stages >= 1, "OutputTilePipeline: OutputPipelineConfig::num_stages must be at least 1");
  static_assert(Opc.stage_stride_cols >= 1 && Opc.num_stages * Opc.stage_stride_cols <= kTmemColumns,
                "OutputTilePipeline: OutputPipelineConfig::num_stages * stage_stride_cols must fit in 512 columns");
  static_assert(Opc.cta_group == 1 || Opc.cta_group == 2,
                "OutputTilePipeline: OutputPipelineConfig::cta_group must be 1 or 2");

 public:
  static constexpr OutputPipelineConfig kConfig = Opc;
  static constexpr std::uint32_t kEpilogueThreads = 128;
  using Pipeline = ProducerConsumerPipeline<B, Opc.num_stages>;
  using Stage = OutputStage<Opc>;
  using Tmem = TmemAllocation<B, Opc.cta_group>;
  static constexpr int kNumBarriers = Pipeline::kNumBarriers;

  // `barriers`: kNumBarriers barriers in shared memory. `mma_complete_mask`:
  // the CTAs whose accum-full the MMA's commit signals (cta_group 2: the
  // pair, self_mask | peer_mask).
  WSPIPE_HD OutputTilePipeline(SharedMemBarrier* barriers, Tmem tmem, std::uint16_t mma_complete_mask)
      : pipeline_(barriers), tmem_(tmem), mma_complete_mask_(mma_complete_mask) {}

  // By one warp, before fence_init and the cluster barrier.
  WSPIPE_HD static void init_barriers(SharedMemBarrier* barriers, SourceLoc loc = SourceLoc::current()) {
    Pipeline(barriers).init_mbars(1, kEpilogueThreads * Opc.cta_group, "accum_full", "accum_empty", loc);
  }

  // ---- MMA warp
  WSPIPE_HD Stage acquire_for_mma(SourceLoc loc = SourceLoc::current()) {
    const std::uint32_t idx = pipeline_.producer_stage();
    pipeline_.wait_consumer(loc);
    return Stage{idx, typename Stage::Tmem(tmem_, idx)};
  }
  // One elected commit on accum-full: it arrives once the MMAs issued into
  // the stage have completed.
  WSPIPE_HD void release_from_mma(const Stage& stage, SourceLoc loc = SourceLoc::current()) {
    B::elect_one([&] {
      if constexpr (Opc.cta_group == 1) {
        B::template mma_commit<1>(pipeline_.full_mbar(stage.index), loc);
      } else {
        B::template mma_commit_multicast<2>(pipeline_.full_mbar(stage.index), mma_complete_mask_, loc);
      }
    });
    pipeline_.producer_step(loc);
  }
  WSPIPE_HD OutputProducer<B, Opc> producer(SourceLoc loc = SourceLoc::current()) {
    return OutputProducer<B, Opc>(this, acquire_for_mma(loc), loc);
  }

  // ---- epilogue warps
  WSPIPE_HD Stage acquire_for_epilogue(SourceLoc loc = SourceLoc::current()) {
    const std::uint32_t idx = pipeline_.consumer_stage();
    pipeline_.wait_producer(loc);
    return Stage{idx, typename Stage::Tmem(tmem_, idx)};
  }
  // Every epilogue thread (warp level: 32 arrivals), after its last
  // tcgen05.ld of the stage and tcgen05.wait::ld; for cta_group 2 on the
  // leader CTA's barrier, which counts both CTAs' epilogues.
  WSPIPE_HD void arrive_empty(const Stage& stage, SourceLoc loc = SourceLoc::current()) const {
    if constexpr (Opc.cta_group == 1) {
      B::arrive(pipeline_.empty_mbar(stage.index), loc);
    } else {
      B::arrive_remote(pipeline_.empty_mbar(stage.index), B::cta_rank() & ~1u, loc);
    }
  }
  // Steps only: the arrive is arrive_empty, made earlier.
  WSPIPE_HD void release_from_epilogue(SourceLoc loc = SourceLoc::current()) { pipeline_.consumer_step(loc); }
  WSPIPE_HD OutputConsumer<B, Opc> consumer(SourceLoc loc = SourceLoc::current()) {
    return OutputConsumer<B, Opc>(this, acquire_for_epilogue(loc), loc);
  }

  WSPIPE_HD Pipeline& get_pipeline() { return pipeline_; }
  WSPIPE_HD const Tmem& tmem() const { return tmem_; }
  WSPIPE_HD std::uint16_t mma_complete_mask() const { return mma_complete_mask_; }

 private:
  Pipeline pipeline_;
  Tmem tmem_;
  std::uint16_t mma_complete_mask_;
};

// The older name (MAX's OutputRingBuffer).
template <Backend B, OutputPipelineConfig Opc>
using OutputRingBuffer = OutputTilePipeline<B, Opc>;

}  // namespace wspipe
