// What the GoogleTest and the rapidcheck helpers share (wspipe::testing's
// own, not for tests to call): the replay of WSPIPE_REPLAY with its
// WSPIPE_TRACE, and the line a failure prints to replay it.
#pragma once

#include <optional>
#include <string>

#include "backends/emu/explore.hpp"

namespace wspipe::testing::detail {

// What WSPIPE_REPLAY asks for, if anything: the replayed run, or why there
// is none.
struct Replayed {
  std::string token;
  std::optional<emu::RunResult> run;
  std::string error;        // when run is empty
  std::string trace_note;   // where WSPIPE_TRACE went
  std::string trace_error;  // it could not be written: a failure whatever the run did
};

// nullopt when WSPIPE_REPLAY is not set; else its schedule replayed on a
// kernel of `make` with `opts`, and its trace written to WSPIPE_TRACE.
std::optional<Replayed> replay_from_env(const emu::KernelFactory& make, const emu::RunOptions& opts);

// "replayed WSPIPE_REPLAY=4:9f4bb88d: (outcome: race.smem)"; rep.run is set.
std::string replayed(const Replayed& rep);

// "replay: WSPIPE_REPLAY=... WSPIPE_TRACE=wspipe-trace.json PROGRAM
// --gtest_filter=TEST", and how to open the trace: the lines that replay
// `failure` in this test program. `env` goes first (another variable the
// replay needs, such as rapidcheck's RC_PARAMS).
std::string replay_line(const emu::Failure& failure, const emu::RunOptions& opts, const std::string& env = "");

}  // namespace wspipe::testing::detail
