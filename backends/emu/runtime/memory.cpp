// The memory budget shared by the runs of a process (memory.hpp).
#include "backends/emu/runtime/memory.hpp"

#include <atomic>

#include "backends/emu/emulator.hpp"

namespace wspipe::emu::detail {

namespace {

std::atomic<std::size_t> charged{0};

std::string mib(std::size_t bytes) { return std::to_string((bytes + (std::size_t{1} << 20) - 1) >> 20) + " MiB"; }

}  // namespace

}  // namespace wspipe::emu::detail

namespace wspipe::emu {
std::size_t memory_charged() { return detail::charged.load(std::memory_order_relaxed); }
}  // namespace wspipe::emu

namespace wspipe::emu::detail {

bool try_charge_memory(std::size_t bytes, std::size_t limit) {
  std::size_t now = charged.load(std::memory_order_relaxed);
  do {
    if (limit != 0 && (now > limit || bytes > limit - now)) return false;
  } while (!charged.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
  return true;
}

void release_memory(std::size_t bytes) { charged.fetch_sub(bytes, std::memory_order_relaxed); }

void MemoryCharge::add(std::size_t bytes, std::size_t limit, const std::string& what) {
  if (!try_charge_memory(bytes, limit))
    throw OutOfResources("out of memory budget: " + what + " needs " + mib(bytes) + ", and " + mib(memory_charged()) +
                         " of the " + mib(limit) +
                         " allowed (--max-memory, WSPIPE_MAX_MEMORY) are in use by this process's runs (every "
                         "job's CTAs, traces and MMA memo); a smaller configuration, fewer jobs (--jobs), a "
                         "smaller MMA memo (--mma-memo-mib) or a larger --max-memory would fit");
  bytes_ += bytes;
}

}  // namespace wspipe::emu::detail
