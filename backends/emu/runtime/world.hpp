// The World (internal): one execution of a kernel. It holds the CTAs, the
// warps and the clusters, the scheduler (scheduler.cpp, fibers.cpp), the
// race checker's clocks (race.cpp, clock.hpp), lane-divergence mode
// (lanes.cpp), the violations (violations.cpp), and one object of each room
// (room.hpp), which owns its primitive's state and rules. Its public
// functions are the services the rooms use; the rooms' headers are not
// included here, so that editing one rebuilds only the files that use it.
// EmuBackend reaches the World only through the narrow door (emu_ops.hpp,
// ops.cpp). The map of rooms, and what each may touch: docs/architecture.md.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <boost/fiber/all.hpp>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/emu/emu_ops.hpp"
#include "backends/emu/emulator.hpp"
#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/fibers_stack.hpp"
#include "backends/emu/runtime/lanes.hpp"
#include "backends/emu/runtime/memory.hpp"
#include "backends/emu/runtime/models.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/barrier.hpp"
#include "core/clc.hpp"
#include "core/config.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"

namespace wspipe::emu::detail {

// What a warp is waiting for at its scheduling point.
enum class Block : std::uint8_t {
  none,         // about to perform a non-blocking operation
  not_started,  // its fiber has not run yet
  mbar,         // wait: until the phase of parity `parity` completes
  mbar_try,     // try_wait: same, but may time out (spurious_try_wait)
  named,        // bar.sync: until the named barrier's generation passes `target`
  cluster,      // barrier.cluster.wait: until the cluster generation passes `target`
  tmem_alloc,   // tcgen05.alloc: until `target` columns are free (both CTAs for cta_group::2)
  tmem_pair,    // cta_group::2 alloc/dealloc: until the peer CTA's warp has joined and it is done
  bulk_wait,    // cp.async.bulk.wait_group: until the warp's bulk groups before `target` are done (parity 1: .read)
  finished,
};

// A try_wait's call site: its barrier, parity and source line.
struct SpinSite {
  std::int32_t obj = -1;
  std::uint32_t parity = 0;
  const char* file = nullptr;
  std::uint32_t line = 0;
  friend bool operator==(const SpinSite&, const SpinSite&) = default;
};

struct Warp : WarpLanes {  // active lanes, lane 31's, loads waited for: emu_ops.hpp
  std::uint32_t id = 0;    // actor id: global warp index
  std::uint32_t cta = 0;   // global CTA index
  std::uint32_t widx = 0;  // warp index in the CTA
  std::string name;
  Block block = Block::not_started;
  std::int32_t obj = -1;    // barrier id / named barrier id
  std::uint32_t parity = 0;
  std::uint64_t target = 0;     // named/cluster: the generation it waits to pass
  std::uint64_t since = 0;   // step count when it reached this point
  SourceLoc loc{};
  boost::fibers::context* ctx = nullptr;
  boost::fibers::fiber fiber;
  FiberStack stack;
  std::uint64_t unwinds = 0;  // TeardownUnwind thrown on its fiber (World::teardown_op)
  bool abandoned = false;     // its fiber kept catching the unwinding: never resumed (World::abandon_running)
  // Time-outs in a row (RunOptions::spin_out_limit, mbarrier.cpp): its
  // scheduling points so far; the one at which it last timed out in
  // try_wait, and where; while it spins out, the time-outs left; whether
  // its last spin ran out of them without leaving the loop (the warp then
  // cannot time out there again while another actor can move).
  std::uint64_t points = 0;
  std::uint64_t timeout_point = ~std::uint64_t{0};
  SpinSite timeout_site;
  std::uint32_t timeouts_in_row = 0;
  std::uint32_t spin_left = 0;
  bool spun_pure = false;
  // This warp's clock value at each fence.proxy.async, ascending, and the
  // lane epoch each one covers (World::fence_proxy_async), ascending too.
  std::vector<std::uint32_t> proxy_fences;
  std::vector<std::uint32_t> proxy_fence_lanes;
  // Per-lane release (race.cpp, World::lane_access): the lanes whose
  // per-lane accesses no syncwarp has ordered into the whole warp yet, and
  // the lane epoch up to which they are (what any lane's release covers).
  std::uint32_t lanes_dirty = 0;
  std::uint32_t lanes_ordered = 0;
  SecondLane lane;  // lane-divergence mode only
  // The scheduler's waiter list this warp is on while it blocks (an index
  // into World::lists_, -1: none) and its place there; its place in
  // World::try_waiters_ while it blocks in try_wait (-1: not there).
  std::int32_t wait_list = -1;
  std::uint32_t wait_pos = 0;
  std::int32_t try_pos = -1;
};

// A cluster: its CTAs, and its threads that have not exited (the cluster
// barrier waits for those).
struct Cluster {
  std::uint32_t first_cta = 0;
  std::uint32_t live_threads = 0;
};

struct Cta {
  std::uint32_t cluster = 0;
  std::uint32_t rank = 0;
  std::byte* smem = nullptr;
  std::size_t smem_bytes = 0;
  std::uint32_t live_warps = 0;
  bool exited() const { return live_warps == 0; }
  // Shared memory shadows, one per 4-byte word, created on first use.
  ShadowTable<kSmemShadowBlock> smem_shadow;
};

// A line of source: a SourceLoc's, or the line of a plain C++ access found
// from the debug information (plain_access.cpp).
struct CodeLine {
  const char* file = "";
  std::uint32_t line = 0;
};
// The kernel's line of the instruction at `pc` (a return address into
// instrumented code): the innermost inlined frame outside the system's
// headers. Cached per address; file "" when the binary has no line table.
CodeLine code_line(std::uintptr_t pc);

// What a recorded access was, for race reports.
struct AccessInfo {
  std::int32_t actor = -1;  // who: a warp, or an engine acting for `issuer`
  std::int32_t issuer = -1;
  const char* what = "";
  std::uint64_t step = 0;
  SourceLoc loc{};
  std::uintptr_t pc = 0;  // a plain access's (plain_access.cpp): then its line, not `loc`, is where it was
};
inline CodeLine line_of(const AccessInfo& i) {
  return i.pc != 0 ? code_line(i.pc) : CodeLine{i.loc.file_name(), i.loc.line()};
}

// A CTA's large buffers outlive its run: a World's destruction keeps them
// for the next run on its thread (keep_cta_buffers), whose CTAs take them
// (take_smem, take_smem_shadow; tmem.hpp: take_tmem_cells, take_tmem_shadow). An
// exploration runs a World per schedule, and buffers this large handed back
// to the system (glibc maps and unmaps them, or trims its heap) had their
// pages faulted in and cleared again at every run. Contents are reset on
// taking: shared memory and TMEM cells zeroed, shadow tables empty().
// Shared memory as allocated: whole KiB, 1024-byte aligned (swizzled tiles
// repeat every 1024 bytes and are placed at offsets aligned to it, as on
// hardware).
std::size_t smem_alloc_bytes(std::size_t smem_bytes);
std::byte* take_smem(std::size_t bytes);  // 1024-aligned
ShadowTable<kSmemShadowBlock> take_smem_shadow();
void keep_cta_buffers(Cta& c);  // leaves c without them
// The storage of the shadow tables this thread keeps now, both kinds (at
// most 16 MiB together).
std::size_t kept_table_bytes();

// Where a warp's clock epoch ended (World::tick): the step and the place
// of the operation that handed its clock on, for race reports.
struct EpochEnd {
  std::uint64_t step;
  SourceLoc loc;
};

// Where a warp's latest epochs ended, for the race reports' causes: the
// last kKept of them, so that a long run's table does not grow with it (a
// million-item ring's warps end two million epochs). Epoch t (from 1) is at
// [(t - 1) % kKept] while it is among them.
class EpochEnds {
 public:
  static constexpr std::uint64_t kKept = std::uint64_t{1} << 14;
  void push(const EpochEnd& e) {
    if (ends_.size() < kKept) {
      ends_.push_back(e);
    } else {
      ends_[count_ % kKept] = e;
    }
    ++count_;
  }
  // The epochs that ended so far.
  std::uint64_t count() const { return count_; }
  // Where epoch t ended; nullptr when it has not (t == 0 or after count())
  // or is no longer kept.
  const EpochEnd* find(std::uint64_t t) const {
    if (t == 0 || t > count_ || count_ - t >= ends_.size()) return nullptr;
    return &ends_[(t - 1) % kKept];
  }
  void clear() {
    ends_.clear();
    count_ = 0;
  }

 private:
  std::vector<EpochEnd> ends_;
  std::uint64_t count_ = 0;
};

class DirectedAlgorithm;
class BarrierRoom;
class MbarrierRoom;
class EngineRoom;
class TensorCoreRoom;
class TmaLoadRoom;
class TmaStoreRoom;
class TmemRoom;
class ClcRoom;

// Test hooks of the scheduler's incremental enabled set. With the check on,
// every step compares the set kept up to date at events with a full
// recomputation from movable() and aborts on a difference. It is on in
// builds without NDEBUG and where the environment has WSPIPE_SCHED_CHECK=1;
// set_sched_check overrides both for the Worlds made after it.
void set_sched_check(bool on);
// Steps checked so far, by every thread.
std::uint64_t sched_checks();
// Actors whose movability this thread's Worlds re-evaluated so far (the
// scheduler's own work per step, whatever the clock says).
std::uint64_t sched_evaluations();
// Whether a World made now checks its enabled set (set_sched_check, or
// the build's and the environment's default).
bool sched_check_on();

class World : public RunningWarp {
 public:
  World(const LaunchConfig& launch, const std::function<void()>& body, const RunOptions& options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  RunResult run();

  // The world of the run in progress on this thread (aborts outside one).
  static World& current() { return static_cast<World&>(RunningWarp::current()); }
  Warp& warp() { return *current_; }
  const Cta& cta_of(const Warp& w) const { return ctas_[w.cta]; }
  const LaunchConfig& launch() const { return launch_; }
  const ClusterShape& cluster_shape() const { return *launch_.cluster_shape; }  // set by checked_launch
  static void check_coresidency(const LaunchConfig& launch);                   // throws BadLaunch
  // --- operations of the current warp (EmuBackend forwards here)
  std::uint32_t lane_idx(const SourceLoc& loc);
  void* shared_storage(std::size_t size, std::size_t align, const SourceLoc& loc);
  void syncwarp(const SourceLoc& loc);
  void elect(const SourceLoc& loc);
  void warp_state_step(const char* what, const SourceLoc& loc);
  void check(bool cond, const char* what, const SourceLoc& loc);
  void check_values(bool cond, const char* what, const CheckValues& values, const SourceLoc& loc);
  // RunningWarp::frag_lane's reports: the fragment access is not one lane's
  // register of a load waited for.
  std::uint32_t frag_lane_report(std::uint64_t token, std::uint32_t reg, std::uint32_t regs, const SourceLoc& loc);

  // The race checker's operations (race.cpp): fence.proxy.async, and a
  // warp's ordinary shared-memory accesses through SmemView.
  void fence_proxy_async(const SourceLoc& loc);
  std::uint32_t smem_offset(const void* p);
  void smem_access(const void* p, std::uint32_t bytes, bool write, const SourceLoc& loc);
  // A plain C++ access of the running warp, seen through the compiler's
  // instrumentation (plain_access.cpp): bytes [p, p + bytes), by the
  // instruction before `pc`. Checked like smem_access where they are in
  // this warp's CTA's shared memory; nothing else is looked at.
  void plain_access(std::uintptr_t p, std::size_t bytes, bool write, std::uintptr_t pc);
  // An atomic that writes bytes [p, p + bytes), in lane 31's fiber
  // (lane-divergence mode): kept to be undone, as its plain stores are.
  void lane_atomic(std::uintptr_t p, std::size_t bytes);
  // The trace's event for an ordinary access by `w` at line `at` (SmemView's
  // or a plain one), merged into the step's event of the same warp, kind and
  // line where there is one (plain_access.cpp).
  void trace_smem(const Warp& w, std::uint32_t offset, std::uint32_t bytes, bool write, const CodeLine& at);
  // The World of the run in progress on this thread, or null.
  static World* on_this_thread() { return static_cast<World*>(tl_running_); }

  // ---- The rooms (room.hpp): each owns its state and rules; a room reaches
  // another only through these and the other room's public functions.
  MbarrierRoom& mbar() { return *mbar_; }
  TmemRoom& tmem() { return *tmem_; }
  EngineRoom& engines() { return *engines_; }
  const EngineRoom& engines() const { return *engines_; }
  TensorCoreRoom& tensor_core() { return *tensor_core_; }
  TmaLoadRoom& tma_load() { return *tma_load_; }
  TmaStoreRoom& tma_store() { return *tma_store_; }
  BarrierRoom& barriers() { return *barriers_; }
  ClcRoom& clc() { return *clc_; }

  // ---- The execution, as the rooms see it
  const RunOptions& options() const { return options_; }
  // A TMA load was queued past RunOptions::reorder_window (EngineRoom).
  void count_load_past_window() { ++result_.loads_past_window; }
  std::uint64_t step() const { return step_; }
  // The step in progress is a try_wait time-out taken because no actor
  // could make progress.
  bool idle_step() const { return idle_timeouts_ > 0; }
  // The step in progress is a pure spin (mbarrier.cpp): what it touched so
  // far is dropped from its footprint.
  void forget_footprint() { fp_.clear(); }
  bool in_lane() const { return in_lane_; }
  // Checks the running warp's plain accesses not checked yet: before any
  // operation of the warp (ops.cpp) and the end of its body (fibers.cpp).
  void check_plain() {
    if (pending_plains_ != 0) [[unlikely]]
      check_pending_plain();
  }
  // At the start of a warp's operation (ops.cpp): its plain accesses
  // checked, and the access records collected when they have grown.
  void operation_starts() {
    check_plain();
    if (access_infos_.size() >= collect_infos_at_) [[unlikely]]
      collect_access_infos();
  }
  bool stopping() const { return stopping_; }
  bool killing() const { return killing_; }
  // The trace's table of barrier names (an mbarrier's init adds one).
  void trace_object(const std::string& name, std::uint32_t cta) { result_.trace.objects.push_back({name, cta}); }
  std::uint32_t num_ctas() const { return static_cast<std::uint32_t>(ctas_.size()); }
  std::uint32_t num_warps() const { return static_cast<std::uint32_t>(warps_.size()); }
  std::uint32_t num_engines() const { return 2 * num_ctas(); }  // a TMA engine and a tensor core per CTA
  std::uint32_t num_clusters() const { return static_cast<std::uint32_t>(clusters_.size()); }
  Cta& cta(std::uint32_t i) { return ctas_[i]; }
  const Cta& cta(std::uint32_t i) const { return ctas_[i]; }
  Cluster& cluster(std::uint32_t k) { return clusters_[k]; }
  const Cluster& cluster(std::uint32_t k) const { return clusters_[k]; }
  Warp& warp_at(std::uint32_t id) { return warps_[id]; }
  const Warp& warp_at(std::uint32_t id) const { return warps_[id]; }
  // The CTA of rank `rank_in_pair` in CTA `cta`'s pair (PTX "tcgen05":
  // ranks 2k and 2k + 1 of a cluster).
  std::uint32_t pair_cta(std::uint32_t cta, std::uint32_t rank_in_pair) const {
    return cta - (ctas_[cta].rank & 1u) + rank_in_pair;
  }
  // The warp whose step is in progress (an engine's step runs on it too).
  Warp& running() { return *current_; }
  // Cluster `cluster` never runs (CLC canceled its launch): its warps are
  // finished before they start, its CTAs and cluster barrier empty.
  void never_run(std::uint32_t cluster);

  // ---- The scheduler, as the rooms see it. point(): the current warp
  // reaches an operation and waits until the scheduler lets it go; false
  // when the run is being torn down (the operation then does nothing).
  bool point(Warp& w, Block b, std::int32_t obj, std::uint32_t parity, std::uint64_t target, const SourceLoc& loc);
  bool point(Warp& w, const SourceLoc& loc) { return point(w, Block::none, -1, 0, 0, loc); }
  // An operation while the run is torn down: unwinds the calling fiber, or
  // abandons it when it keeps catching the unwinding.
  void teardown_op(Warp& w, std::uint64_t& unwinds, const SourceLoc& loc);
  std::exception_ptr swallowed_error(const Warp& w, const SourceLoc& loc) const;
  // The enabled set is kept up to date instead of recomputed at every step:
  // an actor's movability changes only at events (it
  // blocks or goes on, finishes, an object it waits on changes, an engine's
  // queue fills or drains), which mark() it; dispatch re-evaluates only the
  // marked actors (refresh()). Blocked warps sit on their object's waiter
  // list, which the object's change marks. Idle actors cost nothing per step.
  void mark(std::uint32_t actor) {
    if (marked_[actor] != 0) return;
    marked_[actor] = 1;
    dirty_.push_back(actor);
  }
  // A new waiter list, at the end (an mbarrier's: mbar_list(id)), and the
  // warps on a list.
  void add_waiter_list() { lists_.emplace_back(); }
  const std::vector<std::uint32_t>& waiters(std::uint32_t list) const { return lists_[list]; }
  void mark_list(std::uint32_t list) {
    for (const std::uint32_t a : lists_[list]) mark(a);
  }
  // Waiter lists: named barrier `id` of a CTA, a cluster's barrier, the TMEM
  // allocator of a CTA pair (tcgen05.alloc and the cta_group::2
  // collectives), mbarrier `id`.
  std::uint32_t named_list(std::uint32_t cta, std::uint32_t id) const { return cta * 16 + id; }
  std::uint32_t cluster_list(std::uint32_t cluster) const {
    return static_cast<std::uint32_t>(ctas_.size()) * 16 + cluster;
  }
  std::uint32_t tmem_list(std::uint32_t cta) const {
    return static_cast<std::uint32_t>(ctas_.size() * 16 + clusters_.size()) + pair_cta(cta, 0);
  }
  std::uint32_t mbar_list(std::uint32_t id) const {
    return static_cast<std::uint32_t>(ctas_.size() * 17 + clusters_.size()) + id;
  }
  // TMEM columns or a cta_group::2 collective of CTA `cta`'s pair changed.
  // The columns are the SM's (co-resident CTAs): every CTA on the SM may
  // have an alloc waiting for them, on its pair's list.
  void tmem_changed(std::uint32_t cta) {
    for_each_on_sm(cta, [this](std::uint32_t peer) { mark_list(tmem_list(peer)); });
  }
  // Whether the fiber running performs the operation `op`: always with the
  // mode off; else as lanes_meet.
  bool lanes_agree(Warp& w, const LaneOp& op) { return !options_.lane_divergence || lanes_meet(w, op); }
  std::string actor_name(std::int32_t actor) const;
  // A kernel source file relative to the source root, and "file:line".
  std::string rel(const char* file) const;
  std::string where(const SourceLoc& loc) const { return rel(loc.file_name()) + ":" + std::to_string(loc.line()); }
  // Footprints: the step in progress touched a resource (strategy.hpp:
  // footprint_entry; docs/exploration.md, "The independence relation").
  // Keys: mbarriers by CTA and shared-memory offset (not by id, which
  // depends on the order of inits), and their phases by phase number; named
  // barriers by CTA and id, cluster barriers by cluster, engines by engine,
  // their operations by issue number. Keys of several parts are mixed into
  // 54 bits: two resources that collide only make steps look dependent.
  enum class Res : std::uint64_t {
    mbar = 1,         // an mbarrier's existence: init, inval, fence.mbarrier_init write it
    named = 2,        // generation g of a named barrier has begun
    cluster = 3,      // generation g of a cluster barrier has begun
    engine = 4,       // an engine's order of completion
    smem = 5,         // a 16-byte chunk of shared memory (race checker off)
    mbar_phase = 6,   // phase k of an mbarrier has begun: its completion writes it
    mbar_count = 7,   // the arrivals and tx-count of phase k: counted (Touch::count: the last completes it)
    mbar_seen = 8,    // a wait observed the completion of phase k (PTX usage rule)
    async_op = 9,     // one asynchronous operation, by engine and issue number
    engine_load = 10, // whether an engine has operations queued (issues and completions commute)
    tmem = 11,        // the Tensor Memory allocations of an SM
    named_count = 12, // the arrivals of a named barrier's generation: counted
    cluster_count = 13, // the arrivals (and exits) of a cluster barrier's generation
    cta_exit = 14,    // a CTA has exited: what reaches it afterwards reads it
    cta_warps = 15,   // a CTA's warps exiting: counted; its last exit awaits them all
    tmem_permit = 16, // a CTA's permit to allocate TMEM (relinquish writes it, alloc reads it)
    clc_request = 17, // one try_cancel, by cluster and issue number
    clc_order = 18,   // a cluster's CLC unit's order of completion
    clc_load = 19,    // whether a cluster's CLC unit has requests in flight
    clc_unlaunched = 20,  // the clusters not yet launched or canceled
    clc_running = 21,     // how many clusters run (the launcher waits for a free one)
    clc_failed_seen = 22, // a CTA observed a failed try_cancel (PTX: no further try_cancel)
    store_progress = 23,  // a warp's bulk group of TMA stores progressed (its wait_group awaits it)
    tmem_data = 24,       // 32 columns of a CTA's Tensor Memory (race checker off)
    engine_queue = 25,    // the order of a TMA engine's queue, as far as pieces go: a load that can land
                          // in pieces writes it at its issue, the engine's other issues read it
  };
  static_assert(static_cast<std::uint64_t>(Res::engine) == kEngineOrderKind,
                "the exhaustive search finds engine completions by this kind");
  void touch(Res kind, std::uint64_t key, Touch a = Touch::write) {
    if (track_fp_) fp_.push_back(footprint_entry(static_cast<std::uint64_t>(kind), key, a));
  }
  static std::uint64_t key(std::uint64_t a, std::uint64_t b) {
    std::uint64_t z = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 29);
  }
  // A shared-memory access with the race checker off: every 16-byte chunk
  // it touches. A warp's ordinary access (SmemView, or plain C++ compiled
  // for the checker) and an asynchronous one alike (a TMA load's bytes
  // landing, a TMA store or an MMA reading its operands, a CLC response,
  // tcgen05.alloc's address). With the checker on, data accesses are no
  // resources: two unordered conflicting ones are reported whichever order
  // runs, so one order is enough; off, nothing would notice the other
  // order's values, so the reduction must keep both (docs/exploration.md,
  // "Reduction").
  void touch_smem(std::uint32_t cta, std::uint32_t offset, std::uint32_t bytes, bool write = true) {
    if (!track_fp_ || bytes == 0) return;
    for (std::uint64_t c = offset / 16; c <= (std::uint64_t{offset} + bytes - 1) / 16; ++c)
      touch(Res::smem, (std::uint64_t{cta} << 32) | c, write ? Touch::write : Touch::read);
  }
  // The same for Tensor Memory: columns [col, col + cols) of a CTA, in
  // chunks of 32 (tcgen05.ld, tcgen05.st, an MMA's accumulator).
  void touch_tmem(std::uint32_t cta, std::uint32_t col, std::uint32_t cols, bool write) {
    if (!track_fp_ || cols == 0) return;
    for (std::uint64_t c = col / 32; c <= (std::uint64_t{col} + cols - 1) / 32; ++c)
      touch(Res::tmem_data, (std::uint64_t{cta} << 32) | c, write ? Touch::write : Touch::read);
  }
  bool tracks_footprints() const { return track_fp_; }

  // ---- The race checker, as the rooms see it (race.cpp, clock.hpp).
  // Components: warp w -> w, and its asynchronous agents (clock.hpp): its
  // tcgen05.ld -> W+w, its tcgen05.st -> 2W+w, its operations on the TMA
  // engine (loads, stores) -> 3W+w, on the tensor core (MMAs, commits) ->
  // 4W+w, its CLC requests -> 5W+w. An engine (actor W+e, e = 2*cta +
  // (tensor core ? 1 : 0)) or a CLC unit performs each operation on its
  // issuer's agent, so that nothing one warp did reaches another through
  // the engine they share. Its lanes' own accesses (per-lane code: inside
  // for_each_lane or elect_one) -> 6W+w, a component with no clock of its
  // own: its time is the warp's entry for it, and what a release by some of
  // the lanes hands on of it is lanes_handed_on's (docs/emulator-models.md,
  // "Per-lane release").
  std::uint32_t comp_ld(const Warp& w) const { return num_warps() + w.id; }
  std::uint32_t comp_st(const Warp& w) const { return 2 * num_warps() + w.id; }
  std::uint32_t comp_tma(std::uint32_t warp) const { return 3 * num_warps() + warp; }
  std::uint32_t comp_mma(std::uint32_t warp) const { return 4 * num_warps() + warp; }
  std::uint32_t comp_clc(std::uint32_t warp) const { return 5 * num_warps() + warp; }
  std::uint32_t comp_lanes(std::uint32_t warp) const { return 6 * num_warps() + warp; }
  bool is_lanes_comp(std::uint32_t comp) const { return comp >= 6 * num_warps() && comp < 7 * num_warps(); }
  Clock& clock(std::uint32_t comp) { return clocks_[comp]; }
  // A release by component `comp` into `into`: join, then tick, so that what
  // the component does next is not covered by this release.
  void release(std::uint32_t comp, Clock& into);
  void acquire(std::uint32_t comp, const Clock& from);
  // Warp w's release into `into` by its active lanes (an mbarrier arrive, a
  // named or cluster barrier), and the clock an operation it issues carries
  // (Issued::clock; then w ticks). Both hand on w's warp-level accesses and
  // of its per-lane ones only those a syncwarp ordered into the whole warp,
  // unless every lane with per-lane accesses since takes part in this
  // release (lanes_handed_on).
  void warp_release(Warp& w, Clock& into);
  void warp_issue(Warp& w, Clock& out);
  // bar.warp.sync by w's active lanes: their per-lane accesses so far are
  // ordered into every lane (a later release by any lane covers them).
  void lanes_synced(Warp& w) { lanes_handed_on(w); }
  // Asynchronous agent `comp` starts an operation issued with clock
  // `issued` (Issued::clock): the operation happens after what its issuer
  // did before issuing it and after the agent's earlier operations (its own
  // component), and after nothing else; the caller ticks `comp` when it is done.
  void async_start(std::uint32_t comp, const Clock& issued);
  std::uint32_t access_info(std::int32_t actor, std::int32_t issuer, const char* what, const SourceLoc& loc);
  std::string describe_access(const Access& a) const;
  const AccessInfo& access_info_of(std::uint32_t info) const { return access_infos_[info]; }
  // The access component `comp` makes now, which shadow_write/shadow_read
  // check against a location's shadow (with clocks_[comp]) and record. An
  // access visiting many locations computes it once.
  Access access_now(std::uint32_t comp, std::uint32_t info) const {
    return {.comp = comp, .slot = slot_[comp], .time = clocks_[comp][slot_[comp]], .info = info};
  }
  // The access warp w makes now with only some of its lanes active
  // (per-lane code): one of its lanes' component, in their current
  // epoch, which w's own clock covers and its releases hand on as
  // lanes_handed_on says.
  Access lane_access(Warp& w, std::uint32_t info) {
    w.lanes_dirty |= w.active;
    const std::uint32_t comp = comp_lanes(w.id), slot = slot_[comp];
    return {.comp = comp, .slot = slot, .time = clocks_[w.id][slot], .info = info};
  }
  // A race of the access `info` by component `comp` with the earlier access
  // `other`, recorded in `s`. The report names the last operation of the
  // earlier access's warp that this access is ordered after: the release
  // that let it go ahead, too early.
  void report_race(const Shadow& s, const Access* other, bool write, std::uint32_t info, std::uint32_t comp,
                   const std::string& object, const SourceLoc& loc, const Warp* culprit);
  // Shared-memory bytes [offset, offset+bytes) of CTA `cta` accessed by
  // component `comp`; `generic`: an ordinary access of warp `comp` (made
  // with only some of its lanes active, it is theirs: lane_access);
  // `async_read`: the
  // async proxy reads (checks fence.proxy.async after generic writes).
  // With the race checker off, only its footprint (touch_smem); `info` is
  // then unused.
  bool smem_range_access(std::uint32_t cta, std::uint32_t offset, std::uint32_t bytes, bool write, bool generic,
                         std::uint32_t comp, std::uint32_t info, const SourceLoc& loc, const Warp* culprit);
  // The same for several ranges, in order, as one access (an MMA's
  // operand rows): range r is bytes [r.offset, r.offset + r.bytes) of CTA
  // ctas[r.cta].
  bool smem_ranges_access(const std::uint32_t* ctas, std::span<const model::MmaFootprint::Range> ranges, bool write,
                          bool generic, std::uint32_t comp, std::uint32_t info, const SourceLoc& loc,
                          const Warp* culprit);
  std::size_t clock_size(std::uint32_t cta) const { return cluster_comps_[ctas_[cta].cluster]; }
  // Component `comp` starts its next epoch. A warp's epoch ends at an
  // operation that hands its clock on (a release, an issue, a fence): where
  // it was is kept, for the race reports (cause()).
  void tick(std::uint32_t comp) {
    if (comp < warps_.size()) epoch_ends_[comp].push({.step = step_, .loc = warps_[comp].loc});
    ++clocks_[comp][slot_[comp]];
  }
  std::uint32_t now(std::uint32_t comp) const { return clocks_[comp][slot_[comp]]; }

  // Co-resident CTAs (LaunchConfig::ctas_per_sm). The SM of CTA `cta`:
  // clusters in groups of ctas_per_sm, the rank-r CTAs of a group on one SM
  // (a cluster's CTAs are on different SMs, so a cta_group::2 pair spans
  // two). for_each_on_sm calls f(c) for every CTA c on `cta`'s SM, `cta`
  // included, ascending; with one CTA per SM, for `cta` alone.
  std::uint32_t sm_of(std::uint32_t cta) const {
    const Cta& c = ctas_[cta];
    return c.cluster / launch_.ctas_per_sm * launch_.cluster_size + c.rank;
  }
  template <class F>
  void for_each_on_sm(std::uint32_t cta, F&& f) const {
    const std::uint32_t per = launch_.ctas_per_sm, rank = ctas_[cta].rank;
    const std::uint32_t first = ctas_[cta].cluster / per * per;
    const auto last = std::min(first + per, static_cast<std::uint32_t>(clusters_.size()));
    for (std::uint32_t k = first; k < last; ++k) f(clusters_[k].first_cta + rank);
  }

  // ---- Violations (violations.cpp): the first one stops the run.
  void fail(Warp& w, std::string rule, std::string object, std::string message, const SourceLoc& loc,
            const Warp* culprit = nullptr, std::string other = {});
  void fail(Warp& w, std::string rule, std::string object, std::string message, const CodeLine& at,
            const Warp* culprit = nullptr, std::string other = {});
  // Appends an event to the trace. Call sites test options_.trace first,
  // so that an untraced run does not even build the event.
  void record(const Event& e) {
    if (!options_.trace) return;
    if (result_.trace.events.size() == result_.trace.events.capacity()) charge_trace_growth();
    result_.trace.events.push_back(e);
    if (options_.event_observer != nullptr) options_.event_observer->event(result_.trace, e);
    if (options_.trace_sink != nullptr && result_.trace.events.size() >= kStreamAt) stream_trace();
  }

 private:
  friend class DirectedAlgorithm;

  // A streamed trace (RunOptions::trace_sink) keeps its last kKeepEvents
  // events and hands the sink kStreamAt - kKeepEvents at a time.
  static constexpr std::size_t kKeepEvents = std::size_t{1} << 16, kStreamAt = 2 * kKeepEvents;
  void stream_trace();
  void charge_trace_growth();

  // The scheduler (scheduler.cpp). dispatch: picks the next actor and hands
  // it control; true when `self` was picked and goes on.
  bool dispatch(Warp* self);
  void transfer(Warp& to, Warp* from);
  // Switches to the fiber `to` (Boost picks algo_->next, which the caller
  // set), announcing the switch to AddressSanitizer; returns when this fiber
  // runs again. arrived() is the other half, where a fiber starts.
  void switch_to(const FiberStack& to);
  // The same to the fiber whose context is `ctx`.
  void switch_to(boost::fibers::context* ctx, const FiberStack& stack);
  static void arrived(void* fake_stack);
  // A finished warp's fiber is about to end: Boost switches to algo_->next
  // when its function returns.
  void leaving(const boost::fibers::context* self);
  // The teardown gives up on the fiber running (the warp's or its second
  // lane's), which keeps catching the unwinding (teardown_op): it hands
  // control back to run() for good. release_abandoned, in run(), takes the
  // fiber out of Boost's scheduler and reclaims its stack (fibers.cpp).
  void abandon_running(Warp& w);
  static void release_abandoned(boost::fibers::fiber& fiber, boost::fibers::context* ctx, const FiberStack& stack);
  void end(Status s, Warp* from);
  void warp_main(Warp& w);
  // Lane-divergence mode (lanes.cpp). lanes_meet: the warp's fiber, at
  // an operation `op` lane 0 takes part in, runs the second lane to its next
  // such operation and compares; true when the warp's fiber goes on to
  // perform `op`. The second lane parks there until the warp reaches its
  // next one, and gets false (the results are in w.lane).
  bool lanes_meet(Warp& w, LaneOp op);
  // Lane 31's store to shared memory (at `offset`) or to the launch's
  // global memory (LaunchConfig::global_memory; other memory is left), kept
  // to be undone, and the undo when it parks (lanes.cpp): what the warp
  // does is done once.
  void keep_lane_store(std::uint32_t offset, std::size_t bytes);
  [[gnu::noinline]] void keep_lane_global_store(std::uintptr_t p, std::size_t bytes);
  void keep_lane_bytes(std::byte* p, std::size_t bytes);
  void undo_lane_stores(Warp& w);
  void start_second_lane(Warp& w);  // fibers.cpp: fibers are made there
  void lane_main(Warp& w);
  void run_body(Warp& w);  // the kernel's body on the fiber running
  std::string describe(const LaneOp& op) const;
  void finish(Warp& w);
  Move movable(const Warp& w) const;
  void blocked(Warp& w);    // w waits at a point (w.block set): onto its object's list
  void unblocked(Warp& w);  // w goes on: off it
  void refresh();
  void check_enabled() const;
  // movable() for any actor: a warp's, or an engine's (it can move while
  // its queue holds an operation).
  Move move_of(std::uint32_t actor) const;
  // Hands the finished step's footprint to the strategy.
  void close_step();
  // RunOptions::observer's view of this point (abstract_state.cpp): the
  // abstract state, built into abstract_, handed to the observer.
  void observe();
  std::string abstract_;
  // A schedule's check (never 0, which means unchecked): the fingerprint of
  // every step for version 3, of the choice points for version 2.
  std::uint32_t fingerprint(int version) const {
    const std::uint32_t f = version == 2 ? choice_fingerprint_ : step_fingerprint_;
    return f == 0 ? 1 : f;
  }
  // smem_ranges_access's rare cases at location `word` of CTA `cta` (of an
  // access up to `last`), out of its per-location loop: the race with
  // `other` (reported), or a read by the async proxy of an ordinary store's
  // location, whose fence.proxy.async it checks. False when it reported.
  [[gnu::noinline]] bool smem_word_rare(const Shadow& s, const Access* other, std::uint32_t word, std::uint32_t last,
                                        std::uint32_t cta, bool write, std::uint32_t comp, std::uint32_t info,
                                        const SourceLoc& loc, const Warp* culprit);
  // The lane epoch a release by w's active lanes hands on: all of it when
  // every lane with unsynchronised per-lane accesses is active (they are
  // then ordered into the whole warp, as a syncwarp would), else what the
  // last such point covered.
  std::uint32_t lanes_handed_on(Warp& w) {
    if (w.lanes_dirty != 0 && (w.lanes_dirty & ~w.active) == 0) {
      std::uint32_t& epoch = clocks_[w.id][slot_[comp_lanes(w.id)]];
      w.lanes_ordered = epoch++;
      w.lanes_dirty = 0;
    }
    return w.lanes_ordered;
  }
  // plain_access's check, out of line: bytes [offset, offset + bytes) of the
  // running warp's CTA's shared memory (plain_access.cpp).
  [[gnu::noinline]] void plain_smem_access(std::uint32_t offset, std::size_t bytes, bool write, std::uintptr_t pc);
  // The running warp's plain accesses not checked yet: consecutive accesses
  // of one source line and kind (a loop over a tile) are one range, checked
  // as one access before the warp's next operation or its exit
  // (check_plain). The warp runs alone until then and its clock does not
  // change, so each byte's check finds what it would have found access by
  // access. A few ranges at once: a loop that reads a tile's row and a
  // weight vector side by side.
  struct PendingPlain {
    std::uint32_t lo = 0, hi = 0;  // bytes [lo, hi) of the warp's CTA's shared memory
    std::uint32_t info = 0;        // the access record of the line (plain_access.cpp)
    std::uint32_t active = 0;      // the lanes active at the accesses
    bool write = false;
  };
  static constexpr std::size_t kPendingPlain = 4;
  std::array<PendingPlain, kPendingPlain> pending_plain_{};
  std::size_t pending_plains_ = 0;  // in use, in the order of their first access
  // The records this step's plain accesses used, by instruction (a few
  // direct-mapped entries: a loop's body has a load or two per line).
  struct PlainMemo {
    std::uintptr_t pc = 0;
    std::uint64_t step = ~std::uint64_t{0};
    std::uint32_t info = 0;
    bool write = false;  // (a memcpy's read and write share the instruction)
  };
  std::array<PlainMemo, 8> plain_memo_{};
  // plain_access's inline path: the pending range an instruction's last
  // access joined, valid while plain_epoch_ is the entry's (it moves on at
  // every check of the pending ranges), so that the next access of a loop
  // over a tile only widens that range.
  struct PlainHot {
    std::uintptr_t pc = 0;
    std::uint64_t epoch = 0;
    std::uint32_t slot = 0;    // in pending_plain_
    std::uint32_t active = 0;  // the lanes active
    bool write = false;
  };
  std::array<PlainHot, 8> plain_hot_{};
  std::uint64_t plain_epoch_ = 1;
  static std::size_t plain_hash(std::uintptr_t pc) { return (pc ^ (pc >> 4)) % 8; }
  // The source lines this step's plain accesses were recorded at (the
  // running warp's: only it makes plain accesses within a step), so that
  // the instructions of one line (an unrolled loop) share a record.
  struct StepLine {
    CodeLine at;
    std::uintptr_t pc = 0;
    std::uint32_t info = 0;
    bool write = false;
  };
  std::array<StepLine, 8> step_lines_{};
  std::size_t step_lines_used_ = 0;
  std::uint64_t step_lines_step_ = ~std::uint64_t{0};
  // The record of the running warp's plain access at `pc` in this step.
  std::uint32_t plain_info(const Warp& w, bool write, std::uintptr_t pc);
  void check_pending_plain();
  // A CTA's exit (world.cpp): each room checks what it leaves behind.
  void cta_exited(Warp& w);

  BlockedWarp describe_blocked(const Warp& w) const;

  std::unique_ptr<MbarrierRoom> mbar_;
  std::unique_ptr<TmemRoom> tmem_;
  std::unique_ptr<EngineRoom> engines_;
  std::unique_ptr<TensorCoreRoom> tensor_core_;
  std::unique_ptr<TmaLoadRoom> tma_load_;
  std::unique_ptr<TmaStoreRoom> tma_store_;
  std::unique_ptr<BarrierRoom> barriers_;
  std::unique_ptr<ClcRoom> clc_;

  LaunchConfig launch_;
  std::function<void()> body_;
  RunOptions options_;
  // What this run charged to the memory budget (memory.hpp): its CTAs'
  // shared memory and shadows, its trace.
  MemoryCharge memory_;
  std::unique_ptr<Strategy> owned_strategy_;  // made for this run (StrategyParams::make, the built-in kinds)
  Strategy* strategy_ = nullptr;              // it, or the caller's StrategyParams::shared
  std::vector<Cta> ctas_;
  std::vector<Cluster> clusters_;
  std::vector<Warp> warps_;
  std::vector<Clock> clocks_;            // per component, over its cluster's components
  std::vector<std::uint32_t> slot_;      // per component: its index in its cluster's clocks
  std::vector<std::uint32_t> cluster_comps_;  // per cluster: its components (a clock's size)
  std::vector<AccessInfo> access_infos_;
  // The access records the shadows no longer name are dropped and the rest
  // renumbered once there are this many (collect_access_infos), so that
  // they grow with what can still race, not with the run.
  static constexpr std::size_t kCollectInfosAt = std::size_t{1} << 16;
  std::size_t collect_infos_at_ = kCollectInfosAt;
  void collect_access_infos();
  // Per warp, where its latest epochs ended (EpochEnds). The tables are
  // this thread's, kept from World to World (world.cpp), so that a run does
  // not allocate them anew.
  std::vector<EpochEnds> epoch_ends_;
  // The actors that can move, ascending (warps, then engines), and per
  // entry whether it can only time out (spurious try_wait); kept up to date
  // by refresh() from moves_, each actor's Move as last evaluated.
  std::vector<std::uint32_t> enabled_;
  std::vector<std::uint8_t> spin_;
  std::vector<std::uint8_t> moves_;
  std::size_t spinning_ = 0;           // entries of spin_ set
  std::uint32_t unfinished_ = 0;       // warps not finished
  std::vector<std::uint32_t> dirty_;   // marked actors, to re-evaluate
  std::vector<std::uint8_t> marked_;   // per actor: in dirty_
  std::vector<std::vector<std::uint32_t>> lists_;  // waiter lists (named_list() ...), unordered
  std::vector<std::uint32_t> try_waiters_;         // warps blocked in try_wait, unordered
  std::vector<std::uint32_t> idle_enabled_;        // scratch: the try_wait time-outs of an idle step
  std::vector<std::uint8_t> idle_spin_;
  bool sched_check_ = false;  // set_sched_check
  std::uint32_t last_actor_ = ~0u;      // the actor of the last step (the default policy's current)
  std::uint64_t choices_ = 0;           // choice points so far
  // try_wait time-outs in a row while no actor could change any state: a
  // warp polling a barrier that only it can complete later goes on; one
  // that polls forever is deadlocked after kMaxIdleTimeouts of them.
  std::uint64_t idle_timeouts_ = 0;
  static constexpr std::uint64_t kMaxIdleTimeouts = 1024;
  // FNV-1a over the choice points met (version 2's check), and over every
  // step taken (version 3's: schedule.hpp).
  std::uint32_t choice_fingerprint_ = 2166136261u;
  std::uint32_t step_fingerprint_ = 2166136261u;
  // Footprints, for strategies that reduce commuting steps: what the step in
  // progress touched (resource ids, see touch()).
  bool track_fp_ = false;
  bool fp_open_ = false;  // a step is in progress whose footprint is not handed over yet
  Footprint fp_;
  Warp* current_ = nullptr;  // the warp running; set_current keeps RunningWarp::lanes_ with it
  void set_current(Warp* w) {
    current_ = w;
    lanes_ = w;
    // plain_access's first test: the running warp's CTA's shared memory (none between warps).
    smem_base_ = w != nullptr ? reinterpret_cast<std::uintptr_t>(ctas_[w->cta].smem) : 0;
    smem_bytes_ = w != nullptr ? ctas_[w->cta].smem_bytes : 0;
  }
  std::uintptr_t smem_base_ = 0;
  std::uintptr_t smem_bytes_ = 0;
  boost::fibers::context* main_ctx_ = nullptr;
  FiberStack main_stack_;  // the stack run() was called on
  DirectedAlgorithm* algo_ = nullptr;
  std::uint64_t step_ = 0;
  std::string mismatch_;   // a replayed schedule that did not fit
  std::exception_ptr escaped_;  // an exception out of the kernel's body (run_body), for run() to throw
  std::exception_ptr swallowed_;  // a warp caught the teardown's unwinding and went on (teardown_op)
  std::string source_root_;  // with a trailing '/'
  RunResult result_;
  // Storage handed to warps whose shared storage did not fit (launch.cpp).
  struct Overflow {
    std::byte* p = nullptr;
    std::size_t align = 0;
    Overflow(std::byte* ptr, std::size_t al) : p(ptr), align(al) {}
    Overflow(Overflow&& o) noexcept : p(std::exchange(o.p, nullptr)), align(o.align) {}
    Overflow& operator=(Overflow&&) = delete;
    ~Overflow();
  };
  std::vector<Overflow> overflow_;
};

}  // namespace wspipe::emu::detail
