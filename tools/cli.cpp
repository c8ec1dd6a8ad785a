#include "cli.hpp"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "backends/emu/report.hpp"
#include "backends/emu/settings.hpp"
#include "backends/emu/trace.hpp"

namespace wspipe::cli {
namespace {

constexpr int kOk = 0;
constexpr int kFound = 1;
constexpr int kUsage = 2;

// The help, with PROG for the program's name (program_name()).
const char* kHelp = R"(PROG: run warp-specialized kernels on the wspipe emulator

usage:
  PROG list
  PROG run     SCENARIO[/VARIANT] [options] [--strategy S] [--seed N] [--trace FILE] [--json]
  PROG explore SCENARIO[/VARIANT] [options] [--runs N] [--seconds T] [--strategy LIST] [--jobs N] [--json]
  PROG replay  SCENARIO[/VARIANT] --schedule STR [options] [--trace FILE] [--json]
  PROG help

  list      the scenarios and their variants, one per line, with the outcome
            each must produce (expect=ok, expect=deadlock, expect=<rule>)
  run       one run; prints the report, the schedule and the replay command
  explore   many runs (run i: strategy i mod |LIST|, seed N0+i) until the
            budget is spent or a failure is found; the lowest-numbered
            failing run is shrunk to a short schedule and reported
  replay    re-runs a recorded schedule step for step

options:
)";

// After the settings' lines (emu::flags_help()).
const char* kHelpTail = R"(  --max-active-clusters N
                       launch: at most N clusters run at once, the others launch as
                       running ones exit (0: all at once; the default)
  --ctas-per-sm N      launch: CTAs sharing each SM and its Tensor Memory (default 1)
                       (both: where the scenario has no option of that name)
  --trace FILE         write the (shrunk, failing) run's trace: Chrome/Perfetto
                       JSON, or text if FILE ends in .txt
  --json               print one JSON object instead of the report
  scenario options     see `PROG list`; e.g. --stages 4 --items 64

exit status: 0 nothing found, 1 a violation, deadlock or livelock found, 2 bad usage or input.
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string command;
  std::string scenario;
  std::string variant;
  std::map<std::string, std::string> opts;  // without "--"; a switch as "1"
  bool json = false;
  std::string name;  // the program's, as it names itself (program_name())
};

// Options every scenario takes, and the command each belongs to ("" = all):
// the settings (emu::settings_table()) and the CLI's own.
const std::map<std::string, std::string>& global_options() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> out = {
        {"trace", ""}, {"schedule", "replay"}, {"max-active-clusters", ""}, {"ctas-per-sm", ""}};
    for (const emu::Setting& s : emu::settings_table())
      out[std::string(s.flag)] = s.exploration_only ? "explore" : "";
    return out;
  }();
  return m;
}

bool is_switch(const std::string& name) {
  const emu::Setting* s = emu::find_setting_flag(name);
  return name == "json" || (s != nullptr && s->arg.empty());
}

// Global options that set the scenario kernel's launch (emu::LaunchConfig),
// unless the scenario has an option of that name (tmem-coresident's own
// --ctas-per-sm), which then wins.
bool is_launch_option(const std::string& name) { return name == "max-active-clusters" || name == "ctas-per-sm"; }
bool scenario_has(const Scenario& s, const std::string& name) {
  return std::any_of(s.options.begin(), s.options.end(), [&](const OptionSpec& o) { return o.name == name; });
}

// A whole number in [min, max] for option --name, or a usage error in the
// settings' words.
std::uint64_t parse_number(const std::string& name, const std::string& text, std::uint64_t min, std::uint64_t max) {
  try {
    return emu::parse_whole_number(text, min, max);
  } catch (const std::invalid_argument& e) {
    throw UsageError("--" + name + " " + emu::shell_quote(text) + ": " + e.what());
  }
}

std::string choice_list(const OptionSpec& spec) {
  std::string out;
  for (const auto& c : spec.choices) {
    if (!out.empty()) out += '|';
    out += c;
  }
  return out;
}

using emu::shell_quote;

Args parse(const std::vector<std::string>& argv) {
  Args a;
  if (argv.size() < 2) throw UsageError("missing command (list, run, explore, replay, help)");
  a.command = argv[1];
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
    if (is_switch(name)) {
      if (value) throw UsageError("--" + name + " takes no value");
      if (name == "json")
        a.json = true;
      else
        a.opts[name] = "1";
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
  const VariantSpec* variant = nullptr;
  OptionValues values;  // every option as in effect: defaults, command line, pins, derived
  std::string display;  // "ring/no-release"
  // The settings in effect: the flags over ExploreOptions' defaults (run
  // and replay use its `run`, strategy and first seed).
  emu::ExploreOptions settings;
  std::optional<std::string> trace_file;
  // Launch settings from the global launch options (0: the scenario's own).
  std::uint32_t max_active_clusters = 0, ctas_per_sm = 0;

  emu::Kernel make() const {
    emu::Kernel k = scenario->prepare(variant->name, values);
    if (max_active_clusters != 0) k.launch.max_active_clusters = max_active_clusters;
    if (ctas_per_sm != 0) k.launch.ctas_per_sm = ctas_per_sm;
    return k;
  }
  emu::KernelFactory factory() const {
    return [this] { return make(); };
  }
};

const Scenario* find_scenario(const Catalogue& cat, const std::string& name) {
  for (const Scenario& s : cat)
    if (s.name == name) return &s;
  return nullptr;
}

Plan plan(const Args& a, const Catalogue& cat) {
  Plan p;
  if (a.scenario.empty()) throw UsageError("missing SCENARIO[/VARIANT]; `" + a.name + " list` shows them");
  p.scenario = find_scenario(cat, a.scenario);
  if (p.scenario == nullptr) throw UsageError("unknown scenario '" + a.scenario + "'; `" + a.name + " list` shows them");
  for (const auto& v : p.scenario->variants)
    if (v.name == a.variant) p.variant = &v;
  if (p.variant == nullptr) throw UsageError("scenario '" + a.scenario + "' has no variant '" + a.variant + "'");
  p.display = a.scenario + (a.variant.empty() ? "" : "/" + a.variant);

  for (const auto& opt : a.opts) {
    const std::string& name = opt.first;  // not a structured binding: clang 14 cannot capture one
    const auto g = global_options().find(name);
    if (g != global_options().end() && !(is_launch_option(name) && scenario_has(*p.scenario, name))) {
      if (!g->second.empty() && g->second != a.command)
        throw UsageError("--" + name + " belongs to `" + a.name + " " + g->second + "`");
      continue;
    }
    const bool known = std::any_of(p.scenario->options.begin(), p.scenario->options.end(),
                                   [&](const OptionSpec& o) { return o.name == name; });
    if (!known) throw UsageError("unknown option --" + name + " for scenario '" + a.scenario + "'");
  }
  for (const auto& spec : p.scenario->options) {
    std::uint64_t v = spec.def;
    const auto it = a.opts.find(spec.name);
    if (it != a.opts.end()) {
      if (spec.choices.empty()) {
        v = parse_number(spec.name, it->second, spec.min, spec.max);
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
    if (const auto pin = p.variant->pinned.find(spec.name); pin != p.variant->pinned.end()) {
      if (it != a.opts.end() && v != pin->second)
        throw UsageError("--" + spec.name + " " + it->second + " conflicts with variant '" + a.variant +
                         "', which needs --" + spec.name + " " + spec.spell(pin->second));
      v = pin->second;
    }
    p.values[spec.name] = v;
  }
  if (p.scenario->resolve) p.scenario->resolve(p.values);

  // The settings, as the environment's would be (emu::apply_settings); the
  // strategy defaults by command.
  std::vector<emu::GivenSetting> given;
  for (const auto& [name, value] : a.opts)
    if (const emu::Setting* s = emu::find_setting_flag(name)) given.push_back({s, value});
  if (!a.opts.count("strategy"))
    given.push_back({emu::find_setting_flag("strategy"), a.command == "explore" ? "random,pct" : "random"});
  if (const auto errors = emu::apply_settings(p.settings, given, emu::SettingsFront::flags); !errors.empty())
    throw UsageError(errors.front());
  const auto& pf = p.settings.portfolio;
  if (a.command != "explore" && (pf.size() != 1 || pf.front().kind == emu::StrategyKind::exhaustive))
    throw UsageError("--strategy for `" + a.name + " " + a.command + "` must be one of rr, random, pct, pct:D; got '" +
                     a.opts.at("strategy") + "' (portfolios and exhaustive belong to explore)");
  if (p.variant->lane_divergence) p.settings.lane_divergence = true;
  for (const char* name : {"max-active-clusters", "ctas-per-sm"}) {
    const auto it = a.opts.find(name);
    if (it == a.opts.end() || scenario_has(*p.scenario, name)) continue;
    std::uint64_t v = 0;
    try {
      v = emu::parse_whole_number(it->second, 1, 1024);
    } catch (const std::invalid_argument&) {
      throw UsageError("--" + std::string(name) + " must be in [1, 1024], got " + it->second);
    }
    (name[0] == 'm' ? p.max_active_clusters : p.ctas_per_sm) = static_cast<std::uint32_t>(v);
  }
  if (auto it = a.opts.find("trace"); it != a.opts.end()) p.trace_file = it->second;
  // Catch a combination the kernel cannot take, or a launch the hardware
  // could not make (emu::BadLaunch: cluster shape, max-active-clusters
  // beyond the grid, CTAs per SM beyond its limits), before anything runs.
  (void)emu::checked_launch(p.make().launch);
  return p;
}

// The name the program calls itself in its help, messages and reports: its
// file name, so that a user's own program over its own catalogue says
// "pipeline3 explore ...", not "wspipe".
std::string program_name(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0].empty()) return "wspipe";
  const std::string& path = argv[0];
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos || slash + 1 == path.size() ? path : path.substr(slash + 1);
}

std::string with_name(std::string text, const std::string& name) {
  for (std::size_t at = text.find("PROG"); at != std::string::npos; at = text.find("PROG", at + name.size()))
    text.replace(at, 4, name);
  return text;
}

std::string prog_name(const std::vector<std::string>& argv) {
  if (const char* env = std::getenv("WSPIPE_PROG"); env != nullptr && *env != '\0') return env;
  return argv.empty() ? "wspipe" : argv[0];
}

// The scenario's options as in effect: "stages=4 items=64".
std::string option_values(const Plan& p) {
  std::string out;
  for (const auto& spec : p.scenario->options)
    out += (out.empty() ? "" : " ") + spec.name + "=" + spec.spell(p.values.at(spec.name));
  return out;
}

std::string replay_command(const std::string& prog, const Plan& p, const emu::Schedule& s) {
  std::vector<std::string> args = {"replay", p.display};
  for (const auto& spec : p.scenario->options) {
    args.push_back("--" + spec.name);
    args.push_back(spec.spell(p.values.at(spec.name)));
  }
  std::vector<std::string> launch;
  if (p.max_active_clusters != 0) launch.insert(launch.end(), {"--max-active-clusters", std::to_string(p.max_active_clusters)});
  if (p.ctas_per_sm != 0) launch.insert(launch.end(), {"--ctas-per-sm", std::to_string(p.ctas_per_sm)});
  return emu::replay_command(emu::SettingsFront::flags, p.settings.run_options(), s, prog, args, launch);
}

void save_trace(const std::string& file, const emu::Trace& t) {
  try {
    emu::write_trace(file, t);
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
}

// What a command reports: the run shown (if any) and, for explore, how it
// was found.
struct Outcome {
  std::string command;
  const emu::RunResult* run = nullptr;  // the run reported; null: explore found nothing
  const emu::ExploreResult* explored = nullptr;
  std::uint64_t seed = 0;
};

std::string json_result(const Plan& p, const Outcome& o, const std::string& prog) {
  using emu::json_quote;
  std::string options;
  for (const auto& spec : p.scenario->options) {
    const std::uint64_t v = p.values.at(spec.name);
    options += (options.empty() ? "" : ",") + json_quote(spec.name) + ":" +
               (spec.choices.empty() ? std::to_string(v) : json_quote(spec.spell(v)));
  }
  emu::JsonFields j = {
      {"scenario", json_quote(p.display)},
      {"command", json_quote(o.command)},
      {"options", "{" + options + "}"},
      {"strategy", json_quote(o.command == "replay" ? std::string("replay") : emu::to_string(p.settings.portfolio))},
      {"seed", std::to_string(o.seed)},
      {"lane_divergence", p.settings.lane_divergence ? "true" : "false"}};
  const emu::JsonFields result = o.explored ? emu::json_fields(*o.explored) : emu::json_fields(*o.run);
  if (!o.explored) j.emplace_back("runs", "1");
  j.insert(j.end(), result.begin(), result.end());
  emu::insert_after(j, "outcome", {"expect", json_quote(p.variant->expect)});
  emu::insert_after(j, "schedule", {"replay", o.run ? json_quote(replay_command(prog, p, o.run->schedule)) : "null"});
  return emu::to_json(j);
}

int finish(std::ostream& out, const Args& a, const Plan& p, const Outcome& o, const std::string& prog) {
  const emu::RunResult* r = o.run;
  if (p.trace_file && r) save_trace(*p.trace_file, r->trace);
  if (a.json) {
    out << json_result(p, o, prog) << "\n";
    return r && r->status != emu::Status::ok ? kFound : kOk;
  }
  out << a.name << " " << o.command << " " << p.display << " " << option_values(p);
  if (o.command != "replay") out << " strategy=" << emu::to_string(p.settings.portfolio) << " seed=" << o.seed;
  if (p.settings.lane_divergence) out << " lane-divergence";
  if (p.max_active_clusters != 0) out << " max-active-clusters=" << p.max_active_clusters;
  if (p.ctas_per_sm != 0) out << " ctas-per-sm=" << p.ctas_per_sm;
  out << "\n";
  if (o.explored && !r) {
    out << emu::explored_line(*o.explored);
    return kOk;
  }
  if (o.explored)
    out << "found in run " << o.explored->failure->run + 1 << " of " << o.explored->runs << " "
        << emu::strategy_and_seed(*o.explored->failure) << "\n";
  out << r->report();
  out << "expected outcome of " << p.display << ": " << p.variant->expect << "\n";
  out << "schedule: " << r->schedule.encode() << "\n";
  if (o.explored) out << emu::shrunk_line(o.explored->failure->shrink);
  out << "replay:   " << replay_command(prog, p, r->schedule) << "\n";
  if (p.trace_file) out << "trace:    " << *p.trace_file << "\n";
  return r->status == emu::Status::ok ? kOk : kFound;
}

int cmd_list(std::ostream& out, const Catalogue& cat) {
  for (const Scenario& s : cat) {
    for (const auto& v : s.variants) {
      std::string name = s.name + (v.name.empty() ? "" : "/" + v.name);
      name.resize(std::max<std::size_t>(name.size() + 1, 26), ' ');
      std::string expect = "expect=" + v.expect;
      expect.resize(std::max<std::size_t>(expect.size() + 1, 32), ' ');
      out << name << expect << v.help << (v.lane_divergence ? " (in lane-divergence mode)" : "") << "\n";
    }
  }
  out << "\noptions:\n";
  for (const Scenario& s : cat)
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

int cmd_run(const Args& a, const Catalogue& cat, std::ostream& out, const std::string& prog) {
  const Plan p = plan(a, cat);
  emu::RunOptions o = p.settings.run_options();
  const emu::StrategySpec& s = p.settings.portfolio.front();
  o.strategy.kind = s.kind;
  o.strategy.seed = p.settings.first_seed;
  o.strategy.pct_depth = s.pct_depth;
  if (s.kind == emu::StrategyKind::pct) {
    // PCT spreads its change points over the expected length of a run:
    // measure it once with the round-robin strategy.
    emu::RunOptions rr = p.settings.run_options();
    rr.strategy.kind = emu::StrategyKind::round_robin;
    o.strategy.pct_steps = std::max<std::uint64_t>(emu::run(p.make(), rr).steps, 1);
  }
  o.trace = true;
  const emu::RunResult r = emu::run(p.make(), o);
  return finish(out, a, p, {.command = "run", .run = &r, .seed = p.settings.first_seed}, prog);
}

int cmd_replay(const Args& a, const Catalogue& cat, std::ostream& out, const std::string& prog) {
  const auto it = a.opts.find("schedule");
  if (it == a.opts.end()) throw UsageError("replay needs --schedule STR (printed with every failure)");
  const Plan p = plan(a, cat);
  std::string why;
  const auto s = emu::Schedule::decode(it->second, &why);
  if (!s) throw UsageError(why);
  emu::RunResult r;
  try {
    r = emu::replay(p.make(), *s, p.settings.run_options());
  } catch (const emu::ScheduleMismatch& e) {
    throw UsageError(std::string(e.what()) + " (were the scenario options the same as when it was recorded?)");
  }
  return finish(out, a, p, {.command = "replay", .run = &r}, prog);
}

int cmd_explore(const Args& a, const Catalogue& cat, std::ostream& out, std::ostream& err, const std::string& prog) {
  const Plan p = plan(a, cat);
  emu::ExploreOptions o = p.settings;
  o.on_progress = [&](const emu::ExploreProgress& pr) {
    err << "explore " << p.display << ": ";
    if (pr.shrinking) {
      err << "found a failure after " << pr.runs << " runs; shrinking its schedule\n";
      return;
    }
    err << pr.runs << " runs, " << pr.steps << " steps, " << std::fixed << std::setprecision(1) << pr.seconds << " s"
        << (pr.failed ? ", failure found" : ", no failure") << "\n";
    err.unsetf(std::ios::fixed);
  };
  if (o.shard_count > 1) err << "explore " << p.display << ": shard " << o.shard_index << "/" << o.shard_count << "\n";
  const emu::ExploreResult e = emu::explore(p.factory(), o);
  const emu::RunResult* r = e.failure ? &e.failure->result : nullptr;
  return finish(out, a, p, {.command = "explore", .run = r, .explored = &e, .seed = p.settings.first_seed}, prog);
}

}  // namespace

int main(const std::vector<std::string>& argv, const Catalogue& catalogue, std::ostream& out, std::ostream& err) {
  const std::string prog = prog_name(argv);
  const std::string name = program_name(argv);
  try {
    Args a = parse(argv);
    a.name = name;
    if (a.command == "help" || a.command == "--help" || a.command == "-h") {
      out << with_name(kHelp, name) << emu::flags_help() << with_name(kHelpTail, name);
      return kOk;
    }
    if (a.command == "list") return cmd_list(out, catalogue);
    if (a.command == "run") return cmd_run(a, catalogue, out, prog);
    if (a.command == "explore") return cmd_explore(a, catalogue, out, err, prog);
    if (a.command == "replay") return cmd_replay(a, catalogue, out, prog);
    throw UsageError("unknown command '" + a.command + "'");
  } catch (const UsageError& e) {
    err << name << ": " << e.what() << "\n(see `" << name << " help`)\n";
    return kUsage;
  } catch (const emu::BadLaunch& e) {
    err << name << ": bad launch: " << e.what() << "\n";
    return kUsage;
  } catch (const std::invalid_argument& e) {
    err << name << ": " << e.what() << "\n";
    return kUsage;
  }
}

int main(int argc, char** argv, const Catalogue& catalogue) {
  return main(std::vector<std::string>(argv, argv + argc), catalogue, std::cout, std::cerr);
}

}  // namespace wspipe::cli
