// Parametric verdicts for ring-shaped protocols: the complete exhaustive
// search of a kernel at successive item counts, and the claim that its
// verdict holds for every count once the protocol's abstract state repeats.
// What is checked, what is assumed and where the claim does not hold:
// docs/exploration.md, "Parametric verdicts".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "explore.hpp"

namespace wspipe::emu {

// The kernel under test handling `items` items (a ring's payloads, a
// pipeline's k-blocks): a factory of its instances at that count.
using ItemsKernelFactory = std::function<KernelFactory(std::uint32_t items)>;

struct ParametricOptions {
  // Each count's search: verify_parametric sets the exhaustive strategy
  // without a preemption bound, with the reduction, and its own observer
  // (RunOptions::observer); the rest (jobs included: a search split among
  // jobs makes the same runs, so it records the same states)
  // is these options' (the race checker, try_wait time-outs, loads out of
  // order, the budget of each count's search, the shrinking of a failure).
  // Their default budget, 10 seconds, is per count; `seconds = 0` with
  // `runs = 0` searches each count to its end.
  ExploreOptions search;
  // The number of items after which the protocol's abstract state comes
  // back: for a ring of S stages, 2 * S (a cursor is back at its stage with
  // the same phase parity every 2 * S items, and so is every barrier).
  std::uint32_t period = 2;
  // The claim covers every count from min_items up. Counts are searched
  // from there, one by one, until the last 2 * period counts repeat (below)
  // or max_items has been searched.
  std::uint32_t min_items = 1;
  std::uint32_t max_items = 64;
};

enum class ParametricVerdict {
  // Every count searched was verified, and the abstract states repeat:
  // for each of `period` consecutive counts n, the search at n + period
  // reached exactly the abstract states and transitions that the one at n
  // reached. Claimed for every count from min_items, under the
  // assumptions of docs/exploration.md.
  holds,
  found,       // a count's search found a failure (ParametricResult::failing)
  incomplete,  // a count's search ran out of its budget (or was interrupted)
  // Every count up to max_items was verified, but the abstract states did
  // not repeat: nothing is claimed beyond the counts searched.
  does_not_repeat,
};
std::string_view to_string(ParametricVerdict v);

// One count's complete search.
struct ParametricCount {
  std::uint32_t items = 0;
  Verdict verdict = Verdict::verified;
  std::uint64_t runs = 0, pruned = 0;  // as ExploreResult's
  std::size_t states = 0;              // distinct abstract states its runs passed through
  std::size_t transitions = 0;         // distinct pairs of consecutive ones
  double seconds = 0;
};

struct ParametricResult {
  ParametricVerdict verdict = ParametricVerdict::does_not_repeat;
  std::uint32_t period = 0, min_items = 0;
  // holds: the first of the `period` counts whose states came back
  // `period` items later (the searches at repeats_from .. repeats_from +
  // 2 * period - 1 are the ones compared).
  std::uint32_t repeats_from = 0;
  std::vector<ParametricCount> counts;   // every count searched, ascending
  std::optional<ExploreResult> failing;  // found, incomplete: that count's exploration (counts.back())
  // does_not_repeat: an abstract state (or a transition, "A -> B") that the
  // search at max_items reached and the one at max_items - period did not.
  std::string difference;
  double seconds = 0;

  bool holds() const { return verdict == ParametricVerdict::holds; }
  // For a person: the verdict and what it covers, then one line per count.
  std::string report() const;
};

// Searches `make(n)` for n = min_items, min_items + 1, ... (each to its end:
// the exhaustive strategy without a bound), recording the abstract state
// at every scheduling point of every run (RunOptions::observer), and stops
// at the first count that fails or whose search is incomplete, at the
// first repeat (holds), or after max_items (does_not_repeat). Throws
// std::invalid_argument on a period of 0, min_items of 0 or max_items below
// min_items + 2 * period - 1 (no repeat could be seen), and what explore()
// throws.
ParametricResult verify_parametric(const ItemsKernelFactory& make, const ParametricOptions& options);

}  // namespace wspipe::emu
