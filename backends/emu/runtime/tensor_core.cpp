// The tensor core room: tcgen05.mma and tcgen05.commit, issued by one
// thread into the CTA's tensor core queue (engines.cpp) and completed in
// issue order when the scheduler picks the engine; the kernel's cta_group.
// Rules tcgen05.*; PTX "tcgen05.mma", "tcgen05.commit", "tcgen05 memory
// consistency". D's cells are the Tensor Memory room's (tmem.cpp, TmemRoom::mma).
#include "backends/emu/runtime/tensor_core.hpp"

#include <string>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

bool TensorCoreRoom::check_cta_group(Warp& w, int cta_group, const char* op, const SourceLoc& loc) {
  if (cta_group == 2 && !w_.barriers().check_cta_pair(w, op, "tcgen05.no-cta-pair", loc)) return false;
  if (cta_group_ == 0) {
    cta_group_ = cta_group;
    cta_group_loc_ = loc;
    return true;
  }
  if (cta_group_ == cta_group) return true;
  w_.fail(w, "tcgen05.mixed-cta-group", "",
          std::string(op) + " uses .cta_group::" + std::to_string(cta_group) + " but the kernel's earlier tcgen05 " +
              "instruction at " + w_.where(cta_group_loc_) + " used .cta_group::" + std::to_string(cta_group_) +
              " (PTX: all tcgen05 instructions of a kernel use the same; ptxas rejects it)",
          loc);
  return false;
}

void TensorCoreRoom::mma(MmaKind kind, int cta_group, std::uint32_t d_tmem, std::uint64_t a_desc, std::uint64_t b_desc,
                         std::uint32_t idesc, bool accumulate, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  // A single thread issues the whole MMA; every active lane issues one
  // (PTX "tcgen05.mma", issue granularity; docs/hardware.md bug 6).
  if (lanes(w.active) != 1) {
    w_.fail(w, "tcgen05.mma-multi-lane", "",
            "tcgen05.mma issued by " + std::to_string(lanes(w.active)) + " lanes: each lane issues a whole MMA, so " +
                std::to_string(lanes(w.active)) + " MMAs accumulate into D; issue it inside elect_one",
            loc);
    return;
  }
  if (!check_cta_group(w, cta_group, "tcgen05.mma", loc)) return;
  AsyncOp op;
  op.kind = AsyncOp::Kind::mma;
  op.job = {.kind = kind, .cta_group = cta_group, .d_tmem = d_tmem, .a_desc = a_desc, .b_desc = b_desc,
            .idesc = idesc, .accumulate = accumulate};
  if (const std::string err = model::mma_check(op.job, w_.cta(w.cta).smem_bytes); !err.empty()) {
    w_.fail(w, "tcgen05.mma-invalid", "", "tcgen05.mma." + std::string(to_string(kind)) + ": " + err, loc);
    return;
  }
  op.footprint = model::shared_mma_footprint(op.job);
  if (!w_.tmem().check_mma_d(w, *op.footprint, cta_group, loc)) return;
  op.cta_group = cta_group;
  w_.engines().stamp_issue(w, op, loc);
  const auto d = InstrDescriptor::decode(idesc, kind).desc;
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::mma_issue, .a = d.m,
               .b = d.n, .c = accumulate, .file = loc.file_name(), .line = loc.line()});
  w_.engines().enqueue(w.cta, true, std::move(op));
}

void TensorCoreRoom::commit(int cta_group, SharedMemBarrier& bar, std::uint16_t mask, bool multicast,
                            const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  // Each executing thread commits: a warp-level commit is 32 arrivals
  // (docs/hardware.md bug 5).
  if (lanes(w.active) != 1) {
    w_.fail(w, "tcgen05.commit-multi-lane", "",
            "tcgen05.commit issued by " + std::to_string(lanes(w.active)) +
                " lanes: each lane's commit arrives once, " + std::to_string(lanes(w.active)) +
                " arrivals in all; issue it inside elect_one",
            loc);
    return;
  }
  if (!check_cta_group(w, cta_group, "tcgen05.commit", loc)) return;
  const Cta& c = w_.cta(w.cta);
  if (!MbarrierRoom::in_smem(&bar, c)) {
    w_.mbar().report_not_shared(w, "tcgen05.commit's mbarrier", loc);
    return;
  }
  if (multicast && !w_.barriers().check_cta_mask(w, mask, "tcgen05.commit.multicast", loc)) return;
  AsyncOp op = w_.engines().issue_op(w, AsyncOp::Kind::commit, cta_group, bar, multicast ? mask : 0, loc);
  const std::int64_t id = w_.mbar().at(w.cta, op.bar_offset);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
               .kind = EventKind::commit_issue, .a = op.mask, .file = loc.file_name(), .line = loc.line()});
  w_.engines().enqueue(w.cta, true, std::move(op));
}

void TensorCoreRoom::complete_mma(AsyncOp& op, std::uint32_t e) {
  const auto actor = static_cast<std::int32_t>(w_.engines().first_actor() + e);
  const Warp& issuer = w_.warp_at(op.issuer);
  const std::uint32_t cta0 = w_.engines().engine(e).cta;
  auto target = [&](int r) { return op.cta_group == 2 ? w_.pair_cta(cta0, static_cast<std::uint32_t>(r)) : cta0; };
  for (int r = 0; r < op.cta_group; ++r) {
    w_.touch(World::Res::cta_exit, target(r), Touch::read);
    if (w_.cta(target(r)).exited()) {
      w_.engines().report_target_exited(target(r), op,
                                        "a tcgen05.mma issued by " + issuer.name + " at step " +
                                            std::to_string(op.step) + " runs on " + cta_label(target(r)) +
                                            ", which has exited");
      return;
    }
  }
  const std::uint32_t comp = w_.comp_mma(op.issuer);
  const std::uint32_t ctas[2] = {target(0), target(op.cta_group - 1)};
  const std::uint32_t info =
      w_.options().race_check ? w_.access_info(actor, static_cast<std::int32_t>(op.issuer), "tcgen05.mma", op.loc) : 0;
  if (!w_.smem_ranges_access(ctas, op.footprint->smem_reads, false, false, comp, info, op.loc, &issuer)) return;
  if (!w_.tmem().mma_d_access(op, ctas, comp, info, issuer)) return;
  w_.tmem().mma(op, ctas);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .begin = op.step, .warp = actor, .kind = EventKind::mma_done,
               .file = op.loc.file_name(), .line = op.loc.line()});
}

void TensorCoreRoom::complete_commit(AsyncOp& op, std::uint32_t e) {
  const auto actor = static_cast<std::int32_t>(w_.engines().first_actor() + e);
  const Warp& issuer = w_.warp_at(op.issuer);
  const std::uint32_t cta0 = w_.engines().engine(e).cta;
  const std::uint32_t first = w_.cluster(w_.cta(cta0).cluster).first_cta;
  for (std::uint32_t r = 0; r < w_.launch().cluster_size; ++r) {
    if (((op.mask >> r) & 1u) == 0) continue;
    const std::uint32_t cta = first + r;
    w_.touch(World::Res::cta_exit, cta, Touch::read);
    if (w_.cta(cta).exited()) {
      w_.engines().report_target_exited(cta, op,
                                        "a tcgen05.commit issued by " + issuer.name + " at step " +
                                            std::to_string(op.step) + " arrives on " + cta_label(cta) +
                                            ", which has exited");
      return;
    }
    const std::int64_t id = w_.mbar().at(cta, op.bar_offset);
    if (id < 0) {
      w_.mbar().report_uninitialized(cta, op.bar_offset, op, "tcgen05.commit arrives on");
      return;
    }
    // Arrive-on with count 1 once the earlier MMAs completed: they did, the
    // tensor core runs in order.
    if (!w_.mbar().arrive_on(static_cast<std::uint32_t>(id), 1, 0, cta != cta0, w_.comp_mma(op.issuer), actor, op.loc,
                             &issuer))
      return;
  }
}

}  // namespace wspipe::emu::detail
