// core/input_pipeline.hpp on the emulator: InputTilePipeline, the TMA ->
// MMA ring of shared-memory tiles (docs/pipeline-api.md
// "InputTilePipeline"). A GEMM fed through the
// ring for several (NumGroupStages, KGroupSize), explicit and scoped forms,
// checked against a CPU reference and by the race checker; and drain(),
// which keeps a CTA from exiting while its peer's commits still target it
// (docs/hardware.md bug 15).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/input_pipeline.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"
#include "core/tmem.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::ElemType;
using wspipe::InstrDescriptor;
using wspipe::MmaKind;
using wspipe::SharedMemBarrier;
using wspipe::SmemDescriptor;
using wspipe::SmemSwizzle;
using wspipe::SmemView;
using wspipe::TensorMap;
using wspipe::tmem_addr;
using wspipe::TmemShape;
using wspipe::test::B;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

// ------------------------------------------------------------ the GEMM

// D (128 x 32, f32) = A (128 x K) * B^T (32 x K), bf16, K-major. Each tile
// of the ring is a 64-wide K block of A (16 KB) and of B (4 KB), 128-byte
// swizzled as TMA writes it. 2 * NumGroupStages + 1 group stages pass
// through the ring, so every slot is refilled while the MMAs of the lap
// before may still read it: only the tcgen05.commit on empty orders them.
// Warps: 0-3 epilogue, 4 load, 5 MMA.
constexpr std::uint32_t kM = 128, kN = 32, kBlockK = 64, kMaxTiles = 6;
constexpr std::uint32_t kATile = kM * kBlockK, kBTile = kN * kBlockK;  // elements
constexpr std::uint32_t kLoadWarp = 4, kMmaWarp = 5;

struct GemmSmem {
  alignas(1024) std::uint16_t a[kMaxTiles][kATile];
  alignas(1024) std::uint16_t b[kMaxTiles][kBTile];
  SharedMemBarrier input[2 * kMaxTiles];
  SharedMemBarrier accum_full, dealloc;
  std::uint32_t tmem_addr;
};

// The Payload: where tile i of the ring lives.
struct Tiles {
  std::uint16_t* a;
  std::uint16_t* b;
  std::uint16_t* a_tile(std::uint32_t i) const { return a + i * kATile; }
  std::uint16_t* b_tile(std::uint32_t i) const { return b + i * kBTile; }
};

// What a side of the ring saw per group stage: the stage and its tiles.
struct Seen {
  std::uint32_t index;
  std::vector<std::uint32_t> tiles;
  friend bool operator==(const Seen&, const Seen&) = default;
  friend void PrintTo(const Seen& s, std::ostream* os) {
    *os << "{index " << s.index << ", tiles";
    for (auto t : s.tiles) *os << " " << t;
    *os << "}";
  }
};

template <int G, int KG>
struct Gemm {
  using Pipe = wspipe::InputTilePipeline<B, Tiles, G, KG>;
  static_assert(Pipe::kNumTiles == G * KG && Pipe::kNumTiles <= static_cast<int>(kMaxTiles));
  static_assert(Pipe::kNumBarriers == 2 * G);
  static constexpr std::uint32_t kGroups = 2 * G + 1;
  static constexpr std::uint32_t kK = kGroups * KG * kBlockK;

  bool scoped = false;
  std::vector<std::uint16_t> a, b;  // row-major, M x K and N x K
  std::vector<float> d;             // M x N, from the epilogue
  TensorMap map_a, map_b;
  std::vector<Seen> loaded, consumed;

  explicit Gemm(bool scoped_forms) : scoped(scoped_forms) {
    a.resize(kM * kK);
    b.resize(kN * kK);
    d.assign(kM * kN, -1.0f);
    // Small integers: every product and sum is exact in f32.
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = wspipe::float_to_bf16(static_cast<float>(int(i * 7 % 5) - 2));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = wspipe::float_to_bf16(static_cast<float>(int(i * 3 % 7) - 3));
    map_a = map(a, kM);
    map_b = map(b, kN);
  }
  // Boxes of 128 bytes: one 128B-swizzled row.
  static TensorMap map(const std::vector<std::uint16_t>& g, std::uint32_t rows) {
    return wspipe::test::tensor_map_2d(g.data(), ElemType::bf16, kK, rows, kBlockK, rows, SmemSwizzle::b128);
  }
  static std::uint64_t desc(const void* tile, std::uint32_t k) {
    return SmemDescriptor{.start = B::smem_addr(tile) + k * 32, .lbo = 16, .sbo = 1024, .swizzle = SmemSwizzle::b128}
        .encode();
  }
  double ref(std::uint32_t i, std::uint32_t j) const {
    double s = 0;
    for (std::uint32_t k = 0; k < kK; ++k)
      s += double(wspipe::bf16_to_float(a[i * kK + k])) * wspipe::bf16_to_float(b[j * kK + k]);
    return s;
  }
  std::size_t mismatches() const {
    std::size_t bad = 0;
    for (std::uint32_t i = 0; i < kM; ++i)
      for (std::uint32_t j = 0; j < kN; ++j) bad += d[i * kN + j] != static_cast<float>(ref(i, j));
    return bad;
  }

  template <class Stage>
  static Seen seen(const Stage& st) {
    Seen s{st.index(), {}};
    for (std::uint32_t j = 0; j < KG; ++j) s.tiles.push_back(st.tile(j));
    return s;
  }

  // The load warp's work on an acquired stage: one elected arrive.expect_tx
  // for all of the stage's bytes, then a TMA load per tile into tile(j).
  template <class Stage>
  void load(const Stage& st, std::uint32_t g) {
    B::elect_one([&] {
      st.expect_bytes(KG * (kATile + kBTile) * 2);
      for (std::uint32_t j = 0; j < KG; ++j) {
        const wspipe::TmaCoords c{{static_cast<std::int32_t>((g * KG + j) * kBlockK), 0}};
        B::tma_load(map_a, st.payload().a_tile(st.tile(j)), st.full_mbar(), c);
        B::tma_load(map_b, st.payload().b_tile(st.tile(j)), st.full_mbar(), c);
      }
    });
  }
  // The MMA warp's: the stage's tiles into D, then an elected commit on empty.
  template <class Stage>
  void mma(const Stage& st, std::uint32_t g, std::uint32_t d_tmem) {
    const std::uint32_t idesc = InstrDescriptor{.a = ElemType::bf16, .b = ElemType::bf16, .m = kM, .n = kN}.encode();
    B::elect_one([&] {
      for (std::uint32_t j = 0; j < KG; ++j)
        for (std::uint32_t k = 0; k < kBlockK * 2 / 32; ++k)
          B::mma<MmaKind::f16, 1>(d_tmem, desc(st.payload().a_tile(st.tile(j)), k),
                                  desc(st.payload().b_tile(st.tile(j)), k), idesc, g > 0 || j > 0 || k > 0);
    });
    st.template commit<1>();
  }

  void kernel() {
    auto& s = B::shared_storage<GemmSmem>();
    const std::uint32_t w = B::warp_idx();
    const wspipe::TmemDeallocBarrier<B, 1> dealloc(&s.dealloc);
    using Tmem = wspipe::TmemAllocation<B, 1, kN>;
    if (w == kMmaWarp) {
      Pipe::init_barriers(s.input, 1);  // empty: the MMA warp's one commit
      B::elect_one([&] { B::init(s.accum_full, 1, {"accum_full"}); });
      dealloc.init();
      B::fence_init();
    }
    B::cluster_sync();
    Pipe pipe(s.input, Tiles{&s.a[0][0], &s.b[0][0]});
    if (w == kLoadWarp) {
      for (std::uint32_t g = 0; g < kGroups; ++g) {
        if (scoped) {
          auto st = pipe.producer();  // leaving the scope steps the cursor
          loaded.push_back(seen(st));
          load(st, g);
        } else {
          const auto st = pipe.acquire_producer();
          loaded.push_back(seen(st));
          load(st, g);
          st.release();
        }
      }
      pipe.drain();
    } else if (w == kMmaWarp) {
      const Tmem tmem = Tmem::allocate(&s.tmem_addr);
      B::named_arrive(1, 160);
      for (std::uint32_t g = 0; g < kGroups; ++g) {
        if (scoped) {
          auto st = pipe.consumer();
          consumed.push_back(seen(st));
          mma(st, g, tmem.addr());
        } else {
          const auto st = pipe.acquire_consumer();
          consumed.push_back(seen(st));
          mma(st, g, tmem.addr());
          st.release();
        }
      }
      B::elect_one([&] { B::mma_commit<1>(s.accum_full); });
      dealloc.complete_dealloc(tmem);
    } else if (w < 4) {
      B::named_sync(1, 160);
      const Tmem tmem = Tmem::from_shared(&s.tmem_addr);
      B::wait(s.accum_full, 0);
      auto f = B::tmem_load<TmemShape::s32x32b, kN>(tmem.address().offset(32 * w, 0).raw());
      B::tmem_wait_load();
      B::for_each_lane([&](std::uint32_t lane) {
        for (std::uint32_t j = 0; j < kN; ++j) d[(32 * w + lane) * kN + j] = wspipe::detail::float_from_bits(f.reg(j));
      });
      dealloc.signal_complete();
    }
  }

  emu::RunResult run(std::uint64_t seed) {
    emu::LaunchConfig launch;
    launch.warps_per_cta = 6;
    launch.smem_bytes = sizeof(GemmSmem);
    launch.warp_roles = {"epilogue", "epilogue", "epilogue", "epilogue", "load", "mma"};
    return emu::run(launch, [this] { kernel(); }, with_strategy(emu::StrategyKind::random, seed));
  }

  // Stage g % G, tiles index * KG + j: the same on both sides.
  static std::vector<Seen> expected() {
    std::vector<Seen> want;
    for (std::uint32_t g = 0; g < kGroups; ++g) {
      Seen s{g % G, {}};
      for (std::uint32_t j = 0; j < KG; ++j) s.tiles.push_back((g % G) * KG + j);
      want.push_back(s);
    }
    return want;
  }
};

template <int G, int KG>
struct Shape {
  static constexpr int kG = G, kKG = KG;
};
using Shapes = ::testing::Types<Shape<1, 1>, Shape<2, 1>, Shape<2, 2>, Shape<3, 2>, Shape<2, 3>>;
struct ShapeNames {
  template <class T>
  static std::string GetName(int) {
    return "stages" + std::to_string(T::kG) + "_kgroup" + std::to_string(T::kKG);
  }
};

template <class T>
class core_InputTilePipeline : public ::testing::Test {};
TYPED_TEST_SUITE(core_InputTilePipeline, Shapes, ShapeNames);

TYPED_TEST(core_InputTilePipeline, GemmThroughTheRingMatchesTheReference) {
  using G = Gemm<TypeParam::kG, TypeParam::kKG>;
  for (bool scoped : {false, true}) {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      G gemm(scoped);
      auto r = gemm.run(seed);
      ASSERT_EQ(r.status, emu::Status::ok) << r.report();
      EXPECT_EQ(gemm.mismatches(), 0u) << (scoped ? "scoped" : "explicit") << ", seed " << seed;
      EXPECT_EQ(gemm.loaded, G::expected());
      EXPECT_EQ(gemm.consumed, G::expected());
    }
  }
}

// The trace of one run: one expect_tx arrival per group stage, each load
// warp's acquire waits on empty (the first lap for free), and drain() waits
// for the last lap: no arrive lands on an empty barrier after the load
// warp has exited.
TYPED_TEST(core_InputTilePipeline, LoadWarpDrainsEveryCommitBeforeExiting) {
  using G = Gemm<TypeParam::kG, TypeParam::kKG>;
  G gemm(false);
  auto r = gemm.run(7);
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  std::size_t expect_arrivals = 0, load_waits = 0, empty_arrivals = 0;
  std::uint64_t load_exit = 0, last_empty_arrive = 0;
  for (const auto& e : r.trace.events) {
    const std::string obj = e.object >= 0 ? r.trace.objects[e.object].name : "";
    if (e.kind == emu::EventKind::arrive && obj.rfind("input_full[", 0) == 0) {
      EXPECT_EQ(e.a, 1) << "arrive.expect_tx is elected";
      ++expect_arrivals;
    }
    if (e.kind == emu::EventKind::arrive && obj.rfind("input_empty[", 0) == 0) {
      EXPECT_EQ(e.a, 1) << "the MMA warp's commit arrives once";
      ++empty_arrivals;
      last_empty_arrive = e.step;
    }
    if (e.kind == emu::EventKind::wait && e.warp == static_cast<std::int32_t>(kLoadWarp)) {
      EXPECT_EQ(obj.rfind("input_empty[", 0), 0u) << obj;
      ++load_waits;
    }
    if (e.kind == emu::EventKind::exit && e.warp == static_cast<std::int32_t>(kLoadWarp)) load_exit = e.step;
  }
  EXPECT_EQ(expect_arrivals, G::kGroups);
  EXPECT_EQ(empty_arrivals, G::kGroups);
  EXPECT_EQ(load_waits, G::kGroups + TypeParam::kG);  // one per acquire, one per stage drained
  EXPECT_GT(load_exit, last_empty_arrive);
}

// ------------------------------------------------------------ drain in a cluster

// Two CTAs (cta_group 1) that share their tiles, as MAX's CTAs of one
// cluster row share A: each CTA loads half of every tile and multicasts it
// into both CTAs (each CTA's full barrier expects the whole tile), and
// each CTA's MMA warp frees a slot with a commit multicast to both CTAs'
// empty barriers (empty count 2). drain() makes the load warp wait for the
// last lap of every slot, that is for both CTAs' last commits into its CTA.
struct DrainSmem {
  alignas(1024) std::uint8_t tile[2][16 * 64];
  SharedMemBarrier input[4];
};

emu::RunResult run_drain(bool drain, std::uint64_t seed, const TensorMap& map) {
  emu::LaunchConfig launch;
  launch.warps_per_cta = 2;
  launch.cluster_size = 2;
  launch.smem_bytes = sizeof(DrainSmem);
  launch.warp_roles = {"load", "mma"};
  using Pipe = wspipe::InputTilePipeline<B, std::uint8_t*, 2, 1>;
  return emu::run(launch, [drain, &map] {
    auto& s = B::shared_storage<DrainSmem>();
    if (B::warp_idx() == 1) {
      Pipe::init_barriers(s.input, 2);  // this CTA's commit and the peer's
      B::fence_init();
    }
    B::cluster_sync();
    Pipe pipe(s.input, &s.tile[0][0]);
    constexpr std::uint32_t kGroups = 5, kHalf = sizeof s.tile[0] / 2;
    const std::uint32_t rank = B::cta_rank();
    if (B::warp_idx() == 0) {
      for (std::uint32_t g = 0; g < kGroups; ++g) {
        const auto st = pipe.acquire_producer();
        B::elect_one([&] {
          st.expect_bytes(sizeof s.tile[0]);  // both halves
          B::tma_load_multicast(map, st.payload() + st.tile(0) * sizeof s.tile[0] + rank * kHalf, st.full_mbar(),
                                {{0, static_cast<std::int32_t>(16 * g + 8 * rank)}}, 0b11);
        });
        st.release();
      }
      if (drain) pipe.drain();
    } else {
      for (std::uint32_t g = 0; g < kGroups; ++g) {
        const auto st = pipe.acquire_consumer();
        st.commit<1>(0b11);  // after no MMA: it still arrives, on both CTAs
        st.release();
      }
    }
  }, with_strategy(emu::StrategyKind::random, seed));
}

TEST(core_InputTilePipelineDrain, DrainKeepsEachCtaAliveUntilEveryCommitIntoItLanded) {
  std::vector<std::uint8_t> g(64 * 128, 7);
  const TensorMap map = wspipe::test::tensor_map_2d(g.data(), ElemType::u8, 64, 128, 64, 8);  // boxes of half a tile
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    auto r = run_drain(true, seed, map);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    // Each CTA's load warp (warp 0 of the CTA) exits after every arrive on
    // that CTA's empty barriers, its own MMA's commits and the peer's.
    std::uint64_t load_exit[2] = {0, 0}, last_arrive[2] = {0, 0};
    int arrivals[2] = {0, 0};
    for (const auto& e : r.trace.events) {
      if (e.kind == emu::EventKind::exit && e.warp % 2 == 0) load_exit[e.warp / 2] = e.step;
      if (e.kind == emu::EventKind::arrive && r.trace.objects[e.object].name.rfind("input_empty[", 0) == 0) {
        const std::uint32_t cta = r.trace.objects[e.object].cta;
        last_arrive[cta] = std::max(last_arrive[cta], e.step);
        ++arrivals[cta];
      }
    }
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(arrivals[c], 10) << "five commits from each CTA";
      EXPECT_GT(load_exit[c], last_arrive[c]) << "cta " << c << ", seed " << seed;
    }
  }
  // Without drain(), the CTA exits with a commit still queued for its
  // barriers (docs/hardware.md bug 15). In this kernel that happens in every
  // schedule: the load warp exits right after issuing its last TMA load,
  // which the MMA warp then has to wait for, so the MMA warp exits last,
  // and it exits right after issuing its last commit, which targets its
  // own CTA (the peer's last commit may target it too). The emulator
  // reports a CTA exiting with an operation queued for it, and an
  // operation reaching a CTA that exited, as one rule.
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    auto bad = run_drain(false, seed, map);
    ASSERT_EQ(outcome(bad), "async.target-exited") << bad.report();
    EXPECT_TRUE(wspipe::test::contains(bad.violations[0].message, "tcgen05.commit")) << bad.report();
  }
}

}  // namespace
