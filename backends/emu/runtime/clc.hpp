// Cluster launch control's room (internal; clc.cpp): the launch state of
// the grid's clusters, the requests in flight in each cluster's CLC unit,
// and the actors that complete them.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/barrier.hpp"
#include "core/clc.hpp"
#include "core/config.hpp"

namespace wspipe::emu::detail {

class ClcRoom : Room {
 public:
  // `first_actor`: the first of the room's actors (after the warps and the
  // engines). With LaunchConfig::max_active_clusters set there are, per
  // cluster k, a CLC unit that completes its oldest request by cancelling
  // a cluster (first_actor + 2k) and one that completes it failed
  // (first_actor + 2k + 1), then the launcher; else none.
  ClcRoom(World& world, std::uint32_t first_actor);

  std::uint32_t first_actor() const { return base_; }
  std::uint32_t actors() const { return modeled_ ? 2 * clusters() + 1 : 0; }
  // The warps of the clusters that do not start are out of the enabled set
  // (called by the World's constructor once the scheduler's state exists).
  void start();
  Move move(std::uint32_t actor) const;
  std::string actor_name(std::uint32_t actor) const;
  void step(std::uint32_t actor);  // a CLC unit or the launcher moves
  bool launched(std::uint32_t cluster) const { return launch_[cluster] == Launch::running; }
  void cluster_exited(std::uint32_t cluster);  // a launch slot frees
  // A request still in flight that will write into CTA `cta` (*what: which).
  bool pending_for(std::uint32_t cta, std::string* what) const;

  // The operations (ops.cpp routes them here).
  void try_cancel(ClcResponse& resp, SharedMemBarrier& bar, bool multicast, const SourceLoc& loc);
  bool is_canceled(const ClcResponse& resp, const SourceLoc& loc);
  ClcCtaId first_ctaid(const ClcResponse& resp, const SourceLoc& loc);

 private:
  enum class Launch : std::uint8_t { running, unlaunched, canceled };
  std::uint32_t clusters() const { return static_cast<std::uint32_t>(launch_.size()); }
  std::uint32_t launcher() const { return base_ + 2 * clusters(); }
  void complete(ClcRequest& req, std::uint32_t cluster, bool grant, std::int32_t actor);
  void cancel(std::uint32_t cluster);  // its warps never run
  bool read(const ClcResponse& resp, const char* op, Warp& w, const SourceLoc& loc);

  std::uint32_t base_ = 0;
  bool modeled_ = false;
  std::vector<Launch> launch_;                 // per cluster
  std::vector<std::deque<ClcRequest>> queue_;  // per cluster: requests in flight, oldest first
  std::vector<std::uint8_t> failed_seen_;      // per CTA: it observed a failed response
  std::uint32_t next_unlaunched_ = 0;          // clusters below it are running, exited or canceled
  std::uint32_t running_ = 0;
  std::vector<std::uint64_t> issued_;          // per cluster: requests issued so far
};

}  // namespace wspipe::emu::detail
