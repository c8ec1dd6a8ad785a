// The warp's own operations: lane identity, shared storage, __syncwarp,
// warp-state steps, the kernel's checks.
#include <charconv>
#include <cstdio>
#include <string>

#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

// ------------------------------------------------------------ identity

std::uint32_t World::lane_idx(const SourceLoc& loc) {
  if (in_lane_) return kSecondLane;
  Warp& w = warp();
  if (lanes(w.active) != 1) {
    fail(w, "warp.lane-idx-divergent", "",
         "lane_idx() called with " + std::to_string(lanes(w.active)) +
             " lanes active: in warp-level code it has no single value; use for_each_lane or elect_one",
         loc);
    return 0;
  }
  return static_cast<std::uint32_t>(std::countr_zero(w.active));
}

void World::syncwarp(const SourceLoc& loc) {
  Warp& w = warp();
  if (!lanes_agree(w, {.kind = LaneOp::Kind::syncwarp, .loc = loc}) || !point(w, loc)) return;
  // bar.warp.sync orders memory among the participating threads: every
  // lane's accesses so far are ordered before what any lane does next.
  if (options_.race_check) lanes_synced(w);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::syncwarp,
            .file = loc.file_name(), .line = loc.line()});
}

// Every lane keeps its own copy of a pipeline cursor (docs/pipeline-api.md: each warp,
// and on the GPU each thread, holds its own state; only the barriers are
// shared). The emulator's one copy stands for 32 equal ones only while the
// whole warp steps it: stepped by fewer lanes, the others keep the old stage
// and phase, and their next wait passes on a stale phase or reads a stale
// slot on hardware, while this fiber's copy looks right.
void World::warp_state_step(const char* what, const SourceLoc& loc) {
  Warp& w = warp();
  if (lanes(w.active) == 32 || killing_ || stopping_ || in_lane_) return;
  fail(w, "warp.divergent-state", what,
       std::string(what) + " stepped with " + std::to_string(lanes(w.active)) +
           " of 32 lanes active (inside elect_one or for_each_lane): each lane keeps its own copy, so the other " +
           std::to_string(32 - lanes(w.active)) +
           " keep the old stage and phase and later wait on a stale one; step it at warp level (an elected "
           "release that steps for the whole warp: release_elected())",
       loc);
}

void World::check(bool cond, const char* what, const SourceLoc& loc) {
  if (cond || killing_ || stopping_ || in_lane_) return;
  fail(warp(), "kernel.check", "", std::string("kernel check failed: ") + what, loc);
}

// A check with the values it compared: they go into the message.
void World::check_values(bool cond, const char* what, const CheckValues& values, const SourceLoc& loc) {
  if (cond || killing_ || stopping_ || in_lane_) return;
  std::string text = std::string(what) + " (";
  for (std::uint32_t k = 0; k < values.count && k < CheckValues::kMax; ++k) {
    const CheckValue& v = values.at[k];
    char buf[32] = "";
    switch (v.kind) {
      case CheckValue::Kind::signed_int: std::to_chars(buf, buf + sizeof buf - 1, v.i); break;
      case CheckValue::Kind::unsigned_int: std::to_chars(buf, buf + sizeof buf - 1, v.u); break;
      case CheckValue::Kind::boolean: std::snprintf(buf, sizeof buf, "%s", v.u ? "true" : "false"); break;
      case CheckValue::Kind::floating: std::to_chars(buf, buf + sizeof buf - 1, v.f); break;  // shortest exact
      case CheckValue::Kind::none: break;
    }
    text += std::string(k == 0 ? "" : ", ") + v.name + " = " + buf;
  }
  check(false, (text + ")").c_str(), loc);
}

std::uint32_t World::frag_lane_report(std::uint64_t token, std::uint32_t reg, std::uint32_t regs,
                                       const SourceLoc& loc) {
  if (in_lane_) return kSecondLane;  // lane 31's own registers; the warp's fiber made the checks
  Warp& w = warp();
  if (killing_ || stopping_) return w.active == 0 ? 0 : static_cast<std::uint32_t>(std::countr_zero(w.active));
  if (reg >= regs) {
    fail(w, "kernel.check", "", "fragment register " + std::to_string(reg) + " of a fragment of " +
                                    std::to_string(regs) + " registers per thread",
         loc);
    return 0;
  }
  if (w.active == 0 || (w.active & (w.active - 1)) != 0) {  // not exactly one lane
    fail(w, "warp.lane-idx-divergent", "",
         "a fragment register accessed with " + std::to_string(lanes(w.active)) +
             " lanes active: registers are per thread; use for_each_lane",
         loc);
    return 0;
  }
  if (token > w.ld_waited) tmem_->report_ld_without_wait(w, reg, loc);
  return static_cast<std::uint32_t>(std::countr_zero(w.active));
}

}  // namespace wspipe::emu::detail
