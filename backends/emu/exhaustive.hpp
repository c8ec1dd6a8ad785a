// The exhaustive search (internal to explore()): a stateless depth-first
// search over the choice points of a kernel, re-running it from the start
// for each schedule, split into subtrees that take turns (SearchTree, at
// the end). Two forms:
//  - unbounded (no preemption bound): dynamic partial-order reduction with
//    source sets and sleep sets (Abdulla, Aronis, Jonsson, Sagonas, POPL
//    2014 / JACM 2017, "Source-DPOR"): it branches only where two steps of
//    different actors conflict (their footprints, strategy.hpp), and
//    explores every class of equivalent schedules;
//  - bounded (`bound` preemptions per schedule): every schedule within the
//    bound, with no reduction. Neither source sets nor sleep sets combine
//    soundly with a preemption bound (Coons, Musuvathi, McKinley 2013): a
//    schedule is left out as equivalent to one explored elsewhere, which
//    may need more preemptions than the bound allows and so never run (a
//    deadlock reached with none was missed at bound 0 that way).
// Without the reduction, the unbounded form runs every schedule
// (comparisons).
// A third form, for the shrinker's search for the minimum, is a finder:
// source sets within a bound (`sources_under_bound`), with the
// conservative branches of Coons et al.'s bounded partial-order reduction
// (a race's reversal is also offered where the earlier step's actor took
// over, which needs no preemption), and without sleep sets: under a bound
// the running actor must go on, and once it is asleep every run is cut
// short (at bound 0 on persistent-gemm/undrained-clc-ring, 784 of 793 runs
// were). Far smaller than the bounded form, it proves nothing: a schedule
// within the bound that it does not run may still fail.
// docs/exploration.md, "The exhaustive search".
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
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
  // reduce: source sets and sleep sets, unbounded only (with a bound,
  // every schedule within it runs); without, every schedule runs.
  // sources_under_bound (with a bound and reduce): the finder, source sets
  // within the bound and no sleep sets.
  ExhaustiveSearch(std::optional<std::uint32_t> bound, bool reduce, bool sources_under_bound = false)
      : bound_(bound),
        reduce_(reduce && (!bound || sources_under_bound)),
        sources_under_bound_(sources_under_bound && bound && reduce) {}

  void new_execution(std::uint32_t num_actors) override;
  std::optional<std::uint32_t> pick(const Choice& c) override;
  bool pruned() const override { return pruned_; }
  bool wants_footprints() const override { return true; }
  void stepped(std::uint32_t actor, const Footprint& fp) override;
  void ended(bool failed) override { failed_ = failed; }

  // What comes after a run (advance) or a join: the next branch is set up
  // (next); the next branch is one split off to another search, which must
  // be joined first (wait); this search's subtree is explored (done).
  enum class Advance : std::uint8_t { next, wait, done };
  // After a run: its races, then the next branch.
  Advance advance();

  // Parallel search (docs/exploration.md, "Parallel and sharded runs").
  // A search can hand a subtree to another search: split() returns a
  // search for the first branch not yet explored at the shallowest of this
  // one's choice points where one is left (deeper than the last split),
  // and this search leaves that branch to it. The child follows this
  // search's path up to that choice point, then explores the subtree below
  // the branch; its sleep set there holds the branches before it, as in the
  // sequential search. Branches its races add above its own choice points
  // are not applied: they wait in its outbox, in the order the sequential
  // search would have applied them, until join() hands them to this search
  // once it has explored everything before the child (advance() returned
  // wait). So every choice point sees the same additions in the same order
  // as with one search, and the tree, its runs and its counts are the same
  // whatever the number of searches.
  std::unique_ptr<ExhaustiveSearch> split();
  // Where split() would split now, if anywhere: the branches the child's
  // path leaves its choice points' first explored branch at (its own
  // included), and the depth of its choice point. Fewer and shallower
  // come first (SearchTree::widen).
  struct SplitRank {
    std::uint32_t deviations = 0;
    std::size_t depth = 0;
    auto operator<=>(const SplitRank&) const = default;
  };
  std::optional<SplitRank> split_rank() const;
  // After wait: the child split off there is done; its outbox is applied,
  // then the search goes on (as advance()).
  Advance join(ExhaustiveSearch& child);

  // The sharded search (docs/exploration.md, "The exhaustive search in
  // shards"). After advance() returned next: each branch left (at every
  // choice point, the one set up to run included) becomes a search of its
  // own, in the order this one would take them, and this one is done. Such
  // a search explores its branch's subtree with the sleep sets one search
  // would have there (less the branches before it that other searches
  // explore: asleep_at adds them), and, unlike split()'s, needs nothing
  // back: every branch known now at its choice point and above belongs to
  // another search (or was explored), so it explores there only the
  // branches its own races add, which no other search explores for it. The
  // searches share no state and can run in any process, in any order:
  // their runs add up to the same totals however they are dealt out (two
  // of them may add the same branch above them, and both explore it). Not
  // on a search split off by split().
  std::vector<std::unique_ptr<ExhaustiveSearch>> split_all();
  // The branches left (the one set up to run included): the number of
  // searches split_all() would make.
  std::size_t branches_left() const;
  // The branch taken at each choice point (the last: the one set up to run).
  std::vector<std::uint32_t> path() const;
  // The footprint of the step taken at `node` in the last run.
  const Footprint& footprint_at(std::size_t node) const;
  // Another search explores `actor` at `node`, whose first step has
  // footprint `fp`: asleep there from now on (it comes before the branch
  // this search takes there, which has not run yet), or once the branch
  // this search took there is explored (it comes after that one).
  void asleep_at(std::size_t node, std::uint32_t actor, const Footprint& fp);
  void elsewhere_at(std::size_t node, std::uint32_t actor, const Footprint& fp);
  // The branch this search takes at `node` now, if it still follows `path`
  // down to there (else it has left that choice point for good).
  std::optional<std::uint32_t> chosen_at(const std::vector<std::uint32_t>& path, std::size_t node) const;
  // The branches at `node` that this search's own races added (split_all):
  // its own to explore. known_at: another search explores `actor` there.
  std::vector<std::uint32_t> own_at(std::size_t node) const;
  void known_at(std::size_t node, std::uint32_t actor);

  std::optional<std::uint32_t> bound() const { return bound_; }

  // Choice points where a new branch was added by a race between two steps
  // (source sets; all runs so far, of this search and the children joined).
  std::uint64_t races() const { return races_; }

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
    // Source sets: the children to explore (done ones included).
    std::vector<std::uint32_t> backtrack;
    std::uint32_t chosen = 0;
    Footprint chosen_fp;
    // The branch split off to a child search (split()), or kNone.
    std::uint32_t delegated = kNone;
    // split_all(): backtrack[0, foreign) are another search's (without
    // source sets, backtrack then lists the enabled actors); `elsewhere`,
    // those whose first steps are known, join `done` once the branch taken
    // here is explored (elsewhere_at).
    std::uint32_t foreign = 0;
    std::vector<Entry> elsewhere;
  };
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
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
    // A time-out taken because nothing could progress: fp holds its own
    // footprint and kGlobalResource (analyse_races).
    bool idle = false;
  };
  // A step a failing run never took (analyse_races): unordered with the
  // other virtual steps.
  static constexpr std::int64_t kVirtual = -2;
  // A branch to add at a choice point: nothing if one of `initials` is in
  // its backtrack set already, else the first of them allowed there.
  struct Offer {
    std::size_t node = 0;
    std::vector<std::uint32_t> initials;
  };
  bool dpor() const { return reduce_ && (!bound_ || sources_under_bound_); }
  // The choice point split() would split at.
  std::optional<std::size_t> split_node() const;
  // The next branch to explore at n (the one delegated included), if any.
  std::optional<std::uint32_t> next_branch(const Node& n) const;
  template <class F>
  void each_branch_after(const Node& n, F&& f) const;
  Advance resume(bool finished_top);
  // Applies `o` here, or keeps it for the parent when its choice point is
  // above this search's own.
  void offer(Offer o);
  Choice choice_of(const Node& n) const;
  bool allowed(const Node& n, std::size_t i) const;
  bool allowed_actor(const Node& n, std::uint32_t actor) const;
  std::optional<std::uint32_t> prune();
  void analyse_races();
  void add_backtrack(Node& n, std::uint32_t actor);

  std::optional<std::uint32_t> bound_;
  bool reduce_;
  bool sources_under_bound_;
  std::vector<Node> stack_;
  // A child search's first floor_ nodes are its parent's path (the last
  // one holds its branch): it explores only below them.
  std::size_t floor_ = 0;
  std::vector<Offer> outbox_;                // for the parent, in order
  std::vector<std::size_t> split_at_;        // the children's choice points, deepest last
  std::uint64_t races_ = 0;
  // The run in progress (new_execution resets them): the sleep set now, the
  // entries asleep after this step if independent of it, the node of the
  // step in progress if a choice point, preemptions so far, pruned; its
  // steps, the first step past the replayed prefix, and its actors.
  std::vector<Entry> sleep_;
  std::vector<Entry> candidates_;
  std::int64_t node_ = -1;
  std::uint32_t used_ = 0;
  bool pruned_ = false;
  std::vector<Step> steps_;
  std::size_t first_new_ = 0;
  std::uint32_t actors_ = 0;  // of the run
  bool step_idle_ = false;  // the step is a time-out where nothing could progress
  // Per actor: the last step it took, and the last step at whose choice it
  // could not move (-1: none).
  std::vector<std::int64_t> last_step_, disabled_at_;
  // Per actor: whether it could move at the last choice.
  std::vector<std::uint8_t> could_pick_;
  std::vector<std::uint32_t> last_enabled_;  // at the run's last choice
  bool failed_ = false;                      // the run ended on a failure
};

// The exhaustive search dealt out to shards (--shard I/N;
// docs/exploration.md, "The exhaustive search in shards"). It is made of
// parts: the whole search, and the searches split_all() splits off it and
// off each other; part j is shard j mod N's. Which parts there are
// depends only on the kernel and the options, never on N: while there are
// fewer than kMaxParts, a part splits once a run leaves it two branches or
// more. Every shard makes the runs that decide this alike, in order (each
// part's first run, and up to kDecidingRuns while it may still split),
// counting only its own; they also share what one search would know (the
// first steps of the parts' branches, the branches their races add at
// choice points other parts share). Then each shard runs its own parts to
// their ends. Their runs and pruned runs add up to the same totals for
// every N.
class ShardedSearch {
 public:
  static constexpr std::size_t kMaxParts = 64;
  static constexpr std::uint32_t kDecidingRuns = 4;

  // `whole`: a new search (as --jobs would split it), not run yet.
  explicit ShardedSearch(std::unique_ptr<ExhaustiveSearch> whole);

  // The part whose next run decides whether it splits, or nullopt once the
  // parts are settled. Every shard makes that run (with part(j)), then
  // calls decided().
  std::optional<std::size_t> deciding() const;
  ExhaustiveSearch& part(std::size_t j) { return *parts_[j].search; }
  void decided();

  std::size_t parts() const { return parts_.size(); }
  // Once settled: part j's search, to run to its end (as the root of a
  // SearchTree), or null: its deciding runs explored it, or it split.
  std::unique_ptr<ExhaustiveSearch> take(std::size_t j) { return std::move(parts_[j].search); }

 private:
  struct Part {
    std::unique_ptr<ExhaustiveSearch> search;
    std::vector<std::uint32_t> path;  // its branch at each choice point down to its own (empty: the whole search)
  };
  void share_first_step(std::size_t j);
  void share_additions(std::size_t j);
  std::vector<Part> parts_;
  std::set<std::vector<std::uint32_t>> paths_;  // of every part made
  std::size_t deciding_ = 0;
  std::uint32_t runs_ = 0;  // the deciding part's runs so far
};

// The searches of one exhaustive exploration: the root search and the
// children split off it, each run by one worker at a time. A worker takes
// a search, makes one run with it, and hands it back with ran(); a search
// that has explored everything before a child it split off waits until
// that child is done, and is then joined with it.
//
// The order of the runs (docs/exploration.md, "The order of the search,
// and several jobs"): one depth-first search spends its first runs, often
// all of its budget, in the subtree below the first schedule's last choice
// points, and meets a bug that needs one other branch near the root only
// at the end. So the tree splits off more searches as runs go by
// (splits_by()), at least one per worker in hand, and the workers take the
// ready ones in turn, one run each. A new one is split off the ready
// search whose split leaves the fewest first-explored branches, the
// shallowest first (ExhaustiveSearch::split_rank): the subtrees below the
// branches nearest the first schedule start first. The tree, its runs and
// its counts are those of one search whatever the order
// (ExhaustiveSearch::split), so the search stays complete and its counts
// the same for every number of jobs; which failure is met first, and when,
// is what the order decides. Not synchronised: the caller holds a lock
// around every call, and none around the run itself.
class SearchTree {
 public:
  explicit SearchTree(std::unique_ptr<ExhaustiveSearch> root);
  ~SearchTree();
  SearchTree(const SearchTree&) = delete;
  SearchTree& operator=(const SearchTree&) = delete;

  // Splits made by `runs` runs: the integer square root of the runs (a new
  // subtree starts after runs 1, 4, 9, ...), those that give an idle
  // worker a search counted, while fewer than kMaxInHand searches are in
  // hand (ready or running); a worker without a search gets one at any
  // time. At most kMaxSearches alive, the ones waiting for a child
  // included.
  static std::uint64_t splits_by(std::uint64_t runs);
  static constexpr std::size_t kMaxInHand = 64;
  static constexpr std::size_t kMaxSearches = 256;

  struct Task;
  // The ready search that has waited longest (its next branch is set up,
  // ready for a run), or null when none is ready now.
  Task* take();
  static ExhaustiveSearch& search(Task* t);
  // After the run of a taken search: the next branch, a wait, or its end.
  // Then, while fewer than `workers` searches are in hand, or fewer splits
  // were made than splits_by(runs), splits a child off the ready search
  // with the best split_rank().
  void ran(Task* t, unsigned workers);
  // Every search is done: the whole tree is explored.
  bool done() const { return done_; }
  std::size_t ready() const { return ready_.size(); }
  // Races of every search joined so far (all of them once done()).
  std::uint64_t races() const;
  // Children split off so far.
  std::uint64_t splits() const { return splits_; }

 private:
  void settle(Task* t, ExhaustiveSearch::Advance a);
  void widen(unsigned workers);
  std::unique_ptr<Task> root_;
  std::deque<Task*> ready_;
  bool done_ = false;
  std::uint64_t splits_ = 0;
  std::uint64_t runs_ = 0;    // ran() calls
  std::size_t running_ = 0;   // taken, not handed back
  std::size_t alive_ = 1;     // not finished
};

}  // namespace wspipe::emu::detail
