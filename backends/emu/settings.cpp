#include "settings.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

namespace wspipe::emu {

// What the settings' rules read and write while one front's settings are
// applied: the options, and what a later rule needs from an earlier one.
struct SettingsState {
  ExploreOptions& options;
  std::uint32_t pct_depth = StrategySpec{StrategyKind::pct}.pct_depth;
  std::optional<std::string> strategy = {};  // the text given; parsed once the depth is known
};

namespace {

constexpr std::uint64_t kNoMax = std::numeric_limits<std::uint64_t>::max();

// A size given in MiB (0 .. max_mib), in bytes.
std::size_t parse_mib(std::string_view t, std::uint64_t max_mib) {
  return static_cast<std::size_t>(parse_whole_number(t, 0, max_mib)) << 20;
}

// A decimal number as a person writes one: digits, an optional fraction,
// an optional exponent; no sign, no hex, no inf or nan, no spaces (what
// std::from_chars alone would take differs between standard libraries:
// libstdc++ 12 read "0x10" as 16).
bool is_plain_decimal(std::string_view t) {
  std::size_t i = 0, digits = 0;
  auto run = [&] {
    const std::size_t from = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i - from;
  };
  digits += run();
  if (i < t.size() && t[i] == '.') {
    ++i;
    digits += run();
  }
  if (digits == 0) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (run() == 0) return false;
  }
  return i == t.size();
}

double parse_seconds(std::string_view text) {
  double v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!is_plain_decimal(text) || ec != std::errc() || end != text.data() + text.size() || !(v >= 0) || v > 1e7)
    throw std::invalid_argument("must be a number of seconds >= 0");
  return v;
}

bool parse_switch(std::string_view text) {
  if (text != "1" && text != "0") throw std::invalid_argument("must be 1 (on) or 0 (off)");
  return text == "1";
}

std::uint32_t parse_u32(std::string_view text, std::uint32_t min, std::uint32_t max) {
  return static_cast<std::uint32_t>(parse_whole_number(text, min, max));
}

// I/N, 0 <= I < N.
std::pair<std::uint32_t, std::uint32_t> parse_shard(std::string_view text) {
  const char* why = "must be I/N with 0 <= I < N (shards are numbered from 0)";
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) throw std::invalid_argument(why);
  try {
    const std::uint32_t n = parse_u32(text.substr(slash + 1), 1, std::numeric_limits<std::uint32_t>::max());
    const std::uint32_t i = parse_u32(text.substr(0, slash), 0, n - 1);
    return {i, n};
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(why);
  }
}

const Setting kSettings[] = {
    {"strategy", "WSPIPE_STRATEGY", "the {} strategy", "S",
     "run: rr | random | pct | pct:D | stall (default random)\n"
     "explore: a comma-separated portfolio of those, or\n"
     "exhaustive                      (default random,pct:3,stall)",
     false, [](SettingsState& s, std::string_view t) { s.strategy = std::string(t); }},
    {"seed", "WSPIPE_SEED", "first_seed = {}", "N",
     "the first run's seed; the others' are mixed from\n"
     "it and their run numbers              (default 1)",
     false,
     [](SettingsState& s, std::string_view t) { s.options.first_seed = parse_whole_number(t, 0, kNoMax); }},
    {"pct-depth", "WSPIPE_PCT_DEPTH", "pct depth {}", "D", "the depth of a plain `pct`            (default 3)",
     false, [](SettingsState& s, std::string_view t) { s.pct_depth = parse_u32(t, 1, 16); }},
    {"runs", "WSPIPE_RUNS", "runs = {}", "N", "explore: stop after N runs (run numbers 0..N-1)", true,
     [](SettingsState& s, std::string_view t) { s.options.runs = parse_whole_number(t, 1, kNoMax); }},
    {"seconds", "WSPIPE_SECONDS", "seconds = {}", "T",
     "explore: stop after T seconds         (default 10 without --runs;\n"
     "0 with exhaustive: until its search is complete),\n"
     "counted once the first run has run",
     true, [](SettingsState& s, std::string_view t) { s.options.seconds = parse_seconds(t); }},
    {"jobs", "WSPIPE_JOBS", "jobs = {}", "N", "explore: threads                      (default: the machine's cores)",
     true, [](SettingsState& s, std::string_view t) { s.options.jobs = parse_u32(t, 1, 1024); }},
    {"shard", "WSPIPE_SHARD", "shard {}", "I/N",
     "explore: only the run numbers i with i mod N = I\n"
     "(exhaustive: the parts j of its sharded search\n"
     "with j mod N = I)",
     true,
     [](SettingsState& s, std::string_view t) {
       std::tie(s.options.shard_index, s.options.shard_count) = parse_shard(t);
       s.options.sharded = true;
     }},
    {"preemptions", "WSPIPE_PREEMPTIONS", "preemptions = {}", "K",
     "explore --strategy exhaustive: every schedule with at most K\n"
     "preemptions, with no reduction (none is sound under a bound)\n"
     "(default: no bound, every class of equivalent schedules, with\n"
     "source sets)",
     true,
     [](SettingsState& s, std::string_view t) { s.options.preemptions = parse_u32(t, 0, 64); }},
    {"no-reduction", "WSPIPE_NO_REDUCTION", "reduce = false", "",
     "explore --strategy exhaustive: no partial-order reduction\n"
     "(every schedule; for comparison; a bounded search has none)",
     true, [](SettingsState& s, std::string_view t) { s.options.reduce = !parse_switch(t); }},
    {"no-shrink", "WSPIPE_NO_SHRINK", "shrink = false", "", "explore: report the failing schedule as found", true,
     [](SettingsState& s, std::string_view t) { s.options.shrink = !parse_switch(t); }},
    {"shrink-seconds", "WSPIPE_SHRINK_SECONDS", "shrink_seconds = {}", "T",
     "explore: time for shrinking           (default 20)", true,
     [](SettingsState& s, std::string_view t) { s.options.shrink_seconds = parse_seconds(t); }},
    {"max-steps", "WSPIPE_MAX_STEPS", "run.max_steps = {}", "N",
     "step budget per run; running out is a livelock (default 5000000)", false,
     [](SettingsState& s, std::string_view t) { s.options.max_steps = parse_whole_number(t, 1, kNoMax); }},
    {"spurious-try-wait", "WSPIPE_SPURIOUS_TRY_WAIT", "run.spurious_try_wait = true", "",
     "try_wait may time out on an incomplete phase, as PTX allows\n"
     "(the default; a time-out is a choice every strategy explores)",
     false, [](SettingsState& s, std::string_view t) { s.options.spurious_try_wait = parse_switch(t); }},
    {"no-spurious-try-wait", "WSPIPE_NO_SPURIOUS_TRY_WAIT", "run.spurious_try_wait = false", "",
     "try_wait times out only when nothing else can move\n"
     "(fewer schedules)",
     false, [](SettingsState& s, std::string_view t) { s.options.spurious_try_wait = !parse_switch(t); }},
    {"spin-out-limit", "WSPIPE_SPIN_OUT_LIMIT", "run.spin_out_limit = {}", "N",
     "a try_wait loop still spinning after N time-outs in a row is\n"
     "taken to spin until its phase completes (default 1024; a loop\n"
     "that counts more tries than N before a fallback needs more)",
     false, [](SettingsState& s, std::string_view t) { s.options.spin_out_limit = parse_u32(t, kSingleTimeOuts + 1, 1u << 24); }},
    {"mma-memo-mib", "WSPIPE_MMA_MEMO_MIB", "run.mma_memo_bytes = {} MiB", "N",
     "most memory per thread for the MMAs already computed (products\n"
     "and accumulator chains), reused when an MMA's operands repeat;\n"
     "it grows past 32 MiB only by what was found again\n"
     "(0: none, every MMA updates D cell by cell; default 512)",
     false, [](SettingsState& s, std::string_view t) { s.options.mma_memo_bytes = parse_mib(t, 1 << 20); }},
    {"max-memory", "WSPIPE_MAX_MEMORY", "run.max_memory_bytes = {} MiB", "MIB",
     "cap on the memory of the emulator's large buffers (CTAs' shared\n"
     "memory and Tensor Memory, traces, MMA memos), shared by every job;\n"
     "a run that would pass it ends with an error naming what needed it\n"
     "(exit 4; default 0: no cap)",
     false, [](SettingsState& s, std::string_view t) { s.options.max_memory_bytes = parse_mib(t, 1 << 30); }},
    {"lane-divergence", "WSPIPE_LANE_DIVERGENCE", "run.lane_divergence = true", "",
     "run each warp as two lanes (0 and 31) in lockstep and report\n"
     "where they differ: a branch or an operand at a collective\n"
     "instruction, elect or barrier wait (slower; variants whose\n"
     "bug needs it turn it on themselves)",
     false, [](SettingsState& s, std::string_view t) { s.options.lane_divergence = parse_switch(t); }},
    {"async-reorder", "WSPIPE_ASYNC_REORDER", "run.async_reorder = true", "",
     "TMA loads may complete out of issue order and in pieces, as\n"
     "PTX allows (the default; the strategies pick the orders)",
     false, [](SettingsState& s, std::string_view t) { s.options.async_reorder = parse_switch(t); }},
    {"reorder-window", "WSPIPE_REORDER_WINDOW", "run.reorder_window = {}", "N",
     "how far back in its TMA engine's queue a load may complete from,\n"
     "ahead of the older operations (default 3; each position more\n"
     "costs the complete search schedules); a verdict names the runs\n"
     "where a load was queued further back",
     false, [](SettingsState& s, std::string_view t) { s.options.reorder_window = parse_u32(t, 1, 1024); }},
    {"no-async-reorder", "WSPIPE_NO_ASYNC_REORDER", "run.async_reorder = false", "",
     "TMA loads complete whole, in issue order (fewer schedules;\n"
     "variants whose bug needs\n"
     "loads out of order keep them)",
     false, [](SettingsState& s, std::string_view t) { s.options.async_reorder = !parse_switch(t); }},
};

const Setting& setting(std::string_view flag) {
  const Setting* s = find_setting_flag(flag);
  if (s == nullptr) throw std::logic_error("no setting --" + std::string(flag));
  return *s;
}

bool is_exhaustive(const ExploreOptions& o) {
  return std::any_of(o.portfolio.begin(), o.portfolio.end(),
                     [](const StrategySpec& s) { return s.kind == StrategyKind::exhaustive; });
}

const GivenSetting* given_in(std::span<const GivenSetting> given, const Setting& s) {
  const auto it = std::find_if(given.begin(), given.end(), [&](const GivenSetting& g) { return g.setting == &s; });
  return it == given.end() ? nullptr : &*it;
}

// A plain "pct" in `text` with the depth given.
std::string with_pct_depth(std::string_view text, std::uint32_t depth) {
  std::string out;
  for (std::size_t pos = 0; pos <= text.size();) {
    const auto comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    if (pos != 0) out += ',';
    out += item == "pct" ? "pct:" + std::to_string(depth) : std::string(item);
    pos = comma + 1;
  }
  return out;
}

std::string number(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::span<const Setting> settings_table() { return kSettings; }

const Setting* find_setting_flag(std::string_view flag) {
  for (const Setting& s : kSettings)
    if (s.flag == flag) return &s;
  return nullptr;
}

const Setting* find_setting_env(std::string_view env) {
  for (const Setting& s : kSettings)
    if (s.env == env) return &s;
  return nullptr;
}

std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string shell_quote(std::string_view s) {
  if (std::any_of(s.begin(), s.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return c < 0x20 || c >= 0x7f;
      })) {
    std::string q = "$'";
    for (const char c : s) q += c == '\'' ? std::string("\\'") : printable(std::string_view(&c, 1));
    return q + "'";
  }
  const bool plain = !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                       "0123456789_./:=@%+,-") == std::string_view::npos;
  if (plain) return std::string(s);
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string spell_setting(const Setting& s, std::string_view value, SettingsFront front) {
  switch (front) {
    case SettingsFront::flags:
    {
      std::string out = "--";  // appended: g++ 12 -O3 warns falsely (-Wrestrict) on "..." + std::string
      out += s.flag;
      if (!s.arg.empty()) {
        out += ' ';
        out += shell_quote(value);
      }
      return out;
    }
    case SettingsFront::environment:
      return std::string(s.env) + "=" + shell_quote(value);
    case SettingsFront::code:
      break;
  }
  std::string out(s.code);
  if (const auto at = out.find("{}"); at != std::string::npos) out.replace(at, 2, value);
  return out;
}

std::uint64_t parse_whole_number(std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    std::string why = "must be a whole number";
    if (max != kNoMax)
      why += " in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    else if (min > 0)
      why += " >= " + std::to_string(min);
    throw std::invalid_argument(why);
  }
  return v;
}

void validate_settings(const ExploreOptions& o, SettingsFront front, std::span<const GivenSetting> given) {
  // A setting as this front spells it when it gave it, else as the code;
  // a setting the message suggests, as this front would take it.
  auto spell = [&](const Setting& s, std::string_view value) {
    return spell_setting(s, value, given_in(given, s) ? front : SettingsFront::code);
  };
  auto suggest = [&](const Setting& s, std::string_view value) { return spell_setting(s, value, front); };
  auto bad = [](const std::string& message, std::vector<const Setting*> named) {
    throw SettingsError(message, std::move(named));
  };
  const Setting &strategy = setting("strategy"), &seconds = setting("seconds"), &runs = setting("runs"),
                &shard = setting("shard"), &jobs = setting("jobs"), &preemptions = setting("preemptions");
  const auto shards = std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count);
  if (!(o.seconds >= 0)) bad(spell(seconds, number(o.seconds)) + ": must be a number of seconds >= 0", {&seconds});
  if (!(o.shrink_seconds >= 0)) {
    const Setting& s = setting("shrink-seconds");
    bad(spell(s, number(o.shrink_seconds)) + ": must be a number of seconds >= 0", {&s});
  }
  if (o.portfolio.empty()) bad("the strategy portfolio is empty", {&strategy});
  for (const StrategySpec& s : o.portfolio) {
    if (s.kind == StrategyKind::replay || s.kind == StrategyKind::custom)
      bad(spell(strategy, to_string(s.kind)) + ": cannot be explored (use replay())", {&strategy});
    if (s.kind == StrategyKind::pct && (s.pct_depth < 1 || s.pct_depth > 16))
      bad(spell(strategy, to_string(s)) + ": PCT depth must be in [1, 16], got " + std::to_string(s.pct_depth),
          {&strategy});
  }
  const bool exhaustive = is_exhaustive(o);
  if (exhaustive && o.portfolio.size() > 1)
    bad(spell(strategy, to_string(o.portfolio)) + ": the exhaustive strategy cannot share a portfolio", {&strategy});
  if (o.shard_count == 0 || o.shard_index >= o.shard_count)
    bad(spell(shard, shards) + ": must be I/N with 0 <= I < N (shards are numbered from 0)", {&shard});
  if (o.jobs > 1024) bad(spell(jobs, std::to_string(o.jobs)) + ": must be at most 1024", {&jobs});
  if (o.run_options().max_steps == 0) {
    const Setting& s = setting("max-steps");
    bad(spell(s, "0") + ": must be positive", {&s});
  }
  if (o.run_options().spin_out_limit <= kSingleTimeOuts && o.spurious_try_wait) {
    // Every time-out a step of its own: a search would branch on a pure
    // spin's time-outs forever, and a sampled one would rarely reach a
    // counted spin's fallback. Kept only for replaying older schedules.
    const Setting& s = setting("spin-out-limit");
    bad(spell(s, std::to_string(o.run_options().spin_out_limit)) +
            ": must be at least " + std::to_string(kSingleTimeOuts + 1) +
            " (a loop is spun out up to this many time-outs in a row)",
        {&s});
  }
  // The exhaustive strategy ends by itself when its search is complete.
  if (!exhaustive && o.runs == 0 && o.seconds == 0)
    bad("no budget: " + spell(seconds, "0") + " means no time limit: give " + suggest(runs, "N") + " too",
        {&seconds, &runs});
  if (o.preemptions && !exhaustive)
    bad(spell(preemptions, std::to_string(*o.preemptions)) + ": a preemption bound needs " +
            suggest(strategy, "exhaustive"),
        {&preemptions, &strategy});
  // An exploration that runs nothing would report "nothing found" about nothing.
  if (!exhaustive && o.runs != 0 && o.shard_index >= o.runs)
    bad(spell(shard, shards) + ": this shard holds no run: its first run number is " +
            std::to_string(o.shard_index) + ", and " + spell(runs, std::to_string(o.runs)) +
            " ends before it (run numbers 0.." + std::to_string(o.runs - 1) + ")",
        {&shard, &runs});
  // What explore() ignores, but a person who asked for it should hear about.
  const Setting& no_reduction = setting("no-reduction");
  if (!exhaustive && !o.reduce && given_in(given, no_reduction))
    bad(spell(no_reduction, "1") + ": needs " + suggest(strategy, "exhaustive"), {&no_reduction, &strategy});
  const Setting &no_shrink = setting("no-shrink"), &shrink_seconds = setting("shrink-seconds");
  if (!o.shrink && given_in(given, shrink_seconds))
    bad(spell(shrink_seconds, number(o.shrink_seconds)) + ": shrinking is off (" + spell(no_shrink, "1") + ")",
        {&shrink_seconds, &no_shrink});
}

std::vector<std::string> apply_settings(ExploreOptions& options, std::span<const GivenSetting> given,
                                        SettingsFront front) {
  std::vector<std::string> errors;
  SettingsState state{options};
  for (const Setting& s : kSettings) {
    const GivenSetting* g = given_in(given, s);
    if (g == nullptr) continue;
    try {
      s.apply(state, g->value);
    } catch (const std::invalid_argument& e) {
      errors.push_back(spell_setting(s, g->value, front) + ": " + e.what());
    }
  }
  const GivenSetting* runs = given_in(given, setting("runs"));
  const GivenSetting* seconds = given_in(given, setting("seconds"));
  if (runs && !seconds) options.seconds = 0;
  if (seconds && !runs) options.runs = 0;
  const Setting& strategy = setting("strategy");
  const GivenSetting* pct_depth = given_in(given, setting("pct-depth"));
  bool depth_taken = false;  // by a pct in the portfolio
  if (state.strategy) {
    std::string why;
    const std::string with_depth = with_pct_depth(*state.strategy, state.pct_depth);
    depth_taken = with_depth != *state.strategy;
    if (auto p = parse_portfolio(with_depth, &why))
      options.portfolio = std::move(*p);
    else
      errors.push_back(spell_setting(strategy, *state.strategy, front) + ": " + why);
  } else if (pct_depth) {
    for (StrategySpec& s : options.portfolio)
      if (s.kind == StrategyKind::pct) {
        s.pct_depth = state.pct_depth;
        depth_taken = true;
      }
  }
  // A depth that no strategy takes would be ignored without a word.
  if (pct_depth && !depth_taken && errors.empty())
    errors.push_back(spell_setting(*pct_depth->setting, pct_depth->value, front) + ": no plain pct in " +
                     (state.strategy ? spell_setting(strategy, *state.strategy, front)
                                     : "the portfolio " + to_string(options.portfolio)) +
                     " takes it (pct:D gives its own depth)");
  if (state.strategy && !given_in(given, setting("preemptions")) && !is_exhaustive(options))
    options.preemptions.reset();
  if (!errors.empty()) return errors;
  try {
    validate_settings(options, front, given);
  } catch (const SettingsError& e) {
    // A rule broken by the code's own options alone is explore()'s to report.
    if (std::any_of(e.settings.begin(), e.settings.end(), [&](const Setting* s) { return given_in(given, *s); }))
      errors.push_back(e.what());
  }
  return errors;
}

std::string flags_help() {
  std::string out;
  for (const Setting& s : kSettings) {
    std::string head = "  --";  // appended: g++ 12 -O3 warns falsely (-Wrestrict) on "..." + std::string
    head += s.flag;
    if (!s.arg.empty()) {
      head += ' ';
      head += s.arg;
    }
    head.resize(std::max<std::size_t>(head.size() + 1, 23), ' ');
    std::string_view help = s.help;
    for (bool first = true; !help.empty() || first; first = false) {
      const auto nl = std::min(help.find('\n'), help.size());
      out += (first ? head : std::string(23, ' ')) + std::string(help.substr(0, nl)) + "\n";
      help.remove_prefix(std::min(nl + 1, help.size()));
    }
  }
  return out;
}

}  // namespace wspipe::emu
