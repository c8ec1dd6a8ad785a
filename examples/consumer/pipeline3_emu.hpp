// pipeline3 on wspipe's emulator: one configuration as an emu::Kernel (the
// launch, the body, and a check of the output), for the tests and the CLI.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/emu/emu_backend.hpp"
#include "backends/emu/explore.hpp"
#include "core/stage_dispatch.hpp"
#include "pipeline3.hpp"

namespace pipeline3 {

inline constexpr int kMaxStages = 4;

struct Config {
  int stages = 2;  // 1..kMaxStages
  std::uint32_t items = 16;
  std::uint32_t key = 0x5eed;
  Bug bug = Bug::none;
  bool check = true;  // check the output (in the kernel and after each run)
};

using Input = std::shared_ptr<const std::vector<std::uint32_t>>;

inline Input make_input(std::uint32_t items) {
  std::vector<std::uint32_t> v(items);
  for (std::uint32_t i = 0; i < items; ++i) v[i] = i * 7919u + 13u;
  return std::make_shared<const std::vector<std::uint32_t>>(std::move(v));
}

template <int S>
void run_stages(const Params& p) {
  kernel<wspipe::emu::EmuBackend, S>(p);
}

// One instance: the input is shared between instances (read only), the
// output is its own.
inline wspipe::emu::Kernel make_kernel(const Config& c, Input input) {
  if (c.stages < 1 || c.stages > kMaxStages)
    throw std::invalid_argument("pipeline3: stages must be in [1, " + std::to_string(kMaxStages) + "], got " +
                                std::to_string(c.stages));
  if (input->size() != c.items) throw std::invalid_argument("pipeline3: the input does not have `items` words");
  auto output = std::make_shared<std::vector<std::uint32_t>>(c.items, 0u);
  wspipe::emu::Kernel k;
  k.launch.warps_per_cta = kWarps;
  k.launch.warp_roles = {"loader", "transformer", "writer"};
  void (*body)(const Params&) = nullptr;
  // Stages is a template parameter: the run-time value picks an instantiation.
  k.launch.smem_bytes = wspipe::dispatch_stage_count<kMaxStages>(static_cast<std::uint32_t>(c.stages), [&]<int S>() {
    body = run_stages<S>;
    return sizeof(Storage<S>);
  });
  const Params p{input->data(), output->data(), c.items, c.key, c.bug, c.check};
  k.body = [p, body, input, output] { body(p); };
  k.verify = [c, input, output]() -> std::string {
    if (!c.check) return "";
    for (std::uint32_t i = 0; i < c.items; ++i)
      if ((*output)[i] != transform((*input)[i], c.key))
        return "output[" + std::to_string(i) + "] = " + std::to_string((*output)[i]) + ", expected " +
               std::to_string(transform((*input)[i], c.key));
    return "";
  };
  return k;
}

// A fresh instance per run (explore() may run several at once).
inline wspipe::emu::KernelFactory make_factory(const Config& c) {
  const Input input = make_input(c.items);
  return [c, input] { return make_kernel(c, input); };
}

}  // namespace pipeline3
