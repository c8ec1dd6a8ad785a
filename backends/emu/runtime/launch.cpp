// Launch validation: what cudaLaunchKernelEx would refuse, refused before
// anything runs (BadLaunch).
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/util.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>

namespace wspipe::emu::detail {

// dimension at least 1, at most 8 CTAs (the portable maximum), or 16 with
// cudaFuncAttributeNonPortableClusterSizeAllowed (CUDA Programming Guide,
// "Thread Block Clusters"; sm_100 supports 16).
namespace {
ClusterShape checked_cluster_shape(const LaunchConfig& launch) {
  const ClusterShape shape = launch.cluster_shape.value_or(ClusterShape{launch.cluster_size, 1, 1});
  std::string m;
  auto dims = [&] {
    m.append(std::to_string(shape.x)).append("x").append(std::to_string(shape.y)).append("x")
        .append(std::to_string(shape.z));
  };
  if (launch.cluster_shape && launch.cluster_size != 1 && launch.cluster_size != shape.size()) {
    m = "cluster_size ";
    m.append(std::to_string(launch.cluster_size)).append(" disagrees with cluster_shape ");
    dims();
    m.append(" (").append(std::to_string(shape.size())).append(" CTAs): set one of them");
    throw BadLaunch(m);
  }
  const std::uint64_t size = std::uint64_t{shape.x} * shape.y * shape.z;
  if (shape.x == 0 || shape.y == 0 || shape.z == 0 || size > ClusterShape::kMax) {
    m = launch.cluster_shape ? "cluster_shape " : "cluster_size ";
    if (launch.cluster_shape) {
      dims();
    } else {
      m.append(std::to_string(launch.cluster_size));
    }
    m.append(": a cluster has every dimension at least 1 and at most 16 CTAs in all");
    throw BadLaunch(m);
  }
  if (size > ClusterShape::kMaxPortable && !launch.non_portable_cluster_size) {
    m = "a cluster of ";
    m.append(std::to_string(size))
        .append(" CTAs is beyond the portable 8: set LaunchConfig::non_portable_cluster_size (CUDA: "
                "cudaFuncAttributeNonPortableClusterSizeAllowed) to launch up to 16");
    throw BadLaunch(m);
  }
  return shape;
}
}  // namespace

// Co-resident CTAs (LaunchConfig::ctas_per_sm). sm_100's per-SM limits
// (CUDA C++ Programming Guide, technical specifications for compute
// capability 10.0): at most 32 resident CTAs and 64 resident warps; 228 KiB
// of shared memory, of which 1 KiB per CTA is reserved for the system, so
// one CTA gets at most 227 KiB. Tensor Memory is not a launch limit: it is
// allocated at run time, and tcgen05.alloc blocks until columns are free.
void World::check_coresidency(const LaunchConfig& launch) {
  constexpr std::uint32_t kMaxCtasPerSm = 32, kMaxWarpsPerSm = 64;
  constexpr std::size_t kSmemPerSm = 228 * 1024, kSmemReservedPerCta = 1024;
  const std::uint32_t per = launch.ctas_per_sm;
  if (per < 1 || per > kMaxCtasPerSm)
    throw BadLaunch("ctas_per_sm must be in [1, 32] (sm_100: at most 32 resident CTAs per SM), got " +
                    std::to_string(per));
  if (std::size_t{per} * launch.warps_per_cta > kMaxWarpsPerSm) {
    std::string msg = "ctas_per_sm ";
    msg.append(std::to_string(per))
        .append(" CTAs of ").append(std::to_string(launch.warps_per_cta))
        .append(" warps do not fit one SM: sm_100 holds at most 64 resident warps per SM");
    throw BadLaunch(msg);
  }
  const std::size_t need = std::size_t{per} * (launch.smem_bytes + kSmemReservedPerCta);
  if (need > kSmemPerSm) {
    std::string msg = "ctas_per_sm ";
    msg.append(std::to_string(per))
        .append(" CTAs of smem_bytes ").append(std::to_string(launch.smem_bytes)).append(" need ")
        .append(std::to_string(need))
        .append(" bytes of shared memory with the 1 KiB the system reserves per CTA; an sm_100 SM has 228 KiB (")
        .append(std::to_string(kSmemPerSm)).append(" bytes), at most 227 KiB for one CTA");
    throw BadLaunch(msg);
  }
}

// The kernel's shared storage must fit the launch's shared memory: a
// launch whose smem_bytes is smaller than the storage the kernel places
// there (or asks an alignment above the 1024 bytes shared memory is
// aligned to) cannot run; on the GPU, the kernel would read and write past
// its CTA's allocation. Reported as a violation, so that a user's test
// fails with the sizes, and the warps that go on while the run is torn down
// get storage of their own, as large as they asked, instead of the CTA's.
void* World::shared_storage(std::size_t size, std::size_t align, const SourceLoc& loc) {
  Warp& w = warp();
  const Cta& c = ctas_[w.cta];
  if (size <= c.smem_bytes && align <= 1024) return c.smem;
  if (!stopping_ && !killing_ && !in_lane_) {
    std::string m = "the kernel's shared storage needs ";
    m.append(std::to_string(size)).append(" bytes");
    if (align > 1024) m.append(" aligned to ").append(std::to_string(align));
    m.append(" but the launch gives each CTA ").append(std::to_string(c.smem_bytes))
        .append(" bytes of shared memory (LaunchConfig::smem_bytes")
        .append(align > 1024 ? ", aligned to 1024)" : ")")
        .append(": set smem_bytes to at least sizeof the storage");
    fail(w, "launch.smem-too-small", cta_label(w.cta), std::move(m), loc);
  }
  const std::size_t a = std::max<std::size_t>(align, alignof(std::max_align_t));
  auto* p = static_cast<std::byte*>(::operator new(std::max<std::size_t>(size, 1), std::align_val_t{a}));
  std::memset(p, 0, size);
  overflow_.emplace_back(p, a);
  return p;
}

World::Overflow::~Overflow() {
  if (p != nullptr) ::operator delete(p, std::align_val_t{align});
}

}  // namespace wspipe::emu::detail

namespace wspipe::emu {

LaunchConfig checked_launch(const LaunchConfig& in) {
  LaunchConfig launch = in;
  launch.cluster_shape = detail::checked_cluster_shape(in);
  launch.cluster_size = launch.cluster_shape->size();
  if (launch.num_clusters < 1 || launch.num_clusters > 1024)
    throw BadLaunch("num_clusters must be in [1, 1024], got " + std::to_string(launch.num_clusters));
  if (launch.warps_per_cta < 1 || launch.warps_per_cta > 32)
    throw BadLaunch("warps_per_cta must be in [1, 32], got " + std::to_string(launch.warps_per_cta));
  if (launch.smem_bytes > 228 * 1024)
    throw BadLaunch("smem_bytes " + std::to_string(launch.smem_bytes) + " exceeds 228 KiB per CTA");
  if (launch.max_active_clusters > launch.num_clusters) {
    std::string m = "max_active_clusters must be 0 (all) or in [1, num_clusters = ";
    m.append(std::to_string(launch.num_clusters)).append("], got ").append(std::to_string(launch.max_active_clusters));
    throw BadLaunch(m);
  }
  detail::World::check_coresidency(launch);
  return launch;
}

}  // namespace wspipe::emu
