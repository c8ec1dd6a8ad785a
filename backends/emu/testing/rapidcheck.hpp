// rapidcheck integration: a property draws a kernel's configuration from
// rapidcheck, and rc_explore_clean draws the scheduler's choice too, so a
// counterexample is a configuration, a strategy and a seed that rapidcheck
// shrinks, with a schedule that wspipe shrinks:
//
//   #include "backends/emu/testing/gtest.hpp"   // GoogleTest first: rapidcheck's
//   #include <rapidcheck/gtest.h>               // RC_GTEST_PROP needs it
//
//   RC_GTEST_PROP(MyPipeline, CleanForAnyConfiguration, ()) {
//     const int stages = *rc::gen::inRange(1, 9).as("stages");
//     const std::uint32_t items = *rc::gen::inRange(0u, 65u).as("items");
//     wspipe::testing::rc_explore_clean([=] { return make_my_kernel(stages, items); });
//   }
//
// Runs are deterministic (strategy, seed and configuration fix the
// schedule), so rapidcheck's RC_PARAMS="reproduce=..." re-runs a
// counterexample exactly; the counterexample lists the configuration (under
// the labels given with .as()), then "wspipe strategy" and "wspipe seed".
// A failure's message is wspipe's report, the shrunk schedule and a line
// that replays it with a trace: RC_PARAMS="reproduce=..." (as rapidcheck
// prints it when the program ends) WSPIPE_REPLAY=S WSPIPE_TRACE=FILE, read
// as by the GoogleTest helpers (gtest.hpp). Call it on the property's
// thread only: rapidcheck's generators are not thread-safe, so the
// exploration runs with jobs = 1 (the emulator's fibers all run on the
// calling thread).
#pragma once

#include <rapidcheck.h>

#include <cstdint>

#include "backends/emu/explore.hpp"

namespace wspipe::testing {

// Inside a rapidcheck property: draws a strategy from `opts.portfolio` and
// a seed from rapidcheck, explores `opts.runs` runs (4 when 0) from that
// seed with no time limit, one job and no sharding, and fails the case with
// the report, the shrunk schedule and its replay line when a run fails. An
// exhaustive portfolio is run as given (one job, no seed; it needs
// opts.runs or opts.seconds). Under WSPIPE_REPLAY it replays that schedule
// instead (writing WSPIPE_TRACE) and fails unless the run ends ok. Returns
// the exploration's result when nothing was found (an empty one after a
// replay).
emu::ExploreResult rc_explore_clean(const emu::KernelFactory& make, emu::ExploreOptions opts = {});

}  // namespace wspipe::testing
