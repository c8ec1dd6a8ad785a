// A schedule: the choices a run made, as a value with a text encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wspipe::emu {

// The scheduler records a choice only at steps where more than one actor
// could move; forced steps need no record. Replaying the choices with the
// same kernel and options reproduces the run step for step.
//
// Text encoding, version 1:  "1:" followed by one token per run of equal
// choices. A choice below 52 is one letter (a-z = 0..25, A-Z = 26..51),
// a larger one is written in braces ("{60}"); a decimal count after the
// token repeats it ("a3b" = 0,0,0,1). The empty schedule is "1:".
class Schedule {
 public:
  static constexpr int kVersion = 1;

  Schedule() = default;
  explicit Schedule(std::vector<std::uint32_t> choices) : choices_(std::move(choices)) {}

  void push(std::uint32_t choice) { choices_.push_back(choice); }
  const std::vector<std::uint32_t>& choices() const { return choices_; }
  std::size_t size() const { return choices_.size(); }
  bool empty() const { return choices_.empty(); }

  std::string encode() const;
  // Parses an encoded schedule; on error returns nullopt and says why
  // (with the offending position) in *error.
  static std::optional<Schedule> decode(std::string_view text, std::string* error);

  friend bool operator==(const Schedule&, const Schedule&) = default;

 private:
  std::vector<std::uint32_t> choices_;
};

}  // namespace wspipe::emu
