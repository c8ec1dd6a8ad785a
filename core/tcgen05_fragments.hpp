// tcgen05.ld/st fragment layouts: which TMEM cell each (thread, register) of
// a warp's access holds (PTX "Matrix fragments for shape ..."). Included by
// tcgen05.hpp.
#pragma once

namespace wspipe {

// Columns one repetition of a shape covers (its bits / 32).
WSPIPE_HD constexpr std::uint32_t tmem_shape_cols(TmemShape s) {
  switch (s) {
    case TmemShape::s16x64b: return 2;
    case TmemShape::s16x128b: return 4;
    case TmemShape::s16x256b: return 8;
    default: return 1;
  }
}

// Source: CUTLASS include/cute/atom/copy_traits_sm100.hpp, the DstLayout of
// Copy_Traits<SM100_TMEM_LOAD_{32dp32b,16dp64b,16dp128b,16dp256b,16dp32b}Nx>
// (the PTX figures are images). Each maps (thread, register bit) to datapath
// lane * bits-per-lane + bit; read back as lane and 32-bit column, per
// repetition:
//   32x32b    thread t: lane t
//   16x64b    thread t: lane t/4 + 8*(t%2), column (t/2)%2  (threads 4i, 4i+2
//             share lane i, 4i+1 and 4i+3 lane i+8)
//   16x128b   register r: lane t/4 + 8*r, column t%4
//   16x256b   register r: lane t/4 + 8*(r/2), column 2*(t%4) + r%2
//   16x32bx2  lane t%16; threads 16-31 read the second access, immHalfSplitoff
//             columns further (CUTLASS's copy_sm100.hpp passes .num)
// Repetitions (.num) come after a shape's own registers and advance along the
// columns by the shape's width (CUTLASS's repeat mode; Triton's
// TensorMemoryToLLVM tiles the same way for 32x32b, 16x256b and 16x32bx2).
WSPIPE_HD constexpr TmemCell tmem_frag_cell(TmemShape s, std::uint32_t num, std::uint32_t thread, std::uint32_t reg,
                                            std::uint32_t half_split) {
  (void)num;
  const std::uint32_t per = tmem_regs_per_rep(s);
  const std::uint32_t rep = reg / per;
  const std::uint32_t r = reg % per;
  const std::uint32_t base = rep * tmem_shape_cols(s);
  switch (s) {
    case TmemShape::s32x32b: return {thread, base};
    case TmemShape::s16x64b: return {thread / 4 + 8 * (thread % 2), base + (thread / 2) % 2};
    case TmemShape::s16x128b: return {thread / 4 + 8 * r, base + thread % 4};
    case TmemShape::s16x256b: return {thread / 4 + 8 * (r / 2), base + 2 * (thread % 4) + r % 2};
    case TmemShape::s16x32bx2: return {thread % 16, base + (thread >= 16 ? half_split : 0)};
  }
  return {0, 0};
}

}  // namespace wspipe
