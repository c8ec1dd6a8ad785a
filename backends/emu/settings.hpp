// The exploration's settings as a person gives them: one table, read by the
// wspipe program's `--flags` (tools/cli.hpp) and by the testing helpers'
// `WSPIPE_*` environment variables (testing/gtest.hpp), so that a value means
// the same, is refused for the same reason, and is reported in the same
// words whichever way it came. The third front is the code itself: explore()
// checks an ExploreOptions with the same rules and names its fields.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "explore.hpp"

namespace wspipe::emu {

// Where a setting came from, which decides how a message spells it.
enum class SettingsFront {
  code,         // ExploreOptions' fields:  "jobs = 5000"
  flags,        // the command line:         "--jobs 5000"
  environment,  // the environment:          "WSPIPE_JOBS=5000"
};

// What a setting's rule writes to while apply_settings() runs (settings.cpp).
struct SettingsState;

struct Setting {
  std::string_view flag;  // "jobs": --jobs; a switch's flag takes no value
  std::string_view env;   // "WSPIPE_JOBS"; a switch's variable takes 1 (as the flag) or 0
  std::string_view code;  // how the code front names it, "{}" standing for the value: "jobs = {}"
  std::string_view arg;   // the value's name in help ("N", "T", "I/N"); empty for a switch
  std::string_view help;  // for `wspipe help`: lines of at most 64 characters
  // Whether it concerns many runs (explore) rather than each run (run,
  // replay and explore alike).
  bool exploration_only = false;
  // Parses `text` into the options; throws std::invalid_argument with the
  // reason, which the caller prefixes with the setting as spelled.
  void (*apply)(SettingsState& state, std::string_view text) = nullptr;
};

// Every setting, in the order they are applied (a plain `pct` in --strategy
// takes --pct-depth's depth, so that one comes first).
std::span<const Setting> settings_table();
const Setting* find_setting_flag(std::string_view flag);
const Setting* find_setting_env(std::string_view env);

// A rule a setting broke. what() is the message a person reads, naming the
// settings as the front spells them; `settings` lists the ones it names.
class SettingsError : public std::invalid_argument {
 public:
  SettingsError(const std::string& message, std::vector<const Setting*> named)
      : std::invalid_argument(message), settings(std::move(named)) {}
  std::vector<const Setting*> settings;
};

// A setting given as text by one front.
struct GivenSetting {
  const Setting* setting = nullptr;
  std::string value;  // "1" for a switch given as a flag
};

// Applies `given` to `options`, in the table's order: each value parsed by
// its setting's rule, then the rules between settings:
// - runs or seconds alone is the whole budget (the other is unlimited);
//   both: whichever ends first;
// - a strategy other than exhaustive drops a preemption bound not given
//   with it;
// - a pct depth that no plain `pct` of the strategy takes is refused;
// - then validate_settings(), which also refuses a shard with no run
//   number below runs, and shrink-seconds given with shrinking off.
// Returns every message (empty: all applied); a value that does not parse
// leaves its field as it was.
std::vector<std::string> apply_settings(ExploreOptions& options, std::span<const GivenSetting> given,
                                        SettingsFront front);

// The rules an ExploreOptions must keep, whichever front set it. Throws
// SettingsError naming the first setting broken: settings in `given` as
// `front` spells them, the others as the code front does. A rule that only
// concerns a person's request (no-reduction without exhaustive) is
// checked only for settings in `given`.
void validate_settings(const ExploreOptions& options, SettingsFront front,
                       std::span<const GivenSetting> given = {});

// `setting` with `value` as `front` spells it: "--jobs 0", "WSPIPE_JOBS=0",
// "jobs = 0"; values are quoted for a shell where they need it.
std::string spell_setting(const Setting& setting, std::string_view value, SettingsFront front);

// For a shell command line: `s` as is when it has no special characters,
// else in single quotes; with a control byte, DEL or a byte above 0x7f in
// it, as $'...' with those bytes escaped (\n, \t, \xNN), so that what is
// echoed to a terminal never carries raw control sequences.
std::string shell_quote(std::string_view s);

// `s` with every byte but printable ASCII escaped (\n, \t, \\, \xNN): a
// token echoed in a message, safe for a terminal and unambiguous.
std::string printable(std::string_view s);

// A whole number in [min, max], or std::invalid_argument saying what was
// wanted ("must be a whole number in [1, 1024]"), without a name.
std::uint64_t parse_whole_number(std::string_view text, std::uint64_t min, std::uint64_t max);

// The table's lines of `wspipe help`: "  --flag ARG" padded to a column,
// then the help text.
std::string flags_help();

}  // namespace wspipe::emu
