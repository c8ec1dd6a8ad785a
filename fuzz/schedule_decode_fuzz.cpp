// Schedule::decode on arbitrary text: never crashes, and whatever it
// accepts re-encodes to text that decodes to the same schedule.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backends/emu/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string why;
  const auto s = wspipe::emu::Schedule::decode(text, &why);
  if (!s) {
    if (why.empty()) std::abort();  // a rejection always says why
    return 0;
  }
  if (s->size() > (1u << 20)) return 0;  // valid but huge: skip the re-encode
  const auto back = wspipe::emu::Schedule::decode(s->encode(), &why);
  if (!back || !(*back == *s)) std::abort();
  return 0;
}
