// EmuBackend: the Backend operations on the CPU emulator. Each one acts for
// the calling warp of the run in progress (emu::run); every operation that
// another warp could observe is a scheduling point before it takes effect.
// The operations go through the emulator's narrow door (emu_ops.hpp): this
// header exposes none of the runtime's state.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/backend.hpp"
#include "core/numeric.hpp"
#include "emu_ops.hpp"

// This translation unit's note (emu_ops.hpp, note_translation_unit);
// WSPIPE_NO_KERNEL_CODE: a library's own, which runs no kernel code.
#if !defined(WSPIPE_NO_KERNEL_CODE) && !defined(__CUDACC__)
namespace {
[[maybe_unused]] const bool wspipe_translation_unit_noted_ = [] {
#if defined(WSPIPE_INSTRUMENTED_ACCESSES)
  ::wspipe::emu::detail::note_translation_unit(__BASE_FILE__, true);
#else
  ::wspipe::emu::detail::note_translation_unit(__BASE_FILE__, false);
#endif
  return true;
}();
}  // namespace
#endif

namespace wspipe::emu {

// A tcgen05.ld/st fragment: N 32-bit registers for each of the warp's 32
// threads. Warp-level code holds it; reg(i) / set(i, v) act for the one
// active lane (inside for_each_lane), as a thread's register would.
template <std::uint32_t N>
class EmuFrag {
 public:
  EmuFrag() = default;
  // A copy holds the registers, not the tcgen05.st that watches them.
  EmuFrag(const EmuFrag& o) : regs_(o.regs_), token_(o.token_) {}
  EmuFrag& operator=(const EmuFrag& o) {
    regs_ = o.regs_;
    token_ = o.token_;
    return *this;
  }
  // The source of a tcgen05.st not yet waited for must not have changed
  // when it goes (tmem.st-source-changed). (The store's number, not this
  // object's address, goes to the runtime: a fragment that no store read
  // keeps its registers in registers.)
  ~EmuFrag() {
    if (st_ != 0) [[unlikely]]
      detail::RunningWarp::frag_gone(st_);
  }

  std::uint32_t reg(std::uint32_t i, SourceLoc loc = SourceLoc::current()) const {
    return regs_[detail::RunningWarp::current().frag_lane(token_, i, N, loc) * N + (i < N ? i : 0)];
  }
  void set(std::uint32_t i, std::uint32_t v, SourceLoc loc = SourceLoc::current()) {
    regs_[detail::RunningWarp::current().frag_lane(0, i, N, loc) * N + (i < N ? i : 0)] = v;
  }
  // reg(i) as the f32 it holds (an accumulator's element).
  float f32(std::uint32_t i, SourceLoc loc = SourceLoc::current()) const { return f32_from_bits(reg(i, loc)); }

 private:
  friend struct EmuBackend;
  std::array<std::uint32_t, 32 * N> regs_{};  // thread-major: regs_[thread * N + i]
  std::uint64_t token_ = 0;                   // the tcgen05.ld that fills it; 0: none
  mutable std::uint64_t st_ = 0;              // the latest tcgen05.st that read it (its number in the warp); 0: none
};

struct EmuBackend {
  template <std::uint32_t N>
  using Frag = EmuFrag<N>;
  using TmaMap = TensorMap;  // the emulator's TMA reads the value type itself
  static constexpr bool kTensorMemory = true;  // the emulator models sm_100a

  // ---- identity
  static std::uint32_t warp_idx() { return detail::ops::warp_idx(); }
  static std::uint32_t lane_idx(SourceLoc loc = SourceLoc::current()) { return detail::ops::lane_idx(loc); }
  static std::uint32_t cta_rank() { return detail::ops::cta_rank(); }
  static std::uint32_t cluster_size() { return detail::ops::cluster_size(); }
  static ClusterShape cluster_shape() { return detail::ops::cluster_shape(); }
  static std::uint32_t cluster_idx() { return detail::ops::cluster_idx(); }
  static std::uint32_t num_clusters() { return detail::ops::num_clusters(); }
  // elect.sync: the lowest active lane runs f alone. In lane-divergence
  // mode lane 31's fiber meets the warp's here and runs f only when it is
  // the one elected (RunOptions::lane_divergence).
  template <class F>
  static void elect_one(F&& f, SourceLoc loc = SourceLoc::current()) {
    detail::ops::elect(loc);
    detail::RunningWarp& warp = detail::RunningWarp::current();
    std::uint32_t& active = warp.active_lanes();
    const std::uint32_t saved = active;
    const std::uint32_t elected = saved & (~saved + 1u);
    if (!warp.runs_lanes(elected)) return;
    active = elected;
    lanes_seen();
    std::forward<F>(f)();
    lanes_seen();
    active = saved;
  }
  // f(lane) for each active lane with only that lane active: every lane in
  // turn on the warp's fiber, lane 31 alone on lane 31's. Always inlined:
  // the loop and f's fragment accesses (RunningWarp::frag_lane) must be
  // compiled together for the one-lane fast path to stay cheap; left to
  // itself, g++ 12 kept blockwise-fp8's store loop out of line, 4.6% more
  // instructions per exploration (docs/performance.md, "The narrow door").
  template <class F>
  [[gnu::always_inline]] static void for_each_lane(F&& f) {
    detail::RunningWarp& warp = detail::RunningWarp::current();
    std::uint32_t& active = warp.active_lanes();
    const std::uint32_t saved = active;
    for (std::uint32_t m = saved; m != 0; m &= m - 1) {
      const auto lane = static_cast<std::uint32_t>(std::countr_zero(m));
      if (!warp.runs_lanes(1u << lane)) continue;
      active = 1u << lane;
      lanes_seen();
      f(lane);
      lanes_seen();
    }
    active = saved;
  }
  // The lanes f runs for must be in memory while it runs: the access hooks
  // of instrumented code (runtime/plain_access.cpp) read them to attribute
  // a plain access to its lanes (docs/emulator-models.md, "Per-lane
  // release"), and the compiler, which does not see the hooks read memory,
  // would otherwise keep one lane's mask in a register or drop it (g++ 12
  // stored only the final `active = saved` of for_each_lane's loop).
  [[gnu::always_inline]] static void lanes_seen() {
#if defined(WSPIPE_INSTRUMENTED_ACCESSES) && !defined(__CUDACC__)
    asm volatile("" ::: "memory");
#endif
  }
  static void syncwarp(SourceLoc loc = SourceLoc::current()) { detail::ops::syncwarp(loc); }
  static void warp_state_step(const char* what, SourceLoc loc = SourceLoc::current()) {
    detail::ops::warp_state_step(what, loc);
  }

  // ---- mbarrier
  static void init(SharedMemBarrier& bar, std::uint32_t count, BarrierName name = {},
                   SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_init(bar, count, name.base, name.index, loc);
  }
  static void inval(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_inval(bar, loc);
  }
  static void fence_init(SourceLoc loc = SourceLoc::current()) { detail::ops::fence_init(loc); }
  static void arrive(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_arrive(bar, -1, 0, loc);
  }
  static void arrive_remote(SharedMemBarrier& bar, std::uint32_t cta, SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_arrive(bar, cta, 0, loc);
  }
  static void arrive_expect_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_arrive(bar, -1, bytes, loc);
  }
  static void arrive_expect_tx_remote(SharedMemBarrier& bar, std::uint32_t bytes, std::uint32_t cta,
                                      SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_arrive(bar, cta, bytes, loc);
  }
  static void expect_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_tx(bar, bytes, loc);
  }
  static void complete_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_tx(bar, -static_cast<std::int64_t>(bytes), loc);
  }
  static bool try_wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    return detail::ops::mbar_wait(bar, parity, std::nullopt, true, loc);
  }
  static bool test_wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    return detail::ops::mbar_test(bar, parity, std::nullopt, loc);
  }
  static void wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_wait(bar, parity, std::nullopt, false, loc);
  }
  // With the phase meant stated: checked against the barrier (PhaseNumber).
  static bool try_wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber phase,
                       SourceLoc loc = SourceLoc::current()) {
    return detail::ops::mbar_wait(bar, parity, phase, true, loc);
  }
  static bool test_wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber phase,
                        SourceLoc loc = SourceLoc::current()) {
    return detail::ops::mbar_test(bar, parity, phase, loc);
  }
  static void wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber phase,
                   SourceLoc loc = SourceLoc::current()) {
    detail::ops::mbar_wait(bar, parity, phase, false, loc);
  }

  // ---- named and cluster barriers
  static void named_sync(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    detail::ops::named_barrier(id, threads, true, loc);
  }
  static void named_arrive(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    detail::ops::named_barrier(id, threads, false, loc);
  }
  static void cluster_sync(SourceLoc loc = SourceLoc::current()) { detail::ops::cluster_sync(loc); }

  // ---- Tensor Memory
  template <int CtaGroup>
  static void tmem_alloc(std::uint32_t* dst, std::uint32_t cols, SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "tmem_alloc<CtaGroup>: CtaGroup must be 1 or 2");
    detail::ops::tmem_alloc(CtaGroup, dst, cols, loc);
  }
  template <int CtaGroup>
  static void tmem_relinquish(SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "tmem_relinquish<CtaGroup>: CtaGroup must be 1 or 2");
    detail::ops::tmem_relinquish(CtaGroup, loc);
  }
  template <int CtaGroup>
  static void tmem_dealloc(std::uint32_t taddr, std::uint32_t cols, SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "tmem_dealloc<CtaGroup>: CtaGroup must be 1 or 2");
    detail::ops::tmem_dealloc(CtaGroup, taddr, cols, loc);
  }
  template <TmemShape S, std::uint32_t Num, std::uint32_t HalfSplit = 0>
  static Frag<tmem_regs(S, Num)> tmem_load(std::uint32_t taddr, SourceLoc loc = SourceLoc::current()) {
    static_assert(tmem_num_valid(S, Num), "tmem_load<Shape, Num>: Num must be a power of 2 in [1, 128] with at most "
                                          "128 registers per thread (16x128b stops at 64, 16x256b at 32)");
    Frag<tmem_regs(S, Num)> f;
    f.token_ = detail::ops::tmem_ld(S, Num, HalfSplit, taddr, f.regs_.data(), loc);
    return f;
  }
  template <TmemShape S, std::uint32_t Num, std::uint32_t HalfSplit = 0>
  static void tmem_store(std::uint32_t taddr, const Frag<tmem_regs(S, Num)>& f, SourceLoc loc = SourceLoc::current()) {
    static_assert(tmem_num_valid(S, Num), "tmem_store<Shape, Num>: Num must be a power of 2 in [1, 128] with at "
                                          "most 128 registers per thread (16x128b stops at 64, 16x256b at 32)");
    f.st_ = detail::ops::tmem_st(S, Num, HalfSplit, taddr, f.regs_.data(), loc);
  }
  static void tmem_wait_load(SourceLoc loc = SourceLoc::current()) { detail::ops::tmem_wait(true, loc); }
  static void tmem_wait_store(SourceLoc loc = SourceLoc::current()) {
    detail::ops::tmem_wait(false, loc);
  }
  // tcgen05.fence::before/after_thread_sync order tcgen05 operations around
  // thread synchronisation; the model orders them by the synchronisation
  // itself (CUTLASS omits these fences, so making them errors would flag its
  // kernels: docs/hardware.md "Ordering and fences"), so they are no-ops here.
  static void tmem_fence_before(SourceLoc = SourceLoc::current()) {}
  static void tmem_fence_after(SourceLoc = SourceLoc::current()) {}

  // ---- tensor core
  template <MmaKind Kind, int CtaGroup>
  static void mma(std::uint32_t d_tmem, std::uint64_t a_desc, std::uint64_t b_desc, std::uint32_t idesc,
                  bool accumulate, SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "mma<Kind, CtaGroup>: CtaGroup must be 1 or 2");
    detail::ops::mma(Kind, CtaGroup, d_tmem, a_desc, b_desc, idesc, accumulate, loc);
  }
  template <int CtaGroup>
  static void mma_commit(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "mma_commit<CtaGroup>: CtaGroup must be 1 or 2");
    detail::ops::mma_commit(CtaGroup, bar, 0, false, loc);
  }
  template <int CtaGroup>
  static void mma_commit_multicast(SharedMemBarrier& bar, std::uint16_t cta_mask,
                                   SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "mma_commit_multicast<CtaGroup>: CtaGroup must be 1 or 2");
    detail::ops::mma_commit(CtaGroup, bar, cta_mask, true, loc);
  }

  // ---- TMA
  // Rank: the tensor's rank, which the instruction names (.2d, ...); the
  // device cannot read it from the map, so the kernel states it and the
  // emulator checks it against the map.
  template <int CtaGroup = 1, std::uint32_t Rank = 2>
  static void tma_load(const TmaMap& map, void* dst, SharedMemBarrier& bar, TmaCoords coords,
                       SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "tma_load<CtaGroup, Rank>: CtaGroup must be 1 or 2");
    static_assert(Rank >= 1 && Rank <= kTmaMaxRank, "tma_load<CtaGroup, Rank>: Rank must be in [1, 5]");
    detail::ops::tma_load(CtaGroup, Rank, map, dst, bar, coords, 0, false, loc);
  }
  template <int CtaGroup = 1, std::uint32_t Rank = 2>
  static void tma_load_multicast(const TmaMap& map, void* dst, SharedMemBarrier& bar, TmaCoords coords,
                                 std::uint16_t cta_mask, SourceLoc loc = SourceLoc::current()) {
    static_assert(CtaGroup == 1 || CtaGroup == 2, "tma_load_multicast<CtaGroup, Rank>: CtaGroup must be 1 or 2");
    static_assert(Rank >= 1 && Rank <= kTmaMaxRank, "tma_load_multicast<CtaGroup, Rank>: Rank must be in [1, 5]");
    detail::ops::tma_load(CtaGroup, Rank, map, dst, bar, coords, cta_mask, true, loc);
  }
  // TMA stores and bulk async-groups (runtime/tma_store.cpp): single-thread issue
  // of the store; the groups are the warp's (its issuing lane's).
  template <std::uint32_t Rank = 2>
  static void tma_store(const TmaMap& map, const void* src, TmaCoords coords, SourceLoc loc = SourceLoc::current()) {
    static_assert(Rank >= 1 && Rank <= kTmaMaxRank, "tma_store<Rank>: Rank must be in [1, 5]");
    detail::ops::tma_store(Rank, map, src, coords, loc);
  }
  static void bulk_commit_group(SourceLoc loc = SourceLoc::current()) {
    detail::ops::bulk_commit_group(loc);
  }
  template <int N>
  static void bulk_wait_group(SourceLoc loc = SourceLoc::current()) {
    static_assert(N >= 0, "bulk_wait_group<N>: N (groups left pending) must be >= 0");
    detail::ops::bulk_wait_group(static_cast<std::uint32_t>(N), false, loc);
  }
  template <int N>
  static void bulk_wait_group_read(SourceLoc loc = SourceLoc::current()) {
    static_assert(N >= 0, "bulk_wait_group_read<N>: N (groups left pending) must be >= 0");
    detail::ops::bulk_wait_group(static_cast<std::uint32_t>(N), true, loc);
  }
  static void fence_proxy_async(SourceLoc loc = SourceLoc::current()) {
    detail::ops::fence_proxy_async(loc);
  }

  // ---- shared-memory tiles: offsets in the CTA's shared memory stand for
  // shared-window addresses (the emulated window starts at 0)
  static std::uint32_t smem_addr(const void* p) { return detail::ops::smem_offset(p); }
  static void smem_read(const void* p, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::ops::smem_access(p, bytes, false, loc);
  }
  static void smem_write(void* p, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::ops::smem_access(p, bytes, true, loc);
  }

  // ---- storage
  template <class T>
  static T& shared_storage(SourceLoc loc = SourceLoc::current()) {
    static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                  "shared_storage<T>: T must be trivial, as for extern __shared__ memory");
    return *static_cast<T*>(detail::ops::shared_storage(sizeof(T), alignof(T), loc));
  }

  static void check(bool cond, const char* what, SourceLoc loc = SourceLoc::current()) {
    detail::ops::check(cond, what, loc);
  }
  // The same, naming the values compared in the report (core/check.hpp):
  //   B::check(v == want, "output", {{"item", i}, {"got", v}, {"want", want}});
  static void check(bool cond, const char* what, const CheckValues& values, SourceLoc loc = SourceLoc::current()) {
    detail::ops::check_values(cond, what, values, loc);
  }

  // ---- cluster launch control (runtime/clc.cpp; the launch model is
  // LaunchConfig::max_active_clusters). Decode the response where it lies
  // in shared memory: the emulator checks that read against the write.
  static constexpr bool kClusterLaunchControl = true;  // the emulator models sm_100a
  static void clc_try_cancel(ClcResponse& resp, SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    detail::ops::clc_try_cancel(resp, bar, false, loc);
  }
  static void clc_try_cancel_multicast(ClcResponse& resp, SharedMemBarrier& bar,
                                       SourceLoc loc = SourceLoc::current()) {
    detail::ops::clc_try_cancel(resp, bar, true, loc);
  }
  static bool clc_is_canceled(const ClcResponse& resp, SourceLoc loc = SourceLoc::current()) {
    return detail::ops::clc_is_canceled(resp, loc);
  }
  static ClcCtaId clc_first_ctaid(const ClcResponse& resp, SourceLoc loc = SourceLoc::current()) {
    return detail::ops::clc_first_ctaid(resp, loc);
  }
};

static_assert(Backend<EmuBackend>);

}  // namespace wspipe::emu
