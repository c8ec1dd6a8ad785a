// TMA tensor stores (shared::cta -> global) and bulk async-groups.
//
// PTX sources: "cp.async.bulk.tensor" (the .global.shared::cta.bulk_group
// form), "cp.async.bulk.commit_group", "cp.async.bulk.wait_group", "Proxies"
// (async proxy), "Tensor Access Modes" (out-of-bound elements).
//
// Model. A store is issued by one thread into that thread's open bulk
// async-group (per warp here: TmaStoreRoom::groups_ in tma_store.hpp); commit_group
// closes the open group, an empty one when no store was issued since
// (PTX: "If there are no uncommitted cp.async.bulk operations then
// cp.async.bulk.commit_group results in an empty bulk async-group").
// The CTA's TMA engine performs the store in two steps, each a scheduling
// choice like every engine step:
//  1. read: the box is read from shared memory (an async-proxy read, through
//     the race checker's shadows, so that it needs fence.proxy.async after
//     ordinary stores) into the operation's staging copy;
//  2. write: the staged box is written to the global tensor.
// PTX "cp.async.bulk.wait_group" lists what a bulk operation consists of:
// reading from the source, writing the destination, making the writes
// visible to the executing thread; "the .read modifier indicates that the
// waiting has to be done until all the bulk async operations in the
// specified bulk async-groups have completed reading from their source
// locations". The reads and the writes complete separately, so a kernel may
// reuse its tile after wait_group.read while the writes are in flight: the
// staging copy is what makes that correct here, as the TMA unit's own buffers
// do on hardware. The wait acquires the engine's release of each step: reuse
// after the wait is ordered after the read; reuse before it is a race.
#include "backends/emu/runtime/tma_store.hpp"

#include <bit>
#include <cstdio>
#include <string>

#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

TmaStoreRoom::TmaStoreRoom(World& world) : Room(world), groups_(world.num_warps()) {}

// The warp's open group, made on first use.
BulkGroup& TmaStoreRoom::open_group(std::uint32_t warp) {
  std::vector<BulkGroup>& groups = groups_[warp];
  if (groups.empty()) groups.emplace_back();
  return groups.back();
}

std::uint64_t TmaStoreRoom::committed(std::uint32_t warp) const {
  return groups_[warp].empty() ? 0 : groups_[warp].size() - 1;
}

void TmaStoreRoom::store(std::uint32_t rank, const TensorMap& map, const void* src, const TmaCoords& coords,
                         const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  // Single-thread issue, as for the load: each lane issues its own store.
  if (lanes(w.active) != 1) {
    std::string msg = "TMA store issued by ";
    msg.append(std::to_string(lanes(w.active)))
        .append(" lanes: each lane issues its own store of the box into its own bulk async-group; issue it inside "
                "elect_one");
    w_.fail(w, "tma.multi-lane", "", std::move(msg), loc);
    return;
  }
  if (rank != map.rank) {
    std::string msg = "TMA store issued as a rank-";
    msg.append(std::to_string(rank))
        .append(" copy (tma_store<Rank>) with a tensor map of rank ").append(std::to_string(map.rank))
        .append(": on the GPU the instruction reads the wrong number of coordinates");
    w_.fail(w, "tma.invalid", "", std::move(msg), loc);
    return;
  }
  const Cta& c = w_.cta(w.cta);
  const std::uint32_t src_offset = w_.smem_offset(src);
  if (src_offset == 0xffffffffu) {
    w_.fail(w, "tma.invalid", "", "TMA store: the source is not in this CTA's shared memory", loc);
    return;
  }
  if (const std::string err = model::tma_check(map, src_offset, c.smem_bytes, "source"); !err.empty()) {
    w_.fail(w, "tma.invalid", "", std::string("TMA store: ").append(err), loc);
    return;
  }
  if (model::TmaCoordError e = model::tma_coord_error(map, coords, true); e.rule != nullptr) {
    w_.fail(w, e.rule, "", std::move(e.message), loc);
    return;
  }
  AsyncOp op;
  op.kind = AsyncOp::Kind::tma_store;
  w_.engines().stamp_issue(w, op, loc);
  op.mask = static_cast<std::uint16_t>(1u << c.rank);
  op.map = map;
  op.coords = coords;
  op.dst_offset = src_offset;
  BulkGroup& g = open_group(w.id);
  ++g.reading;
  ++g.writing;
  op.group = static_cast<std::uint32_t>(groups_[w.id].size() - 1);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::tma_store_issue,
               .a = static_cast<std::int64_t>(tma_box_bytes(map)), .b = op.group, .file = loc.file_name(),
               .line = loc.line()});
  w_.engines().enqueue(w.cta, false, std::move(op));
}

void TmaStoreRoom::commit_group(const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  const BulkGroup& g = open_group(w.id);
  if (w_.options().trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::bulk_commit,
               .a = static_cast<std::int64_t>(groups_[w.id].size() - 1), .b = g.writing, .file = loc.file_name(),
               .line = loc.line()});
  groups_[w.id].emplace_back();  // the next open group; the one before is committed
}

void TmaStoreRoom::wait_group(std::uint32_t n, bool read, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  // PTX "cp.async.bulk.wait_group": wait "until only N or fewer of the most
  // recent bulk async-groups are pending and all the prior bulk
  // async-groups committed by the executing threads are complete". With
  // fewer than N + 1 groups committed (none at all included) there is
  // nothing to wait for: not an error. Stores not yet committed are in no
  // group and are not waited for.
  const std::uint64_t c = committed(w.id);
  const std::uint64_t upto = c > n ? c - n : 0;
  const bool already = done(w, upto, read);
  if (!w_.point(w, already ? Block::none : Block::bulk_wait, -1, read ? 1 : 0, upto, loc)) return;
  // It passes after the completions of the groups it waits for, which
  // write the warp's store progress: it awaits them (it could not pass
  // before them).
  for (std::uint64_t g = 0; g < upto; ++g) w_.touch(World::Res::store_progress, World::key(w.id, g), Touch::await);
  if (w_.options().race_check) {
    // The completions of the groups waited for happen before what follows.
    for (std::uint64_t g = 0; g < upto; ++g) {
      w_.acquire(w.id, groups_[w.id][g].read_done);
      if (!read) w_.acquire(w.id, groups_[w.id][g].write_done);
    }
  }
  if (w_.options().trace)
    w_.record({.step = w_.step(), .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
               .kind = EventKind::bulk_wait, .a = n, .b = read ? 1 : 0, .file = loc.file_name(), .line = loc.line()});
}

bool TmaStoreRoom::done(const Warp& w, std::uint64_t upto, bool read_only) const {
  for (std::uint64_t g = 0; g < upto && g < committed(w.id); ++g) {
    const BulkGroup& b = groups_[w.id][g];
    if (b.reading != 0 || (!read_only && b.writing != 0)) return false;
  }
  return true;
}

std::string TmaStoreRoom::blocked_state(const Warp& w) const {
  std::string s = "waits until bulk groups [0, ";
  s.append(std::to_string(w.target))
      .append(") of ").append(std::to_string(committed(w.id))).append(" committed have ")
      .append(w.parity != 0 ? "read their sources" : "completed");
  for (std::uint64_t g = 0; g < w.target && g < committed(w.id); ++g) {
    const BulkGroup& b = groups_[w.id][g];
    if (b.reading == 0 && (w.parity != 0 || b.writing == 0)) continue;
    s.append("; group ")
        .append(std::to_string(g)).append(": ").append(std::to_string(b.reading)).append(" store(s) reading, ")
        .append(std::to_string(b.writing)).append(" writing");
  }
  return s;
}

bool TmaStoreRoom::complete(AsyncOp& op, std::uint32_t e) {
  w_.touch(World::Res::store_progress, World::key(op.issuer, op.group));
  const auto actor = static_cast<std::int32_t>(w_.engines().first_actor() + e);
  Warp& issuer = w_.warp_at(op.issuer);
  const std::uint32_t cta = w_.engines().engine(e).cta;
  const auto bytes = static_cast<std::uint32_t>(tma_box_bytes(op.map));  // tma_check bounded it by smem
  const std::uint32_t comp = w_.comp_tma(op.issuer);
  BulkGroup& g = groups_[op.issuer][op.group];
  w_.mark(op.issuer);  // a bulk wait of the issuer may be satisfied now
  // A step done: the group's completion of it (what wait_group acquires)
  // released, and traced.
  auto step_done = [&](Clock& done, EventKind kind) {
    if (w_.options().race_check) {
      if (done.empty()) done.assign(w_.clock_size(cta), 0);
      w_.release(comp, done);
    }
    if (w_.options().trace)
      w_.record({.step = w_.step(), .begin = op.step, .warp = actor, .kind = kind, .a = bytes,
                 .file = op.loc.file_name(), .line = op.loc.line()});
  };
  if (!op.read_done) {
    // The CTA cannot have exited: reading_at_exit reports that first.
    // An async-proxy read: after ordinary stores it needs the writer's
    // fence.proxy.async (smem.missing-proxy-fence); a later write not
    // ordered after wait_group.read races with it (race.smem).
    const std::uint32_t info =
        w_.options().race_check ? w_.access_info(actor, static_cast<std::int32_t>(op.issuer), "TMA store", op.loc) : 0;
    if (!w_.smem_range_access(cta, op.dst_offset, bytes, false, false, comp, info, op.loc, &issuer)) return false;
    op.staged.resize(bytes);
    model::tma_store_gather(op.map, w_.cta(cta).smem, op.dst_offset, op.staged.data());
    op.read_done = true;
    --g.reading;
    step_done(g.read_done, EventKind::tma_store_read);
    return true;
  }
  model::tma_store_scatter(op.map, op.coords, op.staged.data());
  --g.writing;
  step_done(g.write_done, EventKind::tma_store_done);
  return false;
}

// On hardware a CTA's shared memory is freed when it exits, and a store
// still reading it reads whatever the next CTA there writes. A kernel waits
// with cp.async.bulk.wait_group.read 0 before exiting; the global writes
// may still be in flight then: they are performed before the grid
// completes, which is what the host observes (the run drains them too).
bool TmaStoreRoom::reading_at_exit(Warp& w) {
  // What it reads, the TMA engine's queue, the exit reads as the engine's
  // load (EngineRoom::check_exit).
  for (const AsyncOp& op : w_.engines().engine(2 * w.cta).queue) {
    if (op.kind != AsyncOp::Kind::tma_store || op.read_done) continue;
    const Warp& issuer = w_.warp_at(op.issuer);
    char object[96];
    std::snprintf(object, sizeof object, "shared memory [0x%x, 0x%x) (%s)", op.dst_offset,
                  op.dst_offset + static_cast<std::uint32_t>(tma_box_bytes(op.map)), cta_label(w.cta).c_str());
    std::string msg = "the CTA exited while a TMA store issued by ";
    msg.append(issuer.name)
        .append(" at ").append(w_.where(op.loc)).append(" (step ").append(std::to_string(op.step))
        .append(") still reads its shared memory, which is freed at exit: wait with bulk_wait_group_read<0> ")
        .append("(cp.async.bulk.wait_group.read 0) before the CTA exits");
    w_.fail(w, "tma.store-exit-before-read", object, std::move(msg), op.loc, &issuer);
    return true;
  }
  return false;
}

}  // namespace wspipe::emu::detail
