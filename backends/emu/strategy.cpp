#include "strategy.hpp"

#include <algorithm>

namespace wspipe::emu {

std::string_view to_string(StrategyKind k) {
  switch (k) {
    case StrategyKind::round_robin: return "rr";
    case StrategyKind::random: return "random";
    case StrategyKind::pct: return "pct";
    case StrategyKind::replay: return "replay";
  }
  return "?";
}

std::optional<StrategyKind> parse_strategy(std::string_view name) {
  if (name == "rr" || name == "round-robin") return StrategyKind::round_robin;
  if (name == "random") return StrategyKind::random;
  if (name == "pct") return StrategyKind::pct;
  if (name == "replay") return StrategyKind::replay;
  return std::nullopt;
}

namespace {

// The next enabled actor after the last one picked, cyclically.
class RoundRobin final : public Strategy {
 public:
  std::optional<std::uint32_t> pick(const std::uint32_t* enabled, std::size_t n, std::uint64_t) override {
    const std::uint32_t* it = std::upper_bound(enabled, enabled + n, last_);
    last_ = (it == enabled + n) ? enabled[0] : *it;
    return last_;
  }

 private:
  std::uint32_t last_ = ~0u;
};

class Random final : public Strategy {
 public:
  explicit Random(std::uint64_t seed) : rng_(seed) {}
  std::optional<std::uint32_t> pick(const std::uint32_t* enabled, std::size_t n, std::uint64_t) override {
    return enabled[rng_.below(static_cast<std::uint32_t>(n))];
  }

 private:
  Rng rng_;
};

// PCT (Burckhardt, Kothari, Musuvathi, Nagarakatte, ASPLOS 2010): every
// actor gets a distinct random priority above d; the highest-priority
// enabled actor runs; at d-1 random steps in [1, k] the actor about to run
// drops to priority i (the i-th change point), below every initial one. A
// bug that needs d ordering constraints is found with probability at least
// 1/(n k^(d-1)) per run.
class Pct final : public Strategy {
 public:
  Pct(std::uint64_t seed, std::uint32_t depth, std::uint64_t steps, std::uint32_t actors) : rng_(seed) {
    priority_.resize(actors);
    for (std::uint32_t i = 0; i < actors; ++i) priority_[i] = depth + i;
    for (std::uint32_t i = actors; i > 1; --i) std::swap(priority_[i - 1], priority_[rng_.below(i)]);
    const std::uint64_t k = std::max<std::uint64_t>(steps, 1);
    for (std::uint32_t i = 1; i < depth; ++i) change_.push_back(1 + rng_.next() % k);
  }
  std::optional<std::uint32_t> pick(const std::uint32_t* enabled, std::size_t n, std::uint64_t step) override {
    std::uint32_t best = enabled[0];
    for (std::size_t i = 1; i < n; ++i)
      if (priority_[enabled[i]] > priority_[best]) best = enabled[i];
    for (std::size_t i = 0; i < change_.size(); ++i) {
      if (change_[i] == step) {
        priority_[best] = static_cast<std::uint32_t>(i + 1);
        best = enabled[0];
        for (std::size_t j = 1; j < n; ++j)
          if (priority_[enabled[j]] > priority_[best]) best = enabled[j];
      }
    }
    return best;
  }

 private:
  Rng rng_;
  std::vector<std::uint32_t> priority_;
  std::vector<std::uint64_t> change_;
};

class Replay final : public Strategy {
 public:
  explicit Replay(Schedule s) : schedule_(std::move(s)) {}
  std::optional<std::uint32_t> pick(const std::uint32_t* enabled, std::size_t n, std::uint64_t step) override {
    const auto& c = schedule_.choices();
    if (next_ >= c.size()) {
      why_ = "the schedule ended (after " + std::to_string(c.size()) + " choices) at step " + std::to_string(step) +
             " while the run had not";
      return std::nullopt;
    }
    const std::uint32_t want = c[next_++];
    if (!std::binary_search(enabled, enabled + n, want)) {
      why_ = "choice " + std::to_string(next_ - 1) + " names actor " + std::to_string(want) +
             ", which cannot move at step " + std::to_string(step);
      return std::nullopt;
    }
    return want;
  }
  std::string mismatch() const override {
    if (!why_.empty() || next_ == schedule_.size()) return why_;
    return "the run ended with " + std::to_string(schedule_.size() - next_) + " of its " +
           std::to_string(schedule_.size()) + " choices unused";
  }

 private:
  Schedule schedule_;
  std::size_t next_ = 0;
  std::string why_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const StrategyParams& p, std::uint32_t num_actors) {
  switch (p.kind) {
    case StrategyKind::round_robin: return std::make_unique<RoundRobin>();
    case StrategyKind::random: return std::make_unique<Random>(p.seed);
    case StrategyKind::pct: return std::make_unique<Pct>(p.seed, std::max<std::uint32_t>(p.pct_depth, 1), p.pct_steps, num_actors);
    case StrategyKind::replay: return std::make_unique<Replay>(p.replay);
  }
  return nullptr;
}

}  // namespace wspipe::emu
