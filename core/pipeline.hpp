// ProducerConsumerPipeline: a ring of `Stages` slots guarded by mbarriers,
// after Modular MAX's structured_kernels/pipeline.mojo (docs/pipeline-api.md).
//
// Shared state is only the barriers: full[0..S) then empty[0..S), in the
// kernel's shared memory. The producer fills slot i, then full[i] completes
// (by thread arrivals, or by TMA bytes / tcgen05.commit, which the caller
// issues); the consumer waits full[i], reads, and releases empty[i]. Every
// warp keeps its own copy of this object and so its own cursors.
//
// Arrival conventions (docs/arrival-conventions.md): every entry point is
// called at warp level, and its name says how many arrivals it makes:
//   arrive() / release() / consume()        one per active lane (32 per warp)
//   arrive_elected() / release_elected() /  one, by an elected lane
//   consume_elected()
//   release_without_signal() /              none: the slot is signalled by
//   consume_explicit(), ProducerStage::     tcgen05.commit, TMA bytes or an
//   release()                               arrive the caller makes
// Size init_mbars' counts to match. The cursors are every lane's own state:
// they step at warp level, never inside elect_one or for_each_lane (the
// emulator reports warp.divergent-state), which is why the elected forms
// elect only the arrival.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "pipeline_state.hpp"

namespace wspipe {

template <Backend B, int Stages>
class ProducerConsumerPipeline;

// A producer's hold on one slot. The slot's full barrier is signalled by
// the caller: arrive() or arrive_elected() for thread-written data, or the
// async engine that writes it (TMA bytes, tcgen05.commit). release() only
// steps the cursor.
template <Backend B, int Stages>
class ProducerStage {
 public:
  WSPIPE_HD std::uint32_t index() const { return index_; }
  WSPIPE_HD SharedMemBarrier& full_mbar() const { return pipe_->full_mbar(index_); }
  // Arrive on this slot's full barrier: one arrival per active lane.
  WSPIPE_HD void arrive(SourceLoc loc = SourceLoc::current()) const { B::arrive(full_mbar(), loc); }
  // The same with one arrival, by an elected lane (a count-1 barrier).
  WSPIPE_HD void arrive_elected(SourceLoc loc = SourceLoc::current()) const {
    B::elect_one([&] { B::arrive(full_mbar(), loc); });
  }
  WSPIPE_HD void release(SourceLoc loc = SourceLoc::current()) const { pipe_->producer_step(loc); }

 private:
  friend class ProducerConsumerPipeline<B, Stages>;
  WSPIPE_HD ProducerStage(ProducerConsumerPipeline<B, Stages>* pipe, std::uint32_t index)
      : pipe_(pipe), index_(index) {}
  ProducerConsumerPipeline<B, Stages>* pipe_;
  std::uint32_t index_;
};

// A consumer's hold on one slot; it has no producer methods.
template <Backend B, int Stages>
class ConsumerStage {
 public:
  WSPIPE_HD std::uint32_t index() const { return index_; }
  WSPIPE_HD SharedMemBarrier& empty_mbar() const { return pipe_->empty_mbar(index_); }
  // Arrive on the slot's empty barrier without stepping: one arrival per
  // active lane, or one by an elected lane.
  WSPIPE_HD void arrive(SourceLoc loc = SourceLoc::current()) const { B::arrive(empty_mbar(), loc); }
  WSPIPE_HD void arrive_elected(SourceLoc loc = SourceLoc::current()) const {
    B::elect_one([&] { B::arrive(empty_mbar(), loc); });
  }
  // Free the slot (one arrival per active lane) and step the cursor.
  WSPIPE_HD void release(SourceLoc loc = SourceLoc::current()) const {
    arrive(loc);
    pipe_->consumer_step(loc);
  }
  // Free the slot with one arrival (an empty barrier counting one per
  // consumer warp) and step the cursor, in one call at warp level: the
  // arrival is elected, the step is the whole warp's. Not
  // elect_one([&] { release(); }), which steps the elected lane's cursor only.
  WSPIPE_HD void release_elected(SourceLoc loc = SourceLoc::current()) const {
    arrive_elected(loc);
    pipe_->consumer_step(loc);
  }
  // Step only: the slot is released by someone else (tcgen05.commit, a
  // lane-guarded or remote arrive the caller makes).
  WSPIPE_HD void release_without_signal(SourceLoc loc = SourceLoc::current()) const { pipe_->consumer_step(loc); }

 private:
  friend class ProducerConsumerPipeline<B, Stages>;
  WSPIPE_HD ConsumerStage(ProducerConsumerPipeline<B, Stages>* pipe, std::uint32_t index)
      : pipe_(pipe), index_(index) {}
  ProducerConsumerPipeline<B, Stages>* pipe_;
  std::uint32_t index_;
};

// How a consumer's scope frees its slot on exit: one arrival per active
// lane, one elected arrival, or none (the caller or an async engine signals).
enum class ConsumerArrival : std::uint8_t { per_lane, elected, none };

// Scoped forms: entering waits, leaving releases. Not copyable or movable,
// so each scope releases exactly once; the release is reported at the line
// that opened the scope.
template <Backend B, int Stages>
class ProduceContext {
 public:
  ProduceContext(const ProduceContext&) = delete;
  ProduceContext& operator=(const ProduceContext&) = delete;
  WSPIPE_HD ~ProduceContext() noexcept(false) { stage_.release(loc_); }
  WSPIPE_HD std::uint32_t index() const { return stage_.index(); }
  WSPIPE_HD SharedMemBarrier& full_mbar() const { return stage_.full_mbar(); }
  WSPIPE_HD void arrive(SourceLoc loc = SourceLoc::current()) const { stage_.arrive(loc); }
  WSPIPE_HD void arrive_elected(SourceLoc loc = SourceLoc::current()) const { stage_.arrive_elected(loc); }

 private:
  friend class ProducerConsumerPipeline<B, Stages>;
  WSPIPE_HD ProduceContext(ProducerStage<B, Stages> s, SourceLoc loc) : stage_(s), loc_(loc) {}
  ProducerStage<B, Stages> stage_;
  SourceLoc loc_;
};

template <Backend B, int Stages, ConsumerArrival Arrival>
class ConsumeContextT {
 public:
  ConsumeContextT(const ConsumeContextT&) = delete;
  ConsumeContextT& operator=(const ConsumeContextT&) = delete;
  WSPIPE_HD ~ConsumeContextT() noexcept(false) {
    if constexpr (Arrival == ConsumerArrival::per_lane) {
      stage_.release(loc_);
    } else if constexpr (Arrival == ConsumerArrival::elected) {
      stage_.release_elected(loc_);
    } else {
      stage_.release_without_signal(loc_);
    }
  }
  WSPIPE_HD std::uint32_t index() const { return stage_.index(); }
  WSPIPE_HD SharedMemBarrier& empty_mbar() const { return stage_.empty_mbar(); }

 private:
  friend class ProducerConsumerPipeline<B, Stages>;
  WSPIPE_HD ConsumeContextT(ConsumerStage<B, Stages> s, SourceLoc loc) : stage_(s), loc_(loc) {}
  ConsumerStage<B, Stages> stage_;
  SourceLoc loc_;  // the scope's release is reported at the line that opened it
};
template <Backend B, int Stages>
using ConsumeContext = ConsumeContextT<B, Stages, ConsumerArrival::per_lane>;
template <Backend B, int Stages>
using ElectedConsumeContext = ConsumeContextT<B, Stages, ConsumerArrival::elected>;
template <Backend B, int Stages>
using ExplicitConsumeContext = ConsumeContextT<B, Stages, ConsumerArrival::none>;

template <Backend B, int Stages>
class ProducerConsumerPipeline {
  static_assert(Stages >= 1 && Stages <= 64, "ProducerConsumerPipeline: Stages must be in [1, 64]");

 public:
  using State = PipelineState<Stages>;
  static constexpr int kStages = Stages;
  static constexpr int kNumBarriers = 2 * Stages;  // full[S] then empty[S]

  // `barriers` points at kNumBarriers barriers in shared memory.
  WSPIPE_HD explicit ProducerConsumerPipeline(SharedMemBarrier* barriers,
                                              State producer = State::producer_start(),
                                              State consumer = State::consumer_start())
      : full_(barriers), empty_(barriers + Stages), producer_(producer), consumer_(consumer) {}

  // Initialise every barrier. Called by one warp (it elects one lane), then
  // every thread of the CTA (cluster) must pass B::fence_init() and a CTA
  // (cluster) barrier before the pipeline is used.
  // The names label the barriers in the emulator's reports and traces.
  WSPIPE_HD void init_mbars(std::uint32_t producer_arrive_count, std::uint32_t consumer_arrive_count,
                            SourceLoc loc = SourceLoc::current()) const {
    init_mbars(producer_arrive_count, consumer_arrive_count, "full", "empty", loc);
  }
  WSPIPE_HD void init_mbars(std::uint32_t producer_arrive_count, std::uint32_t consumer_arrive_count,
                            const char* full_name, const char* empty_name,
                            SourceLoc loc = SourceLoc::current()) const {
    B::elect_one([&] {
      for (int i = 0; i < Stages; ++i) {
        B::init(full_[i], producer_arrive_count, BarrierName{full_name, i}, loc);
        B::init(empty_[i], consumer_arrive_count, BarrierName{empty_name, i}, loc);
      }
    });
  }

  // --- producer side: waits on empty, steps its own cursor
  WSPIPE_HD void wait_consumer(SourceLoc loc = SourceLoc::current()) const {
    B::wait(empty_[producer_.index()], producer_.phase(), producer_.phase_number(), loc);
  }
  WSPIPE_HD bool try_wait_consumer(SourceLoc loc = SourceLoc::current()) const {
    return B::try_wait(empty_[producer_.index()], producer_.phase(), producer_.phase_number(), loc);
  }
  WSPIPE_HD void producer_step(SourceLoc loc = SourceLoc::current()) {
    B::warp_state_step("producer cursor", loc);
    producer_.advance();
  }
  // The barriers of a stage: full (the producer signals it, the consumer
  // waits on it) and empty (the other way round).
  WSPIPE_HD SharedMemBarrier& full_mbar(std::uint32_t stage) const { return full_[stage]; }
  WSPIPE_HD SharedMemBarrier& empty_mbar(std::uint32_t stage) const { return empty_[stage]; }
  [[deprecated("producer_mbar(stage) is the full barrier: use full_mbar(stage)")]] WSPIPE_HD SharedMemBarrier&
  producer_mbar(std::uint32_t stage) const {
    return full_[stage];
  }
  WSPIPE_HD State producer_state() const { return producer_; }
  WSPIPE_HD std::uint32_t producer_stage() const { return producer_.index(); }

  WSPIPE_HD ProducerStage<B, Stages> acquire_producer(SourceLoc loc = SourceLoc::current()) {
    wait_consumer(loc);
    return ProducerStage<B, Stages>(this, producer_.index());
  }
  WSPIPE_HD ProduceContext<B, Stages> produce(SourceLoc loc = SourceLoc::current()) {
    return ProduceContext<B, Stages>(acquire_producer(loc), loc);
  }

  // --- consumer side: waits on full, steps its own cursor
  WSPIPE_HD void wait_producer(SourceLoc loc = SourceLoc::current()) const {
    B::wait(full_[consumer_.index()], consumer_.phase(), consumer_.phase_number(), loc);
  }
  WSPIPE_HD bool try_wait_producer(SourceLoc loc = SourceLoc::current()) const {
    return B::try_wait(full_[consumer_.index()], consumer_.phase(), consumer_.phase_number(), loc);
  }
  WSPIPE_HD void consumer_step(SourceLoc loc = SourceLoc::current()) {
    B::warp_state_step("consumer cursor", loc);
    consumer_.advance();
  }
  // Step past `n` slots that this warp does not consume (others do, as
  // ping-pong consumer groups take turns on whole tiles): neither wait nor
  // release. The next wait names its phase from the cursor's full count,
  // so it stays right however many phases the skipped slots complete.
  WSPIPE_HD void consumer_skip(std::uint32_t n, SourceLoc loc = SourceLoc::current()) {
    B::warp_state_step("consumer cursor", loc);
    consumer_.advance(n);
  }
  [[deprecated("consumer_mbar(stage) is the empty barrier: use empty_mbar(stage)")]] WSPIPE_HD SharedMemBarrier&
  consumer_mbar(std::uint32_t stage) const {
    return empty_[stage];
  }
  WSPIPE_HD State consumer_state() const { return consumer_; }
  WSPIPE_HD std::uint32_t consumer_stage() const { return consumer_.index(); }

  WSPIPE_HD ConsumerStage<B, Stages> acquire_consumer(SourceLoc loc = SourceLoc::current()) {
    wait_producer(loc);
    return ConsumerStage<B, Stages>(this, consumer_.index());
  }
  // Scopes whose exit frees the slot: one arrival per active lane
  // (consume), one elected arrival (consume_elected), none (consume_explicit:
  // the caller's commit or arrive frees it).
  WSPIPE_HD ConsumeContext<B, Stages> consume(SourceLoc loc = SourceLoc::current()) {
    return ConsumeContext<B, Stages>(acquire_consumer(loc), loc);
  }
  WSPIPE_HD ElectedConsumeContext<B, Stages> consume_elected(SourceLoc loc = SourceLoc::current()) {
    return ElectedConsumeContext<B, Stages>(acquire_consumer(loc), loc);
  }
  WSPIPE_HD ExplicitConsumeContext<B, Stages> consume_explicit(SourceLoc loc = SourceLoc::current()) {
    return ExplicitConsumeContext<B, Stages>(acquire_consumer(loc), loc);
  }

 private:
  SharedMemBarrier* full_;
  SharedMemBarrier* empty_;
  State producer_;
  State consumer_;
};

}  // namespace wspipe
