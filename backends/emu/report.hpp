// The reports of a run and of an exploration, in the words the wspipe
// program and the testing helpers both print: RunResult::report() and
// ExploreResult::report() are made of these, and so are the program's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "explore.hpp"
#include "settings.hpp"

namespace wspipe::emu {

// "1 run", "2 runs": `n` and `noun`, which takes an "s" unless n is 1.
std::string counted(std::uint64_t n, std::string_view noun);

// "explored N runs (S steps) in T s: nothing found", with the exhaustive
// search's coverage when it completed; one line.
std::string explored_line(const ExploreResult& result);

// "(random, seed 7)", "(exhaustive)": how a failure's run was scheduled.
std::string strategy_and_seed(const Failure& failure);

// "run 3" (counted from 1), or "the run that measures PCT's run length"
// (Failure::measuring_run).
std::string run_name(const Failure& failure);

// "shrunk:   11 -> 1 deviations, 10 -> 1 preemptions, minimal"; one line
// (ShrinkStats::minimal: "minimal" or "not proved minimal", with ": at least
// N needed" where the search proved some bounds, unsaid where no preemption
// is left; then why shrinking stopped, if it did not finish).
std::string shrunk_line(const ShrinkStats& stats);

// A JSON object's fields in order, each value as JSON text: what a front
// adds its own fields to (the wspipe program's --json: the scenario, its
// options, the expected outcome, the replay command) before to_json().
using JsonFields = std::vector<std::pair<std::string, std::string>>;
std::string to_json(const JsonFields& fields);  // {"key":value,...}
// Inserts `field` after the field named `key` (at the end if there is none).
void insert_after(JsonFields& fields, std::string_view key, std::pair<std::string, std::string> field);

// A run: status, outcome, steps, violations (rule, warp, object, step,
// location, message, and a race's other side), blocked (warp, op, object,
// state, location), schedule.
JsonFields json_fields(const RunResult& run);
// An exploration: runs, complete, interrupted, pruned, seconds, run (the
// failing run's number, from 1; 0: PCT's measuring run), then the failing run's fields (nothing failed: status and
// outcome "ok", the steps explored, no violations or blocked warps, schedule
// null), then shrink (choices and preemptions before and after, finished;
// null when nothing failed; finished is false when its time ran out or it
// was interrupted, interrupted true for the latter).
JsonFields json_fields(const ExploreResult& result);
std::string to_json(const RunResult& run);
std::string to_json(const ExploreResult& result);

// The command line that replays `schedule` of a run with options `run`:
// the schedule, and the settings that decide which schedules exist
// (max-steps, spurious-try-wait, lane-divergence: a schedule replays only
// under those it was recorded with) where they differ from their defaults,
// spelled for `front` around `program` and its `args`:
//   flags:        PROGRAM ARGS... --max-steps N ... EXTRA... --schedule S [--trace FILE]
//   environment:  WSPIPE_REPLAY=S [WSPIPE_TRACE=FILE] WSPIPE_MAX_STEPS=N ... PROGRAM ARGS... EXTRA...
// Every word is quoted for a shell where it needs it.
// `schedule_argument` instead of a schedule: what follows --schedule (or
// WSPIPE_REPLAY=), the encoding or @FILE holding it (a long one, whose
// encoding the caller already has).
std::string replay_command(SettingsFront front, const RunOptions& run, std::string_view schedule_argument,
                           const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::string>& extra = {},
                           const std::optional<std::string>& trace_file = std::nullopt);
std::string replay_command(SettingsFront front, const RunOptions& run, const Schedule& schedule,
                           const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::string>& extra = {},
                           const std::optional<std::string>& trace_file = std::nullopt);

}  // namespace wspipe::emu
