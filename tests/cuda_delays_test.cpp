// The CUDA backend's seeded delays on the CPU (backends/cuda/delays_format.hpp,
// tools/gpu/ddmin.hpp): a sleep is a pure function of the seed, the site,
// the warp and the occurrence, distributed as documented; sites and
// configurations read and write as their text says, and malformed ones are
// refused; ddmin finds a 1-minimal failing list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/delays_format.hpp"
#include "tools/gpu/ddmin.hpp"

namespace {

using namespace wspipe::cuda;

TEST(CudaDelays, SleepIsAPureFunctionOfSeedSiteWarpAndOccurrence) {
  const std::uint32_t site = delay_site_key(EventOp::wait, event_log_file_id("ring.hpp"), 73);
  for (std::uint32_t n = 0; n < 200; ++n) {
    EXPECT_EQ(delay_ns(7, 64, 65536, site, 3, n), delay_ns(7, 64, 65536, site, 3, n));
  }
  // Each input changes the sequence.
  const auto sequence = [&](std::uint64_t seed, std::uint32_t s, std::uint32_t warp) {
    std::vector<std::uint32_t> v;
    for (std::uint32_t n = 0; n < 64; ++n) v.push_back(delay_ns(seed, 128, 65536, s, warp, n));
    return v;
  };
  const auto base = sequence(7, site, 3);
  EXPECT_NE(base, sequence(8, site, 3));
  EXPECT_NE(base, sequence(7, site + 1, 3));
  EXPECT_NE(base, sequence(7, site, 4));
  // Pinned: recorded seeds (docs/silicon.md) mean these sleeps.
  EXPECT_EQ(site, 2067741665u);
  std::vector<std::uint32_t> first;
  for (std::uint32_t n = 0; n < 8; ++n) first.push_back(delay_ns(1, 64, 65536, site, 0, n));
  EXPECT_EQ(first, (std::vector<std::uint32_t>{7, 0, 0, 0, 1, 0, 0, 0}));
}

TEST(CudaDelays, DensityAndLengthsAreAsDocumented) {
  const std::uint32_t site = delay_site_key(EventOp::arrive, event_log_file_id("tile_reduce.hpp"), 140);
  for (const std::uint32_t density : {0u, 64u, 128u, 256u}) {
    std::uint32_t slept = 0;
    std::set<std::uint32_t> exponents;
    constexpr std::uint32_t kSamples = 40000;
    for (std::uint32_t n = 0; n < kSamples; ++n) {
      const std::uint32_t ns = delay_ns(42, density, 4096, site, n % 17, n);
      EXPECT_LE(ns, 4096u);
      if (ns == 0) continue;
      ++slept;
      std::uint32_t k = 0;
      while ((ns >> (k + 1)) != 0) ++k;
      exponents.insert(k);
    }
    const double share = static_cast<double>(slept) / kSamples;
    EXPECT_NEAR(share, density / 256.0, 0.01) << "density " << density;
    if (density != 0) {
      EXPECT_EQ(exponents.size(), 13u) << "every length from 2^0 to 2^12 ns";
    }
  }
  // max_ns caps the length, and 1 ns is a valid maximum.
  for (std::uint32_t n = 0; n < 1000; ++n) EXPECT_EQ(delay_ns(3, 256, 1, site, 0, n), 1u);
}

TEST(CudaDelays, SitesReadAndWriteAsTheirText) {
  const auto s = parse_delay_site("wait@ring.hpp:73");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->op, EventOp::wait);
  EXPECT_EQ(s->file, "ring.hpp");
  EXPECT_EQ(s->line, 73u);
  EXPECT_EQ(s->text(), "wait@ring.hpp:73");
  EXPECT_EQ(s->key(), delay_site_key(EventOp::wait, event_log_file_id("ring.hpp"), 73));
  // A path is the name after its last '/', as the device's file id.
  const auto p = parse_delay_site("tma_load@/src/examples/tile_reduce.hpp:120");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->file, "tile_reduce.hpp");
  EXPECT_EQ(p->key(), delay_site_key(EventOp::tma_load, event_log_file_id("tile_reduce.hpp"), 120));
  EXPECT_NE(p->key(), delay_site_key(EventOp::tma_store, event_log_file_id("tile_reduce.hpp"), 120));
  // Not sites: an op that never sleeps, an unknown op, no file, no line, line 0.
  for (const char* bad : {"init@ring.hpp:73", "expect_tx@ring.hpp:5", "sleep@ring.hpp:73", "wait@:73", "wait@ring.hpp",
                          "wait@ring.hpp:", "wait@ring.hpp:0", "wait@ring.hpp:7x", "waitring.hpp:73"}) {
    EXPECT_FALSE(parse_delay_site(bad)) << bad;
  }
}

TEST(CudaDelays, ConfigurationsReadAndWriteAsTheirText) {
  std::string error;
  const auto all = parse_delay_config("seed:7", error);
  ASSERT_TRUE(all) << error;
  EXPECT_EQ(all->text(), "seed:7,density:64,max_ns:65536,sites:all");
  EXPECT_EQ(all->params().all, 1u);

  const std::string text = "seed:18446744073709551615,density:256,max_ns:1000,sites:wait@ring.hpp:73+arrive@ring.hpp:85";
  const auto listed = parse_delay_config(text, error);
  ASSERT_TRUE(listed) << error;
  EXPECT_EQ(listed->text(), text);
  EXPECT_EQ(listed->seed, 18446744073709551615ull);
  ASSERT_EQ(listed->sites.size(), 2u);
  const DelayParams p = listed->params();
  EXPECT_EQ(p.all, 0u);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.keys[0], listed->sites[0].key());
  EXPECT_EQ(p.keys[1], listed->sites[1].key());
  // Keys in any order; `none` sleeps nowhere.
  const auto none = parse_delay_config("sites:none,max_ns:8,seed:3", error);
  ASSERT_TRUE(none) << error;
  EXPECT_FALSE(none->all);
  EXPECT_TRUE(none->sites.empty());
  EXPECT_EQ(none->text(), "seed:3,density:64,max_ns:8,sites:none");
  EXPECT_EQ(none->params().count, 0u);

  for (const char* bad : {"seed:x", "seed:1,seed:2", "density:257", "max_ns:0", "max_ns:1000001", "colour:red",
                          "seed", "sites:wait@ring.hpp:73+wait@ring.hpp:73", "sites:init@ring.hpp:3"}) {
    error.clear();
    EXPECT_FALSE(parse_delay_config(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  std::string many = "sites:";
  for (std::uint32_t i = 1; i <= kDelayMaxSites + 1; ++i) many += (i > 1 ? "+" : "") + ("wait@k.cu:" + std::to_string(i));
  EXPECT_FALSE(parse_delay_config(many, error));
}

TEST(CudaDelays, DdminFindsAOneMinimalFailingList) {
  std::vector<int> items(20);
  for (int i = 0; i < 20; ++i) items[i] = i;
  const auto has = [](const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  // Two culprits together.
  std::size_t tests = 0;
  auto both = [&](const std::vector<int>& v) { return has(v, 3) && has(v, 17); };
  EXPECT_EQ(wspipe::gpu::ddmin(items, both, &tests), (std::vector<int>{3, 17}));
  EXPECT_GT(tests, 0u);
  EXPECT_LT(tests, 60u);
  // One culprit.
  auto one = [&](const std::vector<int>& v) { return has(v, 11); };
  EXPECT_EQ(wspipe::gpu::ddmin(items, one), (std::vector<int>{11}));
  // Any three: a 1-minimal answer has exactly three, each needed.
  auto three = [](const std::vector<int>& v) { return v.size() >= 3; };
  const auto m = wspipe::gpu::ddmin(items, three);
  EXPECT_EQ(m.size(), 3u);
  // The empty list is never asked for, and the answer keeps the order.
  auto never_empty = [&](const std::vector<int>& v) {
    EXPECT_FALSE(v.empty());
    return has(v, 0) && has(v, 19) && has(v, 9);
  };
  EXPECT_EQ(wspipe::gpu::ddmin(items, never_empty), (std::vector<int>{0, 9, 19}));
  // A single failing item is already minimal.
  EXPECT_EQ(wspipe::gpu::ddmin(std::vector<int>{5}, one), (std::vector<int>{5}));
}

}  // namespace
