// The TMA load room: cp.async.bulk.tensor from global to shared memory,
// multicast to the CTAs of a mask, completing transaction bytes on the
// destination's mbarrier when the scheduler picks the CTA's TMA engine.
// Rules tma.*; PTX "cp.async.bulk.tensor". Stores: tma_store.cpp.
#include <string>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

void World::tma_load(int cta_group, std::uint32_t rank, const TensorMap& map, void* dst, SharedMemBarrier& bar, const TmaCoords& coords,
                     std::uint16_t mask, bool multicast, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  if (lanes(w.active) != 1) {
    fail(w, "tma.multi-lane", "",
         "TMA load issued by " + std::to_string(lanes(w.active)) + " lanes: each lane issues its own copy and " +
             "complete_tx; issue it inside elect_one",
         loc);
    return;
  }
  const Cta& c = ctas_[w.cta];
  if (cta_group == 2 && !barriers_->check_cta_pair(w, "TMA load", "tma.no-cta-pair", loc)) return;
  if (rank != map.rank) {
    fail(w, "tma.invalid", "",
         "TMA load issued as a rank-" + std::to_string(rank) + " copy (tma_load<CtaGroup, Rank>) with a tensor map of rank " +
             std::to_string(map.rank) + ": on the GPU the instruction reads the wrong number of coordinates",
         loc);
    return;
  }
  const std::uint32_t dst_offset = smem_offset(dst);
  if (const std::string err = model::tma_check(map, dst_offset, c.smem_bytes); !err.empty()) {
    fail(w, "tma.invalid", "", "TMA load: " + err, loc);
    return;
  }
  if (model::TmaCoordError e = model::tma_coord_error(map, coords, false); e.rule != nullptr) {
    fail(w, e.rule, "", std::move(e.message), loc);
    return;
  }
  if (!MbarrierRoom::in_smem(&bar, c)) {
    mbar_->report_not_shared(w, "the TMA load's mbarrier", loc);
    return;
  }
  if (multicast && !barriers_->check_cta_mask(w, mask, "TMA multicast", loc)) return;
  AsyncOp op = issue_op(w, AsyncOp::Kind::tma, cta_group, bar, multicast ? mask : 0, loc);
  op.map = map;
  op.coords = coords;
  op.dst_offset = dst_offset;
  const std::int64_t id = mbar_->at(w.cta, op.bar_offset);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
            .kind = EventKind::tma_issue, .a = static_cast<std::int64_t>(tma_box_bytes(map)), .b = op.mask,
            .file = loc.file_name(), .line = loc.line()});
  enqueue(w.cta, false, std::move(op));
}

void World::engine_tma(AsyncOp& op, std::uint32_t e) {
  const auto actor = static_cast<std::int32_t>(num_warps() + e);
  const Warp& issuer = warps_[op.issuer];
  const auto bytes = static_cast<std::uint32_t>(tma_box_bytes(op.map));  // tma_check bounded it by smem
  const std::uint32_t first = clusters_[ctas_[engines_[e].cta].cluster].first_cta;
  const std::uint32_t info =
      options_.race_check ? access_info(actor, static_cast<std::int32_t>(op.issuer), "TMA load", op.loc) : 0;
  for (std::uint32_t r = 0; r < launch_.cluster_size; ++r) {
    if (((op.mask >> r) & 1u) == 0) continue;
    const std::uint32_t cta = first + r;
    if (ctas_[cta].exited()) {
      report_target_exited(cta, op, "a TMA load issued by " + issuer.name + " at step " + std::to_string(op.step) +
                                        " delivers into " + cta_label(cta) +
                                        ", which has exited (docs/hardware.md bug 15: exit before the pipeline drained)");
      return;
    }
    if (options_.race_check &&
        !smem_range_access(cta, op.dst_offset, bytes, true, false, comp_engine(e), info, op.loc, &issuer))
      return;
    model::tma_copy(op.map, op.coords, ctas_[cta].smem, op.dst_offset);
    if (options_.trace)
      record({.step = step_, .begin = op.step, .warp = actor, .kind = EventKind::tma_done, .a = bytes, .c = cta,
              .file = op.loc.file_name(), .line = op.loc.line()});
    // complete_tx on the destination's barrier, or on the pair's even CTA's
    // for .cta_group::2 (PTX "cp.async.bulk.tensor").
    const std::uint32_t bar_cta = op.cta_group == 2 ? pair_cta(cta, 0) : cta;
    const std::int64_t id = mbar_->at(bar_cta, op.bar_offset);
    if (id < 0) {
      mbar_->report_uninitialized(bar_cta, op.bar_offset, op, "the TMA load's complete_tx found");
      return;
    }
    if (mbar_->tx_overshoot(static_cast<std::uint32_t>(id), bytes, op)) return;
    if (!mbar_->complete_tx(static_cast<std::uint32_t>(id), bytes, comp_engine(e), actor, op, 0)) return;
  }
}

}  // namespace wspipe::emu::detail
