// explain(): a GPU's event log matched against the emulator's runs of the
// same kernel (docs/explain.md). A matcher follows each warp's events as
// the run records them (RunOptions::event_observer) against the log's, and
// the run is cut short (its strategy stops it at the next choice) as soon
// as one warp leaves the log; the search (the exhaustive search, random
// and PCT runs in turn) goes on until a run follows every warp to its end.
#include "explain.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "exhaustive.hpp"
#include "report.hpp"

namespace wspipe::emu {
namespace {

using cuda::EventOp;
using SteadyClock = std::chrono::steady_clock;

double since(SteadyClock::time_point t0) { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); }

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

std::string base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool is_poll(EventOp op) { return op == EventOp::try_wait || op == EventOp::test_wait; }

// Ops whose `bar` is an mbarrier.
bool names_mbarrier(EventOp op) {
  switch (op) {
    case EventOp::init:
    case EventOp::inval:
    case EventOp::arrive:
    case EventOp::arrive_expect_tx:
    case EventOp::expect_tx:
    case EventOp::complete_tx:
    case EventOp::try_wait:
    case EventOp::test_wait:
    case EventOp::wait:
    case EventOp::tma_load:
    case EventOp::mma_commit: return true;
    default: return false;
  }
}

// The ops the emulator's trace has no event of its own for: left out of
// the comparison (ExplainResult::notes says so).
bool uncompared(EventOp op) { return op == EventOp::clc_try_cancel; }

// One item of a warp's logged sequence: an event, or failed try_waits
// (test_waits) in a row at one call site, barrier and parity, taken as
// one: the emulator records a spin's first and last time-out only.
struct Unit {
  std::size_t index = 0;  // its first event, in the warp's kept events
  std::uint32_t count = 1;
};

struct WarpLog {
  const cuda::EventLogWarp* log = nullptr;  // null: the warp logged nothing
  std::uint32_t number = 0;                 // the log's warp number
  std::uint32_t skip = 0;                   // events before the kept window: counted, not compared
  std::vector<Unit> units;
  bool watchdog = false, check = false;
  // Events of the emulator's warp past the log's last are not compared:
  // the GPU's kernel was ended by another warp's trap.
  bool open_end = false;
  std::uint32_t events() const { return log != nullptr ? log->total : 0; }
  const cuda::LoggedEvent& event(const Unit& u) const { return log->events[u.index]; }
};

// An emulator event, as the log would have recorded it.
struct EmuOp {
  EventOp op = EventOp::init;
  std::int32_t object = -1;  // mbarrier ops: the trace object
  std::int64_t value = 0;    // init: count; arrive: arrivals; named: id; bulk_wait: groups
  std::int64_t threads = 0;  // named: thread count
  std::optional<std::uint32_t> parity;
  std::optional<bool> answer;
  bool remote = false;
  const char* file = "";
  std::uint32_t line = 0;
  std::uint64_t begin = 0, step = 0;
  std::string what;  // in words, with its location
};

bool same_site(const EmuOp& a, const EmuOp& b) {
  return a.op == b.op && a.object == b.object && a.parity == b.parity && a.line == b.line &&
         std::string_view(a.file) == b.file;
}

std::string log_event_text(const cuda::EventLogFile& f, const cuda::LoggedEvent& e, std::uint32_t count = 1) {
  std::string s = cuda::event_op_name(e.op);
  if (names_mbarrier(e.op)) s += " on " + hex(e.bar);
  if (e.op == EventOp::named_sync || e.op == EventOp::named_arrive)
    s += " id " + std::to_string(e.bar) + ", " + std::to_string(e.arg) + " threads";
  if (e.cta) s += " of CTA rank " + std::to_string(*e.cta);
  if (e.parity) s += " parity " + std::to_string(*e.parity);
  if (e.answer) {
    if (e.op == EventOp::wait)
      s += *e.answer ? " passed" : " did not pass after " + std::to_string(e.arg) + " tries";
    else
      s += *e.answer ? " -> true" : " -> false";
  }
  if (count > 1) s += " (" + std::to_string(count) + " in a row)";
  if (e.op == EventOp::init) s += " count " + std::to_string(e.arg);
  if (e.op == EventOp::arrive || e.op == EventOp::arrive_expect_tx)
    s += " by " + std::to_string(std::popcount(e.lanes)) + " lane" + (std::popcount(e.lanes) == 1 ? "" : "s");
  s += ", at " + f.source_name(e.file) + ":" + std::to_string(e.line);
  return s;
}

// Follows a run's events, warp by warp, against the log.
class Matcher final : public EventObserver {
 public:
  Matcher(const cuda::EventLogFile& log, std::vector<WarpLog> warps, std::uint32_t warps_per_cta,
          std::uint32_t cluster_size)
      : log_(log), warps_(std::move(warps)), warps_per_cta_(warps_per_cta), cluster_size_(cluster_size) {}

  void reset() {
    follow_.assign(warps_.size(), {});
    log_to_emu_.clear();
    emu_to_log_.clear();
    mismatch_.reset();
    explained_.clear();
    followed_ = 0;
  }

  void event(const Trace& t, const Event& e) override {
    if (mismatch_ || e.warp < 0 || static_cast<std::size_t>(e.warp) >= warps_.size()) return;
    const auto w = static_cast<std::uint32_t>(e.warp);
    Follow& f = follow_[w];
    if (e.kind == EventKind::exit) {
      flush_named(t, w);
      f.exited = true;
      return;
    }
    std::optional<EmuOp> op = translate(t, e);
    if (!op) return;
    if (op->op == EventOp::named_arrive) {  // a bar.sync too, if its pass follows
      flush_named(t, w);
      f.named = std::move(op);
      return;
    }
    if (op->op == EventOp::named_sync && f.named && f.named->value == op->value) {
      f.named.reset();
    } else {
      flush_named(t, w);
    }
    feed(t, w, *op);
  }

  bool diverged() const { return mismatch_.has_value(); }
  const std::optional<ExplainMismatch>& mismatch() const { return mismatch_; }
  std::uint64_t followed() const { return followed_; }
  std::vector<ExplainedEvent> take_explained() { return std::move(explained_); }

  // After a match: each wait the watchdog trapped, and the emulator's wait
  // that stays blocked in its place.
  std::vector<std::string> trapped_waits(const RunResult& r) const {
    std::vector<std::string> out;
    for (std::uint32_t w = 0; w < warps_.size(); ++w) {
      if (!warps_[w].watchdog) continue;
      const BlockedWarp* b = blocked(r, r.trace.warps[w].name);
      const cuda::LoggedEvent& e = warps_[w].event(warps_[w].units.back());
      std::string line = "warp " + std::to_string(warps_[w].number) + ": wait on " + hex(e.bar) + " parity " +
                         std::to_string(e.parity.value_or(0)) + " at " + log_.source_name(e.file) + ":" +
                         std::to_string(e.line) + " (" + std::to_string(e.arg) + " tries)";
      if (b != nullptr)
        line += " = " + b->warp + ": " + b->op + " on " + b->object + " parity " + std::to_string(b->parity) + " at " +
                b->file + ":" + std::to_string(b->line) + ", blocked since step " + std::to_string(b->since);
      out.push_back(std::move(line));
    }
    return out;
  }

  // After a run that was not cut: whether every warp reached the log's end
  // where the log says it ended; the mismatch where one did not.
  std::optional<ExplainMismatch> finish(const RunResult& r) {
    const Trace& t = r.trace;
    for (std::uint32_t w = 0; w < warps_.size() && !mismatch_; ++w) {
      const BlockedWarp* b = blocked(r, t.warps[w].name);
      if (follow_[w].named && !(b != nullptr && b->op == "bar.sync")) flush_named(t, w);
      if (!mismatch_) check_end(r, t, w, b);
    }
    return mismatch_;
  }

 private:
  struct Follow {
    std::uint32_t seen = 0;  // events before the kept window
    std::size_t next = 0;    // the next unit to match
    std::optional<EmuOp> spin;   // the failed poll whose repeats are taken into the last unit
    std::optional<EmuOp> named;  // a bar.arrive not yet known to be a bar.sync's
    bool exited = false;
  };

  std::optional<EmuOp> translate(const Trace& t, const Event& e) const {
    EmuOp op;
    op.object = e.object;
    op.file = e.file;
    op.line = e.line;
    op.begin = e.begin != 0 && e.begin <= e.step ? e.begin : e.step;  // only waits have a begin
    op.step = e.step;
    switch (e.kind) {
      case EventKind::init: op.op = EventOp::init; op.value = e.a; break;
      case EventKind::inval: op.op = EventOp::inval; break;
      case EventKind::arrive: op.op = EventOp::arrive; op.value = e.a; op.remote = e.remote; break;
      case EventKind::expect_tx: op.op = EventOp::expect_tx; break;
      case EventKind::complete_tx: op.op = EventOp::complete_tx; break;
      case EventKind::wait:
      case EventKind::try_wait:
      case EventKind::test_wait:
        op.op = e.kind == EventKind::wait ? EventOp::wait : e.kind == EventKind::try_wait ? EventOp::try_wait
                                                                                          : EventOp::test_wait;
        op.parity = static_cast<std::uint32_t>(e.a);
        op.answer = e.c != 0;
        break;
      case EventKind::named_arrive: op.op = EventOp::named_arrive; op.value = e.a; op.threads = e.b; break;
      case EventKind::named_pass: op.op = EventOp::named_sync; op.value = e.a; break;
      case EventKind::cluster_arrive: op.op = EventOp::cluster_arrive; break;
      case EventKind::cluster_pass: op.op = EventOp::cluster_wait; break;
      case EventKind::tma_issue: op.op = EventOp::tma_load; break;
      case EventKind::tma_store_issue: op.op = EventOp::tma_store; break;
      case EventKind::bulk_commit: op.op = EventOp::bulk_commit; break;
      case EventKind::bulk_wait: op.op = EventOp::bulk_wait; op.value = e.a; break;
      case EventKind::mma_issue: op.op = EventOp::mma; break;
      case EventKind::commit_issue: op.op = EventOp::mma_commit; break;
      case EventKind::tmem_alloc: op.op = EventOp::tmem_alloc; break;
      case EventKind::tmem_dealloc: op.op = EventOp::tmem_dealloc; break;
      case EventKind::tmem_relinquish: op.op = EventOp::tmem_relinquish; break;
      case EventKind::violation: op.op = EventOp::check_failed; break;  // B::check's, if the log has one here
      default: return std::nullopt;
    }
    op.what = t.describe(e) + ", at " + t.location(e) + " (step " + std::to_string(e.step) + ")";
    return op;
  }

  // A bar.arrive whose warp went on to another event: not a bar.sync.
  void flush_named(const Trace& t, std::uint32_t w) {
    Follow& f = follow_[w];
    if (!f.named) return;
    const EmuOp op = std::move(*f.named);
    f.named.reset();
    feed(t, w, op);
  }

  void feed(const Trace& t, std::uint32_t w, const EmuOp& op) {
    if (mismatch_) return;
    const WarpLog& wl = warps_[w];
    Follow& f = follow_[w];
    if (f.seen < wl.skip) {  // before the kept window: counted only
      ++f.seen;
      ++followed_;
      return;
    }
    const bool failed_poll = is_poll(op.op) && op.answer == false;
    if (failed_poll && f.spin && same_site(*f.spin, op)) return;  // the spin goes on
    f.spin.reset();
    if (f.next >= wl.units.size()) {
      if (wl.open_end) return;
      if (op.op == EventOp::check_failed) return;  // the run's violation: judged at its end
      diverge(t, w, 0, "nothing more: the warp's " + std::to_string(wl.events()) + " events end here",
              "went on to " + op.what);
      return;
    }
    const Unit& u = wl.units[f.next];
    const cuda::LoggedEvent& le = wl.event(u);
    if (op.op == EventOp::check_failed && le.op != EventOp::check_failed) return;  // not B::check's: judged at the end
    if (const std::string why = differs(t, w, le, op); !why.empty()) {
      diverge(t, w, le.seq, log_event_text(log_, le, u.count), "did " + op.what + " (differs: " + why + ")");
      return;
    }
    explained_.push_back({.log_warp = wl.number, .index = u.index, .count = u.count,
                          .warp = static_cast<std::int32_t>(w), .begin = op.begin, .step = op.step,
                          .emulator = op.what});
    ++f.next;
    followed_ += u.count;
    if (failed_poll) f.spin = op;
  }

  // The CTA a log event's barrier is in: the warp's own, or the cluster's
  // CTA of rank `cta` for a remote operation.
  std::uint32_t target_cta(std::uint32_t w, const cuda::LoggedEvent& e) const {
    const std::uint32_t cta = w / warps_per_cta_;
    return e.cta ? cta - cta % cluster_size_ + *e.cta : cta;
  }

  static std::uint64_t key(std::uint32_t cta, std::uint32_t bar) {
    // A CTA of cluster rank r reads its own barriers' addresses r << 24
    // above a rank-0 CTA's (docs/silicon.md): the offset is the low bits.
    return (std::uint64_t{cta} << 32) | (bar & 0xffffffu);
  }

  std::string object_name(const Trace& t, std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= t.objects.size()) return "no barrier";
    return t.objects[id].name + " (cta" + std::to_string(t.objects[id].cta) + ")";
  }

  // Binds the log's barrier (CTA, address) to the emulator's barrier `id`
  // on first use, both ways; "" when they are bound to each other, else why not.
  std::string bind(const Trace& t, std::uint32_t cta, std::uint32_t bar, std::int32_t id) {
    const std::uint64_t k = key(cta, bar);
    const auto a = log_to_emu_.find(k);
    const auto b = emu_to_log_.find(id);
    if (a == log_to_emu_.end() && b == emu_to_log_.end()) {
      if (id >= 0 && static_cast<std::size_t>(id) < t.objects.size() && t.objects[id].cta != cta)
        return "the log's " + hex(bar) + " is in CTA " + std::to_string(cta) + ", " + object_name(t, id) + " is not";
      log_to_emu_.emplace(k, id);
      emu_to_log_.emplace(id, k);
      return {};
    }
    if (a != log_to_emu_.end() && a->second == id) return {};
    if (a != log_to_emu_.end())
      return "the log's " + hex(bar) + " is " + object_name(t, a->second) + " in this run (by its first use), not " +
             object_name(t, id);
    return object_name(t, id) + " is the log's " + hex(static_cast<std::uint32_t>(b->second)) +
           " in this run (by its first use), not " + hex(bar);
  }

  // "" when the log's event `e` and the emulator's `op` of warp `w` agree.
  std::string differs(const Trace& t, std::uint32_t w, const cuda::LoggedEvent& e, const EmuOp& op) {
    const bool arrive_like = e.op == EventOp::arrive || e.op == EventOp::arrive_expect_tx;
    if (!(e.op == op.op || (arrive_like && op.op == EventOp::arrive))) return "another operation";
    if (e.line != 0 || e.file != 0) {
      const std::string name = base_name(op.file);
      const bool line_ok = e.line == op.line || (e.line == 65535 && op.line >= 65535);
      if (!line_ok || cuda::event_log_file_id(name.c_str()) != e.file)
        return "another source line (" + name + ":" + std::to_string(op.line) + ")";
    }
    if (names_mbarrier(e.op))
      if (std::string why = bind(t, target_cta(w, e), e.bar, op.object); !why.empty()) return why;
    if (e.parity && op.parity && *e.parity != *op.parity) return "parity " + std::to_string(*op.parity);
    if (e.answer && op.answer && *e.answer != *op.answer) {
      if (e.op == EventOp::wait) return "the wait passed";
      return std::string("answered ") + (*op.answer ? "true" : "false");
    }
    if (e.op == EventOp::init && static_cast<std::int64_t>(e.arg) != op.value)
      return "count " + std::to_string(op.value);
    if (arrive_like) {
      if (e.cta.has_value() != op.remote) return op.remote ? "a remote arrive" : "a local arrive";
      if (e.lanes != 0 && std::popcount(e.lanes) != op.value) return std::to_string(op.value) + " arrivals";
    }
    if (e.op == EventOp::named_sync || e.op == EventOp::named_arrive) {
      if (static_cast<std::int64_t>(e.bar) != op.value) return "barrier id " + std::to_string(op.value);
      if (e.op == EventOp::named_arrive && static_cast<std::int64_t>(e.arg) != op.threads)
        return std::to_string(op.threads) + " threads";
    }
    if (e.op == EventOp::bulk_wait && static_cast<std::int64_t>(e.arg) != op.value)
      return "wait_group " + std::to_string(op.value);
    return {};
  }

  void diverge(const Trace& t, std::uint32_t w, std::uint32_t seq, std::string log_says, std::string emu_did) {
    mismatch_ = ExplainMismatch{.log_warp = warps_[w].number, .warp = t.warps[w].name, .seq = seq,
                                .events = warps_[w].events(), .log = std::move(log_says),
                                .emulator = std::move(emu_did)};
  }

  static const BlockedWarp* blocked(const RunResult& r, const std::string& name) {
    for (const BlockedWarp& b : r.blocked)
      if (b.warp == name) return &b;
    return nullptr;
  }

  // Where warp `w` was when the run ended, in words.
  std::string where(const RunResult& r, std::uint32_t w, const BlockedWarp* b) const {
    if (follow_[w].exited) return "ran to its end";
    if (b != nullptr)
      return "is blocked in " + b->op + " on " + b->object + (b->parity >= 0 ? " parity " + std::to_string(b->parity) : "") +
             " (" + b->state + "), at " + b->file + ":" + std::to_string(b->line) + ", where the run ended (" +
             to_string(r.status) + ")";
    if (r.status == Status::violation && !r.violations.empty())
      return "was stopped by the run's violation " + r.violations.front().rule + " (" + r.violations.front().message +
             ", at " + r.violations.front().file + ":" + std::to_string(r.violations.front().line) + ")";
    return std::string("had got no further when the run ended (") + to_string(r.status) + ")";
  }

  void check_end(const RunResult& r, const Trace& t, std::uint32_t w, const BlockedWarp* b) {
    const WarpLog& wl = warps_[w];
    const Follow& f = follow_[w];
    const std::size_t needed = wl.units.size() - (wl.watchdog ? 1 : 0);
    if (f.seen < wl.skip || f.next < needed) {
      const std::uint32_t seq = f.seen < wl.skip ? f.seen + 1 : wl.event(wl.units[f.next]).seq;
      const std::string log_says =
          f.seen < wl.skip ? "event " + std::to_string(seq) + " (before the kept window: known by count only)"
                           : log_event_text(log_, wl.event(wl.units[f.next]), wl.units[f.next].count);
      diverge(t, w, seq, log_says, where(r, w, b));
      return;
    }
    if (wl.watchdog) {
      const cuda::LoggedEvent& trapped = wl.event(wl.units.back());
      std::string why;
      if (b == nullptr || b->barrier < 0) {
        why = "it " + where(r, w, b);
      } else if (std::string bound = bind(t, target_cta(w, trapped), trapped.bar, b->barrier); !bound.empty()) {
        why = "it is blocked elsewhere: " + bound;
      } else if (trapped.parity && static_cast<std::int32_t>(*trapped.parity) != b->parity) {
        why = "it waits for parity " + std::to_string(b->parity);
      } else if (trapped.line != 0 && trapped.line != b->line) {
        why = "it waits at " + b->file + ":" + std::to_string(b->line);
      }
      if (!why.empty()) diverge(t, w, trapped.seq, log_event_text(log_, trapped), "cannot stay blocked there: " + why);
      return;
    }
    const bool clean = std::none_of(warps_.begin(), warps_.end(), [](const WarpLog& x) { return x.watchdog || x.check; });
    if (clean && !f.exited)
      diverge(t, w, 0, "the warp ran to its end after its " + std::to_string(wl.events()) + " events",
              where(r, w, b));
  }

  const cuda::EventLogFile& log_;
  std::vector<WarpLog> warps_;  // by the emulator's warp id
  std::uint32_t warps_per_cta_, cluster_size_;
  std::vector<Follow> follow_;
  std::map<std::uint64_t, std::int32_t> log_to_emu_;
  std::map<std::int32_t, std::uint64_t> emu_to_log_;
  std::optional<ExplainMismatch> mismatch_;
  std::vector<ExplainedEvent> explained_;
  std::uint64_t followed_ = 0;
};

// The strategy of a run under the matcher: the search's own (the
// exhaustive search, kept across runs, or a fresh random or PCT one), which
// stops the run at its next choice once the matcher has seen it leave the
// log. The exhaustive search is told such a run ended on a failure: the
// actors it left could still move, and their steps race with everything
// (as at a deadlock), so that the orders that might not have left the log
// are explored.
class Following final : public Strategy {
 public:
  Following(const Matcher& m, detail::ExhaustiveSearch* search, StrategyParams params)
      : matcher_(m), search_(search), params_(std::move(params)) {}

  void new_execution(std::uint32_t actors) override {
    if (search_ != nullptr) {
      search_->new_execution(actors);
      inner_ = search_;
    } else {
      own_ = make_strategy(params_, actors);
      inner_ = own_.get();
    }
  }
  std::optional<std::uint32_t> pick(const Choice& c) override {
    if (matcher_.diverged()) {
      cut_ = true;
      return std::nullopt;
    }
    return inner_->pick(c);
  }
  bool pruned() const override { return cut_ || inner_->pruned(); }
  std::string mismatch() const override { return inner_->mismatch(); }
  bool wants_footprints() const override { return inner_->wants_footprints(); }
  void stepped(std::uint32_t actor, const Footprint& fp) override { inner_->stepped(actor, fp); }
  void ended(bool failed) override { inner_->ended(failed || cut_); }
  bool cut() const { return cut_; }

 private:
  const Matcher& matcher_;
  detail::ExhaustiveSearch* search_;
  StrategyParams params_;
  std::unique_ptr<Strategy> own_;
  Strategy* inner_ = nullptr;
  bool cut_ = false;
};

// The log's warps, by the emulator's warp id, after the checks that need no
// run: the launch, and events no emulator run records.
std::vector<WarpLog> plan_warps(const cuda::EventLogFile& log, const LaunchConfig& launch, std::vector<std::string>& notes,
                                std::optional<ExplainMismatch>& impossible) {
  const std::uint32_t cluster = launch.cluster_size;
  const std::uint32_t ctas = launch.num_clusters * cluster;
  const std::uint64_t grid = std::uint64_t{log.grid.x} * log.grid.y * log.grid.z;
  const std::uint64_t threads = std::uint64_t{log.block.x} * log.block.y * log.block.z;
  const std::uint64_t log_cluster = std::uint64_t{log.cluster.x} * log.cluster.y * log.cluster.z;
  auto mismatch = [&](const std::string& what, std::uint64_t logged, std::uint64_t emulated) {
    throw std::invalid_argument("the log's launch and the kernel's differ: " + what + " " + std::to_string(logged) +
                                " in the log, " + std::to_string(emulated) + " in the emulator's launch");
  };
  if (grid != ctas) mismatch("CTAs", grid, ctas);
  if (threads != std::uint64_t{launch.warps_per_cta} * 32) mismatch("threads per CTA", threads, launch.warps_per_cta * 32);
  if (log_cluster != cluster) mismatch("CTAs per cluster", log_cluster, cluster);

  std::vector<WarpLog> warps(std::size_t{ctas} * launch.warps_per_cta);
  for (std::uint32_t i = 0; i < warps.size(); ++i) warps[i].number = i;
  const bool trapped = log.trap.has_value() || std::any_of(log.warps.begin(), log.warps.end(), [](const auto& w) {
                         return w.trap.has_value();
                       });
  bool skipped_ops = false, windows = false;
  for (const cuda::EventLogWarp& lw : log.warps) {
    if (lw.warp >= warps.size())
      throw std::invalid_argument("the log's warp " + std::to_string(lw.warp) + " is not in the kernel's launch (" +
                                  std::to_string(warps.size()) + " warps)");
    WarpLog& w = warps[lw.warp];
    w.log = &lw;
    w.skip = lw.total - static_cast<std::uint32_t>(lw.events.size());
    windows = windows || w.skip > 0;
    w.watchdog = lw.trap && lw.trap->reason == cuda::TrapReason::watchdog;
    w.check = lw.trap && lw.trap->reason == cuda::TrapReason::check;
    for (std::size_t i = 0; i < lw.events.size(); ++i) {
      const cuda::LoggedEvent& e = lw.events[i];
      if (uncompared(e.op)) {
        skipped_ops = true;
        continue;
      }
      // A wait is logged once it passed, or where the watchdog ends it: as
      // its warp's last event, its trap in the warp's header.
      if (e.op == EventOp::wait && e.answer == false && !(w.watchdog && i + 1 == lw.events.size()) && !impossible)
        impossible = ExplainMismatch{
            .log_warp = lw.warp, .warp = {}, .seq = e.seq, .events = lw.total, .log = log_event_text(log, e),
            .emulator = "cannot do that in any run: a wait returns once it passed, and a wait that never passed "
                        "is logged only by the watchdog, as its warp's last event, with a trap in the warp's header"};
      if (!w.units.empty() && is_poll(e.op) && e.answer == false) {
        const cuda::LoggedEvent& prev = lw.events[w.units.back().index];
        if (prev.op == e.op && prev.answer == false && prev.bar == e.bar && prev.parity == e.parity &&
            prev.line == e.line && prev.file == e.file && w.units.back().index + w.units.back().count == i) {
          ++w.units.back().count;
          continue;
        }
      }
      w.units.push_back({.index = i});
    }
    if (w.watchdog && (w.units.empty() || w.event(w.units.back()).op != EventOp::wait))
      throw std::invalid_argument("the log's warp " + std::to_string(lw.warp) +
                                  " trapped in the watchdog, but its last event is not the wait that trapped");
  }
  for (WarpLog& w : warps) w.open_end = trapped && !w.watchdog && !w.check;
  if (skipped_ops) notes.push_back("clc_try_cancel events are not compared (the emulator's trace has none)");
  if (windows)
    notes.push_back("a warp's events before its kept window are known by count only: the emulator's warp's first "
                    "as many events are not compared");
  notes.push_back("arrive_expect_tx and expect_tx bytes, lane masks beyond an arrive's count, and clocks are not compared");
  return warps;
}

}  // namespace

std::string ExplainMismatch::message() const {
  std::string s = "warp " + std::to_string(log_warp) + (warp.empty() ? "" : " (" + warp + ")");
  if (seq != 0) s += ", event " + std::to_string(seq) + " of " + std::to_string(events);
  return s + ": the log has " + log + "; the emulator's warp " + emulator;
}

cuda::EventLogFile read_event_log(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error("cannot read the event log " + path + ": " +
                             (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  std::string text;
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    FILE* gz = popen(("gzip -dc '" + path + "' 2>/dev/null").c_str(), "r");
    if (gz == nullptr) throw std::runtime_error("cannot read the event log " + path + ": gzip did not start");
    char buf[65536];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, gz)) > 0;) text.append(buf, n);
    if (pclose(gz) != 0) throw std::runtime_error("cannot read the event log " + path + ": gzip -dc failed");
  } else {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    if (!in) throw std::runtime_error("cannot read the event log " + path);
    text = s.str();
  }
  std::istringstream in(text);
  cuda::EventLogFile log = cuda::parse_event_log(in);
  take_delays(log.config, log.delays);
  return log;
}

void take_delays(std::string& config, std::string& delays) {
  std::istringstream words(config);
  std::string kept;
  delays.clear();
  for (std::string w; words >> w;) {
    if (w.rfind("delays=", 0) == 0) {
      delays = w.substr(7) == "off" ? "" : w.substr(7);
      continue;
    }
    kept += (kept.empty() ? "" : " ") + w;
  }
  config = kept;
}

ExplainResult explain(const KernelFactory& make, const cuda::EventLogFile& log, const ExplainOptions& options) {
  if (options.portfolio.empty()) throw std::invalid_argument("explain: the portfolio names no strategy");
  if (options.runs == 0 && options.seconds <= 0) throw std::invalid_argument("explain: no budget (runs or seconds)");
  const auto t0 = SteadyClock::now();
  ExplainResult res;
  const LaunchConfig launch = checked_launch(make().launch);
  std::optional<ExplainMismatch> impossible;
  Matcher matcher(log, plan_warps(log, launch, res.notes, impossible), launch.warps_per_cta, launch.cluster_size);
  if (!log.delays.empty())
    res.notes.push_back("the GPU ran under seeded delays (" + log.delays +
                        "): the emulator has none; the search follows the events they led to");
  for (const cuda::EventLogWarp& w : log.warps) res.log_events += w.total;
  res.seed = options.first_seed;
  if (impossible) {  // no run needed
    res.closest = std::move(impossible);
    res.searched_all = true;
    res.seconds = since(t0);
    return res;
  }

  std::optional<detail::ExhaustiveSearch> search;
  std::uint64_t pct_steps = 0, furthest = 0;
  double reported = 0;
  auto progress = [&] {
    if (options.on_progress)
      options.on_progress({.runs = res.runs, .cut = res.cut, .seconds = since(t0), .followed = furthest,
                           .events = res.log_events});
  };
  for (std::uint64_t i = 0;; ++i) {
    const bool budget_spent = (options.runs != 0 && res.runs >= options.runs) ||
                              (options.seconds > 0 && res.runs > 0 && since(t0) >= options.seconds);
    res.interrupted = options.interrupt != nullptr && options.interrupt->load() != 0 && res.runs > 0;
    if (budget_spent || res.interrupted) break;
    const StrategySpec& spec = options.portfolio[i % options.portfolio.size()];
    const bool exhaustive = spec.kind == StrategyKind::exhaustive;
    StrategyParams params;
    params.kind = spec.kind;
    params.seed = run_seed(options.first_seed, i);
    params.pct_depth = spec.pct_depth;
    if (pct_steps != 0) params.pct_steps = pct_steps;
    if (exhaustive && !search) search.emplace(std::nullopt, true);
    Following strategy(matcher, exhaustive ? &*search : nullptr, params);
    RunOptions o = options;
    o.strategy = {};
    o.strategy.kind = StrategyKind::custom;
    o.strategy.shared = &strategy;
    o.trace = true;
    o.trace_sink = nullptr;
    o.event_observer = &matcher;
    matcher.reset();
    RunResult r = run(make(), o);
    ++res.runs;
    pct_steps = std::max(pct_steps, r.steps);
    std::optional<ExplainMismatch> mismatch = matcher.mismatch();
    if (strategy.cut()) {
      ++res.cut;
    } else if (!r.pruned) {
      mismatch = matcher.finish(r);
      if (!mismatch) {
        res.matched = true;
        res.match_run = i;
        res.strategy = spec;
        furthest = res.log_events;
        res.events = matcher.take_explained();
        res.trapped = matcher.trapped_waits(r);
        res.run = std::move(r);
        break;
      }
    }
    furthest = std::max(furthest, matcher.followed());
    if (mismatch && (!res.closest || matcher.followed() > res.closest_followed)) {
      res.closest = std::move(mismatch);
      res.closest_followed = matcher.followed();
    }
    if (exhaustive && search->advance() != detail::ExhaustiveSearch::Advance::next) {
      res.searched_all = true;
      break;
    }
    if (since(t0) >= reported + 0.5) {
      reported = since(t0);
      progress();
    }
  }
  res.seconds = since(t0);
  progress();
  return res;
}

std::string ExplainResult::report() const {
  std::string out;
  const std::string tried = counted(runs, "run") + (cut != 0 ? " (" + std::to_string(cut) + " cut short where they left the log)" : "");
  if (matched) {
    out += "matched: run " + std::to_string(match_run + 1) + " (" + to_string(strategy) +
           (strategy.kind == StrategyKind::exhaustive ? "" : ", seed " + std::to_string(run_seed(seed, match_run))) +
           ") follows every warp of the log, after " + tried + "\n";
  } else if (searched_all && runs == 0) {
    out += "no match: no emulator run can do what the log says (found before any run)\n";
  } else if (searched_all) {
    out += "no match: the exhaustive search covered every class of schedules (" + tried +
           "): no emulator schedule does what the log says\n";
  } else {
    out += std::string("no match ") + (interrupted ? "before the search was interrupted" : "within the budget") + " (" +
           tried + "); not a proof: a longer search may find one\n";
  }
  for (const std::string& n : notes) out += "note:     " + n + "\n";
  for (const std::string& t : trapped) out += "trapped:  " + t + "\n";
  if (matched) return out + run.report();
  if (closest && runs == 0) out += "where:    " + closest->message() + "\n";
  if (closest && runs != 0)
    out += "closest:  a run followed " + std::to_string(closest_followed) + " of the log's " +
           std::to_string(log_events) + " events, then " + closest->message() + "\n";
  return out;
}

namespace {

void silicon_json(std::ostream& out, const ExplainResult& r, const cuda::EventLogFile& log) {
  const Trace& t = r.run.trace;
  auto emit = [&](const std::string& obj) { out << ",\n" << obj; };
  const std::uint32_t base = t.num_ctas;  // the log's processes come after the emulator's CTAs
  std::vector<bool> named(t.num_ctas, false);
  auto track = [&](const cuda::EventLogWarp& lw, std::int32_t warp) {
    const std::uint32_t cta = t.warps[warp].cta;
    if (!named[cta]) {
      named[cta] = true;
      emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(base + cta) +
           ",\"tid\":0,\"args\":{\"name\":" + json_quote("CTA " + std::to_string(cta) + ": GPU event log") + "}}");
      emit("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(base + cta) +
           ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(2 * cta + 1) + "}}");
      emit("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(cta) +
           ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(2 * cta) + "}}");
    }
    emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(base + cta) + ",\"tid\":" +
         std::to_string(warp) + ",\"args\":{\"name\":" +
         json_quote("GPU warp " + std::to_string(lw.warp) + " (" + t.warps[warp].name + ")") + "}}");
  };
  std::vector<bool> tracked(t.warps.size(), false);
  const cuda::EventLogWarp* by_number = nullptr;
  auto find = [&](std::uint32_t number) {
    if (by_number == nullptr || by_number->warp != number)
      for (const cuda::EventLogWarp& lw : log.warps)
        if (lw.warp == number) by_number = &lw;
    return by_number;
  };
  for (const ExplainedEvent& x : r.events) {
    const cuda::EventLogWarp* lw = find(x.log_warp);
    if (lw == nullptr || x.warp < 0) continue;
    if (!tracked[x.warp]) {
      tracked[x.warp] = true;
      track(*lw, x.warp);
    }
    const cuda::LoggedEvent& e = lw->events[x.index];
    const cuda::LoggedEvent& first = lw->events.front();
    const std::uint64_t begin = x.begin;
    std::string args = "\"seq\":" + std::to_string(e.seq) + ",\"gpu_time_ns\":" + std::to_string(e.time) +
                       ",\"gpu_ns_since_first_kept\":" + std::to_string(e.time - first.time) +
                       ",\"log\":" + json_quote(log_event_text(log, e, x.count)) +
                       ",\"emulator\":" + json_quote(x.emulator);
    emit("{\"ph\":\"X\",\"name\":" + json_quote(std::string(cuda::event_op_name(e.op)) +
                                               (names_mbarrier(e.op) ? " " + hex(e.bar) : "")) +
         ",\"cat\":\"gpu-log\",\"pid\":" + std::to_string(base + t.warps[x.warp].cta) + ",\"tid\":" +
         std::to_string(x.warp) + ",\"ts\":" + std::to_string(begin) + ",\"dur\":" +
         std::to_string(x.step - begin + 1) + ",\"args\":{" + args + "}}");
  }
  // The waits the watchdog trapped: no emulator event matched them; they
  // begin where the emulator's warp blocked, and never end.
  for (const TraceEnding::OpenWait& w : t.ending.open) {
    if (w.warp < 0) continue;
    const cuda::EventLogWarp* lw = find(static_cast<std::uint32_t>(w.warp));
    if (lw == nullptr || !lw->trap || lw->events.empty()) continue;
    if (!tracked[w.warp]) {
      tracked[w.warp] = true;
      track(*lw, w.warp);
    }
    const cuda::LoggedEvent& e = lw->events.back();
    emit("{\"ph\":\"B\",\"name\":" + json_quote("wait " + hex(e.bar) + " (the watchdog's trap)") +
         ",\"cat\":\"gpu-log\",\"pid\":" + std::to_string(base + t.warps[w.warp].cta) + ",\"tid\":" +
         std::to_string(w.warp) + ",\"ts\":" + std::to_string(w.since) + ",\"args\":{\"seq\":" + std::to_string(e.seq) +
         ",\"gpu_time_ns\":" + std::to_string(e.time) + ",\"log\":" + json_quote(log_event_text(log, e)) + "}}");
  }
}

}  // namespace

void write_explained_trace(const std::string& file, const ExplainResult& result, const cuda::EventLogFile& log) {
  if (!result.matched) throw std::invalid_argument("write_explained_trace: no run matched the log");
  std::ostringstream s;
  const bool text = file.size() > 4 && file.compare(file.size() - 4, 4, ".txt") == 0;
  if (text) {
    result.run.trace.write_text(s);
    s << "\nthe GPU's event log, each kept event at the step of the emulator's event it matched:\n";
    for (const ExplainedEvent& x : result.events)
      for (const cuda::EventLogWarp& lw : log.warps)
        if (lw.warp == x.log_warp) {
          char step[24];
          std::snprintf(step, sizeof step, "%8llu  ", static_cast<unsigned long long>(x.step));
          s << step << "GPU warp " << lw.warp << "  event " << lw.events[x.index].seq << ": "
            << log_event_text(log, lw.events[x.index], x.count) << "\n";
        }
  } else {
    result.run.trace.write_chrome_json(s);
    std::string json = s.str();
    const std::size_t close = json.rfind("\n]}");
    if (close == std::string::npos) throw std::runtime_error("write_explained_trace: unexpected trace JSON");
    std::ostringstream extra;
    silicon_json(extra, result, log);
    json.insert(close, extra.str());
    s.str(std::move(json));
  }
  const std::string tmp = file + ".part";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << s.str();
    if (!out.flush()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw std::runtime_error("cannot write the trace " + file);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("cannot write the trace " + file + ": " + ec.message());
  }
}

}  // namespace wspipe::emu
