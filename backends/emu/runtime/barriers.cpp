// Named barriers (bar.sync / bar.arrive) and the cluster barrier
// (barrier.cluster.arrive + wait); the rules named named.* and cluster.*.
#include "backends/emu/runtime/barriers.hpp"

#include <algorithm>

#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

BarrierRoom::BarrierRoom(World& world)
    : Room(world), named_(world.num_ctas()), clusters_(world.num_clusters()), syncs_(world.num_warps(), 0) {}

// ------------------------------------------------------ named and cluster

void BarrierRoom::named(std::uint32_t id, std::uint32_t threads, bool sync, const SourceLoc& loc) {
  Warp& w = w_.warp();
  const LaneOp op{.kind = sync ? LaneOp::Kind::named_sync : LaneOp::Kind::named_arrive, .a = id, .b = threads, .loc = loc};
  if (!w_.lanes_agree(w, op) || !w_.point(w, loc)) return;
  const std::string obj = "named barrier " + std::to_string(id) + " (" + cta_label(w.cta) + ")";
  if (id >= 16) {
    w_.fail(w, "named-barrier.bad-id", obj, "named barrier id " + std::to_string(id) + " outside [0, 15]", loc);
    return;
  }
  const std::uint32_t cta_threads = w_.launch().warps_per_cta * 32;
  if (threads == 0 || threads % 32 != 0 || threads > cta_threads) {
    w_.fail(w, "named-barrier.thread-count", obj,
            "thread count " + std::to_string(threads) + " is not a positive multiple of 32 up to the CTA's " +
                std::to_string(cta_threads),
            loc);
    return;
  }
  // Warp-collective in the programming model (docs/programming-model.md): the whole warp
  // arrives, so a barrier's thread count is always reached exactly.
  if (lanes(w.active) != 32) {
    w_.fail(w, "named-barrier.partial-warp", obj,
            std::string(sync ? "bar.sync" : "bar.arrive") + " issued with " + std::to_string(lanes(w.active)) +
                " of 32 lanes active (inside elect_one or for_each_lane): named barriers are warp-collective here",
            loc);
    return;
  }
  NamedBarrier& nb = named_[w.cta][id];
  // An arrival is counted into the barrier's generation (commutative with
  // the other arrivals); the one that completes it begins the next, which
  // the waiters await.
  const std::uint64_t key = (std::uint64_t{w.cta} << 8) | id;
  // Arriving into generation g > 0 sees g-1 complete, which every arrival
  // counted into g-1 made so, not only the one that completed it (which
  // generation an arrival counts into depends on them all).
  w_.touch(World::Res::named, World::key(key, nb.gen), Touch::read);
  if (nb.gen > 0) w_.touch(World::Res::named_count, World::key(key, nb.gen - 1), Touch::read);
  w_.touch(World::Res::named_count, World::key(key, nb.gen), Touch::count);
  if (nb.arrived == 0) {
    nb.expected = threads;
  } else if (nb.expected != threads) {
    w_.fail(w, "named-barrier.count-mismatch", obj,
            std::string(sync ? "bar.sync" : "bar.arrive") + " with " + std::to_string(threads) +
                " threads while the barrier in progress was started with " + std::to_string(nb.expected),
            loc);
    return;
  }
  nb.arrived += 32;
  const bool race_check = w_.options().race_check, trace = w_.options().trace;
  if (race_check) {
    if (nb.acc.empty()) nb.acc.assign(w_.clock_size(w.cta), 0);
    w_.warp_release(w, nb.acc);
    if (sync) ++nb.syncing;
  }
  if (trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::named_arrive, .a = id,
               .b = threads, .c = nb.arrived, .file = loc.file_name(), .line = loc.line()});
  const std::uint64_t gen = nb.gen;
  if (nb.arrived == nb.expected) {
    nb.arrived = 0;
    ++nb.gen;
    w_.touch(World::Res::named, World::key(key, nb.gen));
    w_.mark_list(w_.named_list(w.cta, id));
    if (race_check) {
      if (nb.syncing > 0) nb.done.push_back({.gen = gen, .clock = std::move(nb.acc), .waiting = nb.syncing});
      nb.syncing = 0;
      nb.acc.swap(nb.spare);
      nb.acc.assign(w_.clock_size(w.cta), 0);
    }
  }
  if (!sync) return;
  if (!w_.point(w, Block::named, static_cast<std::int32_t>(id), 0, gen, loc)) return;
  w_.touch(World::Res::named, World::key(key, gen + 1), Touch::await);
  w_.touch(World::Res::named_count, World::key(key, gen), Touch::await);  // every arrival of its generation
  // bar.sync has acquire semantics over the barrier's participants: those
  // of the instance it arrived in, generation `gen`, though the barrier may
  // have completed again before this warp returns.
  if (race_check) {
    std::vector<NamedBarrier::Completed>& done = named_[w.cta][id].done;
    const auto it = std::find_if(done.begin(), done.end(), [gen](const auto& d) { return d.gen == gen; });
    w_.acquire(w.id, it->clock);
    if (--it->waiting == 0) {
      named_[w.cta][id].spare = std::move(it->clock);
      done.erase(it);
    }
  }
  if (trace)
    w_.record({.step = w_.step(), .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
               .kind = EventKind::named_pass, .a = id, .file = loc.file_name(), .line = loc.line()});
}

void BarrierRoom::touch_count(std::uint32_t k) {
  touch_begun(k, clusters_[k].gen);
  w_.touch(World::Res::cluster_count, World::key(k, clusters_[k].gen), Touch::count);
}

void BarrierRoom::touch_begun(std::uint32_t k, std::uint64_t gen) {
  // Generation g > 0 begun means g-1 complete: every arrival and exit
  // counted into it, not only the last (as an mbarrier's phase: its
  // touch_begun in mbarrier.cpp).
  w_.touch(World::Res::cluster, World::key(k, gen), Touch::read);
  if (gen > 0 && gen <= clusters_[k].gen) w_.touch(World::Res::cluster_count, World::key(k, gen - 1), Touch::read);
}

void BarrierRoom::release_if_complete(std::uint32_t k) {
  ClusterBarrier& c = clusters_[k];
  if (c.arrived > 0 && c.arrived >= w_.cluster(k).live_threads) {
    c.arrived = 0;
    ++c.gen;
    w_.touch(World::Res::cluster, World::key(k, c.gen));  // begins the next generation
    w_.mark_list(w_.cluster_list(k));
    if (w_.options().race_check) {
      c.done.swap(c.acc);
      c.acc.assign(w_.clock_size(w_.cluster(k).first_cta), 0);
    }
  }
}

void BarrierRoom::cluster_sync(const SourceLoc& loc) {
  Warp& w = w_.warp();
  if (!w_.lanes_agree(w, {.kind = LaneOp::Kind::cluster_sync, .loc = loc}) || !w_.point(w, loc)) return;
  const std::uint32_t k = w_.cta(w.cta).cluster;
  ClusterBarrier& c = clusters_[k];
  touch_count(k);
  // barrier.cluster.arrive + wait: every non-exited thread of the cluster.
  c.arrived += lanes(w.active);
  const bool race_check = w_.options().race_check, trace = w_.options().trace;
  if (race_check) {
    if (c.acc.empty()) c.acc.assign(w_.clock_size(w.cta), 0);
    w_.warp_release(w, c.acc);
  }
  const std::uint64_t gen = c.gen;
  if (trace)
    w_.record({.step = w_.step(), .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::cluster_arrive,
               .a = c.arrived, .b = w_.cluster(k).live_threads, .file = loc.file_name(), .line = loc.line()});
  release_if_complete(k);
  if (!w_.point(w, Block::cluster, -1, 0, gen, loc)) return;
  w_.touch(World::Res::cluster, World::key(k, gen + 1), Touch::await);
  w_.touch(World::Res::cluster_count, World::key(k, gen), Touch::await);  // every arrival and exit of it
  ++syncs_[w.id];
  if (race_check) w_.acquire(w.id, clusters_[k].done);
  if (trace)
    w_.record({.step = w_.step(), .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
               .kind = EventKind::cluster_pass, .file = loc.file_name(), .line = loc.line()});
}

// A multicast's ctaMask is a set of %cluster_ctarank values (PTX
// "cp.async.bulk.tensor" and "tcgen05.commit": "bit position in the 16-bit
// ctaMask operand corresponds to the %ctaid of the destination CTA"): a bit
// at or above the cluster's size names no CTA, and the copy or arrive to it
// has no destination. Any subset of the cluster is legal, the issuer's own
// rank included or not.
std::string BarrierRoom::named_state(std::uint32_t cta, std::uint32_t id) const {
  const NamedBarrier& nb = named_[cta][id];
  return std::to_string(nb.arrived) + " of " + std::to_string(nb.expected) + " threads arrived";
}

std::string BarrierRoom::cluster_state(std::uint32_t k) const {
  return std::to_string(clusters_[k].arrived) + " of " + std::to_string(w_.cluster(k).live_threads) +
         " live threads arrived";
}

// The named barriers with an instance in progress or passed by a bar.sync
// still to return (`n<cta>.<id>:<arrived>/<expected>/<syncing>/<passing>`),
// then each cluster's barrier (`c<k>:<arrived>`).
void BarrierRoom::abstract_state(std::string& out) const {
  for (std::uint32_t c = 0; c < named_.size(); ++c) {
    for (std::uint32_t id = 0; id < 16; ++id) {
      const NamedBarrier& nb = named_[c][id];
      if (nb.arrived == 0 && nb.syncing == 0 && nb.done.empty()) continue;
      out.append(" n").append(std::to_string(c)).append(".").append(std::to_string(id)).push_back(':');
      out.append(std::to_string(nb.arrived)).push_back('/');
      out.append(std::to_string(nb.expected)).push_back('/');
      out.append(std::to_string(nb.syncing)).push_back('/');
      out.append(std::to_string(nb.done.size()));
    }
  }
  for (std::uint32_t k = 0; k < clusters_.size(); ++k)
    out.append(" c").append(std::to_string(k)).append(":").append(std::to_string(clusters_[k].arrived));
}

bool BarrierRoom::check_cta_mask(Warp& w, std::uint16_t mask, const char* op, const SourceLoc& loc) {
  const std::uint32_t size = w_.launch().cluster_size;
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
  w_.fail(w, "cluster.bad-rank", "", m, loc);
  return false;
}

// PTX "tcgen05" (CTA pair): the peer CTA of a .cta_group::2 instruction is
// the one whose %cluster_ctarank differs in bit 0, so rank r pairs with
// r ^ 1 whatever the cluster's shape (in a 1 x 2 cluster the pair is a
// column; the hardware runs that, so it is not reported). In a cluster of
// odd size the last rank has no peer: reported at its pair operations.
bool BarrierRoom::check_cta_pair(Warp& w, const char* op, const char* no_pair_rule, const SourceLoc& loc) {
  const std::uint32_t size = w_.launch().cluster_size;
  if (size < 2) {
    w_.fail(w, no_pair_rule, "",
            std::string(op) +
                " with .cta_group::2 in a launch whose clusters have 1 CTA: a CTA pair needs clusters "
                "of at least 2",
            loc);
    return false;
  }
  const std::uint32_t rank = w_.cta(w.cta).rank, peer = rank ^ 1u;
  if (peer < size) return true;
  const ClusterShape& shape = w_.cluster_shape();
  std::string m(op);
  m.append(" with .cta_group::2 in a ")
      .append(std::to_string(shape.x)).append("x").append(std::to_string(shape.y)).append("x")
      .append(std::to_string(shape.z))
      .append(" cluster: the CTA pair is ranks 2k and 2k+1 (PTX: %cluster_ctarank differing in bit 0), and rank ")
      .append(std::to_string(rank)).append(" has no peer (rank ").append(std::to_string(peer))
      .append(" is outside the cluster); give the cluster an even size");
  w_.fail(w, "cluster.no-peer", "", m, loc);
  return false;
}

// A remote operation names CTA rank `rank`, outside the cluster.
void BarrierRoom::report_bad_rank(Warp& w, std::uint32_t rank, const SourceLoc& loc) {
  w_.fail(w, "cluster.bad-rank", "",
          "remote arrive to CTA rank " + std::to_string(rank) + " in a cluster of " +
              std::to_string(w_.launch().cluster_size),
          loc);
}

}  // namespace wspipe::emu::detail
