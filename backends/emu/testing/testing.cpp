#include "gtest.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backends/emu/report.hpp"
#include "backends/emu/settings.hpp"
#include "backends/emu/testing/replay_env.hpp"

namespace wspipe::testing {
namespace {

using detail::replay_from_env;
using detail::replay_line;
using detail::replayed;
using detail::Replayed;
using emu::shell_quote;

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string this_binary() {
  const std::vector<std::string> argv = ::testing::internal::GetArgvs();
  if (!argv.empty() && !argv.front().empty()) return argv.front();
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
  return "./your_test";
}

std::string this_test() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return {};
  return std::string(info->test_suite_name()) + "." + info->name();
}

// The --gtest_filter that runs this test again. A test registered over
// GoogleTest's shards ("suite.name/shard_1_of_2") has that name only where
// GTEST_TOTAL_SHARDS is 2: "suite.name/*" finds it in any sharding, or none
// (a replay runs the one schedule whatever the shard).
std::string replay_filter() {
  std::string test = this_test();
  static const std::regex shard(R"(/shard_[0-9]+_of_[0-9]+$)");
  std::smatch m;
  if (std::regex_search(test, m, shard)) test.replace(static_cast<std::size_t>(m.position(0)), std::string::npos, "/*");
  return test;
}

}  // namespace

// ------------------------------------ shared with rapidcheck.cpp (replay_env.hpp)

namespace detail {

std::string replay_line(const emu::Failure& f, const emu::RunOptions& opts, const std::string& env) {
  std::vector<std::string> args;
  if (const std::string test = replay_filter(); !test.empty()) args.push_back("--gtest_filter=" + test);
  return "replay: " + (env.empty() ? "" : env + " ") +
         emu::replay_command(emu::SettingsFront::environment, opts, f.result.schedule, this_binary(), args, {},
                             "wspipe-trace.json") +
         "\n        (wspipe-trace.json opens in https://ui.perfetto.dev; a name ending in .txt gives a text log)\n";
}

}  // namespace detail

namespace {

// The progress line on stderr, for explorations that run long enough for a
// person to wonder.
std::function<void(const emu::ExploreProgress&)> quiet_then_progress() {
  struct State {
    double last = -1;
    bool shrinking = false;
  };
  return [st = std::make_shared<State>()](const emu::ExploreProgress& p) {
    constexpr double kQuietFor = 3, kEvery = 2;
    if (p.seconds < kQuietFor) return;
    const bool news = p.shrinking && !st->shrinking;
    if (!news && st->last >= 0 && p.seconds - st->last < kEvery) return;
    st->last = p.seconds;
    st->shrinking = p.shrinking;
    const std::string test = this_test();
    std::fprintf(stderr, "[wspipe] %s%s%.0f s: %s, %s%s\n", test.c_str(), test.empty() ? "" : ": ", p.seconds,
                 emu::counted(p.runs, "run").c_str(), emu::counted(p.steps, "step").c_str(),
                 p.shrinking ? ", shrinking the failure" : p.failed ? ", failure found" : "");
  };
}

}  // namespace

namespace detail {

std::optional<Replayed> replay_from_env(const emu::KernelFactory& make, const emu::RunOptions& opts) {
  const auto token = env("WSPIPE_REPLAY");
  if (!token) return std::nullopt;
  Replayed out;
  out.token = *token;
  const std::string named = "WSPIPE_REPLAY=" + shell_quote(*token);
  std::string why;
  const auto schedule = emu::Schedule::decode(*token, &why);
  if (!schedule) {
    out.error = named + " is not a schedule: " + emu::printable(why);
    return out;
  }
  try {
    out.run = emu::replay(make(), *schedule, opts);
  } catch (const emu::ScheduleMismatch& e) {
    out.error = named + " does not fit this kernel: " + e.what() +
                "\nA schedule replays only the kernel and configuration it was recorded from (in a test that "
                "explores several kernels, only the exploration that printed it). If the kernel or the test has "
                "changed since (the bug fixed, say), the schedule is stale: unset WSPIPE_REPLAY (and WSPIPE_TRACE) "
                "to explore again.";
    return out;
  } catch (const std::exception& e) {
    out.error = "replaying " + named + " failed: " + e.what();
    return out;
  }
  if (const auto file = env("WSPIPE_TRACE"); file && !file->empty()) {
    try {
      emu::write_trace(*file, out.run->trace);
      out.trace_note = "trace written to " + *file + "\n";
    } catch (const std::exception& e) {
      out.trace_error = "WSPIPE_TRACE=" + shell_quote(*file) + ": " + e.what() + "\n";
    }
  }
  return out;
}

std::string replayed(const Replayed& rep) {
  return "replayed WSPIPE_REPLAY=" + shell_quote(rep.token) + " (outcome: " + emu::outcome(*rep.run) + ")";
}

}  // namespace detail

namespace {

// The outcomes finds() accepts: `expected` split at commas, each trimmed
// ("deadlock, kernel.check").
std::vector<std::string> outcomes_in(std::string_view expected) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= expected.size();) {
    std::size_t end = expected.find(',', at);
    if (end == std::string_view::npos) end = expected.size();
    std::string_view o = expected.substr(at, end - at);
    while (!o.empty() && o.front() == ' ') o.remove_prefix(1);
    while (!o.empty() && o.back() == ' ') o.remove_suffix(1);
    out.emplace_back(o);
    at = end + 1;
  }
  return out;
}

// "deadlock", "deadlock or kernel.check", "deadlock, livelock or kernel.check".
std::string either(const std::vector<std::string>& outcomes) {
  std::string out;
  for (std::size_t i = 0; i < outcomes.size(); ++i)
    out += (i == 0 ? "" : i + 1 == outcomes.size() ? " or " : ", ") + outcomes[i];
  return out;
}

std::optional<emu::ExploreResult> explore_or(const emu::KernelFactory& make, const emu::ExploreOptions& opts,
                                             std::string* error) {
  try {
    return emu::explore(make, opts);
  } catch (const std::exception& e) {
    *error = std::string("exploration did not run: ") + e.what();
    return std::nullopt;
  }
}

// How an exploration chose its schedules: "strategy random,pct:3,stall, first seed 1, shard 1/3".
std::string schedules_of(const emu::ExploreOptions& opts) {
  std::string out = "strategy " + emu::to_string(opts.portfolio);
  if (opts.portfolio.front().kind == emu::StrategyKind::exhaustive)
    out += opts.preemptions ? ", at most " + emu::counted(*opts.preemptions, "preemption")
                            : ", every class of equivalent schedules";
  else
    out += ", first seed " + std::to_string(opts.first_seed);
  if (opts.shard_count > 1)
    out += ", shard " + std::to_string(opts.shard_index) + "/" + std::to_string(opts.shard_count);
  return out;
}

// "; assuming: A; B" (a verdict's assumptions, emu::assumptions), or that
// there is none.
std::string assuming(const emu::ExploreResult& res) {
  if (res.assumptions.empty()) return "; assuming nothing beyond this configuration";
  std::string out = "; assuming: ";
  for (std::size_t i = 0; i < res.assumptions.size(); ++i) out += (i != 0 ? "; " : "") + res.assumptions[i];
  return out;
}

// The one line a clean exploration prints (on stdout, among GoogleTest's
// own), so that a log says what a passing test covered (and a verdict what
// it assumed).
void print_covered(const emu::ExploreResult& res, const emu::ExploreOptions& opts) {
  const std::string test = this_test();
  const std::string verified = !res.complete ? ""
                               : res.bounded ? " (verified: every schedule within the bound"
                                             : " (verified: the search is complete";
  std::printf("[wspipe] %s%sexplored %s (%s) in %.1f s, %s: nothing found%s%s%s\n", test.c_str(),
              test.empty() ? "" : ": ", emu::counted(res.runs, "run").c_str(),
              emu::counted(res.steps, "step").c_str(), res.seconds, schedules_of(opts).c_str(), verified.c_str(),
              verified.empty() ? ""
              : !res.sharded   ? ")"
                               : (" in this shard's " + std::to_string(res.parts) + " of the " +
                                  emu::counted(res.parts_total, "part") +
                                  " of the sharded search; the configuration is verified when every shard's are)")
                                     .c_str(),
              verified.empty() ? "" : assuming(res).c_str());
  std::fflush(stdout);
}

std::string nothing_found(const emu::ExploreResult& res, const emu::ExploreOptions& opts) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << "nothing found in " << emu::counted(res.runs, "run") << " (" << emu::counted(res.steps, "step") << ", "
     << res.seconds << " s; " << schedules_of(opts) << ")";
  if (res.complete)
    os << (res.bounded ? ": every schedule within the preemption bound was explored"
                       : ": the search is complete (every class of equivalent schedules)")
       << (res.sharded ? " in this shard's " + std::to_string(res.parts) + " of the " +
                             emu::counted(res.parts_total, "part") + " of the sharded search"
                       : "")
       << assuming(res);
  else
    os << "; explore longer with WSPIPE_SECONDS or WSPIPE_RUNS, or try WSPIPE_STRATEGY";
  return os.str();
}

emu::KernelFactory factory_of(const emu::Kernel& kernel) {
  return [&kernel] { return kernel; };
}

}  // namespace

bool apply_environment(emu::ExploreOptions& o, std::string* error) {
  std::vector<emu::GivenSetting> given;
  for (const emu::Setting& s : emu::settings_table())
    if (const auto v = env(std::string(s.env).c_str())) given.push_back({&s, *v});
  std::string errors;
  for (const std::string& e : emu::apply_settings(o, given, emu::SettingsFront::environment))
    errors += (errors.empty() ? "" : "\n") + e;
  if (error) *error = errors;
  return errors.empty();
}

emu::ExploreOptions options(emu::ExploreOptions base) {
  const emu::ExploreOptions defaults;
  if (base.runs == 0 && base.seconds == defaults.seconds) base.seconds = 2;
  if (!base.on_progress) base.on_progress = quiet_then_progress();
  std::string error;
  if (!apply_environment(base, &error)) ADD_FAILURE() << "wspipe::testing::options: bad environment:\n" << error;
  return base;
}

namespace {

// explores_clean and explores_verified: explore (or replay WSPIPE_REPLAY's
// schedule) and pass when the verdict is one `passes` accepts.
template <class Passes>
::testing::AssertionResult explore_and_judge(const emu::KernelFactory& make, const emu::ExploreOptions& opts,
                                             Passes passes, Assumptions allowed = Assumptions::allowed) {
  if (auto rep = replay_from_env(make, opts.run_options())) {
    if (!rep->run) return ::testing::AssertionFailure() << "\n" << rep->error;
    if (rep->run->status == emu::Status::ok && rep->trace_error.empty())
      return ::testing::AssertionSuccess() << replayed(*rep) << "\n" << rep->trace_note;
    return ::testing::AssertionFailure() << "\n" << replayed(*rep) << "\n"
                                         << rep->run->report() << rep->trace_note << rep->trace_error;
  }
  std::string error;
  const auto res = explore_or(make, opts, &error);
  if (!res) return ::testing::AssertionFailure() << "\n" << error;
  if (passes(res->verdict()) && allowed == Assumptions::none && !res->assumptions.empty())
    return ::testing::AssertionFailure() << "\nverified, but with assumptions, and the test allows none:\n"
                                         << res->report();
  if (passes(res->verdict())) {
    print_covered(*res, opts);
    return ::testing::AssertionSuccess() << res->report();
  }
  if (res->ok())  // incomplete (or, for explores_verified, only sampled): its report says so
    return ::testing::AssertionFailure() << "\n" << res->report();
  return ::testing::AssertionFailure() << "\n" << res->report() << replay_line(*res->failure, opts.run_options());
}

}  // namespace

::testing::AssertionResult explores_clean(const emu::KernelFactory& make, emu::ExploreOptions opts) {
  return explore_and_judge(make, opts, [](emu::Verdict v) {
    return v == emu::Verdict::verified || v == emu::Verdict::explored;
  });
}

::testing::AssertionResult explores_verified(const emu::KernelFactory& make, emu::ExploreOptions opts,
                                             Assumptions allowed) {
  if (opts.portfolio.size() != 1 || opts.portfolio.front().kind != emu::StrategyKind::exhaustive)
    return ::testing::AssertionFailure() << "explores_verified needs the exhaustive strategy alone (got "
                                         << emu::to_string(opts.portfolio) << "): only a complete search verifies";
  // (Under WSPIPE_REPLAY it replays one run, as explores_clean does: a
  // replay reproduces, it verifies nothing.)
  return explore_and_judge(make, opts, [](emu::Verdict v) { return v == emu::Verdict::verified; }, allowed);
}

::testing::AssertionResult explores_verified(const emu::Kernel& kernel, emu::ExploreOptions opts,
                                             Assumptions allowed) {
  if (opts.jobs == 0) opts.jobs = 1;  // one instance for every run, as emu::explore(const Kernel&, ...)
  return explores_verified(factory_of(kernel), std::move(opts), allowed);
}

::testing::AssertionResult explores_clean(const emu::Kernel& kernel, emu::ExploreOptions opts) {
  if (opts.jobs == 0) opts.jobs = 1;  // one instance for every run, as emu::explore(const Kernel&, ...)
  return explores_clean(factory_of(kernel), std::move(opts));
}

::testing::AssertionResult finds(std::string_view expected, const emu::KernelFactory& make,
                                 emu::ExploreOptions opts) {
  const std::vector<std::string> outcomes = outcomes_in(expected);
  const auto one_of = [&](const std::string& got) {
    return std::find(outcomes.begin(), outcomes.end(), got) != outcomes.end();
  };
  if (one_of("ok") || one_of(""))
    return ::testing::AssertionFailure() << "finds() wants the outcomes of a failure (\"deadlock\", \"livelock\" or "
                                            "a violation rule, several separated by commas), got \""
                                         << expected << "\": use explores_clean for a clean kernel";
  const std::string wanted = either(outcomes);
  if (auto rep = replay_from_env(make, opts.run_options())) {
    if (!rep->run) return ::testing::AssertionFailure() << "\n" << rep->error;
    const std::string got = emu::outcome(*rep->run);
    if (one_of(got) && rep->trace_error.empty())
      return ::testing::AssertionSuccess() << replayed(*rep) << "\n" << rep->trace_note;
    if (one_of(got)) return ::testing::AssertionFailure() << "\n" << rep->trace_error;
    return ::testing::AssertionFailure() << "\nexpected " << wanted << ", but " << replayed(*rep) << "\n"
                                         << rep->run->report() << rep->trace_note << rep->trace_error;
  }
  std::string error;
  const auto res = explore_or(make, opts, &error);
  if (!res) return ::testing::AssertionFailure() << "\n" << error;
  if (res->ok())
    return ::testing::AssertionFailure() << "expected " << wanted << ", but " << nothing_found(*res, opts);
  if (one_of(res->failure->outcome)) return ::testing::AssertionSuccess() << res->report();
  return ::testing::AssertionFailure() << "\nexpected " << wanted << ", found " << res->failure->outcome << ":\n"
                                       << res->report() << replay_line(*res->failure, opts.run_options());
}

::testing::AssertionResult finds(std::string_view expected, const emu::Kernel& kernel, emu::ExploreOptions opts) {
  if (opts.jobs == 0) opts.jobs = 1;  // one instance for every run, as emu::explore(const Kernel&, ...)
  return finds(expected, factory_of(kernel), std::move(opts));
}

// ------------------------------------------------------------------ shards

emu::ExploreOptions shard_slice(emu::ExploreOptions opts, std::uint32_t k, std::uint32_t n) {
  if (n == 0 || k >= n) throw std::invalid_argument("shard_slice: slice " + std::to_string(k) + " of " +
                                                    std::to_string(n) + " does not exist");
  const std::uint64_t count = std::uint64_t{opts.shard_count} * n;
  if (count > 0xffffffffu) throw std::invalid_argument("shard_slice: too many shards");
  // i mod (c n) = b + c k  <=>  i mod c = b and (i / c) mod n = k
  opts.shard_index = opts.shard_index + opts.shard_count * k;
  opts.shard_count = static_cast<std::uint32_t>(count);
  return opts;
}

namespace {

class ExplorationTest : public ::testing::Test {
 public:
  ExplorationTest(emu::KernelFactory make, emu::ExploreOptions base, std::uint32_t k, std::uint32_t n)
      : make_(std::move(make)), base_(std::move(base)), k_(k), n_(n) {}
  void TestBody() override {
    const emu::ExploreOptions o = options(base_);
    // Sampled runs: the run numbers of this slice; the exhaustive search:
    // the parts of its sharded form that this slice holds (with one
    // GoogleTest shard, the whole search).
    EXPECT_TRUE(explores_clean(make_, shard_slice(o, k_, n_)));
  }

 private:
  emu::KernelFactory make_;
  emu::ExploreOptions base_;
  std::uint32_t k_, n_;
};

std::uint32_t gtest_total_shards() {
  const auto v = env("GTEST_TOTAL_SHARDS");
  if (!v) return 1;
  try {
    return static_cast<std::uint32_t>(emu::parse_whole_number(*v, 1, 0xffffffffu));
  } catch (const std::invalid_argument&) {
    return 1;  // GoogleTest itself rejects a bad value when it runs
  }
}

}  // namespace

std::uint32_t register_exploration(const char* suite, const char* name, emu::KernelFactory make,
                                   emu::ExploreOptions base, const char* file, int line) {
  const std::uint32_t n = gtest_total_shards();
  auto test_name = [&](std::uint32_t k) {
    return std::string(name) + "/shard_" + std::to_string(k) + "_of_" + std::to_string(n);
  };
  for (std::uint32_t k = 0; k < n; ++k) {
    // The factory's declared type is Test*, so that these tests may share a
    // suite with TEST()s (GoogleTest wants one fixture type per suite).
    ::testing::RegisterTest(suite, test_name(k).c_str(), nullptr, nullptr, file, line,
                            [make, base, k, n]() -> ::testing::Test* {
                              return new ExplorationTest(make, base, k, n);
                            });
  }
  return n;
}

}  // namespace wspipe::testing
