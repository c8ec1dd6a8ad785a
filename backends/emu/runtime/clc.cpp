// Cluster launch control (CLC, sm_100): clusterlaunchcontrol.try_cancel and
// query_cancel, and the launch of the grid's clusters that it races with.
//
// The model (docs/emulator-models.md "Cluster launch control"):
//  - With LaunchConfig::max_active_clusters = n > 0, clusters 0..n-1 start;
//    the others are unlaunched, in grid order. The launcher (an actor)
//    launches the lowest unlaunched cluster whenever fewer than n clusters
//    are running.
//  - A try_cancel waits in its cluster's CLC unit. Two actors complete the
//    oldest one: the granting one (while an unlaunched cluster remains)
//    cancels the lowest unlaunched cluster, whose warps then never run; the
//    refusing one completes it failed. The PTX ISA promises no success
//    ("requests atomically cancelling the launch of a cluster that has not
//    started running yet"), so a failure is allowed even while clusters
//    remain, and kernels that assume more are caught.
//  - With max_active_clusters = 0 every cluster runs from the start and a
//    try_cancel completes at once, failed: there is nothing to cancel.
// The completion writes the response with an async-proxy write (the CLC
// unit's race-checker component carries the issuer's clock) and performs
// complete_tx(16) on the barrier, which releases it: a read of the response
// not ordered after a wait on that phase is a race.
#include <bit>
#include <cstring>

#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/util.hpp"

namespace wspipe::emu::detail {
namespace {


// The emulator's encoding of the opaque response: word 0 holds a tag and
// the success bit, words 1-3 the first CTA id of the canceled cluster (all
// ones in a failed response). Bytes without the tag were not written by a
// try_cancel.
constexpr std::uint32_t kClcTag = 0x434c4300u;  // "CLC\0"
constexpr std::uint32_t kClcResponseBytes = sizeof(ClcResponse);

std::string offset_label(std::uint32_t offset, std::uint32_t cta) {
  std::string s = "CLC response at smem+";
  s.append(std::to_string(offset)).append(" (").append(cta_label(cta)).append(")");
  return s;
}

}  // namespace

// ------------------------------------------------------------ launch state

void World::clc_setup() {
  const auto clusters = static_cast<std::uint32_t>(clusters_.size());
  cluster_launch_.assign(clusters, Launch::running);
  clc_queue_.resize(clusters);
  clc_failed_seen_.assign(ctas_.size(), 0);
  next_unlaunched_ = clusters;
  clusters_running_ = clusters;
  if (!clc_modeled_) return;
  next_unlaunched_ = clusters_running_ = launch_.max_active_clusters;
  for (std::uint32_t k = next_unlaunched_; k < clusters; ++k) cluster_launch_[k] = Launch::unlaunched;
  // The warps of unlaunched clusters cannot start: out of the enabled set.
  enabled_.clear();
  for (const Warp& w : warps_) {
    if (cluster_launched(ctas_[w.cta].cluster)) {
      enabled_.push_back(w.id);
    } else {
      moves_[w.id] = static_cast<std::uint8_t>(Move::no);
    }
  }
  spin_.assign(enabled_.size(), 0);
}

World::Move World::clc_move(std::uint32_t actor) const {
  const bool unlaunched_left = next_unlaunched_ < clusters_.size();
  if (actor == launcher_actor())
    return unlaunched_left && clusters_running_ < launch_.max_active_clusters ? Move::progress : Move::no;
  const std::uint32_t k = (actor - clc_base()) / 2;
  const bool grant = (actor - clc_base()) % 2 == 0;
  if (clc_queue_[k].empty() || (grant && !unlaunched_left)) return Move::no;
  return Move::progress;
}

std::string World::clc_actor_name(std::uint32_t actor) const {
  if (actor == launcher_actor()) return "launcher";
  const std::uint32_t k = (actor - clc_base()) / 2;
  std::string s = "cluster";
  s.append(std::to_string(k)).append((actor - clc_base()) % 2 == 0 ? "/clc-grant" : "/clc-refuse");
  return s;
}

void World::clc_cluster_exited(std::uint32_t cluster) {
  if (!clc_modeled_ || cluster_launch_[cluster] != Launch::running) return;
  --clusters_running_;
  mark(launcher_actor());
}

// A canceled cluster never runs: its warps are done before they start.
void World::clc_cancel(std::uint32_t cluster) {
  cluster_launch_[cluster] = Launch::canceled;
  Cluster& cl = clusters_[cluster];
  for (std::uint32_t r = 0; r < launch_.cluster_size; ++r) {
    Cta& cta = ctas_[cl.first_cta + r];
    for (std::uint32_t i = 0; i < launch_.warps_per_cta; ++i) {
      Warp& w = warps_[(cl.first_cta + r) * launch_.warps_per_cta + i];
      w.block = Block::finished;
      mark(w.id);
      --unfinished_;
    }
    cta.live_warps = 0;
  }
  cl.live_threads = 0;
}

void World::clc_step(std::uint32_t actor) {
  touch_global();  // launches and cancellations change what every CLC unit and warp can do
  const auto clusters = static_cast<std::uint32_t>(clusters_.size());
  auto unlaunched_changed = [&] {
    for (std::uint32_t k = 0; k < clusters; ++k) mark(clc_base() + 2 * k);
    mark(launcher_actor());
  };
  if (actor == launcher_actor()) {
    const std::uint32_t k = next_unlaunched_++;
    cluster_launch_[k] = Launch::running;
    ++clusters_running_;
    unlaunched_changed();
    const Cluster& cl = clusters_[k];
    for (std::uint32_t i = 0; i < launch_.cluster_size * launch_.warps_per_cta; ++i)
      mark(cl.first_cta * launch_.warps_per_cta + i);
    return;
  }
  const std::uint32_t k = (actor - clc_base()) / 2;
  const bool grant = (actor - clc_base()) % 2 == 0;
  ClcRequest req = std::move(clc_queue_[k].front());
  clc_queue_[k].pop_front();
  mark(clc_base() + 2 * k);
  mark(clc_base() + 2 * k + 1);
  if (grant) unlaunched_changed();
  clc_complete(req, k, grant, static_cast<std::int32_t>(actor));
}

bool World::clc_pending_for(std::uint32_t cta, std::string* what) const {
  for (const ClcRequest& r : clc_queue_[ctas_[cta].cluster]) {
    if (r.cta != cta && !r.multicast) continue;
    *what = "a clusterlaunchcontrol.try_cancel";
    what->append(r.multicast ? ".multicast::cluster::all" : "")
        .append(" issued by ")
        .append(warps_[r.issuer].name)
        .append(" at ")
        .append(where(r.loc))
        .append(" (step ")
        .append(std::to_string(r.step))
        .append(")");
    return true;
  }
  return false;
}

// ------------------------------------------------------------ try_cancel

void World::clc_try_cancel(ClcResponse& resp, SharedMemBarrier& bar, bool multicast, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  const char* op = multicast ? "clusterlaunchcontrol.try_cancel.multicast::cluster::all"
                             : "clusterlaunchcontrol.try_cancel";
  // One request per executing thread: a warp-level issue makes 32 requests,
  // each of which may cancel a cluster whose work then goes undone.
  if (lanes(w.active) != 1) {
    std::string m = op;
    m.append(" issued by ").append(std::to_string(lanes(w.active)))
        .append(" lanes: each lane makes its own request (and may cancel a cluster of its own); issue it inside "
                "elect_one");
    fail(w, "clc.multi-lane", "", m, loc);
    return;
  }
  const Cta& c = ctas_[w.cta];
  // PTX "clusterlaunchcontrol.try_cancel": addr and mbar in .shared::cta
  // ("the result is undefined if any of address operands do not fall within
  // the address window of .shared::cta"); addr "the naturally aligned
  // address of the 16-byte wide shared memory location".
  const auto* rb = reinterpret_cast<const std::byte*>(&resp);
  if (rb < c.smem || rb + kClcResponseBytes > c.smem + c.smem_bytes) {
    std::string m = op;
    m.append("'s response is not in this CTA's shared memory (PTX: undefined)");
    fail(w, "clc.response-not-shared", "CLC response outside shared memory", m, loc);
    return;
  }
  const auto resp_offset = static_cast<std::uint32_t>(rb - c.smem);
  if (resp_offset % kClcResponseBytes != 0) {
    std::string m = op;
    m.append("'s response at smem+").append(std::to_string(resp_offset))
        .append(" is not 16-byte aligned (PTX: the naturally aligned address of the 16-byte response)");
    fail(w, "clc.response-misaligned", offset_label(resp_offset, w.cta), m, loc);
    return;
  }
  if (resolve(bar, w, loc) == nullptr) return;  // mbarrier.not-shared / uninitialized
  // PTX: "If the executing CTA has already observed the completion of a
  // clusterlaunchcontrol.try_cancel instruction as failed, then the
  // behavior of issuing a subsequent clusterlaunchcontrol.try_cancel
  // instruction is undefined."
  if (clc_failed_seen_[w.cta] != 0) {
    std::string m = op;
    m.append(" after ").append(cta_label(w.cta))
        .append(" observed a failed response (PTX: undefined): a failed request means stop asking");
    fail(w, "clc.try-cancel-after-failure", offset_label(resp_offset, w.cta), m, loc);
    return;
  }
  // A second request into a response that one in flight will still write:
  // the two completions overwrite each other in an order nothing fixes, and
  // the reader cannot tell which response it decodes. Give each request in
  // flight its own response (a ring of them, as the pipelines do).
  for (const ClcRequest& r : clc_queue_[c.cluster]) {
    const bool same_cta = r.cta == w.cta || r.multicast || multicast;
    if (r.resp_offset != resp_offset || !same_cta) continue;
    std::string m = op;
    m.append(" into a response that a try_cancel issued by ").append(warps_[r.issuer].name).append(" at ")
        .append(where(r.loc)).append(" (step ").append(std::to_string(r.step))
        .append(") will still write: use one response per request in flight");
    fail(w, "clc.response-in-flight", offset_label(resp_offset, w.cta), m, loc);
    return;
  }
  ClcRequest req;
  req.cta = w.cta;
  req.resp_offset = resp_offset;
  req.bar_offset = static_cast<std::uint32_t>(reinterpret_cast<std::byte*>(&bar) - c.smem);
  req.multicast = multicast;
  stamp_issue(w, req, loc);
  const std::uint32_t k = c.cluster;
  if (!clc_modeled_) {
    // Every cluster is running: there is nothing to cancel, and the request
    // completes, failed, as it is issued.
    clc_complete(req, k, false, static_cast<std::int32_t>(w.id));
    return;
  }
  touch_global();
  clc_queue_[k].push_back(std::move(req));
  mark(clc_base() + 2 * k);
  mark(clc_base() + 2 * k + 1);
}

void World::clc_complete(ClcRequest& req, std::uint32_t cluster, bool grant, std::int32_t actor) {
  const Warp& issuer = warps_[req.issuer];
  ClcResponse value{};
  value.word[0] = kClcTag;
  value.word[1] = value.word[2] = value.word[3] = ~0u;
  if (grant) {
    // The lowest unlaunched cluster: the one the GPU would launch next (the
    // ISA does not say which; see docs/emulator-models.md).
    const std::uint32_t victim = next_unlaunched_++;
    clc_cancel(victim);
    value.word[0] |= 1u;
    // The grid is the clusters side by side along x (LaunchConfig::
    // cluster_shape): cluster k's first CTA, rank 0, is at (k * dim.x, 0, 0).
    value.word[1] = victim * cluster_shape().x;
    value.word[2] = value.word[3] = 0;
  }
  const std::uint32_t comp = comp_clc(cluster);
  if (options_.race_check) join(clocks_[comp], req.clock);
  const std::uint32_t info =
      options_.race_check ? access_info(actor, static_cast<std::int32_t>(req.issuer), "try_cancel response", req.loc)
                          : 0;
  const Cluster& cl = clusters_[cluster];
  for (std::uint32_t r = 0; r < launch_.cluster_size; ++r) {
    const std::uint32_t cta = cl.first_cta + r;
    if (req.multicast ? false : cta != req.cta) continue;
    if (ctas_[cta].exited()) {
      // PTX: "The behavior of instruction with .multicast::cluster::all
      // qualifier is undefined if any CTA in the cluster is exited."
      std::string m = "a clusterlaunchcontrol.try_cancel issued by ";
      m.append(issuer.name).append(" at step ").append(std::to_string(req.step))
          .append(" writes its response into ").append(cta_label(cta)).append(", which has exited");
      report_target_exited(cta, req, std::move(m));
      return;
    }
    if (options_.race_check &&
        !smem_range_access(cta, req.resp_offset, kClcResponseBytes, true, false, comp, info, req.loc, &issuer))
      return;
    std::memcpy(ctas_[cta].smem + req.resp_offset, &value, sizeof value);
    const std::int64_t id = barrier_at(cta, req.bar_offset);
    if (id < 0) {
      report_uninitialized(cta, req.bar_offset, req, "the try_cancel's complete_tx found");
      return;
    }
    Mbar& m = mbars_[static_cast<std::size_t>(id)];
    touch_mbar(m);
    m.tx -= kClcResponseBytes;  // complete_tx(16): "equal to amount of data stored in bytes"
    if (!check_tx_range(static_cast<std::uint32_t>(id), *current_, req.loc)) return;
    if (options_.race_check) {
      if (m.acc.empty()) m.acc.assign(clock_size(m.cta), 0);
      release(comp, m.acc);
    }
    if (options_.trace)
      record({.step = step_, .begin = req.step, .warp = actor, .object = static_cast<std::int32_t>(id),
              .kind = EventKind::complete_tx, .a = kClcResponseBytes, .b = m.pending, .c = m.tx,
              .file = req.loc.file_name(), .line = req.loc.line()});
    maybe_complete(static_cast<std::uint32_t>(id), actor, req.loc);
    if (stopping_) return;
  }
  if (options_.race_check) tick(comp);
}

// ------------------------------------------------------------ query_cancel

bool World::clc_is_canceled(const ClcResponse& resp, const SourceLoc& loc) {
  // While the run is torn down every operation is a no-op; a response then
  // reads as failed, so that a persistent loop driven by it ends.
  if (stopping_ || killing_) return false;
  const bool canceled = (resp.word[0] & 1u) != 0 && (resp.word[0] & ~1u) == kClcTag;
  if (in_lane_) return canceled;
  Warp& w = warp();
  if (!clc_read(resp, "clusterlaunchcontrol.query_cancel.is_canceled", w, loc)) return false;
  // The CTA has observed a failed request: no further try_cancel (PTX).
  if (!canceled) clc_failed_seen_[w.cta] = 1;
  return canceled;
}

ClcCtaId World::clc_first_ctaid(const ClcResponse& resp, const SourceLoc& loc) {
  const ClcCtaId id{.x = resp.word[1], .y = resp.word[2], .z = resp.word[3]};
  if (in_lane_ || stopping_ || killing_) return id;
  Warp& w = warp();
  if (!clc_read(resp, "clusterlaunchcontrol.query_cancel.get_first_ctaid", w, loc)) return {};
  // PTX "clusterlaunchcontrol.query_cancel": "If the request fails the
  // behavior of clusterlaunchcontrol.query_cancel.get_first_ctaid is
  // undefined."
  if ((resp.word[0] & 1u) == 0) {
    fail(w, "clc.ctaid-of-failed", "",
         "get_first_ctaid of a failed try_cancel response (PTX: undefined): test is_canceled first", loc);
    return {};
  }
  return id;
}

// The checks of a response read: it is no longer being written, the read
// is ordered after the write (race checker), and a try_cancel wrote it.
bool World::clc_read(const ClcResponse& resp, const char* op, Warp& w, const SourceLoc& loc) {
  const Cta& c = ctas_[w.cta];
  const auto* rb = reinterpret_cast<const std::byte*>(&resp);
  if (rb >= c.smem && rb + kClcResponseBytes <= c.smem + c.smem_bytes) {
    const auto offset = static_cast<std::uint32_t>(rb - c.smem);
    // A request still in flight to this response: its bytes are the old
    // ones (PTX: wait on the mbarrier for the completion; "no other
    // synchronization mechanisms ... can be used to guarantee the completion").
    for (const ClcRequest& r : clc_queue_[c.cluster]) {
      if (r.resp_offset != offset || (r.cta != w.cta && !r.multicast)) continue;
      std::string m = op;
      m.append(" reads a response whose try_cancel (issued by ").append(warps_[r.issuer].name)
          .append(" at ").append(where(r.loc)).append(", step ").append(std::to_string(r.step))
          .append(") has not completed: wait on its mbarrier first");
      fail(w, "clc.response-before-completion", offset_label(offset, w.cta), m, loc);
      return false;
    }
    if (options_.race_check) {
      const std::uint32_t info = access_info(static_cast<std::int32_t>(w.id), static_cast<std::int32_t>(w.id), op, loc);
      if (!smem_range_access(w.cta, offset, kClcResponseBytes, false, true, w.id, info, loc, nullptr)) return false;
    }
  }
  if ((resp.word[0] & ~1u) != kClcTag) {
    std::string m = op;
    m.append(" decodes 16 bytes that no clusterlaunchcontrol.try_cancel wrote (a response read before its first "
             "try_cancel completed, or a copy of other bytes)");
    fail(w, "clc.not-a-response", "", m, loc);
    return false;
  }
  return true;
}

}  // namespace wspipe::emu::detail
