// Lane-divergence mode's state (internal; lanes.cpp).
#pragma once

#include <boost/fiber/all.hpp>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/emu/runtime/fibers_stack.hpp"
#include "core/config.hpp"

namespace wspipe::emu::detail {

// Lane-divergence mode (RunOptions::lane_divergence, lanes.cpp): an
// operation at which the lanes of a warp must agree, as one lane reached it.
struct LaneOp {
  enum class Kind : std::uint8_t {
    elect, syncwarp, wait, try_wait, test_wait, named_sync, named_arrive, cluster_sync,
    tmem_alloc, tmem_relinquish, tmem_dealloc, tmem_ld, tmem_st, tmem_wait_ld, tmem_wait_st,
    exit,  // the end of the kernel body
  };
  Kind kind = Kind::exit;
  std::uint32_t lanes = 0;        // active lanes, as this lane sees them
  const void* object = nullptr;   // wait: the barrier; tcgen05.alloc: the destination
  std::uint64_t a = 0, b = 0, c = 0;  // the other operands (see LaneOp's makers in lanes.cpp)
  SourceLoc loc{};
};

// The warp's second lane in lane-divergence mode: lane 31, on a fiber of its
// own that runs the same body in lockstep with the warp's fiber (which is
// lane 0, the elected lane, as well as the warp). It performs nothing: at
// each operation where lanes must agree it waits for the warp's fiber,
// which compares the two and performs it for both.
struct SecondLane {
  boost::fibers::context* ctx = nullptr;
  boost::fibers::fiber fiber;
  FiberStack stack;
  bool finished = false;
  std::uint64_t unwinds = 0;  // TeardownUnwind thrown on its fiber (World::teardown_op)
  bool abandoned = false;     // it kept catching the unwinding: never resumed (World::abandon_running)
  LaneOp at;  // the operation it waits at
  // The results of the operation the warp performed for both lanes, valid
  // when `publish` was set by the meeting before it.
  bool publish = false;
  bool ok = true;
  std::uint64_t token = 0;
  std::vector<std::uint32_t> regs;
  // Its plain and atomic stores to shared memory and to the launch's global
  // memory since it last resumed, with the bytes each overwrote
  // (World::keep_lane_store): undone when it parks, so that memory stays as
  // the warp's fiber left it (a warp-level access is one).
  struct Store {
    std::byte* p = nullptr;
    std::size_t size = 0;
    std::size_t at = 0;  // its old bytes in `overwritten`
  };
  std::vector<Store> stores;
  std::vector<std::byte> overwritten;
};

}  // namespace wspipe::emu::detail
