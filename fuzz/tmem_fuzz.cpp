// The Tensor Memory model against a reference: 1-4 warps of one CTA run
// straight-line programs of tcgen05.alloc / dealloc / relinquish_alloc_permit,
// tcgen05.ld / st in six shapes, wait::ld / wait::st and reads of a loaded
// fragment, with addresses read from shared memory where alloc wrote them
// (or made up), by the whole warp or one elected lane, under a schedule
// taken from the input. The reference (below; docs/hardware.md "Tensor
// Memory", PTX "Tensor Memory", "tcgen05.alloc", "tcgen05.ld") is stepped
// in lock step (model_fuzz.hpp): movable warps, the address each alloc
// writes, and the outcome must agree.
//  - alloc/dealloc/relinquish/ld/st/wait are warp-collective; cta_group::2
//    needs a CTA pair; nCols a power of 2 in [32, 512]; the destination an
//    aligned word of shared memory; no alloc after relinquish, no larger
//    size than the previous allocation; an alloc blocks until an aligned
//    range of nCols free columns exists and takes the lowest (the model's
//    placement: aligned first fit); allocations never overlap;
//  - dealloc names a live allocation's base (lane 0) and size, with no
//    tcgen05.ld/st of those columns still not waited for;
//  - ld/st touch only the warp's lane quarter (32 * (warp % 4)) and
//    columns inside one live allocation; a fragment's registers are read
//    only after wait::ld; nothing is left allocated when the CTA exits.
// The race checker is off here: the ordering of a dealloc after other
// warps' accesses (tmem.dealloc-unordered, race.tmem) is not modelled by
// this reference; tests/emu_tmem_test.cpp covers it.
//
// Input: byte 0: warps - 1 (bits 0-1); then per warp an op count (mod 17)
// and 3 bytes per op; the rest is the schedule.
#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "fuzz/model_fuzz.hpp"

namespace {

using namespace wspipe;
using B = emu::EmuBackend;

constexpr std::uint32_t kSlots = 4;
struct Smem {
  std::uint32_t slot[kSlots];  // where allocs write, and ld/st/dealloc read, TMEM addresses
};

enum class Kind : std::uint8_t { alloc, dealloc, relinquish, ld, st, wait_ld, wait_st, read };
constexpr const char* kNames[] = {"alloc", "dealloc", "relinquish", "ld", "st", "wait::ld", "wait::st", "read"};

// The tcgen05.ld/st shapes the target uses.
struct Shape {
  TmemShape shape;
  std::uint32_t num, half_split;
};
constexpr Shape kShapes[] = {{TmemShape::s32x32b, 1, 0},  {TmemShape::s32x32b, 4, 0},  {TmemShape::s16x64b, 2, 0},
                             {TmemShape::s16x128b, 1, 0}, {TmemShape::s16x256b, 1, 0}, {TmemShape::s16x32bx2, 1, 8}};
constexpr std::uint32_t kNumShapes = 6;

struct Op {
  Kind kind = Kind::alloc;
  std::uint32_t lanes = 32;   // 1: inside elect_one
  int cta_group = 1;
  std::uint32_t slot = 0;     // alloc: destination (kSlots: outside shared memory, kSlots+1: misaligned)
  bool from_slot = true;      // dealloc/ld/st: the address is slot[slot] + addr; else addr alone
  std::uint32_t addr = 0;     // an offset (lane << 16 | column), or a whole address
  std::uint32_t cols = 32;    // alloc/dealloc
  std::uint32_t shape = 0;    // ld/st: index into kShapes
};

std::uint32_t cols_of(std::uint8_t a) {
  constexpr std::uint32_t kSpecial[] = {0, 48, 1024, 16, 31, 96, 256, 512};
  return a < 224 ? 32u << (a % 5) : kSpecial[a % 8];
}

}  // namespace

namespace wspipe::fuzz {
namespace {

class TmemSim final : public Lockstep {
 public:
  explicit TmemSim(std::vector<std::vector<Op>> progs)
      : expected(progs.size()), actual(progs.size()), progs_(std::move(progs)), warps_(progs_.size()) {}

  void enabled(std::vector<std::uint32_t>& actors, std::vector<std::uint8_t>& spin) const override {
    actors.clear();
    spin.clear();
    for (std::uint32_t w = 0; w < warps_.size(); ++w) {
      const Warp& x = warps_[w];
      if (x.st == St::finished || (x.st == St::alloc_wait && first_fit(progs_[w][x.pc].cols) < 0)) continue;
      actors.push_back(w);
      spin.push_back(0);
    }
  }

  void step(std::uint32_t w) override {
    Warp& x = warps_[w];
    if (x.st == St::at_op) {
      if (const char* r = perform(w, progs_[w][x.pc])) return violate(r);
      if (x.st == St::alloc_wait) return;
    } else if (x.st == St::alloc_wait) {
      do_alloc(w, progs_[w][x.pc]);
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
    std::string s;
    for (std::size_t w = 0; w < progs_.size(); ++w) {
      s += "warp " + std::to_string(w) + " (pc " + std::to_string(warps_[w].pc) + "):\n";
      for (const Op& op : progs_[w]) {
        s += std::string("  ") + kNames[static_cast<int>(op.kind)] + (op.lanes == 1 ? " elected" : "") +
             (op.cta_group == 2 ? " cta_group::2" : "");
        if (op.kind == Kind::alloc) s += " " + std::to_string(op.cols) + " cols -> slot " + std::to_string(op.slot);
        if (op.kind == Kind::dealloc || op.kind == Kind::ld || op.kind == Kind::st)
          s += std::string(" addr ") + (op.from_slot ? "slot " + std::to_string(op.slot) + " + " : "") + hex(op.addr);
        if (op.kind == Kind::dealloc) s += " " + std::to_string(op.cols) + " cols";
        if (op.kind == Kind::ld || op.kind == Kind::st) s += " shape #" + std::to_string(op.shape);
        s += "\n";
      }
    }
    for (const Block& b : live_) s += "  live [" + std::to_string(b.col) + ", +" + std::to_string(b.cols) + ")\n";
    return s;
  }

  const std::vector<std::vector<Op>>& programs() const { return progs_; }

  std::vector<std::vector<std::uint32_t>> expected;  // per warp: the address each alloc wrote
  std::vector<std::vector<std::uint32_t>> actual;

 private:
  enum class St : std::uint8_t { not_started, at_op, alloc_wait, finished };
  struct Warp {
    St st = St::not_started;
    std::size_t pc = 0;
    std::uint32_t operand = 0;  // the address the op at pc uses (read before its scheduling point)
    std::uint64_t ld_issued = 0, ld_waited = 0, st_issued = 0, st_waited = 0;
    std::uint32_t pend0 = 0, pend1 = 0;  // columns of the ld/st not yet waited for
    std::uint64_t frag = 0;              // the ld that filled the last fragment (0: none)
  };
  struct Block {
    std::uint32_t col, cols;
  };

  std::int64_t first_fit(std::uint32_t cols) const {
    for (std::uint32_t col = 0; col + cols <= kTmemColumns; col += cols) {
      const bool taken =
          std::any_of(live_.begin(), live_.end(), [&](const Block& b) { return col < b.col + b.cols && b.col < col + cols; });
      if (!taken) return col;
    }
    return -1;
  }

  void do_alloc(std::uint32_t w, const Op& op) {
    const auto col = static_cast<std::uint32_t>(first_fit(op.cols));
    live_.push_back({col, op.cols});
    last_alloc_cols_ = op.cols;
    slots_[op.slot] = tmem_addr(0, col);
    expected[w].push_back(slots_[op.slot]);
  }

  const char* perform(std::uint32_t w, const Op& op) {
    Warp& x = warps_[w];
    if (op.kind == Kind::read) return nullptr;  // not a scheduling point (advance did it)
    if (op.lanes != 32) return "tmem.partial-warp";
    switch (op.kind) {
      case Kind::alloc: {
        if (op.cta_group == 2) return "tcgen05.no-cta-pair";
        if (op.cols < 32 || op.cols > 512 || (op.cols & (op.cols - 1)) != 0) return "tmem.alloc-size";
        if (op.slot >= kSlots) return "tmem.alloc-dst";
        if (relinquished_) return "tmem.alloc-after-relinquish";
        if (last_alloc_cols_ != 0 && op.cols > last_alloc_cols_) return "tmem.alloc-size-increase";
        if (first_fit(op.cols) < 0) {
          x.st = St::alloc_wait;
          return nullptr;
        }
        do_alloc(w, op);
        return nullptr;
      }
      case Kind::relinquish:
        if (op.cta_group == 2) return "tcgen05.no-cta-pair";
        relinquished_ = true;
        return nullptr;
      case Kind::dealloc: {
        if (op.cta_group == 2) return "tcgen05.no-cta-pair";
        const std::uint32_t col = tmem_col(x.operand);
        if (tmem_lane(x.operand) != 0) return "tmem.dealloc-unallocated";
        const auto it =
            std::find_if(live_.begin(), live_.end(), [&](const Block& b) { return b.col == col && b.cols == op.cols; });
        if (it == live_.end()) return "tmem.dealloc-unallocated";
        for (const Warp& y : warps_) {
          const bool pending = y.ld_waited < y.ld_issued || y.st_waited < y.st_issued;
          if (pending && y.pend0 < col + op.cols && col < y.pend1) return "tmem.dealloc-in-flight";
        }
        live_.erase(it);
        return nullptr;
      }
      case Kind::ld:
      case Kind::st: {
        const Shape& sh = kShapes[op.shape];
        const std::uint32_t lane = tmem_lane(x.operand), col = tmem_col(x.operand);
        const std::uint32_t quarter = 32 * (w % 4), n = sh.shape == TmemShape::s32x32b ? 32u : 16u;
        const std::uint32_t cols = sh.num * tmem_shape_cols(sh.shape) + sh.half_split;
        if (lane < quarter || lane + n > quarter + 32) return "tmem.lane-quarter";
        const bool covered = std::any_of(live_.begin(), live_.end(),
                                         [&](const Block& b) { return col >= b.col && col + cols <= b.col + b.cols; });
        if (col + cols > kTmemColumns || !covered) return "tmem.unallocated-access";
        if (x.ld_waited == x.ld_issued && x.st_waited == x.st_issued) x.pend0 = x.pend1 = col;
        x.pend0 = std::min(x.pend0, col);
        x.pend1 = std::max(x.pend1, col + cols);
        if (op.kind == Kind::ld)
          x.frag = ++x.ld_issued;
        else
          ++x.st_issued;
        return nullptr;
      }
      default: return nullptr;
    }
  }

  // Runs warp w on to its next scheduling point: wait::ld/st and fragment
  // reads are not scheduling points; the next op's address is read here.
  void advance(std::uint32_t w) {
    Warp& x = warps_[w];
    for (; x.pc < progs_[w].size(); ++x.pc) {
      const Op& op = progs_[w][x.pc];
      if (op.kind == Kind::wait_ld || op.kind == Kind::wait_st) {
        if (op.lanes != 32) return violate("tmem.partial-warp");
        if (op.kind == Kind::wait_ld)
          x.ld_waited = x.ld_issued;
        else
          x.st_waited = x.st_issued;
        continue;
      }
      if (op.kind == Kind::read) {
        if (x.frag > x.ld_waited) return violate("tmem.ld-without-wait");
        continue;
      }
      x.operand = op.from_slot && op.slot < kSlots ? slots_[op.slot] + op.addr : op.addr;
      x.st = St::at_op;
      return;
    }
    x.st = St::finished;
    if (all_finished() && !live_.empty()) violate("tmem.leak");
  }

  std::vector<std::vector<Op>> progs_;
  std::vector<Warp> warps_;
  std::vector<Block> live_;
  std::uint32_t slots_[kSlots] = {};
  bool relinquished_ = false;
  std::uint32_t last_alloc_cols_ = 0;
};

template <std::size_t I>
void load_store(const Op& op, std::uint32_t addr, std::variant<emu::EmuFrag<1>, emu::EmuFrag<2>, emu::EmuFrag<4>>& last) {
  constexpr Shape sh = kShapes[I];
  if (op.kind == Kind::ld) {
    last = B::tmem_load<sh.shape, sh.num, sh.half_split>(addr);
  } else {
    const B::Frag<tmem_regs(sh.shape, sh.num)> f{};
    B::tmem_store<sh.shape, sh.num, sh.half_split>(addr, f);
  }
}

}  // namespace
}  // namespace wspipe::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace wspipe::fuzz;
  Bytes in(data, size);
  const std::uint8_t head = in.u8();
  const std::uint32_t warps = 1 + (head & 3u);
  std::vector<std::vector<Op>> progs(warps);
  for (auto& p : progs) {
    const std::uint32_t n = in.u8() % 17;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint8_t k = in.u8(), a = in.u8(), b = in.u8();
      Op op;
      op.kind = static_cast<Kind>(k & 7u);
      op.lanes = (k & 8u) != 0 ? 1 : 32;
      op.cta_group = (k & 0xf0u) == 0xf0u ? 2 : 1;
      op.slot = ((k >> 4) & 3u);
      if (op.kind == Kind::alloc && (b & 0xe0u) == 0xe0u) op.slot = kSlots + (b & 1u);
      op.cols = cols_of(a);
      op.shape = b % kNumShapes;
      op.from_slot = (b & 0x80u) == 0;
      // An offset: lane (a quarter's first, its middle, or anywhere) and column.
      const std::uint32_t lanes[] = {0, 32, 64, 96, 16, 48, 127, 1};
      const std::uint32_t lane = lanes[(a >> 5) & 7u];
      const std::uint32_t col = op.from_slot ? (a & 31u) * 4 : (a & 31u) * 32;
      op.addr = tmem_addr(lane, col);
      p.push_back(op);
    }
  }
  TmemSim sim(progs);
  std::uint32_t outside = 0;
  emu::LaunchConfig launch;
  launch.warps_per_cta = warps;
  launch.smem_bytes = sizeof(Smem);
  const auto body = [&] {
    auto& s = B::shared_storage<Smem>();
    const std::uint32_t w = B::warp_idx();
    std::variant<emu::EmuFrag<1>, emu::EmuFrag<2>, emu::EmuFrag<4>> last;
    for (const Op& op : sim.programs()[w]) {
      const auto act = [&](auto&& f) {
        if (op.lanes == 1)
          B::elect_one(f);
        else
          f();
      };
      const std::uint32_t addr = op.from_slot && op.slot < kSlots ? s.slot[op.slot] + op.addr : op.addr;
      switch (op.kind) {
        case Kind::alloc: {
          std::uint32_t* dst = op.slot < kSlots ? &s.slot[op.slot]
                               : op.slot == kSlots
                                   ? &outside
                                   : reinterpret_cast<std::uint32_t*>(reinterpret_cast<std::byte*>(&s.slot[0]) + 2);
          act([&] {
            if (op.cta_group == 2)
              B::tmem_alloc<2>(dst, op.cols);
            else
              B::tmem_alloc<1>(dst, op.cols);
          });
          if (op.slot < kSlots) sim.actual[w].push_back(s.slot[op.slot]);
          break;
        }
        case Kind::dealloc:
          act([&] {
            if (op.cta_group == 2)
              B::tmem_dealloc<2>(addr, op.cols);
            else
              B::tmem_dealloc<1>(addr, op.cols);
          });
          break;
        case Kind::relinquish:
          act([&] {
            if (op.cta_group == 2)
              B::tmem_relinquish<2>();
            else
              B::tmem_relinquish<1>();
          });
          break;
        case Kind::ld:
        case Kind::st:
          act([&] {
            switch (op.shape) {
              case 0: load_store<0>(op, addr, last); break;
              case 1: load_store<1>(op, addr, last); break;
              case 2: load_store<2>(op, addr, last); break;
              case 3: load_store<3>(op, addr, last); break;
              case 4: load_store<4>(op, addr, last); break;
              default: load_store<5>(op, addr, last); break;
            }
          });
          break;
        case Kind::wait_ld: act([&] { B::tmem_wait_load(); }); break;
        case Kind::wait_st: act([&] { B::tmem_wait_store(); }); break;
        case Kind::read:
          B::elect_one([&] { std::visit([](const auto& f) { (void)f.reg(0); }, last); });
          break;
      }
    }
  };
  run_lockstep(launch, body, sim, in.rest(), false, false);
  check_observed(sim, sim.expected, sim.actual, "the TMEM addresses alloc wrote");
  return 0;
}
