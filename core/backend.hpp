// The Backend concept: every hardware operation a warp-specialized kernel
// uses, as static member functions of a backend type. Kernels and core/ are
// written against it once; backends/cuda (sm_100a) and backends/emu (the CPU
// emulator) implement it and each ends with static_assert(Backend<Its>).
//
// Programming model (docs/programming-model.md): a role function runs once
// per warp. An operation called at warp level acts for every active lane (a
// warp-level arrive counts one arrival per active lane); elect_one(f) runs f
// with one lane active; for_each_lane(f) runs f(lane) with only that lane.
//
// Groups: identity, mbarrier, named and cluster barriers, Tensor Memory,
// the tensor core, TMA, shared-memory tile access and storage. Adding an
// operation means changing this concept and both backends together.
//
// Capability: B::kTensorMemory says whether Tensor Memory, tcgen05 and
// .cta_group::2 exist (sm_100a, the emulator) or not (HopperBackend,
// sm_90a). A backend without them still declares those operations, so that
// kernels stay one source, but calling one fails to compile with a message
// naming the operation and the architecture. Code that needs them can say
// so up front with TensorMemoryBackend.
//
// Capability: B::kClusterLaunchControl says whether cluster launch control
// (clusterlaunchcontrol.try_cancel / query_cancel) exists: sm_100a and the
// emulator, not sm_90a. The same arrangement: declared everywhere, a
// compile error naming the operation where it is missing, and
// ClusterLaunchControlBackend for code that needs it.
#pragma once

#include <concepts>
#include <cstdint>

#include "barrier.hpp"
#include "check.hpp"
#include "clc.hpp"
#include "cluster.hpp"
#include "config.hpp"
#include "tcgen05.hpp"
#include "tma.hpp"

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
concept Backend = requires(SharedMemBarrier& bar, std::uint32_t u32, std::uint64_t u64, std::uint16_t mask,
                           std::uint32_t* u32p, void* ptr, bool cond, SourceLoc loc, TmaCoords coords,
                           const typename B::TmaMap& map, typename B::template Frag<4>& frag, ClcResponse& resp) {
  // Operations that can break a rule take the caller's location last.
  // identity
  { B::warp_idx() } -> std::same_as<std::uint32_t>;  // warp index in the CTA
  { B::lane_idx() } -> std::same_as<std::uint32_t>;  // only with one lane active
  { B::cta_rank() } -> std::same_as<std::uint32_t>;  // rank in the cluster
  { B::cluster_size() } -> std::same_as<std::uint32_t>;
  { B::cluster_shape() } -> std::same_as<ClusterShape>;  // %cluster_nctaid.{x,y,z}; ranks x fastest
  { B::cluster_idx() } -> std::same_as<std::uint32_t>;   // this CTA's cluster in the (1-D) grid
  { B::num_clusters() } -> std::same_as<std::uint32_t>;  // clusters in the grid
  { B::elect_one(detail::NoOp{}) } -> std::same_as<void>;
  { B::for_each_lane(detail::LaneNoOp{}) } -> std::same_as<void>;
  { B::syncwarp(loc) } -> std::same_as<void>;
  // Warp state that core/ owns (pipeline cursors: stage, phase, count) is
  // kept by every lane in its own registers; core/ calls this where it steps
  // such state, which must happen with the whole warp active: stepped inside
  // elect_one or for_each_lane, the other lanes keep the old stage and phase
  // and later wait on a stale one. The emulator reports a partial warp
  // (warp.divergent-state); the CUDA backend compiles it to nothing.
  { B::warp_state_step("what", loc) } -> std::same_as<void>;

  // mbarrier (PTX "mbarrier"); `bar` lives in this CTA's shared memory
  { B::init(bar, u32, BarrierName{}, loc) } -> std::same_as<void>;
  { B::inval(bar, loc) } -> std::same_as<void>;
  { B::fence_init(loc) } -> std::same_as<void>;  // fence.mbarrier_init.release.cluster
  { B::arrive(bar, loc) } -> std::same_as<void>;
  { B::arrive_remote(bar, u32, loc) } -> std::same_as<void>;  // same offset, CTA u32 of the cluster
  { B::arrive_expect_tx(bar, u32, loc) } -> std::same_as<void>;
  // expect_tx then arrive on the barrier at the same offset in CTA u32 of
  // the cluster (a CLC scheduler arms every CTA's response barrier)
  { B::arrive_expect_tx_remote(bar, u32, u32, loc) } -> std::same_as<void>;
  { B::expect_tx(bar, u32, loc) } -> std::same_as<void>;
  { B::complete_tx(bar, u32, loc) } -> std::same_as<void>;
  // try_wait: a potentially blocking test, false when its time limit runs
  // out first; test_wait: the same test, now, never blocking.
  { B::try_wait(bar, u32, loc) } -> std::same_as<bool>;  // parity wait, may fail spuriously
  { B::test_wait(bar, u32, loc) } -> std::same_as<bool>;
  { B::wait(bar, u32, loc) } -> std::same_as<void>;      // parity wait until it succeeds
  // The same three with the absolute number of the phase meant, stated
  // (PhaseNumber, core/barrier.hpp; its parity is the u32): the emulator
  // checks it, the CUDA backend ignores it.
  { B::try_wait(bar, u32, PhaseNumber{}, loc) } -> std::same_as<bool>;
  { B::test_wait(bar, u32, PhaseNumber{}, loc) } -> std::same_as<bool>;
  { B::wait(bar, u32, PhaseNumber{}, loc) } -> std::same_as<void>;

  // named barriers (bar.sync / bar.arrive) and the cluster barrier
  { B::named_sync(u32, u32, loc) } -> std::same_as<void>;
  { B::named_arrive(u32, u32, loc) } -> std::same_as<void>;
  { B::cluster_sync(loc) } -> std::same_as<void>;

  // Tensor Memory (PTX "tcgen05.alloc/dealloc/ld/st/wait/fence"). alloc,
  // dealloc, relinquish, ld, st and the waits are warp-collective (all 32
  // lanes). alloc writes the base address to `u32p` in shared memory.
  { B::template tmem_alloc<1>(u32p, u32, loc) } -> std::same_as<void>;
  { B::template tmem_relinquish<1>(loc) } -> std::same_as<void>;
  { B::template tmem_dealloc<1>(u32, u32, loc) } -> std::same_as<void>;
  // tcgen05.ld: asynchronous; the fragment's registers are valid after
  // tmem_wait_load. Frag<N>: N 32-bit registers per thread; reg(i) / set(i, v)
  // act for the one active lane (inside for_each_lane or elect_one).
  { B::template tmem_load<TmemShape::s32x32b, 4>(u32, loc) } -> std::same_as<typename B::template Frag<4>>;
  { B::template tmem_store<TmemShape::s32x32b, 4>(u32, frag, loc) } -> std::same_as<void>;
  { typename B::template Frag<4>{} };  // kernels also keep their own registers in fragments
  { frag.reg(u32, loc) } -> std::same_as<std::uint32_t>;
  { frag.set(u32, u32, loc) } -> std::same_as<void>;
  { frag.f32(u32, loc) } -> std::same_as<float>;  // reg(i) as the f32 it holds (an accumulator's element)
  { B::tmem_wait_load(loc) } -> std::same_as<void>;
  { B::tmem_wait_store(loc) } -> std::same_as<void>;
  { B::tmem_fence_before(loc) } -> std::same_as<void>;  // tcgen05.fence::before_thread_sync
  { B::tmem_fence_after(loc) } -> std::same_as<void>;   // tcgen05.fence::after_thread_sync

  // tensor core (single-thread issue: inside elect_one). mma(d_tmem, a_desc,
  // b_desc, idesc, accumulate): D = A*B (+D), A and B from shared memory.
  { B::template mma<MmaKind::f16, 1>(u32, u64, u64, u32, cond, loc) } -> std::same_as<void>;
  // tcgen05.commit: one arrive on `bar` once the issuing thread's earlier
  // MMAs have completed; the multicast form arrives on the barrier at the
  // same offset in each CTA of the 16-bit mask.
  { B::template mma_commit<1>(bar, loc) } -> std::same_as<void>;
  { B::template mma_commit_multicast<1>(bar, mask, loc) } -> std::same_as<void>;

  // TMA (single-thread issue): copy the box at `coords` into shared memory at
  // `ptr`, then complete_tx(box bytes) on `bar`; multicast: into the same
  // offset of each CTA of the mask, signalling each one's barrier. With
  // CtaGroup 2 the barrier signalled is the one of the pair's even CTA.
  // The second template argument is the tensor's rank (default 2), which
  // the instruction names and the device cannot read from the map.
  { B::template tma_load<1>(map, ptr, bar, coords, loc) } -> std::same_as<void>;
  { B::template tma_load<2, 3>(map, ptr, bar, coords, loc) } -> std::same_as<void>;
  { B::template tma_load_multicast<1>(map, ptr, bar, coords, mask, loc) } -> std::same_as<void>;
  { B::template tma_load_multicast<2, 5>(map, ptr, bar, coords, mask, loc) } -> std::same_as<void>;
  // TMA stores and bulk async-groups (single-thread issue: inside elect_one).
  // tma_store<Rank>(map, src, coords): cp.async.bulk.tensor.<Rank>d.global.
  // shared::cta.tile.bulk_group: writes the box at `coords` of the map's
  // tensor from shared memory at `src` (elements outside the tensor are not
  // written). It joins the issuing thread's open bulk async-group, which
  // bulk_commit_group() closes (cp.async.bulk.commit_group; with no stores
  // it makes an empty group). bulk_wait_group<N>() (cp.async.bulk.wait_group
  // N) returns once at most the N most recent committed groups are pending
  // (their writes done and visible to this thread); bulk_wait_group_read<N>()
  // (.read) only waits for their reads of shared memory, after which the
  // source may be reused. N is an immediate in PTX: a template argument.
  { B::template tma_store<2>(map, ptr, coords, loc) } -> std::same_as<void>;
  { B::template tma_store<3>(map, ptr, coords, loc) } -> std::same_as<void>;
  { B::bulk_commit_group(loc) } -> std::same_as<void>;
  { B::template bulk_wait_group<0>(loc) } -> std::same_as<void>;
  { B::template bulk_wait_group_read<1>(loc) } -> std::same_as<void>;
  // fence.proxy.async.shared::cta: orders this thread's generic-proxy
  // shared-memory writes before later async-proxy accesses (tensor core, TMA).
  { B::fence_proxy_async(loc) } -> std::same_as<void>;

  // shared-memory tiles: the address the descriptors and the hardware use,
  // and the hooks through which SmemView reports generic-proxy accesses.
  { B::smem_addr(ptr) } -> std::same_as<std::uint32_t>;
  { B::smem_read(ptr, u32, loc) } -> std::same_as<void>;
  { B::smem_write(ptr, u32, loc) } -> std::same_as<void>;

  // storage: this CTA's shared memory, laid out as the kernel's struct
  { B::template shared_storage<detail::ProbeStorage>() } -> std::same_as<detail::ProbeStorage&>;

  // a kernel's own assertion (a data check); the emulator reports it as a
  // violation, the CUDA backend traps. With values (core/check.hpp), the
  // report shows what was compared.
  { B::check(cond, "what", loc) } -> std::same_as<void>;
  { B::check(cond, "what", CheckValues{{"got", u32}, {"want", u64}}, loc) } -> std::same_as<void>;

  // capability: Tensor Memory, tcgen05 and .cta_group::2 (sm_100a)
  { B::kTensorMemory } -> std::convertible_to<bool>;

  // cluster launch control (PTX "clusterlaunchcontrol.try_cancel",
  // "clusterlaunchcontrol.query_cancel"; sm_100 only). try_cancel (single
  // thread: inside elect_one) asks to cancel the launch of a cluster that
  // has not started; on completion it writes the 16-byte response to `resp`
  // and performs complete_tx(16) on `bar`, both in this CTA's shared memory.
  // The multicast form (.multicast::cluster::all) writes the response and
  // performs the complete_tx at the same offsets in every CTA of the
  // cluster. After a wait on `bar` observed that phase, clc_is_canceled
  // reads the response; clc_first_ctaid decodes a successful one only.
  { B::clc_try_cancel(resp, bar, loc) } -> std::same_as<void>;
  { B::clc_try_cancel_multicast(resp, bar, loc) } -> std::same_as<void>;
  { B::clc_is_canceled(resp, loc) } -> std::same_as<bool>;
  { B::clc_first_ctaid(resp, loc) } -> std::same_as<ClcCtaId>;
  { B::kClusterLaunchControl } -> std::convertible_to<bool>;
};

// A backend whose cluster launch control operations exist (sm_100a, the
// emulator).
template <class B>
concept ClusterLaunchControlBackend = Backend<B> && B::kClusterLaunchControl;

// A backend whose Tensor Memory operations exist (sm_100a, the emulator).
template <class B>
concept TensorMemoryBackend = Backend<B> && B::kTensorMemory;

}  // namespace wspipe
