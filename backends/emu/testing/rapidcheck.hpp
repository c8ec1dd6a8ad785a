// rapidcheck integration: a property draws a kernel's configuration from
// rapidcheck, and rc_explore_clean draws the scheduler's choice too, so a
// counterexample is a configuration, a strategy and a seed that rapidcheck
// shrinks, with a schedule that wspipe shrinks:
//
//   RC_GTEST_PROP(MyPipeline, CleanForAnyConfiguration, ()) {
//     const int stages = *rc::gen::inRange(1, 9);
//     const std::uint32_t items = *rc::gen::inRange(0u, 65u);
//     wspipe::testing::rc_explore_clean([=] { return make_my_kernel(stages, items); });
//   }
//
// Runs are deterministic (strategy, seed and configuration fix the
// schedule), so rapidcheck's RC_PARAMS="reproduce=..." re-runs a
// counterexample exactly. Call it on the property's thread only: rapidcheck's
// generators are not thread-safe, so the exploration runs with jobs = 1 (the
// emulator's fibers all run on the calling thread).
#pragma once

#include <rapidcheck.h>

#include <cstdint>

#include "backends/emu/explore.hpp"

namespace wspipe::testing {

// Inside a rapidcheck property: draws a strategy from `opts.portfolio` and
// a seed from rapidcheck, explores `opts.runs` runs (4 when 0) from that
// seed with no time limit, one job and no sharding, and RC_FAILs with the
// report and the shrunk schedule when a run fails. An exhaustive portfolio
// is run as given (one job, no seed; it needs opts.runs or opts.seconds).
// Returns the exploration's result when nothing was found.
emu::ExploreResult rc_explore_clean(const emu::KernelFactory& make, emu::ExploreOptions opts = {});

}  // namespace wspipe::testing
