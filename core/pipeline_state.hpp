// PipelineState: the one place where stage/phase arithmetic lives.
#pragma once

#include <cstdint>

#include "barrier.hpp"
#include "config.hpp"

namespace wspipe {

// A cursor into a ring of `Stages` slots, each guarded by an mbarrier.
//   index: the slot, in [0, Stages)
//   phase: the parity to wait for on that slot's barrier; flips on each wrap
//   count: how many steps were taken in all (the absolute position)
// Every warp keeps its own copy; only the barriers are shared. The waits
// pass the parity and, for the emulator's checks, the absolute phase
// number it stands for (phase_number()).
template <int Stages>
class PipelineState {
  static_assert(Stages >= 1, "PipelineState: Stages must be at least 1");

 public:
  static constexpr int kStages = Stages;

  constexpr PipelineState() = default;
  WSPIPE_HD constexpr PipelineState(std::uint32_t index, std::uint32_t phase, std::uint32_t count)
      : index_(index), phase_(phase & 1u), count_(count) {}

  // A freshly initialised mbarrier is in phase 0, and a parity wait for 1
  // succeeds at once (the "immediately preceding phase" counts as complete,
  // PTX mbarrier.try_wait). So the producer starts at phase 1: its first lap
  // over the empty barriers passes without any consumer release. The
  // consumer starts at phase 0 and waits for the first real completion.
  WSPIPE_HD static constexpr PipelineState producer_start() { return {0, 1, 0}; }
  WSPIPE_HD static constexpr PipelineState consumer_start() { return {0, 0, 0}; }

  WSPIPE_HD constexpr std::uint32_t index() const { return index_; }
  WSPIPE_HD constexpr std::uint32_t phase() const { return phase_; }
  WSPIPE_HD constexpr std::uint32_t count() const { return count_; }

  // The absolute number of the phase a wait at this state means
  // (PhaseNumber, core/barrier.hpp): the laps the cursor has made around
  // the ring, less one where it started at phase 1 (a producer's first lap
  // waits for the phase before the first). Laps are counted from the stage
  // where count was 0, so a state made by hand at another stage with
  // count 0 is numbered from there. A warp that skips slots (advance(n),
  // as ping-pong consumers skip each other's tiles) keeps its number.
  WSPIPE_HD constexpr PhaseNumber phase_number() const {
    constexpr auto S = static_cast<std::uint64_t>(Stages);
    const std::uint64_t start = (index_ + S - count_ % S) % S;
    const auto laps = static_cast<std::int64_t>((start + count_) / S);
    return {laps - static_cast<std::int64_t>(phase_ ^ (static_cast<std::uint32_t>(laps) & 1u))};
  }

  // Step n slots forward: the phase flips once per wrap of the ring.
  WSPIPE_HD constexpr void advance(std::uint32_t n = 1) {
    const std::uint32_t next = index_ + n;
    const std::uint32_t wraps = next / Stages;
    index_ = next % Stages;
    phase_ ^= wraps & 1u;
    count_ += n;
  }
  WSPIPE_HD constexpr PipelineState& operator++() {
    advance(1);
    return *this;
  }
  WSPIPE_HD constexpr PipelineState next(std::uint32_t n = 1) const {
    PipelineState s = *this;
    s.advance(n);
    return s;
  }

  friend constexpr bool operator==(const PipelineState&, const PipelineState&) = default;

 private:
  std::uint32_t index_ = 0;
  std::uint32_t phase_ = 0;
  std::uint32_t count_ = 0;
};

}  // namespace wspipe
