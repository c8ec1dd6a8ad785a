// The named-barrier and cluster-barrier models against a reference: a
// cluster of 1 or 2 CTAs of 1-3 warps each runs straight-line programs of
// bar.sync, bar.arrive (ids 0-17, thread counts good and bad), the cluster
// barrier and __syncwarp, each by the whole warp or one elected lane, under
// a schedule taken from the input. The reference (below, from
// docs/hardware.md "Named and cluster barriers" and PTX "bar.sync /
// bar.arrive", "barrier.cluster") is stepped in lock step (model_fuzz.hpp):
// movable warps and the outcome must agree.
//  - bar.sync/arrive id, n: id in [0, 15]; n a positive multiple of 32 up to
//    the CTA's threads; warp-collective (every lane,
//    docs/programming-model.md); the first arrival of an instance sets its
//    count, later ones must agree; an instance completes when n threads
//    arrived; bar.sync then waits for it.
//  - barrier.cluster arrive + wait: completes when every thread of the
//    cluster that has not exited arrived; exiting threads count as arrived.
//
// Input: byte 0: warps per CTA - 1 (mod 3), 2 CTAs (bit 2), race checker
// (bit 3); then per warp an op count (mod 17) and 3 bytes per op; the rest
// is the schedule.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/model_fuzz.hpp"

namespace {

using namespace wspipe;
using B = emu::EmuBackend;

enum class Kind : std::uint8_t { sync, arrive, cluster, syncwarp };
constexpr const char* kNames[] = {"bar.sync", "bar.arrive", "cluster_sync", "syncwarp"};

struct Op {
  Kind kind = Kind::sync;
  std::uint32_t lanes = 32;  // 1: inside elect_one
  std::uint32_t id = 0;
  std::uint32_t threads = 0;
};

}  // namespace

namespace wspipe::fuzz {
namespace {

class NamedSim final : public Lockstep {
 public:
  NamedSim(std::vector<std::vector<Op>> progs, std::uint32_t ctas, std::uint32_t warps_per_cta)
      : progs_(std::move(progs)), wpc_(warps_per_cta), ctas_(ctas), warps_(progs_.size()) {
    for (Cta& c : ctas_) c.live_warps = wpc_;
    cluster_live_ = ctas * wpc_ * 32;
  }

  void enabled(std::vector<std::uint32_t>& actors, std::vector<std::uint8_t>& spin) const override {
    actors.clear();
    spin.clear();
    for (std::uint32_t w = 0; w < warps_.size(); ++w) {
      const Warp& x = warps_[w];
      bool can = false;
      switch (x.st) {
        case St::not_started:
        case St::at_op: can = true; break;
        case St::named_wait: can = ctas_[w / wpc_].named[x.id].gen > x.target; break;
        case St::cluster_wait: can = cluster_gen_ > x.target; break;
        case St::finished: break;
      }
      if (!can) continue;
      actors.push_back(w);
      spin.push_back(0);
    }
  }

  void step(std::uint32_t w) override {
    Warp& x = warps_[w];
    if (x.st == St::at_op) {
      const Op& op = progs_[w][x.pc];
      if (op.kind == Kind::sync || op.kind == Kind::arrive) {
        if (const char* r = named(w, op)) return violate(r);
        if (op.kind == Kind::sync) return;  // now waits for the instance to complete
      } else if (op.kind == Kind::cluster) {
        cluster_arrived_ += op.lanes;
        x.st = St::cluster_wait;
        x.target = cluster_gen_;
        release_cluster();
        return;
      }
    }
    if (x.st != St::not_started) ++x.pc;
    advance(w);
  }

  bool all_finished() const override {
    for (const Warp& x : warps_)
      if (x.st != St::finished) return false;
    return true;
  }

  std::string describe() const override {
    std::string s = std::to_string(ctas_.size()) + " CTA(s) of " + std::to_string(wpc_) + " warps\n";
    for (std::size_t w = 0; w < progs_.size(); ++w) {
      s += "warp " + std::to_string(w) + " (pc " + std::to_string(warps_[w].pc) + "):\n";
      for (const Op& op : progs_[w]) {
        s += std::string("  ") + kNames[static_cast<int>(op.kind)];
        if (op.kind == Kind::sync || op.kind == Kind::arrive)
          s += " id " + std::to_string(op.id) + " threads " + std::to_string(op.threads);
        s += op.lanes == 1 ? " elected\n" : "\n";
      }
    }
    return s;
  }

  const std::vector<std::vector<Op>>& programs() const { return progs_; }

 private:
  enum class St : std::uint8_t { not_started, at_op, named_wait, cluster_wait, finished };
  struct Warp {
    St st = St::not_started;
    std::size_t pc = 0;
    std::uint32_t id = 0;
    std::uint64_t target = 0;  // the generation a wait waits to pass
  };
  struct Named {
    std::uint32_t expected = 0, arrived = 0;
    std::uint64_t gen = 0;
  };
  struct Cta {
    std::array<Named, 16> named{};
    std::uint32_t live_warps = 0;
  };

  const char* named(std::uint32_t w, const Op& op) {
    if (op.id >= 16) return "named-barrier.bad-id";
    if (op.threads == 0 || op.threads % 32 != 0 || op.threads > wpc_ * 32) return "named-barrier.thread-count";
    if (op.lanes != 32) return "named-barrier.partial-warp";
    Named& nb = ctas_[w / wpc_].named[op.id];
    if (nb.arrived == 0)
      nb.expected = op.threads;
    else if (nb.expected != op.threads)
      return "named-barrier.count-mismatch";
    Warp& x = warps_[w];
    x.id = op.id;
    x.target = nb.gen;
    nb.arrived += 32;
    if (nb.arrived == nb.expected) {
      nb.arrived = 0;
      ++nb.gen;
    }
    if (op.kind == Kind::sync) x.st = St::named_wait;
    return nullptr;
  }

  void release_cluster() {
    if (cluster_arrived_ > 0 && cluster_arrived_ >= cluster_live_) {
      cluster_arrived_ = 0;
      ++cluster_gen_;
    }
  }

  void advance(std::uint32_t w) {
    Warp& x = warps_[w];
    if (x.pc < progs_[w].size()) {
      x.st = St::at_op;
      return;
    }
    x.st = St::finished;
    --ctas_[w / wpc_].live_warps;
    cluster_live_ -= 32;
    release_cluster();
  }

  std::vector<std::vector<Op>> progs_;
  std::uint32_t wpc_;
  std::vector<Cta> ctas_;
  std::vector<Warp> warps_;
  std::uint32_t cluster_live_ = 0, cluster_arrived_ = 0;
  std::uint64_t cluster_gen_ = 0;
};

}  // namespace
}  // namespace wspipe::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace wspipe::fuzz;
  Bytes in(data, size);
  const std::uint8_t head = in.u8();
  const std::uint32_t wpc = 1 + (head & 3u) % 3;
  const std::uint32_t ctas = (head & 4u) != 0 ? 2 : 1;
  std::vector<std::vector<Op>> progs(wpc * ctas);
  for (auto& p : progs) {
    const std::uint32_t n = in.u8() % 17;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint8_t k = in.u8(), a = in.u8(), b = in.u8();
      Op op;
      op.kind = static_cast<Kind>(k & 3u);
      op.lanes = (k & 4u) != 0 ? 1 : 32;
      op.id = a < 224 ? a % 4 : 4 + (a - 224) % 14;
      const std::uint32_t kSpecial[] = {0, 16, 33, 32 * (wpc + 1), 96, 128, 1024, 31};
      op.threads = b < 224 ? 32 * (1 + b % wpc) : kSpecial[(b - 224) % 8];
      p.push_back(op);
    }
  }
  NamedSim sim(progs, ctas, wpc);
  emu::LaunchConfig launch;
  launch.cluster_size = ctas;
  launch.warps_per_cta = wpc;
  const auto body = [&] {
    const std::uint32_t w = B::cta_rank() * wpc + B::warp_idx();
    for (const Op& op : sim.programs()[w]) {
      const auto act = [&](auto&& f) {
        if (op.lanes == 1)
          B::elect_one(f);
        else
          f();
      };
      switch (op.kind) {
        case Kind::sync: act([&] { B::named_sync(op.id, op.threads); }); break;
        case Kind::arrive: act([&] { B::named_arrive(op.id, op.threads); }); break;
        case Kind::cluster: act([&] { B::cluster_sync(); }); break;
        case Kind::syncwarp: act([&] { B::syncwarp(); }); break;
      }
    }
  };
  run_lockstep(launch, body, sim, in.rest(), false, (head & 8u) != 0);
  return 0;
}
