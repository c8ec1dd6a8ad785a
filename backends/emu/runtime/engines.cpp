// The asynchronous engines: each CTA's TMA engine and tensor core. A warp
// issues (tcgen05.mma, tcgen05.commit, cp.async.bulk.tensor); the operation
// waits in its engine's queue until the scheduler picks the engine, which
// then reads its operands, writes its results and signals its barrier.
// Also the shared-memory access hooks of SmemView and fence.proxy.async.
// Rules: HARDWARE.md §3-4; PTX "tcgen05.mma", "tcgen05.commit",
// "cp.async.bulk.tensor", "Proxies".
#include <bit>
#include <cstdio>
#include <cstring>

#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/util.hpp"

namespace wspipe::emu::detail {

std::uint32_t World::smem_offset(const void* p) {
  const Cta& c = ctas_[warp().cta];
  const auto* b = static_cast<const std::byte*>(p);
  if (b < c.smem || b > c.smem + c.smem_bytes) return 0xffffffffu;  // decodes to no valid operand
  return static_cast<std::uint32_t>(b - c.smem);
}

std::int64_t World::barrier_at(std::uint32_t cta, std::uint32_t offset) const {
  const Cta& c = ctas_[cta];
  if (offset + sizeof(SharedMemBarrier) > c.smem_bytes) return -1;
  const auto* bar = reinterpret_cast<const SharedMemBarrier*>(c.smem + offset);
  const std::uint64_t idx = (bar->raw & 0xffffffffull) - 1;
  if ((bar->raw & ~0xffffffffull) == kTag && idx < mbars_.size() && mbars_[idx].addr == bar && mbars_[idx].live)
    return static_cast<std::int64_t>(idx);
  return -1;
}

void World::enqueue(std::uint32_t cta, bool tensor, AsyncOp op) {
  touch(Res::engine, 2 * cta + (tensor ? 1 : 0));
  mark(num_warps() + 2 * cta + (tensor ? 1 : 0));  // the engine can move
  engines_[2 * cta + (tensor ? 1 : 0)].queue.push_back(std::move(op));
}

// Whether an operation still queued will write into CTA `cta` or arrive on
// one of its barriers.
bool World::cta_has_async_in_flight(std::uint32_t cta, std::string* what) const {
  const std::uint32_t rank = ctas_[cta].rank;
  for (const Engine& e : engines_) {
    if (ctas_[e.cta].cluster != ctas_[cta].cluster) continue;
    for (const AsyncOp& op : e.queue) {
      // A TMA store touches its CTA only while it reads shared memory, which
      // store_reading_at_exit reports; its global writes may outlive the CTA.
      if (op.kind == AsyncOp::Kind::tma_store) continue;
      bool hits = e.cta == cta || ((op.mask >> rank) & 1u) != 0;
      if (op.cta_group == 2 && pair_cta(e.cta, 0) == pair_cta(cta, 0)) hits = true;
      if (!hits) continue;
      const char* kind = op.kind == AsyncOp::Kind::tma ? "a TMA load" : op.kind == AsyncOp::Kind::mma
                                                                             ? "a tcgen05.mma"
                                                                             : "a tcgen05.commit";
      *what = std::string(kind) + " issued by " + warps_[op.issuer].name + " at " + where(op.loc) + " (step " +
              std::to_string(op.step) + ")";
      return true;
    }
  }
  return false;
}

// ------------------------------------------------------------ issue

void World::stamp_issue(Warp& w, Issued& op, const SourceLoc& loc) {
  op.issuer = w.id;
  op.step = step_;
  op.loc = loc;
  if (options_.race_check) {
    op.clock = clocks_[w.id];
    tick(w.id);
  }
}

// An operation that signals `bar` (in the issuing CTA's shared memory; the
// same offset in each CTA of `mask`, or in the issuing CTA when 0).
AsyncOp World::issue_op(Warp& w, AsyncOp::Kind kind, int cta_group, SharedMemBarrier& bar, std::uint16_t mask,
                        const SourceLoc& loc) {
  const Cta& c = ctas_[w.cta];
  AsyncOp op;
  op.kind = kind;
  op.cta_group = cta_group;
  stamp_issue(w, op, loc);
  op.mask = mask != 0 ? mask : static_cast<std::uint16_t>(1u << c.rank);
  op.bar_offset = static_cast<std::uint32_t>(reinterpret_cast<std::byte*>(&bar) - c.smem);
  return op;
}

// A multicast's ctaMask is a set of %cluster_ctarank values (PTX
// "cp.async.bulk.tensor" and "tcgen05.commit": "bit position in the 16-bit
// ctaMask operand corresponds to the %ctaid of the destination CTA"): a bit
// at or above the cluster's size names no CTA, and the copy or arrive to it
// has no destination. Any subset of the cluster is legal, the issuer's own
// rank included or not.
bool World::check_cta_mask(Warp& w, std::uint16_t mask, const char* op, const SourceLoc& loc) {
  const std::uint32_t size = launch_.cluster_size;
  if (mask != 0 && (std::uint32_t{mask} >> size) == 0) return true;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%x", static_cast<unsigned>(mask));
  std::string m(op);
  m.append(" with CTA mask ").append(hex).append(" in a cluster of ").append(std::to_string(size));
  if (mask == 0) {
    m.append(": the mask names no CTA (at least one bit)");
  } else {
    m.append(": rank ").append(std::to_string(std::bit_width(std::uint32_t{mask}) - 1))
        .append(" is outside the cluster (every bit must name a CTA of the cluster, ranks 0..")
        .append(std::to_string(size - 1)).append(")");
  }
  fail(w, "cluster.bad-rank", "", m, loc);
  return false;
}

void World::mma(MmaKind kind, int cta_group, std::uint32_t d_tmem, std::uint64_t a_desc, std::uint64_t b_desc,
                std::uint32_t idesc, bool accumulate, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  // A single thread issues the whole MMA; every active lane issues one
  // (PTX "tcgen05.mma", issue granularity; HARDWARE.md §6 bug 6).
  if (lanes(w.active) != 1) {
    fail(w, "tcgen05.mma-multi-lane", "",
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
  if (const std::string err = model::mma_check(op.job, ctas_[w.cta].smem_bytes); !err.empty()) {
    fail(w, "tcgen05.mma-invalid", "", "tcgen05.mma." + std::string(to_string(kind)) + ": " + err, loc);
    return;
  }
  op.footprint = model::shared_mma_footprint(op.job);
  for (const auto& r : op.footprint->tmem) {
    const std::uint32_t cta = cta_group == 2 ? pair_cta(w.cta, static_cast<std::uint32_t>(r.cta)) : w.cta;
    if (tmem_block_covering(ctas_[cta], r.col0, r.cols) == nullptr) {
      fail(w, "tmem.unallocated-access",
           "TMEM columns [" + std::to_string(r.col0) + ", " + std::to_string(r.col0 + r.cols) + ") (" +
               cta_label(cta) + ")",
           "tcgen05.mma writes D into columns outside every live allocation of " + cta_label(cta) +
               tmem_coresident_owner(cta, r.col0, r.cols),
           loc);
      return;
    }
  }
  op.cta_group = cta_group;
  stamp_issue(w, op, loc);
  const auto d = InstrDescriptor::decode(idesc, kind).desc;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::mma_issue, .a = d.m, .b = d.n,
            .c = accumulate, .file = loc.file_name(), .line = loc.line()});
  enqueue(w.cta, true, std::move(op));
}

void World::mma_commit(int cta_group, SharedMemBarrier& bar, std::uint16_t mask, bool multicast,
                       const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  // Each executing thread commits: a warp-level commit is 32 arrivals
  // (HARDWARE.md §6 bug 5).
  if (lanes(w.active) != 1) {
    fail(w, "tcgen05.commit-multi-lane", "",
         "tcgen05.commit issued by " + std::to_string(lanes(w.active)) + " lanes: each lane's commit arrives once, " +
             std::to_string(lanes(w.active)) + " arrivals in all; issue it inside elect_one",
         loc);
    return;
  }
  if (!check_cta_group(w, cta_group, "tcgen05.commit", loc)) return;
  const Cta& c = ctas_[w.cta];
  if (!in_smem(&bar, c)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "tcgen05.commit's mbarrier is not in this CTA's shared memory", loc);
    return;
  }
  if (multicast && !check_cta_mask(w, mask, "tcgen05.commit.multicast", loc)) return;
  AsyncOp op = issue_op(w, AsyncOp::Kind::commit, cta_group, bar, multicast ? mask : 0, loc);
  const std::int64_t id = barrier_at(w.cta, op.bar_offset);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
            .kind = EventKind::commit_issue, .a = op.mask, .file = loc.file_name(), .line = loc.line()});
  enqueue(w.cta, true, std::move(op));
}

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
  if (cta_group == 2 && !check_cta_pair(w, "TMA load", "tma.no-cta-pair", loc)) return;
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
  if (!in_smem(&bar, c)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "the TMA load's mbarrier is not in this CTA's shared memory", loc);
    return;
  }
  if (multicast && !check_cta_mask(w, mask, "TMA multicast", loc)) return;
  AsyncOp op = issue_op(w, AsyncOp::Kind::tma, cta_group, bar, multicast ? mask : 0, loc);
  op.map = map;
  op.coords = coords;
  op.dst_offset = dst_offset;
  const std::int64_t id = barrier_at(w.cta, op.bar_offset);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
            .kind = EventKind::tma_issue, .a = static_cast<std::int64_t>(tma_box_bytes(map)), .b = op.mask,
            .file = loc.file_name(), .line = loc.line()});
  enqueue(w.cta, false, std::move(op));
}

void World::fence_proxy_async(const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (killing_ || stopping_) return;
  if (options_.race_check) {
    w.proxy_fences.push_back(now(w.id));
    tick(w.id);  // later stores are not covered by this fence
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::proxy_fence,
            .file = loc.file_name(), .line = loc.line()});
}

void World::smem_access(const void* p, std::uint32_t bytes, bool write, const SourceLoc& loc) {
  if (in_lane_) return;
  if (!options_.race_check || killing_ || stopping_) return;
  Warp& w = warp();
  const Cta& c = ctas_[w.cta];
  const auto* b = static_cast<const std::byte*>(p);
  if (b < c.smem || b + bytes > c.smem + c.smem_bytes) {
    fail(w, "smem.not-shared", "", "a shared-memory view accesses bytes outside this CTA's shared memory", loc);
    return;
  }
  const std::uint32_t info = access_info(static_cast<std::int32_t>(w.id), static_cast<std::int32_t>(w.id),
                                         write ? "ordinary store" : "ordinary load", loc);
  smem_range_access(w.cta, static_cast<std::uint32_t>(b - c.smem), bytes, write, true, w.id, info, loc, nullptr);
}

// ------------------------------------------------------------ completion

bool World::engine_step(std::uint32_t e) {
  touch(Res::engine, e);
  Engine& eng = engines_[e];
  AsyncOp op = std::move(eng.queue.front());
  eng.queue.pop_front();
  const std::uint32_t comp = comp_engine(e);
  if (options_.race_check) join(clocks_[comp], op.clock);
  switch (op.kind) {
    case AsyncOp::Kind::tma: engine_tma(op, e); break;
    case AsyncOp::Kind::mma: engine_mma(op, e); break;
    case AsyncOp::Kind::commit: engine_commit(op, e); break;
    case AsyncOp::Kind::tma_store:
      // Its write step comes next, still ahead of the later operations.
      if (engine_tma_store(op, e)) eng.queue.push_front(std::move(op));
      break;
  }
  if (options_.race_check) tick(comp);  // the next operation is a new access epoch
  return !stopping_;
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
      fail(*current_, "async.target-exited", cta_label(cta),
           "a TMA load issued by " + issuer.name + " at step " + std::to_string(op.step) + " delivers into " +
               cta_label(cta) + ", which has exited (HARDWARE.md §6 bug 15: exit before the pipeline drained)",
           op.loc, &issuer);
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
    const std::int64_t id = barrier_at(bar_cta, op.bar_offset);
    if (id < 0) {
      fail(*current_, "mbarrier.uninitialized", "mbarrier at smem+" + std::to_string(op.bar_offset) + " (" +
                                                    cta_label(bar_cta) + ")",
           "the TMA load's complete_tx found no initialised mbarrier at this offset in " + cta_label(bar_cta), op.loc,
           &issuer);
      return;
    }
    Mbar& m = mbars_[static_cast<std::size_t>(id)];
    // Silicon delivers a copy's bytes in pieces (16 bytes at a time, as far
    // as an H100 shows: docs/silicon.md). More bytes than the phase still
    // expects, with every arrival in, complete the phase partway through
    // the copy, or not, depending on how the pieces fall, and the rest count
    // against the next phase: nondeterministic on hardware, a bug here.
    if (m.pending == 0 && m.tx > 0 && static_cast<std::int64_t>(bytes) > m.tx) {
      fail(*current_, "mbarrier.tx-overshoot", object_label(static_cast<std::uint32_t>(id)),
           "a TMA load delivers " + std::to_string(bytes) + " bytes to a barrier that expects only " +
               std::to_string(m.tx) + " more in phase " + std::to_string(m.phase) +
               " with no arrivals pending: on silicon the bytes land in pieces, the phase may complete partway "
               "through the copy, and the rest count against the next phase (expect_tx too small?)",
           op.loc, &issuer);
      return;
    }
    m.tx -= bytes;
    if (!check_tx_range(static_cast<std::uint32_t>(id), *current_, op.loc)) return;
    if (options_.race_check) {
      if (m.acc.empty()) m.acc.assign(clock_size(m.cta), 0);
      release(comp_engine(e), m.acc);
    }
    if (options_.trace)
      record({.step = step_, .warp = actor, .object = static_cast<std::int32_t>(id), .kind = EventKind::complete_tx,
              .a = bytes, .b = m.pending, .c = m.tx, .file = op.loc.file_name(), .line = op.loc.line()});
    maybe_complete(static_cast<std::uint32_t>(id), actor, op.loc);
    if (stopping_) return;
  }
}

void World::engine_mma(AsyncOp& op, std::uint32_t e) {
  const auto actor = static_cast<std::int32_t>(num_warps() + e);
  const Warp& issuer = warps_[op.issuer];
  const std::uint32_t cta0 = engines_[e].cta;
  auto target = [&](int r) { return op.cta_group == 2 ? pair_cta(cta0, static_cast<std::uint32_t>(r)) : cta0; };
  for (int r = 0; r < op.cta_group; ++r) {
    if (ctas_[target(r)].exited()) {
      fail(*current_, "async.target-exited", cta_label(target(r)),
           "a tcgen05.mma issued by " + issuer.name + " at step " + std::to_string(op.step) + " runs on " +
               cta_label(target(r)) + ", which has exited",
           op.loc, &issuer);
      return;
    }
  }
  const std::uint32_t comp = comp_engine(e);
  const std::uint32_t ctas[2] = {target(0), target(op.cta_group - 1)};
  if (options_.race_check) {
    const Clock& clock = clocks_[comp];
    const std::uint32_t info = access_info(actor, static_cast<std::int32_t>(op.issuer), "tcgen05.mma", op.loc);
    if (!smem_ranges_access(ctas, op.footprint->smem_reads, false, false, comp, info, op.loc, &issuer)) return;
    // D: a write per cell (it subsumes the read of an accumulating MMA).
    for (const auto& rect : op.footprint->tmem) {
      Cta& c = ctas_[target(rect.cta)];
      tmem_ensure(c);
      auto visit = [&, a = access_now(comp, info)](Shadow& s, std::uint32_t idx) {
        const Access* other = shadow_write(s, clock, a);
        if (other == nullptr) return true;
        report_race(s, other, true, info,
                    "TMEM lane " + std::to_string(tmem_shadow_lane(idx)) + ", column " +
                        std::to_string(tmem_shadow_col(idx)) + " (" + cta_label(target(rect.cta)) + ")",
                    op.loc, &issuer);
        return false;
      };
      if (!for_each_tmem_shadow_range(rect.lane0, rect.lanes, rect.col0, rect.cols, [&](std::uint32_t first,
                                                                                        std::uint32_t last) {
            return c.tmem_shadow.access_range(first, last, visit);
          }))
        return;
    }
  }
  tmem_mma(op, ctas);
  if (options_.trace)
    record({.step = step_, .begin = op.step, .warp = actor, .kind = EventKind::mma_done, .file = op.loc.file_name(),
            .line = op.loc.line()});
}

void World::engine_commit(AsyncOp& op, std::uint32_t e) {
  const auto actor = static_cast<std::int32_t>(num_warps() + e);
  const Warp& issuer = warps_[op.issuer];
  const std::uint32_t cta0 = engines_[e].cta;
  const std::uint32_t first = clusters_[ctas_[cta0].cluster].first_cta;
  for (std::uint32_t r = 0; r < launch_.cluster_size; ++r) {
    if (((op.mask >> r) & 1u) == 0) continue;
    const std::uint32_t cta = first + r;
    if (ctas_[cta].exited()) {
      fail(*current_, "async.target-exited", cta_label(cta),
           "a tcgen05.commit issued by " + issuer.name + " at step " + std::to_string(op.step) + " arrives on " +
               cta_label(cta) + ", which has exited",
           op.loc, &issuer);
      return;
    }
    const std::int64_t id = barrier_at(cta, op.bar_offset);
    if (id < 0) {
      fail(*current_, "mbarrier.uninitialized",
           "mbarrier at smem+" + std::to_string(op.bar_offset) + " (" + cta_label(cta) + ")",
           "tcgen05.commit arrives on no initialised mbarrier at this offset in " + cta_label(cta), op.loc, &issuer);
      return;
    }
    // Arrive-on with count 1 once the earlier MMAs completed: they did, the
    // tensor core runs in order.
    if (!arrive_on(static_cast<std::uint32_t>(id), 1, 0, cta != cta0, comp_engine(e), actor, op.loc, &issuer))
      return;
  }
}

}  // namespace wspipe::emu::detail
