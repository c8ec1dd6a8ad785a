// The memory budget (RunOptions::max_memory_bytes): the emulator's large
// buffers, of every run in the process at once (an exploration's jobs
// share it), are charged here before they are allocated, and a charge
// that would pass the budget throws OutOfResources naming what needed the
// memory and what would help.
#pragma once

#include <cstddef>
#include <string>

#include "backends/emu/emulator.hpp"

namespace wspipe::emu::detail {

// Charges `bytes` unless that would take the process past `limit` (0: no
// limit); true if charged.
bool try_charge_memory(std::size_t bytes, std::size_t limit);
void release_memory(std::size_t bytes);

// A charge held while its buffers live, released when it is destroyed.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  ~MemoryCharge() { release_memory(bytes_); }
  // Adds `bytes`, or throws OutOfResources: "`what` needs ..., over the
  // memory budget (--max-memory ...)".
  void add(std::size_t bytes, std::size_t limit, const std::string& what);
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
};

}  // namespace wspipe::emu::detail
