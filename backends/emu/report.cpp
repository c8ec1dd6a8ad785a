// The reports a person reads, next to the results they describe: a run's
// (RunResult::report) and an exploration's (ExploreResult::report).
#include "report.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <vector>

#include "emulator.hpp"
#include "trace.hpp"

namespace wspipe::emu {

std::string RunResult::report() const {
  std::string r = std::string("status: ") + to_string(status) + " after " + std::to_string(steps) + " steps\n";
  for (const Violation& v : violations) {
    r += "violation " + v.rule + " at step " + std::to_string(v.step) + "\n";
    // A result.mismatch comes from the kernel's verify() after the run: no warp, no line.
    if (!v.warp.empty()) r += "  warp:   " + v.warp + "\n";
    if (!v.object.empty()) r += "  object: " + v.object + "\n";
    if (v.line != 0) r += "  where:  " + v.file + ":" + std::to_string(v.line) + "\n";
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

std::string counted(std::uint64_t n, std::string_view noun) {
  std::string s = std::to_string(n);
  s.append(" ").append(noun);
  if (n != 1) s.push_back('s');
  return s;
}

// What a complete exhaustive search covered: "every class of equivalent
// schedules", or those "within K preemption(s)".
std::string coverage(const ExploreResult& e) {
  return e.bounded ? "within " + std::to_string(e.preemptions) + " preemption(s)"
                   : "(every class of equivalent schedules)";
}

// A sharded search's share: "shard 1/2's 5 of the 9 parts of the sharded
// search".
// search", or "shard 2/3, which holds none of the 1 part of the sharded
// search".
std::string share(const ExploreResult& e) {
  const std::string shard = "shard " + std::to_string(e.shard_index) + "/" + std::to_string(e.shard_count);
  const std::string of = " of the " + counted(e.parts_total, "part") + " of the sharded search";
  return e.parts == 0 ? shard + ", which holds none" + of : shard + "'s " + std::to_string(e.parts) + of;
}

// "assuming: ..." and one more line per assumption, or that there is none.
std::string assuming_lines(const ExploreResult& e) {
  if (e.assumptions.empty()) return "assuming: nothing beyond this configuration\n";
  std::string out;
  for (std::size_t i = 0; i < e.assumptions.size(); ++i)
    out += (i == 0 ? "assuming: " : "          ") + e.assumptions[i] + "\n";
  return out;
}

std::string explored_line(const ExploreResult& e) {
  std::ostringstream out;
  out << "explored " << counted(e.runs, "run") << " (" << e.steps << " steps) in " << std::fixed << std::setprecision(1)
      << e.seconds << " s";
  if (e.complete) {
    out << ": every schedule " << (e.bounded ? "within the preemption bound" : "up to equivalence")
        << (e.sharded ? " in " + share(e) : "");
    // (A bounded search prunes nothing: it runs every schedule within it.)
    if (!e.bounded) out << " (" << e.pruned << " more pruned as equivalent)";
  }
  out << (e.interrupted ? ", interrupted" : "") << ": nothing found\n";
  switch (e.verdict()) {
    case Verdict::verified:
      // A bounded search runs every schedule within its bound: no reduction.
      if (!e.sharded) {
        out << "verdict:  verified: no schedule of this configuration " << coverage(e) << " fails (a complete search"
            << (e.bounded ? "" : ", up to the reduction") << ")\n";
      } else {
        out << "verdict:  verified: no schedule of this configuration " << coverage(e) << " in " << share(e)
            << " fails; the configuration is verified when every shard's parts are (a complete search"
            << (e.bounded ? "" : ", up to the reduction") << ")\n";
      }
      out << assuming_lines(e);
      break;
    case Verdict::incomplete:
      out << "verdict:  incomplete: the exhaustive search's budget ran out before it covered every schedule "
          << coverage(e) << (e.sharded ? " in shard " + std::to_string(e.shard_index) + "/" +
                                             std::to_string(e.shard_count) + "'s parts"
                                       : "")
          << "; not a pass (a larger --runs or --seconds"
          << (e.bounded ? ", or fewer --preemptions" : ", or a bound: --preemptions K") << ")\n";
      break;
    case Verdict::explored:
      out << "verdict:  explored: " << counted(e.runs, "sampled run")
          << " found nothing; schedules not run are not covered\n";
      break;
    case Verdict::found: break;
  }
  return out.str();
}

std::string strategy_and_seed(const Failure& f) {
  if (f.measuring_run) return "(rr)";
  std::string out = "(" + to_string(f.strategy);
  if (f.strategy.kind != StrategyKind::exhaustive) out += ", seed " + std::to_string(f.seed);
  return out + ")";
}

std::string run_name(const Failure& f) {
  return f.measuring_run ? "the run that measures PCT's run length" : "run " + std::to_string(f.run + 1);
}

std::string shrunk_line(const ShrinkStats& s) {
  const char* cut = s.interrupted ? " (shrinking interrupted)" : s.finished ? "" : " (shrinking ran out of time)";
  // With none left the count is the fewest there can be: nothing to say.
  std::string fewest;
  if (s.preemptions_after != 0) fewest = s.minimal ? ", minimal" : ", not proved minimal";
  if (!s.minimal && s.preemptions_needed != 0)
    fewest += ": at least " + std::to_string(s.preemptions_needed) + " needed";
  return "shrunk:   " + std::to_string(s.choices_before) + " -> " + std::to_string(s.choices_after) +
         " deviations, " + std::to_string(s.preemptions_before) + " -> " + std::to_string(s.preemptions_after) +
         " preemptions" + fewest + cut + "\n";
}

std::string ExploreResult::report() const {
  if (!failure) return explored_line(*this);
  const Failure& f = *failure;
  return "failure in " + run_name(f) + " " + strategy_and_seed(f) + ": " + f.outcome + "\n" +
         f.result.report() + "schedule: " + f.replay_token() + "\n" + shrunk_line(f.shrink);
}

// -------------------------------------------------------------------- JSON

namespace {

std::string json_bool(bool b) { return b ? "true" : "false"; }

std::string json_location(const std::string& file, std::uint32_t line) {
  return json_quote(line ? file + ":" + std::to_string(line) : "");
}

std::string json_strings(const std::vector<std::string>& v) {
  std::string j = "[";
  for (std::size_t i = 0; i < v.size(); ++i) j += (i != 0 ? "," : "") + json_quote(v[i]);
  return j + "]";
}

std::string json_violations(const RunResult& r) {
  std::string j = "[";
  for (const Violation& v : r.violations) {
    j += (j.size() > 1 ? ",{" : "{");
    j += "\"rule\":" + json_quote(v.rule) + ",\"warp\":" + json_quote(v.warp) + ",\"object\":" +
         json_quote(v.object) + ",\"step\":" + std::to_string(v.step) + ",\"location\":" +
         json_location(v.file, v.line) + ",\"message\":" + json_quote(v.message);
    if (!v.other.empty()) j += ",\"other\":" + json_quote(v.other);
    j += "}";
  }
  return j + "]";
}

std::string json_blocked(const RunResult& r) {
  std::string j = "[";
  for (const BlockedWarp& b : r.blocked) {
    j += (j.size() > 1 ? ",{" : "{");
    j += "\"warp\":" + json_quote(b.warp) + ",\"op\":" + json_quote(b.op) + ",\"object\":" +
         json_quote(b.object) + ",\"state\":" + json_quote(b.state) + ",\"location\":" +
         json_location(b.file, b.line) + "}";
  }
  return j + "]";
}

}  // namespace

std::string to_json(const JsonFields& fields) {
  std::string j = "{";
  for (const auto& [key, value] : fields) {
    if (j.size() > 1) j += ',';  // appended: g++ 12 -O3 warns falsely (-Wrestrict) on "," + std::string
    j += json_quote(key);
    j += ':';
    j += value;
  }
  return j + "}";
}

void insert_after(JsonFields& fields, std::string_view key, std::pair<std::string, std::string> field) {
  auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; });
  fields.insert(it == fields.end() ? it : std::next(it), std::move(field));
}

JsonFields json_fields(const RunResult& r) {
  return {{"status", json_quote(to_string(r.status))},
          {"outcome", json_quote(outcome(r))},
          {"steps", std::to_string(r.steps)},
          {"violations", json_violations(r)},
          {"blocked", json_blocked(r)},
          {"schedule", json_quote(r.schedule.encode())}};
}

JsonFields json_fields(const ExploreResult& e) {
  std::ostringstream seconds;
  seconds << std::fixed << std::setprecision(3) << e.seconds;
  JsonFields j = {{"runs", std::to_string(e.runs)},
                  {"complete", json_bool(e.complete)},
                  {"preemption_bound", e.exhaustive && e.bounded ? std::to_string(e.preemptions) : "null"},
                  {"verdict", json_quote(std::string(to_string(e.verdict())))},
                  {"interrupted", json_bool(e.interrupted)},
                  {"assumptions", json_strings(e.assumptions)},
                  {"pruned", std::to_string(e.pruned)},
                  {"runs_past_window", std::to_string(e.runs_past_window)},
                  {"seconds", seconds.str()}};
  if (e.sharded)
    j.insert(j.end(), {{"shard", json_quote(std::to_string(e.shard_index) + "/" + std::to_string(e.shard_count))},
                       {"parts", std::to_string(e.parts)},
                       {"parts_total", std::to_string(e.parts_total)}});
  if (!e.failure) {
    j.insert(j.end(), {{"status", json_quote("ok")},
                       {"outcome", json_quote("ok")},
                       {"steps", std::to_string(e.steps)},
                       {"violations", "[]"},
                       {"blocked", "[]"},
                       {"schedule", "null"},
                       {"shrink", "null"}});
    return j;
  }
  const Failure& f = *e.failure;
  j.emplace_back("run", f.measuring_run ? "0" : std::to_string(f.run + 1));
  const JsonFields run = json_fields(f.result);
  j.insert(j.end(), run.begin(), run.end());
  const ShrinkStats& s = f.shrink;
  j.emplace_back("shrink", "{\"choices_before\":" + std::to_string(s.choices_before) +
                               ",\"choices_after\":" + std::to_string(s.choices_after) +
                               ",\"preemptions_before\":" + std::to_string(s.preemptions_before) +
                               ",\"preemptions_after\":" + std::to_string(s.preemptions_after) +
                               ",\"minimal\":" + json_bool(s.minimal) +
                               ",\"preemptions_needed\":" + std::to_string(s.preemptions_needed) +
                               ",\"finished\":" + json_bool(s.finished) +
                               ",\"interrupted\":" + json_bool(s.interrupted) + "}");
  return j;
}

std::string to_json(const RunResult& run) { return to_json(json_fields(run)); }
std::string to_json(const ExploreResult& result) { return to_json(json_fields(result)); }

// ------------------------------------------------------------------ replay

std::string replay_command(SettingsFront front, const RunOptions& run, const Schedule& schedule,
                           const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::string>& extra, const std::optional<std::string>& trace_file) {
  return replay_command(front, run, std::string_view(schedule.encode()), program, args, extra, trace_file);
}

std::string replay_command(SettingsFront front, const RunOptions& run, std::string_view schedule_argument,
                           const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::string>& extra, const std::optional<std::string>& trace_file) {
  const RunOptions defaults;
  std::vector<std::string> settings;  // as `front` spells them
  auto add = [&](const char* flag, const std::string& value) {
    settings.push_back(spell_setting(*find_setting_flag(flag), value, front));
  };
  if (run.max_steps != defaults.max_steps) add("max-steps", std::to_string(run.max_steps));
  if (!run.spurious_try_wait) add("no-spurious-try-wait", "1");
  if (run.spin_out_limit != defaults.spin_out_limit && run.spin_out_limit != 0) add("spin-out-limit", std::to_string(run.spin_out_limit));
  if (run.lane_divergence) add("lane-divergence", "1");
  if (!run.async_reorder) add("no-async-reorder", "1");
  if (run.async_reorder && !run.legacy_pieces && run.reorder_window != defaults.reorder_window)
    add("reorder-window", std::to_string(run.reorder_window));
  std::string cmd;
  auto word = [&](const std::string& w) { cmd += (cmd.empty() ? "" : " ") + w; };
  if (front == SettingsFront::environment) {
    word("WSPIPE_REPLAY=" + shell_quote(std::string(schedule_argument)));
    if (trace_file) word("WSPIPE_TRACE=" + shell_quote(*trace_file));
    for (const auto& s : settings) word(s);
  }
  word(shell_quote(program));
  for (const auto& a : args) word(shell_quote(a));
  if (front != SettingsFront::environment)
    for (const auto& s : settings) word(s);
  for (const auto& a : extra) word(shell_quote(a));
  if (front != SettingsFront::environment) {
    word("--schedule " + shell_quote(std::string(schedule_argument)));
    if (trace_file) word("--trace " + shell_quote(*trace_file));
  }
  return cmd;
}

}  // namespace wspipe::emu
