// Bounded exhaustive search (internal to explore()): a stateless depth-first
// search over the choice points of a kernel, re-running it from the start
// for each schedule, with at most `bound` preemptions per schedule and
// sleep sets (Godefroid 1996) so that two orders of commuting steps are not
// both explored.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "strategy.hpp"

namespace wspipe::emu::detail {

class ExhaustiveSearch {
 public:
  // reduce: use sleep sets; without, every schedule within the bound runs.
  ExhaustiveSearch(std::uint32_t bound, bool reduce) : bound_(bound), reduce_(reduce) {}

  // The strategy of the next run: it follows the current branch's prefix,
  // then takes the first allowed choice at each new choice point.
  std::unique_ptr<Strategy> strategy();
  // After that run: moves to the next branch; false when none is left.
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
    std::uint32_t preemptions_before = 0;
    std::vector<Entry> sleep;  // asleep on entry: explored elsewhere, independent since
    std::vector<Entry> done;   // children explored, with their steps' footprints
    std::uint32_t chosen = 0;
    Footprint chosen_fp;
  };
  static bool contains(const std::vector<Entry>& v, std::uint32_t actor);

 private:
  friend class ExhaustiveRun;
  Choice choice_of(const Node& n) const;
  bool allowed(const Node& n, std::uint32_t actor) const;

  std::uint32_t bound_;
  bool reduce_;
  std::vector<Node> stack_;
};

}  // namespace wspipe::emu::detail
