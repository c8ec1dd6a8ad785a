// ParityAloneBackend: the emulator with every mbarrier wait by parity
// alone, as the hardware sees it. The phase number a pipeline states with
// its waits (PhaseNumber) is dropped, so the emulator does not check it: a
// wait that aliases is not reported at the wait, and shows by what it lets
// through (a deadlock, a race on the data it reads, a wrong value). The
// `pingpong` scenario's --waits parity runs its kernel on it.
#pragma once

#include <cstdint>

#include "backends/emu/emu_backend.hpp"

namespace wspipe::examples {

struct ParityAloneBackend : emu::EmuBackend {
  using emu::EmuBackend::test_wait;
  using emu::EmuBackend::try_wait;
  using emu::EmuBackend::wait;
  static bool try_wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber, SourceLoc loc = SourceLoc::current()) {
    return emu::EmuBackend::try_wait(bar, parity, loc);
  }
  static bool test_wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber,
                        SourceLoc loc = SourceLoc::current()) {
    return emu::EmuBackend::test_wait(bar, parity, loc);
  }
  static void wait(SharedMemBarrier& bar, std::uint32_t parity, PhaseNumber, SourceLoc loc = SourceLoc::current()) {
    emu::EmuBackend::wait(bar, parity, loc);
  }
};
static_assert(Backend<ParityAloneBackend>);

}  // namespace wspipe::examples
