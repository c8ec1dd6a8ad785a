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
// The completion writes the response with an async-proxy write (on the
// issuer's CLC agent, World::comp_clc, which carries the issuer's clock at
// issue and no other warp's) and performs
// complete_tx(16) on the barrier, which releases it: a read of the response
// not ordered after a wait on that phase is a race.
#include "backends/emu/runtime/clc.hpp"

#include <bit>
#include <cstring>

#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/engines.hpp"

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

ClcRoom::ClcRoom(World& world, std::uint32_t first_actor)
    : Room(world), base_(first_actor), modeled_(world.launch().max_active_clusters != 0) {
  const std::uint32_t clusters = w_.num_clusters();
  launch_.assign(clusters, Launch::running);
  queue_.resize(clusters);
  failed_seen_.assign(w_.num_ctas(), 0);
  next_unlaunched_ = running_ = clusters;
  if (!modeled_) return;
  next_unlaunched_ = running_ = w_.launch().max_active_clusters;
  for (std::uint32_t k = next_unlaunched_; k < clusters; ++k) launch_[k] = Launch::unlaunched;
}

Move ClcRoom::move(std::uint32_t actor) const {
  const bool unlaunched_left = next_unlaunched_ < clusters();
  if (actor == launcher())
    return unlaunched_left && running_ < w_.launch().max_active_clusters ? Move::progress : Move::no;
  const std::uint32_t k = (actor - base_) / 2;
  const bool grant = (actor - base_) % 2 == 0;
  if (queue_[k].empty() || (grant && !unlaunched_left)) return Move::no;
  return Move::progress;
}

std::string ClcRoom::actor_name(std::uint32_t actor) const {
  if (actor == launcher()) return "launcher";
  const std::uint32_t k = (actor - base_) / 2;
  std::string s = "cluster";
  s.append(std::to_string(k)).append((actor - base_) % 2 == 0 ? "/clc-grant" : "/clc-refuse");
  return s;
}

void ClcRoom::cluster_exited(std::uint32_t cluster) {
  if (!modeled_ || launch_[cluster] != Launch::running) return;
  w_.touch(World::Res::clc_running, 0);
  --running_;
  w_.mark(launcher());
}

// A canceled cluster never runs: its warps are done before they start.
void ClcRoom::cancel(std::uint32_t cluster) {
  launch_[cluster] = Launch::canceled;
  w_.never_run(cluster);
}

void ClcRoom::step(std::uint32_t actor) {
  const LaunchConfig& launch = w_.launch();
  auto unlaunched_changed = [&] {
    for (std::uint32_t k = 0; k < clusters(); ++k) w_.mark(base_ + 2 * k);
    w_.mark(launcher());
  };
  if (actor == launcher()) {
    // It takes the next cluster not launched or canceled (a grant's too),
    // once fewer than the most clusters run. The warps it starts wait for
    // it (their step's enabler).
    w_.touch(World::Res::clc_unlaunched, 0);
    w_.touch(World::Res::clc_running, 0, Touch::read);
    const std::uint32_t k = next_unlaunched_++;
    launch_[k] = Launch::running;
    ++running_;
    unlaunched_changed();
    const Cluster& cl = w_.cluster(k);
    for (std::uint32_t i = 0; i < launch.cluster_size * launch.warps_per_cta; ++i)
      w_.mark(cl.first_cta * launch.warps_per_cta + i);
    return;
  }
  const std::uint32_t k = (actor - base_) / 2;
  const bool grant = (actor - base_) % 2 == 0;
  ClcRequest req = std::move(queue_[k].front());
  queue_[k].pop_front();
  // The unit's order (a grant and a refusal of one request conflict), the
  // request it answers (awaiting its issue), the unit's load; a grant
  // cancels the next cluster not launched.
  w_.touch(World::Res::clc_order, k);
  w_.touch(World::Res::clc_request, World::key(k, req.seq), Touch::await);
  w_.touch(World::Res::clc_load, k, Touch::commute);
  if (grant) w_.touch(World::Res::clc_unlaunched, 0);
  w_.mark(base_ + 2 * k);
  w_.mark(base_ + 2 * k + 1);
  if (grant) unlaunched_changed();
  complete(req, k, grant, static_cast<std::int32_t>(actor));
}

bool ClcRoom::pending_for(std::uint32_t cta, std::string* what) const {
  w_.touch(World::Res::clc_load, w_.cta(cta).cluster, Touch::read);
  for (const ClcRequest& r : queue_[w_.cta(cta).cluster]) {
    if (r.cta != cta && !r.multicast) continue;
    *what = "a clusterlaunchcontrol.try_cancel";
    what->append(r.multicast ? ".multicast::cluster::all" : "")
        .append(" issued by ").append(w_.warp_at(r.issuer).name).append(" at ").append(w_.where(r.loc))
        .append(" (step ").append(std::to_string(r.step)).append(")");
    return true;
  }
  return false;
}

// ------------------------------------------------------------ try_cancel

void ClcRoom::try_cancel(ClcResponse& resp, SharedMemBarrier& bar, bool multicast, const SourceLoc& loc) {
  if (w_.in_lane()) return;
  Warp& w = w_.warp();
  if (!w_.point(w, loc)) return;
  const char* op = multicast ? "clusterlaunchcontrol.try_cancel.multicast::cluster::all"
                             : "clusterlaunchcontrol.try_cancel";
  // One request per executing thread: a warp-level issue makes 32 requests,
  // each of which may cancel a cluster whose work then goes undone.
  if (lanes(w.active) != 1) {
    std::string m = op;
    m.append(" issued by ").append(std::to_string(lanes(w.active)))
        .append(" lanes: each lane makes its own request (and may cancel a cluster of its own); issue it inside "
                "elect_one");
    w_.fail(w, "clc.multi-lane", "", m, loc);
    return;
  }
  const Cta& c = w_.cta(w.cta);
  // PTX "clusterlaunchcontrol.try_cancel": addr and mbar in .shared::cta
  // ("the result is undefined if any of address operands do not fall within
  // the address window of .shared::cta"); addr "the naturally aligned
  // address of the 16-byte wide shared memory location".
  const auto* rb = reinterpret_cast<const std::byte*>(&resp);
  if (rb < c.smem || rb + kClcResponseBytes > c.smem + c.smem_bytes) {
    std::string m = op;
    m.append("'s response is not in this CTA's shared memory (PTX: undefined)");
    w_.fail(w, "clc.response-not-shared", "CLC response outside shared memory", m, loc);
    return;
  }
  const auto resp_offset = static_cast<std::uint32_t>(rb - c.smem);
  if (resp_offset % kClcResponseBytes != 0) {
    std::string m = op;
    m.append("'s response at smem+").append(std::to_string(resp_offset))
        .append(" is not 16-byte aligned (PTX: the naturally aligned address of the 16-byte response)");
    w_.fail(w, "clc.response-misaligned", offset_label(resp_offset, w.cta), m, loc);
    return;
  }
  if (!w_.mbar().check(bar, w, loc)) return;  // mbarrier.not-shared / uninitialized
  // PTX: "If the executing CTA has already observed the completion of a
  // clusterlaunchcontrol.try_cancel instruction as failed, then the
  // behavior of issuing a subsequent clusterlaunchcontrol.try_cancel
  // instruction is undefined."
  w_.touch(World::Res::clc_failed_seen, w.cta, Touch::read);
  if (failed_seen_[w.cta] != 0) {
    std::string m = op;
    m.append(" after ").append(cta_label(w.cta))
        .append(" observed a failed response (PTX: undefined): a failed request means stop asking");
    w_.fail(w, "clc.try-cancel-after-failure", offset_label(resp_offset, w.cta), m, loc);
    return;
  }
  // A second request into a response that one in flight will still write:
  // the two completions overwrite each other in an order nothing fixes, and
  // the reader cannot tell which response it decodes. Give each request in
  // flight its own response (a ring of them, as the pipelines do).
  for (const ClcRequest& r : queue_[c.cluster]) {
    const bool same_cta = r.cta == w.cta || r.multicast || multicast;
    if (r.resp_offset != resp_offset || !same_cta) continue;
    std::string m = op;
    m.append(" into a response that a try_cancel issued by ")
        .append(w_.warp_at(r.issuer).name).append(" at ").append(w_.where(r.loc)).append(" (step ")
        .append(std::to_string(r.step)).append(") will still write: use one response per request in flight");
    w_.fail(w, "clc.response-in-flight", offset_label(resp_offset, w.cta), m, loc);
    return;
  }
  ClcRequest req;
  req.cta = w.cta;
  req.resp_offset = resp_offset;
  req.bar_offset = static_cast<std::uint32_t>(reinterpret_cast<std::byte*>(&bar) - c.smem);
  req.multicast = multicast;
  w_.engines().stamp_issue(w, req, loc);
  const std::uint32_t k = c.cluster;
  if (!modeled_) {
    // Every cluster is running: there is nothing to cancel, and the request
    // completes, failed, as it is issued.
    complete(req, k, false, static_cast<std::int32_t>(w.id));
    return;
  }
  if (issued_.size() <= k) issued_.resize(k + 1, 0);
  req.seq = issued_[k]++;
  w_.touch(World::Res::clc_request, World::key(k, req.seq));
  w_.touch(World::Res::clc_load, k, Touch::commute);
  queue_[k].push_back(std::move(req));
  w_.mark(base_ + 2 * k);
  w_.mark(base_ + 2 * k + 1);
}

void ClcRoom::complete(ClcRequest& req, std::uint32_t cluster, bool grant, std::int32_t actor) {
  const Warp& issuer = w_.warp_at(req.issuer);
  ClcResponse value{};
  value.word[0] = kClcTag;
  value.word[1] = value.word[2] = value.word[3] = ~0u;
  if (grant) {
    // The lowest unlaunched cluster: the one the GPU would launch next (the
    // ISA does not say which; see docs/emulator-models.md).
    const std::uint32_t victim = next_unlaunched_++;
    cancel(victim);
    value.word[0] |= 1u;
    // The grid is the clusters side by side along x (LaunchConfig::
    // cluster_shape): cluster k's first CTA, rank 0, is at (k * dim.x, 0, 0).
    value.word[1] = victim * w_.cluster_shape().x;
    value.word[2] = value.word[3] = 0;
  }
  const bool race_check = w_.options().race_check;
  const std::uint32_t comp = w_.comp_clc(req.issuer);
  if (race_check) w_.async_start(comp, req.clock);
  const std::uint32_t info =
      race_check ? w_.access_info(actor, static_cast<std::int32_t>(req.issuer), "try_cancel response", req.loc) : 0;
  const Cluster& cl = w_.cluster(cluster);
  for (std::uint32_t r = 0; r < w_.launch().cluster_size; ++r) {
    const std::uint32_t cta = cl.first_cta + r;
    if (req.multicast ? false : cta != req.cta) continue;
    w_.touch(World::Res::cta_exit, cta, Touch::read);
    if (w_.cta(cta).exited()) {
      // PTX: "The behavior of instruction with .multicast::cluster::all
      // qualifier is undefined if any CTA in the cluster is exited."
      std::string m = "a clusterlaunchcontrol.try_cancel issued by ";
      m.append(issuer.name).append(" at step ").append(std::to_string(req.step))
          .append(" writes its response into ").append(cta_label(cta)).append(", which has exited");
      w_.engines().report_target_exited(cta, req, std::move(m));
      return;
    }
    if (!w_.smem_range_access(cta, req.resp_offset, kClcResponseBytes, true, false, comp, info, req.loc, &issuer))
      return;
    std::memcpy(w_.cta(cta).smem + req.resp_offset, &value, sizeof value);
    const std::int64_t id = w_.mbar().at(cta, req.bar_offset);
    if (id < 0) {
      w_.mbar().report_uninitialized(cta, req.bar_offset, req, "the try_cancel's complete_tx found");
      return;
    }
    // complete_tx(16): "equal to amount of data stored in bytes".
    if (!w_.mbar().complete_tx(static_cast<std::uint32_t>(id), kClcResponseBytes, comp, actor, req, req.step)) return;
  }
  if (race_check) w_.tick(comp);
}

// ------------------------------------------------------------ query_cancel

bool ClcRoom::is_canceled(const ClcResponse& resp, const SourceLoc& loc) {
  // While the run is torn down every operation is a no-op; a response then
  // reads as failed, so that a persistent loop driven by it ends.
  if (w_.ended()) return false;
  const bool canceled = (resp.word[0] & 1u) != 0 && (resp.word[0] & ~1u) == kClcTag;
  if (w_.in_lane()) return canceled;
  Warp& w = w_.warp();
  if (!read(resp, "clusterlaunchcontrol.query_cancel.is_canceled", w, loc)) return false;
  // The CTA has observed a failed request: no further try_cancel (PTX).
  if (!canceled) {
    w_.touch(World::Res::clc_failed_seen, w.cta, Touch::commute);  // idempotent: warps decode alike
    failed_seen_[w.cta] = 1;
  }
  return canceled;
}

ClcCtaId ClcRoom::first_ctaid(const ClcResponse& resp, const SourceLoc& loc) {
  const ClcCtaId id{.x = resp.word[1], .y = resp.word[2], .z = resp.word[3]};
  if (w_.in_lane() || w_.ended()) return id;
  Warp& w = w_.warp();
  if (!read(resp, "clusterlaunchcontrol.query_cancel.get_first_ctaid", w, loc)) return {};
  // PTX "clusterlaunchcontrol.query_cancel": "If the request fails the
  // behavior of clusterlaunchcontrol.query_cancel.get_first_ctaid is
  // undefined."
  if ((resp.word[0] & 1u) == 0) {
    w_.fail(w, "clc.ctaid-of-failed", "",
            "get_first_ctaid of a failed try_cancel response (PTX: undefined): test is_canceled first", loc);
    return {};
  }
  return id;
}

// The checks of a response read: it is no longer being written, the read
// is ordered after the write (race checker), and a try_cancel wrote it.
bool ClcRoom::read(const ClcResponse& resp, const char* op, Warp& w, const SourceLoc& loc) {
  const Cta& c = w_.cta(w.cta);
  const auto* rb = reinterpret_cast<const std::byte*>(&resp);
  if (rb >= c.smem && rb + kClcResponseBytes <= c.smem + c.smem_bytes) {
    const auto offset = static_cast<std::uint32_t>(rb - c.smem);
    // A request still in flight to this response: its bytes are the old
    // ones (PTX: wait on the mbarrier for the completion; "no other
    // synchronization mechanisms ... can be used to guarantee the completion").
    for (const ClcRequest& r : queue_[c.cluster]) {
      if (r.resp_offset != offset || (r.cta != w.cta && !r.multicast)) continue;
      std::string m = op;
      m.append(" reads a response whose try_cancel (issued by ")
          .append(w_.warp_at(r.issuer).name).append(" at ").append(w_.where(r.loc)).append(", step ")
          .append(std::to_string(r.step)).append(") has not completed: wait on its mbarrier first");
      w_.fail(w, "clc.response-before-completion", offset_label(offset, w.cta), m, loc);
      return false;
    }
    const std::uint32_t info =
        w_.options().race_check
            ? w_.access_info(static_cast<std::int32_t>(w.id), static_cast<std::int32_t>(w.id), op, loc)
            : 0;
    if (!w_.smem_range_access(w.cta, offset, kClcResponseBytes, false, true, w.id, info, loc, nullptr)) return false;
  }
  if ((resp.word[0] & ~1u) != kClcTag) {
    std::string m = op;
    m.append(" decodes 16 bytes that no clusterlaunchcontrol.try_cancel wrote (a response read before its first "
             "try_cancel completed, or a copy of other bytes)");
    w_.fail(w, "clc.not-a-response", "", m, loc);
    return false;
  }
  return true;
}

}  // namespace wspipe::emu::detail
