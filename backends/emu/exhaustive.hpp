// Bounded exhaustive search (internal to explore()): a stateless depth-first
// search over the choice points of a kernel, re-running it from the start
// for each schedule, with at most `bound` preemptions per schedule and
// sleep sets (Godefroid 1996) so that two orders of commuting steps are not
// both explored.
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
  // reduce: use sleep sets; without, every schedule within the bound runs.
  ExhaustiveSearch(std::uint32_t bound, bool reduce) : bound_(bound), reduce_(reduce) {}

  void new_execution(std::uint32_t num_actors) override;
  std::optional<std::uint32_t> pick(const Choice& c) override;
  bool pruned() const override { return pruned_; }
  bool wants_footprints() const override { return true; }
  void stepped(std::uint32_t actor, const Footprint& fp) override;

  // After a run: moves to the next branch; false when none is left.
  bool advance();

  // The nodes of the branch being explored, one per choice point.
  struct Entry {
    std::uint32_t actor = 0;
    Footprint fp;  // of the actor's step from this node
  };
  struct Node {
    std::vector<std::uint32_t> enabled;
    std::vector<std::uint8_t> spin;
    std::uint32_t preferred = 0;
    bool can_continue = false;
    std::uint32_t first_alternative = ~std::uint32_t{0};
    std::uint32_t preemptions_before = 0;
    std::vector<Entry> sleep;  // asleep on entry: explored elsewhere, independent since
    std::vector<Entry> done;   // children explored, with their steps' footprints
    std::uint32_t chosen = 0;
    Footprint chosen_fp;
  };
  static bool contains(const std::vector<Entry>& v, std::uint32_t actor);

 private:
  Choice choice_of(const Node& n) const;
  bool allowed(const Node& n, std::uint32_t actor) const;
  bool asleep(std::uint32_t actor) const { return contains(sleep_, actor); }
  std::optional<std::uint32_t> prune();

  std::uint32_t bound_;
  bool reduce_;
  std::vector<Node> stack_;
  // The run in progress (new_execution resets them): the sleep set now, the
  // entries asleep after this step if independent of it, the node of the
  // step in progress if a choice point, preemptions so far, pruned.
  std::vector<Entry> sleep_;
  std::vector<Entry> candidates_;
  std::int64_t node_ = -1;
  std::uint32_t used_ = 0;
  bool pruned_ = false;
};

}  // namespace wspipe::emu::detail
