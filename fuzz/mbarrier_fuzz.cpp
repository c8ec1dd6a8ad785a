// The mbarrier model against a reference (ref_mbarrier.hpp): 1-4 warps of
// one CTA run straight-line programs of init, inval, arrive,
// arrive.expect_tx, expect_tx, complete_tx, try_wait and wait (by parity,
// some stating a phase number too) on four
// barriers (and one outside shared memory), each by one lane or the whole
// warp, under a schedule taken from the input, with or without spurious
// try_wait time-outs. The reference is stepped in lock step
// (model_fuzz.hpp): movable warps, try_wait results, and the outcome (ok,
// deadlock, or the rule of the first violation) must agree.
//
// Input: byte 0: warps - 1 (bits 0-1), spurious time-outs (bit 2); then per
// warp an op count (mod 17) and 3 bytes per op; the rest is the schedule.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/mbarrier_limits.hpp"
#include "fuzz/model_fuzz.hpp"
#include "fuzz/ref_mbarrier.hpp"

namespace {

using namespace wspipe;
using B = emu::EmuBackend;
using wspipe::fuzz::RefMbarriers;

constexpr std::uint32_t kSlots = 4;
struct Smem {
  SharedMemBarrier b[kSlots];
};

enum class Kind : std::uint8_t { init, inval, arrive, arrive_tx, expect_tx, complete_tx, try_wait, wait };
constexpr const char* kNames[] = {"init", "inval", "arrive", "arrive_expect_tx", "expect_tx", "complete_tx",
                                  "try_wait", "wait"};

struct Op {
  Kind kind = Kind::init;
  std::uint32_t lanes = 1;  // 1: inside elect_one; 32: at warp level
  std::uint32_t slot = 0;   // kSlots: a barrier outside shared memory
  std::uint32_t parity = 0;
  std::uint32_t value = 0;  // init: count; tx ops: bytes per lane
  bool stated = false;      // a wait that states the phase it means: `phase`
  std::int64_t phase = 0;
  bool is_wait() const { return kind == Kind::try_wait || kind == Kind::wait; }
};

std::uint32_t count_of(std::uint8_t a) {
  constexpr std::uint32_t kSpecial[] = {0, kMbarrierMaxCount, kMbarrierMaxCount + 1, 32, 64, 33, 96, 1};
  return a < 248 ? 1 + a % 40 : kSpecial[a - 248];
}
std::uint32_t bytes_of(std::uint8_t a) {
  constexpr auto kMaxTx = static_cast<std::uint32_t>(kMbarrierMaxTx);
  constexpr std::uint32_t kSpecial[] = {1, 8, 24, 48, 1u << 15, kMaxTx, kMaxTx + 1, 0};
  return a < 248 ? (a % 32) * 16 : kSpecial[a - 248];
}

}  // namespace

namespace wspipe::fuzz {
namespace {

class MbarSim final : public Lockstep {
 public:
  MbarSim(std::vector<std::vector<Op>> progs, bool spurious)
      : expected(progs.size()),
        actual(progs.size()),
        progs_(std::move(progs)),
        spurious_(spurious),
        smem_(sizeof(Smem), 0),
        bars_(smem_, static_cast<std::uint32_t>(progs_.size())),
        warps_(progs_.size()) {}

  void enabled(std::vector<std::uint32_t>& actors, std::vector<std::uint8_t>& spin) const override {
    actors.clear();
    spin.clear();
    for (std::uint32_t w = 0; w < warps_.size(); ++w) {
      const Warp& x = warps_[w];
      if (x.st == St::finished) continue;
      if (x.st == St::waiting && !bars_.done(w)) {
        if (!(spurious_ && progs_[w][x.pc].kind == Kind::try_wait)) continue;
        actors.push_back(w);
        spin.push_back(1);
        continue;
      }
      actors.push_back(w);
      spin.push_back(0);
    }
    // Nothing else can move: a try_wait's time limit runs out (it returns
    // false and its warp goes on); the programs are straight-line, so the
    // emulator's bound on time-outs in a row is never reached.
    if (actors.empty()) {
      for (std::uint32_t w = 0; w < warps_.size(); ++w) {
        const Warp& x = warps_[w];
        if (x.st != St::waiting || progs_[w][x.pc].kind != Kind::try_wait) continue;
        actors.push_back(w);
        spin.push_back(1);
      }
    }
  }

  void step(std::uint32_t w) override {
    Warp& x = warps_[w];
    if (x.st == St::at_op) {
      if (const char* r = perform(progs_[w][x.pc])) return violate(r);
      ++x.pc;
    } else if (x.st == St::waiting) {
      const bool ok = bars_.wait_end(w);
      if (progs_[w][x.pc].kind == Kind::try_wait) expected[w].push_back(ok);
      ++x.pc;
    }
    advance(w);
  }

  bool all_finished() const override {
    for (const Warp& x : warps_)
      if (x.st != St::finished) return false;
    return true;
  }

  std::string describe() const override {
    std::string s = std::string("spurious try_wait: ") + (spurious_ ? "on" : "off") + "\n";
    for (std::size_t w = 0; w < progs_.size(); ++w) {
      s += "warp " + std::to_string(w) + " (pc " + std::to_string(warps_[w].pc) + "):\n";
      for (const Op& op : progs_[w]) {
        s += std::string("  ") + kNames[static_cast<int>(op.kind)] + " " +
             (op.slot == kSlots ? std::string("outside") : "b[" + std::to_string(op.slot) + "]");
        if (op.is_wait())
          s += " parity " + std::to_string(op.parity) + (op.stated ? " phase " + std::to_string(op.phase) : "");
        else if (op.kind != Kind::inval) s += " " + std::to_string(op.value) + (op.lanes == 1 ? " elected" : " warp");
        s += "\n";
      }
    }
    return s + bars_.state();
  }

  const std::vector<std::vector<Op>>& programs() const { return progs_; }

  std::vector<std::vector<bool>> expected;  // try_wait results, per warp
  std::vector<std::vector<bool>> actual;

 private:
  enum class St : std::uint8_t { not_started, at_op, waiting, finished };
  struct Warp {
    St st = St::not_started;
    std::size_t pc = 0;
  };

  static std::uint32_t offset(const Op& op) {
    return op.slot == kSlots ? RefMbarriers::kOutside : op.slot * static_cast<std::uint32_t>(sizeof(SharedMemBarrier));
  }

  const char* perform(const Op& op) {
    switch (op.kind) {
      case Kind::init: return bars_.init(offset(op), op.value, op.lanes);
      case Kind::inval: return bars_.inval(offset(op));
      case Kind::arrive: return bars_.arrive(offset(op), op.lanes, 0);
      case Kind::arrive_tx: return bars_.arrive(offset(op), op.lanes, op.value);
      case Kind::expect_tx: return bars_.tx(offset(op), op.value, op.lanes);
      case Kind::complete_tx: return bars_.tx(offset(op), -std::int64_t{op.value}, op.lanes);
      case Kind::try_wait:
      case Kind::wait: break;
    }
    return nullptr;
  }

  // Runs warp w on to its next scheduling point: a wait makes its checks
  // and blocks there; past the last op the warp exits.
  void advance(std::uint32_t w) {
    Warp& x = warps_[w];
    if (x.pc == progs_[w].size()) {
      x.st = St::finished;
      if (all_finished())
        if (const char* r = bars_.exit_check()) violate(r);
      return;
    }
    const Op& op = progs_[w][x.pc];
    if (!op.is_wait()) {
      x.st = St::at_op;
      return;
    }
    x.st = St::waiting;
    if (const char* r = bars_.wait_begin(w, offset(op), op.parity, op.stated ? &op.phase : nullptr)) violate(r);
  }

  std::vector<std::vector<Op>> progs_;
  bool spurious_;
  std::vector<std::uint8_t> smem_;
  RefMbarriers bars_;
  std::vector<Warp> warps_;
};

}  // namespace
}  // namespace wspipe::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace wspipe::fuzz;
  Bytes in(data, size);
  const std::uint8_t head = in.u8();
  const std::uint32_t warps = 1 + (head & 3u);
  const bool spurious = (head & 4u) != 0;
  std::vector<std::vector<Op>> progs(warps);
  for (auto& p : progs) {
    const std::uint32_t n = in.u8() % 17;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint8_t k = in.u8(), a = in.u8(), b = in.u8();
      Op op;
      op.kind = static_cast<Kind>(k & 7u);
      op.lanes = (k & 8u) != 0 ? 32 : 1;
      op.slot = ((k >> 4) & 7u) % (kSlots + 1);
      op.parity = k >> 7;
      op.value = op.kind == Kind::init ? count_of(a) : bytes_of(a);
      // A wait states a phase number, from -2 to 13, where b's high nibble
      // is 0xc (which no wait of the older corpus has).
      op.stated = op.is_wait() && (b >> 4) == 0xc;
      op.phase = static_cast<std::int64_t>(b & 0x0fu) - 2;
      p.push_back(op);
    }
  }
  MbarSim sim(progs, spurious);
  SharedMemBarrier outside{};
  emu::LaunchConfig launch;
  launch.warps_per_cta = warps;
  launch.smem_bytes = sizeof(Smem);
  const auto body = [&] {
    auto& s = B::shared_storage<Smem>();
    const std::uint32_t w = B::warp_idx();
    for (const Op& op : sim.programs()[w]) {
      SharedMemBarrier& bar = op.slot == kSlots ? outside : s.b[op.slot];
      const auto act = [&](auto&& f) {
        if (op.lanes == 1)
          B::elect_one(f);
        else
          f();
      };
      switch (op.kind) {
        case Kind::init: act([&] { B::init(bar, op.value); }); break;
        case Kind::inval: act([&] { B::inval(bar); }); break;
        case Kind::arrive: act([&] { B::arrive(bar); }); break;
        case Kind::arrive_tx: act([&] { B::arrive_expect_tx(bar, op.value); }); break;
        case Kind::expect_tx: act([&] { B::expect_tx(bar, op.value); }); break;
        case Kind::complete_tx: act([&] { B::complete_tx(bar, op.value); }); break;
        case Kind::try_wait:
          sim.actual[w].push_back(op.stated ? B::try_wait(bar, op.parity, PhaseNumber{op.phase})
                                            : B::try_wait(bar, op.parity));
          break;
        case Kind::wait: op.stated ? B::wait(bar, op.parity, PhaseNumber{op.phase}) : B::wait(bar, op.parity); break;
      }
    }
  };
  run_lockstep(launch, body, sim, in.rest(), spurious, (head & 8u) != 0);
  check_observed(sim, sim.expected, sim.actual, "try_wait results");
  return 0;
}
