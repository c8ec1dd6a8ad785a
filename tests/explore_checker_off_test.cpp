// The complete search with the race checker off (ExploreOptions::race_check
// false, `--no-race-check`): unordered data accesses are not reported, so
// the reduction must run both orders of two conflicting ones, since a later
// value depends on the order. That holds for a warp's ordinary accesses and
// for the asynchronous ones: a TMA load's bytes landing in shared memory,
// and an unordered read of them, are two steps that do not commute.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "backends/emu/emu.hpp"
#include "core/smem.hpp"
#include "core/tma.hpp"
#include "emu_test_util.hpp"

namespace wspipe {
namespace {

using test::B;
using test::init_bar;

struct CopySmem {
  SharedMemBarrier full;
  alignas(128) std::uint32_t dst[16];
};

// Warp 0 copies 16 words (1000, 1001, ...) into `dst` with a TMA load and
// waits for them; warp 1 reads word 0 of `dst` without waiting: it reads 0
// or 1000, depending on whether the copy has landed. `seen` collects what
// it read.
emu::KernelFactory unordered_read_of_a_copy(std::set<std::uint32_t>* seen) {
  return [seen] {
    emu::Kernel k;
    k.launch.warps_per_cta = 2;
    k.launch.smem_bytes = sizeof(CopySmem);
    k.body = [seen] {
      static const std::uint32_t source[16] = {1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007,
                                               1008, 1009, 1010, 1011, 1012, 1013, 1014, 1015};
      auto& s = B::shared_storage<CopySmem>();
      const SmemView<B, std::uint32_t> dst(s.dst, 16);
      if (B::warp_idx() == 0) {
        init_bar(s.full, 1, "full");
        for (std::uint32_t i = 0; i < 16; ++i) dst.store(i, 0);
        B::fence_init();
        B::fence_proxy_async();
      }
      B::cluster_sync();
      if (B::warp_idx() == 0) {
        const TensorMap m = row_major_tensor_map(source, ElemType::u32, 16, 1, 16, 1);  // one row of 16 words
        B::elect_one([&] {
          B::arrive_expect_tx(s.full, sizeof s.dst);
          B::tma_load(m, s.dst, s.full, TmaCoords{});
        });
        B::wait(s.full, 0);
      } else {
        const std::uint32_t v = dst.load(0);
        seen->insert(v);
      }
    };
    return k;
  };
}

TEST(explore_CheckerOff, TheCompleteSearchReadsACopysDestinationBeforeAndAfterItLands) {
  for (const bool reduce : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "reduce " << reduce);
    std::set<std::uint32_t> seen;
    emu::ExploreOptions o;
    o.portfolio = {{emu::StrategyKind::exhaustive}};
    o.race_check = false;
    o.reduce = reduce;
    o.seconds = 0;
    o.jobs = 1;
    const emu::ExploreResult r = emu::explore(unordered_read_of_a_copy(&seen), o);
    ASSERT_TRUE(r.ok()) << r.report();
    EXPECT_TRUE(r.complete) << r.report();
    EXPECT_EQ(seen, (std::set<std::uint32_t>{0, 1000})) << r.report();
  }
  // With the checker on, the unordered read is the finding.
  std::set<std::uint32_t> seen;
  emu::ExploreOptions o;
  o.portfolio = {{emu::StrategyKind::exhaustive}};
  o.seconds = 0;
  o.jobs = 1;
  const emu::ExploreResult r = emu::explore(unordered_read_of_a_copy(&seen), o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(test::contains(r.report(), "race.smem")) << r.report();
}

}  // namespace
}  // namespace wspipe
