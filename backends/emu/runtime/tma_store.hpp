// The TMA store room (internal; tma_store.cpp): cp.async.bulk.tensor from
// shared to global memory, and the bulk async-groups that track each store
// until it has read its source and written global memory. The rules tma.*.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/config.hpp"
#include "core/tma.hpp"

namespace wspipe::emu::detail {

// A bulk async-group (PTX "cp.async.bulk.commit_group"): the TMA stores
// committed together, counted until their shared-memory reads and their
// global writes are done, and the releases of those completions, which
// cp.async.bulk.wait_group[.read] acquires.
struct BulkGroup {
  std::uint32_t reading = 0;  // stores that have not read their shared-memory source yet
  std::uint32_t writing = 0;  // stores whose global writes are not done yet
  Clock read_done, write_done;
};

class TmaStoreRoom : Room {
 public:
  explicit TmaStoreRoom(World& world);

  // The operations (ops.cpp routes them here).
  void store(std::uint32_t rank, const TensorMap& map, const void* src, const TmaCoords& coords, const SourceLoc& loc);
  void commit_group(const SourceLoc& loc);
  void wait_group(std::uint32_t n, bool read, const SourceLoc& loc);
  // Engine `e` performs one of a store's two steps; true when the store
  // must run again (its write step).
  bool complete(AsyncOp& op, std::uint32_t e);

  // The scheduler's question: have warp `w`'s groups [0, upto) read their
  // sources (read_only) or completed? And what a warp blocked in
  // wait_group waits for (reports).
  bool done(const Warp& w, std::uint64_t upto, bool read_only) const;
  std::string blocked_state(const Warp& w) const;
  // A CTA's exit while a store still reads its shared memory (true: reported).
  bool reading_at_exit(Warp& w);

 private:
  BulkGroup& open_group(std::uint32_t warp);
  std::uint64_t committed(std::uint32_t warp) const;

  // Per warp: its bulk async-groups. PTX keeps them per thread; a TMA store
  // is issued by one elected lane, so the warp's groups are that lane's (the
  // other lanes' are empty). groups_[w][g] for g < size() - 1 are committed,
  // in commit order; the last one is the open group that the next commit
  // closes (made on first use).
  std::vector<std::vector<BulkGroup>> groups_;
};

}  // namespace wspipe::emu::detail
