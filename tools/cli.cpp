#include "cli.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <optional>
#include <new>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "backends/emu/explain.hpp"
#include "backends/emu/parametric.hpp"
#include "backends/emu/report.hpp"
#include "backends/emu/settings.hpp"
#include "backends/emu/trace.hpp"

namespace wspipe::cli {
namespace {

constexpr int kOk = 0;
constexpr int kFound = 1;
constexpr int kUsage = 2;
constexpr int kOutputError = 3;
constexpr int kResources = 4;   // out of memory or threads
constexpr int kIncomplete = 5;  // an exhaustive search that did not complete
constexpr int kNoRepeat = 6;    // --parametric: every count verified, but the states did not repeat
// An exploration ended by a signal exits 128 + its number, as a shell
// reports a command the signal killed: 130 for SIGINT, 143 for SIGTERM.
constexpr int kSignalBase = 128;

// The help, with PROG for the program's name (program_name()).
const char* kHelp = R"(PROG: run warp-specialized kernels on the wspipe emulator

usage:
  PROG list
  PROG run     SCENARIO[/VARIANT] [options] [--strategy S] [--seed N] [--trace FILE] [--json]
  PROG explore SCENARIO[/VARIANT] [options] [--runs N] [--seconds T] [--strategy LIST] [--jobs N] [--json]
  PROG explore SCENARIO[/VARIANT] --parametric OPTION[:STEP] [--period P] [--max-items N] [options] [--json]
  PROG replay  SCENARIO[/VARIANT] --schedule STR|@FILE [options] [--trace FILE] [--json]
  PROG explain LOGFILE [--seconds T] [--runs N] [--strategy LIST] [--seed N] [--trace FILE]
  PROG help

  list      the scenarios and their variants, one per line, with the outcome
            each must produce (expect=ok, expect=deadlock, expect=<rule>)
  run       one run; prints the report, the schedule and the replay command
  explore   many runs (run i: strategy i mod |LIST|, its seed mixed from
            N0 and i) until the budget is spent or a failure is found; the
            lowest-numbered failing run is shrunk to a short schedule and
            reported. Ctrl-C (SIGINT) or SIGTERM ends it early with the
            report of what was explored (a second one ends it at once).
            With --parametric OPTION[:STEP], the exhaustive search of every
            count n = 1, 2, ... (OPTION = n * STEP; --seconds and --runs per
            count) until the protocol's abstract states repeat every P
            items (--period, default 2 x --stages): then verified for every
            count, under the assumptions of docs/exploration.md ("Parametric
            verdicts"); up to --max-items counts (default 64)
  replay    re-runs a recorded schedule step for step; --schedule @FILE reads
            it from FILE. A schedule longer than 2,000 characters (a long
            run's) is not printed: the report writes it to
            wspipe-schedule-<check>.txt in the current directory and its
            replay command names that file
  explain   a GPU's event log (the CUDA backend's, docs/event-log.md; .gz
            read through gzip) against the emulator: runs the scenario its
            config line names, with its options, until a run's warps do
            what the log's did, in order, with the answers their waits
            saw; then the report, the replay command, and with --trace the
            trace with the log's events beside the emulator's. Otherwise
            the warp and event where the closest run left the log. Each run
            is cut short where it leaves the log. --strategy LIST (default
            exhaustive,random,pct) takes turns; once the exhaustive search
            has covered every class of schedules, no schedule matches.
            Budget: --seconds (default 60 without --runs). Exit status 0
            matched, 1 no schedule matches, 5 no match within the budget
            (docs/explain.md)

options:
)";

// After the settings' lines (emu::flags_help()).
const char* kHelpTail = R"(  --max-active-clusters N
                       launch: at most N clusters run at once, the others launch as
                       running ones exit (0: all at once; the default)
  --ctas-per-sm N      launch: CTAs sharing each SM and its Tensor Memory (default 1)
                       (both: where the scenario has no option of that name)
  --trace FILE         write the (shrunk, failing) run's trace: Chrome/Perfetto
                       JSON, or text if FILE ends in .txt; whole or not at all.
                       Checked before anything runs; an explore that finds
                       nothing removes an older FILE (and says so)
  --json               print one JSON object instead of the report
  scenario options     see `PROG list`; e.g. --stages 4 --items 64
  A value that begins with -- is given as --flag=VALUE.

exit status: 0 nothing found (verdict verified or explored), 1 a violation, deadlock or
livelock found, 2 bad usage or input (before anything runs), 3 an output (the report, the
JSON, the trace) could not be written, 4 the machine or --max-memory ran out of memory or
threads (the message says what would help), 5 an exhaustive search whose budget ran out
before it covered its bound (verdict incomplete: not a pass), 6 with --parametric: every
count searched was verified but the states did not repeat (nothing claimed beyond them),
130 / 143 explore ended by SIGINT / SIGTERM (the report says what was explored).
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
  // A value option given last, or followed by another flag (whose word is
  // then `next`): plan() says it needs a value, once it knows the option.
  std::string missing_value, next;
  std::string name;  // the program's, as it names itself (program_name())
  std::string log;   // explain: the event log's path
};

// Options every scenario takes, and the command each belongs to ("" = all):
// the settings (emu::settings_table()) and the CLI's own.
const std::map<std::string, std::string>& global_options() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> out = {
        {"trace", ""},          {"schedule", "replay"},   {"max-active-clusters", ""}, {"ctas-per-sm", ""},
        {"parametric", "explore"}, {"period", "explore"}, {"max-items", "explore"}};
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
  if (argv.size() < 2) throw UsageError("missing command (list, run, explore, replay, explain, help)");
  a.command = argv[1];
  // `wspipe explore --help ring` asks for help, wherever it asks.
  if (std::any_of(argv.begin() + 1, argv.end(), [](const std::string& t) { return t == "--help" || t == "-h"; })) {
    a.command = "help";
    return a;
  }
  for (std::size_t i = 2; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (tok.rfind("--", 0) != 0 && a.command == "explain") {
      if (!a.log.empty()) throw UsageError("unexpected argument " + shell_quote(tok) + " (one LOGFILE only)");
      a.log = tok;
      continue;
    }
    if (tok.rfind("--", 0) != 0) {
      if (!a.scenario.empty() || !a.variant.empty())
        throw UsageError("unexpected argument " + shell_quote(tok) + " (one SCENARIO[/VARIANT] only)");
      const auto slash = tok.find('/');
      a.scenario = tok.substr(0, slash);
      if (slash != std::string::npos) a.variant = tok.substr(slash + 1);
      if (a.scenario.empty()) throw UsageError("empty scenario name in " + shell_quote(tok));
      continue;
    }
    std::string name = tok.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (is_switch(name)) {
      if (value) throw UsageError("--" + shell_quote(name) + " takes no value");
      if (name == "json")
        a.json = true;
      else
        a.opts[name] = "1";
      continue;
    }
    if (a.opts.count(name)) throw UsageError("--" + shell_quote(name) + " given twice");
    if (!value) {
      // The next word is this option's value unless it is a flag itself:
      // `--trace --json` must not write a file named "--json".
      if (i + 1 >= argv.size() || argv[i + 1].rfind("--", 0) == 0) {
        if (a.missing_value.empty()) {
          a.missing_value = name;
          a.next = i + 1 < argv.size() ? argv[i + 1] : "";
        }
        a.opts[name] = "";
        continue;
      }
      value = argv[++i];
    }
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
  // Launch settings from the global launch options (none: the scenario's
  // own; max_active_clusters 0: every cluster at once).
  std::optional<std::uint32_t> max_active_clusters, ctas_per_sm;

  emu::Kernel make() const {
    emu::Kernel k = scenario->prepare(variant->name, values);
    if (max_active_clusters) k.launch.max_active_clusters = *max_active_clusters;
    if (ctas_per_sm) k.launch.ctas_per_sm = *ctas_per_sm;
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
  if (p.scenario == nullptr)
    throw UsageError("unknown scenario " + shell_quote(a.scenario) + "; `" + a.name + " list` shows them");
  for (const auto& v : p.scenario->variants)
    if (v.name == a.variant) p.variant = &v;
  if (p.variant == nullptr)
    throw UsageError("scenario '" + a.scenario + "' has no variant " + shell_quote(a.variant));
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
    if (!known) throw UsageError("unknown option --" + shell_quote(name) + " for scenario '" + a.scenario + "'");
  }
  if (!a.missing_value.empty())
    throw UsageError("--" + a.missing_value + " needs a value" +
                     (a.next.empty() ? std::string()
                                     : " (the next word, " + shell_quote(a.next) + ", is a flag; if it is the value, "
                                       "write --" + a.missing_value + "=" + shell_quote(a.next) + ")"));
  // A replay follows its schedule: what chooses schedules has no say.
  if (a.command == "replay")
    for (const char* name : {"strategy", "seed", "pct-depth"})
      if (a.opts.count(name))
        throw UsageError(std::string("--") + name + " belongs to `wspipe run` and `wspipe explore`: a replay "
                         "follows its --schedule");
  std::map<std::string, std::uint64_t> given_values;  // the scenario options given, as parsed
  for (const auto& spec : p.scenario->options) {
    std::uint64_t v = spec.def;
    const auto it = a.opts.find(spec.name);
    if (it != a.opts.end()) {
      if (spec.choices.empty()) {
        v = parse_number(spec.name, it->second, spec.min, spec.max);
      } else {
        const auto c = std::find(spec.choices.begin(), spec.choices.end(), it->second);
        if (c == spec.choices.end())
          throw UsageError("--" + spec.name + " must be one of " + choice_list(spec) + ", got " +
                         shell_quote(it->second));
        v = static_cast<std::uint64_t>(c - spec.choices.begin());
      }
    }
    if (v < spec.min || v > spec.max)
      throw UsageError("--" + spec.name + " must be in [" + std::to_string(spec.min) + ", " +
                       std::to_string(spec.max) + "], got " + std::to_string(v));
    if (it != a.opts.end()) given_values[spec.name] = v;
    if (const auto pin = p.variant->pinned.find(spec.name); pin != p.variant->pinned.end()) {
      if (it != a.opts.end() && v != pin->second)
        throw UsageError("--" + spec.name + " " + it->second + " conflicts with variant '" + a.variant +
                         "', which needs --" + spec.name + " " + spec.spell(pin->second));
      v = pin->second;
    }
    p.values[spec.name] = v;
  }
  if (p.scenario->resolve) p.scenario->resolve(p.values);
  // What the scenario derives must not overrule what was asked for.
  for (const auto& spec : p.scenario->options)
    if (const auto g = given_values.find(spec.name); g != given_values.end() && p.values.at(spec.name) != g->second)
      throw UsageError("--" + spec.name + " " + spec.spell(g->second) + " cannot be honoured: with the other options "
                       "given, " + a.scenario + " needs --" + spec.name + " " + spec.spell(p.values.at(spec.name)));

  // The settings, as the environment's would be (emu::apply_settings); the
  // strategy defaults by command.
  std::vector<emu::GivenSetting> given;
  for (const auto& [name, value] : a.opts)
    if (const emu::Setting* s = emu::find_setting_flag(name)) given.push_back({s, value});
  if (!a.opts.count("strategy"))
    given.push_back({emu::find_setting_flag("strategy"), a.command != "explore"     ? "random"
                                                         : a.opts.count("parametric") ? "exhaustive"
                                                                                      : "random,pct,stall"});
  if (const auto errors = emu::apply_settings(p.settings, given, emu::SettingsFront::flags); !errors.empty())
    throw UsageError(errors.front());
  const auto& pf = p.settings.portfolio;
  if (a.command != "explore" && (pf.size() != 1 || pf.front().kind == emu::StrategyKind::exhaustive))
    throw UsageError("--strategy for `" + a.name + " " + a.command + "` must be one of rr, random, pct, pct:D, stall; got '" +
                     a.opts.at("strategy") + "' (portfolios and exhaustive belong to explore)");
  if (p.variant->lane_divergence) p.settings.lane_divergence = true;
  if (p.variant->async_reorder) p.settings.async_reorder = true;
  for (const char* name : {"max-active-clusters", "ctas-per-sm"}) {
    const auto it = a.opts.find(name);
    if (it == a.opts.end() || scenario_has(*p.scenario, name)) continue;
    const bool clusters = name[0] == 'm';  // 0 is every cluster at once; no CTAs per SM is no launch
    (clusters ? p.max_active_clusters : p.ctas_per_sm) =
        static_cast<std::uint32_t>(parse_number(name, it->second, clusters ? 0 : 1, 1024));
  }
  if (auto it = a.opts.find("trace"); it != a.opts.end()) {
    // Before anything runs: an exploration's result must not be lost to a
    // trace file that cannot be written.
    try {
      emu::check_trace_file(it->second);
    } catch (const std::invalid_argument& e) {
      throw UsageError("--trace: " + std::string(e.what()));
    }
    p.trace_file = it->second;
  }
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

// The command that replays `r`, with the try_wait mode it ran in (a
// version 3 schedule may have replayed without spurious time-outs);
// `schedule_argument`: its --schedule value where it is not the encoding
// itself (@FILE).
std::string replay_command(const std::string& prog, const Plan& p, const emu::RunResult& r,
                           const std::optional<std::string>& schedule_argument = std::nullopt) {
  std::vector<std::string> args = {"replay", p.display};
  for (const auto& spec : p.scenario->options) {
    args.push_back("--" + spec.name);
    args.push_back(spec.spell(p.values.at(spec.name)));
  }
  std::vector<std::string> launch;
  if (p.max_active_clusters) launch.insert(launch.end(), {"--max-active-clusters", std::to_string(*p.max_active_clusters)});
  if (p.ctas_per_sm) launch.insert(launch.end(), {"--ctas-per-sm", std::to_string(*p.ctas_per_sm)});
  emu::RunOptions run = p.settings.run_options();
  run.spurious_try_wait = r.spurious_try_wait;
  run.async_reorder = r.async_reorder;
  run.reorder_window = r.reorder_window;
  run.legacy_pieces = r.legacy_pieces;  // its token is of version 5 or older, replayed so anyway
  if (r.spin_out_limit != 0) run.spin_out_limit = r.spin_out_limit;  // 0: a version 4 token, replayed so anyway
  if (schedule_argument) return emu::replay_command(emu::SettingsFront::flags, run, *schedule_argument, prog, args, launch);
  return emu::replay_command(emu::SettingsFront::flags, run, r.schedule, prog, args, launch);
}

// A schedule longer than this is written to a file rather than printed
// (a long run's: a million-item ring's is megabytes).
constexpr std::size_t kPrintedSchedule = 2000;

// Where the report puts a long schedule: wspipe-schedule-<check>.txt in the
// current directory, written whole or not at all. nullopt when it could
// not be written (the report then prints it as it is).
std::optional<std::string> save_long_schedule(const std::string& encoded, const emu::Schedule& s) {
  char name[64];
  std::snprintf(name, sizeof name, "wspipe-schedule-%08x.txt", s.check());
  const std::string path = std::string("./") + name;
  const std::string temp = path + ".part";
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    f << encoded << "\n";
    if (!f.flush()) {
      std::error_code ec;
      std::filesystem::remove(temp, ec);
      return std::nullopt;
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return std::nullopt;
  }
  return path;
}

// A --schedule value: the encoding itself, or @FILE holding it.
std::string schedule_text(const std::string& value) {
  if (value.empty() || value[0] != '@') return value;
  const std::string path = value.substr(1);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError("--schedule " + value + ": cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) text.pop_back();
  if (text.empty()) throw UsageError("--schedule " + value + ": " + path + " is empty");
  return text;
}

// What a command reports: the run shown (if any) and, for explore, how it
// was found.
struct Outcome {
  std::string command;
  const emu::RunResult* run = nullptr;  // the run reported; null: explore found nothing
  const emu::ExploreResult* explored = nullptr;
  std::uint64_t seed = 0;
  int signal = 0;  // the signal that ended the exploration, if one did
  const emu::TraceFileSink* streamed = nullptr;  // the trace, written as the run went
};

// What became of --trace FILE.
struct TraceFile {
  bool written = false;
  bool removed_stale = false;  // nothing failed, and an older FILE was removed
  std::string error;           // it could not be written
};

// Writes the reported run's trace; when there is none (an exploration that
// found nothing), removes an older file at that path, which would otherwise
// pass for this command's trace (a CI step that uploads it, a person who
// opens it).
TraceFile save_trace(const Plan& p, const Outcome& o) {
  TraceFile t;
  if (!p.trace_file) return t;
  if (o.streamed != nullptr) {
    t.written = o.streamed->written();
    t.error = o.streamed->error();
    return t;
  }
  const emu::RunResult* r = o.run;
  if (r == nullptr) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(*p.trace_file, ec)) t.removed_stale = std::filesystem::remove(*p.trace_file, ec);
    if (ec) t.error = "cannot remove the older trace file " + shell_quote(*p.trace_file) + ": " + ec.message();
    return t;
  }
  try {
    emu::write_trace(*p.trace_file, r->trace);
    t.written = true;
  } catch (const std::runtime_error& e) {
    t.error = e.what();
  }
  return t;
}

std::string json_result(const Plan& p, const Outcome& o, const std::string& prog) {
  using emu::json_quote;
  std::string options;
  for (const auto& spec : p.scenario->options) {
    const std::uint64_t v = p.values.at(spec.name);
    // Appended piece by piece: g++ 12 at -O3 warns (-Wrestrict, falsely)
    // on `"," + std::string`.
    if (!options.empty()) options += ',';
    options += json_quote(spec.name);
    options += ':';
    options += spec.choices.empty() ? std::to_string(v) : json_quote(spec.spell(v));
  }
  emu::JsonFields j = {
      {"scenario", json_quote(p.display)},
      {"command", json_quote(o.command)},
      {"options", "{" + options + "}"},
      {"strategy", json_quote(o.command == "replay" ? std::string("replay") : emu::to_string(p.settings.portfolio))},
      {"seed", std::to_string(o.seed)},
      {"lane_divergence", p.settings.lane_divergence ? "true" : "false"},
      {"async_reorder", p.settings.async_reorder ? "true" : "false"}};
  const emu::JsonFields result = o.explored ? emu::json_fields(*o.explored) : emu::json_fields(*o.run);
  if (!o.explored) j.emplace_back("runs", "1");
  j.insert(j.end(), result.begin(), result.end());
  emu::insert_after(j, "outcome", {"expect", json_quote(p.variant->expect)});
  emu::insert_after(j, "schedule", {"replay", o.run ? json_quote(replay_command(prog, p, *o.run)) : "null"});
  return emu::to_json(j);
}

// The run's schedule (a long one in a file: save_long_schedule), then
// `between` (a line, or nothing), then the command that replays it.
void print_replay(std::ostream& out, const std::string& prog, const Plan& p, const emu::RunResult& r,
                  const std::string& between) {
  const std::string encoded = r.schedule.encode();
  std::optional<std::string> saved;
  if (encoded.size() > kPrintedSchedule) saved = save_long_schedule(encoded, r.schedule);
  if (saved) {
    out << "schedule: " << std::string_view(encoded).substr(0, 40) << "... (" << encoded.size()
        << " characters, in " << *saved << ")\n";
  } else {
    out << "schedule: " << encoded << "\n";
  }
  out << between;
  out << "replay:   " << replay_command(prog, p, r, saved ? std::optional<std::string>("@" + *saved) : encoded)
      << "\n";
}

void print_report(std::ostream& out, const Plan& p, const Outcome& o, const TraceFile& trace,
                  const std::string& prog, const std::string& name) {
  const emu::RunResult* r = o.run;
  out << name << " " << o.command << " " << p.display << " " << option_values(p);
  if (o.command != "replay") out << " strategy=" << emu::to_string(p.settings.portfolio) << " seed=" << o.seed;
  if (p.settings.lane_divergence) out << " lane-divergence";
  if (!p.settings.async_reorder) out << " no-async-reorder";
  if (p.max_active_clusters) out << " max-active-clusters=" << *p.max_active_clusters;
  if (p.ctas_per_sm) out << " ctas-per-sm=" << *p.ctas_per_sm;
  out << "\n";
  if (o.signal != 0)
    out << "interrupted by " << (o.signal == SIGINT ? "SIGINT" : o.signal == SIGTERM ? "SIGTERM" : "a signal")
        << ": what was explored until then\n";
  if (o.explored && !r) {
    out << emu::explored_line(*o.explored);
    if (trace.removed_stale) out << "trace:    none (nothing failed); removed the older " << *p.trace_file << "\n";
    return;
  }
  if (o.explored) {
    const emu::Failure& f = *o.explored->failure;
    if (f.measuring_run)
      out << "found in " << emu::run_name(f) << " " << emu::strategy_and_seed(f) << ", before run 1 ("
          << emu::counted(o.explored->runs - 1, "run") << " after it found nothing)\n";
    else if (o.explored->pruned != 0)
      // Run numbers count the runs cut short as equivalent too.
      out << "found in " << emu::run_name(f) << " of " << o.explored->runs + o.explored->pruned << " ("
          << emu::counted(o.explored->pruned, "run") << " cut short as equivalent) " << emu::strategy_and_seed(f)
          << "\n";
    else
      out << "found in " << emu::run_name(f) << " of " << o.explored->runs << " " << emu::strategy_and_seed(f) << "\n";
  }
  out << r->report();
  out << "expected outcome of " << p.display << ": " << p.variant->expect << "\n";
  print_replay(out, prog, p, *r, o.explored ? emu::shrunk_line(o.explored->failure->shrink) : "");
  if (trace.written) out << "trace:    " << *p.trace_file << "\n";
}

// Prints the report (or the JSON) whatever became of the trace, then says
// what could not be written; the exit status says the worst.
int finish(std::ostream& out, std::ostream& err, const Args& a, const Plan& p, const Outcome& o,
           const std::string& prog) {
  const TraceFile trace = save_trace(p, o);
  if (a.json)
    out << json_result(p, o, prog) << "\n";
  else
    print_report(out, p, o, trace, prog, a.name);
  int rc = o.run && o.run->status != emu::Status::ok ? kFound : kOk;
  if (o.explored && o.explored->verdict() == emu::Verdict::incomplete) rc = kIncomplete;
  if (!trace.error.empty()) {
    err << a.name << ": " << emu::printable(trace.error) << "\n";
    rc = kOutputError;
  }
  // Buffered output fails only when flushed (a full disk, /dev/full).
  if (!out.flush()) {
    err << a.name << ": the " << (a.json ? "JSON" : "report") << " could not be written to standard output\n";
    rc = kOutputError;
  }
  return o.signal != 0 ? kSignalBase + o.signal : rc;
}

int cmd_list(std::ostream& out, const Catalogue& cat) {
  for (const Scenario& s : cat) {
    for (const auto& v : s.variants) {
      std::string name = s.name + (v.name.empty() ? "" : "/" + v.name);
      name.resize(std::max<std::size_t>(name.size() + 1, 26), ' ');
      std::string expect = "expect=" + v.expect;
      expect.resize(std::max<std::size_t>(expect.size() + 1, 32), ' ');
      out << name << expect << v.help << (v.lane_divergence ? " (in lane-divergence mode)" : "")
          << (v.async_reorder ? " (loads out of issue order, always)" : "") << "\n";
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

int cmd_run(const Args& a, const Catalogue& cat, std::ostream& out, std::ostream& err, const std::string& prog) {
  const Plan p = plan(a, cat);
  emu::RunOptions o = p.settings.run_options();
  const emu::StrategySpec& s = p.settings.portfolio.front();
  o.strategy.kind = s.kind;
  o.strategy.seed = emu::run_seed(p.settings.first_seed, 0);  // run 0 of `explore --seed N`
  o.strategy.pct_depth = s.pct_depth;
  if (s.kind == emu::StrategyKind::pct) {
    // PCT spreads its change points over the expected length of a run:
    // measure it once with the round-robin strategy.
    emu::RunOptions rr = p.settings.run_options();
    rr.strategy.kind = emu::StrategyKind::round_robin;
    o.strategy.pct_steps = std::max<std::uint64_t>(emu::run(p.make(), rr).steps, 1);
  }
  // The trace is kept only where it is used: for --trace, written to the
  // file as the run goes (the run holds only its last events), or for a
  // failing run's report (the events before a violation or a deadlock). A
  // run with neither keeps none, however long (`run ring --items 1000000`
  // held a 646 MB trace it never showed); a failing one is replayed with it.
  std::optional<emu::TraceFileSink> sink;
  if (p.trace_file) sink.emplace(*p.trace_file);
  o.trace = sink.has_value();
  o.trace_sink = sink ? &*sink : nullptr;
  emu::RunResult r = emu::run(p.make(), o);
  if (!o.trace && r.status != emu::Status::ok) r = emu::replay(p.make(), r.schedule, o);
  return finish(out, err, a, p,
                {.command = "run", .run = &r, .seed = p.settings.first_seed, .streamed = sink ? &*sink : nullptr},
                prog);
}

int cmd_replay(const Args& a, const Catalogue& cat, std::ostream& out, std::ostream& err, const std::string& prog) {
  const auto it = a.opts.find("schedule");
  if (it == a.opts.end()) throw UsageError("replay needs --schedule STR or @FILE (printed with every failure)");
  const Plan p = plan(a, cat);
  std::string why;
  const auto s = emu::Schedule::decode(schedule_text(it->second), &why);
  if (!s) throw UsageError(emu::printable(why));
  std::optional<emu::TraceFileSink> sink;
  if (p.trace_file) sink.emplace(*p.trace_file);
  emu::RunOptions o = p.settings.run_options();
  o.trace_sink = sink ? &*sink : nullptr;
  emu::RunResult r;
  try {
    r = emu::replay(p.make(), *s, o);
  } catch (const emu::ScheduleMismatch& e) {
    throw UsageError(e.what());  // it says why and what to do
  }
  return finish(out, err, a, p, {.command = "replay", .run = &r, .streamed = sink ? &*sink : nullptr}, prog);
}

// SIGINT and SIGTERM during an exploration: the handler only records the
// signal (a lock-free atomic store is async-signal-safe); the exploration
// polls it between runs and while shrinking, and ends with its report.
// SA_RESETHAND restores the default action, so a second signal ends the
// program at once.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void wspipe_cli_on_signal(int sig) { g_signal.store(sig); }

class SignalsEndExploration {
 public:
  SignalsEndExploration() {
    g_signal.store(0);
    for (std::size_t i = 0; i < 2; ++i) {
      struct sigaction sa {};
      sa.sa_handler = wspipe_cli_on_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESETHAND | SA_RESTART;
      // A signal ignored when the program started (nohup, a non-interactive
      // shell's background job) stays ignored.
      installed_[i] = ::sigaction(kSignals[i], nullptr, &old_[i]) == 0 && old_[i].sa_handler != SIG_IGN &&
                      ::sigaction(kSignals[i], &sa, nullptr) == 0;
    }
  }
  ~SignalsEndExploration() {
    for (std::size_t i = 0; i < 2; ++i)
      if (installed_[i]) ::sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalsEndExploration(const SignalsEndExploration&) = delete;
  SignalsEndExploration& operator=(const SignalsEndExploration&) = delete;
  const std::atomic<int>* flag() const { return &g_signal; }

 private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  struct sigaction old_[2] = {};
  bool installed_[2] = {false, false};
};

int cmd_explore(const Args& a, const Catalogue& cat, std::ostream& out, std::ostream& err, const std::string& prog) {
  for (const char* name : {"period", "max-items"})
    if (a.opts.count(name)) throw UsageError(std::string("--") + name + " belongs to `explore --parametric`");
  const Plan p = plan(a, cat);
  emu::ExploreOptions o = p.settings;
  o.on_progress = [&](const emu::ExploreProgress& pr) {
    err << "explore " << p.display << ": ";
    if (pr.shrinking) {
      err << "found a failure after " << emu::counted(pr.runs, "run") << "; shrinking its schedule\n";
      return;
    }
    err << emu::counted(pr.runs, "run") << ", " << pr.steps << " steps, " << std::fixed << std::setprecision(1)
        << pr.seconds << " s" << (pr.failed ? ", failure found" : ", no failure") << "\n";
    err.unsetf(std::ios::fixed);
  };
  if (o.shard_count > 1) err << "explore " << p.display << ": shard " << o.shard_index << "/" << o.shard_count << "\n";
  const SignalsEndExploration signals;
  o.interrupt = signals.flag();
  const emu::ExploreResult e = emu::explore(p.factory(), o);
  const emu::RunResult* r = e.failure ? &e.failure->result : nullptr;
  return finish(out, err, a, p,
                {.command = "explore", .run = r, .explored = &e, .seed = p.settings.first_seed,
                 .signal = e.interrupted ? g_signal.load() : 0},
                prog);
}

// `explore --parametric OPTION[:STEP]`: emu::verify_parametric over the
// scenario's numeric option OPTION, set to n * STEP for the count n.
int cmd_parametric(const Args& a, const Catalogue& cat, std::ostream& out, std::ostream& err, const std::string& prog) {
  const Plan p = plan(a, cat);
  const std::string& text = a.opts.at("parametric");
  const std::string name = text.substr(0, text.find(':'));
  const auto spec = std::find_if(p.scenario->options.begin(), p.scenario->options.end(),
                                 [&](const OptionSpec& o) { return o.name == name && o.choices.empty(); });
  if (spec == p.scenario->options.end())
    throw UsageError("--parametric " + shell_quote(text) + ": scenario '" + a.scenario + "' has no numeric option --" +
                     shell_quote(name) + " to count items with");
  const std::uint64_t step =
      name.size() < text.size() ? parse_number("parametric", text.substr(name.size() + 1), 1, spec->max) : 1;
  if (a.opts.count(name)) throw UsageError("--" + name + " is the count --parametric varies: leave it out");
  if (p.variant->pinned.count(name))
    throw UsageError("variant '" + a.variant + "' pins --" + name + ": --parametric cannot vary it");
  const auto& pf = p.settings.portfolio;
  if (a.opts.count("strategy") && (pf.size() != 1 || pf.front().kind != emu::StrategyKind::exhaustive))
    throw UsageError("--parametric searches every count exhaustively: --strategy exhaustive, or none");
  if (p.settings.preemptions) throw UsageError("--parametric searches every class of schedules: no --preemptions");
  if (p.settings.shard_count > 1) throw UsageError("--parametric runs on one job: no --shard");
  emu::ParametricOptions o;
  o.search = p.settings;
  if (const auto it = a.opts.find("period"); it != a.opts.end()) {
    o.period = static_cast<std::uint32_t>(parse_number("period", it->second, 1, 1024));
  } else if (scenario_has(*p.scenario, "stages")) {
    o.period = static_cast<std::uint32_t>(2 * p.values.at("stages"));
  } else {
    throw UsageError("--parametric needs --period for scenario '" + a.scenario + "', which has no --stages");
  }
  if (const auto it = a.opts.find("max-items"); it != a.opts.end())
    o.max_items = static_cast<std::uint32_t>(parse_number("max-items", it->second, 2 * o.period, 1'000'000));
  if (step < spec->min)
    throw UsageError("--parametric " + shell_quote(text) + ": one item is --" + name + " " + std::to_string(step) +
                     ", below its minimum, " + std::to_string(spec->min) + " (give the step: " + name + ":" +
                     std::to_string(spec->min) + ")");
  if (std::uint64_t{o.max_items} * step > spec->max)
    throw UsageError("--max-items " + std::to_string(o.max_items) + " counts of --" + name + " " +
                     std::to_string(step) + " pass its maximum, " + std::to_string(spec->max));
  // The plan at count n; its kernels are made from a copy, on the search's thread.
  auto at = [&](std::uint32_t n) {
    Plan q = p;
    q.values[name] = n * step;
    if (q.scenario->resolve) q.scenario->resolve(q.values);
    return q;
  };
  const SignalsEndExploration signals;
  o.search.interrupt = signals.flag();
  o.search.on_progress = nullptr;
  const emu::ParametricResult r = emu::verify_parametric(
      [&](std::uint32_t n) -> emu::KernelFactory { return [q = at(n)] { return q.make(); }; }, o);
  const emu::Failure* f = r.failing && r.failing->failure ? &*r.failing->failure : nullptr;
  const std::string replay = f != nullptr ? replay_command(prog, at(r.counts.back().items), f->result) : "";
  if (a.json) {
    using emu::json_quote;
    std::string counts;
    for (const emu::ParametricCount& c : r.counts)
      counts += (counts.empty() ? "" : ",") + emu::to_json({{"count", std::to_string(c.items)},
                                                           {"value", std::to_string(c.items * step)},
                                                           {"verdict", json_quote(std::string(to_string(c.verdict)))},
                                                           {"runs", std::to_string(c.runs)},
                                                           {"pruned", std::to_string(c.pruned)},
                                                           {"states", std::to_string(c.states)},
                                                           {"transitions", std::to_string(c.transitions)},
                                                           {"seconds", std::to_string(c.seconds)}});
    out << emu::to_json({{"scenario", json_quote(p.display)},
                         {"command", json_quote("explore")},
                         {"parametric", json_quote(name)},
                         {"step", std::to_string(step)},
                         {"period", std::to_string(r.period)},
                         {"verdict", json_quote(std::string(to_string(r.verdict)))},
                         {"from_items", std::to_string(r.min_items)},
                         {"repeats_from", std::to_string(r.repeats_from)},
                         {"difference", json_quote(r.difference)},
                         {"outcome", f != nullptr ? json_quote(f->outcome) : "null"},
                         {"replay", f != nullptr ? json_quote(replay) : "null"},
                         {"seconds", std::to_string(r.seconds)},
                         {"counts", "[" + counts + "]"}})
        << "\n";
  } else {
    out << a.name << " explore " << p.display << " --parametric " << name << ":" << step;
    for (const auto& o2 : p.scenario->options)
      if (o2.name != name) out << " " << o2.name << "=" << o2.spell(p.values.at(o2.name));
    out << " period=" << r.period;
    if (p.settings.lane_divergence) out << " lane-divergence";
    if (!p.settings.async_reorder) out << " no-async-reorder";
    if (!p.settings.spurious_try_wait) out << " no-spurious-try-wait";
    out << "\n" << r.report();
    if (f != nullptr) out << "replay:   " << replay << "\n";
  }
  if (!out.flush()) {
    err << a.name << ": cannot write the report\n";
    return kOutputError;
  }
  if (r.failing && r.failing->interrupted) return kSignalBase + g_signal.load();
  switch (r.verdict) {
    case emu::ParametricVerdict::holds: return kOk;
    case emu::ParametricVerdict::found: return kFound;
    case emu::ParametricVerdict::incomplete: return kIncomplete;
    case emu::ParametricVerdict::does_not_repeat: return kNoRepeat;
  }
  return kIncomplete;
}

// explain's own budget and strategies, taken out of `a.opts` (plan() would
// give them to explore alone).
struct ExplainBudget {
  std::vector<emu::StrategySpec> portfolio = emu::ExplainOptions{}.portfolio;
  std::uint64_t seed = 1, runs = 0;
  double seconds = 60;
};

ExplainBudget explain_budget(Args& a) {
  ExplainBudget b;
  auto take = [&](const char* name) -> std::optional<std::string> {
    const auto it = a.opts.find(name);
    if (it == a.opts.end()) return std::nullopt;
    std::string v = it->second;
    a.opts.erase(it);
    return v;
  };
  if (const auto v = take("strategy")) {
    b.portfolio.clear();
    for (std::size_t pos = 0; pos <= v->size();) {
      const std::size_t comma = std::min(v->find(',', pos), v->size());
      std::string why;
      const auto spec = emu::parse_strategy_spec(std::string_view(*v).substr(pos, comma - pos), &why);
      if (!spec) throw UsageError("--strategy " + shell_quote(*v) + ": " + why);
      b.portfolio.push_back(*spec);
      pos = comma + 1;
    }
  }
  if (const auto v = take("seed")) b.seed = parse_number("seed", *v, 0, ~std::uint64_t{0});
  if (const auto v = take("runs")) {
    b.runs = parse_number("runs", *v, 1, ~std::uint64_t{0});
    b.seconds = 0;
  }
  if (const auto v = take("seconds")) {
    char* end = nullptr;
    b.seconds = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size() || !(b.seconds >= 0) || b.seconds > 1e9)
      throw UsageError("--seconds " + shell_quote(*v) + ": must be a number of seconds >= 0");
    if (b.seconds == 0 && b.runs == 0) throw UsageError("--seconds 0 is no time limit: give --runs N too");
  }
  return b;
}

// The scenario, variant and options a log's config line names:
// "scenario=ring/no-release stages=4 items=1000 release=lanes".
void plan_from_config(Args& a, const std::string& config) {
  std::istringstream words(config);
  bool named = false;
  for (std::string w; words >> w;) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("the log's config line has " + shell_quote(w) + " where NAME=VALUE belongs: " +
                       shell_quote(config));
    const std::string name = w.substr(0, eq), value = w.substr(eq + 1);
    if (name == "scenario") {
      const auto slash = value.find('/');
      a.scenario = value.substr(0, slash);
      a.variant = slash == std::string::npos ? "" : value.substr(slash + 1);
      named = true;
      continue;
    }
    if (a.opts.count(name))
      throw UsageError("--" + name + " is the log's (its config line says " + shell_quote(w) + "): leave it out");
    a.opts[name] = value;
  }
  if (!named || a.scenario.empty())
    throw UsageError("the log's config line names no scenario (scenario=NAME[/VARIANT]): " + shell_quote(config) +
                     "; a kernel of your own is explained through the library (emu::explain, docs/explain.md)");
}

int cmd_explain(const Args& given, const Catalogue& cat, std::ostream& out, std::ostream& err,
                const std::string& prog) {
  if (given.log.empty()) throw UsageError("explain needs LOGFILE: an event log the CUDA backend saved");
  if (given.json) throw UsageError("--json belongs to run, explore and replay");
  cuda::EventLogFile log;
  try {
    log = emu::read_event_log(given.log);
  } catch (const cuda::EventLogParseError& e) {
    throw UsageError(given.log + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  Args a = given;
  const ExplainBudget budget = explain_budget(a);
  plan_from_config(a, log.config);
  if (find_scenario(cat, a.scenario) == nullptr)
    throw UsageError(given.log + ": its config line names scenario " + shell_quote(a.scenario) +
                     ", which is not in this program's catalogue; `" + a.name + " list` shows them");
  const Plan p = plan(a, cat);
  emu::ExplainOptions o;
  static_cast<emu::RunOptions&>(o) = p.settings.run_options();
  o.portfolio = budget.portfolio;
  o.first_seed = budget.seed;
  o.runs = budget.runs;
  o.seconds = budget.seconds;
  o.on_progress = [&](const emu::ExplainProgress& pr) {
    err << "explain " << given.log << ": " << emu::counted(pr.runs, "run") << " (" << pr.cut
        << " cut short), the furthest followed " << pr.followed << " of " << pr.events << " events, " << std::fixed
        << std::setprecision(1) << pr.seconds << " s\n";
    err.unsetf(std::ios::fixed);
  };
  const SignalsEndExploration signals;
  o.interrupt = signals.flag();
  const emu::ExplainResult r = emu::explain(p.factory(), log, o);

  out << a.name << " explain " << given.log << ": " << p.display << " " << option_values(p) << "\n";
  out << "log:      " << log.kernel << " launch " << log.launch << ", " << emu::counted(log.warps.size(), "warp")
      << " logged, " << r.log_events << " events";
  if (log.trap)
    out << "; trap: " << (log.trap->reason == cuda::TrapReason::check ? "check" : "watchdog") << " in warp "
        << log.trap->warp << " on 0x" << std::hex << log.trap->bar << std::dec << " parity " << log.trap->parity
        << " at " << log.source_name(log.trap->file) << ":" << log.trap->line;
  out << "\n" << r.report();
  std::string trace_error;
  if (r.matched) {
    print_replay(out, prog, p, r.run, "");
    if (p.trace_file) {
      try {
        emu::write_explained_trace(*p.trace_file, r, log);
        out << "trace:    " << *p.trace_file << " (the GPU's events beside the emulator's)\n";
      } catch (const std::exception& e) {
        trace_error = e.what();
      }
    }
  } else if (p.trace_file) {
    out << "trace:    none (no run matched)\n";
  }
  int rc = r.matched ? kOk : r.searched_all ? kFound : kIncomplete;
  if (!trace_error.empty()) {
    err << a.name << ": " << emu::printable(trace_error) << "\n";
    rc = kOutputError;
  }
  if (!out.flush()) {
    err << a.name << ": the report could not be written to standard output\n";
    rc = kOutputError;
  }
  return r.interrupted ? kSignalBase + g_signal.load() : rc;
}

}  // namespace

int main(const std::vector<std::string>& argv, const Catalogue& catalogue, std::ostream& out, std::ostream& err) {
  const std::string prog = prog_name(argv);
  const std::string name = program_name(argv);
  try {
    Args a = parse(argv);
    a.name = name;
    if (a.command == "help") {
      out << with_name(kHelp, name) << emu::flags_help() << with_name(kHelpTail, name);
      return out.flush() ? kOk : kOutputError;
    }
    if (a.command == "list") {
      cmd_list(out, catalogue);
      return out.flush() ? kOk : kOutputError;
    }
    if (a.command == "run") return cmd_run(a, catalogue, out, err, prog);
    if (a.command == "explore" && a.opts.count("parametric")) return cmd_parametric(a, catalogue, out, err, prog);
    if (a.command == "explore") return cmd_explore(a, catalogue, out, err, prog);
    if (a.command == "replay") return cmd_replay(a, catalogue, out, err, prog);
    if (a.command == "explain") return cmd_explain(a, catalogue, out, err, prog);
    throw UsageError("unknown command " + shell_quote(a.command));
  } catch (const UsageError& e) {
    err << name << ": " << e.what() << "\n(see `" << name << " help`)\n";
    return kUsage;
  } catch (const emu::BadLaunch& e) {
    err << name << ": bad launch: " << e.what() << "\n";
    return kUsage;
  } catch (const std::invalid_argument& e) {
    err << name << ": " << e.what() << "\n";
    return kUsage;
  } catch (const emu::OutOfResources& e) {
    err << name << ": " << e.what() << "\n";
    return kResources;
  } catch (const std::bad_alloc&) {
    err << name << ": out of memory: a smaller configuration, or no MMA memo (--mma-memo-mib 0), needs less\n";
    return kResources;
  } catch (const std::system_error& e) {
    err << name << ": " << e.what() << " (out of threads or memory?)\n";
    return kResources;
  }
}

int main(int argc, char** argv, const Catalogue& catalogue) {
  return main(std::vector<std::string>(argv, argv + argc), catalogue, std::cout, std::cerr);
}

}  // namespace wspipe::cli
