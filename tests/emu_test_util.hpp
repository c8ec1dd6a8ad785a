// Helpers for tests that run small kernels on the emulator.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>

#include "backends/emu/emu.hpp"

namespace wspipe::test {

using B = emu::EmuBackend;

// Runs `body` on one cluster of `ctas` CTAs with `warps` warps each and
// `smem` bytes of shared memory per CTA.
inline emu::RunResult run_kernel(std::uint32_t warps, const std::function<void()>& body,
                                 emu::RunOptions opts = {}, std::size_t smem = 1024, std::uint32_t ctas = 1) {
  emu::LaunchConfig launch;
  launch.warps_per_cta = warps;
  launch.cluster_size = ctas;
  launch.smem_bytes = smem;
  return emu::run(launch, body, opts);
}

// Exploration with a fixed number of runs and no time limit: the same runs
// on every machine.
inline emu::ExploreOptions fixed_runs(std::uint64_t n, unsigned jobs = 1) {
  emu::ExploreOptions o;
  o.runs = n;
  o.seconds = 0;
  o.jobs = jobs;
  return o;
}

inline emu::RunOptions with_strategy(emu::StrategyKind k, std::uint64_t seed = 1) {
  emu::RunOptions o;
  o.strategy.kind = k;
  o.strategy.seed = seed;
  return o;
}

// The rule of the first violation, or the status word.
using emu::outcome;

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One lane inits `bar` with count n and a name for the reports.
inline void init_bar(SharedMemBarrier& bar, std::uint32_t n, const char* name = "bar") {
  B::elect_one([&] { B::init(bar, n, BarrierName{name}); });
}
inline void elected_arrive(SharedMemBarrier& bar) {
  B::elect_one([&] { B::arrive(bar); });
}

// A 2-D tensor map over the row-major `cols` x `rows` matrix at `global`.
inline TensorMap tensor_map_2d(const void* global, ElemType type, std::uint64_t cols, std::uint64_t rows,
                               std::uint32_t box_cols, std::uint32_t box_rows,
                               SmemSwizzle swizzle = SmemSwizzle::none) {
  return row_major_tensor_map(global, type, cols, rows, box_cols, box_rows, swizzle);
}

}  // namespace wspipe::test

// The run ended on exactly one violation, `rule`, reported at `line` of the
// calling test file (the report strips the source-tree prefix).
#define EXPECT_VIOLATION_AT(r, rule_, line_)                                                       \
  do {                                                                                             \
    ASSERT_EQ((r).status, ::wspipe::emu::Status::violation) << (r).report();                       \
    ASSERT_EQ((r).violations.size(), 1u) << (r).report();                                          \
    EXPECT_EQ((r).violations[0].rule, rule_) << (r).report();                                      \
    EXPECT_EQ((r).violations[0].line, static_cast<std::uint32_t>(line_)) << (r).report();          \
    const std::string wspipe_file_ = __FILE__;                                                     \
    EXPECT_TRUE(!(r).violations[0].file.empty() &&                                                \
                wspipe_file_.size() >= (r).violations[0].file.size() &&                            \
                wspipe_file_.compare(wspipe_file_.size() - (r).violations[0].file.size(),          \
                                     std::string::npos, (r).violations[0].file) == 0)              \
        << (r).violations[0].file;                                                                 \
  } while (0)

#define EXPECT_OK(r) EXPECT_EQ((r).status, ::wspipe::emu::Status::ok) << (r).report()
