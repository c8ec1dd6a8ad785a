// The TMA load room: cp.async.bulk.tensor from global to shared memory,
// multicast to the CTAs of a mask, completing transaction bytes on the
// destination's mbarrier when the scheduler picks the CTA's TMA engine.
// Rules tma.*; PTX "cp.async.bulk.tensor". Stores: tma_store.cpp.
#include "backends/emu/runtime/tma_load.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

void TmaLoadRoom::load(int cta_group, std::uint32_t rank, const TensorMap& map, void* dst, SharedMemBarrier& bar,
                       const TmaCoords& coords, std::uint16_t mask, bool multicast, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  if (lanes(w.active) != 1) {
    w_.fail(w, "tma.multi-lane", "",
            "TMA load issued by " + std::to_string(lanes(w.active)) + " lanes: each lane issues its own copy and " +
                "complete_tx; issue it inside elect_one",
            loc);
    return;
  }
  const Cta& c = w_.cta(w.cta);
  if (cta_group == 2 && !w_.barriers().check_cta_pair(w, "TMA load", "tma.no-cta-pair", loc)) return;
  if (rank != map.rank) {
    w_.fail(w, "tma.invalid", "",
            "TMA load issued as a rank-" + std::to_string(rank) +
                " copy (tma_load<CtaGroup, Rank>) with a tensor map of rank " + std::to_string(map.rank) +
                ": on the GPU the instruction reads the wrong number of coordinates",
            loc);
    return;
  }
  const std::uint32_t dst_offset = w_.smem_offset(dst);
  if (const std::string err = model::tma_check(map, dst_offset, c.smem_bytes); !err.empty()) {
    w_.fail(w, "tma.invalid", "", "TMA load: " + err, loc);
    return;
  }
  if (model::TmaCoordError e = model::tma_coord_error(map, coords, false); e.rule != nullptr) {
    w_.fail(w, e.rule, "", std::move(e.message), loc);
    return;
  }
  if (!MbarrierRoom::in_smem(&bar, c)) {
    w_.mbar().report_not_shared(w, "the TMA load's mbarrier", loc);
    return;
  }
  if (multicast && !w_.barriers().check_cta_mask(w, mask, "TMA multicast", loc)) return;
  AsyncOp op = w_.engines().issue_op(w, AsyncOp::Kind::tma, cta_group, bar, multicast ? mask : 0, loc);
  op.map = map;
  op.coords = coords;
  op.dst_offset = dst_offset;
  const std::int64_t id = w_.mbar().at(w.cta, op.bar_offset);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
               .kind = EventKind::tma_issue, .a = static_cast<std::int64_t>(tma_box_bytes(map)), .b = op.mask,
               .file = loc.file_name(), .line = loc.line()});
  w_.engines().enqueue(w.cta, false, std::move(op));
}

void TmaLoadRoom::complete(AsyncOp& op, std::uint32_t e, std::uint32_t end) {
  const auto actor = static_cast<std::int32_t>(w_.engines().first_actor() + e);
  const Warp& issuer = w_.warp_at(op.issuer);
  const auto box = static_cast<std::uint32_t>(tma_box_bytes(op.map));  // tma_check bounded it by smem
  const std::uint32_t from = op.delivered;
  const std::uint32_t bytes = end - from;  // this step's
  const bool whole = from == 0 && end == box;
  op.delivered = end;
  const std::uint32_t first = w_.cluster(w_.cta(w_.engines().engine(e).cta).cluster).first_cta;
  const std::uint32_t info =
      w_.options().race_check ? w_.access_info(actor, static_cast<std::int32_t>(op.issuer), "TMA load", op.loc) : 0;
  for (std::uint32_t r = 0; r < w_.launch().cluster_size; ++r) {
    if (((op.mask >> r) & 1u) == 0) continue;
    const std::uint32_t cta = first + r;
    w_.touch(World::Res::cta_exit, cta, Touch::read);
    if (w_.cta(cta).exited()) {
      w_.engines().report_target_exited(
          cta, op,
          "a TMA load issued by " + issuer.name + " at step " + std::to_string(op.step) + " delivers into " +
              cta_label(cta) + ", which has exited (docs/hardware.md bug 15: exit before the pipeline drained)");
      return;
    }
    if (!w_.smem_range_access(cta, op.dst_offset + from, bytes, true, false, w_.comp_tma(op.issuer), info, op.loc,
                              &issuer))
      return;
    std::byte* const smem = w_.cta(cta).smem;
    if (whole) {
      model::tma_copy(op.map, op.coords, smem, op.dst_offset);
    } else {
      // In pieces: the first reads the box from global memory (into the
      // destination, whose bytes past this piece are put back); each piece
      // writes its lines. A swizzle moves 16-byte chunks within their
      // 128-byte line, so a piece of whole lines lands on the same lines.
      std::byte* const dst = smem + op.dst_offset;
      if (op.staged.empty()) {
        std::vector<std::byte> keep(dst, dst + box);
        model::tma_copy(op.map, op.coords, smem, op.dst_offset);
        op.staged.assign(dst, dst + box);
        std::memcpy(dst, keep.data(), box);
      }
      std::memcpy(dst + from, op.staged.data() + from, bytes);
    }
    if (w_.options().trace)
      w_.record({.step = w_.step(), .begin = op.step, .warp = actor, .kind = EventKind::tma_done, .a = bytes, .c = cta,
                 .file = op.loc.file_name(), .line = op.loc.line()});
    // complete_tx on the destination's barrier, or on the pair's even CTA's
    // for .cta_group::2 (PTX "cp.async.bulk.tensor").
    const std::uint32_t bar_cta = op.cta_group == 2 ? w_.pair_cta(cta, 0) : cta;
    const std::int64_t id = w_.mbar().at(bar_cta, op.bar_offset);
    if (id < 0) {
      w_.mbar().report_uninitialized(bar_cta, op.bar_offset, op, "the TMA load's complete_tx found");
      return;
    }
    if (w_.mbar().tx_overshoot(static_cast<std::uint32_t>(id), bytes, op)) return;
    if (!w_.mbar().complete_tx(static_cast<std::uint32_t>(id), bytes, w_.comp_tma(op.issuer), actor, op, 0)) return;
  }
}

}  // namespace wspipe::emu::detail
