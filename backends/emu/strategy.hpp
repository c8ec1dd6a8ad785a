// Scheduler strategies: at each step, which of the actors that can move goes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedule.hpp"

namespace wspipe::emu {

enum class StrategyKind { round_robin, random, pct, replay };

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

class Strategy {
 public:
  virtual ~Strategy() = default;
  // `enabled` holds the ids of the actors that can move, ascending, n >= 2.
  // Returns one of them, or nullopt when a replayed schedule has run out
  // or names an actor that cannot move.
  virtual std::optional<std::uint32_t> pick(const std::uint32_t* enabled, std::size_t n, std::uint64_t step) = 0;
  // Replay only: why the last pick failed, or, once the run is over, the
  // choices it left unused; empty when the schedule fit.
  virtual std::string mismatch() const { return {}; }
};

struct StrategyParams {
  StrategyKind kind = StrategyKind::random;
  std::uint64_t seed = 1;
  std::uint32_t pct_depth = 3;       // PCT bug depth d: d-1 priority change points
  std::uint64_t pct_steps = 10'000;  // PCT: steps over which change points are spread
  Schedule replay;                   // replay: the choices to follow
};

// `num_actors` bounds the actor ids the strategy will be asked about.
std::unique_ptr<Strategy> make_strategy(const StrategyParams& params, std::uint32_t num_actors);

}  // namespace wspipe::emu
