// verify_parametric: complete searches at successive item counts, the
// abstract states each reached, and the comparison that says they repeat.
#include "backends/emu/parametric.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "backends/emu/report.hpp"

namespace wspipe::emu {

std::string_view to_string(ParametricVerdict v) {
  switch (v) {
    case ParametricVerdict::holds: return "holds";
    case ParametricVerdict::found: return "found";
    case ParametricVerdict::incomplete: return "incomplete";
    case ParametricVerdict::does_not_repeat: return "does not repeat";
  }
  return "?";
}

namespace {

// What one count's search reached: abstract states by their number in the
// table shared by every count, and transitions as pairs of them.
struct Reached {
  std::set<std::uint32_t> states;
  std::set<std::pair<std::uint32_t, std::uint32_t>> transitions;
  bool operator==(const Reached&) const = default;
};

// Numbers texts in the order first seen: the same text, the same number.
class Numbering {
 public:
  std::uint32_t number(std::string_view text) {
    if (const auto it = ids_.find(text); it != ids_.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(texts_.size());
    texts_.push_back(&ids_.emplace(std::string(text), id).first->first);
    return id;
  }
  const std::string& text(std::uint32_t id) const { return *texts_[id]; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(texts_.size()); }

 private:
  struct Hash {  // looks a string_view up without making a string of it
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> ids_;
  std::vector<const std::string*> texts_;  // by number (the map's keys do not move)
};

// The observer of every run of the searches: numbers each abstract state
// (the same text, the same number, across counts) and records the states
// and transitions of the count being searched. A run's first point (step
// 0) has no transition into it. A search with jobs > 1 calls it from
// several threads at once, each running whole runs: each thread records
// into a buffer of its own, in numbers of its own, and takes the lock only
// to get that buffer, once per search and thread; the buffers are merged into the
// shared numbering when the search is over (the sets are the same whatever
// thread ran which run).
class Recorder final : public StateObserver {
 public:
  // Before a count's search: its buffers from here on.
  void start() {
    search_ = next_search_.fetch_add(1) + 1;
    buffers_.clear();
  }
  void point(std::uint64_t step, std::string_view state) override {
    Buffer& b = buffer();
    const std::uint32_t id = b.numbers.number(state);
    b.reached.states.insert(id);
    if (step != 0 && b.last) b.reached.transitions.emplace(*b.last, id);
    b.last = id;
  }
  // After the search: what its runs reached, in the shared numbering.
  // States new to it are numbered in the order a buffer's runs first
  // reached them, so that the difference does_not_repeat names (the new
  // state with the lowest number) is, on one job, the first one reached.
  Reached finish() {
    Reached r;
    for (const auto& b : buffers_) {
      std::vector<std::uint32_t> shared(b->numbers.size());
      for (std::uint32_t i = 0; i < b->numbers.size(); ++i) shared[i] = numbers_.number(b->numbers.text(i));
      for (const std::uint32_t s : b->reached.states) r.states.insert(shared[s]);
      for (const auto& [from, to] : b->reached.transitions) r.transitions.emplace(shared[from], shared[to]);
    }
    return r;
  }
  const std::string& text(std::uint32_t id) const { return numbers_.text(id); }

 private:
  struct Buffer {
    Numbering numbers;
    Reached reached;                    // in `numbers`
    std::optional<std::uint32_t> last;  // the run's previous point
  };
  // This thread's buffer for the search under way: found without the lock
  // once the thread has one (its search's number tells a buffer of an
  // earlier search, of this recorder or another, from this one's).
  Buffer& buffer() {
    thread_local struct {
      std::uint64_t search = 0;
      Buffer* buffer = nullptr;
    } mine;
    if (mine.search != search_) {
      std::lock_guard lock(mutex_);
      mine.buffer = buffers_.emplace_back(std::make_unique<Buffer>()).get();
      mine.search = search_;
    }
    return *mine.buffer;
  }

  static inline std::atomic<std::uint64_t> next_search_{0};
  std::uint64_t search_ = 0;  // set before the search's threads start
  std::mutex mutex_;          // guards buffers_ during a search
  std::vector<std::unique_ptr<Buffer>> buffers_;
  Numbering numbers_;  // shared by every count
};

// Something `later` reached that `earlier` did not, in words; "" if none.
std::string first_new(const Reached& later, const Reached& earlier, const Recorder& rec) {
  for (const std::uint32_t s : later.states)
    if (!earlier.states.contains(s)) return "state " + rec.text(s);
  for (const auto& [a, b] : later.transitions)
    if (!earlier.transitions.contains({a, b})) return "transition " + rec.text(a) + " -> " + rec.text(b);
  for (const std::uint32_t s : earlier.states)
    if (!later.states.contains(s)) return "no longer state " + rec.text(s);
  for (const auto& [a, b] : earlier.transitions)
    if (!later.transitions.contains({a, b})) return "no longer transition " + rec.text(a) + " -> " + rec.text(b);
  return "";
}

}  // namespace

ParametricResult verify_parametric(const ItemsKernelFactory& make, const ParametricOptions& options) {
  const std::uint32_t period = options.period, lo = options.min_items, hi = options.max_items;
  if (period == 0)
    throw std::invalid_argument("verify_parametric: period 0 (a ring of S stages repeats every 2 * S items)");
  if (lo == 0) throw std::invalid_argument("verify_parametric: min_items 0 (the claim starts at one item or more)");
  const std::uint64_t least = std::uint64_t{lo} + 2 * std::uint64_t{period} - 1;
  if (hi < least)
    throw std::invalid_argument("verify_parametric: max_items " + std::to_string(hi) +
                                " is below min_items + 2 * period - 1 = " + std::to_string(least) +
                                ": no repeat could be seen");
  const auto start = std::chrono::steady_clock::now();
  Recorder recorder;
  ExploreOptions x = options.search;
  x.portfolio = {{StrategyKind::exhaustive}};
  x.preemptions.reset();
  x.reduce = true;
  // x.jobs as given: a split search makes the same runs, so the same states.
  x.shard_index = 0;
  x.shard_count = 1;
  x.observer = &recorder;

  ParametricResult res;
  res.period = period;
  res.min_items = lo;
  const std::size_t span = 2 * std::size_t{period};
  std::deque<Reached> window;  // the last `span` counts' (the oldest first)
  auto finish = [&](ParametricVerdict v) {
    res.verdict = v;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(res);
  };
  for (std::uint32_t n = lo;; ++n) {
    recorder.start();
    ExploreResult r = explore(make(n), x);
    window.push_back(recorder.finish());
    if (window.size() > span) window.pop_front();
    const Reached& got = window.back();
    res.counts.push_back({.items = n, .verdict = r.verdict(), .runs = r.runs, .pruned = r.pruned,
                          .states = got.states.size(), .transitions = got.transitions.size(),
                          .seconds = r.seconds});
    if (r.verdict() != Verdict::verified) {
      res.failing = std::move(r);
      return finish(res.failing->verdict() == Verdict::found ? ParametricVerdict::found
                                                             : ParametricVerdict::incomplete);
    }
    if (window.size() == span) {
      bool repeats = true;
      for (std::uint32_t k = 0; k < period && repeats; ++k) repeats = window[k] == window[k + period];
      if (repeats) {
        res.repeats_from = n + 1 - 2 * period;
        return finish(ParametricVerdict::holds);
      }
    }
    if (n == hi) break;
  }
  res.difference = first_new(window.back(), window[window.size() - 1 - period], recorder);
  return finish(ParametricVerdict::does_not_repeat);
}

std::string ParametricResult::report() const {
  std::string s = "parametric: ";
  s.append(to_string(verdict));
  const std::uint32_t last = counts.empty() ? 0 : counts.back().items;
  char line[256] = "";
  switch (verdict) {
    case ParametricVerdict::holds:
      std::snprintf(line, sizeof line,
                    ": verified for every number of items from %u (the abstract states of %u..%u items repeat %u "
                    "items later; what this assumes: docs/exploration.md, \"Parametric verdicts\")\n",
                    min_items, repeats_from, repeats_from + period - 1, period);
      break;
    case ParametricVerdict::found:
      if (last == min_items)
        std::snprintf(line, sizeof line, " at %s, the first count\n", counted(last, "item").c_str());
      else
        std::snprintf(line, sizeof line, " at %u items (%u..%u verified)\n", last, min_items, last - 1);
      break;
    case ParametricVerdict::incomplete:
      std::snprintf(line, sizeof line, ": the search at %s ran out of its budget\n", counted(last, "item").c_str());
      break;
    case ParametricVerdict::does_not_repeat:
      std::snprintf(line, sizeof line, ": verified for %u..%u items only; at %u items, new against %u: ", min_items,
                    last, last, last - period);
      break;
  }
  s.append(line);
  if (verdict == ParametricVerdict::does_not_repeat) s.append(difference).push_back('\n');
  for (const ParametricCount& c : counts) {
    std::snprintf(line, sizeof line, "  items %u: %s, %s (+%llu pruned), %s, %s, %.2f s\n", c.items,
                  std::string(to_string(c.verdict)).c_str(), counted(c.runs, "run").c_str(),
                  static_cast<unsigned long long>(c.pruned), counted(c.states, "state").c_str(),
                  counted(c.transitions, "transition").c_str(), c.seconds);
    s.append(line);
  }
  std::snprintf(line, sizeof line, "  %s searched in %.2f s\n", counted(counts.size(), "count").c_str(), seconds);
  s.append(line);
  if (failing) s.append(failing->report());
  return s;
}

}  // namespace wspipe::emu
