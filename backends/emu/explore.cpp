#include "explore.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exhaustive.hpp"
#include "settings.hpp"

namespace wspipe::emu {
namespace {

using SteadyClock = std::chrono::steady_clock;

double since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// The shrinker's order: fewest preemptions, then fewest deviations.
bool smaller(const RunResult& a, const RunResult& b) {
  if (a.preemptions() != b.preemptions()) return a.preemptions() < b.preemptions();
  return a.schedule.size() < b.schedule.size();
}

bool failed(const RunResult& r) { return !r.pruned && r.status != Status::ok; }

bool interrupted(const std::atomic<int>* interrupt) { return interrupt != nullptr && interrupt->load() != 0; }

// splitmix64's output function: a bijection of 64-bit words in which every
// input bit affects every output bit; 0 maps to 0.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A new file next to `file`, created empty with the permissions a plain
// open would give it (0666 less the umask): its name, or "" with errno set.
std::string create_temporary_beside(const std::string& file) {
  static std::atomic<std::uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string tmp = file + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return tmp;
    }
    if (errno != EEXIST) return {};
  }
  return {};
}

void validate(const ExploreOptions& o) {
  try {
    validate_settings(o, SettingsFront::code);
  } catch (const SettingsError& e) {
    throw SettingsError(std::string("explore: ") + e.what(), e.settings);
  }
}

}  // namespace

// ------------------------------------------------------------------ basics

RunResult run(const Kernel& kernel, const RunOptions& options) {
  if (!kernel.body) throw std::invalid_argument("emu::run: the kernel has no body");
  std::optional<RunOptions> rooted;  // with the default source root, where the options name none
  if (options.source_root.empty()) {
    if (std::string root = default_source_root(); !root.empty()) {
      rooted = options;
      rooted->source_root = std::move(root);
    }
  }
  RunResult r = run(kernel.launch, kernel.body, rooted ? *rooted : options);
  if (r.status == Status::ok && !r.pruned && kernel.verify) {
    if (std::string wrong = kernel.verify(); !wrong.empty()) {
      Violation v;
      v.rule = "result.mismatch";
      v.message = "the kernel's result differs from the reference: " + wrong;
      v.step = r.steps;
      r.violations.push_back(std::move(v));
      r.status = Status::violation;
    }
  }
  note_ending(r);
  if (options.trace && options.trace_sink != nullptr) options.trace_sink->finish(r.trace);
  return r;
}

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::found: return "found";
    case Verdict::verified: return "verified";
    case Verdict::explored: return "explored";
    case Verdict::incomplete: return "incomplete";
  }
  return "?";
}

std::string outcome(const RunResult& r) {
  if (r.status == Status::violation && !r.violations.empty()) return r.violations.front().rule;
  return to_string(r.status);
}

std::optional<StrategySpec> parse_strategy_spec(std::string_view text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<StrategySpec> {
    if (error) *error = why;
    return std::nullopt;
  };
  StrategySpec s;
  std::string_view name = text;
  std::string_view arg;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    arg = text.substr(colon + 1);
  }
  const auto kind = parse_strategy(name);
  if (!kind || *kind == StrategyKind::replay)
    return fail("unknown strategy '" + std::string(text) + "' (rr, random, pct, pct:D, stall, exhaustive)");
  s.kind = *kind;
  if (!arg.empty() || text.find(':') != std::string_view::npos) {
    if (s.kind != StrategyKind::pct) return fail("only pct takes a depth (pct:D), got '" + std::string(text) + "'");
    std::uint32_t d = 0;
    for (char ch : arg) {
      if (ch < '0' || ch > '9' || d > 1000) return fail("PCT depth must be a number in [1, 16], got '" + std::string(arg) + "'");
      d = d * 10 + static_cast<std::uint32_t>(ch - '0');
    }
    if (arg.empty() || d < 1 || d > 16) return fail("PCT depth must be a number in [1, 16], got '" + std::string(arg) + "'");
    s.pct_depth = d;
  }
  return s;
}

std::optional<std::vector<StrategySpec>> parse_portfolio(std::string_view text, std::string* error) {
  std::vector<StrategySpec> out;
  std::size_t pos = 0;
  for (;;) {
    const auto comma = text.find(',', pos);
    const auto item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    auto s = parse_strategy_spec(item, error);
    if (!s) return std::nullopt;
    out.push_back(*s);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (out.size() > 1 && std::any_of(out.begin(), out.end(), [](const StrategySpec& s) {
        return s.kind == StrategyKind::exhaustive;
      })) {
    if (error) *error = "the exhaustive strategy cannot share a portfolio";
    return std::nullopt;
  }
  return out;
}

std::string to_string(const StrategySpec& s) {
  std::string out(to_string(s.kind));
  if (s.kind == StrategyKind::pct) out += ":" + std::to_string(s.pct_depth);
  return out;
}

std::string to_string(const std::vector<StrategySpec>& portfolio) {
  std::string out;
  for (const auto& s : portfolio) {
    if (!out.empty()) out += ',';
    out += to_string(s);  // appended, not "," + ...: g++ 12 -O2 reports a false -Wrestrict there
  }
  return out;
}

// Run 0 keeps the seed itself (mix64(0) = 0): `wspipe run --seed N`, and
// every exploration's first run, are what they always were. For run i > 0
// the seed is xored with a mix of i, so that seeds s and s' meet only where
// mix64(i) ^ mix64(j) = s ^ s', which for small differences of seeds no two
// run numbers below 2^32 are expected to reach; the strategies' generator
// (Rng, splitmix64 itself) mixes the state again.
std::uint64_t run_seed(std::uint64_t seed, std::uint64_t run) { return seed ^ mix64(run); }

RunOptions ExploreOptions::run_options() const {
  RunOptions o = *this;
  o.strategy = {};
  o.trace = false;
  return o;
}

namespace {

// An existing file that is not a regular one (/dev/null, a pipe): written in
// place, since renaming a finished file over it would replace it.
bool is_special_file(const std::string& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace

void check_trace_file(const std::string& file) {
  namespace fs = std::filesystem;
  const std::string named = "trace file " + shell_quote(file);
  if (file.empty()) throw std::invalid_argument("the trace file name is empty");
  if (file == "-")
    throw std::invalid_argument("trace file '-': a trace goes to a file, not to standard output (which carries the "
                                "report); name a file, e.g. trace.json or trace.txt");
  std::error_code ec;
  if (fs::is_directory(file, ec)) throw std::invalid_argument(named + " is a directory; name a file in it");
  if (is_special_file(file)) {
    if (::access(file.c_str(), W_OK) != 0)
      throw std::invalid_argument(named + " cannot be written: " + std::strerror(errno));
    return;
  }
  const fs::path dir = fs::path(file).parent_path().empty() ? fs::path(".") : fs::path(file).parent_path();
  if (!fs::is_directory(dir, ec))
    throw std::invalid_argument(named + ": the directory " + shell_quote(dir.string()) + " does not exist");
  const std::string probe = create_temporary_beside(file);
  if (probe.empty())
    throw std::invalid_argument(named + ": cannot create a file in " + shell_quote(dir.string()) + ": " +
                                std::strerror(errno));
  ::unlink(probe.c_str());
}

TraceFileSink::TraceFileSink(std::string file)
    : file_(std::move(file)),
      writer_(out_, file_.size() >= 4 && file_.compare(file_.size() - 4, 4, ".txt") == 0 ? TraceFormat::text
                                                                                          : TraceFormat::chrome) {
  if (is_special_file(file_)) {
    out_.open(file_, std::ios::binary);
  } else {
    tmp_ = create_temporary_beside(file_);
    if (tmp_.empty()) {
      error_ = "cannot write trace file " + shell_quote(file_) + ": " + std::strerror(errno);
      return;
    }
    out_.open(tmp_, std::ios::binary | std::ios::trunc);
  }
  if (!out_) fail("cannot write");
  errno = 0;
}

TraceFileSink::~TraceFileSink() {
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void TraceFileSink::fail(const std::string& what) {
  const int saved = errno;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  error_ = what + " trace file " + shell_quote(file_) + (saved != 0 ? std::string(": ") + std::strerror(saved) : "") +
           " (nothing written)";
}

void TraceFileSink::take(const Trace& t, std::span<const Event> events) {
  if (error_.empty() && out_) writer_.write(t, events);
}

void TraceFileSink::finish(const Trace& t) {
  if (!error_.empty() || finished_) return;
  finished_ = true;
  take(t, std::span<const Event>(t.events).subspan(std::min(t.streamed, t.events.size())));
  writer_.finish(t);
  // Buffered bytes fail only when flushed: the stream is checked after closing.
  out_.close();
  if (!out_) return fail("error writing");
  if (tmp_.empty()) return;  // a special file, written in place
  if (std::rename(tmp_.c_str(), file_.c_str()) != 0) return fail("cannot rename the finished trace to");
  tmp_.clear();
}

void write_trace(const std::string& file, const Trace& trace) {
  TraceFileSink f(file);
  f.finish(trace);
  if (!f.error().empty()) throw std::runtime_error(f.error());
}

RunResult replay(const Kernel& kernel, const Schedule& schedule, RunOptions options) {
  options.strategy.kind = StrategyKind::replay;
  options.strategy.replay = schedule;
  options.strategy.strict = true;
  options.trace = true;
  // Schedules of versions 2 and 3 were recorded when TMA loads completed
  // in issue order, and try_wait timed out spuriously only where the replay
  // line said --spurious-try-wait: with both now on by default, such a
  // schedule replays with loads in order, and is tried first without
  // time-outs (one run, no trace), then replayed in whichever mode it fits.
  if (schedule.version() <= 5) options.legacy_pieces = true;
  if (schedule.version() <= 4) options.spin_out_limit = 0;
  if (schedule.version() <= 3) options.async_reorder = false;
  if (schedule.version() <= 3 && options.spurious_try_wait) {
    RunOptions probe = options;
    probe.trace = false;
    probe.trace_sink = nullptr;
    probe.spurious_try_wait = false;
    try {
      (void)run(kernel, probe);
      options.spurious_try_wait = false;
    } catch (const ScheduleMismatch&) {
      // recorded with time-outs on: replayed as given
    }
  }
  return run(kernel, options);
}

// ---------------------------------------------------------------- shrinking

// Delta debugging (Zeller and Hildebrandt 2002) over the deviations, each
// candidate replayed leniently: a deviation that no longer fits is skipped.
// A candidate is kept when its run has the same outcome and is smaller
// (fewer preemptions, then fewer deviations); the kept run's own schedule,
// not the candidate, becomes the current one. Each remaining preemption is
// also tried later, where the same switch may be a free choice.
//
// Delta debugging only walks down from the run it starts from, and can stop
// well above the fewest preemptions the bug needs: each CTA of a co-resident
// deadlock must be switched away from at one place, which no removal of
// single deviations reaches; a load in pieces or a series of try_wait
// time-outs is several preemptions, none of which can go alone, where
// another path needs none. The search for the minimum then takes turns of
// three kinds until the result is proved minimal or the time is spent:
//
// - the preemption-bounded exhaustive search with bounds 0, 1, ... below
//   the count left, each resumed where the last turn left it: the first
//   schedule of the outcome it meets is kept and minimised in turn. A bound
//   searched to its end without the outcome proves that no schedule with
//   that many preemptions or fewer has it (it runs every one): the result
//   is minimal once every bound below its count is so proved. The bounds go
//   upwards since each one covers the ones below it at a fraction of its
//   cost: the cheap ones prove what they can first, and the first bound
//   that meets the outcome is the minimum;
// - the finder at the bound being proved (an eightieth of the time per
//   turn): source sets within it, which prove nothing but meet schedules
//   where the bounded search, branching at every free choice, cannot end
//   even bound 0 (finder_turn, below);
// - a restart: PCT and random runs, of seeds of their own, until one has
//   the outcome; delta debugging minimises it (for a tenth of the time at
//   most, unless it gets below the result, which it then replaces). On a
//   large kernel even bound 0, which branches at every free choice, may
//   not end within the time, while another failing run often shrinks to
//   far fewer preemptions than the first.
//
// A search turn lasts a twentieth of the time: a small kernel's minimum is
// proved in the first, and a restart that is cheap (a small kernel's) takes
// little from the search, while on a large kernel, where the search cannot
// end, the restarts take most of the time.
RunResult shrink(const KernelFactory& make, const RunOptions& base, const RunResult& failing, double seconds,
                 ShrinkStats* stats, const std::atomic<int>* interrupt) {
  const auto t0 = SteadyClock::now();
  const std::string target = outcome(failing);
  RunResult best = failing;
  ShrinkStats st;
  st.choices_before = failing.schedule.size();
  st.preemptions_before = failing.preemptions();
  auto out_of_time = [&] {
    if (interrupted(interrupt)) st.interrupted = true;
    if (since(t0) <= seconds && !st.interrupted) return false;
    st.finished = false;
    return true;
  };
  // Runs `o` with the trace off. A run that livelocks runs to its step
  // budget: it stops at the end of the shrink's time instead
  // (RunOptions::deadline).
  auto run_within = [&](RunOptions o) {
    o.trace = false;
    o.deadline = std::min(o.deadline, t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                               std::chrono::duration<double>(seconds)));
    ++st.replays;
    return run(make(), o);
  };
  auto is_smaller = [&](const RunResult& r, const RunResult& than) {
    return !r.pruned && outcome(r) == target && smaller(r, than);
  };
  // The end of a restart's minimisation (below); none otherwise.
  double cap = std::numeric_limits<double>::infinity();
  auto over = [&] { return out_of_time() || since(t0) >= cap; };
  using Devs = std::vector<Schedule::Deviation>;
  // Replays `devs` leniently; keeps the run in `cur` if it is smaller.
  auto attempt = [&](RunResult& cur, Devs devs) {
    if (over()) return false;
    RunOptions o = base;
    o.strategy = {};
    o.strategy.kind = StrategyKind::replay;
    o.strategy.strict = false;
    o.strategy.replay = Schedule(std::move(devs));
    RunResult r = run_within(std::move(o));
    if (!is_smaller(r, cur)) return false;
    cur = std::move(r);
    return true;
  };
  auto minimise = [&](RunResult& cur) {
    for (bool again = true; again && !cur.schedule.empty() && !over();) {
      again = false;
      // ddmin: remove chunks, from halves down to single deviations.
      for (std::size_t parts = 2;;) {
        const Devs devs = cur.schedule.deviations();
        if (devs.empty() || over()) break;
        parts = std::min(parts, devs.size());
        const std::size_t chunk = (devs.size() + parts - 1) / parts;
        bool reduced = false;
        for (std::size_t begin = 0; begin < devs.size() && !reduced; begin += chunk) {
          Devs cand(devs.begin(), devs.begin() + static_cast<std::ptrdiff_t>(begin));
          cand.insert(cand.end(), devs.begin() + static_cast<std::ptrdiff_t>(std::min(begin + chunk, devs.size())),
                      devs.end());
          reduced = attempt(cur, std::move(cand));
        }
        if (reduced) {
          parts = std::max<std::size_t>(parts - 1, 2);
        } else if (chunk == 1) {
          break;
        } else {
          parts *= 2;
        }
      }
      // Delay each preemption: the same switch a little later may come when
      // the running actor blocks, and then it is a free choice.
      const std::vector<std::uint64_t> pre = cur.preemption_at;
      for (std::uint64_t at : pre) {
        const Devs devs = cur.schedule.deviations();
        const auto it = std::find_if(devs.begin(), devs.end(), [&](const auto& d) { return d.at == at; });
        if (it == devs.end()) continue;
        const std::uint64_t limit = std::next(it) == devs.end() ? cur.choices : std::next(it)->at;
        for (std::uint64_t delay = 1; it->at + delay < limit && !again; delay *= 2) {
          Devs cand = devs;
          cand[static_cast<std::size_t>(it - devs.begin())].at += delay;
          again = attempt(cur, std::move(cand));
        }
        if (again || over()) break;
      }
    }
  };

  if (!best.schedule.empty()) attempt(best, {});  // the default policy's run: often all a deadlock needs
  minimise(best);

  // A run of an exhaustive search: one strategy across the runs, keeping
  // its tree.
  auto run_searching = [&](detail::ExhaustiveSearch& s) {
    RunOptions o = base;
    o.strategy = {};
    o.strategy.kind = StrategyKind::exhaustive;
    o.strategy.shared = &s;
    return run_within(std::move(o));
  };
  // The search for the minimum. Bounds 0 .. proved-1 were searched to their
  // end without the outcome; `search` is the bound `proved`'s, under way.
  std::uint32_t proved = 0;
  std::optional<detail::ExhaustiveSearch> search;
  bool search_cut = false;  // a run of it stopped at a deadline: it goes no further
  auto search_turn = [&](double until) {
    while (proved < best.preemptions() && since(t0) < until && !out_of_time()) {
      if (!search) search.emplace(proved, false);  // every schedule within the bound: a proof
      RunResult r = run_searching(*search);
      if (r.stopped) {
        search_cut = true;
        return;
      }
      if (is_smaller(r, best)) {
        // At most `proved` preemptions, which the bounds below prove the
        // fewest: the search is over, and delta debugging cuts deviations.
        best = std::move(r);
        minimise(best);
        return;
      }
      if (search->advance() != detail::ExhaustiveSearch::Advance::next) {
        search.reset();
        ++proved;
      }
    }
  };
  // The finder at bound `proved`: source sets within it (exhaustive.hpp),
  // a tree far smaller than the bounded search's, which branches at every
  // free choice. It proves nothing, but a schedule it meets is within the
  // bound, which the bounds below prove the fewest. It runs once per
  // bound, to its end or until `proved` moves on.
  std::optional<detail::ExhaustiveSearch> finder;
  std::optional<std::uint32_t> finder_ended;  // the last bound whose finder ended
  auto finder_turn = [&](double until) {
    while (proved < best.preemptions() && finder_ended != proved && since(t0) < until && !out_of_time()) {
      if (finder && finder->bound() != proved) finder.reset();
      if (!finder) finder.emplace(proved, true, true);
      RunResult r = run_searching(*finder);
      if (!r.stopped && is_smaller(r, best)) {
        best = std::move(r);
        minimise(best);
        finder.reset();
        return;
      }
      if (r.stopped || finder->advance() != detail::ExhaustiveSearch::Advance::next) {
        finder.reset();
        finder_ended = proved;
      }
    }
  };
  constexpr std::uint64_t kRestartSeed = 0x7368726e6b5f7273ull;  // restarts' runs: seeds of their own
  std::uint64_t restarts = 0;
  auto restart_turn = [&](double until) {
    while (!out_of_time()) {
      // The default portfolio's strategies in turn, PCT first (depth 3, over
      // the failing run's length): its runs deviate less, and shrink sooner.
      RunOptions o = base;
      o.strategy = {};
      o.strategy.kind = restarts % 2 == 0 ? StrategyKind::pct : StrategyKind::random;
      o.strategy.pct_steps = std::max<std::uint64_t>(failing.steps, 1);
      o.strategy.seed = run_seed(kRestartSeed, restarts++);
      RunResult r = run_within(std::move(o));
      if (!r.pruned && outcome(r) == target) {
        cap = since(t0) + seconds / 10;
        minimise(r);
        cap = std::numeric_limits<double>::infinity();
        if (smaller(r, best)) {
          best = std::move(r);
          minimise(best);
        }
        return;
      }
      if (since(t0) >= until) return;
    }
  };
  while (!search_cut && proved < best.preemptions() && !out_of_time()) {
    search_turn(since(t0) + seconds / 20);
    if (search_cut || proved >= best.preemptions() || out_of_time()) break;
    finder_turn(since(t0) + seconds / 80);
    if (proved >= best.preemptions() || out_of_time()) break;
    restart_turn(since(t0) + seconds / 20);
  }
  if (search_cut) st.finished = false;
  st.choices_after = best.schedule.size();
  st.preemptions_after = best.preemptions();
  st.preemptions_needed = std::min<std::uint64_t>(proved, best.preemptions());
  st.minimal = best.preemptions() <= proved;
  if (stats) *stats = st;
  return best;
}

// -------------------------------------------------------------- exploration

namespace {

constexpr std::uint64_t kNoRun = std::numeric_limits<std::uint64_t>::max();

struct Found {
  std::uint64_t run = kNoRun;
  StrategySpec spec;
  RunResult result;
  bool measuring_run = false;
};

// The time budget's clock: it starts when the first run has finished, so
// that however small the budget, at least one schedule is explored (a
// budget spent before any run would report "nothing found" about nothing).
class BudgetClock {
 public:
  explicit BudgetClock(double seconds) : seconds_(seconds) {}
  void run_finished() {
    std::int64_t none = kNotStarted;
    started_.compare_exchange_strong(none, SteadyClock::now().time_since_epoch().count());
  }
  bool spent() const {
    const std::int64_t start = started_.load();
    if (seconds_ <= 0 || start == kNotStarted) return false;
    return since(SteadyClock::time_point(SteadyClock::duration(start))) > seconds_;
  }

 private:
  static constexpr std::int64_t kNotStarted = std::numeric_limits<std::int64_t>::min();
  double seconds_;
  std::atomic<std::int64_t> started_{kNotStarted};
};

// The jobs an exploration runs on: as many as asked, or every core.
unsigned jobs_of(const ExploreOptions& o) {
  return o.jobs != 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
}

// Runs `job` on `jobs` threads while this one calls `progress` every half
// second, and returns once they are all over. An exception in a job stops
// the others (stop() is called, under `mu`) and is rethrown here. A job
// that cannot start (the system's limit on threads or on their stacks'
// memory) ends the exploration with the reason, after the started ones
// stop; the pool must not be destroyed while they run.
void run_pool(unsigned jobs, std::mutex& mu, const std::function<void()>& job, const std::function<void()>& stop,
              const std::function<void()>& progress) {
  std::condition_variable cv;
  unsigned running = jobs;  // guarded by mu
  std::exception_ptr error;
  std::vector<std::thread> pool;
  pool.reserve(jobs);
  for (unsigned t = 0; t < jobs; ++t) {
    try {
      pool.emplace_back([&] {
        try {
          job();
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!error) error = std::current_exception();
          stop();
        }
        std::lock_guard<std::mutex> lock(mu);
        --running;
        cv.notify_all();
      });
    } catch (const std::exception& e) {
      // No thread (std::system_error), or no memory for its state
      // (std::bad_alloc, near an address-space limit): the jobs started
      // are stopped and joined, never left joinable.
      std::lock_guard<std::mutex> lock(mu);
      running -= jobs - t;
      stop();
      if (!error)
        error = std::make_exception_ptr(OutOfResources(
            "could not start exploration job " + std::to_string(t + 1) + " of " + std::to_string(jobs) + " (" +
            e.what() + "): fewer jobs (--jobs, WSPIPE_JOBS) need fewer threads"));
      break;
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  while (!cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return running == 0; })) {
    lock.unlock();
    progress();
    lock.lock();
  }
  lock.unlock();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

// Random, PCT and round-robin runs: run number i uses portfolio[i % size]
// with seed run_seed(first_seed, i), so a run's schedule depends on i
// alone, and the failure kept is the lowest-numbered one whatever the
// number of jobs.
void explore_sampled(const KernelFactory& make, const ExploreOptions& o, const RunOptions& base,
                     std::uint64_t pct_steps, ExploreResult& res, Found& found, SteadyClock::time_point t0) {
  const unsigned jobs = jobs_of(o);
  // Round-robin alone makes the same choices in every run: one covers it.
  const bool deterministic = std::all_of(o.portfolio.begin(), o.portfolio.end(),
                                         [](const StrategySpec& s) { return s.kind == StrategyKind::round_robin; });
  std::atomic<std::uint64_t> next{0}, runs{0}, steps{0}, best{kNoRun}, past_window{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  BudgetClock clock(o.seconds);

  // This shard's next run number, or nullopt once the budget is spent.
  // Numbers are handed out in increasing order, so every number below a
  // failure found was taken before it and is finished before the end.
  auto take = [&]() -> std::optional<std::uint64_t> {
    if (stop.load() || clock.spent() || interrupted(o.interrupt)) return std::nullopt;
    const std::uint64_t i = o.shard_index + next.fetch_add(1) * o.shard_count;
    if ((o.runs != 0 && i >= o.runs) || i > best.load() || (deterministic && i >= o.shard_count)) return std::nullopt;
    return i;
  };
  auto one = [&](std::uint64_t i) {
    const StrategySpec& spec = o.portfolio[i % o.portfolio.size()];
    RunOptions ro = base;
    ro.strategy.kind = spec.kind;
    ro.strategy.seed = run_seed(o.first_seed, i);
    ro.strategy.pct_depth = spec.pct_depth;
    ro.strategy.pct_steps = pct_steps;
    RunResult r = run(make(), ro);
    clock.run_finished();
    runs.fetch_add(1);
    steps.fetch_add(r.steps);
    if (r.loads_past_window != 0) past_window.fetch_add(1);
    if (o.on_run) o.on_run(i, r);
    if (!failed(r)) return;
    std::lock_guard<std::mutex> lock(mu);
    if (i < found.run) {
      found = {i, spec, std::move(r)};
      best.store(i);
    }
  };
  auto progress = [&] {
    if (o.on_progress)
      o.on_progress({.runs = runs.load(), .steps = steps.load(), .seconds = since(t0), .failed = best.load() != kNoRun});
  };

  if (jobs == 1) {
    auto last = SteadyClock::now();
    while (auto i = take()) {
      one(*i);
      if (SteadyClock::now() - last > std::chrono::milliseconds(500)) {
        last = SteadyClock::now();
        progress();
      }
    }
  } else {
    run_pool(
        jobs, mu, [&] { while (auto i = take()) one(*i); }, [&] { stop = true; }, progress);
  }
  res.runs = runs.load();
  res.steps = steps.load();
  res.runs_past_window += past_window.load();
  progress();
}

// The exhaustive search on `jobs` threads. Its tree (detail::SearchTree)
// is split into searches that the jobs take in turn, at least one per job
// and more as runs go by, so that the subtrees near the first schedule
// start early; the tree, its runs and the counts are the same whatever the
// number of jobs (docs/exploration.md, "Parallel and sharded runs"). The search
// stops at the first failure a job finds: with several jobs, which failing
// schedule that is, and the counts up to it, depend on their timing.
// Sharded, the search is made of parts (detail::ShardedSearch): every
// shard makes the runs that decide the parts, counting its own, then
// explores its parts, each a tree as above, on its jobs.
void explore_exhaustive(const KernelFactory& make, const ExploreOptions& o, const RunOptions& base,
                        ExploreResult& res, Found& found, SteadyClock::time_point t0) {
  const unsigned jobs = jobs_of(o);
  res.exhaustive = true;
  res.bounded = o.preemptions.has_value();
  res.preemptions = o.preemptions.value_or(0);
  res.sharded = o.sharded || o.shard_count > 1;
  res.shard_index = o.shard_index;
  res.shard_count = o.shard_count;
  BudgetClock clock(o.seconds);
  std::mutex mu;  // guards the trees, the counts and `found`
  std::condition_variable cv;
  bool stop = false;
  std::uint64_t runs = 0, pruned = 0, steps = 0, taken = 0, past_window = 0;
  auto last = SteadyClock::now();
  auto progress = [&] {
    if (!o.on_progress) return;
    std::unique_lock<std::mutex> lock(mu);
    const ExploreProgress p{.runs = runs, .steps = steps, .seconds = since(t0), .failed = found.run != kNoRun};
    lock.unlock();
    o.on_progress(p);
  };
  // Whether the budget is spent (then everything stops). Under the lock.
  auto spent = [&] {
    if ((o.runs != 0 && runs + pruned + taken >= o.runs) || clock.spent() || interrupted(o.interrupt)) {
      stop = true;
      cv.notify_all();
    }
    return stop;
  };
  auto one_run = [&](detail::ExhaustiveSearch& s) {
    RunOptions ro = base;
    ro.strategy.kind = StrategyKind::exhaustive;
    ro.strategy.shared = &s;  // one strategy across its runs, keeping its tree
    RunResult r = run(make(), ro);
    clock.run_finished();
    return r;
  };
  // Counts a run of this process's; false once it failed (everything
  // stops). Under the lock, which it may release around the callbacks.
  auto tally = [&](std::unique_lock<std::mutex>& lock, RunResult&& r) {
    const std::uint64_t i = runs + pruned;
    if (r.pruned) {
      ++pruned;
    } else {
      ++runs;
      steps += r.steps;
      past_window += r.loads_past_window != 0 ? 1 : 0;
    }
    if (failed(r)) {
      if (found.run == kNoRun) found = {i, o.portfolio.front(), std::move(r)};
      stop = true;
      cv.notify_all();
      return false;
    }
    // One job reports its progress between runs (more: run_pool's thread).
    const bool tick = jobs == 1 && SteadyClock::now() - last > std::chrono::milliseconds(500);
    if ((o.on_run && !r.pruned) || tick) {
      lock.unlock();
      if (o.on_run && !r.pruned) o.on_run(i, r);
      if (tick) {
        last = SteadyClock::now();
        progress();
      }
      lock.lock();
    }
    return true;
  };

  // The trees this process explores, in order: the whole search, or its
  // parts of the sharded one.
  std::vector<std::unique_ptr<detail::SearchTree>> trees;
  bool settled = true;  // sharded: every part decided
  if (!res.sharded) {
    trees.push_back(std::make_unique<detail::SearchTree>(
        std::make_unique<detail::ExhaustiveSearch>(o.preemptions, o.reduce)));
  } else {
    detail::ShardedSearch parts(std::make_unique<detail::ExhaustiveSearch>(o.preemptions, o.reduce));
    std::unique_lock<std::mutex> lock(mu);
    while (const auto j = parts.deciding()) {
      if (spent()) break;
      lock.unlock();
      RunResult r = one_run(parts.part(*j));
      lock.lock();
      // Another shard's run: made alike there, and counted there.
      if (*j % o.shard_count == o.shard_index && !tally(lock, std::move(r))) break;
      parts.decided();
    }
    settled = !parts.deciding();
    res.parts_total = parts.parts();
    if (settled && !stop)
      for (std::size_t j = o.shard_index; j < parts.parts(); j += o.shard_count) {
        ++res.parts;
        if (auto s = parts.take(j)) trees.push_back(std::make_unique<detail::SearchTree>(std::move(s)));
      }
  }
  auto all_done = [&] {
    return std::all_of(trees.begin(), trees.end(), [](const auto& t) { return t->done(); });
  };
  auto ready = [&] {
    std::size_t n = 0;
    for (const auto& t : trees) n += t->ready();
    return n;
  };
  auto job = [&] {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      detail::SearchTree* tree = nullptr;
      detail::SearchTree::Task* t = nullptr;
      for (;;) {
        if (stop || all_done() || spent()) return;
        for (auto& candidate : trees)
          if ((t = candidate->take()) != nullptr) {
            tree = candidate.get();
            break;
          }
        if (t != nullptr) break;
        cv.wait(lock);
      }
      ++taken;
      lock.unlock();
      RunResult r = one_run(detail::SearchTree::search(t));
      lock.lock();
      --taken;
      if (!tally(lock, std::move(r))) return;
      tree->ran(t, jobs);
      if (all_done() || ready() > 0) cv.notify_all();
    }
  };
  if (!stop) {
    if (jobs == 1) {
      job();
    } else {
      run_pool(jobs, mu, job, [&] {
        stop = true;
        cv.notify_all();
      }, progress);
    }
  }
  res.runs = runs;
  res.pruned = pruned;
  res.steps = steps;
  res.runs_past_window = past_window;
  res.complete = settled && all_done() && found.run == kNoRun;
  if (o.on_progress)
    o.on_progress({.runs = res.runs, .steps = res.steps, .seconds = since(t0), .failed = found.run != kNoRun});
}

}  // namespace

namespace {
ExploreResult explore_unguarded(const KernelFactory& make, const ExploreOptions& o) {
  if (!o.trace_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.trace_dir, ec);
    if (ec)
      throw std::invalid_argument("explore: trace_dir " + shell_quote(o.trace_dir) + " cannot be created: " +
                                  ec.message());
    check_trace_file((std::filesystem::path(o.trace_dir) / "trace.json").string());
  }
  const auto t0 = SteadyClock::now();
  ExploreResult res;
  const RunOptions base = o.run_options();
  Found found;

  if (o.portfolio.front().kind == StrategyKind::exhaustive) {
    explore_exhaustive(make, o, base, res, found, t0);
  } else {
    std::uint64_t pct_steps = StrategyParams{}.pct_steps;
    std::optional<Found> measuring;  // the measuring run, when it failed
    if (std::any_of(o.portfolio.begin(), o.portfolio.end(),
                    [](const StrategySpec& s) { return s.kind == StrategyKind::pct; })) {
      // PCT spreads its change points over the expected length of a run:
      // measure it once with the round-robin strategy.
      RunOptions rr = base;
      rr.strategy.kind = StrategyKind::round_robin;
      RunResult measured = run(make(), rr);
      pct_steps = std::max<std::uint64_t>(measured.steps, 1);
      if (failed(measured)) measuring = Found{0, {StrategyKind::round_robin}, std::move(measured), true};
    }
    if (measuring) {
      // Its result counts. A kernel that fails here usually fails on every
      // schedule: one run of each strategy reports it as a numbered run, as
      // without PCT; if none of them fails, the measuring run is reported.
      ExploreOptions first = o;
      first.runs = std::min<std::uint64_t>(o.runs != 0 ? o.runs : kNoRun, o.portfolio.size());
      first.seconds = 0;
      explore_sampled(make, first, base, pct_steps, res, found, t0);
      if (found.run == kNoRun) {
        ++res.runs;
        res.steps += measuring->result.steps;
        res.runs_past_window += measuring->result.loads_past_window != 0 ? 1 : 0;
        found = std::move(*measuring);
      }
    } else {
      explore_sampled(make, o, base, pct_steps, res, found, t0);
    }
  }
  res.interrupted = interrupted(o.interrupt);
  // A shard of a sharded search may hold no part, or parts whose runs were
  // all cut short as equivalent to runs of other parts: it has explored
  // what is its own, and the other shards the rest (its report says so).
  const bool own_parts_done = res.sharded && res.complete;
  if (res.runs == 0 && found.run == kNoRun && !res.interrupted && !own_parts_done)
    throw std::runtime_error("explore: no schedule was explored (" + std::to_string(res.pruned) +
                             " pruned); nothing can be said about the kernel");

  if (found.run != kNoRun) {
    Failure f;
    f.run = found.run;
    f.strategy = found.spec;
    f.seed = o.first_seed;
    f.measuring_run = found.measuring_run;
    f.outcome = outcome(found.result);
    f.original = found.result.schedule;
    RunResult small = found.result;
    f.shrink.choices_before = f.shrink.choices_after = small.schedule.size();
    f.shrink.preemptions_before = f.shrink.preemptions_after = small.preemptions();
    f.shrink.minimal = small.preemptions() == 0;
    if (o.shrink) {
      if (o.on_progress) o.on_progress({.runs = res.runs, .steps = res.steps, .seconds = since(t0), .failed = true,
                                        .shrinking = true});
      small = shrink(make, base, found.result, o.shrink_seconds, &f.shrink, o.interrupt);
    }
    try {
      f.result = replay(make(), small.schedule, base);
    } catch (const ScheduleMismatch& e) {
      throw std::runtime_error("explore: run " + std::to_string(found.run + 1) +
                               " failed, but its schedule did not replay the same way: the kernel is not "
                               "deterministic (global state, time, addresses, uninitialised data?): " + e.what());
    }
    if (!o.trace_dir.empty()) {
      for (const char* name : {"trace.json", "trace.txt"}) {
        const std::string file = (std::filesystem::path(o.trace_dir) / name).string();
        write_trace(file, f.result.trace);
        f.trace_files.push_back(file);
      }
    }
    res.failure = std::move(f);
  }
  res.interrupted = res.interrupted || interrupted(o.interrupt);  // perhaps while shrinking
  res.assumptions = assumptions(o, res.runs_past_window);
  res.seconds = since(t0);
  return res;
}

}  // namespace

// Memory and threads are budgets, not crashes: what runs
// out becomes OutOfResources, naming what would help.
ExploreResult explore(const KernelFactory& make, const ExploreOptions& o) {
  validate(o);
  try {
    return explore_unguarded(make, o);
  } catch (const std::bad_alloc&) {
    throw OutOfResources("out of memory exploring with " + std::to_string(jobs_of(o)) + " job(s) and an MMA memo of " +
                         std::to_string(o.mma_memo_bytes >> 20) +
                         " MiB per job: each job holds a run's shared memory, Tensor Memory and trace, and its "
                         "memo; fewer jobs (--jobs, WSPIPE_JOBS), no memo (--mma-memo-mib 0, "
                         "WSPIPE_MMA_MEMO_MIB=0) or a smaller configuration need less");
  }
}

ExploreResult explore(const Kernel& kernel, const ExploreOptions& options) {
  ExploreOptions o = options;
  if (o.jobs == 0) o.jobs = 1;  // one instance: shared across threads only when asked for
  return explore([&kernel] { return kernel; }, o);
}

}  // namespace wspipe::emu
