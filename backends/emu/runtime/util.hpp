// Small helpers and constants the emulator's rooms share (internal).
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/mbarrier_limits.hpp"

namespace wspipe::emu::detail {

// The handle an initialised barrier keeps in its 8 bytes: a tag in the high
// word and the index of its model state plus one in the low word. A zeroed
// or overwritten barrier does not decode to a live entry.
inline constexpr std::uint64_t kTag = 0x57535042ull << 32;  // "WSPB"
// Teardown: how many times the unwinding may be thrown on one fiber before
// the teardown gives up on it and abandons the fiber (World::teardown_op).
// More than one means the kernel caught it; the run then ends with an error
// anyway, and the limit only bounds how long the fiber may go on trying to
// end by itself.
inline constexpr std::uint64_t kUnwindLimit = 1'000;
inline constexpr std::uint32_t kSmemWord = 1;  // bytes per shared-memory shadow: one, so no two warps' data share one

inline std::uint32_t lanes(std::uint32_t mask) { return static_cast<std::uint32_t>(std::popcount(mask)); }

inline std::string cta_label(std::uint32_t cta) { return "cta" + std::to_string(cta); }

inline std::string hex8(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

}  // namespace wspipe::emu::detail
