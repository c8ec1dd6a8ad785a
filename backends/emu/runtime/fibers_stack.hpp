// A fiber's stack, as the sanitizer annotations need it (internal).
#pragma once

#include <cstddef>

namespace wspipe::emu::detail {

// A fiber's stack as AddressSanitizer needs it: Boost.Context switches
// stacks without telling it, so the World announces each switch (fibers.cpp,
// World::switch_to). Unused in builds without ASan.
struct FiberStack {
  const void* bottom = nullptr;  // lowest address
  std::size_t size = 0;
};

}  // namespace wspipe::emu::detail
