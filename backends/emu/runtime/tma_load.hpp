// The TMA load room (internal; tma_load.cpp): cp.async.bulk.tensor from
// global to shared memory, multicast to the CTAs of a mask, completing
// transaction bytes on the destination's mbarrier. No state of its own: a
// load waits in its CTA's TMA engine queue (engines.hpp). The rules tma.*.
#pragma once

#include <cstdint>

#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/barrier.hpp"
#include "core/config.hpp"
#include "core/tma.hpp"

namespace wspipe::emu::detail {

class TmaLoadRoom : Room {
 public:
  explicit TmaLoadRoom(World& world) : Room(world) {}

  // The operation (ops.cpp routes it here).
  void load(int cta_group, std::uint32_t rank, const TensorMap& map, void* dst, SharedMemBarrier& bar,
            const TmaCoords& coords, std::uint16_t mask, bool multicast, const SourceLoc& loc);
  // Engine `e` (a TMA engine) delivers bytes [op.delivered, end) of a load
  // (end: the box's bytes for the rest of it) and counts them on the
  // mbarriers; op.delivered becomes `end`.
  void complete(AsyncOp& op, std::uint32_t e, std::uint32_t end);
};

}  // namespace wspipe::emu::detail
