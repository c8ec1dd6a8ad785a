#include "exhaustive.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace wspipe::emu::detail {
// One run's strategy. It keeps the current sleep set as the run goes: an
// actor stays asleep until a step that does not commute with its own next
// step runs; a choice point where every allowed actor is asleep ends the run
// as pruned (all its continuations were explored from an equivalent state).
class ExhaustiveRun final : public Strategy {
 public:
  explicit ExhaustiveRun(ExhaustiveSearch& s) : s_(s) {}

  std::optional<std::uint32_t> pick(const Choice& c) override {
    node_ = -1;
    if (c.n == 1) {
      if (s_.reduce_ && asleep(c.enabled[0])) return prune();
      candidates_ = sleep_;
      return c.enabled[0];
    }
    if (c.index < s_.stack_.size()) {
      // On the prefix: the same choice as the branch being explored.
      ExhaustiveSearch::Node& n = s_.stack_[c.index];
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
    n.preemptions_before = used_;
    n.sleep = sleep_;
    // The default first, then the others in id order.
    std::optional<std::uint32_t> first;
    if (s_.allowed(n, c.preferred)) {
      first = c.preferred;
    } else {
      for (std::uint32_t a : n.enabled)
        if (s_.allowed(n, a)) {
          first = a;
          break;
        }
    }
    if (!first) return prune();
    n.chosen = *first;
    used_ += is_preemption(c, *first) ? 1 : 0;
    candidates_ = sleep_;
    node_ = static_cast<std::int64_t>(s_.stack_.size());
    s_.stack_.push_back(std::move(n));
    return *first;
  }

  void stepped(std::uint32_t actor, const Footprint& fp) override {
    if (node_ >= 0) s_.stack_[static_cast<std::size_t>(node_)].chosen_fp = fp;
    sleep_.clear();
    if (!s_.reduce_) return;
    for (auto& e : candidates_)
      if (e.actor != actor && independent(e.fp, fp)) sleep_.push_back(std::move(e));
    candidates_.clear();
  }

  bool pruned() const override { return pruned_; }
  bool wants_footprints() const override { return true; }

 private:
  bool asleep(std::uint32_t actor) const { return ExhaustiveSearch::contains(sleep_, actor); }
  std::optional<std::uint32_t> prune() {
    pruned_ = true;
    return std::nullopt;
  }

  ExhaustiveSearch& s_;
  std::vector<ExhaustiveSearch::Entry> sleep_;       // asleep now
  std::vector<ExhaustiveSearch::Entry> candidates_;  // asleep after this step, if independent of it
  std::int64_t node_ = -1;                           // the node of the step in progress, if a choice point
  std::uint32_t used_ = 0;                           // preemptions so far
  bool pruned_ = false;
};

bool ExhaustiveSearch::contains(const std::vector<Entry>& v, std::uint32_t actor) {
  return std::any_of(v.begin(), v.end(), [&](const Entry& e) { return e.actor == actor; });
}

Choice ExhaustiveSearch::choice_of(const Node& n) const {
  return Choice{.enabled = n.enabled.data(), .spin = n.spin.data(), .n = n.enabled.size(), .step = 0, .index = 0,
                .preferred = n.preferred, .can_continue = n.can_continue};
}

bool ExhaustiveSearch::allowed(const Node& n, std::uint32_t actor) const {
  if (reduce_ && contains(n.sleep, actor)) return false;
  return n.preemptions_before + (is_preemption(choice_of(n), actor) ? 1u : 0u) <= bound_;
}

std::unique_ptr<Strategy> ExhaustiveSearch::strategy() { return std::make_unique<ExhaustiveRun>(*this); }

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
