// The exploration API: run a kernel under many schedules (random, PCT,
// bounded exhaustive), on several threads or in shards, and shrink the
// first failure to a short schedule that replays it. The CLI, the testing
// helpers (backends/emu/testing/) and users' own test suites all go
// through explore(); there is one exploration loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "emulator.hpp"

namespace wspipe::emu {

// One instance of a kernel under test: how to launch it, the per-warp body,
// and an optional check of its result after a run that ended ok.
struct Kernel {
  LaunchConfig launch;
  std::function<void()> body;
  // "" when the kernel's result is right, else what is wrong; reported as
  // the violation "result.mismatch".
  std::function<std::string()> verify;
};

// Makes a fresh instance for one run. explore() calls it once per run, on
// the thread that runs it (several at once with jobs > 1): share immutable
// inputs between instances, give each its own outputs.
using KernelFactory = std::function<Kernel()>;

// One run of one instance: emu::run, then, if it ended ok, `verify`. Paths
// are relative to default_source_root() where `options` names no root, and
// the trace (if any) notes how the run ended (note_ending).
RunResult run(const Kernel& kernel, const RunOptions& options);

// The word a run's outcome is classified by: "ok", "deadlock", "livelock",
// or the rule of the first violation. Shrinking keeps it unchanged.
std::string outcome(const RunResult& r);

// One strategy of a portfolio. Run number i of an exploration uses
// portfolio[i % size] with seed run_seed(first_seed, i).
struct StrategySpec {
  StrategyKind kind = StrategyKind::random;
  std::uint32_t pct_depth = 3;  // PCT only
  friend bool operator==(const StrategySpec&, const StrategySpec&) = default;
};
// "random", "rr", "pct" (depth 3), "pct:D", "stall", "exhaustive"; a portfolio is a
// comma-separated list of them. nullopt, with the reason in *error, on bad
// text.
std::optional<StrategySpec> parse_strategy_spec(std::string_view text, std::string* error);
std::optional<std::vector<StrategySpec>> parse_portfolio(std::string_view text, std::string* error);
std::string to_string(const StrategySpec& s);
std::string to_string(const std::vector<StrategySpec>& portfolio);

// The seed that run number `run` of an exploration with seed `seed` gives
// its strategy: `seed` xored with a mix of `run` (splitmix64's output
// function), so that explorations with nearby seeds (1, 2, 3, ... in CI
// jobs) run unrelated schedules, where seed + run repeated each other's
// runs shifted by one. Run 0 keeps `seed` itself: `wspipe run --seed N` is
// run 0 of `wspipe explore --seed N`.
std::uint64_t run_seed(std::uint64_t seed, std::uint64_t run);

struct ExploreProgress {
  std::uint64_t runs = 0;   // runs finished so far
  std::uint64_t steps = 0;  // their steps
  double seconds = 0;       // since the exploration started
  bool failed = false;      // a failure has been found (the rest finishes or is cut short)
  bool shrinking = false;   // the failure is being shrunk
};

// An exploration's options. It is a RunOptions: every run's options (the
// step budget, spurious try_wait, loads out of issue order, the race
// checker, lane-divergence mode, the MMA memo per job, the source root) are
// its own fields, set as `o.max_steps = ...`, with nothing copied; the
// base's `strategy` and `trace` are explore()'s to set, run by run.
struct ExploreOptions : RunOptions {
  // Budget: stop after `runs` run numbers (0: no limit) or `seconds` of wall
  // time (0: no limit), whichever comes first; at least one must be set.
  std::uint64_t runs = 0;
  double seconds = 10;
  std::vector<StrategySpec> portfolio = {{StrategyKind::random}, {StrategyKind::pct, 3}, {StrategyKind::stall}};
  std::uint64_t first_seed = 1;
  // Threads, each with its own emulator world; 0: the machine's cores.
  // The reported failure does not depend on it.
  unsigned jobs = 0;
  // This process runs the run numbers i with i % shard_count == shard_index;
  // the exhaustive search, the parts j of its sharded form with
  // j % shard_count == shard_index (docs/exploration.md, "The exhaustive
  // search in shards").
  std::uint32_t shard_index = 0;
  std::uint32_t shard_count = 1;
  // Exhaustive only: explore the sharded form of the search even with one
  // shard, so that `--shard 0/1` explores the same parts, with the same
  // totals, as N shards together. A shard_count above 1 implies it; the
  // --shard and WSPIPE_SHARD settings set it.
  bool sharded = false;
  // Exhaustive only: the bound on preemptions per schedule (nullopt, the
  // default: none; every class of equivalent schedules runs; with a bound,
  // every schedule within it), and the partial-order reduction of the
  // unbounded search (source sets); without it every schedule runs, which
  // only comparisons need. A bounded search has no reduction: none is
  // sound under a bound.
  std::optional<std::uint32_t> preemptions;
  bool reduce = true;
  // Shrink a failure (bounded by shrink_seconds of wall time).
  bool shrink = true;
  double shrink_seconds = 20;
  // When set, the failing run (shrunk) is written there as trace.json
  // (Chrome/Perfetto) and trace.txt; the directory is created if needed.
  std::string trace_dir;
  // Called about twice a second from the thread that called explore(), and
  // once at the end. Empty: quiet.
  std::function<void(const ExploreProgress&)> on_progress;
  // Called after every run with its number and result, from the thread
  // that ran it (several at once with jobs > 1). Empty: nothing.
  std::function<void(std::uint64_t run, const RunResult&)> on_run;
  // When set, polled between runs and while shrinking: once it holds a
  // value other than 0 (a signal handler's flag: std::atomic<int> is
  // lock-free, so a handler may store to it), the exploration ends as if
  // its budget were spent: the runs under way finish, a failure found is
  // shrunk no further, and the result says `interrupted`. A run itself is
  // not cut short.
  const std::atomic<int>* interrupt = nullptr;

  // The RunOptions of one run (strategy aside): this one's, with the
  // default strategy and the trace off.
  RunOptions run_options() const;
};

struct ShrinkStats {
  std::uint64_t choices_before = 0, choices_after = 0;          // deviations from the default policy
  std::uint64_t preemptions_before = 0, preemptions_after = 0;  // switches away from an actor that could go on
  std::uint64_t replays = 0;                                    // runs the shrinker made
  bool finished = true;      // false: its time ran out, or it was interrupted, first
  bool interrupted = false;  // ExploreOptions::interrupt stopped it
  // No schedule with fewer preemptions has the outcome: the result has none,
  // or the bounded exhaustive search covered every bound below its count
  // without meeting the outcome (up to the search's reduction). False where
  // the time ran out first; not shrunk (ExploreOptions::shrink off), true
  // only for a run with no preemption.
  bool minimal = false;
  // What the search proved where it could not prove the result minimal: no
  // schedule with fewer preemptions than this has the outcome (every bound
  // below it was covered). 0: nothing proved; preemptions_after when minimal.
  std::uint64_t preemptions_needed = 0;
};

struct Failure {
  std::uint64_t run = 0;  // the run number (0-based): the lowest that failed
  StrategySpec strategy;
  // The exploration's seed (first_seed): the run's strategy had
  // run_seed(seed, run).
  std::uint64_t seed = 0;
  // Found by the round-robin run that measures a run's length for PCT,
  // before run 0 (`run` is 0 and `strategy` rr then).
  bool measuring_run = false;
  std::string outcome;       // as outcome(); the shrunk run has the same
  Schedule original;         // the schedule as found
  RunResult result;          // the shrunk run, replayed with the trace on
  ShrinkStats shrink;        // choices/preemptions before == after when not shrunk
  std::vector<std::string> trace_files;  // written by ExploreOptions::trace_dir

  // The shrunk schedule's text: the replay token.
  std::string replay_token() const { return result.schedule.encode(); }
};

// What an exploration's result claims, and so whether it is a pass:
//  - found: a failure (shrunk); never a pass;
//  - verified: the exhaustive search completed: no schedule of this
//    configuration fails (every class of equivalent schedules; with a
//    bound, every schedule within it);
//  - explored: sampled runs found nothing; no claim about the schedules
//    not run;
//  - incomplete: the exhaustive search's budget (runs, seconds, a signal)
//    ran out before it covered its bound; never a pass.
// An exploration that runs no schedule at all throws (explore()).
enum class Verdict { found, verified, explored, incomplete };
std::string_view to_string(Verdict v);

struct ExploreResult {
  std::uint64_t runs = 0;    // runs done by this process (pruned exhaustive branches not counted)
  std::uint64_t steps = 0;
  std::uint64_t pruned = 0;  // exhaustive: runs cut short as equivalent to one already explored
  double seconds = 0;
  // Exhaustive: every class of equivalent schedules (with a bound, every
  // schedule within it) was covered. Other strategies: always false.
  bool complete = false;
  bool exhaustive = false;        // the search was the exhaustive strategy
  bool bounded = false;           // with a preemption bound (else: every class of schedules)
  std::uint32_t preemptions = 0;  // its preemption bound, when bounded
  // ExploreOptions::interrupt ended it before its budget was spent.
  bool interrupted = false;
  // Exhaustive and sharded (ExploreOptions::sharded, or more than one
  // shard): shard shard_index of shard_count explored `parts` of the
  // `parts_total` parts of the sharded search, and `complete` covers those
  // parts (every shard's together: the whole search).
  bool sharded = false;
  std::uint32_t shard_index = 0, shard_count = 1;
  std::uint64_t parts = 0, parts_total = 0;
  std::optional<Failure> failure;
  // Runs in which a TMA load was queued further back than a load may
  // complete from ahead of the older ones (RunOptions::reorder_window):
  // their other completion orders were not explored.
  std::uint64_t runs_past_window = 0;
  // What the verdict assumed beyond "every schedule of this configuration"
  // (assumptions(), below), one line each; empty: nothing beyond it.
  std::vector<std::string> assumptions;

  bool ok() const { return !failure.has_value(); }
  Verdict verdict() const {
    if (failure) return Verdict::found;
    if (!exhaustive) return Verdict::explored;
    return complete ? Verdict::verified : Verdict::incomplete;
  }
  // Whether the verdict is a pass: verified or explored.
  bool passed() const { return verdict() == Verdict::verified || verdict() == Verdict::explored; }
  // For a person: what was explored, and the failure's report, schedule and
  // shrink figures.
  std::string report() const;
};

// What an exploration with these options assumes beyond "every schedule
// (or every class of equivalent schedules) of this configuration", one line
// each for a person, and what a verdict prints beside it: the modelling
// bounds still in force (a try_wait's time-outs in a row, a TMA load's
// completion orders and pieces, lanes run as one), a preemption bound and
// what the reduction does under it, the options that narrow the schedules
// or the checks (--no-spurious-try-wait, --no-async-reorder, the race
// checker off), and kernel code linked without the access instrumentation
// (uninstrumented_translation_units). Empty: no assumption beyond the
// configuration.
std::vector<std::string> assumptions(const ExploreOptions& options);
// The same for an exploration that made `runs_past_window` runs with a
// TMA load queued past the reorder window (ExploreResult::runs_past_window).
std::vector<std::string> assumptions(const ExploreOptions& options, std::uint64_t runs_past_window);
// The translation units of this program that include emu_backend.hpp and
// were compiled without the access instrumentation (WSPIPE_INSTRUMENT_ACCESSES
// OFF for their target, or a build without it): their plain shared-memory
// accesses are invisible to the race checker and the reduction.
std::vector<std::string> uninstrumented_translation_units();

// Explores `make`'s kernel. At least one schedule runs whatever the time
// budget (the clock starts once the first has run), unless interrupted.
// Throws std::invalid_argument, naming the value, on options that make no
// sense (jobs or shards out of range, preemptions without the exhaustive
// strategy, no budget at all, a shard with no run number within `runs`, a
// trace_dir that cannot be written, ...), before any run; and
// std::runtime_error when the kernel is not deterministic (a failing run
// does not replay) or a trace cannot be written. Exceptions from `make` or
// the kernel propagate.
ExploreResult explore(const KernelFactory& make, const ExploreOptions& options);

// The same with one instance for every run. Runs share it, so jobs = 0
// means 1 here: set jobs above 1 only if its body and verify may run on
// several threads at once.
ExploreResult explore(const Kernel& kernel, const ExploreOptions& options);

// Re-runs `schedule` strictly (throws ScheduleMismatch when it does not fit
// this kernel and options), with the trace on. A schedule of version 2 or 3
// (recorded before try_wait time-outs and loads out of order were on by
// default) is replayed with loads in issue order, and without time-outs if
// it fits so (RunResult::spurious_try_wait and async_reorder say).
RunResult replay(const Kernel& kernel, const Schedule& schedule, RunOptions options);

// Shrinks `failing` (a run of `make`'s kernel with options `base`) to a
// schedule with the fewest preemptions, then the fewest deviations, whose
// run has the same outcome(), within `seconds` of wall time: delta
// debugging, then the search for the minimum (docs/exploration.md,
// "Shrinking"), which ends early only once the result is proved minimal.
// Returns the smallest run found (no trace); `stats` gets the figures.
// `interrupt`: as ExploreOptions::interrupt.
RunResult shrink(const KernelFactory& make, const RunOptions& base, const RunResult& failing, double seconds,
                 ShrinkStats* stats, const std::atomic<int>* interrupt = nullptr);

// A trace file written as its run goes (RunOptions::trace_sink), as
// Chrome/Perfetto JSON, or as text when `file` ends in ".txt": into a
// temporary file beside `file`, renamed over it by finish(), so that the
// file is whole or not there; removed if the run never finishes. A special
// file (/dev/null, a pipe) is written in place. It never throws: error()
// says what went wrong (empty: none), naming the file and the reason.
class TraceFileSink final : public TraceSink {
 public:
  explicit TraceFileSink(std::string file);
  TraceFileSink(const TraceFileSink&) = delete;
  TraceFileSink& operator=(const TraceFileSink&) = delete;
  ~TraceFileSink() override;
  void take(const Trace& t, std::span<const Event> events) override;
  void finish(const Trace& t) override;
  bool written() const { return finished_ && error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  void fail(const std::string& what);
  std::string file_, tmp_, error_;
  std::ofstream out_;
  TraceWriter writer_;
  bool finished_ = false;
};

// Writes a trace as Chrome/Perfetto JSON, or as text when `file` ends in
// ".txt": whole or not at all (written to a temporary file in the same
// directory, then renamed over `file`). Throws std::runtime_error, naming
// the file and the reason, when it cannot be written.
void write_trace(const std::string& file, const Trace& trace);

// Checks, before anything runs, that write_trace(file, ...) can write
// there: a name other than "" and "-", not a directory, in a directory
// that exists and takes a new file. Throws std::invalid_argument naming
// the file and what is wrong.
void check_trace_file(const std::string& file);

}  // namespace wspipe::emu
