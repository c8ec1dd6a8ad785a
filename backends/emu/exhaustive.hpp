// The exhaustive search (internal to explore()): a stateless depth-first
// search over the choice points of a kernel, re-running it from the start
// for each schedule. Two forms:
//  - unbounded (no preemption bound): dynamic partial-order reduction with
//    source sets and sleep sets (Abdulla, Aronis, Jonsson, Sagonas, POPL
//    2014 / JACM 2017, "Source-DPOR"): it branches only where two steps of
//    different actors conflict (their footprints, strategy.hpp), and
//    explores every class of equivalent schedules;
//  - bounded (`bound` preemptions per schedule): every schedule within the
//    bound, with sleep sets (Godefroid 1996) so that two orders of
//    commuting steps are not both explored (source sets and a preemption
//    bound do not combine soundly: Coons, Musuvathi, McKinley 2013).
// Without the reduction, both forms run every schedule (comparisons).
// docs/exploration.md, "The exhaustive search".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "strategy.hpp"

namespace wspipe::emu::detail {

// The search is one strategy that lives across the runs of an exploration
// (StrategyParams::shared): each run starts with new_execution, follows the
// current branch's prefix, then takes the first allowed choice at each new
// choice point; advance() then moves to the next branch.
class ExhaustiveSearch final : public Strategy {
 public:
  // bound: preemptions per schedule, or nullopt for none (unbounded).
  // reduce: source sets (unbounded) or sleep sets (bounded); without,
  // every schedule runs.
  ExhaustiveSearch(std::optional<std::uint32_t> bound, bool reduce) : bound_(bound), reduce_(reduce) {}

  void new_execution(std::uint32_t num_actors) override;
  std::optional<std::uint32_t> pick(const Choice& c) override;
  bool pruned() const override { return pruned_; }
  bool wants_footprints() const override { return true; }
  void stepped(std::uint32_t actor, const Footprint& fp) override;
  void ended(bool failed) override { failed_ = failed; }

  // After a run: moves to the next branch; false when none is left.
  bool advance();

  // Choice points where a new branch was added by a race between two steps
  // (source sets; all runs so far).
  std::uint64_t races() const { return races_; }

  // The nodes of the branch being explored, one per choice point.
  struct Entry {
    std::uint32_t actor = 0;
    Footprint fp;  // of the actor's step from this node
  };
  struct Node {
    std::vector<std::uint32_t> enabled;
    std::vector<std::uint8_t> spin;
    // Per enabled actor: it can only time out, and its previous step was a
    // time-out already (unbounded: not explored, see allowed()).
    std::vector<std::uint8_t> spin_again;
    std::uint32_t preferred = 0;
    bool can_continue = false;
    std::uint32_t first_alternative = ~std::uint32_t{0};
    std::uint32_t preemptions_before = 0;
    std::vector<Entry> sleep;  // asleep on entry: explored elsewhere, independent since
    std::vector<Entry> done;   // children explored, with their steps' footprints
    // Source sets: the children to explore (done ones included).
    std::vector<std::uint32_t> backtrack;
    std::uint32_t chosen = 0;
    Footprint chosen_fp;
  };
  static bool contains(const std::vector<Entry>& v, std::uint32_t actor);

 private:
  // One step of the run in progress, for the race analysis.
  struct Step {
    std::uint32_t actor = 0;
    std::int64_t node = -1;  // its choice point's index, or -1 (one actor could move), or kVirtual
    // The step after which the actor could move again, when it could not
    // at some point since its previous step (a wait, an empty queue): it
    // happens before this one. -1: none.
    std::int64_t enabler = -1;
    Footprint fp;
  };
  // A step a failing run never took (analyse_races): unordered with the
  // other virtual steps.
  static constexpr std::int64_t kVirtual = -2;
  bool dpor() const { return reduce_ && !bound_; }
  Choice choice_of(const Node& n) const;
  bool allowed(const Node& n, std::size_t i) const;
  bool allowed_actor(const Node& n, std::uint32_t actor) const;
  std::optional<std::uint32_t> prune();
  void analyse_races();
  void add_backtrack(Node& n, std::uint32_t actor);

  std::optional<std::uint32_t> bound_;
  bool reduce_;
  std::vector<Node> stack_;
  std::uint64_t races_ = 0;
  // The run in progress (new_execution resets them): the sleep set now, the
  // entries asleep after this step if independent of it, the node of the
  // step in progress if a choice point, preemptions so far, pruned; its
  // steps, the first step past the replayed prefix, and per actor whether
  // its last step was a try_wait time-out.
  std::vector<Entry> sleep_;
  std::vector<Entry> candidates_;
  std::int64_t node_ = -1;
  std::uint32_t used_ = 0;
  bool pruned_ = false;
  std::vector<Step> steps_;
  std::size_t first_new_ = 0;
  std::vector<std::uint8_t> timed_out_;
  bool step_spins_ = false;
  bool step_idle_ = false;  // the step is a time-out where nothing could progress
  // Per actor: the last step it took, and the last step at whose choice it
  // could not move (-1: none).
  std::vector<std::int64_t> last_step_, disabled_at_;
  std::vector<std::uint32_t> last_enabled_;  // at the run's last choice
  bool failed_ = false;                      // the run ended on a failure
};

}  // namespace wspipe::emu::detail
