// The `tmem-coresident` scenario: options, variants, and the launch of
// examples/tmem_coresident.hpp each run uses.
#include <bit>
#include <stdexcept>
#include <string>

#include "backends/emu/emu_backend.hpp"
#include "scenarios.hpp"
#include "tmem_coresident.hpp"

namespace wspipe::examples {

Scenario make_tmem_coresident_scenario() {
  Scenario s;
  s.name = "tmem-coresident";
  s.help = "co-resident CTAs (--ctas-per-sm) allocate an accumulator and a staging buffer from their SM's 512 "
           "Tensor Memory columns; tcgen05.alloc blocks until columns are free";
  s.options = {
      {"cols", 256, 32, 256, "columns of each region (a power of 2); a CTA needs two"},
      {"ctas-per-sm", 2, 1, 4, "CTAs sharing one SM's Tensor Memory"},
      {"clusters", 2, 1, 16, "clusters (of one CTA) in the grid; consecutive ones share SMs"},
  };
  s.variants = {
      {"", "ok", "correct kernel: both regions in one allocation, so co-resident CTAs at worst take turns"},
      {"two-step-alloc", "deadlock",
       "the accumulator, then the staging buffer: under some schedules each CTA holds its first region and "
       "waits in tcgen05.alloc for columns another CTA holds"},
  };
  s.prepare = [](const std::string& variant, const OptionValues& o) {
    CoresidentBug bug = CoresidentBug::none;
    if (variant == "two-step-alloc") {
      bug = CoresidentBug::two_step_alloc;
    } else if (!variant.empty()) {
      throw std::invalid_argument("tmem-coresident: no variant '" + variant + "'");
    }
    const auto cols = static_cast<std::uint32_t>(o.at("cols"));
    if (!std::has_single_bit(cols)) throw std::invalid_argument("tmem-coresident: --cols must be a power of 2");
    emu::Kernel k;
    k.launch.num_clusters = static_cast<std::uint32_t>(o.at("clusters"));
    k.launch.warps_per_cta = 1;
    k.launch.smem_bytes = sizeof(CoresidentStorage);
    k.launch.warp_roles = {"tmem"};
    k.launch.ctas_per_sm = static_cast<std::uint32_t>(o.at("ctas-per-sm"));
    k.body = [cols, bug] { tmem_coresident_kernel<emu::EmuBackend>(cols, bug); };
    return k;
  };
  return s;
}

}  // namespace wspipe::examples
