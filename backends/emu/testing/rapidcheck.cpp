#include "rapidcheck.hpp"

#include <exception>
#include <limits>
#include <string>
#include <vector>

namespace wspipe::testing {

emu::ExploreResult rc_explore_clean(const emu::KernelFactory& make, emu::ExploreOptions opts) {
  if (opts.portfolio.empty()) RC_FAIL("rc_explore_clean: the strategy portfolio is empty");
  opts.jobs = 1;
  opts.shard_index = 0;
  opts.shard_count = 1;
  opts.on_progress = {};
  if (opts.portfolio.front().kind != emu::StrategyKind::exhaustive) {
    // Drawn as text, so that a counterexample shows "pct:3", not an index.
    std::vector<std::string> names;
    for (const emu::StrategySpec& s : opts.portfolio) names.push_back(emu::to_string(s));
    const std::string name = *rc::gen::elementOf(names);
    for (const emu::StrategySpec& s : opts.portfolio)
      if (emu::to_string(s) == name) opts.portfolio = {s};
    opts.first_seed = *rc::gen::inRange<std::uint64_t>(1, std::uint64_t{1} << 32);
    if (opts.runs == 0) opts.runs = 4;
    opts.seconds = 0;
  }
  emu::ExploreResult res;
  try {
    res = emu::explore(make, opts);
  } catch (const std::exception& e) {
    RC_FAIL(std::string("rc_explore_clean: exploration did not run: ") + e.what());
  }
  if (!res.ok())
    RC_FAIL("wspipe found " + res.failure->outcome + "\n" + res.report() +
            "rapidcheck's reproduce string (RC_PARAMS=\"reproduce=...\", printed when the program ends) re-runs "
            "this case, schedule included\n");
  return res;
}

}  // namespace wspipe::testing
