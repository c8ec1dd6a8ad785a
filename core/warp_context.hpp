// Warp contexts: what the MMA warp and the epilogue warps hold for the
// kernel's lifetime, after Modular MAX's warp_context.mojo
// (docs/pipeline-api.md "Warp contexts" and "The per-K path").
//
//   MmaWarpContext       create: allocate TMEM, build the output pipeline;
//                        enter: bar.arrive on named barrier 1 (MMA + epilogue
//                        threads), which publishes the TMEM address;
//                        exit: relinquish, wait for every epilogue thread,
//                        deallocate. per_k_stage(): an MmaKStage.
//   EpilogueWarpContext  the caller first waits on that named barrier
//                        (Sync::wait), then create reads the address;
//                        exit: signal the dealloc barrier.
//                        per_k_stage(input): an EpilogueKContext.
//
// enter() returns a scope object whose destruction is the exit.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "input_pipeline.hpp"
#include "output_pipeline.hpp"
#include "tmem.hpp"

namespace wspipe {

// The named barrier that publishes the TMEM address: id 1, the MMA warp's
// and the epilogue's threads.
template <Backend B, std::uint32_t Threads>
struct TmemAddressSync {
  static_assert(Threads % 32 == 0 && Threads >= 64, "TmemAddressSync<B, Threads>: Threads must be whole warps");
  static constexpr std::uint32_t kId = 1;
  WSPIPE_HD static void arrive(SourceLoc loc = SourceLoc::current()) { B::named_arrive(kId, Threads, loc); }
  WSPIPE_HD static void wait(SourceLoc loc = SourceLoc::current()) { B::named_sync(kId, Threads, loc); }
};

template <Backend B, OutputPipelineConfig Opc, std::uint32_t MmaThreads, std::uint32_t EpilogueThreads>
class EpilogueWarpContext;

// enter()'s scope: its destruction runs the context's exit.
template <class Ctx>
class WarpContextScope {
 public:
  WarpContextScope(const WarpContextScope&) = delete;
  WarpContextScope& operator=(const WarpContextScope&) = delete;
  WSPIPE_HD ~WarpContextScope() noexcept(false) { ctx_->exit(loc_); }

 private:
  friend Ctx;
  WSPIPE_HD WarpContextScope(Ctx* ctx, SourceLoc loc) : ctx_(ctx), loc_(loc) {}
  Ctx* ctx_;
  SourceLoc loc_;
};

// The MMA warp's per-K stage (blockwise FP8): acquire an accumulator stage
// on enter, commit to accum-full and step on exit.
template <Backend B, OutputPipelineConfig Opc>
using MmaKStage = OutputProducer<B, Opc>;

// What both warp contexts hold: the TMEM allocation, this warp's copy of
// the output pipeline (its own cursors), and the dealloc barrier.
template <Backend B, OutputPipelineConfig Opc, std::uint32_t MmaThreads, std::uint32_t EpilogueThreads>
class WarpContextBase {
  static_assert(MmaThreads == 32, "Mma/EpilogueWarpContext<B, Opc, MmaThreads, EpilogueThreads>: MmaThreads must be 32");
  static_assert(EpilogueThreads == 128,
                "Mma/EpilogueWarpContext<B, Opc, MmaThreads, EpilogueThreads>: EpilogueThreads must be 128 (four "
                "warps, one per TMEM lane quarter)");

 public:
  using Pipeline = OutputTilePipeline<B, Opc>;
  using Tmem = TmemAllocation<B, Opc.cta_group>;
  using Dealloc = TmemDeallocBarrier<B, Opc.cta_group>;
  using Sync = TmemAddressSync<B, MmaThreads + EpilogueThreads>;

  WSPIPE_HD WarpContextBase(Tmem tmem, Pipeline output_pipeline, Dealloc dealloc)
      : tmem_(tmem), output_pipeline_(output_pipeline), dealloc_(dealloc) {}

  WSPIPE_HD Pipeline& output_pipeline() { return output_pipeline_; }
  WSPIPE_HD const Tmem& tmem() const { return tmem_; }
  WSPIPE_HD const Dealloc& dealloc_barrier() const { return dealloc_; }

 protected:
  Tmem tmem_;
  Pipeline output_pipeline_;
  Dealloc dealloc_;
};

template <Backend B, OutputPipelineConfig Opc, std::uint32_t MmaThreads, std::uint32_t EpilogueThreads>
class MmaWarpContext : public WarpContextBase<B, Opc, MmaThreads, EpilogueThreads> {
  using Base = WarpContextBase<B, Opc, MmaThreads, EpilogueThreads>;
  using Base::dealloc_;
  using Base::output_pipeline_;
  using Base::tmem_;

 public:
  using typename Base::Dealloc;
  using typename Base::Pipeline;
  using typename Base::Sync;
  using typename Base::Tmem;
  using Base::Base;

  // The whole MMA warp (and, for cta_group 2, the peer CTA's MMA warp too:
  // the allocation is a pair collective).
  WSPIPE_HD static MmaWarpContext create(std::uint32_t* tmem_addr_storage, SharedMemBarrier* accum_barriers,
                                         SharedMemBarrier* dealloc_mbar, std::uint16_t mma_complete_mask,
                                         SourceLoc loc = SourceLoc::current()) {
    const Tmem tmem = Tmem::allocate(tmem_addr_storage, loc);
    return MmaWarpContext(tmem, Pipeline(accum_barriers, tmem, mma_complete_mask), Dealloc(dealloc_mbar));
  }

  [[nodiscard]] WSPIPE_HD WarpContextScope<MmaWarpContext> enter(SourceLoc loc = SourceLoc::current()) {
    Sync::arrive(loc);
    return WarpContextScope<MmaWarpContext>(this, loc);
  }
  WSPIPE_HD void exit(SourceLoc loc = SourceLoc::current()) { dealloc_.complete_dealloc(tmem_, loc); }

  WSPIPE_HD MmaKStage<B, Opc> per_k_stage(SourceLoc loc = SourceLoc::current()) {
    return output_pipeline_.producer(loc);
  }
};

// The epilogue's per-K context (blockwise FP8): enter waits accum-full and
// takes the input pipeline's consumer index without waiting on input-full
// (the A-scales are visible through the MMA warp's wait, which precedes the
// commit this wait observes). The caller reads the scales, then
// arrive_input(); exit steps the input cursor, arrives on accum-empty (every
// epilogue thread) and steps the output cursor.
template <Backend B, OutputPipelineConfig Opc, class InputPipe>
class EpilogueKContext {
 public:
  using Pipeline = OutputTilePipeline<B, Opc>;
  using Stage = typename Pipeline::Stage;

  EpilogueKContext(const EpilogueKContext&) = delete;
  EpilogueKContext& operator=(const EpilogueKContext&) = delete;
  WSPIPE_HD ~EpilogueKContext() noexcept(false) {
    input_->consumer_step(loc_);
    output_->arrive_empty(stage_, loc_);
    output_->release_from_epilogue(loc_);
  }

  WSPIPE_HD const Stage& output_stage() const { return stage_; }
  WSPIPE_HD const typename Stage::Tmem& tmem() const { return stage_.tmem; }
  WSPIPE_HD std::uint32_t input_stage_index() const { return input_index_; }
  // Free the input slot for this warp once its scales are in registers:
  // lanes below the cluster size each arrive once on the slot's empty
  // barrier (the count convention of MAX's blockwise FP8 kernel). Every
  // lane read the slot, and an arrive orders its own lane's reads only: the
  // syncwarp first orders all 32 lanes' before the arrivals.
  WSPIPE_HD void arrive_input(SourceLoc loc = SourceLoc::current()) const {
    SharedMemBarrier& empty = input_->pipeline().empty_mbar(input_index_);
    const std::uint32_t n = B::cluster_size();
    B::syncwarp(loc);
    B::for_each_lane([&](std::uint32_t lane) {
      if (lane < n) B::arrive(empty, loc);
    });
  }

 private:
  template <Backend, OutputPipelineConfig, std::uint32_t, std::uint32_t>
  friend class EpilogueWarpContext;
  WSPIPE_HD EpilogueKContext(Pipeline* output, InputPipe* input, SourceLoc loc)
      : output_(output), input_(input), stage_(output->acquire_for_epilogue(loc)),
        input_index_(input->consumer_stage()), loc_(loc) {}
  Pipeline* output_;
  InputPipe* input_;
  Stage stage_;
  std::uint32_t input_index_;
  SourceLoc loc_;
};

template <Backend B, OutputPipelineConfig Opc, std::uint32_t MmaThreads, std::uint32_t EpilogueThreads>
class EpilogueWarpContext : public WarpContextBase<B, Opc, MmaThreads, EpilogueThreads> {
  using Base = WarpContextBase<B, Opc, MmaThreads, EpilogueThreads>;
  using Base::dealloc_;
  using Base::output_pipeline_;

 public:
  using typename Base::Dealloc;
  using typename Base::Pipeline;
  using typename Base::Sync;
  using typename Base::Tmem;
  using Base::Base;

  // Call Sync::wait() first: it orders the alloc's store of the address
  // before this read.
  WSPIPE_HD static EpilogueWarpContext create(const std::uint32_t* tmem_addr_storage,
                                              SharedMemBarrier* accum_barriers, SharedMemBarrier* dealloc_mbar,
                                              std::uint16_t mma_complete_mask,
                                              SourceLoc loc = SourceLoc::current()) {
    const Tmem tmem = Tmem::from_shared(tmem_addr_storage, loc);
    return EpilogueWarpContext(tmem, Pipeline(accum_barriers, tmem, mma_complete_mask), Dealloc(dealloc_mbar));
  }

  [[nodiscard]] WSPIPE_HD WarpContextScope<EpilogueWarpContext> enter(SourceLoc loc = SourceLoc::current()) {
    return WarpContextScope<EpilogueWarpContext>(this, loc);
  }
  WSPIPE_HD void exit(SourceLoc loc = SourceLoc::current()) { dealloc_.signal_complete(loc); }

  template <class InputPipe>
  WSPIPE_HD EpilogueKContext<B, Opc, InputPipe> per_k_stage(InputPipe& input_pipeline,
                                                            SourceLoc loc = SourceLoc::current()) {
    return EpilogueKContext<B, Opc, InputPipe>(&output_pipeline_, &input_pipeline, loc);
  }
};

}  // namespace wspipe
