// The scheduler: scheduling points, the enabled set kept up to date at
// events, dispatch (the strategy's choice, preemptions, try_wait time-outs,
// deadlock and livelock), footprints.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/clc.hpp"
#include "backends/emu/runtime/fibers.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/tma_store.hpp"

namespace wspipe::emu::detail {
namespace {


// set_sched_check: -1 until set (then the build's and environment's default).
std::atomic<int> g_sched_check{-1};
std::atomic<std::uint64_t> g_sched_checks{0};
thread_local std::uint64_t tl_sched_evaluations = 0;

bool sched_check_default() {
#ifndef NDEBUG
  return true;
#else
  static const bool env = [] {
    const char* v = std::getenv("WSPIPE_SCHED_CHECK");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return env;
#endif
}

}  // namespace

bool sched_check_on() {
  const int check = g_sched_check.load();
  return check < 0 ? sched_check_default() : check != 0;
}

void set_sched_check(bool on) { g_sched_check = on ? 1 : 0; }
std::uint64_t sched_checks() { return g_sched_checks.load(); }
std::uint64_t sched_evaluations() { return tl_sched_evaluations; }

void RunningWarp::outside_a_warp() {
  std::fputs("wspipe: an EmuBackend operation was called outside a warp of emu::run()\n", stderr);
  std::abort();
}

// The launch's cluster shape, checked as cudaLaunchKernelEx checks it: every
// ---------------------------------------------------------------- scheduling

Move World::movable(const Warp& w) const {
  switch (w.block) {
    case Block::none: return Move::progress;
    case Block::not_started:
      return clc_->launched(ctas_[w.cta].cluster) ? Move::progress : Move::no;
    case Block::finished: return Move::no;
    case Block::mbar:
      return mbar_->passed(static_cast<std::uint32_t>(w.obj), w.parity) ? Move::progress : Move::no;
    case Block::mbar_try:
      if (mbar_->passed(static_cast<std::uint32_t>(w.obj), w.parity)) return Move::progress;
      return options_.spurious_try_wait && !w.spun_pure ? Move::spin : Move::no;
    case Block::named:
      return barriers_->named_passed(w.cta, static_cast<std::uint32_t>(w.obj), w.target) ? Move::progress : Move::no;
    case Block::cluster:
      return barriers_->cluster_passed(ctas_[w.cta].cluster, w.target) ? Move::progress : Move::no;
    case Block::tmem_alloc:
      return tmem_->can_alloc(w) ? Move::progress : Move::no;
    case Block::tmem_pair:
      return tmem_->pair_passed(w.cta, w.target) ? Move::progress : Move::no;
    // The waiter is the stores' issuer: the engine marks it at each step.
    case Block::bulk_wait: return tma_store_->done(w, w.target, w.parity != 0) ? Move::progress : Move::no;
  }
  return Move::no;
}

// movable() for any actor: a warp's, an engine's (it can move while its
// queue holds an operation), or a CLC actor's.
Move World::move_of(std::uint32_t actor) const {
  if (actor < num_warps()) return movable(warps_[actor]);
  if (actor >= engines_->first_alternative()) return engines_->alternative_move(actor);
  if (actor >= clc_->first_actor()) return clc_->move(actor);
  return engines_->move(actor - num_warps());
}

std::string World::rel(const char* file) const {
  std::string f = file != nullptr ? file : "";
  if (!source_root_.empty() && f.rfind(source_root_, 0) == 0) f.erase(0, source_root_.size());
  return f;
}

std::string World::actor_name(std::int32_t actor) const {
  if (actor < 0) return "";
  const auto a = static_cast<std::uint32_t>(actor);
  if (a >= engines_->first_alternative()) return engines_->alternative_name(a);
  if (a >= clc_->first_actor()) return clc_->actor_name(a);
  return a < warps_.size() ? warps_[a].name : engines_->engine(a - num_warps()).name;
}

void World::close_step() {
  if (!fp_open_) return;
  fp_open_ = false;
  std::sort(fp_.begin(), fp_.end());
  fp_.erase(std::unique(fp_.begin(), fp_.end()), fp_.end());
  strategy_->stepped(last_actor_, fp_);
  fp_.clear();
}

void World::blocked(Warp& w) {
  mark(w.id);
  std::uint32_t list = 0;
  switch (w.block) {
    case Block::mbar:
    case Block::mbar_try: list = mbar_list(static_cast<std::uint32_t>(w.obj)); break;
    case Block::named: list = named_list(w.cta, static_cast<std::uint32_t>(w.obj)); break;
    case Block::cluster: list = cluster_list(ctas_[w.cta].cluster); break;
    case Block::tmem_alloc:
    case Block::tmem_pair: list = tmem_list(w.cta); break;
    case Block::bulk_wait:  // no list: the TMA engine marks the issuer (tma_store.cpp)
    case Block::none:
    case Block::not_started:
    case Block::finished: return;
  }
  w.wait_list = static_cast<std::int32_t>(list);
  w.wait_pos = static_cast<std::uint32_t>(lists_[list].size());
  lists_[list].push_back(w.id);
  if (w.block == Block::mbar_try) {
    w.try_pos = static_cast<std::int32_t>(try_waiters_.size());
    try_waiters_.push_back(w.id);
  }
}

void World::unblocked(Warp& w) {
  mark(w.id);
  if (w.wait_list >= 0) {
    std::vector<std::uint32_t>& l = lists_[static_cast<std::size_t>(w.wait_list)];
    const std::uint32_t last = l.back();
    l[w.wait_pos] = last;
    warps_[last].wait_pos = w.wait_pos;
    l.pop_back();
    w.wait_list = -1;
  }
  if (w.try_pos >= 0) {
    const std::uint32_t last = try_waiters_.back();
    try_waiters_[static_cast<std::size_t>(w.try_pos)] = last;
    warps_[last].try_pos = w.try_pos;
    try_waiters_.pop_back();
    w.try_pos = -1;
  }
}

// Re-evaluates the marked actors and moves each whose Move changed into,
// out of or within the sorted enabled set: work in proportion to what
// changed (and, for an insertion, to the enabled set), none for the others.
void World::refresh() {
  tl_sched_evaluations += dirty_.size();
  for (const std::uint32_t a : dirty_) {
    marked_[a] = 0;
    const Move now = move_of(a);
    const auto was = static_cast<Move>(moves_[a]);
    if (now == was) continue;
    moves_[a] = static_cast<std::uint8_t>(now);
    const auto at = std::lower_bound(enabled_.begin(), enabled_.end(), a) - enabled_.begin();
    if (was == Move::no) {
      enabled_.insert(enabled_.begin() + at, a);
      spin_.insert(spin_.begin() + at, now == Move::spin);
    } else if (now == Move::no) {
      enabled_.erase(enabled_.begin() + at);
      spin_.erase(spin_.begin() + at);
    } else {
      spin_[static_cast<std::size_t>(at)] = now == Move::spin;
    }
    if (was == Move::spin) --spinning_;
    if (now == Move::spin) ++spinning_;
  }
  dirty_.clear();
}

// The full recomputation the incremental set must equal (set_sched_check),
// compared entry by entry as it is made (no allocation per step).
void World::check_enabled() const {
  std::size_t k = 0;
  bool same = true;
  auto visit = [&](std::uint32_t actor, Move m) {
    if (m == Move::no) return;
    same = same && k < enabled_.size() && enabled_[k] == actor && spin_[k] == (m == Move::spin ? 1 : 0);
    ++k;
  };
  std::uint32_t unfinished = 0;
  std::size_t tries = 0;
  for (const Warp& w : warps_) {
    unfinished += w.block != Block::finished ? 1 : 0;
    tries += w.block == Block::mbar_try ? 1 : 0;
    visit(w.id, movable(w));
  }
  for (std::uint32_t e = 0; e < num_engines(); ++e) visit(num_warps() + e, move_of(num_warps() + e));
  for (std::uint32_t a = clc_->first_actor(); a < clc_->first_actor() + clc_->actors(); ++a) visit(a, clc_->move(a));
  const std::uint32_t alt = engines_->first_alternative();
  for (std::uint32_t a = alt; a < alt + engines_->alternatives(); ++a) visit(a, engines_->alternative_move(a));
  const auto spinning = static_cast<std::size_t>(std::count(spin_.begin(), spin_.end(), std::uint8_t{1}));
  g_sched_checks.fetch_add(1, std::memory_order_relaxed);
  if (same && k == enabled_.size() && spinning == spinning_ && unfinished == unfinished_ &&
      tries == try_waiters_.size())
    return;
  // Appended piece by piece: g++ 12 at -O3 warns (-Wrestrict, falsely) on
  // `" " + std::string` chains.
  std::string kept, full;
  auto add = [](std::string& to, const std::string& name, bool spin) {
    to.append(" ").append(name);
    if (spin) to.append(" (spin)");
  };
  for (std::size_t i = 0; i < enabled_.size(); ++i)
    add(kept, actor_name(static_cast<std::int32_t>(enabled_[i])), spin_[i] != 0);
  for (const Warp& w : warps_) {
    const Move m = movable(w);
    if (m != Move::no) add(full, w.name, m == Move::spin);
  }
  for (std::uint32_t e = 0; e < num_engines(); ++e)
    if (engines_->move(e) != Move::no) add(full, engines_->engine(e).name, false);
  for (std::uint32_t a = clc_->first_actor(); a < clc_->first_actor() + clc_->actors(); ++a)
    if (clc_->move(a) != Move::no) add(full, clc_->actor_name(a), false);
  for (std::uint32_t a = alt; a < alt + engines_->alternatives(); ++a)
    if (engines_->alternative_move(a) != Move::no) add(full, engines_->alternative_name(a), false);
  std::fprintf(stderr,
               "wspipe: scheduler check failed at step %llu: the enabled set kept at events differs from movable()\n"
               "  kept:      %s (%zu spinning, %u unfinished, %zu in try_wait)\n"
               "  recomputed:%s (%u unfinished, %zu in try_wait)\n",
               static_cast<unsigned long long>(step_), kept.c_str(), spinning_, unfinished_, try_waiters_.size(),
               full.c_str(), unfinished, tries);
  std::abort();
}

bool World::dispatch(Warp* self) {
  for (;;) {
    if (track_fp_) close_step();
    if (step_ >= options_.max_steps) {
      end(Status::livelock, self);
      return false;
    }
    if ((step_ & 4095) == 0 && options_.deadline != std::chrono::steady_clock::time_point::max() &&
        std::chrono::steady_clock::now() >= options_.deadline) [[unlikely]] {
      result_.pruned = result_.stopped = true;
      end(Status::ok, self);
      return false;
    }
    refresh();
    if (sched_check_) check_enabled();
    if (options_.observer != nullptr) observe();
    // An actor that can only time out (spurious try_wait) does not count as
    // progress: if nothing else can move, the kernel is deadlocked. An
    // engine with operations queued can always move.
    const bool progress = enabled_.size() > spinning_;
    const bool unfinished = unfinished_ > 0;
    const std::uint32_t* enabled = enabled_.data();
    const std::uint8_t* spin = spin_.data();
    std::size_t n = enabled_.size();
    if (!progress) {
      // Nothing can change any state, except a try_wait whose time limit
      // runs out: it returns false, and its warp may then complete the phase
      // itself (PTX: try_wait is a potentially blocking test, not a wait).
      // Only a warp that polls forever is deadlocked.
      if (unfinished && n == 0 && idle_timeouts_ < kMaxIdleTimeouts) {
        idle_enabled_.assign(try_waiters_.begin(), try_waiters_.end());
        std::sort(idle_enabled_.begin(), idle_enabled_.end());
        idle_spin_.assign(idle_enabled_.size(), 1);
        enabled = idle_enabled_.data();
        spin = idle_spin_.data();
        n = idle_enabled_.size();
      }
      if (n == 0 || idle_timeouts_ >= kMaxIdleTimeouts) {
        end(unfinished ? Status::deadlock : Status::ok, self);
        return false;
      }
    }
    // The default policy (schedule.hpp): the last actor goes on while it
    // can make progress, else the next one in cyclic order that can. It
    // never picks an engine's alternative actor (which is enabled only
    // beside its engine): engines complete whole operations in issue order.
    const std::uint32_t alt = engines_->first_alternative();
    std::size_t at = std::lower_bound(enabled, enabled + n, last_actor_) - enabled;
    const bool can_continue = at < n && enabled[at] == last_actor_ && spin[at] == 0 && last_actor_ < alt;
    if (!can_continue) {
      // The next actor in cyclic order that can make progress; when every
      // one can only time out, the next one (a time-out is then the move).
      const std::size_t first = ((at < n && enabled[at] == last_actor_) ? at + 1 : at) % n;
      at = first;
      for (std::size_t tries = 0, k = first; tries < n; ++tries, k = (k + 1) % n) {
        if (spin[k] == 0 && enabled[k] < alt) {
          at = k;
          break;
        }
      }
    }
    std::uint32_t pick = enabled[at];
    if (n > 1 || track_fp_) {
      const Choice c{.enabled = enabled, .spin = spin, .n = n, .step = step_ + 1,
                     .index = choices_, .preferred = pick, .can_continue = can_continue,
                     .first_alternative = alt};
      const auto p = strategy_->pick(c);
      if (!p) {
        if (strategy_->pruned()) {
          result_.pruned = true;
        } else {
          mismatch_ = strategy_->mismatch();
        }
        end(Status::ok, self);
        return false;
      }
      if (n > 1) {
        if (*p != pick) result_.schedule.push({choices_, *p});
        if (is_preemption(c, *p)) result_.preemption_at.push_back(choices_);
        for (std::size_t i = 0; i < n; ++i)
          choice_fingerprint_ = (choice_fingerprint_ ^ (enabled[i] * 2 + spin[i])) * 16777619u;
        choice_fingerprint_ = (choice_fingerprint_ ^ 0xffu) * 16777619u;  // end of this choice point
        ++choices_;
      }
      pick = *p;
    }
    // Every step enters the fingerprint of version 3 tokens as one word: the
    // lone actor (and its spin flag) where one can move; at a choice point,
    // the choice-point fingerprint that now covers its enabled set (hashed
    // once, not twice). The pick is not folded in: it follows from the
    // enabled sets, the previous pick and the schedule, so two runs of one
    // schedule whose steps agree pick alike.
    step_fingerprint_ = (step_fingerprint_ ^ (n > 1 ? choice_fingerprint_ : enabled[0] * 2 + spin[0])) * 16777619u;
    // Letting a try_wait time out while nothing else could move changes no
    // state; anything else does.
    idle_timeouts_ = progress ? 0 : idle_timeouts_ + 1;
    last_actor_ = pick;
    fp_open_ = track_fp_;
    ++step_;
    if (pick >= alt) {
      // An alternative of a TMA engine: a load out of issue order, or a
      // piece of one (engines.cpp); the scheduler picks again.
      if (!engines_->alternative_step(pick) || stopping_ || killing_) return false;
      continue;
    }
    if (pick >= clc_->first_actor()) {
      // A CLC unit completes a try_cancel, or the launcher launches a
      // cluster (clc.cpp); the scheduler picks again.
      clc_->step(pick);
      if (stopping_ || killing_) return false;
      continue;
    }
    if (pick >= num_warps()) {
      // An engine completes its oldest operation on the running fiber, and
      // the scheduler picks again.
      mark(pick);  // its queue may have drained
      if (!engines_->step(pick - num_warps()) || stopping_ || killing_) return false;
      continue;
    }
    if (self != nullptr && pick == self->id) return true;
    transfer(warps_[pick], self);
    return self != nullptr && self->block != Block::finished && !killing_;
  }
}

// The error of a warp that caught the teardown's unwinding and went on to
// the operation at `loc`. Built here, not in teardown_op: a fiber that
// teardown_op abandons leaves nothing in its frame that owns memory.
std::exception_ptr World::swallowed_error(const Warp& w, const SourceLoc& loc) const {
  return std::make_exception_ptr(std::logic_error(
      "wspipe: warp " + w.name + (in_lane_ ? " (lane 31)" : "") +
      " caught the unwinding of the run's teardown and went on to an operation at " + where(loc) +
      ": a kernel's catch (...) must rethrow what it does not handle (throw;)"));
}

// An operation of a warp while the run is torn down: it throws
// TeardownUnwind (emu_ops.hpp), which unwinds the warp's frames to its
// fiber's entry (run_body), unless the warp is unwinding already (a
// destructor's operation: a no-op, as throwing there would end the
// program). A warp that calls an operation again after the unwinding began,
// outside a handler, caught it without rethrowing: the run ends with that
// error (run() throws it), naming the warp and the line. A warp that goes
// on catching it (at every operation: `for (;;) try { op } catch (...) {}`,
// also inside a handler) would never end: once it has been thrown
// kUnwindLimit times on the fiber, the fiber is abandoned, never resumed
// again (abandon_running), and the run ends with the same error.
void World::teardown_op(Warp& w, std::uint64_t& unwinds, const SourceLoc& loc) {
  if (std::uncaught_exceptions() > 0) return;
  if (unwinds > 0 && (!std::current_exception() || unwinds >= kUnwindLimit)) {
    if (!swallowed_) swallowed_ = swallowed_error(w, loc);
    if (unwinds >= kUnwindLimit) abandon_running(w);  // returns only if resumed, which nothing does
  }
  ++unwinds;
  throw TeardownUnwind{};
}

bool World::point(Warp& w, Block b, std::int32_t obj, std::uint32_t parity, std::uint64_t target,
                  const SourceLoc& loc) {
  if (killing_) {
    teardown_op(w, w.unwinds, loc);
    return false;
  }
  ++w.points;
  // Another operation than the try_wait of a spin that ran out: the warp
  // left that loop.
  if (w.spun_pure && !(b == Block::mbar_try && w.timeout_site == SpinSite{obj, parity, loc.file_name(), loc.line()}))
    w.spun_pure = false;
  w.spin_left = 0;
  w.block = b;
  w.obj = obj;
  w.parity = parity;
  w.target = target;
  w.loc = loc;
  w.since = step_;
  // A non-blocking point leaves the warp as movable as it was running.
  const bool waits = b != Block::none;
  if (waits) blocked(w);
  const bool go = dispatch(&w);
  w.block = Block::none;
  if (waits) unblocked(w);
  return go && !killing_;
}

}  // namespace wspipe::emu::detail
