// core/output_pipeline.hpp on the emulator: OutputTilePipeline (alias
// OutputRingBuffer) between an MMA warp and four epilogue warps over TMEM
// accumulator stages, for cta_group 1 and 2 and several stage counts
// (docs/pipeline-api.md "OutputTilePipeline").
//
// Layout: 6 warps per CTA, warps 0-3 epilogue (lane quarters 0-3), warp 4
// writes the MMA operands (the load warp's slot), warp 5 MMA. For
// cta_group 2 the cluster is one CTA pair and only the leader's (rank 0)
// MMA warp runs the pipeline's producer side, as in MAX.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/output_pipeline.hpp"
#include "core/tcgen05.hpp"
#include "core/tmem.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::ElemType;
using wspipe::InstrDescriptor;
using wspipe::MmaKind;
using wspipe::OutputPipelineConfig;
using wspipe::SharedMemBarrier;
using wspipe::SmemDescriptor;
using wspipe::SmemSwizzle;
using wspipe::SmemView;
using wspipe::tmem_addr;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::with_strategy;

constexpr std::uint32_t kWarps = 6, kMmaWarp = 5, kOperandWarp = 4;
constexpr std::uint32_t kN = 32;  // columns of D each tile's MMA writes
constexpr std::uint32_t kK = 16;  // one bf16 MMA
constexpr std::uint32_t kMaxTiles = 16;
constexpr int kMaxStages = 4;

// A: 128 rows x K of 1.0; B of tile t: N rows x K of (t + 1). So tile t's
// D is 16 * (t + 1) in every cell, different for every tile: an epilogue
// that reads the wrong stage, or a stage before its MMA completed, sees
// another tile's value (or the race checker reports the read).
struct Smem {
  alignas(128) std::uint16_t a[128 * kK];
  alignas(128) std::uint16_t b[kMaxTiles][kN * kK];
  SharedMemBarrier accum[2 * kMaxStages];
  SharedMemBarrier dealloc;
  std::uint32_t tmem_addr;
};

// K-major, no swizzle: 8-row x 16-byte core matrices, the two along K 128
// bytes apart (LBO), 8-row groups 256 bytes apart (SBO); rows * 32 bytes.
std::uint64_t desc(const void* tile) {
  return SmemDescriptor{.start = B::smem_addr(tile), .lbo = 128, .sbo = 256, .swizzle = SmemSwizzle::none}.encode();
}
constexpr float tile_value(std::uint32_t t) { return 16.0f * static_cast<float>(t + 1); }

struct Variant {
  std::uint32_t tiles = 0;
  bool mma = true;          // real TMEM and MMAs; else commits after no MMA and a made-up TMEM base
  bool scoped = false;      // producer() / consumer() instead of acquire_* / release_*
  bool arrive_empty = true; // false: docs/hardware.md bug 3, the epilogue never frees a stage
  std::uint32_t fake_base = tmem_addr(0, 64);
};

// What each warp saw, per tile: the stage index, its TMEM offset and the
// parity its wait used.
struct Seen {
  std::uint32_t index, offset, phase;
  friend bool operator==(const Seen&, const Seen&) = default;
  friend void PrintTo(const Seen& s, std::ostream* os) {
    *os << "{index " << s.index << ", offset " << s.offset << ", phase " << s.phase << "}";
  }
};
struct Record {
  std::vector<Seen> warp[2][kWarps];
  std::uint32_t tmem_base[2] = {0, 0};
  std::uint32_t producer_line = 0, marker_line = 0;
};

template <OutputPipelineConfig Opc>
void kernel(const Variant& v, Record& rec) {
  using Pipe = wspipe::OutputTilePipeline<B, Opc>;
  using Tmem = typename Pipe::Tmem;
  using Dealloc = wspipe::TmemDeallocBarrier<B, Opc.cta_group>;
  constexpr int G = Opc.cta_group;
  auto& s = B::shared_storage<Smem>();
  const std::uint32_t w = B::warp_idx(), rank = B::cta_rank();
  auto& seen = rec.warp[rank][w];

  if (w == kMmaWarp) {
    Pipe::init_barriers(s.accum);
    Dealloc(&s.dealloc).init();
    B::fence_init();
  } else if (w == kOperandWarp && v.mma) {
    SmemView<B, std::uint16_t> a(s.a, 128 * kK), b(&s.b[0][0], kMaxTiles * kN * kK);
    B::elect_one([&] {
      std::fill_n(a.write_range(0, a.size()), a.size(), wspipe::float_to_bf16(1.0f));
      for (std::uint32_t t = 0; t < kMaxTiles; ++t)
        std::fill_n(b.write_range(t * kN * kK, kN * kK), kN * kK, wspipe::float_to_bf16(static_cast<float>(t + 1)));
    });
    B::fence_proxy_async();  // the tensor core reads what these ordinary stores wrote
  }
  B::cluster_sync();
  const std::uint16_t mask = G == 2 ? 0b11 : 0;

  if (w == kMmaWarp) {
    const Tmem tmem = v.mma ? Tmem::allocate(&s.tmem_addr) : Tmem(v.fake_base);
    rec.tmem_base[rank] = tmem.addr();
    if (v.mma) B::named_arrive(1, 160);
    Pipe out(s.accum, tmem, mask);
    const std::uint32_t idesc =
        InstrDescriptor{.a = ElemType::bf16, .b = ElemType::bf16, .m = 128u * G, .n = kN}.encode();
    auto issue = [&](std::uint32_t d, std::uint32_t t) {
      if (v.mma) B::elect_one([&] { B::mma<MmaKind::f16, G>(d, desc(s.a), desc(s.b[t]), idesc, false); });
    };
    if (rank == 0) {  // the leader issues for the pair
      for (std::uint32_t t = 0; t < v.tiles; ++t) {
        if (v.scoped) {
          rec.producer_line = __LINE__; auto p = out.producer();
          seen.push_back({p.index(), p.tmem().offset(), out.get_pipeline().producer_state().phase()});
          issue(p.tmem().offset(), t);
          rec.marker_line = __LINE__; B::syncwarp();  // still inside the scope: no commit yet
        } else {
          const auto st = out.acquire_for_mma();
          seen.push_back({st.index, st.tmem.offset(), out.get_pipeline().producer_state().phase()});
          issue(st.tmem.offset(), t);
          out.release_from_mma(st);
        }
      }
    }
    if (v.mma) Dealloc(&s.dealloc).complete_dealloc(tmem);
  } else if (w < 4) {
    if (v.mma) B::named_sync(1, 160);
    const Tmem tmem = v.mma ? Tmem::from_shared(&s.tmem_addr) : Tmem(v.fake_base);
    Pipe out(s.accum, tmem, mask);
    // Every register of the warp's rows 0-31, columns [0, N) of the stage,
    // holds tile t's value.
    auto check = [&](const typename Pipe::Stage& st, std::uint32_t t) {
      if (!v.mma) return;
      const auto upper = st.tmem.template load_upper<B, kN / 8>();
      const auto lower = st.tmem.template load_lower<B, kN / 8>();
      Pipe::Stage::Tmem::template wait_load<B>();
      const std::uint32_t want = std::bit_cast<std::uint32_t>(tile_value(t));
      B::for_each_lane([&](std::uint32_t) {
        for (std::uint32_t r = 0; r < kN / 2; ++r)
          B::check(upper.reg(r) == want && lower.reg(r) == want, "the stage holds this tile's accumulator");
      });
    };
    for (std::uint32_t t = 0; t < v.tiles; ++t) {
      if (v.scoped) {
        auto c = out.consumer();
        seen.push_back({c.index(), c.tmem().offset(), out.get_pipeline().consumer_state().phase()});
        check(c.stage(), t);
        if (v.arrive_empty) c.arrive_empty();
      } else {
        const auto st = out.acquire_for_epilogue();
        seen.push_back({st.index, st.tmem.offset(), out.get_pipeline().consumer_state().phase()});
        check(st, t);
        if (v.arrive_empty) out.arrive_empty(st);
        out.release_from_epilogue();
      }
    }
    if (v.mma) Dealloc(&s.dealloc).signal_complete();
  }
  // Without TMEM nothing keeps the leader CTA alive until the peer's
  // epilogue has made its last arrive_empty on the leader's barrier: in a
  // kernel the dealloc barrier does (each CTA's MMA warp waits for both
  // CTAs' epilogues before it deallocates and exits).
  if (!v.mma) B::cluster_sync();
}

template <OutputPipelineConfig Opc>
emu::RunResult run(const Variant& v, Record& rec, const emu::RunOptions& opts) {
  emu::LaunchConfig launch;
  launch.warps_per_cta = kWarps;
  launch.cluster_size = static_cast<std::uint32_t>(Opc.cta_group);
  launch.smem_bytes = sizeof(Smem);
  launch.warp_roles = {"epilogue", "epilogue", "epilogue", "epilogue", "operands", "mma"};
  return emu::run(launch, [&v, &rec] { kernel<Opc>(v, rec); }, opts);
}
template <OutputPipelineConfig Opc>
emu::RunResult run(const Variant& v, Record& rec, std::uint64_t seed) {
  return run<Opc>(v, rec, with_strategy(emu::StrategyKind::random, seed));
}

// ------------------------------------------------------------ configurations

template <OutputPipelineConfig C>
struct Cfg {
  static constexpr OutputPipelineConfig kOpc = C;
};
using Configs = ::testing::Types<Cfg<OutputPipelineConfig{1, 512, 1}>, Cfg<OutputPipelineConfig{2, 256, 1}>,
                                 Cfg<OutputPipelineConfig{3, 128, 1}>, Cfg<OutputPipelineConfig{4, 128, 1}>,
                                 Cfg<OutputPipelineConfig{1, 512, 2}>, Cfg<OutputPipelineConfig{2, 256, 2}>,
                                 Cfg<OutputPipelineConfig{4, 64, 2}>>;
struct ConfigNames {
  template <class T>
  static std::string GetName(int) {
    return "stages" + std::to_string(T::kOpc.num_stages) + "_stride" + std::to_string(T::kOpc.stage_stride_cols) +
           "_ctagroup" + std::to_string(T::kOpc.cta_group);
  }
};

template <class T>
class core_OutputTilePipeline : public ::testing::Test {};
TYPED_TEST_SUITE(core_OutputTilePipeline, Configs, ConfigNames);

// Which barrier of the pipeline a trace object is, from its name
// (init_barriers names them accum_full[i] and accum_empty[i]).
bool is_full(const emu::RunResult& r, const emu::Event& e) {
  return e.object >= 0 && r.trace.objects[e.object].name.rfind("accum_full[", 0) == 0;
}
bool is_empty(const emu::RunResult& r, const emu::Event& e) {
  return e.object >= 0 && r.trace.objects[e.object].name.rfind("accum_empty[", 0) == 0;
}
std::uint32_t num_warps(const emu::RunResult& r) { return r.trace.num_ctas * kWarps; }

// The expected per-tile view of a side that starts at `phase0`.
template <OutputPipelineConfig Opc>
std::vector<Seen> expected(std::uint32_t tiles, std::uint32_t base, std::uint32_t phase0) {
  std::vector<Seen> want;
  for (std::uint32_t t = 0; t < tiles; ++t) {
    const std::uint32_t i = t % Opc.num_stages;
    want.push_back({i, base + i * Opc.stage_stride_cols, phase0 ^ ((t / Opc.num_stages) & 1u)});
  }
  return want;
}

TYPED_TEST(core_OutputTilePipeline, TypesAndBarrierCounts) {
  constexpr OutputPipelineConfig Opc = TypeParam::kOpc;
  using Pipe = wspipe::OutputTilePipeline<B, Opc>;
  static_assert(std::is_same_v<wspipe::OutputRingBuffer<B, Opc>, Pipe>, "OutputRingBuffer is the older name");
  static_assert(Pipe::kNumBarriers == 2 * Opc.num_stages);
  static_assert(std::is_same_v<typename Pipe::Stage::Tmem,
                               wspipe::TmemStage<Opc.num_stages, Opc.stage_stride_cols, Opc.cta_group>>);
  static_assert(std::is_same_v<typename Pipe::Tmem, wspipe::TmemAllocation<B, Opc.cta_group, 512>>);
  Record rec;
  auto r = run<Opc>({.tiles = 0, .mma = false}, rec, 1);
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  // Per CTA: full[i] counts the one commit, empty[i] every epilogue thread
  // of the pair (128 * cta_group).
  std::size_t inits = 0;
  for (const auto& e : r.trace.events) {
    if (e.kind != emu::EventKind::init || r.trace.objects[e.object].name == "tmem_dealloc") continue;
    ++inits;
    ASSERT_TRUE(is_full(r, e) || is_empty(r, e)) << r.trace.describe(e);
    EXPECT_EQ(e.a, is_full(r, e) ? 1 : 128 * Opc.cta_group) << r.trace.describe(e);
  }
  EXPECT_EQ(inits, 2u * Opc.num_stages * Opc.cta_group);
}

// Over 3 * S + 1 tiles both sides visit stage t % S with the parity of its
// lap (producer from 1, consumer from 0), at TMEM offset base + index *
// stride. Commits after no MMA: the pipeline never touches TMEM itself, so
// a made-up base (column 64) shows the offsets are computed from it.
TYPED_TEST(core_OutputTilePipeline, StagesWrapWithTheirPhasesAndOffsets) {
  constexpr OutputPipelineConfig Opc = TypeParam::kOpc;
  constexpr int G = Opc.cta_group;
  const std::uint32_t tiles = 3 * Opc.num_stages + 1;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Record rec;
    auto r = run<Opc>({.tiles = tiles, .mma = false}, rec, seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    const std::uint32_t base = tmem_addr(0, 64);
    EXPECT_EQ(rec.warp[0][kMmaWarp], expected<Opc>(tiles, base, 1));
    EXPECT_TRUE(rec.warp[1][kMmaWarp].empty());  // for cta_group 2 the peer's MMA warp issues nothing
    for (int c = 0; c < G; ++c)
      for (std::uint32_t w = 0; w < 4; ++w)
        EXPECT_EQ(rec.warp[c][w], expected<Opc>(tiles, base, 0)) << "cta " << c << " warp " << w;

    // release_from_mma: one elected commit per tile, multicast to the pair
    // (mask 0b11) for cta_group 2, a plain commit (its own CTA) otherwise.
    const auto n = num_warps(r);
    std::size_t commits = 0, full_arrivals[2] = {0, 0}, empty_arrivals = 0, remote_empty = 0;
    for (const auto& e : r.trace.events) {
      if (e.kind == emu::EventKind::commit_issue) {
        ++commits;
        EXPECT_EQ(e.warp, static_cast<std::int32_t>(kMmaWarp));  // cta0's MMA warp
        EXPECT_EQ(e.a, G == 2 ? 0b11 : 0b01);
      }
      if (e.kind != emu::EventKind::arrive) continue;
      const std::uint32_t target = r.trace.objects[e.object].cta;
      if (static_cast<std::uint32_t>(e.warp) >= n) {  // the tensor core: a commit's arrive
        EXPECT_TRUE(is_full(r, e)) << r.trace.describe(e);
        EXPECT_EQ(e.a, 1);
        ++full_arrivals[target];
      } else {  // an epilogue warp: arrive_empty, to the leader's barrier
        EXPECT_TRUE(is_empty(r, e)) << r.trace.describe(e);
        EXPECT_EQ(target, 0u) << "accum-empty arrivals go to the leader CTA";
        EXPECT_EQ(e.a, 32);
        EXPECT_EQ(e.remote, static_cast<std::uint32_t>(e.warp) >= kWarps);
        ++empty_arrivals;
        remote_empty += e.remote;
      }
    }
    EXPECT_EQ(commits, tiles);
    EXPECT_EQ(full_arrivals[0], tiles);
    EXPECT_EQ(full_arrivals[1], G == 2 ? tiles : 0u);  // multicast: the peer's accum-full too
    EXPECT_EQ(empty_arrivals, tiles * 4u * G);
    EXPECT_EQ(remote_empty, G == 2 ? tiles * 4u : 0u);
  }
}

// Real MMAs: tile t's accumulator reaches every epilogue warp (of both CTAs
// for cta_group 2) in stage t % S, over two laps and a bit; the race
// checker orders each MMA after the loads of the stage's previous tile and
// each load after its MMA.
TYPED_TEST(core_OutputTilePipeline, AccumulatorsReachTheEpilogueInTheirStage) {
  constexpr OutputPipelineConfig Opc = TypeParam::kOpc;
  const std::uint32_t tiles = 2 * Opc.num_stages + 1;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    Record rec;
    auto r = run<Opc>({.tiles = tiles}, rec, seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_EQ(rec.tmem_base[0], tmem_addr(0, 0));
    EXPECT_EQ(rec.warp[0][kMmaWarp], expected<Opc>(tiles, 0, 1));
    for (int c = 0; c < Opc.cta_group; ++c)
      for (std::uint32_t w = 0; w < 4; ++w) EXPECT_EQ(rec.warp[c][w], expected<Opc>(tiles, 0, 0));
  }
}

// producer() / consumer(): entering acquires, leaving releases. The MMA
// warp's commit comes at the end of its scope (after the marker inside it),
// reported at the line that opened the scope; the consumer's scope steps
// its cursor, so consecutive scopes see consecutive stages.
TYPED_TEST(core_OutputTilePipeline, ScopedFormsReleaseOnScopeExit) {
  constexpr OutputPipelineConfig Opc = TypeParam::kOpc;
  const std::uint32_t tiles = 2 * Opc.num_stages + 1;
  for (bool mma : {false, true}) {
    Record rec;
    auto r = run<Opc>({.tiles = tiles, .mma = mma, .scoped = true}, rec, 2);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    const std::uint32_t base = mma ? tmem_addr(0, 0) : tmem_addr(0, 64);
    EXPECT_EQ(rec.warp[0][kMmaWarp], expected<Opc>(tiles, base, 1));
    for (int c = 0; c < Opc.cta_group; ++c)
      for (std::uint32_t w = 0; w < 4; ++w) EXPECT_EQ(rec.warp[c][w], expected<Opc>(tiles, base, 0));
    std::string order;
    for (const auto& e : r.trace.events) {
      if (e.warp != static_cast<std::int32_t>(kMmaWarp)) continue;
      if (e.kind == emu::EventKind::wait && is_empty(r, e)) order += 'W';
      if (e.kind == emu::EventKind::syncwarp && e.line == rec.marker_line) order += 'm';
      if (e.kind == emu::EventKind::commit_issue) {
        order += 'C';
        EXPECT_EQ(e.line, rec.producer_line) << "the scope's commit is reported where the scope opened";
      }
    }
    std::string want;
    for (std::uint32_t t = 0; t < tiles; ++t) want += "WmC";
    EXPECT_EQ(order, want);
  }
}

// release_from_epilogue only steps: an epilogue that never calls
// arrive_empty (docs/hardware.md bug 3) lets the MMA warp fill each stage
// once, then it waits on accum_empty[0] for ever, with none of the arrivals
// made. (Counted from the trace's successful waits: once the run has
// stopped, the emulator unwinds the warps and host-side records go on.)
TYPED_TEST(core_OutputTilePipeline, ReleaseFromEpilogueOnlyStepsSoSkippingArriveEmptyDeadlocks) {
  constexpr OutputPipelineConfig Opc = TypeParam::kOpc;
  for (bool scoped : {false, true}) {
    Record rec;
    auto r = run<Opc>({.tiles = Opc.num_stages + 2u, .mma = false, .scoped = scoped, .arrive_empty = false}, rec, 1);
    ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
    std::size_t mma_waits = 0, epilogue_waits[2][4] = {};
    for (const auto& e : r.trace.events) {
      if (e.kind != emu::EventKind::wait) continue;
      if (e.warp == static_cast<std::int32_t>(kMmaWarp) && is_empty(r, e)) ++mma_waits;
      if (is_full(r, e) && e.warp % kWarps < 4) ++epilogue_waits[e.warp / kWarps][e.warp % kWarps];
    }
    EXPECT_EQ(mma_waits, static_cast<std::size_t>(Opc.num_stages));
    for (int c = 0; c < Opc.cta_group; ++c)
      for (std::uint32_t w = 0; w < 4; ++w)
        EXPECT_EQ(epilogue_waits[c][w], static_cast<std::size_t>(Opc.num_stages)) << "cta " << c << " warp " << w;
    bool mma_blocked = false;
    const std::string count = std::to_string(128 * Opc.cta_group);
    for (const auto& b : r.blocked) {
      if (!contains(b.warp, "cta0/w5 mma")) continue;
      mma_blocked = true;
      EXPECT_EQ(b.object, "accum_empty[0] (cta0)");
      EXPECT_TRUE(contains(b.state, count + " of " + count + " arrivals pending")) << r.report();
    }
    EXPECT_TRUE(mma_blocked) << r.report();
  }
}

// Any number of tiles (none included), with or without real MMAs, explicit
// or scoped forms, under every scheduling strategy: the run ends ok and
// every warp sees tile t in stage t % S with its lap's parity.
template <OutputPipelineConfig Opc>
void check_any_schedule(std::uint32_t tiles, bool mma, bool scoped, emu::RunOptions opts) {
  Record rec;
  const auto r = run<Opc>({.tiles = tiles, .mma = mma, .scoped = scoped}, rec, opts);
  RC_ASSERT(r.status == emu::Status::ok);
  const std::uint32_t base = mma ? tmem_addr(0, 0) : tmem_addr(0, 64);
  RC_ASSERT(rec.warp[0][kMmaWarp] == expected<Opc>(tiles, base, 1));
  for (int c = 0; c < Opc.cta_group; ++c)
    for (std::uint32_t w = 0; w < 4; ++w) RC_ASSERT(rec.warp[c][w] == expected<Opc>(tiles, base, 0));
}

RC_GTEST_PROP(core_OutputTilePipelineProperty, EveryScheduleDeliversEachTileInItsStage, ()) {
  const auto tiles = *rc::gen::inRange<std::uint32_t>(0, kMaxTiles + 1);
  const bool mma = *rc::gen::arbitrary<bool>();
  const bool scoped = *rc::gen::arbitrary<bool>();
  auto opts = with_strategy(*rc::gen::element(emu::StrategyKind::random, emu::StrategyKind::pct,
                                              emu::StrategyKind::round_robin),
                            *rc::gen::arbitrary<std::uint64_t>());
  switch (*rc::gen::inRange(0, 5)) {
    case 0: check_any_schedule<OutputPipelineConfig{1, 512, 1}>(tiles, mma, scoped, opts); break;
    case 1: check_any_schedule<OutputPipelineConfig{2, 256, 1}>(tiles, mma, scoped, opts); break;
    case 2: check_any_schedule<OutputPipelineConfig{3, 160, 1}>(tiles, mma, scoped, opts); break;
    case 3: check_any_schedule<OutputPipelineConfig{2, 256, 2}>(tiles, mma, scoped, opts); break;
    default: check_any_schedule<OutputPipelineConfig{4, 128, 2}>(tiles, mma, scoped, opts); break;
  }
}

}  // namespace
