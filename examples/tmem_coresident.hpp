// `tmem-coresident`: CTAs that share one SM's Tensor Memory (launched with
// several CTAs per SM). Each CTA needs two regions of `cols` columns, an
// accumulator and a staging buffer: it writes a pattern of its own into the
// accumulator, copies it through registers into the staging buffer, and
// checks what it reads back. Written once against the Backend.
//
// The 512 columns are the SM's, and tcgen05.alloc blocks until the columns
// it asks for are free (PTX "tcgen05.alloc"). The correct kernel takes both
// regions in one allocation, so a CTA never holds columns while it waits
// for more: co-resident CTAs at worst take turns. The broken variant
// allocates them in two steps, holding the first while it waits for the
// second: when each co-resident CTA has taken its first region and too few
// columns are left for any second one, every CTA waits for columns that
// only another waiting CTA can free. That happens under some schedules
// only; exploration finds them.
#pragma once

#include <cstdint>

#include "core/backend.hpp"
#include "core/tcgen05.hpp"

namespace wspipe::examples {

enum class CoresidentBug : std::uint8_t {
  none,
  two_step_alloc,  // the accumulator, then the staging buffer: holds one while waiting for the other
};

struct CoresidentStorage {
  std::uint32_t base[2];  // tcgen05.alloc's destinations
};

// The value lane `lane` of CTA `cta` writes into its accumulator.
WSPIPE_HD constexpr std::uint32_t coresident_word(std::uint32_t cta, std::uint32_t lane) {
  return (cta + 1) * 1000 + lane;
}

// One warp per CTA; `cols` a power of 2 in [32, 256].
template <Backend B>
WSPIPE_HD void tmem_coresident_kernel(std::uint32_t cols, CoresidentBug bug) {
  auto& s = B::template shared_storage<CoresidentStorage>();
  std::uint32_t acc = 0, staging = 0;
  if (bug == CoresidentBug::two_step_alloc) {
    B::template tmem_alloc<1>(&s.base[0], cols);
    B::template tmem_alloc<1>(&s.base[1], cols);  // blocks holding s.base[0]'s columns
    B::syncwarp();  // the allocating warp reads its own (weak) stores
    acc = s.base[0];
    staging = s.base[1];
  } else {
    B::template tmem_alloc<1>(&s.base[0], 2 * cols);  // both regions at once
    B::syncwarp();
    acc = s.base[0];
    staging = s.base[0] + cols;  // the column field of the address
  }
  // This CTA allocates nothing more: the right to allocate goes, so that the
  // next CTA can be placed on the SM.
  B::template tmem_relinquish<1>();

  const std::uint32_t cta = B::cluster_idx() * B::cluster_size() + B::cta_rank();
  typename B::template Frag<1> out;
  B::for_each_lane([&](std::uint32_t lane) { out.set(0, coresident_word(cta, lane)); });
  B::template tmem_store<TmemShape::s32x32b, 1>(acc, out);
  B::tmem_wait_store();
  auto mid = B::template tmem_load<TmemShape::s32x32b, 1>(acc);
  B::tmem_wait_load();
  B::template tmem_store<TmemShape::s32x32b, 1>(staging, mid);
  B::tmem_wait_store();
  auto in = B::template tmem_load<TmemShape::s32x32b, 1>(staging);
  B::tmem_wait_load();
  B::for_each_lane([&](std::uint32_t lane) {
    B::check(in.reg(0) == coresident_word(cta, lane), "tmem-coresident: staging buffer does not hold this CTA's words");
  });

  if (bug == CoresidentBug::two_step_alloc) {
    B::template tmem_dealloc<1>(staging, cols);
    B::template tmem_dealloc<1>(acc, cols);
  } else {
    B::template tmem_dealloc<1>(acc, 2 * cols);
  }
}

}  // namespace wspipe::examples
