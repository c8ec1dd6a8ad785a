// The PTX ISA's limits on an mbarrier's counts ("Mbarrier counts", for the
// .layout::v0 barrier every backend uses): the arrival count an init may
// set and the range of the tx-count. The emulator's mbarrier model and the
// fuzzers' reference model (fuzz/ref_mbarrier.hpp) check the same limits;
// they read them here, and nothing else of one another.
#pragma once

#include <cstdint>

namespace wspipe {

// mbarrier.init's count, the arrivals a phase expects: 1 to 2^20 - 1.
inline constexpr std::uint32_t kMbarrierMaxCount = (1u << 20) - 1;
// The tx-count of a phase, bytes expected (expect_tx) less bytes delivered
// (complete_tx), stays within -(2^20 - 1) to 2^20 - 1.
inline constexpr std::int64_t kMbarrierMaxTx = (1 << 20) - 1;

}  // namespace wspipe
