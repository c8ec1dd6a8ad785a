// The TMA model (and the mbarrier tx-count accounting it drives) against a
// reference: 1-2 warps of one CTA run straight-line programs of mbarrier
// operations (ref_mbarrier.hpp) and TMA tiled loads of three tensor maps
// made up from the input (good and bad: ranks 1-5, element types, extents,
// strides, boxes, swizzles, misaligned bases) into shared-memory
// destinations (aligned, misaligned, over the barriers), under a schedule
// taken from the input that also decides when the TMA engine delivers. The
// reference (below; docs/hardware.md "TMA", PTX "cp.async.bulk.tensor",
// cuTensorMapEncodeTiled's limits) is stepped in lock step
// (model_fuzz.hpp): movable actors, try_wait results, the shared-memory
// bytes each warp sees (every byte of every box: zero outside the tensor,
// swizzled by its address), and the outcome must agree.
//  - a load is issued by one lane, with a tensor map the instruction's rank
//    matches and cuTensorMapEncodeTiled accepts (base 16-byte aligned, dims
//    in [1, 2^32], box extents in [1, 256], strides non-zero multiples of 16
//    below 2^40, inner box a multiple of 16 bytes and within the swizzle
//    width), a destination aligned to 128 bytes (8 swizzle rows when
//    swizzled) whose box fits in shared memory, a barrier in shared memory,
//    a CTA mask within the cluster;
//  - the engine delivers loads in issue order: the box lands, then
//    complete_tx(box bytes) on the barrier at that offset, which must then
//    be a live barrier;
//  - the CTA must not exit with a load in flight or tx-count left.
//
// Input: byte 0: warps - 1 (bit 0), spurious try_wait (bit 1), race checker
// (bit 2), 96 more bytes of shared memory (bit 3); 3 maps of 8 bytes; per
// warp an op count (mod 17) and 3 bytes per op; the rest is the schedule.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/mbarrier_limits.hpp"
#include "fuzz/model_fuzz.hpp"
#include "fuzz/ref_mbarrier.hpp"

namespace {

using namespace wspipe;
using B = emu::EmuBackend;
using wspipe::fuzz::RefMbarriers;

constexpr std::uint32_t kSlots = 4;  // barriers at shared-memory offsets 0, 8, 16, 24
constexpr std::size_t kGlobalBytes = 1 << 16;
constexpr std::uint32_t kDsts[] = {128, 256, 1024, 2048, 0, 64, 3072, 1536};
constexpr std::uint32_t kMaps = 3;

enum class Kind : std::uint8_t { init, arrive_tx, expect_tx, complete_tx, try_wait, wait, load, inval };
constexpr const char* kNames[] = {"init", "arrive_expect_tx", "expect_tx", "complete_tx",
                                  "try_wait", "wait", "tma_load", "inval"};

struct Op {
  Kind kind = Kind::init;
  std::uint32_t lanes = 1;  // 1: inside elect_one; 32: at warp level
  std::uint32_t slot = 0;   // kSlots: a barrier outside shared memory
  std::uint32_t parity = 0;
  std::uint32_t value = 0;  // init: count; tx ops: bytes per lane
  // load
  std::uint32_t map = 0, dst = 0, rank = 2;
  int cta_group = 1;
  bool multicast = false;
  std::uint16_t mask = 1;
  TmaCoords coords{};
  bool fence = false;  // fence.proxy.async first (no effect here: no generic stores)
  bool is_wait() const { return kind == Kind::try_wait || kind == Kind::wait; }
};

// The global tensor every map reads: byte i is a pattern of i.
const std::vector<std::uint8_t>& global_bytes() {
  static const std::vector<std::uint8_t> g = [] {
    std::vector<std::uint8_t> v(kGlobalBytes + 64);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>((i * 131u + (i >> 8) * 7u + 1u) & 0xffu);
    return v;
  }();
  return g;
}

std::uint32_t ebytes(ElemType t) {
  switch (t) {
    case ElemType::u8:
    case ElemType::e4m3:
    case ElemType::e5m2: return 1;
    case ElemType::u16:
    case ElemType::f16:
    case ElemType::bf16: return 2;
    default: return 4;
  }
}

// A map from 8 bytes; its global extent always lies inside global_bytes()
// (a map past its tensor reads memory the emulator cannot know about).
TensorMap make_map(wspipe::fuzz::Bytes& in) {
  TensorMap m;
  const std::uint8_t h = in.u8();
  m.dtype = static_cast<ElemType>(h & 7u);
  const std::uint32_t ranks[] = {1, 2, 2, 3, 2, 4, 5, 0};
  m.rank = ranks[(h >> 3) & 7u];
  m.swizzle = static_cast<SmemSwizzle>(h >> 6);
  const std::uint8_t g = in.u8();
  m.global = global_bytes().data() + ((g & 0xf0u) == 0xf0u ? 8 : 0);
  const std::uint32_t eb = ebytes(m.dtype);
  std::uint64_t extent = eb;
  for (std::uint32_t i = 0; i < kTmaMaxRank; ++i) {
    const std::uint8_t d = i < 6 ? in.u8() : 0;
    // Box extents 1..32 (the inner one at least 16 bytes), or 0, 257, 3..6.
    m.box[i] = d < 240 ? 1u << (d % 6) : (d == 255 ? 0u : d == 254 ? 257u : 3u + d % 4);
    if (i == 0 && d < 240) m.box[0] = std::max<std::uint32_t>(m.box[0], 16 / eb);
    m.dims[i] = (g & 0x0fu) == 0x0fu && i == 0 ? 0 : 1 + (d * 7u + i) % 40;
    // Dense strides rounded up to 16 bytes, or one 8 bytes off.
    m.strides[i] = i == 0 ? eb : (extent + 15) / 16 * 16 + ((g & 0x0fu) == 0x0eu && i == 1 ? 8 : 0);
    extent = m.strides[i] * m.dims[i];
  }
  // Clamp: fold outer dimensions to 1 until the tensor fits the buffer.
  for (std::uint32_t i = kTmaMaxRank; i-- > 1;) {
    std::uint64_t e = eb * std::max<std::uint64_t>(m.dims[0], 1);
    for (std::uint32_t k = 1; k < std::min(m.rank, kTmaMaxRank); ++k) e = std::max(e, m.strides[k] * m.dims[k]);
    if (e <= kGlobalBytes) break;
    m.dims[i] = 1;
  }
  return m;
}

}  // namespace

namespace wspipe::fuzz {
namespace {

// cuTensorMapEncodeTiled's limits and the destination's, independently of
// core/tma.hpp and models.cpp: the rule broken, or nullptr.
bool map_ok(const TensorMap& m, std::uint32_t dst, std::size_t smem) {
  if (m.global == nullptr || reinterpret_cast<std::uintptr_t>(m.global) % 16 != 0) return false;
  if (m.rank < 1 || m.rank > 5) return false;
  const std::uint32_t eb = ebytes(m.dtype);
  std::uint64_t bytes = eb;
  for (std::uint32_t i = 0; i < m.rank; ++i) {
    if (m.dims[i] == 0 || m.dims[i] > (std::uint64_t{1} << 32) || m.box[i] == 0 || m.box[i] > 256) return false;
    if (i > 0 && (m.strides[i] == 0 || m.strides[i] % 16 != 0 || m.strides[i] >> 40 != 0)) return false;
    bytes *= m.box[i];
  }
  const std::uint32_t width = m.swizzle == SmemSwizzle::none ? 0 : 16u << static_cast<int>(m.swizzle);
  if (m.box[0] * eb % 16 != 0 || (width != 0 && m.box[0] * eb > width)) return false;
  if (dst % (width == 0 ? 128 : 8 * width) != 0) return false;
  return dst + bytes <= smem;
}

std::uint64_t box_bytes(const TensorMap& m) {
  std::uint64_t n = ebytes(m.dtype);
  for (std::uint32_t i = 0; i < m.rank; ++i) n *= m.box[i];
  return n;
}

// The swizzle: 16-byte chunk c of a 128-byte row r (of the shared-memory
// window) moves to chunk c ^ (r % (width / 16)).
std::uint32_t swizzled(SmemSwizzle s, std::uint32_t addr) {
  if (s == SmemSwizzle::none) return addr;
  const std::uint32_t width = 16u << static_cast<int>(s);
  const std::uint32_t chunk = (addr >> 4) & 7u, row = (addr >> 7) & 7u;
  return (addr & ~0x70u) | (((chunk ^ (row & (width / 16 - 1))) & 7u) << 4);
}

class TmaSim final : public Lockstep {
 public:
  TmaSim(std::vector<std::vector<Op>> progs, std::vector<TensorMap> maps, std::size_t smem, bool spurious)
      : expected(progs.size()),
        actual(progs.size()),
        image(smem, 0),
        progs_(std::move(progs)),
        maps_(std::move(maps)),
        spurious_(spurious),
        bars_(image, static_cast<std::uint32_t>(progs_.size())),
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
    if (!queue_.empty()) {
      actors.push_back(static_cast<std::uint32_t>(warps_.size()));  // CTA 0's TMA engine
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

  void step(std::uint32_t a) override {
    if (a == warps_.size()) return deliver();
    Warp& x = warps_[a];
    if (x.st == St::at_op) {
      if (const char* r = perform(progs_[a][x.pc])) return violate(r);
      ++x.pc;
    } else if (x.st == St::waiting) {
      const bool ok = bars_.wait_end(a);
      if (progs_[a][x.pc].kind == Kind::try_wait) expected[a].push_back(ok);
      ++x.pc;
    }
    advance(a);
  }

  bool all_finished() const override {
    for (const Warp& x : warps_)
      if (x.st != St::finished) return false;
    return true;
  }

  std::string describe() const override {
    std::string s = "shared memory " + std::to_string(image.size()) + " bytes\n";
    for (std::size_t i = 0; i < maps_.size(); ++i) {
      const TensorMap& m = maps_[i];
      s += "map " + std::to_string(i) + ": type " + std::to_string(static_cast<int>(m.dtype)) + " rank " +
           std::to_string(m.rank) + " swizzle " + to_string(m.swizzle) + " base+" +
           std::to_string(static_cast<const std::uint8_t*>(m.global) - global_bytes().data()) + "\n";
      for (std::uint32_t k = 0; k < kTmaMaxRank; ++k)
        s += "  dim " + std::to_string(m.dims[k]) + " stride " + std::to_string(m.strides[k]) + " box " +
             std::to_string(m.box[k]) + "\n";
    }
    for (std::size_t w = 0; w < progs_.size(); ++w) {
      s += "warp " + std::to_string(w) + " (pc " + std::to_string(warps_[w].pc) + "):\n";
      for (const Op& op : progs_[w]) {
        s += std::string("  ") + kNames[static_cast<int>(op.kind)] + " " +
             (op.slot == kSlots ? std::string("outside") : "b[" + std::to_string(op.slot) + "]");
        if (op.is_wait()) s += " parity " + std::to_string(op.parity);
        if (op.kind == Kind::load) {
          s += " map " + std::to_string(op.map) + " rank " + std::to_string(op.rank) + " dst " + std::to_string(op.dst) +
               " coords";
          for (const std::int32_t c : op.coords.c) s += " " + std::to_string(c);
          if (op.cta_group == 2) s += " cta_group::2";
          if (op.multicast) s += " multicast " + std::to_string(op.mask);
        } else if (!op.is_wait() && op.kind != Kind::inval) {
          s += " " + std::to_string(op.value);
        }
        s += op.lanes == 1 ? " elected\n" : " warp\n";
      }
    }
    return s + bars_.state();
  }

  const std::vector<std::vector<Op>>& programs() const { return progs_; }
  const std::vector<TensorMap>& maps() const { return maps_; }

  std::vector<std::vector<bool>> expected, actual;  // try_wait results, per warp
  std::vector<std::uint8_t> image;                  // the CTA's shared memory as the reference has it

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
      case Kind::arrive_tx: return bars_.arrive(offset(op), op.lanes, op.value);
      case Kind::expect_tx: return bars_.tx(offset(op), op.value, op.lanes);
      case Kind::complete_tx: return bars_.tx(offset(op), -std::int64_t{op.value}, op.lanes);
      case Kind::load: {
        const TensorMap& m = maps_[op.map];
        if (op.lanes != 1) return "tma.multi-lane";
        if (op.cta_group == 2) return "tma.no-cta-pair";
        if (op.rank != m.rank || !map_ok(m, op.dst, image.size())) return "tma.invalid";
        // The box starts on a 16-byte chunk of the row (the H100 traps
        // otherwise: docs/silicon.md).
        if (std::int64_t{op.coords.c[0]} * ebytes(m.dtype) % 16 != 0) return "tma.coord-misaligned";
        if (op.slot == kSlots) return "mbarrier.not-shared";
        if (op.multicast && op.mask != 1) return "cluster.bad-rank";
        queue_.push_back(&op);
        return nullptr;
      }
      case Kind::try_wait:
      case Kind::wait: break;
    }
    return nullptr;
  }

  // The oldest load lands: the box's bytes, then complete_tx on the
  // barrier now at its offset.
  void deliver() {
    const Op& op = *queue_.front();
    queue_.erase(queue_.begin());
    const TensorMap& m = maps_[op.map];
    const std::uint32_t eb = ebytes(m.dtype);
    const auto* global = static_cast<const std::uint8_t*>(m.global);
    const std::uint64_t n = box_bytes(m) / eb;
    for (std::uint64_t e = 0; e < n; ++e) {
      std::uint64_t rest = e, src = 0;
      bool inside = true;
      for (std::uint32_t d = 0; d < m.rank; ++d) {
        const std::int64_t at = op.coords.c[d] + static_cast<std::int64_t>(rest % m.box[d]);
        rest /= m.box[d];
        inside = inside && at >= 0 && static_cast<std::uint64_t>(at) < m.dims[d];
        if (inside) src += static_cast<std::uint64_t>(at) * (d == 0 ? eb : m.strides[d]);
      }
      const std::uint32_t to = swizzled(m.swizzle, static_cast<std::uint32_t>(op.dst + e * eb));
      if (to + eb > image.size()) {
        mismatch = "a TMA box element lands at smem+" + std::to_string(to) + ", past the " +
                   std::to_string(image.size()) + " bytes of shared memory the load was checked against";
        return;
      }
      for (std::uint32_t b = 0; b < eb; ++b) image[to + b] = inside ? global[src + b] : 0;
    }
    const std::int64_t id = bars_.at(op.slot * 8);
    if (id < 0) return violate("mbarrier.uninitialized");
    // More bytes than the phase still expects, every arrival in: silicon
    // would complete the phase partway through the copy (docs/silicon.md).
    const auto& bar = bars_.bars[static_cast<std::size_t>(id)];
    if (bar.pending == 0 && bar.tx > 0 && static_cast<std::int64_t>(box_bytes(m)) > bar.tx)
      return violate("mbarrier.tx-overshoot");
    if (const char* r = bars_.tx_on(static_cast<std::uint32_t>(id), -static_cast<std::int64_t>(box_bytes(m))))
      violate(r);
  }

  void advance(std::uint32_t w) {
    Warp& x = warps_[w];
    if (x.pc == progs_[w].size()) {
      x.st = St::finished;
      if (!all_finished()) return;
      if (!queue_.empty()) return violate("async.target-exited");
      if (const char* r = bars_.exit_check()) violate(r);
      return;
    }
    const Op& op = progs_[w][x.pc];
    if (!op.is_wait()) {
      x.st = St::at_op;
      return;
    }
    x.st = St::waiting;
    if (const char* r = bars_.wait_begin(w, offset(op), op.parity, nullptr)) violate(r);
  }

  std::vector<std::vector<Op>> progs_;
  std::vector<TensorMap> maps_;
  bool spurious_;
  RefMbarriers bars_;
  std::vector<Warp> warps_;
  std::vector<const Op*> queue_;  // issued loads, oldest first
};

template <std::uint32_t Rank>
void issue(const Op& op, const TensorMap& m, void* dst, SharedMemBarrier& bar) {
  if (op.multicast) {
    if (op.cta_group == 2)
      B::tma_load_multicast<2, Rank>(m, dst, bar, op.coords, op.mask);
    else
      B::tma_load_multicast<1, Rank>(m, dst, bar, op.coords, op.mask);
  } else if (op.cta_group == 2) {
    B::tma_load<2, Rank>(m, dst, bar, op.coords);
  } else {
    B::tma_load<1, Rank>(m, dst, bar, op.coords);
  }
}

}  // namespace
}  // namespace wspipe::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace wspipe::fuzz;
  Bytes in(data, size);
  const std::uint8_t head = in.u8();
  const std::uint32_t warps = 1 + (head & 1u);
  const bool spurious = (head & 2u) != 0;
  const std::size_t smem = 4096 + ((head & 8u) != 0 ? 96 : 0);
  std::vector<TensorMap> maps;
  for (std::uint32_t i = 0; i < kMaps; ++i) maps.push_back(make_map(in));
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
      // Counts up to one past the limit; bytes from 7 below the tx-count's limit to one past it.
      constexpr std::uint32_t kCounts[] = {1, 1, 2, 1, 32, 0, 64, kMbarrierMaxCount + 1};
      constexpr auto kMaxTx = static_cast<std::uint32_t>(kMbarrierMaxTx);
      op.value = op.kind == Kind::init ? kCounts[a & 7u] : a < 248 ? (a % 64) * 16 : kMaxTx - 7 + (a & 7u);
      op.map = a % kMaps;
      op.dst = kDsts[(a >> 2) & 7u];
      op.rank = maps[op.map].rank;
      if ((b & 0xc0u) == 0xc0u) {
        op.rank = 1 + b % 5;  // the instruction's rank, maybe not the map's
        op.cta_group = (b & 0x20u) != 0 ? 2 : 1;
        op.multicast = (b & 0x10u) != 0;
        op.mask = static_cast<std::uint16_t>(b & 3u);
      }
      for (std::uint32_t d = 0; d < kTmaMaxRank; ++d) {
        const std::uint32_t c = (b >> (d % 4)) & 0x1fu;
        op.coords.c[d] = (b & 0x80u) == 0 && d > 1 ? 0 : static_cast<std::int32_t>(c) - 8;
      }
      // Mostly an innermost coordinate on a 16-byte chunk (-1 to 2 chunks),
      // which the TMA accepts; otherwise any, so that tma.coord-misaligned
      // is exercised too.
      if ((b & 0x40u) == 0)
        op.coords.c[0] = (static_cast<std::int32_t>(b % 4) - 1) * static_cast<std::int32_t>(16 / ebytes(maps[op.map].dtype));
      op.fence = (b & 1u) != 0;
      p.push_back(op);
    }
  }
  TmaSim sim(progs, maps, smem, spurious);
  SharedMemBarrier outside{};
  emu::LaunchConfig launch;
  launch.warps_per_cta = warps;
  launch.smem_bytes = smem;
  const auto body = [&] {
    auto* s = static_cast<std::byte*>(static_cast<void*>(&B::shared_storage<std::array<std::byte, 4096>>()));
    const std::uint32_t w = B::warp_idx();
    // What this warp sees of shared memory must be the reference's image
    // (while the run is live: the reference stops at a violation).
    const auto same = [&] {
      // (A race the checker reported ends the run where the reference, which
      // does not model happens-before, goes on: what follows is teardown.)
      if (sim.rule.empty() && sim.mismatch.empty() && !emu::detail::RunningWarp::current().ended() &&
          std::memcmp(s, sim.image.data(), sim.image.size()) != 0)
        die(sim, "warp " + std::to_string(w) + " sees shared memory other than the reference's");
    };
    for (const Op& op : sim.programs()[w]) {
      SharedMemBarrier& bar = op.slot == kSlots ? outside : *reinterpret_cast<SharedMemBarrier*>(s + op.slot * 8);
      const auto act = [&](auto&& f) {
        if (op.lanes == 1)
          B::elect_one(f);
        else
          f();
      };
      switch (op.kind) {
        case Kind::init: act([&] { B::init(bar, op.value); }); break;
        case Kind::inval: act([&] { B::inval(bar); }); break;
        case Kind::arrive_tx: act([&] { B::arrive_expect_tx(bar, op.value); }); break;
        case Kind::expect_tx: act([&] { B::expect_tx(bar, op.value); }); break;
        case Kind::complete_tx: act([&] { B::complete_tx(bar, op.value); }); break;
        case Kind::try_wait: sim.actual[w].push_back(B::try_wait(bar, op.parity)); same(); break;
        case Kind::wait: B::wait(bar, op.parity); same(); break;
        case Kind::load: {
          if (op.fence) B::fence_proxy_async();
          const TensorMap& m = sim.maps()[op.map];
          void* dst = s + op.dst;
          act([&] {
            switch (op.rank) {
              case 1: issue<1>(op, m, dst, bar); break;
              case 2: issue<2>(op, m, dst, bar); break;
              case 3: issue<3>(op, m, dst, bar); break;
              case 4: issue<4>(op, m, dst, bar); break;
              default: issue<5>(op, m, dst, bar); break;
            }
          });
          break;
        }
      }
    }
    same();
  };
  run_lockstep(launch, body, sim, in.rest(), spurious, (head & 4u) != 0);
  check_observed(sim, sim.expected, sim.actual, "try_wait results");
  return 0;
}
