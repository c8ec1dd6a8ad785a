// The exhaustive search's partial-order reduction against the unreduced
// search (fuzz/soundness_program.hpp; docs/fuzzing.md, docs/exploration.md
// "Soundness, tested differentially"): the input is a tiny kernel, searched
// without the reduction and with it; the reduced search must reach the
// same final states; the search split among 3 simulated workers (as
// --jobs splits it) must make the same tree as one search; and its sharded
// form (--shard), its parts run in turn, must reach the same final states
// as one search. A difference
// prints the program, the searches and the states only one reached, with
// schedule tokens, and aborts. The continuous form
// of tests/explore_soundness_test.cpp, which checks thousands of seeded
// programs in CI.
//
// Input: byte 0: race checker (bit 0), spurious try_wait (bit 1), loads out
// of issue order (bit 2), each on when its bit is clear (the defaults), a
// cluster of two CTAs (bit 3), a program around counted phases (bit 4:
// make_counted_program; then bit 3 is ignored), and a program around one
// TMA engine's order (bit 5: make_engine_program, compared as
// engine_comparisons says; then bits 3 and 4 are ignored); the rest draws
// the program
// (each choice is a byte modulo the number of alternatives; 0 once the
// input runs out).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/model_fuzz.hpp"
#include "fuzz/soundness_program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sd = wspipe::fuzz::soundness;
  wspipe::fuzz::Bytes in(data, size);
  const std::uint8_t head = in.u8();
  const auto o = sd::run_options((head & 1u) == 0, (head & 2u) == 0, (head & 4u) == 0);
  const auto below = [&](std::uint32_t n) { return static_cast<std::uint32_t>(in.u8() % n); };
  const bool engine = (head & 32u) != 0;
  const bool counted = !engine && (head & 16u) != 0;
  const sd::Program p = engine    ? sd::make_engine_program(below)
                        : counted ? sd::make_counted_program(below)
                                  : sd::make_program(below, (head & 8u) != 0 ? 2 : 1);
  // A search that passes this many runs leaves the comparison undecided:
  // an input the fuzzer keeps is then cheap to run again. (Counted phases'
  // and the engine programs' unreduced searches are larger.)
  const std::uint64_t max_runs = engine || counted ? 5000 : 1000;
  static const std::vector<sd::Comparison> handoffs = sd::reduction_comparisons();
  static const std::vector<sd::Comparison> engines = sd::engine_comparisons();
  const std::vector<sd::Comparison>& comparisons = engine ? engines : handoffs;
  std::vector<sd::Tally> tallies;
  const auto differences = sd::check_program(p, o, comparisons, max_runs, tallies);
  // What a corpus exercises, as the model targets print their outcomes.
  static const bool show = std::getenv("WSPIPE_FUZZ_OUTCOMES") != nullptr;
  if (show) {
    std::fprintf(stderr, "%s\n", sd::to_string(p).c_str());
    for (std::size_t i = 0; i < tallies.size(); ++i) {
      const sd::Tally& t = tallies[i];
      const std::string counts = t.too_large != 0 ? "too large"
                                                  : std::to_string(t.states) + " states, " +
                                                        std::to_string(t.reference_runs) + " runs " +
                                                        comparisons[i].reference.name + ", " +
                                                        std::to_string(t.tested_runs + t.tested_pruned) + " reduced";
      std::fprintf(stderr, "  %s: %s\n", comparisons[i].tested.name.c_str(), counts.c_str());
    }
  }
  if (!differences.empty()) {
    std::fprintf(stderr, "dpor_soundness: the reduced search does not reach the unreduced search's final states\n%s",
                 differences.front().c_str());
    std::abort();
  }
  // The source-set search split among 3 workers (--jobs) makes the same
  // tree as one search: the same runs, pruned runs, races and states.
  const sd::SearchSpec dpor = sd::unbounded(true);
  const sd::Reached one = sd::search(p, dpor, o, max_runs);
  if (one.complete) {
    const sd::Reached split = sd::search_split(p, dpor, o, 3, size);
    std::vector<std::string> a, b;
    for (const auto& kv : one.states) a.push_back(kv.first);
    for (const auto& kv : split.states) b.push_back(kv.first);
    if (split.runs != one.runs || split.pruned != one.pruned || split.races != one.races || a != b) {
      std::fprintf(stderr,
                   "dpor_soundness: the split search differs from one search: runs %llu / %llu, pruned %llu / %llu, "
                   "races %llu / %llu, states %zu / %zu\n%s\n",
                   static_cast<unsigned long long>(split.runs), static_cast<unsigned long long>(one.runs),
                   static_cast<unsigned long long>(split.pruned), static_cast<unsigned long long>(one.pruned),
                   static_cast<unsigned long long>(split.races), static_cast<unsigned long long>(one.races),
                   b.size(), a.size(), sd::to_string(p).c_str());
      std::abort();
    }
    // The sharded search (--shard), its parts run in turn, reaches the
    // same final states (a failing program: a failure, and no other state).
    const sd::Reached sharded = sd::search(p, sd::sharded(), o);
    std::vector<std::string> c;
    for (const auto& kv : sharded.states) c.push_back(kv.first);
    const bool failing = sd::has_failure(one) && sd::has_failure(sharded);
    const bool extra = !sd::missing(sharded, one, "sharded", "one search").empty();
    if (extra || (!failing && c != a)) {
      std::fprintf(stderr, "dpor_soundness: the sharded search does not reach one search's final states\n%s%s%s\n",
                   sd::missing(one, sharded, "one search", "sharded").c_str(),
                   sd::missing(sharded, one, "sharded", "one search").c_str(), sd::to_string(p).c_str());
      std::abort();
    }
  }
  return 0;
}
