// A schedule: the choices a run made, as a value with a text encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace wspipe::emu {

// A run is a sequence of steps; at a step where more than one actor (warp
// or async engine) could move, the scheduler makes a choice. The default
// policy is fixed and non-preemptive: the actor that took the last step
// goes on while it can make progress; when it cannot, the next actor in
// cyclic id order that can. A schedule records only the choices that
// deviate from that policy, each as (choice index, actor): replaying them
// with the same kernel and options reproduces the run step for step. A
// schedule with few deviations prints short; shrinking removes them.
//
// Text encoding, version 6:  "6:" CHECK ":" DEVIATIONS, or "6:" DEVIATIONS
// without the check. CHECK is 8 hex digits, the fingerprint of the run the
// schedule was recorded from: every step it took, each as the set of actors
// that could move there (and which of them could only time out), including
// the steps where one actor alone could move. A replay whose steps differ
// is refused as a schedule of another kernel or configuration. DEVIATIONS
// is one token per deviation, in order: the number of default choices since
// the previous deviation (omitted when 0), then the actor: a letter for
// 0..51 (a-z, A-Z) or a decimal number in braces ("{60}"). "6:3b12a" = take
// the default at choice points 0-2, actor 1 at 3, the default at 4-15,
// actor 0 at 16, then the default to the end.
//
// Version 5 (read, never written): the same encoding and check, recorded
// when a TMA load could complete ahead of at most 3 older operations of
// its engine and was cut into pieces once, in halves (the engines'
// alternative actors were 4 per CTA: RunOptions::legacy_pieces, which
// replay() sets for it).
//
// Version 4 (read, never written): the same encoding and check, recorded
// when every try_wait time-out was a step of its own: a warp let time out
// again at the same try_wait did not spin out
// (RunOptions::spin_out_limit). replay() runs a version 4 token so.
//
// Version 3 (read, never written): the same encoding and check, recorded
// when try_wait timed out spuriously only with --spurious-try-wait (now the
// default, RunOptions::spurious_try_wait). replay() runs a version 3 token
// without time-outs where it fits so, with them otherwise.
//
// Version 2 (read, never written): the same deviations; its CHECK covers
// only the choice points, so a run that differs at steps where one actor
// alone could move met the same check. A version 2 token is replayed and
// checked as it was recorded, against the fingerprint of the choice points.
class Schedule {
 public:
  static constexpr int kVersion = 6;      // what a new schedule encodes as
  static constexpr int kOldestVersion = 2;  // the oldest decode() reads

  struct Deviation {
    std::uint64_t at = 0;     // choice point index, counted from 0
    std::uint32_t actor = 0;  // the actor picked there
    friend bool operator==(const Deviation&, const Deviation&) = default;
  };

  Schedule() = default;
  // `deviations` in strictly increasing `at`; `check` 0 means unchecked,
  // else a fingerprint of the kind `version` defines.
  // `version` in [kOldestVersion, kVersion] (std::invalid_argument otherwise).
  explicit Schedule(std::vector<Deviation> deviations, std::uint32_t check = 0, int version = kVersion)
      : deviations_(std::move(deviations)), check_(check), version_(checked_version(version)) {}

  void push(Deviation d) { deviations_.push_back(d); }
  const std::vector<Deviation>& deviations() const { return deviations_; }
  std::size_t size() const { return deviations_.size(); }
  bool empty() const { return deviations_.empty(); }
  std::uint32_t check() const { return check_; }
  // The encoding the schedule was read from (or kVersion): which fingerprint
  // its check is.
  int version() const { return version_; }
  void set_check(std::uint32_t c) { check_ = c; }
  // The same deviations without the fingerprint: what shrinking edits.
  Schedule unchecked() const { return Schedule(deviations_, 0, version_); }

  std::string encode() const;
  // Parses an encoded schedule; on error returns nullopt and says why
  // (with the offending position) in *error.
  static std::optional<Schedule> decode(std::string_view text, std::string* error);

  friend bool operator==(const Schedule&, const Schedule&) = default;

 private:
  std::vector<Deviation> deviations_;
  std::uint32_t check_ = 0;
  int version_ = kVersion;
  static int checked_version(int version) {
    if (version < kOldestVersion || version > kVersion)
      throw std::invalid_argument("Schedule: version " + std::to_string(version) + " outside [" +
                                  std::to_string(kOldestVersion) + ", " + std::to_string(kVersion) + "]");
    return version;
  }
};

}  // namespace wspipe::emu
