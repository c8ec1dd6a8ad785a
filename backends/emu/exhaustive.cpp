#include "exhaustive.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace wspipe::emu::detail {

// A run keeps the current sleep set as it goes: an actor stays asleep until
// a step that does not commute with its own next step runs; a choice point
// where every allowed actor is asleep ends the run as pruned (all its
// continuations were explored from an equivalent state).
void ExhaustiveSearch::new_execution(std::uint32_t /*num_actors*/) {
  sleep_.clear();
  candidates_.clear();
  node_ = -1;
  used_ = 0;
  pruned_ = false;
}

std::optional<std::uint32_t> ExhaustiveSearch::pick(const Choice& c) {
  node_ = -1;
  if (c.n == 1) {
    if (reduce_ && asleep(c.enabled[0])) return prune();
    candidates_ = sleep_;
    return c.enabled[0];
  }
  if (c.index < stack_.size()) {
    // On the prefix: the same choice as the branch being explored.
    ExhaustiveSearch::Node& n = stack_[c.index];
    if (!std::equal(c.enabled, c.enabled + c.n, n.enabled.begin(), n.enabled.end()))
      throw std::runtime_error(
          "exhaustive search: the kernel took another path under the same schedule (choice point " +
          std::to_string(c.index) + "): it is not deterministic (global state, time, or addresses?)");
    candidates_ = n.sleep;
    candidates_.insert(candidates_.end(), n.done.begin(), n.done.end());
    node_ = static_cast<std::int64_t>(c.index);
    used_ += is_preemption(c, n.chosen) ? 1 : 0;
    return n.chosen;
  }
  ExhaustiveSearch::Node n;
  n.enabled.assign(c.enabled, c.enabled + c.n);
  n.spin.assign(c.spin, c.spin + c.n);
  n.preferred = c.preferred;
  n.can_continue = c.can_continue;
  n.first_alternative = c.first_alternative;
  n.preemptions_before = used_;
  n.sleep = sleep_;
  // The default first, then the others in id order.
  std::optional<std::uint32_t> first;
  if (allowed(n, c.preferred)) {
    first = c.preferred;
  } else {
    for (std::uint32_t a : n.enabled)
      if (allowed(n, a)) {
        first = a;
        break;
      }
  }
  if (!first) return prune();
  n.chosen = *first;
  used_ += is_preemption(c, *first) ? 1 : 0;
  candidates_ = sleep_;
  node_ = static_cast<std::int64_t>(stack_.size());
  stack_.push_back(std::move(n));
  return *first;
}

void ExhaustiveSearch::stepped(std::uint32_t actor, const Footprint& fp) {
  if (node_ >= 0) stack_[static_cast<std::size_t>(node_)].chosen_fp = fp;
  sleep_.clear();
  if (!reduce_) return;
  for (auto& e : candidates_)
    if (e.actor != actor && independent(e.fp, fp)) sleep_.push_back(std::move(e));
  candidates_.clear();
}

std::optional<std::uint32_t> ExhaustiveSearch::prune() {
  pruned_ = true;
  return std::nullopt;
}

bool ExhaustiveSearch::contains(const std::vector<Entry>& v, std::uint32_t actor) {
  return std::any_of(v.begin(), v.end(), [&](const Entry& e) { return e.actor == actor; });
}

Choice ExhaustiveSearch::choice_of(const Node& n) const {
  return Choice{.enabled = n.enabled.data(), .spin = n.spin.data(), .n = n.enabled.size(), .step = 0, .index = 0,
                .preferred = n.preferred, .can_continue = n.can_continue,
                .first_alternative = n.first_alternative};
}

bool ExhaustiveSearch::allowed(const Node& n, std::uint32_t actor) const {
  if (reduce_ && contains(n.sleep, actor)) return false;
  return n.preemptions_before + (is_preemption(choice_of(n), actor) ? 1u : 0u) <= bound_;
}

bool ExhaustiveSearch::advance() {
  while (!stack_.empty()) {
    Node& n = stack_.back();
    n.done.push_back({n.chosen, std::move(n.chosen_fp)});
    n.chosen_fp.clear();
    for (std::uint32_t a : n.enabled) {
      if (contains(n.done, a) || !allowed(n, a)) continue;
      n.chosen = a;
      return true;
    }
    stack_.pop_back();
  }
  return false;
}

}  // namespace wspipe::emu::detail
