// Scheduler strategies: at each step, which of the actors that can move goes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedule.hpp"

namespace wspipe::emu {

// stall: random schedules in which one warp, drawn at random, is held back
// for a stretch (StrategyParams::pct_steps sets the scale).
enum class StrategyKind { round_robin, random, pct, replay, exhaustive, custom, stall };

std::string_view to_string(StrategyKind k);
std::optional<StrategyKind> parse_strategy(std::string_view name);

// splitmix64: small, fast, and the same sequence on every platform (no
// std:: distribution, whose output is implementation-defined).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n >= 1 (Lemire's multiply-shift; the bias is below
  // 2^-32 for the small n used here).
  std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
  }

 private:
  std::uint64_t state_;
};

// A step at which the scheduler asks the strategy.
struct Choice {
  const std::uint32_t* enabled = nullptr;  // the actors that can move, ascending
  const std::uint8_t* spin = nullptr;      // per enabled actor: 1 if it can only time out (spurious try_wait)
  std::size_t n = 0;                       // >= 2, or >= 1 for strategies that want every step
  std::uint64_t step = 0;                  // the step about to be taken, from 1
  std::uint64_t index = 0;                 // choice point index (steps with n >= 2), from 0
  std::uint32_t preferred = 0;             // the default policy's pick
  // The actor of the last step is enabled and can make progress: picking
  // any other preempts it.
  bool can_continue = false;
  // Actors from this id on are alternative completions of the TMA engines
  // (RunOptions::async_reorder: a load out of issue order, or a piece of
  // one). The default policy never picks one; picking one is a preemption.
  std::uint32_t first_alternative = ~std::uint32_t{0};
};

// Whether picking `actor` at `c` is a preemption: switching away from an
// actor that could go on, letting a spinning try_wait time out, or
// completing a TMA load out of order or in pieces (which the default policy
// never does).
bool is_preemption(const Choice& c, std::uint32_t actor);

// The resources a step touched, each with how it touched it, as sorted,
// unique entries: the resource's kind in the top byte, its key in bits
// 3..55, the access in bits 0..2 (footprint_entry; footprint_resource and
// footprint_touch take them apart). kGlobalResource: the step touched
// everything. Two steps of different actors commute unless they touch one
// resource and not both read it, nor both update it commutatively
// (Touch::commute or Touch::count). Touch::commute is an update whose
// effect does not depend on the order of the others (an issue counted
// into an engine's load, which only readers test; a flag set
// idempotently). Touch::count is an update of a counter whose last update
// does more (the arrival that completes an mbarrier phase, a named
// barrier's generation, a CTA's warps' exits): such updates commute as a
// whole, but which one is last depends on their order (stays_asleep).
// Touch::await is a read by a step that the write it reads enabled (a
// blocking wait passing on the phase a completion began, an engine
// completing the operation an issue queued): it orders like a read, but
// the two can never run the other way round, which the exhaustive search
// need not try (reversible). Touch::issue is no access at all: it marks a
// step that queued a TMA load on its engine's order (kEngineOrderKind),
// which the exhaustive search reads (see there); it orders nothing.
using Footprint = std::vector<std::uint64_t>;
inline constexpr std::uint64_t kGlobalResource = ~std::uint64_t{0};
enum class Touch : std::uint64_t { read = 0, commute = 1, write = 2, await = 3, count = 4, issue = 5 };
inline constexpr std::uint64_t footprint_entry(std::uint64_t kind, std::uint64_t key, Touch a) {
  return (kind << 56) | ((key & ((std::uint64_t{1} << 53) - 1)) << 3) | static_cast<std::uint64_t>(a);
}
inline constexpr std::uint64_t footprint_kind(std::uint64_t entry) { return entry >> 56; }
// The resource of an entry (its kind and key): two entries touch one
// resource when these are equal.
inline constexpr std::uint64_t footprint_resource(std::uint64_t entry) { return entry >> 3; }
inline constexpr Touch footprint_touch(std::uint64_t entry) { return static_cast<Touch>(entry & 7); }
// The one kind the exhaustive search reads itself: an engine's order of
// completion, written by each completion (the emulator's kinds are its
// own; this one it shares). At each completion of a TMA load the search
// explores the engine's alternatives (a load out of order, a piece); and
// where a load was queued (Touch::issue) after the completion of an older
// operation that does not happen before the issue, it explores queuing the
// load first, which lets it overtake that operation.
inline constexpr std::uint64_t kEngineOrderKind = 4;
bool independent(const Footprint& a, const Footprint& b);
// Whether a step with footprint `later`, which depends on an earlier step
// with footprint `earlier`, could have run first: false when `later`
// awaits an update of `earlier` (it was enabled by it).
bool reversible(const Footprint& earlier, const Footprint& later);
// Whether a step `asleep` (explored elsewhere: in a sleep set) stays
// asleep across a step `step`: independent of it, and not both updating
// one counter (Touch::count). Two counted updates commute, but what the
// second one does depends on the first (the arrival that completes a
// phase is whichever comes last), so the sleeping step's footprint, taken
// where it ran before, may no longer be its footprint after `step`.
// Updates whose effect does not depend on their order (Touch::commute)
// leave it asleep.
bool stays_asleep(const Footprint& asleep, const Footprint& step);

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Returns one of c.enabled, or nullopt to stop the run: a replayed
  // schedule that does not fit (mismatch() says why), or a run the strategy
  // abandons (pruned() is then true).
  virtual std::optional<std::uint32_t> pick(const Choice& c) = 0;
  // Replay only: why the last pick failed, or, once the run is over, the
  // choices it left unused; empty when the schedule fit.
  virtual std::string mismatch() const { return {}; }
  // The run was cut short as redundant (exhaustive search).
  virtual bool pruned() const { return false; }
  // Strategies that reason about commuting steps: asked at every step (n
  // may be 1), and told each step's footprint once it is over.
  virtual bool wants_footprints() const { return false; }
  virtual void stepped(std::uint32_t /*actor*/, const Footprint& /*fp*/) {}
  // A strategy that lives across runs (StrategyParams::shared, as shuttle's
  // new_execution): called as each run starts, before its first pick, with
  // the number of actors of that run.
  virtual void new_execution(std::uint32_t /*num_actors*/) {}
  // Called as each run ends (strategies that want footprints only): with
  // whether it ended on a failure (a violation, a deadlock or a livelock),
  // which may leave actors that could still move.
  virtual void ended(bool /*failed*/) {}
};

struct StrategyParams {
  StrategyKind kind = StrategyKind::random;
  std::uint64_t seed = 1;
  std::uint32_t pct_depth = 3;       // PCT bug depth d: d-1 priority change points
  std::uint64_t pct_steps = 10'000;  // PCT: steps over which change points are spread; stall: the stretch's scale
  Schedule replay;                   // replay: the deviations to follow
  // replay: a deviation that does not fit (its actor cannot move there, or
  // the run ends before it) is an error; lenient replay skips it (shrinking).
  bool strict = true;
  // custom: makes the strategy of one run.
  std::function<std::unique_ptr<Strategy>(std::uint32_t num_actors)> make;
  // custom and exhaustive: a strategy that lives across runs, owned by the
  // caller, used instead of `make` (the exhaustive search is one: explore()
  // keeps its tree between runs). Each run calls its new_execution first.
  // Set with another kind, the run throws std::invalid_argument.
  Strategy* shared = nullptr;
};

// `num_actors` bounds the actor ids the strategy will be asked about.
std::unique_ptr<Strategy> make_strategy(const StrategyParams& params, std::uint32_t num_actors);

}  // namespace wspipe::emu
