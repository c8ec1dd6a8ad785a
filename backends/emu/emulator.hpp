// The emulator's public interface: launch a kernel on a grid of emulated
// CTAs, one fiber per warp, under a chosen scheduling strategy, and get back
// what happened.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.hpp"
#include "schedule.hpp"
#include "strategy.hpp"
#include "trace.hpp"

namespace wspipe::emu {

struct LaunchConfig {
  std::uint32_t num_clusters = 1;
  // CTAs per cluster, a 1-D cluster (cluster_shape unset): 1..8, or up to
  // 16 with non_portable_cluster_size.
  std::uint32_t cluster_size = 1;
  // The cluster's shape (docs/emulator-models.md "Cluster shapes"): CTA
  // ranks number it x fastest, as %cluster_ctarank. Set, it defines the
  // cluster size; cluster_size must then be left at 1 or equal its size.
  // The grid is num_clusters clusters along x: (num_clusters * x, y, z) CTAs.
  std::optional<ClusterShape> cluster_shape;
  // CUDA's cudaFuncAttributeNonPortableClusterSizeAllowed: clusters of 9 to
  // 16 CTAs run only when the launch opts in (8 is the portable maximum).
  bool non_portable_cluster_size = false;
  std::uint32_t warps_per_cta = 1;  // 1..32
  std::size_t smem_bytes = 0;       // per CTA; shared_storage<T>() needs sizeof(T) <= this
  std::vector<std::string> warp_roles;  // optional names by CTA warp index ("producer")
  // Cluster launch (docs/emulator-models.md "Cluster launch control"): how
  // many clusters the GPU runs at once. 0 (the default): every cluster runs
  // from the start, and a clusterlaunchcontrol.try_cancel completes at once,
  // failed (there is nothing left to cancel). 1..num_clusters: the first
  // that many clusters start; each of the others launches when a running
  // one has exited and the scheduler picks the launch, unless a try_cancel
  // cancels it first. try_cancel completions and launches are then actor
  // steps the scheduler explores (one launcher, and per cluster a CLC unit
  // that grants and one that refuses).
  std::uint32_t max_active_clusters = 0;
  // Co-resident CTAs: how many CTAs share each SM (1..32). CTAs of one
  // cluster are on different SMs; clusters are grouped in launch order,
  // `ctas_per_sm` to a group, and the rank-r CTAs of a group's clusters
  // share one SM, with its Tensor Memory allocator (512 columns, PTX
  // "tcgen05.alloc": it blocks until enough columns are free). Checked at
  // launch against sm_100's per-SM limits (shared memory, warps).
  std::uint32_t ctas_per_sm = 1;
  // The kernel's global memory: the buffers its warps read and write with
  // plain C++ (outputs, counters, work queues), each as its bytes
  // (std::as_writable_bytes(std::span(v))). Optional. Lane-divergence mode
  // (RunOptions::lane_divergence) undoes lane 31's stores there, as it does
  // in shared memory, so that a warp-level read-modify-write (`out[i] += x`
  // by the warp) is applied once; lane 31's stores to memory not named here
  // stay (docs/emulator-models.md, "Warp divergence"). They must outlive
  // the run.
  std::vector<std::span<std::byte>> global_memory;
};

// The machine, or the memory budget (RunOptions::max_memory_bytes), could
// not give a run or an exploration what it needs: memory (a run's buffers,
// its trace, the MMA memo) or threads (its jobs). The message names what
// would help (fewer jobs, no memo, a smaller configuration).
struct OutOfResources : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The bytes charged now to the memory budget (RunOptions::max_memory_bytes)
// by the runs and MMA memos of this process.
std::size_t memory_charged();

// Sees a run's protocol state at every scheduling point, abstracted from
// the number of items the kernel has handled (RunOptions::observer;
// verify_parametric in parametric.hpp is its user, and docs/exploration.md,
// "Parametric verdicts", what the abstraction keeps and drops).
class StateObserver {
 public:
  virtual ~StateObserver() = default;
  // Called before each step is picked, and once where the run ends, on the
  // thread that runs the run (an exploration with jobs > 1 calls it from
  // several threads at once). `step`: the steps taken so far, 0 at a run's
  // first point. `state`: the abstract state, as text, canonical (two
  // points have the same text exactly when their abstract states are equal)
  // and valid during the call: each warp's program point (what it is about
  // to do or waits for, and the kernel's source line of it), every
  // mbarrier's phase parity, pending arrivals and tx-count, the named and
  // cluster barriers' arrivals, the engines' queued operations. Phase and
  // generation numbers, issue numbers, step counts, data and clocks are left
  // out.
  virtual void point(std::uint64_t step, std::string_view state) = 0;
};

// Sees each event of a traced run as the run records it
// (RunOptions::event_observer; emu::explain in explain.hpp is its user: it
// follows each warp's operations against a GPU's event log).
class EventObserver {
 public:
  virtual ~EventObserver() = default;
  // Called on the run's thread for every event recorded, before the next
  // one: `t` is the run's trace so far (its warps and barriers named, the
  // event appended), valid during the call.
  virtual void event(const Trace& t, const Event& e) = 0;
};

// Time-outs in a row at one try_wait that are steps of their own before a
// warp spins out (RunOptions::spin_out_limit): a bounded spin of up to this
// many tries plus one can pass on each of its tries.
inline constexpr std::uint32_t kSingleTimeOuts = 3;

// The default RunOptions::reorder_window. Each position is an actor per
// CTA, and the exhaustive search explores every enabled one at each of
// its engine's completions: wider windows cost schedules quickly
// (docs/exploration.md, "The reorder window").
inline constexpr std::uint32_t kReorderWindow = 3;

struct RunOptions {
  StrategyParams strategy;
  std::uint64_t max_steps = 5'000'000;  // step budget; running out is reported as a livelock
  // A run still going at this time stops where it is (looked at every 4,096
  // steps): RunResult::stopped, and pruned, since it says nothing about the
  // kernel. The shrinker gives its runs the end of its time, so that a run
  // that livelocks cannot take it past its budget. Default: never.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  bool trace = true;
  // With `trace`: where the events go while the run goes (TraceFileSink
  // writes a file). The run then keeps only about its last 65,536 events
  // in RunResult::trace (enough for its report), however long it is.
  // Not owned; null: the run keeps every event.
  TraceSink* trace_sink = nullptr;
  // try_wait may return false on a phase that has not completed yet, as
  // PTX allows (its suspend time limit ran out): a time-out is then a
  // choice every strategy can make, and the exhaustive search branches on
  // it (each counts as a preemption). The default policy never takes one.
  // Off: try_wait blocks while another actor could still complete the
  // phase, and times out only when nothing else can move.
  bool spurious_try_wait = true;
  // Time-outs in a row. A warp's first kSingleTimeOuts time-outs in a row
  // at one try_wait (the same call site, barrier and parity, each its
  // warp's next scheduling point after the last) are steps of their own.
  // Let time out once more, it spins out: it goes on timing out there,
  // without another scheduling point, until its next operation is another
  // (it left the loop: a counted spin's fallback) or it has timed out this
  // many times in a row. A loop that has not left by then is taken to spin
  // until its phase completes: its warp cannot time out there again while
  // other actors can move, and the spin's step touched nothing (a pure
  // spin's time-outs change nothing). So a strategy reaches 1 to
  // kSingleTimeOuts time-outs in a row, or as many as leave the loop,
  // whatever its count, and the exhaustive search stays finite on a loop
  // that spins forever. At least kSingleTimeOuts + 1; 0: every time-out is
  // a step of its own (schedules of version 4 and older replay so; an
  // exploration refuses it). docs/emulator-models.md "Time-outs in a row".
  std::uint32_t spin_out_limit = 1024;
  // TMA loads complete in every order PTX allows: a later load of a CTA's
  // TMA engine before the earlier operations queued there (a load at queue
  // position 1 to reorder_window, below), and a load's bytes delivered and
  // counted on its mbarrier in pieces: the oldest load of the queue, cut in
  // halves of whole 128-byte lines the first time, and wherever its
  // barrier's tx-count can reach zero (as many times as it can). Each is a
  // move of an actor of its own, after all the others (the TMA engine's
  // "[1]" ... "[piece]"), that the strategies pick and schedules record;
  // the default policy never picks one, and each counts as a preemption.
  // Off: loads complete whole, in issue order.
  // docs/emulator-models.md "Completion order".
  bool async_reorder = true;
  // How far back in its engine's queue a TMA load may complete from, ahead
  // of every older operation there: each position is an alternative actor
  // per CTA. A load queued further back waits until it is within the
  // window; a run where one was counts it (RunResult::loads_past_window),
  // and a verdict names it among its assumptions. At least 1.
  std::uint32_t reorder_window = kReorderWindow;
  // A schedule of version 5 or older (replay() sets it): a load was cut
  // once, in halves, and only 3 loads behind the oldest could overtake it.
  bool legacy_pieces = false;
  // The happens-before race checker (vector clocks and shadow state of TMEM
  // cells and shared-memory chunks). Off: no race reports, faster runs.
  bool race_check = true;
  // Lane-divergence mode: each warp runs as two lanes, lane 0 (the elected
  // lane, on the warp's fiber) and lane 31 (a second fiber, in lockstep),
  // so that what differs between lanes on a GPU shows: the two are compared
  // at every warp-collective instruction, elect, barrier wait and
  // .sync.aligned operand (warp.divergent-branch, warp.non-uniform-operand).
  // The warp-level model keeps one copy of every variable and cannot see it
  // otherwise. Schedules are the same with it and without.
  bool lane_divergence = false;
  // The tensor-core model reuses the products of an MMA it computed before
  // on the same thread (same instruction, the same operand bytes exactly:
  // the result is identical), keeping up to this many bytes of them across
  // runs. The runs of an exploration repeat their MMAs, so this is most of
  // the speed of exploring a tensor-heavy kernel; 0 computes every MMA.
  std::size_t mma_memo_bytes = std::size_t{512} << 20;
  // A cap on the memory of the emulator's large buffers: the CTAs' shared
  // memory and Tensor Memory, traces and the MMA memos, of every run in
  // the process at once (an exploration's jobs share it). A run that would
  // pass it throws OutOfResources; the memo stops growing at it. 0: none.
  std::size_t max_memory_bytes = 0;
  // Reports and traces name source files relative to this directory: the
  // kernel's project root. Empty: default_source_root(), for runs of an
  // emu::Kernel (explore.hpp: emu::run, explore, replay, and so the testing
  // helpers and the CLI); absolute paths for a run() of its own.
  std::string source_root;
  // Sees the abstract state at every scheduling point (StateObserver). Not
  // owned; null (the default): no state is built, and a step costs one test.
  StateObserver* observer = nullptr;
  // With `trace`: sees every event as it is recorded (EventObserver). Not
  // owned; null (the default): none.
  EventObserver* event_observer = nullptr;
};

// The source root a run of an emu::Kernel uses when its options name none:
// the environment's WSPIPE_SOURCE_ROOT when set (empty: absolute paths),
// else the project's, noted by the program's own code (below), else none.
std::string default_source_root();

namespace detail {
// Notes `root` as the project's source root (the first noted wins); true.
bool note_project_source_root(const char* root);
}  // namespace detail

// The project's source root, noted where the build defines it:
// WSPIPE_PROJECT_SOURCE_DIR, which wspipe's CMake targets give the code that
// links them (wspipe::emu's users, not wspipe's own libraries): the
// including project's top source directory (CMAKE_SOURCE_DIR), or
// WSPIPE_SOURCE_ROOT where the project sets that CMake variable. One
// variable per translation unit that includes this header, with internal
// linkage, so that no library bakes its own build's path into another.
#if defined(WSPIPE_PROJECT_SOURCE_DIR)
namespace detail {
namespace {
[[maybe_unused]] const bool project_source_root_noted = note_project_source_root(WSPIPE_PROJECT_SOURCE_DIR);
}  // namespace
}  // namespace detail
#endif

enum class Status { ok, violation, deadlock, livelock };
const char* to_string(Status s);

struct Violation {
  std::string rule;     // e.g. "mbarrier.over-arrival"
  std::string message;  // what happened, in words
  std::string warp;     // "cta0/w1 consumer"
  std::string object;   // "empty[2] (cta0)"
  std::uint64_t step = 0;
  std::string file;     // the kernel's source location
  std::uint32_t line = 0;
  std::string other;    // a race's other side: who, what, step, where
};

// What an unfinished warp was doing when the run stopped.
struct BlockedWarp {
  std::string warp;
  std::string op;      // "wait", "bar.sync", "cluster_sync", "running"
  std::string object;  // barrier name
  std::string state;   // awaited parity, phase, pending, expected, tx ...
  std::uint64_t since = 0;
  std::string file;
  std::uint32_t line = 0;
  std::vector<std::string> last_events;  // on that object, oldest first (needs the trace)
  // An mbarrier wait ("wait", "try_wait"): the barrier's id in the trace's
  // objects and the parity awaited; -1 otherwise.
  std::int32_t barrier = -1;
  std::int32_t parity = -1;
};

struct RunResult {
  Status status = Status::ok;
  std::vector<Violation> violations;  // the first one stopped the run
  std::vector<BlockedWarp> blocked;   // deadlock and livelock: every unfinished warp
  Schedule schedule;                  // replays this run: its deviations from the default policy
  Trace trace;                        // empty unless RunOptions::trace
  std::uint64_t steps = 0;
  std::uint64_t choices = 0;          // steps at which more than one actor could move
  // Preemptions: choices that switched away from an actor that could go on
  // (or let a spinning try_wait time out); their choice indices, ascending.
  std::vector<std::uint64_t> preemption_at;
  std::uint64_t preemptions() const { return preemption_at.size(); }
  // The strategy abandoned the run as equivalent to one already explored
  // (exhaustive search): its status means nothing.
  bool pruned = false;
  // The run reached RunOptions::deadline and stopped there (pruned too).
  bool stopped = false;
  // Whether try_wait could time out spuriously and loads complete out of
  // order in this run: its options' spurious_try_wait and async_reorder,
  // which replay() turns off for a version 2 or 3 schedule recorded
  // without them. A replay line names the modes it had.
  bool spurious_try_wait = true;
  bool async_reorder = true;
  // Its options' reorder_window, and the TMA loads queued past it (further
  // back in their engine's queue than a load may complete from ahead of
  // the older ones): what the run could not reorder.
  std::uint32_t reorder_window = kReorderWindow;
  bool legacy_pieces = false;
  std::uint64_t loads_past_window = 0;
  // Its options' spin_out_limit (0 for a schedule of version 4 or older,
  // which replay() runs with every time-out a step of its own).
  std::uint32_t spin_out_limit = 1024;

  // The report a person reads: the status, then the violation or what each
  // blocked warp waits on and the last events on that object.
  std::string report() const;
};

// Copies how `run` ended (its first violation, or what each unfinished warp
// of a deadlock or livelock waits on) into run.trace.ending, where the
// trace's exporters show it. emu::run(const Kernel&, ...) (explore.hpp),
// and so every front end, does it for each run; a caller of run() below
// that writes traces calls it itself.
void note_ending(RunResult& run);

// A replayed schedule that does not fit the kernel and options it is
// replayed with: bad input, not a finding.
class ScheduleMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A launch configuration the emulator cannot run.
class BadLaunch : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The launch as run() takes it, checked before anything runs: throws
// BadLaunch naming what the hardware could not launch (cluster shape and
// the non-portable opt-in, grid, warps, shared memory, co-residency,
// max_active_clusters). The result has cluster_shape set and cluster_size
// equal to its size. A CLI or a test harness calls it to reject bad input
// up front.
LaunchConfig checked_launch(const LaunchConfig& launch);

// Runs `body` once per warp (each on its own fiber) of every CTA of the
// grid; inside, EmuBackend's operations act for the calling warp.
RunResult run(const LaunchConfig& launch, const std::function<void()>& body, const RunOptions& options);

}  // namespace wspipe::emu
