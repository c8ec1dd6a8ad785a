// EmuBackend: the Backend operations on the CPU emulator. Each one acts for
// the calling warp of the run in progress (emu::run); every operation that
// another warp could observe is a scheduling point before it takes effect.
#pragma once

#include <bit>
#include <cstdint>
#include <utility>

#include "core/backend.hpp"
#include "world.hpp"

namespace wspipe::emu {

struct EmuBackend {
  // ---- identity
  static std::uint32_t warp_idx() { return detail::World::current().warp().widx; }
  static std::uint32_t lane_idx(SourceLoc loc = SourceLoc::current()) {
    return detail::World::current().lane_idx(loc);
  }
  static std::uint32_t cta_rank() {
    auto& w = detail::World::current();
    return w.cta_of(w.warp()).rank;
  }
  static std::uint32_t cluster_size() { return detail::World::current().launch().cluster_size; }
  // elect.sync: the lowest active lane runs f alone.
  template <class F>
  static void elect_one(F&& f) {
    detail::Warp& w = detail::World::current().warp();
    const std::uint32_t saved = w.active;
    w.active = saved & (~saved + 1u);
    std::forward<F>(f)();
    w.active = saved;
  }
  template <class F>
  static void for_each_lane(F&& f) {
    detail::Warp& w = detail::World::current().warp();
    const std::uint32_t saved = w.active;
    for (std::uint32_t m = saved; m != 0; m &= m - 1) {
      const auto lane = static_cast<std::uint32_t>(std::countr_zero(m));
      w.active = 1u << lane;
      f(lane);
    }
    w.active = saved;
  }
  static void syncwarp(SourceLoc loc = SourceLoc::current()) { detail::World::current().syncwarp(loc); }

  // ---- mbarrier
  static void init(SharedMemBarrier& bar, std::uint32_t count, BarrierName name = {},
                   SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_init(bar, count, name.base, name.index, loc);
  }
  static void inval(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_inval(bar, loc);
  }
  static void fence_init(SourceLoc loc = SourceLoc::current()) { detail::World::current().fence_init(loc); }
  static void arrive(SharedMemBarrier& bar, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_arrive(bar, -1, 0, loc);
  }
  static void arrive_remote(SharedMemBarrier& bar, std::uint32_t cta, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_arrive(bar, cta, 0, loc);
  }
  static void arrive_expect_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_arrive(bar, -1, bytes, loc);
  }
  static void expect_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_tx(bar, bytes, loc);
  }
  static void complete_tx(SharedMemBarrier& bar, std::uint32_t bytes, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_tx(bar, -static_cast<std::int64_t>(bytes), loc);
  }
  static bool try_wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    return detail::World::current().mbar_wait(bar, parity, true, loc);
  }
  static void wait(SharedMemBarrier& bar, std::uint32_t parity, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().mbar_wait(bar, parity, false, loc);
  }

  // ---- named and cluster barriers
  static void named_sync(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().named_barrier(id, threads, true, loc);
  }
  static void named_arrive(std::uint32_t id, std::uint32_t threads, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().named_barrier(id, threads, false, loc);
  }
  static void cluster_sync(SourceLoc loc = SourceLoc::current()) { detail::World::current().cluster_sync(loc); }

  // ---- storage
  template <class T>
  static T& shared_storage() {
    static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                  "shared_storage<T>: T must be trivial, as for extern __shared__ memory");
    return *static_cast<T*>(detail::World::current().shared_storage(sizeof(T), alignof(T)));
  }

  static void check(bool cond, const char* what, SourceLoc loc = SourceLoc::current()) {
    detail::World::current().check(cond, what, loc);
  }
};

static_assert(Backend<EmuBackend>);

}  // namespace wspipe::emu
