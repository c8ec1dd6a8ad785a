#include "cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "backends/emu/emulator.hpp"
#include "examples/scenarios.hpp"

namespace wspipe::cli {
namespace {

using examples::Scenario;

constexpr int kOk = 0;
constexpr int kFound = 1;
constexpr int kUsage = 2;

const char* kHelp = R"(wspipe: run warp-specialized kernels on the wspipe emulator

usage:
  wspipe list
  wspipe run     SCENARIO[/VARIANT] [options] [--strategy S] [--seed N] [--trace FILE] [--json]
  wspipe explore SCENARIO[/VARIANT] --runs N [options] [--strategy S] [--seed N] [--json]
  wspipe replay  SCENARIO[/VARIANT] --schedule STR [options] [--trace FILE] [--json]
  wspipe help

  list      the scenarios and their variants, one per line, with the outcome
            each must produce (expect=ok, expect=deadlock, expect=<rule>)
  run       one run; prints the report, the schedule and the replay command
  explore   up to N runs with seeds N0, N0+1, ...; stops at the first failure
  replay    re-runs a recorded schedule step for step

options:
  --strategy S         rr | random | pct            (default random)
  --seed N             first seed                   (default 1)
  --pct-depth D        PCT bug depth                (default 3)
  --max-steps N        step budget per run; running out is a livelock (default 5000000)
  --spurious-try-wait  try_wait may time out on an incomplete phase
  --trace FILE         write the run's trace: Chrome/Perfetto JSON, or text if FILE ends in .txt
  --json               print one JSON object instead of the report
  scenario options     see `wspipe list`; e.g. --stages 4 --items 64

exit status: 0 nothing found, 1 a violation, deadlock or livelock found, 2 bad usage or input.
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string command;
  std::string scenario;
  std::string variant;
  std::map<std::string, std::string> opts;  // without "--"
  bool json = false;
  bool spurious = false;
};

std::uint64_t parse_u64(const std::string& name, const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("--" + name + " needs a non-negative integer, got '" + text + "'");
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    throw UsageError("--" + name + " value '" + text + "' is out of range");
  }
}

std::string choice_list(const examples::OptionSpec& spec) {
  std::string out;
  for (const auto& c : spec.choices) out += (out.empty() ? "" : "|") + c;
  return out;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-=:+") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Args parse(const std::vector<std::string>& argv) {
  Args a;
  if (argv.size() < 2) throw UsageError("missing command (list, run, explore, replay, help)");
  a.command = argv[1];
  static const std::map<std::string, bool> kGlobal = {
      {"strategy", true}, {"seed", true},      {"pct-depth", true}, {"max-steps", true}, {"trace", true},
      {"runs", true},     {"schedule", true},  {"json", false},     {"spurious-try-wait", false}};
  for (std::size_t i = 2; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (tok.rfind("--", 0) != 0) {
      if (!a.scenario.empty() || !a.variant.empty())
        throw UsageError("unexpected argument '" + tok + "' (one SCENARIO[/VARIANT] only)");
      const auto slash = tok.find('/');
      a.scenario = tok.substr(0, slash);
      if (slash != std::string::npos) a.variant = tok.substr(slash + 1);
      if (a.scenario.empty()) throw UsageError("empty scenario name in '" + tok + "'");
      continue;
    }
    std::string name = tok.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name == "json" || name == "spurious-try-wait") {
      if (value) throw UsageError("--" + name + " takes no value");
      (name == "json" ? a.json : a.spurious) = true;
      continue;
    }
    if (!value) {
      if (i + 1 >= argv.size()) throw UsageError("--" + name + " needs a value");
      value = argv[++i];
    }
    if (a.opts.count(name)) throw UsageError("--" + name + " given twice");
    a.opts[name] = *value;
  }
  return a;
}

struct Plan {
  const Scenario* scenario = nullptr;
  const examples::VariantSpec* variant = nullptr;
  examples::OptionValues values;
  emu::RunOptions options;
  std::optional<std::string> trace_file;
  std::string display;  // "ring/no-release"
};

Plan plan(const Args& a) {
  Plan p;
  if (a.scenario.empty()) throw UsageError("missing SCENARIO[/VARIANT]; `wspipe list` shows them");
  p.scenario = examples::find_scenario(a.scenario);
  if (p.scenario == nullptr) throw UsageError("unknown scenario '" + a.scenario + "'; `wspipe list` shows them");
  for (const auto& v : p.scenario->variants)
    if (v.name == a.variant) p.variant = &v;
  if (p.variant == nullptr) throw UsageError("scenario '" + a.scenario + "' has no variant '" + a.variant + "'");
  p.display = a.scenario + (a.variant.empty() ? "" : "/" + a.variant);

  static const std::map<std::string, std::string> kCommandOnly = {{"runs", "explore"}, {"schedule", "replay"}};
  for (const auto& [name, value] : a.opts) {
    if (auto it = kCommandOnly.find(name); it != kCommandOnly.end() && it->second != a.command)
      throw UsageError("--" + name + " belongs to `wspipe " + it->second + "`");
  }
  for (const auto& spec : p.scenario->options) {
    std::uint64_t v = spec.def;
    if (auto it = a.opts.find(spec.name); it != a.opts.end()) {
      if (spec.choices.empty()) {
        v = parse_u64(spec.name, it->second);
      } else {
        const auto c = std::find(spec.choices.begin(), spec.choices.end(), it->second);
        if (c == spec.choices.end())
          throw UsageError("--" + spec.name + " must be one of " + choice_list(spec) + ", got '" + it->second + "'");
        v = static_cast<std::uint64_t>(c - spec.choices.begin());
      }
    }
    if (v < spec.min || v > spec.max)
      throw UsageError("--" + spec.name + " must be in [" + std::to_string(spec.min) + ", " +
                       std::to_string(spec.max) + "], got " + std::to_string(v));
    p.values[spec.name] = v;
  }
  for (const auto& [name, value] : a.opts) {
    static const char* known[] = {"strategy", "seed", "pct-depth", "max-steps", "trace", "runs", "schedule"};
    bool ok = p.values.count(name) > 0;
    for (const char* k : known) ok |= name == k;
    if (!ok) throw UsageError("unknown option --" + name + " for scenario '" + a.scenario + "'");
  }

  auto& o = p.options;
  o.spurious_try_wait = a.spurious;
  if (auto it = a.opts.find("strategy"); it != a.opts.end()) {
    auto k = emu::parse_strategy(it->second);
    if (!k || *k == emu::StrategyKind::replay)
      throw UsageError("--strategy must be rr, random or pct, got '" + it->second + "'");
    o.strategy.kind = *k;
  }
  if (auto it = a.opts.find("seed"); it != a.opts.end()) o.strategy.seed = parse_u64("seed", it->second);
  if (auto it = a.opts.find("pct-depth"); it != a.opts.end()) {
    o.strategy.pct_depth = static_cast<std::uint32_t>(parse_u64("pct-depth", it->second));
    if (o.strategy.pct_depth < 1 || o.strategy.pct_depth > 16) throw UsageError("--pct-depth must be in [1, 16]");
  }
  if (auto it = a.opts.find("max-steps"); it != a.opts.end()) {
    o.max_steps = parse_u64("max-steps", it->second);
    if (o.max_steps == 0) throw UsageError("--max-steps must be positive");
  }
  if (auto it = a.opts.find("trace"); it != a.opts.end()) p.trace_file = it->second;
  return p;
}

std::string prog_name(const std::vector<std::string>& argv) {
  if (const char* env = std::getenv("WSPIPE_PROG"); env != nullptr && *env != '\0') return env;
  return argv.empty() ? "wspipe" : argv[0];
}

std::string replay_command(const std::string& prog, const Plan& p, const emu::Schedule& s) {
  std::string cmd = shell_quote(prog) + " replay " + shell_quote(p.display);
  for (const auto& spec : p.scenario->options) cmd += " --" + spec.name + " " + spec.spell(p.values.at(spec.name));
  if (p.options.max_steps != emu::RunOptions{}.max_steps) cmd += " --max-steps " + std::to_string(p.options.max_steps);
  if (p.options.spurious_try_wait) cmd += " --spurious-try-wait";
  cmd += " --schedule " + shell_quote(s.encode());
  return cmd;
}

emu::RunResult execute(const Plan& p, const emu::RunOptions& o) {
  return examples::run_prepared(p.scenario->prepare(p.variant->name, p.values), o);
}

// PCT spreads its change points over the expected length of a run: measure
// it once with the round-robin strategy.
void calibrate(const Plan& p, emu::RunOptions& o) {
  if (o.strategy.kind != emu::StrategyKind::pct) return;
  emu::RunOptions rr = o;
  rr.strategy.kind = emu::StrategyKind::round_robin;
  rr.trace = false;
  o.strategy.pct_steps = std::max<std::uint64_t>(execute(p, rr).steps, 1);
}

void write_trace(const std::string& file, const emu::Trace& t) {
  std::ofstream f(file, std::ios::binary);
  if (!f) throw UsageError("cannot write trace file '" + file + "'");
  if (file.size() >= 4 && file.compare(file.size() - 4, 4, ".txt") == 0) {
    t.write_text(f);
  } else {
    t.write_chrome_json(f);
  }
  if (!f) throw UsageError("error writing trace file '" + file + "'");
}

std::string json_result(const Plan& p, const std::string& command, std::uint64_t runs, const emu::RunResult* r,
                        const std::string& prog, std::uint64_t seed) {
  using emu::json_quote;
  std::ostringstream j;
  j << "{\"scenario\":" << json_quote(p.display) << ",\"command\":" << json_quote(command) << ",\"options\":{";
  bool first = true;
  for (const auto& spec : p.scenario->options) {
    const std::uint64_t v = p.values.at(spec.name);
    j << (first ? "" : ",") << json_quote(spec.name) << ":"
      << (spec.choices.empty() ? std::to_string(v) : json_quote(spec.spell(v)));
    first = false;
  }
  j << "},\"strategy\":" << json_quote(std::string(emu::to_string(p.options.strategy.kind)));
  j << ",\"seed\":" << seed << ",\"runs\":" << runs;
  const bool failed = r != nullptr && r->status != emu::Status::ok;
  j << ",\"status\":" << json_quote(r ? emu::to_string(r->status) : "ok");
  j << ",\"outcome\":" << json_quote(r ? examples::outcome(*r) : "ok");
  j << ",\"expect\":" << json_quote(p.variant->expect);
  j << ",\"steps\":" << (r ? r->steps : 0);
  j << ",\"violations\":[";
  if (r) {
    for (std::size_t i = 0; i < r->violations.size(); ++i) {
      const auto& v = r->violations[i];
      j << (i ? "," : "") << "{\"rule\":" << json_quote(v.rule) << ",\"warp\":" << json_quote(v.warp)
        << ",\"object\":" << json_quote(v.object) << ",\"step\":" << v.step
        << ",\"location\":" << json_quote(v.file + ":" + std::to_string(v.line))
        << ",\"message\":" << json_quote(v.message);
      if (!v.other.empty()) j << ",\"other\":" << json_quote(v.other);
      j << "}";
    }
  }
  j << "],\"blocked\":[";
  if (r) {
    for (std::size_t i = 0; i < r->blocked.size(); ++i) {
      const auto& b = r->blocked[i];
      j << (i ? "," : "") << "{\"warp\":" << json_quote(b.warp) << ",\"op\":" << json_quote(b.op)
        << ",\"object\":" << json_quote(b.object) << ",\"state\":" << json_quote(b.state)
        << ",\"location\":" << json_quote(b.line ? b.file + ":" + std::to_string(b.line) : "") << "}";
    }
  }
  j << "]";
  if (r && (failed || command != "explore")) {
    j << ",\"schedule\":" << json_quote(r->schedule.encode());
    j << ",\"replay\":" << json_quote(replay_command(prog, p, r->schedule));
  } else {
    j << ",\"schedule\":null,\"replay\":null";
  }
  j << "}";
  return j.str();
}

void print_report(std::ostream& out, const Plan& p, const emu::RunResult& r, const std::string& prog) {
  out << r.report();
  out << "expected outcome of " << p.display << ": " << p.variant->expect << "\n";
  out << "schedule: " << r.schedule.encode() << "\n";
  out << "replay:   " << replay_command(prog, p, r.schedule) << "\n";
}

int finish(std::ostream& out, const Args& a, const Plan& p, const std::string& command, std::uint64_t runs,
           const emu::RunResult& r, const std::string& prog, std::uint64_t seed) {
  if (p.trace_file) write_trace(*p.trace_file, r.trace);
  if (a.json) {
    out << json_result(p, command, runs, &r, prog, seed) << "\n";
  } else {
    out << "wspipe " << command << " " << p.display;
    for (const auto& spec : p.scenario->options) out << " " << spec.name << "=" << spec.spell(p.values.at(spec.name));
    if (command != "replay")
      out << " strategy=" << emu::to_string(p.options.strategy.kind) << " seed=" << seed;
    out << "\n";
    print_report(out, p, r, prog);
    if (p.trace_file) out << "trace:    " << *p.trace_file << "\n";
  }
  return r.status == emu::Status::ok ? kOk : kFound;
}

int cmd_list(std::ostream& out) {
  for (const Scenario& s : examples::scenarios()) {
    for (const auto& v : s.variants) {
      std::string name = s.name + (v.name.empty() ? "" : "/" + v.name);
      name.resize(std::max<std::size_t>(name.size() + 1, 26), ' ');
      std::string expect = "expect=" + v.expect;
      expect.resize(std::max<std::size_t>(expect.size() + 1, 32), ' ');
      out << name << expect << v.help << "\n";
    }
  }
  out << "\noptions:\n";
  for (const Scenario& s : examples::scenarios())
    for (const auto& o : s.options) {
      if (o.choices.empty()) {
        out << "  " << s.name << ": --" << o.name << " N  " << o.help << " (default " << o.def << ", " << o.min
            << ".." << o.max << ")\n";
      } else {
        out << "  " << s.name << ": --" << o.name << " " << choice_list(o) << "  " << o.help << " (default "
            << o.spell(o.def) << ")\n";
      }
    }
  return kOk;
}

int cmd_run(const Args& a, std::ostream& out, const std::string& prog) {
  Plan p = plan(a);
  emu::RunOptions o = p.options;
  calibrate(p, o);
  o.trace = true;
  const emu::RunResult r = execute(p, o);
  return finish(out, a, p, "run", 1, r, prog, o.strategy.seed);
}

int cmd_replay(const Args& a, std::ostream& out, const std::string& prog) {
  auto it = a.opts.find("schedule");
  if (it == a.opts.end()) throw UsageError("replay needs --schedule STR (printed with every failure)");
  Plan p = plan(a);
  std::string why;
  auto s = emu::Schedule::decode(it->second, &why);
  if (!s) throw UsageError(why);
  emu::RunOptions o = p.options;
  o.strategy.kind = emu::StrategyKind::replay;
  o.strategy.replay = *s;
  o.trace = true;
  p.options.strategy.kind = emu::StrategyKind::replay;
  emu::RunResult r;
  try {
    r = execute(p, o);
  } catch (const emu::ScheduleMismatch& e) {
    throw UsageError(std::string(e.what()) + " (were the scenario options the same as when it was recorded?)");
  }
  return finish(out, a, p, "replay", 1, r, prog, 0);
}

int cmd_explore(const Args& a, std::ostream& out, std::ostream& err, const std::string& prog) {
  auto it = a.opts.find("runs");
  if (it == a.opts.end()) throw UsageError("explore needs --runs N");
  const std::uint64_t runs = parse_u64("runs", it->second);
  if (runs == 0) throw UsageError("--runs must be positive");
  Plan p = plan(a);
  emu::RunOptions o = p.options;
  calibrate(p, o);
  o.trace = false;  // the failing run is replayed with the trace on
  const std::uint64_t first_seed = o.strategy.seed;
  // Round-robin makes the same choices whatever the seed: one run covers it.
  const std::uint64_t todo = o.strategy.kind == emu::StrategyKind::round_robin ? 1 : runs;
  if (todo < runs) err << "explore: round-robin is deterministic; 1 run covers all " << runs << "\n";

  using Clock = std::chrono::steady_clock;
  auto last = Clock::now();
  std::uint64_t steps = 0;
  for (std::uint64_t i = 0; i < todo; ++i) {
    o.strategy.seed = first_seed + i;
    emu::RunResult r = execute(p, o);
    steps += r.steps;
    if (r.status != emu::Status::ok) {
      err << "explore " << p.display << ": failure in run " << (i + 1) << " (seed " << o.strategy.seed << ")\n";
      o.trace = true;
      emu::RunResult full = execute(p, o);  // same seed, same choices, now traced
      return finish(out, a, p, "explore", i + 1, full, prog, o.strategy.seed);
    }
    if (Clock::now() - last > std::chrono::milliseconds(500) || i + 1 == todo) {
      last = Clock::now();
      err << "explore " << p.display << ": " << (i + 1) << "/" << todo << " runs, " << steps
          << " steps, no failure\n";
    }
  }
  if (a.json) {
    out << json_result(p, "explore", todo, nullptr, prog, first_seed) << "\n";
  } else {
    out << "wspipe explore " << p.display << ": " << todo << " runs (" << emu::to_string(o.strategy.kind)
        << ", seeds " << first_seed << ".." << first_seed + todo - 1 << "), " << steps << " steps: nothing found\n";
  }
  return kOk;
}

}  // namespace

int main(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  const std::string prog = prog_name(argv);
  try {
    const Args a = parse(argv);
    if (a.command == "help" || a.command == "--help" || a.command == "-h") {
      out << kHelp;
      return kOk;
    }
    if (a.command == "list") return cmd_list(out);
    if (a.command == "run") return cmd_run(a, out, prog);
    if (a.command == "explore") return cmd_explore(a, out, err, prog);
    if (a.command == "replay") return cmd_replay(a, out, prog);
    throw UsageError("unknown command '" + a.command + "'");
  } catch (const UsageError& e) {
    err << "wspipe: " << e.what() << "\n(see `wspipe help`)\n";
    return kUsage;
  } catch (const emu::BadLaunch& e) {
    err << "wspipe: bad launch: " << e.what() << "\n";
    return kUsage;
  } catch (const std::invalid_argument& e) {
    err << "wspipe: " << e.what() << "\n";
    return kUsage;
  }
}

}  // namespace wspipe::cli
