// The emulator's narrow door: the operations EmuBackend performs for the
// calling warp of the run in progress, declared here and defined in the
// runtime (backends/emu/runtime/ops.cpp), whose headers are private. A
// kernel, a test or a tool that includes emu_backend.hpp sees these
// declarations and nothing of the runtime's state, models or clocks, so
// editing a model rebuilds only the emulator (docs/architecture.md).
//
// What stays inline is what EmuBackend's per-lane loops need at every
// iteration (measured, docs/performance.md "The narrow door"): the active
// lanes of the fiber running, whether it runs a given lane, and the lane a
// fragment register access means. RunningWarp holds exactly that state;
// the runtime's World derives from it and keeps it up to date.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>

#include "core/barrier.hpp"
#include "core/check.hpp"
#include "core/clc.hpp"
#include "core/cluster.hpp"
#include "core/config.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"

namespace wspipe::emu::detail {

// Every translation unit that includes emu_backend.hpp (kernel code) notes
// once, as the program starts, whether it was compiled with the access
// instrumentation (WSPIPE_INSTRUMENT_ACCESSES): the plain shared-memory
// accesses of one that was not are invisible to the race checker and the
// footprints, which a verdict names among its assumptions.
void note_translation_unit(const char* file, bool instrumented) noexcept;

// What an operation throws in a warp that the teardown of its run unwinds
// (the run ended: a violation, a deadlock, a deadline; World::point): the
// warp's frames unwind to the fiber's entry, where the runtime catches it,
// so that a loop whose exit depends on what a wait publishes ends too. It
// derives from nothing, so `catch (const std::exception&)` lets it through;
// a kernel's `catch (...)` must rethrow it (`throw;`), and a destructor
// that calls an operation must be noexcept(false) (core's scoped contexts
// are). docs/emulator-models.md, "Teardown".
struct TeardownUnwind final {};

// The part of a warp's state that EmuBackend's inline paths read and
// write: the runtime's Warp derives from it.
struct WarpLanes {
  std::uint32_t active = ~0u;       // active lanes, as the warp's fiber sees them
  std::uint32_t lane_active = ~0u;  // the same as lane 31's fiber sees them (lane-divergence mode)
  std::uint64_t ld_waited = 0;      // tcgen05.ld of this warp waited for (tcgen05.wait::ld)
  std::uint32_t st_sources = 0;     // tcgen05.st source fragments the runtime watches (until tcgen05.wait::st)
};

// The warp running on this thread, as far as EmuBackend's inline paths see
// it. The World of the run in progress is one (it derives from this class);
// current() is that World.
class RunningWarp {
 public:
  static constexpr std::uint32_t kSecondLane = 31;
  static constexpr std::uint32_t kSecondLaneBit = 1u << kSecondLane;

  // The run in progress on this thread, inside one of its warps (aborts with
  // a message when called outside).
  static RunningWarp& current() {
    RunningWarp* const r = tl_running_;
    if (r == nullptr || r->lanes_ == nullptr) [[unlikely]]
      outside_a_warp();
    return *r;
  }

  // The active lanes of the fiber running: the warp's, or its second lane's
  // (lane-divergence mode). elect_one and for_each_lane narrow them.
  std::uint32_t& active_lanes() { return in_lane_ ? lanes_->lane_active : lanes_->active; }
  // Whether the fiber running executes code for the lanes of `mask`: the
  // warp's fiber runs every lane's, the second lane only its own.
  bool runs_lanes(std::uint32_t mask) const { return !in_lane_ || (mask & kSecondLaneBit) != 0; }
  // The run has ended (a violation, a deadlock): what a warp still does
  // while the world tears down is not part of it.
  bool ended() const { return stopping_ || killing_; }

  // The lane whose registers a fragment access means (the one active lane),
  // after checking that the load that filled it (`token`) was waited for.
  // Inline when there is nothing to report: it is the epilogues' inner loop.
  std::uint32_t frag_lane(std::uint64_t token, std::uint32_t reg, std::uint32_t regs, const SourceLoc& loc) {
    const WarpLanes& w = *lanes_;
    // One lane active: a bit test, not std::has_single_bit (a libgcc call
    // without -mpopcnt).
    const bool one_lane = w.active != 0 && (w.active & (w.active - 1)) == 0;
    if (reg < regs && one_lane && !in_lane_ && !killing_ && !stopping_ && token <= w.ld_waited) [[likely]]
      return static_cast<std::uint32_t>(std::countr_zero(w.active));
    return frag_lane_checked(token, reg, regs, loc);
  }
  // The source fragment of the running warp's tcgen05.st number `st` goes
  // away (EmuFrag's destructor). A call only while the warp has a store
  // whose source the runtime watches (not yet waited for): its registers
  // are compared with their values at issue one last time.
  static void frag_gone(std::uint64_t st) {
    RunningWarp* const r = tl_running_;
    if (r != nullptr && r->lanes_ != nullptr && r->lanes_->st_sources != 0) [[unlikely]]
      r->st_source_gone(st);
  }

 protected:
  RunningWarp() = default;
  ~RunningWarp() = default;
  RunningWarp(const RunningWarp&) = delete;
  RunningWarp& operator=(const RunningWarp&) = delete;

  // The out-of-line rest of frag_lane: the reports (runtime/tmem.cpp).
  std::uint32_t frag_lane_checked(std::uint64_t token, std::uint32_t reg, std::uint32_t regs, const SourceLoc& loc);
  void st_source_gone(std::uint64_t st);  // runtime/ops.cpp
  [[noreturn]] static void outside_a_warp();

  WarpLanes* lanes_ = nullptr;  // the running warp's; null between warps
  // The fiber running is the warp's second lane (lane-divergence mode). Its
  // per-lane operations (arrive, expect_tx, init, TMA, MMA, commit, fences,
  // shared-memory accesses, checks) return at once: the warp's fiber
  // performed them for every active lane, lane 31 included.
  bool in_lane_ = false;
  bool stopping_ = false;  // the run has ended; nothing more is scheduled
  bool killing_ = false;   // tearing down: unfinished warps are unwound from their next operation
  static inline thread_local RunningWarp* tl_running_ = nullptr;  // the run in progress on this thread
};

// The operations, each for the calling warp of the run in progress
// (RunningWarp::current()). EmuBackend (emu_backend.hpp) is their only
// caller; the semantics are the Backend concept's (core/backend.hpp) and the
// models' (docs/emulator-models.md).
namespace ops {

// identity and warp
std::uint32_t warp_idx();
std::uint32_t lane_idx(const SourceLoc& loc);
std::uint32_t cta_rank();
std::uint32_t cluster_idx();
std::uint32_t cluster_size();
std::uint32_t num_clusters();
ClusterShape cluster_shape();
void elect(const SourceLoc& loc);
void syncwarp(const SourceLoc& loc);
void warp_state_step(const char* what, const SourceLoc& loc);
void* shared_storage(std::size_t size, std::size_t align, const SourceLoc& loc);
void check(bool cond, const char* what, const SourceLoc& loc);
void check_values(bool cond, const char* what, const CheckValues& values, const SourceLoc& loc);

// mbarrier
void mbar_init(SharedMemBarrier& bar, std::uint32_t count, const char* base, int index, const SourceLoc& loc);
void mbar_inval(SharedMemBarrier& bar, const SourceLoc& loc);
void fence_init(const SourceLoc& loc);
// cta_rank -1: the warp's own CTA; tx_bytes: arrive.expect_tx.
void mbar_arrive(SharedMemBarrier& bar, std::int64_t cta_rank, std::uint32_t tx_bytes, const SourceLoc& loc);
void mbar_tx(SharedMemBarrier& bar, std::int64_t delta_per_lane, const SourceLoc& loc);
// phase: the absolute phase number the caller states it means, if any.
bool mbar_wait(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, bool is_try,
               const SourceLoc& loc);
bool mbar_test(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, const SourceLoc& loc);

// named and cluster barriers
void named_barrier(std::uint32_t id, std::uint32_t threads, bool sync, const SourceLoc& loc);
void cluster_sync(const SourceLoc& loc);

// Tensor Memory
void tmem_alloc(int cta_group, std::uint32_t* dst, std::uint32_t cols, const SourceLoc& loc);
void tmem_relinquish(int cta_group, const SourceLoc& loc);
void tmem_dealloc(int cta_group, std::uint32_t taddr, std::uint32_t cols, const SourceLoc& loc);
// tcgen05.ld into out[thread * regs + reg]; returns the load's sequence
// number in this warp (the fragment's token).
std::uint64_t tmem_ld(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                      std::uint32_t* out, const SourceLoc& loc);
// tcgen05.st from in[thread * regs + reg]; returns the store's sequence
// number in this warp (0: not issued), under which the runtime watches `in`
// until tcgen05.wait::st.
std::uint64_t tmem_st(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                      const std::uint32_t* in, const SourceLoc& loc);
void tmem_wait(bool loads, const SourceLoc& loc);

// tensor core and TMA
void mma(MmaKind kind, int cta_group, std::uint32_t d_tmem, std::uint64_t a_desc, std::uint64_t b_desc,
         std::uint32_t idesc, bool accumulate, const SourceLoc& loc);
void mma_commit(int cta_group, SharedMemBarrier& bar, std::uint16_t mask, bool multicast, const SourceLoc& loc);
void tma_load(int cta_group, std::uint32_t rank, const TensorMap& map, void* dst, SharedMemBarrier& bar,
              const TmaCoords& coords, std::uint16_t mask, bool multicast, const SourceLoc& loc);
void fence_proxy_async(const SourceLoc& loc);
void tma_store(std::uint32_t rank, const TensorMap& map, const void* src, const TmaCoords& coords,
               const SourceLoc& loc);
void bulk_commit_group(const SourceLoc& loc);
void bulk_wait_group(std::uint32_t n, bool read, const SourceLoc& loc);
std::uint32_t smem_offset(const void* p);
void smem_access(const void* p, std::uint32_t bytes, bool write, const SourceLoc& loc);

// cluster launch control
void clc_try_cancel(ClcResponse& resp, SharedMemBarrier& bar, bool multicast, const SourceLoc& loc);
bool clc_is_canceled(const ClcResponse& resp, const SourceLoc& loc);
ClcCtaId clc_first_ctaid(const ClcResponse& resp, const SourceLoc& loc);

}  // namespace ops
}  // namespace wspipe::emu::detail
