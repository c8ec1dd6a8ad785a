// TMA tensor stores (shared::cta -> global) and bulk async-groups.
//
// PTX sources: "cp.async.bulk.tensor" (the .global.shared::cta.bulk_group
// form), "cp.async.bulk.commit_group", "cp.async.bulk.wait_group", "Proxies"
// (async proxy), "Tensor Access Modes" (out-of-bound elements).
//
// Model. A store is issued by one thread into that thread's open bulk
// async-group (per warp here: Warp::bulk_groups in world.hpp); commit_group
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
#include <bit>
#include <cstdio>
#include <string>

#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/util.hpp"

namespace wspipe::emu::detail {
namespace {


// The warp's open group, made on first use.
BulkGroup& open_group(Warp& w) {
  if (w.bulk_groups.empty()) w.bulk_groups.emplace_back();
  return w.bulk_groups.back();
}

std::uint64_t committed(const Warp& w) { return w.bulk_groups.empty() ? 0 : w.bulk_groups.size() - 1; }

}  // namespace

void World::tma_store(std::uint32_t rank, const TensorMap& map, const void* src, const TmaCoords& coords,
                      const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  // Single-thread issue, as for the load: each lane issues its own store.
  if (lanes(w.active) != 1) {
    std::string msg = "TMA store issued by ";
    msg.append(std::to_string(lanes(w.active)))
        .append(" lanes: each lane issues its own store of the box into its own bulk async-group; issue it inside "
                "elect_one");
    fail(w, "tma.multi-lane", "", std::move(msg), loc);
    return;
  }
  if (rank != map.rank) {
    std::string msg = "TMA store issued as a rank-";
    msg.append(std::to_string(rank))
        .append(" copy (tma_store<Rank>) with a tensor map of rank ").append(std::to_string(map.rank))
        .append(": on the GPU the instruction reads the wrong number of coordinates");
    fail(w, "tma.invalid", "", std::move(msg), loc);
    return;
  }
  const Cta& c = ctas_[w.cta];
  const std::uint32_t src_offset = smem_offset(src);
  if (src_offset == 0xffffffffu) {
    fail(w, "tma.invalid", "", "TMA store: the source is not in this CTA's shared memory", loc);
    return;
  }
  if (const std::string err = model::tma_check(map, src_offset, c.smem_bytes, "source"); !err.empty()) {
    fail(w, "tma.invalid", "", std::string("TMA store: ").append(err), loc);
    return;
  }
  if (model::TmaCoordError e = model::tma_coord_error(map, coords, true); e.rule != nullptr) {
    fail(w, e.rule, "", std::move(e.message), loc);
    return;
  }
  AsyncOp op;
  op.kind = AsyncOp::Kind::tma_store;
  stamp_issue(w, op, loc);
  op.mask = static_cast<std::uint16_t>(1u << c.rank);
  op.map = map;
  op.coords = coords;
  op.dst_offset = src_offset;
  BulkGroup& g = open_group(w);
  ++g.reading;
  ++g.writing;
  op.group = static_cast<std::uint32_t>(w.bulk_groups.size() - 1);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::tma_store_issue,
            .a = static_cast<std::int64_t>(tma_box_bytes(map)), .b = op.group, .file = loc.file_name(),
            .line = loc.line()});
  enqueue(w.cta, false, std::move(op));
}

void World::bulk_commit_group(const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  const BulkGroup& g = open_group(w);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::bulk_commit,
            .a = static_cast<std::int64_t>(w.bulk_groups.size() - 1), .b = g.writing, .file = loc.file_name(),
            .line = loc.line()});
  w.bulk_groups.emplace_back();  // the next open group; the one before is committed
}

void World::bulk_wait_group(std::uint32_t n, bool read, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  // PTX "cp.async.bulk.wait_group": wait "until only N or fewer of the most
  // recent bulk async-groups are pending and all the prior bulk
  // async-groups committed by the executing threads are complete". With
  // fewer than N + 1 groups committed (none at all included) there is
  // nothing to wait for: not an error. Stores not yet committed are in no
  // group and are not waited for.
  const std::uint64_t c = committed(w);
  const std::uint64_t upto = c > n ? c - n : 0;
  const bool done = bulk_done(w, upto, read);
  if (!point(w, done ? Block::none : Block::bulk_wait, -1, read ? 1 : 0, upto, loc)) return;
  // What it observed depends on the TMA engine's progress: a footprint
  // entry, so that reducing strategies do not treat the two as commuting.
  touch(Res::engine, 2 * w.cta);
  if (options_.race_check) {
    // The completions of the groups waited for happen before what follows.
    for (std::uint64_t g = 0; g < upto; ++g) {
      acquire(w.id, w.bulk_groups[g].read_done);
      if (!read) acquire(w.id, w.bulk_groups[g].write_done);
    }
  }
  if (options_.trace)
    record({.step = step_, .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::bulk_wait,
            .a = n, .b = read ? 1 : 0, .file = loc.file_name(), .line = loc.line()});
}

bool World::bulk_done(const Warp& w, std::uint64_t upto, bool read_only) const {
  for (std::uint64_t g = 0; g < upto && g < committed(w); ++g) {
    const BulkGroup& b = w.bulk_groups[g];
    if (b.reading != 0 || (!read_only && b.writing != 0)) return false;
  }
  return true;
}

std::string World::bulk_describe_blocked(const Warp& w) const {
  std::string s = "waits until bulk groups [0, ";
  s.append(std::to_string(w.target))
      .append(") of ").append(std::to_string(committed(w))).append(" committed have ")
      .append(w.parity != 0 ? "read their sources" : "completed");
  for (std::uint64_t g = 0; g < w.target && g < committed(w); ++g) {
    const BulkGroup& b = w.bulk_groups[g];
    if (b.reading == 0 && (w.parity != 0 || b.writing == 0)) continue;
    s.append("; group ")
        .append(std::to_string(g)).append(": ").append(std::to_string(b.reading)).append(" store(s) reading, ")
        .append(std::to_string(b.writing)).append(" writing");
  }
  return s;
}

bool World::engine_tma_store(AsyncOp& op, std::uint32_t e) {
  const auto actor = static_cast<std::int32_t>(num_warps() + e);
  Warp& issuer = warps_[op.issuer];
  const std::uint32_t cta = engines_[e].cta;
  const auto bytes = static_cast<std::uint32_t>(tma_box_bytes(op.map));  // tma_check bounded it by smem
  const std::uint32_t comp = comp_engine(e);
  BulkGroup& g = issuer.bulk_groups[op.group];
  mark(op.issuer);  // a bulk wait of the issuer may be satisfied now
  if (!op.read_done) {
    // The CTA cannot have exited: store_reading_at_exit reports that first.
    if (options_.race_check) {
      const std::uint32_t info = access_info(actor, static_cast<std::int32_t>(op.issuer), "TMA store", op.loc);
      // An async-proxy read: after ordinary stores it needs the writer's
      // fence.proxy.async (smem.missing-proxy-fence); a later write not
      // ordered after wait_group.read races with it (race.smem).
      if (!smem_range_access(cta, op.dst_offset, bytes, false, false, comp, info, op.loc, &issuer)) return false;
    }
    op.staged.resize(bytes);
    model::tma_store_gather(op.map, ctas_[cta].smem, op.dst_offset, op.staged.data());
    op.read_done = true;
    --g.reading;
    if (options_.race_check) {
      if (g.read_done.empty()) g.read_done.assign(clock_size(cta), 0);
      release(comp, g.read_done);
    }
    if (options_.trace)
      record({.step = step_, .begin = op.step, .warp = actor, .kind = EventKind::tma_store_read, .a = bytes,
              .file = op.loc.file_name(), .line = op.loc.line()});
    return true;
  }
  model::tma_store_scatter(op.map, op.coords, op.staged.data());
  --g.writing;
  if (options_.race_check) {
    if (g.write_done.empty()) g.write_done.assign(clock_size(cta), 0);
    release(comp, g.write_done);
  }
  if (options_.trace)
    record({.step = step_, .begin = op.step, .warp = actor, .kind = EventKind::tma_store_done, .a = bytes,
            .file = op.loc.file_name(), .line = op.loc.line()});
  return false;
}

// On hardware a CTA's shared memory is freed when it exits, and a store
// still reading it reads whatever the next CTA there writes. A kernel waits
// with cp.async.bulk.wait_group.read 0 before exiting; the global writes
// may still be in flight then: they are performed before the grid
// completes, which is what the host observes (the run drains them too).
bool World::store_reading_at_exit(Warp& w) {
  for (const AsyncOp& op : engines_[2 * w.cta].queue) {
    if (op.kind != AsyncOp::Kind::tma_store || op.read_done) continue;
    const Warp& issuer = warps_[op.issuer];
    char object[96];
    std::snprintf(object, sizeof object, "shared memory [0x%x, 0x%x) (%s)", op.dst_offset,
                  op.dst_offset + static_cast<std::uint32_t>(tma_box_bytes(op.map)), cta_label(w.cta).c_str());
    std::string msg = "the CTA exited while a TMA store issued by ";
    msg.append(issuer.name)
        .append(" at ").append(where(op.loc)).append(" (step ").append(std::to_string(op.step))
        .append(") still reads its shared memory, which is freed at exit: wait with bulk_wait_group_read<0> ")
        .append("(cp.async.bulk.wait_group.read 0) before the CTA exits");
    fail(w, "tma.store-exit-before-read", object, std::move(msg), op.loc, &issuer);
    return true;
  }
  return false;
}

}  // namespace wspipe::emu::detail
