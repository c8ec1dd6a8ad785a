// The emulator's named barriers, cluster barrier, warp-level identity rules,
// determinism (traces, schedules, replay) and deadlock / livelock reports.
// Every rule is shown firing on the bug and quiet on correct use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/smem.hpp"
#include "emu_test_util.hpp"
#include "examples/ring.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::BarrierName;
using wspipe::SharedMemBarrier;
using wspipe::examples::RingBug;
using wspipe::examples::RingStorage;
using wspipe::test::B;
using wspipe::test::outcome;
using wspipe::test::run_kernel;
using wspipe::test::with_strategy;

struct Bars {
  SharedMemBarrier b[8];
};
constexpr std::size_t kSmem = sizeof(Bars);

using wspipe::test::contains;
using wspipe::test::ends_with;
using wspipe::test::elected_arrive;
using wspipe::test::init_bar;

std::size_t count_events(const emu::RunResult& r, emu::EventKind k) {
  std::size_t n = 0;
  for (const auto& e : r.trace.events) n += e.kind == k;
  return n;
}

// ------------------------------------------------------------ named barriers

TEST(emu_NamedBarrier, CountMismatchFires) {
  std::uint32_t line0 = 0, line1 = 0;
  auto r = run_kernel(4, [&] {
    if (B::warp_idx() == 0) {
      line0 = __LINE__; B::named_sync(1, 64);
    } else if (B::warp_idx() == 1) {
      line1 = __LINE__; B::named_sync(1, 96);
    }
  });
  ASSERT_EQ(outcome(r), "named-barrier.count-mismatch") << r.report();
  const auto& v = r.violations[0];
  // Whichever of the two came second disagrees with the barrier in progress.
  ASSERT_TRUE(v.warp == "cta0/w0" || v.warp == "cta0/w1") << v.warp;
  EXPECT_EQ(v.line, v.warp == "cta0/w0" ? line0 : line1);
  EXPECT_EQ(v.object, "named barrier 1 (cta0)");
}

TEST(emu_NamedBarrier, AgreeingCountsAreQuietAndANewInstanceMayUseANewCount) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto r = run_kernel(
        4,
        [&] {
          const std::uint32_t w = B::warp_idx();
          if (w < 2) B::named_sync(1, 64);
          if (w == 0) B::named_arrive(2, 64);  // tells warp 2 the 64-thread instance is over
          if (w == 2) B::named_sync(2, 64);
          if (w < 3) B::named_sync(1, 96);
        },
        with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r) << "seed " << seed;
    EXPECT_EQ(count_events(r, emu::EventKind::named_pass), 6u);
  }
}

TEST(emu_NamedBarrier, BadIdFires) {
  for (bool sync : {true, false}) {
    std::uint32_t line = 0;
    auto r = run_kernel(1, [&] {
      if (sync) {
        line = __LINE__; B::named_sync(16, 32);
      } else {
        line = __LINE__; B::named_arrive(16, 32);
      }
    });
    EXPECT_VIOLATION_AT(r, "named-barrier.bad-id", line);
    EXPECT_EQ(r.violations[0].object, "named barrier 16 (cta0)");
  }
  auto quiet = run_kernel(1, [&] { B::named_sync(15, 32); });
  EXPECT_OK(quiet);
}

TEST(emu_NamedBarrier, ThreadCountFires) {
  // 48: not a multiple of 32; 0; 96 > the CTA's 64 threads.
  for (std::uint32_t threads : {48u, 0u, 96u, 33u}) {
    SCOPED_TRACE(threads);
    std::uint32_t line = 0;
    auto r = run_kernel(2, [&] { line = __LINE__; B::named_sync(3, threads); });
    EXPECT_VIOLATION_AT(r, "named-barrier.thread-count", line);
  }
  auto quiet = run_kernel(2, [&] { B::named_sync(3, 64); });
  EXPECT_OK(quiet);
}

TEST(emu_NamedBarrier, SyncBlocksUntilAllThreadsArrived) {
  // Warp 1 writes before its bar.sync; warp 0 reads after its own. Were
  // bar.sync not blocking, some schedule would let warp 0 read first.
  for (std::uint64_t seed = 1; seed <= 32; ++seed) {
    int published = 0;
    auto r = run_kernel(
        2,
        [&] {
          if (B::warp_idx() == 1) {
            for (int i = 0; i < 3; ++i) B::syncwarp();
            published = 1;
          }
          B::named_sync(1, 64);
          B::check(published == 1, "bar.sync returned before the other warp arrived");
        },
        with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r) << "seed " << seed;
  }
}

TEST(emu_NamedBarrier, MissingParticipantDeadlocks) {
  std::uint32_t line = 0;
  auto r = run_kernel(2, [&] {
    if (B::warp_idx() == 0) {
      line = __LINE__; B::named_sync(1, 64);
    }
  });
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  ASSERT_EQ(r.blocked.size(), 1u) << r.report();
  const auto& b = r.blocked[0];
  EXPECT_EQ(b.warp, "cta0/w0");
  EXPECT_EQ(b.op, "bar.sync");
  EXPECT_EQ(b.object, "named barrier 1 (cta0)");
  EXPECT_EQ(b.state, "32 of 64 threads arrived");
  EXPECT_EQ(b.line, line);
}

// A deadlock on a named barrier reports its last events, as one on an
// mbarrier does; the trace of the run ends with the wait that never ends.
TEST(emu_NamedBarrier, DeadlockReportsTheBarriersHistoryAndTheTraceItsOpenWait) {
  emu::Kernel k;
  k.launch.warps_per_cta = 4;  // warp 3 exits at once
  k.body = [] {
    if (B::warp_idx() == 1) B::named_arrive(1, 128);
    if (B::warp_idx() == 0) B::named_sync(1, 128);
    if (B::warp_idx() == 2) B::named_sync(2, 64);  // another barrier: not in barrier 1's history
  };
  emu::RunResult r = emu::run(k, emu::RunOptions{});
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  const std::string report = r.report();
  EXPECT_TRUE(contains(report, "last events on named barrier 1 (cta0):\n      step ")) << report;
  EXPECT_TRUE(contains(report, "cta0/w0  bar.arrive id=1 threads=128 arrived=32")) << report;
  EXPECT_TRUE(contains(report, "cta0/w1  bar.arrive id=1 threads=128 arrived=64")) << report;
  EXPECT_TRUE(contains(report, "last events on named barrier 2 (cta0):\n      step ")) << report;
  EXPECT_FALSE(contains(report.substr(report.find("named barrier 2 (cta0):")), "id=1")) << report;

  ASSERT_EQ(r.trace.ending.status, "deadlock");
  ASSERT_EQ(r.trace.ending.open.size(), 2u);
  std::ostringstream text;
  r.trace.write_text(text);
  EXPECT_TRUE(contains(text.str(), "cta0/w0           never ends: bar.sync on named barrier 1 (cta0) (since step 5)"))
      << text.str();
  EXPECT_TRUE(ends_with(text.str(), "deadlock: no warp can move\n")) << text.str();
  std::ostringstream json;
  r.trace.write_chrome_json(json);
  EXPECT_TRUE(contains(json.str(), "{\"ph\":\"B\",\"name\":\"bar.sync on named barrier 2 (cta0) (never ends)\""))
      << json.str();
  EXPECT_TRUE(contains(json.str(), "\"name\":\"deadlock: no warp can move\"")) << json.str();
}

TEST(emu_NamedBarrier, ArriveDoesNotBlockAndPublishesToTheSyncingWarp) {
  // Producer publishes and bar.arrives; consumer bar.syncs and reads.
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    int data = 0;
    auto r = run_kernel(
        2,
        [&] {
          if (B::warp_idx() == 0) {
            data = 42;
            B::named_arrive(1, 64);
          } else {
            B::named_sync(1, 64);
            B::check(data == 42, "consumer passed bar.sync before the producer's bar.arrive");
          }
        },
        with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r) << "seed " << seed;
  }
  // The producer bar.arrives on id 1 and id 2, then waits for an mbarrier
  // signal that the consumer sends after bar.sync on id 2 but before
  // bar.sync on id 1. A blocking bar.arrive on id 1 would deadlock here.
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto r = run_kernel(
        2,
        [&] {
          auto& s = B::shared_storage<Bars>();
          if (B::warp_idx() == 0) init_bar(s.b[0], 1);
          B::cluster_sync();
          if (B::warp_idx() == 0) {
            B::named_arrive(1, 64);
            B::named_arrive(2, 64);
            B::wait(s.b[0], 0);
          } else {
            B::named_sync(2, 64);
            elected_arrive(s.b[0]);
            B::named_sync(1, 64);
          }
        },
        with_strategy(emu::StrategyKind::random, seed), kSmem);
    EXPECT_OK(r) << "seed " << seed;
  }
}

// A bar.sync acquires the instance it arrived in, not a later one. Warps 0
// and 1 bar.sync instance 0 of named barrier 1; warp 1 then tells warp 2,
// which writes `x` and bar.arrives with warp 1's second bar.arrive on
// instance 1. Warp 0 reads `x` after its bar.sync: unordered with the
// write, also when warp 0 returns only after instance 1 completed (it once
// acquired instance 1 then, which carries the write). Quiet when warp 0
// reads before its bar.sync.
TEST(emu_NamedBarrier, SyncAcquiresTheInstanceItArrivedInNotALaterOne) {
  struct S {
    SharedMemBarrier passed;
    std::uint32_t x;
  };
  auto kernel = [](bool read_after_sync) {
    return [read_after_sync] {
      auto& s = B::shared_storage<S>();
      const std::uint32_t w = B::warp_idx();
      if (w == 1) init_bar(s.passed, 1, "passed");
      B::cluster_sync();
      wspipe::SmemView<B, std::uint32_t> x(&s.x, 1);
      if (w == 0) {
        if (!read_after_sync) B::elect_one([&] { (void)x.load(0); });
        B::named_sync(1, 64);
        if (read_after_sync) B::elect_one([&] { (void)x.load(0); });
      } else if (w == 1) {
        B::named_sync(1, 64);
        elected_arrive(s.passed);
        B::named_arrive(1, 64);
      } else {
        B::wait(s.passed, 0);
        B::elect_one([&] { x.store(0, 1); });
        B::named_arrive(1, 64);
      }
    };
  };
  bool later = false;  // some schedule ran warp 0 on only after instance 1 completed
  for (std::uint64_t seed = 0; seed <= 16; ++seed) {
    emu::RunOptions o = seed == 0 ? emu::RunOptions{} : with_strategy(emu::StrategyKind::random, seed);
    o.trace = true;
    auto bad = run_kernel(3, kernel(true), o, sizeof(S));
    ASSERT_EQ(outcome(bad), "race.smem") << "seed " << seed << "\n" << bad.report();
    std::size_t completed = 0;  // instances completed so far (an arrive that brings in the last thread)
    for (const auto& e : bad.trace.events) {
      if (e.kind == emu::EventKind::named_arrive && e.c == e.b) ++completed;
      if (e.kind == emu::EventKind::named_pass && e.warp == 0) later |= completed == 2;
    }
    EXPECT_OK(run_kernel(3, kernel(false), o, sizeof(S)));
  }
  EXPECT_TRUE(later);
}

// bar.sync / bar.arrive are warp-collective in the programming model
// (docs/programming-model.md): issued with fewer than 32 lanes active they
// are reported, for sync and arrive alike, at the partial warp's line.
TEST(emu_NamedBarrier, PartialWarpIsReported) {
  for (bool sync : {true, false}) {
    int line = 0;
    auto r = run_kernel(2, [&] {
      if (B::warp_idx() == 0) {
        B::elect_one([&] {
          line = __LINE__ + 1;
          sync ? B::named_sync(1, 64) : B::named_arrive(1, 64);
        });
      } else {
        B::named_sync(1, 64);
      }
    });
    ASSERT_EQ(outcome(r), "named-barrier.partial-warp") << r.report();
    EXPECT_EQ(r.violations[0].line, static_cast<std::uint32_t>(line));
    EXPECT_TRUE(contains(r.violations[0].message, "1 of 32 lanes")) << r.violations[0].message;
  }
}

// ------------------------------------------------------------ cluster barrier

TEST(emu_ClusterBarrier, CompletesOverTwoCtasOfTwoWarps) {
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    int arrived = 0;
    auto r = run_kernel(
        2,
        [&] {
          ++arrived;
          B::cluster_sync();
          B::check(arrived == 4, "cluster_sync passed before every warp of the cluster arrived");
        },
        with_strategy(emu::StrategyKind::random, seed), 1024, 2);
    EXPECT_OK(r) << "seed " << seed;
    EXPECT_EQ(count_events(r, emu::EventKind::cluster_pass), 4u);
  }
}

TEST(emu_ClusterBarrier, ExitedWarpDoesNotHangTheOthers) {
  // cta0/w0 exits at once (before or after the others arrive, by seed):
  // barrier.cluster waits for the threads that have not exited.
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    int arrived = 0;
    auto r = run_kernel(
        2,
        [&] {
          if (B::cta_rank() == 0 && B::warp_idx() == 0) return;
          ++arrived;
          B::cluster_sync();
          B::check(arrived == 3, "cluster_sync passed early");
        },
        with_strategy(emu::StrategyKind::random, seed), 1024, 2);
    EXPECT_OK(r) << "seed " << seed;
  }
}

TEST(emu_ClusterBarrier, LiveWarpThatNeverArrivesDeadlocks) {
  std::uint32_t wait_line = 0, sync_line = 0;
  auto r = run_kernel(
      2,
      [&] {
        auto& s = B::shared_storage<Bars>();
        if (B::cta_rank() == 0 && B::warp_idx() == 0) {
          init_bar(s.b[0], 1);
          wait_line = __LINE__; B::wait(s.b[0], 0);  // never completes
          return;
        }
        sync_line = __LINE__; B::cluster_sync();
      },
      {}, kSmem, 2);
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  ASSERT_EQ(r.blocked.size(), 4u) << r.report();
  int syncing = 0;
  for (const auto& b : r.blocked) {
    if (b.warp == "cta0/w0") {
      EXPECT_EQ(b.op, "wait");
      EXPECT_EQ(b.line, wait_line);
    } else {
      ++syncing;
      EXPECT_EQ(b.op, "cluster_sync");
      EXPECT_EQ(b.state, "96 of 128 live threads arrived");
      EXPECT_EQ(b.line, sync_line);
    }
  }
  EXPECT_EQ(syncing, 3);
}

// ------------------------------------------------------------ warp-level identity

TEST(emu_WarpIdentity, LaneIdxAtWarpLevelFires) {
  std::uint32_t line = 0;
  auto r = run_kernel(2, [&] {
    if (B::warp_idx() == 1) {
      line = __LINE__; (void)B::lane_idx();
    }
  });
  EXPECT_VIOLATION_AT(r, "warp.lane-idx-divergent", line);
  EXPECT_EQ(r.violations[0].warp, "cta0/w1");
  EXPECT_TRUE(contains(r.violations[0].message, "32 lanes")) << r.violations[0].message;
}

TEST(emu_WarpIdentity, ForEachLaneVisitsAll32LanesWithOneActive) {
  std::vector<std::uint32_t> seen;
  auto r = run_kernel(1, [&] {
    B::for_each_lane([&](std::uint32_t lane) {
      B::check(B::lane_idx() == lane, "lane_idx inside for_each_lane");
      seen.push_back(lane);
    });
  });
  EXPECT_OK(r);
  ASSERT_EQ(seen.size(), 32u);
  for (std::uint32_t i = 0; i < 32; ++i) EXPECT_EQ(seen[i], i);
}

TEST(emu_WarpIdentity, ElectOneRunsOnceWithOneLane) {
  int runs = 0;
  std::vector<std::uint32_t> lanes;
  auto r = run_kernel(3, [&] {
    B::elect_one([&] {
      ++runs;
      lanes.push_back(B::lane_idx());
      B::for_each_lane([&](std::uint32_t) { ++runs; });  // one lane active: one visit
    });
  });
  EXPECT_OK(r);
  EXPECT_EQ(runs, 6);  // 3 warps x (1 + 1)
  EXPECT_EQ(lanes, (std::vector<std::uint32_t>{0, 0, 0}));
}

TEST(emu_WarpIdentity, KernelCheckFiresWithTheMessage) {
  std::uint32_t line = 0;
  auto r = run_kernel(1, [&] {
    B::check(true, "never reported");
    line = __LINE__; B::check(false, "payload torn at word 3");
  });
  EXPECT_VIOLATION_AT(r, "kernel.check", line);
  EXPECT_TRUE(contains(r.violations[0].message, "payload torn at word 3")) << r.violations[0].message;
  EXPECT_FALSE(contains(r.report(), "never reported"));
}

// ------------------------------------------------------------ determinism

emu::RunResult ring(std::uint32_t items, RingBug bug, emu::RunOptions opts) {
  return run_kernel(
      2, [=] { wspipe::examples::ring_kernel<B, 4>(items, bug); }, opts, sizeof(RingStorage<4>));
}

std::string text_of(const emu::Trace& t) {
  std::ostringstream out;
  t.write_text(out);
  return out.str();
}
std::string json_of(const emu::Trace& t) {
  std::ostringstream out;
  t.write_chrome_json(out);
  return out.str();
}

TEST(emu_Determinism, SameSeedGivesIdenticalTraceBytes) {
  for (auto kind : {emu::StrategyKind::random, emu::StrategyKind::pct, emu::StrategyKind::round_robin}) {
    const auto opts = with_strategy(kind, 42);
    auto a = ring(16, RingBug::none, opts);
    auto b = ring(16, RingBug::none, opts);
    EXPECT_OK(a);
    ASSERT_FALSE(a.schedule.empty());
    EXPECT_EQ(a.schedule, b.schedule);
    EXPECT_EQ(a.steps, b.steps);
    const std::string text = text_of(a.trace);
    const std::string json = json_of(a.trace);
    EXPECT_GT(text.size(), 1000u);
    EXPECT_EQ(text, text_of(b.trace));
    EXPECT_EQ(json, json_of(b.trace));
  }
}

// A destroyed trace leaves its event storage to the next traced run on its
// thread (emu::take_event_storage). The events must not depend on it: a run
// on a fresh thread, one after a larger trace died and one after a smaller
// one give the same bytes from every exporter, and the same report.
TEST(emu_Determinism, ReusedEventStorageGivesIdenticalTraces) {
  struct Out {
    std::string text, json, report;
    std::size_t events = 0;
  };
  auto capture = [](const emu::RunResult& r) {
    return Out{text_of(r.trace), json_of(r.trace), r.report(), r.trace.events.size()};
  };
  const auto opts = with_strategy(emu::StrategyKind::random, 42);
  for (RingBug bug : {RingBug::none, RingBug::no_release}) {
    Out fresh;
    std::thread([&] { fresh = capture(ring(16, bug, opts)); }).join();
    ASSERT_GT(fresh.events, 0u);
    if (bug == RingBug::no_release) {
      EXPECT_TRUE(contains(fresh.report, "last events on")) << fresh.report;
    }

    std::size_t big = 0;
    {
      const auto larger = ring(200, RingBug::none, opts);
      big = larger.trace.events.size();
      ASSERT_GT(big, fresh.events);
    }  // its storage goes to this thread's next traced run
    const auto after_larger = ring(16, bug, opts);
    EXPECT_GE(after_larger.trace.events.capacity(), big) << "the larger trace's storage was not reused";
    const Out a = capture(after_larger);
    EXPECT_EQ(a.events, fresh.events);
    EXPECT_EQ(a.text, fresh.text);
    EXPECT_EQ(a.json, fresh.json);
    EXPECT_EQ(a.report, fresh.report);

    { const auto smaller = ring(2, RingBug::none, opts); }
    const Out b = capture(ring(16, bug, opts));
    EXPECT_EQ(b.text, fresh.text);
    EXPECT_EQ(b.json, fresh.json);
    EXPECT_EQ(b.report, fresh.report);
  }
}

// Traces that are kept, copied or moved keep their events whatever runs
// after them; an untraced run records none, even with storage to spare.
TEST(emu_Determinism, KeptTracesKeepTheirEvents) {
  const auto opts = with_strategy(emu::StrategyKind::random, 7);
  const auto kept = ring(16, RingBug::none, opts);
  const std::string text = text_of(kept.trace);
  emu::Trace copy = kept.trace;
  emu::Trace moved_from = kept.trace;
  const emu::Trace moved = std::move(moved_from);
  for (std::uint32_t items : {200u, 4u}) {
    { const auto other = ring(items, RingBug::none, with_strategy(emu::StrategyKind::random, 8)); }
    auto untraced = opts;
    untraced.trace = false;
    EXPECT_TRUE(ring(items, RingBug::none, untraced).trace.events.empty());
  }
  EXPECT_EQ(text_of(kept.trace), text);
  EXPECT_EQ(text_of(copy), text);
  EXPECT_EQ(text_of(moved), text);
}

TEST(emu_Determinism, DifferentSeedsGiveDifferentSchedules) {
  std::set<std::string> schedules, texts;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    auto r = ring(16, RingBug::none, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r);
    schedules.insert(r.schedule.encode());
    texts.insert(text_of(r.trace));
  }
  EXPECT_GE(schedules.size(), 5u);
  EXPECT_EQ(texts.size(), schedules.size());
}

// Racy: warp 0 arrives twice on a count-1 barrier; only warp 1's wait in
// between makes the second arrive legal. The outcome depends on the schedule.
emu::RunResult racy(const emu::RunOptions& opts, std::uint32_t* line) {
  return run_kernel(
      2,
      [=] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) init_bar(s.b[0], 1);
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          B::syncwarp();
          elected_arrive(s.b[0]);
          B::syncwarp();
          B::elect_one([&] { *line = __LINE__; B::arrive(s.b[0]); });
        } else {
          B::syncwarp();
          B::wait(s.b[0], 0);
        }
      },
      opts, kSmem);
}

TEST(emu_Determinism, ReplayReproducesAFailingRun) {
  int failing = 0, passing = 0;
  for (std::uint64_t seed = 1; seed <= 40 && (failing < 3 || passing < 3); ++seed) {
    std::uint32_t line = 0;
    const auto r = racy(with_strategy(emu::StrategyKind::random, seed), &line);
    (r.status == emu::Status::ok ? passing : failing) += 1;
    emu::RunOptions replay;
    replay.strategy.kind = emu::StrategyKind::replay;
    replay.strategy.replay = r.schedule;
    const auto again = racy(replay, &line);
    SCOPED_TRACE("seed " + std::to_string(seed) + " schedule " + r.schedule.encode());
    EXPECT_EQ(again.status, r.status);
    EXPECT_EQ(again.steps, r.steps);
    EXPECT_EQ(again.schedule, r.schedule);
    EXPECT_EQ(outcome(again), outcome(r));
    if (r.status == emu::Status::violation) {
      EXPECT_EQ(r.violations[0].rule, "mbarrier.arrive-before-wait");
      EXPECT_EQ(r.violations[0].line, line);
      ASSERT_EQ(again.violations.size(), 1u);
      EXPECT_EQ(again.violations[0].step, r.violations[0].step);
      EXPECT_EQ(again.violations[0].warp, r.violations[0].warp);
      EXPECT_EQ(again.violations[0].line, r.violations[0].line);
    }
    EXPECT_EQ(text_of(again.trace), text_of(r.trace));
  }
  EXPECT_GT(failing, 0);
  EXPECT_GT(passing, 0);
}

TEST(emu_Determinism, ReplayReproducesADeadlock) {
  const auto r = ring(64, RingBug::no_release, with_strategy(emu::StrategyKind::random, 5));
  ASSERT_EQ(r.status, emu::Status::deadlock);
  emu::RunOptions replay;
  replay.strategy.kind = emu::StrategyKind::replay;
  replay.strategy.replay = r.schedule;
  const auto again = ring(64, RingBug::no_release, replay);
  EXPECT_EQ(again.status, emu::Status::deadlock);
  EXPECT_EQ(again.steps, r.steps);
  EXPECT_EQ(again.report(), r.report());
}

TEST(emu_Determinism, ScheduleThatDoesNotFitThrows) {
  std::uint32_t line = 0;
  const auto r = racy(with_strategy(emu::StrategyKind::random, 1), &line);
  ASSERT_GE(r.schedule.size(), 1u);
  ASSERT_NE(r.schedule.check(), 0u);
  auto replay_with = [&](emu::Schedule s, bool strict = true) {
    emu::RunOptions o;
    o.strategy.kind = emu::StrategyKind::replay;
    o.strategy.replay = std::move(s);
    o.strategy.strict = strict;
    return racy(o, &line);
  };
  using Dev = emu::Schedule::Deviation;
  std::vector<Dev> c = r.schedule.deviations();
  // Names an actor that does not exist.
  auto bad = c;
  bad[0].actor = 7;
  EXPECT_THROW(replay_with(emu::Schedule(bad)), emu::ScheduleMismatch);
  // Leniently (as shrinking replays), the same deviation is skipped.
  EXPECT_NO_THROW(replay_with(emu::Schedule(bad), false));
  // Leaves deviations unused: one past the run's last choice point.
  auto longer = c;
  longer.push_back({r.choices + 5, 0});
  EXPECT_THROW(replay_with(emu::Schedule(longer)), emu::ScheduleMismatch);
  // The same deviations with another run's check: recorded elsewhere.
  EXPECT_THROW(replay_with(emu::Schedule(c, r.schedule.check() ^ 1u)), emu::ScheduleMismatch);
  // The exact schedule fits, checked or not; no deviations is the default
  // policy's run, which fits any kernel.
  EXPECT_NO_THROW(replay_with(r.schedule));
  EXPECT_NO_THROW(replay_with(r.schedule.unchecked()));
  EXPECT_NO_THROW(replay_with(emu::Schedule()));
}

// The default policy: with no deviations the warp that runs goes on until it
// blocks; a deviation where it could go on is a preemption.
TEST(emu_Determinism, DefaultPolicyRunsTheCurrentWarpOnAndCountsPreemptions) {
  std::uint32_t line = 0;
  emu::RunOptions o;
  o.strategy.kind = emu::StrategyKind::replay;
  const auto plain = racy(o, &line);
  EXPECT_TRUE(plain.schedule.empty());
  EXPECT_EQ(plain.preemptions(), 0u);
  // Warp 0 runs on through both arrives before warp 1 waits: the bug.
  EXPECT_EQ(outcome(plain), "mbarrier.arrive-before-wait");
  // Every random run's deviations replay it exactly, and every preemption
  // is one of its deviations.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto r = racy(with_strategy(emu::StrategyKind::random, seed), &line);
    for (std::uint64_t at : r.preemption_at)
      EXPECT_TRUE(std::any_of(r.schedule.deviations().begin(), r.schedule.deviations().end(),
                              [&](const auto& d) { return d.at == at; }))
          << "seed " << seed << ": preemption at " << at << " is not a deviation";
    EXPECT_LE(r.preemptions(), r.schedule.size());
    emu::RunOptions again;
    again.strategy.kind = emu::StrategyKind::replay;
    again.strategy.replay = r.schedule;
    EXPECT_EQ(racy(again, &line).steps, r.steps);
  }
}

TEST(emu_Determinism, StepBudgetExhaustedIsALivelock) {
  emu::RunOptions opts = with_strategy(emu::StrategyKind::random, 1);
  opts.max_steps = 500;
  std::uint32_t spin_line = 0, wait_line = 0;
  auto r = run_kernel(
      2,
      [&] {
        auto& s = B::shared_storage<Bars>();
        if (B::warp_idx() == 0) init_bar(s.b[0], 1);
        B::cluster_sync();
        if (B::warp_idx() == 0) {
          // Busy forever as far as the budget goes (ends under teardown's no-ops).
          for (int i = 0; i < 100'000; ++i) {
            spin_line = __LINE__; B::syncwarp();
          }
        } else {
          wait_line = __LINE__; B::wait(s.b[0], 0);
        }
      },
      opts, kSmem);
  ASSERT_EQ(r.status, emu::Status::livelock) << r.report();
  EXPECT_EQ(r.steps, 500u);
  ASSERT_EQ(r.blocked.size(), 2u) << r.report();
  EXPECT_EQ(r.blocked[0].warp, "cta0/w0");
  EXPECT_EQ(r.blocked[0].op, "running");
  EXPECT_EQ(r.blocked[0].line, spin_line);
  EXPECT_EQ(r.blocked[1].warp, "cta0/w1");
  EXPECT_EQ(r.blocked[1].op, "wait");
  EXPECT_EQ(r.blocked[1].object, "bar (cta0)");
  EXPECT_EQ(r.blocked[1].line, wait_line);
  EXPECT_TRUE(contains(r.report(), "livelock")) << r.report();
}

// ------------------------------------------------------------ deadlock report

TEST(emu_DeadlockReport, RingWithoutReleaseNamesTheProducerOnEmpty0) {
  const auto r = ring(64, RingBug::no_release, {});
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  EXPECT_TRUE(r.violations.empty());
  const emu::BlockedWarp* producer = nullptr;
  const emu::BlockedWarp* consumer = nullptr;
  for (const auto& b : r.blocked) {
    if (b.warp == "cta0/w0") producer = &b;
    if (b.warp == "cta0/w1") consumer = &b;
  }
  ASSERT_NE(producer, nullptr) << r.report();
  EXPECT_EQ(producer->op, "wait");
  EXPECT_EQ(producer->object, "empty[0] (cta0)");
  EXPECT_TRUE(ends_with(producer->file, "examples/ring.hpp")) << producer->file;
  // 4 slots filled; the producer's second lap waits for parity 0 of empty[0],
  // whose 32 consumer arrivals never come.
  EXPECT_TRUE(contains(producer->state, "waits for parity 0")) << producer->state;
  EXPECT_TRUE(contains(producer->state, "32 of 32 arrivals pending")) << producer->state;
  ASSERT_FALSE(producer->last_events.empty());
  EXPECT_TRUE(contains(producer->last_events.front(), "init empty[0]")) << producer->last_events.front();
  // The consumer took the 4 items and waits for a fifth on full[0].
  ASSERT_NE(consumer, nullptr) << r.report();
  EXPECT_EQ(consumer->object, "full[0] (cta0)");

  const std::string report = r.report();
  EXPECT_TRUE(contains(report, "deadlock")) << report;
  EXPECT_TRUE(contains(report, "cta0/w0: wait on empty[0] (cta0)")) << report;
  EXPECT_TRUE(contains(report, "last events on empty[0] (cta0)")) << report;
  for (const auto& e : producer->last_events) EXPECT_TRUE(contains(report, e)) << e;
}

TEST(emu_DeadlockReport, RingOverArriveIsReportedAtTheProducersArrive) {
  const auto r = ring(8, RingBug::over_arrive, {});
  ASSERT_EQ(outcome(r), "mbarrier.over-arrival") << r.report();
  EXPECT_EQ(r.violations[0].warp, "cta0/w0");
  EXPECT_EQ(r.violations[0].object, "full[0] (cta0)");
  EXPECT_TRUE(ends_with(r.violations[0].file, "examples/ring.hpp")) << r.violations[0].file;
}

TEST(emu_DeadlockReport, RingCorrectRunsToTheEnd) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const auto r = ring(40, RingBug::none, with_strategy(emu::StrategyKind::random, seed));
    EXPECT_OK(r) << "seed " << seed;
    EXPECT_TRUE(r.blocked.empty());
  }
}

}  // namespace
