// Named barriers (bar.sync / bar.arrive) and the cluster barrier
// (barrier.cluster.arrive + wait); the rules named named.* and cluster.*.
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/util.hpp"

namespace wspipe::emu::detail {

// ------------------------------------------------------ named and cluster

void World::named_barrier(std::uint32_t id, std::uint32_t threads, bool sync, const SourceLoc& loc) {
  Warp& w = warp();
  const LaneOp op{.kind = sync ? LaneOp::Kind::named_sync : LaneOp::Kind::named_arrive, .a = id, .b = threads, .loc = loc};
  if (!lanes_agree(w, op) || !point(w, loc)) return;
  const std::string obj = "named barrier " + std::to_string(id) + " (" + cta_label(w.cta) + ")";
  if (id >= 16) {
    fail(w, "named-barrier.bad-id", obj, "named barrier id " + std::to_string(id) + " outside [0, 15]", loc);
    return;
  }
  const std::uint32_t cta_threads = launch_.warps_per_cta * 32;
  if (threads == 0 || threads % 32 != 0 || threads > cta_threads) {
    fail(w, "named-barrier.thread-count", obj,
         "thread count " + std::to_string(threads) + " is not a positive multiple of 32 up to the CTA's " +
             std::to_string(cta_threads),
         loc);
    return;
  }
  // Warp-collective in the programming model (DESIGN.md): the whole warp
  // arrives, so a barrier's thread count is always reached exactly.
  if (lanes(w.active) != 32) {
    fail(w, "named-barrier.partial-warp", obj,
         std::string(sync ? "bar.sync" : "bar.arrive") + " issued with " + std::to_string(lanes(w.active)) +
             " of 32 lanes active (inside elect_one or for_each_lane): named barriers are warp-collective here",
         loc);
    return;
  }
  touch(Res::named, (std::uint64_t{w.cta} << 8) | id);
  NamedBarrier& nb = ctas_[w.cta].named[id];
  if (nb.arrived == 0) {
    nb.expected = threads;
  } else if (nb.expected != threads) {
    fail(w, "named-barrier.count-mismatch", obj,
         std::string(sync ? "bar.sync" : "bar.arrive") + " with " + std::to_string(threads) +
             " threads while the barrier in progress was started with " + std::to_string(nb.expected),
         loc);
    return;
  }
  nb.arrived += 32;
  if (options_.race_check) {
    if (nb.acc.empty()) nb.acc.assign(clock_size(w.cta), 0);
    release(w.id, nb.acc);
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::named_arrive,
            .a = id, .b = threads, .c = nb.arrived, .file = loc.file_name(), .line = loc.line()});
  const std::uint64_t gen = nb.gen;
  if (nb.arrived == nb.expected) {
    nb.arrived = 0;
    ++nb.gen;
    mark_list(named_list(w.cta, id));
    if (options_.race_check) {
      nb.done.swap(nb.acc);
      nb.acc.assign(clock_size(w.cta), 0);
    }
  }
  if (!sync) return;
  if (!point(w, Block::named, static_cast<std::int32_t>(id), 0, gen, loc)) return;
  touch(Res::named, (std::uint64_t{w.cta} << 8) | id);
  // bar.sync has acquire semantics over the barrier's participants. (If the
  // barrier has completed again meanwhile, this acquires the later instance:
  // more than it should, which can only hide a race.)
  if (options_.race_check) acquire(w.id, ctas_[w.cta].named[id].done);
  if (options_.trace)
    record({.step = step_, .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
            .kind = EventKind::named_pass, .a = id, .file = loc.file_name(), .line = loc.line()});
}

void World::release_cluster_if_complete(Cluster& c) {
  if (c.arrived > 0 && c.arrived >= c.live_threads) {
    c.arrived = 0;
    ++c.gen;
    mark_list(cluster_list(static_cast<std::uint32_t>(&c - clusters_.data())));
    if (options_.race_check) {
      c.done.swap(c.acc);
      c.acc.assign(cluster_comps_[static_cast<std::size_t>(&c - clusters_.data())], 0);
    }
  }
}

void World::cluster_sync(const SourceLoc& loc) {
  Warp& w = warp();
  if (!lanes_agree(w, {.kind = LaneOp::Kind::cluster_sync, .loc = loc}) || !point(w, loc)) return;
  Cluster& c = clusters_[ctas_[w.cta].cluster];
  touch(Res::cluster, ctas_[w.cta].cluster);
  // barrier.cluster.arrive + wait: every non-exited thread of the cluster.
  c.arrived += lanes(w.active);
  if (options_.race_check) {
    if (c.acc.empty()) c.acc.assign(clock_size(w.cta), 0);
    release(w.id, c.acc);
  }
  const std::uint64_t gen = c.gen;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::cluster_arrive,
            .a = c.arrived, .b = c.live_threads, .file = loc.file_name(), .line = loc.line()});
  release_cluster_if_complete(c);
  if (!point(w, Block::cluster, -1, 0, gen, loc)) return;
  touch(Res::cluster, ctas_[w.cta].cluster);
  ++w.cluster_syncs;
  if (options_.race_check) acquire(w.id, clusters_[ctas_[w.cta].cluster].done);
  if (options_.trace)
    record({.step = step_, .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
            .kind = EventKind::cluster_pass, .file = loc.file_name(), .line = loc.line()});
}

}  // namespace wspipe::emu::detail
