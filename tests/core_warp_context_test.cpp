// core/warp_context.hpp on the emulator: MmaWarpContext and
// EpilogueWarpContext (create / enter / exit), their per-K forms MmaKStage
// and EpilogueKContext, and TmemAddressSync, for cta_group 1 and 2
// (docs/pipeline-api.md "Warp contexts" and "The per-K path").
//
// The kernel is the blockwise-FP8 pattern of MAX's structured kernels,
// reduced to its synchronisation: per K iteration t the load warp TMA-loads
// a row of "A-scales" (one f32 per accumulator row) into the input ring;
// the MMA warp acquires an accumulator stage (MmaKStage), waits for the
// scales' slot, issues one MMA whose result identifies t, frees the slot
// with a commit and, leaving the MmaKStage, commits accum-full. The
// epilogue (EpilogueKContext) waits accum-full only, reads its rows' scales
// from the slot the input cursor names, frees the slot (arrive_input),
// loads the accumulator, and leaving the context arrives on accum-empty.
// Warps: 0-3 epilogue (lane quarters 0-3), 4 load, 5 MMA. For cta_group 2
// the cluster is one CTA pair: each CTA loads its own rows' scales with a
// cta_group::2 TMA, which signals the leader's input-full (the leader's
// expect_tx counts both CTAs' bytes); the leader's MMA warp issues for both
// CTAs and its commits multicast to both CTAs' input-empty and accum-full.
// Input-empty counts that one commit plus each epilogue warp's
// arrive_input (cluster-size lanes each): 1 + 4 * cluster size.
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
#include "core/input_pipeline.hpp"
#include "core/output_pipeline.hpp"
#include "core/tcgen05.hpp"
#include "core/tma.hpp"
#include "core/tmem.hpp"
#include "core/warp_context.hpp"
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
using wspipe::TensorMap;
using wspipe::test::B;
using wspipe::test::with_strategy;

constexpr std::uint32_t kWarps = 6, kLoadWarp = 4, kMmaWarp = 5;
constexpr std::uint32_t kN = 32, kK = 16, kMaxIters = 12, kMaxInputStages = 4, kMaxAccumStages = 4;

struct Smem {
  alignas(128) std::uint16_t a[128 * kK];             // 1.0
  alignas(128) std::uint16_t b[kMaxIters][kN * kK];   // iteration t: t + 1
  alignas(128) float scales[kMaxInputStages][128];    // the input ring: one row of A-scales per slot
  SharedMemBarrier input[2 * kMaxInputStages];
  SharedMemBarrier accum[2 * kMaxAccumStages];
  SharedMemBarrier dealloc;
  std::uint32_t tmem_addr;
};

std::uint64_t desc(const void* tile) {
  return SmemDescriptor{.start = B::smem_addr(tile), .lbo = 128, .sbo = 256, .swizzle = SmemSwizzle::none}.encode();
}
// The scale of accumulator row `row` of CTA `rank` in iteration t, and the
// accumulator of iteration t (A = 1, B = t + 1, K = 16).
float scale(std::uint32_t t, std::uint32_t rank, std::uint32_t row, int cta_group) {
  return static_cast<float>((t * static_cast<std::uint32_t>(cta_group) + rank) * 128 + row);
}
std::uint32_t accum_bits(std::uint32_t t) { return std::bit_cast<std::uint32_t>(16.0f * static_cast<float>(t + 1)); }

// What a warp saw per iteration: accumulator stage, its TMEM offset, input slot.
struct Seen {
  std::uint32_t accum, offset, input;
  friend bool operator==(const Seen&, const Seen&) = default;
  friend void PrintTo(const Seen& s, std::ostream* os) {
    *os << "{accum " << s.accum << ", offset " << s.offset << ", input " << s.input << "}";
  }
};

template <int CG, int S, int G>
struct Kernel {
  static constexpr OutputPipelineConfig kOpc{S, 512 / S, CG};
  using MmaCtx = wspipe::MmaWarpContext<B, kOpc, 32, 128>;
  using EpiCtx = wspipe::EpilogueWarpContext<B, kOpc, 32, 128>;
  using Input = wspipe::InputTilePipeline<B, float*, G, 1>;
  static constexpr std::uint32_t kIters = 2 * std::max(S, G) + 1;
  static_assert(kIters <= kMaxIters && S <= static_cast<int>(kMaxAccumStages) &&
                G <= static_cast<int>(kMaxInputStages));

  std::vector<float> scales_global;  // [iteration][rank][128]
  TensorMap map;
  std::vector<Seen> seen[2][kWarps];
  std::uint32_t tmem_addr[2][kWarps] = {};
  std::uint32_t per_k_line = 0;

  Kernel() {
    scales_global.resize(kIters * CG * 128);
    for (std::uint32_t t = 0; t < kIters; ++t)
      for (std::uint32_t r = 0; r < static_cast<std::uint32_t>(CG); ++r)
        for (std::uint32_t i = 0; i < 128; ++i) scales_global[(t * CG + r) * 128 + i] = scale(t, r, i, CG);
    map = wspipe::test::tensor_map_2d(scales_global.data(), ElemType::f32, 128, kIters * CG, 128, 1);
  }

  void run_kernel() {
    auto& s = B::shared_storage<Smem>();
    const std::uint32_t w = B::warp_idx(), rank = B::cta_rank();
    const std::uint16_t mask = CG == 2 ? 0b11 : 0;
    if (w == kMmaWarp) {
      // input-empty: the MMA warp's commit, plus each epilogue warp's
      // arrive_input (cluster-size lanes each).
      Input::init_barriers(s.input, 1 + 4 * B::cluster_size());
      MmaCtx::Pipeline::init_barriers(s.accum);
      typename MmaCtx::Dealloc(&s.dealloc).init();
      B::fence_init();
    } else if (w == kLoadWarp) {
      SmemView<B, std::uint16_t> a(s.a, 128 * kK), b(&s.b[0][0], kMaxIters * kN * kK);
      B::elect_one([&] {
        std::fill_n(a.write_range(0, a.size()), a.size(), wspipe::float_to_bf16(1.0f));
        for (std::uint32_t t = 0; t < kMaxIters; ++t)
          std::fill_n(b.write_range(t * kN * kK, kN * kK), kN * kK, wspipe::float_to_bf16(static_cast<float>(t + 1)));
      });
      B::fence_proxy_async();
    }
    B::cluster_sync();
    Input input(s.input, &s.scales[0][0]);

    if (w == kLoadWarp) {
      for (std::uint32_t t = 0; t < kIters; ++t) {
        const auto st = input.acquire_producer();
        B::elect_one([&] {
          if (rank == 0) st.expect_bytes(CG * 128 * 4);  // for cta_group 2 the leader's barrier counts both CTAs' rows
          B::tma_load<CG>(map, st.payload() + st.tile(0) * 128, st.full_mbar(),
                          {{0, static_cast<std::int32_t>(t * CG + rank)}});
        });
        st.release();
      }
      input.drain();
    } else if (w == kMmaWarp) {
      MmaCtx ctx = MmaCtx::create(&s.tmem_addr, s.accum, &s.dealloc, mask);
      tmem_addr[rank][w] = ctx.tmem().addr();
      auto scope = ctx.enter();
      if (rank == 0) {
        const std::uint32_t idesc =
            InstrDescriptor{.a = ElemType::bf16, .b = ElemType::bf16, .m = 128u * CG, .n = kN}.encode();
        for (std::uint32_t t = 0; t < kIters; ++t) {
          per_k_line = __LINE__; auto k = ctx.per_k_stage();
          const auto in = input.acquire_consumer();
          seen[rank][w].push_back({k.index(), k.tmem().offset(), in.index()});
          B::elect_one([&] { B::mma<MmaKind::f16, CG>(k.tmem().offset(), desc(s.a), desc(s.b[t]), idesc, false); });
          in.template commit<CG>(mask);
          in.release();
        }
      }
    } else if (w < 4) {
      EpiCtx::Sync::wait();
      EpiCtx ctx = EpiCtx::create(&s.tmem_addr, s.accum, &s.dealloc, mask);
      tmem_addr[rank][w] = ctx.tmem().addr();
      auto scope = ctx.enter();
      const std::uint32_t row0 = 32 * w;
      for (std::uint32_t t = 0; t < kIters; ++t) {
        auto ek = ctx.per_k_stage(input);
        seen[rank][w].push_back({ek.output_stage().index, ek.tmem().offset(), ek.input_stage_index()});
        // The scales of this warp's rows, visible through the MMA warp's
        // wait on input-full, which precedes the commit this warp waited on.
        SmemView<B, const float> scales(s.scales[ek.input_stage_index()], 128);
        B::for_each_lane([&](std::uint32_t lane) {
          B::check(scales.load(row0 + lane) == scale(t, rank, row0 + lane, CG),
                   "the slot holds this iteration's scales");
        });
        ek.arrive_input();  // the scales are in registers: the slot may be refilled
        const auto upper = ek.tmem().template load_upper<B, kN / 8>();
        const auto lower = ek.tmem().template load_lower<B, kN / 8>();
        EpiCtx::Pipeline::Stage::Tmem::template wait_load<B>();
        B::for_each_lane([&](std::uint32_t) {
          for (std::uint32_t r = 0; r < kN / 2; ++r)
            B::check(upper.reg(r) == accum_bits(t) && lower.reg(r) == accum_bits(t), "this iteration's accumulator");
        });
      }
    }
  }

  emu::RunResult run(const emu::RunOptions& opts) {
    emu::LaunchConfig launch;
    launch.warps_per_cta = kWarps;
    launch.cluster_size = CG;
    launch.smem_bytes = sizeof(Smem);
    launch.warp_roles = {"epilogue", "epilogue", "epilogue", "epilogue", "load", "mma"};
    return emu::run(launch, [this] { run_kernel(); }, opts);
  }
  emu::RunResult run(std::uint64_t seed) { return run(with_strategy(emu::StrategyKind::random, seed)); }

  static std::vector<Seen> expected() {
    std::vector<Seen> want;
    for (std::uint32_t t = 0; t < kIters; ++t)
      want.push_back({t % S, (t % S) * kOpc.stage_stride_cols, t % static_cast<std::uint32_t>(G)});
    return want;
  }
};

template <int CG, int S, int G>
struct Cfg {
  static constexpr int kCG = CG, kS = S, kG = G;
};
using Configs = ::testing::Types<Cfg<1, 2, 2>, Cfg<1, 1, 3>, Cfg<1, 3, 1>, Cfg<2, 2, 2>, Cfg<2, 1, 3>, Cfg<2, 4, 2>>;
struct ConfigNames {
  template <class T>
  static std::string GetName(int) {
    return "ctagroup" + std::to_string(T::kCG) + "_accum" + std::to_string(T::kS) + "_input" + std::to_string(T::kG);
  }
};

template <class T>
class core_WarpContext : public ::testing::Test {
 protected:
  using Kern = Kernel<T::kCG, T::kS, T::kG>;
};
TYPED_TEST_SUITE(core_WarpContext, Configs, ConfigNames);

// Trace helpers. Actors: warps first (CTA-major, kWarps per CTA), then the
// engines. Barrier roles come from their names.
std::string name(const emu::RunResult& r, const emu::Event& e) {
  return e.object >= 0 ? r.trace.objects[e.object].name : "";
}
bool named(const emu::RunResult& r, const emu::Event& e, const char* prefix) {
  return name(r, e).rfind(prefix, 0) == 0;
}
std::int32_t warp_id(std::uint32_t cta, std::uint32_t w) { return static_cast<std::int32_t>(cta * kWarps + w); }

TEST(core_WarpContextTypes, SyncIsNamedBarrierOneOverMmaAndEpilogueThreads) {
  constexpr OutputPipelineConfig opc{2, 256, 1};
  using MmaCtx = wspipe::MmaWarpContext<B, opc, 32, 128>;
  using EpiCtx = wspipe::EpilogueWarpContext<B, opc, 32, 128>;
  static_assert(std::is_same_v<MmaCtx::Sync, wspipe::TmemAddressSync<B, 160>>);
  static_assert(std::is_same_v<EpiCtx::Sync, MmaCtx::Sync>);
  static_assert(MmaCtx::Sync::kId == 1);
  static_assert(std::is_same_v<wspipe::MmaKStage<B, opc>, wspipe::OutputProducer<B, opc>>);
  static_assert(std::is_same_v<MmaCtx::Pipeline, wspipe::OutputTilePipeline<B, opc>>);
  static_assert(std::is_same_v<EpiCtx::Dealloc, wspipe::TmemDeallocBarrier<B, 1>>);
}

// Every warp sees accumulator stage t % S at offset index * (512 / S) and
// input slot t % G: the MMA warp through MmaKStage and acquire_consumer,
// each epilogue warp through EpilogueKContext, whose input index follows
// the consumer cursor without waiting on input-full. Every epilogue warp
// of both CTAs reads the address the MMA warp allocated. The values checked
// in the kernel (scales and accumulators) and the race checker cover the
// data; the run ends ok in every schedule.
TYPED_TEST(core_WarpContext, EveryWarpSeesItsStagesAndTheData) {
  using K = typename TestFixture::Kern;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    K k;
    auto r = k.run(seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    EXPECT_EQ(k.seen[0][kMmaWarp], K::expected());
    for (int c = 0; c < TypeParam::kCG; ++c) {
      for (std::uint32_t w = 0; w < 4; ++w) {
        EXPECT_EQ(k.seen[c][w], K::expected()) << "cta " << c << " warp " << w;
        EXPECT_EQ(k.tmem_addr[c][w], k.tmem_addr[c][kMmaWarp]);
      }
    }
  }
}

// create / enter / exit, from the trace, for each CTA:
//   MMA warp: tcgen05.alloc, bar.arrive id 1 of 160 threads (it does not
//   wait there), its per-K commits, then (exit) relinquish, wait on
//   tmem_dealloc, and the dealloc (one collective for the pair);
//   epilogue warp: bar.sync id 1 of 160, which passes only after the MMA
//   warp's arrive, its K iterations, then (exit) its arrivals on the
//   dealloc barrier (its CTA's and, for cta_group 2, the peer's), all of
//   which precede the MMA warps' waits.
TYPED_TEST(core_WarpContext, CreateEnterExitHappenInOrder) {
  using K = typename TestFixture::Kern;
  constexpr int CG = TypeParam::kCG;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    K k;
    auto r = k.run(seed);
    ASSERT_EQ(r.status, emu::Status::ok) << r.report();
    std::uint64_t dealloc_step = 0;
    std::size_t deallocs = 0;
    for (const auto& e : r.trace.events) {
      if (e.kind != emu::EventKind::tmem_dealloc) continue;
      dealloc_step = e.step;
      ++deallocs;
    }
    EXPECT_EQ(deallocs, 1u);  // cta_group 2: one collective for the pair
    for (std::uint32_t c = 0; c < CG; ++c) {
      std::string mma;
      std::uint64_t mma_arrive = 0, mma_wait = 0, last_signal = 0;
      int signals = 0;
      for (const auto& e : r.trace.events) {
        if (e.warp == warp_id(c, kMmaWarp)) {
          switch (e.kind) {
            case emu::EventKind::tmem_alloc: mma += "alloc "; break;
            case emu::EventKind::named_arrive:
              EXPECT_EQ(e.a, 1);
              EXPECT_EQ(e.b, 160);
              mma += "arrive ";
              mma_arrive = e.step;
              break;
            case emu::EventKind::named_pass: mma += "PASS "; break;
            case emu::EventKind::commit_issue:
              if (named(r, e, "accum_full[")) mma += "commit ";
              break;
            case emu::EventKind::tmem_relinquish: mma += "relinquish "; break;
            case emu::EventKind::wait:
              if (named(r, e, "tmem_dealloc")) {
                mma += "wait ";
                mma_wait = e.step;
              }
              break;
            case emu::EventKind::tmem_dealloc: mma += "dealloc "; break;
            default: break;
          }
        }
        if (e.kind == emu::EventKind::arrive && named(r, e, "tmem_dealloc") &&
            r.trace.objects[e.object].cta == c) {
          EXPECT_EQ(e.a, 32);
          ++signals;
          last_signal = std::max(last_signal, e.step);
        }
      }
      std::string want = "alloc arrive ";
      for (std::uint32_t t = 0; c == 0 && t < K::kIters; ++t) want += "commit ";
      want += "relinquish wait ";
      // The pair's dealloc is recorded by whichever MMA warp came second.
      if (CG == 1) want += "dealloc ";
      EXPECT_EQ(mma.substr(0, want.size()), want) << "cta " << c;
      EXPECT_EQ(signals, 4 * CG) << "every epilogue warp of the pair signals each CTA";
      EXPECT_GE(mma_wait, last_signal);
      EXPECT_GT(dealloc_step, mma_wait);
      for (std::uint32_t w = 0; w < 4; ++w) {
        std::string epi;
        std::uint64_t pass = 0, last_work = 0, first_signal = 0;
        for (const auto& e : r.trace.events) {
          if (e.warp != warp_id(c, w)) continue;
          if (e.kind == emu::EventKind::named_arrive) {
            EXPECT_EQ(e.a, 1);
            EXPECT_EQ(e.b, 160);
            epi += "sync ";
          }
          if (e.kind == emu::EventKind::named_pass) {
            epi += "pass ";
            pass = e.step;
          }
          if (e.kind == emu::EventKind::tmem_ld) last_work = e.step;
          if (e.kind == emu::EventKind::arrive && named(r, e, "tmem_dealloc")) {
            epi += e.remote ? "signal-peer " : "signal ";
            if (first_signal == 0) first_signal = e.step;
          }
        }
        EXPECT_EQ(epi, CG == 1 ? "sync pass signal " : "sync pass signal-peer signal ") << "cta " << c << " warp " << w;
        EXPECT_GT(pass, mma_arrive);
        EXPECT_GT(first_signal, last_work);
      }
    }
  }
}

// MmaKStage acquires on construction and commits + steps on destruction:
// per iteration the MMA warp waits on accum-empty (at the per_k_stage line),
// then on input-full, issues its MMA and the slot's commit, and only when
// the MmaKStage goes out of scope commits accum-full, reported at the line
// that opened it. Multicast to the pair (mask 0b11) for cta_group 2.
TYPED_TEST(core_WarpContext, MmaKStageAcquiresOnEntryAndCommitsOnExit) {
  using K = typename TestFixture::Kern;
  constexpr int CG = TypeParam::kCG;
  K k;
  auto r = k.run(2);
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  std::string order;
  for (const auto& e : r.trace.events) {
    if (e.warp != warp_id(0, kMmaWarp)) continue;
    if (e.kind == emu::EventKind::wait && named(r, e, "accum_empty[")) {
      EXPECT_EQ(e.line, k.per_k_line);
      order += 'E';
    }
    if (e.kind == emu::EventKind::wait && named(r, e, "input_full[")) order += 'F';
    if (e.kind == emu::EventKind::mma_issue) order += 'M';
    if (e.kind == emu::EventKind::commit_issue) {
      EXPECT_EQ(e.a, CG == 2 ? 0b11 : 0b01);
      if (named(r, e, "input_empty[")) order += 'i';
      if (named(r, e, "accum_full[")) {
        EXPECT_EQ(e.line, k.per_k_line) << "the MmaKStage's commit is reported where it was opened";
        order += 'C';
      }
    }
  }
  std::string want;
  for (std::uint32_t t = 0; t < K::kIters; ++t) want += "EFMiC";
  EXPECT_EQ(order, want);
}

// EpilogueKContext, per iteration of each epilogue warp: enter waits on
// accum-full and never on input-full; arrive_input arrives once per lane
// below the cluster size on this CTA's input-empty (cluster_size arrivals
// of 1); then the warp's loads; exit arrives on accum-empty with all 32
// threads, on the leader CTA's barrier for cta_group 2.
TYPED_TEST(core_WarpContext, EpilogueKContextWaitsOnlyForTheAccumulatorAndReleasesBoth) {
  using K = typename TestFixture::Kern;
  constexpr int CG = TypeParam::kCG;
  K k;
  auto r = k.run(3);
  ASSERT_EQ(r.status, emu::Status::ok) << r.report();
  std::string per_iter = "W";
  for (int i = 0; i < CG; ++i) per_iter += 'i';
  per_iter += "lla";
  for (std::uint32_t c = 0; c < CG; ++c) {
    for (std::uint32_t w = 0; w < 4; ++w) {
      std::string order;
      for (const auto& e : r.trace.events) {
        if (e.warp != warp_id(c, w)) continue;
        if (e.kind == emu::EventKind::wait) {
          EXPECT_FALSE(named(r, e, "input_full[")) << "the epilogue never waits on input-full";
          if (named(r, e, "accum_full[")) order += 'W';
        }
        if (e.kind == emu::EventKind::tmem_ld) order += 'l';
        if (e.kind != emu::EventKind::arrive) continue;
        const std::uint32_t target = r.trace.objects[e.object].cta;
        if (named(r, e, "input_empty[")) {
          EXPECT_EQ(e.a, 1);
          EXPECT_EQ(target, c) << "arrive_input is local";
          order += 'i';
        } else if (named(r, e, "accum_empty[")) {
          EXPECT_EQ(e.a, 32);
          EXPECT_EQ(target, 0u) << "accum-empty of the leader CTA";
          order += 'a';
        }
      }
      std::string want;
      for (std::uint32_t t = 0; t < K::kIters; ++t) want += per_iter;
      EXPECT_EQ(order, want) << "cta " << c << " warp " << w;
    }
  }
}

// The whole kernel under every scheduling strategy: ok, and every warp's
// view of the stages as above.
template <int CG, int S, int G>
void check_any_schedule(const emu::RunOptions& opts) {
  using K = Kernel<CG, S, G>;
  K k;
  const auto r = k.run(opts);
  RC_ASSERT(r.status == emu::Status::ok);
  RC_ASSERT(k.seen[0][kMmaWarp] == K::expected());
  for (int c = 0; c < CG; ++c)
    for (std::uint32_t w = 0; w < 4; ++w) RC_ASSERT(k.seen[c][w] == K::expected());
}

RC_GTEST_PROP(core_WarpContextProperty, EveryScheduleRunsTheBlockwiseProtocol, ()) {
  auto opts = with_strategy(*rc::gen::element(emu::StrategyKind::random, emu::StrategyKind::pct,
                                              emu::StrategyKind::round_robin),
                            *rc::gen::arbitrary<std::uint64_t>());
  opts.trace = false;
  switch (*rc::gen::inRange(0, 4)) {
    case 0: check_any_schedule<1, 2, 2>(opts); break;
    case 1: check_any_schedule<1, 3, 1>(opts); break;
    case 2: check_any_schedule<2, 2, 2>(opts); break;
    default: check_any_schedule<2, 1, 3>(opts); break;
  }
}

}  // namespace
