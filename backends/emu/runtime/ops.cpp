// The narrow door (emu_ops.hpp): each operation of EmuBackend, for the
// calling warp of the World running on this thread. The rooms implement
// them; this file only routes.
#include "backends/emu/emu_ops.hpp"
#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/clc.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/tensor_core.hpp"
#include "backends/emu/runtime/tma_load.hpp"
#include "backends/emu/runtime/tma_store.hpp"

namespace wspipe::emu::detail {

std::uint32_t RunningWarp::frag_lane_checked(std::uint64_t token, std::uint32_t reg, std::uint32_t regs,
                                             const SourceLoc& loc) {
  return static_cast<World*>(this)->frag_lane_report(token, reg, regs, loc);
}

void RunningWarp::st_source_gone(std::uint64_t st) { static_cast<World*>(this)->tmem().st_source_gone(st); }

namespace ops {
namespace {
// The warp's plain accesses since its last operation are checked first
// (World::check_plain): the operation may order them, and may let another
// warp run. No room's code is running here: the access records can be
// collected (World::operation_starts).
World& world() {
  World& w = World::current();
  w.operation_starts();
  return w;
}
}  // namespace

std::uint32_t warp_idx() { return world().warp().widx; }
std::uint32_t lane_idx(const SourceLoc& loc) { return world().lane_idx(loc); }
std::uint32_t cta_rank() {
  World& w = world();
  return w.cta_of(w.warp()).rank;
}
std::uint32_t cluster_idx() {
  World& w = world();
  return w.cta_of(w.warp()).cluster;
}
std::uint32_t cluster_size() { return world().launch().cluster_size; }
std::uint32_t num_clusters() { return world().launch().num_clusters; }
ClusterShape cluster_shape() { return world().cluster_shape(); }
void elect(const SourceLoc& loc) { world().elect(loc); }
void syncwarp(const SourceLoc& loc) { world().syncwarp(loc); }
void warp_state_step(const char* what, const SourceLoc& loc) { world().warp_state_step(what, loc); }
void* shared_storage(std::size_t size, std::size_t align, const SourceLoc& loc) {
  return world().shared_storage(size, align, loc);
}
void check(bool cond, const char* what, const SourceLoc& loc) { world().check(cond, what, loc); }
void check_values(bool cond, const char* what, const CheckValues& values, const SourceLoc& loc) {
  world().check_values(cond, what, values, loc);
}

void mbar_init(SharedMemBarrier& bar, std::uint32_t count, const char* base, int index, const SourceLoc& loc) {
  world().mbar().init(bar, count, base, index, loc);
}
void mbar_inval(SharedMemBarrier& bar, const SourceLoc& loc) { world().mbar().inval(bar, loc); }
void fence_init(const SourceLoc& loc) { world().mbar().fence_init(loc); }
void mbar_arrive(SharedMemBarrier& bar, std::int64_t cta_rank, std::uint32_t tx_bytes, const SourceLoc& loc) {
  world().mbar().arrive(bar, cta_rank, tx_bytes, loc);
}
void mbar_tx(SharedMemBarrier& bar, std::int64_t delta_per_lane, const SourceLoc& loc) {
  world().mbar().tx(bar, delta_per_lane, loc);
}
bool mbar_wait(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, bool is_try,
               const SourceLoc& loc) {
  return world().mbar().wait(bar, parity, phase, is_try, loc);
}
bool mbar_test(SharedMemBarrier& bar, std::uint32_t parity, std::optional<PhaseNumber> phase, const SourceLoc& loc) {
  return world().mbar().test(bar, parity, phase, loc);
}

void named_barrier(std::uint32_t id, std::uint32_t threads, bool sync, const SourceLoc& loc) {
  world().barriers().named(id, threads, sync, loc);
}
void cluster_sync(const SourceLoc& loc) { world().barriers().cluster_sync(loc); }

void tmem_alloc(int cta_group, std::uint32_t* dst, std::uint32_t cols, const SourceLoc& loc) {
  world().tmem().alloc(cta_group, dst, cols, loc);
}
void tmem_relinquish(int cta_group, const SourceLoc& loc) { world().tmem().relinquish(cta_group, loc); }
void tmem_dealloc(int cta_group, std::uint32_t taddr, std::uint32_t cols, const SourceLoc& loc) {
  world().tmem().dealloc(cta_group, taddr, cols, loc);
}
std::uint64_t tmem_ld(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                      std::uint32_t* out, const SourceLoc& loc) {
  return world().tmem().ld(shape, num, half_split, taddr, out, loc);
}
std::uint64_t tmem_st(TmemShape shape, std::uint32_t num, std::uint32_t half_split, std::uint32_t taddr,
                      const std::uint32_t* in, const SourceLoc& loc) {
  return world().tmem().st(shape, num, half_split, taddr, in, loc);
}
void tmem_wait(bool loads, const SourceLoc& loc) { world().tmem().wait(loads, loc); }

void mma(MmaKind kind, int cta_group, std::uint32_t d_tmem, std::uint64_t a_desc, std::uint64_t b_desc,
         std::uint32_t idesc, bool accumulate, const SourceLoc& loc) {
  world().tensor_core().mma(kind, cta_group, d_tmem, a_desc, b_desc, idesc, accumulate, loc);
}
void mma_commit(int cta_group, SharedMemBarrier& bar, std::uint16_t mask, bool multicast, const SourceLoc& loc) {
  world().tensor_core().commit(cta_group, bar, mask, multicast, loc);
}
void tma_load(int cta_group, std::uint32_t rank, const TensorMap& map, void* dst, SharedMemBarrier& bar,
              const TmaCoords& coords, std::uint16_t mask, bool multicast, const SourceLoc& loc) {
  world().tma_load().load(cta_group, rank, map, dst, bar, coords, mask, multicast, loc);
}
void fence_proxy_async(const SourceLoc& loc) { world().fence_proxy_async(loc); }
void tma_store(std::uint32_t rank, const TensorMap& map, const void* src, const TmaCoords& coords,
               const SourceLoc& loc) {
  world().tma_store().store(rank, map, src, coords, loc);
}
void bulk_commit_group(const SourceLoc& loc) { world().tma_store().commit_group(loc); }
void bulk_wait_group(std::uint32_t n, bool read, const SourceLoc& loc) { world().tma_store().wait_group(n, read, loc); }
std::uint32_t smem_offset(const void* p) { return world().smem_offset(p); }
void smem_access(const void* p, std::uint32_t bytes, bool write, const SourceLoc& loc) {
  world().smem_access(p, bytes, write, loc);
}

void clc_try_cancel(ClcResponse& resp, SharedMemBarrier& bar, bool multicast, const SourceLoc& loc) {
  world().clc().try_cancel(resp, bar, multicast, loc);
}
bool clc_is_canceled(const ClcResponse& resp, const SourceLoc& loc) { return world().clc().is_canceled(resp, loc); }
ClcCtaId clc_first_ctaid(const ClcResponse& resp, const SourceLoc& loc) { return world().clc().first_ctaid(resp, loc); }

}  // namespace ops
}  // namespace wspipe::emu::detail
