// The Backend concept: every hardware operation a warp-specialized kernel
// uses, as static member functions of a backend type. Kernels and core/ are
// written against it once; backends/cuda (sm_100a) and backends/emu (the CPU
// emulator) implement it and each ends with static_assert(Backend<Its>).
//
// Programming model (DESIGN.md "warp-level code"): a role function runs once
// per warp. An operation called at warp level acts for every active lane (a
// warp-level arrive counts one arrival per active lane); elect_one(f) runs f
// with one lane active; for_each_lane(f) runs f(lane) with only that lane.
//
// Groups implemented so far: identity, mbarrier, named and cluster barriers,
// storage. TMEM, the tensor core and TMA join in later changes; adding an
// operation means changing this concept and both backends together.
#pragma once

#include <concepts>
#include <cstdint>

#include "barrier.hpp"
#include "config.hpp"

namespace wspipe {

namespace detail {
struct NoOp {
  WSPIPE_HD void operator()() const {}
};
struct LaneNoOp {
  WSPIPE_HD void operator()(std::uint32_t) const {}
};
struct ProbeStorage {
  int x;
};
}  // namespace detail

template <class B>
concept Backend = requires(SharedMemBarrier& bar, std::uint32_t u32, bool cond, SourceLoc loc) {
  // Operations that can break a rule take the caller's location last.
  // identity
  { B::warp_idx() } -> std::same_as<std::uint32_t>;  // warp index in the CTA
  { B::lane_idx() } -> std::same_as<std::uint32_t>;  // only with one lane active
  { B::cta_rank() } -> std::same_as<std::uint32_t>;  // rank in the cluster
  { B::cluster_size() } -> std::same_as<std::uint32_t>;
  { B::elect_one(detail::NoOp{}) } -> std::same_as<void>;
  { B::for_each_lane(detail::LaneNoOp{}) } -> std::same_as<void>;
  { B::syncwarp(loc) } -> std::same_as<void>;

  // mbarrier (PTX "mbarrier"); `bar` lives in this CTA's shared memory
  { B::init(bar, u32, BarrierName{}, loc) } -> std::same_as<void>;
  { B::inval(bar, loc) } -> std::same_as<void>;
  { B::fence_init(loc) } -> std::same_as<void>;  // fence.mbarrier_init.release.cluster
  { B::arrive(bar, loc) } -> std::same_as<void>;
  { B::arrive_remote(bar, u32, loc) } -> std::same_as<void>;  // same offset, CTA u32 of the cluster
  { B::arrive_expect_tx(bar, u32, loc) } -> std::same_as<void>;
  { B::expect_tx(bar, u32, loc) } -> std::same_as<void>;
  { B::complete_tx(bar, u32, loc) } -> std::same_as<void>;
  { B::try_wait(bar, u32, loc) } -> std::same_as<bool>;  // parity wait, may fail spuriously
  { B::wait(bar, u32, loc) } -> std::same_as<void>;      // parity wait until it succeeds

  // named barriers (bar.sync / bar.arrive) and the cluster barrier
  { B::named_sync(u32, u32, loc) } -> std::same_as<void>;
  { B::named_arrive(u32, u32, loc) } -> std::same_as<void>;
  { B::cluster_sync(loc) } -> std::same_as<void>;

  // storage: this CTA's shared memory, laid out as the kernel's struct
  { B::template shared_storage<detail::ProbeStorage>() } -> std::same_as<detail::ProbeStorage&>;

  // a kernel's own assertion (a data check); the emulator reports it as a
  // violation, the CUDA backend traps
  { B::check(cond, "what", loc) } -> std::same_as<void>;
};

}  // namespace wspipe
