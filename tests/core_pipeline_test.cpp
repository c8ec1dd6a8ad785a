// PipelineState arithmetic and ProducerConsumerPipeline on the emulator.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/pipeline.hpp"
#include "emu_test_util.hpp"
#include "examples/ring.hpp"

namespace {

using wspipe::PipelineState;
using wspipe::ProducerConsumerPipeline;
using wspipe::SharedMemBarrier;
using wspipe::emu::Status;
using wspipe::test::B;
using wspipe::test::run_kernel;

TEST(PipelineState, StartStates) {
  constexpr auto p = PipelineState<4>::producer_start();
  constexpr auto c = PipelineState<4>::consumer_start();
  static_assert(p.index() == 0 && p.phase() == 1 && p.count() == 0);
  static_assert(c.index() == 0 && c.phase() == 0 && c.count() == 0);
}

TEST(PipelineState, PhaseFlipsOnWrapOnly) {
  PipelineState<3> s = PipelineState<3>::consumer_start();
  const std::uint32_t want_index[] = {1, 2, 0, 1, 2, 0, 1};
  const std::uint32_t want_phase[] = {0, 0, 1, 1, 1, 0, 0};
  for (int i = 0; i < 7; ++i) {
    ++s;
    EXPECT_EQ(s.index(), want_index[i]) << "step " << i + 1;
    EXPECT_EQ(s.phase(), want_phase[i]) << "step " << i + 1;
    EXPECT_EQ(s.count(), static_cast<std::uint32_t>(i + 1));
  }
}

TEST(PipelineState, PhaseNumberOfAStateMadeByHandCountsFromItsStage) {
  // Stage 2 of 3 with count 0 and phase 0: phase 0 on this lap, 1 after
  // the wrap, whatever stage the lap started at.
  PipelineState<3> s(2, 0, 0);
  EXPECT_EQ(s.phase_number().value, 0);
  ++s;
  EXPECT_EQ(s.index(), 0u);
  EXPECT_EQ(s.phase_number().value, 1);
  s.advance(3);
  EXPECT_EQ(s.phase_number().value, 2);
  EXPECT_EQ(PipelineState<3>(2, 1, 0).phase_number().value, -1);  // a producer's first lap
}

TEST(PipelineState, SingleStageFlipsEveryStep) {
  PipelineState<1> s = PipelineState<1>::producer_start();
  s.advance();
  EXPECT_EQ(s.index(), 0u);
  EXPECT_EQ(s.phase(), 0u);
  s.advance();
  EXPECT_EQ(s.phase(), 1u);
}

template <int S>
void check_advance(std::uint32_t start_count, std::uint32_t n, bool producer) {
  auto s = producer ? PipelineState<S>::producer_start() : PipelineState<S>::consumer_start();
  s.advance(start_count);
  auto stepped = s;
  for (std::uint32_t i = 0; i < n; ++i) ++stepped;
  const auto jumped = s.next(n);
  RC_ASSERT(jumped == stepped);
  // closed form: index = count mod S, phase = start ^ (laps mod 2)
  const std::uint32_t count = start_count + n;
  RC_ASSERT(jumped.index() == count % S);
  RC_ASSERT(jumped.phase() == ((producer ? 1u : 0u) ^ ((count / S) & 1u)));
  RC_ASSERT(jumped.count() == count);
  // the phase number: the laps made, less the producer's phase before the
  // first; its parity is the phase bit the wait passes
  const std::int64_t number = jumped.phase_number().value;
  RC_ASSERT(number == static_cast<std::int64_t>(count / S) - (producer ? 1 : 0));
  RC_ASSERT(static_cast<std::uint32_t>(number & 1) == jumped.phase());
}

RC_GTEST_PROP(PipelineState, AdvanceByNEqualsNSteps, ()) {
  const auto start = *rc::gen::inRange<std::uint32_t>(0, 10'000);
  const auto n = *rc::gen::inRange<std::uint32_t>(0, 300);
  const bool producer = *rc::gen::arbitrary<bool>();
  switch (*rc::gen::element(1, 2, 3, 4, 7)) {
    case 1: check_advance<1>(start, n, producer); break;
    case 2: check_advance<2>(start, n, producer); break;
    case 3: check_advance<3>(start, n, producer); break;
    case 4: check_advance<4>(start, n, producer); break;
    default: check_advance<7>(start, n, producer); break;
  }
}

template <int S>
struct PipeStorage {
  SharedMemBarrier bars[2 * S];
  std::uint32_t data[S];
  std::uint32_t consumed;
};

TEST(ProducerConsumerPipeline, InitNamesAndCountsEveryBarrier) {
  auto r = run_kernel(1, [] {
    auto& s = B::shared_storage<PipeStorage<3>>();
    ProducerConsumerPipeline<B, 3>(s.bars).init_mbars(1, 64);
  });
  ASSERT_EQ(r.status, Status::ok);
  std::vector<std::string> names;
  for (const auto& e : r.trace.events)
    if (e.kind == wspipe::emu::EventKind::init) names.push_back(r.trace.describe(e));
  EXPECT_EQ(names, (std::vector<std::string>{"init full[0] count=1", "init empty[0] count=64", "init full[1] count=1",
                                             "init empty[1] count=64", "init full[2] count=1",
                                             "init empty[2] count=64"}));
}

// full_mbar/empty_mbar name the barriers by what they are; the old names,
// deprecated, still return the same ones.
TEST(ProducerConsumerPipeline, FullAndEmptyBarriersByName) {
  SharedMemBarrier bars[4];
  const ProducerConsumerPipeline<B, 2> pipe(bars);
  EXPECT_EQ(&pipe.full_mbar(1), &bars[1]);
  EXPECT_EQ(&pipe.empty_mbar(1), &bars[3]);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(&pipe.producer_mbar(1), &pipe.full_mbar(1));
  EXPECT_EQ(&pipe.consumer_mbar(0), &pipe.empty_mbar(0));
#pragma GCC diagnostic pop
}

// The producer's first lap passes without any release; the second needs them.
TEST(ProducerConsumerPipeline, ProducerFirstLapIsFree) {
  auto r = run_kernel(1, [] {
    auto& s = B::shared_storage<PipeStorage<2>>();
    ProducerConsumerPipeline<B, 2> pipe(s.bars);
    pipe.init_mbars(1, 1);
    for (int i = 0; i < 3; ++i) {  // the third acquire waits on empty[0] phase 0
      auto st = pipe.acquire_producer();
      st.release();
    }
  });
  ASSERT_EQ(r.status, Status::deadlock);
  ASSERT_EQ(r.blocked.size(), 1u);
  EXPECT_EQ(r.blocked[0].object, "empty[0] (cta0)");
  EXPECT_NE(r.blocked[0].state.find("waits for parity 0"), std::string::npos);
}

// Scoped contexts: a consume scope releases empty exactly once (count 32 for
// one warp); consume_explicit releases nothing.
TEST(ProducerConsumerPipeline, ScopesReleaseExactlyOnce) {
  for (bool explicit_form : {false, true}) {
    auto r = run_kernel(2, [explicit_form] {
      auto& s = B::shared_storage<PipeStorage<1>>();
      ProducerConsumerPipeline<B, 1> pipe(s.bars);
      if (B::warp_idx() == 0) {
        pipe.init_mbars(1, 32);
        B::fence_init();
      }
      B::cluster_sync();
      if (B::warp_idx() == 0) {
        for (int i = 0; i < 2; ++i) {
          auto slot = pipe.produce();
          s.data[slot.index()] = 100u + static_cast<std::uint32_t>(i);
          B::elect_one([&] { slot.arrive(); });
        }
      } else {
        for (int i = 0; i < 2; ++i) {
          if (explicit_form) {
            auto slot = pipe.consume_explicit();
            B::check(s.data[slot.index()] == 100u + static_cast<std::uint32_t>(i), "data");
          } else {
            auto slot = pipe.consume();
            B::check(s.data[slot.index()] == 100u + static_cast<std::uint32_t>(i), "data");
          }
        }
      }
    });
    if (explicit_form) {
      // the producer's second produce waits for a release that never comes
      ASSERT_EQ(r.status, Status::deadlock);
    } else {
      ASSERT_EQ(r.status, Status::ok) << r.report();
      int arrivals_on_empty = 0;
      for (const auto& e : r.trace.events)
        if (e.kind == wspipe::emu::EventKind::arrive && r.trace.object_name(e.object) == "empty[0]") {
          EXPECT_EQ(e.a, 32);
          ++arrivals_on_empty;
        }
      EXPECT_EQ(arrivals_on_empty, 2);
    }
  }
}

TEST(ProducerConsumerPipeline, TryWaitFormsMatchBarrierState) {
  auto r = run_kernel(1, [] {
    auto& s = B::shared_storage<PipeStorage<2>>();
    ProducerConsumerPipeline<B, 2> pipe(s.bars);
    pipe.init_mbars(1, 1);
    B::check(pipe.try_wait_consumer(), "producer's first wait passes at once");
    B::elect_one([&] { B::arrive(pipe.full_mbar(0)); });
    B::check(pipe.try_wait_producer(), "full[0] completed by one arrival");
  });
  EXPECT_EQ(r.status, Status::ok) << r.report();
}

// consumer_skip(n) steps the cursor as n steps would, at warp level: a
// skip inside elect_one is warp.divergent-state like any other step.
TEST(ProducerConsumerPipeline, ConsumerSkipStepsTheCursorPastSlotsAtWarpLevel) {
  auto r = run_kernel(1, [] {
    auto& s = B::shared_storage<PipeStorage<2>>();
    ProducerConsumerPipeline<B, 2> pipe(s.bars);
    pipe.consumer_skip(5);
    B::check(pipe.consumer_state() == PipelineState<2>::consumer_start().next(5), "skip 5 = 5 steps");
    B::check(pipe.consumer_state().phase_number().value == 2, "5 slots of 2: the third lap");
  });
  EXPECT_EQ(r.status, Status::ok) << r.report();
  std::uint32_t line = 0;
  r = run_kernel(1, [&line] {
    auto& s = B::shared_storage<PipeStorage<2>>();
    ProducerConsumerPipeline<B, 2> pipe(s.bars);
    line = __LINE__; B::elect_one([&] { pipe.consumer_skip(2); });
  });
  EXPECT_VIOLATION_AT(r, "warp.divergent-state", line);
}

// warp.divergent-state: a consumer that elects its release (the issue's
// three-warp kernel) steps the elected lane's cursor only; on a GPU the other
// 31 lanes wait on a stale phase next time. Reported at the release's line.
template <class Release>
wspipe::emu::RunResult two_warp_ring(std::uint32_t empty_count, Release release) {
  return run_kernel(2, [empty_count, release] {
    auto& s = B::shared_storage<PipeStorage<2>>();
    ProducerConsumerPipeline<B, 2> pipe(s.bars);
    if (B::warp_idx() == 0) {
      pipe.init_mbars(1, empty_count);
      B::fence_init();
    }
    B::cluster_sync();
    for (std::uint32_t i = 0; i < 5; ++i) {
      if (B::warp_idx() == 0) {
        auto slot = pipe.produce();
        s.data[slot.index()] = 100u + i;
        slot.arrive_elected();
      } else {
        auto in = pipe.acquire_consumer();
        B::check(s.data[in.index()] == 100u + i, "item out of sequence");
        release(in);
      }
    }
    if (B::warp_idx() == 1) B::check(pipe.consumer_state().count() == 5, "the cursor stepped once per item");
  });
}

TEST(ProducerConsumerPipeline, ReleaseInsideElectOneIsDivergentState) {
  const std::uint32_t line = __LINE__ + 1;
  const auto r = two_warp_ring(1, [](const auto& in) { B::elect_one([&] { in.release(); }); });
  EXPECT_VIOLATION_AT(r, "warp.divergent-state", line);
  EXPECT_EQ(r.violations[0].object, "consumer cursor");
  EXPECT_TRUE(wspipe::test::contains(r.violations[0].message, "consumer cursor stepped with 1 of 32 lanes active"))
      << r.violations[0].message;
  EXPECT_TRUE(wspipe::test::ends_with(r.violations[0].warp, "w1")) << r.violations[0].warp;
}

TEST(ProducerConsumerPipeline, ReleaseElectedArrivesOnceAndStepsTheWholeWarp) {
  const auto r = two_warp_ring(1, [](const auto& in) { in.release_elected(); });
  ASSERT_EQ(r.status, Status::ok) << r.report();
  int arrivals_on_empty = 0;
  for (const auto& e : r.trace.events)
    if (e.kind == wspipe::emu::EventKind::arrive && r.trace.object_name(e.object).rfind("empty", 0) == 0) {
      EXPECT_EQ(e.a, 1);
      ++arrivals_on_empty;
    }
  EXPECT_EQ(arrivals_on_empty, 5);
  // the same release at warp level is 32 arrivals on a count-1 barrier
  EXPECT_EQ(wspipe::test::outcome(two_warp_ring(1, [](const auto& in) { in.release(); })), "mbarrier.over-arrival");
}

TEST(ProducerConsumerPipeline, StepInsideForEachLaneIsDivergentState) {
  // one lane steps; and every lane stepping in turn is no better: each
  // step is made by one lane, on its own copy
  for (bool all_lanes : {false, true}) {
    const std::uint32_t line = __LINE__ + 4;
    const auto r = two_warp_ring(32, [all_lanes](const auto& in) {
      in.arrive();
      B::for_each_lane([&](std::uint32_t lane) {
        if (all_lanes || lane == 0) in.release_without_signal();
      });
    });
    EXPECT_VIOLATION_AT(r, "warp.divergent-state", line);
    EXPECT_TRUE(wspipe::test::contains(r.violations[0].message, "stepped with 1 of 32 lanes active"));
  }
  EXPECT_OK(two_warp_ring(32, [](const auto& in) { in.release(); }));
}

// A scope opened inside elect_one steps on exit with one lane: reported at
// the line that opened it.
TEST(ProducerConsumerPipeline, ScopeOpenedInsideElectOneIsDivergentState) {
  std::uint32_t line = 0;
  const auto r = run_kernel(1, [&line] {
    auto& s = B::shared_storage<PipeStorage<2>>();
    ProducerConsumerPipeline<B, 2> pipe(s.bars);
    pipe.init_mbars(1, 1);
    B::elect_one([&] {
      line = __LINE__ + 1;
      auto slot = pipe.produce();
      slot.arrive();
    });
  });
  EXPECT_VIOLATION_AT(r, "warp.divergent-state", line);
  EXPECT_EQ(r.violations[0].object, "producer cursor");
}

// consume_elected: the scope form of release_elected.
TEST(ProducerConsumerPipeline, ConsumeElectedReleasesOnceAtWarpLevel) {
  auto r = run_kernel(2, [] {
    auto& s = B::shared_storage<PipeStorage<1>>();
    ProducerConsumerPipeline<B, 1> pipe(s.bars);
    if (B::warp_idx() == 0) {
      pipe.init_mbars(1, 1);
      B::fence_init();
    }
    B::cluster_sync();
    for (std::uint32_t i = 0; i < 3; ++i) {
      if (B::warp_idx() == 0) {
        auto slot = pipe.produce();
        s.data[slot.index()] = i;
        slot.arrive_elected();
      } else {
        auto slot = pipe.consume_elected();
        B::check(s.data[slot.index()] == i, "item out of sequence");
      }
    }
  });
  ASSERT_EQ(r.status, Status::ok) << r.report();
  for (const auto& e : r.trace.events) {
    if (e.kind == wspipe::emu::EventKind::arrive) {
      EXPECT_EQ(e.a, 1) << r.trace.describe(e);
    }
  }
}

// The ring in every configuration and schedule: the consumer sees every
// item in order, and the run ends ok.
RC_GTEST_PROP(Ring, EveryScheduleDeliversInOrder, ()) {
  const auto items = *rc::gen::inRange<std::uint32_t>(0, 40);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto kind = *rc::gen::element(wspipe::emu::StrategyKind::random, wspipe::emu::StrategyKind::pct,
                                      wspipe::emu::StrategyKind::round_robin);
  const int stages = *rc::gen::element(1, 2, 3, 4);
  auto opts = wspipe::test::with_strategy(kind, seed);
  opts.trace = false;
  opts.spurious_try_wait = *rc::gen::arbitrary<bool>();
  std::function<void()> body;
  std::size_t smem = 0;
  using wspipe::examples::RingBug;
  using wspipe::examples::RingStorage;
  switch (stages) {
    case 1: body = [=] { wspipe::examples::ring_kernel<B, 1>(items, RingBug::none); }; smem = sizeof(RingStorage<1>); break;
    case 2: body = [=] { wspipe::examples::ring_kernel<B, 2>(items, RingBug::none); }; smem = sizeof(RingStorage<2>); break;
    case 3: body = [=] { wspipe::examples::ring_kernel<B, 3>(items, RingBug::none); }; smem = sizeof(RingStorage<3>); break;
    default: body = [=] { wspipe::examples::ring_kernel<B, 4>(items, RingBug::none); }; smem = sizeof(RingStorage<4>); break;
  }
  const auto r = run_kernel(2, body, opts, smem);
  RC_ASSERT(r.status == Status::ok);
}

// Each planted bug is found whatever the strategy: these bugs do not depend
// on the interleaving, only on the protocol.
TEST(Ring, BrokenVariantsAreCaughtByEveryRandomStrategy) {
  using wspipe::examples::RingBug;
  using wspipe::examples::RingStorage;
  const std::pair<RingBug, std::string> cases[] = {{RingBug::no_release, "deadlock"},
                                                   {RingBug::over_arrive, "mbarrier.over-arrival"},
                                                   {RingBug::producer_phase_0, "deadlock"}};
  for (const auto& [bug, want] : cases) {
    for (auto kind : {wspipe::emu::StrategyKind::random, wspipe::emu::StrategyKind::pct,
                      wspipe::emu::StrategyKind::round_robin}) {
      const auto r = run_kernel(
          2, [bug = bug] { wspipe::examples::ring_kernel<B, 4>(64, bug); }, wspipe::test::with_strategy(kind, 3),
          sizeof(RingStorage<4>));
      EXPECT_EQ(wspipe::test::outcome(r), want) << r.report();
    }
  }
}

}  // namespace
