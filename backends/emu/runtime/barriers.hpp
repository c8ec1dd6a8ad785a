// Named barriers and the cluster barrier: their room (internal;
// barriers.cpp). It owns every CTA's 16 named barriers, each cluster's
// barrier and the cluster barriers each warp has passed, and the rules of
// CTA ranks, masks and pairs (cluster.*).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/config.hpp"

namespace wspipe::emu::detail {

struct NamedBarrier {
  std::uint32_t expected = 0;  // thread count of the barrier instance in progress
  std::uint32_t arrived = 0;
  std::uint32_t syncing = 0;   // bar.sync arrivals of the instance in progress
  std::uint64_t gen = 0;
  Clock acc;  // releases of the instance in progress
  // The completed instances that bar.sync arrivals have still to pass: a
  // bar.sync acquires the instance it arrived in, though the barrier may
  // have completed again before it returns.
  struct Completed {
    std::uint64_t gen;
    Clock clock;
    std::uint32_t waiting;  // its bar.sync arrivals that have not passed
  };
  std::vector<Completed> done;
  Clock spare;  // a passed instance's clock, reused
};

// A cluster's barrier (barrier.cluster.arrive + wait). The threads it waits
// for are the cluster's threads that have not exited (Cluster::live_threads).
// (It cannot complete again before every waiter has passed: each one's
// thread has to arrive on the next instance, so `done` is the instance they
// arrived in.)
struct ClusterBarrier {
  std::uint32_t arrived = 0;
  std::uint64_t gen = 0;
  Clock acc, done;
};

class BarrierRoom : Room {
 public:
  explicit BarrierRoom(World& world);

  // The operations (ops.cpp routes them here).
  void named(std::uint32_t id, std::uint32_t threads, bool sync, const SourceLoc& loc);
  void cluster_sync(const SourceLoc& loc);
  // Threads of cluster `k` exited: its barrier completes if every thread
  // still running has arrived.
  // Exits lower the count of threads a cluster barrier waits for: counted
  // into its generation like arrivals (footprints).
  void threads_exited(std::uint32_t k) {
    touch_count(k);
    release_if_complete(k);
  }
  void touch_count(std::uint32_t k);
  // A step reads whether generation `gen` of cluster `k`'s barrier has
  // begun (footprints: begun, it read every arrival of the one before).
  void touch_begun(std::uint32_t k, std::uint64_t gen);

  // The scheduler's questions: has the named barrier `id` of CTA `cta`
  // (cluster `k`'s barrier) completed generation `gen`?
  bool named_passed(std::uint32_t cta, std::uint32_t id, std::uint64_t gen) const { return named_[cta][id].gen > gen; }
  bool cluster_passed(std::uint32_t k, std::uint64_t gen) const { return clusters_[k].gen > gen; }
  // Other rooms' facts: cluster barriers completed in cluster `k` (an
  // mbarrier's init is visible to the cluster after one that began after its
  // fence), and passed by warp `warp` (a cta_group::2 allocation needs one).
  std::uint64_t cluster_gen(std::uint32_t k) const { return clusters_[k].gen; }
  std::uint64_t cluster_syncs(std::uint32_t warp) const { return syncs_[warp]; }
  // What a warp blocked at bar.sync / cluster_sync waits for, for reports.
  std::string named_state(std::uint32_t cta, std::uint32_t id) const;
  std::string cluster_state(std::uint32_t k) const;

  // The abstract state (RunOptions::observer, abstract_state.cpp): the
  // arrivals of every named barrier instance in progress and of every
  // cluster barrier, appended to `out`; generations are left out.
  void abstract_state(std::string& out) const;

  // CTA ranks, masks and pairs (cluster.*): a multicast's CTA mask names
  // CTAs of the cluster; a .cta_group::2 operation has a CTA pair (else
  // `no_pair_rule` or cluster.no-peer); a remote operation's rank is in the
  // cluster. False (or nothing) when reported.
  bool check_cta_mask(Warp& w, std::uint16_t mask, const char* op, const SourceLoc& loc);
  bool check_cta_pair(Warp& w, const char* op, const char* no_pair_rule, const SourceLoc& loc);
  void report_bad_rank(Warp& w, std::uint32_t rank, const SourceLoc& loc);

 private:
  void release_if_complete(std::uint32_t k);

  std::vector<std::array<NamedBarrier, 16>> named_;  // per CTA
  std::vector<ClusterBarrier> clusters_;             // per cluster
  std::vector<std::uint64_t> syncs_;                 // per warp: cluster barriers it passed
};

}  // namespace wspipe::emu::detail
