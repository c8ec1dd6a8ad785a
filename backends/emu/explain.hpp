// From a GPU's event log to an emulator schedule: explain() looks, among
// the emulator's schedules of the same kernel and configuration, for a run
// whose warps do what the log's warps did, in the order they did it, with
// the answers their waits observed (docs/explain.md). The log is the CUDA
// backend's (backends/cuda/event_log_file.hpp, docs/event-log.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/event_log_file.hpp"
#include "explore.hpp"

namespace wspipe::emu {

// Reads a saved event log: the text of docs/event-log.md, or that text
// gzip-compressed where `path` ends in ".gz" (read through `gzip -dc`).
// Throws std::runtime_error naming the file when it cannot be read, and
// cuda::EventLogParseError (line and what was expected) when it is not a
// log of a version this build reads. A `delays=SPEC` token of the config
// line (logs that `wspipe_silicon explore` saves) moves to the result's
// `delays`, the rest staying in `config`: the delays pushed the GPU's
// schedule, they are no option of the kernel, and the search matches the
// log's events whatever pushed them (explain notes them).
cuda::EventLogFile read_event_log(const std::string& path);
// That split alone: `config` without its `delays=` token, which goes to
// `delays` ("" where there is none or it says "off").
void take_delays(std::string& config, std::string& delays);

struct ExplainProgress {
  std::uint64_t runs = 0;      // runs finished
  std::uint64_t cut = 0;       // of them, cut short where they left the log
  double seconds = 0;
  // The most of the log's events one run followed so far, of `events`.
  std::uint64_t followed = 0, events = 0;
};

// explain()'s options. It is a RunOptions: every run's options (spurious
// try_wait, loads out of issue order, the race checker, the step budget)
// are its own fields; `strategy`, `trace` and `event_observer` are
// explain()'s to set, run by run.
struct ExplainOptions : RunOptions {
  // Budget: `runs` runs (0: no limit) or `seconds` of wall time (0: no
  // limit), whichever comes first; one must be set. A search that covers
  // every class of schedules ends before it.
  std::uint64_t runs = 0;
  double seconds = 60;
  // Run i uses portfolio[i % size]; the exhaustive search (every class of
  // equivalent schedules, each run cut short where it leaves the log) keeps
  // its tree across its turns, and once it has covered everything the
  // search ends: no schedule matches.
  std::vector<StrategySpec> portfolio = {{StrategyKind::exhaustive}, {StrategyKind::random}, {StrategyKind::pct, 3}};
  std::uint64_t first_seed = 1;
  // About twice a second, and once at the end. Empty: quiet.
  std::function<void(const ExplainProgress&)> on_progress;
  // As ExploreOptions::interrupt: once nonzero, the search ends after the
  // run under way.
  const std::atomic<int>* interrupt = nullptr;
};

// Where a run left the log: one warp's event that the emulator's warp did
// otherwise, or could not reach.
struct ExplainMismatch {
  std::uint32_t log_warp = 0;  // the log's warp number (across the grid)
  std::string warp;            // the emulator's warp: "cta0/w1 consumer"
  std::uint32_t seq = 0;       // the log's event (its seq), 0 where none is concerned
  std::uint32_t events = 0;    // the warp's events in the log
  std::string log;             // what the log says there
  std::string emulator;        // what the emulator's warp did, or where it stopped
  // "warp 1 (cta0/w1 consumer), event 5 of 7: the log has ...; the emulator's warp ..."
  std::string message() const;
};

// One log event and the emulator's event it matched, for the trace.
struct ExplainedEvent {
  std::uint32_t log_warp = 0;
  std::size_t index = 0;    // into the log warp's kept events
  std::uint32_t count = 1;  // failed try_waits (test_waits) in a row taken as one
  std::int32_t warp = -1;   // the emulator's warp (actor id)
  std::uint64_t begin = 0, step = 0;  // the emulator event's steps (begin: where its wait began)
  std::string emulator;     // the emulator's event, in words
};

struct ExplainResult {
  bool matched = false;
  // The run whose warps follow the log (matched), traced; its schedule
  // replays it (replay()). Otherwise empty.
  RunResult run;
  std::uint64_t match_run = 0;  // its number (0-based)
  StrategySpec strategy;        // and its strategy; seed run_seed(seed, match_run)
  std::uint64_t seed = 0;
  std::vector<ExplainedEvent> events;  // matched: the log's kept events and where they ran
  // Matched: each wait the watchdog trapped and the emulator's wait that
  // stays blocked in its place, one line each.
  std::vector<std::string> trapped;
  std::uint64_t runs = 0, cut = 0;
  double seconds = 0;
  std::uint64_t log_events = 0;  // the log's events (kept or counted)
  // No match, proved: every class of schedules was run (each as far as it
  // followed the log), or (runs == 0) the log has an event no run records.
  bool searched_all = false;
  bool interrupted = false;
  // No match: where the run that followed the log furthest left it, and
  // how far it got (its events before that point).
  std::optional<ExplainMismatch> closest;
  std::uint64_t closest_followed = 0;
  // What was not compared (ops the emulator has no event for, events
  // before a kept window), one line each.
  std::vector<std::string> notes;

  // For a person: the verdict, the notes, and on a match the run's report
  // (RunResult::report); without one, the closest run's mismatch.
  std::string report() const;
};

// Searches the schedules of `make`'s kernel for a run that matches `log`
// (docs/explain.md, "How matching works"). Throws std::invalid_argument
// when the log and the kernel's launch differ (grid, warps, cluster) or the
// options make no sense, before any run; exceptions from `make` or the
// kernel propagate.
ExplainResult explain(const KernelFactory& make, const cuda::EventLogFile& log, const ExplainOptions& options);

// Writes a matched run's trace, as write_trace (explore.hpp) does, with the
// log's events beside the emulator's: in the Chrome/Perfetto JSON, a
// process per CTA ("CTA c: GPU event log") with a track per logged warp,
// each log event a slice at the steps of the emulator's event it matched,
// its GPU time, seq and source line in its arguments, and a trapped wait as
// a slice that never ends; in the text (FILE ending in .txt), the log's
// events listed after the emulator's. Throws std::runtime_error naming the
// file when it cannot be written, std::invalid_argument without a match.
void write_explained_trace(const std::string& file, const ExplainResult& result, const cuda::EventLogFile& log);

}  // namespace wspipe::emu
