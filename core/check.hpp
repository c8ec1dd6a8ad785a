// The values a kernel's data check shows when it fails. B::check(cond, what)
// says only what was checked; given values, it also says what it compared:
//
//   B::check(v == want, "pipeline3: output out of sequence", {{"item", i}, {"got", v}, {"want", want}});
//
// The emulator reports "kernel check failed: pipeline3: output out of
// sequence (item = 3, got = 17, want = 12)"; the CUDA backend prints the
// values after its message. Host and device code.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace wspipe {

// One named value: an integer (bool included) or a floating-point number.
struct CheckValue {
  enum class Kind : std::uint8_t { none, signed_int, unsigned_int, boolean, floating };

  const char* name = "";
  Kind kind = Kind::none;
  std::int64_t i = 0;   // signed_int
  std::uint64_t u = 0;  // unsigned_int, boolean
  double f = 0;         // floating

  constexpr CheckValue() = default;
  template <std::integral T>
  WSPIPE_HD constexpr CheckValue(const char* value_name, T value) : name(value_name) {
    if constexpr (std::is_same_v<T, bool>) {
      kind = Kind::boolean;
      u = value ? 1 : 0;
    } else if constexpr (std::is_signed_v<T>) {
      kind = Kind::signed_int;
      i = value;
    } else {
      kind = Kind::unsigned_int;
      u = value;
    }
  }
  template <std::floating_point T>
  WSPIPE_HD constexpr CheckValue(const char* value_name, T value)
      : name(value_name), kind(Kind::floating), f(static_cast<double>(value)) {}
};

// Up to four of them, written as a braced list: {{"got", v}, {"want", w}},
// or {"got", v} for one.
struct CheckValues {
  static constexpr std::uint32_t kMax = 4;
  CheckValue at[kMax]{};
  std::uint32_t count = 0;

  template <class T>
  WSPIPE_HD constexpr CheckValues(const char* name, T value) : at{CheckValue(name, value)}, count(1) {}
  WSPIPE_HD constexpr CheckValues(CheckValue a) : at{a}, count(1) {}
  WSPIPE_HD constexpr CheckValues(CheckValue a, CheckValue b) : at{a, b}, count(2) {}
  WSPIPE_HD constexpr CheckValues(CheckValue a, CheckValue b, CheckValue c) : at{a, b, c}, count(3) {}
  WSPIPE_HD constexpr CheckValues(CheckValue a, CheckValue b, CheckValue c, CheckValue d)
      : at{a, b, c, d}, count(4) {}
};

}  // namespace wspipe
