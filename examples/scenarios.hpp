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

// The word a run's outcome is classified by: "ok", "deadlock", "livelock",
// or the rule of the first violation.
std::string outcome(const emu::RunResult& r);

}  // namespace wspipe::examples
