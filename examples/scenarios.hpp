// The built-in catalogue of scenarios (an emu::Catalogue): each kernel of
// examples/, its options, and its variants with the outcome each must produce.
#pragma once

#include <cstdint>
#include <string>

#include "backends/emu/explore.hpp"
#include "backends/emu/scenario.hpp"
#include "core/cluster.hpp"

namespace wspipe::examples {

using emu::Catalogue;
using emu::OptionSpec;
using emu::OptionValues;
using emu::Scenario;
using emu::VariantSpec;

// The built-in catalogue: ring, pingpong, tile-reduce, gemm, blockwise-fp8,
// tmem-coresident, persistent-gemm.
const Catalogue& catalogue();
const Scenario* find_scenario(const std::string& name);

// The launch of the warp-specialized examples (gemm, blockwise-fp8):
// `clusters` clusters of `shape` (or of `cluster_size` CTAs along x), each
// CTA of kGemmWarps warps (epilogue x4, load, mma) with `smem_bytes` of
// shared memory.
emu::LaunchConfig warp_specialized_launch(std::uint32_t clusters, ClusterShape shape, std::size_t smem_bytes);
emu::LaunchConfig warp_specialized_launch(std::uint32_t clusters, std::uint32_t cluster_size, std::size_t smem_bytes);

// The scenarios defined in their own files.
Scenario make_gemm_scenario();
Scenario make_blockwise_fp8_scenario();
Scenario make_tile_reduce_scenario();
Scenario make_tmem_coresident_scenario();
Scenario make_persistent_gemm_scenario();
Scenario make_pingpong_scenario();

}  // namespace wspipe::examples
