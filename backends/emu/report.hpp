// The reports of a run and of an exploration, in the words the wspipe
// program and the testing helpers both print: RunResult::report() and
// ExploreResult::report() are made of these, and so are the program's.
#pragma once

#include <string>

#include "explore.hpp"

namespace wspipe::emu {

// "explored N runs (S steps) in T s: nothing found", with the exhaustive
// search's coverage when it completed; one line.
std::string explored_line(const ExploreResult& result);

// "(random, seed 7)", "(exhaustive)": how a failure's run was scheduled.
std::string strategy_and_seed(const Failure& failure);

// "shrunk:   11 -> 1 deviations, 10 -> 1 preemptions"; one line.
std::string shrunk_line(const ShrinkStats& stats);

}  // namespace wspipe::emu
