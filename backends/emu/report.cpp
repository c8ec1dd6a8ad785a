// The reports a person reads, next to the results they describe: a run's
// (RunResult::report) and an exploration's (ExploreResult::report).
#include "report.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <vector>

#include "emulator.hpp"

namespace wspipe::emu {

std::string RunResult::report() const {
  std::string r = std::string("status: ") + to_string(status) + " after " + std::to_string(steps) + " steps\n";
  for (const Violation& v : violations) {
    r += "violation " + v.rule + " at step " + std::to_string(v.step) + "\n";
    r += "  warp:   " + v.warp + "\n";
    if (!v.object.empty()) r += "  object: " + v.object + "\n";
    r += "  where:  " + v.file + ":" + std::to_string(v.line) + "\n";
    r += "  what:   " + v.message + "\n";
    if (!v.other.empty()) r += "  other:  " + v.other + "\n";
  }
  if (status == Status::deadlock) r += "deadlock: no warp can move; every unfinished warp and what it waits on:\n";
  if (status == Status::livelock)
    r += "livelock: the step budget ran out; every unfinished warp and what it was doing:\n";
  std::vector<std::string> shown;  // objects whose last events were printed already
  for (const BlockedWarp& b : blocked) {
    r += "  " + b.warp + ": " + b.op;
    if (!b.object.empty()) r += " on " + b.object;
    if (b.line != 0) r += " at " + b.file + ":" + std::to_string(b.line);
    r += " (since step " + std::to_string(b.since) + ")\n";
    if (!b.state.empty()) r += "    " + b.state + "\n";
    if (b.last_events.empty()) continue;
    if (std::find(shown.begin(), shown.end(), b.object) != shown.end()) {
      r += "    (last events on " + b.object + ": as above)\n";
      continue;
    }
    shown.push_back(b.object);
    r += "    last events on " + b.object + ":\n";
    for (const auto& e : b.last_events) r += "      " + e + "\n";
  }
  return r;
}

std::string explored_line(const ExploreResult& e) {
  std::ostringstream out;
  out << "explored " << e.runs << " runs (" << e.steps << " steps) in " << std::fixed << std::setprecision(1)
      << e.seconds << " s";
  if (e.complete) out << ": every schedule within the preemption bound (" << e.pruned << " more pruned as equivalent)";
  out << ": nothing found\n";
  return out.str();
}

std::string strategy_and_seed(const Failure& f) {
  std::string out = "(" + to_string(f.strategy);
  if (f.strategy.kind != StrategyKind::exhaustive) out += ", seed " + std::to_string(f.seed);
  return out + ")";
}

std::string shrunk_line(const ShrinkStats& s) {
  return "shrunk:   " + std::to_string(s.choices_before) + " -> " + std::to_string(s.choices_after) +
         " deviations, " + std::to_string(s.preemptions_before) + " -> " + std::to_string(s.preemptions_after) +
         " preemptions" + (s.finished ? "" : " (shrinking ran out of time)") + "\n";
}

std::string ExploreResult::report() const {
  if (!failure) return explored_line(*this);
  const Failure& f = *failure;
  return "failure in run " + std::to_string(f.run + 1) + " " + strategy_and_seed(f) + ": " + f.outcome + "\n" +
         f.result.report() + "schedule: " + f.replay_token() + "\n" + shrunk_line(f.shrink);
}

}  // namespace wspipe::emu
