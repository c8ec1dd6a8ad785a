// What a verdict assumed (explore.hpp, assumptions), and the note every
// kernel translation unit leaves of whether it was compiled with the access
// instrumentation (emu_ops.hpp, note_translation_unit).
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "backends/emu/emu_ops.hpp"
#include "backends/emu/explore.hpp"

namespace wspipe::emu {
namespace detail {
namespace {

struct Uninstrumented {
  std::mutex mu;
  std::vector<std::string> files;  // sorted, unique
};

Uninstrumented& uninstrumented() {
  static Uninstrumented u;
  return u;
}

}  // namespace

void note_translation_unit(const char* file, bool instrumented) noexcept {
  if (instrumented || file == nullptr) return;
  try {
    Uninstrumented& u = uninstrumented();
    const std::lock_guard<std::mutex> lock(u.mu);
    const std::string f(file);
    const auto it = std::lower_bound(u.files.begin(), u.files.end(), f);
    if (it == u.files.end() || *it != f) u.files.insert(it, f);
  } catch (...) {  // out of memory as the program starts: nothing to note it in
  }
}

}  // namespace detail

std::vector<std::string> uninstrumented_translation_units() {
  detail::Uninstrumented& u = detail::uninstrumented();
  const std::lock_guard<std::mutex> lock(u.mu);
  return u.files;
}

std::vector<std::string> assumptions(const ExploreOptions& o) { return assumptions(o, 0); }

std::vector<std::string> assumptions(const ExploreOptions& o, std::uint64_t runs_past_window) {
  std::vector<std::string> a;
  const bool exhaustive =
      std::any_of(o.portfolio.begin(), o.portfolio.end(), [](const StrategySpec& s) { return s.kind == StrategyKind::exhaustive; });
  if (exhaustive && o.preemptions)
    a.push_back("at most " + std::to_string(*o.preemptions) + " preemption(s) per schedule (--preemptions)");
  if (!o.spurious_try_wait)
    a.push_back("try_wait times out only when no other actor can move (--no-spurious-try-wait)");
  else
    a.push_back("a try_wait loop still spinning after " + std::to_string(o.spin_out_limit) +
                " time-outs in a row is taken to spin until its phase completes; a warp times out there 1 to " +
                std::to_string(kSingleTimeOuts) +
                " times in a row, or until it leaves the loop, not a number of times between (--spin-out-limit)");
  if (!o.async_reorder)
    a.push_back("TMA loads complete whole, in issue order (--no-async-reorder)");
  else {
    a.push_back("only the oldest TMA load of its engine's queue lands in pieces, cut in halves or where its "
                "barrier's tx-count reaches zero");
    if (runs_past_window != 0)
      a.push_back("in " + std::to_string(runs_past_window) + " run(s) a TMA load queued behind more than " +
                  std::to_string(std::max(o.reorder_window, 1u)) +
                  " older operations of its engine could not complete before all of them (--reorder-window)");
  }
  if (!o.race_check) a.push_back("the race checker is off: unordered data accesses are not reported");
  if (!o.lane_divergence)
    a.push_back("a warp's lanes run as one: values that differ between lanes are not seen (--lane-divergence)");
  const std::vector<std::string> files = uninstrumented_translation_units();
  if (!files.empty()) {
    // Named as the reports name source files: from the project's root.
    std::string root = o.source_root.empty() ? default_source_root() : o.source_root;
    if (!root.empty() && root.back() != '/') root += '/';
    const auto named = [&](const std::string& f) { return !root.empty() && f.rfind(root, 0) == 0 ? f.substr(root.size()) : f; };
    std::string list;
    for (std::size_t i = 0; i < files.size() && i < 4; ++i) list += (i != 0 ? ", " : "") + named(files[i]);
    if (files.size() > 4) list += " and " + std::to_string(files.size() - 4) + " more";
    a.push_back("kernel code compiled without the access instrumentation (" + list +
                "): its plain shared-memory accesses are not seen");
  }
  return a;
}

}  // namespace wspipe::emu
