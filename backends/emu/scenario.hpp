// A scenario: a kernel of a project's own, its options and its variants
// (each with the outcome it must produce), which the wspipe program runs,
// explores and replays by name (tools/cli.hpp), and tests and benchmarks
// iterate over. A project's catalogue is a list of them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "explore.hpp"

namespace wspipe::emu {

// A numeric option (--stages 4) or a named one (--dtype bf16|fp8).
struct OptionSpec {
  std::string name;  // without the leading "--"
  std::uint64_t def = 0;
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  std::string help;
  // A named option: the value is the index of the name given; min and max
  // are then 0 and choices.size() - 1.
  std::vector<std::string> choices = {};

  // The value as the command line spells it.
  std::string spell(std::uint64_t v) const { return choices.empty() ? std::to_string(v) : choices.at(v); }
};

using OptionValues = std::map<std::string, std::uint64_t>;

// Whether `outcome` is one of `expect`'s ("race.tmem,deadlock").
inline bool expected_outcome(std::string_view expect, std::string_view outcome) {
  while (!expect.empty()) {
    const std::size_t comma = expect.find(',');
    if (expect.substr(0, comma) == outcome) return true;
    if (comma == std::string_view::npos) break;
    expect.remove_prefix(comma + 1);
  }
  return false;
}

struct VariantSpec {
  std::string name;    // "" for the correct kernel
  // "ok", "deadlock", "livelock" or a violation rule; several separated by
  // commas where one bug shows one way under some schedules and another
  // way under others (expected_outcome).
  std::string expect;
  std::string help;
  // Options this variant fixes whatever the command line says (the setting
  // its bug needs); reports show these values.
  OptionValues pinned = {};
  // Its bug differs between the lanes of a warp, which only the emulator's
  // lane-divergence mode sees: the variant turns the mode on, as if
  // --lane-divergence were given.
  bool lane_divergence = false;
  // Its bug needs a TMA load to complete out of issue order or in pieces:
  // the variant turns RunOptions::async_reorder on, as if --async-reorder
  // were given.
  bool async_reorder = false;
};

struct Scenario {
  std::string name;
  std::string help;
  std::vector<OptionSpec> options;
  std::vector<VariantSpec> variants;
  // Derives settings that follow from others (e.g. cta_group 2 implies
  // clusters of 2), after defaults and pins are applied; may be empty.
  std::function<void(OptionValues&)> resolve = {};
  // Makes one instance of the kernel for one variant; `values` holds every
  // option (defaults filled in, pins and resolve applied, ranges checked).
  // Throws std::invalid_argument on a combination the kernel cannot take.
  // Called once per run, possibly on several threads at once.
  std::function<Kernel(const std::string& variant, const OptionValues& values)> prepare;
};

using Catalogue = std::vector<Scenario>;

}  // namespace wspipe::emu
