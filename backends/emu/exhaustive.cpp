#include "exhaustive.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

namespace wspipe::emu::detail {

// A run keeps the current sleep set as it goes: an actor stays asleep until
// a step that does not commute with its own next step runs; a choice point
// where every allowed actor is asleep ends the run as pruned (all its
// continuations were explored from an equivalent state).
void ExhaustiveSearch::new_execution(std::uint32_t num_actors) {
  sleep_.clear();
  candidates_.clear();
  node_ = -1;
  used_ = 0;
  pruned_ = false;
  steps_.clear();
  // The branch's choice point is the last one on the stack: the steps
  // before it repeat the previous run's, whose races were analysed then.
  first_new_ = stack_.empty() ? 0 : std::numeric_limits<std::size_t>::max();
  actors_ = num_actors;
  step_idle_ = false;
  last_step_.assign(num_actors, -1);
  disabled_at_.assign(num_actors, -1);
  could_pick_.assign(num_actors, 0);
  last_enabled_.clear();
  failed_ = false;
}

std::optional<std::uint32_t> ExhaustiveSearch::pick(const Choice& c) {
  node_ = -1;
  // Every actor can only time out: nothing can progress.
  const bool idle = c.spin != nullptr && std::all_of(c.spin, c.spin + c.n, [](std::uint8_t s) { return s != 0; });
  auto take = [&](std::uint32_t actor, std::int64_t node) {
    step_idle_ = idle;
    const std::int64_t k = static_cast<std::int64_t>(steps_.size());
    const std::int64_t d = actor < disabled_at_.size() ? disabled_at_[actor] : -1;
    const std::int64_t enabler = d >= 0 && d > last_step_[actor] ? d : -1;
    steps_.push_back({.actor = actor, .node = node, .enabler = enabler, .fp = {}});
    if (actor < last_step_.size()) last_step_[actor] = k;
    return actor;
  };
  last_enabled_.assign(c.enabled, c.enabled + c.n);
  // An actor the search could pick at the last choice and cannot now, the
  // last step being another actor's, is a race that no step names, since
  // the actor does not run after that step: the step disabled it (a load
  // out of order once the engine completed it, a grant once the launcher
  // took the last cluster). Explore it at the last choice, before that
  // step (source sets count it as a race with
  // it). The actors that cannot move here are also what the step taken
  // now may enable (its enabler, in take).
  const auto t = static_cast<std::int64_t>(steps_.size());
  const bool analysed = t == 0 || static_cast<std::size_t>(t - 1) < first_new_ ||
                        first_new_ == std::numeric_limits<std::size_t>::max() || steps_.back().node < 0;
  for (std::uint32_t a = 0, i = 0; a < could_pick_.size(); ++a) {
    while (i < c.n && c.enabled[i] < a) ++i;
    const bool enabled = i < c.n && c.enabled[i] == a;
    if (dpor() && !analysed && could_pick_[a] != 0 && !enabled && a != steps_.back().actor)
      offer({static_cast<std::size_t>(steps_.back().node), {a}});
    could_pick_[a] = enabled ? 1 : 0;
    if (!enabled) disabled_at_[a] = t;
  }
  if (c.n == 1) {
    if (reduce_ && contains(sleep_, c.enabled[0])) return prune();
    candidates_ = sleep_;
    return take(c.enabled[0], -1);
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
    if (c.index + 1 == stack_.size()) first_new_ = steps_.size();
    return take(n.chosen, node_);
  }
  if (first_new_ == std::numeric_limits<std::size_t>::max()) first_new_ = steps_.size();
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
  if (allowed_actor(n, c.preferred)) {
    first = c.preferred;
  } else {
    for (std::size_t i = 0; i < n.enabled.size(); ++i)
      if (allowed(n, i)) {
        first = n.enabled[i];
        break;
      }
  }
  if (!first) return prune();
  n.chosen = *first;
  n.backtrack.push_back(*first);
  used_ += is_preemption(c, *first) ? 1 : 0;
  candidates_ = sleep_;
  node_ = static_cast<std::int64_t>(stack_.size());
  stack_.push_back(std::move(n));
  return take(*first, node_);
}

void ExhaustiveSearch::stepped(std::uint32_t actor, const Footprint& step_fp) {
  // A time-out taken because no actor could make progress depends on every
  // actor: one that could move would have gone instead (with time-outs off,
  // it could not have timed out at all).
  Footprint idle;
  if (step_idle_) {
    idle = step_fp;
    idle.push_back(kGlobalResource);
  }
  const Footprint& fp = step_idle_ ? idle : step_fp;
  if (node_ >= 0) stack_[static_cast<std::size_t>(node_)].chosen_fp = fp;
  if (!steps_.empty()) {
    steps_.back().fp = fp;
    steps_.back().idle = step_idle_;
  }
  sleep_.clear();
  if (!reduce_ || sources_under_bound_) return;
  for (auto& e : candidates_)
    if (e.actor != actor && stays_asleep(e.fp, fp)) sleep_.push_back(std::move(e));
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

bool ExhaustiveSearch::allowed(const Node& n, std::size_t i) const {
  const std::uint32_t actor = n.enabled[i];
  if (reduce_ && contains(n.sleep, actor)) return false;
  if (!bound_) return true;
  return n.preemptions_before + (is_preemption(choice_of(n), actor) ? 1u : 0u) <= *bound_;
}

bool ExhaustiveSearch::allowed_actor(const Node& n, std::uint32_t actor) const {
  const auto it = std::lower_bound(n.enabled.begin(), n.enabled.end(), actor);
  return it != n.enabled.end() && *it == actor && allowed(n, static_cast<std::size_t>(it - n.enabled.begin()));
}

void ExhaustiveSearch::add_backtrack(Node& n, std::uint32_t actor) {
  if (std::find(n.backtrack.begin(), n.backtrack.end(), actor) != n.backtrack.end()) return;
  n.backtrack.push_back(actor);
  ++races_;
}

// Source-DPOR's race analysis of the run just ended (Abdulla et al.,
// Algorithm 1), for its steps past the replayed prefix. Happens-before is
// program order plus the order of dependent steps, kept as vector clocks
// (clock[k][a]: one past the last step of actor a that happens before step
// k, or k itself). A race is a pair of dependent steps j < k of different
// actors with nothing between them ordering them. To reverse it, some
// actor that can start the sequence v (the steps after j not ordered after
// it, then k) must be explored at j's choice point: one of v's initials
// (a step of v with no step of v before it in happens-before). If one is
// already in the backtrack set, nothing is added.
void ExhaustiveSearch::analyse_races() {
  // A run that ends on a failure leaves actors whose next steps never ran
  // (those that could move at its last choice, the last one's own next
  // step included: a wait that blocked for good, say): they race with
  // nothing. Each is a virtual last step that conflicts with everything,
  // so the orders where it came earlier are explored too. A run that ends
  // normally leaves none.
  if (failed_ && !pruned_ && !steps_.empty())
    for (const std::uint32_t a : last_enabled_)
      steps_.push_back({.actor = a, .node = kVirtual, .enabler = -1, .fp = {kGlobalResource}});
  const std::size_t n = steps_.size();
  if (n == 0 || first_new_ >= n) return;
  const std::size_t actors = actors_;
  std::vector<std::int64_t> first_v(actors);
  // One pass over the run's steps, each with the footprint fp_of(k):
  // happens-before as vector clocks (clock[k][a]: one past the last step of
  // actor a that happens before step k, or k itself), and each race offered.
  auto pass = [&](auto&& fp_of, bool first) {
    std::vector<std::uint32_t> clock(n * actors, 0);
    std::vector<std::int64_t> last(actors, -1);  // the last step of each actor so far
    auto at = [&](std::size_t k) { return clock.data() + k * actors; };
    auto ordered = [&](std::size_t j, std::size_t k) { return at(k)[steps_[j].actor] >= j + 1; };
    // Reverses steps j < k: the initials of v (the steps after j not
    // ordered after it, then k), one of which is explored at j's choice point.
    auto reverse = [&](std::size_t j, std::size_t k) {
      const Step& e = steps_[j];
      const Step& s = steps_[k];
      std::fill(first_v.begin(), first_v.end(), -1);
      std::vector<std::uint32_t> initials;
      auto initial = [&](std::size_t m) {
        for (std::size_t a = 0; a < actors; ++a)
          if (first_v[a] >= 0 && at(m)[a] >= static_cast<std::uint32_t>(first_v[a]) + 1) return false;
        return true;
      };
      for (std::size_t m = j + 1; m < k; ++m) {
        if (ordered(j, m)) continue;  // after j: not in v
        const std::uint32_t a = steps_[m].actor;
        if (first_v[a] < 0) {
          if (initial(m)) initials.push_back(a);
          first_v[a] = static_cast<std::int64_t>(m);
        }
      }
      if (first_v[s.actor] < 0 && initial(k)) initials.push_back(s.actor);
      // The racing actor itself where it can start v; else the first
      // initial that may be explored there.
      std::stable_partition(initials.begin(), initials.end(), [&](std::uint32_t a) { return a == s.actor; });
      if (sources_under_bound_) {
        // The finder: the reversal at j may be a
        // preemption the bound does not allow. Also offer it where j's
        // actor took over, before its steps up to j ran: the same switch
        // there is free, or was a preemption already (Coons et al.'s
        // conservative branch).
        std::size_t from = j;
        while (from > 0 && steps_[from - 1].actor == e.actor) --from;
        if (steps_[from].node >= 0 && steps_[from].node != e.node)
          offer({static_cast<std::size_t>(steps_[from].node), initials});
      }
      offer({static_cast<std::size_t>(e.node), std::move(initials)});
    };
    for (std::size_t k = 0; k < n; ++k) {
      const Step& s = steps_[k];
      const Footprint& fp = fp_of(k);
      std::uint32_t* ck = at(k);
      if (last[s.actor] >= 0) std::copy_n(at(static_cast<std::size_t>(last[s.actor])), actors, ck);
      // What enabled the step happens before it: a race with it, or with
      // anything before it, could not be reversed.
      if (s.enabler >= 0) {
        const std::uint32_t* ce = at(static_cast<std::size_t>(s.enabler));
        for (std::size_t a = 0; a < actors; ++a) ck[a] = std::max(ck[a], ce[a]);
      }
      ck[s.actor] = static_cast<std::uint32_t>(k + 1);
      last[s.actor] = static_cast<std::int64_t>(k);
      for (std::size_t j = k; j-- > 0;) {
        const Step& e = steps_[j];
        if (e.actor == s.actor || ordered(j, k) || (e.node == kVirtual && s.node == kVirtual) ||
            independent(fp_of(j), fp))
          continue;
        if (k >= first_new_ && e.node >= 0 && reversible(fp_of(j), fp)) reverse(j, k);  // a race
        // Ordered from now on: j happens before k.
        const std::uint32_t* cj = at(j);
        for (std::size_t a = 0; a < actors; ++a) ck[a] = std::max(ck[a], cj[a]);
      }
      // A TMA load queued after the completion of an older operation of its
      // engine that does not happen before it: the two commute, but queued
      // first, the load could have overtaken that operation through an
      // alternative, which is then never enabled in this run, so no race
      // names it. Explore queuing it first (the completion stays asleep
      // across the steps up to the issue: that order is the one explored
      // here, and the alternative is explored where it is enabled).
      if (first && k >= first_new_)
        for (const std::uint64_t mark : fp) {
          if (mark == kGlobalResource || footprint_kind(mark) != kEngineOrderKind || footprint_touch(mark) != Touch::issue)
            continue;
          const std::uint64_t done = (mark & ~std::uint64_t{7}) | static_cast<std::uint64_t>(Touch::write);
          for (std::size_t j = k; j-- > 0;) {
            const Footprint& fj = fp_of(j);
            if (steps_[j].node >= 0 && steps_[j].actor != s.actor && !ordered(j, k) &&
                std::binary_search(fj.begin(), fj.end(), done))
              reverse(j, k);
          }
        }
      // A completion of a TMA load, in order or not, disables or changes
      // the engine's alternatives (a load out of order, a piece), which no
      // run takes by default and so no race would ever name: explore each
      // one enabled here (they all conflict with the completion: one
      // engine).
      if (first && k >= first_new_ && s.node >= 0) {
        const bool engine = std::any_of(s.fp.begin(), s.fp.end(), [](std::uint64_t e) {
          return e != kGlobalResource && footprint_kind(e) == kEngineOrderKind && footprint_touch(e) == Touch::write;
        });
        const Node& node = stack_[static_cast<std::size_t>(s.node)];
        if (engine)
          for (const std::uint32_t a : node.enabled)
            if (a >= node.first_alternative) offer({static_cast<std::size_t>(s.node), {a}});
      }
    }
  };
  pass([&](std::size_t k) -> const Footprint& { return steps_[k].fp; }, true);
  // An idle time-out depends on every step (stepped), so the newest step
  // before it (a warp's exit, say) orders every earlier one before it and
  // before everything its warp does next, and the races of what it read
  // itself are hidden behind that order: yet it answered as it did because
  // of them (a try_wait times out once an arrival began the phase it asks
  // about), and reversed, it would not have been idle at all. So a run with
  // idle time-outs is analysed a second time with their own footprints
  // alone; the offers of both passes are explored.
  if (std::any_of(steps_.begin(), steps_.end(), [](const Step& s) { return s.idle; })) {
    std::vector<Footprint> own(n);
    for (std::size_t k = 0; k < n; ++k)
      if (steps_[k].idle) {
        own[k] = steps_[k].fp;
        own[k].erase(std::remove(own[k].begin(), own[k].end(), kGlobalResource), own[k].end());
      }
    pass([&](std::size_t k) -> const Footprint& { return steps_[k].idle ? own[k] : steps_[k].fp; }, false);
  }
}

void ExhaustiveSearch::offer(Offer o) {
  if (o.node < floor_) {
    outbox_.push_back(std::move(o));
    return;
  }
  Node& n = stack_[o.node];
  const bool covered = std::any_of(o.initials.begin(), o.initials.end(), [&](std::uint32_t a) {
    return std::find(n.backtrack.begin(), n.backtrack.end(), a) != n.backtrack.end();
  });
  if (covered) return;
  for (const std::uint32_t a : o.initials)
    if (allowed_actor(n, a)) {
      add_backtrack(n, a);
      return;
    }
}

// Calls `f` with each branch left at n, in the order this search explores
// them (after the one taken there), until it returns true. With source
// sets, the backtrack set's; without, the allowed actors'; both less those
// another search explores (split_all()).
template <class F>
void ExhaustiveSearch::each_branch_after(const Node& n, F&& f) const {
  auto open = [&](std::uint32_t a) { return a != n.chosen && !contains(n.done, a); };
  if (dpor()) {
    for (std::size_t k = n.foreign; k < n.backtrack.size(); ++k)
      if (open(n.backtrack[k]) && allowed_actor(n, n.backtrack[k]) && f(n.backtrack[k])) return;
  } else {
    const auto elsewhere = n.backtrack.begin() + n.foreign;
    for (std::size_t i = 0; i < n.enabled.size(); ++i)
      if (open(n.enabled[i]) && allowed(n, i) && std::find(n.backtrack.begin(), elsewhere, n.enabled[i]) == elsewhere &&
          f(n.enabled[i]))
        return;
  }
}

std::optional<std::uint32_t> ExhaustiveSearch::next_branch(const Node& n) const {
  std::optional<std::uint32_t> next;
  each_branch_after(n, [&](std::uint32_t a) {
    next = a;
    return true;
  });
  return next;
}

ExhaustiveSearch::Advance ExhaustiveSearch::advance() {
  if (dpor()) analyse_races();
  return resume(true);
}

// Back up from the last choice point to the deepest one with a branch left.
// finished_top: the last node's chosen branch was just explored (else it
// was recorded already, and a delegated one joined).
ExhaustiveSearch::Advance ExhaustiveSearch::resume(bool finished_top) {
  while (stack_.size() > floor_) {
    Node& n = stack_.back();
    if (finished_top) {
      n.done.push_back({n.chosen, std::move(n.chosen_fp)});
      n.chosen_fp.clear();
      // Explored by other searches (split_all): asleep from now on.
      for (Entry& e : n.elsewhere) n.done.push_back(std::move(e));
      n.elsewhere.clear();
    }
    finished_top = true;
    if (const auto a = next_branch(n)) {
      if (*a == n.delegated) return Advance::wait;
      n.chosen = *a;
      return Advance::next;
    }
    stack_.pop_back();
  }
  return Advance::done;
}

std::optional<std::size_t> ExhaustiveSearch::split_node() const {
  // Not the last node: its branch has not run yet, and the child's sleep
  // set needs that step's footprint.
  for (std::size_t i = split_at_.empty() ? floor_ : split_at_.back() + 1; i + 1 < stack_.size(); ++i)
    if (next_branch(stack_[i])) return i;
  return std::nullopt;
}

std::optional<ExhaustiveSearch::SplitRank> ExhaustiveSearch::split_rank() const {
  const auto i = split_node();
  if (!i) return std::nullopt;
  // The child's path leaves the first branch explored at node *i, and at
  // every node above it where a branch was explored before the one taken.
  std::uint32_t deviations = 1;
  for (std::size_t k = 0; k < *i; ++k) deviations += stack_[k].done.empty() ? 0u : 1u;
  return SplitRank{deviations, *i};
}

std::unique_ptr<ExhaustiveSearch> ExhaustiveSearch::split() {
  if (const auto i = split_node()) {
    Node& n = stack_[*i];
    const auto a = next_branch(n);
    auto child = std::make_unique<ExhaustiveSearch>(bound_, reduce_, sources_under_bound_);
    child->stack_.assign(stack_.begin(), stack_.begin() + static_cast<std::ptrdiff_t>(*i) + 1);
    Node& root = child->stack_.back();
    root.done.push_back({n.chosen, n.chosen_fp});
    root.chosen = *a;
    root.chosen_fp.clear();
    child->floor_ = *i + 1;
    n.delegated = *a;
    split_at_.push_back(*i);
    return child;
  }
  return nullptr;
}

std::size_t ExhaustiveSearch::branches_left() const {
  std::size_t left = stack_.empty() ? 0 : 1;  // the one set up to run
  for (const Node& n : stack_)
    each_branch_after(n, [&](std::uint32_t) {
      ++left;
      return false;
    });
  return left;
}

std::vector<std::unique_ptr<ExhaustiveSearch>> ExhaustiveSearch::split_all() {
  if (floor_ != 0 || !split_at_.empty() || stack_.empty())
    throw std::logic_error("exhaustive search: split_all() on a search split off by split(), or done");
  std::vector<std::unique_ptr<ExhaustiveSearch>> out;
  for (std::size_t i = 0; i < stack_.size(); ++i) {
    const bool last = i + 1 == stack_.size();
    std::vector<std::uint32_t> branches;
    if (last) branches.push_back(stack_[i].chosen);
    each_branch_after(stack_[i], [&](std::uint32_t a) {
      branches.push_back(a);
      return false;
    });
    for (const std::uint32_t a : branches) {
      auto c = std::make_unique<ExhaustiveSearch>(bound_, reduce_, sources_under_bound_);
      c->stack_.assign(stack_.begin(), stack_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      // Every branch known now, here and above, is another search's (or
      // explored): only those its own races add are its own.
      for (Node& n : c->stack_) {
        if (!dpor()) n.backtrack = n.enabled;
        n.foreign = static_cast<std::uint32_t>(n.backtrack.size());
      }
      Node& root = c->stack_.back();
      if (!last) {
        // The branch taken here is the path whose subtree the searches
        // below finish: explored, and asleep for the branches after it, as
        // in one search.
        root.done.push_back({root.chosen, root.chosen_fp});
        root.chosen_fp.clear();
      }
      root.chosen = a;
      out.push_back(std::move(c));
    }
  }
  stack_.clear();
  return out;
}

std::vector<std::uint32_t> ExhaustiveSearch::path() const {
  std::vector<std::uint32_t> out;
  out.reserve(stack_.size());
  for (const Node& n : stack_) out.push_back(n.chosen);
  return out;
}

const Footprint& ExhaustiveSearch::footprint_at(std::size_t node) const { return stack_.at(node).chosen_fp; }

void ExhaustiveSearch::asleep_at(std::size_t node, std::uint32_t actor, const Footprint& fp) {
  stack_.at(node).done.push_back({actor, fp});
}

void ExhaustiveSearch::elsewhere_at(std::size_t node, std::uint32_t actor, const Footprint& fp) {
  stack_.at(node).elsewhere.push_back({actor, fp});
}

std::optional<std::uint32_t> ExhaustiveSearch::chosen_at(const std::vector<std::uint32_t>& path,
                                                        std::size_t node) const {
  if (stack_.size() <= node || path.size() < node) return std::nullopt;
  for (std::size_t k = 0; k < node; ++k)
    if (stack_[k].chosen != path[k]) return std::nullopt;
  return stack_[node].chosen;
}

std::vector<std::uint32_t> ExhaustiveSearch::own_at(std::size_t node) const {
  const Node& n = stack_.at(node);
  return {n.backtrack.begin() + n.foreign, n.backtrack.end()};
}

void ExhaustiveSearch::known_at(std::size_t node, std::uint32_t actor) {
  Node& n = stack_.at(node);
  if (!dpor() || std::find(n.backtrack.begin(), n.backtrack.end(), actor) != n.backtrack.end()) return;
  n.backtrack.insert(n.backtrack.begin() + n.foreign, actor);
  ++n.foreign;
}

ExhaustiveSearch::Advance ExhaustiveSearch::join(ExhaustiveSearch& child) {
  Node& n = stack_.back();
  if (split_at_.empty() || split_at_.back() + 1 != stack_.size() || n.delegated == kNone)
    throw std::logic_error("exhaustive search: join() without a child waited for");
  for (Offer& o : child.outbox_) offer(std::move(o));
  child.outbox_.clear();
  races_ += child.races_;
  n.done.push_back({n.delegated, child.stack_[split_at_.back()].chosen_fp});
  n.delegated = kNone;
  split_at_.pop_back();
  return resume(false);
}

ShardedSearch::ShardedSearch(std::unique_ptr<ExhaustiveSearch> whole) {
  parts_.push_back({std::move(whole), {}});
}

std::optional<std::size_t> ShardedSearch::deciding() const {
  if (deciding_ < parts_.size()) return deciding_;
  return std::nullopt;
}

// After a part's first run, its branch's first step is known: the searches
// that share the choice point where it starts put it to sleep there, as one
// search would once it had explored that branch. A part that starts at the
// same choice point, with a branch after it, and has not run yet: asleep
// for its own branch. A part that starts below that choice point, on
// another branch there: asleep for the branches its own races add there,
// which come after every other (ExhaustiveSearch::elsewhere_at).
void ShardedSearch::share_first_step(std::size_t j) {
  const std::vector<std::uint32_t>& path = parts_[j].path;
  if (path.empty()) return;  // the whole search
  const std::size_t r = path.size() - 1;
  const std::uint32_t a = path[r];
  const Footprint fp = parts_[j].search->footprint_at(r);
  for (std::size_t k = 0; k < parts_.size(); ++k) {
    Part& other = parts_[k];
    if (k == j || !other.search || other.path.size() <= r) continue;
    // Where it is now: still at that choice point, or past it.
    const std::optional<std::uint32_t> there = other.search->chosen_at(path, r);
    if (!there) continue;
    if (other.path.size() == r + 1) {
      // Its branch after this one's (not run yet), or before it (then
      // asleep for its own additions there, which come after both).
      if (k > deciding_) other.search->asleep_at(r, a, fp);
      else other.search->elsewhere_at(r, a, fp);
    } else if (*there != a) {
      other.search->elsewhere_at(r, a, fp);
    }
  }
}

// After a part's run, the branches its races added at the choice points it
// shares with other parts (its own and those above it, while it is still on
// its path) are its to explore: the others, which may find the same races
// later, know them from now on, and leave them to it.
void ShardedSearch::share_additions(std::size_t j) {
  const std::vector<std::uint32_t>& path = parts_[j].path;
  for (std::size_t m = 0; m < path.size() && parts_[j].search->chosen_at(path, m); ++m)
    for (const std::uint32_t x : parts_[j].search->own_at(m))
      for (std::size_t k = 0; k < parts_.size(); ++k) {
        Part& other = parts_[k];
        if (k != j && other.search && other.path.size() > m && other.search->chosen_at(path, m))
          other.search->known_at(m, x);
      }
}

void ShardedSearch::decided() {
  Part& p = parts_.at(deciding_);
  if (runs_++ == 0) share_first_step(deciding_);
  const bool next = p.search->advance() == ExhaustiveSearch::Advance::next;
  if (next) share_additions(deciding_);
  const bool may_split = parts_.size() < kMaxParts;
  if (next && may_split && p.search->branches_left() >= 2) {
    std::vector<std::unique_ptr<ExhaustiveSearch>> split = p.search->split_all();
    p.search.reset();
    for (auto& c : split) {
      // Two parts whose races added the same branch above them both split
      // it off: one search of that subtree is enough (the first, whose
      // sleep sets name only branches other searches explore).
      std::vector<std::uint32_t> path = c->path();
      if (paths_.insert(path).second) parts_.push_back({std::move(c), std::move(path)});
    }
  } else if (!next) {
    p.search.reset();
  } else if (may_split && runs_ < kDecidingRuns) {
    return;  // another run may leave it more to split
  }
  ++deciding_;
  runs_ = 0;
}

struct SearchTree::Task {
  std::unique_ptr<ExhaustiveSearch> search;
  Task* parent = nullptr;
  std::vector<std::unique_ptr<Task>> children;  // split off, in order: the deepest (the next to join) last
  bool waiting = false;                         // for its last child
  bool finished = false;
  // Its split_rank() since it last changed (ran, split or joined), if known.
  std::optional<ExhaustiveSearch::SplitRank> rank;
  bool rank_known = false;
};

SearchTree::SearchTree(std::unique_ptr<ExhaustiveSearch> root) : root_(std::make_unique<Task>()) {
  root_->search = std::move(root);
  ready_.push_back(root_.get());
}

SearchTree::~SearchTree() = default;

SearchTree::Task* SearchTree::take() {
  if (ready_.empty()) return nullptr;
  Task* t = ready_.front();
  ready_.pop_front();
  ++running_;
  return t;
}

ExhaustiveSearch& SearchTree::search(Task* t) { return *t->search; }

std::uint64_t SearchTree::races() const { return root_->search->races(); }

std::uint64_t SearchTree::splits_by(std::uint64_t runs) {
  auto r = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(runs)));
  while (r * r > runs) --r;
  while ((r + 1) * (r + 1) <= runs) ++r;
  return r;
}

void SearchTree::ran(Task* t, unsigned workers) {
  --running_;
  ++runs_;
  t->rank_known = false;
  settle(t, t->search->advance());
  widen(workers);
}

void SearchTree::widen(unsigned workers) {
  for (;;) {
    const std::size_t in_hand = ready_.size() + running_;
    const bool idle_worker = in_hand < workers;
    if (!idle_worker && (splits_ >= splits_by(runs_) || in_hand >= kMaxInHand)) return;
    if (alive_ >= kMaxSearches) return;
    Task* best = nullptr;
    std::optional<ExhaustiveSearch::SplitRank> best_rank;
    for (Task* r : ready_) {
      if (!r->rank_known) {
        r->rank = r->search->split_rank();
        r->rank_known = true;
      }
      if (r->rank && (!best_rank || *r->rank < *best_rank)) {
        best = r;
        best_rank = r->rank;
      }
    }
    if (best == nullptr) return;
    best->rank_known = false;
    auto child = std::make_unique<Task>();
    child->search = best->search->split();
    child->parent = best;
    ready_.push_back(child.get());
    best->children.push_back(std::move(child));
    ++splits_;
    ++alive_;
  }
}

// A search whose child is done, once it waits for it, is joined with it;
// the joined search may then wait again, for its next child, or be done
// too, and so on up the tree.
void SearchTree::settle(Task* t, ExhaustiveSearch::Advance a) {
  for (;;) {
    if (a == ExhaustiveSearch::Advance::next) {
      ready_.push_back(t);
      return;
    }
    if (a == ExhaustiveSearch::Advance::wait) {
      Task* c = t->children.back().get();
      t->waiting = true;
      if (!c->finished) return;  // joined when it is
      t->waiting = false;
      t->rank_known = false;
      a = t->search->join(*c->search);
      t->children.pop_back();
      continue;
    }
    t->finished = true;
    --alive_;
    Task* p = t->parent;
    if (p == nullptr) {
      done_ = true;
      return;
    }
    if (!p->waiting || p->children.back().get() != t) return;  // joined when p gets to it
    p->waiting = false;
    p->rank_known = false;
    a = p->search->join(*t->search);
    p->children.pop_back();
    t = p;
  }
}

}  // namespace wspipe::emu::detail
