// Shared machinery of the model fuzzers (mbarrier, named_barrier, tmem,
// tma): the input is a small kernel (a straight-line program per warp) and
// a schedule; the emulator runs the kernel under a strategy that takes its
// picks from the input, and at every step a reference model of the
// hardware object under test, written from docs/hardware.md and the PTX ISA
// without the emulator's code, is stepped in lock step:
//  - the set of actors that can move (and which can only time out) must be
//    the one the reference computes, at every step;
//  - results the kernel observes (try_wait, the TMEM address, smem bytes)
//    must be the reference's;
//  - the run must end as the reference says: ok, deadlock, or the violation
//    (rule) the reference predicts for the step that broke a rule. An
//    exception, a crash or a sanitizer report is a finding too.
// On a disagreement the target prints the program and aborts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"

namespace wspipe::fuzz {

// The input, read front to back; reads past the end give 0.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  bool empty() const { return pos_ >= size_; }
  // The rest of the input (the schedule).
  Bytes rest() const { return Bytes(data_ + pos_, size_ - pos_); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// A reference model stepped in lock step with the emulator.
class Lockstep {
 public:
  virtual ~Lockstep() = default;
  // The actors that can move now, ascending (warps, then engines: CTA c's
  // TMA engine is num_warps + 2c, its tensor core num_warps + 2c + 1), and
  // per actor 1 if it can only time out (a try_wait with spurious time-outs).
  virtual void enabled(std::vector<std::uint32_t>& actors, std::vector<std::uint8_t>& spin) const = 0;
  // `actor` takes its step: a warp performs the operation it waits at and
  // runs on to its next scheduling point; an engine completes its oldest
  // operation.
  virtual void step(std::uint32_t actor) = 0;
  virtual bool all_finished() const = 0;
  // The program, for a person reading a disagreement.
  virtual std::string describe() const = 0;

  // The first rule the reference saw broken: the run must end with it.
  std::string rule;
  // A disagreement found during the run (the strategy stops the run).
  std::string mismatch;

  void violate(const char* r) {
    if (rule.empty()) rule = r;
  }
};

[[noreturn]] inline void die(const Lockstep& ref, const std::string& what) {
  std::fprintf(stderr, "model fuzz: %s\n%s\n", what.c_str(), ref.describe().c_str());
  std::abort();
}

// Picks from the input bytes (enabled[byte % n]); the default policy once
// they run out. Every step is a pick (footprints asked for), so the
// reference sees each one.
class LockstepStrategy final : public emu::Strategy {
 public:
  LockstepStrategy(Lockstep& ref, Bytes schedule) : ref_(ref), schedule_(schedule) {}
  std::optional<std::uint32_t> pick(const emu::Choice& c) override {
    if (!ref_.rule.empty()) {
      ref_.mismatch = "the emulator went on after the step that broke " + ref_.rule;
      return std::nullopt;
    }
    ref_.enabled(actors_, spin_);
    bool same = actors_.size() == c.n;
    for (std::size_t i = 0; same && i < c.n; ++i) same = actors_[i] == c.enabled[i] && spin_[i] == c.spin[i];
    if (!same) {
      ref_.mismatch = "step " + std::to_string(c.step) + ": the emulator's movable actors " + list(c.enabled, c.spin, c.n) +
                      " are not the reference's " + list(actors_.data(), spin_.data(), actors_.size());
      return std::nullopt;
    }
    const std::uint32_t pick = schedule_.empty() ? c.preferred : c.enabled[schedule_.u8() % c.n];
    ref_.step(pick);
    return pick;
  }
  bool wants_footprints() const override { return true; }

 private:
  static std::string list(const std::uint32_t* a, const std::uint8_t* s, std::size_t n) {
    std::string out = "{";
    for (std::size_t i = 0; i < n; ++i) {
      if (i != 0) out += ",";
      out += std::to_string(a[i]);
      if (s[i] != 0) out += "(spin)";
    }
    return out + "}";
  }
  Lockstep& ref_;
  Bytes schedule_;
  std::vector<std::uint32_t> actors_;
  std::vector<std::uint8_t> spin_;
};

// Runs `body` on `launch` in lock step with `ref` and checks how the run
// ended. Returns the result for the target's own checks.
inline emu::RunResult run_lockstep(const emu::LaunchConfig& launch, const std::function<void()>& body, Lockstep& ref,
                                   Bytes schedule, bool spurious_try_wait, bool race_check) {
  emu::RunOptions o;
  o.trace = false;
  o.race_check = race_check;
  o.spurious_try_wait = spurious_try_wait;
  // The references model each engine completing its oldest operation, in
  // issue order: the TMA engines' alternative actors are not theirs.
  o.async_reorder = false;
  o.max_steps = 1u << 20;  // programs are short and straight-line: never reached
  // The references model each try_wait time-out as a step of its own: no
  // spin-out (RunOptions::spin_out_limit), which would take a warp's
  // time-outs in a row at one call site without a scheduling point.
  o.spin_out_limit = 0;
  o.strategy.kind = emu::StrategyKind::custom;
  o.strategy.make = [&ref, schedule](std::uint32_t) { return std::make_unique<LockstepStrategy>(ref, schedule); };
  emu::RunResult r;
  try {
    r = emu::run(launch, body, o);
  } catch (const std::exception& e) {
    die(ref, std::string("emu::run threw: ") + e.what());
  }
  if (!ref.mismatch.empty()) die(ref, ref.mismatch);
  static const bool stats = std::getenv("WSPIPE_FUZZ_OUTCOMES") != nullptr;
  if (stats) std::fprintf(stderr, "outcome: %s\n", emu::outcome(r).c_str());  // what a corpus exercises
  const std::string report = r.report();  // must not crash either
  if (r.status == emu::Status::violation && (r.violations.empty() || r.violations[0].rule.empty()))
    die(ref, "a violation without a rule:\n" + report);
  // The references model the primitives, not happens-before: a data race
  // the checker reports (two warps' TMA loads into one tile, with the
  // engine agents per warp) ends a run the reference would go on with, or
  // before a violation the reference finds later. The race rules are tested
  // against kernels of their own (tests/emu_*).
  if (race_check && r.status == emu::Status::violation && !r.violations.empty() &&
      r.violations[0].rule.rfind("race.", 0) == 0)
    return r;
  if (!ref.rule.empty()) {
    if (r.status != emu::Status::violation || r.violations[0].rule != ref.rule)
      die(ref, "the reference expects the violation " + ref.rule + "; the emulator reported:\n" + report);
    return r;
  }
  std::vector<std::uint32_t> actors;
  std::vector<std::uint8_t> spin;
  ref.enabled(actors, spin);
  bool progress = false;
  for (const std::uint8_t s : spin) progress |= s == 0;
  if (progress) die(ref, "the run ended while the reference could go on:\n" + report);
  const emu::Status want = ref.all_finished() ? emu::Status::ok : emu::Status::deadlock;
  if (r.status != want)
    die(ref, std::string("the reference expects ") + emu::to_string(want) + "; the emulator reported:\n" + report);
  return r;
}

// What the kernel observed (per warp: try_wait results, TMEM addresses)
// against what the reference expects. Operations after the run ended
// (teardown) return anything: only the ones the reference stepped count.
template <class T>
void check_observed(const Lockstep& ref, const std::vector<std::vector<T>>& want,
                    const std::vector<std::vector<T>>& got, const char* what) {
  for (std::size_t w = 0; w < want.size(); ++w) {
    if (got[w].size() < want[w].size() || !std::equal(want[w].begin(), want[w].end(), got[w].begin()))
      die(ref, std::string(what) + " of warp " + std::to_string(w) + " differ from the reference's");
  }
}

// A number in hex, for a person's description.
inline std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace wspipe::fuzz
