#include "strategy.hpp"
#include "emulator.hpp"

#include <algorithm>

namespace wspipe::emu {

std::string_view to_string(StrategyKind k) {
  switch (k) {
    case StrategyKind::round_robin: return "rr";
    case StrategyKind::random: return "random";
    case StrategyKind::pct: return "pct";
    case StrategyKind::replay: return "replay";
    case StrategyKind::exhaustive: return "exhaustive";
    case StrategyKind::custom: return "custom";
    case StrategyKind::stall: return "stall";
  }
  return "?";
}

std::optional<StrategyKind> parse_strategy(std::string_view name) {
  if (name == "rr" || name == "round-robin") return StrategyKind::round_robin;
  if (name == "random") return StrategyKind::random;
  if (name == "pct") return StrategyKind::pct;
  if (name == "replay") return StrategyKind::replay;
  if (name == "exhaustive") return StrategyKind::exhaustive;
  if (name == "stall") return StrategyKind::stall;
  return std::nullopt;
}

bool is_preemption(const Choice& c, std::uint32_t actor) {
  if (actor == c.preferred) return false;
  if (c.can_continue || actor >= c.first_alternative) return true;
  const std::uint32_t* it = std::lower_bound(c.enabled, c.enabled + c.n, actor);
  return it != c.enabled + c.n && *it == actor && c.spin[it - c.enabled] != 0;
}

namespace {

constexpr unsigned bit(Touch t) { return 1u << static_cast<unsigned>(t); }

constexpr unsigned kReads = bit(Touch::read) | bit(Touch::await);
constexpr unsigned kUpdates = bit(Touch::commute) | bit(Touch::count);

// Whether accesses of one resource conflict: a write, or a read beside a
// commutative update (an await is a read; a count is a commutative update).
bool conflict(unsigned modes) {
  return (modes & bit(Touch::write)) != 0 || ((modes & kReads) != 0 && (modes & kUpdates) != 0);
}

// Calls f(modes of a, modes of b) for each resource both touch, as bit
// sets, until f returns true; returns whether one did, or true when either
// touched everything. Sorted entries: the accesses of a resource are
// adjacent (the access is the low bits), and kGlobalResource is last.
template <class F>
bool any_shared(const Footprint& a, const Footprint& b, F&& f) {
  if ((!a.empty() && a.back() == kGlobalResource) || (!b.empty() && b.back() == kGlobalResource)) return true;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    const std::uint64_t ri = footprint_resource(*i), rj = footprint_resource(*j);
    if (ri < rj) {
      ++i;
    } else if (rj < ri) {
      ++j;
    } else {
      unsigned ma = 0, mb = 0;
      for (; i != a.end() && footprint_resource(*i) == ri; ++i) ma |= bit(footprint_touch(*i));
      for (; j != b.end() && footprint_resource(*j) == ri; ++j) mb |= bit(footprint_touch(*j));
      // A mark is no access (Touch::issue): it meets nothing.
      ma &= ~bit(Touch::issue);
      mb &= ~bit(Touch::issue);
      if (ma != 0 && mb != 0 && f(ma, mb)) return true;
    }
  }
  return false;
}

}  // namespace

bool independent(const Footprint& a, const Footprint& b) {
  return !any_shared(a, b, [](unsigned ma, unsigned mb) { return conflict(ma | mb); });
}

bool stays_asleep(const Footprint& asleep, const Footprint& step) {
  return !any_shared(asleep, step, [](unsigned ma, unsigned mb) {
    // Both update one counter, one of them counting into it: which is the
    // last update may change.
    const bool counted = ((ma | mb) & bit(Touch::count)) != 0;
    return conflict(ma | mb) || (counted && (ma & kUpdates) != 0 && (mb & kUpdates) != 0);
  });
}

bool reversible(const Footprint& earlier, const Footprint& later) {
  // A step that touched everything conflicts, and awaits nothing in
  // particular.
  const auto global = [](const Footprint& f) { return !f.empty() && f.back() == kGlobalResource; };
  if (global(earlier) || global(later)) return true;
  // Not when the later step awaits an update (a write, or a count) of the
  // earlier one: it was enabled by it, whatever else they share.
  const bool enabled = any_shared(earlier, later, [](unsigned ma, unsigned mb) {
    return (ma & (bit(Touch::write) | kUpdates)) != 0 && (mb & bit(Touch::await)) != 0;
  });
  return !enabled && !independent(earlier, later);
}

namespace {

// Whether enabled actor i of `c` can only time out (a try_wait polling an
// incomplete phase, spurious time-outs on).
bool only_times_out(const Choice& c, std::size_t i) { return c.spin != nullptr && c.spin[i] != 0; }

// The next enabled actor after the last one picked, cyclically; never an
// engine's alternative (loads complete whole, in issue order).
class RoundRobin final : public Strategy {
 public:
  std::optional<std::uint32_t> pick(const Choice& c) override {
    // Alternatives come last, and beside their engine: one actor before them.
    const std::size_t n = static_cast<std::size_t>(
        std::lower_bound(c.enabled, c.enabled + c.n, c.first_alternative) - c.enabled);
    const std::uint32_t* it = std::upper_bound(c.enabled, c.enabled + n, last_);
    last_ = (it == c.enabled + n) ? c.enabled[0] : *it;
    return last_;
  }

 private:
  std::uint32_t last_ = ~0u;
};

class Random final : public Strategy {
 public:
  explicit Random(std::uint64_t seed) : rng_(seed) {}
  std::optional<std::uint32_t> pick(const Choice& c) override {
    return c.enabled[rng_.below(static_cast<std::uint32_t>(c.n))];
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
  std::optional<std::uint32_t> pick(const Choice& c) override {
    std::size_t best = highest(c, false);
    for (std::size_t i = 0; i < change_.size(); ++i) {
      if (change_[i] == c.step) {
        priority_[c.enabled[best]] = static_cast<std::uint32_t>(i + 1);
        best = highest(c, false);
      }
    }
    // Fair to a spinning actor's peers: an actor that can only time out (a
    // try_wait polling an incomplete phase, spurious time-outs on) makes no
    // progress, so plain PCT would run it until the step budget reports a
    // livelock that no GPU shows. After kSpinTurns time-outs in a row, the
    // highest-priority actor that can progress takes one step.
    if (!only_times_out(c, best)) {
      spins_ = 0;
      return c.enabled[best];
    }
    if (++spins_ <= kSpinTurns) return c.enabled[best];
    const std::size_t peer = highest(c, true);
    if (!only_times_out(c, peer)) spins_ = 0;
    return c.enabled[peer];
  }

 private:
  // One more than the single time-outs in a row: a spinning actor of the
  // highest priority spins out (RunOptions::spin_out_limit), so that PCT
  // reaches a counted spin's fallback too.
  static constexpr std::uint32_t kSpinTurns = kSingleTimeOuts + 1;
  // The position in c.enabled of the actor of highest priority; with
  // `progressing`, among those that can progress, if any can.
  std::size_t highest(const Choice& c, bool progressing) const {
    std::size_t best = 0;
    for (std::size_t i = 1; i < c.n; ++i) {
      const bool demote_best = progressing && only_times_out(c, best) && !only_times_out(c, i);
      const bool same_kind = !progressing || only_times_out(c, best) == only_times_out(c, i);
      if (demote_best || (same_kind && priority_[c.enabled[i]] > priority_[c.enabled[best]])) best = i;
    }
    return best;
  }
  Rng rng_;
  std::vector<std::uint32_t> priority_;
  std::vector<std::uint64_t> change_;
  std::uint32_t spins_ = 0;  // time-outs picked in a row
};

// Random schedules in which one warp is held back: a GPU warp can be late
// by any amount (a long stall, a late start, another kernel's warps on the
// SM), which uniform random picks almost never mimic, since a warp that
// can move is picked again within a few steps. One warp, drawn at random,
// runs only when no other actor can progress (only spinning try_waits
// left: they time out as random lets them, and a spin that runs out
// blocks), from step `from` (step 1 half of the time: a late start) for
// `length` steps, both drawn over the scale `steps` (the length of a run);
// every other pick is uniform, as Random's. Engines are never held: an
// operation's latency is what their alternatives and random picks model.
class Stall final : public Strategy {
 public:
  Stall(std::uint64_t seed, std::uint64_t steps) : rng_(seed) {
    const auto k = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(steps, 2, 1u << 30));
    from_ = rng_.below(2) == 0 ? 1 : 1 + rng_.below(k);
    until_ = from_ + 1 + rng_.below(k);
    draw_ = rng_.next();
  }
  std::optional<std::uint32_t> pick(const Choice& c) override {
    if (!held_) {
      // The warps are the actors below the first engine's; Choice does not
      // say where the engines start, so the draw is among the actors that
      // are not alternatives, once, at the first pick (every warp can move
      // then: it has not started).
      held_ = c.enabled[draw_ % static_cast<std::uint64_t>(std::lower_bound(c.enabled, c.enabled + c.n,
                                                                              c.first_alternative) -
                                                             c.enabled)];
    }
    if (c.step < from_ || c.step >= until_) return c.enabled[rng_.below(static_cast<std::uint32_t>(c.n))];
    // Held: the others first, those that can progress before those that can
    // only time out.
    std::uint32_t progressing = 0, others = 0;
    for (std::size_t i = 0; i < c.n; ++i) {
      if (c.enabled[i] == *held_) continue;
      ++others;
      progressing += only_times_out(c, i) ? 0 : 1;
    }
    if (others == 0) return *held_;
    if (progressing == 0) {
      // Only spinning peers: the held warp may be what they wait for.
      const bool held_can = std::binary_search(c.enabled, c.enabled + c.n, *held_);
      if (held_can && rng_.below(4) == 0) return *held_;
      std::uint32_t k = rng_.below(others);
      for (std::size_t i = 0; i < c.n; ++i)
        if (c.enabled[i] != *held_ && k-- == 0) return c.enabled[i];
    }
    std::uint32_t k = rng_.below(progressing);
    for (std::size_t i = 0; i < c.n; ++i)
      if (c.enabled[i] != *held_ && !only_times_out(c, i) && k-- == 0) return c.enabled[i];
    return c.enabled[0];
  }

 private:
  Rng rng_;
  std::uint64_t from_ = 1, until_ = 1, draw_ = 0;
  std::optional<std::uint32_t> held_;
};

// Follows a schedule's deviations and the default policy everywhere else.
// Strict: a deviation that does not fit is a mismatch. Lenient (shrinking):
// it is skipped, and the run goes on with the default.
class Replay final : public Strategy {
 public:
  Replay(Schedule s, bool strict) : schedule_(std::move(s)), strict_(strict) {}
  std::optional<std::uint32_t> pick(const Choice& c) override {
    const auto& d = schedule_.deviations();
    // Lenient: deviations at indices already passed were skipped.
    while (!strict_ && next_ < d.size() && d[next_].at < c.index) ++next_;
    if (next_ >= d.size() || d[next_].at != c.index) return c.preferred;
    const std::uint32_t want = d[next_++].actor;
    if (!std::binary_search(c.enabled, c.enabled + c.n, want)) {
      if (!strict_) return c.preferred;
      why_ = "deviation " + std::to_string(next_ - 1) + " names actor " + std::to_string(want) +
             ", which cannot move at choice point " + std::to_string(c.index) + " (step " + std::to_string(c.step) + ")";
      return std::nullopt;
    }
    return want;
  }
  std::string mismatch() const override {
    if (!why_.empty() || !strict_ || next_ == schedule_.size()) return why_;
    return "the run ended with " + std::to_string(schedule_.size() - next_) + " of its " +
           std::to_string(schedule_.size()) + " deviations unused";
  }

 private:
  Schedule schedule_;
  bool strict_;
  std::size_t next_ = 0;
  std::string why_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const StrategyParams& p, std::uint32_t num_actors) {
  switch (p.kind) {
    case StrategyKind::round_robin: return std::make_unique<RoundRobin>();
    case StrategyKind::random: return std::make_unique<Random>(p.seed);
    case StrategyKind::pct:
      return std::make_unique<Pct>(p.seed, std::max<std::uint32_t>(p.pct_depth, 1), p.pct_steps, num_actors);
    case StrategyKind::replay: return std::make_unique<Replay>(p.replay, p.strict);
    case StrategyKind::stall: return std::make_unique<Stall>(p.seed, p.pct_steps);
    case StrategyKind::exhaustive:
    case StrategyKind::custom:
      if (p.make) return p.make(num_actors);
      break;
  }
  return nullptr;
}

}  // namespace wspipe::emu
