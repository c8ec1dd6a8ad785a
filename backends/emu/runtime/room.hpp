// What the runtime's rooms have in common (internal).
//
// A room is a class that owns one primitive's state and its rules
// (docs/architecture.md): MbarrierRoom (mbarrier.hpp), BarrierRoom
// (barriers.hpp), TmemRoom (tmem.hpp), EngineRoom (engines.hpp),
// TensorCoreRoom (tensor_core.hpp), TmaLoadRoom (tma_load.hpp), TmaStoreRoom
// (tma_store.hpp), ClcRoom (clc.hpp). The World (world.hpp) holds
// one of each and gives them its services: the execution's CTAs, warps and
// options, the scheduler's points and marks, the race checker's clocks, and
// the violations' fail(). A room reaches another room only through that
// room's public functions. Rooms include world.hpp; world.hpp includes no
// room header, so that editing a room's header rebuilds only the files that
// use that room.
#pragma once

#include <cstdint>

namespace wspipe::emu::detail {

class World;
struct Warp;
struct Cta;

// How an actor can move now: the scheduler asks the room that holds what the
// actor waits for.
enum class Move : std::uint8_t {
  no,        // it cannot
  spin,      // it can only time out (a try_wait with spurious time-outs on)
  progress,  // it can
};

// A room's base: the World it belongs to (one per run; a room is neither
// copied nor moved, as the World is not).
class Room {
 protected:
  explicit Room(World& world) : w_(world) {}
  ~Room() = default;
  Room(const Room&) = delete;
  Room& operator=(const Room&) = delete;

  World& w_;
};

}  // namespace wspipe::emu::detail
