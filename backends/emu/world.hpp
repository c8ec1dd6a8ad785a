// The emulator's runtime state (internal): CTAs, warps, the models of
// mbarriers, named barriers and the cluster barrier, and the scheduler loop.
// EmuBackend's operations call into the World of the run in progress.
#pragma once

#include <array>
#include <boost/fiber/all.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/barrier.hpp"
#include "core/config.hpp"
#include "emulator.hpp"

namespace wspipe::emu::detail {

// What a warp is waiting for at its scheduling point.
enum class Block : std::uint8_t {
  none,         // about to perform a non-blocking operation
  not_started,  // its fiber has not run yet
  mbar,         // wait: until the phase of parity `parity` completes
  mbar_try,     // try_wait: same, but may time out (spurious_try_wait)
  named,        // bar.sync: until the named barrier's generation passes `target`
  cluster,      // barrier.cluster.wait: until the cluster generation passes `target`
  finished,
};

struct Mbar {
  SharedMemBarrier* addr = nullptr;
  std::uint32_t cta = 0;
  std::string name;
  bool live = false;
  std::uint32_t expected = 0;  // arrivals per phase
  std::uint32_t pending = 0;   // arrivals still missing in the current phase
  std::int64_t tx = 0;         // tx-count of the current phase
  std::uint64_t phase = 0;     // absolute phase number; its low bit is the parity
  // PTX usage rule: a wait must observe each completed phase before an
  // arrive lands in the next. True while the latest completion was seen.
  bool observed = true;
  std::int32_t init_warp = -1;
  // fence.mbarrier_init: made visible to the cluster by the initialising
  // warp's fence; remote CTAs may use it once a cluster barrier that
  // started after the fence has completed.
  bool fenced = false;
  std::uint64_t fenced_gen = 0;
};

struct Warp {
  std::uint32_t id = 0;    // actor id: global warp index
  std::uint32_t cta = 0;   // global CTA index
  std::uint32_t widx = 0;  // warp index in the CTA
  std::string name;
  std::uint32_t active = ~0u;  // active lanes
  Block block = Block::not_started;
  std::int32_t obj = -1;    // barrier id / named barrier id
  std::uint32_t parity = 0;
  std::uint64_t target = 0;     // named/cluster: the generation it waits to pass
  std::int64_t intended = 0;    // mbar: the phase it means to wait for (-1: before the first)
  std::uint64_t since = 0;   // step count when it reached this point
  SourceLoc loc{};
  boost::fibers::context* ctx = nullptr;
  boost::fibers::fiber fiber;
  std::vector<std::int64_t> seen;  // per barrier: the last phase a wait of this warp observed
  std::uint64_t kill_ops = 0;
};

struct NamedBarrier {
  std::uint32_t expected = 0;  // thread count of the barrier instance in progress
  std::uint32_t arrived = 0;
  std::uint64_t gen = 0;
};

struct Cta {
  std::uint32_t cluster = 0;
  std::uint32_t rank = 0;
  std::byte* smem = nullptr;
  std::size_t smem_bytes = 0;
  std::uint32_t live_warps = 0;
  std::array<NamedBarrier, 16> named{};
};

struct Cluster {
  std::uint32_t first_cta = 0;
  std::uint32_t live_threads = 0;  // threads that have not exited
  std::uint32_t arrived = 0;
  std::uint64_t gen = 0;
};

class DirectedAlgorithm;

class World {
 public:
  World(const LaunchConfig& launch, const std::function<void()>& body, const RunOptions& options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  RunResult run();

  // The world of the run in progress on this thread (aborts outside one).
  static World& current();
  Warp& warp() { return *current_; }
  const Cta& cta_of(const Warp& w) const { return ctas_[w.cta]; }
  const LaunchConfig& launch() const { return launch_; }

  // --- operations of the current warp (EmuBackend forwards here)
  std::uint32_t lane_idx(const SourceLoc& loc);
  void* shared_storage(std::size_t size, std::size_t align);
  void syncwarp(const SourceLoc& loc);
  void check(bool cond, const char* what, const SourceLoc& loc);

  void mbar_init(SharedMemBarrier& bar, std::uint32_t count, const char* base, int index, const SourceLoc& loc);
  void mbar_inval(SharedMemBarrier& bar, const SourceLoc& loc);
  void fence_init(const SourceLoc& loc);
  void mbar_arrive(SharedMemBarrier& bar, std::int64_t cta_rank, std::uint32_t tx_bytes, const SourceLoc& loc);
  void mbar_tx(SharedMemBarrier& bar, std::int64_t delta_per_lane, const SourceLoc& loc);
  bool mbar_wait(SharedMemBarrier& bar, std::uint32_t parity, bool is_try, const SourceLoc& loc);

  void named_barrier(std::uint32_t id, std::uint32_t threads, bool sync, const SourceLoc& loc);
  void cluster_sync(const SourceLoc& loc);

 private:
  friend class DirectedAlgorithm;

  // Scheduling. point(): the current warp reaches an operation and waits
  // until the scheduler lets it go; false when the run is being torn down
  // (the operation then does nothing).
  bool point(Warp& w, Block b, std::int32_t obj, std::uint32_t parity, std::uint64_t target, const SourceLoc& loc);
  bool point(Warp& w, const SourceLoc& loc) { return point(w, Block::none, -1, 0, 0, loc); }
  // Picks the next actor and hands it control. Returns true when `self`
  // was picked and goes on.
  bool dispatch(Warp* self);
  void transfer(Warp& to, Warp* from);
  void end(Status s, Warp* from);
  void warp_main(Warp& w);
  void finish(Warp& w);
  enum class Move { no, spin, progress };
  Move movable(const Warp& w) const;

  // Models.
  Mbar* resolve(SharedMemBarrier& bar, Warp& w, const SourceLoc& loc);
  Mbar* resolve_remote(SharedMemBarrier& bar, std::uint32_t rank, Warp& w, const SourceLoc& loc);
  bool in_smem(const void* p, const Cta& c) const;
  std::string anon_name(const void* p, const Cta& c) const;
  bool phase_done(const Mbar& m, std::uint32_t parity) const { return m.live && (m.phase & 1u) != parity; }
  void maybe_complete(std::uint32_t id, Warp& w, const SourceLoc& loc);
  bool check_tx_range(std::uint32_t id, Warp& w, const SourceLoc& loc);
  void release_cluster_if_complete(Cluster& c);
  void cta_exited(Warp& w);

  // Reporting.
  void fail(Warp& w, std::string rule, std::string object, std::string message, const SourceLoc& loc,
            const Warp* culprit = nullptr);
  std::string object_label(std::uint32_t id) const;
  void record(Event e);
  BlockedWarp describe_blocked(const Warp& w) const;

  LaunchConfig launch_;
  std::function<void()> body_;
  RunOptions options_;
  std::unique_ptr<Strategy> strategy_;
  std::vector<Cta> ctas_;
  std::vector<Cluster> clusters_;
  std::vector<Warp> warps_;
  std::vector<Mbar> mbars_;
  std::vector<std::uint32_t> enabled_;  // scratch for dispatch
  Warp* current_ = nullptr;
  boost::fibers::context* main_ctx_ = nullptr;
  DirectedAlgorithm* algo_ = nullptr;
  std::uint64_t step_ = 0;
  bool stopping_ = false;  // the run has ended; nothing more is scheduled
  bool killing_ = false;   // tearing down: unfinished warps run with no-op operations
  std::string mismatch_;   // a replayed schedule that did not fit
  RunResult result_;
};

}  // namespace wspipe::emu::detail
