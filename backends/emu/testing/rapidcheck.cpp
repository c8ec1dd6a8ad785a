#include "rapidcheck.hpp"

#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "backends/emu/testing/replay_env.hpp"

namespace wspipe::testing {
namespace {

// Fails the property's case with `message` as its whole description: no
// RC_FAIL(...) expression or this file's path, which say nothing to the
// person reading the counterexample.
[[noreturn]] void fail(const std::string& message) {
  throw rc::detail::CaseResult(rc::detail::CaseResult::Type::Failure, message);
}

// How a failure's line reproduces it: rapidcheck's own reproduce string
// (printed once the program ends) redraws this case, WSPIPE_REPLAY replays
// its shrunk schedule.
constexpr const char* kReproduce = "RC_PARAMS=\"reproduce=<the string rapidcheck prints when the program ends>\"";

}  // namespace

emu::ExploreResult rc_explore_clean(const emu::KernelFactory& make, emu::ExploreOptions opts) {
  if (opts.portfolio.empty()) fail("rc_explore_clean: the strategy portfolio is empty");
  opts.jobs = 1;
  opts.shard_index = 0;
  opts.shard_count = 1;
  opts.on_progress = {};
  if (opts.portfolio.front().kind != emu::StrategyKind::exhaustive) {
    // Drawn as text, so that a counterexample shows "pct:3", not an index,
    // under a label that says what it is.
    std::vector<std::string> names;
    for (const emu::StrategySpec& s : opts.portfolio) names.push_back(emu::to_string(s));
    const std::string name = *rc::gen::elementOf(names).as("wspipe strategy");
    for (const emu::StrategySpec& s : opts.portfolio)
      if (emu::to_string(s) == name) opts.portfolio = {s};
    opts.first_seed = *rc::gen::inRange<std::uint64_t>(1, std::uint64_t{1} << 32).as("wspipe seed");
    if (opts.runs == 0) opts.runs = 4;
    opts.seconds = 0;
  }
  // WSPIPE_REPLAY (with WSPIPE_TRACE), as the GoogleTest helpers read them:
  // after the draws, so that rapidcheck's reproduce string draws this case.
  if (const auto rep = detail::replay_from_env(make, opts.run_options())) {
    if (!rep->run)
      fail(rep->error + "\n(in a rapidcheck property, replay with the case's RC_PARAMS=\"reproduce=...\" too)");
    if (rep->run->status != emu::Status::ok || !rep->trace_error.empty())
      fail(detail::replayed(*rep) + "\n" + rep->run->report() + rep->trace_note + rep->trace_error);
    return {};
  }
  emu::ExploreResult res;
  try {
    res = emu::explore(make, opts);
  } catch (const std::exception& e) {
    fail(std::string("rc_explore_clean: exploration did not run: ") + e.what());
  }
  if (!res.ok())
    fail("wspipe found " + res.failure->outcome + "\n" + res.report() +
         detail::replay_line(*res.failure, opts.run_options(), kReproduce));
  return res;
}

}  // namespace wspipe::testing
