// The tensor core room (internal; tensor_core.cpp): tcgen05.mma and
// tcgen05.commit, issued into the CTA's tensor core queue and completed in
// issue order; the kernel's cta_group. The rules named tcgen05.*.
#pragma once

#include <cstdint>

#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/barrier.hpp"
#include "core/config.hpp"
#include "core/tcgen05.hpp"

namespace wspipe::emu::detail {

class TensorCoreRoom : Room {
 public:
  explicit TensorCoreRoom(World& world) : Room(world) {}

  // The operations (ops.cpp routes them here).
  void mma(MmaKind kind, int cta_group, std::uint32_t d_tmem, std::uint64_t a_desc, std::uint64_t b_desc,
           std::uint32_t idesc, bool accumulate, const SourceLoc& loc);
  void commit(int cta_group, SharedMemBarrier& bar, std::uint16_t mask, bool multicast, const SourceLoc& loc);
  // A tcgen05 operation's cta_group must be the kernel's (PTX: every tcgen05
  // instruction of a kernel uses the same), and a .cta_group::2 one needs a
  // CTA pair (false: reported).
  bool check_cta_group(Warp& w, int cta_group, const char* op, const SourceLoc& loc);
  // Engine `e` (a tensor core) completes an MMA, a commit.
  void complete_mma(AsyncOp& op, std::uint32_t e);
  void complete_commit(AsyncOp& op, std::uint32_t e);

 private:
  int cta_group_ = 0;  // of the kernel's tcgen05 instructions, once one ran
  SourceLoc cta_group_loc_{};
};

}  // namespace wspipe::emu::detail
