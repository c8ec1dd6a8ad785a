// The persistent kernels' tile scheduler, after Modular MAX's structured
// sm100 kernels (SK/tile_scheduler.mojo; docs/tile-scheduler.md): which
// cluster tile each cluster works on next, driven by cluster launch control
// (CLC) where the backend has it, by a static grid-stride schedule where it
// does not.
//
// Work items are cluster tiles, numbered 0 .. num_tiles-1; every CTA of a
// cluster works on the same item, each deriving its own part of it from its
// cluster coordinates (core/cluster.hpp). Every worker warp (load, MMA,
// epilogue) walks the same sequence of items:
//
//   for (TileWork w = sched.initial(); w.valid; w = sched.next(w)) { ... }
//
// CLC mode (ClcStages > 0 and B::kClusterLaunchControl): the grid launches
// one cluster per tile; a running cluster takes over clusters that have not
// started by cancelling their launch (PTX "clusterlaunchcontrol.try_cancel").
// The scheduler warp of CTA 0 runs the request loop over a ring of
// ClcStages responses:
//
//   scheduler warp (CTA 0)         every worker warp of every CTA
//   ----------------------         ------------------------------
//   throttle: wait full, arrive    (load warp of CTA 0, once per item:
//     empty (the load warp has       throttle: wait empty, arrive full)
//     started the previous item)
//   clc empty[s]: wait             clc full[s]: wait (its own CTA's)
//   expect_tx(16) + arrive on      decode: is_canceled, first_ctaid
//     every CTA's full[s]          arrive on CTA 0's empty[s]
//   try_cancel[.multicast] -> s
//   (consumes s itself too)
//   ...
//   drain: wait every empty[s]
//
// - The response ring: full[s] (count 1 in every CTA: the scheduler's
//   remote arrive.expect_tx(16); the try_cancel completion performs
//   complete_tx(16), in every CTA for the multicast form) and empty[s] in
//   CTA 0, counted in threads: the scheduler warp plus every worker warp of
//   every CTA (MAX: SCHEDULER_THREADS + CLUSTER_SIZE * worker threads).
//   The response may be read only after the wait on full[s] (PTX
//   query_cancel: only the mbarrier guarantees the completion), and the
//   next request into slot s only after every reader released it.
// - The throttle: a ProducerConsumerPipeline of ClcStages stages, load warp
//   of CTA 0 producing (count 32), scheduler warp consuming (count 32). A
//   request is issued only after the load warp started the item before it,
//   so requests never run more than ClcStages items ahead of the loads: a
//   running cluster does not cancel clusters it cannot start on soon.
// - The deferred fetch: next() fetches the next item when the worker has
//   finished the current one, not when it starts it (MAX: the fetch of
//   WorkIterator.__next__ is deferred "avoiding deadlock with the scheduler
//   warp"). Fetching ahead would make the load warp wait on a response
//   whose request waits on the load warp's throttle signal for the current
//   item: a deadlock.
// - The drain: CTA 0's scheduler warp waits on every empty[s] before it
//   exits, so that every other CTA's remote arrive on CTA 0's empty
//   barriers has landed before CTA 0 can exit (docs/hardware.md bug 15:
//   remote arrivals into an exited CTA).
// - A failed response ends the sequence: PTX forbids another try_cancel
//   after a CTA observed a failure, and a failure does not mean every tile
//   is taken (the launcher may still start clusters; they run their own).
//
// Static mode (ClcStages == 0, or no CLC: sm_90a): item k of a cluster is
// tile cluster_idx + k * num_clusters; the scheduler warp and the throttle
// do nothing. The same kernel source builds for both.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "clc.hpp"
#include "pipeline.hpp"

namespace wspipe {

// One work item: a cluster tile, or the end of the sequence.
struct TileWork {
  std::uint32_t tile = 0;
  bool valid = false;
};

// The scheduler's shared memory, one per CTA (each CTA receives the
// multicast responses at the same offsets).
template <int ClcStages>
struct TileSchedulerStorage {
  static_assert(ClcStages >= 0 && ClcStages <= 8, "TileSchedulerStorage: ClcStages must be in [0, 8]");
  static constexpr int kRing = ClcStages > 0 ? ClcStages : 1;  // C++ has no zero-length arrays
  ClcResponse response[kRing];
  SharedMemBarrier clc[2 * kRing];       // full[kRing] then empty[kRing]
  SharedMemBarrier throttle[2 * kRing];  // full[kRing] then empty[kRing]
};

template <Backend B, int ClcStages>
class TileScheduler {
 public:
  static constexpr bool kUsesClc = ClcStages > 0 && B::kClusterLaunchControl;
  using Storage = TileSchedulerStorage<ClcStages>;
  using Ring = ProducerConsumerPipeline<B, Storage::kRing>;

  // `num_tiles`: cluster tiles of the problem. In CLC mode the grid must
  // launch exactly one cluster per tile (the kernel's host side checks).
  WSPIPE_HD TileScheduler(Storage& s, std::uint32_t num_tiles)
      : s_(&s), num_tiles_(num_tiles), clc_(s.clc), throttle_(s.throttle) {}

  // The barriers, by one warp of every CTA, before fence_init and the
  // cluster barrier that every CTA passes before any request. Every CTA
  // receives responses on its clc_full; only CTA 0's clc_empty and
  // throttle are used, but the same layout everywhere keeps one offset.
  // `worker_warps`: the warps per CTA that walk the sequence with next().
  WSPIPE_HD static void init_barriers(Storage& s, std::uint32_t worker_warps,
                                      SourceLoc loc = SourceLoc::current()) {
    if constexpr (kUsesClc) {
      Ring(s.clc).init_mbars(1, 32 * (1 + B::cluster_size() * worker_warps), "clc_full", "clc_empty", loc);
      Ring(s.throttle).init_mbars(32, 32, "throttle_full", "throttle_empty", loc);
    } else {
      (void)s;
      (void)worker_warps;
      (void)loc;
    }
  }

  // The cluster's first item: its own tile (launched clusters beyond the
  // tiles have none, in static mode).
  WSPIPE_HD TileWork initial() const { return {B::cluster_idx(), B::cluster_idx() < num_tiles_}; }

  // The item after `done`, fetched now that the warp finished `done`.
  WSPIPE_HD TileWork next(const TileWork& done, SourceLoc loc = SourceLoc::current()) {
    if constexpr (kUsesClc) {
      (void)done;
      wait_response(loc);
      const TileWork w = decode_response(loc);
      release_response(loc);
      return w;
    } else {
      const std::uint32_t t = done.tile + B::num_clusters();
      return {t, t < num_tiles_};
    }
  }

  // next() in its three steps, for kernels that interleave other work (and
  // for the broken variants that misplace one). CLC mode only.
  WSPIPE_HD void wait_response(SourceLoc loc = SourceLoc::current()) const {
    static_assert(kUsesClc, "TileScheduler::wait_response: CLC mode only");
    clc_.wait_producer(loc);
  }
  // The response of the current slot: a canceled cluster's tile, or the
  // end (failed: no cluster was left to cancel, or the request was refused).
  // The grid is its clusters side by side along x, (num_clusters * dim.x,
  // dim.y, dim.z) CTAs (the emulator's and the CUDA launch's grids), so
  // the first CTA of cluster k has x = k * dim.x.
  WSPIPE_HD TileWork decode_response(SourceLoc loc = SourceLoc::current()) const {
    static_assert(kUsesClc, "TileScheduler::decode_response: CLC mode only");
    ClcResponse& r = s_->response[clc_.consumer_stage()];
    if (!B::clc_is_canceled(r, loc)) return {};
    const std::uint32_t tile = B::clc_first_ctaid(r, loc).x / B::cluster_shape().x;
    return {tile, tile < num_tiles_};
  }
  // Every lane arrives on CTA 0's empty[s] (the count is in threads), then
  // the warp's cursor steps.
  WSPIPE_HD void release_response(SourceLoc loc = SourceLoc::current()) {
    static_assert(kUsesClc, "TileScheduler::release_response: CLC mode only");
    B::arrive_remote(clc_.empty_mbar(clc_.consumer_stage()), 0, loc);
    clc_.consumer_step(loc);
  }

  // The load warp, once per item before loading it: lets the scheduler
  // request the item after it. CTA 0 only (its throttle is the only one
  // the scheduler reads); a no-op elsewhere and in static mode.
  WSPIPE_HD void throttle_signal(SourceLoc loc = SourceLoc::current()) {
    if constexpr (kUsesClc) {
      if (B::cta_rank() != 0) return;
      throttle_.acquire_producer(loc).arrive(loc);  // every lane: the count is 32
      throttle_.producer_step(loc);
    } else {
      (void)loc;
    }
  }

  // The scheduler warp: the requests, then the drain. CTA 0's requests work
  // for the whole cluster and consumes the responses like any worker.
  // Returns at once on other CTAs and in static mode.
  WSPIPE_HD void run_scheduler(SourceLoc loc = SourceLoc::current()) {
    run_requests(loc);
    drain(loc);
  }

  // run_scheduler without the drain, for a scheduler warp with more to do
  // before it drains (and for the broken variant that never does).
  WSPIPE_HD void run_requests(SourceLoc loc = SourceLoc::current()) {
    if constexpr (kUsesClc) {
      if (B::cta_rank() != 0) return;
      for (TileWork w = initial(); w.valid; w = next(w, loc)) {
        {
          auto started = throttle_.consume(loc);  // the load warp started item w: request the next
        }
        request_next(loc);
      }
    } else {
      (void)loc;
    }
  }

  // Wait until every reader released every slot: no remote arrive still
  // heads for this CTA, and no request is in flight.
  WSPIPE_HD void drain(SourceLoc loc = SourceLoc::current()) {
    if constexpr (kUsesClc) {
      if (B::cta_rank() != 0) return;  // only CTA 0's ring has readers' arrivals
      for (int i = 0; i < Storage::kRing; ++i) {
        clc_.wait_consumer(loc);
        clc_.producer_step(loc);
      }
    } else {
      (void)loc;
    }
  }

  WSPIPE_HD std::uint32_t num_tiles() const { return num_tiles_; }

 private:
  // One request into the producer's slot: its readers released it, every
  // CTA's full barrier expects the 16 response bytes (before the response
  // can land), then one lane asks (PTX: try_cancel is issued by one thread;
  // the .multicast::cluster::all form writes the response into every CTA).
  WSPIPE_HD void request_next(SourceLoc loc) {
    const std::uint32_t slot = clc_.producer_stage();
    clc_.wait_consumer(loc);
    SharedMemBarrier& full = clc_.full_mbar(slot);
    B::elect_one([&] {
      for (std::uint32_t cta = 0; cta < B::cluster_size(); ++cta)
        B::arrive_expect_tx_remote(full, sizeof(ClcResponse), cta, loc);
      if (B::cluster_size() > 1) {
        B::clc_try_cancel_multicast(s_->response[slot], full, loc);
      } else {
        B::clc_try_cancel(s_->response[slot], full, loc);
      }
    });
    clc_.producer_step(loc);
  }

  Storage* s_;
  std::uint32_t num_tiles_;
  Ring clc_;       // producer cursor: the scheduler's requests; consumer cursor: this warp's reads
  Ring throttle_;  // producer cursor: the load warp's signals; consumer cursor: the scheduler's
};

}  // namespace wspipe
