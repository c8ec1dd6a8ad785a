// The emulator's catalogue of scenarios: each kernel of examples/, its
// options, and its variants with the outcome each must produce.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/emu/emulator.hpp"

namespace wspipe::examples {

struct OptionSpec {
  std::string name;  // without the leading "--"
  std::uint64_t def = 0;
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  std::string help;
  // A named option (--dtype bf16|fp8): the value is the index of the name
  // given; min and max are then 0 and choices.size() - 1.
  std::vector<std::string> choices = {};

  // The value as the command line spells it.
  std::string spell(std::uint64_t v) const { return choices.empty() ? std::to_string(v) : choices.at(v); }
};

struct VariantSpec {
  std::string name;    // "" for the correct kernel
  std::string expect;  // "ok", "deadlock", "livelock" or a violation rule
  std::string help;
};

using OptionValues = std::map<std::string, std::uint64_t>;

struct Prepared {
  emu::LaunchConfig launch;
  std::function<void()> body;
  // After a run that ended ok: "" when the kernel's result is right, else
  // what is wrong (reported as the violation "result.mismatch").
  std::function<std::string()> verify;
};

struct Scenario {
  std::string name;
  std::string help;
  std::vector<OptionSpec> options;
  std::vector<VariantSpec> variants;
  // Builds the run for one variant; `values` holds every option (defaults
  // filled in, ranges checked). Throws std::invalid_argument on a
  // combination the kernel cannot take.
  std::function<Prepared(const std::string& variant, const OptionValues& values)> prepare;
};

const std::vector<Scenario>& scenarios();
const Scenario* find_scenario(const std::string& name);

// Runs one prepared scenario: the emulator run, then, if it ended ok, the
// result check.
emu::RunResult run_prepared(const Prepared& prep, const emu::RunOptions& options);

// The word a run's outcome is classified by: "ok", "deadlock", "livelock",
// or the rule of the first violation.
std::string outcome(const emu::RunResult& r);

// The launch of the warp-specialized examples (gemm, blockwise-fp8):
// `clusters` clusters of `cluster_size` CTAs, each of kGemmWarps warps
// (epilogue x4, load, mma) with `smem_bytes` of shared memory.
emu::LaunchConfig warp_specialized_launch(std::uint32_t clusters, std::uint32_t cluster_size, std::size_t smem_bytes);

// The scenarios defined in their own files.
Scenario make_gemm_scenario();
Scenario make_blockwise_fp8_scenario();

}  // namespace wspipe::examples
