// Cluster launch control (clusterlaunchcontrol.try_cancel / query_cancel)
// and the launch of unlaunched clusters (LaunchConfig::max_active_clusters):
// every CLC rule fires on its bug and stays quiet on correct use, and a
// small persistent kernel covers every tile exactly once under many
// schedules, which divide the tiles among the clusters differently.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "core/clc.hpp"
#include "core/smem.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
using wspipe::ClcResponse;
using wspipe::SharedMemBarrier;
using wspipe::test::B;
using wspipe::test::contains;
using wspipe::test::elected_arrive;
using wspipe::test::init_bar;
using wspipe::test::outcome;
using wspipe::test::with_strategy;

struct ClcSmem {
  ClcResponse resp;
  SharedMemBarrier full;
  alignas(16) std::uint8_t spare[32];
};

emu::LaunchConfig launch(std::uint32_t clusters, std::uint32_t active, std::uint32_t cluster_size = 1,
                         std::uint32_t warps = 1) {
  emu::LaunchConfig l;
  l.num_clusters = clusters;
  l.max_active_clusters = active;
  l.cluster_size = cluster_size;
  l.warps_per_cta = warps;
  l.smem_bytes = sizeof(ClcSmem);
  return l;
}

// The default policy (an empty replayed schedule): the running warp goes on
// while it can, so a request stays in flight until the warp blocks.
emu::RunOptions default_policy() {
  emu::RunOptions o;
  o.strategy.kind = emu::StrategyKind::replay;
  return o;
}

// One elected lane arms `full` for the 16-byte response and requests.
void request(ClcSmem& s) {
  B::elect_one([&] {
    B::arrive_expect_tx(s.full, sizeof(ClcResponse));
    B::clc_try_cancel(s.resp, s.full);
  });
}

// ------------------------------------------------------------ the persistent kernel

// Each cluster processes its own tile (its cluster index), then loops:
// try_cancel, wait, and if a cluster was canceled, process that cluster's
// tile. `owner[t]` records which cluster processed tile t; `done` counts.
struct Persistent {
  std::uint32_t clusters = 6, active = 2, cluster_size = 1;
  bool assume_done_on_failure = false;  // the bug: a failed request taken to mean every tile is done
  bool drop_stolen = false;             // the bug: the canceled cluster's tile is never processed
  std::vector<std::int32_t> owner;
  std::vector<std::uint32_t> times;
  std::uint32_t done = 0;

  emu::Kernel kernel() {
    owner.assign(clusters, -1);
    times.assign(clusters, 0);
    emu::Kernel k;
    k.launch = launch(clusters, active, cluster_size);
    k.body = [this] { body(); };
    k.verify = [this]() -> std::string {
      for (std::uint32_t t = 0; t < clusters; ++t)
        if (times[t] != 1) return "tile " + std::to_string(t) + " processed " + std::to_string(times[t]) + " times";
      return "";
    };
    return k;
  }
  void process(std::uint32_t tile) {
    if (B::cta_rank() != 0) return;
    B::elect_one([&] {
      ++times[tile];
      owner[tile] = static_cast<std::int32_t>(B::cluster_idx());
      ++done;
    });
  }
  void body() {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1, "clc_full");
    B::fence_init();
    B::cluster_sync();
    std::uint32_t tile = B::cluster_idx();
    for (std::uint32_t round = 0;; ++round) {
      process(tile);
      if (cluster_size == 1) {
        request(s);
      } else {
        // Every CTA arms its own barrier; rank 0 asks for the whole cluster.
        B::elect_one([&] { B::arrive_expect_tx(s.full, sizeof(ClcResponse)); });
        B::cluster_sync();  // the others' barriers are armed before the response can land
        if (B::cta_rank() == 0) B::elect_one([&] { B::clc_try_cancel_multicast(s.resp, s.full); });
      }
      B::wait(s.full, round & 1u);
      if (!B::clc_is_canceled(s.resp)) {
        if (assume_done_on_failure) B::check(done == clusters, "every tile is done when try_cancel fails");
        break;
      }
      tile = B::clc_first_ctaid(s.resp).x / cluster_size;
      if (drop_stolen) tile = B::cluster_idx();
    }
    if (cluster_size > 1) B::cluster_sync();  // no CTA exits while a peer still reads its response
  }
};

TEST(ClcPersistent, EveryTileOnceAndDivisionsDiffer) {
  std::set<std::vector<std::int32_t>> divisions;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    Persistent p;
    const emu::Kernel k = p.kernel();
    const auto kind = seed % 2 == 0 ? emu::StrategyKind::random : emu::StrategyKind::pct;
    const emu::RunResult r = emu::run(k, with_strategy(kind, seed));
    ASSERT_EQ(outcome(r), "ok") << "seed " << seed << "\n" << r.report();
    divisions.insert(p.owner);
  }
  // Who processes which tile depends on the schedule: how far each
  // cluster's requests are from the launches, and whether requests fail.
  EXPECT_GE(divisions.size(), 5u);
  // Some schedule has a cluster take over another's tile, some let every
  // cluster run its own.
  bool stolen = false, own = false;
  for (const auto& d : divisions) {
    bool all_own = true;
    for (std::uint32_t t = 0; t < d.size(); ++t) all_own = all_own && d[t] == static_cast<std::int32_t>(t);
    stolen = stolen || !all_own;
    own = own || all_own;
  }
  EXPECT_TRUE(stolen);
  EXPECT_TRUE(own);
}

TEST(ClcPersistent, ExploredSchedulesCoverEveryTileOnce) {
  auto opts = wspipe::test::fixed_runs(300);
  const emu::ExploreResult r = emu::explore(
      [] {
        auto p = std::make_shared<Persistent>();
        emu::Kernel k = p->kernel();
        // The kernel instance owns its state through the closures.
        k.body = [p] { p->body(); };
        k.verify = [p, v = k.verify] { return v(); };
        return k;
      },
      opts);
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bounded exhaustive search over a small grid: every schedule within the
// preemption bound, the CLC completions and launches included, covers every
// tile once.
TEST(ClcPersistent, ExhaustiveSearchCoversEveryTileOnce) {
  auto opts = wspipe::test::fixed_runs(20000);
  opts.portfolio = {{emu::StrategyKind::exhaustive}};
  opts.preemptions = 1;
  const emu::ExploreResult r = emu::explore(
      [] {
        auto p = std::make_shared<Persistent>();
        p->clusters = 3;
        p->active = 2;
        emu::Kernel k = p->kernel();
        k.body = [p] { p->body(); };
        k.verify = [p, v = k.verify] { return v(); };
        return k;
      },
      opts);
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_TRUE(r.complete) << r.report();
  EXPECT_GT(r.runs, 1u);  // grants and refusals, launches in several orders
}

// The coverage property can fail: a kernel that drops the tile of the
// cluster it canceled leaves that tile undone in some schedule.
TEST(ClcPersistent, DroppedStolenTileIsFound) {
  auto opts = wspipe::test::fixed_runs(300);
  const emu::ExploreResult r = emu::explore(
      [] {
        auto p = std::make_shared<Persistent>();
        p->drop_stolen = true;
        emu::Kernel k = p->kernel();
        k.body = [p] { p->body(); };
        k.verify = [p, v = k.verify] { return v(); };
        return k;
      },
      opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure->outcome, "result.mismatch") << r.report();
}

TEST(ClcPersistent, MulticastClusterOfTwoCoversEveryTileOnce) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    Persistent p;
    p.cluster_size = 2;
    p.clusters = 4;
    const emu::Kernel k = p.kernel();
    const emu::RunResult r = emu::run(k, with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(outcome(r), "ok") << "seed " << seed << "\n" << r.report();
    ASSERT_EQ(k.verify(), "") << "seed " << seed;
  }
}

// The persistent kernel under lane-divergence mode and with the race checker
// off: the CLC operations behave the same.
TEST(ClcPersistent, LaneDivergenceAndNoRaceCheck) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    for (const bool lanes : {true, false}) {
      Persistent p;
      const emu::Kernel k = p.kernel();
      emu::RunOptions o = with_strategy(emu::StrategyKind::random, seed);
      o.lane_divergence = lanes;
      o.race_check = lanes;
      const emu::RunResult r = emu::run(k, o);
      ASSERT_EQ(outcome(r), "ok") << "seed " << seed << "\n" << r.report();
    }
  }
}

// Every cluster running from the start (the default): try_cancel fails at
// once, each cluster processes its own tile.
TEST(ClcPersistent, AllClustersRunningEveryRequestFails) {
  Persistent p;
  p.active = 0;
  const emu::Kernel k = p.kernel();
  const emu::RunResult r = emu::run(k, with_strategy(emu::StrategyKind::random, 3));
  EXPECT_OK(r);
  EXPECT_EQ(k.verify(), "");
  for (std::uint32_t t = 0; t < p.clusters; ++t) EXPECT_EQ(p.owner[t], static_cast<std::int32_t>(t));
}

// The ISA does not promise that a request succeeds while clusters remain
// unlaunched: a kernel that takes a failure to mean the grid is done is
// caught.
TEST(ClcPersistent, FailureWhileClustersRemainIsExplored) {
  bool caught = false;
  for (std::uint64_t seed = 1; seed <= 100 && !caught; ++seed) {
    Persistent p;
    p.assume_done_on_failure = true;
    const emu::RunResult r = emu::run(p.kernel(), with_strategy(emu::StrategyKind::random, seed));
    caught = outcome(r) == "kernel.check";
  }
  EXPECT_TRUE(caught);
}

TEST(ClcLaunch, BadMaxActiveClustersIsRejected) {
  EXPECT_THROW(emu::run(launch(2, 3), [] {}, {}), emu::BadLaunch);
}

// A deadlocked running cluster holds the only launch slot: the report shows
// the other cluster as not launched.
TEST(ClcLaunch, DeadlockReportNamesUnlaunchedClusters) {
  const emu::RunResult r = emu::run(launch(2, 1), [] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    B::wait(s.full, 0);
  }, {});
  ASSERT_EQ(r.status, emu::Status::deadlock) << r.report();
  ASSERT_EQ(r.blocked.size(), 2u);
  EXPECT_TRUE(contains(r.blocked[1].op, "not launched")) << r.report();
}

// ------------------------------------------------------------ rules

// Reading the response before its phase completed.
TEST(ClcRules, ReadBeforeCompletionFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(2, 1), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    request(s);
    line = __LINE__ + 1;
    if (B::clc_is_canceled(s.resp)) B::wait(s.full, 0);
  }, default_policy());
  EXPECT_VIOLATION_AT(r, "clc.response-before-completion", line);
}

// With every cluster running the request completes at issue; the read is
// still not ordered after the write without the wait: a race.
TEST(ClcRules, ReadWithoutWaitIsARace) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    request(s);
    line = __LINE__ + 1;
    (void)B::clc_is_canceled(s.resp);
  }, {});
  EXPECT_VIOLATION_AT(r, "race.smem", line);
}

// An ordinary read of the response's bytes is checked the same way.
TEST(ClcRules, OrdinaryReadWithoutWaitIsARace) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    request(s);
    line = __LINE__ + 1;
    B::smem_read(&s.resp, sizeof s.resp);
  }, {});
  EXPECT_VIOLATION_AT(r, "race.smem", line);
}

TEST(ClcRules, ReadAfterWaitIsQuiet) {
  for (std::uint32_t active : {0u, 1u}) {
    const emu::RunResult r = emu::run(launch(2, active), [] {
      auto& s = B::shared_storage<ClcSmem>();
      init_bar(s.full, 1);
      request(s);
      B::wait(s.full, 0);
      B::smem_read(&s.resp, sizeof s.resp);
      if (B::clc_is_canceled(s.resp)) (void)B::clc_first_ctaid(s.resp);
    }, with_strategy(emu::StrategyKind::random, 5));
    EXPECT_OK(r);
  }
}

TEST(ClcRules, FirstCtaidOfFailedResponseFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    request(s);
    B::wait(s.full, 0);
    line = __LINE__ + 1;
    (void)B::clc_first_ctaid(s.resp);  // with nothing to cancel the request failed
  }, {});
  EXPECT_VIOLATION_AT(r, "clc.ctaid-of-failed", line);
}

TEST(ClcRules, TryCancelAfterObservedFailureFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    for (std::uint32_t round = 0; round < 2; ++round) {
      B::elect_one([&] {
        B::arrive_expect_tx(s.full, sizeof(ClcResponse));
        if (round == 1) line = __LINE__ + 1;
        B::clc_try_cancel(s.resp, s.full);
      });
      B::wait(s.full, round & 1u);
      (void)B::clc_is_canceled(s.resp);  // failed, and ignored
    }
  }, {});
  EXPECT_VIOLATION_AT(r, "clc.try-cancel-after-failure", line);
}

// A failure not observed (never decoded) does not make the next request
// undefined; the persistent kernel above, which stops on failure, is the
// quiet case of the rule.
TEST(ClcRules, TryCancelAfterUnobservedFailureIsQuiet) {
  const emu::RunResult r = emu::run(launch(1, 0), [] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    for (std::uint32_t round = 0; round < 2; ++round) {
      request(s);
      B::wait(s.full, round & 1u);
    }
  }, {});
  EXPECT_OK(r);
}

TEST(ClcRules, ResponseOutsideSharedMemoryFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    ClcResponse local{};
    B::elect_one([&] {
      B::arrive_expect_tx(s.full, 16);
      line = __LINE__ + 1;
      B::clc_try_cancel(local, s.full);
    });
  }, {});
  EXPECT_VIOLATION_AT(r, "clc.response-not-shared", line);
}

// What a kernel's misaligned pointer cast does: binding the reference is
// undefined in C++ (UBSan's alignment check says so, and is told not to
// here); the emulator's rule is what the kernel author gets.
__attribute__((no_sanitize("alignment"))) void try_cancel_misaligned(
    std::uint8_t* p, SharedMemBarrier& bar, wspipe::SourceLoc loc = wspipe::SourceLoc::current()) {
  B::clc_try_cancel(*reinterpret_cast<ClcResponse*>(p), bar, loc);
}

TEST(ClcRules, MisalignedResponseFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    B::elect_one([&] {
      B::arrive_expect_tx(s.full, 16);
      line = __LINE__ + 1;
      try_cancel_misaligned(s.spare + 8, s.full);
    });
  }, {});
  EXPECT_VIOLATION_AT(r, "clc.response-misaligned", line);
}

TEST(ClcRules, BarrierOutsideSharedMemoryFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    SharedMemBarrier local{};
    B::elect_one([&] {
      line = __LINE__ + 1;
      B::clc_try_cancel(s.resp, local);
    });
  }, {});
  EXPECT_VIOLATION_AT(r, "mbarrier.not-shared", line);
}

TEST(ClcRules, WholeWarpIssueFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    line = __LINE__ + 1;
    B::clc_try_cancel(s.resp, s.full);
  }, {});
  EXPECT_VIOLATION_AT(r, "clc.multi-lane", line);
}

TEST(ClcRules, DecodingBytesNoRequestWroteFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(1, 0), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    line = __LINE__ + 1;
    (void)B::clc_is_canceled(s.resp);
  }, {});
  EXPECT_VIOLATION_AT(r, "clc.not-a-response", line);
}

TEST(ClcRules, SecondRequestIntoResponseInFlightFires) {
  int line = 0;
  const emu::RunResult r = emu::run(launch(3, 1), [&] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 2);
    B::elect_one([&] {
      B::arrive_expect_tx(s.full, sizeof(ClcResponse));
      B::clc_try_cancel(s.resp, s.full);
      B::arrive_expect_tx(s.full, sizeof(ClcResponse));
      line = __LINE__ + 1;
      B::clc_try_cancel(s.resp, s.full);
    });
    B::wait(s.full, 0);
  }, default_policy());
  EXPECT_VIOLATION_AT(r, "clc.response-in-flight", line);
}

// Two requests in flight, each with its own response: quiet.
TEST(ClcRules, TwoRequestsWithTwoResponsesAreQuiet) {
  struct Two {
    ClcResponse resp[2];
    SharedMemBarrier full;
  };
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    emu::LaunchConfig l = launch(4, 1);
    l.smem_bytes = sizeof(Two);
    const emu::RunResult r = emu::run(l, [] {
      auto& s = B::shared_storage<Two>();
      init_bar(s.full, 2);
      B::elect_one([&] {
        for (auto& resp : s.resp) {
          B::arrive_expect_tx(s.full, sizeof(ClcResponse));
          B::clc_try_cancel(resp, s.full);
        }
      });
      B::wait(s.full, 0);
      for (const auto& resp : s.resp)
        if (B::clc_is_canceled(resp)) (void)B::clc_first_ctaid(resp);
    }, with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(outcome(r), "ok") << "seed " << seed << "\n" << r.report();
  }
}

// A scheduler warp (0) asks and a worker warp (1) decodes each response.
// Reusing the response for the next request before the worker has read the
// last one is a race on its bytes; an "empty" barrier the worker arrives on
// and the scheduler waits for orders them.
struct TwoWarpClc {
  ClcResponse resp;
  SharedMemBarrier full, empty;
};
emu::RunResult two_warp_run(bool with_empty, std::uint64_t seed) {
  emu::LaunchConfig l = launch(4, 1, 1, 2);
  l.smem_bytes = sizeof(TwoWarpClc);
  return emu::run(l, [with_empty] {
    auto& s = B::shared_storage<TwoWarpClc>();
    if (B::warp_idx() == 0) {
      init_bar(s.full, 1);
      init_bar(s.empty, 1);
    }
    B::named_sync(1, 64);
    for (std::uint32_t round = 0;; ++round) {
      if (B::warp_idx() == 0) {
        if (with_empty && round > 0) B::wait(s.empty, (round - 1) & 1u);
        B::elect_one([&] {
          B::arrive_expect_tx(s.full, sizeof(ClcResponse));
          B::clc_try_cancel(s.resp, s.full);
        });
      }
      B::wait(s.full, round & 1u);
      const bool canceled = B::clc_is_canceled(s.resp);
      if (B::warp_idx() == 1) elected_arrive(s.empty);
      if (!canceled) break;
    }
    if (B::warp_idx() == 0 && with_empty) B::named_sync(2, 64);  // the worker's last read before exit
    if (B::warp_idx() == 1 && with_empty) B::named_sync(2, 64);
  }, with_strategy(emu::StrategyKind::random, seed));
}

TEST(ClcRules, ResponseReusedBeforeConsumerReadIsARace) {
  bool caught = false;
  for (std::uint64_t seed = 1; seed <= 100 && !caught; ++seed) {
    const emu::RunResult r = two_warp_run(false, seed);
    const std::string o = outcome(r);
    ASSERT_TRUE(o == "ok" || o == "race.smem" || o == "clc.response-before-completion" ||
                o == "mbarrier.arrive-before-wait")
        << r.report();
    caught = o == "race.smem";
  }
  EXPECT_TRUE(caught);
}

TEST(ClcRules, ResponseReusedAfterEmptyBarrierIsQuiet) {
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    const emu::RunResult r = two_warp_run(true, seed);
    ASSERT_EQ(outcome(r), "ok") << "seed " << seed << "\n" << r.report();
  }
}

// A CTA that exits while its request is in flight: the response would land
// in a CTA that is gone.
TEST(ClcRules, ExitWithRequestInFlightFires) {
  const emu::RunResult r = emu::run(launch(2, 1), [] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    request(s);
  }, default_policy());
  ASSERT_EQ(outcome(r), "async.target-exited") << r.report();
  EXPECT_TRUE(contains(r.violations[0].message, "try_cancel")) << r.report();
}

// PTX: the multicast form is undefined if any CTA of the cluster exited.
TEST(ClcRules, MulticastIntoExitedCtaFires) {
  const emu::RunResult r = emu::run(launch(2, 1, 2), [] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    B::fence_init();
    B::cluster_sync();
    if (B::cta_rank() == 0) {
      B::elect_one([&] {
        B::arrive_expect_tx(s.full, 16);
        B::clc_try_cancel_multicast(s.resp, s.full);
      });
      B::wait(s.full, 0);
    }
  }, default_policy());
  EXPECT_EQ(outcome(r), "async.target-exited") << r.report();
}

// The multicast response lands in every CTA of the cluster, which all
// decode the same cluster.
TEST(ClcRules, MulticastResponseReachesEveryCta) {
  auto firsts = std::make_shared<std::vector<std::uint32_t>>(2, 99);
  const emu::RunResult r = emu::run(launch(2, 1, 2), [firsts] {
    auto& s = B::shared_storage<ClcSmem>();
    init_bar(s.full, 1);
    B::fence_init();
    B::cluster_sync();
    B::elect_one([&] { B::arrive_expect_tx(s.full, 16); });
    B::cluster_sync();
    if (B::cta_rank() == 0) B::elect_one([&] { B::clc_try_cancel_multicast(s.resp, s.full); });
    B::wait(s.full, 0);
    const std::uint32_t first = B::clc_is_canceled(s.resp) ? B::clc_first_ctaid(s.resp).x : 1000;
    B::elect_one([&] { (*firsts)[B::cta_rank()] = first; });
    B::cluster_sync();
  }, default_policy());
  EXPECT_OK(r);
  EXPECT_EQ((*firsts)[0], (*firsts)[1]);
}

// A canceled cluster's warps never run.
TEST(ClcLaunch, CanceledClusterNeverRuns) {
  auto ran = std::make_shared<std::vector<std::uint32_t>>(3, 0);
  auto canceled = std::make_shared<std::vector<std::uint32_t>>();
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    std::fill(ran->begin(), ran->end(), 0);
    canceled->clear();
    const emu::RunResult r = emu::run(launch(3, 1), [ran, canceled] {
      auto& s = B::shared_storage<ClcSmem>();
      ++(*ran)[B::cluster_idx()];
      init_bar(s.full, 1);
      for (std::uint32_t round = 0;; ++round) {
        request(s);
        B::wait(s.full, round & 1u);
        if (!B::clc_is_canceled(s.resp)) break;
        canceled->push_back(B::clc_first_ctaid(s.resp).x);
      }
    }, with_strategy(emu::StrategyKind::random, seed));
    ASSERT_EQ(outcome(r), "ok") << r.report();
    for (const std::uint32_t c : *canceled) EXPECT_EQ((*ran)[c], 0u) << "seed " << seed;
    EXPECT_EQ((*ran)[0] + (*ran)[1] + (*ran)[2] + canceled->size(), 3u) << "seed " << seed;
  }
}

// Two warps' requests complete on the cluster's CLC unit, each on its
// issuer's agent: warp 1's response, and the wait that acquires it, are not
// ordered after what warp 0 did before its own request, whichever request
// completes first. Quiet when a named barrier orders warp 0's store first.
TEST(emu_Clc, AResponseIsNotOrderedAfterAnotherIssuersStore) {
  struct S {
    ClcResponse resp[2];
    SharedMemBarrier full[2];
    std::uint32_t x;
  };
  auto kernel = [](bool ordered) {
    return [ordered] {
      auto& s = B::shared_storage<S>();
      const std::uint32_t w = B::warp_idx();
      if (w == 0) {
        init_bar(s.full[0], 1, "clc_full0");
        init_bar(s.full[1], 1, "clc_full1");
        B::fence_init();
      }
      B::cluster_sync();
      wspipe::SmemView<B, std::uint32_t> x(&s.x, 1);
      if (w == 0) {
        B::elect_one([&] { x.store(0, 7); });
        if (ordered) B::named_arrive(1, 64);
      } else if (ordered) {
        B::named_sync(1, 64);
      }
      B::elect_one([&] {
        B::arrive_expect_tx(s.full[w], sizeof(ClcResponse));
        B::clc_try_cancel(s.resp[w], s.full[w]);
      });
      B::wait(s.full[w], 0);
      if (w == 1) B::elect_one([&] { (void)x.load(0); });
    };
  };
  for (std::uint64_t seed = 0; seed <= 10; ++seed) {
    emu::RunOptions o = seed == 0 ? default_policy() : with_strategy(emu::StrategyKind::random, seed);
    emu::LaunchConfig l = launch(1, 0, 1, 2);
    l.smem_bytes = sizeof(S);
    auto bad = emu::run(l, kernel(false), o);
    EXPECT_EQ(outcome(bad), "race.smem") << "seed " << seed << "\n" << bad.report();
    auto good = emu::run(l, kernel(true), o);
    EXPECT_EQ(good.status, emu::Status::ok) << "seed " << seed << "\n" << good.report();
  }
}

}  // namespace
